"""User-defined aggregates: the escape hatch for an aggregate tempo does not have.

An ``Aggregator`` is a zero / accumulate / merge / result set of methods over *batches* of
values (``pyarrow`` arrays), so that no executor calls Python once per value: the in-memory
executor hands a window's values over in batches when the window's result is due, Spark
runs it with ``applyInArrow`` on each group's Arrow data. ``aggregator_runner`` is the one
driver of those methods every executor calls.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from tempo.errors import QueryBuildError

if TYPE_CHECKING:
    import pyarrow as pa

S = TypeVar("S")
R_co = TypeVar("R_co", covariant=True)

BATCH = 4096
"""Values per ``accumulate`` call; a window with more is accumulated in batches and merged."""

ARROW_TYPES: dict[type, str] = {bool: "bool", int: "int64", float: "float64", str: "string", datetime: "timestamp[us, tz=UTC]"}
"""The value types an aggregator takes and gives, and the Arrow type of its values."""


class Aggregator(Protocol[S, R_co]):
    """A user-defined aggregate: any class with ``returns`` and these four methods (no base
    class to inherit, so Spark's workers need only the class itself and pyarrow).

    ``zero()`` is an empty state; ``accumulate(state, values)`` adds a batch of values (a
    ``pyarrow.Array`` without nulls: use ``pyarrow.compute``, or ``values.to_numpy()``);
    ``merge(a, b)`` combines two states; ``result(state)`` is the aggregate's value, of type
    ``returns`` (or None). Executors split a window's values into batches as they like and
    pass them in no particular order, so the result must depend on neither: accumulating the
    values of ``a`` and ``b`` together must give what merging their states gives. Nulls are
    skipped, as by every aggregate; a window with no value gets ``result(zero())``.

    ``w.uda(MyAggregate(), lambda e: e.value)`` uses it in any window (docs/semantics.md 5.6.6).
    The type parameters are the state's type and the result's.
    """

    returns: ClassVar[type]
    """The result's type: bool, int, float, str or datetime."""

    def zero(self) -> S: ...

    def accumulate(self, state: S, values: pa.Array) -> S: ...

    def merge(self, a: S, b: S) -> S: ...

    def result(self, state: S) -> R_co: ...


def check_aggregator(aggregator: object, value_type: type) -> type:
    """The result type of ``aggregator`` over values of ``value_type``; a ``QueryBuildError``
    unless it has the four methods, a ``returns`` tempo can carry, and takes such values."""
    name = type(aggregator).__qualname__
    missing = [m for m in ("zero", "accumulate", "merge", "result") if not callable(getattr(aggregator, m, None))]
    if missing or isinstance(aggregator, type):
        raise QueryBuildError(
            f"uda() takes an aggregator object with zero, accumulate, merge and result methods (tempo.Aggregator), "
            f"got {aggregator!r}" + (f", which has no {', '.join(missing)}" if missing and not isinstance(aggregator, type) else "")
        )
    returns = getattr(aggregator, "returns", None)
    if returns not in ARROW_TYPES:
        raise QueryBuildError(f"{name}.returns must be one of bool, int, float, str, datetime (the result's type), got {returns!r}")
    if value_type not in ARROW_TYPES:
        raise QueryBuildError(
            f"uda({name}) takes values of type bool, int, float, str or datetime, got {getattr(value_type, '__name__', value_type)}"
        )
    assert isinstance(returns, type)
    return returns


def aggregator_runner(aggregator: Any, value_type: type, name: str, local: bool) -> Callable[[Any], Any]:
    """A function of a window's values (a list, or a pyarrow array on Spark) giving
    ``aggregator``'s result: nulls dropped, ``BATCH`` values at a time accumulated from
    ``zero()`` and merged in order, the result checked against ``returns`` (an int where a
    float is declared becomes a float). A bad result raises ``UdfResultError`` (``local``)
    or, in a Spark worker, the ``ValueError`` ``checked_udf`` raises there; an exception of
    the aggregator's, ``UdfError`` naming the method, as ``checked_udf`` raises it. The function
    refers to nothing of tempo's (pyarrow, builtins and its closure), so Spark can ship it
    to workers without tempo."""
    from tempo.expr.nodes import UDF_MARKER, UDF_RAISED_MARKER

    arrow_name, batch, marker, raised_marker = ARROW_TYPES[value_type], BATCH, UDF_MARKER, UDF_RAISED_MARKER
    returns: type = aggregator.returns
    error: Any = None
    raised: Any = None
    if local:
        from tempo.errors import UdfError, UdfResultError

        error, raised = UdfResultError, UdfError

    def run(values: Any) -> Any:
        import pyarrow as pa

        want = pa.timestamp("us", tz="UTC") if arrow_name.startswith("timestamp") else pa.type_for_alias(arrow_name)
        array = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, type=want)
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        array = array.drop_null()
        if array.type != want:
            array = array.cast(want)
        method = "zero"
        try:
            state = aggregator.zero()
            for i, offset in enumerate(range(0, len(array), batch)):
                method = "accumulate"
                part = aggregator.accumulate(aggregator.zero(), array.slice(offset, batch))
                method = "merge"
                state = part if i == 0 else aggregator.merge(state, part)
            method = "result"
            result = aggregator.result(state)
        except Exception as exc:  # the aggregator failed: UdfError, here or on the driver
            failure = (f"{name}.{method}", type(exc).__name__, str(exc), f"(the {len(array)} values of a window)")
            if raised is not None:
                raise raised(*failure) from exc
            import json

            raise ValueError(raised_marker + json.dumps(failure) + raised_marker) from None
        if result is None or (isinstance(result, returns) and (returns is bool or not isinstance(result, bool))):
            return result
        if returns is float and isinstance(result, int) and not isinstance(result, bool):
            return float(result)
        fields = (name, returns.__name__, type(result).__name__, repr(result), f"(the {len(array)} values of a window)")
        if error is not None:
            raise error(*fields)
        import json

        raise ValueError(marker + json.dumps(fields) + marker)

    return run
