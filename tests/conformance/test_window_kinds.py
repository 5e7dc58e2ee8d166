"""Hand-written timeline tests for the window kinds and result timestamps, on every executor.

Every expectation is derived by hand from docs/semantics.md section 5.6 (window kinds and
result timestamps): session, count and snapshot windows, grouped and not, and the six
``WindowTimestamp`` options (LIFETIME, START, END, LATEST, EARLIEST, CTI) with the output
CTIs each implies. The rules, in short (times in ticks; a point at s lives [s, s + 1 tick)):

* Result timestamps of a window [ws, we): LIFETIME the window; START a point at ws; END a
  point at we - 1 tick; LATEST / EARLIEST a point at max(ws, the largest / smallest start of
  its events); CTI a point at c - 1 tick, c the input CTI that completed the window (END at
  the flush). Hopping/tumbling with LIFETIME/START/LATEST/EARLIEST pull output CTIs back to
  the start of the earliest incomplete window; hopping with END/CTI and every session,
  count and snapshot window pass CTIs unchanged. A result is released once an output CTI is
  past its start.
* Sessions: an event continues the activity iff its start < (latest last tick so far) + gap
  (a point's last tick is its start, an interval's its end - 1 tick), giving [f, L + gap);
  max_duration D cuts it at the epoch-grid multiples of D from the first one at or after
  f + D, each piece where an event starts being a session that begins at the cut.
  Complete at a CTI c >= its end. Only END (default) and CTI.
* Count windows: events ranked by (start, payload fields, nulls first); window k holds ranks
  [k*slide, k*slide + size), only full ones; bounds [first start, last start + 1 tick);
  complete at the first CTI c > the last start. LATEST (default) = END, or CTI.
* Snapshot windows: between consecutive distinct endpoints p < q with an event alive at p;
  LIFETIME goes out as a start edge at the first CTI > p and ends at the first CTI >= q;
  START/EARLIEST/LATEST a point at p (first CTI > p); END a point at q - 1 tick and CTI one
  at c - 1 tick (first CTI c >= q). w.end with the start-stamped ones is a QueryBuildError.

Conventions as in test_operators.py: ``T(s)`` is 2024-01-01 plus s seconds (``M(m)``: plus m
minutes; 2024-01-01 is a multiple of every size used here since the epoch), inputs carry
explicit CTIs, ``INF`` is naive ``datetime.max``, ``t`` in the timelines is one tick.
Timeline legend: ``[---)`` an interval, ``*`` a point, ``|c`` a CTI at c, ``>>`` an open edge.
Output CTIs and what each released are checked with ``release_steps``; the raw items (edges
as edges) where the executor promises ``Capability.RAW_ITEMS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest

import tempo
from tempo import (
    TICK,
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    Cti,
    EdgeEnd,
    EdgeStart,
    EventShape,
    Interval,
    Point,
    QueryBuildError,
    Stream,
    WindowTimestamp,
)
from tests.conformance.compare import ReleaseStep, release_steps
from tests.conformance.test_operators import BASE, INF, KV, NV, V, T, evs, key, norm_raw, run, sec
from tests.conftest import Capability, promises

LIFETIME, START, END = WindowTimestamp.LIFETIME, WindowTimestamp.START, WindowTimestamp.END
LATEST, EARLIEST, CTI = WindowTimestamp.LATEST, WindowTimestamp.EARLIEST, WindowTimestamp.CTI

Ev = tuple[datetime, datetime, Any]
Release = tuple[datetime, list[Ev]]
"""An output CTI and the events it released."""

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def M(m: float) -> datetime:
    """Application time in minutes: BASE + m minutes."""
    return BASE + timedelta(minutes=m)


def at(t: datetime, payload: Any) -> Ev:
    """The expected output point at t."""
    return (t, t + TICK, payload)


def span(s: datetime, e: datetime, payload: Any) -> Ev:
    """The expected output event [s, e)."""
    return (s, e, payload)


def tick_point(t: datetime, payload: Any) -> Interval[Any]:
    """A point-long interval [t, t + 1 tick), for INTERVAL inputs."""
    return Interval(t, t + TICK, payload)


def point_edges(t: datetime, payload: Any) -> list[EdgeStart[Any] | EdgeEnd[Any]]:
    """A point as an edge pair, for EDGE inputs."""
    return [EdgeStart(t, payload), EdgeEnd(t, t + TICK, payload)]


def expected_steps(releases: Sequence[Release]) -> list[ReleaseStep]:
    return [(sorted((s, repr(p)) for s, _, p in events), ("cti", c)) for c, events in releases]


def check(r: tempo.Result[Any], releases: Sequence[Release]) -> None:
    """The output CTIs are exactly those of ``releases``, each releasing exactly its events
    (by start and payload; the order within one release is the executor's), and the
    released events (edges coalesced) are theirs as a multiset."""
    assert sorted(evs(r), key=key) == sorted((e for _, es in releases for e in es), key=key)
    assert r.ctis == [c for c, _ in releases]
    assert release_steps(r) == expected_steps(releases)


def raw_steps(r: tempo.Result[Any]) -> list[tuple[list[str], datetime]]:
    """``result.raw`` as ``norm_raw`` tuples, cut after each CTI (the items before it as a
    sorted multiset, then the CTI)."""
    out: list[tuple[list[str], datetime]] = []
    items: list[tuple[Any, ...]] = []
    for t in norm_raw(r):
        if t[0] == "cti":
            out.append((sorted(map(repr, items)), t[1]))
            items = []
        else:
            items.append(t)
    assert not items, f"raw items after the last CTI: {items}"
    return out


def check_raw_steps(executor: Any, r: tempo.Result[Any], expected: list[tuple[list[tuple[Any, ...]], datetime]]) -> None:
    """On executors promising RAW_ITEMS: the raw items before each CTI (start edges, end
    edges, intervals, points) as a multiset."""
    if promises(executor, Capability.RAW_ITEMS):
        assert raw_steps(r) == [(sorted(map(repr, items)), c) for items, c in expected]


# --------------------------------------------------------------------------------------
# payload classes and aggregates
# --------------------------------------------------------------------------------------


@attrs.frozen
class W:
    start: datetime
    end: datetime
    n: int
    total: int | None


@attrs.frozen
class GW:
    k: str
    start: datetime
    end: datetime
    n: int
    total: int | None


@attrs.frozen
class SW:
    """A window result without w.end (snapshot windows stamped at their start)."""

    start: datetime
    n: int
    total: int | None


@attrs.frozen
class GS:
    k: str
    start: datetime
    n: int
    total: int | None


def wstats(w: tempo.Window[Any]) -> W:
    return W(start=w.start, end=w.end, n=w.count(), total=w.sum(lambda e: e.v))


def gstats(k: str, w: tempo.Window[KV]) -> GW:
    return GW(k=k, start=w.start, end=w.end, n=w.count(), total=w.sum(lambda e: e.v))


def sstats(w: tempo.Window[Any]) -> SW:
    return SW(start=w.start, n=w.count(), total=w.sum(lambda e: e.v))


def gsstats(k: str, w: tempo.Window[KV]) -> GS:
    return GS(k=k, start=w.start, n=w.count(), total=w.sum(lambda e: e.v))


def stamp_id(stamp: WindowTimestamp | None) -> str:
    return "default" if stamp is None else stamp.value


# --------------------------------------------------------------------------------------
# hopping / tumbling: the six result timestamps
# --------------------------------------------------------------------------------------

TW0 = W(T(0), T(10), 3, 7)
TW1 = W(T(10), T(20), 2, 12)
TW2 = W(T(20), T(30), 1, 16)
PULLED_BACK = [T(10), T(20), INF]  # input CTIs 12, 17, 21, INF -> 10, (10), 20, INF
UNCHANGED = [T(12), T(17), T(21), INF]

TUMBLING_STAMPS: dict[WindowTimestamp | None, tuple[list[Ev], list[datetime]]] = {
    None: ([span(T(0), T(10), TW0), span(T(10), T(20), TW1), span(T(20), T(30), TW2)], PULLED_BACK),
    LIFETIME: ([span(T(0), T(10), TW0), span(T(10), T(20), TW1), span(T(20), T(30), TW2)], PULLED_BACK),
    START: ([at(T(0), TW0), at(T(10), TW1), at(T(20), TW2)], PULLED_BACK),
    LATEST: ([at(T(8), TW0), at(T(15), TW1), at(T(23), TW2)], PULLED_BACK),
    EARLIEST: ([at(T(2), TW0), at(T(10), TW1), at(T(23), TW2)], PULLED_BACK),
    END: ([at(T(10) - TICK, TW0), at(T(20) - TICK, TW1), at(T(30) - TICK, TW2)], UNCHANGED),
    CTI: ([at(T(12) - TICK, TW0), at(T(21) - TICK, TW1), at(T(30) - TICK, TW2)], UNCHANGED),
}


@pytest.mark.parametrize("stamp", list(TUMBLING_STAMPS), ids=stamp_id)
def test_tumbling_result_timestamps_and_output_ctis(executor: Any, stamp: WindowTimestamp | None) -> None:
    """tumbling(10s) with each result timestamp; w.start/w.end are always the window.

    t:  0  2   6  8  10 12    15 17     20 21  23         30   INF
        |  *1  *2 [4------)   *8                *16
                     |12         |17       |21                 |INF
    [0,10):  *1 *2 [8,13)  n3 s7   starts 2, 6, 8   complete at |12
    [10,20): [8,13) *8     n2 s12  starts 8, 15     complete at |21
    [20,30): *16           n1 s16  start 23         complete at |INF (the flush)
    LIFETIME [0,10) [10,20) [20,30)      START    @0 @10 @20
    LATEST   @8 @15 @23                  EARLIEST @2 @10 (max(10, 8)) @23
    END      @10-t @20-t @30-t           CTI      @12-t @21-t @30-t (END at the flush)
    output CTIs: LIFETIME/START/LATEST/EARLIEST pulled back: 12 -> 10, 17 -> 10 (not
    forwarded), 21 -> 20, INF; END/CTI unchanged: 12, 17, 21, INF.
    Each result goes out at the first output CTI past its start: pulled back, [0,10)'s at
    10, [10,20)'s at 20 (LATEST @15 too), [20,30)'s at INF; END/CTI at 12, 21 and INF.
    """
    s = Stream.create(
        "in",
        [
            tick_point(T(2), V(1)),
            tick_point(T(6), V(2)),
            Interval(T(8), T(13), V(4)),
            Cti(T(12)),
            tick_point(T(15), V(8)),
            Cti(T(17)),
            tick_point(T(23), V(16)),
            Cti(T(21)),
            Cti(INF),
        ],
        EventShape.INTERVAL,
    )
    r = run(executor, s.tumbling(sec(10)).aggregate(wstats, timestamp=stamp))
    (e0, e1, e2), ctis = TUMBLING_STAMPS[stamp]
    if ctis == PULLED_BACK:
        check(r, [(T(10), [e0]), (T(20), [e1]), (INF, [e2])])
    else:
        check(r, [(T(12), [e0]), (T(17), []), (T(21), [e1]), (INF, [e2])])


HOPPING_STAMPS: dict[WindowTimestamp, list[Release]] = {
    LIFETIME: [
        (T(5), [span(T(-5), T(5), W(T(-5), T(5), 1, 1)), span(T(0), T(10), W(T(0), T(10), 2, 3))]),
        (INF, [span(T(5), T(15), W(T(5), T(15), 1, 2))]),
    ],
    START: [
        (T(5), [at(T(-5), W(T(-5), T(5), 1, 1)), at(T(0), W(T(0), T(10), 2, 3))]),
        (INF, [at(T(5), W(T(5), T(15), 1, 2))]),
    ],
    LATEST: [  # [0,10)'s point at 8 is not before the output CTI 5: it waits for INF
        (T(5), [at(T(3), W(T(-5), T(5), 1, 1))]),
        (INF, [at(T(8), W(T(0), T(10), 2, 3)), at(T(8), W(T(5), T(15), 1, 2))]),
    ],
    EARLIEST: [
        (T(5), [at(T(3), W(T(-5), T(5), 1, 1)), at(T(3), W(T(0), T(10), 2, 3))]),
        (INF, [at(T(8), W(T(5), T(15), 1, 2))]),
    ],
    END: [
        (T(12), [at(T(5) - TICK, W(T(-5), T(5), 1, 1)), at(T(10) - TICK, W(T(0), T(10), 2, 3))]),
        (INF, [at(T(15) - TICK, W(T(5), T(15), 1, 2))]),
    ],
    CTI: [
        (T(12), [at(T(12) - TICK, W(T(-5), T(5), 1, 1)), at(T(12) - TICK, W(T(0), T(10), 2, 3))]),
        (INF, [at(T(15) - TICK, W(T(5), T(15), 1, 2))]),
    ],
}


@pytest.mark.parametrize("stamp", list(HOPPING_STAMPS), ids=stamp_id)
def test_hopping_result_timestamps_and_output_ctis(executor: Any, stamp: WindowTimestamp) -> None:
    """hopping(size 10s, hop 5s) with each result timestamp.

    t:  -5    0    3    5    8    10   12   15   INF
        [=========)                               [-5,5):  *1        n1 s1
              [=========)                         [0,10):  *1 *2     n2 s3
                        [=========)               [5,15):  *2        n1 s2
                   *1        *2        |12         |INF
    |12 completes [-5,5) and [0,10); [5,15) is completed by the flush.
    pull-back stamps: output CTIs 5 (start of [5,15)), INF; a result waits for the first of
    them past its start: LATEST's [0,10) at 8 is not before 5, so it goes out at INF.
    END/CTI: output CTIs 12, INF; CTI stamps @12-t, and @15-t at the flush (as END).
    """
    s = Stream.create("in", [Point(T(3), V(1)), Point(T(8), V(2)), Cti(T(12)), Cti(INF)], EventShape.POINT)
    r = run(executor, s.hopping(sec(10), sec(5)).aggregate(wstats, timestamp=stamp))
    check(r, HOPPING_STAMPS[stamp])


@attrs.frozen
class Up:
    """An upstream window's result as the downstream window counts it."""

    start: datetime
    end: datetime
    n: int
    total: int | None


@pytest.mark.parametrize("stamp", [LIFETIME, START, END, LATEST, EARLIEST, CTI], ids=stamp_id)
def test_chained_tumbling_results_land_in_the_same_or_the_next_window(executor: Any, stamp: WindowTimestamp) -> None:
    """A 5 s tumbling window stamped ``stamp`` feeding a downstream 5 s tumbling window.

    t:  0  1  3  5  7  8  10   13   15   INF
        |  *1 *2    |7 *4      |13       |INF
    upstream [0,5): n2 s3 (complete at |7), [5,10): n1 s4 (complete at |13)
    stamps   [0,5)                   [5,10)
    LIFETIME [0,5)                   [5,10)          all inside their own window, so the
    START    @0                      @5              downstream [0,5) and [5,10) each count
    END      @5-t                    @10-t           one result: [0,5) n1 s2, [5,10) n1 s1
    LATEST   @3                      @8
    EARLIEST @1                      @8
    CTI      @7-t                    @13-t           after their window: downstream [5,10)
                                                     n1 s2, [10,15) n1 s1
    upstream output CTIs: pulled back 5, 10, INF; END/CTI 7, 13, INF. Downstream (pulled
    back) 5, 10, INF either way; a downstream result is released at the first past its start.
    """
    s = Stream.create("in", [Point(T(1), V(1)), Point(T(3), V(2)), Cti(T(7)), Point(T(8), V(4)), Cti(T(13)), Cti(INF)], EventShape.POINT)
    upstream = s.tumbling(sec(5)).aggregate(
        lambda w: Up(start=w.start, end=w.end, n=w.count(), total=w.sum(lambda e: e.v)), timestamp=stamp
    )
    down = upstream.tumbling(sec(5)).aggregate(lambda w: W(start=w.start, end=w.end, n=w.count(), total=w.sum(lambda e: e.n)))
    r = run(executor, down)
    if stamp is CTI:
        check(r, [(T(5), []), (T(10), [span(T(5), T(10), W(T(5), T(10), 1, 2))]), (INF, [span(T(10), T(15), W(T(10), T(15), 1, 1))])])
    else:
        check(r, [(T(5), [span(T(0), T(5), W(T(0), T(5), 1, 2))]), (T(10), [span(T(5), T(10), W(T(5), T(10), 1, 1))]), (INF, [])])


# --------------------------------------------------------------------------------------
# session windows
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stamp", [None, END, CTI], ids=stamp_id)
def test_session_split_exactly_at_gap(executor: Any, stamp: WindowTimestamp | None) -> None:
    """session(gap 5s): points exactly `gap` apart are in different sessions.

    t:  1  3     7 8      13 14    18  20   25   30
        *1 *2      *4     *8          *16
                 |7 |8       |14                 |30
    1 -> 3: 3 < 1+5 joins; 8 < 3+5? no (equal): new; 13 < 8+5? no: new; 20 < 13+5? no: new
    sessions [1,8) n2 s3, [8,13) n1 s4, [13,18) n1 s8, [20,25) n1 s16; each complete at the
    first CTI >= its end: |8, |14, |30, |30 (|7 completes nothing).
    END (default) @8-t, @13-t, @18-t, @25-t; CTI @8-t, @14-t, @30-t, @30-t.
    Output CTIs unchanged: 7, 8, 14, 30.
    """
    s = Stream.create(
        "in",
        [
            Point(T(1), V(1)),
            Point(T(3), V(2)),
            Cti(T(7)),
            Point(T(8), V(4)),
            Cti(T(8)),
            Point(T(13), V(8)),
            Cti(T(14)),
            Point(T(20), V(16)),
            Cti(T(30)),
        ],
        EventShape.POINT,
    )
    r = run(executor, s.session(sec(5)).aggregate(wstats, timestamp=stamp))
    a, b, c, d = W(T(1), T(8), 2, 3), W(T(8), T(13), 1, 4), W(T(13), T(18), 1, 8), W(T(20), T(25), 1, 16)
    if stamp is CTI:
        check(
            r,
            [(T(7), []), (T(8), [at(T(8) - TICK, a)]), (T(14), [at(T(14) - TICK, b)]), (T(30), [at(T(30) - TICK, c), at(T(30) - TICK, d)])],
        )
    else:
        check(
            r,
            [(T(7), []), (T(8), [at(T(8) - TICK, a)]), (T(14), [at(T(13) - TICK, b)]), (T(30), [at(T(18) - TICK, c), at(T(25) - TICK, d)])],
        )


def test_session_intervals_extend_it_from_their_last_tick(executor: Any) -> None:
    """session(gap 5s) over intervals: an interval's last tick is its end - 1 tick.

    t:  2         10    14  16  18  20     23-t       28-t  30
        [1--------)     *2  [4--)    |20   *8                |30
    [2,10) last tick 10-t; 14 < 10-t+5 = 15-t: joins (alone from 2, 14 >= 2+5 would not);
    [16,18) joins, last tick 18-t; the point at 23-t: 23-t < 18-t+5? no (equal): new.
    sessions [2, 23-t) n3 s7 and [23-t, 28-t) n1 s8; |20 completes nothing (23-t > 20);
    |30 both: END points @23-2t, @28-2t. Output CTIs 20, 30.
    """
    s = Stream.create(
        "in",
        [
            Interval(T(2), T(10), V(1)),
            tick_point(T(14), V(2)),
            Interval(T(16), T(18), V(4)),
            Cti(T(20)),
            tick_point(T(23) - TICK, V(8)),
            Cti(T(30)),
        ],
        EventShape.INTERVAL,
    )
    r = run(executor, s.session(sec(5)).aggregate(wstats))
    first = W(T(2), T(23) - TICK, 3, 7)
    second = W(T(23) - TICK, T(28) - TICK, 1, 8)
    check(r, [(T(20), []), (T(30), [at(T(23) - 2 * TICK, first), at(T(28) - 2 * TICK, second)])])


@pytest.mark.parametrize("max_duration", [None, 10], ids=["no-cap", "cap-10min"])
def test_session_max_duration_cuts_on_the_epoch_grid(executor: Any, max_duration: int | None) -> None:
    """session(gap 3 min, max_duration 10 min), points every 2 min from minute 1 to 25 (v = minute).

    m:  1  3  5 ...  19 20 21 23 25    28  30
        *  *  *  ...  *  |20 *  *  *        |30
    One activity: each point starts 2 < 3 min after the previous; f = 1, L = 25.
    Without a cap: one session [1, 28) n13 s169, complete at |30 -> @28-t.
    With D = 10 min: the first cut is the first multiple of 10 min at or after f + D = 11,
    i.e. 20 (not 11); the next would be 30.
      [1, min(28, 20)) = [1,20): points 1..19, n10 s100, complete at |20 -> @20-t
      [20, min(28, 30)) = [20,28): starts at the cut, points 21 23 25, n3 s69 -> @28-t at |30
    Output CTIs unchanged: 20, 30.
    """
    items: list[Any] = [Point(M(m), V(m)) for m in range(1, 20, 2)]
    items += [Cti(M(20)), *(Point(M(m), V(m)) for m in (21, 23, 25)), Cti(M(30))]
    s = Stream.create("in", items, EventShape.POINT)
    cap = None if max_duration is None else timedelta(minutes=max_duration)
    r = run(executor, s.session(timedelta(minutes=3), cap).aggregate(wstats))
    if max_duration is None:
        check(r, [(M(20), []), (M(30), [at(M(28) - TICK, W(M(1), M(28), 13, 169))])])
    else:
        check(r, [(M(20), [at(M(20) - TICK, W(M(1), M(20), 10, 100))]), (M(30), [at(M(28) - TICK, W(M(20), M(28), 3, 69))])])


def test_grouped_session_max_duration_pieces_without_a_start_give_nothing(executor: Any) -> None:
    """group_by(k).session(gap 3 min, max_duration 10 min); minutes.

    m:  2            20     25  28  30     35 36   39  40
    a   [1====================================)*2
    b                       *4
                     |20            |30                |40
    a: one activity, f = 2: [2,35) (last tick 35-t), then 36 < 35-t+3 joins; L = 36.
       cuts 20 (first multiple of 10 >= 12), 30, 40:
       [2,20): the interval starts here, counted whole: n1 s1, complete at |20 -> @20-t
       [20,30): no event starts in it: nothing
       [30, min(39, 40)) = [30,39): *2 starts here; begins at the cut: n1 s2 -> @39-t at |40
    b: f = 25, first cut 40: [25, min(28, 40)) = [25,28) n1 s4, complete at |30 -> @28-t
    Output CTIs unchanged: 20, 30, 40.
    """
    s = Stream.create(
        "in",
        [
            Interval(M(2), M(35), KV("a", 1)),
            Cti(M(20)),
            tick_point(M(25), KV("b", 4)),
            Cti(M(30)),
            tick_point(M(36), KV("a", 2)),
            Cti(M(40)),
        ],
        EventShape.INTERVAL,
    )
    r = run(
        executor,
        s.group_by(lambda e: e.k).session(timedelta(minutes=3), timedelta(minutes=10)).aggregate(gstats),
    )
    check(
        r,
        [
            (M(20), [at(M(20) - TICK, GW("a", M(2), M(20), 1, 1))]),
            (M(30), [at(M(28) - TICK, GW("b", M(25), M(28), 1, 4))]),
            (M(40), [at(M(39) - TICK, GW("a", M(30), M(39), 1, 2))]),
        ],
    )


def test_grouped_sessions_are_per_key(executor: Any) -> None:
    """group_by(k).session(gap 5s), and the same input without grouping.

    t:  1   3   5     8  9  10   12    14   17   20
        a1  b2  a4       b8      a16
                      |8    |10                  |20
    a: 1, 5 (< 6 joins), 12 (< 10? no): [1,10) n2 s5, [12,17) n1 s16
    b: 3, 9 (< 8? no): [3,8) n1 s2, [9,14) n1 s8
    |8 completes b's [3,8) (@8-t); |10 a's [1,10) (@10-t); |20 the rest (@14-t, @17-t).
    Ungrouped: 3 < 6, 5 < 8, 9 < 10, 12 < 14: one session [1,17) n5 s31, @17-t at |20.
    Output CTIs unchanged: 8, 10, 20.
    """
    s = Stream.create(
        "in",
        [
            Point(T(1), KV("a", 1)),
            Point(T(3), KV("b", 2)),
            Point(T(5), KV("a", 4)),
            Cti(T(8)),
            Point(T(9), KV("b", 8)),
            Cti(T(10)),
            Point(T(12), KV("a", 16)),
            Cti(T(20)),
        ],
        EventShape.POINT,
    )
    r = run(executor, s.group_by(lambda e: e.k).session(sec(5)).aggregate(gstats))
    check(
        r,
        [
            (T(8), [at(T(8) - TICK, GW("b", T(3), T(8), 1, 2))]),
            (T(10), [at(T(10) - TICK, GW("a", T(1), T(10), 2, 5))]),
            (T(20), [at(T(14) - TICK, GW("b", T(9), T(14), 1, 8)), at(T(17) - TICK, GW("a", T(12), T(17), 1, 16))]),
        ],
    )
    ungrouped = run(executor, s.session(sec(5)).aggregate(wstats))
    check(ungrouped, [(T(8), []), (T(10), []), (T(20), [at(T(17) - TICK, W(T(1), T(17), 5, 31))])])


@pytest.mark.parametrize("stamp", [END, CTI], ids=stamp_id)
def test_session_open_edge_keeps_it_open_until_its_end_edge(executor: Any, stamp: WindowTimestamp) -> None:
    """session(gap 5s) over edges: an open edge is active for ever until it ends.

    t:  2          12  15   20  22       27-t   30
        a>>>>>>>>>>>>>>>>>>>>>>>)                  a ends at 22 (end edge after |20)
                   |12 *b   |20                 |30
    |12: were a a point, [2,7) would be complete; open, it keeps the session open.
    b at 15 joins (a is alive). |20: still open. a ends at 22: last tick 22-t, L = 22-t:
    session [2, 27-t) n2 s3, complete at |30: END @27-2t, CTI @30-t.
    Output CTIs unchanged: 12, 20, 30.
    """
    s = Stream.create(
        "in",
        [
            EdgeStart(T(2), V(1)),
            Cti(T(12)),
            *point_edges(T(15), V(2)),
            Cti(T(20)),
            EdgeEnd(T(2), T(22), V(1)),
            Cti(T(30)),
        ],
        EventShape.EDGE,
    )
    r = run(executor, s.session(sec(5)).aggregate(wstats, timestamp=stamp))
    stamped = T(27) - 2 * TICK if stamp is END else T(30) - TICK
    check(r, [(T(12), []), (T(20), []), (T(30), [at(stamped, W(T(2), T(27) - TICK, 2, 3))])])


def test_session_open_edge_at_the_flush_ends_after_the_latest_time_seen(executor: Any) -> None:
    """session(gap 5s): a>>@2 never ended, b [4,6), then the CTI at infinity.

    t:  2   4   6       11      INF
        a>>>>>>>>>>>>>>>>>>>>>>>>      never ended
            [b--)
                                |INF
    The latest finite time seen is 6 (b's end): a counts as [2, 6+t), last tick 6; b's last
    tick is 6-t; L = 6: session [2, 11) n2 s3, END @11-t, released at INF.
    """
    s = Stream.create(
        "in",
        [EdgeStart(T(2), V(1)), EdgeStart(T(4), V(2)), EdgeEnd(T(4), T(6), V(2)), Cti(INF)],
        EventShape.EDGE,
    )
    r = run(executor, s.session(sec(5)).aggregate(wstats))
    check(r, [(INF, [at(T(11) - TICK, W(T(2), T(11), 2, 3))])])


# --------------------------------------------------------------------------------------
# count windows
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("stamp", [None, LATEST, END, CTI], ids=stamp_id)
def test_count_window_ranks_by_start_then_payload_not_arrival(executor: Any, stamp: WindowTimestamp | None) -> None:
    """count_window(3): ranks by (start, payload, nulls first), whatever the arrival order.

    arrival: *@1 v5, *@2 v9, *@2 v4, |2, *@6 v2, *@2 None, *@5 v1, |5, *@8 v100, |7, |INF
    t:   1    2              5    6    7    8
         v5   None 4 9       v1   v2        v100
    ranks: r0 @1 v5 | r1 @2 None | r2 @2 v4 | r3 @2 v9 | r4 @5 v1 | r5 @6 v2 | r6 @8 v100
    window 0 = r0..r2: n3 s9 (None skipped), bounds [1, 2+t)  (by arrival it would be 5 9 4)
    window 1 = r3..r5: n3 s12, bounds [2, 6+t)   (@6 and @5 arrived before earlier starts)
    window 2 = r6 alone: never full, never emitted, not even at INF.
    complete at the first CTI > the last start: window 0 at |5 (|2 is not > 2: @2 None and
    @2 v4 were still to come), window 1 at |7.
    LATEST (default) = END: @2, @6; CTI: @5-t, @7-t. Output CTIs unchanged: 2, 5, 7, INF.
    """
    s = Stream.create(
        "in",
        [
            Point(T(1), NV(5)),
            Point(T(2), NV(9)),
            Point(T(2), NV(4)),
            Cti(T(2)),
            Point(T(6), NV(2)),
            Point(T(2), NV(None)),
            Point(T(5), NV(1)),
            Cti(T(5)),
            Point(T(8), NV(100)),
            Cti(T(7)),
            Cti(INF),
        ],
        EventShape.POINT,
    )
    r = run(executor, s.count_window(3).aggregate(wstats, timestamp=stamp))
    w0, w1 = W(T(1), T(2) + TICK, 3, 9), W(T(2), T(6) + TICK, 3, 12)
    t0, t1 = (T(5) - TICK, T(7) - TICK) if stamp is CTI else (T(2), T(6))
    check(r, [(T(2), []), (T(5), [at(t0, w0)]), (T(7), [at(t1, w1)]), (INF, [])])


def _flush_by_shutdown(items: list[Any]) -> Stream[V]:
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency=100, advance_to_infinity_on_shutdown=True))
    return Stream.create("in", items, EventShape.INTERVAL, settings)


def _flush_by_cti(items: list[Any]) -> Stream[V]:
    return Stream.create("in", [*items, Cti(INF)], EventShape.INTERVAL)


@pytest.mark.parametrize("flush", [_flush_by_shutdown, _flush_by_cti], ids=["shutdown", "cti-inf"])
def test_count_window_sliding_drops_the_trailing_partial_window(executor: Any, flush: Callable[[list[Any]], Stream[V]]) -> None:
    """count_window(3, slide=2): windows of ranks [0,3), [2,5), [4,7), ...

    t:  1   2                  3   4   5   6         20
        *1  [2=================*4==*8==*16=*32=======)
    ranks r0..r5 = @1 @2 @3 @4 @5 @6 (v 1 2 4 8 16 32)
    window 0 = r0 r1 r2: n3 s7, bounds [1, 3+t) (not the interval's end 20)
    window 1 = r2 r3 r4: n3 s28, bounds [3, 5+t)
    window 2 = r4 r5: only 2 events: never emitted, also not by the flush
    no CTI until the flush (advance_to_infinity_on_shutdown, or a Cti(INF) item):
    LATEST points @3, @5 released at INF.
    """
    items = [
        tick_point(T(1), V(1)),
        Interval(T(2), T(20), V(2)),
        tick_point(T(3), V(4)),
        tick_point(T(4), V(8)),
        tick_point(T(5), V(16)),
        tick_point(T(6), V(32)),
    ]
    r = run(executor, flush(items).count_window(3, slide=2).aggregate(wstats))
    check(r, [(INF, [at(T(3), W(T(1), T(3) + TICK, 3, 7)), at(T(5), W(T(3), T(5) + TICK, 3, 28))])])
    assert r.withheld is None


def test_grouped_count_window_slide_greater_than_size_skips_events(executor: Any) -> None:
    """group_by(k).count_window(2, slide=3): per key, ranks [0,2), [3,5), [6,8), ...

    t:  1   2   3   4    5    6    7   9   10  11   INF
        a1  b10 a2  b20  a3   b30  a4  a5      a6
                    |4   |5                |10      |INF
    a: r0 @1, r1 @3, (r2 @5 skipped), r3 @7, r4 @9, (r5 @11 skipped): [1,3+t) n2 s3 and
       [7,9+t) n2 s9; window 2 (r6, r7) never full.
    b: r0 @2, r1 @4, (r2 @6 skipped): [2,4+t) n2 s30.
    complete at the first CTI > the last start: a's first at |4, b's at |5, a's second at |10.
    LATEST points @3, @4, @9. Output CTIs unchanged: 4, 5, 10, INF.
    """
    s = Stream.create(
        "in",
        [
            Point(T(1), KV("a", 1)),
            Point(T(2), KV("b", 10)),
            Point(T(3), KV("a", 2)),
            Point(T(4), KV("b", 20)),
            Cti(T(4)),
            Point(T(5), KV("a", 3)),
            Cti(T(5)),
            Point(T(6), KV("b", 30)),
            Point(T(7), KV("a", 4)),
            Point(T(9), KV("a", 5)),
            Point(T(11), KV("a", 6)),
            Cti(T(10)),
            Cti(INF),
        ],
        EventShape.POINT,
    )
    r = run(executor, s.group_by(lambda e: e.k).count_window(2, slide=3).aggregate(gstats))
    check(
        r,
        [
            (T(4), [at(T(3), GW("a", T(1), T(3) + TICK, 2, 3))]),
            (T(5), [at(T(4), GW("b", T(2), T(4) + TICK, 2, 30))]),
            (T(10), [at(T(9), GW("a", T(7), T(9) + TICK, 2, 9))]),
            (INF, []),
        ],
    )


@pytest.mark.parametrize("slide", [3, 1])
def test_count_window_by_distinct_start_times_holds_every_event_of_its_starts(executor: Any, slide: int) -> None:
    """count_window(3, slide, by="starts"): StreamInsight's count of distinct start times
    (``CountByStartTimeWindow`` is slide 1): events with one start share a place, so a
    window may hold more than 3 events.

    arrival: *@1 v1, *@2 v2, |3, *@5 v5, *@4 v4, |6, *@8 v80, *@8 v8, |9, *@12 v12, |14
    distinct starts ranked: 1 r0 | 2 r1 | 4 r2 | 5 r3 | 8 r4 (v8, v80) | 12 r5
    slide 3: {1, 2, 4}: n3 s7 [1, 4+t) at |6;  {5, 8, 12}: n4 s105 [5, 12+t) at |14
    slide 1: {1, 2, 4} and {2, 4, 5} (n3 s11 [2, 5+t)) at |6; {4, 5, 8}: n4 s97 [4, 8+t) at |9;
             {5, 8, 12} at |14. (Counting events instead, {5, 8, 8} would close at |9.)
    A window goes out at the first CTI past its last start; points at it (LATEST).
    """
    s = Stream.create(
        "in",
        [
            Point(T(1), V(1)),
            Point(T(2), V(2)),
            Cti(T(3)),
            Point(T(5), V(5)),
            Point(T(4), V(4)),
            Cti(T(6)),
            Point(T(8), V(80)),
            Point(T(8), V(8)),
            Cti(T(9)),
            Point(T(12), V(12)),
            Cti(T(14)),
        ],
        EventShape.POINT,
    )
    r = run(executor, s.count_window(3, slide=slide, by="starts").aggregate(wstats))
    first, last = at(T(4), W(T(1), T(4) + TICK, 3, 7)), at(T(12), W(T(5), T(12) + TICK, 4, 105))
    if slide == 3:
        check(r, [(T(3), []), (T(6), [first]), (T(9), []), (T(14), [last])])
    else:
        second, third = at(T(5), W(T(2), T(5) + TICK, 3, 11)), at(T(8), W(T(4), T(8) + TICK, 4, 97))
        check(r, [(T(3), []), (T(6), [first, second]), (T(9), [third]), (T(14), [last])])


def test_count_window_by_refuses_what_it_does_not_count() -> None:
    s = Stream.create("in", [Point(T(1), V(1))], EventShape.POINT)
    with pytest.raises(tempo.QueryBuildError, match=r"by= counts 'events' or 'starts'"):
        s.count_window(3, by="rows")  # type: ignore[arg-type]
    assert "Count 3 start times slide 1" in s.count_window(3, slide=1, by="starts").aggregate(wstats).explain()


# --------------------------------------------------------------------------------------
# snapshot windows
# --------------------------------------------------------------------------------------

SNAP = [SW(T(1), 1, 1), SW(T(3), 2, 3), SW(T(5), 1, 2), SW(T(10), 1, 4)]
SNAP_END = [W(T(1), T(3), 1, 1), W(T(3), T(5), 2, 3), W(T(5), T(8), 1, 2), W(T(10), T(12), 1, 4)]

SNAPSHOT_STAMPS: dict[WindowTimestamp | None, list[Release]] = {
    None: [
        (T(2), [span(T(1), T(3), SNAP[0])]),
        (T(4), [span(T(3), T(5), SNAP[1])]),
        (T(9), [span(T(5), T(8), SNAP[2])]),
        (T(20), [span(T(10), T(12), SNAP[3])]),
    ],
    **{
        stamp: [
            (T(2), [at(T(1), SNAP[0])]),
            (T(4), [at(T(3), SNAP[1])]),
            (T(9), [at(T(5), SNAP[2])]),
            (T(20), [at(T(10), SNAP[3])]),
        ]
        for stamp in (START, EARLIEST, LATEST)
    },
    END: [  # the output CTI held a tick back: a window still open may end at the CTI
        (T(2) - TICK, []),
        (T(4) - TICK, [at(T(3) - TICK, SNAP_END[0])]),
        (T(9) - TICK, [at(T(5) - TICK, SNAP_END[1]), at(T(8) - TICK, SNAP_END[2])]),
        (T(20) - TICK, [at(T(12) - TICK, SNAP_END[3])]),
    ],
    CTI: [
        (T(2), []),
        (T(4), [at(T(4) - TICK, SNAP_END[0])]),
        (T(9), [at(T(9) - TICK, SNAP_END[1]), at(T(9) - TICK, SNAP_END[2])]),
        (T(20), [at(T(20) - TICK, SNAP_END[3])]),
    ],
}
SNAPSHOT_STAMPS[LIFETIME] = SNAPSHOT_STAMPS[None]


@pytest.mark.parametrize("stamp", list(SNAPSHOT_STAMPS), ids=stamp_id)
def test_snapshot_result_timestamps(executor: Any, stamp: WindowTimestamp | None) -> None:
    """snapshot() over intervals, with a stretch where nothing is alive.

    t:  1   2   3   4   5       8   9   10  12       20
        [a1-----------)
                [b2---------------)
                                        [c4-)
            |2      |4              |9               |20
    endpoints 1 3 5 8 10 12: [1,3) {a} n1 s1, [3,5) {a,b} n2 s3, [5,8) {b} n1 s2,
    [8,10) nothing alive: nothing, [10,12) {c} n1 s4.
    LIFETIME (default): start edge at the first CTI > p, end edge at the first CTI > q:
      [1,3) starts at |2, ends at |4; [3,5) starts at |4, ends at |9; [5,8) and [10,12)
      as intervals at |9 and |20.
    START / EARLIEST / LATEST: points @1 @3 @5 @10 at |2 |4 |9 |20 (payload without w.end).
    END: @3-t at |4, @5-t and @8-t at |9, @12-t at |20.
    CTI: @4-t at |4, @9-t twice at |9, @20-t at |20.
    Output CTIs unchanged: 2, 4, 9, 20; for END a tick earlier (a window still open at a CTI
    may end exactly there, and its last tick is the one before).
    """
    s = Stream.create(
        "in",
        [
            Interval(T(1), T(5), V(1)),
            Cti(T(2)),
            Interval(T(3), T(8), V(2)),
            Cti(T(4)),
            Cti(T(9)),
            Interval(T(10), T(12), V(4)),
            Cti(T(20)),
        ],
        EventShape.INTERVAL,
    )
    project = wstats if stamp in (END, CTI) else sstats
    r = run(executor, s.snapshot().aggregate(project, timestamp=stamp))
    check(r, SNAPSHOT_STAMPS[stamp])
    if stamp in (None, LIFETIME):
        check_raw_steps(
            executor,
            r,
            [
                ([("start", T(1), SNAP[0])], T(2)),
                ([("end", T(1), T(3), SNAP[0]), ("start", T(3), SNAP[1])], T(4)),
                ([("end", T(3), T(5), SNAP[1]), ("interval", T(5), T(8), SNAP[2])], T(9)),
                ([("interval", T(10), T(12), SNAP[3])], T(20)),
            ],
        )


def test_grouped_snapshot_with_an_open_edge(executor: Any) -> None:
    """group_by(k).snapshot() over edges; x stays open across two CTIs.

    t:  1   2   3   4   5   6   7       9       12
    a   x>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>)           x ends at 9 (end edge after |7)
    a           [y2-------)
    b       [z4---)
                        |5      |7              |12
    a: endpoints 1 3 6 (then 9): [1,3) {x} n1 s1, [3,6) {x,y} n2 s3, [6,9) {x} n1 s1
    b: endpoints 2 4: [2,4) {z} n1 s4
    |5: a [1,3) and b [2,4) as intervals; a [3,..) as a start edge (6 > 5: its end waits)
    |7: a [3,6) ended; a [6,..) starts (x alive at 6, its end unknown)
    x ends at 9 -> |12: a [6,9) ended. Output CTIs unchanged: 5, 7, 12.
    """
    x, y, z = KV("a", 1), KV("a", 2), KV("b", 4)
    s = Stream.create(
        "in",
        [
            EdgeStart(T(1), x),
            EdgeStart(T(2), z),
            EdgeEnd(T(2), T(4), z),
            EdgeStart(T(3), y),
            EdgeEnd(T(3), T(6), y),
            Cti(T(5)),
            Cti(T(7)),
            EdgeEnd(T(1), T(9), x),
            Cti(T(12)),
        ],
        EventShape.EDGE,
    )
    r = run(executor, s.group_by(lambda e: e.k).snapshot().aggregate(gsstats))
    a1, a2, a3, b1 = GS("a", T(1), 1, 1), GS("a", T(3), 2, 3), GS("a", T(6), 1, 1), GS("b", T(2), 1, 4)
    check(
        r,
        [
            (T(5), [span(T(1), T(3), a1), span(T(3), T(6), a2), span(T(2), T(4), b1)]),
            (T(7), [span(T(6), T(9), a3)]),
            (T(12), []),
        ],
    )
    check_raw_steps(
        executor,
        r,
        [
            ([("interval", T(1), T(3), a1), ("start", T(3), a2), ("interval", T(2), T(4), b1)], T(5)),
            ([("end", T(3), T(6), a2), ("start", T(6), a3)], T(7)),
            ([("end", T(6), T(9), a3)], T(12)),
        ],
    )


# --------------------------------------------------------------------------------------
# timestamps a window kind does not allow
# --------------------------------------------------------------------------------------


def _kv_points() -> Stream[KV]:
    return Stream.create("in", [Point(T(1), KV("a", 1)), Cti(T(10))], EventShape.POINT)


def _snapshot_with_end(w: tempo.Window[KV]) -> W:
    return W(start=w.start, end=w.end, n=w.count(), total=w.sum(lambda e: e.v))


def _grouped_snapshot_with_end(k: str, w: tempo.Window[KV]) -> GW:
    return GW(k=k, start=w.start, end=w.end, n=w.count(), total=w.sum(lambda e: e.v))


Build = Callable[[Stream[KV], WindowTimestamp | None], Any]

BUILDS: dict[str, tuple[Build, Build]] = {  # (ungrouped, grouped)
    "session": (
        lambda s, t: s.session(sec(5)).aggregate(wstats, timestamp=t),
        lambda s, t: s.group_by(lambda e: e.k).session(sec(5)).aggregate(gstats, timestamp=t),
    ),
    "count": (
        lambda s, t: s.count_window(2).aggregate(wstats, timestamp=t),
        lambda s, t: s.group_by(lambda e: e.k).count_window(2).aggregate(gstats, timestamp=t),
    ),
    "snapshot-with-end": (
        lambda s, t: s.snapshot().aggregate(_snapshot_with_end, timestamp=t),
        lambda s, t: s.group_by(lambda e: e.k).snapshot().aggregate(_grouped_snapshot_with_end, timestamp=t),
    ),
    "snapshot-without-end": (
        lambda s, t: s.snapshot().aggregate(sstats, timestamp=t),
        lambda s, t: s.group_by(lambda e: e.k).snapshot().aggregate(gsstats, timestamp=t),
    ),
}

REFUSED: dict[str, set[WindowTimestamp | None]] = {
    "session": {LIFETIME, START, LATEST, EARLIEST},
    "count": {LIFETIME, START, EARLIEST},
    "snapshot-with-end": {None, LIFETIME, START, EARLIEST, LATEST},  # the end is not known when it goes out
    "snapshot-without-end": set(),
}


@pytest.mark.parametrize("stamp", [None, *WindowTimestamp], ids=stamp_id)
@pytest.mark.parametrize("kind", list(BUILDS))
def test_timestamps_each_window_kind_allows(kind: str, stamp: WindowTimestamp | None) -> None:
    """aggregate() raises QueryBuildError for a timestamp the kind does not allow, grouped or
    not: sessions only END (default) and CTI; count windows only LATEST (default), END and
    CTI; snapshot windows all, but w.end only with END and CTI. The others build."""
    for build in BUILDS[kind]:
        if stamp in REFUSED[kind]:
            with pytest.raises(QueryBuildError):
                build(_kv_points(), stamp)
        else:
            assert isinstance(build(_kv_points(), stamp), Stream)


@pytest.mark.parametrize("stamp", [LIFETIME, END, CTI], ids=stamp_id)
@pytest.mark.parametrize("more", [True, False], ids=["later_cti", "last_cti"])
def test_snapshot_end_learned_after_the_cti_at_it(executor: Any, stamp: WindowTimestamp, more: bool) -> None:
    """An event starting exactly at a CTI may arrive after it: a snapshot's end is final
    only at a CTI after it, and a window stamped END is held a tick back.

    t:  1   2   3   4   5   6       7
        [a1-------------------)        a [1,6), known at |4
                    [b1---)            b [4,5), arrives after |4
                    |4          |7 (more)
    At |4 the window [1, ?) has a known next endpoint 6 > 4: its start edge goes out, its end
    waits. b then makes it [1,4), with [4,5) {a,b} and [5,6) {a} after it.
    With |7: [1,4) ends at |7 (4 < 7), and so do the others (5, 6 < 7). LIFETIME: intervals;
    END: points at 4-, 5-, 6- released by the output CTI 7- (at |4 the output CTI was 4-,
    so 4- is not before it); CTI: all at 7-.
    Without |7: [1,4) stays open (LIFETIME: [1, INF)); END and CTI give nothing.
    """
    items: list[Any] = [Interval(T(1), T(6), V(1)), Cti(T(4)), Interval(T(4), T(5), V(1))] + ([Cti(T(7))] if more else [])
    s = Stream.create("in", items, EventShape.INTERVAL)
    project = wstats if stamp in (END, CTI) else sstats
    r = run(executor, s.snapshot().aggregate(project, timestamp=stamp))
    out_ctis = [T(4) - TICK, T(7) - TICK] if stamp is END else [T(4), T(7)]
    if not more:
        out_ctis = out_ctis[:1]
    if stamp is LIFETIME:
        releases = [(out_ctis[0], [span(T(1), T(4) if more else INF, SW(T(1), 1, 1))])]
        if more:
            releases.append((out_ctis[1], [span(T(4), T(5), SW(T(4), 2, 2)), span(T(5), T(6), SW(T(5), 1, 1))]))
    else:
        ws = [W(T(1), T(4), 1, 1), W(T(4), T(5), 2, 2), W(T(5), T(6), 1, 1)]
        stamps = [T(4) - TICK, T(5) - TICK, T(6) - TICK] if stamp is END else [T(7) - TICK] * 3
        releases = [(out_ctis[0], [])] + ([(out_ctis[1], [at(t, w) for t, w in zip(stamps, ws)])] if more else [])
    check(r, releases)


def test_a_session_gap_of_one_tick_is_refused() -> None:
    """An open edge may end at a CTI already passed; a session one tick after it would end
    there, and its result (at its last tick) come before that CTI."""
    s = Stream.create("in", [Point(T(1), V(1))], EventShape.POINT)
    with pytest.raises(QueryBuildError, match="at least 2 ticks"):
        s.session(TICK)
    s.session(2 * TICK)  # allowed


def test_list_fields_are_not_keys_operands_or_aggregated() -> None:
    @attrs.frozen
    class Bag:
        id: int
        tags: list[str]

    s = Stream.create("in", [Point(T(1), Bag(1, ["a"]))], EventShape.POINT)
    with pytest.raises(QueryBuildError, match="is a list field"):
        s.group_by(lambda b: b.tags)
    with pytest.raises(QueryBuildError, match="is a list field"):
        s.join(s, lambda a, b: a.tags == b.tags, lambda a, b: a)
    with pytest.raises(QueryBuildError, match="is a list field"):
        s.tumbling(sec(10)).aggregate(lambda w: V(w.max(lambda b: b.tags)))  # type: ignore[arg-type]


def test_ties_order_naive_and_aware_payload_times_in_memory() -> None:
    """Two events with one start whose payloads hold a naive against an aware datetime, which
    Python cannot order: count windows and order_by_time still rank them, by instant. (A field
    of values Python cannot order at all, ``Any`` or ``dict``, is refused when the query is
    built: docs/semantics.md 2.5.)"""
    from datetime import timezone

    @attrs.frozen
    class Odd:
        at: datetime
        extra: int

    naive, aware = datetime(2024, 1, 1, 0, 0, 2), datetime(2024, 1, 1, 0, 0, 1, tzinfo=timezone.utc)
    items = [Point(T(1), Odd(naive, 1)), Point(T(1), Odd(aware, 2)), Cti(T(2))]
    s = Stream.create("in", items, EventShape.POINT)
    ordered = tempo.InMemoryExecutor().run(s.order_by_time())
    assert [e.payload.extra for e in ordered.events] == [2, 1]
    counted = tempo.InMemoryExecutor().run(s.count_window(2).aggregate(lambda w: V(w.count())))
    assert [e.payload for e in counted.events] == [V(2)]
