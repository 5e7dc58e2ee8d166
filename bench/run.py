"""Run the shared workloads W1-W4, and this project's W5-W7, through hand-written PySpark,
tempo on Spark, tempo vectorised and tempo in memory, and W1-W4 through the peers polars and
DuckDB (``../shared/bench/peers``).

    python bench/run.py --n 2000000 [--engines handwritten,tempo-spark,tempo-memory,...]
                        [--workloads W1,W2,W3,W4,W5,W6,W7] [--repeat 1] [--memory-n 2000000]
                        [--isolate] [--peers-python PYTHON]

Generates the data if missing (``../shared/bench/data.py``, beside the project), then times
every (workload, engine) run from reading the Parquet files to having the checksum values in
the driver. By default the tempo engines and the hand-written queries run in this process
(one local Spark session, warmed up first); with ``--isolate`` each (workload, engine) runs in
a process of its own (``bench/child.py``), whose peak memory (its whole process tree) is
measured. The peers always run in a process of their own, on ``--peers-python``. Prints one
table and writes it to bench/results/latest.json. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `import bench`, and tempo from this checkout

from bench.checksums import WORKLOADS, Checksum, differences, normalize, reference  # noqa: E402
from bench.child import PEER_WORKLOADS, PEERS, RESULT_MARK  # noqa: E402
from bench.engines import ENGINES, Data, Engine, NotAvailable, make_engine  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

RESULTS = Path(__file__).resolve().parent / "results"
CHILD = Path(__file__).resolve().parent / "child.py"
ALL_ENGINES = (*ENGINES, *PEERS)
REF_PERIOD_US = 600_000_000
VALID_TO_SENTINEL = 2**62


# ---- data ------------------------------------------------------------------------------------
def shared_data_script() -> Path:
    """``data.py`` of the shared folder beside the project, or as ``$TEMPO_SHARED`` says (the
    shared folder, its ``bench`` folder, or the script itself)."""
    override = os.environ.get("TEMPO_SHARED")
    if override:
        p = Path(override)
        for candidate in (p, p / "bench" / "data.py", p / "data.py"):
            if candidate.is_file():
                return candidate
        raise SystemExit(f"TEMPO_SHARED={override}: no data.py there (nor in bench/)")
    return Path(__file__).resolve().parents[2] / "shared" / "bench" / "data.py"


def default_data_dir() -> Path:
    """Where data.py writes by default: $TEMPO_BENCH_DATA or <tempdir>/tempo-bench-data."""
    return Path(os.environ.get("TEMPO_BENCH_DATA", os.path.join(tempfile.gettempdir(), "tempo-bench-data")))


def ensure_data(n: int, out: Path) -> Data:
    """The data set of ``n`` events under ``out``, generated first if it is missing."""
    d = out / f"n{n}"
    data = Data(n, d / "events.parquet", d / "reference.parquet")
    if not (data.events.exists() and data.reference.exists()):
        script = shared_data_script()
        cmd = [sys.executable, str(script), "--n", str(n), "--out", str(out)]
        print(f"generating data: {' '.join(cmd)}", flush=True)
        subprocess.run(cmd, check=True)
    return data


def check_data(data: Data) -> None:
    """Check (untimed, with pyarrow) what the hand-written W4 and W7 bucket joins rely on: every
    valid_from is a multiple of 600 s, every reference row lasts exactly 600 s except the last
    of each key (valid_to = 2**62), and no event lies 600 s or more after the last valid_from,
    so floor(t / 600 s) == floor(valid_from / 600 s) finds exactly the row valid at t (W4), and
    a piece of W7's signal [t, end) overlaps a row exactly when it touches the row's bucket."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    ref = pq.read_table(data.reference, columns=["key", "valid_from", "valid_to"])
    vf, vt = ref["valid_from"], ref["valid_to"]
    problems = []
    if pc.any(pc.not_equal(pc.subtract(vf, pc.multiply(pc.divide(vf, REF_PERIOD_US), REF_PERIOD_US)), 0)).as_py():
        problems.append("a valid_from is not a multiple of 600 s")
    last = pc.equal(vt, VALID_TO_SENTINEL)
    if pc.any(pc.and_(pc.invert(last), pc.not_equal(pc.subtract(vt, vf), REF_PERIOD_US))).as_py():
        problems.append("a reference row other than a key's last does not last 600 s")
    n_keys = len(pc.unique(ref["key"]))
    if pc.sum(pc.cast(last, "int64")).as_py() != n_keys:
        problems.append("not exactly one row with valid_to = 2**62 per key")
    last_vf = pc.min(pc.filter(vf, last)).as_py()
    max_t = pc.max(pq.read_table(data.events, columns=["event_time"])["event_time"]).as_py()
    if max_t >= last_vf + REF_PERIOD_US:
        problems.append(f"an event ({max_t}) lies 600 s or more after the last valid_from ({last_vf})")
    if problems:
        raise SystemExit(f"{data.reference}: the hand-written W4 and W7 bucket joins would be wrong: {'; '.join(problems)}")


# ---- Spark -----------------------------------------------------------------------------------
def make_spark(master: str, shuffle_partitions: int, driver_memory: str, warm_up_on: Path, connectors: bool = False) -> SparkSession:
    """The one session of the run, warmed up by a trivial query over ``warm_up_on`` (JVM start,
    code generation, the Parquet reader) so the first timed run does not pay for them.
    ``connectors``: with Spark's Kafka connector and Delta Lake, as
    ``tempo.spark.spark_session(connectors=True)`` adds them (their jars from ``bash java/fetch``
    and Delta's session settings), for ``bench/streaming.py --source kafka`` and ``--sink delta``."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("tempo-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.driver.memory", driver_memory)
    )
    if connectors:
        from tempo.spark.session import DELTA_SETTINGS, connector_jars

        builder = builder.config("spark.jars", ",".join(connector_jars()))
        for key, value in DELTA_SETTINGS.items():
            builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.read.parquet(str(warm_up_on)).selectExpr("count(1)", "sum(key)").collect()
    return spark


# ---- child processes and their peak memory -----------------------------------------------------
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
SAMPLE_S = 0.02
TREE_EVERY = 5
"""The process tree is walked again every 5th sample (100 ms; a JVM has dozens of threads to
look through), the resident sets of its processes summed at every sample."""


def rss_bytes(pid: int) -> int:
    """The resident set of process ``pid`` (``/proc/<pid>/statm``), 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return 0


CHILDREN_FILES = os.path.exists(f"/proc/self/task/{os.getpid()}/children")  # CONFIG_PROC_CHILDREN


def children(pid: int) -> list[int]:
    """The child processes of ``pid``: ``/proc/<pid>/task/<tid>/children`` of each of its
    threads, or, on a kernel without those files, a scan of every ``/proc/<pid>/stat``."""
    if not CHILDREN_FILES:
        return _children_by_scan(pid)
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):  # the thread or the process ended
            pass
    return out


def _children_by_scan(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append(int(entry))
    return out


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants."""
    todo, seen = [root], []
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.append(pid)
            todo.extend(children(pid))
    return seen


def own_peak_rss_bytes() -> int:
    """This process's own peak resident set (``VmHWM``)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


@attrs.frozen
class ChildRun:
    returncode: int
    stdout: str
    stderr: str
    peak_rss_bytes: int


def run_measured(cmd: Sequence[str]) -> ChildRun:
    """Run ``cmd`` to its end and measure its peak memory: the largest sum of the resident
    sets of its process tree (pages shared between them counted once per process), sampled
    every 20 ms, which catches a JVM or workers it starts, and the child's own ``ru_maxrss``
    from ``wait4``, exact between samples for a process without children: whichever is
    larger. A forked child's ``ru_maxrss`` starts at this process's peak, so it counts only
    when it is above that."""
    parent_peak = own_peak_rss_bytes()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=err, cwd=ROOT)
        peak, tree, samples = 0, [proc.pid], 0
        while True:
            if samples % TREE_EVERY == 0:
                tree = process_tree(proc.pid)
            peak = max(peak, sum(rss_bytes(pid) for pid in tree))
            samples += 1
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(SAMPLE_S)
        proc.returncode = os.waitstatus_to_exitcode(status)
        maxrss = usage.ru_maxrss * 1024  # KiB on Linux
        if maxrss > parent_peak:
            peak = max(peak, maxrss)
        out.seek(0)
        err.seek(0)
        return ChildRun(proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"), peak)


# ---- runs ------------------------------------------------------------------------------------
@attrs.define
class Row:
    workload: str
    engine: str
    n: int
    seconds: list[float] = attrs.field(factory=list)
    checksum: Checksum | None = None
    status: str = ""
    error: str | None = None
    ratio: float | None = None
    peak_rss_bytes: int | None = None
    vs_best_peer: float | None = None

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def events_per_s(self) -> float | None:
        m = self.median
        return self.n / m if m else None


def run_one(engine: Engine, row: Row, data: Data) -> None:
    """Time one run (read to checksum in the driver) and record its checksum."""
    t0 = time.perf_counter()
    got = engine.run(row.workload, data)
    elapsed = time.perf_counter() - t0
    got = normalize(row.workload, got)
    if row.checksum is not None and got != row.checksum:
        row.error = f"checksum changed between repeats: {row.checksum} then {got}"
    row.checksum = got
    row.seconds.append(elapsed)


def child_command(args: argparse.Namespace, row: Row, data: Data) -> list[str]:
    """``bench/child.py`` for one (engine, workload): the peers on ``--peers-python``, the
    others on this interpreter."""
    python = args.peers_python if row.engine in PEERS else sys.executable
    cmd = [
        python,
        str(CHILD),
        "--engine",
        row.engine,
        "--workload",
        row.workload,
        "--n",
        str(row.n),
        "--events",
        str(data.events),
        "--reference",
        str(data.reference),
        "--repeat",
        str(args.repeat),
        "--warmup",
        str(args.warmup),
        "--ctis",
        args.ctis,
        "--master",
        args.master,
        "--shuffle-partitions",
        str(args.shuffle_partitions),
        "--driver-memory",
        args.driver_memory,
    ]
    if row.engine in PEERS:
        cmd += ["--shared", str(shared_data_script().parent)]
    return cmd


def run_child(args: argparse.Namespace, row: Row, data: Data) -> dict[str, Any]:
    """Run one (engine, workload) in a process of its own and fill ``row`` with its runs,
    checksum and peak memory; returns the child's result (its interpreter, Spark version)."""
    cmd = child_command(args, row, data)
    try:
        run = run_measured(cmd)
    except OSError as e:  # e.g. no interpreter at --peers-python
        row.status, row.error = "not available", f"{cmd[0]}: {type(e).__name__}: {e}"
        return {}
    lines = [line for line in run.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if not lines:
        tail = " | ".join(run.stderr.strip().splitlines()[-3:])
        row.status, row.error = "error", f"the child exited with {run.returncode} and no result: {tail}"
        print(run.stderr, file=sys.stderr, flush=True)
        return {}
    result: dict[str, Any] = json.loads(lines[-1][len(RESULT_MARK) :])
    row.seconds = list(result["seconds"])
    row.checksum = result["checksum"]
    row.status, row.error = result["status"], result["error"]
    if row.status != "not available":
        row.peak_rss_bytes = run.peak_rss_bytes
    if row.status == "error":
        print(run.stderr, file=sys.stderr, flush=True)
    return result


def report_child(row: Row, unavailable: dict[str, str]) -> None:
    """Print what a child process did; note an engine found not available."""
    if row.status == "not available":
        unavailable[row.engine] = row.error or ""
        print(f"{row.engine}: not available ({row.error})", flush=True)
    elif row.status == "error":
        print(f"{row.workload} {row.engine}: {row.error}", flush=True)
    else:
        runs = ", ".join(f"{s:.2f}" for s in row.seconds)
        print(f"  {row.workload} {row.engine:16} N={row.n:,}: {runs} s, peak {fmt_mb(row.peak_rss_bytes)} MB  {row.checksum}", flush=True)


def judge(rows: list[Row]) -> None:
    """Set each row's status against the published checksum, or, for an N without one,
    against the other engines' results on the same N."""
    for r in rows:
        if r.status:  # not available / error
            continue
        assert r.checksum is not None
        expected = reference(r.n, r.workload)
        if expected is not None:
            diff = differences(expected, r.checksum)
            r.status = "ok" if not diff and r.error is None else "FAIL"
            if diff:
                r.error = "; ".join(diff)
            continue
        peers = [p for p in rows if p is not r and p.workload == r.workload and p.n == r.n and p.checksum]
        if not peers:
            r.status = "no ref"
        elif all(p.checksum == r.checksum for p in peers):
            r.status = "no ref, agree"
        else:
            r.status = "no ref, DIFFER"
    for r in rows:
        if r.engine != "tempo-spark" or r.median is None:
            continue
        base = [h for h in rows if h.engine == "handwritten" and h.workload == r.workload and h.n == r.n]
        if base and base[0].median:
            r.ratio = r.median / base[0].median
    for r in rows:
        if r.engine != "tempo-vectorised" or r.median is None:
            continue
        peer_medians = [
            p.median
            for p in rows
            if p.engine in PEERS and p.workload == r.workload and p.n == r.n and p.status in ("ok", "no ref", "no ref, agree") and p.median
        ]
        if peer_medians:
            r.vs_best_peer = r.median / min(peer_medians)


def fmt_mb(x: int | None) -> str:
    return "-" if x is None else f"{x / 2**20:,.0f}"


def fmt_rate(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.0f} k"


def table(rows: list[Row]) -> str:
    head = ("workload", "engine", "N", "seconds", "events/s", "peak MB", "checksum", "tempo-spark/hw", "vs best peer")
    body = [
        (
            r.workload,
            r.engine,
            f"{r.n:,}",
            "-" if r.median is None else f"{r.median:.2f}",
            fmt_rate(r.events_per_s),
            fmt_mb(r.peak_rss_bytes),
            r.status,
            "" if r.ratio is None else f"{r.ratio:.2f}x",
            "" if r.vs_best_peer is None else f"{r.vs_best_peer:.2f}x",
        )
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in (head, *body)) for i in range(len(head))]
    right = {2, 3, 4, 5, 7, 8}

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = [line(head), line(["-" * w for w in widths]), *(line(b) for b in body)]
    notes = [f"  {r.workload} {r.engine}: {r.error}" for r in rows if r.error and r.status != "n/a"]
    return "\n".join(out + (["", "notes:", *notes] if notes else []))


def to_json(rows: list[Row], args: argparse.Namespace, spark_version: str | None, load_start: list[float]) -> dict[str, Any]:
    return {
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "n": args.n,
        "memory_n": args.memory_n,
        "repeat": args.repeat,
        "master": args.master,
        "shuffle_partitions": args.shuffle_partitions,
        "isolate": args.isolate,
        "peers_python": args.peers_python,
        "spark": spark_version,
        "python": platform.python_version(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "load_average": {"start": load_start, "end": list(os.getloadavg())},
        "rows": [
            {
                "workload": r.workload,
                "engine": r.engine,
                "n": r.n,
                "seconds": r.median,
                "runs": r.seconds,
                "events_per_s": r.events_per_s,
                "checksum": r.checksum,
                "expected": reference(r.n, r.workload),
                "status": r.status,
                "ratio_to_handwritten": r.ratio,
                "ratio_to_best_peer": r.vs_best_peer,
                "peak_rss_bytes": r.peak_rss_bytes,
                "error": r.error,
            }
            for r in rows
        ],
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000, help="events in the data set (default 2,000,000)")
    ap.add_argument("--engines", default=",".join(ALL_ENGINES), help=f"comma-separated, of {','.join(ALL_ENGINES)} (default: all)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated, of W1,W2,W3,W4,W5,W6,W7")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per (workload, engine); the median is shown")
    ap.add_argument("--warmup", type=int, default=0, help="untimed runs per (workload, engine) before timing")
    ap.add_argument("--memory-n", type=int, default=None, help="cap N for tempo-memory (e.g. 2000000 when --n 10000000)")
    ap.add_argument("--data-dir", type=Path, default=default_data_dir(), help="default: $TEMPO_BENCH_DATA or <tmp>/tempo-bench-data")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=4)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument(
        "--ctis",
        choices=("end", "every-1000", "import"),
        default="end",
        help="W2-W7 inputs: one CTI at the end (default), a CTI after every 1000th event, 120 s behind, or "
        "that with the events' arrival column and W4's reference importing their CTIs (import)",
    )
    ap.add_argument("--explain", action="store_true", help="print the Spark plans of the Spark engines' queries first")
    ap.add_argument("--out", type=Path, default=RESULTS / "latest.json", help="JSON results (default bench/results/latest.json)")
    ap.add_argument(
        "--isolate", action="store_true", help="run each (workload, engine) in a process of its own and measure its peak memory"
    )
    ap.add_argument("--peers-python", default=sys.executable, help="the interpreter for the peers polars and duckdb (default: this one)")
    args = ap.parse_args(argv)
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    try:
        from bench import tempo_queries

        tempo_queries.CTIS = args.ctis
    except ImportError:  # the tempo engines report it
        pass
    args.workloads = [w.strip().upper() for w in args.workloads.split(",") if w.strip()]
    for e in args.engines:
        if e not in ALL_ENGINES:
            ap.error(f"unknown engine {e!r}; choose from {', '.join(ALL_ENGINES)}")
    for w in args.workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    if args.memory_n is not None:
        args.memory_n = min(args.memory_n, args.n)
    if args.explain and args.isolate:
        ap.error("--explain prints the plans in this process: run it without --isolate")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_start = list(os.getloadavg())
    data = ensure_data(args.n, args.data_dir)
    memory_n = args.memory_n or args.n
    memory_data = ensure_data(memory_n, args.data_dir) if "tempo-memory" in args.engines else data
    if "handwritten" in args.engines and ("W4" in args.workloads or "W7" in args.workloads):
        check_data(data)

    rows: list[Row] = []
    for w in args.workloads:
        for name in args.engines:
            row = Row(w, name, memory_n if name == "tempo-memory" else args.n)
            if name in PEERS and w not in PEER_WORKLOADS:
                row.status, row.error = "n/a", f"the peers do {', '.join(PEER_WORKLOADS)} only"
            rows.append(row)

    def data_of(row: Row) -> Data:
        return memory_data if row.engine == "tempo-memory" else data

    def in_child(row: Row, unavailable: dict[str, str], spark_version: list[str]) -> None:
        """Run ``row`` in a child process; an engine found not available is not tried again."""
        if row.status:
            return
        if row.engine in unavailable:
            row.status, row.error = "not available", unavailable[row.engine]
            return
        result = run_child(args, row, data_of(row))
        if result.get("spark"):
            spark_version[:] = [result["spark"]]
        report_child(row, unavailable)

    if args.isolate:
        gone: dict[str, str] = {}
        child_spark: list[str] = []
        for row in rows:
            in_child(row, gone, child_spark)
        return finish(args, rows, child_spark[0] if child_spark else None, load_start)

    session: list[SparkSession] = []

    def spark() -> SparkSession:
        if not session:
            print(f"starting Spark ({args.master}, {args.shuffle_partitions} shuffle partitions)", flush=True)
            session.append(make_spark(args.master, args.shuffle_partitions, args.driver_memory, data.events))
        return session[0]

    engines: dict[str, Engine] = {}
    unavailable: dict[str, str] = {}
    for name in args.engines:
        if name in PEERS:
            continue
        try:
            engines[name] = make_engine(name, spark)
        except NotAvailable as e:
            unavailable[name] = str(e)
            print(f"{name}: not available ({e})", flush=True)
    for row in rows:
        if row.engine in unavailable:
            row.status, row.error = "not available", unavailable[row.engine]
    here = [row for row in rows if row.engine not in PEERS]

    if args.explain:
        for w in args.workloads:
            for name, engine in engines.items():
                explain = getattr(engine, "explain", None)
                if explain is not None:
                    try:
                        print(f"==== {w} {name} plan ====\n{explain(w, data)}", flush=True)
                    except Exception as e:  # noqa: BLE001 - a plan that fails is reported, not fatal
                        print(f"==== {w} {name} plan: {type(e).__name__}: {e}", flush=True)

    def attempt(row: Row, timed: bool) -> None:
        engine = engines[row.engine]
        d = data_of(row)
        try:
            if timed:
                run_one(engine, row, d)
            else:
                engine.run(row.workload, d)
        except Exception as e:  # noqa: BLE001 - one failing engine must not stop the others
            row.status, row.error = "error", f"{type(e).__name__}: {e}"
            print(f"{row.workload} {row.engine}: {row.error}", flush=True)
            traceback.print_exc()

    for _ in range(args.warmup):
        for row in here:
            if not row.status:
                attempt(row, timed=False)
    for rep in range(args.repeat):
        for row in here:
            if row.status:
                continue
            attempt(row, timed=True)
            if not row.status:
                print(
                    f"  run {rep + 1}/{args.repeat} {row.workload} {row.engine:12} N={row.n:,}: {row.seconds[-1]:.2f} s  {row.checksum}",
                    flush=True,
                )
    spark_version = session[0].version if session else None
    if session:
        session[0].stop()
    # The peers run in processes of their own (maybe on another interpreter), all their runs at once.
    for row in rows:
        if row.engine in PEERS:
            in_child(row, unavailable, [])
    return finish(args, rows, spark_version, load_start)


def finish(args: argparse.Namespace, rows: list[Row], spark_version: str | None, load_start: list[float]) -> int:
    """Judge the rows, print the table, write the JSON; the exit status."""
    judge(rows)
    print()
    print(table(rows))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\nload average (1, 5, 15 min) at the end: {load} on {os.cpu_count()} CPUs: "
        "compare ratios within one run, not absolute times across runs"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(to_json(rows, args, spark_version, load_start), indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 1 if any(r.status in ("FAIL", "error", "no ref, DIFFER") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
