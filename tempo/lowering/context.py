"""``Lowering``: one compilation of a plan to a DataFrame backend, the part every such
compiler shares: what it reads of the CTI replay and of the inputs' spans, the relations
built so far, and the release rule on the output."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from tempo.lowering.dialect import Dialect, Expr
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.runtime.replay import CtiReplay
from tempo.tables import Span
from tempo.ticks import INF, NEG_INF

START = "__tempo_s"
END = "__tempo_e"
"""Every relation's lifetime columns, in ticks."""

R = TypeVar("R")
"""The backend's relation type (a polars ``LazyFrame``, a Spark ``DataFrame``)."""


class Lowering(Generic[R]):
    """One compilation: the dialect, the plan and its CTI replay, and the relations built so
    far. A backend's compiler subclasses it with ``rule``, its dispatch on the node class,
    and ``executor``, its name in errors."""

    executor = "a DataFrame executor"

    def __init__(self, d: Dialect, query: Query, replay: CtiReplay, spans: Mapping[str, Callable[[], Span | None]] | None = None) -> None:
        """``spans``: how to take where each input read column by column lies in time (a
        ``Span``), when a join asks."""
        self.d, self.query, self.replay = d, query, replay
        self.spans = dict(spans or {})
        self.built: dict[int, R] = {}
        self.planned: dict[int, tuple[p.Node, str]] = {}

    def rule(self, node: p.Node) -> R:
        """``node``'s relation, built by the backend's rule for its class."""
        raise NotImplementedError

    def relation(self, node: p.Node) -> R:
        cached = self.built.get(id(node))
        if cached is None:
            cached = self.built[id(node)] = self.rule(node)
        return cached

    def plan(self, node: p.Node, choice: str) -> None:
        """Record the strategy ``tempo.lowering.physical`` chose for ``node``."""
        self.planned[id(node)] = (node, choice)

    def physical_plan(self) -> str:
        """The strategies chosen, one node a line (``explain``), or a line saying there were
        none to choose."""
        if not self.planned:
            return "(no operator with a choice of strategy)"
        return "\n".join(f"{node.describe()}: {choice}" for node, choice in self.planned.values())

    def span(self, node: p.Node) -> Span | None:
        """Where ``node``'s lifetimes lie, when they are those of an input read column by
        column (``Query.lifetimes_of``)."""
        source = self.query.lifetimes_of(node)
        taken = None if source is None else self.spans.get(source.name)
        if source is None or taken is None or (span := taken()) is None:
            return None
        return span.admitting(self.replay.latest_finite_cti(source.name))

    def final_cti(self, node: p.Node) -> int:
        """The last CTI ``node`` forwards (``NEG_INF`` if none)."""
        ctis = self.replay.ctis_of(node)
        return ctis[-1] if ctis else NEG_INF

    def final_bound(self, node: p.Node) -> int:
        """The latest final CTI of ``node``: its own, or one of its substream keys'."""
        return max(self.final_cti(node), *self.replay.key_ctis_of(node).values(), NEG_INF)

    def output(self) -> R:
        """The query's released events: those its final output CTI (or its key's) passed."""
        released = self.released()
        out = self.relation(self.query.root)
        if released is None:
            return out
        filtered: R = self.d.filter(out, released)
        return filtered

    def released(self) -> Expr | None:
        """The release rule on the output's rows (``tempo.runtime.release``): its start before
        the final output CTI, or its substream key's where that is later; None when the CTI
        is at infinity and releases every row (every relation's events start before it:
        inputs reject a start there, and operators drop what moves there)."""
        d, root = self.d, self.query.root
        cti = self.final_cti(root)
        if cti >= INF:
            return None
        bound: Any = d.lit(cti)
        key = self.query.substream_key(root)
        ahead = {k: t for k, t in self.replay.key_ctis_of(root).items() if t > cti}
        if key is not None and ahead:
            column = d.expression(key)
            bound = d.cases([(d.is_null(column) if k is None else column == d.lit(k), d.lit(t)) for k, t in ahead.items()], bound)
        return d.col(START) < bound
