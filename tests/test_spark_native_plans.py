"""Spark plans that are not the obvious ones, and must give exactly what the obvious ones
(and the in-memory executor) give:

* hopping windows over points by panes (``tempo.lowering.windows.by_panes``): each point is
  aggregated once, in its pane of width gcd(size, hop), and the panes' results merge into
  the windows holding them;
* a join of points with intervals that may never end, on time buckets cut to where the
  points lie (``tempo.spark.compiler.overlapping_pairs``), when the driver read both tables.

Each test checks with a spy that the plan it is about was the one built, so that it cannot
pass on the obvious plan.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import (
    TICK,
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Cti,
    EventShape,
    InMemoryExecutor,
    Point,
    Stream,
    WindowTimestamp,
)
from tempo.sources import ArrowSource, ParquetSource
from tests.conformance.compare import assert_executors_agree
from tests.conformance.test_operators import T, iv, sec
from tests.budget import examples

pytestmark = pytest.mark.spark

FLUSHED = AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True))
"""No CTI before the input ends, then one at infinity."""


@attrs.frozen
class Reading:
    key: str
    v: float


@attrs.frozen
class Stats:
    key: str
    n: int
    total: float | None
    mean: float | None
    low: float | None
    high: float | None
    first: float | None
    last: float | None


def stats(key: str, w: Any) -> Stats:
    return Stats(
        key=key,
        n=w.count(),
        total=w.sum(lambda e: e.v),
        mean=w.avg(lambda e: e.v),
        low=w.min(lambda e: e.v),
        high=w.max(lambda e: e.v),
        first=w.first(lambda e: e.v),
        last=w.last(lambda e: e.v),
    )


@attrs.frozen
class Count:
    n: int


@pytest.fixture
def panes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry each time the Spark compiler builds a window node by panes (the shared
    lowering's rule)."""
    from tempo.lowering import windows

    calls: list[int] = []
    original = windows.by_panes

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(windows, "by_panes", spy)
    return calls


def test_hopping_by_panes_by_hand(spark_executor: Any, panes: list[int]) -> None:
    """hopping(size 6s, hop 4s): windows [4k, 4k+6); panes of gcd(6, 4) = 2 s.

    t:   -4    0  1  2  3  4  5  6     8  9  10    12 13  14
         [================)                                  [-4,2)
               [=================)                           [0,6)
                           [=================)               [4,10)
                                       [=================)   [8,14): not complete at |12
         a:      *1    *2    *8          *16
         b:                  *4                        *32
                                                |12
    |12 completes the windows ending at or before 12: [-4,2), [0,6), [4,10).
    [-4,2)  a: 1                 n1 sum 1  mean 1  min 1 max 1  first 1 last 1
    [0,6)   a: 1, 2, 8 (at 5)    n3 sum 11 mean 11/3 min 1 max 8 first 1 last 8
            b: 4                 n1 sum 4 ...
    [4,10)  a: 8, 16             n2 sum 24 mean 12 min 8 max 16 first 8 last 16
            b: 4
    Output CTI: min(12, start of the earliest incomplete window [8,14)) = 8.
    """
    items: list[Any] = [
        Point(T(1), Reading("a", 1.0)),
        Point(T(3), Reading("a", 2.0)),
        Point(T(5), Reading("b", 4.0)),
        Point(T(5), Reading("a", 8.0)),
        Point(T(9), Reading("a", 16.0)),
        Point(T(13), Reading("b", 32.0)),
        Cti(T(12)),
    ]
    query = Stream.create("in", items, EventShape.POINT).group_by(lambda r: r.key).hopping(sec(6), sec(4)).aggregate(stats)
    result = spark_executor.run(query)
    assert panes, "the Spark plan was not built by panes"
    got = sorted(((e.start, e.end, e.payload) for e in result.events), key=repr)
    one = {k: Stats(k, 1, v, v, v, v, v, v) for k, v in (("a", 1.0), ("b", 4.0))}
    assert got == sorted(
        [
            iv(-4, 2, one["a"]),
            iv(0, 6, Stats("a", 3, 11.0, 11.0 / 3, 1.0, 8.0, 1.0, 8.0)),
            iv(0, 6, one["b"]),
            iv(4, 10, Stats("a", 2, 24.0, 12.0, 8.0, 16.0, 8.0, 16.0)),
            iv(4, 10, one["b"]),
        ],
        key=repr,
    )
    assert result.ctis == [T(8)]


def test_pane_bounds_stamp_latest_and_earliest(spark_executor: Any, panes: list[int]) -> None:
    """The earliest and latest start of a window merge from its panes' too.

    hopping(size 6s, hop 2s) over a: *1 *2.5 *3, flushed. Windows [2k, 2k+6) holding them:
    [-4,2) {1}, [-2,4) {1, 2.5, 3}, [0,6) {1, 2.5, 3}, [2,8) {2.5, 3}.
    LATEST stamps a window at max(window start, latest start): 1, 3, 3, 3;
    EARLIEST at max(window start, earliest start): 1, 1, 1, 2.5.
    """
    items: list[Any] = [Point(T(1), Reading("a", 1.0)), Point(T(2.5), Reading("a", 2.0)), Point(T(3), Reading("a", 4.0))]

    def count(w: Any) -> Count:
        return Count(w.count())

    for stamp, expected in (
        (WindowTimestamp.LATEST, [(1, 1), (3, 3), (3, 3), (3, 2)]),
        (WindowTimestamp.EARLIEST, [(1, 1), (1, 3), (1, 3), (2.5, 2)]),
    ):
        s = Stream.create("in", [*items, Cti(T(100))], EventShape.POINT)
        result = spark_executor.run(s.hopping(sec(6), sec(2)).aggregate(count, timestamp=stamp))
        assert sorted((e.start, e.payload.n) for e in result.events) == sorted((T(t), n) for t, n in expected)
        assert all(e.end == e.start + TICK for e in result.events)
        assert panes, "the Spark plan was not built by panes"
        panes.clear()


@attrs.frozen
class Drawn:
    key: str
    v: float


def _query(events: list[tuple[int, str, int]], size: int, hop: int, offset: int, cti: int | None, stamp: WindowTimestamp) -> Stream[Stats]:
    items: list[Any] = [Point(T(t), Drawn(k, v / 2)) for t, k, v in sorted(events)]
    if cti is not None:
        items.append(Cti(T(cti)))
    return (
        Stream.create("in", items, EventShape.POINT, FLUSHED if cti is None else None)
        .group_by(lambda r: r.key)
        .hopping(sec(size), sec(hop), offset=sec(offset))
        .aggregate(stats, timestamp=stamp)
    )


@settings(
    max_examples=examples(25),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    events=st.lists(st.tuples(st.integers(-20, 40), st.sampled_from("abc"), st.integers(-8, 8)), min_size=1, max_size=25),
    hop=st.integers(1, 6),
    ratio=st.tuples(st.integers(1, 4), st.integers(1, 3)),
    offset=st.integers(0, 9),
    cti=st.one_of(st.none(), st.integers(-10, 50)),
    stamp=st.sampled_from([WindowTimestamp.LIFETIME, WindowTimestamp.LATEST, WindowTimestamp.EARLIEST, WindowTimestamp.START]),
)
def test_panes_agree_with_memory(
    spark_session: Any,
    panes: list[int],
    events: list[tuple[int, str, int]],
    hop: int,
    ratio: tuple[int, int],
    offset: int,
    cti: int | None,
    stamp: WindowTimestamp,
) -> None:
    """Any points, any overlapping windows (sizes 1.33x to 5x the hop, a multiple of it or
    not), any offset, a CTI or the flush at the end: the same results, CTIs and metrics as
    memory."""
    from tempo.spark import SparkExecutor

    size = hop + max(1, hop * ratio[0] // ratio[1])
    desc = f"hopping({size}s, {hop}s, offset {offset}s), CTI {cti}, {stamp}"
    before = len(panes)
    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session), desc, lambda: _query(events, size, hop, offset, cti, stamp))
    assert len(panes) > before, "the Spark plan was not built by panes"


def test_no_panes_for_lifetimes_or_aggregates_that_do_not_merge(spark_executor: Any, panes: list[int]) -> None:
    """Intervals may span panes, and a distinct count does not merge: both keep the explode."""
    items: list[Any] = [Point(T(1), Reading("a", 1.0)), Cti(T(20))]

    def distinct(w: Any) -> Count:
        return Count(w.count_distinct(lambda e: e.v))

    spark_executor.run(Stream.create("in", items, EventShape.POINT).hopping(sec(6), sec(2)).aggregate(distinct))
    spark_executor.run(
        Stream.create("in", items, EventShape.POINT)
        .alter_event_duration(sec(3))
        .hopping(sec(6), sec(2))
        .aggregate(lambda w: Count(w.count()))
    )
    assert panes == []


# ---- joins on time buckets cut to the points' span ---------------------------------------

US = 1_000_000
ORIGIN = datetime(2024, 1, 1, tzinfo=timezone.utc)
"""The tables' integer times are microseconds since it; they read as UTC times."""
OPEN = 2**62
"""An end column value past the last representable instant: the lifetime never ends."""


def at(seconds: float) -> datetime:
    return ORIGIN + timedelta(seconds=seconds)


EVERY_2 = AdvanceTimeSettings(
    AdvanceTimeGenerationSettings(frequency=2, delay=timedelta(seconds=100), advance_to_infinity_on_shutdown=True)
)
AHEAD = AdvanceTimeSettings(
    AdvanceTimeGenerationSettings(frequency=1, delay=-TICK, advance_to_infinity_on_shutdown=True),
    policy=AdvanceTimePolicy.ADJUST,
)
"""A CTI one tick after each row's start: a row starting at or before the latest start is
late, and ADJUST moves it up to the CTI, past every row's start."""


@attrs.frozen
class Event:
    key: int
    value: float


@attrs.frozen
class Ref:
    key: int
    r: float


@attrs.frozen
class Match:
    product: float


def _events(rows: list[tuple[float, int, float]], settings: AdvanceTimeSettings, parquet: str | None = None) -> Stream[Event]:
    """Readings (time in seconds, key, value) in a table, or in a Parquet file at ``parquet``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(
        {
            "t": pa.array([round(t * US) for t, _, _ in rows], pa.int64()),
            "key": pa.array([k for _, k, _ in rows], pa.int64()),
            "value": pa.array([v for _, _, v in rows], pa.float64()),
            "seq": pa.array(range(len(rows)), pa.int64()),
        }
    )
    if parquet is None:
        source: Any = ArrowSource(table, Event, start="t", order="seq", time_origin=ORIGIN, time_unit="us")
    else:
        pq.write_table(table, parquet)
        source = ParquetSource(parquet, Event, start="t", order="seq", time_origin=ORIGIN, time_unit="us")
    return Stream.create("events", source, EventShape.POINT, settings)


def _reference(rows: list[tuple[float, float | None, int, float]]) -> Stream[Ref]:
    import pyarrow as pa

    table = pa.table(
        {
            "valid_from": pa.array([round(s * US) for s, _, _, _ in rows], pa.int64()),
            "valid_to": pa.array([OPEN if e is None else round(e * US) for _, e, _, _ in rows], pa.int64()),
            "key": pa.array([k for _, _, k, _ in rows], pa.int64()),
            "r": pa.array([r for _, _, _, r in rows], pa.float64()),
        }
    )
    source = ArrowSource(table, Ref, start="valid_from", end="valid_to", time_origin=ORIGIN, time_unit="us")
    return Stream.create("reference", source, EventShape.INTERVAL, FLUSHED)


def _bucketed(executor: Any, stream: Stream[Any]) -> bool:
    """Whether the Spark plan of ``stream`` joins on time buckets."""
    return "__l_bucket" in executor.explain(stream)


def test_points_join_open_intervals_on_cut_buckets(spark_executor: Any, tmp_path: Path) -> None:
    """Readings joined on key with a reference whose last row of a key never ends.

    t (s):  0    5    10   12.5      20   21   25
    a:      [==r1==)[===========r2 (never ends)==========>
    b:           [5======r3=========)
    readings:          a:*1 (@12.499999)  b:*8 (@13)  b:*4 (@21)  a:*16 (@25)
    a@12.499999 meets r2: 1 x 2 = 2; b@13 meets r3: 8 x 3 = 24; b@21 is after r3 ended: no
    match; a@25 meets r2 (open): 16 x 2 = 32.

    The readings lie in [12.499999 s, 25 s + 1 tick): r2 is cut to that span, r1 (wholly
    before it) lists nothing. The buckets are the mean finite reference length wide
    ((10 + 15) / 2 = 12.5 s, on the epoch's grid), so the first reading is the last tick
    of bucket 0 and the last one the first tick of bucket 2: a cut one tick short at
    either end misses one of them.
    """
    ref = _reference([(0, 10, 1, 1.0), (10, None, 1, 2.0), (5, 20, 2, 3.0)])
    readings = [(12.499999, 1, 1.0), (13, 2, 8.0), (21, 2, 4.0), (25, 1, 16.0)]
    # Read by the driver's proof (from a table, or a Parquet file's statistics), or by its scan.
    for advance, parquet in ((FLUSHED, None), (FLUSHED, str(tmp_path / "readings.parquet")), (EVERY_2, None)):
        events = _events(readings, advance, parquet)
        query = events.join(ref, on=lambda e, r: e.key == r.key, select=lambda e, r: Match(e.value * r.r))
        assert _bucketed(spark_executor, query)
        result = spark_executor.run(query)
        assert sorted((e.start, e.end, e.payload.product) for e in result.events) == [
            (at(12.499999), at(12.499999) + TICK, 2.0),
            (at(13), at(13) + TICK, 24.0),
            (at(25), at(25) + TICK, 32.0),
        ]


def moved_past_the_rows() -> Stream[Match]:
    """A reading moved by ADJUST past every reading's start still meets the
    reference rows of its new time.

        t:          0 .......... 10 s   10 s + 1 tick   10 s + 2 ticks
        reference:  [====r 1.0=====)[========r 5.0 (never ends)=========>
        readings:   #0 *1 @10 s: CTI 10 s + 1 tick (AHEAD)
                    #1 *2 @10 s: late, moved to [10 s + 1 tick, 10 s + 2 ticks)
        #0 meets r 1.0: 1 x 1 = 1; #1, moved, meets r 5.0: 2 x 5 = 10.

    The readings' rows span [10 s, 10 s + 1 tick), but what the input admits reaches one tick
    further (``Span.admitting``): a cut to the rows alone leaves r 5.0 out.
    """
    ref = _reference([(0, 10.000001, 1, 1.0), (10.000001, None, 1, 5.0)])
    events = _events([(10, 1, 1.0), (10, 1, 2.0)], AHEAD)
    return events.join(ref, on=lambda e, r: e.key == r.key, select=lambda e, r: Match(e.value * r.r))


MOVED_PAST_THE_ROWS_RESULT = [(at(10), at(10) + TICK, 1.0), (at(10) + TICK, at(10) + 2 * TICK, 10.0)]


def test_a_reading_moved_past_the_rows_meets_the_reference_of_its_new_time(spark_executor: Any) -> None:
    """The timeline of ``moved_past_the_rows``."""
    query = moved_past_the_rows()
    assert _bucketed(spark_executor, query)
    result = spark_executor.run(query)
    assert sorted((e.start, e.end, e.payload.product) for e in result.events) == MOVED_PAST_THE_ROWS_RESULT


def test_no_cut_buckets_when_open_lifetimes_would_list_too_many(spark_executor: Any) -> None:
    """Short finite rows (1 s: buckets of 1 s) and open rows over readings spanning 10^6 s
    would list a million buckets each: the plain join on the key, with the same results."""
    ref = _reference([(0, 1, 1, 1.0), (1, 2, 1, 1.0), (0, None, 2, 2.0)])
    events = _events([(0, 1, 1.0), (0, 2, 1.0), (1_000_000, 2, 4.0)], FLUSHED)
    query = events.join(ref, on=lambda e, r: e.key == r.key, select=lambda e, r: Match(e.value * r.r))
    assert not _bucketed(spark_executor, query)
    result = spark_executor.run(query)
    assert sorted((e.start, e.payload.product) for e in result.events) == [(at(0), 1.0), (at(0), 2.0), (at(1_000_000), 8.0)]


JOINS = st.fixed_dictionaries(
    {
        "events": st.lists(st.tuples(st.integers(-50, 200), st.integers(0, 2), st.integers(-4, 4)), min_size=1, max_size=20),
        "ref": st.lists(
            st.tuples(st.integers(-60, 220), st.one_of(st.none(), st.integers(1, 120)), st.integers(0, 2), st.integers(-4, 4)),
            min_size=1,
            max_size=12,
        ),
        "keyed": st.booleans(),
        "ctis": st.sampled_from(["flush", "every-2", "ahead"]),
        "unit": st.sampled_from([1.0, 1e-6]),
    }
)
"""Readings (points) and reference rows (finite of any length, or open), in seconds or in
ticks (where buckets are a few ticks wide and every tick of the cut counts), joined on the
key or on a residual only, the readings flushed, with a CTI every 2 rows, or with ``AHEAD``'s
(late readings moved past the latest start)."""


def join_query(
    events: list[tuple[int, int, int]], ref: list[tuple[int, int | None, int, int]], keyed: bool, ctis: str, unit: float
) -> Stream[Match]:
    """The join ``JOINS`` draws."""
    rows = [(s * unit, None if n is None else (s + n) * unit, k, r / 2) for s, n, k, r in ref]
    ev = _events([(t * unit, k, v / 2) for t, k, v in events], {"flush": FLUSHED, "every-2": EVERY_2, "ahead": AHEAD}[ctis])
    on: Any = (lambda e, r: e.key == r.key) if keyed else (lambda e, r: e.key <= r.key)
    return ev.join(_reference(rows), on=on, select=lambda e, r: Match(e.value * r.r))


@settings(
    max_examples=examples(25),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(drawn=JOINS)
def test_cut_buckets_agree_with_memory(spark_session: Any, drawn: dict[str, Any]) -> None:
    """Any join ``JOINS`` draws: the same results, CTIs and metrics as memory."""
    from tempo.spark import SparkExecutor

    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session), repr(drawn), lambda: join_query(**drawn))


@settings(
    max_examples=examples(15),
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    left=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 2)), min_size=1, max_size=12),
    right=st.lists(st.tuples(st.integers(0, 30), st.integers(0, 2)), min_size=1, max_size=12),
    durations=st.tuples(st.integers(1, 7), st.integers(1, 7)),
    keyed=st.booleans(),
)
def test_bounded_lifetimes_join_on_buckets_agrees_with_memory(
    spark_session: Any, left: list[tuple[int, int]], right: list[tuple[int, int]], durations: tuple[int, int], keyed: bool
) -> None:
    """Both sides' lifetimes bounded (each lasting a few seconds): each lists every bucket
    it overlaps, so a pair overlapping in several buckets must be kept in one only."""
    from tempo.spark import SparkExecutor

    def side(name: str, rows: list[tuple[int, int]], seconds: int) -> Stream[Event]:
        items: list[Any] = [Point(T(t), Event(k, float(i))) for i, (t, k) in enumerate(sorted(rows))]
        return Stream.create(name, [*items, Cti(T(100))], EventShape.POINT).alter_event_duration(sec(seconds))

    def build() -> Stream[Match]:
        on: Any = (lambda a, b: a.key == b.key) if keyed else (lambda a, b: a.key <= b.key)
        return side("l", left, durations[0]).join(side("r", right, durations[1]), on=on, select=lambda a, b: Match(a.value * 10 + b.value))

    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session), f"durations {durations} keyed={keyed}", build)
