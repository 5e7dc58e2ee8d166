"""Azure Stream Analytics' time policies as CTIs (``EventOrderingSettings``, substreams,
the arrival clock and heartbeats), on every executor path: in memory, Spark with small
item lists admitted on the driver, and Spark's own ingress (``local_items=0``, blocks of
three rows), which computes the verdicts as window columns.

The 12-event illustration of ../shared/reference/001_dfeab6d79341eee1.txt: out-of-order
tolerance 2 min, late-arrival tolerance 5 min, early-arrival window 5 min. Expected values
are worked by hand from the document (docs/design/asa-time-policies.md, section 2 has the
tables). Before each event the CTI in force is c; after it the CTI is
max(c, largest admitted start - 2 min, arrival - 5 min).

    #   device  event  arrival  A-5    S1: c -> outcome          S3 (over device): c_dev
    1   d1      12:07  12:07    12:02  -     admitted, CTI 12:05  -
    2   d2      12:08  12:08    12:03  12:05 admitted, CTI 12:06  12:02 (new key: clock-5)
    3   d1      12:17  12:11    12:06  12:06 6 min early: dropped  12:05 dropped (early)
    4   d3      12:08  12:13    12:08  12:06 admitted (not late: exactly 5 min), CTI 12:08 (arrival)
    5   d1      12:19  12:16    12:11  12:08 admitted, CTI 12:17  12:08
    6   d3      12:12  12:17    12:12  12:17 out of order -> 12:17   12:11 admitted
    7   d2      12:17  12:18    12:13  12:17 admitted (at the CTI)  12:12 admitted
    8   d2      12:20  12:19    12:14  12:17 admitted, CTI 12:18   12:15
    9   d3      12:16  12:21    12:16  12:18 out of order -> 12:18   12:14 admitted
    10  d2      12:23  12:22    12:17  12:18 admitted, CTI 12:21   12:18
    11  d2      12:22  12:24    12:19  12:21 admitted             12:21 admitted
    12  d3      12:21  12:27    12:22  12:21 6 min late -> 12:22 (past the CTI: no more)
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable

import attrs
import pytest

from tempo import (
    TICK,
    Action,
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Cti,
    EdgeStart,
    EventOrderingSettings,
    EventShape,
    Heartbeat,
    InMemoryExecutor,
    InputError,
    Interval,
    Point,
    QueryBuildError,
    Result,
    Rule,
    Stream,
    SubstreamCti,
    SubstreamMetrics,
)
from tests.conformance.compare import ReleaseStep, release_steps
from tests.conftest import MEMORY, SPARK, SPARK_INGRESS, on_executors

INFINITY = datetime.max  # naive inputs give naive results: infinity is datetime.max
ADJUST, DROP = AdvanceTimePolicy.ADJUST, AdvanceTimePolicy.DROP
FLUSH = AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True)


pytestmark = on_executors(MEMORY, SPARK, SPARK_INGRESS)  # and Spark reading inputs as DataFrames in blocks


@pytest.fixture
def run(executor: Any) -> Any:
    """Runs a stream on one executor path."""
    return executor.run


@attrs.frozen
class Reading:
    device: str
    event_time: datetime


def M(minute: float) -> datetime:
    return datetime(2024, 1, 1, 12, 0) + timedelta(minutes=minute)


EVENTS = [
    ("d1", 7, 7),
    ("d2", 8, 8),
    ("d1", 17, 11),
    ("d3", 8, 13),
    ("d1", 19, 16),
    ("d3", 12, 17),
    ("d2", 17, 18),
    ("d2", 20, 19),
    ("d3", 16, 21),
    ("d2", 23, 22),
    ("d2", 22, 24),
    ("d3", 21, 27),
]
ITEMS = [Point(M(e), Reading(d, M(e)), arrival=M(a)) for d, e, a in EVENTS]


def illustration(policy: AdvanceTimePolicy, early: bool, substreams: bool = False, flush: bool = True) -> Stream[Reading]:
    ordering = EventOrderingSettings(timedelta(minutes=2), timedelta(minutes=5), timedelta(minutes=5) if early else None)
    settings = AdvanceTimeSettings(FLUSH if flush else None, policy=policy, ordering=ordering)
    return Stream.create("readings", ITEMS, EventShape.POINT, settings, over=(lambda r: r.device) if substreams else None)


def outcomes(result: Result[Any]) -> list[tuple[int, Rule, Action, datetime | None, datetime]]:
    """(position, rule, action, admitted start, the bound the event was held against)."""
    return sorted((j.position, j.rule, j.action, j.admitted_as and j.admitted_as.start, j.cti) for j in result.rejected)


def minutes(ts: list[datetime]) -> list[float]:
    return [(t - M(0)) / timedelta(minutes=1) for t in ts]


def releases(result: Result[Any], label: Callable[[Any], Any] = lambda p: p.device) -> list[ReleaseStep]:
    """``release_steps`` in minutes: the (label of the payload, start minute) of the events
    each CTI released, and the CTI: ("cti", minute) or ("key", key, minute)."""

    def minute(t: datetime) -> float:
        return minutes([t])[0]

    return release_steps(result, lambda item: (label(item.payload), minute(item.start)), minute)


def test_setting_1_early_policy_adjust(run: Any) -> None:
    """e3 dropped (early, held against arrival + 5 = 12:16); e6 and e9 moved to the CTI
    (12:17, 12:18); e12 moved to arrival - 5 min = 12:22 (late), past the CTI 12:21."""
    r = run(illustration(ADJUST, early=True))
    assert outcomes(r) == [
        (2, Rule.EARLY_ARRIVAL, Action.DROPPED, None, M(16)),
        (5, Rule.START_BEFORE_CTI, Action.ADJUSTED, M(17), M(17)),
        (8, Rule.START_BEFORE_CTI, Action.ADJUSTED, M(18), M(18)),
        (11, Rule.LATE_ARRIVAL, Action.ADJUSTED, M(22), M(22)),
    ]
    # CTIs: 12:05, 12:06 (events 1, 2), 12:08 (arrival of 4), 12:17 (5), 12:18 (8),
    # 12:21 (10), 12:22 (arrival of 12), then the flush.
    assert r.ctis == [M(5), M(6), M(8), M(17), M(18), M(21), M(22), INFINITY]
    # The lifetime carries the adjusted time; the payload keeps the device's own.
    moved = {e.payload.event_time: e.start for e in r.events if e.start != e.payload.event_time}
    assert moved == {M(12): M(17), M(16): M(18), M(21): M(22)}
    assert all(e.end == e.start + TICK for e in r.events)
    m = r.metrics["readings"]
    assert (m.received, m.admitted, m.adjusted, m.dropped) == (12, 11, 3, 1)
    assert (m.early_dropped, m.late_adjusted, m.late_dropped, m.out_of_order_adjusted, m.out_of_order_dropped) == (1, 1, 0, 2, 0)
    assert (m.ctis_generated, m.ctis_ignored) == (8, 0)  # 7 moves and the flush; ordering never ignores one
    assert m.substreams == {}
    # Watermark delay = arrival clock - CTI after each item that moves either (the
    # document's table): 2, 2, 5, 5, -1 (e5 is 3 min ahead), 0, 1, 1, 3, 1, 3, 5 minutes.
    assert [(c, d / timedelta(minutes=1)) for c, d in m.watermark_delays] == list(
        zip([M(a) for a in (7, 8, 11, 13, 16, 17, 18, 19, 21, 22, 24, 27)], [2, 2, 5, 5, -1, 0, 1, 1, 3, 1, 3, 5])
    )


def test_setting_1_early_policy_drop(run: Any) -> None:
    """DROP: the same CTIs (a dropped event never raises them); e3, e6, e9, e12 dropped."""
    r = run(illustration(DROP, early=True))
    assert outcomes(r) == [
        (2, Rule.EARLY_ARRIVAL, Action.DROPPED, None, M(16)),
        (5, Rule.START_BEFORE_CTI, Action.DROPPED, None, M(17)),
        (8, Rule.START_BEFORE_CTI, Action.DROPPED, None, M(18)),
        (11, Rule.LATE_ARRIVAL, Action.DROPPED, None, M(22)),
    ]
    assert r.ctis == [M(5), M(6), M(8), M(17), M(18), M(21), M(22), INFINITY]
    assert sorted(minutes([e.start for e in r.events])) == [7, 8, 8, 17, 19, 20, 22, 23]
    m = r.metrics["readings"]
    assert (m.admitted, m.dropped, m.early_dropped, m.late_dropped, m.out_of_order_dropped) == (8, 4, 1, 1, 2)


def test_setting_2_no_early_policy(run: Any) -> None:
    """e3 (6 min early) is admitted and raises the CTI to 12:15, so e4 (12:08) moves
    forward 7 minutes to 12:15, as the document says; e6, e9, e12 as in setting 1. The
    watermark delay after e3 is -4 min: an early event pulled the CTI ahead of the clock."""
    r = run(illustration(ADJUST, early=False))
    assert outcomes(r) == [
        (3, Rule.START_BEFORE_CTI, Action.ADJUSTED, M(15), M(15)),
        (5, Rule.START_BEFORE_CTI, Action.ADJUSTED, M(17), M(17)),
        (8, Rule.START_BEFORE_CTI, Action.ADJUSTED, M(18), M(18)),
        (11, Rule.LATE_ARRIVAL, Action.ADJUSTED, M(22), M(22)),
    ]
    assert r.ctis == [M(5), M(6), M(15), M(17), M(18), M(21), M(22), INFINITY]
    m = r.metrics["readings"]
    assert (m.received, m.admitted, m.adjusted, m.dropped, m.early_dropped, m.out_of_order_adjusted) == (12, 12, 4, 0, 0, 3)
    assert m.watermark_delays[2] == (M(11), timedelta(minutes=-4))


def test_setting_3_substreams_over_the_device(run: Any) -> None:
    """Each device has its own CTI (its largest start - 2 min, never before the clock - 5
    min), so no event is out of order: only e3 (early) and e12 (late) are rejected. The
    input's CTI is the min over all devices, seen or not: the clock - 5 min, after every
    event. The output keeps the device, so each device's CTI also releases its events as
    soon as it passes them, ahead of the input's CTI (SubstreamCti in raw). Without a
    flush, the events past neither are not released (e10, e11, e12). By hand, step by step
    (input's CTI first, then the device's own when its new largest start - 2 min is ahead):

        step  input CTI  device CTI     released
        1     12:02      d1 12:05       -
        2     12:03      d2 12:06       -
        3     12:06      (e3 dropped)   -
        4     12:08      d3 12:06: not ahead    e1 (12:07) by the input's 12:08
        5     12:11      d1 12:17       e2, e4 (12:08) by 12:11
        6     12:12      d3 12:10: no   -
        7     12:13      d2 12:15       e6 (d3 12:12) by 12:13
        8     12:14      d2 12:18       e7 (d2 12:17) by d2's 12:18, not the input's 12:22
        9     12:16      d3 12:14: no   -
        10    12:17      d2 12:21       e9 (d3 12:16) by 12:17; e8 (d2 12:20) by d2's 12:21
        11    12:19      -              -
        12    12:22      (e12 late)     e5 (d1 12:19) by 12:22 (d1's own 12:17 is not past it)
    """
    r = run(illustration(ADJUST, early=True, substreams=True, flush=False))
    assert outcomes(r) == [
        (2, Rule.EARLY_ARRIVAL, Action.DROPPED, None, M(16)),
        (11, Rule.LATE_ARRIVAL, Action.ADJUSTED, M(22), M(22)),
    ]
    assert r.ctis == [M(a - 5) for a in (7, 8, 11, 13, 16, 17, 18, 19, 21, 22, 24, 27)]
    assert r.substream_ctis == {"d1": [M(5), M(17)], "d2": [M(6), M(15), M(18), M(21)]}
    assert releases(r) == SETTING_3_RELEASES
    released = [(e.payload.device, minutes([e.start])[0]) for e in r.events]
    assert released == [("d1", 7), *sorted(released[1:3]), ("d3", 12), ("d2", 17), ("d3", 16), ("d2", 20), ("d1", 19)]
    m = r.metrics["readings"]
    assert (m.received, m.admitted, m.adjusted, m.dropped, m.out_of_order_adjusted) == (12, 11, 1, 1, 0)

    # Each device's own CTI moves and its delay then: d1 2 min at 12:07, -1 min at 12:16
    # (12:17 is ahead of the clock); d2 2, 3, 1, 1 min; d3's never gets ahead of the input's.
    def delays(*pairs: tuple[int, int]) -> list[tuple[datetime, timedelta]]:
        return [(M(a), timedelta(minutes=d)) for a, d in pairs]

    assert m.substreams == {
        "d1": SubstreamMetrics(
            received=3, admitted=2, dropped=1, early_dropped=1, ctis_generated=2, watermark_delays=delays((7, 2), (16, -1))
        ),
        "d2": SubstreamMetrics(received=5, admitted=5, ctis_generated=4, watermark_delays=delays((8, 2), (18, 3), (19, 1), (22, 1))),
        "d3": SubstreamMetrics(received=4, admitted=4, adjusted=1, late_adjusted=1),
    }
    assert {d for _, d in m.watermark_delays} == {timedelta(minutes=5)}


_C, _K = "cti", "key"
SETTING_3_RELEASES: list[ReleaseStep] = [
    ([], (_C, 2)),
    ([], (_K, "d1", 5)),
    ([], (_C, 3)),
    ([], (_K, "d2", 6)),
    ([], (_C, 6)),
    ([("d1", 7)], (_C, 8)),
    ([("d2", 8), ("d3", 8)], (_C, 11)),
    ([], (_K, "d1", 17)),
    ([], (_C, 12)),
    ([("d3", 12)], (_C, 13)),
    ([], (_K, "d2", 15)),
    ([], (_C, 14)),
    ([("d2", 17)], (_K, "d2", 18)),
    ([], (_C, 16)),
    ([("d3", 16)], (_C, 17)),
    ([("d2", 20)], (_K, "d2", 21)),
    ([], (_C, 19)),
    ([("d1", 19)], (_C, 22)),
]
"""Setting 3's release steps (``releases``), by hand: ``test_setting_3_substreams_over_the_device``."""

SETTING_3_WINDOW_RELEASES: list[ReleaseStep] = [
    ([], (_C, 0)),
    ([], (_K, "d1", 5)),
    ([], (_K, "d2", 5)),
    ([], (_C, 5)),
    ([(("d1", 1), 5), (("d2", 1), 5), (("d3", 1), 5)], (_C, 10)),
    ([], (_K, "d1", 15)),
    ([], (_K, "d2", 15)),
    ([(("d3", 1), 10)], (_C, 15)),
    ([(("d2", 1), 15)], (_K, "d2", 20)),
    ([(("d1", 1), 15), (("d3", 1), 15)], (_C, 20)),
]
"""Setting 3 counted per device in 5-minute windows (``count_per_device``), its release steps
labelled (device, n), by hand: ``test_setting_3_windows_per_device_close_on_the_device_cti``."""


@attrs.frozen
class DeviceCount:
    device: str
    n: int


def count_per_device(s: Stream[Reading]) -> Stream[DeviceCount]:
    return s.group_by(lambda r: r.device).tumbling(timedelta(minutes=5)).aggregate(lambda k, w: DeviceCount(k, w.count()))


def test_setting_3_windows_per_device_close_on_the_device_cti(run: Any) -> None:
    """Counts per device in 5-minute windows over setting 3. The window keeps the device, so
    each device's windows close on its own CTI, pulled back to a window start like the
    input's. By hand, from the messages of the test above (input CTI, then device CTI):

        step  input CTI -> out   device CTI -> out   closed and released
        1     12:02 -> 12:00     d1 12:05 -> 12:05
        2     12:03              d2 12:06 -> 12:05
        3     12:06 -> 12:05
        5     12:11 -> 12:10     d1 12:17 -> 12:15   [12:05, 12:10) of d1, d2, d3 by 12:10
        7     12:13              d2 12:15 -> 12:15
        8     12:14              d2 12:18 -> 12:15 (no move)
        9     12:16 -> 12:15                         [12:10, 12:15) of d3 by 12:15
        10    12:17              d2 12:21 -> 12:20   [12:15, 12:20) of d2 by d2's 12:20
        12    12:22 -> 12:20                         [12:15, 12:20) of d1 and d3 by 12:20

    d2's third window goes out at step 10 (arrival 12:22), not at step 12 (12:27). Windows
    from 12:20 on wait: there is no flush."""
    r = run(count_per_device(illustration(ADJUST, early=True, substreams=True, flush=False)))
    assert r.ctis == [M(0), M(5), M(10), M(15), M(20)]
    assert r.substream_ctis == {"d1": [M(5), M(15)], "d2": [M(5), M(15), M(20)]}
    assert releases(r, lambda p: (p.device, p.n)) == SETTING_3_WINDOW_RELEASES


def test_what_only_a_key_cti_released_stays_released(run: Any) -> None:
    """The run ends before the input's CTI catches up with d2's: after e8 (arrival 12:19)
    the input's CTI is 12:14 and d2's is 12:18, so e7 (d2 12:17) is released and stays in the
    result although no CTI of the input ever passed it. After e10 (12:22), d2's CTI 12:21
    closed d2's window [12:15, 12:20) while the input's CTI is 12:17, so that count is
    released and the other devices' windows of 12:15 are not."""
    settings = AdvanceTimeSettings(
        None, policy=ADJUST, ordering=EventOrderingSettings(timedelta(minutes=2), timedelta(minutes=5), timedelta(minutes=5))
    )

    def first(n: int) -> Stream[Reading]:
        return Stream.create("readings", ITEMS[:n], EventShape.POINT, settings, over=lambda r: r.device)

    r = run(first(8))
    assert r.ctis[-1] == M(14) and r.substream_ctis["d2"][-1] == M(18)
    assert [(e.payload.device, minutes([e.start])[0]) for e in r.events][-1] == ("d2", 17)
    assert releases(r)[-1] == ([("d2", 17)], ("key", "d2", 18))

    w = run(count_per_device(first(10)))
    assert w.ctis[-1] == M(15) and w.substream_ctis["d2"][-1] == M(20)
    assert sorted((e.payload.device, minutes([e.start])[0], e.payload.n) for e in w.events) == [
        ("d1", 5, 1),
        ("d2", 5, 1),
        ("d2", 15, 1),
        ("d3", 5, 1),
        ("d3", 10, 1),
    ]
    assert releases(w, lambda p: p.device)[-1] == ([("d2", 15)], ("key", "d2", 20))
    executor = getattr(run, "__self__", None)
    if hasattr(executor, "to_dataframe"):  # Spark's lazy output keeps the same events
        rows = executor.to_dataframe(count_per_device(first(10))).collect()
        assert sorted((row["device"], minutes([row["tempo_start"]])[0], row["n"]) for row in rows) == sorted(
            (e.payload.device, minutes([e.start])[0], e.payload.n) for e in w.events
        )


def test_an_operator_that_drops_the_key_runs_on_the_input_cti(run: Any) -> None:
    """A select that computes a new value from the device, rather than copying it, no longer
    names the substream: its output runs on the input's CTIs alone (as in setting 3 before
    per-key release): e7 waits for 12:19, e8 for 12:22, where d2's own CTIs released them
    at 12:18 and 12:21."""
    stream = illustration(ADJUST, early=True, substreams=True, flush=False).select(lambda r: Reading(r.device + "!", r.event_time))
    r = run(stream)
    assert r.substream_ctis == {} and not any(isinstance(i, SubstreamCti) for i in r.raw)
    released = [step for step in releases(r) if step[0]]
    assert released == [
        ([("d1!", 7)], ("cti", 8)),
        ([("d2!", 8), ("d3!", 8)], ("cti", 11)),
        ([("d3!", 12)], ("cti", 13)),
        ([("d3!", 16)], ("cti", 17)),
        ([("d2!", 17)], ("cti", 19)),
        ([("d1!", 19), ("d2!", 20)], ("cti", 22)),
    ]


def test_setting_3_with_drop(run: Any) -> None:
    r = run(illustration(DROP, early=True, substreams=True))
    assert [(p, rule) for p, rule, *_ in outcomes(r)] == [(2, Rule.EARLY_ARRIVAL), (11, Rule.LATE_ARRIVAL)]
    assert r.metrics["readings"].substreams["d3"] == SubstreamMetrics(received=4, admitted=3, dropped=1, late_dropped=1)


def test_boundaries(run: Any) -> None:
    """Exactly the early window ahead, or exactly the late tolerance behind, is inside them;
    one tick more is outside."""
    items = [
        Point(M(15), Reading("a", M(15)), arrival=M(10)),  # exactly 5 min early: admitted
        Point(M(15) + TICK, Reading("b", M(15)), arrival=M(10)),  # a tick more: dropped
        Point(M(6), Reading("c", M(6)), arrival=M(11)),  # exactly 5 min late: not late
        Point(M(6) - TICK, Reading("d", M(6)), arrival=M(11)),  # a tick more: to 12:06
    ]
    ordering = EventOrderingSettings(timedelta(minutes=20), timedelta(minutes=5), timedelta(minutes=5))
    r = run(Stream.create("in", items, EventShape.POINT, AdvanceTimeSettings(FLUSH, policy=ADJUST, ordering=ordering)))
    assert outcomes(r) == [
        (1, Rule.EARLY_ARRIVAL, Action.DROPPED, None, M(15)),
        (3, Rule.LATE_ARRIVAL, Action.ADJUSTED, M(6), M(6)),
    ]


def test_late_then_out_of_order(run: Any) -> None:
    """O = 2, L = 5 min. An event at 12:30 arriving 12:30 makes the CTI 12:28; one at 12:20
    arriving 12:31 is late (-> 12:26) and then before the CTI (-> 12:28): one rejection, by
    the last rule, and both counts. An interval late and wholly before the late bound is
    dropped under ADJUST."""
    items = [
        Interval(M(30), M(31), Reading("a", M(30)), arrival=M(30)),
        Interval(M(20), M(40), Reading("b", M(20)), arrival=M(31)),
        Interval(M(20), M(25), Reading("c", M(20)), arrival=M(32)),  # ends before 12:27
    ]
    ordering = EventOrderingSettings(timedelta(minutes=2), timedelta(minutes=5), None)
    r = run(Stream.create("in", items, EventShape.INTERVAL, AdvanceTimeSettings(FLUSH, policy=ADJUST, ordering=ordering)))
    assert outcomes(r) == [
        (1, Rule.START_BEFORE_CTI, Action.ADJUSTED, M(28), M(28)),
        (2, Rule.LATE_ARRIVAL, Action.DROPPED, None, M(27)),
    ]
    assert sorted((e.start, e.end) for e in r.events) == [(M(28), M(40)), (M(30), M(31))]
    m = r.metrics["in"]
    assert (m.adjusted, m.dropped, m.late_adjusted, m.late_dropped, m.out_of_order_adjusted) == (1, 1, 1, 1, 1)


def test_heartbeats_move_time_without_events(run: Any) -> None:
    """O = 0, L = 5 min. The point at 12:00 makes the CTI 12:00 (not released: its start is
    not before the CTI); a heartbeat at 12:04 asks for 11:59 (no move); one at 12:06 moves
    the CTI to 12:01 and the point is released."""
    ordering = EventOrderingSettings(timedelta(0), timedelta(minutes=5), None)
    items = [Point(M(0), Reading("a", M(0)), arrival=M(0)), Heartbeat(M(4)), Heartbeat(M(6))]
    r = run(Stream.create("in", items, EventShape.POINT, AdvanceTimeSettings(policy=ADJUST, ordering=ordering)))
    assert r.raw == [Cti(M(0)), Point(M(0), Reading("a", M(0))), Cti(M(1))]
    m = r.metrics["in"]
    assert (m.received, m.ctis_generated) == (1, 2)
    assert m.watermark_delays == [(M(0), timedelta(0)), (M(4), timedelta(minutes=4)), (M(6), timedelta(minutes=5))]


def _heartbeat_table(tmp_path: Path) -> Any:
    """The items of ``test_heartbeats_move_time_without_events`` as table rows: a point at
    12:00 and heartbeat rows arriving 12:04 and 12:06 (their start and payload columns are
    null: a heartbeat row's time is its arrival)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tempo.sources import ParquetSource

    at = [M(0).replace(tzinfo=timezone.utc), None, None]
    rows = pa.table(
        {
            "seq": [0, 1, 2],
            "kind": ["point", "HEARTBEAT", "heartbeat"],
            "start": pa.array(at, pa.timestamp("us", "UTC")),
            "arrival": pa.array([M(m).replace(tzinfo=timezone.utc) for m in (0, 4, 6)], pa.timestamp("us", "UTC")),
            "device": ["a", None, None],
            "event_time": pa.array(at, pa.timestamp("us", "UTC")),
        }
    )
    path = tmp_path / "heartbeats.parquet"
    pq.write_table(rows, path)
    return ParquetSource(str(path), Reading, "start", kind="kind", arrival="arrival", order="seq")


def test_heartbeat_rows_move_time_as_heartbeat_items(run: Any, tmp_path: Path) -> None:
    """Table rows of kind heartbeat are ``Heartbeat`` items: the same CTIs and samples as
    ``test_heartbeats_move_time_without_events`` (aware times: a table's are UTC)."""
    ordering = EventOrderingSettings(timedelta(0), timedelta(minutes=5), None)
    r = run(Stream.create("in", _heartbeat_table(tmp_path), EventShape.POINT, AdvanceTimeSettings(policy=ADJUST, ordering=ordering)))
    utc = timezone.utc
    assert r.raw == [
        Cti(M(0).replace(tzinfo=utc)),
        Point(M(0).replace(tzinfo=utc), Reading("a", M(0).replace(tzinfo=utc))),
        Cti(M(1).replace(tzinfo=utc)),
    ]
    m = r.metrics["in"]
    assert (m.received, m.ctis_generated) == (1, 2)
    assert [(c.replace(tzinfo=None), d) for c, d in m.watermark_delays] == [
        (M(0), timedelta(0)),
        (M(4), timedelta(minutes=4)),
        (M(6), timedelta(minutes=5)),
    ]


def test_heartbeats_on_an_input_without_ordering_settings_change_nothing(run: Any, tmp_path: Path) -> None:
    """Without ordering settings nothing follows the arrival clock: heartbeat rows and
    items are accepted (a live input announces the arrival it has reached with them) and
    the result is that of the events alone: no CTI, the point released at the flush."""
    utc = timezone.utc
    settings = AdvanceTimeSettings(FLUSH)
    r = run(Stream.create("in", _heartbeat_table(tmp_path), EventShape.POINT, settings))
    assert r.raw == [Point(M(0).replace(tzinfo=utc), Reading("a", M(0).replace(tzinfo=utc))), Cti(INFINITY.replace(tzinfo=utc))]
    assert (r.metrics["in"].received, r.metrics["in"].ctis_generated) == (1, 1)
    items = [Point(M(0), Reading("a", M(0)), arrival=M(0)), Heartbeat(M(4)), Heartbeat(M(6))]
    r = run(Stream.create("in", items, EventShape.POINT, settings))
    assert r.raw == [Point(M(0), Reading("a", M(0))), Cti(INFINITY)]


def test_an_idle_input_follows_the_arrival_clock(run: Any) -> None:
    """ASA's sparse partitions: p1 has points at 12:00, 12:03, 12:08 (arrival = start), p2
    none. p2's CTI follows the query's arrival clock less 5 min: 11:55, 11:58, 12:03, so
    the union (the min of both) moves and releases the point at 12:00 before any flush.
    With no late-arrival tolerance p2 could not move, and nothing would be released."""
    ordering = EventOrderingSettings(timedelta(0), timedelta(minutes=5), None)
    settings = AdvanceTimeSettings(policy=ADJUST, ordering=ordering)
    p1 = [Point(M(m), Reading("a", M(m)), arrival=M(m)) for m in (0, 3, 8)]
    union = Stream.create("p1", p1, EventShape.POINT, settings).union(
        Stream.create("p2", [], EventShape.POINT, settings, payload_type=Reading)
    )
    r = run(union)
    assert r.ctis == [M(-5), M(-2), M(3)]
    assert [e.start for e in r.events] == [M(0)]
    stuck = AdvanceTimeSettings(policy=ADJUST, ordering=EventOrderingSettings(timedelta(0), None, None))
    r = run(
        Stream.create("p1", p1, EventShape.POINT, settings).union(Stream.create("p2", [], EventShape.POINT, stuck, payload_type=Reading))
    )
    assert (r.ctis, r.events) == ([], [])


def test_a_join_with_a_quiet_side_keeps_producing(run: Any) -> None:
    """A reference interval [12:00, 13:00) arrives once at 12:00; readings arrive every
    minute. The reference input has no more items, yet its CTI follows the clock (less
    1 min), so the join's CTI (the min of both) moves with the readings and releases each
    joined reading a minute after it arrives, without waiting for a flush."""

    @attrs.frozen
    class Ref:
        device: str
        label: str

    ordering = EventOrderingSettings(timedelta(0), timedelta(minutes=1), None)
    settings = AdvanceTimeSettings(policy=DROP, ordering=ordering)
    ref = Stream.create("ref", [Interval(M(0), M(60), Ref("a", "attic"), arrival=M(0))], EventShape.INTERVAL, settings)
    readings = Stream.create("readings", [Point(M(m), Reading("a", M(m)), arrival=M(m)) for m in range(1, 6)], EventShape.POINT, settings)
    joined = readings.join(ref, lambda r, f: r.device == f.device, lambda r, f: Ref(r.device, f.label))
    r = run(joined)
    # ref's CTI: 12:00 (its start), then clock - 1 min: 12:01..12:04 at readings 2..5.
    # readings': 11:59 (clock - 1 min after ref's item), then 12:01..12:05 (its starts).
    # The join's is the min: 11:59, 12:00, ..., 12:04; readings 12:01-12:03 are released.
    assert r.ctis == [M(m) for m in range(-1, 5)]
    assert [e.start for e in r.events] == [M(1), M(2), M(3)]


def test_timestamp_by_arrival_in_a_table(run: Any, tmp_path: Path) -> None:
    """``start=None``: a table's events take their arrival time (ASA's default without
    TIMESTAMP BY). Arrivals never decrease, so no tolerance applies and nothing is
    rejected; the payload's own time field is read as it is."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tempo.sources import ParquetSource

    utc = timezone.utc
    rows = {
        "device": ["a", "b", "a"],
        "event_time": [datetime(2024, 1, 1, 12, m, tzinfo=utc) for m in (9, 1, 2)],
        "arrival": [datetime(2024, 1, 1, 12, m, tzinfo=utc) for m in (3, 3, 4)],
    }
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table(rows), path)
    source = ParquetSource(str(path), Reading, None, arrival="arrival")
    settings = AdvanceTimeSettings(FLUSH, policy=DROP, ordering=EventOrderingSettings())
    r = run(Stream.create("in", source, EventShape.POINT, settings))
    assert r.rejected == []
    at = [(e.start, e.payload.device, e.payload.event_time) for e in sorted(r.events, key=lambda e: (e.start, e.payload.device))]
    assert at == list(zip([datetime(2024, 1, 1, 12, m, tzinfo=utc) for m in (3, 3, 4)], ["a", "b", "a"], rows["event_time"]))


def test_bad_items_and_settings() -> None:
    ordering = AdvanceTimeSettings(ordering=EventOrderingSettings())
    with pytest.raises(QueryBuildError, match="must not be negative"):
        EventOrderingSettings(late_arrival_tolerance=timedelta(seconds=-1))
    with pytest.raises(QueryBuildError, match="generate the input's CTIs themselves"):
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(10), ordering=EventOrderingSettings())
    with pytest.raises(QueryBuildError, match="do not combine"):
        AdvanceTimeSettings(import_=AdvanceTimeImportSettings("x"), ordering=EventOrderingSettings())
    with pytest.raises(QueryBuildError, match="POINT or INTERVAL"):
        Stream.create("in", [EdgeStart(M(0), Reading("a", M(0)), arrival=M(0))], EventShape.EDGE, ordering)
    no_late = AdvanceTimeSettings(ordering=EventOrderingSettings(late_arrival_tolerance=None))
    with pytest.raises(QueryBuildError, match="substreams"):
        Stream.create("in", ITEMS, EventShape.POINT, no_late, over=lambda r: r.device)
    with pytest.raises(QueryBuildError, match="substreams"):
        Stream.create("in", ITEMS, EventShape.POINT, None, over=lambda r: r.device)


def test_bad_items_are_named(run: Any) -> None:
    ordering = AdvanceTimeSettings(ordering=EventOrderingSettings())
    no_arrival = [Point(M(1), Reading("a", M(1)), arrival=M(1)), Point(M(2), Reading("a", M(2)))]
    with pytest.raises(InputError, match="needs an arrival time") as e:
        run(Stream.create("in", no_arrival, EventShape.POINT, ordering))
    assert e.value.position == 1


def test_rejections_as_a_table(tmp_path: Path) -> None:
    """Every rejection, with its rule and original time, as a table a user can keep."""
    import pyarrow.parquet as pq

    r = InMemoryExecutor().run(illustration(ADJUST, early=True))
    path = tmp_path / "rejected.parquet"
    pq.write_table(r.rejections_table(), path)
    back = pq.read_table(path).to_pylist()
    assert [(row["tempo_position"], row["tempo_rule"], row["tempo_action"]) for row in back] == [
        (2, "early arrival", "dropped"),
        (5, "start before CTI", "adjusted"),
        (8, "start before CTI", "adjusted"),
        (11, "late arrival", "adjusted"),
    ]

    def utc(minute: float) -> datetime:  # the table's times are timestamp[us, UTC]
        return M(minute).replace(tzinfo=timezone.utc)

    assert (back[3]["tempo_start"], back[3]["tempo_arrival"], back[3]["tempo_admitted_start"]) == (utc(21), utc(27), utc(22))
    assert back[0]["tempo_admitted_start"] is None and (back[0]["device"], back[0]["event_time"]) == ("d1", utc(17))
