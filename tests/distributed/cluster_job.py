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


def query(source: DataFrameSource[Reading]) -> Stream[Stats]:
    settings = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(50, timedelta(seconds=1), True), policy=AdvanceTimePolicy.DROP
    )
    readings = Stream.create("readings", source, EventShape.POINT, settings)
    return (
        readings.where(lambda r: r.value % 7 != 0)
        .group_by(lambda r: r.device)
        .tumbling(timedelta(seconds=30))
        .aggregate(lambda d, w: Stats(device=d, n=w.count(), total=w.sum(lambda r: r.value), label=udf(label, str)(d)))
    )


def main() -> None:
    spark = spark_session(master="local-cluster[2,1,1024]", spark_executor_memory="1g")
    rows = [(i, i % 5, (i * 37) % 101, (i * 1_000_000) - ((i * 7919) % 13) * 1_000_000) for i in range(2000)]
    df = spark.createDataFrame(rows, "seq long, device long, value long, t long").repartition(3)
    source = DataFrameSource(df, Reading, start="t", order="seq", time_origin=T0)
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

    print(json.dumps({"cluster": dump(on_cluster), "memory": dump(in_memory), "executor_pids": pids, "driver_pid": os.getpid(), "master": spark.sparkContext.master}))
    spark.stop()


if __name__ == "__main__":
    sys.exit(main())
