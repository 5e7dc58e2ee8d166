"""``tempo.lowering.Dialect`` on Spark DataFrames and Columns: the primitives the shared
rules are written over, and the Spark compiler's answers for a plan's expressions and
aggregates (``tempo.spark.windows``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as st

from tempo.expr import nodes as x
from tempo.lowering.batches import FIRST
from tempo.lowering.context import START as S
from tempo.lowering.dialect import PaneMerge
from tempo.plan import nodes as p
from tempo.spark.columns import Scope, column, floor_div, record_columns

if TYPE_CHECKING:
    from tempo.spark.compiler import Compiler


class SparkDialect:
    """The primitives on Spark; ``compiler``: the compilation it belongs to (its session),
    None for rules that read neither (a live batch's partials on the cluster)."""

    def __init__(self, compiler: Compiler | None = None) -> None:
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
        assert self.compiler is not None
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

    def projection(self, node: p.WindowNode | p.JoinNode, prefixes: tuple[str, ...] = ("",)) -> list[Column]:
        return record_columns(node.projection, Scope(prefixes))

    # ---- a live batch computed in bulk (``tempo.lowering.batches``) -------------------------
    def count_rows(self) -> Column:
        return F.count(F.lit(1))

    def sum(self, x: Column) -> Column:
        return F.sum(x)

    def union(self, a: DataFrame, b: DataFrame) -> DataFrame:
        return a.unionByName(b, allowMissingColumns=True)

    def explode_windows(self, r: DataFrame, name: str, lo: Column, hi: Column) -> DataFrame:
        windows = F.when(lo <= hi, F.sequence(lo, hi)).otherwise(F.array(F.lit(None).cast("long")))
        return r.select("*", F.explode(windows).alias(name))

    def batch_position(self, first: Column) -> Column:
        """A struct (``POSITION_TYPE``) from the struct of the merged arrival order."""
        return F.struct(F.lit(1).alias("t"), first["a"].alias("a"), first["i"].alias("i"), first["o"].alias("o")).cast(POSITION_TYPE)

    def is_batch_position(self, position: Column) -> Column:
        return position["t"] == 1

    def emission_order(self, pairs: DataFrame) -> DataFrame:
        """A struct (``EMITTED_TYPE``): Spark orders structs field by field."""
        emitted = F.struct(F.col(S).alias("s"), F.col("__later").alias("l"), F.col("__earlier").alias("e")).cast(EMITTED_TYPE)
        return pairs.withColumn(FIRST, emitted).drop("__later", "__earlier")


POSITION_TYPE = st.StructType(
    [
        st.StructField("t", st.IntegerType()),
        st.StructField("a", st.LongType()),
        st.StructField("i", st.IntegerType()),
        st.StructField("o", st.LongType()),
    ]
)
"""A join input event's ``tempo.runtime.bulk.Position`` as a struct."""
EMITTED_TYPE = st.StructType(
    [
        st.StructField("s", st.LongType()),
        st.StructField("l", POSITION_TYPE),
        st.StructField("e", POSITION_TYPE),
    ]
)
"""A pair's place in the join's emission order: (start, later position, earlier position)."""
