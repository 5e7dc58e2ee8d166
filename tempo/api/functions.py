"""Functions usable inside traced lambdas: ``tempo.col``, ``when``, ``is_in``, ``not_``, ``lit``,
``is_null``, ``is_not_null``, ``coalesce``, ``try_divide``, ``udf``.

Their signatures are typed on plain values so that mypy checks lambdas as ordinary
Python; at trace time they receive and return ``Traced`` proxies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, TypeVar, cast, overload

from tempo.errors import QueryBuildError
from tempo.expr import nodes as n
from tempo.expr.trace import Traced, current_input, expr_of, require_condition

V = TypeVar("V")
P = ParamSpec("P")
R = TypeVar("R")


def col(name: str, input: int = 0) -> Any:
    """The field ``name`` of the lambda's argument ``input`` (0, or 1 for a join's right side).

    For field names known only at run time; prefer ``e.name``, which the IDE completes and
    mypy checks.
    """
    return Traced(n.attr(current_input(input), name))


def lit(value: V) -> V:
    """A constant, for the rare case where Python would otherwise evaluate it eagerly."""
    return cast(V, Traced(n.Lit(value)))


def when(condition: bool, then: V, otherwise: V) -> V:
    """``then`` where ``condition`` holds, else ``otherwise``: the traced form of ``x if c else y``."""
    require_condition(condition, "tempo.when")
    return cast(V, Traced(n.When(expr_of(condition), expr_of(then), expr_of(otherwise))))


def is_in(value: V, values: Iterable[V]) -> bool:
    """True where ``value`` equals one of the constant ``values``: the traced form of ``x in [...]``."""
    consts = tuple(values)
    if any(isinstance(v, Traced) for v in consts):
        raise QueryBuildError("tempo.is_in takes constant values; compare traced values with == and |")
    return cast(bool, Traced(n.IsIn(expr_of(value), consts)))


def not_(condition: bool) -> bool:
    """Logical not of a condition (``~cond`` works too, but mypy types ``~bool`` as ``int``)."""
    require_condition(condition, "tempo.not_")
    return cast(bool, Traced(n.Unary("not", expr_of(condition))))


def is_null(value: object) -> bool:
    """True where ``value`` is null (None), else false; never null itself.

    The traced form of ``value is None``: Python's ``is`` cannot be traced (it compares the
    symbolic value, so it is a constant), and ``value == None`` is null by the null rule.
    """
    return cast(bool, Traced(n.IsNull(expr_of(value))))


def is_not_null(value: object) -> bool:
    """True where ``value`` is not null; the traced form of ``value is not None``."""
    return cast(bool, Traced(n.IsNull(expr_of(value), negate=True)))


@overload
def coalesce(value: V | None, default: V, /) -> V: ...
@overload
def coalesce(value: V | None, second: V | None, default: V, /) -> V: ...
@overload
def coalesce(value: V | None, *defaults: V | None) -> V | None: ...


def coalesce(value: Any, *defaults: Any) -> Any:
    """The first of its arguments that is not null (SQL's ``COALESCE``); null if all are.

    ``tempo.coalesce(e.v, 0.0)`` on ``v: float | None`` is a ``float``. The arguments'
    types must agree (ints and floats mix, giving a float).
    """
    if not defaults:
        raise QueryBuildError("tempo.coalesce needs a value and at least one default, e.g. tempo.coalesce(e.v, 0.0)")
    return Traced(n.Coalesce(tuple(expr_of(v) for v in (value, *defaults))))


def try_divide(dividend: float | None, divisor: float | None) -> float | None:
    """``dividend / divisor``, or null (None) where ``divisor`` is zero (SQL's and Spark's
    ``try_divide``); typed ``float | None`` so that mypy asks the code downstream to handle
    the null (``tempo.coalesce(tempo.try_divide(r.a, r.b), 0.0)``). ``/`` itself raises
    ``tempo.EvaluationError`` on a zero divisor, as Python does (docs/semantics.md 7.4)."""
    a, b = expr_of(dividend), expr_of(divisor)
    for side in (a, b):
        if side.dtype not in (int, float, bool, object):
            raise QueryBuildError(f"tempo.try_divide divides numbers, got {side.dtype.__name__} in {n.render(side)}")
    divides = n.Binary("!=", b, n.Lit(0))
    return cast("float | None", Traced(n.When(divides, n.Binary("/", a, b), n.Lit(None))))


def udf(fn: Callable[P, R], returns: type[R]) -> Callable[P, R]:
    """The escape hatch: wrap an arbitrary Python function for use inside a traced lambda.

    ``tempo.udf(my_fn, returns=float)(e.x, e.y)`` calls ``my_fn`` on the values of each
    event. It runs Python once per event on every executor (a Python UDF on Spark, so it
    is much slower than traced operators); arguments are positional, and ``returns`` is
    the result type used for checking and for Spark's schema.

    Each result is checked against ``returns`` on every executor: ``None`` is allowed, an
    ``int`` is accepted (as a float) where ``float`` is declared, a ``bool`` is not a number
    unless ``bool`` is declared; anything else raises ``tempo.UdfResultError`` naming the
    udf, both types, the value and the arguments.
    """
    if not callable(fn):
        raise QueryBuildError(f"tempo.udf needs a function, got {fn!r}")
    if not isinstance(returns, type):
        raise QueryBuildError(f"tempo.udf(..., returns=) must be a type such as float or str, got {returns!r}")

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs:
            raise QueryBuildError("tempo.udf functions take positional arguments only")
        return cast(R, Traced(n.PyCall(fn, tuple(expr_of(a) for a in args), returns)))

    call.__name__ = getattr(fn, "__name__", "udf")
    return call
