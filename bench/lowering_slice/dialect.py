"""Candidate 1 of issue 32: a small dialect protocol of tempo's own, and its two backends.

``Dialect`` names the relational primitives the rules of ``rules.py`` are written over: the
column expressions (a column, a literal, least/greatest, integer floor division, a
conditional, the tick-to-timestamp cast, five aggregates, two window functions) and the
relation operations (select, filter, an integer-range explode, group/aggregate, an
equi-join with a residual, one driver-side aggregate). Expressions of either backend
(``pyspark.sql.Column``, ``polars.Expr``) already overload the arithmetic, comparison and
logical operators the same way (``+ - * < <= == & | ~``), so the rules use those directly;
only what the two spell differently is a primitive.

Everything below the ``Dialect`` protocol is per backend: each class is the whole of what a
backend must supply for the slice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

R = TypeVar("R")  # a relation: a polars LazyFrame, a Spark DataFrame
X = TypeVar("X")  # a column expression: a polars Expr, a Spark Column


class Dialect(Protocol[R, X]):
    """The primitives a DataFrame backend supplies; the rules combine them."""

    name: str

    # ---- expressions ----
    def col(self, name: str) -> X: ...
    def lit(self, value: int | float | bool) -> X: ...
    def least(self, *xs: X) -> X: ...
    def greatest(self, *xs: X) -> X: ...
    def floor_div(self, x: X, by: int) -> X:
        """``floor(x / by)`` in 64-bit integers (never through doubles: ticks pass 2**53)."""
        ...

    def when(self, cond: X, then: X, otherwise: X) -> X: ...
    def timestamp_us(self, x: X) -> X:
        """Ticks (microseconds since the Unix epoch) as a UTC timestamp."""
        ...

    def aggregate(self, kind: str, x: X | None) -> X:
        """``sum``, ``min``, ``max``, ``avg`` of ``x``, or ``count`` of the rows."""
        ...

    def cum_max(self, x: X, partition: Sequence[str], order: Sequence[str]) -> X:
        """The running maximum of ``x`` in ``order`` within each partition (rows up to this one)."""
        ...

    def lag(self, x: X, partition: Sequence[str], order: Sequence[str]) -> X:
        """``x`` of the row before in ``order`` within each partition (null for the first)."""
        ...

    # ---- relations ----
    def columns(self, r: R) -> list[str]: ...
    def select(self, r: R, cols: Mapping[str, X]) -> R: ...
    def with_columns(self, r: R, cols: Mapping[str, X]) -> R: ...
    def filter(self, r: R, cond: X) -> R: ...
    def explode_range(self, r: R, name: str, lo: X, hi: X, keep: Sequence[str]) -> R:
        """One row per integer ``lo..hi`` (inclusive) as ``name``, with ``keep``; the rows must
        have ``lo <= hi`` (the rules filter first where they may not)."""
        ...

    def group_by(self, r: R, by: Sequence[str], aggs: Mapping[str, X]) -> R: ...
    def join(self, left: R, right: R, on: Sequence[tuple[str, str]], residual: X | None) -> R:
        """Inner equi-join on the pairs of column names ``on``, then ``residual``; both sides' columns kept."""
        ...

    def scalars(self, r: R, aggs: Mapping[str, X]) -> dict[str, Any]:
        """Aggregates of the whole relation, brought to the driver (an action)."""
        ...


class PolarsDialect(Generic[R, X]):
    """The primitives on polars lazy frames."""

    name = "polars"

    def __init__(self) -> None:
        import polars as pl

        self.pl = pl

    def col(self, name: str) -> Any:
        return self.pl.col(name)

    def lit(self, value: int | float | bool) -> Any:
        return self.pl.lit(value)

    def least(self, *xs: Any) -> Any:
        return self.pl.min_horizontal(*xs)

    def greatest(self, *xs: Any) -> Any:
        return self.pl.max_horizontal(*xs)

    def floor_div(self, x: Any, by: int) -> Any:
        return x // by

    def when(self, cond: Any, then: Any, otherwise: Any) -> Any:
        return self.pl.when(cond).then(then).otherwise(otherwise)

    def timestamp_us(self, x: Any) -> Any:
        return x.cast(self.pl.Datetime("us", "UTC"))

    def aggregate(self, kind: str, x: Any | None) -> Any:
        if kind == "count":
            return self.pl.len().cast(self.pl.Int64)
        return {"sum": x.sum, "min": x.min, "max": x.max, "avg": x.mean}[kind]()

    def cum_max(self, x: Any, partition: Sequence[str], order: Sequence[str]) -> Any:
        return x.cum_max().over(partition or None, order_by=list(order))

    def lag(self, x: Any, partition: Sequence[str], order: Sequence[str]) -> Any:
        return x.shift(1).over(partition or None, order_by=list(order))

    def columns(self, r: Any) -> list[str]:
        return r.collect_schema().names()

    def select(self, r: Any, cols: Mapping[str, Any]) -> Any:
        return r.select([e.alias(n) for n, e in cols.items()])

    def with_columns(self, r: Any, cols: Mapping[str, Any]) -> Any:
        return r.with_columns([e.alias(n) for n, e in cols.items()])

    def filter(self, r: Any, cond: Any) -> Any:
        return r.filter(cond)

    def explode_range(self, r: Any, name: str, lo: Any, hi: Any, keep: Sequence[str]) -> Any:
        return r.select(self.pl.int_ranges(lo, hi + 1).alias(name), *keep).explode(name)

    def group_by(self, r: Any, by: Sequence[str], aggs: Mapping[str, Any]) -> Any:
        return r.group_by(list(by)).agg([e.alias(n) for n, e in aggs.items()])

    def join(self, left: Any, right: Any, on: Sequence[tuple[str, str]], residual: Any | None) -> Any:
        pairs = left.join(right, left_on=[a for a, _ in on], right_on=[b for _, b in on], how="inner", coalesce=False)
        return pairs if residual is None else pairs.filter(residual)

    def scalars(self, r: Any, aggs: Mapping[str, Any]) -> dict[str, Any]:
        return r.select([e.alias(n) for n, e in aggs.items()]).collect().row(0, named=True)


class SparkDialect(Generic[R, X]):
    """The primitives on Spark DataFrames and Columns."""

    name = "spark"

    def __init__(self) -> None:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        self.F, self.Window = F, Window

    def col(self, name: str) -> Any:
        return self.F.col(f"`{name}`")

    def lit(self, value: int | float | bool) -> Any:
        return self.F.lit(value)

    def least(self, *xs: Any) -> Any:
        return self.F.least(*xs)

    def greatest(self, *xs: Any) -> Any:
        return self.F.greatest(*xs)

    def floor_div(self, x: Any, by: int) -> Any:
        # Spark's ``/`` divides in doubles; ``div`` truncates toward zero: take the remainder off first.
        return self.F.call_function("div", x - self.F.pmod(x, self.F.lit(by)), self.F.lit(by))

    def when(self, cond: Any, then: Any, otherwise: Any) -> Any:
        return self.F.when(cond, then).otherwise(otherwise)

    def timestamp_us(self, x: Any) -> Any:
        return self.F.timestamp_micros(x)

    def aggregate(self, kind: str, x: Any | None) -> Any:
        if kind == "count":
            return self.F.count(self.F.lit(1))
        return {"sum": self.F.sum, "min": self.F.min, "max": self.F.max, "avg": self.F.avg}[kind](x)

    def cum_max(self, x: Any, partition: Sequence[str], order: Sequence[str]) -> Any:
        w = self.Window.partitionBy(*partition).orderBy(*order)
        return self.F.max(x).over(w.rowsBetween(self.Window.unboundedPreceding, self.Window.currentRow))

    def lag(self, x: Any, partition: Sequence[str], order: Sequence[str]) -> Any:
        return self.F.lag(x).over(self.Window.partitionBy(*partition).orderBy(*order))

    def columns(self, r: Any) -> list[str]:
        return list(r.columns)

    def select(self, r: Any, cols: Mapping[str, Any]) -> Any:
        return r.select(*[e.alias(n) for n, e in cols.items()])

    def with_columns(self, r: Any, cols: Mapping[str, Any]) -> Any:
        return r.withColumns(dict(cols))

    def filter(self, r: Any, cond: Any) -> Any:
        return r.filter(cond)

    def explode_range(self, r: Any, name: str, lo: Any, hi: Any, keep: Sequence[str]) -> Any:
        return r.select(self.F.explode(self.F.sequence(lo, hi)).alias(name), *[self.col(k) for k in keep])

    def group_by(self, r: Any, by: Sequence[str], aggs: Mapping[str, Any]) -> Any:
        return r.groupBy(*[self.col(b) for b in by]).agg(*[e.alias(n) for n, e in aggs.items()])

    def join(self, left: Any, right: Any, on: Sequence[tuple[str, str]], residual: Any | None) -> Any:
        cond = None
        for a, b in on:
            eq = left[f"`{a}`"] == right[f"`{b}`"]
            cond = eq if cond is None else cond & eq
        if residual is not None:
            cond = residual if cond is None else cond & residual
        return left.join(right, cond, "inner") if cond is not None else left.crossJoin(right)

    def scalars(self, r: Any, aggs: Mapping[str, Any]) -> dict[str, Any]:
        return r.agg(*[e.alias(n) for n, e in aggs.items()]).collect()[0].asDict()
