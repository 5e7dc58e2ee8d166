"""The logical plan to native Spark DataFrames: a visitor keyed by node class.

Every relation has the payload columns of its node's record type plus the lifetime
columns ``__tempo_s`` and ``__tempo_e`` (ticks; ``INF`` for an open end). The in-memory
executor releases an operator's output once the operator's CTI passes it; since CTIs are
known up front (``CtiReplay``), each stateful operator here keeps exactly the outputs its
final CTI has released, and the query keeps the events its final output CTI has passed.
Each compile rule below states how its node's semantics (``tempo/plan/nodes.py``) become
a plan.

Below inputs with substreams, an operator keeping the key releases each key's outputs up to
that key's own final CTI (docs/semantics.md 3.10.4). A stateful operator here then keeps
what the latest of them released (``final_bound``): a key's outputs past its own CTI start
at or after it, so no released output downstream depends on them, and the query's output
keeps exactly each key's released events (``output``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from tempo.dispatch import Registry
from tempo.expr import nodes as x
from tempo.expr.schema import field_names
from tempo.lowering.batches import FIRST
from tempo.lowering.context import Lowering
from tempo.lowering.joins import intersections
from tempo.runtime.replay import CtiReplay
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.spark import windows
from tempo.spark.dialect import SparkDialect
from tempo.spark.columns import EXPRESSIONS, Scope, column, numeric_operands, quoted, record_columns
from tempo.tables import Span, cut_buckets
from tempo.ticks import INF

_RULES: Registry[Compiler, DataFrame] = Registry("Spark", "plan node")
compiles = _RULES.rule


def check_supported(query: Query) -> None:
    """Raise ``UnsupportedError`` if a node or an expression of ``query`` has no rule here:
    called before the CTI replay, which runs the plan on the reference engine and would
    otherwise name that engine rather than this executor."""
    for node in query.nodes:
        _RULES.lookup(node)
        for e in p.node_expressions(node):
            EXPRESSIONS.lookup(e)


class Compiler(Lowering[DataFrame]):
    """One compilation: the admitted inputs, the CTI replay, and the relations built so far."""

    def __init__(
        self,
        spark: SparkSession,
        query: Query,
        replay: CtiReplay,
        inputs: dict[str, DataFrame],
        spans: Mapping[str, Callable[[], Span | None]] | None = None,
    ) -> None:
        """``spans``: how to take where each input the driver read lies in time (``Span``)."""
        super().__init__(SparkDialect(self), query, replay, spans)
        self.spark, self.inputs = spark, inputs

    def rule(self, node: p.Node) -> DataFrame:
        built: DataFrame = _RULES(self, node)
        return built


def _payload(node: p.Node) -> list[Column]:
    return [F.col(f"`{n}`") for n in field_names(node.payload_type)]


@compiles(p.SourceNode)
def _source(c: Compiler, node: p.SourceNode) -> DataFrame:
    return c.inputs[node.name]


@compiles(p.EventTimeNode)
def _event_time(c: Compiler, node: p.EventTimeNode) -> DataFrame:
    return c.relation(node.input)


@compiles(p.WhereNode)
def _where(c: Compiler, node: p.WhereNode) -> DataFrame:
    # A null predicate drops the row, as the in-memory executor's falsy test does.
    return c.relation(node.input).filter(column(node.predicate, Scope()))


def _passengers(df: DataFrame) -> list[Column]:
    """``FIRST``, riding along the stateless operators and unions when present (a live query's
    batch computed in bulk keeps each window's groups in first-arrival order)."""
    return [F.col(FIRST)] if FIRST in df.columns else []


@compiles(p.SelectNode)
def _select(c: Compiler, node: p.SelectNode) -> DataFrame:
    df = c.relation(node.input)
    return df.select(F.col(S), F.col(E), *_passengers(df), *record_columns(node.projection, Scope()))


@compiles(p.ClipNode)
def _clip(c: Compiler, node: p.ClipNode) -> DataFrame:
    """The next later start of the group, over every event (one that arrives after the final
    CTI starts after it and clips nothing released): the ``lead`` in start order, which within
    a run of equal starts is that start but for the run's last row; so the least ``lead``
    later than the start over the run. (A range frame to the group's end would do it in one
    window, but Spark recomputes such a frame for every row: quadratic in a group's events.)
    The clipped end counts once the final CTI is past it, else the result stays open, as the
    in-memory start edge not yet ended. Only the events the final CTI passed go out."""
    df = c.relation(node.input)
    cti = c.final_cti(node.input)
    keys = [column(k, Scope()).alias(f"__key{i}") for i, k in enumerate(node.keys or ())]
    names = [f"__key{i}" for i in range(len(keys))]
    df = df.select("*", *keys)
    following = F.lead(F.col(S)).over(Window.partitionBy(*names).orderBy(F.col(S)))
    df = df.withColumn("__next", F.when(following > F.col(S), following))
    later = F.min("__next").over(Window.partitionBy(*names, S))
    clipped = F.least(F.col(E), F.coalesce(later, F.lit(INF)))
    end = F.when(clipped < F.lit(cti), clipped).otherwise(F.lit(INF)) if cti < INF else clipped
    out = df.select(F.col(S), end.alias(E), *_passengers(df), *_payload(node))
    return out if cti >= INF else out.filter(F.col(S) < F.lit(cti))


@compiles(p.ExplodeNode)
def _explode(c: Compiler, node: p.ExplodeNode) -> DataFrame:
    """``posexplode`` of the list column (no rows for an empty or null list), each row keeping
    the lifetime; the projection reads the element as ``__item``."""
    df = c.relation(node.input)
    payload = [F.col(f"`{n}`") for n in field_names(node.input.payload_type)]
    rows = df.select(F.col(S), F.col(E), *payload, F.posexplode(column(node.items, Scope())).alias("__pos", "__item"))
    return rows.select(F.col(S), F.col(E), *record_columns(node.projection, Scope()))


def _shift(t: Column, d: int) -> Column:
    """Saturating: infinity stays infinity and nothing passes it."""
    return F.when(t >= INF, F.lit(INF)).otherwise(F.least(t + F.lit(d), F.lit(INF)))


@compiles(p.AlterLifetimeNode)
def _alter(c: Compiler, node: p.AlterLifetimeNode) -> DataFrame:
    df = c.relation(node.input)
    start = _shift(F.col(S), node.shift)
    end = _shift(start, node.duration) if node.duration is not None else _shift(F.col(E), node.shift)
    return df.select(start.alias(S), end.alias(E), *_passengers(df), *_payload(node)).filter(F.col(S) < INF)


@compiles(p.UnionNode)
def _union(c: Compiler, node: p.UnionNode) -> DataFrame:
    cols = [F.col(S), F.col(E), *_payload(node)]
    left, right = c.relation(node.left), c.relation(node.right)
    return left.select(*cols, *_passengers(left)).unionByName(right.select(*cols, *_passengers(right)))


@compiles(p.AnalyticNode)
def _analytic(c: Compiler, node: p.AnalyticNode) -> DataFrame:
    """One window over each group in (start, payload) order: running aggregates over the
    range frame up to the current row (peers included), the previous value from ``lag``. A
    peer group's rows lag into each other but for its first row in row order, whose lag is the
    event before the group: a window over the peers spreads that value to them all. Only the
    events the final input CTI released are kept, as the operator passes on no other."""
    df = c.relation(node.input)
    cti = c.final_cti(node.input)
    if cti < INF:
        df = df.filter(F.col(S) < F.lit(cti))
    if not node.analytics and isinstance(node.projection, x.Input):
        return df
    names = field_names(node.input.payload_type)
    payload = [F.col(f"`{n}`") for n in names]
    keys = [column(k, Scope()).alias(f"__key{i}") for i, k in enumerate(node.keys or ())]
    rows = df.select(F.col(S), F.col(E), *payload, *keys)
    key_names = [f"__key{i}" for i in range(len(keys))]
    ordered = Window.partitionBy(*key_names).orderBy(F.col(S), *[F.col(f"`{n}`").asc_nulls_first() for n in names])
    so_far = ordered.rangeBetween(Window.unboundedPreceding, Window.currentRow)
    peer_group = Window.partitionBy(*key_names, S, *[f"`{n}`" for n in names])
    first_of_peers = F.lag(S).over(ordered).isNull() | (F.lag(S).over(ordered) != F.col(S))
    for n in names:
        first_of_peers = first_of_peers | ~F.lag(F.col(f"`{n}`")).over(ordered).eqNullSafe(F.col(f"`{n}`"))
    if any(isinstance(a, p.Previous) for a in node.analytics):
        rows = rows.withColumn("__first", first_of_peers)
    for i, a in enumerate(node.analytics):
        if isinstance(a, p.Previous):
            # Spark allows no window function inside another: the lag is a column first.
            before = F.struct(F.lag(S).over(ordered).alias("s"), F.lag(column(a.arg, Scope())).over(ordered).alias("v"))
            rows = rows.withColumn(f"__before{i}", before)
            prev = F.first(F.when(F.col("__first"), F.col(f"__before{i}")), ignorenulls=True).over(peer_group)
            near = prev["s"].isNotNull() if a.limit is None else prev["s"].isNotNull() & (F.col(S) - prev["s"] < F.lit(a.limit))
            rows = rows.withColumn(f"__agg{i}", F.when(near, prev["v"]))
        else:
            v = F.lit(None) if a.arg is None else windows.argument_column(a, node.input.payload_type)
            rows = rows.withColumn(f"__agg{i}", windows.aggregate_column(a, v, so_far))
    return rows.select(F.col(S), F.col(E), *record_columns(node.projection, Scope()))


@compiles(p.WindowNode)
def _window(c: Compiler, node: p.WindowNode) -> DataFrame:
    """One rule per window kind, and the result timestamps: ``tempo.spark.windows``."""
    return windows.window(c, node)


def join_sides(c: Compiler, node: p.MatchingNode, extra: tuple[str, str] | None = None) -> tuple[DataFrame, DataFrame, Column]:
    """Both inputs with prefixed columns, and the join condition: keys and residual.

    ``extra``: one more column for each side, as SQL over its own (unprefixed) columns, in
    the same projection (Spark analyses one operation, not two)."""
    left = c.relation(node.left)
    right = c.relation(node.right)
    more = ([extra[0]], [extra[1]]) if extra is not None else ([], [])
    left = left.selectExpr(*[f"{quoted(n)} AS {quoted('__l_' + n)}" for n in left.columns], *more[0])  # SQL: one JVM call
    right = right.selectExpr(*[f"{quoted(n)} AS {quoted('__r_' + n)}" for n in right.columns], *more[1])
    scope = Scope(("__l_", "__r_"))
    cond: Column = F.lit(True)
    for a, b in node.keys:
        left_key, right_key = numeric_operands(a, b, column(a, scope), column(b, scope))
        cond = cond & (left_key == right_key)
    if node.residual is not None:
        cond = cond & column(node.residual, scope)
    return left, right, cond


LONG_BUCKET = -(2**63)
"""The time bucket of events too long to list their buckets (no real bucket is this low)."""
SPAN_BUCKETS = 4
"""An event of the unbounded side overlapping more buckets than this is long."""


def overlapping_pairs(c: Compiler, node: p.JoinNode, also: Column | None = None) -> DataFrame:
    """The pairs of the join's inputs (``join_sides``' prefixed columns) whose lifetimes
    overlap and which meet its keys, its residual and ``also``.

    Open-source Spark has no range join: an overlap join is a hash join on the keys (a
    nested loop without them) with the overlap tested on every pair of a key. So when one
    side's lifetimes are bounded (``longest_lifetime``), both sides also join on a **time
    bucket** of width ``W``: each event is listed in every bucket its lifetime overlaps, and
    a pair is kept in the bucket of its output start ``max(l.s, r.s)`` only, which both list,
    so it is found once (a side of points lists one bucket: each pair is found once anyway).
    ``W`` is at least the bounded side's longest lifetime. With both bounded, that is all.

    With one side unbounded, its events are cut to where the bounded side's lie when the
    driver read both inputs (``Compiler.span``): a pair's output start is within the bounded
    event's lifetime, so no other bucket can hold it. ``W`` is also the unbounded side's
    mean finite length, so an event that ends lists about two buckets (a reference table
    joined with readings, say); this applies when the rows listed (``Span.listed``) are at
    most three times the two inputs' rows (open lifetimes cut to a wide span list many).
    Otherwise, without keys, ``W`` is the unbounded side's median length (one small
    aggregate), and its events spanning more than ``SPAN_BUCKETS`` buckets (an open one,
    say) go to one extra bucket, ``LONG_BUCKET``, which every event of the bounded side also
    lists; with keys, the plain hash join on them.
    """
    overlap = F.expr(f"__l_{S} < __r_{E} AND __r_{S} < __l_{E}")  # SQL: one JVM call
    if also is not None:
        overlap = overlap & also

    def unbucketed() -> DataFrame:
        left, right, cond = join_sides(c, node)
        return left.join(right, cond & overlap, "inner")

    bounds = c.query.longest_lifetime(node.left), c.query.longest_lifetime(node.right)
    if bounds == (None, None):
        return unbucketed()
    probe = "__l_" if bounds[0] is not None else "__r_"  # a bounded side
    other = "__r_" if probe == "__l_" else "__l_"
    longest = max(b for b in bounds if b is not None)
    width = max(longest, 1)
    unbounded = None in bounds
    probe_span, other_span = (c.span(node.left), c.span(node.right)) if probe == "__l_" else (c.span(node.right), c.span(node.left))
    cut: tuple[int, int] | None = None  # where the unbounded side's events are cut to
    planned = cut_buckets(probe_span, other_span, longest) if unbounded and probe_span and other_span else None
    if planned is not None:
        width, cut = planned[0], planned[1:]
    if cut is None and unbounded and node.keys:
        # A key's events meet every event of the key, but the extra rows of ``LONG_BUCKET``
        # cost what the buckets save (measured in bench/README.md, "Latest figures", W4 on Spark).
        return unbucketed()
    if cut is None and unbounded:
        side = c.relation(node.right if other == "__r_" else node.left)
        median = side.filter(F.col(E) < INF).agg(F.percentile_approx(F.col(E) - F.col(S), 0.5).alias("m")).collect()[0]["m"]
        width = max(width, median or 1)

    # The bucket columns as SQL text over each side's own columns, added to its prefixing
    # projection: one JVM call and one operation for Spark to analyse per side.
    long_bucket = f"CAST({LONG_BUCKET} AS BIGINT)"

    def bucket(t: str) -> str:
        return f"((({t}) - pmod({t}, {width})) div {width})"  # floor(t / width) in integers

    def listed(prefix: str) -> str:
        s, e = S, f"least({E}, {INF})"
        if prefix == other and cut is not None:
            s, e = f"greatest({s}, {cut[0]})", f"least({e}, {cut[1]})"
        lo, hi = bucket(s), bucket(f"{e} - 1")
        if prefix == other and unbounded and cut is None:
            return f"CASE WHEN {hi} - {lo} < {SPAN_BUCKETS} THEN sequence({lo}, {hi}) ELSE array({long_bucket}) END"
        if prefix == probe and unbounded and cut is None:  # its buckets and the long bucket
            return f"array({lo}, {long_bucket})" if longest == 1 else f"concat(sequence({lo}, {hi}), array({long_bucket}))"
        return f"sequence({lo}, {hi})"

    def buckets(prefix: str) -> str:
        if prefix == probe and longest == 1 and (cut is not None or not unbounded):  # a point is in one bucket
            return f"{bucket(S)} AS {prefix}bucket"
        listing = listed(prefix)
        if prefix == other and cut is not None:  # events wholly outside the cut meet nothing: no bucket
            listing = f"CASE WHEN {S} >= {cut[1]} OR {E} <= {cut[0]} THEN CAST(array() AS ARRAY<BIGINT>) ELSE {listing} END"
        return f"explode({listing}) AS {prefix}bucket"

    left, right, cond = join_sides(c, node, (buckets("__l_"), buckets("__r_")))
    same = "__l_bucket = __r_bucket"
    if longest > 1 or (unbounded and cut is None):  # a pair may meet in several buckets
        same += f" AND (__l_bucket = {long_bucket} OR __l_bucket = {bucket(f'greatest(__l_{S}, __r_{S})')})"
    return left.join(right, cond & overlap & F.expr(same), "inner")


@compiles(p.JoinNode)
def _join(c: Compiler, node: p.JoinNode) -> DataFrame:
    """Overlapping matching pairs (``overlapping_pairs``), each the intersection of its two
    lifetimes (``tempo.lowering.joins.intersections``)."""
    return intersections(c, node, overlapping_pairs(c, node))


@compiles(p.FollowedByNode)
def _followed_by(c: Compiler, node: p.FollowedByNode) -> DataFrame:
    """Each left event with its first following right event: the pairs on the keys and a time
    bucket of width ``within`` (a left start's bucket is the right start's or the one before),
    the band ``a.s < b.s < a.s + within`` and the residual; per left event (an id) the pair of
    least (b.s, b's payload fields) kept; a point at b.s, once the final CTI is past it."""
    left, right, cond = join_sides(c, node)
    ls, rs, w = F.col(f"__l_{S}"), F.col(f"__r_{S}"), F.lit(node.within)
    left = left.withColumn("__lid", F.monotonically_increasing_id()).withColumn("__bucket", F.floor(ls / w).cast("long"))
    own = F.floor(rs / w).cast("long")
    right = right.withColumn("__rbucket", F.explode(F.array(own, own - 1)))
    pairs = left.join(right, cond & (F.col("__bucket") == F.col("__rbucket")) & (ls < rs) & (rs < ls + w), "inner")
    payload = [F.col(f"`__r_{n}`").asc_nulls_first() for n in field_names(node.right.payload_type)]
    first = Window.partitionBy("__lid").orderBy(rs, *payload)
    matched = pairs.withColumn("__rn", F.row_number().over(first)).filter((F.col("__rn") == 1) & (rs < F.lit(c.final_bound(node))))
    return matched.select(rs.alias(S), (rs + 1).alias(E), *record_columns(node.projection, Scope(("__l_", "__r_"))))


@compiles(p.AntiJoinNode)
def _anti_join(c: Compiler, node: p.AntiJoinNode) -> DataFrame:
    """The uncovered stretches of each left lifetime that start before the final CTI.

    For a left event ``[s, e)``, final output CTI ``c`` and final right CTI ``r`` (at or
    after ``c``): the span ``[s, min(e, r))`` minus the union of matching right lifetimes,
    every right event starting before ``r`` being known; the stretches starting before ``c``
    are released. A stretch reaching ``r`` before the left event ends is still open, and so
    is one of a left edge never ended cut past the left input's final CTI (its end edge could
    still have come first: ``tempo.runtime.joins.final_end``).
    """
    left, right, cond = join_sides(c, node)
    cti, left_cti, right_cti = c.final_cti(node), c.final_cti(node.left), c.final_cti(node.right)
    ls, le = F.col(f"__l_{S}"), F.col(f"__l_{E}")
    left = left.filter(ls < F.lit(cti)).withColumn("__lid", F.monotonically_increasing_id())
    left = left.withColumn("__lo", ls).withColumn("__hi", F.least(le, F.lit(right_cti))).filter(F.col("__lo") < F.col("__hi"))
    rs, re = F.col(f"__r_{S}"), F.col(f"__r_{E}")
    # A right event starting at the right CTI itself (``rs == hi``) covers nothing before it
    # but ends the stretch reaching it: no right event can start before it.
    cov = left.join(right, cond & (rs <= F.col("__hi")) & (re > F.col("__lo")), "left")
    cov = cov.withColumn("__cut", F.max(F.coalesce(rs == F.col("__hi"), F.lit(False))).over(Window.partitionBy("__lid")))
    # No match leaves the right columns null (and Spark's greatest/least skip nulls).
    matched = rs.isNotNull()
    cov = cov.withColumn("__cs", F.when(matched, F.greatest(rs, F.col("__lo"))))
    cov = cov.withColumn("__ce", F.when(matched, F.least(re, F.col("__hi"))))
    by_left = Window.partitionBy("__lid").orderBy("__cs", "__ce")
    before = by_left.rowsBetween(Window.unboundedPreceding, -1)
    cov = cov.withColumn("__prev", F.greatest(F.col("__lo"), F.coalesce(F.max("__ce").over(before), F.col("__lo"))))
    cov = cov.withColumn("__total", F.greatest(F.col("__lo"), F.coalesce(F.max("__ce").over(Window.partitionBy("__lid")), F.col("__lo"))))
    cov = cov.withColumn("__rn", F.row_number().over(by_left))
    payload = [F.col(f"`__l_{n}`").alias(n) for n in field_names(node.payload_type)]
    inner = cov.filter(F.col("__cs") > F.col("__prev")).select(
        F.col("__prev").alias("__gs"), F.col("__cs").alias("__ge"), le.alias("__le"), F.col("__hi"), F.col("__cut"), *payload
    )
    tail = cov.filter((F.col("__rn") == 1) & (F.col("__total") < F.col("__hi"))).select(
        F.col("__total").alias("__gs"), F.col("__hi").alias("__ge"), le.alias("__le"), F.col("__hi"), F.col("__cut"), *payload
    )
    gaps = inner.unionByName(tail).filter(F.col("__gs") < F.lit(cti))
    left_may_end_first = (F.col("__le") >= F.lit(INF)) & (F.lit(left_cti) < F.col("__ge"))
    still_open = ((F.col("__ge") == F.col("__hi")) & ~(F.col("__le") <= F.lit(right_cti)) & ~F.col("__cut")) | left_may_end_first
    end = F.when(still_open, F.lit(INF)).otherwise(F.col("__ge"))
    return gaps.select(F.col("__gs").alias(S), end.alias(E), *_payload(node))
