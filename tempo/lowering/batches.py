"""A live query's micro-batch computed in bulk: the rules both batch engines share, written
once over ``Dialect``. The engines are ``tempo.vectorised.batches`` (polars on the driver)
and ``tempo.spark.streaming.bulk`` (Spark jobs); each reads its rows and sends them back
its own way (polars frames in process; Spark's jobs, with their speculation and caching).
The rules of the bulk batch itself (which rows are admitted, which pairs a join makes and
in what order they go out, how the partials go into the engine) are ``tempo.runtime.bulk``'s;
here they become relations:

* ``window_partials``: the window's partial aggregates per window and group, and on the
  driver ``read_partials``: those rows as ``tempo.runtime.bulk.Partial`` tuples;
* ``renamed_events``: the events unions rename, counted with the partials;
* the join's batch (``JoinBefore`` states the rule): ``join_side``, ``still_held``,
  ``fresh_pair``, ``placed_pairs``, ``released``, ``released_pairs``, ``window_input``.

An event's place in the order the window receives the batch's events (``FIRST``) and a
join input event's ``Position`` (``POSITION``) are encoded by the dialect (structs on
Spark, integer ranks on polars); the rules only compare them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from tempo.expr.schema import field_names
from tempo.lowering.context import END as E
from tempo.lowering.context import START as S
from tempo.lowering.context import Lowering, R
from tempo.lowering.dialect import Dialect, Expr, Relation
from tempo.lowering.windows import pane_merges
from tempo.plan import nodes as p
from tempo.plan.windows import HoppingWindow
from tempo.runtime.bulk import Partial
from tempo.runtime.windows import Window as WindowOperator
from tempo.ticks import INF

FIRST = "__tempo_first"
"""A column riding along the stateless operators and unions: an event's place in the order
the window receives the batch's events, the merged arrival order (arrival, input, order)
for the inputs' events, the join's emission order for its pairs."""
POSITION = "__tempo_position"
"""A join input event's ``tempo.runtime.bulk.Position``: where the join received it."""
RENAME = "__tempo_rename"
"""A column of ``renamed_events``' rows."""

Found = tuple[list[Partial], int | None, int]
"""The window's partials, the latest time it sees and the events renamed by unions."""


# ---- the window's partial aggregates ---------------------------------------------------------


def partial_parts(d: Dialect, window: p.WindowNode) -> list[tuple[str, Expr]]:
    """Per aggregate with an argument, its partial values over a group of events as named
    columns: an average's total and count of values (``__a<i>``, ``__c<i>``), else its sum
    (exact for integers), min or max (``__a<i>``). They are the aggregate's pane columns
    (``tempo.lowering.windows.pane_merges``): a window's value merges from any parts of it as from its
    panes."""
    merges = pane_merges(d, window) if window.aggregates else []
    assert merges is not None, "bulk_shape takes only aggregates that merge"
    parts: list[tuple[str, Expr]] = []
    for i, (a, (columns, _)) in enumerate(zip(window.aggregates, merges)):
        if a.arg is not None:
            parts += [(name, columns[f"__pa{i}_{j}"]) for j, name in enumerate(_partial_names(i, a))]
    return parts


def _partial_names(i: int, a: p.Aggregate) -> list[str]:
    return [f"__a{i}", f"__c{i}"] if a.kind is p.AggregateKind.AVG else [f"__a{i}"]


def partial_columns(window: p.WindowNode) -> list[str]:
    """The columns of ``window_partials``' rows holding the aggregates' partial values."""
    return [name for i, a in enumerate(window.aggregates) if a.arg is not None for name in _partial_names(i, a)]


def partial_aggregates(d: Dialect, window: p.WindowNode) -> list[Expr]:
    """The partial aggregates of a group of the window's input events (with their keys
    ``__key<i>`` and the aggregates' arguments ``__v<i>``: ``partial_spans``): the count
    (``__n``), the first place (``__first``) and the aggregates' partial values
    (``partial_parts``)."""
    return [
        d.count().alias("__n"),
        d.min(d.col(FIRST)).alias("__first"),
        *[part.alias(name) for name, part in partial_parts(d, window)],
    ]


def latest_times(d: Dialect) -> list[Expr]:
    """The latest start and end of a group of events (``__smax``, ``__emax``): the latest
    time the window operator sees of them."""
    return [d.max(d.col(S)).alias("__smax"), d.max(d.col(E)).alias("__emax")]


def widest(d: Dialect) -> Expr:
    """The most windows past its first that an event of a group of ``partial_spans`` spans
    (``__span``)."""
    return d.max(d.col("__khi") - d.col("__klo")).alias("__span")


def partial_spans(d: Dialect, window: p.WindowNode, events: Relation) -> Relation:
    """The window's input ``events`` (start, end, first place ``FIRST``, payload) with the
    first and last hopping window each overlaps (``__klo``, ``__khi``), its group keys and
    the aggregates' arguments (exact integers for sums: the engine's state keeps them so)."""
    spec = window.spec
    assert isinstance(spec, HoppingWindow)
    k_lo, k_hi = spec.first_window(d.col(S), d.floor_div), spec.last_window(d.col(E), d.floor_div)
    return d.select(
        events, [d.col(S), d.col(E), d.col(FIRST), k_lo.alias("__klo"), k_hi.alias("__khi"), *d.keys(window), *d.values(window)]
    )


def window_partials(d: Dialect, window: p.WindowNode, spans: Relation, renames: Relation | None = None, latest: bool = True) -> Relation:
    """A hopping window's partial aggregates over its events ``spans`` (``partial_spans``):
    a row per window (``__k``) and group (``__key0``, ...) with ``partial_aggregates``'
    columns. Float keys group as both backends group them, every NaN together and -0.0 with
    0.0; ``apply_batch`` keys them as the engine does (``grouped_key``).

    ``latest``: also the group's ``latest_times`` and ``widest`` span, read with the rows
    (Spark's one job). An event in no window (a gap between hopping windows) still counts
    for the operator's latest time, so it goes to a window null; an event spanning
    ``EAGER_WINDOWS`` windows or more sends the batch item by item (``refused``), so it is
    listed in that many windows only (the rows are not read, and an event reaching infinity
    would list more than any memory holds). Without ``latest``, the engine reads those over
    ``spans`` first (polars, in process, refusing a batch before it lists any window) and an
    event in no window is in no row.

    ``renames`` (``renamed_events``): rows of their own in the group of no window, summed
    as ``__renamed``."""
    lo, hi = d.col("__klo"), d.col("__khi")
    aggs = partial_aggregates(d, window)
    if latest:
        exploded = d.explode_windows(spans, "__k", lo, d.least(hi, lo + d.lit(WindowOperator.EAGER_WINDOWS)))
        aggs = [widest(d), *aggs, *latest_times(d)]
    else:
        keep = [FIRST, *d.key_names(window), *d.value_names(window)]
        exploded = d.explode_range(d.filter(spans, lo <= hi), "__k", lo, hi, keep)
    if renames is not None:
        exploded = d.union(exploded, renames)
        aggs.append(d.sum(d.col(RENAME)).alias("__renamed"))
    return d.group_by(exploded, ["__k", *d.key_names(window)], aggs)


def renamed_events(c: Lowering[R], below: p.Node) -> R | None:
    """A row (``RENAME``) per event of the batch that a union below ``below`` takes on its
    second input, where it gets a fresh event id, whatever later operators do with it; None
    without unions there. With its place in the merged order, for ``window_partials`` to
    count them with the partials in one job: a null one would not fit the partials' column
    of first places (Spark's struct fields are not nullable)."""
    d = c.d
    rows: R | None = None
    for node in below.subtree():
        if isinstance(node, p.UnionNode):
            taken = d.select(c.relation(node.right), [d.col(FIRST), d.lit(1).alias(RENAME)])
            rows = taken if rows is None else d.union(rows, taken)
    return rows


def read_partials(
    window: p.WindowNode, col: Mapping[str, Sequence[Any]], firsts: Sequence[Any], latest: Sequence[Any] | None = None, renamed: int = 0
) -> Found | None:
    """``window_partials``' rows, brought to the driver as columns ``col`` (``firsts``: the
    column ``__first`` as Python values that compare as the places do), as
    ``tempo.runtime.bulk.apply_batch`` takes them: the partials of the rows of a window
    (``Partial``), the latest time the window operator sees, and the events renamed by
    unions; None when the batch goes item by item (``refused``). ``latest``: the widest
    span and the latest start and end over all the events (``widest``, ``latest_times``),
    when the engine read them there rather than per row; ``renamed``: the events renamed by
    unions when counted apart from the rows (their ``__renamed``)."""
    if "__renamed" in col:
        renamed += sum(r for r in col["__renamed"] if r is not None)
    span, s_max, e_max = latest if latest is not None else (_greatest(col["__span"]), _greatest(col["__smax"]), _greatest(col["__emax"]))
    if e_max is None:  # no events (but renamed ones, in a row of their own)
        return [], None, renamed
    if refused(span, e_max):
        return None
    keys = [col[f"__key{i}"] for i in range(len(window.keys or ()))]
    rows = zip(col["__k"], zip(*keys) if keys else itertools.repeat(()), firsts, col["__n"], partial_values(window, col))
    # Events in no window count only for the latest time.
    partials: list[Partial] = [row for row in rows if row[0] is not None] if None in col["__k"] else list(rows)
    return partials, max(s_max, e_max), renamed


def refused(span: int | None, e_max: int | None) -> bool:
    """Whether a batch whose events span at most ``span`` windows past their first and end
    by ``e_max`` goes item by item: one spans ``EAGER_WINDOWS`` windows or more (the window
    operator keeps those aside) or reaches infinity."""
    return e_max is not None and ((span or 0) >= WindowOperator.EAGER_WINDOWS or e_max >= INF)


def _greatest(values: Sequence[Any]) -> Any:
    """The greatest of ``values`` but None, or None."""
    if None in values:
        return max((v for v in values if v is not None), default=None)
    return max(values, default=None)


def partial_values(window: p.WindowNode, col: Mapping[str, Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Per row of ``window_partials`` (given as columns ``col``), the aggregates' partial
    values as ``Accumulator.merge`` takes them: per aggregate with an argument, its sum, min
    or max (an exact integer sum as an int), or for an average (total, count of values)."""
    rows = len(col["__n"])
    parts: list[Sequence[Any]] = []
    for i, a in enumerate(window.aggregates):
        if a.arg is None:
            continue
        total = col[f"__a{i}"]
        if a.wide_integers and isinstance(next((t for t in total if t is not None), None), Decimal):  # Spark sums exactly as Decimals
            total = [None if t is None else int(t) for t in total]
        if a.kind is p.AggregateKind.AVG:
            parts.append([(t if n else 0, n) for t, n in zip(total, col[f"__c{i}"])])
        else:
            parts.append(total)
    return list(zip(*parts)) if parts else [()] * rows


# ---- the join's batch ------------------------------------------------------------------------


def join_side(c: Lowering[R], node: p.Node) -> R:
    """The batch's events of a join input ``node`` (its relation over the batch's events):
    start, end, their ``Position`` (``POSITION``, made from ``FIRST``) and payload. The
    engine adds the events the side held before the batch (``JoinBefore.sides``) at their
    positions, then finds the pairs (``fresh_pair``)."""
    d = c.d
    payload = [d.col(n) for n in field_names(node.payload_type)]
    side: R = d.select(c.relation(node), [d.col(S), d.col(E), d.batch_position(d.col(FIRST)).alias(POSITION), *payload])
    return side


def still_held(d: Dialect, side: Relation, other_cti: int) -> Relation:
    """The batch's events of a join side (``join_side``) that it still holds after the batch:
    those ending after the other side's CTI (``JoinBefore.ctis``), which later events may
    still overlap (``JoinAfter.held``)."""
    return d.filter(side, d.col(E) > d.lit(other_cti))


def fresh_pair(d: Dialect) -> Expr:
    """Whether a pair of the join's sides (columns prefixed ``__l_`` and ``__r_``) holds an
    event of the batch: two events held before it were paired before."""
    return d.is_batch_position(d.col(f"__l_{POSITION}")) | d.is_batch_position(d.col(f"__r_{POSITION}"))


def placed_pairs(d: Dialect, pairs: Relation) -> Relation:
    """The batch's matching overlapping pairs with their output start (``__start``) and their
    push (``JoinBefore``): the later and the earlier of the two events' positions
    (``__later``, ``__earlier``)."""
    lpos, rpos = d.col(f"__l_{POSITION}"), d.col(f"__r_{POSITION}")
    return d.with_columns(
        pairs,
        [
            d.greatest(d.col(f"__l_{S}"), d.col(f"__r_{S}")).alias("__start"),
            d.greatest(lpos, rpos).alias("__later"),
            d.least(lpos, rpos).alias("__earlier"),
        ],
    )


def released(d: Dialect, out_cti: int) -> Expr:
    """Whether a pair of ``placed_pairs`` goes out with the batch: it starts before the
    join's output CTI after the batch (``JoinBefore.out_cti``); the others still wait."""
    return d.col("__start") < d.lit(out_cti)


def released_pairs(c: Lowering[R], join: p.JoinNode, pairs: R, out_cti: int) -> R:
    """The pairs of ``placed_pairs`` the batch releases as the join emits them: the
    intersection of the two lifetimes (both ends known: the inputs' events are points and
    intervals), the push, the join's projection."""
    d = c.d
    end = d.least(d.col(f"__l_{E}"), d.col(f"__r_{E}"))
    kept = d.filter(pairs, released(d, out_cti))
    pushed: R = d.select(
        kept, [d.col("__start").alias(S), end.alias(E), d.col("__later"), d.col("__earlier"), *d.projection(join, ("__l_", "__r_"))]
    )
    return pushed


def window_input(d: Dialect, released_before: Relation, released_now: Relation) -> Relation:
    """What the window receives from the join: the waiting pairs the batch releases
    (``released_before``: start, end, their push as ``released_key`` makes it, output
    payload), then the batch's own (``released_pairs``), each in emission order, (start,
    later, earlier), as the window's ``FIRST`` (``Dialect.emission_order``)."""
    return d.emission_order(d.union(released_before, released_now))
