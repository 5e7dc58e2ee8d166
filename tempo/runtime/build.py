"""How the reference engine builds a plan's operators: ``Build``, the state of one
compilation, and ``compiles``, the registry of each node class's build. Each family module
registers the build of its operators beside them (``@compiles(NodeClass)``), and
``tempo.runtime.engine`` imports every family module."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from tempo.dispatch import Registry
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.runtime import codegen
from tempo.runtime.ingress import ArrivalClock, Ingress, Rejected, TimestampMode
from tempo.runtime.operator import Operator
from tempo.ticks import from_ticks

COMPILERS: Registry[Build, Operator] = Registry("in-memory", "plan node")
compiles = COMPILERS.rule
"""Register the build of one node class."""


class Build:
    """State of one compilation: shared id counter and timestamp convention.

    ``first_id``: the first event id handed out (a live query rebuilt from saved state
    continues its ids)."""

    def __init__(self, mode: TimestampMode, query: Query, first_id: int = 0) -> None:
        self.query = query
        self.ids = itertools.count(first_id)
        self.new_id: Callable[[], int] = self.ids.__next__
        self.mode = mode
        self.rejected: list[Rejected] = []
        self.ingresses: dict[str, Ingress] = {}
        self.clock = ArrivalClock()

    def to_datetime(self, t: int) -> Any:
        return from_ticks(t, naive=self.mode.naive is True)


def join_keys(node: p.MatchingNode) -> tuple[Callable[[Any], Any], Callable[[Any], Any]] | None:
    """The two sides' key functions of a join, a pattern or an anti-join; None without keys."""
    if not node.keys:
        return None
    left = codegen.compile_keys([a for a, _ in node.keys], side=0)
    right = codegen.compile_keys([b for _, b in node.keys], side=1)
    return left, right
