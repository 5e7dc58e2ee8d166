"""What a DataFrame backend supplies for the shared lowering: ``Dialect``.

The rules of ``tempo.lowering`` are written once over it. A backend's column expressions
(polars ``Expr``, Spark ``Column``) already share arithmetic, comparisons, ``& | ~`` and
``.alias``, so the rules use those directly; a primitive is only what the backends spell
differently. Beside the primitives, a backend answers for what only its own compiler knows:
its expressions (``keys``, ``values``, ``projection``), its aggregates (``grouped``,
``pane_merges``) and the one as-of join of the ``CTI`` result stamp (``completing_cti``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from tempo.expr import nodes as x
from tempo.plan import nodes as p

Expr = Any
"""A backend's column expression."""
Relation = Any
"""A backend's relation (a polars ``LazyFrame``, a Spark ``DataFrame``)."""

PaneMerge = tuple[dict[str, Expr], Expr]
"""One aggregate by panes: its columns per pane, by name (``__pa<i>_<j>``), and the window's
value merged from them."""


class Dialect(Protocol):
    """The primitives of one DataFrame backend, and its answers for a plan's expressions and
    aggregates."""

    # ---- column expressions -----------------------------------------------------------------
    def col(self, name: str) -> Expr: ...
    def lit(self, value: int | float | bool | None) -> Expr: ...
    def least(self, *xs: Expr) -> Expr: ...
    def greatest(self, *xs: Expr) -> Expr: ...
    def floor_div(self, x: Expr, by: int) -> Expr:
        """``floor(x / by)`` in 64-bit integers, never through doubles (ticks pass 2**53)."""
        ...

    def when(self, cond: Expr, then: Expr, otherwise: Expr) -> Expr: ...
    def cases(self, branches: Sequence[tuple[Expr, Expr]], otherwise: Expr) -> Expr:
        """The first branch's value whose condition holds, else ``otherwise``: one flat
        conditional, however many branches (nesting ``when`` would make a deep tree)."""
        ...

    def is_null(self, x: Expr) -> Expr: ...
    def min(self, x: Expr) -> Expr: ...
    def max(self, x: Expr) -> Expr: ...

    # ---- relations --------------------------------------------------------------------------
    def select(self, r: Relation, cols: Sequence[Expr | str]) -> Relation: ...
    def with_columns(self, r: Relation, cols: Sequence[Expr]) -> Relation: ...
    def filter(self, r: Relation, cond: Expr) -> Relation: ...
    def explode_range(self, r: Relation, name: str, lo: Expr, hi: Expr, keep: Sequence[str]) -> Relation:
        """One row per integer of ``lo..hi`` (inclusive) as ``name``, with the columns ``keep``.
        Every row must have ``lo <= hi`` (the rules filter first where a row may not): the
        backends differ on the others (Spark counts down, polars gives a null)."""
        ...

    def group_by(self, r: Relation, by: Sequence[str], aggs: Sequence[Expr]) -> Relation: ...
    def scalars(self, r: Relation, aggs: Sequence[Expr]) -> list[Any]:
        """Aggregates of the whole relation, brought to the driver (an action)."""
        ...

    # ---- the plan's expressions and aggregates, as the backend's compiler makes them --------
    def expression(self, e: x.Expr) -> Expr:
        """A tempo expression over the events' payload."""
        ...

    def keys(self, node: p.WindowNode) -> list[Expr]:
        """The node's group keys, aliased ``__key<i>``."""
        ...

    def key_names(self, node: p.WindowNode) -> list[str]: ...
    def values(self, node: p.WindowNode) -> list[Expr]:
        """The columns the node's aggregates read (aliased; ``__v<i>`` and the like)."""
        ...

    def value_names(self, node: p.WindowNode) -> list[str]: ...
    def grouped(self, node: p.WindowNode, rows: Relation, by: list[str], extra: list[Expr]) -> Relation:
        """``rows`` grouped by ``by`` with the node's aggregates as ``__agg<i>`` and ``extra``."""
        ...

    def pane_merges(self, node: p.WindowNode) -> list[PaneMerge] | None:
        """Each aggregate by panes, or None when one does not merge from its panes' values."""
        ...

    def completing_cti(self, node: p.WindowNode, rows: Relation, done: Expr, strict: bool) -> Relation:
        """``rows`` with ``__cti``: the first CTI the node received at or after ``done`` (after
        it, when ``strict``)."""
        ...

    def projection(self, node: p.WindowNode | p.JoinNode, prefixes: tuple[str, ...] = ("",)) -> list[Expr]:
        """The node's projection as aliased columns, each lambda argument's fields read with
        its prefix (a window's ``w.start``/``w.end`` read ``__ws``/``__we``)."""
        ...

    # ---- a live batch computed in bulk (``tempo.lowering.batches``) -------------------------
    def count_rows(self) -> Expr:
        """The number of rows of a group."""
        ...

    def sum(self, x: Expr) -> Expr: ...
    def union(self, a: Relation, b: Relation) -> Relation:
        """The rows of both, columns matched by name, a column missing from one null there."""
        ...

    def explode_windows(self, r: Relation, name: str, lo: Expr, hi: Expr) -> Relation:
        """Each row once per integer of ``lo..hi`` (inclusive) as ``name``, its columns kept, or
        once with ``name`` null where ``lo > hi``."""
        ...

    def batch_position(self, first: Expr) -> Expr:
        """A batch event's ``tempo.runtime.bulk.Position`` from its place ``FIRST``: after every
        event a join side held before the batch, in the merged arrival order."""
        ...

    def is_batch_position(self, position: Expr) -> Expr:
        """Whether a ``Position`` is a batch event's (``batch_position``), not a held one's."""
        ...

    def emission_order(self, pairs: Relation) -> Relation:
        """``pairs`` (start, end, ``__later``, ``__earlier``, payload) with ``FIRST`` in place of
        their push: each pair's place in the join's emission order (start, later, earlier)."""
        ...
