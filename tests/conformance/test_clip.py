"""``clip_event_duration`` (docs/semantics.md 5.5.2) on every executor: each end clipped at
the next later start of the group. Expectations written by hand from 5.5.2."""

from __future__ import annotations

from typing import Any

from tempo import Cti, EdgeEnd, EdgeStart, EventShape, Interval, Stream
from tests.conformance.test_operators import INF, KV, T, key
from tests.conformance.test_window_kinds import Release, check, check_raw_steps, span
from tests.conformance.test_operators import run


def readings() -> list[Any]:
    """a@1 (ended at 20), b@2, a@5, then a@8 and b@8, a@12; CTIs 3, 6, 9, 12."""
    return [
        EdgeStart(T(1), KV("a", 1)),
        EdgeStart(T(2), KV("b", 2)),
        Cti(T(3)),
        EdgeStart(T(5), KV("a", 3)),
        EdgeEnd(T(1), T(20), KV("a", 1)),
        Cti(T(6)),
        EdgeStart(T(8), KV("b", 4)),
        EdgeStart(T(8), KV("a", 5)),
        Cti(T(9)),
        EdgeStart(T(12), KV("a", 6)),
        Cti(T(12)),
    ]


def test_clip_per_key_by_the_next_reading(executor: Any) -> None:
    """
    ::

                     0    5    10   15   20
        a             [==================)   a@1, its own end 20
        a                 [====>             a@5
        a                    [====>          a@8
        a                        [==>        a@12 (at the last CTI: not released)
        b              [=================>   b@2
        b                    [===========>   b@8
        CTIs            ^  ^  ^  ^           3, 6, 9, 12
        out a [1,5) (ended at |6), [5,8) (ended at |9), a@8 open (12 is not past |12);
        out b [2,8) (ended at |9), b@8 open.
    """
    s = Stream.create("in", readings(), EventShape.EDGE)
    r = run(executor, s.group_by(lambda e: e.k).clip_event_duration())
    releases: list[Release] = [
        (T(3), [span(T(1), T(5), KV("a", 1)), span(T(2), T(8), KV("b", 2))]),
        (T(6), [span(T(5), T(8), KV("a", 3))]),
        (T(9), [span(T(8), INF, KV("a", 5)), span(T(8), INF, KV("b", 4))]),
        (T(12), []),
    ]
    check(r, releases)
    check_raw_steps(
        executor,
        r,
        [
            ([("start", T(1), KV("a", 1)), ("start", T(2), KV("b", 2))], T(3)),
            ([("end", T(1), T(5), KV("a", 1)), ("start", T(5), KV("a", 3))], T(6)),
            (
                [
                    ("end", T(5), T(8), KV("a", 3)),
                    ("end", T(2), T(8), KV("b", 2)),
                    ("start", T(8), KV("a", 5)),
                    ("start", T(8), KV("b", 4)),
                ],
                T(9),
            ),
            ([], T(12)),
        ],
    )


def test_clip_ungrouped_and_same_start_peers(executor: Any) -> None:
    """Without group_by every later start clips: a@1 by b@2, b@2 by a@5, a@5 by the two at 8,
    which do not clip each other. Intervals keep an own end shorter than the next start.

    ::

        in    [1,3) x, [2,4) y, [8,9) z, [8,20) w, then |10 and the flush
        out   [1,2) x, [2,4) y (own end first), [8,9) z, [8,20) w
    """
    items = [
        Interval(T(1), T(3), KV("x", 1)),
        Interval(T(2), T(4), KV("y", 2)),
        Interval(T(8), T(9), KV("z", 3)),
        Interval(T(8), T(20), KV("w", 4)),
        Cti(T(10)),
        Cti(INF),
    ]
    r = run(executor, Stream.create("in", items, EventShape.INTERVAL).clip_event_duration())
    assert sorted(((e.start, e.end, e.payload) for e in r.events), key=key) == sorted(
        [
            (T(1), T(2), KV("x", 1)),
            (T(2), T(4), KV("y", 2)),
            (T(8), T(9), KV("z", 3)),
            (T(8), T(20), KV("w", 4)),
        ],
        key=key,
    )
    assert r.ctis == [T(10), INF]


def test_to_points_and_back_to_a_signal(executor: Any) -> None:
    """``to_points()``: each reading a point at its start (the edges' ends do not matter);
    ``alter_event_duration`` then clip turns the points back into the signal of the first
    test: a@1 [1, 5), a@5 [5, 8), ... (a@1's own end, 20, is gone: the hour is the bound)."""
    from datetime import timedelta

    from tempo import TICK

    points = Stream.create("in", readings(), EventShape.EDGE).to_points()
    r = run(executor, points)
    assert sorted((e.start, e.end, e.payload.k) for e in r.events) == [
        (T(1), T(1) + TICK, "a"),
        (T(2), T(2) + TICK, "b"),
        (T(5), T(5) + TICK, "a"),
        (T(8), T(8) + TICK, "a"),
        (T(8), T(8) + TICK, "b"),
    ]
    signal = points.alter_event_duration(timedelta(hours=1)).group_by(lambda e: e.k).clip_event_duration()
    assert sorted((e.start, e.end, e.payload.k) for e in run(executor, signal).events) == [
        (T(1), T(5), "a"),
        (T(2), T(8), "b"),
        (T(5), T(8), "a"),
        (T(8), INF, "a"),
        (T(8), INF, "b"),
    ]
