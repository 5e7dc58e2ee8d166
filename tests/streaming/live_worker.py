"""A live query in a process of its own, for tests/streaming/test_kill.py to kill -9 and restart.

``python -m tests.streaming.live_worker INPUT CHECKPOINT OUTPUT [--until STOP] [--flush] [--engine E]``
starts a local Spark session, starts the counts query of test_live_spark.py over the
Parquet files of the directory INPUT (one file a micro-batch, in modification-time order,
so that batch ids are the same in every run) into ``ParquetSink(OUTPUT)`` on CHECKPOINT,
and processes what INPUT holds. ``--until STOP``: keep processing new files until the file
STOP exists, then process what is left. ``--flush``: then end the inputs (``flush``).
``--conf KEY=VALUE`` (repeated): a Spark setting of the session (s3a's, for a CHECKPOINT and
OUTPUT on S3). ``--master URL``: run on that cluster (a standalone master) instead of locally. ``--engine``: ``StreamingExecutor``'s engine (``spark``, ``vectorised``: every batch in bulk). ``--chain``: the counts then their sums per 30 s
(``_counts_per_half_minute``: two windows in sequence). ``--outer``: the readings left outer
joined with their device's readings above 50 of the 5 s before, then counted
(``_outer_counts``: a join with its anti-join, then a window). ``--around``: each reading
with its device's count in its 10 s window (``_counts_beside``: a window, then a join the
readings reach around it). ``--join LIMITS``:
the two-input query of test_live_spark.py instead (readings joined with the limits arriving
in the directory LIMITS, which import the readings' CTIs), merged at the arrival frontier.
The environment variable ``TEMPO_CRASH_AT`` (tempo.spark.streaming.executor) makes the
process kill itself at a phase of a batch. Exit status ``FLUSHED`` (3): the start was refused
(``CheckpointMismatchError``; in these tests: the query was flushed already, a crash came
after the flush committed).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from tempo.spark.sources import DataFrameSource
from tests.streaming.test_live_spark import Limit, Reading, _counts, _counts_beside, _counts_per_half_minute, _join, _outer_counts

SPARK_SCHEMA = "seq BIGINT, ts TIMESTAMP, arrived TIMESTAMP, device BIGINT, value DOUBLE"
"""The columns of the files test_live_spark._write writes."""
LIMITS_SCHEMA = "seq BIGINT, ts TIMESTAMP, end TIMESTAMP, arrived TIMESTAMP, device BIGINT, limit DOUBLE"
"""The columns of the limits files (test_kill.write_limits)."""

POLL_SECONDS = 0.2

FLUSHED = 3


def live_source(spark: Any, folder: str, arrival: str | None = None) -> DataFrameSource[Reading]:
    """The rows of the files arriving in ``folder``, one file a micro-batch."""
    df = spark.readStream.schema(SPARK_SCHEMA).option("maxFilesPerTrigger", 1).option("maxFileAge", "36500d").parquet(folder)
    return DataFrameSource(df, Reading, start="ts", order="seq", arrival=arrival)


def live_limits(spark: Any, folder: str) -> DataFrameSource[Limit]:
    """The limits arriving in ``folder``, one file a micro-batch."""
    df = spark.readStream.schema(LIMITS_SCHEMA).option("maxFilesPerTrigger", 1).option("maxFileAge", "36500d").parquet(folder)
    return DataFrameSource(df, Limit, start="ts", end="end", order="seq", arrival="arrived")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("input")
    parser.add_argument("checkpoint")
    parser.add_argument("output")
    parser.add_argument("--until", help="keep processing until this file exists")
    parser.add_argument("--flush", action="store_true", help="end the inputs at the end")
    parser.add_argument("--engine", default="auto", help="driver, vectorised, spark or auto")
    parser.add_argument("--join", help="the directory of the limits (the two-input query)")
    parser.add_argument("--chain", action="store_true", help="the counts, then their sums per 30 s (two windows in sequence)")
    parser.add_argument("--outer", action="store_true", help="the readings left outer joined with their device's recent high ones, counted")
    parser.add_argument("--around", action="store_true", help="each reading joined with its device's count in its 10 s window")
    parser.add_argument("--conf", action="append", default=[], help="a Spark setting KEY=VALUE")
    parser.add_argument("--master", help="Spark's master URL (default: local)")
    args = parser.parse_args()

    import tempo.spark
    from tempo.spark.streaming import CheckpointMismatchError, ParquetSink, StreamingExecutor

    conf = dict(setting.split("=", 1) for setting in args.conf)
    spark = tempo.spark.spark_session(
        args.master,
        spark_sql_shuffle_partitions="1",
        spark_driver_memory="1g",
        **{key.replace(".", "_"): value for key, value in conf.items()},
    )
    os.makedirs(args.input, exist_ok=True)
    try:
        if args.join:
            os.makedirs(args.join, exist_ok=True)
            query: Any = _join(live_source(spark, args.input, arrival="arrived"), live_limits(spark, args.join), flush=True)
        else:
            query = (
                _counts_per_half_minute if args.chain else _outer_counts if args.outer else _counts_beside if args.around else _counts
            )(
                live_source(spark, args.input),
                flush=True,
            )
        live = StreamingExecutor(spark, args.checkpoint, engine=args.engine).start(query, ParquetSink(args.output))
    except CheckpointMismatchError as refused:
        print(refused, flush=True)
        spark.stop()
        sys.exit(FLUSHED)
    try:
        if args.until:
            while not os.path.exists(args.until):
                live.process_all_available()
                time.sleep(POLL_SECONDS)
        live.process_all_available()
        if args.flush:
            live.flush()
    finally:
        live.stop()
        spark.stop()
    print(f"committed up to batch {live.last_committed_batch}", flush=True)


if __name__ == "__main__":
    main()
