"""The aggregates beyond count/sum/avg/min/max (docs/semantics.md 5.6.5) on every executor:
variances and deviations, distinct counts, first and last, percentiles, collect; in
hopping, count and snapshot windows and as running analytics. Expectations written by
hand from 5.6.5.

The values are chosen so that every float is exact whatever order an executor adds them in
(Welford's update and its merge only meet halves and quarters with 1, 4, 7, 10), so the
executors must agree to the bit; 7.3 says why other values may differ in the last bits.
"""

from __future__ import annotations

import math
import statistics
from datetime import timedelta
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import Cti, EventShape, InMemoryExecutor, Point, QueryBuildError, Stream, WindowTimestamp
from tests.conformance.test_operators import T, run
from tests.conformance.test_window_kinds import Release, check, span
from tests.budget import examples
from tests.conftest import VECTORISED


@attrs.frozen
class R:
    k: str
    tag: str
    v: float | None


@attrs.frozen
class Stats:
    k: str
    n: int
    var: float | None
    var_pop: float | None
    sd: float | None
    sd_pop: float | None
    distinct_v: int
    distinct_tag: int
    first_v: float | None
    first_tag: str
    last_v: float | None
    last_tag: str
    p25: float | None
    median: float | None
    approx50: float | None
    approx75: float | None
    values: list[float]


def readings() -> list[Any]:
    """
    ::

                 0    5    10   15   20
        a         **  ** **                a@1 (x, 1) and a@1 (y, 4); a@4 (w, -), a@5 (y, -),
                                           a@7 (z, 10), a@8 (u, 7)
        b          *          *            b@2 (s, 2); b@12 (n, -)
        CTIs               ^         ^     10, 20
    """
    return [
        Point(T(1), R("a", "y", 4.0)),
        Point(T(1), R("a", "x", 1.0)),
        Point(T(2), R("b", "s", 2.0)),
        Point(T(4), R("a", "w", None)),
        Point(T(5), R("a", "y", None)),
        Point(T(7), R("a", "z", 10.0)),
        Point(T(8), R("a", "u", 7.0)),
        Cti(T(10)),
        Point(T(12), R("b", "n", None)),
        Cti(T(20)),
    ]


def stats(stream: Stream[R]) -> Stream[Stats]:
    return (
        stream.group_by(lambda e: e.k)
        .tumbling(timedelta(seconds=10))
        .aggregate(
            lambda k, w: Stats(
                k=k,
                n=w.count(),
                var=w.var(lambda e: e.v),
                var_pop=w.var_pop(lambda e: e.v),
                sd=w.stddev(lambda e: e.v),
                sd_pop=w.stddev_pop(lambda e: e.v),
                distinct_v=w.count_distinct(lambda e: e.v),
                distinct_tag=w.count_distinct(lambda e: e.tag),
                first_v=w.first(lambda e: e.v),
                first_tag=w.first(lambda e: e.tag),
                last_v=w.last(lambda e: e.v),
                last_tag=w.last(lambda e: e.tag),
                p25=w.percentile(lambda e: e.v, 0.25),
                median=w.median(lambda e: e.v),
                approx50=w.percentile_approx(lambda e: e.v, 0.5),
                approx75=w.percentile_approx(lambda e: e.v, 0.75),
                values=w.collect(lambda e: e.v),
            )
        )
    )


def test_statistics_per_key_in_tumbling_windows(executor: Any) -> None:
    """Key a in [0, 10): six events, four values 1, 4, 10, 7 (in order of start, then
    payload: (a, x, 1) before (a, y, 4) at 1). Mean 5.5, squared deviations 45: var 45/3 = 15,
    var_pop 45/4 = 11.25. Sorted 1, 4, 7, 10: p25 at rank 0.75 is 1 + 0.75·3 = 3.25; the median
    at 1.5 is 4 + 0.5·3 = 5.5; percentile_approx 0.5 takes rank ceil(2) = 2: 4, and 0.75 rank 3: 7.
    First by (start, payload): the value 1 and tag x (x < y at 1); last: a@8, 7 and u. Tags
    x, y, w, y, z, u: 5 distinct. Key b in [0, 10): one value, so no sample variance; in
    [10, 20) no value at all: every value aggregate null, distinct counts 0, collect empty.
    """
    r = run(executor, stats(Stream.create("in", readings(), EventShape.POINT)))
    a = Stats("a", 6, 15.0, 11.25, math.sqrt(15.0), math.sqrt(11.25), 4, 5, 1.0, "x", 7.0, "u", 3.25, 5.5, 4.0, 7.0, [1.0, 4.0, 10.0, 7.0])
    b = Stats("b", 1, None, 0.0, None, 0.0, 1, 1, 2.0, "s", 2.0, "s", 2.0, 2.0, 2.0, 2.0, [2.0])
    b_empty = Stats("b", 1, None, None, None, None, 0, 1, None, "n", None, "n", None, None, None, None, [])
    releases: list[Release] = [
        (T(10), [span(T(0), T(10), a), span(T(0), T(10), b)]),
        (T(20), [span(T(10), T(20), b_empty)]),
    ]
    check(r, releases)


@attrs.frozen
class Order:
    first: str | None
    last: str | None
    tags: list[str]
    distinct: int


def test_first_last_collect_in_count_windows_and_snapshots(executor: Any) -> None:
    """Count windows of 3 over all events (ranked by start, then payload k, tag, v): ranks
    (a,x,1)@1 (a,y,4)@1 (b,s,2)@2 | (a,w,-)@4 (a,y,-)@5 (a,z,10)@7 | (a,u,7)@8 (b,n,-)@12 and no
    third: two windows, stamped LATEST (default) at their last start, released by the CTIs
    after them (10 releases both).

    Snapshots over the events stretched to 3 s: the windows between consecutive endpoints;
    collect in (start, payload) order within each.
    """
    s = Stream.create("in", readings(), EventShape.POINT)
    counted = s.count_window(3).aggregate(
        lambda w: Order(
            first=w.first(lambda e: e.tag),
            last=w.last(lambda e: e.tag),
            tags=w.collect(lambda e: e.tag),
            distinct=w.count_distinct(lambda e: e.k),
        )
    )
    r = run(executor, counted)
    check(
        r,
        [
            (
                T(10),
                [
                    span(T(2), T(2) + _tick(), Order("x", "s", ["x", "y", "s"], 2)),
                    span(T(7), T(7) + _tick(), Order("w", "z", ["w", "y", "z"], 1)),
                ],
            ),
            (T(20), []),
        ],
    )

    b_only = (
        s.where(lambda e: e.k == "a")
        .alter_event_duration(timedelta(seconds=3))
        .snapshot()
        .aggregate(
            lambda w: Order(
                first=w.first(lambda e: e.tag),
                last=w.last(lambda e: e.tag),
                tags=w.collect(lambda e: e.tag),
                distinct=w.count_distinct(lambda e: e.v),
            ),
            timestamp=WindowTimestamp.END,
        )
    )
    # a's events as [s, s+3): x,y [1,4); w [4,7); y [5,8); z [7,10); u [8,11). Endpoints 1, 4,
    # 5, 7, 8, 10, 11: windows [1,4) x y; [4,5) w; [5,7) w y; [7,8) y z; [8,10) z u; [10,11) u.
    # END stamps each at its last tick; the CTI at 10 makes ends before 10 final, and goes out
    # a tick back (5.6.4); [8,10) and [10,11) come with the CTI at 20 (both ends are before it).
    r = run(executor, b_only)

    def at(t: int, o: Order) -> tuple[Any, Any, Any]:
        return span(T(t) - _tick(), T(t), o)

    check(
        r,
        [
            (
                T(10) - _tick(),
                [
                    at(4, Order("x", "y", ["x", "y"], 2)),
                    at(5, Order("w", "w", ["w"], 0)),
                    at(7, Order("w", "y", ["w", "y"], 0)),
                    at(8, Order("y", "z", ["y", "z"], 1)),
                ],
            ),
            (T(20) - _tick(), [at(10, Order("z", "u", ["z", "u"], 2)), at(11, Order("u", "u", ["u"], 1))]),
        ],
    )


def _tick() -> timedelta:
    from tempo import TICK

    return TICK


@attrs.frozen
class Running:
    tag: str
    distinct: int
    first: str | None
    last: float | None
    var: float | None
    median: float | None
    values: list[float]


@pytest.mark.not_implemented(VECTORISED, lacks="the running aggregate var(e.v)")
def test_running_aggregates_in_analytic(executor: Any) -> None:
    """Key a in order (start, payload): (x,1)@1 (y,4)@1 are peers of one start? No: their
    payloads differ, so each is its own peer group, x first. Running over the events up to
    each: distinct tags, the first tag, the last value so far (nulls skipped), the sample
    variance and median of the values so far, and the values so far."""
    s = Stream.create("in", readings(), EventShape.POINT).where(lambda e: e.k == "a")
    q = s.group_by(lambda e: e.k).analytic(
        lambda k, e, a: Running(
            tag=e.tag,
            distinct=a.count_distinct(lambda e: e.tag),
            first=a.first(lambda e: e.tag),
            last=a.last(lambda e: e.v),
            var=a.var(lambda e: e.v),
            median=a.median(lambda e: e.v),
            values=a.collect(lambda e: e.v),
        )
    )
    r = run(executor, q)
    pt = lambda t, o: span(T(t), T(t) + _tick(), o)  # noqa: E731
    check(
        r,
        [
            (
                T(10),
                [
                    pt(1, Running("x", 1, "x", 1.0, None, 1.0, [1.0])),
                    pt(1, Running("y", 2, "x", 4.0, 4.5, 2.5, [1.0, 4.0])),
                    pt(4, Running("w", 3, "x", 4.0, 4.5, 2.5, [1.0, 4.0])),
                    pt(5, Running("y", 3, "x", 4.0, 4.5, 2.5, [1.0, 4.0])),
                    pt(7, Running("z", 4, "x", 10.0, 21.0, 4.0, [1.0, 4.0, 10.0])),
                    pt(8, Running("u", 5, "x", 7.0, 15.0, 5.5, [1.0, 4.0, 10.0, 7.0])),
                ],
            ),
            (T(20), []),
        ],
    )


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda w: w.percentile(lambda e: e.v, 1.5), "fraction must be a number from 0 to 1"),
        (lambda w: w.percentile_approx(lambda e: e.v, 0.5, accuracy=0), "accuracy must be a positive int"),
        (lambda w: w.var(lambda e: e.tag), "var needs numbers, got str"),
        (lambda w: w.median(lambda e: e.v > 1), "percentile needs numbers, got bool"),
    ],
)
def test_bad_aggregates_are_refused_when_built(build: Any, message: str) -> None:
    s = Stream.create("in", readings(), EventShape.POINT)
    with pytest.raises(QueryBuildError, match=message):
        s.tumbling(timedelta(seconds=10)).aggregate(lambda w: Order(first=None, last=None, tags=[], distinct=build(w)))


@attrs.frozen
class Key:
    k: str


@pytest.mark.parametrize("stamp", [WindowTimestamp.LIFETIME, WindowTimestamp.START, WindowTimestamp.END, WindowTimestamp.CTI])
def test_a_window_read_for_its_keys_only(executor: Any, stamp: WindowTimestamp) -> None:
    """No aggregate at all: one result per key and non-empty window (Spark's ``agg`` needs an
    aggregate, so the executor adds one it does not read). END and CTI (the CTIs at 10 and 20
    complete the windows) are points at the windows' last ticks."""
    s = Stream.create("in", readings(), EventShape.POINT)
    r = run(executor, s.group_by(lambda e: e.k).tumbling(timedelta(seconds=10)).aggregate(lambda k, w: Key(k=k), timestamp=stamp))
    assert sorted((e.payload.k, e.start) for e in r.events) == sorted(
        (k, T(w + 10) - _tick() if stamp in (WindowTimestamp.END, WindowTimestamp.CTI) else T(w))
        for k, w in (("a", 0), ("b", 0), ("b", 10))
    )


@attrs.frozen
class Pair:
    p: float | None
    q: float | None


def test_plan_names_the_aggregates() -> None:
    s = Stream.create("in", readings(), EventShape.POINT)
    q = s.tumbling(timedelta(seconds=10)).aggregate(
        lambda w: Pair(p=w.percentile(lambda e: e.v, 0.25), q=w.percentile_approx(lambda e: e.v, 0.5, accuracy=100))
    )
    text = q.explain()
    assert "percentile(e.v, 0.25)" in text and "percentile_approx(e.v, 0.5, accuracy=100)" in text


@attrs.frozen
class Moments:
    var: float | None
    var_pop: float | None
    sd: float | None
    sd_pop: float | None
    q1: float | None
    median: float | None
    q3: float | None
    approx: float | None


def _moments(values: list[float]) -> Stream[Moments]:
    items: list[Any] = [Point(T(i % 10), R("a", "t", v)) for i, v in enumerate(values)]
    return (
        Stream.create("in", [*items, Cti(T(10))], EventShape.POINT)
        .tumbling(timedelta(seconds=10))
        .aggregate(
            lambda w: Moments(
                var=w.var(lambda e: e.v),
                var_pop=w.var_pop(lambda e: e.v),
                sd=w.stddev(lambda e: e.v),
                sd_pop=w.stddev_pop(lambda e: e.v),
                q1=w.percentile(lambda e: e.v, 0.25),
                median=w.median(lambda e: e.v),
                q3=w.percentile(lambda e: e.v, 0.75),
                approx=w.percentile_approx(lambda e: e.v, 0.9),
            )
        )
    )


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


_VALUES = st.lists(st.one_of(st.integers(-1000, 1000).map(float), st.floats(-1e6, 1e6, allow_nan=False)), min_size=1, max_size=25)


@settings(max_examples=200, derandomize=True, deadline=None, database=None)
@given(values=_VALUES)
def test_statistics_agree_with_pythons_statistics(values: list[float]) -> None:
    """In memory, against the standard library on any values: the variances and deviations
    (to rounding), the quartiles (``quantiles(method='inclusive')`` interpolates between the
    closest ranks too) and the nearest-rank percentile_approx (to the bit: it is a value)."""
    (event,) = InMemoryExecutor().run(_moments(values)).events
    m = event.payload
    n = len(values)
    assert _close(m.var, statistics.variance(values) if n > 1 else None)
    assert _close(m.var_pop, statistics.pvariance(values))
    assert _close(m.sd, statistics.stdev(values) if n > 1 else None)
    assert _close(m.sd_pop, statistics.pstdev(values))
    quartiles = statistics.quantiles(values, n=4, method="inclusive") if n > 1 else [values[0]] * 3
    assert _close(m.q1, quartiles[0]) and _close(m.median, quartiles[1]) and _close(m.q3, quartiles[2])
    assert m.approx == sorted(values)[max(1, math.ceil(0.9 * n)) - 1]


@settings(
    max_examples=examples(12), derandomize=True, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(values=_VALUES)
def test_spark_statistics_agree(spark_executor: Any, values: list[float]) -> None:
    """Spark against the in-memory executor on any values: the percentiles to the bit (the
    same float operations over the same sorted values), the variances to rounding (Welford's
    update in another order)."""
    (mine,) = InMemoryExecutor().run(_moments(values)).events
    (theirs,) = spark_executor.run(_moments(values)).events
    a, b = mine.payload, theirs.payload
    assert (a.q1, a.median, a.q3, a.approx) == (b.q1, b.median, b.q3, b.approx)
    assert all(_close(getattr(a, f), getattr(b, f)) for f in ("var", "var_pop", "sd", "sd_pop"))


@attrs.frozen
class Nan:
    low: float | None
    high: float | None
    approx_low: float | None
    approx_high: float | None
    median: float | None


@pytest.mark.parametrize("values", [[float("nan"), 2.0, 4.0], [2.0, float("nan"), 4.0], [4.0, 2.0, float("nan")]])
def test_nan_is_greater_than_every_number(executor: Any, values: list[float]) -> None:
    """NaN orders after every number (5.6.5), whatever the order of arrival: max NaN, min 2;
    ranks 1 and 3 of (2, 4, NaN) are 2 and NaN; the median of them is 4 (position 1)."""
    items: list[Any] = [Point(T(1), R("a", str(i), v)) for i, v in enumerate(values)] + [Cti(T(10))]
    q = (
        Stream.create("in", items, EventShape.POINT)
        .tumbling(timedelta(seconds=10))
        .aggregate(
            lambda w: Nan(
                low=w.min(lambda e: e.v),
                high=w.max(lambda e: e.v),
                approx_low=w.percentile_approx(lambda e: e.v, 0.25),
                approx_high=w.percentile_approx(lambda e: e.v, 0.9),
                median=w.median(lambda e: e.v),
            )
        )
    )
    (event,) = run(executor, q).events
    got = event.payload
    assert (got.low, got.approx_low, got.median) == (2.0, 2.0, 4.0)
    assert math.isnan(got.high) and math.isnan(got.approx_high)
