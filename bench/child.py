"""One (engine, workload) of the batch benchmark in a process of its own, for ``run.py``.

    python bench/child.py --engine tempo-memory --workload W2 --n 200000 \\
        --events .../events.parquet --reference .../reference.parquet [--repeat 3] [--warmup 0]

``run.py`` starts this script once per (engine, workload) with ``--isolate``, and for the
peers (``polars``, ``duckdb``) always, and measures the peak memory of its process tree from
outside. The script sets up the engine (a Spark session with its untimed warm-up query, for
the Spark engines; the peer's ``setup``), runs the workload ``--warmup`` times untimed and
``--repeat`` times timed (reading the Parquet files to the checksum values, as in run.py),
and prints one line: ``RESULT_MARK`` then JSON with the seconds of each run, the checksum,
and a status ("", "not available" or "error") with the reason.

The peers are the implementations of ``../shared/bench/peers`` (``peer_<name>.py``, their
``WORKLOADS`` of W1-W4); their results become checksums with the peers' own ``bench.checksum``,
whose fields are renamed to ours (``PEER_FIELDS``). A peer may run on another interpreter
(``run.py --peers-python``): up to the peer's own imports, this module needs only the
standard library and ``bench.checksums``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import platform
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.checksums import FIELDS, Checksum, normalize  # noqa: E402

RESULT_MARK = "TEMPO-BENCH-CHILD "
"""The prefix of the result line on the child's standard output."""

PEERS = ("polars", "duckdb")
PEER_WORKLOADS = ("W1", "W2", "W3", "W4")

PEER_FIELDS: dict[str, dict[str, str]] = {
    "W1": {"kept": "kept", "dropped": "dropped"},
    "W2": {"groups": "groups", "count": "count", "sum": "sum", "sum_x_key": "sum_x_key", "sum_x_window": "sum_x_win"},
    "W3": {"groups": "groups", "sum": "sum", "sum_x_key": "sum_x_key", "sum_x_window": "sum_x_win"},
    "W4": {"matched": "matched", "sum_value_x_ref": "sum_value_x_ref"},
}
"""Our checksum field -> the field of the peers' ``bench.checksum``, per workload."""
assert all(tuple(PEER_FIELDS[w]) == FIELDS[w] for w in PEER_WORKLOADS)


def from_peer(workload: str, values: dict[str, Any]) -> Checksum:
    """The peers' checksum of ``workload`` in our fields (``sum_x_win`` is ``sum_x_window``)."""
    return normalize(workload, {ours: values[theirs] for ours, theirs in PEER_FIELDS[workload].items()})


class Unavailable(Exception):
    """The engine cannot run in this interpreter; the message says why."""


def peer_runner(name: str, workload: str, shared: Path, events: str, reference: str) -> Callable[[], Checksum]:
    """The peer's workload as a call from reading the files to our checksum; its ``setup``
    (if any) has run."""
    for p in (shared, shared / "peers"):  # peer_<name>.py, and the `data` module they import
        sys.path.insert(0, str(p))
    try:
        module = importlib.import_module(f"peer_{name}")
        # The peers' harness is a module called `bench`, as this project's package is.
        spec = importlib.util.spec_from_file_location("tempo_peers_harness", shared / "peers" / "bench.py")
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {shared / 'peers' / 'bench.py'}")
        harness = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(harness)
    except ImportError as e:
        raise Unavailable(f"{type(e).__name__}: {e} (in {sys.executable})") from e
    fn = module.WORKLOADS.get(workload)
    if fn is None:
        raise Unavailable(f"peer_{name} has no {workload}")
    setup = getattr(module, "setup", None)
    if setup is not None:
        setup(events, reference)
    return lambda: from_peer(workload, harness.checksum(workload, fn(events, reference)))


def tempo_runner(args: argparse.Namespace, stop: list[Callable[[], None]], info: dict[str, Any]) -> Callable[[], Checksum]:
    """The engine of bench/engines.py as a call from reading the files to our checksum; the
    Spark session (if the engine needs one) is started and warmed up."""
    from bench.engines import Data, NotAvailable, make_engine
    from bench.run import make_spark

    try:
        from bench import tempo_queries

        tempo_queries.CTIS = args.ctis
    except ImportError:  # make_engine reports it
        pass
    data = Data(args.n, Path(args.events), Path(args.reference))
    session: list[Any] = []

    def spark() -> Any:
        if not session:
            session.append(make_spark(args.master, args.shuffle_partitions, args.driver_memory, data.events))
            info["spark"] = session[0].version
            stop.append(session[0].stop)
        return session[0]

    try:
        engine = make_engine(args.engine, spark)
    except NotAvailable as e:
        raise Unavailable(str(e)) from e
    return lambda: normalize(args.workload, engine.run(args.workload, data))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--events", required=True)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--ctis", choices=("end", "every-1000", "import"), default="end")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=4)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--shared", type=Path, default=None, help="the shared bench folder (data.py, peers/): peers only")
    return ap.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out: dict[str, Any] = {
        "engine": args.engine,
        "workload": args.workload,
        "n": args.n,
        "seconds": [],
        "checksum": None,
        "status": "",
        "error": None,
        "python": platform.python_version(),
        "spark": None,
    }
    stop: list[Callable[[], None]] = []
    try:
        if args.engine in PEERS:
            if args.shared is None:
                raise Unavailable("no --shared folder for the peers")
            run = peer_runner(args.engine, args.workload, args.shared, args.events, args.reference)
        else:
            run = tempo_runner(args, stop, out)
        for _ in range(args.warmup):
            run()
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            got = run()
            out["seconds"].append(time.perf_counter() - t0)
            if out["checksum"] is not None and got != out["checksum"]:
                out["error"] = f"checksum changed between repeats: {out['checksum']} then {got}"
            out["checksum"] = got
    except Unavailable as e:
        out["status"], out["error"] = "not available", str(e)
    except Exception as e:  # noqa: BLE001 - reported to run.py, which goes on with the others
        traceback.print_exc()
        out["status"], out["error"] = "error", f"{type(e).__name__}: {e}"
    finally:
        for f in stop:
            f()
    print(RESULT_MARK + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
