"""The logical plan to polars plans: a visitor keyed by node class.

The rules are those of the Spark executor (``tempo.spark.compiler``), formula for formula, on
polars' lazy frames: every relation has the payload columns of its node's record type and
the lifetime columns ``__tempo_s`` / ``__tempo_e`` (ticks; ``INF`` for an open end). CTIs are
known up front (``CtiReplay``), so each stateful operator keeps exactly the outputs its final
CTI released, and the query keeps the events its final output CTI passed. A node without a
rule here raises ``UnsupportedError`` naming it, before anything runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from tempo.dispatch import Registry
from tempo.expr.aggregator import aggregator_runner
from tempo.expr import nodes as x
from tempo.expr.schema import field_names
from tempo.lowering import rules
from tempo.lowering.context import Lowering
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.runtime.replay import CtiReplay
from tempo.tables import Span
from tempo.ticks import INF
from tempo.vectorised.expressions import END as E
from tempo.vectorised.expressions import EXECUTOR, EXPRESSIONS, START as S
from tempo.vectorised.dialect import PolarsDialect
from tempo.vectorised.expressions import Scope, expr, numeric_operands, payload_schema, record_exprs, to_column, value_type

_RULES: Registry[Compiler, pl.LazyFrame] = Registry(EXECUTOR, "plan node")
compiles = _RULES.rule
rules.register(_RULES)  # the nodes written once in tempo.lowering
K = p.AggregateKind


def check_supported(query: Query) -> None:
    """Raise ``UnsupportedError`` if a node, an expression, a window kind, an aggregate or a
    payload type of ``query`` has no rule here, before any input is read."""
    check_nodes(query.nodes)


def check_nodes(nodes: Iterable[p.Node]) -> None:
    """``check_supported`` for these nodes."""
    from tempo.errors import UnsupportedError

    for node in nodes:
        _RULES.lookup(node)
        payload_schema(node.payload_type)
        for e in p.node_expressions(node):
            EXPRESSIONS.lookup(e)
        if isinstance(node, p.AnalyticNode):
            for a in node.analytics:
                if isinstance(a, p.Aggregate) and a.kind not in _RUNNING:
                    raise UnsupportedError(EXECUTOR, f"the running aggregate {a.describe()}", "it has no rule for it yet")
        if isinstance(node, p.WindowNode):
            rules.window_kind_rule(EXECUTOR, node)
            for a in node.aggregates:
                if a.kind not in AGGREGATES:
                    raise UnsupportedError(EXECUTOR, f"the aggregate {a.describe()}", "it has no rule for this aggregate yet")


class Compiler(Lowering[pl.LazyFrame]):
    """One compilation: the admitted inputs, the CTI replay, and the relations built so far."""

    executor = EXECUTOR

    def __init__(
        self,
        query: Query,
        replay: CtiReplay,
        inputs: dict[str, pl.LazyFrame],
        spans: Mapping[str, Callable[[], Span | None]] | None = None,
        carried: tuple[str, ...] = (),
    ) -> None:
        """``spans``: how to take where each table read column by column lies in time
        (``Span``), when a join asks; ``carried``: columns of the inputs that ride along the
        stateless operators and unions (a live batch's place of each event in the merged
        arrival order: ``tempo.vectorised.batches``)."""
        super().__init__(PolarsDialect(self), query, replay, spans)
        self.inputs = inputs
        self.carried = [pl.col(n) for n in carried]

    def rule(self, node: p.Node) -> pl.LazyFrame:
        built: pl.LazyFrame = _RULES(self, node)
        return built


def _payload(node: p.Node) -> list[pl.Expr]:
    return [pl.col(n) for n in field_names(node.payload_type)]


@compiles(p.SourceNode)
def _source(c: Compiler, node: p.SourceNode) -> pl.LazyFrame:
    return c.inputs[node.name]


@compiles(p.EventTimeNode)
def _event_time(c: Compiler, node: p.EventTimeNode) -> pl.LazyFrame:
    return c.relation(node.input)


@compiles(p.WhereNode)
def _where(c: Compiler, node: p.WhereNode) -> pl.LazyFrame:
    # A null predicate drops the row, as the in-memory executor's falsy test does.
    return c.relation(node.input).filter(expr(node.predicate, Scope()).fill_null(False))


@compiles(p.SelectNode)
def _select(c: Compiler, node: p.SelectNode) -> pl.LazyFrame:
    return c.relation(node.input).select(pl.col(S), pl.col(E), *c.carried, *record_exprs(node.projection, Scope()))


@compiles(p.ExplodeNode)
def _explode(c: Compiler, node: p.ExplodeNode) -> pl.LazyFrame:
    """One row per element of the list (none for an empty or null list), each keeping the
    lifetime; the projection reads the element as ``__item``."""
    rows = c.relation(node.input).with_columns(expr(node.items, Scope()).alias("__item"))
    rows = rows.filter(pl.col("__item").list.len() > 0).explode("__item")
    return rows.select(pl.col(S), pl.col(E), *record_exprs(node.projection, Scope()))


def _shift(t: pl.Expr, d: int) -> pl.Expr:
    """Saturating: infinity stays infinity and nothing passes it."""
    return pl.when(t >= INF).then(pl.lit(INF)).otherwise(pl.min_horizontal(t + pl.lit(d), pl.lit(INF)))


@compiles(p.AlterLifetimeNode)
def _alter(c: Compiler, node: p.AlterLifetimeNode) -> pl.LazyFrame:
    start = _shift(pl.col(S), node.shift)
    end = _shift(start, node.duration) if node.duration is not None else _shift(pl.col(E), node.shift)
    return c.relation(node.input).select(start.alias(S), end.alias(E), *c.carried, *_payload(node)).filter(pl.col(S) < INF)


@compiles(p.UnionNode)
def _union(c: Compiler, node: p.UnionNode) -> pl.LazyFrame:
    cols = [pl.col(S), pl.col(E), *c.carried, *_payload(node)]
    return pl.concat([c.relation(node.left).select(cols), c.relation(node.right).select(cols)], how="vertical")


# ---- joins --------------------------------------------------------------------------------


def _join_key(a: x.Expr, b: x.Expr, left: pl.Expr, right: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """A key pair of one type: polars joins only equal column types (``1 == 1.0`` in Python)."""
    left, right = numeric_operands(a, b, left, right)
    if float in (a.dtype, b.dtype):
        return left.cast(pl.Float64), right.cast(pl.Float64)
    return left, right


def prefixed(frame: pl.LazyFrame, prefix: str) -> pl.LazyFrame:
    """``frame``'s columns renamed ``prefix + name``."""
    return frame.select([pl.col(n).alias(f"{prefix}{n}") for n in frame.collect_schema().names()])


def matched(node: p.MatchingNode, left: pl.LazyFrame, right: pl.LazyFrame, on: Sequence[tuple[str, str]] = ()) -> pl.LazyFrame:
    """The pairs of ``left`` and ``right`` (columns prefixed ``__l_`` and ``__r_``) meeting
    the node's keys and residual: a hash join on the pairs of columns ``on`` and the keys (a
    null key matches nothing), or every pair."""
    scope = Scope(("__l_", "__r_"))
    lk, rk = [a for a, _ in on], [b for _, b in on]
    for i, (a, b) in enumerate(node.keys):
        le, re = _join_key(a, b, expr(a, scope), expr(b, scope))
        left, right = left.with_columns(le.alias(f"__lk{i}")), right.with_columns(re.alias(f"__rk{i}"))
        lk.append(f"__lk{i}")
        rk.append(f"__rk{i}")
    pairs = left.join(right, left_on=lk, right_on=rk, how="inner") if lk else left.join(right, how="cross")
    if node.residual is not None:
        pairs = pairs.filter(expr(node.residual, scope).fill_null(False))
    return pairs


def running(a: p.Aggregate, v: pl.Expr) -> pl.Expr:
    """Aggregate ``a`` of ``v`` over the rows so far, in order (the group's rows sorted): an
    analytic's running aggregate (``WindowFunction.RUNNING``)."""
    seen = v.is_not_null().cum_sum()
    if a.kind is K.COUNT:
        return pl.int_range(1, pl.len() + 1)
    if a.kind is K.SUM:
        return pl.when(seen > 0).then(v.fill_null(0).cum_sum())
    if a.kind is K.AVG:  # an integer total is made a float only to divide, as in memory
        return pl.when(seen > 0).then(v.fill_null(0).cum_sum().cast(pl.Float64) / seen)
    if a.kind in (K.MIN, K.MAX):
        if not _is_float(a):
            return (v.cum_min() if a.kind is K.MIN else v.cum_max()).forward_fill()
        # NaN orders after every number: the greatest once one is seen, the least only of NaNs
        nan_seen = v.is_nan().fill_null(False).cum_sum() > 0
        numbers = v.fill_nan(None)
        if a.kind is K.MAX:
            return pl.when(nan_seen).then(float("nan")).otherwise(numbers.cum_max().forward_fill())
        least = numbers.cum_min().forward_fill()
        return pl.when(least.is_null() & nan_seen).then(float("nan")).otherwise(least)
    if a.kind is K.FIRST:
        return pl.when(seen > 0).then(v.drop_nulls().first())
    if a.kind is K.LAST:
        return v.forward_fill()
    if a.kind is K.COUNT_DISTINCT:
        return (v.is_first_distinct() & v.is_not_null()).cum_sum()
    # The kinds that keep every value so far: evaluated over each prefix (quadratic in a group).
    if a.kind is K.COLLECT:
        return v.cumulative_eval(pl.element().drop_nulls().implode())
    return v.cumulative_eval(AGGREGATES[a.kind](pl.element(), a))


_RUNNING = frozenset({K.COUNT, K.SUM, K.AVG, K.MIN, K.MAX, K.FIRST, K.LAST, K.COUNT_DISTINCT, K.COLLECT, K.PERCENTILE, K.PERCENTILE_APPROX})


# ---- windows -------------------------------------------------------------------------------

AGGREGATES: dict[p.AggregateKind, Callable[[pl.Expr, p.Aggregate], pl.Expr]] = {
    K.COUNT: lambda v, a: pl.len(),
    # null when every value is null (polars' sum would give 0)
    K.SUM: lambda v, a: pl.when(v.count() > 0).then(v.sum()).otherwise(None),
    K.AVG: lambda v, a: pl.when(v.count() > 0).then(v.sum().cast(pl.Float64) / v.count()) if a.wide_integers else v.mean(),
    # NaN orders after every number (docs/semantics.md 5.6.5): polars' max skips it.
    K.MIN: lambda v, a: pl.when(v.fill_nan(None).count() > 0).then(v.fill_nan(None).min()).otherwise(v.min()) if _is_float(a) else v.min(),
    K.MAX: lambda v, a: pl.when(v.is_nan().any()).then(float("nan")).otherwise(v.max()) if _is_float(a) else v.max(),
    K.COUNT_DISTINCT: lambda v, a: v.drop_nulls().n_unique(),
    # first, last: by (start, then the payload's fields) among the non-null values
    K.FIRST: lambda v, a: v.drop_nulls().first(),  # over the rows in the events' order (``_grouped``)
    K.LAST: lambda v, a: v.drop_nulls().last(),
    # Welford's update in memory, polars' own here: equal to rounding (docs/semantics.md 5.6.5)
    K.VAR: lambda v, a: v.cast(pl.Float64).var(ddof=1),
    K.VAR_POP: lambda v, a: v.cast(pl.Float64).var(ddof=0),
    K.STDDEV: lambda v, a: v.cast(pl.Float64).std(ddof=1),
    K.STDDEV_POP: lambda v, a: v.cast(pl.Float64).std(ddof=0),
    K.COLLECT: lambda v, a: v.drop_nulls(),  # a list, in the events' order (``_grouped``)
    K.UDA: lambda v, a: _uda(v, a),
    K.TOP: lambda v, a: v,  # ranked records, built by ``_grouped``
    K.PERCENTILE: lambda v, a: _percentile(v, a),
    K.PERCENTILE_APPROX: lambda v, a: _nearest_rank(v, a),
}
"""Each aggregate kind as a polars expression over its values ``v``: the window rules' and,
over a live batch's rows, the partial aggregates of ``tempo.vectorised.batches``."""


def _uda(v: pl.Expr, a: p.Aggregate) -> pl.Expr:
    """A user-defined aggregate (``tempo.Aggregator``) over each group's values, handed over
    as one Arrow array per group (``aggregator_runner``: nulls dropped, batches merged in
    order, the result checked; a bad one raised through polars as text, see ``_udf_errors``)."""
    assert a.arg is not None
    run = aggregator_runner(a.function, a.arg.dtype, type(a.function).__qualname__, local=False)
    returns = a.result_type

    def per_group(values: pl.Series) -> Any:
        return to_column(run(values.to_arrow()), returns, None)

    return v.map_batches(per_group, return_dtype=value_type(returns, "the uda result"), returns_scalar=True)


def _ranked(v: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """The non-null values in order (NaN after every number, as polars sorts) and their count."""
    ranked = v.drop_nulls().sort()
    return ranked, ranked.len()


def _percentile(v: pl.Expr, a: p.Aggregate) -> pl.Expr:
    """Spark's exact percentile with ``tempo.runtime.aggregates.percentile``'s float operations: between the
    closest ranks of ``fraction·(n − 1)``, linearly."""
    assert a.fraction is not None
    ranked, n = _ranked(v.cast(pl.Float64))
    position = (n - 1).cast(pl.Float64) * a.fraction
    lower, higher = position.floor().cast(pl.Int64), position.ceil().cast(pl.Int64)
    low, high = ranked.get(lower, null_on_oob=True), ranked.get(higher, null_on_oob=True)
    return pl.when(n == 0).then(None).when(lower == higher).then(low).otherwise(low + (position - lower) * (high - low))


def _nearest_rank(v: pl.Expr, a: p.Aggregate) -> pl.Expr:
    """``tempo.runtime.aggregates.percentile_approx``: the value of rank ``ceil(fraction·n)``, at least 1,
    an integer made a double and back (``tempo.runtime.aggregates.long_of_double``)."""
    assert a.fraction is not None
    ranked, n = _ranked(v)
    rank = pl.max_horizontal((n.cast(pl.Float64) * a.fraction).ceil().cast(pl.Int64), pl.lit(1))
    value = ranked.get(rank - 1, null_on_oob=True)
    if a.arg is not None and a.arg.dtype is int:
        double = value.cast(pl.Float64)
        value = pl.when(double >= 2.0**63).then(pl.lit(x.INT_MAX, pl.Int64)).otherwise(double.cast(pl.Int64, strict=False))
    return pl.when(n == 0).then(None).otherwise(value)


def _is_float(a: p.Aggregate) -> bool:
    return a.arg is not None and a.arg.dtype is float


def _aggregate(a: p.Aggregate, i: int) -> pl.Expr:
    return AGGREGATES[a.kind](pl.col(f"__v{i}"), a).alias(f"__agg{i}")


def _order(node: p.WindowNode) -> list[tuple[str, pl.Expr]]:
    """The events' order (start, then the payload's fields), for the aggregates that depend on it."""
    if not any(a.kind.ordered for a in node.aggregates):
        return []
    fields = field_names(node.input.payload_type)
    return [("__ord_s", pl.col(S)), *[(f"__ord_{j:03d}", pl.col(n)) for j, n in enumerate(fields)]]


def value_exprs(node: p.WindowNode) -> list[pl.Expr]:
    """Each aggregate's argument as ``__v<i>`` (with the events' order and what ``top`` ranks by)."""
    out = [e.alias(n) for n, e in _order(node)]
    out += [argument_expr(a).alias(f"__v{i}") for i, a in enumerate(node.aggregates) if a.arg is not None]
    return out + [expr(e, Scope()).alias(n) for n, e in _ranked_by(node)]


def argument_expr(a: p.Aggregate) -> pl.Expr:
    """An aggregate's argument as its expression reads it: integers to be added exactly as
    Int128 (the sum checked where it is read, ``tempo.vectorised.expressions``), bools as numbers
    for min and max."""
    assert a.arg is not None
    v = expr(a.arg, Scope())
    if a.wide_integers:
        return v.cast(pl.Int128)
    if a.arg.dtype is bool and a.kind in (K.MIN, K.MAX):
        return v.cast(pl.Int64)
    return v


def _ranked_by(node: p.WindowNode) -> list[tuple[str, x.Expr]]:
    """What ``top`` aggregates rank by, as ``__o<i>_<j>``."""
    return [(f"__o{i}_{j}", e) for i, a in enumerate(node.aggregates) for j, e in enumerate(a.order)]


def value_names(node: p.WindowNode) -> list[str]:
    """The names of ``value_exprs``."""
    values = [f"__v{i}" for i, a in enumerate(node.aggregates) if a.arg is not None]
    return [n for n, _ in _order(node)] + values + [n for n, _ in _ranked_by(node)]


Keyed = p.WindowNode | p.AnalyticNode | p.ClipNode


def key_exprs(node: Keyed) -> list[pl.Expr]:
    """The node's group keys as the columns ``__key<i>``."""
    return [expr(k, Scope()).alias(f"__key{i}") for i, k in enumerate(node.keys or ())]


def key_names(node: Keyed) -> list[str]:
    """The names of ``key_exprs``."""
    return [f"__key{i}" for i in range(len(node.keys or ()))]


def grouped_aggregates(node: p.WindowNode, rows: pl.LazyFrame, by: list[str], extra: list[pl.Expr]) -> pl.LazyFrame:
    """``rows`` grouped by ``by`` with the node's aggregates as ``__agg<i>``; for the
    aggregates that depend on the events' order, the rows sorted by it first (a group keeps
    its rows' order)."""
    aggregates = [_aggregate(a, i) for i, a in enumerate(node.aggregates)]
    for i, a in enumerate(node.aggregates):
        if a.kind is K.TOP:  # SQL's RANK within the group: the least position among equal values, plus one
            ranked_by = [f"__o{i}_{j}" for j in range(len(a.order))]
            rows = rows.sort(
                [*by, *ranked_by],
                descending=[False] * len(by) + list(a.descending),
                nulls_last=[False] * len(by) + list(a.descending),
                maintain_order=True,
            )
            rows = rows.with_columns(pl.int_range(pl.len()).over(by).alias(f"__pos{i}"))
            rows = rows.with_columns((pl.col(f"__pos{i}").min().over([*by, *ranked_by]) + 1).alias(f"__rank{i}"))
            kept = pl.struct(pl.col(f"__rank{i}").cast(pl.Int64).alias("rank"), pl.col(f"__v{i}").alias("event"))
            aggregates[i] = kept.filter(pl.col(f"__rank{i}") <= a.limit).alias(f"__agg{i}")
    order = [n for n, _ in _order(node)]
    if order:
        rows = rows.sort(order, nulls_last=False, maintain_order=True)
    return rows.group_by(by, maintain_order=bool(order)).agg(*aggregates, *extra)
