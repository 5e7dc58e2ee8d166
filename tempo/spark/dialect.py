"""``tempo.lowering.Dialect`` on Spark DataFrames and Columns: the primitives the shared
rules are written over, and the Spark compiler's answers for a plan's expressions and
aggregates (``tempo.spark.windows``), and the join family's primitives (the last block)."""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql import types as st

from tempo.expr import nodes as x
from tempo.lowering.dialect import WindowFunction, Windowed
from tempo.lowering.batches import FIRST
from tempo.lowering.context import END as E
from tempo.lowering.context import START as S
from tempo.plan import nodes as p
from tempo.spark.columns import Scope, column, floor_div, numeric_operands, quoted, record_columns

if TYPE_CHECKING:
    from tempo.spark.compiler import Compiler


_WINDOW_FUNCTIONS: dict[WindowFunction, Callable[[Column, WindowSpec, WindowSpec], Column]] = {
    WindowFunction.PREVIOUS: lambda of, partition, ordered: F.lag(of).over(ordered),
    WindowFunction.NEXT: lambda of, partition, ordered: F.lead(of).over(ordered),
    WindowFunction.MAX_BEFORE: lambda of, partition, ordered: F.max(of).over(ordered.rowsBetween(Window.unboundedPreceding, -1)),
    WindowFunction.SUM_SO_FAR: lambda of, partition, ordered: F.sum(of).over(
        ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ),
    WindowFunction.ROW_NUMBER: lambda of, partition, ordered: F.row_number().over(ordered) - 1,
    WindowFunction.MIN: lambda of, partition, ordered: F.min(of).over(partition),
    WindowFunction.MAX: lambda of, partition, ordered: F.max(of).over(partition),
}
"""Each window function (``Dialect.over``) of its argument, given the partition's window
and the ordered one."""


def _first_of_peers(order: Sequence[Column], ordered: WindowSpec) -> Column:
    """Whether a row is the first of its peers in row order: the row before it is no peer (the
    first order column is never null; the others are compared null-safe)."""
    lagged = F.lag(order[0]).over(ordered)
    first = lagged.isNull() | (lagged != order[0])
    for c in order[1:]:
        first = first | ~F.lag(c).over(ordered).eqNullSafe(c)
    return first


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

    def sum(self, x: Column) -> Column:
        return F.sum(x)

    def count(self) -> Column:
        return F.count(F.lit(1))

    def count_of(self, x: Column) -> Column:
        return F.count(x)

    def as_double(self, x: Column) -> Column:
        return x.cast("double")

    def itself_over_panes(self, a: p.Aggregate) -> tuple[Callable[[Column], Column], Callable[[Column], Column]] | None:
        """A sum of integers exact per pane (a decimal), checked to fit 64 bits once merged;
        first and last as the least or greatest struct of (order, value), its value read once
        merged."""
        from tempo.spark.windows import MERGED_OVER_PANES, fits_64_bits

        if a.wide_integers:
            return F.sum, lambda part: fits_64_bits(a, F.sum(part))
        merged = MERGED_OVER_PANES.get(a.kind)
        if merged is None:
            return None
        return merged, ((lambda part: merged(part)["v"]) if a.kind.ordered else merged)

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

    def keys(self, node: p.WindowNode | p.AnalyticNode | p.ClipNode) -> list[Column]:
        from tempo.spark.windows import key_columns

        return key_columns(node)

    def key_names(self, node: p.WindowNode | p.AnalyticNode | p.ClipNode) -> list[str]:
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

    def projection(
        self, node: p.WindowNode | p.JoinNode | p.AnalyticNode | p.FollowedByNode, prefixes: tuple[str, ...] = ("",)
    ) -> list[Column]:
        return record_columns(node.projection, Scope(prefixes))

    # ---- windows cut by the events (tempo.lowering.event_windows) ---------------------------
    def field(self, name: str) -> Column:
        return F.col(quoted(name))

    def floor_mod(self, x: Column, by: int) -> Column:
        return F.pmod(x, F.lit(by))

    def no_rows(self, r: DataFrame, payload_type: type) -> DataFrame:
        from tempo.spark.types import payload_schema

        lifetime = [F.lit(0).cast("long").alias(S), F.lit(0).cast("long").alias(E)]
        return r.limit(0).select(*lifetime, *[F.lit(None).cast(t.dataType).alias(t.name) for t in payload_schema(payload_type).fields])

    def union(self, a: DataFrame, b: DataFrame) -> DataFrame:
        return a.unionByName(b, allowMissingColumns=True)

    def distinct(self, r: DataFrame) -> DataFrame:
        return r.distinct()

    def in_order(self, r: DataFrame, order: Sequence[str]) -> DataFrame:
        return r

    def over(self, r: DataFrame, by: Sequence[str], order: Sequence[str], columns: Sequence[Windowed]) -> DataFrame:
        """Each column a window function over ``partitionBy(by).orderBy(order)`` (the running
        ones framed by rows, ``RUNNING`` by range: a row's peers with it), in a ``withColumn``
        of its own: Spark allows no window function inside another. A run of ``BEFORE_PEERS``
        columns is one struct of each row's ``lag``s, which the peers take from the first of
        them (the one whose ``lag`` is no peer, ``__first``) by one window over the peers."""
        from tempo.spark.windows import aggregate_column

        partition = Window.partitionBy(*by)
        order_columns = [F.col(quoted(n)) for n in order]
        ordered = partition.orderBy(*[c.asc_nulls_first() for c in order_columns])
        for before_peers, grouped in itertools.groupby(columns, key=lambda w: w.function is WindowFunction.BEFORE_PEERS):
            run = list(grouped)
            if before_peers:
                lagged = F.struct(*[F.lag(w.of).over(ordered).alias(w.name) for w in run])
                r = r.withColumns({"__first": _first_of_peers(order_columns, ordered), "__lagged": lagged})
                spread = F.first(F.when(F.col("__first"), F.col("__lagged")), ignorenulls=True)
                r = r.withColumn("__before", spread.over(Window.partitionBy(*by, *order_columns)))
                r = r.withColumns({w.name: F.col("__before")[w.name] for w in run})
                continue
            for name, function, of, aggregate in run:
                if function is WindowFunction.RUNNING:
                    assert aggregate is not None
                    framed = ordered.rangeBetween(Window.unboundedPreceding, Window.currentRow)
                    r = r.withColumn(name, aggregate_column(aggregate, of, framed))
                else:
                    r = r.withColumn(name, _WINDOW_FUNCTIONS[function](of, partition, ordered))
        return r

    def join_on_keys(self, r: DataFrame, other: DataFrame, keys: Sequence[str], condition: Column) -> DataFrame:
        """One join on the condition and the keys null-safe (``eqNullSafe``), ``other``'s
        keys renamed ``__ev<key>``."""
        renamed = other.withColumnsRenamed({k: f"__ev{k}" for k in keys}) if keys else other
        for k in keys:
            condition = condition & F.col(k).eqNullSafe(F.col(f"__ev{k}"))
        return r.join(renamed, condition, "inner")

    # ---- the analytic node (tempo.lowering.analytics) ---------------------------------------
    def running_argument(self, a: p.Aggregate, payload_type: type) -> Column:
        from tempo.spark.windows import argument_column

        return F.lit(None) if a.arg is None else argument_column(a, payload_type)

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

    def first_by(self, r: DataFrame, by: str, order: Sequence[str]) -> DataFrame:
        ordered = Window.partitionBy(by).orderBy(*[F.col(n).asc_nulls_first() for n in order])
        return r.withColumn("__rn", F.row_number().over(ordered)).filter(F.col("__rn") == 1)

    def carried(self, r: DataFrame) -> list[Column]:
        return [F.col(FIRST)] if FIRST in r.columns else []

    # ---- a live batch computed in bulk (``tempo.lowering.batches``) -------------------------
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
