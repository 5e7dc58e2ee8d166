"""Functions usable inside traced lambdas: ``tempo.col``, ``when``, ``is_in``, ``not_``, ``lit``, ``udf``.

Their signatures are typed on plain values so that mypy checks lambdas as ordinary
Python; at trace time they receive and return ``Traced`` proxies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, TypeVar, cast

from tempo.errors import QueryBuildError
from tempo.expr import nodes as n
from tempo.expr.trace import Traced, current_input, expr_of

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
    return cast(V, Traced(n.When(expr_of(condition), expr_of(then), expr_of(otherwise))))


def is_in(value: V, values: Iterable[V]) -> bool:
    """True where ``value`` equals one of the constant ``values``: the traced form of ``x in [...]``."""
    consts = tuple(values)
    if any(isinstance(v, Traced) for v in consts):
        raise QueryBuildError("tempo.is_in takes constant values; compare traced values with == and |")
    return cast(bool, Traced(n.IsIn(expr_of(value), consts)))


def not_(condition: bool) -> bool:
    """Logical not of a condition (``~cond`` works too, but mypy types ``~bool`` as ``int``)."""
    return cast(bool, Traced(n.Unary("not", expr_of(condition))))


def udf(fn: Callable[P, R], returns: type[R]) -> Callable[P, R]:
    """The escape hatch: wrap an arbitrary Python function for use inside a traced lambda.

    ``tempo.udf(my_fn, returns=float)(e.x, e.y)`` calls ``my_fn`` on the values of each
    event. It runs Python once per event on every executor (a Python UDF on Spark, so it
    is much slower than traced operators); arguments are positional, and ``returns`` is
    the result type used for checking and for Spark's schema.
    """

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs:
            raise QueryBuildError("tempo.udf functions take positional arguments only")
        return cast(R, Traced(n.PyCall(fn, tuple(expr_of(a) for a in args), returns)))

    call.__name__ = getattr(fn, "__name__", "udf")
    return call
