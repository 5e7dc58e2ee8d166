"""What a ``Result`` costs over the frame of the same events, on the vectorised executor.

    python bench/result_access.py [--n 2000000] [--workloads W2,W3,W4] [--repeat 5]

For each workload (the queries of ``tempo_queries.py`` on the shared data set, generated
as ``run.py`` does when missing) three things are timed, interleaved ``--repeat`` times after
one untimed warm-up of each, and the medians printed:

- ``to_polars``: ``VectorisedExecutor.to_polars(stream)``, the released events as a polars
  frame (no Python object per event);
- ``run``: ``VectorisedExecutor.run(stream)``, the ``Result`` with its CTIs and metrics;
- ``run + read``: ``run`` followed by reading every event's ``start`` and ``payload``
  (iterating ``result.events``), what a caller of ``run`` pays to see the events.

``ratio`` is ``run + read`` over ``to_polars``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `import bench`, and tempo from this checkout

from bench import tempo_queries as q  # noqa: E402
from bench.run import default_data_dir, ensure_data  # noqa: E402
from tempo.vectorised import VectorisedExecutor  # noqa: E402


def read_every_event(result: Any) -> int:
    """Reads each event's start and payload, as a caller looking at every event does."""
    seen = 0
    for event in result.events:
        if event.start is not None and event.payload is not None:
            seen += 1
    return seen


def timed(work: Callable[[], Any]) -> float:
    began = time.perf_counter()
    work()
    return time.perf_counter() - began


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2_000_000, help="events in the data set")
    parser.add_argument("--workloads", default="W2", help="any of W2,W3,W4 (default W2)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each measurement (the median is shown)")
    args = parser.parse_args(argv)

    data = ensure_data(args.n, default_data_dir())
    events, reference = str(data.events), str(data.reference)
    queries = {"W2": lambda: q.w2(events), "W3": lambda: q.w3(events), "W4": lambda: q.w4(events, reference)}
    executor = VectorisedExecutor()
    print(f"n = {args.n:,}, median of {args.repeat}")
    print(f"{'workload':<9} {'outputs':>9} {'to_polars s':>12} {'run s':>8} {'run + read s':>13} {'ratio':>6}")
    for name in args.workloads.split(","):
        stream = queries[name]()
        outputs = executor.to_polars(stream).height
        read_every_event(executor.run(stream))  # warm-up: imports, polars' first plans
        times: dict[str, list[float]] = {"to_polars": [], "run": [], "run + read": []}
        for _ in range(args.repeat):
            times["to_polars"].append(timed(lambda: executor.to_polars(stream)))
            times["run"].append(timed(lambda: executor.run(stream)))
            times["run + read"].append(timed(lambda: read_every_event(executor.run(stream))))
        frame, run, read = (statistics.median(times[k]) for k in ("to_polars", "run", "run + read"))
        print(f"{name:<9} {outputs:>9,} {frame:>12.3f} {run:>8.3f} {read:>13.3f} {read / frame:>6.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
