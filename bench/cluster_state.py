"""The cluster engine's state lives on the executors: the driver's memory and each batch's
checkpoint cost, batch after batch, as the keys in state grow.

    python bench/cluster_state.py [--keys 20000] [--batches 8] [--touched 1000]

One live query on the cluster engine (``engine="cluster"``): per-key sessions with a gap of
an hour, so that every key's session stays open and in Spark's state store. Batch 0 brings one
event for each of ``--keys`` keys; each later batch one event for each of ``--touched``
keys drawn from them. Per batch it prints: the seconds from the file landed to its output
committed, the resident memory of the driver's Python process and of its JVM (the driver:
``local[2]`` runs the executors in that JVM too, so its figure includes the state store's
RocksDB memory), the bytes the batch added under the work query's checkpoint (Spark's state
store: with changelog checkpointing, a batch writes the keys it changed), and the bytes of
tempo's own state for the batch (the driver engine's, which holds the input's time state only).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@attrs.frozen
class Event:
    key: int
    value: float


@attrs.frozen
class Session:
    key: int
    n: int
    total: float


def rss_kb(pid: int) -> int:
    """A process's resident memory (kB), from /proc."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def jvm_pid() -> int | None:
    """The driver's JVM: the java process among this process's children."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().split(") ")[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if int(fields[1]) == me and b"java" in cmd:
            return int(entry)
    return None


def tree_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--keys", type=int, default=20_000)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--touched", type=int, default=1_000)
    ap.add_argument("--shuffle-partitions", type=int, default=4)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "cluster_state.json")
    args = ap.parse_args()

    import pyarrow as pa
    import pyarrow.parquet as pq

    import tempo.spark
    from tempo import AdvanceTimeGenerationSettings, AdvanceTimeSettings, EventShape, Stream
    from tempo.sources import ParquetSource
    from tempo.spark.streaming import ParquetSink, StreamingExecutor

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = tempo.spark.spark_session(spark_sql_shuffle_partitions=str(args.shuffle_partitions), spark_ui_showConsoleProgress="false")
    work = Path(tempfile.mkdtemp(prefix="tempo-cluster-state-"))
    landing, staged = work / "in", work / "staged"
    landing.mkdir()
    staged.mkdir()
    schema = pa.schema([("seq", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("key", pa.int64()), ("value", pa.float64())])
    rnd = random.Random(7)
    seq = 0
    files = []
    for batch in range(args.batches):
        keys = list(range(args.keys)) if batch == 0 else rnd.sample(range(args.keys), args.touched)
        rows = [{"seq": seq + i, "ts": T0 + timedelta(seconds=batch, microseconds=i), "key": k, "value": 1.0} for i, k in enumerate(keys)]
        seq += len(rows)
        path = staged / f"{batch:05d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
        files.append(path)
    pq.write_table(schema.empty_table(), landing / "empty.parquet")

    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1000, timedelta(seconds=1)))
    source = ParquetSource(str(landing), Event, start="ts", order="seq")
    query = (
        Stream.create("events", source, EventShape.POINT, settings)
        .group_by(lambda e: e.key)
        .session(timedelta(hours=1))
        .aggregate(lambda k, w: Session(k, w.count(), w.sum(lambda e: e.value)))
    )
    checkpoint = work / "ck"
    live = StreamingExecutor(spark, str(checkpoint), engine="cluster").start(query, ParquetSink(str(work / "out")))
    java = jvm_pid()
    state_dir = checkpoint / "cluster" / "work" / "spark" / "state"
    rows_out = []
    try:
        live.process_all_available()
        for batch, path in enumerate(files):
            before = tree_bytes(state_dir)
            tmp = landing.parent / f".land-{batch}"
            shutil.copyfile(path, tmp)
            os.utime(tmp, (1_700_000_000 + batch, 1_700_000_000 + batch))
            began = time.perf_counter()
            os.replace(tmp, landing / path.name)
            live.process_all_available()
            seconds = time.perf_counter() - began
            record = {
                "batch": batch,
                "keys_touched": args.keys if batch == 0 else args.touched,
                "seconds": round(seconds, 2),
                "driver_python_rss_mb": round(rss_kb(os.getpid()) / 1024, 1),
                "driver_jvm_rss_mb": None if java is None else round(rss_kb(java) / 1024, 1),
                "state_store_bytes_added": tree_bytes(state_dir) - before,
                "tempo_state_bytes": tree_bytes(checkpoint / "tempo" / "state"),
            }
            rows_out.append(record)
            print(json.dumps(record), flush=True)
    finally:
        live.stop()
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"keys": args.keys, "touched": args.touched, "batches": rows_out}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
