"""The join rules of the DataFrame backends written once over ``Dialect``: the temporal join
(its pairs found as ``tempo.lowering.physical`` plans, each the intersection of its two
lifetimes) and the left anti semi join. The semantics and CTI rules are ``JoinNode``'s and
``AntiJoinNode``'s (``tempo/plan/nodes.py``); the reference is ``tempo.runtime.joins``
(``Join``, ``AntiJoin``)."""

from __future__ import annotations

from typing import Any

from tempo.expr.schema import field_names
from tempo.lowering import physical
from tempo.lowering.context import END as E
from tempo.lowering.context import START as S
from tempo.lowering.context import Lowering, R
from tempo.lowering.dialect import Expr, Relation, WindowFunction, Windowed
from tempo.lowering.physical import LONG_BUCKET, SPAN_BUCKETS, TimeBuckets
from tempo.lowering.rules import lowers
from tempo.plan import nodes as p
from tempo.ticks import INF


def payload(c: Lowering[Any], node: p.Node, prefix: str = "") -> list[Expr]:
    """``node``'s payload fields as columns named as the fields, read with ``prefix``."""
    d = c.d
    return [d.col(f"{prefix}{n}").alias(n) if prefix else d.col(n) for n in field_names(node.payload_type)]


@lowers(p.JoinNode)
def join(c: Lowering[R], node: p.JoinNode) -> R:
    """Overlapping matching pairs (``overlapping_pairs``), each the intersection of its two
    lifetimes (``intersections``)."""
    return intersections(c, node, overlapping_pairs(c, node))


def overlapping_pairs(c: Lowering[R], node: p.JoinNode, also: Expr | None = None) -> R:
    """The pairs of the join's inputs (their columns prefixed ``__l_`` and ``__r_``) whose
    lifetimes overlap and which meet its keys, its residual and ``also``: on the time buckets
    ``physical.join_buckets`` plans, each pair kept in one bucket only, or on the keys alone."""
    d = c.d
    ls, le, rs, re = d.col(f"__l_{S}"), d.col(f"__l_{E}"), d.col(f"__r_{S}"), d.col(f"__r_{E}")
    condition = (ls < re) & (rs < le)
    if also is not None:
        condition = condition & also
    inputs = c.relation(node.left), c.relation(node.right)
    plan = physical.join_buckets(c.query, node, c.span, lambda side: median_length(c, side))
    c.plan(node, plan.describe() if plan is not None else "on the keys alone" if node.keys else "every pair (no keys)")
    if plan is None:
        found: R = d.pairs(node, d.join_side(inputs[0], "__l_"), d.join_side(inputs[1], "__r_"), condition=condition)
        return found
    if not plan.found_once:  # a pair may meet in several buckets: the one of its output start
        bucket = d.col("__l_bucket")
        first = bucket == d.floor_div(d.greatest(ls, rs), plan.width)
        condition = condition & ((bucket == d.lit(LONG_BUCKET)) | first if plan.long_apart else first)
    left, right = (bucketed(c, plan, side, inputs[side], prefix) for side, prefix in enumerate(("__l_", "__r_")))
    pairs: R = d.pairs(node, left, right, on=[("__l_bucket", "__r_bucket")], condition=condition)
    return pairs


def bucketed(c: Lowering[Any], plan: TimeBuckets, side: int, rows: Relation, prefix: str) -> Relation:
    """One side of a join on time buckets (``TimeBuckets``): each event with the buckets it
    lists as ``{prefix}bucket``."""
    d = c.d
    start, end, long = d.col(S), d.col(E), d.lit(LONG_BUCKET)

    def bucket(t: Expr) -> Expr:
        return d.floor_div(t, plan.width)

    if side == plan.unbounded and plan.cut is not None:  # events wholly outside the cut meet nothing: no bucket
        first, last = plan.cut
        listed = d.int_range_list(bucket(d.greatest(start, d.lit(first))), bucket(d.least(end, d.lit(last)) - d.lit(1)))
        return d.join_side(rows, prefix, buckets=listed, where=(start < d.lit(last)) & (end > d.lit(first)))
    if plan.points[side]:  # a point is in one bucket
        own = bucket(start)
        return d.join_side(rows, prefix, buckets=d.list_of(own, long)) if plan.long_apart else d.join_side(rows, prefix, own)
    lo, hi = bucket(start), bucket(d.least(end, d.lit(INF)) - d.lit(1))
    if side == plan.unbounded:  # not cut: its long events apart
        return d.join_side(rows, prefix, buckets=d.when(hi - lo < d.lit(SPAN_BUCKETS), d.int_range_list(lo, hi), d.list_of(long)))
    listed = d.int_range_list(lo, hi)
    return d.join_side(rows, prefix, buckets=d.concat_lists(listed, d.list_of(long)) if plan.long_apart else listed)


def median_length(c: Lowering[Any], node: p.Node) -> int | None:
    """The median length of ``node``'s lifetimes that end (an action), None when none does."""
    d = c.d
    finite = d.filter(c.relation(node), d.col(E) < d.lit(INF))
    median = d.scalars(finite, [d.median(d.col(E) - d.col(S))])[0]
    return None if median is None else int(median)


def intersections(c: Lowering[R], node: p.JoinNode, pairs: R) -> R:
    """Each overlapping matching pair (the sides' columns prefixed ``__l_`` and ``__r_``) as
    the intersection of the two lifetimes, once the join's final CTI passed its start.

    An end is known for a side whose event closed; the output end is the earlier known end
    if the other side (still open) has a CTI at or past it, else it stays open, exactly as
    the in-memory join decides when to send the end edge."""
    d = c.d
    ls, le, rs, re = d.col(f"__l_{S}"), d.col(f"__l_{E}"), d.col(f"__r_{S}"), d.col(f"__r_{E}")
    start, known = d.greatest(ls, rs), d.least(le, re)
    cti_l, cti_r = c.final_cti(node.left), c.final_cti(node.right)
    infinity = d.lit(INF)
    determined = ((le < infinity) | (d.lit(cti_l) >= known)) & ((re < infinity) | (d.lit(cti_r) >= known))
    end = d.when(determined & (known < infinity), known, infinity)
    bound = c.final_bound(node)
    out = d.filter(pairs, start < d.lit(bound)) if bound < INF else pairs  # every start is before infinity
    lifetimes: R = d.select(out, [start.alias(S), end.alias(E), *d.projection(node, ("__l_", "__r_"))])
    return lifetimes


@lowers(p.AntiJoinNode)
def anti_join(c: Lowering[R], node: p.AntiJoinNode) -> R:
    """The uncovered stretches of each left lifetime that start before the final CTI.

    For a left event ``[s, e)``, final output CTI ``c`` and final right CTI ``r`` (at or
    after ``c``): the span ``[lo, hi) = [s, min(e, r))`` minus the union of matching right
    lifetimes, every right event starting before ``r`` being known; the stretches starting
    before ``c`` are released. In the order of the right lifetimes cut to the span, a gap
    opens before each that starts past all those before it, and one more reaches ``hi``
    past them all. A stretch reaching ``r`` before the left event ends is still open, and
    so is one of a left edge never ended cut past the left input's final CTI (its end edge
    could still have come first: ``tempo.runtime.joins.final_end``).
    """
    d = c.d
    cti, left_cti, right_cti = c.final_cti(node), c.final_cti(node.left), c.final_cti(node.right)
    lefts = d.filter(c.relation(node.left), d.col(S) < d.lit(cti))
    span = [d.row_id().alias("__lid"), d.col(S).alias("__lo"), d.least(d.col(E), d.lit(right_cti)).alias("__hi")]
    left = d.filter(d.join_side(lefts, "__l_", extra=span), d.col("__lo") < d.col("__hi"))
    rs, re, lo, hi = d.col(f"__r_{S}"), d.col(f"__r_{E}"), d.col("__lo"), d.col("__hi")
    # A right event starting at the right CTI itself (``rs == hi``) covers nothing before it
    # but ends the stretch reaching it: no right event can start before it.
    covering = d.pairs(node, left, d.join_side(c.relation(node.right), "__r_"), condition=(rs <= hi) & (re > lo), keep_left="__lid")
    matched = ~d.is_null(rs)  # a left event without a match has one row, its right columns null
    none = d.lit(None)
    cov = d.with_columns(
        covering, [d.when(matched, d.greatest(rs, lo), none).alias("__cs"), d.when(matched, d.least(re, hi), none).alias("__ce")]
    )
    by, order = ["__lid"], ["__cs", "__ce"]
    cov = d.over(
        d.in_order(cov, [*by, *order]),
        by,
        order,
        [
            Windowed("__cut", WindowFunction.MAX, d.coalesce(rs == hi, d.lit(False))),
            Windowed("__ends_before", WindowFunction.MAX_BEFORE, d.col("__ce")),
            Windowed("__last_end", WindowFunction.MAX, d.col("__ce")),
            Windowed("__row", WindowFunction.ROW_NUMBER),
        ],
    )
    cov = d.with_columns(
        cov,
        [
            d.greatest(lo, d.coalesce(d.col("__ends_before"), lo)).alias("__prev"),
            d.greatest(lo, d.coalesce(d.col("__last_end"), lo)).alias("__total"),
            (d.col("__row") == d.lit(0)).alias("__first"),
        ],
    )
    kept = [d.col(f"__l_{E}").alias("__le"), hi, d.col("__cut"), *payload(c, node, "__l_")]
    inner = d.select(d.filter(cov, d.col("__cs") > d.col("__prev")), [d.col("__prev").alias("__gs"), d.col("__cs").alias("__ge"), *kept])
    tail = d.select(d.filter(cov, d.col("__first") & (d.col("__total") < hi)), [d.col("__total").alias("__gs"), hi.alias("__ge"), *kept])
    gaps = d.filter(d.union(inner, tail), d.col("__gs") < d.lit(cti))
    ge, le = d.col("__ge"), d.col("__le")
    left_may_end_first = (le >= d.lit(INF)) & (d.lit(left_cti) < ge)
    still_open = ((ge == hi) & ~(le <= d.lit(right_cti)) & ~d.col("__cut")) | left_may_end_first
    out: R = d.select(gaps, [d.col("__gs").alias(S), d.when(still_open, d.lit(INF), ge).alias(E), *payload(c, node)])
    return out
