"""``tempo.lowering.Dialect`` on Spark DataFrames and Columns: the primitives the shared
rules are written over, and the Spark compiler's answers for a plan's expressions and
aggregates (``tempo.spark.windows``), and the join family's primitives (the last block)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from tempo.expr import nodes as x
from tempo.lowering.dialect import PaneMerge
from tempo.plan import nodes as p
from tempo.spark.columns import Scope, column, floor_div, numeric_operands, quoted, record_columns

if TYPE_CHECKING:
    from tempo.spark.compiler import Compiler


class SparkDialect:
    """The primitives on Spark; ``compiler``: the compilation it belongs to (its session)."""

    def __init__(self, compiler: Compiler) -> None:
        self.compiler = compiler

    def col(self, name: str) -> Column:
        return F.col(name)

    def lit(self, value: int | float | bool | None) -> Column:
        return F.lit(value)

    def least(self, *xs: Column) -> Column:
        return F.least(*xs)

    def greatest(self, *xs: Column) -> Column:
        return F.greatest(*xs)

    def floor_div(self, x: Column, by: int) -> Column:
        return floor_div(x, by)

    def when(self, cond: Column, then: Column, otherwise: Column) -> Column:
        return F.when(cond, then).otherwise(otherwise)

    def cases(self, branches: Sequence[tuple[Column, Column]], otherwise: Column) -> Column:
        chain: Any = F
        for cond, then in branches:
            chain = chain.when(cond, then)
        out: Column = chain.otherwise(otherwise)
        return out

    def is_null(self, x: Column) -> Column:
        return x.isNull()

    def min(self, x: Column) -> Column:
        return F.min(x)

    def max(self, x: Column) -> Column:
        return F.max(x)

    def select(self, r: DataFrame, cols: Sequence[Column | str]) -> DataFrame:
        return r.select(*cols)

    def with_columns(self, r: DataFrame, cols: Sequence[Column]) -> DataFrame:
        return r.select("*", *cols)

    def filter(self, r: DataFrame, cond: Column) -> DataFrame:
        return r.filter(cond)

    def explode_range(self, r: DataFrame, name: str, lo: Column, hi: Column, keep: Sequence[str]) -> DataFrame:
        return r.select(F.explode(F.sequence(lo, hi)).alias(name), *keep)

    def group_by(self, r: DataFrame, by: Sequence[str], aggs: Sequence[Column]) -> DataFrame:
        return r.groupBy(*by).agg(*aggs)

    def scalars(self, r: DataFrame, aggs: Sequence[Column]) -> list[Any]:
        row = r.agg(*[a.alias(f"__x{i}") for i, a in enumerate(aggs)]).collect()[0]
        return [row[f"__x{i}"] for i in range(len(aggs))]

    # ---- the plan's expressions and aggregates ----------------------------------------------
    def expression(self, e: x.Expr) -> Column:
        return column(e, Scope())

    def keys(self, node: p.WindowNode) -> list[Column]:
        from tempo.spark.windows import key_columns

        return key_columns(node)

    def key_names(self, node: p.WindowNode) -> list[str]:
        from tempo.spark.windows import key_names

        return key_names(node)

    def values(self, node: p.WindowNode) -> list[Column]:
        from tempo.spark.windows import value_columns

        return value_columns(node)

    def value_names(self, node: p.WindowNode) -> list[str]:
        from tempo.spark.windows import value_names

        return value_names(node)

    def grouped(self, node: p.WindowNode, rows: DataFrame, by: list[str], extra: list[Column]) -> DataFrame:
        from tempo.spark.windows import grouped_aggregates

        return grouped_aggregates(node, rows, by, extra)

    def pane_merges(self, node: p.WindowNode) -> list[PaneMerge] | None:
        from tempo.spark.windows import pane_merges

        return pane_merges(node)

    def completing_cti(self, node: p.WindowNode, rows: DataFrame, done: Column, strict: bool) -> DataFrame:
        """An ordered window over the rows and the few CTIs sorted together: each row takes
        the next CTI following it."""
        ctis = sorted(set(self.compiler.replay.ctis_of(node.input)))
        marks = self.compiler.spark.createDataFrame([(t,) for t in ctis], "__done long").select(
            "__done", F.lit(0 if strict else 1).alias("__order"), F.col("__done").alias("__cti")
        )
        tagged = (
            rows.withColumn("__done", done).withColumn("__order", F.lit(1 if strict else 0)).withColumn("__cti", F.lit(None).cast("long"))
        )
        both = tagged.unionByName(marks, allowMissingColumns=True)
        following = Window.orderBy("__done", "__order").rowsBetween(Window.currentRow, Window.unboundedFollowing)
        found = both.withColumn("__cti", F.first("__cti", ignorenulls=True).over(following))
        return found.filter(F.col("__order") == F.lit(1 if strict else 0)).drop("__order")

    def projection(self, node: p.WindowNode | p.JoinNode | p.FollowedByNode, prefixes: tuple[str, ...] = ("",)) -> list[Column]:
        return record_columns(node.projection, Scope(prefixes))

    # ---- the join family: tempo.lowering.joins, patterns and clip ---------------------------
    def coalesce(self, *xs: Column) -> Column:
        return F.coalesce(*xs)

    def median(self, x: Column) -> Column:
        return F.percentile_approx(x, 0.5)

    def row_id(self) -> Column:
        return F.monotonically_increasing_id()

    def int_range_list(self, lo: Column, hi: Column) -> Column:
        return F.sequence(lo, hi)

    def list_of(self, *xs: Column) -> Column:
        return F.array(*xs)

    def concat_lists(self, a: Column, b: Column) -> Column:
        return F.concat(a, b)

    def join_side(
        self,
        r: DataFrame,
        prefix: str,
        bucket: Column | None = None,
        buckets: Column | None = None,
        where: Column | None = None,
        extra: Sequence[Column] = (),
    ) -> DataFrame:
        """One projection (a row without buckets where ``where`` fails rather than a filter:
        Spark analyses every operation), the renaming as SQL text (a JVM call a column)."""
        cols = [F.expr(f"{quoted(n)} AS {quoted(prefix + n)}") for n in r.columns]
        if bucket is not None:
            cols.append(bucket.alias(f"{prefix}bucket"))
        if buckets is not None:
            listed = buckets if where is None else F.when(where, buckets).otherwise(F.array().cast("array<bigint>"))
            cols.append(F.explode(listed).alias(f"{prefix}bucket"))
        elif where is not None:
            r = r.filter(where)
        return r.select(*cols, *extra)

    def pairs(
        self,
        node: p.MatchingNode,
        left: DataFrame,
        right: DataFrame,
        on: Sequence[tuple[str, str]] = (),
        condition: Column | None = None,
        keep_left: str | None = None,
    ) -> DataFrame:
        """One join, every condition in it: a hash join on the equalities (the keys, then
        ``on``), the rest tested on each pair; a left outer join keeps ``keep_left``'s rows."""
        scope = Scope(("__l_", "__r_"))
        tests: list[Column] = []
        for a, b in node.keys:
            left_key, right_key = numeric_operands(a, b, column(a, scope), column(b, scope))
            tests.append(left_key == right_key)
        tests += [F.col(a) == F.col(b) for a, b in on]
        if node.residual is not None:
            tests.append(column(node.residual, scope))
        if condition is not None:
            tests.append(condition)
        joined = functools.reduce(operator.and_, tests) if tests else F.lit(True)
        return left.join(right, joined, "left" if keep_left is not None else "inner")

    def union(self, a: DataFrame, b: DataFrame) -> DataFrame:
        return a.unionByName(b)

    def sorted_for_windows(self, r: DataFrame, order: Sequence[str]) -> DataFrame:
        return r

    def _ordered(self, by: Sequence[str], order: Sequence[str]) -> Any:
        return Window.partitionBy(*by).orderBy(*order)

    def lead(self, x: Column, by: Sequence[str], order: Sequence[str]) -> Column:
        return F.lead(x).over(self._ordered(by, order))

    def max_before(self, x: Column, by: Sequence[str], order: Sequence[str]) -> Column:
        return F.max(x).over(self._ordered(by, order).rowsBetween(Window.unboundedPreceding, -1))

    def first_in_order(self, by: Sequence[str], order: Sequence[str]) -> Column:
        return F.row_number().over(self._ordered(by, order)) == 1

    def over(self, aggregate: Column, by: Sequence[str]) -> Column:
        return aggregate.over(Window.partitionBy(*by))

    def first_by(self, r: DataFrame, by: str, order: Sequence[str]) -> DataFrame:
        ordered = Window.partitionBy(by).orderBy(*[F.col(n).asc_nulls_first() for n in order])
        return r.withColumn("__rn", F.row_number().over(ordered)).filter(F.col("__rn") == 1)

    def carried(self, r: DataFrame) -> list[Column]:
        from tempo.spark.compiler import FIRST

        return [F.col(FIRST)] if FIRST in r.columns else []
