"""Expression IR to polars expressions: a visitor keyed by node class.

Python's semantics are kept where polars' differ, as the Spark compiler keeps them: ``/`` is
true division and gives null on a zero divisor (as the in-memory executor does), ``//``
floors and ``%`` takes the sign of the divisor; a bool meeting a number is that number.
Datetime values are integer ticks in every relation (``tempo.ticks``), turned into
datetimes only when results are assembled. ``PyCall`` (``tempo.udf``) runs the checked
function over each row's values, the one place a Python call per row is made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from tempo.dispatch import Registry
from tempo.errors import CompileError, UnsupportedError
from tempo.expr import nodes as x
from tempo.expr.schema import FieldInfo, field_names, is_record_type, record_fields
from tempo.ticks import INF, duration_ticks, from_ticks, to_ticks

START, END = "__tempo_s", "__tempo_e"
"""The lifetime columns of every relation, in ticks (``INF`` for an open end)."""

EXECUTOR = "vectorised"

_SCALARS: dict[type, Any] = {bool: pl.Boolean, int: pl.Int64, float: pl.Float64, str: pl.String, datetime: pl.Int64, timedelta: pl.Int64}


def polars_type(f: FieldInfo) -> Any:
    """The column type of a payload field (datetimes and durations as ticks, records as
    structs, lists as lists)."""
    return pl.List(value_type(f.element, f.name)) if f.element is not None else value_type(f.dtype, f.name)


def value_type(tp: type, name: str) -> Any:
    if tp in _SCALARS:
        return _SCALARS[tp]
    if is_record_type(tp):
        return pl.Struct({f.name: polars_type(f) for f in record_fields(tp)})
    raise UnsupportedError(
        EXECUTOR, f"a payload field {name!r} of type {getattr(tp, '__qualname__', tp)}",
        "it has columns for bool, int, float, str, datetime, timedelta, records and lists of them",
    )


def to_column(value: Any, tp: type, element: type | None) -> Any:
    """A payload field's value as its column holds it (``polars_type``)."""
    if value is None:
        return None
    if element is not None:
        return [to_column(v, element, None) for v in value]
    if tp is datetime:
        return to_ticks(value)
    if tp is timedelta:
        return duration_ticks(value)
    if is_record_type(tp):
        return {f.name: to_column(getattr(value, f.name), f.dtype, f.element) for f in record_fields(tp)}
    return value


def from_column(value: Any, tp: type, element: type | None, naive: bool) -> Any:
    """A column's value as the payload field holds it (the inverse of ``to_column``)."""
    if value is None:
        return None
    if element is not None:
        items = [from_column(v, element, None, naive) for v in value]
        return tuple(items) if tp is tuple else items
    if tp is datetime:
        return from_ticks(value, naive)
    if tp is timedelta:
        return timedelta(microseconds=value)
    if is_record_type(tp):
        return tp(**{f.name: from_column(value[f.name], f.dtype, f.element, naive) for f in record_fields(tp)})
    return value


def payload_schema(cls: type) -> dict[str, Any]:
    return {f.name: polars_type(f) for f in record_fields(cls)}


def payload_objects(frame: pl.DataFrame, payload_type: type, naive: bool) -> list[Any]:
    """The payload records of ``frame``'s rows (its columns named as the fields)."""
    fields = record_fields(payload_type)
    columns = []
    for f in fields:
        values = frame[f.name].to_list()
        if f.dtype in (datetime, timedelta) or f.element is not None or is_record_type(f.dtype):
            values = [from_column(v, f.dtype, f.element, naive) for v in values]
        columns.append(values)
    return [payload_type(*row) for row in zip(*columns)] if columns else [payload_type() for _ in range(frame.height)]


def events_frame(payload_type: type, events: Iterable[Sequence[Any]]) -> pl.DataFrame:
    """Events held as (start, end, payload) as a relation (an end ``None``: open)."""
    fields = record_fields(payload_type)
    data: dict[str, list[Any]] = {START: [], END: [], **{f.name: [] for f in fields}}
    for start, end, payload in events:
        data[START].append(start)
        data[END].append(INF if end is None else end)
        for f in fields:
            data[f.name].append(to_column(getattr(payload, f.name), f.dtype, f.element))
    return pl.DataFrame(data, schema={START: pl.Int64, END: pl.Int64, **payload_schema(payload_type)})


class Scope:
    """What the names of an expression refer to in one relation: a column prefix per lambda
    argument."""

    def __init__(self, prefixes: tuple[str, ...] = ("",)) -> None:
        self.prefixes = prefixes

    def field(self, index: int, name: str) -> pl.Expr:
        return pl.col(f"{self.prefixes[index]}{name}")


EXPRESSIONS: Registry[Scope, pl.Expr] = Registry(EXECUTOR, "expression", lambda e: f"the expression {x.render(e)}")
rule = EXPRESSIONS.rule


def expr(e: x.Expr, scope: Scope) -> pl.Expr:
    """The polars expression computing ``e`` in ``scope``."""
    return EXPRESSIONS(scope, e)


@rule(x.Attr)
def _attr(scope: Scope, e: x.Attr) -> pl.Expr:
    if isinstance(e.base, x.Input):
        return scope.field(e.base.index, e.name)
    return expr(e.base, scope).struct.field(e.name)


@rule(x.Input)
def _input(scope: Scope, e: x.Input) -> pl.Expr:
    return pl.struct([scope.field(e.index, n).alias(n) for n in field_names(e.record)])


@rule(x.Lit)
def _lit(scope: Scope, e: x.Lit) -> pl.Expr:
    v = e.value
    if isinstance(v, datetime):
        return pl.lit(to_ticks(v), dtype=pl.Int64)
    if isinstance(v, timedelta):
        return pl.lit(duration_ticks(v), dtype=pl.Int64)
    if v is None:
        return pl.lit(None)
    if isinstance(v, (bool, int, float, str)):
        return pl.lit(v, dtype=_SCALARS[type(v)])
    raise UnsupportedError(EXECUTOR, f"the constant {v!r}", f"it has no literal of type {type(v).__qualname__}")


def numeric_operands(left: x.Expr, right: x.Expr, a: pl.Expr, b: pl.Expr, arithmetic: bool = False) -> tuple[pl.Expr, pl.Expr]:
    """A bool meeting a number, or in arithmetic, is the number it is in Python."""
    if left.dtype is bool and (arithmetic or right.dtype in (int, float)):
        a = a.cast(pl.Int64)
    if right.dtype is bool and (arithmetic or left.dtype in (int, float)):
        b = b.cast(pl.Int64)
    return a, b


_COMPARE: dict[str, Callable[[pl.Expr, pl.Expr], pl.Expr]] = {
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


@rule(x.Binary)
def _binary(scope: Scope, e: x.Binary) -> pl.Expr:
    op = e.op
    a, b = numeric_operands(e.left, e.right, expr(e.left, scope), expr(e.right, scope), op not in x.COMPARISON and op not in x.LOGICAL)
    if op in x.COMPARISON:
        return _COMPARE[op](a, b)
    if e.left.dtype in (datetime, timedelta) or e.right.dtype in (datetime, timedelta):
        raise UnsupportedError(EXECUTOR, f"the expression {x.render(e)}", "it does not compile datetime arithmetic yet")
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    zero = b == 0
    if op == "/":
        return pl.when(zero).then(None).otherwise(a.cast(pl.Float64) / b)
    if op == "//":
        floored = (a.cast(pl.Float64) / b).floor()  # exact below 2**53, as Spark's
        as_float = e.left.dtype is float or e.right.dtype is float
        return pl.when(zero).then(None).otherwise(floored if as_float else floored.cast(pl.Int64))
    if op == "%":
        return pl.when(zero).then(None).otherwise(((a % b) + b) % b)  # the divisor's sign, as Python
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    raise UnsupportedError(EXECUTOR, f"the expression {x.render(e)}", f"it has no rule for the operator {op}")


@rule(x.Unary)
def _unary(scope: Scope, e: x.Unary) -> pl.Expr:
    v = expr(e.operand, scope)
    if e.op == "not":
        return ~v
    if e.op == "neg":
        return -v
    return v.abs()


def _as(dtype: type, value: x.Expr, c: pl.Expr) -> pl.Expr:
    """``c`` (of ``value``) as a branch of a result of type ``dtype``."""
    if dtype is int and value.dtype is bool:
        return c.cast(pl.Int64)
    if dtype is float and value.dtype in (int, bool):
        return c.cast(pl.Float64)
    return c


@rule(x.When)
def _when(scope: Scope, e: x.When) -> pl.Expr:
    then, otherwise = _as(e.dtype, e.then, expr(e.then, scope)), _as(e.dtype, e.otherwise, expr(e.otherwise, scope))
    return pl.when(expr(e.condition, scope)).then(then).otherwise(otherwise)


@rule(x.IsIn)
def _is_in(scope: Scope, e: x.IsIn) -> pl.Expr:
    v = expr(e.operand, scope)
    return pl.when(v.is_null()).then(None).otherwise(v.is_in(list(e.values)))


@rule(x.IsNull)
def _is_null(scope: Scope, e: x.IsNull) -> pl.Expr:
    v = expr(e.operand, scope)
    return v.is_not_null() if e.negate else v.is_null()


@rule(x.Coalesce)
def _coalesce(scope: Scope, e: x.Coalesce) -> pl.Expr:
    return pl.coalesce([_as(e.dtype, v, expr(v, scope)) for v in e.values])


@rule(x.PyCall)
def _py_call(scope: Scope, e: x.PyCall) -> pl.Expr:
    name = getattr(e.fn, "__name__", "udf")
    fn = x.checked_udf(e.fn, e.returns, name, local=False)  # raised through polars as text: ``udf_errors``
    names = [f"a{i}" for i in range(len(e.args))]
    args = pl.struct([expr(a, scope).alias(n) for n, a in zip(names, e.args)])
    dtype = _SCALARS.get(e.returns)
    if dtype is None:
        raise UnsupportedError(EXECUTOR, f"the udf {name}", f"it has no column type for its result type {e.returns.__qualname__}")
    return args.map_elements(lambda row: fn(*[row[n] for n in names]), return_dtype=dtype, skip_nulls=False)


@rule(x.Record)
def _record(scope: Scope, e: x.Record) -> pl.Expr:
    return pl.struct([expr(v, scope).alias(n) for n, v in zip(e.names, e.values)])


@rule(x.AggRef)
def _agg_ref(scope: Scope, e: x.AggRef) -> pl.Expr:
    return pl.col(f"__agg{e.index}")


@rule(x.KeyRef)
def _key_ref(scope: Scope, e: x.KeyRef) -> pl.Expr:
    return pl.col(f"__key{e.index}")


@rule(x.ExplodedItem)
def _exploded_item(scope: Scope, e: x.ExplodedItem) -> pl.Expr:
    return pl.col("__item")


@rule(x.WindowBound)
def _window_bound(scope: Scope, e: x.WindowBound) -> pl.Expr:
    return pl.col(START if e.which == "start" else END)


def record_exprs(projection: x.Expr, scope: Scope) -> list[pl.Expr]:
    """The payload columns of a projection (a record, or an argument passed through), cast
    to the record's field types (an int in a float field is widened, as in memory)."""
    if isinstance(projection, x.Record):
        fields = {f.name: f for f in record_fields(projection.cls)}
        return [
            _as(fields[n].dtype, v, expr(v, scope)).cast(polars_type(fields[n])).alias(n)
            for n, v in zip(projection.names, projection.values)
        ]
    if isinstance(projection, x.Input):
        return [scope.field(projection.index, n).alias(n) for n in field_names(projection.record)]
    raise CompileError(f"a projection must build a record, got {x.render(projection)}")
