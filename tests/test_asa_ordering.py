"""Azure Stream Analytics' event-ordering policies (EventOrderingSettings), on the 12-event
illustration of ../shared/reference/001_dfeab6d79341eee1.txt: out-of-order tolerance 2 min,
late-arrival tolerance 5 min, early-arrival window 5 min. Expected values are worked by hand
from the document (docs/design/asa-time-policies.md, section 2), in the document's settings
with and without the early-arrival policy; the watermark after an event is
max(largest admitted time - 2 min, arrival - 5 min), and never goes back.

    #   device  event  arrival
    1   d1      12:07  12:07
    2   d2      12:08  12:08
    3   d1      12:17  12:11    6 min early
    4   d3      12:08  12:13    exactly 5 min late: not late
    5   d1      12:19  12:16
    6   d3      12:12  12:17    before the watermark 12:17
    7   d2      12:17  12:18    at the watermark: fine
    8   d2      12:20  12:19
    9   d3      12:16  12:21    before the watermark 12:18
    10  d2      12:23  12:22
    11  d2      12:22  12:24
    12  d3      12:21  12:27    6 min late
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs
import pytest

from tempo import (
    Action,
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventOrderingSettings,
    EventShape,
    InMemoryExecutor,
    InputError,
    Point,
    QueryBuildError,
    Rule,
    Stream,
    TICK,
)
INFINITY = datetime.max  # naive inputs give naive results: infinity is datetime.max


@attrs.frozen
class Reading:
    device: str
    event_time: datetime


def M(minute: int) -> datetime:
    return datetime(2024, 1, 1, 12, minute)


EVENTS = [
    ("d1", 7, 7), ("d2", 8, 8), ("d1", 17, 11), ("d3", 8, 13), ("d1", 19, 16), ("d3", 12, 17),
    ("d2", 17, 18), ("d2", 20, 19), ("d3", 16, 21), ("d2", 23, 22), ("d2", 22, 24), ("d3", 21, 27),
]
ITEMS = [Point(M(e), Reading(d, M(e)), arrival=M(a)) for d, e, a in EVENTS]


def run(policy: AdvanceTimePolicy, early: bool) -> object:
    ordering = EventOrderingSettings(timedelta(minutes=2), timedelta(minutes=5), timedelta(minutes=5) if early else None)
    flush = AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True)
    settings = AdvanceTimeSettings(flush, policy=policy, ordering=ordering)
    return InMemoryExecutor().run(Stream.create("readings", ITEMS, EventShape.POINT, settings))


def outcomes(result: object) -> list[tuple[int, Rule, Action, object]]:
    return [(j.position, j.rule, j.action, j.admitted_as and j.admitted_as.start) for j in result.rejected]  # type: ignore[attr-defined]


def test_with_the_early_policy_adjust() -> None:
    """Setting 1: e3 dropped (early); e6 and e9 moved to the watermark (12:17, 12:18); e12
    moved to arrival - 5 min = 12:22 (late), which is past the watermark 12:21."""
    r = run(AdvanceTimePolicy.ADJUST, early=True)
    assert outcomes(r) == [
        (2, Rule.EARLY_ARRIVAL, Action.DROPPED, None),
        (5, Rule.START_BEFORE_CTI, Action.ADJUSTED, M(17)),
        (8, Rule.START_BEFORE_CTI, Action.ADJUSTED, M(18)),
        (11, Rule.LATE_ARRIVAL, Action.ADJUSTED, M(22)),
    ]
    # Watermarks: 12:05, 12:06 (events 1, 2), 12:08 (arrival of 4), 12:17 (5), 12:18 (8),
    # 12:21 (10), 12:22 (arrival of 12), then the flush.
    assert r.ctis == [M(5), M(6), M(8), M(17), M(18), M(21), M(22), INFINITY]  # type: ignore[attr-defined]
    # The lifetime carries the adjusted time; the payload keeps the device's own.
    moved = {e.payload.event_time: e.start for e in r.events if e.start != e.payload.event_time}  # type: ignore[attr-defined]
    assert moved == {M(12): M(17), M(16): M(18), M(21): M(22)}
    assert all(e.end == e.start + TICK for e in r.events)  # type: ignore[attr-defined]
    m = r.metrics["readings"]  # type: ignore[attr-defined]
    assert (m.received, m.admitted, m.adjusted, m.dropped) == (12, 11, 3, 1)
    assert (m.early_dropped, m.late_adjusted, m.late_dropped) == (1, 1, 0)
    assert (m.ctis_generated, m.ctis_ignored) == (8, 0)  # 7 advances and the flush; ordering never ignores a CTI


def test_with_the_early_policy_drop() -> None:
    """Setting 1 with DROP: the same watermarks (dropped events never raise them); e3, e6,
    e9 and e12 are dropped."""
    r = run(AdvanceTimePolicy.DROP, early=True)
    assert outcomes(r) == [
        (2, Rule.EARLY_ARRIVAL, Action.DROPPED, None),
        (5, Rule.START_BEFORE_CTI, Action.DROPPED, None),
        (8, Rule.START_BEFORE_CTI, Action.DROPPED, None),
        (11, Rule.LATE_ARRIVAL, Action.DROPPED, None),
    ]
    assert r.ctis == [M(5), M(6), M(8), M(17), M(18), M(21), M(22), INFINITY]  # type: ignore[attr-defined]
    assert sorted(e.start.minute for e in r.events) == [7, 8, 8, 17, 19, 20, 22, 23]  # type: ignore[attr-defined]
    m = r.metrics["readings"]  # type: ignore[attr-defined]
    assert (m.admitted, m.dropped, m.early_dropped, m.late_dropped) == (8, 4, 1, 1)


def test_without_the_early_policy_adjust() -> None:
    """Setting 2: e3 (6 min early) is admitted and raises the watermark to 12:15, so e4
    (12:08) is moved forward 7 minutes to 12:15, as the document says; e6, e9 and e12 as
    in setting 1."""
    r = run(AdvanceTimePolicy.ADJUST, early=False)
    assert outcomes(r) == [
        (3, Rule.START_BEFORE_CTI, Action.ADJUSTED, M(15)),
        (5, Rule.START_BEFORE_CTI, Action.ADJUSTED, M(17)),
        (8, Rule.START_BEFORE_CTI, Action.ADJUSTED, M(18)),
        (11, Rule.LATE_ARRIVAL, Action.ADJUSTED, M(22)),
    ]
    assert r.ctis == [M(5), M(6), M(15), M(17), M(18), M(21), M(22), INFINITY]  # type: ignore[attr-defined]
    m = r.metrics["readings"]  # type: ignore[attr-defined]
    assert (m.received, m.admitted, m.adjusted, m.dropped, m.early_dropped) == (12, 12, 4, 0, 0)


def test_boundaries() -> None:
    """Exactly the early window ahead, or exactly the late tolerance behind, is inside them."""
    items = [
        Point(M(15), Reading("a", M(15)), arrival=M(10)),  # exactly 5 min early: admitted
        Point(M(6), Reading("b", M(6)), arrival=M(11)),  # exactly 5 min late: not late
        Point(M(5), Reading("c", M(5)), arrival=M(11)),  # 6 min late: moved to 12:06
    ]
    ordering = EventOrderingSettings(timedelta(minutes=20), timedelta(minutes=5), timedelta(minutes=5))
    r = InMemoryExecutor().run(Stream.create("in", items, EventShape.POINT, AdvanceTimeSettings(policy=AdvanceTimePolicy.ADJUST, ordering=ordering)))
    assert outcomes(r) == [(2, Rule.LATE_ARRIVAL, Action.ADJUSTED, M(6))]


def test_settings_are_checked() -> None:
    with pytest.raises(QueryBuildError, match="must not be negative"):
        EventOrderingSettings(late_arrival_tolerance=timedelta(seconds=-1))
    with pytest.raises(QueryBuildError, match="generate the input's CTIs themselves"):
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(10), ordering=EventOrderingSettings())
    no_arrival = [Point(M(1), Reading("a", M(1)))]
    with pytest.raises(InputError, match="needs an arrival time"):
        InMemoryExecutor().run(Stream.create("in", no_arrival, EventShape.POINT, AdvanceTimeSettings(ordering=EventOrderingSettings())))
