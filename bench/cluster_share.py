"""Which of the test suite's random queries the cluster engine runs, and why it refuses the rest.

The differential and live tests draw their queries from ``tests/strategies.py``'s ``queries``;
this counts, over ``--n`` of them (drawn as those tests draw them, derandomised), the share
``engine="cluster"`` takes (``tempo.spark.streaming.cluster.cluster_chain``) and, for the
others, the reason it gives. Of those it takes, it counts where their state lives: on the
executors only (every stateful operator of the plan is a keyed node of its chain), or partly
on the driver (joins, anti-joins or patterns below the first keyed node, or stateful
operators above the last, run on the driver), and how many keyed nodes in sequence (hops)
the chain has. No Spark
session is started: only the plan is inspected.

    python bench/cluster_share.py --n 1000
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tempo.plan import nodes as p  # noqa: E402
from tempo.plan.query import Query  # noqa: E402
from tempo.runtime.bulk import STATELESS  # noqa: E402
from tempo.spark.streaming.cluster import chain_nodes, cluster_chain  # noqa: E402
from tests.strategies import queries  # noqa: E402


STATE_FREE = (p.SourceNode, p.UnionNode, p.ExplodeNode, p.EventTimeNode, *STATELESS)
"""Nodes that hold no events (a union only the arrival frontier, which the driver keeps)."""


def reason(query: Query) -> str:
    """``OK`` (state on the executors only) or ``OK, driver: <operators>`` (the stateful
    operators the driver runs), each with ``, N hops`` when its chain has more than one
    keyed node, or why the cluster engine refuses ``query``, its names and numbers blanked."""
    chain = cluster_chain(query)
    if isinstance(chain, str):
        return re.sub(r"\d+", "N", re.sub(r"'[^']*'", "'x'", chain))
    keyed = {id(n) for n in chain_nodes(chain)}
    others = sorted({type(n).__name__.removesuffix("Node") for n in query.nodes if id(n) not in keyed and not isinstance(n, STATE_FREE)})
    hops = f", {len(chain)} hops" if len(chain) > 1 else ""
    return ("OK, driver: " + " + ".join(others) if others else "OK") + hops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000, help="random queries drawn")
    args = parser.parse_args()
    tally: collections.Counter[str] = collections.Counter()

    @settings(max_examples=args.n, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(queries())
    def draw(drawn: tuple[str, Any]) -> None:
        tally[reason(Query.build(drawn[1](True).node))] += 1

    draw()
    total = sum(tally.values())
    taken = sum(n for why, n in tally.items() if why.startswith("OK"))
    executors = sum(n for why, n in tally.items() if why.startswith("OK") and "driver" not in why)
    print(
        f"{total} random queries; the cluster engine runs {taken} ({100 * taken / total:.1f} %), "
        f"{executors} of them ({100 * executors / total:.1f} % of all) with all their state on the executors"
    )
    print("| queries | share | reason |\n|---:|---:|---|")
    for why, n in tally.most_common():
        print(f"| {n} | {100 * n / total:.1f} % | {why} |")


if __name__ == "__main__":
    main()
