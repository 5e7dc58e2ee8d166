"""What a DataFrame backend supplies for the shared lowering: ``Dialect``.

The rules of ``tempo.lowering`` are written once over it. A backend's column expressions
(polars ``Expr``, Spark ``Column``) already share arithmetic, comparisons, ``& | ~`` and
``.alias``, so the rules use those directly; a primitive is only what the backends spell
differently. Beside the primitives, a backend answers for what only its own compiler knows:
its expressions (``keys``, ``values``, ``projection``), its aggregates (``grouped``,
``itself_over_panes``) and the one as-of join of the ``CTI`` result stamp (``completing_cti``). The
windows the events cut and the analytic node share the window functions over a partition in
order (``over``); the join family (joins, anti-joins, ``followed_by``, clip) has its own block
of primitives: lists of time buckets, a join side and the pairs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from tempo.expr import nodes as x
from tempo.plan import nodes as p

Expr = Any
"""A backend's column expression."""
Relation = Any
"""A backend's relation (a polars ``LazyFrame``, a Spark ``DataFrame``)."""

PaneMerge = tuple[dict[str, Expr], Expr]
"""One aggregate by panes: its columns per pane, by name (``__pa<i>_<j>``), and the window's
value merged from them."""


class WindowFunction(enum.Enum):
    """A value computed for each row from the rows of its partition (``Dialect.over``)."""

    PREVIOUS = "the value on the row before, in order (null on the first)"
    NEXT = "the value on the row after, in order (null on the last)"
    MAX_BEFORE = "the greatest value on the rows before, in order (null on the first)"
    SUM_SO_FAR = "the sum of the values on the rows up to this one, in order, itself included"
    ROW_NUMBER = "the row's place in order, from 0"
    MIN = "the least value of the partition"
    MAX = "the greatest value of the partition"
    # the analytic node's (tempo.lowering.analytics): a row's peers are the rows equal to it on
    # every order column, the first of which is never null
    BEFORE_PEERS = "the value on the last row before the row's peers, in order (null on the first peers)"
    RUNNING = "an aggregate of the values on the rows up to the row's peers, in order, themselves included"


class Windowed(NamedTuple):
    """A column ``name``: ``function`` of ``of``, an expression over the relation's columns
    (none for ``ROW_NUMBER``; for ``RUNNING``, the ``aggregate``'s argument as
    ``Dialect.running_argument`` gives it)."""

    name: str
    function: WindowFunction
    of: Expr = None
    aggregate: p.Aggregate | None = None


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
    def as_double(self, x: Expr) -> Expr: ...

    # ---- aggregates over a group's rows -----------------------------------------------------
    def min(self, x: Expr) -> Expr: ...
    def max(self, x: Expr) -> Expr: ...
    def sum(self, x: Expr) -> Expr: ...
    def count(self) -> Expr:
        """The number of rows, a 64-bit integer."""
        ...

    def count_of(self, x: Expr) -> Expr:
        """The number of rows where ``x`` is not null."""
        ...

    def itself_over_panes(self, a: p.Aggregate) -> tuple[Callable[[Expr], Expr], Callable[[Expr], Expr]] | None:
        """For an aggregate whose value over a window is itself again over its panes' values
        (a sum, a min, a max), the aggregate of its argument's column over a pane's rows and
        the window's from the panes' column; None where the backend does not merge it so
        (``tempo.lowering.windows.pane_merges``)."""
        ...

    # ---- relations --------------------------------------------------------------------------
    def select(self, r: Relation, cols: Sequence[Expr | str]) -> Relation: ...
    def with_columns(self, r: Relation, cols: Sequence[Expr]) -> Relation:
        """``r`` with the new columns ``cols`` (names not in ``r``: Spark would keep both)."""
        ...

    def filter(self, r: Relation, cond: Expr) -> Relation: ...
    def explode_range(self, r: Relation, name: str, lo: Expr, hi: Expr, keep: Sequence[str]) -> Relation:
        """One row per integer of ``lo..hi`` (inclusive) as ``name``, with the columns ``keep``.
        Every row must have ``lo <= hi`` (the rules filter first where a row may not): the
        backends differ on the others (Spark counts down, polars gives a null)."""
        ...

    def no_rows(self, r: Relation, payload_type: type) -> Relation:
        """A relation of ``r``'s kind without rows: the lifetime columns and the fields of
        ``payload_type``, typed as a node's output of that payload is."""
        ...

    def union(self, a: Relation, b: Relation) -> Relation:
        """The rows of both, columns matched by name, a column missing from one null there."""
        ...

    def group_by(self, r: Relation, by: Sequence[str], aggs: Sequence[Expr]) -> Relation: ...
    def scalars(self, r: Relation, aggs: Sequence[Expr]) -> list[Any]:
        """Aggregates of the whole relation, brought to the driver (an action)."""
        ...

    # ---- the plan's expressions and aggregates, as the backend's compiler makes them --------
    def expression(self, e: x.Expr) -> Expr:
        """A tempo expression over the events' payload."""
        ...

    def keys(self, node: p.WindowNode | p.AnalyticNode | p.ClipNode) -> list[Expr]:
        """The node's group keys, aliased ``__key<i>``."""
        ...

    def key_names(self, node: p.WindowNode | p.AnalyticNode | p.ClipNode) -> list[str]: ...
    def values(self, node: p.WindowNode) -> list[Expr]:
        """The columns the node's aggregates read (aliased; ``__v<i>`` and the like)."""
        ...

    def value_names(self, node: p.WindowNode) -> list[str]: ...
    def grouped(self, node: p.WindowNode, rows: Relation, by: list[str], extra: list[Expr]) -> Relation:
        """``rows`` grouped by ``by`` with the node's aggregates as ``__agg<i>`` and ``extra``."""
        ...

    def completing_cti(self, node: p.WindowNode, rows: Relation, done: Expr, strict: bool) -> Relation:
        """``rows`` with ``__cti``: the first CTI the node received at or after ``done`` (after
        it, when ``strict``)."""
        ...

    def projection(
        self, node: p.WindowNode | p.JoinNode | p.AnalyticNode | p.FollowedByNode, prefixes: tuple[str, ...] = ("",)
    ) -> list[Expr]:
        """The node's projection as aliased columns, each lambda argument's fields read with
        its prefix (a window's ``w.start``/``w.end`` read ``__ws``/``__we``)."""
        ...

    # ---- windows cut by the events (tempo.lowering.event_windows) ---------------------------
    def field(self, name: str) -> Expr:
        """A payload field's column (Spark parses a name: it is quoted)."""
        ...

    def floor_mod(self, x: Expr, by: int) -> Expr:
        """``x - floor(x / by) * by`` in 64-bit integers, for ``by > 0``."""
        ...

    def distinct(self, r: Relation) -> Relation: ...
    def in_order(self, r: Relation, order: Sequence[str]) -> Relation:
        """``r`` ready for window functions in ``order`` (``over``): the columns ascending,
        nulls first. Polars sorts the rows, as its window functions read a partition's rows
        in the frame's order; Spark keeps ``r`` as it is, as each window orders its partition."""
        ...

    def over(self, r: Relation, by: Sequence[str], order: Sequence[str], columns: Sequence[Windowed]) -> Relation:
        """``r`` with the ``columns``, in turn (each may read those before it), each computed
        per partition of the columns ``by`` (one partition without any) in ``order``; rows
        equal on it in no given order. ``r`` is ``in_order(order)`` (or of the partition
        columns, then ``order``), unless ``order`` is empty: every function is then of the
        whole partition."""
        ...

    def join_on_keys(self, r: Relation, other: Relation, keys: Sequence[str], condition: Expr) -> Relation:
        """The pairs of rows of ``r`` and ``other`` equal on the columns ``keys`` (a null
        equal to a null; every pair without keys) for which ``condition`` holds, with ``r``'s
        columns and ``other``'s but its keys (the two share no other name)."""
        ...

    # ---- the analytic node (tempo.lowering.analytics) ---------------------------------------
    def running_argument(self, a: p.Aggregate, payload_type: type) -> Expr:
        """A running aggregate's argument over the events' payload (of type ``payload_type``),
        as the backend's ``RUNNING`` reads it; a null for one without an argument."""

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

    def first_by(self, r: Relation, by: str, order: Sequence[str]) -> Relation:
        """For each value of ``by``, the row of ``r`` least in ``order`` (ascending, nulls
        first)."""
        ...

    def carried(self, r: Relation) -> list[Expr]:
        """The columns of ``r`` that ride along the operators that keep their events' rows (a
        live batch's arrival places: ``tempo.runtime.bulk``), none when it has none."""

    # ---- a live batch computed in bulk (``tempo.lowering.batches``) -------------------------
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
