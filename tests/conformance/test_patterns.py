"""``followed_by`` (docs/semantics.md 5.12), A followed by B within a duration, on every
executor: each A with its first following B, per key, with conditions; released once the CTI
passes B. Expectations written by hand from 5.12."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
import pytest

from tempo import Cti, EventShape, Point, QueryBuildError, Stream
from tests.conformance.test_operators import T, run
from tests.conformance.test_window_kinds import check, span


@attrs.frozen
class Act:
    user: str
    kind: str
    n: int


@attrs.frozen
class Match:
    user: str
    first: int
    then: int


def acts() -> list[Any]:
    """
    ::

        second   1  2  3  3  4  5  7  |8  10 16 20 30 32 32  |40
        user     u1 u1 u2 u2 u1 u1 u2     u1 u1 u2 u3 u3 u3
        kind     F  F  F  ok ok ok ok     F  ok F  F  ok ok
        n        1  2  7  8  3  4  9      5  6  10 11 13 12
    """
    rows = [
        (1, "u1", "fail", 1),
        (2, "u1", "fail", 2),
        (3, "u2", "fail", 7),
        (3, "u2", "ok", 8),
        (4, "u1", "ok", 3),
        (5, "u1", "ok", 4),
        (7, "u2", "ok", 9),
    ]
    later = [
        (10, "u1", "fail", 5),
        (16, "u1", "ok", 6),
        (20, "u2", "fail", 10),
        (30, "u3", "fail", 11),
        (32, "u3", "ok", 13),
        (32, "u3", "ok", 12),
    ]
    return (
        [Point(T(t), Act(u, k, n)) for t, u, k, n in rows]
        + [Cti(T(8))]
        + [Point(T(t), Act(u, k, n)) for t, u, k, n in later]
        + [Cti(T(40))]
    )


def pattern(on: Any) -> Stream[Match]:
    s = Stream.create("acts", acts(), EventShape.POINT)
    fails, oks = s.where(lambda a: a.kind == "fail"), s.where(lambda a: a.kind == "ok")
    return fails.followed_by(oks, on=on, within=timedelta(seconds=5), select=lambda a, b: Match(a.user, a.n, b.n))


def test_each_failure_with_its_first_success_per_user(executor: Any) -> None:
    """Within 5 s, per user. u1's failures at 1 and 2 both meet their first success, at 4 (no
    skipping: a B may complete several As). u2's failure at 3 is not followed by the success at
    3 (not after it), but by the one at 7 (4 s later). u1's failure at 10: the success at 16 is
    6 s later, too late. u2's at 20: nothing follows. u3's at 30: two successes at 32, the
    first by payload (n 12 before 13). Points at the success; out at the CTIs after them."""
    r = run(executor, pattern(lambda a, b: a.user == b.user))
    tick = timedelta(microseconds=1)
    check(
        r,
        [
            (
                T(8),
                [
                    span(T(4), T(4) + tick, Match("u1", 1, 3)),
                    span(T(4), T(4) + tick, Match("u1", 2, 3)),
                    span(T(7), T(7) + tick, Match("u2", 7, 9)),
                ],
            ),
            (T(40), [span(T(32), T(32) + tick, Match("u3", 11, 12))]),
        ],
    )


def test_a_condition_on_the_pair(executor: Any) -> None:
    """The same, but B must not be n 3: u1's failures at 1 and 2 are followed first by the
    success at 5 (4 and 3 s later)."""
    r = run(executor, pattern(lambda a, b: (a.user == b.user) & (b.n != 3)))
    tick = timedelta(microseconds=1)
    check(
        r,
        [
            (
                T(8),
                [
                    span(T(5), T(5) + tick, Match("u1", 1, 4)),
                    span(T(5), T(5) + tick, Match("u1", 2, 4)),
                    span(T(7), T(7) + tick, Match("u2", 7, 9)),
                ],
            ),
            (T(40), [span(T(32), T(32) + tick, Match("u3", 11, 12))]),
        ],
    )


def test_within_must_be_positive() -> None:
    s = Stream.create("acts", acts(), EventShape.POINT)
    with pytest.raises(QueryBuildError, match=r"followed_by\(within=\) must be positive"):
        s.followed_by(s, on=lambda a, b: a.user == b.user, within=timedelta(0), select=lambda a, b: Match(a.user, a.n, b.n))


def test_exactly_within_later_is_too_late(executor: Any) -> None:
    """A at 0, B exactly 5 s later: not a match (``b.start < a.start + within``, as Flink's
    ``within``); B 5 s less a tick later is."""
    tick = timedelta(microseconds=1)
    a = Stream.create("a", [Point(T(0), Act("u", "fail", 1)), Point(T(10), Act("u", "fail", 2)), Cti(T(30))], EventShape.POINT)
    b = Stream.create("b", [Point(T(5), Act("u", "ok", 3)), Point(T(15) - tick, Act("u", "ok", 4)), Cti(T(30))], EventShape.POINT)
    q = a.followed_by(b, on=lambda x, y: x.user == y.user, within=timedelta(seconds=5), select=lambda x, y: Match(x.user, x.n, y.n))
    check(run(executor, q), [(T(30), [span(T(15) - tick, T(15), Match("u", 2, 4))])])
