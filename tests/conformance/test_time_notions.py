"""Notions of time per input (docs/semantics.md 3.11), on every executor.

Expectations are written by hand from 3.11: an input in ingestion time starts each event at its
arrival, one in processing time at its clock's reading; the input's CTIs follow the stamps
(at each stamp, or at the first stamp of each later ``cti_every`` period); streams of two
notions meet only through ``as_event_time()``. Times are minutes after ``BASE``; the items'
own starts are deliberately far from their arrivals, so a test can tell which one was used.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest

from tempo import (
    TICK,
    ArrivalClock,
    AdvanceTimeImportSettings,
    AdvanceTimeSettings,
    Cti,
    EdgeEnd,
    EdgeStart,
    EventShape,
    EventTime,
    Heartbeat,
    IngestionTime,
    InputError,
    Interval,
    Point,
    ProcessingTime,
    QueryBuildError,
    ScriptedClock,
    Stream,
    TimeDomain,
)
from tempo.plan.query import Query
from tests.conformance.test_operators import evs, key, run

BASE = datetime(2024, 1, 1)


def M(m: float) -> datetime:
    return BASE + timedelta(minutes=m)


@attrs.frozen
class Reading:
    name: str
    device_time: datetime


@attrs.frozen
class Count:
    n: int
    first: str
    start: datetime


ARRIVALS = [1, 2, 4, 6, 7, 12]


def readings() -> list[Point[Reading]]:
    """a..f arriving at 1, 2, 4, 6, 7, 12; their own starts lie hours later, in reverse order."""
    return [Point(M(600 - 10 * i), Reading(name, M(600 - 10 * i)), arrival=M(a)) for i, (a, name) in enumerate(zip(ARRIVALS, "abcdef"))]


def counts(stream: Stream[Reading]) -> Stream[Count]:
    return stream.tumbling(timedelta(minutes=5)).aggregate(lambda w: Count(n=w.count(), first=w.min(lambda r: r.name), start=w.start))


def test_ingestion_time_stamps_arrivals_and_generates_ctis_every_period(executor: Any) -> None:
    """
    ::

                     0    5    10   15
                     |....|....|....|
        stamps        ** * **    *      a b c d e f at their arrivals
        input CTIs         ^     ^      6 (first stamp of [5,10)), 12 (of [10,15))
        out          [====)             n=3 at CTI 6, output CTI 5
        out               [====)        n=2 at CTI 12, output CTI 10
                                        [10,15) n=1: no later stamp, no flush
    """
    stream = Stream.create("in", readings(), EventShape.POINT, time=IngestionTime(cti_every=timedelta(minutes=5)))
    r = run(executor, counts(stream))
    assert evs(r) == [(M(0), M(5), Count(3, "a", M(0))), (M(5), M(10), Count(2, "d", M(5)))]
    assert r.ctis == [M(5), M(10)]
    assert r.withheld is not None and r.withheld.events == 1


def test_ingestion_time_every_stamp_is_a_cti_by_default_and_the_payload_is_untouched(executor: Any) -> None:
    """``cti_every=0``: a CTI at every stamp, 1, 2, 4, 6, 7, 12, then the flush; the events pass
    with their arrivals as starts and their payloads (the device's own time) unchanged."""
    stream = Stream.create("in", readings(), EventShape.POINT, time=IngestionTime(advance_to_infinity_on_shutdown=True))
    r = run(executor, stream)
    assert sorted(evs(r), key=key) == sorted(
        [(M(a), M(a) + TICK, Reading(n, M(600 - 10 * i))) for i, (a, n) in enumerate(zip(ARRIVALS, "abcdef"))], key=key
    )
    assert r.ctis == [M(a) for a in ARRIVALS] + [datetime.max]
    assert r.metrics["in"].dropped == 0 and r.metrics["in"].adjusted == 0


def test_processing_time_on_an_arrival_clock_with_a_lag(executor: Any) -> None:
    """``ArrivalClock(lag=1 min)``: readings 2, 3, 5, 7, 8, 13, each a CTI, then the flush.

    ::

                     0    5    10   15
                     |....|....|....|
        readings       ** * **    *     a b | c d e | f
        out          [====)             n=2 (a, b)
        out               [====)        n=3 (c, read at 5, d, e)
        out                    [====)   n=1 (f)
    """
    stream = Stream.create(
        "in",
        readings(),
        EventShape.POINT,
        time=ProcessingTime(ArrivalClock(timedelta(minutes=1)), advance_to_infinity_on_shutdown=True),
    )
    r = run(executor, counts(stream))
    assert evs(r) == [
        (M(0), M(5), Count(2, "a", M(0))),
        (M(5), M(10), Count(3, "c", M(5))),
        (M(10), M(15), Count(1, "f", M(10))),
    ]
    assert r.ctis == [M(0), M(5), M(10), datetime.max]  # 2->0, 3->0 (repeat), 5->5, 7, 8->5, 13->10


def test_a_lagless_arrival_clock_is_ingestion_time_with_a_cti_at_every_stamp(executor: Any) -> None:
    ingestion = Stream.create("in", readings(), EventShape.POINT, time=IngestionTime(advance_to_infinity_on_shutdown=True))
    processing = Stream.create(
        "in", readings(), EventShape.POINT, time=ProcessingTime(ArrivalClock(), advance_to_infinity_on_shutdown=True)
    )
    a, b = run(executor, counts(ingestion)), run(executor, counts(processing))
    assert evs(a) == evs(b) and a.ctis == b.ctis and len(evs(a)) == 3


def test_a_scripted_clock_is_read_once_per_item_and_never_goes_back(executor: Any) -> None:
    """Readings 3, 1 (counts as 3), 7, 11 for four items: starts 3, 3, 7, 11; CTIs 3, 7, 11."""
    items = [Point(M(100 + i), Reading(n, M(0))) for i, n in enumerate("wxyz")]
    clock = ScriptedClock([M(3), M(1), M(7), M(11)])
    r = run(executor, Stream.create("in", items, EventShape.POINT, time=ProcessingTime(clock)))
    assert sorted(evs(r), key=key) == [
        (M(3), M(3) + TICK, Reading("w", M(0))),
        (M(3), M(3) + TICK, Reading("x", M(0))),
        (M(7), M(7) + TICK, Reading("y", M(0))),
    ]
    assert r.ctis == [M(3), M(7), M(11)]  # z at 11 waits for a later reading


def test_intervals_keep_their_duration_and_edges_end_at_their_own_arrival(executor: Any) -> None:
    """An interval of 3 minutes arriving at 2 becomes [2, 5); a start edge arriving at 4 opens
    at 4 and its end edge, arriving at 9, ends it at 9; an edge pair arriving together at 10
    lasts one tick."""
    r0 = Reading("i", M(0))
    items: list[Any] = [
        Interval(M(50), M(53), r0, arrival=M(2)),
        EdgeStart(M(70), Reading("e", M(0)), arrival=M(4)),
        EdgeEnd(M(70), M(90), Reading("e", M(0)), arrival=M(9)),
        EdgeStart(M(80), Reading("p", M(0)), arrival=M(10)),
        EdgeEnd(M(80), M(81), Reading("p", M(0)), arrival=M(10)),
    ]
    edges = Stream.create("edges", items[1:], EventShape.EDGE, time=IngestionTime(advance_to_infinity_on_shutdown=True))
    intervals = Stream.create("intervals", items[:1], EventShape.INTERVAL, time=IngestionTime(advance_to_infinity_on_shutdown=True))
    got = evs(run(executor, edges)) + evs(run(executor, intervals))
    assert sorted(got, key=key) == sorted(
        [
            (M(4), M(9), Reading("e", M(0))),
            (M(10), M(10) + TICK, Reading("p", M(0))),
            (M(2), M(5), r0),
        ],
        key=key,
    )


def test_heartbeats_pass_and_explicit_ctis_are_refused(executor: Any) -> None:
    fine = [*readings()[:2], Heartbeat(M(3))]
    r = run(executor, Stream.create("in", fine, EventShape.POINT, time=IngestionTime(advance_to_infinity_on_shutdown=True)))
    assert len(r.events) == 2
    with pytest.raises(InputError, match=r"item #1 .*takes no Cti items"):
        executor.run(Stream.create("in", [readings()[0], Cti(M(3), arrival=M(3))], EventShape.POINT, time=IngestionTime()))
    with pytest.raises(InputError, match=r"item #0 .*stamped with its arrivals .*needs an arrival time"):
        executor.run(Stream.create("in", [Point(M(1), Reading("a", M(1)))], EventShape.POINT, time=IngestionTime()))
    with pytest.raises(InputError, match="no reading left"):
        executor.run(Stream.create("in", readings(), EventShape.POINT, time=ProcessingTime(ScriptedClock([M(1)]))))


def test_streams_of_two_notions_meet_only_through_as_event_time() -> None:
    events = Stream.create("events", [Point(M(1), Reading("x", M(1))), Cti(M(2))], EventShape.POINT)
    ingested = Stream.create("ingested", readings(), EventShape.POINT, time=IngestionTime())
    processed = Stream.create("processed", readings(), EventShape.POINT, time=ProcessingTime(ArrivalClock()))
    # Refused by the operator that brings them together, when the query is built, naming
    # the operator, both notions and the inputs on each side first (no plan dump).
    with pytest.raises(
        QueryBuildError,
        match=r"^union brings together a stream in event time and one in ingestion time \(input 'events' and input 'ingested'\)",
    ):
        events.union(ingested)
    with pytest.raises(
        QueryBuildError,
        match=r"^join brings together a stream in ingestion time and one in processing time \(input 'ingested' and input 'processed'\)",
    ):
        ingested.join(processed, lambda a, b: a.name == b.name, lambda a, b: a)
    assert Query.build(events.union(ingested.as_event_time()).node).time_domains  # allowed
    with pytest.raises(QueryBuildError, match="processing time cannot become event time"):
        Query.build(processed.as_event_time().node)
    query = Query.build(counts(ingested).node)
    assert query.time_domains[id(query.root)] is TimeDomain.INGESTION


def test_stamped_inputs_take_no_settings_and_no_import_across_notions() -> None:
    with pytest.raises(QueryBuildError, match="takes no settings"):
        Stream.create("in", readings(), EventShape.POINT, AdvanceTimeSettings.replay(), time=IngestionTime())
    with pytest.raises(QueryBuildError, match="time= takes"):
        Stream.create("in", readings(), EventShape.POINT, time="ingestion")  # type: ignore[arg-type]
    ingested = Stream.create("ingested", readings(), EventShape.POINT, time=IngestionTime())
    importing = Stream.create(
        "slow",
        [Point(M(1), Reading("x", M(1)), arrival=M(1))],
        EventShape.POINT,
        AdvanceTimeSettings(import_=AdvanceTimeImportSettings("ingested")),
        time=EventTime(),
    )
    with pytest.raises(QueryBuildError, match="imports CTIs from 'ingested'"):
        Query.build(importing.union(ingested.as_event_time()).node)


def test_clocks_check_their_arguments() -> None:
    with pytest.raises(QueryBuildError, match="ScriptedClock takes datetimes"):
        ScriptedClock([None])  # type: ignore[list-item]
    with pytest.raises(QueryBuildError, match="takes a timedelta"):
        ArrivalClock(lag=5)  # type: ignore[arg-type]
    with pytest.raises(QueryBuildError, match="cti_every"):
        IngestionTime(cti_every=timedelta(seconds=-1))
