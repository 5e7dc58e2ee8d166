"""ASA's ``LAG`` in full, ``a.previous(f, limit, offset=, default=, when=)``, on every executor.

The timelines follow the examples of ASA's LAG reference page (the syntax lines
``LAG(name, 2, 'none such') OVER (PARTITION BY userId LIMIT DURATION(minute, 2))`` and
``LAG(reading) OVER (LIMIT DURATION(hour, 3))``, the first non-null reading, the time since
a condition last held, a missing reading replaced by the previous one), each worked out by
hand from docs/semantics.md 5.11:

* Per group, events in order of (start, payload); events equal in both are peers and share
  their analytics. ``previous`` looks among the events **before the event's peers**, those
  meeting ``when`` (a null condition counts as false), counting each event one by one (two
  peers are two events back for those after them), for the ``offset``-th latest.
* It gives that event's ``f`` if it started less than ``limit`` before (strict, as ASA's
  windows ``(t - limit, t]``), null when that value is null; else (too few events, too far
  back, none meeting ``when``) the ``default``, itself null without one.
* CTIs pass unchanged; an event goes out at the first CTI past its start.

Conventions as in test_analytics.py: ``T(s)`` is 2024-01-01 plus s seconds.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest

import tempo
from tempo import Cti, EventShape, Point, Stream
from tests.conformance.test_operators import T, run
from tests.conformance.test_window_kinds import at, check


@attrs.frozen
class Login:
    user: str
    name: str


@attrs.frozen
class TwoBack:
    user: str
    name: str
    before: str


@attrs.frozen
class Reading:
    sensor: str
    v: float | None


@attrs.frozen
class Looks:
    v: float | None
    plain: float | None
    high: float | None
    known: float | None


@attrs.frozen
class Since:
    v: float | None
    last_high: datetime | None


@attrs.frozen
class Filled:
    v: float | None
    filled: float


@attrs.frozen
class Back:
    v: int
    one: int | None
    two: int | None
    three: int


@attrs.frozen
class Num:
    v: int


def points(*items: Any) -> Stream[Any]:
    return Stream.create("in", list(items), EventShape.POINT)


def test_two_back_within_two_minutes_or_none_such(executor: Any) -> None:
    """``LAG(name, 2, 'none such') OVER (PARTITION BY userId LIMIT DURATION(minute, 2))``.

    u1: a@0, b@30, c@60, d@150, e@170, f@200; u2: x@40. CTIs at 100 and 300.
    a@0   2 back: none               -> 'none such'
    b@30  only a before              -> 'none such'
    c@60  a@0, 60 s back < 120       -> 'a'
    d@150 b@30, exactly 120 s back   -> 'none such' (the limit is strict)
    e@170 c@60, 110 s back           -> 'c'
    f@200 d@150, 50 s back           -> 'd'
    x@40  u2's first                 -> 'none such'
    |100 releases a, b, x, c; |300 the rest.
    """
    s = points(
        Point(T(0), Login("u1", "a")),
        Point(T(30), Login("u1", "b")),
        Point(T(40), Login("u2", "x")),
        Point(T(60), Login("u1", "c")),
        Cti(T(100)),
        Point(T(150), Login("u1", "d")),
        Point(T(170), Login("u1", "e")),
        Point(T(200), Login("u1", "f")),
        Cti(T(300)),
    )
    q = s.group_by(lambda e: e.user).analytic(
        lambda user, e, a: TwoBack(
            user=user, name=e.name, before=a.previous(lambda e: e.name, timedelta(minutes=2), offset=2, default="none such")
        )
    )
    r = run(executor, q)
    check(
        r,
        [
            (
                T(100),
                [
                    at(T(0), TwoBack("u1", "a", "none such")),
                    at(T(30), TwoBack("u1", "b", "none such")),
                    at(T(40), TwoBack("u2", "x", "none such")),
                    at(T(60), TwoBack("u1", "c", "a")),
                ],
            ),
            (
                T(300),
                [
                    at(T(150), TwoBack("u1", "d", "none such")),
                    at(T(170), TwoBack("u1", "e", "c")),
                    at(T(200), TwoBack("u1", "f", "d")),
                ],
            ),
        ],
    )


def test_when_looks_back_among_the_events_meeting_the_condition(executor: Any) -> None:
    """Three looks back per sensor, limit 3 h (``LAG(reading) OVER (LIMIT DURATION(hour, 3))``):
    ``plain`` the event just before, ``high`` the last reading above 90 (``WHEN v > 90``),
    ``known`` the last non-null one (``WHEN v IS NOT NULL``, ASA's first-non-null example).

    s1: 95@1, 80@2, None@3, 99@4, 70@5; s2: None@2, 91@3. CTI at 10.
    @1 95:   plain None (first)  high None      known None
    @2 80:   95                  95             95
    @3 None: 80                  95             80
    @4 99:   None (@3's v)       95             80 (the null at @3 skipped)
    @5 70:   99                  99             99
    s2 @2 None: None, None, None; @3 91: None (@2's v), None (a null v > 90 is not true), None.
    """
    s = points(
        Point(T(1), Reading("s1", 95.0)),
        Point(T(2), Reading("s1", 80.0)),
        Point(T(2), Reading("s2", None)),
        Point(T(3), Reading("s1", None)),
        Point(T(3), Reading("s2", 91.0)),
        Point(T(4), Reading("s1", 99.0)),
        Point(T(5), Reading("s1", 70.0)),
        Cti(T(10)),
    )
    hours = timedelta(hours=3)
    q = s.group_by(lambda e: e.sensor).analytic(
        lambda sensor, e, a: Looks(
            v=e.v,
            plain=a.previous(lambda e: e.v, hours),
            high=a.previous(lambda e: e.v, hours, when=lambda e: e.v > 90),
            known=a.previous(lambda e: e.v, hours, when=lambda e: tempo.is_not_null(e.v)),
        )
    )
    r = run(executor, q)
    check(
        r,
        [
            (
                T(10),
                [
                    at(T(1), Looks(95.0, None, None, None)),
                    at(T(2), Looks(80.0, 95.0, 95.0, 95.0)),
                    at(T(3), Looks(None, 80.0, 95.0, 80.0)),
                    at(T(4), Looks(99.0, None, 95.0, 80.0)),
                    at(T(5), Looks(70.0, 99.0, 99.0, 99.0)),
                    at(T(2), Looks(None, None, None, None)),
                    at(T(3), Looks(91.0, None, None, None)),
                ],
            )
        ],
    )


def test_the_time_since_a_condition_last_held_and_a_limit_on_it(executor: Any) -> None:
    """The start of the last reading above 90 within 5 s (``LAG(time) OVER (LIMIT
    DURATION(second, 5) WHEN v > 90)``), with a CTI between: the look back crosses it.

    95@1, 80@3, |4, 70@5, 93@7, 60@12. @1: None; @3 and @5: T(1); @7: None (@1 is 6 s back);
    @12: None (@7 is exactly 5 s back). |4 releases @1 and @3; |20 the rest.
    """

    @attrs.frozen
    class Stamped:
        v: float | None
        at: datetime

    s = Stream.create(
        "in",
        [
            Point(T(1), Stamped(95.0, T(1))),
            Point(T(3), Stamped(80.0, T(3))),
            Cti(T(4)),
            Point(T(5), Stamped(70.0, T(5))),
            Point(T(7), Stamped(93.0, T(7))),
            Point(T(12), Stamped(60.0, T(12))),
            Cti(T(20)),
        ],
        EventShape.POINT,
    )
    q = s.analytic(lambda e, a: Since(v=e.v, last_high=a.previous(lambda e: e.at, timedelta(seconds=5), when=lambda e: e.v > 90)))
    r = run(executor, q)
    check(
        r,
        [
            (T(4), [at(T(1), Since(95.0, None)), at(T(3), Since(80.0, T(1)))]),
            (T(20), [at(T(5), Since(70.0, T(1))), at(T(7), Since(93.0, None)), at(T(12), Since(60.0, None))]),
        ],
    )


def test_a_default_from_the_event_and_a_null_found_stays_null(executor: Any) -> None:
    """``LAG(reading, 1, 0)``-style defaults (a missing reading replaced by the one before).
    ``own``: the previous value, else the event's own (a default read from the event);
    ``zero``: the previous non-null value, else 0 (the int 0 stands for 0.0).

    None@1, 5@2, None@3, 7@4:
    @1:   own: no event before -> its own v, None     zero: none -> 0.0
    @2:   own: @1 found, its v is null -> None        zero: no non-null before -> 0.0
    @3:   own: 5                                      zero: 5
    @4:   own: @3 found, null -> None (not the default) zero: 5 (@3 skipped)
    """

    @attrs.frozen
    class Two:
        v: float | None
        own: float | None
        zero: float

    s = points(
        Point(T(1), Reading("s", None)),
        Point(T(2), Reading("s", 5.0)),
        Point(T(3), Reading("s", None)),
        Point(T(4), Reading("s", 7.0)),
        Cti(T(10)),
    )
    q = s.analytic(
        lambda e, a: Two(
            v=e.v,
            own=a.previous(lambda e: e.v, default=lambda e: e.v),
            zero=a.previous(lambda e: e.v, default=0, when=lambda e: tempo.is_not_null(e.v)),
        )
    )
    r = run(executor, q)
    check(
        r,
        [
            (
                T(10),
                [
                    at(T(1), Two(None, None, 0.0)),
                    at(T(2), Two(5.0, None, 0.0)),
                    at(T(3), Two(None, 5.0, 5.0)),
                    at(T(4), Two(7.0, None, 5.0)),
                ],
            )
        ],
    )


def test_offsets_count_peers_one_by_one_and_peers_share_their_look_back(executor: Any) -> None:
    """Offsets 1, 2 and 3 (the last with default -1) over 10@1, 20@2, 20@2 (peers), 30@3, 40@3
    (not peers: other payloads), 50@4.

    order: 10@1 | 20@2 20@2 | 30@3 | 40@3 | 50@4
    10@1:        one None  two None  three -1
    20@2 (both): one 10    two None  three -1   (only 10@1 is before the peers)
    30@3:        one 20    two 20    three 10   (the two 20s count as two)
    40@3:        one 30    two 20    three 20
    50@4:        one 40    two 30    three 20
    """
    s = points(
        Point(T(2), Num(20)),
        Point(T(1), Num(10)),
        Point(T(3), Num(40)),
        Point(T(2), Num(20)),
        Point(T(3), Num(30)),
        Point(T(4), Num(50)),
        Cti(T(10)),
    )
    q = s.analytic(
        lambda e, a: Back(
            v=e.v,
            one=a.previous(lambda e: e.v),
            two=a.previous(lambda e: e.v, offset=2),
            three=a.previous(lambda e: e.v, offset=3, default=-1),
        )
    )
    r = run(executor, q)
    check(
        r,
        [
            (
                T(10),
                [
                    at(T(1), Back(10, None, None, -1)),
                    at(T(2), Back(20, 10, None, -1)),
                    at(T(2), Back(20, 10, None, -1)),
                    at(T(3), Back(30, 20, 20, 10)),
                    at(T(3), Back(40, 30, 20, 20)),
                    at(T(4), Back(50, 40, 30, 20)),
                ],
            )
        ],
    )


def test_previous_refuses_a_bad_offset_a_non_condition_and_a_default_of_another_type() -> None:
    s = points(Point(T(1), Num(1)))
    with pytest.raises(tempo.QueryBuildError, match=r"offset= counts events back"):
        s.analytic(lambda e, a: Back(v=e.v, one=a.previous(lambda e: e.v, offset=0), two=None, three=0))
    with pytest.raises(tempo.QueryBuildError, match=r"previous\(when=\.\.\.\) must be a condition"):
        s.analytic(lambda e, a: Back(v=e.v, one=a.previous(lambda e: e.v, when=lambda e: e.v + 1), two=None, three=0))  # type: ignore[arg-type,return-value]
    with pytest.raises(tempo.QueryBuildError, match=r"default= must be of the value's type \(int\), got str"):
        s.analytic(lambda e, a: Back(v=e.v, one=a.previous(lambda e: e.v, default="x"), two=None, three=0))  # type: ignore[arg-type]


def test_explain_shows_the_offset_default_limit_and_condition() -> None:
    s = points(Point(T(1), Reading("s", 1.0)))
    q = s.analytic(
        lambda e, a: Filled(v=e.v, filled=a.previous(lambda e: e.v, timedelta(minutes=1), offset=2, default=0.0, when=lambda e: e.v > 1))
    )
    text = q.explain()
    assert "previous(e.v, offset 2, default 0.0) within 1 min when (e.v > 1)" in text, text
