"""What a DataFrame backend supplies for the shared lowering: ``Dialect``.

The rules of ``tempo.lowering`` are written once over it. A backend's column expressions
(polars ``Expr``, Spark ``Column``) already share arithmetic, comparisons, ``& | ~`` and
``.alias``, so the rules use those directly; a primitive is only what the backends spell
differently. Beside the primitives, a backend answers for what only its own compiler knows:
its expressions (``keys``, ``values``, ``projection``), its aggregates (``grouped``,
``pane_merges``) and the one as-of join of the ``CTI`` result stamp (``completing_cti``). The
join family (joins, anti-joins, ``followed_by``, clip) has its own block of primitives: lists
of time buckets, a join side, the pairs, and the window expressions over a group in order.
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

    def projection(self, node: p.WindowNode | p.JoinNode | p.FollowedByNode, prefixes: tuple[str, ...] = ("",)) -> list[Expr]:
        """The node's projection as aliased columns, each lambda argument's fields read with
        its prefix (a window's ``w.start``/``w.end`` read ``__ws``/``__we``)."""
        ...

    # ---- the join family: tempo.lowering.joins, patterns and clip ---------------------------
    def coalesce(self, *xs: Expr) -> Expr: ...
    def median(self, x: Expr) -> Expr:
        """A median of ``x``, as an aggregate; approximate where that is cheaper (it only sizes
        time buckets)."""
        ...

    def row_id(self) -> Expr:
        """A number distinct for each row of the relation it is computed over."""
        ...

    def int_range_list(self, lo: Expr, hi: Expr) -> Expr:
        """The list of the integers ``lo..hi`` (inclusive; ``lo <= hi``)."""
        ...

    def list_of(self, *xs: Expr) -> Expr:
        """The list of these integers."""
        ...

    def concat_lists(self, a: Expr, b: Expr) -> Expr: ...
    def join_side(
        self,
        r: Relation,
        prefix: str,
        bucket: Expr | None = None,
        buckets: Expr | None = None,
        where: Expr | None = None,
        extra: Sequence[Expr] = (),
    ) -> Relation:
        """One side of a join: ``r``'s columns renamed ``prefix + name``, with ``extra``
        (aliased) and ``{prefix}bucket``: the row's time bucket ``bucket``, or a row for each
        element of the list ``buckets``. With ``where``, only the rows where it holds (each
        other meets nothing: with ``buckets``, a backend may list no bucket for it rather than
        filter). The expressions are over ``r``'s own columns; one projection where a backend
        pays for each operation (Spark analyses each)."""
        ...

    def pairs(
        self,
        node: p.MatchingNode,
        left: Relation,
        right: Relation,
        on: Sequence[tuple[str, str]] = (),
        condition: Expr | None = None,
        keep_left: str | None = None,
    ) -> Relation:
        """The pairs of ``left`` and ``right`` (``join_side``'s columns, prefixed ``__l_`` and
        ``__r_``) meeting the node's keys (a null key meets nothing) and residual, equal on each
        pair of columns ``on``, and meeting ``condition``; with ``keep_left`` (a column
        numbering the left rows), each left row without such a pair too, once, its right
        columns null (a left outer join)."""
        ...

    def union(self, a: Relation, b: Relation) -> Relation:
        """The rows of both, their columns by name (the same in both)."""
        ...

    def sorted_for_windows(self, r: Relation, order: Sequence[str]) -> Relation:
        """``r`` sorted by ``order`` where the backend's window expressions (``lead``,
        ``max_before``, ``first_in_order``) read a group's rows in the relation's order
        (polars); ``r`` itself where each window states its order (Spark). A rule calls it
        with an order under which each group's rows are in the windows' order."""
        ...

    def lead(self, x: Expr, by: Sequence[str], order: Sequence[str]) -> Expr:
        """``x`` of the next row of the row's group ``by`` in ``order`` (null for the last)."""
        ...

    def max_before(self, x: Expr, by: Sequence[str], order: Sequence[str]) -> Expr:
        """The greatest ``x`` over the rows before the row in its group ``by`` in ``order``
        (null for the first)."""
        ...

    def first_in_order(self, by: Sequence[str], order: Sequence[str]) -> Expr:
        """Whether the row is the first of its group ``by`` in ``order``."""
        ...

    def over(self, aggregate: Expr, by: Sequence[str]) -> Expr:
        """``aggregate`` (``min``, ``max``) over the row's group ``by``, on each of its rows."""
        ...

    def first_by(self, r: Relation, by: str, order: Sequence[str]) -> Relation:
        """For each value of ``by``, the row of ``r`` least in ``order`` (ascending, nulls
        first)."""
        ...

    def carried(self, r: Relation) -> list[Expr]:
        """The columns of ``r`` that ride along the operators that keep their events' rows (a
        live batch's arrival places: ``tempo.runtime.bulk``), none when it has none."""
        ...
