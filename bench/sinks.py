"""What a live query's sink costs per batch: ParquetSink, DeltaSink (a local table, by
delta-rs: ``delta``; by Spark's Delta, as a Hadoop path is written: ``delta-spark``), and
KafkaSink with transactions (``kafka-txn``) and without (``kafka``), each given the same
batches of released rows.

    python bench/sinks.py [--rows 1000,10000,100000] [--batches 10] [--bootstrap HOST:PORT] [--sinks parquet,delta,...]

A batch is W2's output shape (an interval per key and window: key, count, sum) of ``rows``
rows, built once as the released table a live query hands its sink
(``tempo.result.released_table``). Each sink writes ``--batches`` batches, numbered 0, 1, ...,
as the live executor calls it: ``write`` (before tempo's commit record) then ``publish``
(after it); the time is the two together, per batch, and the table shows the median and
the rows written per second. Batch 0 is timed apart (a Delta table is created by it; a
KafkaSink opens its producer and topics). Each sink gets a fresh path or topic per batch
size. One local Spark session (``local[2]``, Kafka's connector and Delta's jars), and a Kafka
broker started in a temporary folder unless ``--bootstrap`` names one. See bench/README.md,
"Sinks".
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@attrs.frozen
class Window:
    key: int
    n: int
    total: float


def released(rows: int) -> Any:
    """``rows`` released intervals of W2's shape, as a live query's sink receives them."""
    from tempo.events import Interval
    from tempo.result import released_table

    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    minute = timedelta(seconds=60)
    items = [Interval(t0 + (i // 1000) * minute, t0 + (i // 1000 + 1) * minute, Window(i % 1000, 3 + i % 7, 1.5 * i)) for i in range(rows)]
    return released_table(items, Window)


def rejected() -> Any:
    from tempo.result import Result

    return Result([], [], {}, [], [], {}, None, Window, {"events": Window}).rejections_table()


def time_sink(spark: Any, sink: Any, table: Any, none: Any, batches: int) -> tuple[float, list[float]]:
    """(batch 0's seconds, the later batches' seconds)."""
    times = []
    for batch in range(batches + 1):
        began = time.perf_counter()
        sink.write(spark, batch, table, none)
        sink.publish(batch)
        times.append(time.perf_counter() - began)
    return times[0], times[1:]


def spark_delta_sink() -> type:
    """DeltaSink writing through Spark's Delta, as it does a Hadoop path (``s3a://``), for a
    local table too."""
    from tempo.spark.streaming import DeltaSink

    class SparkDeltaSink(DeltaSink):
        def _delta_rs_path(self, path: str) -> str | None:
            return None

    return SparkDeltaSink


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", default="1000,10000,100000")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--bootstrap", default=None)
    parser.add_argument("--sinks", default="parquet,delta,delta-spark,kafka-txn,kafka")
    args = parser.parse_args()

    import tempo.spark
    from tempo.spark.streaming import DeltaSink, KafkaSink, ParquetSink
    from tempo.spark.streaming.kafka_broker import KafkaBroker

    work = Path(tempfile.mkdtemp(prefix="tempo-sinks-"))
    broker = None
    bootstrap = args.bootstrap
    chosen = args.sinks.split(",")
    if bootstrap is None and any(s.startswith("kafka") for s in chosen):
        broker = KafkaBroker(work / "kafka")
        broker.start()
        bootstrap = broker.bootstrap
    spark = tempo.spark.spark_session(spark_sql_shuffle_partitions="4", connectors=True)
    SparkDeltaSink = spark_delta_sink()
    none = rejected()

    def make(kind: str, tag: str) -> Any:
        if kind == "parquet":
            return ParquetSink(str(work / f"parquet-{tag}"))
        if kind == "delta":
            return DeltaSink(str(work / f"delta-{tag}"))
        if kind == "delta-spark":
            return SparkDeltaSink(str(work / f"delta-spark-{tag}"))
        topic = f"sinks-{tag}-{uuid.uuid4().hex[:6]}"
        return KafkaSink(bootstrap or "", topic, key="key", partitions=4, transactions=kind == "kafka-txn")

    print(f"# {platform.node()}, Python {platform.python_version()}, Spark {spark.version}, {args.batches} batches per sink and size")
    print("| rows a batch | sink | batch 0 s | median batch s | rows/s |")
    print("|---:|---|---:|---:|---:|")
    try:
        for rows in (int(r) for r in args.rows.split(",")):
            table = released(rows)
            for kind in chosen:
                first, later = time_sink(spark, make(kind, f"{kind}-{rows}"), table, none, args.batches)
                median = statistics.median(later)
                print(f"| {rows:,} | {kind} | {first:.3f} | {median:.3f} | {rows / median:,.0f} |", flush=True)
    finally:
        spark.stop()
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
