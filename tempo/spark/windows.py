"""Window nodes as native Spark plans: the dispatch on the window kind, and the Spark
compiler's answers for a window's keys, values and aggregates (``tempo.spark.dialect``).

Each kind's rule builds one row per window that its input's final CTI completed, with the
columns ``__key<i>`` (group keys), ``__agg<i>`` (aggregates), ``__ws``/``__we`` (the window's
bounds) and what its timestamp needs (``__lo``/``__hi``: the earliest and latest start).
``tempo.lowering.windows.stamped`` then stamps each row (``WindowTimestamp``) and projects the
payload. Every kind's rule is the shared lowering's, over ``tempo.spark.dialect``: hopping and
tumbling windows in ``tempo.lowering.windows``, the kinds cut by the events in
``tempo.lowering.event_windows``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql.types import StructField, StructType
from pyspark.sql import functions as F

from tempo.errors import EvaluationRule
from tempo.expr.aggregator import ARROW_TYPES, aggregator_runner
from tempo.expr.schema import field_names
from tempo.plan import nodes as p
from tempo.spark.columns import START as S
from tempo.spark.columns import Scope, checked, column
from tempo.spark.types import spark_type

if TYPE_CHECKING:
    pass

K = p.AggregateKind
_SIMPLE_COLUMNS: dict[p.AggregateKind, Callable[[Column], Column]] = {
    K.SUM: F.sum,
    K.AVG: F.avg,
    K.MIN: F.min,
    K.MAX: F.max,
    K.VAR: F.var_samp,
    K.VAR_POP: F.var_pop,
    K.STDDEV: F.stddev_samp,
    K.STDDEV_POP: F.stddev_pop,
    K.FIRST: F.min,
    K.LAST: F.max,
}


def aggregate_column(a: p.Aggregate, v: Column, over: WindowSpec | None = None) -> Column:
    """Aggregate ``a`` of the argument column ``v`` (``argument_column``) over a group, or over
    the frame ``over`` (where Spark has no distinct count)."""

    def framed(agg: Column) -> Column:
        return agg if over is None else agg.over(over)

    if a.kind is K.COUNT:
        return framed(F.count(F.lit(1)))
    if a.kind is K.COUNT_DISTINCT:
        return F.count_distinct(v) if over is None else F.size(F.collect_set(v).over(over))
    if a.kind is K.PERCENTILE:
        return framed(F.percentile(v, F.lit(a.fraction)))
    if a.kind is K.PERCENTILE_APPROX:
        if a.arg is None or a.arg.dtype is not float:
            return framed(F.percentile_approx(v, F.lit(a.fraction), F.lit(a.accuracy)))
        # Spark's summary mis-sorts NaN, which tempo orders after every number: the rank
        # ceil(fraction·n) past the numbers is NaN; below it, NaN as +inf keeps every rank.
        n, nans = framed(F.count(v)), framed(F.count(F.when(F.isnan(v), 1)))
        rank = F.greatest(F.lit(1), F.ceil(F.lit(a.fraction) * n))
        summary = framed(F.percentile_approx(F.when(F.isnan(v), F.lit(float("inf"))).otherwise(v), F.lit(a.fraction), F.lit(a.accuracy)))
        return F.when(n == 0, F.lit(None).cast("double")).when(rank > n - nans, F.lit(float("nan"))).otherwise(summary)
    if a.kind is K.COLLECT:  # structs (order, value), sorted by their order
        return F.transform(F.array_sort(framed(F.collect_list(v))), lambda e: e["v"])
    if a.wide_integers:
        total = framed(F.sum(v))
        if a.kind is K.AVG:  # the exact total made a double, then divided (as in memory)
            return F.try_divide(total.cast("double"), framed(F.count(v)))
        return fits_64_bits(a, total)
    agg = framed(_SIMPLE_COLUMNS[a.kind](v))
    return agg["v"] if a.kind.ordered else agg  # first, last: the least or greatest (order, value)


WIDE = "decimal(38,0)"
"""Integers added exactly: sums of ints and bools (``Aggregate.wide_integers``)."""


def fits_64_bits(a: p.Aggregate, total: Column) -> Column:
    """A sum of integers (``WIDE``) as a long, or ``a``'s ``EvaluationError`` where it does not fit."""
    from tempo.expr.nodes import AggRef, INT_MAX, INT_MIN

    ref = AggRef(0, int, f"w.{a.describe()}")
    return checked(ref, total.cast("long"), (total > F.lit(INT_MAX)) | (total < F.lit(INT_MIN)), EvaluationRule.INTEGER_OVERFLOW, (total,))


def key_columns(node: p.WindowNode | p.AnalyticNode | p.ClipNode) -> list[Column]:
    """The window's (or analytic's) group key expressions as columns ``__key0``, ``__key1``, ... (``key_names``)."""
    return [column(k, Scope()).alias(f"__key{i}") for i, k in enumerate(node.keys or ())]


def key_names(node: p.WindowNode | p.AnalyticNode | p.ClipNode) -> list[str]:
    """The names of ``key_columns``."""
    return [f"__key{i}" for i in range(len(node.keys or ()))]


def argument_column(a: p.Aggregate, payload_type: type) -> Column:
    """An aggregate's argument as a column of rows with the start and the payload fields (a
    bool counts as an int, as in memory). For the kinds that depend on the events' order, a
    struct of the order (start, then the payload's fields: Spark orders structs field by
    field, nulls first, as ``codegen.payload_order``) and the value; null for a null value."""
    assert a.arg is not None
    v = column(a.arg, Scope())
    if a.wide_integers:  # added exactly, as decimals: the sum checked to fit 64 bits (``fits_64_bits``)
        v = v.cast(WIDE)
    elif a.arg.dtype is bool and a.kind in (K.MIN, K.MAX):  # the kinds taking bools as numbers
        v = v.cast("long")
    if not a.kind.ordered:
        return v
    order = F.struct(F.col(S).alias("s"), *[F.col(f"`{n}`").alias(f"f{i}") for i, n in enumerate(field_names(payload_type))])
    return F.when(v.isNotNull(), F.struct(order.alias("o"), v.alias("v")))


def value_columns(node: p.WindowNode) -> list[Column]:
    """Each aggregate's argument as ``__v<i>``, and what ``top`` ranks by as ``__o<i>_<j>``."""
    values = [argument_column(a, node.input.payload_type).alias(f"__v{i}") for i, a in enumerate(node.aggregates) if a.arg is not None]
    ranked_by = [column(e, Scope()).alias(f"__o{i}_{j}") for i, a in enumerate(node.aggregates) for j, e in enumerate(a.order)]
    return values + ranked_by


def value_names(node: p.WindowNode) -> list[str]:
    """The names of ``value_columns``."""
    values = [f"__v{i}" for i, a in enumerate(node.aggregates) if a.arg is not None]
    return values + [f"__o{i}_{j}" for i, a in enumerate(node.aggregates) for j in range(len(a.order))]


def grouped_aggregates(node: p.WindowNode, rows: DataFrame, by: list[str], extra: Sequence[Column] = ()) -> DataFrame:
    """``rows`` grouped by the columns ``by``, with the node's aggregates as ``__agg<i>`` and
    ``extra``. A user-defined aggregate runs in ``applyInArrow`` over each group's values
    (``_uda``), its result joined back to the group."""
    aggs = []
    for i, a in enumerate(node.aggregates):
        if a.kind is K.TOP:  # rank within the group (SQL's RANK), then the ranks kept with their events
            order = [
                F.col(f"__o{i}_{j}").desc_nulls_last() if d else F.col(f"__o{i}_{j}").asc_nulls_first() for j, d in enumerate(a.descending)
            ]
            rows = rows.withColumn(f"__rank{i}", F.rank().over(Window.partitionBy(*by).orderBy(*order)))
            kept = F.struct(F.col(f"__rank{i}").cast("long").alias("rank"), F.col(f"__v{i}").alias("event"))
            aggs.append(F.collect_list(F.when(F.col(f"__rank{i}") <= F.lit(a.limit), kept)).alias(f"__agg{i}"))
        elif a.kind is not K.UDA:
            aggs.append(aggregate_column(a, F.col(f"__v{i}")).alias(f"__agg{i}"))
    # A window read for its keys and bounds only: Spark's agg needs an aggregate.
    grouped = rows.groupBy(*by).agg(*aggs, *extra) if aggs or extra else rows.groupBy(*by).agg(F.count(F.lit(1)).alias("__n_unused"))
    for i, a in enumerate(node.aggregates):
        if a.kind is K.UDA:
            results = _uda(rows, by, i, a)
            same = [F.col(c).eqNullSafe(F.col(f"__u{j}")) for j, c in enumerate(by)]
            grouped = grouped.join(results, functools.reduce(lambda l, r: l & r, same), "left").drop(*[f"__u{j}" for j in range(len(by))])
    return grouped


def _uda(rows: DataFrame, by: list[str], i: int, a: p.Aggregate) -> DataFrame:
    """Aggregate ``a`` (a ``tempo.Aggregator``) of ``__v<i>`` per group of ``by`` (named
    ``__u<j>``), as ``__agg<i>``: one vectorised call per group, on its Arrow data."""
    assert a.arg is not None
    run = aggregator_runner(a.function, a.arg.dtype, type(a.function).__qualname__, local=False)
    names = [f"__u{j}" for j in range(len(by))]
    data = rows.select(*[F.col(c).alias(n) for c, n in zip(by, names)], F.col(f"__v{i}").alias("__x"))
    returns = a.result_type
    schema = StructType([StructField(n, data.schema[n].dataType) for n in names] + [StructField(f"__agg{i}", spark_type(returns))])
    result_alias, column = ARROW_TYPES[returns], f"__agg{i}"

    def per_group(table: Any) -> Any:  # shipped to the workers: pyarrow and its closure only
        import pyarrow as pa

        result_type = pa.timestamp("us", tz="UTC") if result_alias.startswith("timestamp") else pa.type_for_alias(result_alias)
        return table.select(names).slice(0, 1).append_column(column, pa.array([run(table.column("__x"))], type=result_type))

    return data.groupBy(*names).applyInArrow(per_group, schema)


# ---- hopping and tumbling ---------------------------------------------------------------


MERGED_OVER_PANES: dict[p.AggregateKind, Callable[[Column], Column]] = {
    K.SUM: F.sum,
    K.MIN: F.min,
    K.MAX: F.max,
    K.FIRST: F.min,
    K.LAST: F.max,
}
"""Aggregates whose value over a window is the same aggregate of its panes' values
(``SparkDialect.itself_over_panes``)."""
