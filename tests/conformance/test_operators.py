"""Hand-written timeline tests for every operator and its CTI rule, on every executor.

Every expectation is derived by hand from ``docs/semantics.md`` / the node docstrings in
``tempo/plan/nodes.py``; each test carries a small timeline. Conventions:

* ``T(s)`` is 2024-01-01 00:00:00 plus ``s`` seconds (naive, so results are naive too;
  2024-01-01 is a multiple of every window size used here since the epoch, so windows of
  10 s start at ``T(0)``, ``T(10)``, ...).
* Inputs carry explicit ``Cti`` items (``settings=None``) unless a test says otherwise.
  Without ``arrival``, inputs are processed one after another in declaration order.
* A point at ``t`` has lifetime ``[t, t + 1 tick)``; ``INF`` is naive ``datetime.max``.
* The query output releases an event only once an output CTI is past its start.

Timeline legend: ``[---)`` an interval, ``*`` a point, ``|c`` a CTI at c, ``>>`` an open edge.

Conformance tests: each test runs its queries on the ``executor`` fixture (every executor).
Released events are compared as a multiset everywhere and in order on executors promising
``Capability.RAW_ITEMS`` (``same_items``; today the in-memory one); ``result.raw`` item by
item is the reference's own representation (the Spark executor lists the inserts in start
order, then the CTIs, and may show an edge pair as one interval), so ``check_raw`` compares
it where ``RAW_ITEMS`` is promised and checks what it describes (events and CTIs) on every
executor, and tests of a raw detail alone are marked ``needs(Capability.RAW_ITEMS)``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest

import tempo
from tempo import (
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
    TICK,
    TraceError,
)
from tests.conformance.compare import check_result, same_items
from tests.conftest import Capability, promises

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------

BASE = datetime(2024, 1, 1)
INF = datetime.max  # naive infinity: every input here is naive
S = timedelta(seconds=1)


def T(s: float) -> datetime:
    """Application time: BASE + s seconds."""
    return BASE + timedelta(seconds=s)


def A(s: float) -> datetime:
    """Arrival time (only orders items across inputs)."""
    return datetime(2024, 6, 1) + timedelta(seconds=s)


def sec(n: float) -> timedelta:
    return timedelta(seconds=n)


def pt(s: float, payload: Any) -> tuple[datetime, datetime, Any]:
    """The expected output event of a point at s."""
    return (T(s), T(s) + TICK, payload)


def iv(s: float, e: float | None, payload: Any) -> tuple[datetime, datetime, Any]:
    """The expected output event [s, e) (e=None: never closed, end INF)."""
    return (T(s), INF if e is None else T(e), payload)


def run(executor: Any, stream: Stream[Any]) -> tempo.Result[Any]:
    result: tempo.Result[Any] = executor.run(stream)
    assert isinstance(result, tempo.Result)
    check_result(result)
    times = [*result.ctis, *(t for e in result.events for t in (e.start, e.end))]
    assert all(t.tzinfo is None for t in times), "naive inputs give naive results"
    if promises(executor, Capability.RAW_ITEMS):  # the contract on raw as the reference interleaves it
        check_contract(result)
    return result


def evs(result: tempo.Result[Any]) -> list[tuple[datetime, datetime, Any]]:
    return [(e.start, e.end, e.payload) for e in result.events]


def key(ev: tuple[datetime, datetime, Any]) -> tuple[datetime, datetime, str]:
    return (ev[0], ev[1], repr(ev[2]))


def sorted_evs(result: tempo.Result[Any]) -> list[tuple[datetime, datetime, Any]]:
    """Events in a canonical order, for releases whose order within one CTI is not specified."""
    return sorted(evs(result), key=key)


def norm_raw(result: tempo.Result[Any]) -> list[tuple[Any, ...]]:
    """result.raw without arrival fields, as readable tuples."""
    out: list[tuple[Any, ...]] = []
    for item in result.raw:
        if isinstance(item, Cti):
            out.append(("cti", item.timestamp))
        elif isinstance(item, Point):
            out.append(("point", item.start, item.payload))
        elif isinstance(item, Interval):
            out.append(("interval", item.start, item.end, item.payload))
        elif isinstance(item, EdgeStart):
            out.append(("start", item.start, item.payload))
        elif isinstance(item, EdgeEnd):
            out.append(("end", item.start, item.end, item.payload))
        else:  # pragma: no cover - reported by check_contract
            out.append(("?", item))
    return out


def check_raw(executor: Any, result: tempo.Result[Any], expected: list[tuple[Any, ...]]) -> None:
    """``result.raw`` is ``expected`` (``norm_raw`` tuples) on executors promising
    ``RAW_ITEMS``; on every executor the events and CTIs it describes are those of ``expected``."""
    if promises(executor, Capability.RAW_ITEMS):
        assert norm_raw(result) == expected
    assert sorted_evs(result) == sorted(described(expected), key=key)
    assert result.ctis == [t[1] for t in expected if t[0] == "cti"]


def described(raw: list[tuple[Any, ...]]) -> list[tuple[datetime, datetime, Any]]:
    """The events that ``norm_raw`` tuples describe, edges coalesced."""
    items: list[Any] = []
    for t in raw:
        kind, rest = t[0], t[1:]
        if kind == "point":
            items.append(Point(rest[0], rest[1]))
        elif kind == "interval":
            items.append(Interval(*rest))
        elif kind == "start":
            items.append(EdgeStart(*rest))
        elif kind == "end":
            items.append(EdgeEnd(*rest))
    return coalesce(items)


def coalesce(raw: list[Any]) -> list[tuple[datetime, datetime, Any]]:
    """The events a raw item sequence describes, in insert order, edges coalesced."""
    out: list[list[Any]] = []
    open_edges: dict[tuple[datetime, Any], list[int]] = {}
    for item in raw:
        if isinstance(item, Point):
            out.append([item.start, item.start + TICK, item.payload])
        elif isinstance(item, Interval):
            out.append([item.start, item.end, item.payload])
        elif isinstance(item, EdgeStart):
            open_edges.setdefault((item.start, item.payload), []).append(len(out))
            out.append([item.start, INF, item.payload])
        elif isinstance(item, EdgeEnd):
            out[open_edges[(item.start, item.payload)].pop(0)][1] = item.end
    return [(s, e, p) for s, e, p in out]


def check_contract(result: tempo.Result[Any]) -> None:
    """The emission contract, on result.raw, plus consistency of events/ctis with raw.

    * CTIs strictly increase;
    * no insert starts before a CTI already released;
    * an end edge ends at or after the CTI in force and closes an open start edge;
    * every released insert is followed by a CTI past its start (the query output releases
      an event only once an output CTI is past its start, and before forwarding that CTI);
    * result.ctis are the raw CTIs; result.events are the raw inserts, edges coalesced;
    * every datetime is naive (all inputs in this module are naive).
    """
    cti: datetime | None = None
    pending: list[tuple[int, datetime]] = []
    open_edges: dict[tuple[datetime, Any], int] = {}
    for i, item in enumerate(result.raw):
        if isinstance(item, Cti):
            assert item.timestamp.tzinfo is None, f"raw #{i}: aware CTI {item}"
            assert cti is None or item.timestamp > cti, f"raw #{i}: CTI {item.timestamp} not after {cti}"
            for j, start in pending:
                assert start < item.timestamp, f"raw #{j} (start {start}) released by CTI {item.timestamp}, not past its start"
            pending = []
            cti = item.timestamp
        elif isinstance(item, (Point, Interval, EdgeStart)):
            assert item.start.tzinfo is None, f"raw #{i}: aware start {item}"
            assert cti is None or item.start >= cti, f"raw #{i}: {item} starts before the released CTI {cti}"
            if isinstance(item, Interval):
                assert item.end > item.start, f"raw #{i}: empty interval {item}"
            if isinstance(item, EdgeStart):
                k = (item.start, item.payload)
                open_edges[k] = open_edges.get(k, 0) + 1
            pending.append((i, item.start))
        elif isinstance(item, EdgeEnd):
            assert cti is None or item.end >= cti, f"raw #{i}: end edge {item} ends before the CTI in force {cti}"
            assert item.end > item.start, f"raw #{i}: end edge {item} does not end after its start"
            k = (item.start, item.payload)
            assert open_edges.get(k, 0) > 0, f"raw #{i}: end edge {item} without an open start edge"
            open_edges[k] -= 1
        else:
            raise AssertionError(f"raw #{i}: unexpected item {item!r}")
    assert not pending, f"raw inserts {pending} released without a later CTI past their start"
    assert result.ctis == [c.timestamp for c in result.raw if isinstance(c, Cti)]
    assert evs(result) == coalesce(list(result.raw))
    for s, e, _ in evs(result):
        assert s.tzinfo is None and e.tzinfo is None


# --------------------------------------------------------------------------------------
# payload classes
# --------------------------------------------------------------------------------------


@attrs.frozen
class V:
    v: int


@attrs.frozen
class KV:
    k: str
    v: int


@attrs.frozen
class KJV:
    k: str
    j: int
    v: int


@attrs.frozen
class NV:
    v: int | None


@attrs.frozen
class X:
    name: str
    x: int | None


@attrs.frozen
class Num:
    i: int
    f: float


@attrs.frozen
class Arith:
    a: int
    b: float
    c: float
    d: int
    m: int
    g: float
    n: int
    ab: int


@attrs.frozen
class Labelled:
    name: str
    size: str
    tag: str
    x: int | None


@attrs.frozen
class Stats:
    start: datetime
    end: datetime
    n: int
    total: int | None
    mean: float | None
    lo: int | None
    hi: int | None


@attrs.frozen
class Count:
    n: int
    total: int | None


@attrs.frozen
class Twice:
    n1: int
    n2: int
    s1: int | None
    s2: int | None


@attrs.frozen
class GStats:
    k: str
    n: int
    total: int | None


@attrs.frozen
class TStats:
    k: str
    j: int
    n: int


@attrs.frozen
class L:
    id: int
    a: str


@attrs.frozen
class R:
    id: int
    b: str


@attrs.frozen
class J:
    id: int
    a: str
    b: str


@attrs.frozen
class LV:
    id: int
    v: int


@attrs.frozen
class RV:
    id: int
    v: int


@attrs.frozen
class Pair:
    l: int
    r: int


def stats(w: tempo.Window[V]) -> Stats:
    return Stats(
        start=w.start,
        end=w.end,
        n=w.count(),
        total=w.sum(lambda e: e.v),
        mean=w.avg(lambda e: e.v),
        lo=w.min(lambda e: e.v),
        hi=w.max(lambda e: e.v),
    )


def count(w: tempo.Window[V]) -> Count:
    return Count(n=w.count(), total=w.sum(lambda e: e.v))


def jsel(l: L, r: R) -> J:
    return J(id=l.id, a=l.a, b=r.b)


# --------------------------------------------------------------------------------------
# where / select
# --------------------------------------------------------------------------------------


def test_where_keeps_lifetimes_and_ctis_and_drops_null(executor: Any) -> None:
    """where(x > 2) on intervals; a null x is false.

    t:   0    1    2    3    4    5    6    7    8    9    10
    a        [x=1-----------)                                  dropped (1 > 2 false)
    b             [x=5-----------)                             kept [2,5)
    CTI                 |3
    c                        [x=None------)                    dropped (null)
    d                             [x=7---------------)         kept [5,9)
    CTI                                |6
    e                                            [x=9---)      kept, never released (8 >= last CTI 6)
    out: b [2,5), d [5,9); CTIs 3, 6 unchanged
    """
    a, b, c, d, e = X("a", 1), X("b", 5), X("c", None), X("d", 7), X("e", 9)
    s = Stream.create(
        "in",
        [
            Interval(T(1), T(4), a),
            Interval(T(2), T(5), b),
            Cti(T(3)),
            Interval(T(4), T(7), c),
            Interval(T(5), T(9), d),
            Cti(T(6)),
            Interval(T(8), T(10), e),
        ],
        EventShape.INTERVAL,
    )
    r = run(executor, s.where(lambda e: e.x > 2))
    same_items(executor, evs(r), [iv(2, 5, b), iv(5, 9, d)])
    assert r.ctis == [T(3), T(6)]
    check_raw(executor, r, [("interval", T(2), T(5), b), ("cti", T(3)), ("interval", T(5), T(9), d), ("cti", T(6))])
    assert r.payloads() == [b, d]


WHERE_DATA = [X("a", 1), X("b", 5), X("c", None), X("d", 7)]


def _upper_in_ad(name: str) -> bool:
    return name.upper() in ("A", "D")


def _is_none(value: int | None) -> bool:
    return value is None


@pytest.mark.parametrize(
    ("predicate", "kept"),
    [
        (lambda e: e.x > 2, "bd"),
        (lambda e: e.x != 5, "ad"),  # null != 5 is null: dropped
        (lambda e: e.x * 2 + 1 > 10, "bd"),  # 3, 11, null, 15
        (lambda e: tempo.is_in(e.name, ["a", "c"]), "ac"),
        (lambda e: tempo.not_(e.name == "a"), "bcd"),
        (lambda e: ~(e.name == "a"), "bcd"),
        (lambda e: tempo.col("x") >= 5, "bd"),
        (lambda e: (e.x > 2) & (e.name != "d"), "b"),
        (lambda e: (e.x < 2) | (e.name == "c"), "ac"),
        # when(null cond) takes the otherwise branch
        (lambda e: tempo.when(e.x > 2, e.name == "d", e.name == "c"), "cd"),
        (lambda e: tempo.udf(_upper_in_ad, returns=bool)(e.name), "ad"),
        # section 7 of docs/semantics.md: ~null, not_(null), is_in(null, ...), x == null are null
        (lambda e: ~(e.x > 2), "a"),
        (lambda e: tempo.not_(e.x > 2), "a"),
        (lambda e: tempo.is_in(e.x, [1, 7]), "ad"),
        (lambda e: ~tempo.is_in(e.x, [1, 7]), "b"),
        (lambda e: e.x == tempo.lit(None), ""),  # traced: null, not true (`e.x == None` is a TraceError)
        (lambda e: (e.x > 100) & (e.name == "c"), ""),  # null & true is null
        (lambda e: (e.x > 100) | (e.name == "c"), "c"),  # null | true is true
        (lambda e: tempo.try_divide(e.x, e.x - 5) > 0, "d"),  # 1/-4 < 0; try_divide(5, 0) is null; null; 7/2 > 0
        (lambda e: tempo.udf(_is_none, returns=bool)(e.x), "c"),  # udfs receive None as is
    ],
    ids=[
        "gt",
        "ne-null",
        "arith",
        "is_in",
        "not_",
        "invert",
        "col",
        "and",
        "or",
        "when",
        "udf",
        "invert-null",
        "not_-null",
        "is_in-null",
        "not-is_in-null",
        "eq-none",
        "and-null",
        "or-null",
        "div-zero",
        "udf-none",
    ],
)
def test_where_expressions(executor: Any, predicate: Callable[[X], bool], kept: str) -> None:
    """Points a(x=1)@1, b(x=5)@2, c(x=None)@3, d(x=7)@4, then |10; CTIs unchanged."""
    s = Stream.create("in", [*(Point(T(i + 1), p) for i, p in enumerate(WHERE_DATA)), Cti(T(10))], EventShape.POINT)
    r = run(executor, s.where(predicate))
    by_name = {p.name: (i + 1, p) for i, p in enumerate(WHERE_DATA)}
    same_items(executor, evs(r), [pt(*by_name[n]) for n in kept])
    assert r.ctis == [T(10)]


def test_where_dropping_everything_still_forwards_ctis(executor: Any) -> None:
    """* x=1 @1, |2, * x=1 @3, |4 -> where(x > 5): no events, CTIs 2, 4."""
    s = Stream.create("in", [Point(T(1), X("a", 1)), Cti(T(2)), Point(T(3), X("b", 1)), Cti(T(4))], EventShape.POINT)
    r = run(executor, s.where(lambda e: e.x > 5))
    assert r.events == []
    assert r.ctis == [T(2), T(4)]


def test_select_builds_new_record_with_arithmetic(executor: Any) -> None:
    """select to Arith: int/float arithmetic; point lifetimes and CTIs unchanged.

    t:  1        2   3        5
        *(7,1.5) |2  *(4,.25) |5
    i=7, f=1.5:  a=15 b=10.5 c=3.5 d=3 m=1 g=-5.5  n=-7 ab=3
    i=4, f=0.25: a=9  b=1.0  c=2.0 d=2 m=1 g=-3.75 n=-4 ab=6
    """
    s = Stream.create("in", [Point(T(1), Num(7, 1.5)), Cti(T(2)), Point(T(3), Num(4, 0.25)), Cti(T(5))], EventShape.POINT)
    out = s.select(
        lambda e: Arith(
            a=e.i * 2 + 1,
            b=e.f * e.i,
            c=e.i / 2,
            d=e.i // 2,
            m=e.i % 3,
            g=e.f - e.i,
            n=-e.i,
            ab=abs(e.i - 10),
        )
    )
    assert out.payload_type is Arith
    r = run(executor, out)
    first = Arith(a=15, b=10.5, c=3.5, d=3, m=1, g=-5.5, n=-7, ab=3)
    second = Arith(a=9, b=1.0, c=2.0, d=2, m=1, g=-3.75, n=-4, ab=6)
    same_items(executor, evs(r), [pt(1, first), pt(3, second)])
    assert all(type(p) is Arith for p in r.payloads())
    assert type(r.payloads()[0].c) is float  # int / int is a float
    assert r.ctis == [T(2), T(5)]
    check_raw(executor, r, [("point", T(1), first), ("cti", T(2)), ("point", T(3), second), ("cti", T(5))])


def _tag(name: str, x: int) -> str:
    return f"{name}:{x}"


def test_select_with_when_udf_col(executor: Any) -> None:
    """select with tempo.when / tempo.udf / tempo.col on intervals; lifetimes unchanged.

    t: 0   1   2   3   4   5
       [a x=1-----)            -> small, "a:1"
           [b x=5---------)    -> big,   "b:5"
                       |5
    """
    s = Stream.create(
        "in",
        [Interval(T(0), T(3), X("a", 1)), Interval(T(1), T(5), X("b", 5)), Cti(T(5))],
        EventShape.INTERVAL,
    )
    r = run(
        executor,
        s.select(
            lambda e: Labelled(
                name=e.name,
                size=tempo.when(e.x > 2, "big", "small"),
                tag=tempo.udf(_tag, returns=str)(e.name, e.x),
                x=tempo.col("x"),
            )
        ),
    )
    same_items(
        executor,
        evs(r),
        [
            iv(0, 3, Labelled("a", "small", "a:1", 1)),
            iv(1, 5, Labelled("b", "big", "b:5", 5)),
        ],
    )
    assert r.ctis == [T(5)]


def test_where_select_on_edges_keep_edges(executor: Any) -> None:
    """where/select pass edges through: a start edge stays open until its end edge.

    t: 1        2    3           6        8
       a>>>>>>>>>>>>>>>>>>>>>>>>>)            a: [1,6)
                |2
                     b>>>>>>>>>>>>>>>>>>>>>>  b: open (never ended)
                                          |8
    """
    a, b = V(1), V(2)
    s = Stream.create(
        "in",
        [EdgeStart(T(1), a), Cti(T(2)), EdgeStart(T(3), b), EdgeEnd(T(1), T(6), a), Cti(T(8))],
        EventShape.EDGE,
    )
    r = run(executor, s.where(lambda e: e.v > 0).select(lambda e: V(v=e.v * 10)))
    same_items(executor, evs(r), [iv(1, 6, V(10)), iv(3, None, V(20))])
    assert r.ctis == [T(2), T(8)]


# --------------------------------------------------------------------------------------
# shift_event_time / alter_event_lifetime / alter_event_duration
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("shift", [5, -1])
def test_shift_event_time_moves_events_and_ctis(executor: Any, shift: int) -> None:
    """Intervals [1,3) and [4,6) with CTIs 2 and 10, shifted by `shift` seconds.

    t:    1    2    3    4    5    6        10
          [a------)
               |2
                         [b------)
                                            |10
    +5:  a [6,8), b [9,11), CTIs 7, 15     -1: a [0,2), b [3,5), CTIs 1, 9
    """
    a, b = V(1), V(2)
    s = Stream.create("in", [Interval(T(1), T(3), a), Cti(T(2)), Interval(T(4), T(6), b), Cti(T(10))], EventShape.INTERVAL)
    r = run(executor, s.shift_event_time(sec(shift)))
    same_items(executor, evs(r), [iv(1 + shift, 3 + shift, a), iv(4 + shift, 6 + shift, b)])
    assert r.ctis == [T(2 + shift), T(10 + shift)]


def shifted_open_edge(executor: Any) -> tempo.Result[Any]:
    """shift +10: an open edge stays open; the CTI at infinity stays at infinity.

    t:  2      3     4      6      8     INF
        a>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>     never ended
               |3
                     b[------)                   b: [4,6)
                                   |8    |INF
    out: a [12, INF), b [14,16); CTIs 13, 18, INF
    """
    a, b = V(1), V(2)
    s = Stream.create(
        "in",
        [
            EdgeStart(T(2), a),
            Cti(T(3)),
            EdgeStart(T(4), b),
            EdgeEnd(T(4), T(6), b),
            Cti(T(8)),
            Cti(INF),
        ],
        EventShape.EDGE,
    )
    return run(executor, s.shift_event_time(sec(10)))


def test_shift_event_time_open_edge_stays_open(executor: Any) -> None:
    r, (a, b) = shifted_open_edge(executor), (V(1), V(2))
    same_items(executor, evs(r), [iv(12, None, a), iv(14, 16, b)])
    assert r.ctis == [T(13), T(18), INF]


@pytest.mark.needs(Capability.RAW_ITEMS)
def test_shift_event_time_open_edge_stays_an_edge_in_raw(executor: Any) -> None:
    assert norm_raw(shifted_open_edge(executor))[:2] == [("start", T(12), V(1)), ("cti", T(13))]


def test_alter_event_lifetime_shift_and_duration(executor: Any) -> None:
    """alter_event_lifetime(shift=2s, duration=3s): start+2, end = new start+3, CTIs +2.

    t:  1  2  3  4          10      12
        [a-)  |3
                 [b---------)
                                    |12
    out: a [3,6), b [6,9); CTIs 5, 14
    """
    a, b = V(1), V(2)
    s = Stream.create("in", [Interval(T(1), T(2), a), Cti(T(3)), Interval(T(4), T(10), b), Cti(T(12))], EventShape.INTERVAL)
    r = run(executor, s.alter_event_lifetime(sec(2), sec(3)))
    same_items(executor, evs(r), [iv(3, 6, a), iv(6, 9, b)])
    assert r.ctis == [T(5), T(14)]


def test_alter_event_lifetime_of_points_with_negative_shift(executor: Any) -> None:
    """Points at 5 and 8, CTI 6 and 10; shift -2s, duration 4s -> [3,7), [6,10); CTIs 4, 8."""
    a, b = V(1), V(2)
    s = Stream.create("in", [Point(T(5), a), Cti(T(6)), Point(T(8), b), Cti(T(10))], EventShape.POINT)
    r = run(executor, s.alter_event_lifetime(sec(-2), sec(4)))
    same_items(executor, evs(r), [iv(3, 7, a), iv(6, 10, b)])
    assert r.ctis == [T(4), T(8)]


def test_a_duration_longer_than_all_time_saturates(executor: Any) -> None:
    """``timedelta.max`` (longer than from datetime.min to infinity, and than a long of ticks):
    every lifetime reaches infinity; shifted that far forward, every event passes infinity and
    is gone."""
    items: list[Any] = [Interval(T(1), T(1) + TICK, V(1)), Interval(T(2), T(5), V(2)), Cti(INF)]
    s = Stream.create("in", items, EventShape.INTERVAL)
    assert sorted_evs(run(executor, s.alter_event_duration(timedelta.max))) == [(T(1), INF, V(1)), (T(2), INF, V(2))]
    assert evs(run(executor, s.shift_event_time(timedelta.max))) == []


def test_alter_event_duration_intervals_and_points(executor: Any) -> None:
    """alter_event_duration(3s): end = start + 3s, CTIs unchanged.

    t:  1                  5   6  7          12
        [a-----------------|---------)          a [1,10) -> [1,4)
                           |5
                               [b)               b [6,7)  -> [6,9)
                                             |12
    """
    a, b = V(1), V(2)
    s = Stream.create("in", [Interval(T(1), T(10), a), Cti(T(5)), Interval(T(6), T(7), b), Cti(T(12))], EventShape.INTERVAL)
    r = run(executor, s.alter_event_duration(sec(3)))
    same_items(executor, evs(r), [iv(1, 4, a), iv(6, 9, b)])
    assert r.ctis == [T(5), T(12)]

    p = Stream.create("p", [Point(T(1), a), Cti(T(2))], EventShape.POINT)
    rp = run(executor, p.alter_event_duration(sec(3)))
    same_items(executor, evs(rp), [iv(1, 4, a)])
    check_raw(executor, rp, [("interval", T(1), T(4), a), ("cti", T(2))])


def test_alter_event_duration_turns_open_edge_into_interval(executor: Any) -> None:
    """An open edge gets its end at once (start + 3s); its later end edge is ignored.

    t:  2    3            6                    10      20
        a>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>)     end edge at 20 ignored
             |3
                          b>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>> never ended
                                               |10
    out: a [2,5), b [6,9) as intervals; CTIs 3, 10
    """
    a, b = V(1), V(2)
    s = Stream.create(
        "in",
        [EdgeStart(T(2), a), Cti(T(3)), EdgeEnd(T(2), T(20), a), EdgeStart(T(6), b), Cti(T(10))],
        EventShape.EDGE,
    )
    r = run(executor, s.alter_event_duration(sec(3)))
    same_items(executor, evs(r), [iv(2, 5, a), iv(6, 9, b)])
    assert r.ctis == [T(3), T(10)]
    check_raw(
        executor,
        r,
        [
            ("interval", T(2), T(5), a),
            ("cti", T(3)),
            ("interval", T(6), T(9), b),
            ("cti", T(10)),
        ],
    )


# --------------------------------------------------------------------------------------
# tumbling / hopping windows
# --------------------------------------------------------------------------------------


def test_tumbling_aggregates_membership_and_ctis(executor: Any) -> None:
    """tumbling(10s) with every aggregate and the window bounds in one record.

    t:  0  1   4   5      10   12       20     25      30
        |  *1  *2                                          [0,10):  *1 *2 [5,10)=3
               [3--)                                                  -> n3 sum6 avg2.0 min1 max3
                      *5@10 *3@12                          [10,20): *5 *3 -> n2 sum8 avg4.0 min3 max5
                          |15                              (point at 10 is in [10,20) only;
                                            *7@25           [5,10) ends where [10,20) starts)
                                                    |30    [20,30): *7 -> n1
    windows emitted once the CTI reaches their end; output CTI = start of earliest
    incomplete window: CTI 15 -> 10, CTI 30 -> 30.
    """

    def p(t: float, v: int) -> Interval[V]:  # a point-long interval [t, t + 1 tick)
        return Interval(T(t), T(t) + TICK, V(v))

    s = Stream.create(
        "in",
        [
            p(1, 1),
            p(4, 2),
            Interval(T(5), T(10), V(3)),
            p(10, 5),
            p(12, 3),
            Cti(T(15)),
            p(25, 7),
            Cti(T(30)),
        ],
        EventShape.INTERVAL,
    )
    r = run(executor, s.tumbling(sec(10)).aggregate(stats))
    w0 = Stats(T(0), T(10), 3, 6, 2.0, 1, 3)
    w1 = Stats(T(10), T(20), 2, 8, 4.0, 3, 5)
    w2 = Stats(T(20), T(30), 1, 7, 7.0, 7, 7)
    same_items(executor, evs(r), [iv(0, 10, w0), iv(10, 20, w1), iv(20, 30, w2)])
    assert r.ctis == [T(10), T(30)]
    check_raw(
        executor,
        r,
        [
            ("interval", T(0), T(10), w0),
            ("cti", T(10)),
            ("interval", T(10), T(20), w1),
            ("interval", T(20), T(30), w2),
            ("cti", T(30)),
        ],
    )
    assert all(type(out.mean) is float for out in r.payloads())


def test_tumbling_empty_windows_give_nothing(executor: Any) -> None:
    """* @1, * @35, |50 with tumbling(10s): only [0,10) and [30,40); CTI 50 (50 is a window start)."""
    s = Stream.create("in", [Point(T(1), V(1)), Point(T(35), V(2)), Cti(T(50))], EventShape.POINT)
    r = run(executor, s.tumbling(sec(10)).aggregate(count))
    same_items(executor, evs(r), [iv(0, 10, Count(1, 1)), iv(30, 40, Count(1, 2))])
    assert r.ctis == [T(50)]


def test_tumbling_cti_pulled_back_to_window_start(executor: Any) -> None:
    """Output CTI = min(c, start of the earliest window not yet complete), never repeated.

    t:   0   3  5   10  12 13 15 16   20  22    27   30
         |   |3 *       |12 *  |15 *   |20 *     |27
    in CTI:  3  -> earliest incomplete [0,10)  -> 0
            12  -> [0,10) complete, [10,20)    -> 10
            15  -> still [10,20)               -> 10 (not forwarded again)
            20  -> [10,20) complete            -> 20
            27  -> [20,30) incomplete          -> 20 (not forwarded again)
    windows: [0,10) n1 (emitted at 12), [10,20) n2 (emitted at 20), [20,30) never complete
    """
    s = Stream.create(
        "in",
        [
            Cti(T(3)),
            Point(T(5), V(1)),
            Cti(T(12)),
            Point(T(13), V(2)),
            Cti(T(15)),
            Point(T(16), V(3)),
            Cti(T(20)),
            Point(T(22), V(4)),
            Cti(T(27)),
        ],
        EventShape.POINT,
    )
    r = run(executor, s.tumbling(sec(10)).aggregate(count))
    assert r.ctis == [T(0), T(10), T(20)]
    check_raw(
        executor,
        r,
        [
            ("cti", T(0)),
            ("interval", T(0), T(10), Count(1, 1)),
            ("cti", T(10)),
            ("interval", T(10), T(20), Count(2, 5)),
            ("cti", T(20)),
        ],
    )


def test_tumbling_window_waits_for_cti_at_its_end(executor: Any) -> None:
    """* @1, |9: [0,10) not complete (out CTI 0); |10: complete -> emitted, out CTI 10."""
    s = Stream.create("in", [Point(T(1), V(1)), Cti(T(9)), Cti(T(10))], EventShape.POINT)
    r = run(executor, s.tumbling(sec(10)).aggregate(count))
    check_raw(executor, r, [("cti", T(0)), ("interval", T(0), T(10), Count(1, 1)), ("cti", T(10))])


def test_tumbling_interval_in_several_windows(executor: Any) -> None:
    """An interval [5,25) belongs to [0,10), [10,20), [20,30); each emitted as the CTI passes its end.

    t:  0    5    10  12     20  22     25   30
             [------------------------------)
                      |12        |22         |30
    out CTIs: 12 -> 10, 22 -> 20, 30 -> 30
    """
    s = Stream.create("in", [Interval(T(5), T(25), V(1)), Cti(T(12)), Cti(T(22)), Cti(T(30))], EventShape.INTERVAL)
    r = run(executor, s.tumbling(sec(10)).aggregate(count))
    c = Count(1, 1)
    check_raw(
        executor,
        r,
        [
            ("interval", T(0), T(10), c),
            ("cti", T(10)),
            ("interval", T(10), T(20), c),
            ("cti", T(20)),
            ("interval", T(20), T(30), c),
            ("cti", T(30)),
        ],
    )


def test_tumbling_offset(executor: Any) -> None:
    """tumbling(10s, offset=13s) == offset 3s: windows [-7,3), [3,13), [13,23), ...

    t:  -7   2  3  5       13  14      23  25
         [---*--)[-*--------)[--*-------)[--
                                            |25 -> earliest incomplete [23,33) -> out CTI 23
    """
    s = Stream.create("in", [Point(T(2), V(1)), Point(T(5), V(2)), Point(T(14), V(3)), Cti(T(25))], EventShape.POINT)
    for offset in (3, 13):
        r = run(executor, s.tumbling(sec(10), offset=sec(offset)).aggregate(count))
        same_items(executor, evs(r), [iv(-7, 3, Count(1, 1)), iv(3, 13, Count(1, 2)), iv(13, 23, Count(1, 3))])
        assert r.ctis == [T(23)]


def test_aggregates_skip_nulls_and_avg_is_float(executor: Any) -> None:
    """[0,10): v = 1, None, 3 -> count 3 (events), sum 4, avg 2.0 (float), min 1, max 3."""
    s = Stream.create("in", [Point(T(1), NV(1)), Point(T(2), NV(None)), Point(T(3), NV(3)), Cti(T(10))], EventShape.POINT)
    r = run(
        executor,
        s.tumbling(sec(10)).aggregate(
            lambda w: Stats(
                start=w.start,
                end=w.end,
                n=w.count(),
                total=w.sum(lambda e: e.v),
                mean=w.avg(lambda e: e.v),
                lo=w.min(lambda e: e.v),
                hi=w.max(lambda e: e.v),
            )
        ),
    )
    same_items(executor, evs(r), [iv(0, 10, Stats(T(0), T(10), 3, 4, 2.0, 1, 3))])
    assert type(r.payloads()[0].mean) is float
    assert r.ctis == [T(10)]


def test_avg_of_ints_is_a_float(executor: Any) -> None:
    """[0,10): v = 1, 2 -> avg 1.5; [10,20): v = 4 -> avg 4.0 (a float, not 4)."""
    s = Stream.create("in", [Point(T(1), V(1)), Point(T(2), V(2)), Point(T(14), V(4)), Cti(T(20))], EventShape.POINT)
    r = run(executor, s.tumbling(sec(10)).aggregate(stats))
    same_items(executor, [(out.n, out.mean) for out in r.payloads()], [(2, 1.5), (1, 4.0)])  # both at |20
    assert [type(out.mean) for out in r.payloads()] == [float, float]
    assert r.ctis == [T(20)]


def test_same_aggregate_used_twice(executor: Any) -> None:
    """count() twice and sum(v) twice (once times 2) in one record: [0,10) v=2,3 -> 2, 2, 5, 10."""
    s = Stream.create("in", [Point(T(1), V(2)), Point(T(2), V(3)), Cti(T(10))], EventShape.POINT)
    r = run(
        executor,
        s.tumbling(sec(10)).aggregate(lambda w: Twice(n1=w.count(), n2=w.count(), s1=w.sum(lambda e: e.v), s2=w.sum(lambda e: e.v) * 2)),
    )
    same_items(executor, evs(r), [iv(0, 10, Twice(2, 2, 5, 10))])


def test_hopping_membership_by_overlap_and_cti_pull_back(executor: Any) -> None:
    """hopping(size 10s, hop 5s): windows [5k, 5k+10).

    t:  -5   0   3   5   8   10  12  15  20  25  30
             |   [1-----------------)           interval v=1 [3,12): in [-5,5) [0,10) [5,15) [10,20)
                         *10                    point v=10 @8:       in [0,10) [5,15)
                                 |12            complete: [-5,5) [0,10); earliest incomplete [5,15) -> 5
                                             |30 complete up to [20,30); earliest incomplete [25,35) -> 25
    [-5,5): n1 s1   [0,10): n2 s11   [5,15): n2 s11   [10,20): n1 s1   [15,25),[20,30): empty
    """
    s = Stream.create(
        "in",
        [Interval(T(3), T(12), V(1)), Interval(T(8), T(8) + TICK, V(10)), Cti(T(12)), Cti(T(30))],
        EventShape.INTERVAL,
    )
    r = run(executor, s.hopping(sec(10), sec(5)).aggregate(count))
    assert r.ctis == [T(5), T(25)]
    check_raw(
        executor,
        r,
        [
            ("interval", T(-5), T(5), Count(1, 1)),
            ("interval", T(0), T(10), Count(2, 11)),
            ("cti", T(5)),
            ("interval", T(5), T(15), Count(2, 11)),
            ("interval", T(10), T(20), Count(1, 1)),
            ("cti", T(25)),
        ],
    )


def test_hopping_with_gaps_hop_greater_than_size(executor: Any) -> None:
    """hopping(size 5s, hop 10s): windows [0,5), [10,15), [20,25); gaps belong to no window.

    t:  0   2   4   5   7       10  11  12  15      20  25  30
        [===*===[----)  |7*         -)  *   )       [======)     (=== windows)
            *2  interval [4,11)         *12
    |7: [0,5) complete (n2: *2 and [4,11)); no window contains 7, next starts at 10 -> out CTI 7
    the point @7 is in a gap: in no window
    |30: [10,15) n2 ([4,11) and *12); [20,25) empty; earliest incomplete [30,35) -> 30
    """
    s = Stream.create(
        "in",
        [
            Interval(T(2), T(2) + TICK, V(1)),
            Interval(T(4), T(11), V(2)),
            Cti(T(7)),
            Interval(T(7), T(7) + TICK, V(100)),
            Interval(T(12), T(12) + TICK, V(4)),
            Cti(T(30)),
        ],
        EventShape.INTERVAL,
    )
    r = run(executor, s.hopping(sec(5), sec(10)).aggregate(count))
    same_items(executor, evs(r), [iv(0, 5, Count(2, 3)), iv(10, 15, Count(2, 6))])
    assert r.ctis == [T(7), T(30)]


def test_hopping_offset_is_taken_modulo_hop(executor: Any) -> None:
    """hopping(10s, 5s, offset=7s) == offset 2s: windows [5k+2, 5k+12).

    * @4 is in [-3,7) and [2,12); |20 -> complete up to [7,17); earliest incomplete [12,22) -> 12
    """
    s = Stream.create("in", [Point(T(4), V(1)), Cti(T(20))], EventShape.POINT)
    r = run(executor, s.hopping(sec(10), sec(5), offset=sec(7)).aggregate(count))
    same_items(executor, evs(r), [iv(-3, 7, Count(1, 1)), iv(2, 12, Count(1, 1))])
    assert r.ctis == [T(12)]


def test_final_cti_at_infinity_with_open_edge(executor: Any) -> None:
    """On the CTI at infinity an open lifetime counts up to the latest finite time seen + 1 tick.

    t:  0   3       10      20  21  24  30
            a>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>>  never ended
                                b[---)          [21,24)
                                          |INF
    latest finite time 24 -> a counts as [3, 24+tick): in [0,10), [10,20), [20,30); nothing later.
    out CTI = INF
    """
    s = Stream.create(
        "in",
        [EdgeStart(T(3), V(1)), EdgeStart(T(21), V(2)), EdgeEnd(T(21), T(24), V(2)), Cti(INF)],
        EventShape.EDGE,
    )
    r = run(executor, s.tumbling(sec(10)).aggregate(count))
    same_items(executor, evs(r), [iv(0, 10, Count(1, 1)), iv(10, 20, Count(1, 1)), iv(20, 30, Count(2, 3))])
    assert r.ctis == [INF]


def test_flush_at_shutdown_emits_remaining_windows(executor: Any) -> None:
    """Generation settings that never fire (every 100 events) + advance_to_infinity_on_shutdown.

    * @1, * @12, end of input -> CTI INF: [0,10) and [10,20) emitted, out CTI INF.
    """
    settings = AdvanceTimeSettings(generation=AdvanceTimeGenerationSettings(frequency=100, advance_to_infinity_on_shutdown=True))
    s = Stream.create("in", [Point(T(1), V(1)), Point(T(12), V(2))], EventShape.POINT, settings)
    r = run(executor, s.tumbling(sec(10)).aggregate(count))
    same_items(executor, evs(r), [iv(0, 10, Count(1, 1)), iv(10, 20, Count(1, 2))])
    assert r.ctis == [INF]


def test_tumbling_group_by(executor: Any) -> None:
    """group_by(k).tumbling(10s): one output per key and non-empty window; order: window start,
    then groups in first-seen order (a before b).

    t:   1    2    5    11   12        20
         a1   b10  a2   a3   b20       |20
    [0,10):  a n2 s3, b n1 s10      [10,20): a n1 s3, b n1 s20      out CTI 20
    """
    s = Stream.create(
        "in",
        [
            Point(T(1), KV("a", 1)),
            Point(T(2), KV("b", 10)),
            Point(T(5), KV("a", 2)),
            Point(T(11), KV("a", 3)),
            Point(T(12), KV("b", 20)),
            Cti(T(20)),
        ],
        EventShape.POINT,
    )
    r = run(
        executor, s.group_by(lambda e: e.k).tumbling(sec(10)).aggregate(lambda k, w: GStats(k=k, n=w.count(), total=w.sum(lambda e: e.v)))
    )
    same_items(
        executor,
        evs(r),
        [
            iv(0, 10, GStats("a", 2, 3)),
            iv(0, 10, GStats("b", 1, 10)),
            iv(10, 20, GStats("a", 1, 3)),
            iv(10, 20, GStats("b", 1, 20)),
        ],
    )
    assert r.ctis == [T(20)]


def test_tumbling_group_by_tuple_key(executor: Any) -> None:
    """group_by((k, j)): (a,1)@1, (a,2)@2, (a,1)@3, (b,1)@4, |10 -> (a,1) n2, (a,2) n1, (b,1) n1."""
    s = Stream.create(
        "in",
        [
            Point(T(1), KJV("a", 1, 0)),
            Point(T(2), KJV("a", 2, 0)),
            Point(T(3), KJV("a", 1, 0)),
            Point(T(4), KJV("b", 1, 0)),
            Cti(T(10)),
        ],
        EventShape.POINT,
    )
    r = run(executor, s.group_by(lambda e: (e.k, e.j)).tumbling(sec(10)).aggregate(lambda key, w: TStats(k=key[0], j=key[1], n=w.count())))
    same_items(executor, evs(r), [iv(0, 10, TStats("a", 1, 2)), iv(0, 10, TStats("a", 2, 1)), iv(0, 10, TStats("b", 1, 1))])
    assert r.ctis == [T(10)]


def test_hopping_group_by(executor: Any) -> None:
    """group_by(k).hopping(10s, 5s).

    t:  0    5    7  8    10   12   15   20
                  a1 b2        a3        |20
    [0,10): a n1, b n1   [5,15): a n2 (1+3), b n1   [10,20): a n1 (3)
    |20: complete up to [10,20); earliest incomplete [15,25) -> out CTI 15
    """
    s = Stream.create(
        "in",
        [Point(T(7), KV("a", 1)), Point(T(8), KV("b", 2)), Point(T(12), KV("a", 3)), Cti(T(20))],
        EventShape.POINT,
    )
    r = run(
        executor,
        s.group_by(lambda e: e.k).hopping(sec(10), sec(5)).aggregate(lambda k, w: GStats(k=k, n=w.count(), total=w.sum(lambda e: e.v))),
    )
    same_items(
        executor,
        evs(r),
        [
            iv(0, 10, GStats("a", 1, 1)),
            iv(0, 10, GStats("b", 1, 2)),
            iv(5, 15, GStats("a", 2, 4)),
            iv(5, 15, GStats("b", 1, 2)),
            iv(10, 20, GStats("a", 1, 3)),
        ],
    )
    assert r.ctis == [T(15)]


# --------------------------------------------------------------------------------------
# join
# --------------------------------------------------------------------------------------


def test_join_intersection_key_and_no_overlap(executor: Any) -> None:
    """Join on id: output lifetime = intersection; touching lifetimes do not overlap.

    t:      0    5    10   15   20  22   28  30     40
    left:   [x id1----)              [y id2----)
    right:       [p id1---)                          x∩p = [5,10)
                      [t id1)                        touches x at 10: no match
                                      [r id2-)       y∩r = [22,28)
            [z id3-----------------------------------)  no key match
    CTIs: left |40, right |40 -> out 40
    """
    x, y = L(1, "x"), L(2, "y")
    left = Stream.create("left", [Interval(T(0), T(10), x), Interval(T(20), T(30), y), Cti(T(40))], EventShape.INTERVAL)
    right = Stream.create(
        "right",
        [
            Interval(T(5), T(15), R(1, "p")),
            Interval(T(10), T(15), R(1, "t")),
            Interval(T(22), T(28), R(2, "r")),
            Interval(T(0), T(40), R(3, "z")),
            Cti(T(40)),
        ],
        EventShape.INTERVAL,
    )
    r = run(executor, left.join(right, on=lambda l, r: l.id == r.id, select=jsel))
    assert sorted_evs(r) == [iv(5, 10, J(1, "x", "p")), iv(22, 28, J(2, "y", "r"))]
    assert r.ctis == [T(40)]


def test_join_key_plus_residual(executor: Any) -> None:
    """on (l.id == r.id) & (r.v > l.v); every lifetime is [0,10).

    left (1,5) with right (1,3): residual false; (1,7): match; (2,9): other key
    left (2,10) with right (2,9): residual false
    """
    left = Stream.create("left", [Interval(T(0), T(10), LV(1, 5)), Interval(T(0), T(10), LV(2, 10)), Cti(T(10))], EventShape.INTERVAL)
    right = Stream.create(
        "right",
        [Interval(T(0), T(10), RV(1, 3)), Interval(T(0), T(10), RV(1, 7)), Interval(T(0), T(10), RV(2, 9)), Cti(T(10))],
        EventShape.INTERVAL,
    )
    r = run(executor, left.join(right, on=lambda l, r: (l.id == r.id) & (r.v > l.v), select=lambda l, r: Pair(l=l.v, r=r.v)))
    same_items(executor, evs(r), [iv(0, 10, Pair(5, 7))])
    assert r.ctis == [T(10)]


def test_join_residual_only(executor: Any) -> None:
    """on l.v < r.v (no equality key): left 5 matches right 7 and 9; left 10 nothing. All [0,10)."""
    left = Stream.create("left", [Interval(T(0), T(10), LV(1, 5)), Interval(T(0), T(10), LV(2, 10)), Cti(T(10))], EventShape.INTERVAL)
    right = Stream.create(
        "right",
        [Interval(T(0), T(10), RV(1, 3)), Interval(T(0), T(10), RV(1, 7)), Interval(T(0), T(10), RV(2, 9)), Cti(T(10))],
        EventShape.INTERVAL,
    )
    r = run(executor, left.join(right, on=lambda l, r: l.v < r.v, select=lambda l, r: Pair(l=l.v, r=r.v)))
    assert sorted_evs(r) == [iv(0, 10, Pair(5, 7)), iv(0, 10, Pair(5, 9))]


def test_join_without_key_points_and_long_intervals(executor: Any) -> None:
    """on l.v >= r.v (no equality key), points joined with intervals, some much longer than
    the others (on Spark: a join on time buckets, where [1,100) is a long event).

        right  [0,4) r1   [3,13) r2   [2,40) r3   [1,100) r4
        left   P1 v11     P5 v15     P12 v22     P30 v40     P50 v0 (matches nothing)
        out    each point with every interval it lies in; lifetime [t, t+1)
    """
    flush = AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True))
    left = Stream.create(
        "left", [Point(T(t), LV(1, v)) for t, v in ((1, 11), (5, 15), (12, 22), (30, 40), (50, 0))], EventShape.POINT, flush
    )
    spans = ((0, 4, 1), (3, 13, 2), (2, 40, 3), (1, 100, 4))
    right = Stream.create("right", [Interval(T(s), T(e), RV(1, r)) for s, e, r in spans], EventShape.INTERVAL, flush)
    r = run(executor, left.join(right, on=lambda l, r: l.v >= r.v, select=lambda l, r: Pair(l=l.v, r=r.v)))
    expected = [(1, 11, 1), (1, 11, 4), (5, 15, 2), (5, 15, 3), (5, 15, 4), (12, 22, 2), (12, 22, 3), (12, 22, 4), (30, 40, 3), (30, 40, 4)]
    assert sorted_evs(r) == sorted((pt(t, Pair(l, rv)) for t, l, rv in expected), key=key)


def test_join_output_cti_is_min_of_both(executor: Any) -> None:
    """Output CTI = min(left CTI, right CTI), with the inputs interleaved by arrival.

    arrival: A1    A2    A3      A4    A5    A6     A7     A8        A9     A10
    left:    *1    |5                  *6    |10                     |20
    right:               [0,8)   |7                 |15    [15,18)          |25
    out CTI: -     -     -       5     -     7      10     -         15     20
    *1 and *6 fall in [0,8): outputs are points at 1 (released by CTI 5) and 6 (by CTI 7)
    """
    l1, l6 = L(1, "p1"), L(1, "p6")
    rr, rs = R(1, "r"), R(1, "s")
    left = Stream.create(
        "left",
        [
            Point(T(1), l1, arrival=A(1)),
            Cti(T(5), arrival=A(2)),
            Point(T(6), l6, arrival=A(5)),
            Cti(T(10), arrival=A(6)),
            Cti(T(20), arrival=A(9)),
        ],
        EventShape.POINT,
    )
    right = Stream.create(
        "right",
        [
            Interval(T(0), T(8), rr, arrival=A(3)),
            Cti(T(7), arrival=A(4)),
            Cti(T(15), arrival=A(7)),
            Interval(T(15), T(18), rs, arrival=A(8)),
            Cti(T(25), arrival=A(10)),
        ],
        EventShape.INTERVAL,
    )
    r = run(executor, left.join(right, on=lambda l, r: l.id == r.id, select=jsel))
    j1, j6 = J(1, "p1", "r"), J(1, "p6", "r")
    assert r.ctis == [T(5), T(7), T(10), T(15), T(20)]
    same_items(executor, evs(r), [pt(1, j1), pt(6, j6)])
    check_raw(
        executor,
        r,
        [
            ("point", T(1), j1),
            ("cti", T(5)),
            ("point", T(6), j6),
            ("cti", T(7)),
            ("cti", T(10)),
            ("cti", T(15)),
            ("cti", T(20)),
        ],
    )


def test_join_cti_min_without_arrivals(executor: Any) -> None:
    """No arrivals: left (declared first) entirely, then right.

    left |5 |10 -> out nothing yet (right CTI -inf); right |7 -> min(10,7)=7; right |20 -> 10
    """
    left = Stream.create("left", [Cti(T(5)), Cti(T(10))], EventShape.POINT, payload_type=L)
    right = Stream.create("right", [Cti(T(7)), Cti(T(20))], EventShape.POINT, payload_type=R)
    r = run(executor, left.join(right, on=lambda l, r: l.id == r.id, select=jsel))
    assert r.events == []
    assert r.ctis == [T(7), T(10)]


def test_join_open_edge_emitted_as_start_edge_then_ended(executor: Any) -> None:
    """Left is an edge: output starts as a start edge and is ended by the left end edge.

    arrival: A1       A2          A3   A4   A5           A6    A7
    left:    x>>@2                |5        x ends @6    |20
    right:            [p 4,10)         |5                      |20
    out:     at CTI 5 the output [4, ?) is released as a start edge (left still open);
             left ends at 6 -> end edge (4 -> 6); out CTIs 5, 20
    """
    x, p = L(1, "x"), R(1, "p")
    left = Stream.create(
        "left",
        [
            EdgeStart(T(2), x, arrival=A(1)),
            Cti(T(5), arrival=A(3)),
            EdgeEnd(T(2), T(6), x, arrival=A(5)),
            Cti(T(20), arrival=A(6)),
        ],
        EventShape.EDGE,
    )
    right = Stream.create(
        "right",
        [Interval(T(4), T(10), p, arrival=A(2)), Cti(T(5), arrival=A(4)), Cti(T(20), arrival=A(7))],
        EventShape.INTERVAL,
    )
    r = run(executor, left.join(right, on=lambda l, r: l.id == r.id, select=jsel))
    j = J(1, "x", "p")
    same_items(executor, evs(r), [iv(4, 6, j)])
    assert r.ctis == [T(5), T(20)]
    check_raw(executor, r, [("start", T(4), j), ("cti", T(5)), ("end", T(4), T(6), j), ("cti", T(20))])


def test_join_both_open_never_closed_ends_at_infinity(executor: Any) -> None:
    """left x>>@2 |20, right p>>@4 |20, no end edges: output [4, INF) released as a start edge."""
    x, p = L(1, "x"), R(1, "p")
    left = Stream.create("left", [EdgeStart(T(2), x), Cti(T(20))], EventShape.EDGE)
    right = Stream.create("right", [EdgeStart(T(4), p), Cti(T(20))], EventShape.EDGE)
    r = run(executor, left.join(right, on=lambda l, r: l.id == r.id, select=jsel))
    j = J(1, "x", "p")
    same_items(executor, evs(r), [iv(4, None, j)])
    assert r.ctis == [T(20)]
    check_raw(executor, r, [("start", T(4), j), ("cti", T(20))])


def test_join_open_edge_against_interval_ends_with_the_interval(executor: Any) -> None:
    """left x>>@2 never ended but its CTI reaches 20, so its end is >= 20; right [4,10).

    arrival: A1      A2          A3     A4
    left:    x>>@2               |20
    right:           [p 4,10)           |20
    the intersection [4, min(end_x, 10)) = [4,10) is determined once the left CTI passes 10;
    the end edge at 10 must come before the output CTI 20 (end edges never before the CTI).
    """
    x, p = L(1, "x"), R(1, "p")
    left = Stream.create("left", [EdgeStart(T(2), x, arrival=A(1)), Cti(T(20), arrival=A(3))], EventShape.EDGE)
    right = Stream.create("right", [Interval(T(4), T(10), p, arrival=A(2)), Cti(T(20), arrival=A(4))], EventShape.INTERVAL)
    r = run(executor, left.join(right, on=lambda l, r: l.id == r.id, select=jsel))
    same_items(executor, evs(r), [iv(4, 10, J(1, "x", "p"))])
    assert r.ctis == [T(20)]


def test_join_open_edge_undetermined_end_shows_infinity(executor: Any) -> None:
    """left x>>@2 |5 (may still end anywhere >= 5), right [4,10) |20: out CTI 5 releases [4, ?)
    as a start edge; its end is never determined -> events show end INF."""
    x, p = L(1, "x"), R(1, "p")
    left = Stream.create("left", [EdgeStart(T(2), x), Cti(T(5))], EventShape.EDGE)
    right = Stream.create("right", [Interval(T(4), T(10), p), Cti(T(20))], EventShape.INTERVAL)
    r = run(executor, left.join(right, on=lambda l, r: l.id == r.id, select=jsel))
    j = J(1, "x", "p")
    same_items(executor, evs(r), [iv(4, None, j)])
    assert r.ctis == [T(5)]
    check_raw(executor, r, [("start", T(4), j), ("cti", T(5))])


def test_join_points_with_intervals(executor: Any) -> None:
    """Points at 1, 5, 9 against the interval [3,8): only the point at 5 is inside -> point output.

    t:  1   3   5   8   9   10
        *   [---*---)   *   |10 (both sides)
    """
    left = Stream.create(
        "left",
        [Point(T(1), L(1, "a")), Point(T(5), L(1, "b")), Point(T(9), L(1, "c")), Cti(T(10))],
        EventShape.POINT,
    )
    right = Stream.create("right", [Interval(T(3), T(8), R(1, "i")), Cti(T(10))], EventShape.INTERVAL)
    r = run(executor, left.join(right, on=lambda l, r: l.id == r.id, select=jsel))
    j = J(1, "b", "i")
    same_items(executor, evs(r), [pt(5, j)])
    check_raw(executor, r, [("point", T(5), j), ("cti", T(10))])
    assert r.ctis == [T(10)]

    # the same with the interval on the left
    r2 = run(executor, right.join(left, on=lambda r, l: r.id == l.id, select=lambda r, l: J(id=l.id, a=l.a, b=r.b)))
    same_items(executor, evs(r2), [pt(5, j)])


def test_self_join(executor: Any) -> None:
    """A stream joined with itself on k (one shared input node).

    t:   0    5    10   15   20
    k1   [v1------)
    k1        [v2------)
    k2   [v3------)
                        |20
    pairs: (1,1)[0,10) (1,2)[5,10) (2,1)[5,10) (2,2)[5,15) (3,3)[0,10); out CTI 20
    """
    s = Stream.create(
        "in",
        [Interval(T(0), T(10), KV("1", 1)), Interval(T(5), T(15), KV("1", 2)), Interval(T(0), T(10), KV("2", 3)), Cti(T(20))],
        EventShape.INTERVAL,
    )
    r = run(executor, s.join(s, on=lambda a, b: a.k == b.k, select=lambda a, b: Pair(l=a.v, r=b.v)))
    expected = [
        iv(0, 10, Pair(1, 1)),
        iv(5, 10, Pair(1, 2)),
        iv(5, 10, Pair(2, 1)),
        iv(5, 15, Pair(2, 2)),
        iv(0, 10, Pair(3, 3)),
    ]
    assert sorted_evs(r) == sorted(expected, key=key)
    assert r.ctis == [T(20)]


# --------------------------------------------------------------------------------------
# anti_join
# --------------------------------------------------------------------------------------


def test_anti_join_fragments(executor: Any) -> None:
    """The parts of each left lifetime during which no matching right event is alive.

    t:      0    3    5    6    8    10   12   14        20        30
    left:   [a id1---------------------------------------)              -> [0,3) [5,8) [14,20)
            [b id2-------------------)                                  -> [0,10) (no right id2)
                 *c@4 (inside [3,5))                                    -> nothing
                           *d@6                                         -> point at 6
    right:       [id1-)         [id1------)
                                     [id1------)   ([8,12) and [10,14) alive together: [8,14))
            [id3-----------------------------------------------------)  no match
    CTIs |30 on both -> out 30
    """
    a, b, c, d = L(1, "a"), L(2, "b"), L(1, "c"), L(1, "d")
    left = Stream.create(
        "left",
        [
            Interval(T(0), T(20), a),
            Interval(T(0), T(10), b),
            Interval(T(4), T(4) + TICK, c),
            Interval(T(6), T(6) + TICK, d),
            Cti(T(30)),
        ],
        EventShape.INTERVAL,
    )
    right = Stream.create(
        "right",
        [
            Interval(T(3), T(5), R(1, "r")),
            Interval(T(8), T(12), R(1, "r")),
            Interval(T(10), T(14), R(1, "s")),
            Interval(T(0), T(30), R(3, "z")),
            Cti(T(30)),
        ],
        EventShape.INTERVAL,
    )
    r = run(executor, left.anti_join(right, on=lambda l, r: l.id == r.id))
    expected = [iv(0, 3, a), iv(5, 8, a), iv(14, 20, a), iv(0, 10, b), pt(6, d)]
    assert sorted_evs(r) == sorted(expected, key=key)
    assert r.ctis == [T(30)]
    assert r.payloads() and all(type(p) is L for p in r.payloads())


def test_anti_join_left_points_and_cti_min(executor: Any) -> None:
    """Left points, no right events: whole left lifetimes; output CTI = min of both.

    left (declared first, processed first): *1  *7  |10
    right:                                   |5  |12
    out: right |5 -> min(10,5)=5 releases *1; right |12 -> min(10,12)=10 releases *7
    """
    p1, p7 = L(1, "p1"), L(1, "p7")
    left = Stream.create("left", [Point(T(1), p1), Point(T(7), p7), Cti(T(10))], EventShape.POINT)
    right = Stream.create("right", [Cti(T(5)), Cti(T(12))], EventShape.INTERVAL, payload_type=R)
    r = run(executor, left.anti_join(right, on=lambda l, r: l.id == r.id))
    same_items(executor, evs(r), [pt(1, p1), pt(7, p7)])
    assert r.ctis == [T(5), T(10)]
    check_raw(executor, r, [("point", T(1), p1), ("cti", T(5)), ("point", T(7), p7), ("cti", T(10))])


def test_anti_join_residual_and_point_removed(executor: Any) -> None:
    """on (l.id == r.id) & (r.v > l.v): left points removed only where a matching right is alive.

    t:   1     2     4     6      8
    left *v5@1 *v5@4 *v1@6                  |8
    right      [id1 v7: 2-------5)  [id1 v0: 5-----8)   |8
    *@1: no right alive -> kept; *@4: v7 > 5 alive -> removed; *@6: v0 > 1 false -> kept
    """
    left = Stream.create("left", [Point(T(1), LV(1, 5)), Point(T(4), LV(1, 5)), Point(T(6), LV(1, 1)), Cti(T(8))], EventShape.POINT)
    right = Stream.create("right", [Interval(T(2), T(5), RV(1, 7)), Interval(T(5), T(8), RV(1, 0)), Cti(T(8))], EventShape.INTERVAL)
    r = run(executor, left.anti_join(right, on=lambda l, r: (l.id == r.id) & (r.v > l.v)))
    assert sorted_evs(r) == [pt(1, LV(1, 5)), pt(6, LV(1, 1))]
    assert r.ctis == [T(8)]


# --------------------------------------------------------------------------------------
# union
# --------------------------------------------------------------------------------------


def test_union_events_and_cti_min(executor: Any) -> None:
    """Union: all events of both; output CTI = min of both.

    left (processed first):  *a@1  *b@3  *e@9  |10
    right:                   *c@2  |4   *d@6  |8
    left |10 -> min(10,-inf): nothing; right |4 -> 4 releases a, b, c; right |8 -> 8 releases d;
    e@9 is never released (9 >= last CTI 8)
    """
    a, b, c, d, e = V(1), V(3), V(2), V(6), V(9)
    left = Stream.create("left", [Point(T(1), a), Point(T(3), b), Point(T(9), e), Cti(T(10))], EventShape.POINT)
    right = Stream.create("right", [Point(T(2), c), Cti(T(4)), Point(T(6), d), Cti(T(8))], EventShape.POINT)
    r = run(executor, left.union(right))
    # events released by the same CTI are ordered by start (docs/semantics.md, section 6)
    same_items(executor, evs(r), [pt(1, a), pt(2, c), pt(3, b), pt(6, d)])
    assert r.ctis == [T(4), T(8)]


def test_union_with_itself(executor: Any) -> None:
    """s.union(s): every event twice; CTIs those of s.  *a@1 *b@2 |5"""
    a, b = V(1), V(2)
    s = Stream.create("in", [Point(T(1), a), Point(T(2), b), Cti(T(5))], EventShape.POINT)
    r = run(executor, s.union(s))
    assert sorted_evs(r) == [pt(1, a), pt(1, a), pt(2, b), pt(2, b)]
    assert r.ctis == [T(5)]


def test_union_of_intervals_and_edges(executor: Any) -> None:
    """Lifetimes pass unchanged.

    left (processed first):  [a 1,4)           |5     left |5 -> min(5, -inf): nothing
    right:                     b>>@2 ... ends @7   |8 right |8 -> min(5, 8) = 5
    out: a [1,4), b [2,7); CTIs [5]
    """
    a, b = V(1), V(2)
    left = Stream.create("left", [Interval(T(1), T(4), a), Cti(T(5))], EventShape.INTERVAL)
    right = Stream.create("right", [EdgeStart(T(2), b), EdgeEnd(T(2), T(7), b), Cti(T(8))], EventShape.EDGE)
    r = run(executor, left.union(right))
    assert sorted_evs(r) == [iv(1, 4, a), iv(2, 7, b)]
    assert r.ctis == [T(5)]


# --------------------------------------------------------------------------------------
# the emission contract over whole pipelines with generated CTIs
# --------------------------------------------------------------------------------------

POINTS = [(0, 1), (1, 2), (3, 3), (4, 1), (7, 5), (8, 2), (12, 7), (15, 1), (16, 4), (20, 2), (23, 3), (24, 6), (30, 1)]
KEYS = "abc"
INTERVALS = [(2, 6, 1), (5, 9, 2), (11, 18, 3), (19, 22, 1), (25, 31, 2)]


def _gen(frequency: int = 1, delay: float = 0, flush: bool = True) -> AdvanceTimeSettings:
    return AdvanceTimeSettings(
        generation=AdvanceTimeGenerationSettings(frequency=frequency, delay=sec(delay), advance_to_infinity_on_shutdown=flush)
    )


def _points(name: str = "points", **kw: Any) -> Stream[KV]:
    items = [Point(T(t), KV(KEYS[i % 3], v)) for i, (t, v) in enumerate(POINTS)]
    return Stream.create(name, items, EventShape.POINT, _gen(**kw))


def _intervals(name: str = "intervals", **kw: Any) -> Stream[KV]:
    items = [Interval(T(s), T(e), KV(KEYS[i % 3], v)) for i, (s, e, v) in enumerate(INTERVALS)]
    return Stream.create(name, items, EventShape.INTERVAL, _gen(**kw))


def _edges(name: str = "edges", **kw: Any) -> Stream[KV]:
    a, b, c, d = KV("a", 1), KV("b", 2), KV("c", 3), KV("a", 4)
    items = [
        EdgeStart(T(0), a),
        EdgeStart(T(2), b),
        EdgeEnd(T(0), T(5), a),
        EdgeStart(T(6), c),
        EdgeEnd(T(2), T(9), b),
        EdgeStart(T(10), d),
        EdgeEnd(T(6), T(12), c),
    ]  # d never ends
    return Stream.create(name, items, EventShape.EDGE, _gen(**kw))


def _kvcount(w: tempo.Window[KV]) -> Count:
    return Count(n=w.count(), total=w.sum(lambda e: e.v))


PIPELINES: dict[str, Callable[[], Stream[Any]]] = {
    "where-select": lambda: _points().where(lambda e: e.v > 1).select(lambda e: V(v=e.v * 2)),
    "tumbling": lambda: _points().tumbling(sec(5)).aggregate(_kvcount),
    "tumbling-delay": lambda: _points(frequency=2, delay=3).tumbling(sec(5)).aggregate(_kvcount),
    "grouped-hopping": lambda: (
        _points()
        .group_by(lambda e: e.k)
        .hopping(sec(10), sec(3))
        .aggregate(lambda k, w: GStats(k=k, n=w.count(), total=w.sum(lambda e: e.v)))
    ),
    "join": lambda: _points().join(_intervals(), on=lambda p, i: p.k == i.k, select=lambda p, i: Pair(l=p.v, r=i.v)),
    "join-no-flush": lambda: _points(flush=False).join(
        _intervals(flush=False), on=lambda p, i: p.k == i.k, select=lambda p, i: Pair(l=p.v, r=i.v)
    ),
    "anti-join": lambda: _points().anti_join(_intervals(), on=lambda p, i: p.k == i.k),
    "union-shift": lambda: _points().union(_intervals().shift_event_time(sec(2))),
    "edges-shift-tumbling": lambda: _edges().shift_event_time(sec(1)).tumbling(sec(5)).aggregate(_kvcount),
    "edges-join": lambda: _edges().join(_intervals(), on=lambda e, i: e.k == i.k, select=lambda e, i: Pair(l=e.v, r=i.v)),
    "edges-anti-join": lambda: _edges().anti_join(_intervals(), on=lambda e, i: e.k == i.k),
    "duration-join-window": lambda: (
        _points()
        .alter_event_duration(sec(4))
        .join(_intervals(), on=lambda p, i: p.k == i.k, select=lambda p, i: V(v=p.v + i.v))
        .tumbling(sec(10))
        .aggregate(lambda w: Count(n=w.count(), total=w.sum(lambda e: e.v)))
    ),
}


@pytest.mark.parametrize("name", list(PIPELINES))
def test_emission_contract(executor: Any, name: str) -> None:
    """Checked by run(): CTIs strictly increase; no insert before a released CTI; end edges
    at or after the CTI in force; every insert released by a CTI past its start; events and
    ctis consistent with raw. Pipelines with flush end on the CTI at infinity."""
    r = run(executor, PIPELINES[name]())
    assert r.ctis, "generated CTIs must reach the output"
    if name != "join-no-flush":
        assert r.ctis[-1] == INF
    else:
        assert INF not in r.ctis


def test_emission_contract_checker_catches_violations() -> None:
    """The checker itself: a raw insert before a released CTI is caught."""

    @attrs.frozen
    class Fake:
        events: list[Any]
        ctis: list[datetime]
        raw: list[Any]

    bad = Fake(events=[], ctis=[T(5)], raw=[Cti(T(5)), Point(T(4), V(1)), Cti(T(6))])
    with pytest.raises(AssertionError):
        check_contract(bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------
# bad parameters and tracing errors
# --------------------------------------------------------------------------------------


def _x_stream(name: str = "xs") -> Stream[X]:
    return Stream.create(name, [Point(T(1), X("a", 1))], EventShape.POINT)


@pytest.mark.parametrize(
    "build",
    [
        lambda s: s.tumbling(timedelta(0)),
        lambda s: s.tumbling(-S),
        lambda s: s.hopping(sec(10), timedelta(0)),
        lambda s: s.hopping(sec(10), -S),
        lambda s: s.hopping(timedelta(0), sec(5)),
        lambda s: s.group_by(lambda e: e.name).tumbling(timedelta(0)),
        lambda s: s.group_by(lambda e: e.name).hopping(sec(10), timedelta(0)),
        lambda s: s.alter_event_duration(timedelta(0)),
        lambda s: s.alter_event_duration(-S),
        lambda s: s.alter_event_lifetime(S, timedelta(0)),
        lambda s: s.alter_event_lifetime(S, -S),
    ],
    ids=[
        "tumbling-0",
        "tumbling-neg",
        "hop-0",
        "hop-neg",
        "size-0",
        "grouped-size-0",
        "grouped-hop-0",
        "duration-0",
        "duration-neg",
        "lifetime-0",
        "lifetime-neg",
    ],
)
def test_bad_window_and_duration_parameters(build: Callable[[Stream[X]], Any]) -> None:
    with pytest.raises(QueryBuildError):
        build(_x_stream())


def test_union_of_different_payload_types() -> None:
    a = Stream.create("a", [Point(T(1), V(1))], EventShape.POINT)
    b = Stream.create("b", [Point(T(1), NV(1))], EventShape.POINT)
    with pytest.raises(QueryBuildError, match="union"):
        a.union(b)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "predicate",
    [lambda e: e.x + 1, lambda e: e.name, lambda e: 5],
    ids=["int", "str", "const"],
)
def test_where_predicate_must_be_bool(predicate: Callable[[X], Any]) -> None:
    with pytest.raises(QueryBuildError):
        _x_stream().where(predicate)


@pytest.mark.parametrize(
    "projection",
    [lambda e: e.x, lambda e: (e.x, e.name), lambda e: 5, lambda e: e.x > 1],
    ids=["field", "tuple", "const", "bool"],
)
def test_select_must_return_a_record(projection: Callable[[X], Any]) -> None:
    with pytest.raises(QueryBuildError):
        _x_stream().select(projection)


def test_join_on_must_be_bool_and_select_a_record() -> None:
    a = _x_stream("a")
    b = Stream.create("b", [Point(T(1), V(1))], EventShape.POINT)
    with pytest.raises(QueryBuildError):
        a.join(b, on=lambda l, r: l.x + r.v, select=lambda l, r: V(v=r.v))
    with pytest.raises(QueryBuildError):
        a.join(b, on=lambda l, r: l.x == r.v, select=lambda l, r: r.v)
    with pytest.raises(QueryBuildError):
        a.anti_join(b, on=lambda l, r: l.name)


@pytest.mark.parametrize(
    ("build", "fix"),
    [
        (lambda s: s.where(lambda e: e.x > 1 and e.x < 5), "&"),
        (lambda s: s.where(lambda e: e.x > 1 or e.x < 5), "|"),
        (lambda s: s.where(lambda e: not (e.x > 1)), "tempo.not_"),
        (lambda s: s.where(lambda e: 1 < e.x < 5), "&"),
        (lambda s: s.where(lambda e: e.name in ["a", "b"]), "tempo.is_in"),
        (
            lambda s: s.select(lambda e: Labelled(name=e.name, size="big" if e.x > 2 else "small", tag="", x=e.x)),
            "tempo.when",
        ),
        (lambda s: s.where(lambda e: True if e.x > 2 else False), "tempo.when"),
        (
            lambda s: s.join(s, on=lambda l, r: l.name == r.name and l.x < r.x, select=lambda l, r: l),
            "&",
        ),
        (
            lambda s: s.tumbling(sec(10)).aggregate(lambda w: Count(n=w.count() if w.count() > 1 else 0, total=0)),
            "tempo.when",
        ),
    ],
    ids=["and", "or", "not", "chained", "in", "if-select", "if-where", "and-join", "if-aggregate"],
)
def test_python_control_flow_raises_trace_error(build: Callable[[Stream[X]], Any], fix: str) -> None:
    with pytest.raises(TraceError) as info:
        build(_x_stream())
    assert fix in str(info.value)
    assert isinstance(info.value, QueryBuildError)


def test_chained_comparison_message_names_the_fix() -> None:
    with pytest.raises(TraceError) as info:
        _x_stream().where(lambda e: 1 < e.x < 5)
    msg = str(info.value)
    assert "&" in msg and "tempo.when" in msg and "tempo.is_in" in msg


@pytest.mark.parametrize(
    "build",
    [
        lambda s: s.where(lambda e: e.nmae == "a"),
        lambda s: s.select(lambda e: X(name=e.nmae, x=e.x)),
        lambda s: s.where(lambda e: tempo.col("nmae") == "a"),
        lambda s: s.group_by(lambda e: e.nmae),
        lambda s: s.tumbling(sec(10)).aggregate(lambda w: Count(n=w.count(), total=w.sum(lambda e: e.nmae))),
        lambda s: s.join(s, on=lambda l, r: l.name == r.nmae, select=lambda l, r: l),
    ],
    ids=["where", "select", "col", "group_by", "aggregate", "join-right"],
)
def test_misspelled_field_names_the_fields(build: Callable[[Stream[X]], Any]) -> None:
    with pytest.raises(QueryBuildError) as info:
        build(_x_stream())
    msg = str(info.value)
    assert "nmae" in msg
    assert "name" in msg.replace("nmae", "") and "x" in msg


# --------------------------------------------------------------------------------------
# explain()
# --------------------------------------------------------------------------------------


def test_explain_lists_each_node_with_its_cti_rule() -> None:
    from tempo.plan import nodes as p

    a = Stream.create("a", [Point(T(1), KV("a", 1))], EventShape.POINT)
    b = Stream.create("b", [Interval(T(1), T(2), KV("a", 1))], EventShape.INTERVAL)
    c = Stream.create("c", [Interval(T(1), T(2), KV("a", 1))], EventShape.INTERVAL)
    q = (
        a.where(lambda e: e.v > 0)
        .shift_event_time(S)
        .join(b.alter_event_duration(sec(2)), on=lambda l, r: l.k == r.k, select=lambda l, r: KV(k=l.k, v=r.v))
        .anti_join(c.alter_event_lifetime(S, sec(3)), on=lambda l, r: l.k == r.k)
        .union(c)
        .select(lambda e: V(v=e.v))
        .hopping(sec(10), sec(5))
        .aggregate(lambda w: Count(n=w.count(), total=w.sum(lambda e: e.v)))
    )
    text = q.explain()
    for fragment in (
        "Input 'a'",
        "Input 'b'",
        "Input 'c'",
        "Where",
        "ShiftEventTime",
        "AlterEventDuration",
        "AlterEventLifetime",
        "Join",
        "AntiJoin",
        "Union",
        "Select",
        "Hopping",
        "explicit CTIs only",
    ):
        assert fragment in text, fragment
    for node in (
        p.SourceNode,
        p.WhereNode,
        p.SelectNode,
        p.AlterLifetimeNode,
        p.WindowNode,
        p.JoinNode,
        p.AntiJoinNode,
        p.UnionNode,
    ):
        assert node.CTI_RULE in text, node.__name__
    assert "pulled back" in text
    assert "minimum of both inputs' CTIs" in text

    tumbling = a.group_by(lambda e: e.k).tumbling(sec(10)).aggregate(lambda k, w: GStats(k=k, n=w.count(), total=0))
    t = tumbling.explain()
    assert "Tumbling" in t and "by e.k" in t and p.WindowNode.CTI_RULE in t


# --------------------------------------------------------------------------------------
# more edge cases: edges through every operator, ignored CTIs, shared inputs
# --------------------------------------------------------------------------------------


def test_ctis_that_do_not_advance_are_not_forwarded(executor: Any) -> None:
    """|5 |3 |5 |7 through where: 3 and the second 5 do not advance the CTI -> out 5, 7."""
    s = Stream.create("in", [Cti(T(5)), Cti(T(3)), Cti(T(5)), Cti(T(7))], EventShape.POINT, payload_type=V)
    r = run(executor, s.where(lambda e: e.v > 0))
    assert r.ctis == [T(5), T(7)]
    assert r.metrics["in"].ctis_ignored == 2


def test_where_drops_the_end_edge_of_a_dropped_start_edge(executor: Any) -> None:
    """a(v=1)>>@1 ends @4 is filtered out, b(v=5)>>@2 ends @6 kept; |3 |8.

    raw: b released at |3 as a start edge, then its end edge, then |8; a appears nowhere.
    """
    a, b = V(1), V(5)
    s = Stream.create(
        "in",
        [EdgeStart(T(1), a), EdgeStart(T(2), b), Cti(T(3)), EdgeEnd(T(1), T(4), a), EdgeEnd(T(2), T(6), b), Cti(T(8))],
        EventShape.EDGE,
    )
    r = run(executor, s.where(lambda e: e.v > 2))
    same_items(executor, evs(r), [iv(2, 6, b)])
    check_raw(executor, r, [("start", T(2), b), ("cti", T(3)), ("end", T(2), T(6), b), ("cti", T(8))])


def test_shift_event_time_moves_end_edges(executor: Any) -> None:
    """a>>@2 |3, a ends @6, |8, shifted +10: start edge @12, |13, end edge 12 -> 16, |18."""
    a = V(1)
    s = Stream.create("in", [EdgeStart(T(2), a), Cti(T(3)), EdgeEnd(T(2), T(6), a), Cti(T(8))], EventShape.EDGE)
    r = run(executor, s.shift_event_time(sec(10)))
    check_raw(executor, r, [("start", T(12), a), ("cti", T(13)), ("end", T(12), T(16), a), ("cti", T(18))])
    same_items(executor, evs(r), [iv(12, 16, a)])


def test_alter_event_lifetime_of_an_open_edge(executor: Any) -> None:
    """a>>@2 never ended, |4; alter_event_lifetime(shift 1s, duration 2s) -> [3,5), CTI 5."""
    a = V(1)
    s = Stream.create("in", [EdgeStart(T(2), a), Cti(T(4))], EventShape.EDGE)
    r = run(executor, s.alter_event_lifetime(sec(1), sec(2)))
    check_raw(executor, r, [("interval", T(3), T(5), a), ("cti", T(5))])


def test_window_counts_an_edge_into_windows_after_its_start_is_committed(executor: Any) -> None:
    """tumbling(10s): a>>@3, |12, a ends @15, |30.

    t:  0   3       10  12   15     20        30
        |   a>>>>>>>>>>>>>>>>)
                        |12                   |30
    |12: [0,10) complete (a alive there: its end is >= 12) -> n1; out CTI 10
    a ends @15 -> also in [10,20); |30: [10,20) n1, [20,30) empty; out CTI 30
    """
    a = V(1)
    s = Stream.create("in", [EdgeStart(T(3), a), Cti(T(12)), EdgeEnd(T(3), T(15), a), Cti(T(30))], EventShape.EDGE)
    r = run(executor, s.tumbling(sec(10)).aggregate(count))
    check_raw(
        executor,
        r,
        [
            ("interval", T(0), T(10), Count(1, 1)),
            ("cti", T(10)),
            ("interval", T(10), T(20), Count(1, 1)),
            ("cti", T(30)),
        ],
    )


def test_window_open_edge_alone_at_infinity(executor: Any) -> None:
    """a>>@3 never ended, |INF: the latest finite time is 3 -> a counts as [3, 3s+tick): only [0,10)."""
    s = Stream.create("in", [EdgeStart(T(3), V(1)), Cti(INF)], EventShape.EDGE)
    r = run(executor, s.hopping(sec(10), sec(5)).aggregate(count))
    # hopping: [-5,5) and [0,10) contain 3
    same_items(executor, evs(r), [iv(-5, 5, Count(1, 1)), iv(0, 10, Count(1, 1))])
    assert r.ctis == [INF]


def test_grouped_window_counts_open_edges_per_group(executor: Any) -> None:
    """group_by(k).tumbling(10s): a>>@1, b>>@2 ends @3, |10, a ends @15, |20.

    [0,10): a n1, b n1 (the order of groups within one window is not specified,
    docs/semantics.md 5.7, so they are compared sorted by window, then key)
    [10,20): a n1
    """
    a, b = KV("a", 1), KV("b", 2)
    s = Stream.create(
        "in",
        [EdgeStart(T(1), a), EdgeStart(T(2), b), EdgeEnd(T(2), T(3), b), Cti(T(10)), EdgeEnd(T(1), T(15), a), Cti(T(20))],
        EventShape.EDGE,
    )
    r = run(
        executor, s.group_by(lambda e: e.k).tumbling(sec(10)).aggregate(lambda k, w: GStats(k=k, n=w.count(), total=w.sum(lambda e: e.v)))
    )
    assert sorted(evs(r), key=repr) == sorted(
        [
            iv(0, 10, GStats("a", 1, 1)),
            iv(0, 10, GStats("b", 1, 2)),
            iv(10, 20, GStats("a", 1, 1)),
        ],
        key=repr,
    )
    assert r.ctis == [T(10), T(20)]


def grouped_long_interval(executor: Any) -> tempo.Result[Any]:
    """group_by(k).tumbling(1s): a [0,100) (spans 100 windows), b * @5, |6.

    windows [0,1) .. [4,5): a only; [5,6): a and b (group order within a window is not
    specified, docs/semantics.md 5.7); [6,7).. incomplete.
    """
    a, b = KV("a", 1), KV("b", 2)
    s = Stream.create("in", [Interval(T(0), T(100), a), Interval(T(5), T(5) + TICK, b), Cti(T(6))], EventShape.INTERVAL)
    return run(
        executor, s.group_by(lambda e: e.k).tumbling(sec(1)).aggregate(lambda k, w: GStats(k=k, n=w.count(), total=w.sum(lambda e: e.v)))
    )


def test_grouped_window_counts_a_long_interval_in_every_window(executor: Any) -> None:
    r = grouped_long_interval(executor)
    assert sorted(evs(r), key=repr) == sorted(
        [iv(i, i + 1, GStats("a", 1, 1)) for i in range(5)]
        + [
            iv(5, 6, GStats("a", 1, 1)),
            iv(5, 6, GStats("b", 1, 2)),
        ],
        key=repr,
    )
    assert r.ctis == [T(6)]


@pytest.mark.needs(Capability.RAW_ITEMS)
def test_grouped_window_releases_windows_by_start(executor: Any) -> None:
    """All are released by |6: the order within one CTI is the reference's (by window start)."""
    r = grouped_long_interval(executor)
    assert [e.start for e in r.events] == sorted(e.start for e in r.events)


def test_join_end_edge_before_release_gives_an_interval(executor: Any) -> None:
    """left x>>@2, ends @6 before any output CTI; right [4,10); CTIs |20 both (no arrivals):
    the output [4,6) is complete when released -> one interval."""
    x, p = L(1, "x"), R(1, "p")
    left = Stream.create("left", [EdgeStart(T(2), x), EdgeEnd(T(2), T(6), x), Cti(T(20))], EventShape.EDGE)
    right = Stream.create("right", [Interval(T(4), T(10), p), Cti(T(20))], EventShape.INTERVAL)
    r = run(executor, left.join(right, on=lambda l, r: l.id == r.id, select=jsel))
    check_raw(executor, r, [("interval", T(4), T(6), J(1, "x", "p")), ("cti", T(20))])


def test_join_left_edge_ending_before_the_right_starts_gives_nothing(executor: Any) -> None:
    """left x>>@2 ends @4 (arrives after the right event), right [5,10): no overlap.

    arrival: A1 left x>>@2; A2 right [5,10); A3 left x ends @4; A4/A5 |20 both.
    """
    x, p = L(1, "x"), R(1, "p")
    left = Stream.create(
        "left",
        [EdgeStart(T(2), x, arrival=A(1)), EdgeEnd(T(2), T(4), x, arrival=A(3)), Cti(T(20), arrival=A(4))],
        EventShape.EDGE,
    )
    right = Stream.create("right", [Interval(T(5), T(10), p, arrival=A(2)), Cti(T(20), arrival=A(5))], EventShape.INTERVAL)
    r = run(executor, left.join(right, on=lambda l, r: l.id == r.id, select=jsel))
    assert r.events == []
    assert r.ctis == [T(20)]


def test_self_join_of_edges(executor: Any) -> None:
    """s.join(s) with one edge a>>@2 |3, a ends @6, |8: one pair, [2,6)."""
    a = KV("a", 1)
    s = Stream.create("in", [EdgeStart(T(2), a), Cti(T(3)), EdgeEnd(T(2), T(6), a), Cti(T(8))], EventShape.EDGE)
    r = run(executor, s.join(s, on=lambda l, r: l.k == r.k, select=lambda l, r: Pair(l=l.v, r=r.v)))
    same_items(executor, evs(r), [iv(2, 6, Pair(1, 1))])
    assert r.ctis == [T(3), T(8)]


def test_anti_join_with_itself_gives_nothing(executor: Any) -> None:
    """Every left event is covered by itself on the right: s.anti_join(s) is empty."""
    s = Stream.create(
        "in",
        [Interval(T(0), T(5), KV("a", 1)), Interval(T(3), T(3) + TICK, KV("b", 2)), Cti(T(10))],
        EventShape.INTERVAL,
    )
    r = run(executor, s.anti_join(s, on=lambda l, r: l.k == r.k))
    assert r.events == []
    assert r.ctis == [T(10)]


def anti_join_fragment(executor: Any) -> tempo.Result[Any]:
    """left [a 0,20) |30; right |4, [6,8), |30 (left processed first).

    right |4 -> out CTI 4: [0, ...) is uncovered so far -> released as a start edge at 0
    right [6,8) ends that fragment at 6; |30: the rest [8,20) is known -> out CTI 30
    """
    a = L(1, "a")
    left = Stream.create("left", [Interval(T(0), T(20), a), Cti(T(30))], EventShape.INTERVAL)
    right = Stream.create("right", [Cti(T(4)), Interval(T(6), T(8), R(1, "r")), Cti(T(30))], EventShape.INTERVAL)
    return run(executor, left.anti_join(right, on=lambda l, r: l.id == r.id))


def test_anti_join_fragment_released_as_start_edge_then_ended(executor: Any) -> None:
    r, a = anti_join_fragment(executor), L(1, "a")
    same_items(executor, evs(r), [iv(0, 6, a), iv(8, 20, a)])
    assert r.ctis == [T(4), T(30)]


@pytest.mark.needs(Capability.RAW_ITEMS)
def test_anti_join_fragment_is_a_start_edge_in_raw(executor: Any) -> None:
    assert norm_raw(anti_join_fragment(executor))[:2] == [("start", T(0), L(1, "a")), ("cti", T(4))]


def test_anti_join_left_ending_at_the_output_cti(executor: Any) -> None:
    """left a>>@1, |5, then a ends @5 (an end at its input's CTI); right |10 arrives before
    the end: out CTI 5 releases a's start edge [1, ...), and the end at 5 closes it at once,
    with no later CTI (the sweep had reached 5 already).

    ::

        left    [====>|5 ... a ends @5
        right               |10
        out     [1, 5)   released by |5 as a start edge, ended when a's end arrives
    """
    a = L(1, "a")
    left = Stream.create(
        "left", [EdgeStart(T(1), a, arrival=A(1)), Cti(T(5), arrival=A(2)), EdgeEnd(T(1), T(5), a, arrival=A(5))], EventShape.EDGE
    )
    right = Stream.create("right", [Cti(T(10), arrival=A(3))], EventShape.POINT, payload_type=R)
    r = run(executor, left.anti_join(right, on=lambda l, r: l.id == r.id))
    assert evs(r) == [iv(1, 5, a)]
    assert r.ctis == [T(5)]


def test_anti_join_right_edges(executor: Any) -> None:
    """left [a 0,20); right r>>@5 ends @8, s>>@15 never ended; |30 both, then |INF both.

    a minus [5,8) minus [15, INF) -> [0,5), [8,15)
    """
    a = L(1, "a")
    left = Stream.create("left", [Interval(T(0), T(20), a), Cti(T(30)), Cti(INF)], EventShape.INTERVAL)
    right = Stream.create(
        "right",
        [EdgeStart(T(5), R(1, "r")), EdgeEnd(T(5), T(8), R(1, "r")), EdgeStart(T(15), R(1, "s")), Cti(T(30)), Cti(INF)],
        EventShape.EDGE,
    )
    r = run(executor, left.anti_join(right, on=lambda l, r: l.id == r.id))
    assert sorted_evs(r) == [iv(0, 5, a), iv(8, 15, a)]
    assert r.ctis == [T(30), INF]


def test_anti_join_right_cti_settles_a_fragments_end(executor: Any) -> None:
    """A fragment's end goes out once the right input's CTI passes it, while the left input
    holds the output CTI back (5.9).

    ::

        t       0    5    7 8  9 10        20
        left    [a===|=========)   |5 ...  |20, then |INF
        right             [)    |9 ...                 |INF
        out     [0, 7) at |5: the right CTI 9 settles the cut at 7 (no right event starts before 9)
                [8, ...) at |9, a start edge: a right event may still start in [9, 10)
                ended at 10 by |INF
    """
    a = L(1, "a")
    left = Stream.create(
        "left",
        [Interval(T(0), T(10), a, arrival=A(1)), Cti(T(5), arrival=A(2)), Cti(T(20), arrival=A(6)), Cti(INF, arrival=A(7))],
        EventShape.INTERVAL,
    )
    right = Stream.create(
        "right", [Interval(T(7), T(8), R(1, "r"), arrival=A(3)), Cti(T(9), arrival=A(4)), Cti(INF, arrival=A(8))], EventShape.INTERVAL
    )
    r = run(executor, left.anti_join(right, on=lambda l, r: l.id == r.id))
    check_raw(
        executor,
        r,
        [
            ("interval", T(0), T(7), a),
            ("cti", T(5)),
            ("start", T(8), a),
            ("cti", T(9)),
            ("end", T(8), T(10), a),
            ("cti", INF),
        ],
    )


def test_anti_join_a_right_event_at_the_right_cti_ends_the_fragment(executor: Any) -> None:
    """left a>>@0 |5 (never ended); right *@5 |5: the right event starts at the right CTI
    itself, so nothing can cut a before it: the fragment [0, ...) released at output CTI 5
    ends at 5 (and a's end edge, which can no longer come before 5, cannot end it earlier)."""
    a = L(1, "a")
    left = Stream.create("left", [EdgeStart(T(0), a), Cti(T(5))], EventShape.EDGE)
    right = Stream.create("right", [Point(T(5), R(1, "r")), Cti(T(5))], EventShape.POINT)
    r = run(executor, left.anti_join(right, on=lambda l, r: l.id == r.id))
    assert sorted_evs(r) == [iv(0, 5, a)]
    assert r.ctis == [T(5)]


@pytest.mark.parametrize("then", ["ends at 27", "ends at 40", "CTI 30", "nothing"])
def test_anti_join_an_open_left_edge_is_cut_once_its_own_end_cannot_come_first(executor: Any, then: str) -> None:
    """The end of a fragment of an open left edge is the earlier of the first matching right
    start and the left's own end: final once the right CTI passes the start *and* the left's
    end is known or its input's CTI passes the start too (5.9).

    ::

        t        20   25   27   30   35   40
        left     b>>==|25..                    then: b ends @27 / @40, or |30, or nothing
        right                   *    |35
        out      [20, ...) at output CTI 25, a start edge, ended at:
                 27 (b's end arrives: nearer than the cut)
                 30 (b's end @40 arrives: the cut at 30 is final)
                 30 (left CTI 30: b can no longer end before 30)
                 never (b may still end before 30: the start edge stays open)
    """
    b = L(1, "b")
    later = {
        "ends at 27": [EdgeEnd(T(20), T(27), b, arrival=A(6))],
        "ends at 40": [EdgeEnd(T(20), T(40), b, arrival=A(6))],
        "CTI 30": [Cti(T(30), arrival=A(6))],
        "nothing": [],
    }[then]
    left = Stream.create("left", [EdgeStart(T(20), b, arrival=A(1)), Cti(T(25), arrival=A(2)), *later], EventShape.EDGE)
    right = Stream.create("right", [Point(T(30), R(1, "r"), arrival=A(3)), Cti(T(35), arrival=A(4))], EventShape.POINT)
    r = run(executor, left.anti_join(right, on=lambda l, r: l.id == r.id))
    end = {"ends at 27": 27, "ends at 40": 30, "CTI 30": 30, "nothing": None}[then]
    raw: list[Any] = [("start", T(20), b), ("cti", T(25))]
    if end is not None:
        raw.append(("end", T(20), T(end), b))
    if then == "CTI 30":
        raw.append(("cti", T(30)))
    check_raw(executor, r, raw)
    assert sorted_evs(r) == [iv(20, end, b)]


def test_anti_join_nothing_can_cut_once_the_right_input_ends(executor: Any) -> None:
    """left [a 0,10) |5 and no more; right |INF: nothing can cut a, so it goes out whole at
    output CTI 5 (before, a start edge never ended). left_outer_join likewise."""
    a = L(1, "a")
    left = Stream.create("left", [Interval(T(0), T(10), a), Cti(T(5))], EventShape.INTERVAL)
    right = Stream.create("right", [Cti(INF)], EventShape.INTERVAL, payload_type=R)
    r = run(executor, left.anti_join(right, on=lambda l, r: l.id == r.id))
    check_raw(executor, r, [("interval", T(0), T(10), a), ("cti", T(5))])
    outer = run(executor, left.left_outer_join(right, lambda l, r: l.id == r.id, lambda l, r: r, default=R(0, "none")))
    check_raw(executor, outer, [("interval", T(0), T(10), R(0, "none")), ("cti", T(5))])


def test_union_right_side_edge_ended_after_release(executor: Any) -> None:
    """left *a@1 |10 (processed first); right b>>@2 |5, b ends @7, |10.

    right |5 -> out 5 releases *a and b's start edge; b's end edge follows; right |10 -> 10
    """
    a, b = V(1), V(2)
    left = Stream.create("left", [Point(T(1), a), Cti(T(10))], EventShape.POINT)
    right = Stream.create("right", [EdgeStart(T(2), b), Cti(T(5)), EdgeEnd(T(2), T(7), b), Cti(T(10))], EventShape.EDGE)
    r = run(executor, left.union(right))
    same_items(executor, evs(r), [pt(1, a), iv(2, 7, b)])
    assert r.ctis == [T(5), T(10)]


def test_union_with_itself_of_edges(executor: Any) -> None:
    """s.union(s) with a>>@2 |3, a ends @6, |8: a twice, each [2,6)."""
    a = V(1)
    s = Stream.create("in", [EdgeStart(T(2), a), Cti(T(3)), EdgeEnd(T(2), T(6), a), Cti(T(8))], EventShape.EDGE)
    r = run(executor, s.union(s))
    same_items(executor, evs(r), [iv(2, 6, a), iv(2, 6, a)])
    assert r.ctis == [T(3), T(8)]


def test_join_of_a_stream_with_its_own_altered_lifetimes(executor: Any) -> None:
    """s joined with s.alter_event_duration(5s) on v: one input feeding both join sides.

    s:      *a@1  |2  *b@6  |10
    right:  [a 1,6)   [b 6,11)         (CTIs unchanged: 2, 10)
    pairs:  a@1 x [1,6) -> point @1;  b@6 x [6,11) -> point @6;  b@6 x a: other key
    """
    a, b = KV("a", 1), KV("b", 2)
    s = Stream.create("in", [Point(T(1), a), Cti(T(2)), Point(T(6), b), Cti(T(10))], EventShape.POINT)
    r = run(executor, s.join(s.alter_event_duration(sec(5)), on=lambda l, r: l.k == r.k, select=lambda l, r: Pair(l=l.v, r=r.v)))
    same_items(executor, evs(r), [pt(1, Pair(1, 1)), pt(6, Pair(2, 2))])
    assert r.ctis == [T(2), T(10)]


def test_join_of_a_stream_with_its_own_shifted_copy(executor: Any) -> None:
    """s joined with s.shift_event_time(-1s).alter_event_duration(3s): right CTIs are 1s behind.

    s:      *a@1  |2  *b@6  |10
    right:  [a 0,3)  |1   [b 5,8)  |9
    pairs: point @1 and point @6; both released once the output CTI (min of both) passes them.
    The output CTIs are min(left, right) after each step: 1 then 9 at the end (an intermediate
    2 depends on which join side a shared input's CTI reaches first, which is not specified).
    """
    a, b = KV("a", 1), KV("b", 2)
    s = Stream.create("in", [Point(T(1), a), Cti(T(2)), Point(T(6), b), Cti(T(10))], EventShape.POINT)
    right = s.shift_event_time(sec(-1)).alter_event_duration(sec(3))
    r = run(executor, s.join(right, on=lambda l, r: l.k == r.k, select=lambda l, r: Pair(l=l.v, r=r.v)))
    same_items(executor, evs(r), [pt(1, Pair(1, 1)), pt(6, Pair(2, 2))])
    assert r.ctis[0] == T(1) and r.ctis[-1] == T(9)
    assert set(r.ctis) <= {T(1), T(2), T(9)}


@attrs.frozen
class NL:
    id: int | None
    a: str


@attrs.frozen
class NR:
    id: int | None
    b: str


def test_aggregates_of_only_nulls_are_none(executor: Any) -> None:
    """[0,10): v = None, None -> count 2, sum/avg/min/max None (docs/semantics.md section 7)."""
    s = Stream.create("in", [Point(T(1), NV(None)), Point(T(2), NV(None)), Cti(T(10))], EventShape.POINT)
    r = run(
        executor,
        s.tumbling(sec(10)).aggregate(
            lambda w: Stats(
                start=w.start,
                end=w.end,
                n=w.count(),
                total=w.sum(lambda e: e.v),
                mean=w.avg(lambda e: e.v),
                lo=w.min(lambda e: e.v),
                hi=w.max(lambda e: e.v),
            )
        ),
    )
    same_items(executor, evs(r), [iv(0, 10, Stats(T(0), T(10), 2, None, None, None, None))])


@attrs.frozen
class NullKeyStats:
    k: int | None
    n: int


def test_null_group_key_is_its_own_group(executor: Any) -> None:
    """group_by(x) with x = 1, None, 1, None in [0,10): groups 1 (n2) then None (n2), first-seen order."""
    s = Stream.create(
        "in",
        [Point(T(1), X("a", 1)), Point(T(2), X("b", None)), Point(T(3), X("c", 1)), Point(T(4), X("d", None)), Cti(T(10))],
        EventShape.POINT,
    )
    r = run(executor, s.group_by(lambda e: e.x).tumbling(sec(10)).aggregate(lambda k, w: NullKeyStats(k=k, n=w.count())))
    same_items(executor, evs(r), [iv(0, 10, NullKeyStats(1, 2)), iv(0, 10, NullKeyStats(None, 2))])


def test_null_join_key_matches_nothing(executor: Any) -> None:
    """Every lifetime [0,10); left ids 1, None; right ids 1, None: only 1 == 1 matches.
    anti_join: the left with the null id has no match, so it is kept whole."""
    left = Stream.create("left", [Interval(T(0), T(10), NL(1, "x")), Interval(T(0), T(10), NL(None, "n")), Cti(T(10))], EventShape.INTERVAL)
    right = Stream.create(
        "right", [Interval(T(0), T(10), NR(1, "p")), Interval(T(0), T(10), NR(None, "q")), Cti(T(10))], EventShape.INTERVAL
    )
    r = run(executor, left.join(right, on=lambda l, r: l.id == r.id, select=lambda l, r: J(id=1, a=l.a, b=r.b)))
    same_items(executor, evs(r), [iv(0, 10, J(1, "x", "p"))])
    r2 = run(executor, left.anti_join(right, on=lambda l, r: l.id == r.id))
    same_items(executor, evs(r2), [iv(0, 10, NL(None, "n"))])


def test_final_cti_counts_open_edges_up_to_the_last_finite_cti(executor: Any) -> None:
    """hopping(size 10s, hop 5s) over an edge a>>@2 never ended; CTIs |12, |inf.

    In time:  a>>@2 ......................
    |12 closes windows ending <= 12: [-5,5) n1, [0,10) n1; output CTI 5 (start of [5,15)).
    |inf: the latest event time is 2, but the edge is known alive up to 12 - 1 tick (the CTI
    at 12 did not end it), so it counts as [2, 12): windows [5,15) n1 and [10,20) n1;
    [15,25) starts after 12 and gets nothing.
    """
    s = Stream.create("in", [EdgeStart(T(2), V(1)), Cti(T(12)), Cti(tempo.INFINITY)], EventShape.EDGE)
    r = run(executor, s.hopping(sec(10), sec(5)).aggregate(lambda w: Count(n=w.count(), total=w.sum(lambda e: e.v))))
    same_items(executor, evs(r), [iv(-5, 5, Count(1, 1)), iv(0, 10, Count(1, 1)), iv(5, 15, Count(1, 1)), iv(10, 20, Count(1, 1))])
    assert r.ctis == [T(5), INF]


def test_anti_join_fragment_closes_when_the_left_ends_at_the_cti(executor: Any) -> None:
    """left [2,10) (no right match); CTIs |6 then |10 on both.

    |6: the fragment [2, ...) is still uncovered at 6 and the left has not ended: it goes
    out open. |10: the left ends exactly at the new CTI, so the fragment ends at 10 -> [2,10).
    (Found by the differential test: the sweep must reach a left ending at the CTI.)
    """
    a = L(1, "a")
    left = Stream.create("left", [Interval(T(2), T(10), a), Cti(T(6)), Cti(T(10))], EventShape.INTERVAL)
    right = Stream.create("right", [Cti(T(6)), Cti(T(10))], EventShape.INTERVAL, payload_type=R)
    r = run(executor, left.anti_join(right, lambda l, r: l.id == r.id))
    assert [(e.start, e.end, e.payload) for e in r.events] == [(T(2), T(10), a)]
    assert r.ctis == [T(6), T(10)]


def test_anti_join_left_starting_at_the_cti_is_swept_later(executor: Any) -> None:
    """left [4,20) arrives with CTI |4 (left); right CTIs |4 then |8.

    At output CTI 4 the left starts exactly at the CTI: nothing of it is committed yet.
    At 8 its uncovered stretch [4, 8) is, and it goes out open (the left lives on) -> [4, inf).
    (Found by the differential test: a left starting at the CTI must not be forgotten.)
    """
    a = L(1, "a")
    left = Stream.create("left", [Interval(T(4), T(20), a), Cti(T(4)), Cti(T(30))], EventShape.INTERVAL)
    right = Stream.create("right", [Cti(T(4)), Cti(T(8))], EventShape.INTERVAL, payload_type=R)
    r = run(executor, left.anti_join(right, lambda l, r: l.id == r.id))
    assert [(e.start, e.end, e.payload) for e in r.events] == [(T(4), INF, a)]
    assert r.ctis == [T(4), T(8)]


def test_anti_join_fragment_closes_when_the_left_ends_at_the_last_cti(executor: Any) -> None:
    """left edge a>>@2, CTIs |6 (both); then the end edge a ends @6 and CTIs |9 (both).

    At 6 the fragment [2, ...) goes out open. The end edge then ends the left exactly at
    the CTI already passed (6): the fragment ends at 6 -> [2,6).
    (Found by the differential test.)
    """
    a = L(1, "a")
    left = Stream.create(
        "left",
        [EdgeStart(T(2), a, arrival=A(0)), Cti(T(6), arrival=A(1)), EdgeEnd(T(2), T(6), a, arrival=A(3)), Cti(T(9), arrival=A(4))],
        EventShape.EDGE,
    )
    right = Stream.create("right", [Cti(T(6), arrival=A(2)), Cti(T(9), arrival=A(4))], EventShape.INTERVAL, payload_type=R)
    r = run(executor, left.anti_join(right, lambda l, r: l.id == r.id))
    assert [(e.start, e.end, e.payload) for e in r.events] == [(T(2), T(6), a)]
    assert r.ctis == [T(6), T(9)]


@pytest.mark.parametrize("v, divisor", [(7, 3), (7, -3), (-7, 3), (-7, -3)])
def test_remainder_and_floor_division_follow_python(executor: Any, v: int, divisor: int) -> None:
    """``%`` takes the divisor's sign and ``//`` floors, as in Python (a zero divisor is an
    ``EvaluationError``: tests/conformance/test_value_edges.py)."""
    s = Stream.create("in", [Point(T(1), V(v)), Cti(T(2))], EventShape.POINT)
    r = run(executor, s.select(lambda e: NV(v=e.v % divisor)).union(s.select(lambda e: NV(v=e.v // divisor))))
    want = [v % divisor, v // divisor]
    assert sorted((e.payload.v for e in r.events), key=repr) == sorted(want, key=repr)
