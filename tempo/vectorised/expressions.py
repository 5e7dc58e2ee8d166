"""Expression IR to polars expressions: a visitor keyed by node class.

The in-memory executor's semantics are kept where polars' differ, as the Spark compiler keeps
them (docs/semantics.md 7.4): ``/`` is true division, ``//`` floors and ``%`` takes the sign
of the divisor; a zero divisor or an integer result outside 64 bits is an ``EvaluationError``
where the in-memory executor evaluates the expression (``Scope.guard``); a bool meeting a
number is that number.
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
from tempo.errors import CompileError, EvaluationRule, UnsupportedError
from tempo.expr import nodes as x
from tempo.expr.schema import FieldInfo, field_names, is_record_type, record_fields
from tempo.runtime.release import PayloadColumns
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
        EXECUTOR,
        f"a payload field {name!r} of type {getattr(tp, '__qualname__', tp)}",
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
    return payload_columns(frame, payload_type, naive).every()


def payload_columns(frame: pl.DataFrame, payload_type: type, naive: bool) -> PayloadColumns[Any]:
    """The payload fields of ``frame``'s rows as the records hold them, one column per field
    (decoded now: a value that does not convert fails here), the records made from them when
    read (``PayloadColumns``)."""
    columns = []
    for f in record_fields(payload_type):
        values = frame[f.name].to_list()
        if f.dtype in (datetime, timedelta) or f.element is not None or is_record_type(f.dtype):
            values = [from_column(v, f.dtype, f.element, naive) for v in values]
        columns.append(values)
    return PayloadColumns(payload_type, columns, frame.height)


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

    def __init__(self, prefixes: tuple[str, ...] = ("",), guard: pl.Expr | None = None) -> None:
        self.prefixes = prefixes
        self.guard = guard
        """Where the expression being compiled is evaluated (None: every row). polars computes
        every branch of a ``when`` and both sides of ``&`` over the whole column; the guard
        keeps an ``EvaluationError`` to the rows where the in-memory executor evaluates it."""

    def field(self, index: int, name: str) -> pl.Expr:
        return pl.col(f"{self.prefixes[index]}{name}")

    def guarded(self, condition: pl.Expr) -> Scope:
        """This scope, evaluated only where ``condition`` (not null) also holds."""
        return Scope(self.prefixes, condition if self.guard is None else self.guard & condition)


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
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _raise_first(frame: pl.Series, expression: str, rule: EvaluationRule) -> pl.Series:
    """The failing rows' flags (all false) unless a row fails: then its ``EvaluationError``,
    raised through polars as text (``tempo.expr.nodes.evaluation_text``)."""
    columns = frame.struct.unnest()
    failing = columns["__fails"].fill_null(False)
    if failing.any():
        row = columns.filter(failing).row(0)
        raise ValueError(x.evaluation_text(expression, rule, repr(tuple(row[1:]))))
    return failing


def _checked(e: x.Expr, scope: Scope, result: pl.Expr, fails: pl.Expr, rule: EvaluationRule, operands: Sequence[pl.Expr]) -> pl.Expr:
    """``result``, raising ``e``'s ``EvaluationError`` where ``fails`` holds in the rows the
    expression is evaluated in (``scope.guard``)."""
    fails = fails.fill_null(False)
    if scope.guard is not None:
        fails = fails & scope.guard.fill_null(False)
    text = x.render(e)
    values = pl.struct([fails.alias("__fails"), *(v.alias(f"__v{i}") for i, v in enumerate(operands))])
    check = values.map_batches(lambda frame: _raise_first(frame, text, rule), return_dtype=pl.Boolean)
    return pl.when(check).then(None).otherwise(result)


def _fmod(frame: pl.Series) -> pl.Series:
    """C's ``fmod`` (exact: the remainder with the dividend's sign), which polars lacks: its
    ``%`` on floats is ``a - b * floor(a / b)``, rounded."""
    import numpy as np

    columns = frame.struct.unnest()
    a, b = (columns[n].cast(pl.Float64).to_numpy() for n in ("a", "b"))
    with np.errstate(invalid="ignore", divide="ignore"):
        return pl.Series(np.fmod(a, b), dtype=pl.Float64).set(columns["a"].is_null() | columns["b"].is_null(), None)


_OVERFLOW, _ZERO = EvaluationRule.INTEGER_OVERFLOW, EvaluationRule.DIVISION_BY_ZERO


def _outside_64_bits(wide: pl.Expr) -> pl.Expr:
    return (wide > x.INT_MAX) | (wide < x.INT_MIN)


@rule(x.Binary)
def _binary(scope: Scope, e: x.Binary) -> pl.Expr:
    op = e.op
    left = expr(e.left, scope)
    if op == "&":  # the right side is evaluated only where the left is not false
        return left & expr(e.right, scope.guarded(left.fill_null(True)))
    if op == "|":  # ... and only where the left is not true
        return left | expr(e.right, scope.guarded(~left.fill_null(False)))
    a, b = numeric_operands(e.left, e.right, left, expr(e.right, scope), op not in x.COMPARISON)
    if op in x.COMPARISON:
        return _COMPARE[op](a, b)
    if e.left.dtype in (datetime, timedelta) or e.right.dtype in (datetime, timedelta):
        raise UnsupportedError(EXECUTOR, f"the expression {x.render(e)}", "it does not compile datetime arithmetic yet")
    integer = e.dtype is int
    if op in ("+", "-", "*"):
        if e.dtype is str:
            return a + b
        if not integer:
            return {"+": a + b, "-": a - b, "*": a * b}[op]
        wide = {"+": lambda p, q: p + q, "-": lambda p, q: p - q, "*": lambda p, q: p * q}[op](a.cast(pl.Int128), b.cast(pl.Int128))
        return _checked(e, scope, wide.cast(pl.Int64, strict=False), _outside_64_bits(wide), _OVERFLOW, (a, b))
    zero = (b == 0) & a.is_not_null()
    if op == "/":
        return _checked(e, scope, pl.when(b == 0).then(None).otherwise(a.cast(pl.Float64) / b), zero, _ZERO, (a, b))
    if op == "//":
        if integer:  # polars' integer ``//`` floors, exactly
            floored = _checked(e, scope, a // b, (a == x.INT_MIN) & (b == -1), _OVERFLOW, (a, b))
        else:  # floor(a / b), as SQL: inf and NaN stay
            floored = (a.cast(pl.Float64) / b).floor()
        return _checked(e, scope, pl.when(b == 0).then(None).otherwise(floored), zero, _ZERO, (a, b))
    if op == "%":
        if integer:  # polars' integer ``%`` takes the divisor's sign, exactly, as Python's
            remainder = a % b
        else:  # C's fmod, then the divisor added where the signs differ (Python's rule)
            r = pl.struct([a.alias("a"), b.alias("b")]).map_batches(_fmod, return_dtype=pl.Float64)
            remainder = pl.when((r != 0) & ((r < 0) != (b < 0))).then(r + b).otherwise(r)
        return _checked(e, scope, pl.when(b == 0).then(None).otherwise(remainder), zero, _ZERO, (a, b))
    raise UnsupportedError(EXECUTOR, f"the expression {x.render(e)}", f"it has no rule for the operator {op}")


@rule(x.Unary)
def _unary(scope: Scope, e: x.Unary) -> pl.Expr:
    v = expr(e.operand, scope)
    if e.op == "not":
        return ~v
    result = -v if e.op == "neg" else v.abs()
    if e.dtype is int:
        return _checked(e, scope, result, v == x.INT_MIN, _OVERFLOW, (v,))
    return result


def _as(dtype: type, value: x.Expr, c: pl.Expr) -> pl.Expr:
    """``c`` (of ``value``) as a branch of a result of type ``dtype``."""
    if dtype is int and value.dtype is bool:
        return c.cast(pl.Int64)
    if dtype is float and value.dtype in (int, bool):
        return c.cast(pl.Float64)
    return c


@rule(x.When)
def _when(scope: Scope, e: x.When) -> pl.Expr:
    condition = expr(e.condition, scope)
    holds = condition.fill_null(False)
    then = _as(e.dtype, e.then, expr(e.then, scope.guarded(holds)))
    otherwise = _as(e.dtype, e.otherwise, expr(e.otherwise, scope.guarded(~holds)))
    return pl.when(condition).then(then).otherwise(otherwise)


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
    values: list[pl.Expr] = []
    inner = scope
    for v in e.values:  # each evaluated only where those before it are null
        values.append(_as(e.dtype, v, expr(v, inner)))
        inner = inner.guarded(values[-1].is_null())
    return pl.coalesce(values)


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
    value = pl.col(f"__agg{e.index}")
    if not e.checked:
        return value
    # A sum of integers, added as Int128: its value must fit 64 bits (``Aggregate.wide_integers``).
    return _checked(e, scope, value.cast(pl.Int64, strict=False), _outside_64_bits(value), _OVERFLOW, (value,))


@rule(x.KeyRef)
def _key_ref(scope: Scope, e: x.KeyRef) -> pl.Expr:
    return pl.col(f"__key{e.index}")


@rule(x.ExplodedItem)
def _exploded_item(scope: Scope, e: x.ExplodedItem) -> pl.Expr:
    return pl.col("__item")


@rule(x.WindowBound)
def _window_bound(scope: Scope, e: x.WindowBound) -> pl.Expr:
    return pl.col("__ws" if e.which == "start" else "__we")  # the window's bounds, in ticks (``lowering.windows.stamped``)


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
