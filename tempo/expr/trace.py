"""Tracing: calling a user lambda once on symbolic proxies to get an expression tree.

A ``Traced`` value stands for "the value of this expression for the current event". Its
operators build IR nodes instead of computing. Python constructs that need a real value
(``and``/``or``/``not``, ``if``, ``in``, chained comparisons, f-strings) call
``__bool__``, ``__contains__`` or ``__format__``, which raise a ``TraceError`` naming
the operator or function to use instead.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from tempo.errors import QueryBuildError, TraceError
from tempo.expr import nodes as n
from tempo.expr.schema import is_record, is_record_type, record_fields

_CONTROL_FLOW_HELP = (
    "a traced lambda cannot use Python control flow on event values: "
    "write `a & b`, `a | b`, `~a` (or tempo.not_(a)) instead of `and`, `or`, `not`; "
    "tempo.when(cond, x, y) instead of `x if cond else y`; "
    "tempo.is_in(x, [...]) instead of `x in [...]`; "
    "and (a < x) & (x < b) instead of the chained `a < x < b`"
)


def _expr(value: object) -> n.Expr:
    """Any value a lambda may produce, as an expression."""
    if isinstance(value, Traced):
        return value._expr
    if is_record(value):
        return record_expr(value)
    if isinstance(value, (list, dict, set)):
        raise QueryBuildError(f"cannot use a {type(value).__name__} in a traced expression: {value!r}")
    return n.Lit(value)


def record_expr(value: object) -> n.Record:
    """A record instance whose fields hold traced values, as a ``Record`` node."""
    cls = type(value)
    names = tuple(f.name for f in record_fields(cls))
    return n.Record(cls, names, tuple(_expr(getattr(value, name)) for name in names))


class Traced:
    """A symbolic value inside a traced lambda. Typed as the payload type for the IDE."""

    __slots__ = ("_expr",)
    __hash__ = None  # type: ignore[assignment]  # == builds an expression, so no hashing
    _expr: n.Expr  # declared for mypy; otherwise ``self._expr`` resolves via ``__getattr__``

    def __init__(self, expr: n.Expr) -> None:
        object.__setattr__(self, "_expr", expr)

    def __getattr__(self, name: str) -> Traced:
        if name.startswith("__"):
            raise AttributeError(name)
        if not is_record_type(self._expr.dtype):
            raise QueryBuildError(
                f"{n.render(self._expr)} is a {self._expr.dtype.__name__}, which has no field {name!r}"
            )
        return Traced(n.attr(self._expr, name))

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise TraceError("traced events are read-only: build a new record in select()")

    def __repr__(self) -> str:
        return f"<traced {n.render(self._expr)}: {self._expr.dtype.__name__}>"

    # Control flow: refuse, naming the fix.
    def __bool__(self) -> NoReturn:
        raise TraceError(_CONTROL_FLOW_HELP)

    def __contains__(self, item: object) -> NoReturn:
        raise TraceError(_CONTROL_FLOW_HELP)

    def __iter__(self) -> NoReturn:
        raise TraceError("a traced value cannot be iterated")

    def __format__(self, spec: str) -> NoReturn:
        raise TraceError("a traced value cannot be formatted into a string; use tempo.udf for string formatting")

    def __str__(self) -> NoReturn:
        raise TraceError("a traced value has no string value at trace time; use tempo.udf for string conversion")

    def __index__(self) -> NoReturn:
        raise TraceError("a traced value cannot be used as an index at trace time")

    def __float__(self) -> NoReturn:
        raise TraceError("float() of a traced value: use arithmetic such as `x * 1.0`")

    def __int__(self) -> NoReturn:
        raise TraceError("int() of a traced value: use `x // 1`")

    # Operators build nodes.
    def _bin(self, op: str, other: object, reflected: bool = False) -> Traced:
        left, right = self._expr, _expr(other)
        if reflected:
            left, right = right, left
        return Traced(n.Binary(op, left, right))

    def __add__(self, o: object) -> Traced: return self._bin("+", o)
    def __radd__(self, o: object) -> Traced: return self._bin("+", o, True)
    def __sub__(self, o: object) -> Traced: return self._bin("-", o)
    def __rsub__(self, o: object) -> Traced: return self._bin("-", o, True)
    def __mul__(self, o: object) -> Traced: return self._bin("*", o)
    def __rmul__(self, o: object) -> Traced: return self._bin("*", o, True)
    def __truediv__(self, o: object) -> Traced: return self._bin("/", o)
    def __rtruediv__(self, o: object) -> Traced: return self._bin("/", o, True)
    def __floordiv__(self, o: object) -> Traced: return self._bin("//", o)
    def __rfloordiv__(self, o: object) -> Traced: return self._bin("//", o, True)
    def __mod__(self, o: object) -> Traced: return self._bin("%", o)
    def __rmod__(self, o: object) -> Traced: return self._bin("%", o, True)
    def __eq__(self, o: object) -> Traced: return self._bin("==", o)  # type: ignore[override]
    def __ne__(self, o: object) -> Traced: return self._bin("!=", o)  # type: ignore[override]
    def __lt__(self, o: object) -> Traced: return self._bin("<", o)
    def __le__(self, o: object) -> Traced: return self._bin("<=", o)
    def __gt__(self, o: object) -> Traced: return self._bin(">", o)
    def __ge__(self, o: object) -> Traced: return self._bin(">=", o)
    def __and__(self, o: object) -> Traced: return self._bin("&", o)
    def __rand__(self, o: object) -> Traced: return self._bin("&", o, True)
    def __or__(self, o: object) -> Traced: return self._bin("|", o)
    def __ror__(self, o: object) -> Traced: return self._bin("|", o, True)
    def __neg__(self) -> Traced: return Traced(n.Unary("neg", self._expr))
    def __pos__(self) -> Traced: return self
    def __abs__(self) -> Traced: return Traced(n.Unary("abs", self._expr))
    def __invert__(self) -> Traced: return Traced(n.Unary("not", self._expr))


# The inputs of the lambda being traced, so that tempo.col() can find them.
_current_inputs: contextvars.ContextVar[tuple[n.Expr, ...]] = contextvars.ContextVar("tempo_trace_inputs", default=())


def trace(fn: Callable[..., Any], args: Sequence[object]) -> n.Expr:
    """Call ``fn`` once on ``args`` (proxies, built by the caller) and return its expression."""
    inputs = tuple(a._expr for a in args if isinstance(a, Traced))
    token = _current_inputs.set(inputs)
    try:
        result = fn(*args)
    except TraceError:
        raise
    except QueryBuildError:
        raise
    except TypeError as exc:
        raise TraceError(f"tracing {getattr(fn, '__name__', 'the lambda')} failed: {exc}") from exc
    finally:
        _current_inputs.reset(token)
    return _expr(result)


def trace_records(fn: Callable[..., Any], records: Sequence[type]) -> n.Expr:
    """Trace a lambda whose arguments are payload records of the given types."""
    return trace(fn, [Traced(n.Input(i, cls)) for i, cls in enumerate(records)])


def current_input(index: int) -> n.Expr:
    """Argument ``index`` of the lambda being traced (for ``tempo.col``)."""
    inputs = _current_inputs.get()
    if not inputs:
        raise QueryBuildError("tempo.col() can only be used inside a lambda given to a stream operator")
    if index >= len(inputs):
        raise QueryBuildError(f"tempo.col(..., input={index}): this lambda has {len(inputs)} input(s)")
    return inputs[index]


def expr_of(value: object) -> n.Expr:
    """Public form of ``_expr`` for the API layer."""
    return _expr(value)
