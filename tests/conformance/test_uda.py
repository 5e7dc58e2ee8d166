"""User-defined aggregates (``tempo.Aggregator``, docs/semantics.md 5.6.6) on every executor:
the aggregator's zero / accumulate / merge / result over pyarrow batches, in the window kinds,
nulls skipped, the batches merged in windows longer than a batch; its result type checked.
Expectations written by hand."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, ClassVar

import attrs
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tempo import Aggregator, Cti, EventShape, Point, QueryBuildError, Stream, UdfError, UdfResultError
from tempo.expr import aggregator as uda_module
from tests.conformance.test_operators import T, run
from tests.conformance.test_window_kinds import check, span


class Spread:
    """max − min of the values (None without values): a state of (low, high)."""

    returns: ClassVar[type] = float

    def zero(self) -> tuple[float, float] | None:
        return None

    def accumulate(self, state: tuple[float, float] | None, values: pa.Array) -> tuple[float, float] | None:
        if len(values) == 0:
            return state
        low, high = pc.min(values).as_py(), pc.max(values).as_py()
        return (low, high) if state is None else (min(state[0], low), max(state[1], high))

    def merge(self, a: tuple[float, float] | None, b: tuple[float, float] | None) -> tuple[float, float] | None:
        if a is None or b is None:
            return a or b
        return (min(a[0], b[0]), max(a[1], b[1]))

    def result(self, state: tuple[float, float] | None) -> float | None:
        return None if state is None else state[1] - state[0]


class Calls:
    """How many accumulate calls a window took (merge adds them): shows the batching."""

    returns: ClassVar[type] = int

    def zero(self) -> int:
        return 0

    def accumulate(self, state: int, values: pa.Array) -> int:
        return state + 1

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, state: int) -> int:
        return state


class Latest:
    """The latest datetime value (an aggregator over datetimes)."""

    returns: ClassVar[type] = datetime

    def zero(self) -> datetime | None:
        return None

    def accumulate(self, state: datetime | None, values: pa.Array) -> datetime | None:
        top = pc.max(values).as_py() if len(values) else None
        return self.merge(state, top)

    def merge(self, a: datetime | None, b: datetime | None) -> datetime | None:
        return b if a is None else a if b is None else max(a, b)

    def result(self, state: datetime | None) -> datetime | None:
        return state


@attrs.frozen
class M:
    k: str
    v: float | None
    at: datetime


@attrs.frozen
class Out:
    k: str
    spread: float | None
    calls: int | None
    latest: datetime | None


def readings() -> list[Any]:
    """a: 2.0 @1, None @2, 7.5 @3, 4.0 @12; b: None @4; CTI 20."""
    return [
        Point(T(1), M("a", 2.0, T(100))),
        Point(T(2), M("a", None, T(300))),
        Point(T(3), M("a", 7.5, T(200))),
        Point(T(4), M("b", None, T(50))),
        Point(T(12), M("a", 4.0, T(400))),
        Cti(T(20)),
    ]


def test_a_uda_in_tumbling_windows_per_key(executor: Any) -> None:
    """a in [0, 10): values 2, 7.5 (the null skipped): spread 5.5, one accumulate call; latest of
    the times 100, 300, 200: 300. b in [0, 10): no value: result(zero()) is None, and the
    calls aggregator (0 calls) gives 0. a in [10, 20): one value: spread 0."""
    s = Stream.create("in", readings(), EventShape.POINT)
    q = (
        s.group_by(lambda e: e.k)
        .tumbling(timedelta(seconds=10))
        .aggregate(
            lambda k, w: Out(
                k=k, spread=w.uda(Spread(), lambda e: e.v), calls=w.uda(Calls(), lambda e: e.v), latest=w.uda(Latest(), lambda e: e.at)
            )
        )
    )
    check(
        run(executor, q),
        [
            (
                T(20),
                [
                    span(T(0), T(10), Out("a", 5.5, 1, T(300))),
                    span(T(0), T(10), Out("b", None, 0, T(50))),
                    span(T(10), T(20), Out("a", 0.0, 1, T(400))),
                ],
            )
        ],
    )


@attrs.frozen
class Count:
    n: int
    spread: float | None
    calls: int | None


def test_a_window_longer_than_a_batch_merges(executor: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With batches of 4 values, 10 values take 3 accumulate calls, merged (4 + 4 + 2); the
    spread is that of them all. In a session and a count window alike."""
    monkeypatch.setattr(uda_module, "BATCH", 4)
    items: list[Any] = [Point(T(i), M("a", float(i * i % 7), T(0))) for i in range(10)] + [Cti(T(30))]
    s = Stream.create("in", items, EventShape.POINT)
    sessions = s.session(timedelta(seconds=5)).aggregate(
        lambda w: Count(n=w.count(), spread=w.uda(Spread(), lambda e: e.v), calls=w.uda(Calls(), lambda e: e.v))
    )
    # values i*i % 7 for i in 0..9: 0 1 4 2 2 4 1 0 1 4: spread 4; the session [0, 9 + 5) ends at 14.
    check(run(executor, sessions), [(T(30), [span(T(14) - _tick(), T(14), Count(10, 4.0, 3))])])
    counted = s.count_window(5).aggregate(
        lambda w: Count(n=w.count(), spread=w.uda(Spread(), lambda e: e.v), calls=w.uda(Calls(), lambda e: e.v))
    )
    check(run(executor, counted), [(T(30), [span(T(4), T(4) + _tick(), Count(5, 4.0, 2)), span(T(9), T(9) + _tick(), Count(5, 4.0, 2))])])


def _tick() -> timedelta:
    from tempo import TICK

    return TICK


class Wrong:
    returns: ClassVar[type] = int

    def zero(self) -> int:
        return 0

    def accumulate(self, state: int, values: pa.Array) -> int:
        return state + len(values)

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, state: int) -> Any:
        return "many"


@attrs.frozen
class N:
    n: int | None


def test_a_result_of_another_type_is_a_udf_result_error(executor: Any) -> None:
    s = Stream.create("in", readings(), EventShape.POINT)
    q = s.tumbling(timedelta(seconds=10)).aggregate(lambda w: N(n=w.uda(Wrong(), lambda e: e.v)))
    with pytest.raises(UdfResultError, match="'Wrong' is declared to return int but returned 'many'"):
        executor.run(q)


class Refusing(Calls):
    """Refuses a batch holding 7.5."""

    def accumulate(self, state: int, values: pa.Array) -> int:
        if 7.5 in values.to_pylist():
            raise ValueError("7.5 is out of range")
        return state + 1


def test_an_aggregator_raising_is_a_udf_error_naming_the_method(executor: Any) -> None:
    """a's window [0, 10) holds 2.0 and 7.5 (the null skipped): accumulate raises there, and
    every executor raises ``UdfError`` naming the aggregator's method."""
    s = Stream.create("in", readings(), EventShape.POINT)
    q = s.group_by(lambda e: e.k).tumbling(timedelta(seconds=10)).aggregate(lambda k, w: N(n=w.uda(Refusing(), lambda e: e.v)))
    with pytest.raises(UdfError) as info:
        executor.run(q)
    e = info.value
    assert (e.udf, e.error, e.text, e.arguments) == (
        "Refusing.accumulate",
        "ValueError",
        "7.5 is out of range",
        "(the 2 values of a window)",
    )


def test_bad_aggregators_are_refused_when_built() -> None:
    s = Stream.create("in", readings(), EventShape.POINT)
    with pytest.raises(QueryBuildError, match="which has no zero, accumulate, merge, result"):
        s.tumbling(timedelta(seconds=10)).aggregate(lambda w: N(n=w.uda(object(), lambda e: e.v)))  # type: ignore[arg-type]

    class NoReturns(Calls):
        returns: ClassVar[type] = list

    with pytest.raises(QueryBuildError, match="NoReturns.returns must be one of bool, int, float, str, datetime"):
        s.tumbling(timedelta(seconds=10)).aggregate(lambda w: N(n=w.uda(NoReturns(), lambda e: e.v)))
    with pytest.raises(QueryBuildError, match="analytic\\(\\) takes no uda\\(\\)"):
        s.analytic(lambda e, a: N(n=a.uda(Calls(), lambda e: e.v)))


def test_an_aggregator_is_typed_as_the_protocol() -> None:
    """mypy checks the classes above against ``tempo.Aggregator`` (this assignment)."""
    aggregators: list[Aggregator[Any, Any]] = [Spread(), Calls(), Latest()]
    assert len(aggregators) == 3
