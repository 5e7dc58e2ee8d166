"""``top_k`` (docs/semantics.md 5.6.7), StreamInsight's TopK, on every executor: each window's
events ranked by a value (ties share a rank, so a tie at the last place keeps more than k;
nulls rank as the least value), with the window's result lifetime. Expectations written by
hand from 5.6.7."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
import pytest

from tempo import Cti, EventShape, Interval, Point, QueryBuildError, Stream, WindowTimestamp
from tests.conformance.test_operators import T, run
from tests.conformance.test_window_kinds import check, check_raw_steps, span


@attrs.frozen
class M:
    k: str
    v: int | None


@attrs.frozen
class Ranked:
    k: str
    v: int | None
    rank: int


def readings() -> list[Any]:
    """
    ::

        second   0  1  2     3  4  5  6  7  |10      12  |20
        key      a  b  a     b  a  b  a  b          a
        v        5  3  None  5  1  9  3  3          2
    """
    values = [("a", 5), ("b", 3), ("a", None), ("b", 5), ("a", 1), ("b", 9), ("a", 3), ("b", 3)]
    return [Point(T(i), M(k, v)) for i, (k, v) in enumerate(values)] + [Cti(T(10)), Point(T(12), M("a", 2)), Cti(T(20))]


def test_top_three_descending_keeps_a_tie_at_the_last_place(executor: Any) -> None:
    """[0, 10) by v descending: 9 ranks 1; the two 5s share rank 2; the three 3s rank 4 (past 3:
    dropped); 1 ranks 7 and the null last. [10, 20): 2 ranks 1. Each result lives as its window."""
    s = Stream.create("in", readings(), EventShape.POINT)
    q = s.tumbling(timedelta(seconds=10)).top_k(3, by=lambda e: e.v, select=lambda e, rank: Ranked(e.k, e.v, rank), descending=True)
    check(
        run(executor, q),
        [
            (T(10), [span(T(0), T(10), Ranked("b", 9, 1)), span(T(0), T(10), Ranked("a", 5, 2)), span(T(0), T(10), Ranked("b", 5, 2))]),
            (T(20), [span(T(10), T(20), Ranked("a", 2, 1))]),
        ],
    )


def test_per_key_ascending_nulls_rank_first(executor: Any) -> None:
    """Per key, ascending, k = 1, stamped at the window's START. Key a in [0, 10): None, 1, 3, 5:
    the null is the least value, rank 1 alone. Key b: 3, 3, 5, 9: the two 3s share rank 1."""
    s = Stream.create("in", readings(), EventShape.POINT)
    q = (
        s.group_by(lambda e: e.k)
        .tumbling(timedelta(seconds=10))
        .top_k(1, by=lambda e: e.v, select=lambda e, rank: Ranked(e.k, e.v, rank), timestamp=WindowTimestamp.START)
    )
    tick = timedelta(microseconds=1)
    check(
        run(executor, q),
        [
            (
                T(10),
                [
                    span(T(0), T(0) + tick, Ranked("a", None, 1)),
                    span(T(0), T(0) + tick, Ranked("b", 3, 1)),
                    span(T(0), T(0) + tick, Ranked("b", 3, 1)),
                ],
            ),
            (T(20), [span(T(10), T(10) + tick, Ranked("a", 2, 1))]),
        ],
    )


def test_snapshot_top_one_as_edges(executor: Any) -> None:
    """Snapshots of a [1, 6) v 2 and b [3, 8) v 7, the greatest v: [1, 3) a; [3, 6) b (7 > 2);
    [6, 8) b. As snapshot results (5.6.4): a start edge at the first CTI past the window's start,
    ended at the first CTI past its end; CTIs 4, 7, 9.

    ::

                     0    5    10
        a             [====)          v 2
        b               [====)        v 7
        CTIs             ^  ^ ^       4, 7, 9
        out           [=)             a, rank 1: an interval at 4 (3 < 4)
        out             [==)          b: EdgeStart(3) at 4, ended at 7
        out                [=)        b: EdgeStart(6) at 7, ended at 9
    """
    items: list[Any] = [Interval(T(1), T(6), M("a", 2)), Interval(T(3), T(8), M("b", 7)), Cti(T(4)), Cti(T(7)), Cti(T(9))]
    s = Stream.create("in", items, EventShape.INTERVAL)
    r = run(executor, s.snapshot().top_k(1, by=lambda e: e.v, select=lambda e, rank: Ranked(e.k, e.v, rank), descending=True))
    check(
        r,
        [
            (T(4), [span(T(1), T(3), Ranked("a", 2, 1)), span(T(3), T(6), Ranked("b", 7, 1))]),
            (T(7), [span(T(6), T(8), Ranked("b", 7, 1))]),
            (T(9), []),
        ],
    )
    check_raw_steps(
        executor,
        r,
        [
            ([("interval", T(1), T(3), Ranked("a", 2, 1)), ("start", T(3), Ranked("b", 7, 1))], T(4)),
            ([("end", T(3), T(6), Ranked("b", 7, 1)), ("start", T(6), Ranked("b", 7, 1))], T(7)),
            ([("end", T(6), T(8), Ranked("b", 7, 1))], T(9)),
        ],
    )


def test_ranked_by_several_values_each_its_direction(executor: Any) -> None:
    """[0, 10) by (v ascending, k descending), k = 2: the null is the least v, so (None, a) ranks
    1 and (1, a) 2; then the v 3s, b before a (k descending): b@1 and b@7 would share rank 3
    (equal in both values) and a@6 rank 5, all past 2."""
    s = Stream.create("in", readings(), EventShape.POINT)
    q = s.tumbling(timedelta(seconds=10)).top_k(
        2, by=lambda e: (e.v, e.k), select=lambda e, rank: Ranked(e.k, e.v, rank), descending=(False, True)
    )
    check(
        run(executor, q),
        [
            (T(10), [span(T(0), T(10), Ranked("a", None, 1)), span(T(0), T(10), Ranked("a", 1, 2))]),
            (T(20), [span(T(10), T(20), Ranked("a", 2, 1))]),
        ],
    )


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda w: w.top_k(0, by=lambda e: e.v, select=lambda e, r: Ranked(e.k, e.v, r)), "k must be a positive int, got 0"),
        (
            lambda w: w.top_k(1, by=lambda e: (e.v, e.k), select=lambda e, r: Ranked(e.k, e.v, r), descending=(True,)),
            "descending= one bool for each",
        ),
        (lambda w: w.top_k(1, by=lambda e: e.v, select=lambda e, r: Ranked(e.k, e.v, r), descending="yes"), "takes a bool"),
    ],
)
def test_bad_top_k_is_refused_when_built(build: Any, message: str) -> None:
    s = Stream.create("in", readings(), EventShape.POINT)
    with pytest.raises(QueryBuildError, match=message):
        build(s.tumbling(timedelta(seconds=10)))


def test_the_event_itself_as_the_result(executor: Any) -> None:
    """``select=lambda e, rank: e``: the ranked events unchanged (the two 5s share rank 2)."""
    s = Stream.create("in", readings(), EventShape.POINT)
    q = s.tumbling(timedelta(seconds=10)).top_k(2, by=lambda e: e.v, select=lambda e, rank: e, descending=True)
    check(
        run(executor, q),
        [
            (T(10), [span(T(0), T(10), M("b", 9)), span(T(0), T(10), M("a", 5)), span(T(0), T(10), M("b", 5))]),
            (T(20), [span(T(10), T(20), M("a", 2))]),
        ],
    )
