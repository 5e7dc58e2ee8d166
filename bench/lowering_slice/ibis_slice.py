"""Candidate 2 of issue 32: ibis as the relational target.

The slice's rules are not written again: ``rules.py`` runs unchanged over ``IbisDialect``,
the protocol's primitives as ibis expressions (deferred ``ibis._`` columns), so one backend
here stands for both of candidate 1's. ibis then compiles the expression for its polars
backend (to polars lazy frames) or its PySpark backend (to Spark SQL, run by
``spark.sql``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import ibis
import ibis.expr.datatypes as dt
from ibis import _

from tempo.plan.query import Query
from tempo.runtime.replay import CtiReplay
from tempo.tables import Span

from bench.lowering_slice import rules


class IbisDialect:
    """The primitives as ibis expressions; ``con`` runs the one driver-side aggregate."""

    name = "ibis"

    def __init__(self, backend: str = "polars") -> None:
        self.backend = backend

    def col(self, name: str) -> Any:
        return _[name]

    def lit(self, value: int | float | bool | None) -> Any:
        # A plain Python value: an ibis literal on the left of a deferred column fails
        # (``ibis.literal(1) + _.x``), while ``1 + _.x`` works; ibis types it on use.
        return ibis.null() if value is None else value

    def least(self, *xs: Any) -> Any:
        return ibis.least(*xs)

    def greatest(self, *xs: Any) -> Any:
        return ibis.greatest(*xs)

    def floor_div(self, x: Any, by: int) -> Any:
        return x // self.lit(by)

    def when(self, cond: Any, then: Any, otherwise: Any) -> Any:
        return ibis.ifelse(cond, then, otherwise)

    def timestamp_us(self, x: Any) -> Any:
        if self.backend == "pyspark":  # "does not support timestamp from unix time with unit us"
            return _spark_timestamp_micros(x)
        return x.as_timestamp("us")

    def aggregate(self, kind: str, x: Any | None) -> Any:
        if kind == "count":
            return _.count()
        return {"sum": x.sum, "min": x.min, "max": x.max, "avg": x.mean}[kind]()

    def cum_max(self, x: Any, partition: Sequence[str], order: Sequence[str]) -> Any:
        return x.max().over(ibis.window(group_by=list(partition), order_by=list(order), rows=(None, 0)))

    def lag(self, x: Any, partition: Sequence[str], order: Sequence[str]) -> Any:
        return x.lag().over(ibis.window(group_by=list(partition), order_by=list(order)))

    def columns(self, r: Any) -> list[str]:
        return list(r.columns)

    def select(self, r: Any, cols: Mapping[str, Any]) -> Any:
        return r.select(**cols)

    def with_columns(self, r: Any, cols: Mapping[str, Any]) -> Any:
        return r.mutate(**cols)

    def filter(self, r: Any, cond: Any) -> Any:
        return r.filter(cond)

    def explode_range(self, r: Any, name: str, lo: Any, hi: Any, keep: Sequence[str]) -> Any:
        # ``ibis.range`` takes no deferred columns: bound to the table first.
        # The polars backend has no rule for ``Table.unnest``: the array's ``unnest()`` in a select.
        lo, hi = lo.resolve(r), (hi + 1).resolve(r)
        return r.select(*keep, **{name: ibis.range(lo, hi, 1).unnest()})

    def group_by(self, r: Any, by: Sequence[str], aggs: Mapping[str, Any]) -> Any:
        return r.group_by(list(by)).aggregate(**aggs)

    def join(self, left: Any, right: Any, on: Sequence[tuple[str, str]], residual: Any | None) -> Any:
        pairs = left.join(right, [left[a] == right[b] for a, b in on], how="inner")
        return pairs if residual is None else pairs.filter(residual)

    def scalars(self, r: Any, aggs: Mapping[str, Any]) -> dict[str, Any]:
        return r.aggregate(**aggs).to_pyarrow().to_pylist()[0]


@ibis.udf.scalar.builtin(name="timestamp_micros")
def _spark_timestamp_micros(x: dt.int64) -> dt.Timestamp(timezone="UTC"):  # type: ignore[valid-type]
    """Spark SQL's own function, named through ibis's escape hatch for backend builtins."""


def Lowering(
    query: Query, replay: CtiReplay, tables: dict[str, Any], spans: dict[str, Callable[[], Span | None]], backend: str = "polars"
) -> rules.Lowering:
    """The slice's rules over ibis tables (``tables``: tempo's admitted inputs, by input name)."""
    return rules.Lowering(IbisDialect(backend), query, replay, tables, spans)
