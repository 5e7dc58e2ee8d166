"""``tempo.lowering.Dialect`` on polars lazy frames and expressions: the primitives the shared
rules are written over, and the vectorised compiler's answers for a plan's expressions and
aggregates (``tempo.vectorised.compiler``), and the join family's primitives (the last block)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from tempo.expr import nodes as x
from tempo.lowering.dialect import WindowFunction, Windowed
from tempo.lowering.batches import FIRST
from tempo.lowering.context import END as E
from tempo.lowering.context import START as S
from tempo.plan import nodes as p
from tempo.plan.nodes import AggregateKind as K
from tempo.vectorised.expressions import Scope, expr, record_exprs

if TYPE_CHECKING:
    from tempo.vectorised.compiler import Compiler


_WINDOW_FUNCTIONS: dict[WindowFunction, Callable[[pl.Expr], pl.Expr]] = {
    WindowFunction.PREVIOUS: lambda of: of.shift(1),
    WindowFunction.NEXT: lambda of: of.shift(-1),
    WindowFunction.MAX_BEFORE: lambda of: of.cum_max().shift(1),
    WindowFunction.SUM_SO_FAR: lambda of: of.cum_sum(),
    WindowFunction.ROW_NUMBER: lambda of: pl.int_range(pl.len()),
    WindowFunction.MIN: lambda of: of.min(),
    WindowFunction.MAX: lambda of: of.max(),
}
"""Each window function (``Dialect.over``) of its argument, over a partition's rows in order."""


class PolarsDialect:
    """The primitives on polars; ``compiler``: the compilation it belongs to (its CTI replay)."""

    def __init__(self, compiler: Compiler) -> None:
        self.compiler = compiler

    def col(self, name: str) -> pl.Expr:
        return pl.col(name)

    def lit(self, value: int | float | bool | None) -> pl.Expr:
        return pl.lit(value)

    def least(self, *xs: pl.Expr) -> pl.Expr:
        return pl.min_horizontal(*xs)

    def greatest(self, *xs: pl.Expr) -> pl.Expr:
        return pl.max_horizontal(*xs)

    def floor_div(self, x: pl.Expr, by: int) -> pl.Expr:
        return x // by

    def when(self, cond: pl.Expr, then: pl.Expr, otherwise: pl.Expr) -> pl.Expr:
        return pl.when(cond).then(then).otherwise(otherwise)

    def cases(self, branches: Sequence[tuple[pl.Expr, pl.Expr]], otherwise: pl.Expr) -> pl.Expr:
        chain: Any = pl
        for cond, then in branches:
            chain = chain.when(cond).then(then)
        out: pl.Expr = chain.otherwise(otherwise)
        return out

    def is_null(self, x: pl.Expr) -> pl.Expr:
        return x.is_null()

    def min(self, x: pl.Expr) -> pl.Expr:
        return x.min()

    def max(self, x: pl.Expr) -> pl.Expr:
        return x.max()

    def sum(self, x: pl.Expr) -> pl.Expr:
        return x.sum()

    def count(self) -> pl.Expr:
        return pl.len().cast(pl.Int64)

    def count_of(self, x: pl.Expr) -> pl.Expr:
        return x.count()

    def as_double(self, x: pl.Expr) -> pl.Expr:
        return x.cast(pl.Float64)

    def itself_over_panes(self, a: p.Aggregate) -> tuple[Callable[[pl.Expr], pl.Expr], Callable[[pl.Expr], pl.Expr]] | None:
        """A sum, min or max by the compiler's aggregate (nulls and NaN as over the values);
        not first and last (a struct's min here is null where a field is)."""
        from tempo.vectorised.compiler import AGGREGATES

        if a.kind not in (K.SUM, K.MIN, K.MAX):
            return None
        aggregate = AGGREGATES[a.kind]
        return (lambda v: aggregate(v, a)), (lambda part: aggregate(part, a))

    def select(self, r: pl.LazyFrame, cols: Sequence[pl.Expr | str]) -> pl.LazyFrame:
        return r.select(*cols)

    def with_columns(self, r: pl.LazyFrame, cols: Sequence[pl.Expr]) -> pl.LazyFrame:
        return r.with_columns(*cols)

    def filter(self, r: pl.LazyFrame, cond: pl.Expr) -> pl.LazyFrame:
        return r.filter(cond)

    def explode_range(self, r: pl.LazyFrame, name: str, lo: pl.Expr, hi: pl.Expr, keep: Sequence[str]) -> pl.LazyFrame:
        return r.select(pl.int_ranges(lo, hi + 1).alias(name), *keep).explode(name)

    def group_by(self, r: pl.LazyFrame, by: Sequence[str], aggs: Sequence[pl.Expr]) -> pl.LazyFrame:
        return r.group_by(list(by)).agg(*aggs)

    def scalars(self, r: pl.LazyFrame, aggs: Sequence[pl.Expr]) -> list[Any]:
        row = r.select(*[a.alias(f"__x{i}") for i, a in enumerate(aggs)]).collect()
        return [row[f"__x{i}"][0] for i in range(len(aggs))]

    # ---- the plan's expressions and aggregates ----------------------------------------------
    def expression(self, e: x.Expr) -> pl.Expr:
        return expr(e, Scope())

    def keys(self, node: p.WindowNode | p.AnalyticNode | p.ClipNode) -> list[pl.Expr]:
        from tempo.vectorised.compiler import key_exprs

        return key_exprs(node)

    def key_names(self, node: p.WindowNode | p.AnalyticNode | p.ClipNode) -> list[str]:
        from tempo.vectorised.compiler import key_names

        return key_names(node)

    def values(self, node: p.WindowNode) -> list[pl.Expr]:
        from tempo.vectorised.compiler import value_exprs

        return value_exprs(node)

    def value_names(self, node: p.WindowNode) -> list[str]:
        from tempo.vectorised.compiler import value_names

        return value_names(node)

    def grouped(self, node: p.WindowNode, rows: pl.LazyFrame, by: list[str], extra: list[pl.Expr]) -> pl.LazyFrame:
        from tempo.vectorised.compiler import grouped_aggregates

        return grouped_aggregates(node, rows, by, extra)

    def completing_cti(self, node: p.WindowNode, rows: pl.LazyFrame, done: pl.Expr, strict: bool) -> pl.LazyFrame:
        """An as-of join forward on the few sorted CTIs."""
        ctis = pl.DataFrame({"__cti": sorted(set(self.compiler.replay.ctis_of(node.input)))}, schema={"__cti": pl.Int64}).lazy()
        probe = rows.with_columns((done + 1 if strict else done).alias("__from")).sort("__from")
        return probe.join_asof(ctis, left_on="__from", right_on="__cti", strategy="forward")

    def projection(
        self, node: p.WindowNode | p.JoinNode | p.AnalyticNode | p.FollowedByNode, prefixes: tuple[str, ...] = ("",)
    ) -> list[pl.Expr]:
        return record_exprs(node.projection, Scope(prefixes))

    # ---- windows cut by the events (tempo.lowering.event_windows) ---------------------------
    def field(self, name: str) -> pl.Expr:
        return pl.col(name)

    def floor_mod(self, x: pl.Expr, by: int) -> pl.Expr:
        return x % by  # polars' integer ``%`` takes the divisor's sign, as Python's

    def no_rows(self, r: pl.LazyFrame, payload_type: type) -> pl.LazyFrame:
        from tempo.vectorised.expressions import payload_schema

        fields = [pl.lit(None).cast(t).alias(n) for n, t in payload_schema(payload_type).items()]
        return r.filter(pl.lit(False)).select(pl.col(S), pl.col(E), *fields)

    def union(self, a: pl.LazyFrame, b: pl.LazyFrame) -> pl.LazyFrame:
        return pl.concat([a, b], how="diagonal_relaxed")

    def distinct(self, r: pl.LazyFrame) -> pl.LazyFrame:
        return r.unique()

    def in_order(self, r: pl.LazyFrame, order: Sequence[str]) -> pl.LazyFrame:
        return r.sort(list(order), nulls_last=False)

    def over(self, r: pl.LazyFrame, by: Sequence[str], order: Sequence[str], columns: Sequence[Windowed]) -> pl.LazyFrame:
        """Each column over its partition (``Expr.over``) of the rows as sorted (``in_order``):
        a partition keeps the frame's order. ``BEFORE_PEERS`` and ``RUNNING``: the value on
        the row before, or the aggregate so far, then the first peer's, or the last's, for
        every peer."""
        from tempo.vectorised.compiler import running

        def per_partition(e: pl.Expr) -> pl.Expr:
            return e.over(list(by)) if by else e

        peers = [*by, *order]
        for name, function, of, aggregate in columns:
            if function is WindowFunction.BEFORE_PEERS:
                r = r.with_columns(per_partition(of.shift(1)).alias(name)).with_columns(pl.col(name).first().over(peers))
            elif function is WindowFunction.RUNNING:
                assert aggregate is not None
                r = r.with_columns(per_partition(running(aggregate, of)).alias(name)).with_columns(pl.col(name).last().over(peers))
            else:
                r = r.with_columns(per_partition(_WINDOW_FUNCTIONS[function](of)).alias(name))
        return r

    def join_on_keys(self, r: pl.LazyFrame, other: pl.LazyFrame, keys: Sequence[str], condition: pl.Expr) -> pl.LazyFrame:
        """A hash join on the keys (nulls equal), then the condition; a cross join without keys."""
        pairs = r.join(other, on=list(keys), how="inner", nulls_equal=True) if keys else r.join(other, how="cross")
        return pairs.filter(condition)

    # ---- the analytic node (tempo.lowering.analytics) ---------------------------------------
    def running_argument(self, a: p.Aggregate, payload_type: type) -> pl.Expr:
        from tempo.vectorised.compiler import argument_expr

        return pl.lit(None) if a.arg is None else argument_expr(a)

    # ---- the join family: tempo.lowering.joins, patterns and clip ---------------------------
    def coalesce(self, *xs: pl.Expr) -> pl.Expr:
        return pl.coalesce(*xs)

    def median(self, x: pl.Expr) -> pl.Expr:
        return x.median()

    def row_id(self) -> pl.Expr:
        return pl.int_range(pl.len(), dtype=pl.get_index_type())

    def int_range_list(self, lo: pl.Expr, hi: pl.Expr) -> pl.Expr:
        return pl.int_ranges(lo, hi + 1)

    def list_of(self, *xs: pl.Expr) -> pl.Expr:
        return pl.concat_list(list(xs))

    def concat_lists(self, a: pl.Expr, b: pl.Expr) -> pl.Expr:
        return pl.concat_list([a, b])

    def join_side(
        self,
        r: pl.LazyFrame,
        prefix: str,
        bucket: pl.Expr | None = None,
        buckets: pl.Expr | None = None,
        where: pl.Expr | None = None,
        extra: Sequence[pl.Expr] = (),
    ) -> pl.LazyFrame:
        """The rows ``where`` fails filtered out first (no list built for them)."""
        cols = [pl.col(n).alias(f"{prefix}{n}") for n in r.collect_schema().names()]
        name = f"{prefix}bucket"
        if where is not None:
            r = r.filter(where)
        if bucket is not None:
            cols.append(bucket.alias(name))
        if buckets is None:
            return r.select(*cols, *extra)
        return r.select(*cols, *extra, buckets.alias(name)).explode(name)

    def pairs(
        self,
        node: p.MatchingNode,
        left: pl.LazyFrame,
        right: pl.LazyFrame,
        on: Sequence[tuple[str, str]] = (),
        condition: pl.Expr | None = None,
        keep_left: str | None = None,
    ) -> pl.LazyFrame:
        """A hash join on ``on`` and the keys (``matched``), the rest a filter; the left rows
        kept without a pair are those an anti join on ``keep_left`` finds (the pairs cached:
        polars would join twice, as their two uses read different columns)."""
        from tempo.vectorised.compiler import matched

        found = matched(node, left, right, on)
        if condition is not None:
            found = found.filter(condition)
        if keep_left is None:
            return found
        found = found.cache()
        alone = left.join(found.select(keep_left), on=keep_left, how="anti")
        return pl.concat([found, alone], how="diagonal")

    def first_by(self, r: pl.LazyFrame, by: str, order: Sequence[str]) -> pl.LazyFrame:
        return r.sort(list(order), nulls_last=False, maintain_order=True).group_by(by, maintain_order=True).first()

    def carried(self, r: pl.LazyFrame) -> list[pl.Expr]:
        return list(self.compiler.carried)

    # ---- a live batch computed in bulk (``tempo.lowering.batches``) -------------------------
    def explode_windows(self, r: pl.LazyFrame, name: str, lo: pl.Expr, hi: pl.Expr) -> pl.LazyFrame:
        return r.with_columns(pl.int_ranges(lo, hi + 1).alias(name)).explode(name, empty_as_null=True)

    def batch_position(self, first: pl.Expr) -> pl.Expr:
        """The rank itself: a held event's is below every rank (``tempo.vectorised.batches.HELD``)."""
        return first

    def is_batch_position(self, position: pl.Expr) -> pl.Expr:
        return position >= 0

    def emission_order(self, pairs: pl.LazyFrame) -> pl.LazyFrame:
        """The rank in that order: the pairs sorted by it."""
        ranked = pairs.sort(S, "__later", "__earlier").with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias(FIRST))
        return ranked.drop("__later", "__earlier")
