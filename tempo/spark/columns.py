"""Expression IR to native Spark Columns: a visitor keyed by node class.

Python semantics are kept where Spark's differ: ``/`` is true division, ``//`` floors and
``%`` takes the sign of the divisor; a zero divisor or an integer result outside 64 bits is
an ``EvaluationError`` (``checked``; docs/semantics.md 7.4). ``IsNull`` and ``Coalesce`` are Spark's ``isnull`` / ``isnotnull``
and ``coalesce``. Only ``PyCall`` (``tempo.udf``, the documented escape hatch) becomes a
Python UDF, which checks each result against the declared type inside the worker (a
mismatch is raised there, not turned into a silent NULL) and ``udf_errors`` raises that
error on the driver as ``UdfResultError``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, TypeVar

from pyspark.sql import Column
from pyspark.sql import functions as F

from tempo.dispatch import Registry
from tempo.errors import CompileError, EvaluationRule, TempoError, UnsupportedError
from tempo.expr import nodes as x
from tempo.expr.nodes import udf_error
from tempo.expr.schema import record_fields
from tempo.spark.types import spark_type
from tempo.ticks import to_ticks

START, END = "__tempo_s", "__tempo_e"
"""The lifetime columns of every relation, in ticks (``INF`` for an open end)."""


class Scope:
    """What the names of an expression refer to in one relation."""

    def __init__(self, prefixes: tuple[str, ...] = ("",)) -> None:
        self.prefixes = prefixes  # column prefix of each lambda argument

    def field(self, index: int, name: str) -> Column:
        return F.col(f"`{self.prefixes[index]}{name}`")


EXPRESSIONS: Registry[Scope, Column] = Registry("Spark", "expression", lambda e: f"the expression {x.render(e)}")
rule = EXPRESSIONS.rule


def quoted(name: str) -> str:
    """A column name as SQL text (for ``selectExpr`` and ``F.expr``, which build a whole
    projection or expression in one JVM call)."""
    return "`" + name.replace("`", "``") + "`"


def column(e: x.Expr, scope: Scope) -> Column:
    """The Column computing ``e`` in ``scope``."""
    return EXPRESSIONS(scope, e)


@rule(x.Attr)
def _attr(scope: Scope, e: x.Attr) -> Column:
    if isinstance(e.base, x.Input):
        return scope.field(e.base.index, e.name)
    return column(e.base, scope).getField(e.name)


@rule(x.Input)
def _input(scope: Scope, e: x.Input) -> Column:
    from tempo.expr.schema import field_names

    return F.struct(*[scope.field(e.index, n).alias(n) for n in field_names(e.record)])


@rule(x.Lit)
def _lit(scope: Scope, e: x.Lit) -> Column:
    if isinstance(e.value, datetime):
        return F.timestamp_micros(F.lit(to_ticks(e.value)))
    if e.value is None or isinstance(e.value, (bool, int, float, str)):
        return F.lit(e.value)
    raise UnsupportedError("Spark", f"the constant {e.value!r}", f"it has no literal of type {type(e.value).__qualname__}")


def _is_float(e: x.Expr) -> bool:
    return e.dtype is float


def numeric_operands(left: x.Expr, right: x.Expr, a: Column, b: Column, arithmetic: bool = False) -> tuple[Column, Column]:
    """``a`` and ``b`` (of ``left`` and ``right``) ready to combine: a bool meeting a number, or
    in arithmetic, is the number it is in Python (``True == 1``, ``True + True == 2``), where
    Spark refuses to mix the types."""
    if left.dtype is bool and (arithmetic or right.dtype in (int, float)):
        a = a.cast("long")
    if right.dtype is bool and (arithmetic or left.dtype in (int, float)):
        b = b.cast("long")
    return a, b


@rule(x.Binary)
def _binary(scope: Scope, e: x.Binary) -> Column:
    op = e.op
    a, b = numeric_operands(e.left, e.right, column(e.left, scope), column(e.right, scope), op not in x.COMPARISON and op not in x.LOGICAL)
    if e.left.dtype is datetime or e.right.dtype is datetime:
        if op in x.COMPARISON:
            return _compare(op, a, b)
        raise UnsupportedError("Spark", f"the expression {x.render(e)}", "it does not compile datetime arithmetic yet")
    integer = e.dtype is int
    if op in ("+", "-", "*"):
        if e.dtype is str:
            return F.concat(a, b)
        if not integer:
            return {"+": a + b, "-": a - b, "*": a * b}[op]
        # Spark's try_ functions give null where a long result overflows (ANSI mode or not).
        result = {"+": F.try_add, "-": F.try_subtract, "*": F.try_multiply}[op](a, b)
        return checked(e, result, result.isNull() & a.isNotNull() & b.isNotNull(), _OVERFLOW, (a, b))
    zero = (b == 0) & a.isNotNull()
    if op == "/":
        return checked(e, F.try_divide(a.cast("double"), b), zero, _ZERO, (a, b))
    if op == "//":
        if integer:  # Spark's ``div`` truncates; a remainder against the divisor's sign floors it
            truncated = F.call_function("div", a, b)
            floored = F.when((a % b != 0) & ((a < 0) != (b < 0)), truncated - 1).otherwise(truncated)
            floored = checked(e, floored, (a == F.lit(x.INT_MIN)) & (b == -1), _OVERFLOW, (a, b))
        else:  # floor(a / b) as a double: inf and NaN stay, and so does a double past 2**52 (whole)
            q = a.cast("double") / b
            floored = F.when(F.isnan(q) | (F.abs(q) >= 2.0**52), q).otherwise(F.floor(q).cast("double"))
        return checked(e, floored, zero, _ZERO, (a, b))
    if op == "%":
        # Java's remainder (exact, the dividend's sign), then the divisor added where the signs
        # differ: Python's rule, never overflowing.
        r = a % b
        return checked(e, F.when((r != 0) & ((r < 0) != (b < 0)), r + b).otherwise(r), zero, _ZERO, (a, b))
    if op in x.COMPARISON:
        return _compare(op, a, b)
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    raise UnsupportedError("Spark", f"the expression {x.render(e)}", f"it has no rule for the operator {op}")


def _compare(op: str, a: Column, b: Column) -> Column:
    return {
        "==": lambda: a == b,
        "!=": lambda: a != b,
        "<": lambda: a < b,
        "<=": lambda: a <= b,
        ">": lambda: a > b,
        ">=": lambda: a >= b,
    }[op]()


@rule(x.Unary)
def _unary(scope: Scope, e: x.Unary) -> Column:
    v = column(e.operand, scope)
    if e.op == "not":
        return ~v
    result = -v if e.op == "neg" else F.abs(v)
    if e.dtype is int:
        return checked(e, result, v == F.lit(x.INT_MIN), _OVERFLOW, (v,))
    return result


_OVERFLOW, _ZERO = EvaluationRule.INTEGER_OVERFLOW, EvaluationRule.DIVISION_BY_ZERO


def checked(e: x.Expr, result: Column, fails: Column, rule: EvaluationRule, operands: tuple[Column, ...]) -> Column:
    """``result``, or ``e``'s ``EvaluationError`` where ``fails`` holds: Spark's ``raise_error``
    with the error's fields as marked text (``tempo.expr.nodes.evaluation_text``), raised again
    on the driver by ``udf_errors``. Spark evaluates a CASE's branches, AND's and OR's right
    sides and COALESCE's later values only where they decide, as the in-memory executor does,
    so the check fails only where that executor's does."""
    marker = "@@values@@"  # their place in the text, filled in per row
    head, tail = x.evaluation_text(x.render(e), rule, marker).split(marker)
    values = F.concat_ws(", ", *(v.cast("string") for v in operands))
    message = F.concat(F.lit(head + "("), F.coalesce(values, F.lit("")), F.lit(")" + tail))
    return F.when(fails, F.raise_error(message)).otherwise(result)


def _as(dtype: type, value: x.Expr, c: Column) -> Column:
    """``c`` (of ``value``) as a branch of a result of type ``dtype``: a bool among ints is the
    integer it is (Spark refuses to mix them)."""
    return c.cast("long") if dtype is int and value.dtype is bool else c


@rule(x.When)
def _when(scope: Scope, e: x.When) -> Column:
    then, otherwise = _as(e.dtype, e.then, column(e.then, scope)), _as(e.dtype, e.otherwise, column(e.otherwise, scope))
    return F.when(column(e.condition, scope), then).otherwise(otherwise)


@rule(x.IsIn)
def _is_in(scope: Scope, e: x.IsIn) -> Column:
    return column(e.operand, scope).isin(list(e.values))


@rule(x.IsNull)
def _is_null(scope: Scope, e: x.IsNull) -> Column:
    v = column(e.operand, scope)
    return F.isnotnull(v) if e.negate else F.isnull(v)


@rule(x.Coalesce)
def _coalesce(scope: Scope, e: x.Coalesce) -> Column:
    values = [_as(e.dtype, v, column(v, scope)) for v in e.values]
    if e.dtype is float:
        values = [c.cast("double") for c in values]
    return F.coalesce(*values)


@rule(x.PyCall)
def _py_call(scope: Scope, e: x.PyCall) -> Column:
    name = getattr(e.fn, "__name__", "udf")
    # Pickled rows, not Arrow (PySpark 4.3's default): values reach the function and its
    # checked result comes back the same way on every supported PySpark.
    fn = F.udf(x.checked_udf(e.fn, e.returns, name, local=False), spark_type(e.returns), useArrow=False)
    return fn(*[column(a, scope) for a in e.args])


@contextlib.contextmanager
def worker_errors(recognize: Callable[[BaseException], TempoError | None]) -> Iterator[None]:
    """Raise the tempo error ``recognize`` finds in a Spark failure (one a Python worker
    raised) as that error, rather than as Spark's error wrapping the worker's traceback."""
    try:
        yield
    except TempoError:
        raise
    except Exception as exc:
        error = recognize(exc)
        if error is None:
            raise
        raise error from None


def udf_errors() -> contextlib.AbstractContextManager[None]:
    """Raise a udf result error from a Spark job as the ``UdfResultError`` it is."""
    return worker_errors(udf_error)


F_ = TypeVar("F_", bound=Callable[..., Any])


@contextlib.contextmanager
def no_call_sites() -> Iterator[None]:
    """Build DataFrames without PySpark recording each call's Python call site.

    PySpark records, on every call of a DataFrame function, where in the Python code it was
    made, for the query context of its error messages: three more JVM round trips a call, a
    third of the time tempo takes to build a plan. The sites of tempo's plans are tempo's own
    code, not the user's, and tempo's errors name the input, row and rule themselves, so
    they are not recorded while tempo builds a plan (PySpark's switch for it,
    ``spark.python.sql.dataFrameDebugging.enabled``, is read once and cached in
    ``pyspark.errors.utils``; the cache is set for the duration, and restored).
    """
    try:
        from pyspark.errors import utils
    except ImportError:  # pragma: no cover - an older PySpark: nothing to skip
        yield
        return
    if not hasattr(utils, "_enable_debugging_cache"):  # pragma: no cover - a PySpark without it
        yield
        return
    saved = utils._enable_debugging_cache
    setattr(utils, "_enable_debugging_cache", False)
    try:
        yield
    finally:
        setattr(utils, "_enable_debugging_cache", saved)


def spark_action(method: F_) -> F_:
    """``method`` inside ``udf_errors()`` and ``no_call_sites()``: for the executor's actions."""

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with udf_errors(), no_call_sites():
            return method(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@rule(x.Record)
def _record(scope: Scope, e: x.Record) -> Column:
    return F.struct(*_fields(e, scope))


def _fields(e: x.Record, scope: Scope) -> list[Column]:
    """A record's field columns, each of the type its field declares (an int or bool in a
    float field a double, a bool in an int field a long), as the in-memory executor makes them."""
    declared = {f.name: f.dtype for f in record_fields(e.cls)}
    out = []
    for n, v in zip(e.names, e.values):
        c = column(v, scope)
        if x.widened(declared[n], v.dtype):
            c = c.cast(spark_type(declared[n]))
        out.append(c.alias(n))
    return out


@rule(x.AggRef)
def _agg_ref(scope: Scope, e: x.AggRef) -> Column:
    return F.col(f"__agg{e.index}")


@rule(x.KeyRef)
def _key_ref(scope: Scope, e: x.KeyRef) -> Column:
    return F.col(f"__key{e.index}")


@rule(x.ExplodedItem)
def _exploded_item(scope: Scope, e: x.ExplodedItem) -> Column:
    return F.col("__item")


@rule(x.WindowBound)
def _window_bound(scope: Scope, e: x.WindowBound) -> Column:
    return F.timestamp_micros(F.col("__ws" if e.which == "start" else "__we"))  # ``lowering.windows.stamped``


def record_columns(projection: x.Expr, scope: Scope) -> list[Column]:
    """The payload columns of a projection (a record, or an argument passed through)."""
    if isinstance(projection, x.Record):
        return _fields(projection, scope)
    if isinstance(projection, x.Input):
        from tempo.expr.schema import field_names

        return [scope.field(projection.index, n).alias(n) for n in field_names(projection.record)]
    raise CompileError(f"a projection must build a record, got {x.render(projection)}")


def floor_div(ticks: Column, by: int) -> Column:
    """``floor(ticks / by)`` as a Spark column, in integers, as Python's ``//`` (Spark's ``/``
    divides in doubles: slower, and inexact past 2**53 ticks, the year 2255): the one
    formula of the Spark side for a window's or a CTI period's number."""
    return F.call_function("div", ticks - F.pmod(ticks, F.lit(by)), F.lit(by))
