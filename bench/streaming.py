"""W2 (or W5) as a live query: tempo's StreamingExecutor against hand-written Structured Streaming.

    python bench/streaming.py --n 2000000 [--batches 10000,100000,1000000] [--max-files 20]
                              [--engines tempo,handwritten] [--workload W2|W5]

The first N events of the shared data set (``../shared/bench/``) are cut into Parquet files
of one batch size each, written beforehand outside the watched directory. For each batch
size and engine (one after the other, in one Spark session) a fresh query watches an empty
directory, and the files are landed into it one at a time (an atomic rename, modification
times increasing): each file is landed when the previous one has been processed
(``processAllAvailable``), so every micro-batch reads exactly one file and its latency is
not queueing. Per engine and batch size the table shows:

* events/s: the streamed events / (from the first file landed to the last file processed);
* median latency: a file landed -> the query has processed and committed it
  (``processAllAvailable`` returned), and the engine's own median batch time (tempo:
  ``BatchProgress.seconds``, the driver's work; Spark: ``triggerExecution`` of the
  batches that read a file);
* the end: the time to release the windows still open after the last file (tempo:
  ``LiveQuery.flush``; Spark: two more files of one sentinel row, see ``Handwritten``);
* the checksum of the final output (W2's five values, WORKLOADS.md), exact against the
  published one when the whole data set was streamed, else against the other engine.

The engines do the same work: W2 (count and sum per key and tumbling 60 s window) with
windows released as event time passes. tempo: the query of ``bench/tempo_queries.py`` with
a CTI after every 1000th event 120 s behind it (``--ctis every-1000``); Spark: a watermark
120 s behind the largest event time. No event is later than 120 s, so neither drops a row
(the Spark row counts it dropped are shown) and the final windows are the same.
With ``--workload W5`` both run per-key sessions with a 5 s gap instead (tempo: W5 of
``bench/tempo_queries.py``; Spark: ``session_window``), checked by W5's checksum.
With ``--workload W2-hop`` tempo's engines run W2 and then each window through a second
tumbling 60 s window per key (``bench/tempo_queries.py``'s ``w2_hop``: W2's windows again,
checked by W2's checksum), which the cluster engine runs as two keyed nodes in sequence;
the hand-written query has no second node to run and is not run.
See bench/README.md, "Live queries".
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `import bench`, and tempo from this checkout

from bench.checksums import Checksum, differences, normalize, reference  # noqa: E402
from bench.run import RESULTS, default_data_dir, ensure_data, fmt_rate, make_spark  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ENGINES = ("tempo", "tempo-driver", "tempo-vectorised", "tempo-spark", "tempo-cluster", "handwritten")
"""``tempo``: ``StreamingExecutor``'s default engine choice (``auto``); ``tempo-driver`` /
``tempo-vectorised`` / ``tempo-spark``: every batch on that engine; ``tempo-cluster``: the
cluster engine (the windows' state on Spark's executors, docs/streaming.md)."""
DEFAULT_ENGINES = ("tempo", "handwritten")
ORIGIN_US = 1_704_067_200 * 1_000_000
"""2024-01-01T00:00:00Z in Unix microseconds: the data's event times are offsets from it."""
WATERMARK_DELAY = "120 seconds"
SENTINEL_KEY = -1
SENTINEL_AFTER_US = 86_400 * 1_000_000
"""The sentinel rows (Spark's end of input) lie a day after the last event."""


# ---- the files -------------------------------------------------------------------------------
@attrs.frozen
class Files:
    """One batch size's files, written beforehand, to be landed one at a time."""

    batch: int
    events: int
    paths: list[Path]
    sentinels: list[Path]
    """Spark's end of input: two files of one row with key -1, a day after the last event."""
    empty: Path
    """A file of no rows, landed before a query starts: tempo takes the schema from the
    directory's files."""


def write_files(events: Path, n: int, batch: int, max_files: int, folder: Path) -> Files:
    """The first ``min(n, batch * max_files)`` events (whole batches) as files of ``batch`` rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    count = min(n, batch * max_files) // batch * batch
    if count == 0:
        raise SystemExit(f"--n {n} is smaller than one batch of {batch}")
    table = pq.read_table(events).slice(0, count)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, offset in enumerate(range(0, count, batch)):
        p = folder / f"part-{i:05d}.parquet"
        pq.write_table(table.slice(offset, batch), p)
        paths.append(p)
    last_seq = pc.max(table.column("seq")).as_py()
    last_time = pc.max(table.column("event_time")).as_py() + SENTINEL_AFTER_US
    sentinels = []
    for j in range(2):
        row = pa.table(
            {
                "seq": pa.array([last_seq + 1 + j], pa.int64()),
                "key": pa.array([SENTINEL_KEY], pa.int32()),
                "event_time": pa.array([last_time + j], pa.int64()),
                "arrival_time": pa.array([last_time + j], pa.int64()),
                "value": pa.array([0.0], pa.float64()),
            }
        ).cast(table.schema)
        p = folder / f"sentinel-{j}.parquet"
        pq.write_table(row, p)
        sentinels.append(p)
    empty = folder / "empty.parquet"
    pq.write_table(table.slice(0, 0), empty)
    return Files(batch, count, paths, sentinels, empty)


class Lander:
    """Lands files into a watched directory: a copy renamed into place (Spark must never see
    half a file) with a modification time after the previous one's (Spark orders files by
    it, at millisecond resolution)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0
        folder.mkdir(parents=True, exist_ok=True)

    def land(self, source: Path) -> float:
        """Land a copy of ``source``; returns the time (``perf_counter``) it was in place."""
        tmp = self.folder.parent / f".{self.folder.name}-{self.count}.tmp"
        shutil.copyfile(source, tmp)
        stamp = 1_700_000_000 + self.count
        os.utime(tmp, (stamp, stamp))
        os.replace(tmp, self.folder / f"{self.count:05d}-{source.name}")
        self.count += 1
        return time.perf_counter()


# ---- the runs --------------------------------------------------------------------------------
@attrs.define
class Run:
    """One engine's run over one batch size's files."""

    engine: str
    batch: int
    events: int
    files: int = 0
    seconds: float = 0.0
    """First file landed -> last file processed."""
    latencies: list[float] = attrs.field(factory=list)
    """Per file: landed -> processed and committed."""
    engine_batch_seconds: list[float] = attrs.field(factory=list)
    """The engine's own time for each batch that read a file."""
    micro_batches: int = 0
    """Micro-batches the query ran while the files were streamed (Spark runs one without
    data after a batch that moved the watermark, to emit the windows it closed)."""
    end_seconds: float = 0.0
    dropped: int | None = None
    checksum: Checksum | None = None
    status: str = ""
    error: str | None = None

    @property
    def events_per_s(self) -> float | None:
        return self.events / self.seconds if self.seconds else None

    @property
    def median_latency(self) -> float | None:
        return statistics.median(self.latencies) if self.latencies else None

    @property
    def median_engine_batch(self) -> float | None:
        return statistics.median(self.engine_batch_seconds) if self.engine_batch_seconds else None


WORKLOAD = "W2"
"""The workload the runs compute (``--workload``): W2, W2-hop or W5."""


def window_checksum(df: DataFrame) -> Checksum:
    """The workload's checksum of a DataFrame of its results: W2's windows (``key``, ``n``,
    ``total``, ``tempo_start``), or W5's sessions (``key``, ``n``, ``total``, ``start``, ``end``)."""
    from bench.engines import _event_window_checksum, _window_checksum

    if WORKLOAD == "W5":
        return normalize("W5", _event_window_checksum(df, "sessions", ORIGIN_US))
    return normalize("W2", _window_checksum(df, with_count=True, origin_us=ORIGIN_US))


def stream_files(run: Run, files: Files, lander: Lander, process: Any) -> None:
    """Land the files one at a time, each when ``process()`` has processed the one before."""
    first = None
    for path in files.paths:
        landed = lander.land(path)
        first = landed if first is None else first
        process()
        done = time.perf_counter()
        run.latencies.append(done - landed)
        run.files += 1
    assert first is not None
    run.seconds = time.perf_counter() - first


def run_tempo(spark: SparkSession, files: Files, work: Path, name: str = "tempo") -> Run:
    """tempo's live query: ``StreamingExecutor`` with the engine ``name`` says, a
    ParquetSink; the windows left open after the last file are released by ``flush()``."""
    from bench import tempo_queries
    from tempo.spark.streaming import ParquetSink, StreamingExecutor

    tempo_queries.CTIS = "every-1000"
    run = Run(name, files.batch, files.events)
    watched, out = work / "tempo-in", work / "tempo-out"
    lander = Lander(watched)
    lander.land(files.empty)  # the schema comes from the files there at the start
    engine = {
        "tempo": "auto",
        "tempo-driver": "driver",
        "tempo-vectorised": "vectorised",
        "tempo-spark": "spark",
        "tempo-cluster": "cluster",
    }[name]
    executor = StreamingExecutor(spark, str(work / "tempo-checkpoint"), engine=engine)
    query = {"W5": tempo_queries.w5, "W2-hop": tempo_queries.w2_hop}.get(WORKLOAD, tempo_queries.w2)(str(watched))
    live = executor.start(query, ParquetSink(str(out)))
    try:
        live.process_all_available()
        before = len(live.progress)
        stream_files(run, files, lander, live.process_all_available)
        streamed = live.progress[before:]
        # The cluster engine's progress is its output batches (rows_in is the time query's).
        run.engine_batch_seconds = [p.seconds for p in streamed if sum(p.rows_in.values()) or p.engine == "cluster"]
        run.micro_batches = len(streamed)
        began = time.perf_counter()
        live.flush()
        run.end_seconds = time.perf_counter() - began
        run.dropped = sum(m.dropped for m in live.metrics.values())
    finally:
        live.stop()
    windows = spark.read.parquet(str(out)).where("tempo_kind = 'point'" if WORKLOAD == "W5" else "tempo_kind = 'interval'")
    run.checksum = window_checksum(windows)
    return run


def handwritten_query(spark: SparkSession, watched: str, schema: Any) -> DataFrame:
    """W2 written by hand for Structured Streaming: event time as a timestamp, a watermark
    120 s behind, ``groupBy(key, window(60 s))``, count and sum (append mode emits a window
    once the watermark has passed its end)."""
    from pyspark.sql import functions as F

    src = spark.readStream.schema(schema).option("maxFileAge", "36500d").parquet(watched)
    timed = src.select("key", "value", F.timestamp_micros(F.col("event_time") + F.lit(ORIGIN_US)).alias("ts"))
    if WORKLOAD == "W5":  # sessions: [first event, last event + gap), emitted once the watermark passes the end
        return (
            timed.withWatermark("ts", WATERMARK_DELAY)
            .groupBy("key", F.session_window("ts", "5 seconds"))
            .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))
            .select("key", "n", "total", F.col("session_window.start").alias("start"), F.col("session_window.end").alias("end"))
        )
    return (
        timed.withWatermark("ts", WATERMARK_DELAY)
        .groupBy("key", F.window("ts", "60 seconds"))
        .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))
        .select("key", "n", "total", F.col("window.start").alias("tempo_start"))
    )


def run_handwritten(spark: SparkSession, files: Files, work: Path) -> Run:
    """The hand-written query with Spark's own Parquet sink (exactly once through its
    ``_spark_metadata`` log). Append mode emits a window only after a batch has moved the
    watermark past its end, so Spark's end of input is two sentinel files of one row a day
    after the last event (key -1, left out of the checksum): the first moves the watermark
    past every real window, the batch of the second emits them. For the same reason the
    windows a file closes are emitted by the batch after its own: Spark runs one without
    data when a batch moved the watermark, and ``processAllAvailable`` waits for it, so
    the latency measured here counts it, as tempo's counts the release of the windows."""
    import pyarrow.parquet as pq

    run = Run("handwritten", files.batch, files.events)
    watched, out = work / "spark-in", work / "spark-out"
    lander = Lander(watched)
    lander.land(files.empty)
    schema = spark.read.parquet(str(files.empty)).schema
    assert pq.read_schema(files.empty).names == schema.names
    query = (
        handwritten_query(spark, str(watched), schema)
        .writeStream.outputMode("append")
        .format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(work / "spark-checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
        before = len(query.recentProgress)
        stream_files(run, files, lander, query.processAllAvailable)
        run.micro_batches = len(query.recentProgress) - before
        began = time.perf_counter()
        for sentinel in files.sentinels:
            lander.land(sentinel)
            query.processAllAvailable()
        run.end_seconds = time.perf_counter() - began
        progress = query.recentProgress
    finally:
        query.stop()
    run.engine_batch_seconds = [p["durationMs"]["triggerExecution"] / 1000 for p in progress if p["numInputRows"] and p["numInputRows"] > 1]
    run.dropped = sum(op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p.get("stateOperators", []))
    windows = spark.read.parquet(str(out)).where(f"key != {SENTINEL_KEY}")
    run.checksum = window_checksum(windows)
    return run


RUNNERS: dict[str, Any] = {
    "tempo": run_tempo,
    "tempo-driver": functools.partial(run_tempo, name="tempo-driver"),
    "tempo-vectorised": functools.partial(run_tempo, name="tempo-vectorised"),
    "tempo-spark": functools.partial(run_tempo, name="tempo-spark"),
    "tempo-cluster": functools.partial(run_tempo, name="tempo-cluster"),
    "handwritten": run_handwritten,
}


# ---- the table -------------------------------------------------------------------------------
def judge(runs: list[Run], n_data: int) -> None:
    """Each run's checksum against the published one (when all events were streamed) or
    against the other engine's on the same events."""
    for r in runs:
        if r.status:
            continue
        assert r.checksum is not None
        expected = reference(n_data, WORKLOAD.removesuffix("-hop")) if r.events == n_data else None  # W2-hop gives W2's windows
        if expected is not None:
            diff = differences(expected, r.checksum)
            r.status = "exact" if not diff else "FAIL"
            r.error = "; ".join(diff) or None
            continue
        peers = [p for p in runs if p is not r and p.batch == r.batch and p.checksum is not None]
        r.status = "no ref" if not peers else "agree" if all(p.checksum == r.checksum for p in peers) else "DIFFER"


def table(runs: list[Run]) -> str:
    head = (
        "batch",
        "engine",
        "files",
        "micro-batches",
        "events",
        "events/s",
        "tempo/hw",
        "median latency",
        "median batch",
        "end",
        "dropped",
        "checksum",
    )
    rate = {(r.batch, r.engine): r.events_per_s for r in runs}
    body = []
    for r in runs:
        hw = rate.get((r.batch, "handwritten"))
        ratio = f"{r.events_per_s / hw:.2f}x" if r.engine.startswith("tempo") and r.events_per_s and hw else ""
        body.append(
            (
                f"{r.batch:,}",
                r.engine,
                str(r.files),
                str(r.micro_batches),
                f"{r.events:,}",
                fmt_rate(r.events_per_s),
                ratio,
                "-" if r.median_latency is None else f"{r.median_latency:.3f} s",
                "-" if r.median_engine_batch is None else f"{r.median_engine_batch:.3f} s",
                f"{r.end_seconds:.2f} s",
                "-" if r.dropped is None else str(r.dropped),
                r.status,
            )
        )
    widths = [max(len(line[i]) for line in (head, *body)) for i in range(len(head))]
    right = {0, 2, 3, 4, 5, 6, 7, 8, 9, 10}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    notes = [f"  {r.batch:,} {r.engine}: {r.error}" for r in runs if r.error]
    return "\n".join([line(head), line(["-" * w for w in widths]), *(line(b) for b in body)] + (["", "notes:", *notes] if notes else []))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000, help="the data set (default 2,000,000 events)")
    ap.add_argument("--batches", default="10000,100000,1000000", help="events per file, comma-separated")
    ap.add_argument("--max-files", type=int, default=20, help="stream at most this many files per batch size (default 20)")
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES), help=f"comma-separated, of {','.join(ENGINES)}")
    ap.add_argument("--data-dir", type=Path, default=default_data_dir(), help="default: $TEMPO_BENCH_DATA or <tmp>/tempo-bench-data")
    ap.add_argument("--work", type=Path, default=None, help="files, checkpoints and outputs (default: a temporary directory, removed)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=4)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument(
        "--workload",
        default="W2",
        choices=("W2", "W2-hop", "W5"),
        help="W2 (tumbling windows, default), W2-hop (W2 then a second window per key: tempo's engines only) or W5 (sessions)",
    )
    ap.add_argument("--out", type=Path, default=None, help="JSON results (default bench/results/streaming.json, streaming-w5.json for W5)")
    args = ap.parse_args(argv)
    if args.out is None:
        args.out = RESULTS / {"W5": "streaming-w5.json", "W2-hop": "streaming-w2-hop.json"}.get(args.workload, "streaming.json")
    args.batches = [int(b) for b in args.batches.split(",") if b.strip()]
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in args.engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r}; choose from {', '.join(ENGINES)}")
    if args.workload == "W2-hop" and "handwritten" in args.engines:
        ap.error("--workload W2-hop runs tempo's engines only (the hand-written query has no second node)")
    if any(b < 1 for b in args.batches) or args.max_files < 1:
        ap.error("--batches and --max-files must be positive")
    return args


def run_all(spark: SparkSession, args: argparse.Namespace, events: Path, work: Path) -> list[Run]:
    """Every (batch size, engine) run, engines one after the other for each batch size."""
    runs = []
    for batch in args.batches:
        files = write_files(events, args.n, batch, args.max_files, work / f"b{batch}" / "files")
        for name in args.engines:
            print(f"batch {batch:,}: {name}, {len(files.paths)} files", flush=True)
            run_work = work / f"b{batch}" / name
            try:
                runs.append(RUNNERS[name](spark, files, run_work))
            except Exception as e:  # noqa: BLE001 - one failing engine must not stop the others
                import traceback

                traceback.print_exc()
                runs.append(Run(name, batch, files.events, status="error", error=f"{type(e).__name__}: {e}"))
    judge(runs, args.n)
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    global WORKLOAD
    args = parse_args(argv)
    WORKLOAD = args.workload
    load_start = list(os.getloadavg())
    data = ensure_data(args.n, args.data_dir)
    print(f"starting Spark ({args.master}, {args.shuffle_partitions} shuffle partitions)", flush=True)
    spark = make_spark(args.master, args.shuffle_partitions, args.driver_memory, data.events)
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "10000")
    work = args.work or Path(tempfile.mkdtemp(prefix="tempo-bench-streaming-"))
    try:
        runs = run_all(spark, args, data.events, work)
    finally:
        spark.stop()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    load_end = list(os.getloadavg())
    print()
    print(table(runs))
    print(
        f"\nload average (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in load_start)} at the start, "
        f"{', '.join(f'{x:.1f}' for x in load_end)} at the end, on {os.cpu_count()} CPUs"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "n": args.n,
                "workload": args.workload,
                "max_files": args.max_files,
                "master": args.master,
                "shuffle_partitions": args.shuffle_partitions,
                "load_average": {"start": load_start, "end": load_end},
                "runs": [attrs.asdict(r) | {"events_per_s": r.events_per_s, "median_latency": r.median_latency} for r in runs],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {args.out}")
    return 1 if any(r.status in ("FAIL", "error", "DIFFER") for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
