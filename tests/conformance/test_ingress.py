"""Ingress: how inputs are read, checked and committed by CTIs (hand-written timelines).

Conformance tests: each test runs on every executor (the ``executor`` fixture). Events and
rejections are compared as multisets on every executor and in order on those promising
``Capability.RAW_ITEMS`` (today the in-memory one); tests of ``result.raw`` are marked
``needs(Capability.RAW_ITEMS)`` (see ``tests/conftest.py`` and ``tests/conformance/compare.py``).

Every expectation below is derived by hand from the semantics (docs/semantics.md, "Input
items and shapes", "Arrival order", "CTIs at ingress", "Violation policies"). Each test
draws its timeline: times are seconds after 2024-01-01 00:00 (``T(s)``), ``pN`` is a point
at N, ``I(a,b)`` an interval, ``ES``/``EE`` start/end edges, ``|c`` a CTI at c, and ``#k``
the item's position within its input (CTIs count).

Release rule used throughout: the query output releases an event only once an output CTI
is past its start, so without a final CTI at infinity an event starting at or after the
last CTI is not in ``result.events``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest

import tempo
from tempo import (
    INFINITY,
    TICK,
    Action,
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Cti,
    EdgeEnd,
    EdgeStart,
    EventShape,
    InputMetrics,
    Interval,
    ItemSource,
    OutputEvent,
    Point,
    Rejection,
    Result,
    Rule,
    Source,
    Stream,
)
from tests.conformance.compare import check_result, same_items
from tests.conftest import Capability


# ---- fixtures of the timeline ---------------------------------------------------------------
@attrs.frozen
class R:
    key: str
    v: int


@attrs.frozen
class Other:
    name: str


BASE = datetime(2024, 1, 1)  # a whole number of hours after the epoch
NINF = datetime.max  # infinity as naive results show it
UTC = timezone.utc
POINT, INTERVAL, EDGE = EventShape.POINT, EventShape.INTERVAL, EventShape.EDGE
DROP, ADJUST = AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST
SEC = timedelta(seconds=1)


def T(s: float) -> datetime:
    """Application (or arrival) time: s seconds after 2024-01-01 00:00, naive."""
    return BASE + timedelta(seconds=s)


def r(v: int, key: str = "a") -> R:
    return R(key, v)


def pt(s: float, v: int, key: str = "a") -> OutputEvent[R]:
    """The output event of a point at T(s): lifetime [s, s + 1 tick)."""
    return OutputEvent(T(s), T(s) + TICK, r(v, key))


def out(start: float, end: float | datetime, v: int, key: str = "a") -> OutputEvent[R]:
    e = end if isinstance(end, datetime) else T(end)
    return OutputEvent(T(start), e, r(v, key))


def gen(
    frequency: int | timedelta,
    delay: timedelta = timedelta(0),
    flush: bool = False,
    policy: AdvanceTimePolicy = DROP,
) -> AdvanceTimeSettings:
    return AdvanceTimeSettings(generation=AdvanceTimeGenerationSettings(frequency, delay, flush), policy=policy)


def policy_only(policy: AdvanceTimePolicy) -> AdvanceTimeSettings:
    """A policy with generation that never fires in these short inputs: CTIs come only from
    explicit Cti items, but violations are dropped/adjusted instead of raising."""
    return gen(1_000_000, policy=policy)


def imports(name: str, policy: AdvanceTimePolicy = DROP, generation: AdvanceTimeGenerationSettings | None = None) -> AdvanceTimeSettings:
    return AdvanceTimeSettings(generation=generation, import_=AdvanceTimeImportSettings(name), policy=policy)


def run(executor: Any, stream: Stream[Any]) -> Result[Any]:
    result: Result[Any] = executor.run(stream)
    assert isinstance(result, Result)
    check_result(result)
    return result


def metrics(result: Result[Any], name: str = "in") -> InputMetrics:
    m = result.metrics[name]
    assert m.received == m.admitted + m.dropped
    assert m.adjusted <= m.admitted
    return m


def counts(m: InputMetrics) -> dict[str, int]:
    return attrs.asdict(m)


def M(**kw: int) -> dict[str, int]:
    """Expected metrics; fields not given are 0."""
    return counts(InputMetrics(**kw))


def by_v(events: Iterable[OutputEvent[R]]) -> list[OutputEvent[R]]:
    """Events released at the same CTI may come in any order; compare them sorted."""
    return sorted(events, key=lambda e: (e.payload.v, e.payload.key))


def norm(item: Any) -> tuple[Any, ...]:
    """A raw output item without its arrival (raw items carry none that matters here)."""
    if isinstance(item, Cti):
        return ("Cti", item.timestamp)
    if isinstance(item, Point):
        return ("Point", item.start, item.payload)
    if isinstance(item, Interval):
        return ("Interval", item.start, item.end, item.payload)
    if isinstance(item, EdgeStart):
        return ("EdgeStart", item.start, item.payload)
    if isinstance(item, EdgeEnd):
        return ("EdgeEnd", item.start, item.end, item.payload)
    raise AssertionError(f"unexpected raw item {item!r}")


def nothing(e: R) -> bool:
    """A where() that keeps nothing (all payloads here have v >= 0): to bring an input into a
    query for its CTIs only."""
    return e.v < 0


# =============================================================================================
# No generation: only the flush at the end
# =============================================================================================
def test_flush_only_admits_everything_and_releases_at_the_end(executor: Any) -> None:
    """frequency=None with the flush: no CTI until the input ends, so nothing is late.

    arrival  p5   p1   p3   p9   (end of input)
    CTI                          |inf
    out      p1 p3 p5 p9          (all of them, released by the CTI at infinity)
    """
    items = [Point(T(5), r(5)), Point(T(1), r(1)), Point(T(3), r(3)), Point(T(9), r(9))]
    flush_only = AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True))
    assert AdvanceTimeSettings.replay() == flush_only  # the short spelling of the same settings
    res = run(executor, Stream.create("in", items, POINT, AdvanceTimeSettings.replay()))
    assert res.ctis == [NINF]
    same_items(executor, res.events, [pt(1, 1), pt(3, 3), pt(5, 5), pt(9, 9)])
    assert counts(metrics(res)) == M(received=4, admitted=4, ctis_generated=1)
    assert res.rejected == []


def test_flush_only_still_takes_explicit_ctis(executor: Any) -> None:
    """frequency=None generates nothing, but a Cti item still commits time (policy DROP).

    arrival  p5   Cti@4   p3 (late: dropped)   p6
    CTI           |4                               |inf
    out      p5                                p6
    """
    items = [Point(T(5), r(5)), Cti(T(4)), Point(T(3), r(3)), Point(T(6), r(6))]
    flush_only = AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True))
    res = run(executor, Stream.create("in", items, POINT, flush_only))
    assert res.ctis == [T(4), NINF]
    same_items(executor, res.events, [pt(5, 5), pt(6, 6)])
    assert counts(metrics(res)) == M(received=3, admitted=2, dropped=1, ctis_generated=1, ctis_explicit=1)
    assert [(j.position, j.rule, j.action) for j in res.rejected] == [(2, Rule.START_BEFORE_CTI, Action.DROPPED)]


# =============================================================================================
# Generation by count
# =============================================================================================
def test_count_cti_after_every_nth_event(executor: Any) -> None:
    """N=2, delay 0.

    time   1    2    3    4    5
    in     p1   p2#1 p3   p4#3 p5
    CTI         |2        |4            (after the 2nd and the 4th event, at its start)
    out    p1   p2   p3                 (start < 4; p4 and p5 wait for a later CTI)
    """
    items = [Point(T(i), r(i)) for i in range(1, 6)]
    res = run(executor, Stream.create("in", items, POINT, gen(2)))
    assert res.ctis == [T(2), T(4)]
    same_items(executor, res.events, [pt(1, 1), pt(2, 2), pt(3, 3)])
    assert counts(metrics(res)) == M(received=5, admitted=5, ctis_generated=2)
    assert res.rejected == []
    assert set(res.metrics) == {"in"}


def test_count_uses_interval_start(executor: Any) -> None:
    """N=1, delay 0, intervals: the CTI is at the event's start, not its end.

    I(1,5)#0 -> |1 ;  I(3,4)#1 -> |3
    out: I(1,5) (start 1 < 3); I(3,4) waits
    """
    items = [Interval(T(1), T(5), r(1)), Interval(T(3), T(4), r(3))]
    res = run(executor, Stream.create("in", items, INTERVAL, gen(1)))
    assert res.ctis == [T(1), T(3)]
    same_items(executor, res.events, [out(1, 5, 1)])


def test_count_positive_delay_gives_slack_and_ignores_going_back(executor: Any) -> None:
    """N=1, delay 2s: a CTI at start - 2 after every event.

    item   CTI before  check          generated (start-2)
    p5 #0  -inf        ok             |3
    p3 #1  3           ok (3 >= 3)    1  -> ignored (not after 3)
    p7 #2  3           ok             |5
    p4 #3  5           4 < 5: DROP    2  -> ignored
    out: p3 only (p5 and p7 start at/after the last CTI 5)
    """
    items = [Point(T(5), r(5)), Point(T(3), r(3)), Point(T(7), r(7)), Point(T(4), r(4))]
    res = run(executor, Stream.create("in", items, POINT, gen(1, 2 * SEC)))
    assert res.ctis == [T(3), T(5)]
    same_items(executor, res.events, [pt(3, 3)])
    assert counts(metrics(res)) == M(received=4, admitted=3, dropped=1, ctis_generated=2, ctis_ignored=2)
    assert res.rejected == [Rejection("in", 3, items[3], Rule.START_BEFORE_CTI, Action.DROPPED, T(5), None)]


def test_count_counts_dropped_events(executor: Any) -> None:
    """N=2, delay 0: a dropped event was received, so it counts towards N.

    p5#0 (1)  p6#1 (2) -> |6   p4#2 dropped (1)   p8#3 (2) -> |8   p9#4 (1)
    (if dropped events did not count, the 2nd CTI would be at 9)
    out: p5, p6 (start < 8)
    """
    items = [Point(T(s), r(s)) for s in (5, 6, 4, 8, 9)]
    res = run(executor, Stream.create("in", items, POINT, gen(2)))
    assert res.ctis == [T(6), T(8)]
    same_items(executor, res.events, [pt(5, 5), pt(6, 6)])
    assert counts(metrics(res)) == M(received=5, admitted=4, dropped=1, ctis_generated=2)
    assert [(j.position, j.cti) for j in res.rejected] == [(2, T(6))]


def test_count_does_not_count_end_edges(executor: Any) -> None:
    """N=2, delay 0, edges: only start edges count.

    ES(1,a)#0 (1)  EE(1,3,a)#1 (-)  ES(2,b)#2 (2) -> |2  ES(4,c)#3 (1)  EE(2,5,b)#4 (-)  |10#5
    (if end edges counted, CTIs would be |1 after #1 and |4 after #3)
    out: a [1,3) at |2; b [2,5), c [4,inf) at |10
    """
    a, b, c = r(1, "a"), r(2, "b"), r(4, "c")
    items = [
        EdgeStart(T(1), a),
        EdgeEnd(T(1), T(3), a),
        EdgeStart(T(2), b),
        EdgeStart(T(4), c),
        EdgeEnd(T(2), T(5), b),
        Cti(T(10)),
    ]
    res = run(executor, Stream.create("in", items, EDGE, gen(2)))
    assert res.ctis == [T(2), T(10)]
    same_items(executor, res.events, [out(1, 3, 1, "a"), out(2, 5, 2, "b"), out(4, NINF, 4, "c")])
    assert counts(metrics(res)) == M(received=5, admitted=5, ctis_generated=1, ctis_explicit=1)


def test_generated_cti_at_original_start_of_adjusted_event(executor: Any) -> None:
    """N=1, delay -1 tick, ADJUST: the generated CTI uses the event's start as received.

    |5#0   p3#1 -> adjusted to 5; generated CTI at 3 + 1 tick <= 5 -> ignored
    (a CTI from the adjusted start would be 5 + 1 tick and would release the point)
    out: nothing (the point at 5 is not before the last CTI 5)
    """
    items: list[Any] = [Cti(T(5)), Point(T(3), r(3))]
    res = run(executor, Stream.create("in", items, POINT, gen(1, -TICK, policy=ADJUST)))
    assert res.ctis == [T(5)]
    assert res.events == []
    assert counts(metrics(res)) == M(received=1, admitted=1, adjusted=1, ctis_explicit=1, ctis_ignored=1)


# =============================================================================================
# Generation by time span
# =============================================================================================
def test_timespan_cti_when_a_later_period_is_entered(executor: Any) -> None:
    """T=10s, delay 0; periods [0,10) [10,20) [20,30) [30,40) (epoch-aligned).

    p3   period 0: the first event only sets the period
    p7   period 0
    p12  period 1 > 0  -> |12
    p15  period 1
    p31  period 3 > 1  -> |31
    p33  period 3
    out: p3 p7 (at |12), p12 p15 (at |31)
    """
    items = [Point(T(s), r(s)) for s in (3, 7, 12, 15, 31, 33)]
    res = run(executor, Stream.create("in", items, POINT, gen(10 * SEC)))
    assert res.ctis == [T(12), T(31)]
    same_items(executor, res.events, [pt(3, 3), pt(7, 7), pt(12, 12), pt(15, 15)])
    assert counts(metrics(res)) == M(received=6, admitted=6, ctis_generated=2)


def test_timespan_first_event_only_sets_the_period(executor: Any) -> None:
    """T=10s: one event, no CTI, nothing released.

    p3   period 0 (first) -> no CTI
    """
    res = run(executor, Stream.create("in", [Point(T(3), r(3))], POINT, gen(10 * SEC)))
    assert res.ctis == []
    assert res.events == []
    assert counts(metrics(res)) == M(received=1, admitted=1)


def test_timespan_with_delay_and_earlier_period(executor: Any) -> None:
    """T=10s, delay 5s.

    p3#0   period 0 (first)
    p12#1  period 1 > 0 -> |7 (12 - 5)
    p8#2   period 0, 8 >= 7 admitted, no CTI (period not greater than seen)
    p15#3  period 1, not greater -> no CTI
    p21#4  period 2 -> |16
    out: p3 at |7; p12, p8, p15 at |16 (same CTI: order not asserted)
    """
    items = [Point(T(s), r(s)) for s in (3, 12, 8, 15, 21)]
    res = run(executor, Stream.create("in", items, POINT, gen(10 * SEC, 5 * SEC)))
    assert res.ctis == [T(7), T(16)]
    assert res.events[0] == pt(3, 3)
    assert by_v(res.events) == [pt(3, 3), pt(8, 8), pt(12, 12), pt(15, 15)]
    assert counts(metrics(res)) == M(received=5, admitted=5, ctis_generated=2)


def test_timespan_periods_are_epoch_aligned(executor: Any) -> None:
    """T=1h; 2024-01-01 00:00 is a whole hour after the epoch.

    p(00:50)  hour 0 (first)
    p(01:10)  hour 1 -> |01:10      (aligned on the first event instead, both would be
                                       in one period and no CTI would come)
    """
    items = [Point(T(50 * 60), r(1)), Point(T(70 * 60), r(2))]
    res = run(executor, Stream.create("in", items, POINT, gen(timedelta(hours=1))))
    assert res.ctis == [T(70 * 60)]
    same_items(executor, res.events, [pt(50 * 60, 1)])


def test_timespan_does_not_count_end_edges(executor: Any) -> None:
    """T=10s, delay 0, edges.

    ES(3,a)#0    period 0 (first)
    EE(3,25,a)#1 not counted (by its end it would enter period 2 and give |25,
                  after which ES(12,b) would be dropped)
    ES(12,b)#2   period 1 -> |12
    |30#3        explicit
    out: a [3,25), b [12,inf)
    """
    a, b = r(3, "a"), r(12, "b")
    items = [EdgeStart(T(3), a), EdgeEnd(T(3), T(25), a), EdgeStart(T(12), b), Cti(T(30))]
    res = run(executor, Stream.create("in", items, EDGE, gen(10 * SEC)))
    assert res.ctis == [T(12), T(30)]
    same_items(executor, res.events, [out(3, 25, 3, "a"), out(12, NINF, 12, "b")])
    assert counts(metrics(res)) == M(received=3, admitted=3, ctis_generated=1, ctis_explicit=1)


# =============================================================================================
# Delay sign
# =============================================================================================
def test_delay_minus_one_tick_releases_every_event_at_once(executor: Any) -> None:
    """N=1, delay -1 tick: a CTI just after every point.

    p1 |1+t   p2 |2+t   p3 |3+t
    out: p1 p2 p3 (each released by its own CTI)
    """
    items = [Point(T(s), r(s)) for s in (1, 2, 3)]
    res = run(executor, Stream.create("in", items, POINT, gen(1, -TICK)))
    assert res.ctis == [T(1) + TICK, T(2) + TICK, T(3) + TICK]
    same_items(executor, res.events, [pt(1, 1), pt(2, 2), pt(3, 3)])


def test_delay_zero_keeps_the_last_event(executor: Any) -> None:
    """N=1, delay 0: the CTI is at the point's own start, which does not commit it.

    p1 |1   p2 |2   p3 |3
    out: p1 (at |2), p2 (at |3); p3 waits
    """
    items = [Point(T(s), r(s)) for s in (1, 2, 3)]
    res = run(executor, Stream.create("in", items, POINT, gen(1)))
    assert res.ctis == [T(1), T(2), T(3)]
    same_items(executor, res.events, [pt(1, 1), pt(2, 2)])


# =============================================================================================
# CTIs never go back; explicit CTIs; release rule; shutdown
# =============================================================================================
def test_ctis_never_go_back(executor: Any) -> None:
    """No settings: explicit CTIs only.

    |5#0   p6#1   |3#2 (ignored: before 5)   |5#3 (ignored: not after 5)   |8#4
    out: p6 (at |8)
    """
    items: list[Any] = [Cti(T(5)), Point(T(6), r(6)), Cti(T(3)), Cti(T(5)), Cti(T(8))]
    res = run(executor, Stream.create("in", items, POINT))
    assert res.ctis == [T(5), T(8)]
    same_items(executor, res.events, [pt(6, 6)])
    assert counts(metrics(res)) == M(received=1, admitted=1, ctis_explicit=2, ctis_ignored=2)


def test_explicit_ctis_alongside_generated(executor: Any) -> None:
    """N=2, delay 0, plus explicit CTIs.

    p1#0  p2#1 -> |2 (gen)   |4#2 (explicit)   p4#3   p6#4 -> |6 (gen)
    |5#5 (explicit, ignored)   p7#6
    out: p1 (at |2), p2 (at |4), p4 (at |6); p6 p7 wait
    """
    items: list[Any] = [
        Point(T(1), r(1)),
        Point(T(2), r(2)),
        Cti(T(4)),
        Point(T(4), r(4)),
        Point(T(6), r(6)),
        Cti(T(5)),
        Point(T(7), r(7)),
    ]
    res = run(executor, Stream.create("in", items, POINT, gen(2)))
    assert res.ctis == [T(2), T(4), T(6)]
    same_items(executor, res.events, [pt(1, 1), pt(2, 2), pt(4, 4)])
    assert counts(metrics(res)) == M(received=5, admitted=5, ctis_generated=2, ctis_explicit=1, ctis_ignored=1)


def test_generated_cti_behind_an_explicit_one_is_ignored(executor: Any) -> None:
    """N=2, delay 0.

    p1#0 (1)   |10#1 explicit   p10#2 (2) -> generated |10: not after 10, ignored
    out: p1
    """
    items: list[Any] = [Point(T(1), r(1)), Cti(T(10)), Point(T(10), r(10))]
    res = run(executor, Stream.create("in", items, POINT, gen(2)))
    assert res.ctis == [T(10)]
    same_items(executor, res.events, [pt(1, 1)])
    assert counts(metrics(res)) == M(received=2, admitted=2, ctis_explicit=1, ctis_ignored=1)


def test_release_rule_without_final_cti(executor: Any) -> None:
    """No settings.

    p1#0   p2#1   |2#2   p3#3
    out: p1 only: p2 starts at the last CTI, p3 after it
    """
    items: list[Any] = [Point(T(1), r(1)), Point(T(2), r(2)), Cti(T(2)), Point(T(3), r(3))]
    res = run(executor, Stream.create("in", items, POINT))
    assert res.ctis == [T(2)]
    same_items(executor, res.events, [pt(1, 1)])
    assert counts(metrics(res)) == M(received=3, admitted=3, ctis_explicit=1)


def test_advance_to_infinity_on_shutdown_releases_everything(executor: Any) -> None:
    """N=1, delay 0, advance_to_infinity_on_shutdown.

    p1 |1   p2 |2   p3 |3   <end of input> |inf
    out: p1 p2 p3 (p3 released by the final CTI)
    """
    items = [Point(T(s), r(s)) for s in (1, 2, 3)]
    res = run(executor, Stream.create("in", items, POINT, gen(1, flush=True)))
    assert res.ctis == [T(1), T(2), T(3), NINF]
    assert tempo.is_infinite(res.ctis[-1])
    same_items(executor, res.events, [pt(1, 1), pt(2, 2), pt(3, 3)])


def test_advance_to_infinity_releases_open_edges(executor: Any) -> None:
    """EDGE, N=1, delay 0, flush.

    ES(1,a) |1   ES(2,b) |2   EE(1,4,a) (not counted)   <end> |inf
    out: a [1,4) (at |2), b [2,inf) (at |inf; its end edge never came)
    """
    a, b = r(1, "a"), r(2, "b")
    items = [EdgeStart(T(1), a), EdgeStart(T(2), b), EdgeEnd(T(1), T(4), a)]
    res = run(executor, Stream.create("in", items, EDGE, gen(1, flush=True)))
    assert res.ctis == [T(1), T(2), NINF]
    same_items(executor, res.events, [out(1, 4, 1, "a"), out(2, NINF, 2, "b")])


def test_empty_input(executor: Any) -> None:
    """No items at all: nothing in, nothing out."""
    res = run(executor, Stream.create("in", [], POINT, payload_type=R))
    assert res.events == [] and res.ctis == [] and res.rejected == []
    assert counts(metrics(res)) == M()


@pytest.mark.needs(Capability.RAW_ITEMS)
def test_empty_input_raw(executor: Any) -> None:
    assert run(executor, Stream.create("in", [], POINT, payload_type=R)).raw == []


# =============================================================================================
# Violation policies, shape by shape (explicit CTIs; generation never fires)
# =============================================================================================
def test_point_drop(executor: Any) -> None:
    """|5#0   p3#1 (3 < 5: dropped)   p5#2 (5 >= 5: fine)   |6#3
    out: p5
    """
    items: list[Any] = [Cti(T(5)), Point(T(3), r(3)), Point(T(5), r(5)), Cti(T(6))]
    res = run(executor, Stream.create("in", items, POINT, policy_only(DROP)))
    assert res.ctis == [T(5), T(6)]
    same_items(executor, res.events, [pt(5, 5)])
    assert res.rejected == [Rejection("in", 1, items[1], Rule.START_BEFORE_CTI, Action.DROPPED, T(5), None)]
    assert counts(metrics(res)) == M(received=2, admitted=1, dropped=1, ctis_explicit=2)


def test_point_adjust_moves_to_the_cti(executor: Any) -> None:
    """|5#0   p3#1 (moved to 5: [5, 5+1 tick))   p5#2   |6#3
    out: p(5, v=3), p(5, v=5)
    """
    items: list[Any] = [Cti(T(5)), Point(T(3), r(3)), Point(T(5), r(5)), Cti(T(6))]
    res = run(executor, Stream.create("in", items, POINT, policy_only(ADJUST)))
    assert res.ctis == [T(5), T(6)]
    assert by_v(res.events) == [pt(5, 3), pt(5, 5)]
    assert res.rejected == [Rejection("in", 1, items[1], Rule.START_BEFORE_CTI, Action.ADJUSTED, T(5), Point(T(5), r(3)))]
    assert counts(metrics(res)) == M(received=2, admitted=2, adjusted=1, ctis_explicit=2)


def test_interval_drop(executor: Any) -> None:
    """|5#0   I(3,8)#1 (start 3 < 5: dropped)   I(5,6)#2   |10#3
    out: I(5,6)
    """
    items: list[Any] = [Cti(T(5)), Interval(T(3), T(8), r(3)), Interval(T(5), T(6), r(5)), Cti(T(10))]
    res = run(executor, Stream.create("in", items, INTERVAL, policy_only(DROP)))
    same_items(executor, res.events, [out(5, 6, 5)])
    assert res.rejected == [Rejection("in", 1, items[1], Rule.START_BEFORE_CTI, Action.DROPPED, T(5), None)]
    assert counts(metrics(res)) == M(received=2, admitted=1, dropped=1, ctis_explicit=2)


def test_interval_adjust(executor: Any) -> None:
    """|5#0
    I(3,8)#1  end 8 > 5: start moved -> [5,8)
    I(2,5)#2  end 5 <= 5: wholly before the CTI -> dropped (START_BEFORE_CTI, DROPPED)
    I(4,6)#3  -> [5,6)
    I(5,7)#4  fine
    |10#5
    out: [5,8) v3, [5,6) v4, [5,7) v5 (all at |10)
    """
    items: list[Any] = [
        Cti(T(5)),
        Interval(T(3), T(8), r(3)),
        Interval(T(2), T(5), r(2)),
        Interval(T(4), T(6), r(4)),
        Interval(T(5), T(7), r(5)),
        Cti(T(10)),
    ]
    res = run(executor, Stream.create("in", items, INTERVAL, policy_only(ADJUST)))
    assert by_v(res.events) == [out(5, 8, 3), out(5, 6, 4), out(5, 7, 5)]
    same_items(
        executor,
        res.rejected,
        [
            Rejection("in", 1, items[1], Rule.START_BEFORE_CTI, Action.ADJUSTED, T(5), Interval(T(5), T(8), r(3))),
            Rejection("in", 2, items[2], Rule.START_BEFORE_CTI, Action.DROPPED, T(5), None),
            Rejection("in", 3, items[3], Rule.START_BEFORE_CTI, Action.ADJUSTED, T(5), Interval(T(5), T(6), r(4))),
        ],
    )
    assert counts(metrics(res)) == M(received=4, admitted=3, adjusted=2, dropped=1, ctis_explicit=2)


def test_start_edge_drop_drops_its_end_edge(executor: Any) -> None:
    """|5#0
    ES(3,a)#1    3 < 5: dropped (START_BEFORE_CTI)
    ES(6,b)#2
    EE(3,9,a)#3  its start edge was dropped -> dropped (START_EDGE_DROPPED), not an error
    EE(6,8,b)#4
    |10#5
    out: b [6,8)
    """
    a, b = r(3, "a"), r(6, "b")
    items: list[Any] = [
        Cti(T(5)),
        EdgeStart(T(3), a),
        EdgeStart(T(6), b),
        EdgeEnd(T(3), T(9), a),
        EdgeEnd(T(6), T(8), b),
        Cti(T(10)),
    ]
    res = run(executor, Stream.create("in", items, EDGE, policy_only(DROP)))
    same_items(executor, res.events, [out(6, 8, 6, "b")])
    same_items(
        executor,
        res.rejected,
        [
            Rejection("in", 1, items[1], Rule.START_BEFORE_CTI, Action.DROPPED, T(5), None),
            Rejection("in", 3, items[3], Rule.START_EDGE_DROPPED, Action.DROPPED, T(5), None),
        ],
    )
    assert counts(metrics(res)) == M(received=4, admitted=2, dropped=2, ctis_explicit=2)


def start_edge_adjusted(executor: Any) -> tempo.Result[Any]:
    """|5#0   ES(3,a)#1 -> moved to 5   |6#2 (releases the start edge)
    EE(3,9,a)#3 matches by the original start 3 and ends the event at 9   |10#4
    out: a [5,9); raw shows EdgeStart(5) and then EdgeEnd(5,9)
    (guess: the end edge itself broke no rule, so it is not listed in rejected)
    """
    a = r(3, "a")
    items: list[Any] = [Cti(T(5)), EdgeStart(T(3), a), Cti(T(6)), EdgeEnd(T(3), T(9), a), Cti(T(10))]
    return run(executor, Stream.create("in", items, EDGE, policy_only(ADJUST)))


def test_start_edge_adjust_and_its_end_edge_matches_the_original_start(executor: Any) -> None:
    res, a = start_edge_adjusted(executor), r(3, "a")
    same_items(executor, res.events, [out(5, 9, 3, "a")])
    assert res.rejected == [Rejection("in", 1, EdgeStart(T(3), a), Rule.START_BEFORE_CTI, Action.ADJUSTED, T(5), EdgeStart(T(5), a))]
    assert counts(metrics(res)) == M(received=2, admitted=2, adjusted=1, ctis_explicit=3)


@pytest.mark.needs(Capability.RAW_ITEMS)
def test_start_edge_adjust_raw_interleaves_edges_and_ctis(executor: Any) -> None:
    res, a = start_edge_adjusted(executor), r(3, "a")
    assert [norm(i) for i in res.raw] == [
        ("Cti", T(5)),
        ("EdgeStart", T(5), a),
        ("Cti", T(6)),
        ("EdgeEnd", T(5), T(9), a),
        ("Cti", T(10)),
    ]


def end_edge_dropped(executor: Any) -> tuple[tempo.Result[Any], list[Any]]:
    """ES(1,a)#0   |5#1   EE(1,3,a)#2 (end 3 < 5: dropped, END_BEFORE_CTI)   |6#3
    out: a [1,inf); raw has no EdgeEnd
    """
    a = r(1, "a")
    items: list[Any] = [EdgeStart(T(1), a), Cti(T(5)), EdgeEnd(T(1), T(3), a), Cti(T(6))]
    return run(executor, Stream.create("in", items, EDGE, policy_only(DROP))), items


def test_end_edge_drop_leaves_the_event_open(executor: Any) -> None:
    res, items = end_edge_dropped(executor)
    same_items(executor, res.events, [out(1, NINF, 1, "a")])
    assert res.rejected == [Rejection("in", 2, items[2], Rule.END_BEFORE_CTI, Action.DROPPED, T(5), None)]
    assert counts(metrics(res)) == M(received=2, admitted=1, dropped=1, ctis_explicit=2)


@pytest.mark.needs(Capability.RAW_ITEMS)
def test_end_edge_drop_leaves_no_end_edge_in_raw(executor: Any) -> None:
    res, _ = end_edge_dropped(executor)
    assert not any(isinstance(i, EdgeEnd) for i in res.raw)


def test_end_edge_adjust_ends_at_the_cti(executor: Any) -> None:
    """ES(1,a)#0   |5#1   EE(1,3,a)#2 (end 3 < 5: end moved to 5)   |6#3
    out: a [1,5)
    """
    a = r(1, "a")
    items: list[Any] = [EdgeStart(T(1), a), Cti(T(5)), EdgeEnd(T(1), T(3), a), Cti(T(6))]
    res = run(executor, Stream.create("in", items, EDGE, policy_only(ADJUST)))
    same_items(executor, res.events, [out(1, 5, 1, "a")])
    assert res.rejected == [Rejection("in", 2, items[2], Rule.END_BEFORE_CTI, Action.ADJUSTED, T(5), EdgeEnd(T(1), T(5), a))]
    assert counts(metrics(res)) == M(received=2, admitted=2, adjusted=1, ctis_explicit=2)


def test_end_edge_at_the_cti_is_no_violation(executor: Any) -> None:
    """ES(1,a)#0   |5#1   EE(1,5,a)#2 (end 5 >= 5: fine)   |6#3
    out: a [1,5), nothing rejected
    """
    a = r(1, "a")
    items: list[Any] = [EdgeStart(T(1), a), Cti(T(5)), EdgeEnd(T(1), T(5), a), Cti(T(6))]
    res = run(executor, Stream.create("in", items, EDGE, policy_only(DROP)))
    same_items(executor, res.events, [out(1, 5, 1, "a")])
    assert res.rejected == []


def test_end_edge_adjust_never_leaves_an_empty_lifetime(executor: Any) -> None:
    """|5#0   ES(3,a)#1 -> moved to 5   EE(3,4,a)#2: end 4 < 5 -> end 5, but the start is
    5 too, so the end becomes 5 + 1 tick   |6#3
    out: a [5, 5+1 tick)
    """
    a = r(3, "a")
    items: list[Any] = [Cti(T(5)), EdgeStart(T(3), a), EdgeEnd(T(3), T(4), a), Cti(T(6))]
    res = run(executor, Stream.create("in", items, EDGE, policy_only(ADJUST)))
    same_items(executor, res.events, [OutputEvent(T(5), T(5) + TICK, a)])
    assert [(j.position, j.rule, j.action) for j in res.rejected] == [
        (1, Rule.START_BEFORE_CTI, Action.ADJUSTED),
        (2, Rule.END_BEFORE_CTI, Action.ADJUSTED),
    ]
    assert res.rejected[1].admitted_as.end == T(5) + TICK
    assert counts(metrics(res)) == M(received=2, admitted=2, adjusted=2, ctis_explicit=2)


def test_end_edge_at_the_cti_of_an_adjusted_start_edge_never_leaves_an_empty_lifetime(executor: Any) -> None:
    """|5#0   ES(3,a)#1 -> moved to 5   EE(3,5,a)#2: end 5 is not before the CTI 5 (no
    violation by the letter of the rule), but the admitted start is 5 too, so [5,5) would be
    empty; as for an adjusted end edge, the end becomes 5 + 1 tick   |6#3
    out: a [5, 5+1 tick) -- never an empty lifetime (lifetimes need end > start)
    """
    a = r(3, "a")
    items: list[Any] = [Cti(T(5)), EdgeStart(T(3), a), EdgeEnd(T(3), T(5), a), Cti(T(6))]
    res = run(executor, Stream.create("in", items, EDGE, policy_only(ADJUST)))
    assert all(e.end > e.start for e in res.events)
    same_items(executor, res.events, [OutputEvent(T(5), T(5) + TICK, a)])
    # raw inserts, whatever executor: the one-tick lifetime in any of its representations
    assert [norm(i) for i in res.raw if not isinstance(i, Cti)] in (
        [("Point", T(5), a)],  # raw output shows a one-tick lifetime as a point
        [("Interval", T(5), T(5) + TICK, a)],
        [("EdgeStart", T(5), a), ("EdgeEnd", T(5), T(5) + TICK, a)],
    )


def test_end_edges_match_adjusted_and_unadjusted_start_edges_by_received_start(executor: Any) -> None:
    """|5#0   ES(3,a)#1 -> moved to 5   ES(5,a)#2 (same payload, received at 5)   |6#3
    EE(5,9,a)#4 closes the edge received at 5; EE(3,7,a)#5 closes the one received at 3
    |10#6
    out: [5,7) and [5,9) (same start and payload: compared sorted by end)
    """
    a = r(3, "a")
    items: list[Any] = [
        Cti(T(5)),
        EdgeStart(T(3), a),
        EdgeStart(T(5), a),
        Cti(T(6)),
        EdgeEnd(T(5), T(9), a),
        EdgeEnd(T(3), T(7), a),
        Cti(T(10)),
    ]
    res = run(executor, Stream.create("in", items, EDGE, policy_only(ADJUST)))
    assert sorted(res.events, key=lambda e: e.end) == [out(5, 7, 3, "a"), out(5, 9, 3, "a")]
    assert [j.position for j in res.rejected] == [1]


# =============================================================================================
# Edges in the result
# =============================================================================================
def two_edges(executor: Any) -> tempo.Result[Any]:
    """No settings.

    ES(1,a)#0   ES(2,b)#1   |3#2   EE(1,4,a)#3   |10#4
    events: a [1,4) (both ends), b [2,inf) (never ended)
    raw:    EdgeStart a, EdgeStart b, Cti 3, EdgeEnd a, Cti 10
    """
    a, b = r(1, "a"), r(2, "b")
    items: list[Any] = [EdgeStart(T(1), a), EdgeStart(T(2), b), Cti(T(3)), EdgeEnd(T(1), T(4), a), Cti(T(10))]
    return run(executor, Stream.create("in", items, EDGE))


def test_edges_coalesced_in_events(executor: Any) -> None:
    same_items(executor, two_edges(executor).events, [out(1, 4, 1, "a"), out(2, NINF, 2, "b")])


@pytest.mark.needs(Capability.RAW_ITEMS)
def test_raw_keeps_edges(executor: Any) -> None:
    """a and b are released by the same CTI (order within it is the executor's own), and
    raw shows edges and CTIs as the in-memory executor interleaves them; the Spark
    executor lists inserts then CTIs and may show the edge pair as one interval."""
    res, a, b = two_edges(executor), r(1, "a"), r(2, "b")
    assert res.payloads() == [a, b]
    assert [norm(i) for i in res.raw] == [
        ("EdgeStart", T(1), a),
        ("EdgeStart", T(2), b),
        ("Cti", T(3)),
        ("EdgeEnd", T(1), T(4), a),
        ("Cti", T(10)),
    ]


def test_points_and_intervals(executor: Any) -> None:
    """No settings.  p1#0  |2#1 -> p1.   I(1,3)#0 |2#1 -> [1,3)."""
    res = run(executor, Stream.create("in", [Point(T(1), r(1)), Cti(T(2))], POINT))
    same_items(executor, res.events, [pt(1, 1)])
    res = run(executor, Stream.create("in", [Interval(T(1), T(3), r(1)), Cti(T(2))], INTERVAL))
    same_items(executor, res.events, [out(1, 3, 1)])


@pytest.mark.needs(Capability.RAW_ITEMS)
def test_raw_points_and_intervals(executor: Any) -> None:
    """No settings.  p1#0  |2#1  -> raw: Point 1, Cti 2.   I(1,3)#0 |2#1 -> raw: Interval, Cti."""
    res = run(executor, Stream.create("in", [Point(T(1), r(1)), Cti(T(2))], POINT))
    assert [norm(i) for i in res.raw] == [("Point", T(1), r(1)), ("Cti", T(2))]
    res = run(executor, Stream.create("in", [Interval(T(1), T(3), r(1)), Cti(T(2))], INTERVAL))
    assert [norm(i) for i in res.raw] == [("Interval", T(1), T(3), r(1)), ("Cti", T(2))]


# =============================================================================================
# Import
# =============================================================================================
def test_import_interleaves_by_arrival(executor: Any) -> None:
    """fast: POINT, N=1 delay 0.  slow: EDGE, imports fast, DROP.  (arrival = a)

    a   input  item           fast CTI   slow CTI
    0   slow   ES(0,s0)#0                -inf      ok
    1   fast   p1#0           |1         |1
    2   fast   p2#1           |2         |2
    3   slow   ES(3,s3)#1                2         ok (3 >= 2)
    6   fast   p6#2           |6         |6
    7   slow   ES(5,s5)#2                6         5 < 6: dropped
    8   fast   p8#3           |8         |8
    9   slow   EE(3,9,s3)#3              8         ok (9 >= 8)
    10  fast   |10#4          |10        |10
    query: slow ∪ (fast where nothing): output CTI = min of both = 1 2 6 8 10
    out: s0 [0,inf), s3 [3,9)
    """
    fast_items: list[Any] = [
        Point(T(1), r(1, "f"), T(1)),
        Point(T(2), r(2, "f"), T(2)),
        Point(T(6), r(6, "f"), T(6)),
        Point(T(8), r(8, "f"), T(8)),
        Cti(T(10), T(10)),
    ]
    s0, s3, s5 = r(0, "s"), r(3, "s"), r(5, "s")
    slow_items: list[Any] = [
        EdgeStart(T(0), s0, T(0)),
        EdgeStart(T(3), s3, T(3)),
        EdgeStart(T(5), s5, T(7)),
        EdgeEnd(T(3), T(9), s3, T(9)),
    ]
    fast = Stream.create("fast", fast_items, POINT, gen(1))
    slow = Stream.create("slow", slow_items, EDGE, imports("fast"))
    res = run(executor, slow.union(fast.where(nothing)))
    assert counts(metrics(res, "slow")) == M(received=4, admitted=3, dropped=1, ctis_imported=5)
    assert counts(metrics(res, "fast")) == M(received=4, admitted=4, ctis_generated=4, ctis_explicit=1)
    assert res.rejected == [Rejection("slow", 2, slow_items[2], Rule.START_BEFORE_CTI, Action.DROPPED, T(6), None)]
    same_items(executor, res.events, [out(0, NINF, 0, "s"), out(3, 9, 3, "s")])
    assert res.ctis == [T(1), T(2), T(6), T(8), T(10)]


def test_import_with_generation_max_wins(executor: Any) -> None:
    """fast: POINT, N=1.  slow: POINT, N=1 and imports fast, DROP.

    a  input  item       fast CTI  slow CTI
    1  fast   p5#0       |5        |5  (imported)
    2  slow   p10#0                |10 (generated; the later of the two)
    3  fast   p6#1       |6        6 imported: not after 10 -> ignored
    4  slow   p8#1                 8 < 10: dropped; generated 8 -> ignored
    5  fast   |12#2      |12       |12 (imported)
    query: slow ∪ (fast where nothing): CTIs min(fast, slow) = 5 6 10 12
    out: slow p10
    """
    fast_items: list[Any] = [Point(T(5), r(5, "f"), T(1)), Point(T(6), r(6, "f"), T(3)), Cti(T(12), T(5))]
    slow_items = [Point(T(10), r(10, "s"), T(2)), Point(T(8), r(8, "s"), T(4))]
    fast = Stream.create("fast", fast_items, POINT, gen(1))
    slow = Stream.create("slow", slow_items, POINT, imports("fast", generation=AdvanceTimeGenerationSettings(1)))
    res = run(executor, slow.union(fast.where(nothing)))
    assert counts(metrics(res, "slow")) == M(received=2, admitted=1, dropped=1, ctis_generated=1, ctis_imported=2, ctis_ignored=2)
    assert res.rejected == [Rejection("slow", 1, slow_items[1], Rule.START_BEFORE_CTI, Action.DROPPED, T(10), None)]
    same_items(executor, res.events, [pt(10, 10, "s")])
    assert res.ctis == [T(5), T(6), T(10), T(12)]


def test_import_chain_receives_the_final_infinity(executor: Any) -> None:
    """a: N=1, flush.  b imports a.  c imports b (EDGE).

    arr 0  c  ES(0,c0)
    arr 1  a  p1 -> a|1, b|1, c|1
    arr 2  a  p2 -> a|2, b|2, c|2
    arr 3  b  p3 (3 >= 2 ok)
    <end>  a|inf -> b|inf -> c|inf
    out: everything (a1, a2, b3, c0 [0,inf)); final CTI inf
    """
    a = Stream.create("a", [Point(T(1), r(1, "a"), T(1)), Point(T(2), r(2, "a"), T(2))], POINT, gen(1, flush=True))
    b = Stream.create("b", [Point(T(3), r(3, "b"), T(3))], POINT, imports("a"))
    c = Stream.create("c", [EdgeStart(T(0), r(0, "c"), T(0))], EDGE, imports("b"))
    res = run(executor, a.union(b).union(c))
    assert counts(metrics(res, "b")) == M(received=1, admitted=1, ctis_imported=3)
    assert counts(metrics(res, "c")) == M(received=1, admitted=1, ctis_imported=3)
    assert res.ctis[-1] == NINF
    assert by_v(res.events) == [out(0, NINF, 0, "c"), pt(1, 1, "a"), pt(2, 2, "a"), pt(3, 3, "b")]


def test_only_ctis_that_advance_the_exporter_are_imported(executor: Any) -> None:
    """fast: N=1.  slow imports fast.

    a=1 fast p5#0 -> fast|5 -> slow|5
    a=2 fast |3#1 -> ignored by fast (3 <= 5): not passed on to slow
    a=3 slow p6#0 ok
    a=4 fast |7#2 -> fast|7 -> slow|7
    out: slow p6 (at |7)
    """
    fast = Stream.create("fast", [Point(T(5), r(5, "f"), T(1)), Cti(T(3), T(2)), Cti(T(7), T(4))], POINT, gen(1))
    slow = Stream.create("slow", [Point(T(6), r(6, "s"), T(3))], POINT, imports("fast"))
    res = run(executor, slow.union(fast.where(nothing)))
    assert counts(metrics(res, "fast")) == M(received=1, admitted=1, ctis_generated=1, ctis_explicit=1, ctis_ignored=1)
    assert counts(metrics(res, "slow")) == M(received=1, admitted=1, ctis_imported=2)
    same_items(executor, res.events, [pt(6, 6, "s")])
    assert res.ctis == [T(5), T(7)]


def test_import_unknown_name_is_a_build_error(executor: Any) -> None:
    """slow imports 'nope', which is no input of the query."""
    slow = Stream.create("slow", [Point(T(1), r(1), T(1))], POINT, imports("nope"))
    with pytest.raises(tempo.QueryBuildError, match="nope"):
        slow.explain()
    with pytest.raises(tempo.QueryBuildError, match="nope"):
        run(executor, slow)


def test_import_from_an_input_outside_the_query_is_a_build_error(executor: Any) -> None:
    """'fast' exists but is not part of the query that reads slow."""
    Stream.create("fast", [Point(T(1), r(1), T(1))], POINT, gen(1))
    slow = Stream.create("slow", [Point(T(1), r(1), T(1))], POINT, imports("fast"))
    with pytest.raises(tempo.QueryBuildError, match="fast"):
        run(executor, slow)


def test_import_cycle_is_a_build_error(executor: Any) -> None:
    """a imports b, b imports a."""
    a = Stream.create("a", [Point(T(1), r(1), T(1))], POINT, imports("b"))
    b = Stream.create("b", [Point(T(2), r(2), T(2))], POINT, imports("a"))
    q = a.union(b)
    with pytest.raises(tempo.QueryBuildError, match="cycle"):
        q.explain()
    with pytest.raises(tempo.QueryBuildError, match="cycle"):
        run(executor, q)


@pytest.mark.parametrize("missing", ["fast", "slow"])
def test_import_without_arrival_is_an_import_order_error(executor: Any, missing: str) -> None:
    """Every item of an importing input and of the input it imports from needs `arrival`.

    fast: p1(a=1)#0  p2(a=2)#1      slow (imports fast): p3(a=3)#0  p4(a=4)#1
    One item (#1 of `missing`) lacks its arrival -> ImportOrderError naming it.
    """
    fast_items = [Point(T(1), r(1), T(1)), Point(T(2), r(2), None if missing == "fast" else T(2))]
    slow_items = [Point(T(3), r(3), T(3)), Point(T(4), r(4), None if missing == "slow" else T(4))]
    fast = Stream.create("fast", fast_items, POINT, gen(1))
    slow = Stream.create("slow", slow_items, POINT, imports("fast"))
    with pytest.raises(tempo.ImportOrderError) as info:
        run(executor, slow.union(fast))
    assert info.value.input_name == missing
    assert info.value.position == 1
    assert repr(missing) in str(info.value) and "#1" in str(info.value)


def test_inputs_outside_imports_need_no_arrival(executor: Any) -> None:
    """fast/slow with arrivals; `other` (no import either way) has none: no error.

    a=1  fast p1 -> |1 (slow |1)
    a=3  slow p3 (3 >= 1 ok)
    a=4  fast |5 -> slow |5
    other (no arrivals, no settings): p1#0 |5#1
    out: other p1, slow p3 (all CTIs reach 5)
    """
    fast = Stream.create("fast", [Point(T(1), r(1, "f"), T(1)), Cti(T(5), T(4))], POINT, gen(1))
    slow = Stream.create("slow", [Point(T(3), r(3, "s"), T(3))], POINT, imports("fast"))
    other = Stream.create("other", [Point(T(1), r(1, "o")), Cti(T(5))], POINT)
    res = run(executor, slow.union(fast.where(nothing)).union(other))
    assert by_v(res.events) == [pt(1, 1, "o"), pt(3, 3, "s")]
    assert metrics(res, "slow").ctis_imported == 2


# =============================================================================================
# Arrival order
# =============================================================================================
def test_arrival_tie_goes_to_the_input_declared_first(executor: Any) -> None:
    """Both items arrive at a=1; fast is declared (Stream.create) first, so it goes first.

        a=1  fast p5#0 -> fast|5 -> slow|5 (imported)
        a=1  slow p3#0 -> 3 < 5: dropped
    (the query lists slow first: declaration order, not graph order, decides)
    """
    fast = Stream.create("fast", [Point(T(5), r(5, "f"), T(1))], POINT, gen(1))
    slow_items = [Point(T(3), r(3, "s"), T(1))]
    slow = Stream.create("slow", slow_items, POINT, imports("fast"))
    res = run(executor, slow.union(fast.where(nothing)))
    assert res.rejected == [Rejection("slow", 0, slow_items[0], Rule.START_BEFORE_CTI, Action.DROPPED, T(5), None)]
    assert counts(metrics(res, "slow")) == M(received=1, dropped=1, ctis_imported=1)


def test_arrival_tie_other_declaration_order(executor: Any) -> None:
    """As above with slow declared first: slow's item goes first and is admitted.

    a=1  slow p3#0 -> ok (slow CTI -inf)
    a=1  fast p5#0 -> fast|5 -> slow|5
    out: slow p3 (3 < 5)
    """
    slow = Stream.create("slow", [Point(T(3), r(3, "s"), T(1))], POINT, imports("fast"))
    fast = Stream.create("fast", [Point(T(5), r(5, "f"), T(1))], POINT, gen(1))
    res = run(executor, fast.where(nothing).union(slow))
    assert res.rejected == []
    assert counts(metrics(res, "slow")) == M(received=1, admitted=1, ctis_imported=1)
    same_items(executor, res.events, [pt(3, 3, "s")])


def test_arrival_tie_keeps_position_order_within_an_input(executor: Any) -> None:
    """fast declared first; all three items arrive at a=1.

    a=1  fast p5#0 -> |5 ; fast |7#1 -> |7   (position order within fast)
    a=1  slow p6#0 -> slow CTI already 7: 6 < 7 dropped
    """
    fast = Stream.create("fast", [Point(T(5), r(5, "f"), T(1)), Cti(T(7), T(1))], POINT, gen(1))
    slow = Stream.create("slow", [Point(T(6), r(6, "s"), T(1))], POINT, imports("fast"))
    res = run(executor, slow.union(fast.where(nothing)))
    assert [(j.input, j.position, j.cti) for j in res.rejected] == [("slow", 0, T(7))]


@pytest.mark.parametrize(
    ("arrivals", "position"),
    [([T(5), T(3)], 1), ([T(5), None, T(3)], 2)],
    ids=["decreasing", "after-inherited-arrival"],
)
def test_decreasing_arrival_within_an_input_is_an_input_error(executor: Any, arrivals: list[datetime | None], position: int) -> None:
    """Within one input arrival must not decrease (an item without arrival inherits the
    previous one's): a=5, a=3 -> error at #1; a=5, (5), a=3 -> error at #2."""
    items = [Point(T(i), r(i), a) for i, a in enumerate(arrivals)]
    with pytest.raises(tempo.InputError) as info:
        run(executor, Stream.create("in", items, POINT, gen(1)))
    assert info.value.input_name == "in"
    assert info.value.position == position
    assert "'in'" in str(info.value) and f"#{position}" in str(info.value)


# =============================================================================================
# Bad input
# =============================================================================================
aware = T(2).replace(tzinfo=UTC)

BAD_INPUTS: list[Any] = [
    pytest.param(INTERVAL, [Interval(T(1), T(2), r(1)), Interval(T(5), T(3), r(5))], 1, id="interval-end-before-start"),
    pytest.param(INTERVAL, [Interval(T(5), T(5), r(5))], 0, id="interval-empty"),
    pytest.param(EDGE, [EdgeStart(T(1), r(1)), EdgeEnd(T(2), T(3), r(1))], 1, id="end-edge-without-start"),
    pytest.param(EDGE, [EdgeStart(T(1), r(1)), EdgeEnd(T(1), T(3), r(2))], 1, id="end-edge-other-payload"),
    pytest.param(EDGE, [EdgeEnd(T(1), T(3), r(1))], 0, id="end-edge-first"),
    pytest.param(EDGE, [EdgeStart(T(1), r(1)), EdgeEnd(T(1), T(3), r(1)), EdgeEnd(T(1), T(4), r(1))], 2, id="end-edge-twice"),
    pytest.param(EDGE, [EdgeStart(T(1), r(1)), EdgeEnd(T(1), T(1), r(1))], 1, id="end-edge-not-after-start"),
    pytest.param(POINT, [Point(T(1), r(1)), Point(T(2), Other("x"))], 1, id="payload-wrong-type"),
    pytest.param(POINT, [Point(T(1), r(1)), Point(T(2), {"key": "a", "v": 2})], 1, id="payload-dict"),
    pytest.param(POINT, [Point(T(1), r(1)), Interval(T(2), T(3), r(2))], 1, id="interval-in-point-input"),
    pytest.param(POINT, [Cti(T(0)), EdgeStart(T(2), r(2))], 1, id="edge-in-point-input"),
    pytest.param(INTERVAL, [Interval(T(1), T(2), r(1)), Point(T(2), r(2))], 1, id="point-in-interval-input"),
    pytest.param(EDGE, [EdgeStart(T(1), r(1)), Point(T(2), r(2))], 1, id="point-in-edge-input"),
    pytest.param(POINT, [Point(T(1), r(1)), "oops"], 1, id="not-an-item"),
]


@pytest.mark.parametrize(("shape", "items", "position"), BAD_INPUTS)
@pytest.mark.parametrize("settings", [None, gen(1, flush=True)], ids=["no-settings", "generated"])
def test_bad_input_is_an_input_error(
    executor: Any, shape: EventShape, items: list[Any], position: int, settings: AdvanceTimeSettings | None
) -> None:
    with pytest.raises(tempo.InputError) as info:
        run(executor, Stream.create("in", items, shape, settings, payload_type=R))
    assert type(info.value) is tempo.InputError
    assert info.value.input_name == "in"
    assert info.value.position == position
    message = str(info.value)
    assert "'in'" in message and f"#{position}" in message


def test_naive_and_aware_across_inputs_combine_as_instants(executor: Any) -> None:
    """Naive times are UTC; with an aware input in the query the results are aware
    (semantics.md 8; more cases in test_bad_input.py)."""
    a = Stream.create("a", [Point(T(1), r(1)), Cti(T(2))], POINT, gen(1, flush=True))
    b = Stream.create("b", [Point(aware, r(2)), Cti(aware + SEC)], POINT, gen(1, flush=True))
    result = run(executor, a.union(b))
    assert [(e.start, e.payload) for e in result.events] == [(T(1).replace(tzinfo=UTC), r(1)), (aware, r(2))]


def failed_run_seen(executor: Any) -> list[int]:
    """The bad item is the last of a list input: the run fails before any event has gone
    through the query (a udf in where() records every event it sees, returned)."""
    seen: list[int] = []

    def record(v: int) -> bool:
        seen.append(v)
        return True

    good = Stream.create("good", [Point(T(i), r(i)) for i in range(5)], POINT, gen(1, flush=True))
    bad = Stream.create("bad", [Point(T(i), r(i)) for i in range(5)] + [Interval(T(9), T(8), r(9))], POINT, gen(1))
    q = good.where(lambda e: tempo.udf(record, returns=bool)(e.v)).union(bad.where(lambda e: tempo.udf(record, returns=bool)(e.v)))
    with pytest.raises(tempo.InputError) as info:
        run(executor, q)
    assert info.value.input_name == "bad" and info.value.position == 5
    return seen


def test_list_input_errors_before_any_event_is_processed(executor: Any) -> None:
    failed_run_seen(executor)


@pytest.mark.needs(Capability.IN_PROCESS_UDFS)  # on Spark the udf runs in Python workers
def test_list_input_errors_before_the_udf_sees_an_event(executor: Any) -> None:
    assert failed_run_seen(executor) == []


@pytest.mark.parametrize(
    "make",
    [
        lambda: AdvanceTimeSettings(),
        lambda: AdvanceTimeSettings(None, None, ADJUST),
        lambda: AdvanceTimeGenerationSettings(0),
        lambda: AdvanceTimeGenerationSettings(-1),
        lambda: AdvanceTimeGenerationSettings(timedelta(0)),
        lambda: AdvanceTimeGenerationSettings(-SEC),
    ],
    ids=["no-generation-no-import", "neither-with-policy", "count-0", "count-negative", "span-0", "span-negative"],
)
def test_bad_settings_are_build_errors(make: Any) -> None:
    with pytest.raises(tempo.QueryBuildError):
        make()


@pytest.mark.parametrize(
    ("shape", "items", "position"),
    [
        pytest.param(POINT, [Cti(T(5)), Point(T(3), r(3))], 1, id="point"),
        pytest.param(INTERVAL, [Cti(T(5)), Interval(T(3), T(8), r(3))], 1, id="interval"),
        pytest.param(EDGE, [Cti(T(5)), EdgeStart(T(3), r(3))], 1, id="start-edge"),
        pytest.param(EDGE, [EdgeStart(T(1), r(1)), Cti(T(5)), EdgeEnd(T(1), T(3), r(1))], 2, id="end-edge"),
    ],
)
def test_cti_violation_without_settings_raises(executor: Any, shape: EventShape, items: list[Any], position: int) -> None:
    """No settings (and none from the source): a violation fails the run.

    e.g. point:  |5#0  p3#1 -> CtiViolationError at #1
         edge:   ES(1)#0 |5#1 EE(1,3)#2 -> end 3 < 5: CtiViolationError at #2
    """
    with pytest.raises(tempo.CtiViolationError) as info:
        run(executor, Stream.create("in", items, shape))
    assert info.value.input_name == "in"
    assert info.value.position == position
    assert "'in'" in str(info.value) and f"#{position}" in str(info.value)


# =============================================================================================
# Source default settings
# =============================================================================================
def test_source_default_settings_are_used(executor: Any) -> None:
    """ItemSource declares N=1: p1 |1  p2 |2  p3 |3  -> out p1 p2."""
    src = ItemSource([Point(T(s), r(s)) for s in (1, 2, 3)], settings=gen(1))
    res = run(executor, Stream.create("in", src, POINT))
    assert res.ctis == [T(1), T(2), T(3)]
    same_items(executor, res.events, [pt(1, 1), pt(2, 2)])
    assert metrics(res).ctis_generated == 3


def test_settings_given_to_create_override_the_source(executor: Any) -> None:
    """Source declares N=1; create() says N=2: p1  p2 |2  p3 -> out p1."""
    src = ItemSource([Point(T(s), r(s)) for s in (1, 2, 3)], settings=gen(1))
    res = run(executor, Stream.create("in", src, POINT, gen(2)))
    assert res.ctis == [T(2)]
    same_items(executor, res.events, [pt(1, 1)])


def test_source_default_policy_applies(executor: Any) -> None:
    """Source declares ADJUST: |5#0 p3#1 -> moved to 5 (no CtiViolationError)."""
    src = ItemSource([Cti(T(5)), Point(T(3), r(3)), Cti(T(6))], R, settings=policy_only(ADJUST))
    res = run(executor, Stream.create("in", src, POINT))
    same_items(executor, res.events, [pt(5, 3)])
    assert [(j.position, j.action) for j in res.rejected] == [(1, Action.ADJUSTED)]


def test_custom_source_declares_settings_per_shape(executor: Any) -> None:
    """A Source subclass declaring N=1 with a flush for the shape it is bound with."""
    shapes: list[EventShape] = []

    class Points(Source[R]):
        payload_type = R

        def items(self) -> Iterable[Any]:
            return [Point(T(1), r(1)), Point(T(2), r(2))]

        def advance_time_settings(self, shape: EventShape) -> AdvanceTimeSettings | None:
            shapes.append(shape)
            return gen(1, flush=True) if shape is POINT else None

    res = run(executor, Stream.create("in", Points(), POINT))
    assert POINT in shapes
    assert res.ctis == [T(1), T(2), NINF]
    same_items(executor, res.events, [pt(1, 1), pt(2, 2)])


# =============================================================================================
# Naive in -> naive out; aware in -> aware (UTC) out
# =============================================================================================
def test_naive_in_naive_out(executor: Any) -> None:
    """N=1, delay 0, DROP, flush, EDGE.
    ES(1,a) |1   ES(0,b) dropped (cti 1)   <end> |inf
    out: a [1, inf) naive; CTIs naive; rejection CTI naive
    """
    a, b = r(1, "a"), r(0, "b")
    res = run(executor, Stream.create("in", [EdgeStart(T(1), a), EdgeStart(T(0), b)], EDGE, gen(1, flush=True)))
    same_items(executor, res.events, [out(1, NINF, 1, "a")])
    assert res.ctis == [T(1), NINF]
    assert all(t.tzinfo is None for t in res.ctis)
    assert all(e.start.tzinfo is None and e.end.tzinfo is None for e in res.events)
    assert res.rejected[0].cti == T(1) and res.rejected[0].cti.tzinfo is None


def test_aware_in_aware_utc_out(executor: Any) -> None:
    """Same as above with aware timestamps (one of them at +02:00):
    ES(1,a) |1   ES(0,b) dropped   <end> |inf     -> results in aware UTC
    """
    plus2 = timezone(timedelta(hours=2))
    u1 = T(1).replace(tzinfo=UTC)
    u0_plus2 = (T(0) + timedelta(hours=2)).replace(tzinfo=plus2)  # the instant T(0) UTC
    a, b = r(1, "a"), r(0, "b")
    items = [EdgeStart(u1, a), EdgeStart(u0_plus2, b)]
    res = run(executor, Stream.create("in", items, EDGE, gen(1, flush=True)))
    same_items(executor, res.events, [OutputEvent(u1, INFINITY, a)])
    assert res.ctis == [u1, INFINITY]
    assert res.ctis[-1] == tempo.INFINITY
    for t in [*res.ctis, res.events[0].start, res.events[0].end, res.rejected[0].cti]:
        assert t.tzinfo is not None and t.utcoffset() == timedelta(0)
    assert res.rejected[0].cti == u1
    assert res.rejected[0].position == 1


def test_aware_points_out_are_utc(executor: Any) -> None:
    """A point at 02:00:01+02:00 (= 00:00:01 UTC), N=1 delay -1 tick -> one CTI just after it."""
    plus2 = timezone(timedelta(hours=2))
    t = datetime(2024, 1, 1, 2, 0, 1, tzinfo=plus2)
    res = run(executor, Stream.create("in", [Point(t, r(1))], POINT, gen(1, -TICK)))
    u1 = T(1).replace(tzinfo=UTC)
    same_items(executor, res.events, [OutputEvent(u1, u1 + TICK, r(1))])
    assert res.events[0].start.utcoffset() == timedelta(0)
    assert res.ctis == [u1 + TICK]


def test_adjust_cannot_move_an_event_to_infinity(executor: Any) -> None:
    """|inf#0 (an explicit CTI at infinity)   *3#1 under ADJUST.

    Nothing may start at or after infinity, so nothing can be moved there: every event
    after a CTI at infinity is dropped, whatever the policy (START_BEFORE_CTI, DROPPED).
    """
    items: list[Any] = [Cti(tempo.INFINITY), Point(T(3), r(1))]
    res = run(executor, Stream.create("in", items, EventShape.POINT, policy_only(ADJUST)))
    assert res.events == [] and res.ctis == [NINF]
    assert [(j.rule, j.action, j.position) for j in res.rejected] == [(Rule.START_BEFORE_CTI, Action.DROPPED, 1)]
    assert counts(metrics(res)) == M(received=1, admitted=0, adjusted=0, dropped=1, ctis_explicit=1)
