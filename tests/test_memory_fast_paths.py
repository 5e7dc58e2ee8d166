"""The in-memory executor's fast paths give what the general path gives.

* Window aggregates run as code generated per query (``codegen.Accumulator``); here it is
  compared with the general loop over the aggregate kinds, and whole window queries with a
  brute-force evaluation of the windows (points, intervals over several windows and over
  many, edges, nulls, groups).
* Waiting outputs are released through ``ByStart`` (a run, a heap and bursts merged by
  sorting) instead of one heap: the same order, (start, arrival).
* Inputs are merged by a loop that takes runs of one input between heap operations.
* Table rows that pass every check column by column skip the check row by row, and
  payloads that cannot fail to build are built as their rows are read.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest

import tempo
from tempo import (
    Cti,
    EdgeEnd,
    EdgeStart,
    EventShape,
    InMemoryExecutor,
    Interval,
    Point,
    Stream,
)
from tempo.errors import InputError
from tempo.runtime.aggregates import Accumulator
from tempo.runtime.engine import process_in_arrival_order
from tempo.runtime.ingress import TimestampMode, prepare, prepare_checked
from tempo.runtime.release_queues import ByStart
from tempo.plan.nodes import SourceNode
from tempo.sources import ParquetSource

KINDS = ["count", "sum", "avg", "min", "max"]


def general_results(kinds: list[str], events: list[tuple[Any, ...]]) -> list[Any]:
    """One window and group by the general loop over kinds (``values`` per aggregate, None
    for count); the in-memory executor's accumulator before code generation."""
    state: list[Any] = [0] + [[0, 0] if kind == "avg" else None for kind in kinds]
    for values in events:
        state[0] += 1
        for i, kind in enumerate(kinds, 1):
            v = values[i - 1]
            if v is None:
                continue
            if kind == "sum":
                state[i] = v if state[i] is None else state[i] + v
            elif kind == "avg":
                state[i][0] += v
                state[i][1] += 1
            elif kind == "min" and (state[i] is None or v < state[i]):
                state[i] = v
            elif kind == "max" and (state[i] is None or v > state[i]):
                state[i] = v
    out: list[Any] = []
    for i, kind in enumerate(kinds, 1):
        if kind == "count":
            out.append(state[0])
        elif kind == "avg":
            out.append(float(state[i][0]) / state[i][1] if state[i][1] else None)  # the total made a float first (semantics.md 7.4)
        else:
            out.append(state[i])
    return out


@pytest.mark.parametrize(
    "values",
    [
        [3, None, -2, 7, 7],
        [None, None],
        [1.5, -0.0, None, 2.25],
        [-0.0],
        [True, True, False, None],
        [10**17 + 1, 10**17 + 1, -(10**17)],  # beyond a float's precision
        [],
    ],
)
@pytest.mark.parametrize("kinds", [KINDS, ["sum"], ["count"], ["max", "avg", "count", "min", "sum", "avg"]])
def test_generated_accumulator_equals_the_general_loop(kinds: list[str], values: list[Any]) -> None:
    """Same values of the same types (repr tells 1 from True and 0.0 from -0.0)."""
    acc = Accumulator(kinds)
    windows: dict[int, dict[Any, list[Any]]] = {}
    heap: list[int] = []
    events = [tuple(None if kind == "count" else v for kind in kinds) for v in values]
    for values_of_event in events:
        arguments = tuple(v for kind, v in zip(kinds, values_of_event) if kind != "count")
        acc.add(windows, heap, ("k",), arguments, 3, 5)  # windows 3, 4 and 5
    assert sorted(heap) == ([3, 4, 5] if events else [])
    for k in heap:
        assert repr(acc.results(windows[k][("k",)])) == repr(general_results(kinds, events))


# ---- whole window queries against a brute-force evaluation -----------------------------

T0 = datetime(2024, 1, 1)
TICK = timedelta(microseconds=1)


def T(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


@attrs.frozen
class Reading:
    sensor: str
    value: int | None


@attrs.frozen
class Stats:
    sensor: str
    start: datetime
    n: int
    total: int | None
    mean: float | None
    low: int | None
    high: int | None


def _stats(sensor: str, w: Any) -> Stats:
    return Stats(
        sensor=sensor,
        start=w.start,
        n=w.count(),
        total=w.sum(lambda r: r.value),
        mean=w.avg(lambda r: r.value),
        low=w.min(lambda r: r.value),
        high=w.max(lambda r: r.value),
    )


POINTS = [
    Point(T(1), Reading("a", 5)),
    Point(T(2), Reading("b", None)),
    Point(T(3), Reading("a", -3)),
    Point(T(12), Reading("b", 2)),
    Point(T(21), Reading("a", 7)),
    Point(T(23), Reading("c", 0)),
]
INTERVALS = [
    Interval(T(4), T(31), Reading("b", 10)),  # over several windows
    Interval(T(6), T(400), Reading("a", 1)),
]  # over more windows than are added on arrival
EDGES = [
    EdgeStart(T(8), Reading("a", None)),
    EdgeStart(T(9), Reading("c", 3)),
    EdgeEnd(T(8), T(19), Reading("a", None)),
    EdgeEnd(T(9), T(500), Reading("c", 3)),
]
LIFETIMES = (
    [(p.start, p.start + TICK, p.payload) for p in POINTS]
    + [(i.start, i.end, i.payload) for i in INTERVALS]
    + [(e.start, e.end, e.payload) for e in EDGES if isinstance(e, EdgeEnd)]
)


def brute_force(size: float, hop: float) -> list[tuple[datetime, datetime, Stats]]:
    """Every non-empty (window, sensor) of LIFETIMES: the events overlapping the window."""
    out = []
    for k in range(int(-size // hop) - 1, int(500 // hop) + 1):
        ws, we = T(k * hop), T(k * hop + size)
        for sensor in "abc":
            inside = [r.value for s, e, r in LIFETIMES if r.sensor == sensor and s < we and e > ws]
            if inside:
                n, total, mean, low, high = general_results(KINDS, [(None, v, v, v, v) for v in inside])
                out.append((ws, we, Stats(sensor, ws, n, total, mean, low, high)))
    return sorted(out, key=repr)


@pytest.mark.parametrize(("size", "hop"), [(5, 5), (10, 4), (3, 5), (2, 0.25)])
def test_window_queries_equal_a_brute_force_evaluation(size: float, hop: float) -> None:
    """Explicit CTIs at 15 and 600 s; the edges end in between, one after its start edge's
    windows have been closed."""

    def create(name: str, items: list[Any], shape: EventShape) -> Stream[Reading]:
        return Stream.create(name, items + [Cti(T(15)), Cti(T(600))], shape, payload_type=Reading)

    stream = (
        create("points", POINTS, EventShape.POINT)
        .union(create("intervals", INTERVALS, EventShape.INTERVAL))
        .union(create("edges", EDGES, EventShape.EDGE))
        .group_by(lambda r: r.sensor)
        .hopping(timedelta(seconds=size), timedelta(seconds=hop))
        .aggregate(_stats)
    )
    events = InMemoryExecutor().run(stream).events
    assert sorted(((e.start, e.end, e.payload) for e in events), key=repr) == brute_force(size, hop)
    assert [e.start for e in events] == sorted(e.start for e in events)  # released in order of window start


def test_an_edge_never_ended_counts_up_to_the_latest_time_seen() -> None:
    """docs/semantics.md 5.6: an edge at 2 never ended, a point at 7 and an interval [9, 13)
    in tumbling 5 s windows; the edge counts as [2, 13 + 1 tick)."""

    def create(name: str, item: Any, shape: EventShape) -> Stream[Reading]:
        return Stream.create(name, [item, Cti(datetime.max)], shape, payload_type=Reading)

    edges = create("e", EdgeStart(T(2), Reading("a", 4)), EventShape.EDGE)
    points = create("p", Point(T(7), Reading("a", None)), EventShape.POINT)
    intervals = create("i", Interval(T(9), T(13), Reading("a", -1)), EventShape.INTERVAL)
    stream = edges.union(points).union(intervals).group_by(lambda r: r.sensor).tumbling(timedelta(seconds=5)).aggregate(_stats)
    assert [e.payload for e in InMemoryExecutor().run(stream).events] == [
        Stats("a", T(0), 1, 4, 4.0, 4, 4),
        Stats("a", T(5), 3, 3, 1.5, -1, 4),
        Stats("a", T(10), 2, 3, 1.5, -1, 4),
    ]


# ---- release order -----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_by_start_releases_in_order_of_start_then_arrival(seed: int) -> None:
    """Pushes mostly in order, in bursts out of order, and released in steps."""
    rng = random.Random(seed)
    queue = ByStart()
    waiting: list[tuple[int, int]] = []  # (start, arrival)
    arrival = clock = 0
    for _ in range(rng.randint(1, 30)):
        burst = rng.random() < 0.3
        for _ in range(rng.randint(0, 200 if burst else 10)):
            clock += 1
            start = clock + rng.randint(0, 100) if burst else clock + rng.choice([0, 0, 0, -1, -3])
            queue.push(start, arrival, "item")
            waiting.append((start, arrival))
            arrival += 1
        t = clock + rng.randint(-20, 5)
        assert [(s, a) for s, _, a, _ in queue.pop_before(t)] == sorted(w for w in waiting if w[0] < t)
        waiting = [w for w in waiting if w[0] >= t]
    assert [(s, a) for s, _, a, _ in queue.pop_before(10**9)] == sorted(waiting)


@pytest.mark.parametrize("seed", range(40))
def test_inputs_are_merged_by_arrival_then_declaration_then_position(seed: int) -> None:
    rng = random.Random(seed)
    streams = []
    for _ in range(rng.randint(1, 4)):
        arrivals = sorted(rng.choice([-5, 0, 1, 2, 3, 8]) for _ in range(rng.randint(0, 12)))
        streams.append([(a, 0, 0, 0, None, position, None) for position, a in enumerate(arrivals)])
    got: list[tuple[int, Any]] = []
    processes = [lambda rec, i=i: got.append((i, rec)) for i in range(len(streams))]  # type: ignore[misc]
    process_in_arrival_order([iter(s) for s in streams], processes)
    assert got == [(i, rec) for _, i, _, rec in sorted((r[0], i, r[5], r) for i, s in enumerate(streams) for r in s)]


# ---- table inputs --------------------------------------------------------------------------


@attrs.frozen
class Plain:
    key: int
    value: float | None


@attrs.frozen
class Checked:
    key: int
    value: float | None = attrs.field(validator=attrs.validators.instance_of(float))


@dataclasses.dataclass(frozen=True)
class Data:
    key: int
    value: float | None


ORIGIN = datetime(2024, 1, 1, tzinfo=timezone.utc)
US = 1_000_000


def _write(tmp_path: Any, rows: list[dict[str, Any]], name: str = "t") -> str:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    columns = ("start", "end", "kind", "arrival", "key", "value")
    types = (pa.int64(), pa.int64(), pa.string(), pa.int64(), pa.int64(), pa.float64())
    table = pa.table({c: [r.get(c) for r in rows] for c in columns}, schema=pa.schema(list(zip(columns, types))))
    path = str(tmp_path / f"{name}.parquet")
    pq.write_table(table, path)
    return path


def _node(path: str, cls: type, shape: EventShape, **columns: Any) -> SourceNode:
    source = ParquetSource(path, cls, start="start", time_origin=ORIGIN, time_unit="us", **columns)
    return Stream.create("t", source, shape).node  # type: ignore[return-value]


def _rows(n: int, intervals: bool = False, arrivals: bool = False) -> list[dict[str, Any]]:
    rng = random.Random(n)
    return [
        {
            "start": i * US + rng.randint(-3 * US, 0),
            "end": (i + 5) * US if intervals else None,
            "arrival": i * US if arrivals else None,
            "key": i % 3,
            "value": None if i % 4 == 1 else i / 2,
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("cls", [Plain, Data])
@pytest.mark.parametrize(("shape", "intervals", "arrivals"), [(EventShape.POINT, False, False), (EventShape.INTERVAL, True, True)])
def test_rows_checked_column_by_column_equal_rows_checked_one_by_one(
    tmp_path: Any, cls: type, shape: EventShape, intervals: bool, arrivals: bool
) -> None:
    path = _write(tmp_path, _rows(50, intervals, arrivals))
    columns = {"end": "end"} if intervals else {}
    if arrivals:
        columns["arrival"] = "arrival"
    node = _node(path, cls, shape, **columns)
    # One row of kind CTI takes the row-by-row path; the others are the same rows.
    kind = "interval" if intervals else "point"
    cti = {"start": 60 * US, "end": 60 * US, "kind": "cti", "arrival": 60 * US if arrivals else None, "key": 0}
    with_cti = _write(tmp_path, [{**r, "kind": kind} for r in _rows(50, intervals, arrivals)] + [cti], "cti")
    slow = _node(with_cti, cls, shape, kind="kind", end="end", **({"arrival": "arrival"} if arrivals else {}))
    fast_rows = list(prepare_checked(node, TimestampMode(), False))
    slow_rows = list(prepare(slow, TimestampMode(), False))[:-1]
    assert fast_rows == slow_rows == list(prepare(node, TimestampMode(), False))
    assert [r[4] for r in fast_rows] == [cls(i % 3, None if i % 4 == 1 else i / 2) for i in range(50)]


def test_a_bad_row_is_found_before_any_row_is_processed_or_after_the_good_ones(tmp_path: Any) -> None:
    rows = _rows(10)
    rows[6]["start"] = None
    node = _node(_write(tmp_path, rows), Plain, EventShape.POINT)
    with pytest.raises(InputError, match="start column"):
        prepare_checked(node, TimestampMode(), False)
    rows = _rows(10, intervals=True)
    rows[6]["end"] = rows[6]["start"]  # an empty lifetime
    node = _node(_write(tmp_path, rows, "empty"), Plain, EventShape.INTERVAL, end="end")
    with pytest.raises(InputError, match="end must be after start"):
        prepare_checked(node, TimestampMode(), False)
    given = []
    with pytest.raises(InputError, match="end must be after start"):
        for rec in prepare(node, TimestampMode(), False):
            given.append(rec[5])
    assert given == [0, 1, 2, 3, 4, 5]


def test_a_payload_that_may_fail_to_build_is_built_before_any_row_is_used(tmp_path: Any) -> None:
    """Row 8 fails the validator of ``Checked``; a UDF fails on row 2 when it is processed.
    The validator's error comes first, as it did when every payload was built before the
    first row was processed; a payload without a validator cannot fail and waits."""

    def fails_on_2(key: int) -> bool:
        if key == 2:
            raise ValueError("row 2 processed")
        return True

    rows = [{"start": s * US, "key": s, "value": 1.0} for s in range(10)]
    rows[8]["value"] = None
    path = _write(tmp_path, rows)
    for cls, error in ((Checked, TypeError), (Plain, tempo.UdfError)):  # the udf's ValueError, as a UdfError
        source = ParquetSource(path, cls, start="start", time_origin=ORIGIN, time_unit="us")
        stream = Stream.create("t", source, EventShape.POINT).where(lambda e: tempo.udf(fails_on_2, returns=bool)(e.key))
        with pytest.raises(error):
            InMemoryExecutor().run(stream)
