"""``tempo.lowering.Dialect`` on polars lazy frames and expressions: the primitives the shared
rules are written over, and the vectorised compiler's answers for a plan's expressions and
aggregates (``tempo.vectorised.compiler``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from tempo.expr import nodes as x
from tempo.lowering.batches import FIRST
from tempo.lowering.context import START as S
from tempo.lowering.dialect import PaneMerge
from tempo.plan import nodes as p
from tempo.vectorised.expressions import Scope, expr, record_exprs

if TYPE_CHECKING:
    from tempo.vectorised.compiler import Compiler


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

    def keys(self, node: p.WindowNode) -> list[pl.Expr]:
        from tempo.vectorised.compiler import key_exprs

        return key_exprs(node)

    def key_names(self, node: p.WindowNode) -> list[str]:
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

    def pane_merges(self, node: p.WindowNode) -> list[PaneMerge] | None:
        from tempo.vectorised.compiler import pane_merges

        return pane_merges(node)

    def completing_cti(self, node: p.WindowNode, rows: pl.LazyFrame, done: pl.Expr, strict: bool) -> pl.LazyFrame:
        """An as-of join forward on the few sorted CTIs."""
        ctis = pl.DataFrame({"__cti": sorted(set(self.compiler.replay.ctis_of(node.input)))}, schema={"__cti": pl.Int64}).lazy()
        probe = rows.with_columns((done + 1 if strict else done).alias("__from")).sort("__from")
        return probe.join_asof(ctis, left_on="__from", right_on="__cti", strategy="forward")

    def projection(self, node: p.WindowNode | p.JoinNode, prefixes: tuple[str, ...] = ("",)) -> list[pl.Expr]:
        return record_exprs(node.projection, Scope(prefixes))

    # ---- a live batch computed in bulk (``tempo.lowering.batches``) -------------------------
    def count_rows(self) -> pl.Expr:
        return pl.len()

    def sum(self, x: pl.Expr) -> pl.Expr:
        return x.sum()

    def union(self, a: pl.LazyFrame, b: pl.LazyFrame) -> pl.LazyFrame:
        return pl.concat([a, b], how="diagonal_relaxed")

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
