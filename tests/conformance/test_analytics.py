"""Hand-written timeline tests for ``order_by_time()`` and ``analytic()``, on every executor.

Every expectation is derived by hand from docs/semantics.md section 5.11 (in time order). The
rules, in short (a tick is 1 µs; a point at s lives [s, s + 1 tick)):

* Within a group (one group without ``group_by``) events are ordered by start, then by payload
  field by field in declaration order (nulls first, NaN after every number, False < True,
  strings by code point), never by arrival. Events equal in start and payload are peers.
* ``order_by_time()`` passes every event on unchanged (lifetime and payload), once an input
  CTI c > its start arrives, in that order; only the emission order changes. CTIs unchanged.
* ``analytic()`` keeps each event's lifetime and gives it the projection as payload. Running
  aggregates cover the group's events up to and including the event and all its peers (SQL's
  RANGE frame): peers get identical values; sum/avg/min/max skip nulls (None when all are
  null), count counts events. ``a.previous(f, limit)`` is f of the last event before the
  event's peer group, if ``start - its start < limit`` (strict), else None; None for the first
  peer group, and None when that event's f is null (no skipping back). No limit: any distance.
* An event goes out at the first input CTI c > its start; output CTIs are the input CTIs. An
  output is a start edge while its event's end is unknown, ended by the event's end edge.
  Events starting at or after the last CTI are never released, unless a CTI at infinity
  (``Cti(INF)`` or ``advance_to_infinity_on_shutdown``) flushes the input.

Conventions as in test_operators.py: ``T(s)`` is 2024-01-01 plus s seconds, inputs carry
explicit CTIs, ``INF`` is naive ``datetime.max``, ``t`` in the timelines is one tick.
Timeline legend: ``[---)`` an interval, ``*`` a point, ``|c`` a CTI at c, ``>>`` an open edge.
Output CTIs and what each released are checked with ``release_steps`` on every executor; the
raw items (edges as edges, the order within a release) where ``Capability.RAW_ITEMS`` is
promised.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import attrs
import pytest

import tempo
from tempo import (
    TICK,
    AdvanceTimeSettings,
    Cti,
    EdgeEnd,
    EdgeStart,
    EventShape,
    Interval,
    Point,
    Stream,
)
from tests.conformance.compare import release_steps
from tests.conformance.test_window_kinds import Release, at, check, check_raw_steps, span
from tests.conformance.test_operators import INF, KV, NV, V, T, evs, key, norm_raw, run, sec
from tests.conftest import Capability

"""An output CTI and the events it released."""

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def points(*items: Any) -> Stream[Any]:
    return Stream.create("in", list(items), EventShape.POINT)


def v_of(e: Any) -> Any:
    return e.v


# --------------------------------------------------------------------------------------
# payload classes
# --------------------------------------------------------------------------------------


@attrs.frozen
class KN:
    k: str
    v: int | None


@attrs.frozen
class Run:
    v: int | None
    prev: int | None
    n: int
    total: int | None


@attrs.frozen
class GRun:
    k: str
    v: int | None
    prev: int | None
    n: int
    total: int | None


@attrs.frozen
class Peer:
    v: int
    prev: int | None
    n: int
    total: int | None
    lo: int | None
    hi: int | None


@attrs.frozen
class GAgg:
    k: str
    v: int | None
    n: int
    total: int | None
    mean: float | None
    lo: int | None
    hi: int | None


@attrs.frozen
class NX:
    n: int | None
    x: int


@attrs.frozen
class NXOut:
    n: int | None
    x: int
    prev: int | None
    c: int
    total: int | None


@attrs.frozen
class Tie:
    flag: bool
    name: str
    f: float | None
    id: int


@attrs.frozen
class Ranked:
    id: int
    prev: int | None
    n: int


@attrs.frozen
class Lim:
    v: int
    near: int | None
    far: int | None


@attrs.frozen
class Prev:
    v: int | None
    prev: int | None
    prev_or: int
    missing: bool


@attrs.frozen
class P:
    v: int
    prev: int | None
    n: int


@attrs.frozen
class Delta:
    v: int
    d: int


@attrs.frozen
class W:
    start: datetime
    end: datetime
    n: int
    total: int | None


def run_stats(e: Any, a: Any) -> Run:
    return Run(v=e.v, prev=a.previous(v_of), n=a.count(), total=a.sum(v_of))


# --------------------------------------------------------------------------------------
# order: start, then payload, never arrival
# --------------------------------------------------------------------------------------


def test_late_arrival_with_an_earlier_start_changes_previous_and_running_totals(executor: Any) -> None:
    """analytic: v, previous v, count, running sum; @3 arrives after @4.

    arrival: *@1 v10, *@4 v12, |2, *@3 v11, |5
    t:  1    2    3    4    5
        *10  |2   *11  *12  |5
    order by start: @1 v10, @3 v11, @4 v12
    @1: prev None (first)  n1 s10      released at |2
    @3: prev 10            n2 s21      released at |5 (|2 is not past 3)
    @4: prev 11            n3 s33      released at |5
    (in arrival order @4 would have prev 10 and s22, @3 prev 12 and s33: not expected.)
    Output CTIs unchanged: 2, 5.
    """
    s = points(Point(T(1), V(10)), Point(T(4), V(12)), Cti(T(2)), Point(T(3), V(11)), Cti(T(5)))
    r = run(executor, s.analytic(run_stats))
    check(
        r,
        [
            (T(2), [at(T(1), Run(10, None, 1, 10))]),
            (T(5), [at(T(3), Run(11, 10, 2, 21)), at(T(4), Run(12, 11, 3, 33))]),
        ],
    )


def test_ties_at_the_same_start_are_ordered_by_payload_nulls_first(executor: Any) -> None:
    """analytic over NX(n, x): ties at 5 ordered by n (nulls first), then x.

    arrival: *@5 (3,1), *@2 (0,100), *@5 (None,9), |3, *@5 (1,7), *@5 (1,2), |6
    t:  2          3    5                                  6
        *(0,100)   |3   *(3,1) *(None,9) *(1,7) *(1,2)      |6
    order: @2 (0,100) | @5 (None,9) | @5 (1,2) | @5 (1,7) | @5 (3,1)
    prev x:   None       100          9          2          7
    count:    1          2            3          4          5
    sum x:    100        109          111        118        119
    (by arrival @5 (3,1) would come first at 5, with prev 100.)
    |3 releases @2; |6 the four at 5. Output CTIs unchanged: 3, 6.
    """
    s = points(
        Point(T(5), NX(3, 1)),
        Point(T(2), NX(0, 100)),
        Point(T(5), NX(None, 9)),
        Cti(T(3)),
        Point(T(5), NX(1, 7)),
        Point(T(5), NX(1, 2)),
        Cti(T(6)),
    )
    r = run(executor, s.analytic(lambda e, a: NXOut(n=e.n, x=e.x, prev=a.previous(lambda e: e.x), c=a.count(), total=a.sum(lambda e: e.x))))
    check(
        r,
        [
            (T(3), [at(T(2), NXOut(0, 100, None, 1, 100))]),
            (
                T(6),
                [
                    at(T(5), NXOut(None, 9, 100, 2, 109)),
                    at(T(5), NXOut(1, 2, 9, 3, 111)),
                    at(T(5), NXOut(1, 7, 2, 4, 118)),
                    at(T(5), NXOut(3, 1, 7, 5, 119)),
                ],
            ),
        ],
    )


def test_ties_order_bools_strings_by_code_point_and_nan_after_every_number(executor: Any) -> None:
    """analytic over Tie(flag, name, f, id), all at 3: previous id and count give the rank.

    arrival (id: flag name f): 1 T "a" 1.0, 2 F "b" None, 3 F "B" NaN, 4 F "B" -2.0,
                               5 F "B" None, 6 F "b" 0.5, 7 T "B" 2.0, 8 F "B" inf; then |4
    t:  3 (all eight)      4
        ********           |4
    flag: False < True -> ids 2 3 4 5 6 8 first, then 1 7
    name by code point: "B" (66) < "a" (97) < "b" (98) (not case-insensitive)
      False "B": f None (5) < -2.0 (4) < inf (8) < NaN (3);  False "b": None (2) < 0.5 (6)
      True: "B" (7) < "a" (1)
    order:   5    4  8  3  2  6  7  1
    prev id: None 5  4  8  3  2  6  7
    count:   1    2  3  4  5  6  7  8
    All released at |4; output CTIs: 4.
    """
    s = points(
        Point(T(3), Tie(True, "a", 1.0, 1)),
        Point(T(3), Tie(False, "b", None, 2)),
        Point(T(3), Tie(False, "B", float("nan"), 3)),
        Point(T(3), Tie(False, "B", -2.0, 4)),
        Point(T(3), Tie(False, "B", None, 5)),
        Point(T(3), Tie(False, "b", 0.5, 6)),
        Point(T(3), Tie(True, "B", 2.0, 7)),
        Point(T(3), Tie(False, "B", float("inf"), 8)),
        Cti(T(4)),
    )
    r = run(executor, s.analytic(lambda e, a: Ranked(id=e.id, prev=a.previous(lambda e: e.id), n=a.count())))
    order = [5, 4, 8, 3, 2, 6, 7, 1]
    prevs: list[int | None] = [None, 5, 4, 8, 3, 2, 6, 7]
    check(r, [(T(4), [at(T(3), Ranked(i, p, n)) for n, (i, p) in enumerate(zip(order, prevs), start=1)])])


# --------------------------------------------------------------------------------------
# peers, limits, nulls
# --------------------------------------------------------------------------------------


def test_exact_peers_get_identical_analytics_and_the_previous_before_both(executor: Any) -> None:
    """analytic: v, previous v, count, sum, min, max over a RANGE frame (peers included).

    arrival: *@3 v9, *@1 v5, *@3 v7, *@2 v6, *@1 v5, |2, *@4 v2, *@3 v7, |5
    t:  1        2    3             4    5
        *5 *5    *6   *7 *7 *9      *2
             |2                          |5
    peer groups in order: {@1 v5, @1 v5} {@2 v6} {@3 v7, @3 v7} {@3 v9} {@4 v2}
                 prev   n   sum  min  max
    @1 v5 (x2)   None   2   10   5    5      both identical (not n1 s5 / n2 s10, prev 5)
    @2 v6        5      3   16   5    6
    @3 v7 (x2)   6      5   30   5    7      both: the event before both is @2 v6
    @3 v9        7      6   39   5    9
    @4 v2        9      7   41   2    9
    |2 releases the two @1; |5 the rest. Output CTIs unchanged: 2, 5.
    """
    s = points(
        Point(T(3), V(9)),
        Point(T(1), V(5)),
        Point(T(3), V(7)),
        Point(T(2), V(6)),
        Point(T(1), V(5)),
        Cti(T(2)),
        Point(T(4), V(2)),
        Point(T(3), V(7)),
        Cti(T(5)),
    )
    r = run(
        executor,
        s.analytic(lambda e, a: Peer(v=e.v, prev=a.previous(v_of), n=a.count(), total=a.sum(v_of), lo=a.min(v_of), hi=a.max(v_of))),
    )
    five, seven = Peer(5, None, 2, 10, 5, 5), Peer(7, 6, 5, 30, 5, 7)
    check(
        r,
        [
            (T(2), [at(T(1), five), at(T(1), five)]),
            (
                T(5),
                [
                    at(T(2), Peer(6, 5, 3, 16, 5, 6)),
                    at(T(3), seven),
                    at(T(3), seven),
                    at(T(3), Peer(9, 7, 6, 39, 5, 9)),
                    at(T(4), Peer(2, 9, 7, 41, 2, 9)),
                ],
            ),
        ],
    )


def test_previous_limit_is_strict_exactly_limit_back_is_none(executor: Any) -> None:
    """previous(v, limit=3s) as ``near``, previous(v) without a limit as ``far``.

    t:  0    3         6-t       9-t   10
        *1   *2        *3        *4    |10
    @3    - @0   = 3s exactly:       near None (not < 3s), far 1
    @6-t  - @3   = 3s - 1 tick:      near 2 (just inside),  far 2
    @9-t  - @6-t = 3s exactly:       near None,             far 3
    @0: first event: None for both. All released at |10; output CTIs: 10.
    """
    s = points(
        Point(T(0), V(1)),
        Point(T(3), V(2)),
        Point(T(6) - TICK, V(3)),
        Point(T(9) - TICK, V(4)),
        Cti(T(10)),
    )
    r = run(executor, s.analytic(lambda e, a: Lim(v=e.v, near=a.previous(v_of, sec(3)), far=a.previous(v_of))))
    check(
        r,
        [
            (
                T(10),
                [
                    at(T(0), Lim(1, None, None)),
                    at(T(3), Lim(2, None, 1)),
                    at(T(6) - TICK, Lim(3, 2, 2)),
                    at(T(9) - TICK, Lim(4, None, 3)),
                ],
            )
        ],
    )


def test_previous_of_a_null_value_is_null_not_the_one_before(executor: Any) -> None:
    """previous(v) where the previous event's v is null; with coalesce and is_null on it.

    arrival: *@2 None, *@1 v4, |3, *@5 v8, *@4 v6, |6
    t:  1    2      3    4    5    6
        *4   *None  |3   *6   *8   |6
    @1 v4:   prev None (first)                    prev_or -1  missing True
    @2 None: prev 4                               prev_or 4   missing False
    @4 v6:   prev None: @2's v is null (not 4)    prev_or -1  missing True
    @5 v8:   prev 6                               prev_or 6   missing False
    |3 releases @1, @2; |6 @4, @5. Output CTIs unchanged: 3, 6.
    """
    s = points(Point(T(2), NV(None)), Point(T(1), NV(4)), Cti(T(3)), Point(T(5), NV(8)), Point(T(4), NV(6)), Cti(T(6)))

    def project(e: Any, a: Any) -> Prev:
        prev = a.previous(v_of)
        return Prev(v=e.v, prev=prev, prev_or=tempo.coalesce(prev, -1), missing=tempo.is_null(prev))

    r = run(executor, s.analytic(project))
    check(
        r,
        [
            (T(3), [at(T(1), Prev(4, None, -1, True)), at(T(2), Prev(None, 4, 4, False))]),
            (T(6), [at(T(4), Prev(6, None, -1, True)), at(T(5), Prev(8, 6, 6, False))]),
        ],
    )


# --------------------------------------------------------------------------------------
# grouped and not; running avg / min / max with nulls
# --------------------------------------------------------------------------------------


def _grouped_input() -> Stream[KN]:
    return points(
        Point(T(1), KN("a", 1)),
        Point(T(2), KN("b", 10)),
        Point(T(4), KN("a", 4)),
        Point(T(3), KN("b", 30)),
        Point(T(3), KN("a", 3)),
        Cti(T(5)),
        Point(T(6), KN("b", 60)),
        Point(T(7), KN("a", 7)),
        Cti(T(8)),
    )


GROUPED_TIMELINE = """
    arrival: a@1 v1, b@2 v10, a@4 v4, b@3 v30, a@3 v3, |5, b@6 v60, a@7 v7, |8
    t:  1    2    3        4    5    6    7    8
    a   *1        *3       *4             *7
    b        *10  *30                *60
                                |5                  |8
"""


def test_grouped_analytic_runs_per_key(executor: Any) -> None:
    """group_by(k).analytic: previous v, count and sum per key.
    {timeline}
    a: @1 v1 prev None n1 s1 | @3 v3 prev 1 n2 s4 | @4 v4 prev 3 n3 s8 | @7 v7 prev 4 n4 s15
       (by arrival a@4 would have prev 1 and s5)
    b: @2 v10 prev None n1 s10 | @3 v30 prev 10 n2 s40 | @6 v60 prev 30 n3 s100
    |5 releases the events at 1..4 of both keys; |8 b@6 and a@7. Output CTIs: 5, 8.
    """
    r = run(
        executor,
        _grouped_input()
        .group_by(lambda e: e.k)
        .analytic(lambda k, e, a: GRun(k=k, v=e.v, prev=a.previous(v_of), n=a.count(), total=a.sum(v_of))),
    )
    check(
        r,
        [
            (
                T(5),
                [
                    at(T(1), GRun("a", 1, None, 1, 1)),
                    at(T(2), GRun("b", 10, None, 1, 10)),
                    at(T(3), GRun("a", 3, 1, 2, 4)),
                    at(T(3), GRun("b", 30, 10, 2, 40)),
                    at(T(4), GRun("a", 4, 3, 3, 8)),
                ],
            ),
            (T(8), [at(T(6), GRun("b", 60, 30, 3, 100)), at(T(7), GRun("a", 7, 4, 4, 15))]),
        ],
    )


def test_ungrouped_analytic_runs_over_all_keys(executor: Any) -> None:
    """The same input without group_by: one group, ties at 3 by payload (k "a" < "b").
    {timeline}
    order: a@1 v1 | b@2 v10 | a@3 v3 | b@3 v30 | a@4 v4 | b@6 v60 | a@7 v7
    prev:  None     1         10       3         30       4         60
    n:     1        2         3        4         5        6         7
    sum:   1        11        14       44        48       108       115
    |5 releases the first five; |8 the last two. Output CTIs: 5, 8.
    """
    r = run(executor, _grouped_input().analytic(lambda e, a: GRun(k=e.k, v=e.v, prev=a.previous(v_of), n=a.count(), total=a.sum(v_of))))
    check(
        r,
        [
            (
                T(5),
                [
                    at(T(1), GRun("a", 1, None, 1, 1)),
                    at(T(2), GRun("b", 10, 1, 2, 11)),
                    at(T(3), GRun("a", 3, 10, 3, 14)),
                    at(T(3), GRun("b", 30, 3, 4, 44)),
                    at(T(4), GRun("a", 4, 30, 5, 48)),
                ],
            ),
            (T(8), [at(T(6), GRun("b", 60, 4, 6, 108)), at(T(7), GRun("a", 7, 60, 7, 115))]),
        ],
    )


test_grouped_analytic_runs_per_key.__doc__ = (test_grouped_analytic_runs_per_key.__doc__ or "").format(timeline=GROUPED_TIMELINE)
test_ungrouped_analytic_runs_over_all_keys.__doc__ = (test_ungrouped_analytic_runs_over_all_keys.__doc__ or "").format(
    timeline=GROUPED_TIMELINE
)


def test_running_avg_min_max_skip_nulls(executor: Any) -> None:
    """group_by(k).analytic: running count, sum, avg, min, max of a nullable v.

    arrival: a@2 v4, a@1 None, b@2 None, |3, a@4 v2, a@3 None, b@6 None, a@5 v9, |7
    t:  1      2        3      4    5    6       7
    a   *None  *4       *None  *2   *9
    b          *None                     *None
                        |3                       |7
    a: @1 None  n1 s None avg None min None max None   (all null so far)
       @2 4     n2 s4     avg 4.0  min 4    max 4
       @3 None  n3 s4     avg 4.0  min 4    max 4      (count counts the null event)
       @4 2     n4 s6     avg 3.0  min 2    max 4
       @5 9     n5 s15    avg 5.0  min 2    max 9
    b: @2 None  n1, all None;  @6 None  n2, all None
    |3 releases a@1, a@2, b@2; |7 the rest. Output CTIs: 3, 7.
    """
    s = points(
        Point(T(2), KN("a", 4)),
        Point(T(1), KN("a", None)),
        Point(T(2), KN("b", None)),
        Cti(T(3)),
        Point(T(4), KN("a", 2)),
        Point(T(3), KN("a", None)),
        Point(T(6), KN("b", None)),
        Point(T(5), KN("a", 9)),
        Cti(T(7)),
    )
    r = run(
        executor,
        s.group_by(lambda e: e.k).analytic(
            lambda k, e, a: GAgg(k=k, v=e.v, n=a.count(), total=a.sum(v_of), mean=a.avg(v_of), lo=a.min(v_of), hi=a.max(v_of))
        ),
    )
    check(
        r,
        [
            (
                T(3),
                [
                    at(T(1), GAgg("a", None, 1, None, None, None, None)),
                    at(T(2), GAgg("a", 4, 2, 4, 4.0, 4, 4)),
                    at(T(2), GAgg("b", None, 1, None, None, None, None)),
                ],
            ),
            (
                T(7),
                [
                    at(T(3), GAgg("a", None, 3, 4, 4.0, 4, 4)),
                    at(T(4), GAgg("a", 2, 4, 6, 3.0, 2, 4)),
                    at(T(5), GAgg("a", 9, 5, 15, 5.0, 2, 9)),
                    at(T(6), GAgg("b", None, 2, None, None, None, None)),
                ],
            ),
        ],
    )


# --------------------------------------------------------------------------------------
# lifetimes: intervals and edges
# --------------------------------------------------------------------------------------


def test_interval_and_open_edges_keep_their_lifetimes(executor: Any) -> None:
    """analytic over edges: v, previous v, count; lifetimes pass unchanged.

    arrival: a>>@1, b>>@2, b ends @4, |3, c>>@5, a ends @6, |7
    t:  1    2    3    4    5    6    7         INF
        a>>>>>>>>>>>>>>>>>>>>>>>>)               a [1,6): its end edge arrives after |3
             [b------)                           b [2,4): both edges before |3
                           c>>>>>>>>>>>>>>>>>>>> c never ended
                  |3                  |7
    order: a@1 prev None n1 | b@2 prev 1 n2 | c@5 prev 2 n3
    |3: a out as a start edge (end unknown), b as the interval [2,4); a's end edge (6)
    ends it before |7; |7: c out as a start edge, never ended (released, open).
    Output CTIs unchanged: 3, 7.
    """
    s: Stream[V] = Stream.create(
        "in",
        [
            EdgeStart(T(1), V(1)),
            EdgeStart(T(2), V(2)),
            EdgeEnd(T(2), T(4), V(2)),
            Cti(T(3)),
            EdgeStart(T(5), V(3)),
            EdgeEnd(T(1), T(6), V(1)),
            Cti(T(7)),
        ],
        EventShape.EDGE,
    )
    r = run(executor, s.analytic(lambda e, a: P(v=e.v, prev=a.previous(v_of), n=a.count())))
    pa, pb, pc = P(1, None, 1), P(2, 1, 2), P(3, 2, 3)
    check(r, [(T(3), [span(T(1), T(6), pa), span(T(2), T(4), pb)]), (T(7), [span(T(5), INF, pc)])])
    assert r.withheld is None
    check_raw_steps(
        executor,
        r,
        [
            ([("start", T(1), pa), ("interval", T(2), T(4), pb)], T(3)),
            ([("end", T(1), T(6), pa), ("start", T(5), pc)], T(7)),
        ],
    )


# --------------------------------------------------------------------------------------
# order_by_time
# --------------------------------------------------------------------------------------


def _unordered_intervals() -> Stream[KV]:
    return Stream.create(
        "in",
        [
            Interval(T(4), T(9), KV("b", 1)),
            Interval(T(2), T(8), KV("z", 2)),
            Interval(T(2), T(3), KV("a", 3)),
            Interval(T(1), T(20), KV("m", 4)),
            Cti(T(3)),
            Interval(T(5), T(6), KV("a", 5)),
            Interval(T(3), T(4), KV("c", 6)),
            Interval(T(3), T(30), KV("c", 0)),
            Cti(T(6)),
            Interval(T(7), T(8), KV("q", 7)),
        ],
        EventShape.INTERVAL,
    )


ORDER_BY_TIME_TIMELINE = """
    arrival: [4,9) b1, [2,8) z2, [2,3) a3, [1,20) m4, |3, [5,6) a5, [3,4) c6, [3,30) c0, |6,
             [7,8) q7
    t:  1    2    3    4    5    6    7    8    9        20        30
        [m4----------------------------------------------)
             [z2-----------------------------)
             [a3-)
                       [b1-------------------)
                  [c6-)
                  [c0-----------------------------------------------)
                            [a5-)
                                      [q7-)
                  |3             |6
    order (start, then k, then v): [1,20) m4 | [2,3) a3 | [2,8) z2 || [3,30) c0 | [3,4) c6 |
    [4,9) b1 | [5,6) a5 -- the end plays no part; q7 starts after the last CTI 6: never out.
"""


def test_order_by_time_passes_every_event_unchanged(executor: Any) -> None:
    """order_by_time(): the same lifetimes and payloads, released by the first CTI past
    their start; output CTIs unchanged; the same released events as the input alone.
    {timeline}
    |3 releases m4, a3, z2; |6 c0, c6, b1, a5; q7 is withheld (1 event, waiting for 7).
    """
    r = run(executor, _unordered_intervals().order_by_time())
    check(
        r,
        [
            (T(3), [span(T(1), T(20), KV("m", 4)), span(T(2), T(3), KV("a", 3)), span(T(2), T(8), KV("z", 2))]),
            (
                T(6),
                [
                    span(T(3), T(30), KV("c", 0)),
                    span(T(3), T(4), KV("c", 6)),
                    span(T(4), T(9), KV("b", 1)),
                    span(T(5), T(6), KV("a", 5)),
                ],
            ),
        ],
    )
    assert r.withheld == tempo.Withheld(events=1, waiting_for=T(7))
    alone = run(executor, _unordered_intervals())
    assert sorted(evs(r), key=key) == sorted(evs(alone), key=key)
    assert r.ctis == alone.ctis
    assert release_steps(r) == release_steps(alone)


@pytest.mark.needs(Capability.RAW_ITEMS)
def test_order_by_time_emits_in_start_then_payload_order_in_raw(executor: Any) -> None:
    """order_by_time(): result.raw lists each release in the order, not in arrival order.
    {timeline}
    """
    r = run(executor, _unordered_intervals().order_by_time())
    assert norm_raw(r) == [
        ("interval", T(1), T(20), KV("m", 4)),
        ("interval", T(2), T(3), KV("a", 3)),
        ("interval", T(2), T(8), KV("z", 2)),
        ("cti", T(3)),
        ("interval", T(3), T(30), KV("c", 0)),
        ("interval", T(3), T(4), KV("c", 6)),
        ("interval", T(4), T(9), KV("b", 1)),
        ("interval", T(5), T(6), KV("a", 5)),
        ("cti", T(6)),
    ]


for _test in (test_order_by_time_passes_every_event_unchanged, test_order_by_time_emits_in_start_then_payload_order_in_raw):
    _test.__doc__ = (_test.__doc__ or "").format(timeline=ORDER_BY_TIME_TIMELINE)


# --------------------------------------------------------------------------------------
# the last CTI; flushing
# --------------------------------------------------------------------------------------


def _no_flush(items: list[Any]) -> Stream[V]:
    return Stream.create("in", items, EventShape.POINT)


def _flush_by_cti(items: list[Any]) -> Stream[V]:
    return Stream.create("in", [*items, Cti(INF)], EventShape.POINT)


def _flush_by_shutdown(items: list[Any]) -> Stream[V]:
    return Stream.create("in", items, EventShape.POINT, AdvanceTimeSettings.replay())


@pytest.mark.parametrize("flush", [_no_flush, _flush_by_cti, _flush_by_shutdown], ids=["none", "cti-inf", "shutdown"])
def test_nothing_is_released_at_or_after_the_last_cti(executor: Any, flush: Callable[[list[Any]], Stream[V]]) -> None:
    """analytic: v, previous v, count; the last CTI is 4.

    t:  1    4    6
        *1   *2   *3
             |4
    |4 releases @1 only: 4 is not > 4, and @6 is after it. Without a flush @4 and @6 are never
    released (withheld: 2 events, waiting for 4). A CTI at infinity (an explicit Cti(INF), or
    advance_to_infinity_on_shutdown via replay()) releases them: @4 prev 1 n2, @6 prev 2 n3.
    Output CTIs: 4 (and INF when flushed).
    """
    s = flush([Point(T(1), V(1)), Point(T(4), V(2)), Cti(T(4)), Point(T(6), V(3))])
    r = run(executor, s.analytic(lambda e, a: P(v=e.v, prev=a.previous(v_of), n=a.count())))
    first: Release = (T(4), [at(T(1), P(1, None, 1))])
    if flush is _no_flush:
        check(r, [first])
        assert r.withheld == tempo.Withheld(events=2, waiting_for=T(4))
    else:
        check(r, [first, (INF, [at(T(4), P(2, 1, 2)), at(T(6), P(3, 2, 3))])])
        assert r.withheld is None


# --------------------------------------------------------------------------------------
# chains
# --------------------------------------------------------------------------------------


def test_analytic_output_feeds_a_tumbling_window(executor: Any) -> None:
    """analytic d = v - coalesce(previous v, v), then tumbling(10s) sums d.

    arrival: *@2 v10, *@12 v15, *@5 v13, |11, *@14 v11, *@25 v30, |21, |INF
    t:  0   2    5        10 11  12   14      20 21     25       30
        |   *10  *13      |  |11 *15  *11     |  |21    *30      |
    order: @2 v10 d 0 (no previous) | @5 v13 d 3 | @12 v15 d 2 | @14 v11 d -4 | @25 v30 d 19
    (by arrival @12 would get d 5 and @5 d -2.)
    analytic: |11 releases @2, @5; |21 @12, @14; INF @25; its CTIs 11, 21, INF.
    tumbling [0,10): n2 s3, complete at 11 | [10,20): n2 s-2, at 21 | [20,30): n1 s19, at INF
    window CTIs pulled back to the earliest incomplete window: 11 -> 10, 21 -> 20, INF.
    """
    s = points(
        Point(T(2), V(10)),
        Point(T(12), V(15)),
        Point(T(5), V(13)),
        Cti(T(11)),
        Point(T(14), V(11)),
        Point(T(25), V(30)),
        Cti(T(21)),
        Cti(INF),
    )
    deltas = s.analytic(lambda e, a: Delta(v=e.v, d=e.v - tempo.coalesce(a.previous(v_of), e.v)))
    check(
        run(executor, deltas),
        [
            (T(11), [at(T(2), Delta(10, 0)), at(T(5), Delta(13, 3))]),
            (T(21), [at(T(12), Delta(15, 2)), at(T(14), Delta(11, -4))]),
            (INF, [at(T(25), Delta(30, 19))]),
        ],
    )
    windows = deltas.tumbling(sec(10)).aggregate(lambda w: W(start=w.start, end=w.end, n=w.count(), total=w.sum(lambda e: e.d)))
    check(
        run(executor, windows),
        [
            (T(10), [span(T(0), T(10), W(T(0), T(10), 2, 3))]),
            (T(20), [span(T(10), T(20), W(T(10), T(20), 2, -2))]),
            (INF, [span(T(20), T(30), W(T(20), T(30), 1, 19))]),
        ],
    )
