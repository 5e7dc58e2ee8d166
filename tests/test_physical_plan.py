"""The physical planning step (``tempo.lowering.physical``): each strategy is chosen once
from the plan's stream properties, both DataFrame executors carry out the same choice, and
``explain`` says which was taken.

The choices, from the module's docstring:

* a hopping or tumbling window whose input's lifetimes reach at most one window goes to it
  without a range to explode (a tumbling window over points);
* overlapping windows over points whose aggregates merge from parts are built by panes of
  ``gcd(size, hop)``: 6 s every 4 s, panes of 2 s;
* else each event goes to every window it overlaps: intervals in overlapping windows, or an
  aggregate that does not merge (a distinct count);
* a join of points with lifetimes of at most 2 s meets on the keys and time buckets 2 s
  wide (the longest lifetime); a join of two unbounded sides on its keys alone.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pytest

from tempo import Cti, EdgeStart, EventShape, Interval, Point, Stream
from tempo.vectorised import VectorisedExecutor
from tests.conformance.test_operators import T, sec


@attrs.frozen
class Reading:
    key: str
    v: float


@attrs.frozen
class Totals:
    n: int
    total: float | None
    mean: float | None
    low: float | None
    high: float | None


@attrs.frozen
class Distinct:
    n: int


@attrs.frozen
class Paired:
    v: float
    w: float


def _totals(w: Any) -> Totals:
    return Totals(w.count(), w.sum(lambda e: e.v), w.avg(lambda e: e.v), w.min(lambda e: e.v), w.max(lambda e: e.v))


POINTS: list[Any] = [Point(T(1), Reading("a", 1.0)), Point(T(3), Reading("b", 2.0)), Point(T(7), Reading("a", 4.0)), Cti(T(20))]
INTERVALS: list[Any] = [Interval(T(1), T(3), Reading("a", 1.0)), Interval(T(4), T(6), Reading("a", 2.0)), Cti(T(20))]
OPEN: list[Any] = [EdgeStart(T(1), Reading("a", 1.0)), EdgeStart(T(2), Reading("b", 2.0)), Cti(T(20))]


def _points(name: str = "in") -> Stream[Reading]:
    return Stream.create(name, POINTS, EventShape.POINT)


def _edges(name: str, items: list[Any]) -> Stream[Reading]:
    return Stream.create(name, items, EventShape.INTERVAL)


def _open(name: str) -> Stream[Reading]:
    return Stream.create(name, OPEN, EventShape.EDGE)


QUERIES: dict[str, tuple[Callable[[], Stream[Any]], list[str]]] = {
    "tumbling over points": (
        lambda: _points().tumbling(sec(5)).aggregate(_totals),
        ["each event in the one window it reaches"],
    ),
    "hopping over points": (
        lambda: _points().group_by(lambda r: r.key).hopping(sec(6), sec(4)).aggregate(lambda key, w: _totals(w)),
        ["by panes of 2 s"],
    ),
    "hopping over intervals": (
        lambda: _edges("in", INTERVALS).hopping(sec(6), sec(2)).aggregate(_totals),
        ["each event in every window it overlaps"],
    ),
    "a distinct count over points": (
        lambda: _points().hopping(sec(6), sec(2)).aggregate(lambda w: Distinct(w.count_distinct(lambda e: e.v))),
        ["each event in every window it overlaps"],
    ),
    "points joined with intervals": (
        lambda: _points("left").join(
            _edges("right", INTERVALS).alter_event_duration(sec(2)), on=lambda a, b: a.key == b.key, select=lambda a, b: Paired(a.v, b.v)
        ),
        ["on the keys and time buckets of 2 s"],
    ),
    "open lifetimes joined": (
        lambda: _open("left").join(_open("right"), on=lambda a, b: a.key == b.key, select=lambda a, b: Paired(a.v, b.v)),
        ["on the keys alone"],
    ),
}


def physical_choices(explained: str) -> list[str]:
    """The strategies of ``explain``'s physical plan section, one a node."""
    section = explained.split("== tempo physical plan ==\n", 1)[1].split("\n\n", 1)[0]
    return [line.rsplit(": ", 1)[1] for line in section.splitlines()]


@pytest.mark.parametrize("name", list(QUERIES))
def test_the_vectorised_executor_explains_the_strategy_chosen(name: str) -> None:
    build, expected = QUERIES[name]
    assert physical_choices(VectorisedExecutor().explain(build())) == expected


def test_a_window_without_a_cti_says_it_has_no_results() -> None:
    """No CTI reaches the window: it releases nothing, and no strategy is taken."""
    query = Stream.create("in", POINTS[:-1], EventShape.POINT).tumbling(sec(5)).aggregate(_totals)
    assert physical_choices(VectorisedExecutor().explain(query)) == ["no results (its input forwards no CTI)"]


def test_a_plan_without_a_choice_says_so() -> None:
    explained = VectorisedExecutor().explain(_points().where(lambda r: r.v > 1))
    assert "== tempo physical plan ==\n(no operator with a choice of strategy)\n" in explained
    assert "== polars plan ==" in explained


@pytest.mark.spark
def test_spark_takes_the_same_strategies(spark_executor: Any) -> None:
    """One plan for both: Spark's ``explain`` names the same choice for every query above."""
    for name, (build, expected) in QUERIES.items():
        assert physical_choices(spark_executor.explain(build())) == expected, name


@pytest.mark.spark
def test_first_and_last_merge_by_panes_on_spark_alone(spark_executor: Any) -> None:
    """The one capability difference, stated in one place (``itself_over_panes``): Spark
    merges first and last as the least and greatest (order, value) struct of the panes;
    polars' struct min gives a null where a field is, so its windows explode."""

    def ends(w: Any) -> Totals:
        return Totals(w.count(), w.first(lambda e: e.v), None, None, w.last(lambda e: e.v))

    query = _points().hopping(sec(6), sec(4)).aggregate(ends)
    assert physical_choices(spark_executor.explain(query)) == ["by panes of 2 s"]
    assert physical_choices(VectorisedExecutor().explain(query)) == ["each event in every window it overlaps"]
