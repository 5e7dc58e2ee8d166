"""A tempo job on a Spark master with separate executor processes (run by test_distributed.py).

Runs one query with a table source (so the Spark ingress runs on the executors), a
grouped window, a join and a ``tempo.udf`` (Python shipped to the executors), on
``local-cluster[2,1,1024]``, and prints the result next to the in-memory executor's.
"""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventShape,
    InMemoryExecutor,
    Stream,
    udf,
)
from tempo.spark.sources import DataFrameSource
from tempo.spark import SparkExecutor, spark_session

T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


@attrs.frozen
class Reading:
    device: int
    value: int


@attrs.frozen
class Stats:
    device: int
    n: int
    total: int
    label: str


def label(device: int) -> str:
    return f"device-{device}"


def query(source: Any) -> Stream[Stats]:
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(50, timedelta(seconds=1), True), policy=AdvanceTimePolicy.DROP)
    readings = Stream.create("readings", source, EventShape.POINT, settings)
    return (
        readings.where(lambda r: r.value % 7 != 0)
        .group_by(lambda r: r.device)
        .tumbling(timedelta(seconds=30))
        .aggregate(lambda d, w: Stats(device=d, n=w.count(), total=w.sum(lambda r: r.value), label=udf(label, str)(d)))
    )


def live_run(spark: Any, rows: list[tuple[int, int, int, int]]) -> tuple[list[str], list[str]]:
    """The same query live over a directory receiving two Parquet files (read by the
    cluster's executors), flushed at the end: its committed output, and the in-memory
    executor's over the same rows."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tempo.sources import ArrowSource, ParquetSource
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed, released_items

    schema = pa.schema([("seq", pa.int64()), ("device", pa.int64()), ("value", pa.int64()), ("t", pa.int64())])
    work = tempfile.mkdtemp()
    landing = os.path.join(work, "in")
    os.makedirs(landing)
    cuts = [0, 1000, len(rows)]

    def write(index: int) -> None:
        part = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows[cuts[index] : cuts[index + 1]]], schema=schema)
        tmp = os.path.join(work, f".{index}.tmp")
        pq.write_table(part, tmp)
        os.utime(tmp, (1_700_000_000 + index, 1_700_000_000 + index))
        os.replace(tmp, os.path.join(landing, f"part-{index}.parquet"))

    write(0)
    source = ParquetSource(landing, Reading, start="t", order="seq", time_origin=T0, time_unit="us")
    started = StreamingExecutor(spark, os.path.join(work, "ck")).start(query(source), ParquetSink(os.path.join(work, "out")))
    for index in (1,):
        write(index)
        started.process_all_available()
    started.flush()
    committed = released_items(read_committed(os.path.join(work, "out")).drop_columns(["tempo_batch"]), Stats)
    whole = pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)
    expected = InMemoryExecutor().run(query(ArrowSource(whole, Reading, start="t", order="seq", time_origin=T0, time_unit="us")))
    return [repr(i) for i in committed], [repr(i) for i in expected.raw]


def main() -> None:
    spark = spark_session(master="local-cluster[2,1,1024]", spark_executor_memory="1g")
    rows = [(i, i % 5, (i * 37) % 101, (i * 1_000_000) - ((i * 7919) % 13) * 1_000_000) for i in range(2000)]
    df = spark.createDataFrame(rows, "seq long, device long, value long, t long").repartition(3)
    source = DataFrameSource(df, Reading, start="t", order="seq", time_origin=T0, time_unit="us")
    on_cluster = SparkExecutor(spark, local_items=0).run(query(source))
    in_memory = InMemoryExecutor().run(query(source))
    pids = spark.sparkContext.parallelize(range(8), 8).map(lambda _: os.getpid()).distinct().collect()

    def dump(result: object) -> dict[str, object]:
        r = result
        return {
            "events": sorted([e.start.isoformat(), e.end.isoformat(), repr(e.payload)] for e in r.events),  # type: ignore[attr-defined]
            "ctis": [c.isoformat() for c in r.ctis],  # type: ignore[attr-defined]
            "metrics": {k: attrs.asdict(v) for k, v in r.metrics.items()},  # type: ignore[attr-defined]
        }

    live, live_memory = live_run(spark, rows)
    print(
        json.dumps(
            {
                "cluster": dump(on_cluster),
                "memory": dump(in_memory),
                "executor_pids": pids,
                "driver_pid": os.getpid(),
                "master": spark.sparkContext.master,
                "live": live,
                "live_memory": live_memory,
            }
        )
    )
    spark.stop()


if __name__ == "__main__":
    sys.exit(main())
