"""Window specifications: the arithmetic by hand, against brute force, and the Spark Column
formulas against the int ones; the longest lifetime the plan derives from its nodes' rules."""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempo.errors import QueryBuildError
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.plan.windows import HoppingWindow


def test_hopping_arithmetic_by_hand() -> None:
    w = HoppingWindow(size=10, hop=5, offset=2)  # windows [2+5k, 12+5k)
    assert w.bounds(0) == (2, 12) and w.bounds(-1) == (-3, 7) and w.start_of(3) == 17
    # [7, 8) overlaps [-3, 7)? no (end 7 <= 7); [2, 12) and [7, 17) yes.
    assert (w.first_window(7), w.last_window(8)) == (0, 1)
    # [12, 13): [2, 12) ends at 12, so only [7, 17) and [12, 22).
    assert (w.first_window(12), w.last_window(13)) == (1, 2)
    # A CTI at 16 completes [2, 12) only; at 17, [7, 17) too.
    assert w.last_complete(16) == 0 and w.last_complete(17) == 1
    assert w.last_complete(-4) == -4  # [-18, -8) is the last to end by -4


def test_gaps_between_windows() -> None:
    w = HoppingWindow(size=2, hop=5, offset=0)  # [0, 2), [5, 7), ...
    assert w.first_window(3) > w.last_window(4)  # [3, 4) falls in a gap: no window
    assert (w.first_window(1), w.last_window(6)) == (0, 1)


def test_tumbling_and_describe() -> None:
    assert HoppingWindow(10, 10, 0).tumbling and not HoppingWindow(10, 5, 0).tumbling
    assert HoppingWindow(10, 10, 0).describe().startswith("Tumbling")
    assert HoppingWindow(10, 5, 3).describe().startswith("Hopping")


@pytest.mark.parametrize("size, hop", [(0, 1), (1, 0), (-5, 5), (5, -1)])
def test_validated_when_built(size: int, hop: int) -> None:
    with pytest.raises(QueryBuildError):
        HoppingWindow(size, hop, 0)


specs = st.builds(
    lambda size, hop, offset: HoppingWindow(size, hop, offset % hop),
    st.integers(1, 30),
    st.integers(1, 30),
    st.integers(0, 30),
)


@given(specs, st.integers(-100, 100), st.integers(1, 60))
def test_overlapping_windows_match_brute_force(w: HoppingWindow, start: int, length: int) -> None:
    end = start + length
    overlapping = [k for k in range(-300, 300) if w.bounds(k)[0] < end and w.bounds(k)[1] > start]
    assert overlapping == list(range(w.first_window(start), w.last_window(end) + 1))


@given(specs, st.integers(-100, 100))
def test_cti_completes_and_pulls_back(w: HoppingWindow, cti: int) -> None:
    complete = [k for k in range(-300, 300) if w.bounds(k)[1] <= cti]
    assert max(complete) == w.last_complete(cti)
    # The output CTI: the start of the earliest window not complete (or c, if earlier).
    assert w.start_of(w.last_complete(cti) + 1) == min(w.bounds(k)[0] for k in range(-300, 300) if w.bounds(k)[1] > cti)


@pytest.mark.spark
def test_column_formulas_agree_with_ints(spark_session: Any) -> None:
    """The grid's one formula over Spark columns (with Spark's integer floor division) gives
    the ints' values, far times included."""
    from pyspark.sql import functions as F

    from tempo.spark.columns import floor_div

    rng = random.Random(11)
    big = 2**53 // 4  # far times, still exact as the doubles Spark divides in
    times = [rng.randint(-1000, 1000) for _ in range(200)] + [-big, big, -1, 0, 1]
    df = spark_session.createDataFrame([(t,) for t in times], "t long")
    for w in (HoppingWindow(10, 10, 0), HoppingWindow(10, 3, 2), HoppingWindow(2, 7, 6), HoppingWindow(10**9, 10**6, 5)):
        rows = df.select(
            F.col("t"),
            w.first_window(F.col("t"), floor_div).alias("lo"),
            w.last_window(F.col("t"), floor_div).alias("hi"),
            w.start_of(F.when(F.abs("t") <= 10**6, F.col("t"))).alias("ws"),  # t as a window index
        ).collect()
        for r in rows:
            assert (r["lo"], r["hi"]) == (w.first_window(r["t"]), w.last_window(r["t"])), (w, r)
            if abs(r["t"]) <= 10**6:
                assert r["ws"] == w.start_of(r["t"]), (w, r)


# --------------------------------------------------------------------------------------
# the longest lifetime, derived once on the plan from each node's rule


@attrs.frozen
class Reading:
    k: str
    v: int


@attrs.frozen
class Count:
    n: int


def test_longest_lifetime_by_node_rules() -> None:
    from tempo import EventShape, Stream, ticks

    points = Stream.create("p", [], EventShape.POINT, payload_type=Reading)
    intervals = Stream.create("i", [], EventShape.INTERVAL, payload_type=Reading)
    counts = points.tumbling(timedelta(seconds=10)).aggregate(lambda w: Count(n=w.count()))
    joined = intervals.join(counts, lambda a, b: a.v == b.n, lambda a, b: Count(n=b.n))
    both = points.where(lambda r: r.v > 0).union(intervals)
    q = Query.build(joined.union(joined).node)
    ten = ticks.duration_ticks(timedelta(seconds=10))
    assert q.longest_lifetime(points.node) == 1 and q.longest_lifetime(intervals.node) is None
    assert q.longest_lifetime(counts.node) == ten and q.longest_lifetime(joined.node) == ten
    assert q.longest_lifetime(q.root) == ten
    assert Query.build(both.node).longest_lifetime(both.node) is None


def test_a_node_without_a_lifetime_rule_is_an_error() -> None:
    from tempo import EventShape, Stream

    @attrs.frozen(eq=False)
    class Unruled(p.Node):
        input: p.Node

        @property
        def payload_type(self) -> type:
            return self.input.payload_type

        def inputs(self) -> tuple[p.Node, ...]:
            return (self.input,)

    points = Stream.create("p", [], EventShape.POINT, payload_type=Reading)
    with pytest.raises(NotImplementedError, match="Unruled states no longest_lifetime rule"):
        Query.build(Unruled(points.node))


# --------------------------------------------------------------------------------------
# aggregate kinds: one table


def test_aggregate_kinds_table() -> None:
    kind = p.AggregateKind
    assert [str(k) for k in kind] == [
        "count",
        "sum",
        "avg",
        "min",
        "max",
        "var",
        "var_pop",
        "stddev",
        "stddev_pop",
        "count_distinct",
        "first",
        "last",
        "percentile",
        "percentile_approx",
        "collect",
        "uda",
        "top",
    ]
    assert kind.COUNT.result_type(None) is int and kind.AVG.result_type(int) is float
    assert kind.VAR.result_type(int) is float and kind.COUNT_DISTINCT.result_type(str) is int
    assert kind.PERCENTILE_APPROX.result_type(int) is int and kind.COLLECT.result_type(str) is list
    assert [k for k in kind if k.mergeable] == [kind.COUNT, kind.SUM, kind.AVG, kind.MIN, kind.MAX]
    assert [k for k in kind if k.ordered] == [kind.FIRST, kind.LAST, kind.COLLECT]
    assert kind.SUM.result_type(bool) is int and kind.SUM.result_type(float) is float
    assert kind.MIN.result_type(str) is str and not kind.COUNT.takes_argument
    assert p.Aggregate("count", None).kind is kind.COUNT
    with pytest.raises(QueryBuildError, match="unknown aggregate 'median'"):
        p.Aggregate("median", None)


def test_result_stamps_by_hand() -> None:
    """``WindowTimestamp.point_at`` over ints, for the window [10, 20).

    START: 10. END: its last tick, 19. LATEST/EARLIEST: the events' start, but never before
    the window (a lifetime from 5 still stamps at 10). CTI: just before the completing CTI
    (25 -> 24); on the CTI at infinity the window's last tick, or the last finite CTI when it
    is later (30), since CTIs pass on unchanged."""
    from tempo.plan.windows import WindowTimestamp as TS
    from tempo.ticks import INF

    assert TS.START.point_at(10, 20, None, None) == 10
    assert TS.END.point_at(10, 20, None, None) == 19
    assert TS.LATEST.point_at(10, 20, 14, None) == 14 and TS.EARLIEST.point_at(10, 20, 5, None) == 10
    assert TS.CTI.point_at(10, 20, None, 25) == 24
    assert TS.CTI.point_at(10, 20, None, INF, 30) == 30 and TS.CTI.point_at(10, 20, None, INF, 12) == 19
    assert TS.CTI.point_at(10, 20, None, INF) == 19


@settings(deadline=None)
@given(
    ws=st.integers(-(10**9), 10**9),
    size=st.integers(1, 10**6),
    bound=st.integers(-(10**9), 10**9),
    closing=st.one_of(st.integers(-(10**9), 10**10), st.just(253402300799999999)),
    last_finite=st.one_of(st.integers(-(10**9), 10**10), st.just(-(2**62))),
)
def test_result_stamps_on_columns_equal_the_ints(ws: int, size: int, bound: int, closing: int, last_finite: int) -> None:
    """The one stamp formula over polars columns (as the DataFrame rule passes its
    ``greatest`` and ``when``) gives what it gives over ints, for every point timestamp."""
    pl = pytest.importorskip("polars")
    from tempo.plan.windows import WindowTimestamp as TS

    frame = pl.DataFrame({"ws": [ws], "we": [ws + size], "bound": [bound], "closing": [closing]})

    def greatest(a: Any, b: Any) -> Any:
        return pl.max_horizontal(a, b if not isinstance(b, int) else pl.lit(b))

    def when(cond: Any, then: Any, otherwise: Any) -> Any:
        return pl.when(cond).then(then).otherwise(otherwise)

    for ts in (TS.START, TS.END, TS.LATEST, TS.EARLIEST, TS.CTI):
        column = ts.point_at(pl.col("ws"), pl.col("we"), pl.col("bound"), pl.col("closing"), last_finite, greatest, when)
        assert frame.select(column.alias("t"))["t"][0] == ts.point_at(ws, ws + size, bound, closing, last_finite), ts
