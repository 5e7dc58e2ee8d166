"""A join below a window as a live query: tempo's two engines side by side.

    python bench/streaming_join.py [--n 1000000] [--batch 250000] [--engines driver,spark]

Two inputs on the shared data set (``../shared/bench/``): ``events`` (its first N events,
points) and ``sensors`` (events N .. 2N put onto the same times, each lasting 5 s, keys and
values their own), both with a CTI after every 1000th event 5 s behind it, late rows
dropped. The query joins them on key and sums ``value * other value`` per key and tumbling
60 s window (each event meets about five of the other input). Every batch is a Parquet file
per input ending with a heartbeat at the clock, as the Redis source delivers them, so a
batch goes whole through the arrival frontier; each run of the query
(``trigger={"availableNow": True}``, restarted on its checkpoint) takes one batch, and the
windows still open are released by ``flush()`` at the end.

Per engine the table shows the engine's median time per batch (``BatchProgress.seconds``,
without the first batch, which pays for Spark's code generation), the events per second
that makes (events of both inputs), and the checksum of the released windows (count,
Σ n, Σ total, Σ total * key), which must be the same for every engine. No hand-written
Structured Streaming query is beside it: a stream-stream join there needs watermarks and
time bounds on both sides and cannot give these results (docs/streaming.md).

``--live`` runs each engine as one live query instead, the way ``bench/streaming.py`` does
(the engine ``cluster`` needs it: its progress is its last work query's, and an
``availableNow`` run would start its three Spark queries for every batch): both files of a
batch are landed, then ``process_all_available`` waits until the batch's results are
committed, and the table shows the median of that wall time (the batch's latency, the first
batch left out) and the events per second it makes. A batch's two files may then reach the
time query in one micro-batch or two; the results are the same. With ``--live`` the engine
``handwritten`` is the same join written by hand for Structured Streaming, measured the same
way: each input with a watermark 5 s behind its event time, a stream-stream inner join on
the key and ``sensor.ts <= event.ts < sensor.ts + 5 s``, then ``groupBy(key, window(event.ts,
60 s))`` count and sum of the products, append mode, Spark's Parquet sink; its end is two
sentinel files per input a day later, as ``bench/streaming.py``'s. Its watermarks drop other
late rows than tempo's CTIs (and keep each side's rows as long as the join's bound needs),
so its checksum is its own: shown, not compared.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.run import default_data_dir, ensure_data, make_spark  # noqa: E402
from bench.tempo_queries import ORIGIN, ORIGIN_US, Event, Tumble  # noqa: E402

SPAN = 5_000_000
"""How long a ``sensors`` event lasts (5 s, in microseconds)."""
DELAY = timedelta(seconds=5)


@attrs.frozen
class Sensor:
    key: int
    other: float


@attrs.frozen
class Product:
    key: int
    product: float


def files(data: Path, n: int, batch: int) -> list[tuple[Any, Any]]:
    """Per batch, the rows of each input: (events, sensors), each ending with a heartbeat."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(data)
    if table.num_rows < 2 * n:
        raise SystemExit(f"--n {n}: the data set has {table.num_rows} events, {2 * n} are needed")
    out = []
    for at in range(0, n // batch * batch, batch):
        part, other = table.slice(at, batch), table.slice(n + at, batch)
        seq = part.column("seq").to_numpy()
        times, arrivals = part.column("event_time").to_numpy(), part.column("arrival_time").to_numpy()
        clock = int(arrivals[-1]) + 1
        beat = {"seq": [int(seq[-1]) * 2 + 1], "kind": ["heartbeat"], "start": [clock], "arrival": [clock], "key": [0]}
        events = pa.table(
            {
                "seq": seq * 2,
                "kind": ["point"] * len(seq),
                "start": times,
                "arrival": arrivals,
                "key": part.column("key").cast(pa.int64()),
                "value": part.column("value"),
            }
        )
        sensors = pa.table(
            {
                "seq": seq * 2,
                "kind": ["point"] * len(seq),
                "start": times,
                "arrival": arrivals,
                "key": other.column("key").cast(pa.int64()),
                "other": other.column("value"),
            }
        )
        out.append(
            (
                pa.concat_tables([events, pa.table(beat | {"value": [0.0]}, schema=events.schema)]),
                pa.concat_tables([sensors, pa.table(beat | {"other": [0.0]}, schema=sensors.schema)]),
            )
        )
    return out


def query(events: str, sensors: str) -> Any:
    from tempo import AdvanceTimeGenerationSettings, AdvanceTimePolicy, AdvanceTimeSettings, EventShape, Stream
    from tempo.sources import ParquetSource

    settings = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(frequency=1000, delay=DELAY, advance_to_infinity_on_shutdown=True),
        policy=AdvanceTimePolicy.DROP,
    )

    def source(path: str, payload: type) -> Any:
        return ParquetSource(path, payload, start="start", kind="kind", order="seq", arrival="arrival", time_origin=ORIGIN, time_unit="us")

    e = Stream.create("events", source(events, Event), EventShape.POINT, settings)
    s = Stream.create("sensors", source(sensors, Sensor), EventShape.POINT, settings).alter_event_duration(timedelta(microseconds=SPAN))
    return (
        e.join(s, lambda a, b: a.key == b.key, lambda a, b: Product(key=a.key, product=a.value * b.other))
        .group_by(lambda p: p.key)
        .tumbling(timedelta(seconds=60))
        .aggregate(lambda k, w: Tumble(key=k, n=w.count(), total=w.sum(lambda p: p.product)))
    )


def land(work: Path, folders: tuple[Path, Path], i: int, tables: tuple[Any, Any]) -> None:
    """Batch ``i``'s file of each input into its folder, written aside and moved in whole."""
    import pyarrow.parquet as pq

    for folder, table in zip(folders, tables):
        pq.write_table(table, work / f".landing-{i}.parquet")
        os.rename(work / f".landing-{i}.parquet", folder / f"part-{i:05d}.parquet")


def run(spark: Any, engine: str, batches: list[tuple[Any, Any]], work: Path) -> dict[str, Any]:
    from tempo.spark.streaming import ParquetSink, StreamingExecutor

    folders = work / "events", work / "sensors"
    for folder in folders:
        folder.mkdir(parents=True)
    seconds, rows, engines = [], [], []
    live = None
    for i, batch in enumerate(batches):
        land(work, folders, i, batch)
        executor = StreamingExecutor(spark, str(work / "checkpoint"), trigger={"availableNow": True}, engine=engine, bulk_rows=1)
        live = executor.start(query(*map(str, folders)), ParquetSink(str(work / "out")))
        live.await_termination()
        for p in live.progress:
            seconds.append(p.seconds)
            rows.append(sum(p.rows_in.values()))
            engines.append(p.engine)
    began = time.perf_counter()
    live = StreamingExecutor(spark, str(work / "checkpoint"), engine=engine).start(
        query(*map(str, folders)), ParquetSink(str(work / "out"))
    )
    live.flush()
    end = time.perf_counter() - began
    return _summary(engine, engines, seconds, rows, end, _committed_windows(work))


def run_live(spark: Any, engine: str, batches: list[tuple[Any, Any]], work: Path) -> dict[str, Any]:
    """``run`` as one live query (``--live``): each batch's latency, its files landed to its
    results committed."""
    import pyarrow.parquet as pq

    from tempo.spark.streaming import ParquetSink, StreamingExecutor

    folders = work / "events", work / "sensors"
    for folder in folders:
        folder.mkdir(parents=True)
    for folder, table in zip(folders, batches[0]):  # a file of no rows: the schema
        pq.write_table(table.slice(0, 0), folder / "part-empty.parquet")
    live = StreamingExecutor(spark, str(work / "checkpoint"), engine=engine).start(
        query(*map(str, folders)), ParquetSink(str(work / "out"))
    )
    seconds, rows = [], []
    try:
        for i, batch in enumerate(batches):
            began = time.perf_counter()
            land(work, folders, i, batch)
            live.process_all_available()
            seconds.append(time.perf_counter() - began)
            rows.append(sum(table.num_rows for table in batch))
        began = time.perf_counter()
        live.flush()
        end = time.perf_counter() - began
        engines = sorted({p.engine for p in live.progress})
    finally:
        live.stop()
    return _summary(engine, engines, seconds, rows, end, _committed_windows(work))


def run_handwritten(spark: Any, batches: list[tuple[Any, Any]], work: Path) -> dict[str, Any]:
    """The join written by hand for Structured Streaming (``--live``), each batch's latency
    measured as ``run_live`` measures tempo's."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    folders = work / "events", work / "sensors"
    for folder, table in zip(folders, batches[0]):
        folder.mkdir(parents=True)
        pq.write_table(table.slice(0, 0), folder / "part-empty.parquet")

    def side(folder: Path, value: str, prefix: str) -> Any:
        schema = spark.read.parquet(str(folder / "part-empty.parquet")).schema
        rows = spark.readStream.schema(schema).option("maxFileAge", "36500d").parquet(str(folder)).where(F.col("kind") == "point")
        timed = rows.select(
            F.col("key").alias(f"{prefix}key"), F.col(value), F.timestamp_micros(F.col("start") + F.lit(ORIGIN_US)).alias(f"{prefix}ts")
        )
        return timed.withWatermark(f"{prefix}ts", f"{DELAY.seconds} seconds")

    events, sensors = side(folders[0], "value", ""), side(folders[1], "other", "s_")
    bound = f"s_ts <= ts AND ts < s_ts + INTERVAL {SPAN // 1_000_000} SECONDS"
    joined = events.join(sensors, (F.col("key") == F.col("s_key")) & F.expr(bound))
    windows = (
        joined.groupBy("key", F.window("ts", "60 seconds"))
        .agg(F.count(F.lit(1)).alias("n"), F.sum(F.col("value") * F.col("other")).alias("total"))
        .select("key", "n", "total", F.col("window.start").alias("start"))
    )
    out = work / "out"
    query = (
        windows.writeStream.outputMode("append")
        .format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(work / "checkpoint"))
        .start()
    )
    seconds, rows = [], []
    try:
        query.processAllAvailable()
        for i, batch in enumerate(batches):
            began = time.perf_counter()
            land(work, folders, i, batch)
            query.processAllAvailable()
            seconds.append(time.perf_counter() - began)
            rows.append(sum(table.num_rows for table in batch))
        began = time.perf_counter()
        for day in (1, 2):  # the first moves the watermarks past every window, the batch of the second emits them
            sentinels = []
            for table in batches[-1]:
                last = table.slice(table.num_rows - 2, 1)  # (the last row is the heartbeat)
                moved = pc.add(last.column("start"), pa.scalar(day * 86_400_000_000, pa.int64()))
                sentinels.append(
                    last.set_column(last.schema.get_field_index("start"), "start", moved).set_column(
                        last.schema.get_field_index("key"), "key", pa.array([-1], pa.int64())
                    )
                )
            land(work, folders, len(batches) + day, (sentinels[0], sentinels[1]))
            query.processAllAvailable()
        end = time.perf_counter() - began
    finally:
        query.stop()
    windows = spark.read.parquet(str(out)).where(F.col("key") >= 0).select("key", "n", "total").toArrow()
    return _summary("handwritten", ["spark"], seconds, rows, end, windows)


def _committed_windows(work: Path) -> Any:
    """The windows a tempo run committed (not its CTIs)."""
    import pyarrow.compute as pc

    from tempo.spark.streaming import read_committed

    table = read_committed(str(work / "out"))
    return table.filter(pc.equal(table.column("tempo_kind"), "interval"))


def _summary(engine: str, engines: list[str], seconds: list[float], rows: list[int], end: float, kept: Any) -> dict[str, Any]:
    """A run's figures and the checksum of its windows ``kept`` (a table of key, n, total)."""
    n, total, key = (kept.column(c).to_numpy() for c in ("n", "total", "key"))
    warm = seconds[1:] or seconds
    return {
        "engine": engine,
        "engines": engines,
        "batch_seconds": seconds,
        "rows": rows,
        "end_seconds": end,
        "median_batch": statistics.median(warm),
        "events_per_s": sum(rows[1:] or rows) / sum(warm),
        "checksum": (kept.num_rows, int(n.sum()), float(total.sum()), float((total * key).sum())),
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="events per input (default 1,000,000; the data set needs 2N)")
    ap.add_argument("--batch", type=int, default=250_000, help="events per input and batch (default 250,000)")
    ap.add_argument("--engines", default="driver,spark")
    ap.add_argument("--data-dir", type=Path, default=default_data_dir())
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--live", action="store_true", help="each engine as one live query, each batch's latency (the cluster engine needs it)")
    args = ap.parse_args(argv)
    data = ensure_data(2_000_000 if 2 * args.n <= 2_000_000 else 10_000_000, args.data_dir)
    spark = make_spark(args.master, 4, "8g", data.events)
    work = Path(tempfile.mkdtemp(prefix="tempo-bench-join-"))
    try:
        batches = files(data.events, args.n, args.batch)
        results = [
            run_handwritten(spark, batches, work / engine)
            if engine == "handwritten" and args.live
            else (run_live if args.live else run)(spark, engine, batches, work / engine)
            for engine in args.engines.split(",")
        ]
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{len(batches)} batches of {args.batch:,} events per input ({2 * args.batch:,} rows), {args.master}")
    print(
        f"{'engine':8} {'median latency' if args.live else 'median batch':>13} {'events/s':>10} {'flush':>7}  checksum (windows, n, total, total*key)"
    )
    for r in results:
        print(f"{r['engine']:8} {r['median_batch']:12.2f}s {r['events_per_s'] / 1e3:9.0f}k {r['end_seconds']:6.2f}s  {r['checksum']}")
    same = len({r["checksum"] for r in results if r["engine"] != "handwritten"}) <= 1  # (Spark's watermarks drop other rows)
    print("checksums:", "the same" if same else "DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
