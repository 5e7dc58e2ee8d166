"""``group_by(k).apply(query, select)`` (docs/semantics.md 5.13), StreamInsight's and Trill's
GroupApply, on every executor: the sub-query runs on each group's events alone (windows,
joins between its own streams, anti-joins, nested groups), joins a stream from outside it
whole, and each result carries its key. Expectations written by hand from 5.13; the tests
that differ from running the sub-query on the whole stream say how."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import attrs
import pytest

import tempo
from tempo import TICK, Cti, EventShape, Interval, Point, QueryBuildError, Stream
from tests.conformance.test_operators import INF, T, evs, key, run
from tests.conformance.test_window_kinds import check, span


@attrs.frozen
class R:
    dev: str
    v: int


@attrs.frozen
class N:
    n: int


@attrs.frozen
class Busiest:
    most: int
    windows: int


@attrs.frozen
class DevBusiest:
    dev: str
    most: int
    windows: int


@attrs.frozen
class Step:
    now: int
    before: int


@attrs.frozen
class DevStep:
    dev: str | None
    now: int
    before: int


@attrs.frozen
class DevN:
    dev: str
    n: int


@attrs.frozen
class Limit:
    level: int


def readings() -> list[Any]:
    """
    ::

        second  1  2  3  5  |10  12  13  15  |20  21  25  |30
        dev     a  b  a  a       a   b   b        a   b
        v       1  2  3  5       4   2   7        1   9
    """
    first = [(1, "a", 1), (2, "b", 2), (3, "a", 3), (5, "a", 5)]
    second = [(12, "a", 4), (13, "b", 2), (15, "b", 7)]
    third = [(21, "a", 1), (25, "b", 9)]
    return (
        [Point(T(t), R(d, v)) for t, d, v in first]
        + [Cti(T(10))]
        + [Point(T(t), R(d, v)) for t, d, v in second]
        + [Cti(T(20))]
        + [Point(T(t), R(d, v)) for t, d, v in third]
        + [Cti(T(30))]
    )


def by_dev() -> tempo.GroupedStream[R, str]:
    return Stream.create("readings", readings(), EventShape.POINT).group_by(lambda e: e.dev)


def pt(s: float, payload: Any) -> tuple[Any, Any, Any]:
    return span(T(s), T(s) + TICK, payload)


def test_two_window_stages_run_per_group(executor: Any) -> None:
    """Per device, the count per 10 s, then per 30 s the largest of those counts. a: 3, 1, 1,
    so 3 over 3 windows; b: 1, 2, 1, so 2 over 3. (On the whole stream the counts would be 4,
    3, 2.) The 30 s window completes at CTI 30; before, the second stage holds its CTI at the
    window's start, 0."""
    q = by_dev().apply(
        lambda g: (
            g.tumbling(timedelta(seconds=10))
            .aggregate(lambda w: N(w.count()))
            .tumbling(timedelta(seconds=30))
            .aggregate(lambda w: Busiest(w.max(lambda c: c.n), w.count()))
        ),
        lambda dev, r: DevBusiest(dev, r.most, r.windows),
    )
    check(
        run(executor, q),
        [
            (T(0), []),
            (T(30), [span(T(0), T(30), DevBusiest("a", 3, 3)), span(T(0), T(30), DevBusiest("b", 2, 3))]),
        ],
    )


def test_a_self_join_pairs_events_of_one_group_only(executor: Any) -> None:
    """Each reading with the readings of its own device at most 5 s before it with a smaller
    value: a@3 with a@1, a@5 with a@1 and a@3, b@15 with b@13. On the whole stream b@2 would
    pair with a@1, and a@3 with b@2. a@12 is more than 5 s after a@5, b@13 after b@2. Points
    at the later reading."""
    q = by_dev().apply(
        lambda g: g.join(
            g.alter_event_lifetime(TICK, timedelta(seconds=5)),
            lambda now, before: now.v > before.v,
            lambda now, before: Step(now.v, before.v),
        ),
        lambda dev, r: DevStep(dev, r.now, r.before),
    )
    check(
        run(executor, q),
        [
            (T(10), [pt(3, DevStep("a", 3, 1)), pt(5, DevStep("a", 5, 1)), pt(5, DevStep("a", 5, 3))]),
            (T(20), [pt(15, DevStep("b", 7, 2))]),
            (T(30), []),
        ],
    )


def test_a_stream_from_outside_is_joined_whole_by_every_group(executor: Any) -> None:
    """Limits (outside the sub-query): level 2 over [0, 10), 3 over [10, 30). Per device, the
    readings above the limit of their time, counted per 10 s: a@3, a@5 in [0, 10), a@12 in
    [10, 20); b@15 in [10, 20), b@25 in [20, 30). Both groups see both limits."""
    limits = Stream.create(
        "limits", [Interval(T(0), T(10), Limit(2)), Interval(T(10), T(30), Limit(3)), Cti(T(30))], EventShape.INTERVAL, payload_type=Limit
    )
    q = by_dev().apply(
        lambda g: (
            g.join(limits, lambda r, lim: r.v > lim.level, lambda r, lim: r)
            .tumbling(timedelta(seconds=10))
            .aggregate(lambda w: N(w.count()))
        ),
        lambda dev, r: DevN(dev, r.n),
    )
    r = run(executor, q)  # two inputs unlinked: the intermediate CTIs follow their interleaving (2.4)
    assert sorted(evs(r), key=key) == sorted(
        [
            span(T(0), T(10), DevN("a", 2)),
            span(T(10), T(20), DevN("a", 1)),
            span(T(10), T(20), DevN("b", 1)),
            span(T(20), T(30), DevN("b", 1)),
        ],
        key=key,
    )
    assert r.ctis[-1] == T(30)


def test_an_anti_join_inside_the_group_keeps_the_first_of_each_burst(executor: Any) -> None:
    """The readings with no reading of their own device in the 5 s before: a@1, b@2 (a@1 is
    another device), a@12, b@13, a@21, b@25; a@3, a@5 and b@15 follow one of their own. The
    result is the reading itself (``select`` returns ``r``)."""
    q = by_dev().apply(
        lambda g: g.anti_join(g.alter_event_lifetime(TICK, timedelta(seconds=5)), lambda now, before: tempo.lit(True)),
        lambda dev, r: r,
    )
    check(
        run(executor, q),
        [
            (T(10), [pt(1, R("a", 1)), pt(2, R("b", 2))]),
            (T(20), [pt(12, R("a", 4)), pt(13, R("b", 2))]),
            (T(30), [pt(21, R("a", 1)), pt(25, R("b", 9))]),
        ],
    )


@attrs.frozen
class Maybe:
    dev: str | None
    v: int


def test_the_null_key_is_a_group(executor: Any) -> None:
    """Devices None, a, None: the two readings without a device are one group, so the self-join
    pairs None@3 with None@1, and a@2 with neither."""
    items: list[Any] = [Point(T(1), Maybe(None, 1)), Point(T(2), Maybe("a", 2)), Point(T(3), Maybe(None, 3)), Cti(T(10))]
    q = (
        Stream.create("maybe", items, EventShape.POINT, payload_type=Maybe)
        .group_by(lambda e: e.dev)
        .apply(
            lambda g: g.join(
                g.alter_event_lifetime(TICK, timedelta(seconds=5)),
                lambda now, before: now.v > before.v,
                lambda now, before: Step(now.v, before.v),
            ),
            lambda dev, r: DevStep(dev, r.now, r.before),
        )
    )
    check(run(executor, q), [(T(10), [pt(3, DevStep(None, 3, 1))])])


@attrs.frozen
class Visit:
    site: str
    user: str
    page: int


@attrs.frozen
class SiteUsers:
    site: str
    users: int
    busiest: int


@attrs.frozen
class UserPages:
    user: str
    pages: int


@attrs.frozen
class Stats:
    users: int
    busiest: int


def test_groups_within_groups_and_tuple_keys(executor: Any) -> None:
    """Per site, per user: the pages per 10 s; then per site, how many users and the most pages
    any had. s1: u1 3 pages, u2 1 page; s2: u1 1 page. The inner group is keyed by the user
    within the site: u1's visits to s1 and s2 are apart."""
    rows = [(1, "s1", "u1", 1), (2, "s1", "u2", 2), (3, "s1", "u1", 3), (4, "s2", "u1", 4), (5, "s1", "u1", 5)]
    items = [Point(T(t), Visit(s, u, pg)) for t, s, u, pg in rows] + [Cti(T(10))]
    visits = Stream.create("visits", items, EventShape.POINT)
    q = visits.group_by(lambda v: v.site).apply(
        lambda site: (
            site.group_by(lambda v: v.user)
            .apply(
                lambda user: user.tumbling(timedelta(seconds=10)).aggregate(lambda w: N(w.count())),
                lambda user, r: UserPages(user, r.n),
            )
            .tumbling(timedelta(seconds=10))
            .aggregate(lambda w: Stats(w.count(), w.max(lambda u: u.pages)))
        ),
        lambda site, r: SiteUsers(site, r.users, r.busiest),
    )
    check(run(executor, q), [(T(10), [span(T(0), T(10), SiteUsers("s1", 2, 3)), span(T(0), T(10), SiteUsers("s2", 1, 1))])])

    pairs = visits.group_by(lambda v: (v.site, v.user)).apply(
        lambda g: g.tumbling(timedelta(seconds=10)).aggregate(lambda w: N(w.count())),
        lambda key, r: UserPages(key[0] + "/" + key[1], r.n),
    )
    check(
        run(executor, pairs),
        [
            (
                T(10),
                [
                    span(T(0), T(10), UserPages("s1/u1", 3)),
                    span(T(0), T(10), UserPages("s1/u2", 1)),
                    span(T(0), T(10), UserPages("s2/u1", 1)),
                ],
            )
        ],
    )


@attrs.frozen
class Seen:
    v: int
    last: int | None


def test_per_group_time_order_clip_count_and_session(executor: Any) -> None:
    """Operators that keep state by order, run per device: ``analytic`` (the previous value of
    the device, not of the stream), ``count_window(2)`` (pairs of the device's readings) and
    ``clip_event_duration`` (each reading, held 30 s, holds until the device's next; the last of
    each device is still open at CTI 40, as a later reading may clip it). a: 1, 3, 5 | 4 | 1;
    b: 2 | 2, 7 | 9."""
    g = by_dev()
    previous = g.apply(lambda s: s.analytic(lambda e, a: Seen(e.v, a.previous(lambda e: e.v))), lambda dev, r: r)
    check(
        run(executor, previous),
        [
            (T(10), [pt(1, Seen(1, None)), pt(2, Seen(2, None)), pt(3, Seen(3, 1)), pt(5, Seen(5, 3))]),
            (T(20), [pt(12, Seen(4, 5)), pt(13, Seen(2, 2)), pt(15, Seen(7, 2))]),
            (T(30), [pt(21, Seen(1, 4)), pt(25, Seen(9, 7))]),
        ],
    )
    # LAG in full per device: two back among the readings above 1, else -1. a's candidates
    # 3, 5, 4 (its 1s excluded); b's every reading.
    two_back = g.apply(
        lambda s: s.analytic(lambda e, a: Seen(e.v, a.previous(lambda e: e.v, offset=2, default=-1, when=lambda e: e.v > 1))),
        lambda dev, r: r,
    )
    check(
        run(executor, two_back),
        [
            (T(10), [pt(1, Seen(1, -1)), pt(2, Seen(2, -1)), pt(3, Seen(3, -1)), pt(5, Seen(5, -1))]),
            (T(20), [pt(12, Seen(4, 3)), pt(13, Seen(2, -1)), pt(15, Seen(7, 2))]),
            (T(30), [pt(21, Seen(1, 5)), pt(25, Seen(9, 2))]),
        ],
    )
    pairs = g.apply(lambda s: s.count_window(2).aggregate(lambda w: N(w.sum(lambda e: e.v))), lambda dev, r: DevN(dev, r.n))
    check(
        run(executor, pairs),
        [  # a: (1, 3), (5, 4), 1 alone; b: (2, 2), (7, 9); CTIs pass unchanged
            (T(10), [pt(3, DevN("a", 4))]),
            (T(20), [pt(12, DevN("a", 9)), pt(13, DevN("b", 4))]),
            (T(30), [pt(25, DevN("b", 16))]),
        ],
    )
    held = Stream.create(
        "r",
        [Interval(T(t), T(t + 30), r.payload) for r in readings() if isinstance(r, Point) for t in [(r.start - T(0)).total_seconds()]]
        + [Cti(T(40))],
        EventShape.INTERVAL,
    )
    clipped = held.group_by(lambda e: e.dev).apply(lambda s: s.clip_event_duration(), lambda dev, r: r)
    check(
        run(executor, clipped),
        [
            (
                T(40),
                [
                    span(T(1), T(3), R("a", 1)),
                    span(T(3), T(5), R("a", 3)),
                    span(T(5), T(12), R("a", 5)),
                    span(T(12), T(21), R("a", 4)),
                    span(T(21), INF, R("a", 1)),
                    span(T(2), T(13), R("b", 2)),
                    span(T(13), T(15), R("b", 2)),
                    span(T(15), T(25), R("b", 7)),
                    span(T(25), INF, R("b", 9)),
                ],
            )
        ],
    )


def test_the_sub_query_must_use_its_stream_and_stay_inside(executor: Any) -> None:
    """Refused when the query is built, each with what to do instead."""
    other = Stream.create("other", [Point(T(1), R("x", 1))], EventShape.POINT)
    g = by_dev()
    cases: list[tuple[Any, str]] = [
        (lambda s: other, "not built from the stream it is given"),
        (lambda s: 42, "must return a Stream"),
        (lambda s: s.union(other), "union() of a stream from outside"),
        (lambda s: other.anti_join(s, lambda a, b: a.dev == b.dev), "anti_join() of a stream outside"),
        (
            lambda s: other.followed_by(s, lambda a, b: a.dev == b.dev, timedelta(seconds=1), lambda a, b: a),
            "followed_by() from a stream outside",
        ),
    ]
    for query, message in cases:
        with pytest.raises(QueryBuildError, match=re.escape(message)):
            g.apply(query, lambda dev, r: r)
    with pytest.raises(QueryBuildError, match="must return a payload record|no record"):
        g.apply(lambda s: s, lambda dev, r: dev)  # type: ignore[type-var]
    leaked: list[Stream[R]] = []
    g.apply(lambda s: leaked.append(s) or s, lambda dev, r: r)  # type: ignore[func-returns-value]
    with pytest.raises(QueryBuildError, match="used outside it"):
        run(executor, leaked[0].where(lambda e: e.v > 1))
