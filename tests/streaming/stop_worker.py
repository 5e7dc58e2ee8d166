"""``LiveQuery.stop()`` while a batch runs a Spark job, in a process of its own so that the
test sees what the JVM prints (tests/streaming/test_stop.py).

``python -m tests.streaming.stop_worker FOLDER``: a live query over FOLDER/in with a
``CallbackSink`` whose callback, in batch 1, runs a Spark job of a few seconds; the main
thread calls ``stop()`` once that job has started, then restarts the query on the same
checkpoint, flushes it, and prints ``committed <batch> <items>``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from tempo.sources import ParquetSource
from tests.streaming.test_live_spark import Reading, _counts, _rows, _write


def main() -> None:
    import tempo.spark
    from tempo.spark.streaming import CallbackSink, ParquetSink, StreamingExecutor, read_committed

    folder = Path(sys.argv[1])
    spark = tempo.spark.spark_session(spark_sql_shuffle_partitions="1")
    rows = _rows(40, seed=8)
    _write(folder / "in", 0, rows[:20])
    source = ParquetSource(str(folder / "in"), Reading, start="ts", order="seq")
    in_job = threading.Event()

    def on_batch(events: Any, rejections: Any, batch: int) -> None:
        if batch == 1:
            in_job.set()
            spark.range(0, 400_000_000, numPartitions=2).selectExpr("sum(id * 7 % 13)").collect()  # a few seconds

    live = StreamingExecutor(spark, str(folder / "ck")).start(_counts(source, flush=True), CallbackSink(on_batch))
    live.process_all_available()
    _write(folder / "in", 1, rows[20:])
    in_job.wait(120)
    live.stop()
    print(f"stopped after batch {live.last_committed_batch}", flush=True)
    again = StreamingExecutor(spark, str(folder / "ck")).start(_counts(source, flush=True), ParquetSink(str(folder / "out")))
    again.flush()
    again.stop()
    print(f"committed {again.last_committed_batch} {read_committed(str(folder / 'out')).num_rows}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
