"""Batches computed in bulk (``tempo.runtime.bulk``) leave the live engine exactly where item
by item leaves it, without Spark: the partial aggregates an executor would compute are
worked out here from the batch plan, one event at a time.

For random inputs (points a little out of order, explicit CTI rows, heartbeat rows), random
time policies (count or time-span generation, any delay, DROP or ADJUST) and random hopping
windows, the rows are cut into random batches, each run either in bulk or item by item
(``LiveEngine.push_rows``), with the state sometimes saved and restored between batches.
What the engine released, its rejections and its metrics must equal the in-memory run's.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import AdvanceTimeGenerationSettings, AdvanceTimePolicy, AdvanceTimeSettings, EventShape, InMemoryExecutor, Stream
from tempo.plan.query import Query
from tempo.runtime.bulk import BulkShape, Partial, apply_batch, bulk_shape, plan_batch
from tempo.runtime.ingress import CTI, HEARTBEAT, TimestampMode
from tempo.runtime.live import LiveEngine
from tempo.tables import read_columns
from tests.strategies import Ev

@attrs.frozen
class KeyTotal:
    key: int
    n: int
    total: int


np = pytest.importorskip("numpy")
pa = pytest.importorskip("pyarrow")

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
STAMP = pa.timestamp("us", tz="UTC")

BULK = settings(
    max_examples=200, derandomize=True, database=None, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@st.composite
def rows(draw: st.DrawFn) -> Any:
    """A table of rows in input order: points of keys 0-2 (some late), CTI and heartbeat rows."""
    n = draw(st.integers(1, 40))
    kinds, starts, values = [], [], []
    for i in range(n):
        kind = draw(st.sampled_from(["point"] * 8 + ["cti", "heartbeat"]))
        kinds.append(kind)
        starts.append(T0 + timedelta(seconds=i * 3 + draw(st.sampled_from([0, 0, 1, -3, -4, -11, -30]))))
        values.append(draw(st.integers(-5, 9)))
    return pa.table({
        "seq": pa.array(range(n), pa.int64()), "kind": kinds, "ts": pa.array(starts, STAMP),
        "arr": pa.array([T0 + timedelta(seconds=i) for i in range(n)], STAMP),
        "key": pa.array([v % 3 for v in values], pa.int64()), "value": pa.array(values, pa.int64()),
    })


@st.composite
def time_settings(draw: st.DrawFn) -> AdvanceTimeSettings:
    frequency = draw(st.one_of(st.integers(1, 5), st.sampled_from([timedelta(seconds=s) for s in (4, 10, 25)])))
    delay = timedelta(seconds=draw(st.sampled_from([-1, 0, 2, 3, 9])))
    policy = draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST]))
    return AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency, delay=delay, advance_to_infinity_on_shutdown=True), policy=policy)


def _query(table: Any, time: AdvanceTimeSettings, size: int, hop: int, second: bool = False) -> Stream[Any]:
    from tempo.sources import ArrowSource

    source = ArrowSource(table, Ev, start="ts", kind="kind", arrival="arr", order="seq")
    windows = (
        Stream.create("r", source, EventShape.POINT, time).where(lambda e: e.value != 4)
        .group_by(lambda e: e.key).hopping(timedelta(seconds=size), timedelta(seconds=hop))
        .aggregate(lambda k, w: KeyTotal(key=k, n=w.count(), total=w.sum(lambda e: e.value)))
    )
    if second:  # windows in sequence: the second runs on the engine, on the first one's results
        return windows.where(lambda t: t.n > 1).group_by(lambda t: t.key).tumbling(timedelta(seconds=30)).aggregate(
            lambda k, w: KeyTotal(key=k, n=w.count(), total=w.max(lambda t: t.total))
        )
    return windows


def _bulk(engine: LiveEngine, shape: BulkShape, table: Any) -> None:
    """The batch in bulk, with the partials worked out here from the plan."""
    node = shape.source
    kinds, starts, ends, arrivals, payloads, bad = read_columns(node.source, table, node.shape, node.name)
    assert bad is None
    order = table.column("seq").to_numpy()
    plan = plan_batch(engine, np.array(kinds), np.array(starts), np.array(ends), np.array(arrivals), order)
    assert not isinstance(plan, str), plan
    spec = shape.window.spec
    groups: dict[tuple[int, int], list[Any]] = {}
    t_max = None
    for i, kind in enumerate(kinds):
        if kind in (CTI, HEARTBEAT) or i in plan.dropped:
            continue
        start, end = plan.moved.get(i, (starts[i], ends[i]))
        if payloads[i].value == 4:  # the where
            continue
        t_max = max(t_max or end, start, end)
        for k in range(spec.first_window(start), spec.last_window(end) + 1):
            g = groups.setdefault((k, payloads[i].key), [int(order[i]), 0, None])
            g[1] += 1
            g[2] = payloads[i].value if g[2] is None else g[2] + payloads[i].value
    partials: list[Partial] = [(k, (key,), first, n, (total,)) for (k, key), (first, n, total) in groups.items()]
    apply_batch(engine, shape, plan, {i: payloads[i] for i in plan.late}, partials, t_max)


@BULK
@given(table=rows(), time=time_settings(), window=st.sampled_from([(10, 10), (15, 5), (5, 10)]), second=st.booleans(), data=st.data())
def test_batches_in_bulk_leave_the_engine_as_item_by_item(
    table: Any, time: AdvanceTimeSettings, window: tuple[int, int], second: bool, data: st.DataObject,
) -> None:
    stream = _query(table, time, *window, second=second)
    expected = InMemoryExecutor().run(stream)
    query = Query.build(stream.node)
    shape = bulk_shape(query)
    assert isinstance(shape, BulkShape), shape
    mode = TimestampMode()
    mode.saw(aware=True)
    engine = LiveEngine(query, mode)
    items_only = LiveEngine(query, mode)  # every batch item by item: the state to match
    released, rejections = [], []
    at = 0
    while at < table.num_rows:
        size = data.draw(st.integers(1, table.num_rows - at))
        batch = table.slice(at, size)
        at += size
        if data.draw(st.booleans()):
            _bulk(engine, shape, batch)
        else:
            engine.push_rows(0, batch)
        engine.run()
        items_only.push_rows(0, batch)
        items_only.run()
        assert _state(engine) == _state(items_only)
        out = engine.take()
        released += out.items
        rejections += out.rejections
        if data.draw(st.integers(0, 3)) == 0:
            engine = LiveEngine.restore(Query.build(_query(table, time, *window, second=second).node), engine.snapshot())
    engine.finish()
    out = engine.take()
    assert released + out.items == expected.raw
    assert rejections + out.rejections == expected.rejected
    live, memory = engine.metrics()["r"], expected.metrics["r"]
    assert (live.received, live.admitted, live.dropped, live.adjusted) == (memory.received, memory.admitted, memory.dropped, memory.adjusted)
    assert (live.ctis_generated, live.ctis_explicit, live.ctis_ignored) == (memory.ctis_generated, memory.ctis_explicit, memory.ctis_ignored)


def _state(engine: LiveEngine) -> Any:
    """What must be the same after a batch either way: the ingress's and the feed's state,
    the window's open windows (groups in order) and the next event id."""
    from tempo.runtime.live import _state_of
    from tempo.runtime.operators import Window

    ingress = engine.ingresses[0]
    feed = engine.feeds[0]
    window = next(op for op in engine.operators if isinstance(op, Window))
    own = {k: v for k, v in _state_of(ingress, ingress.WIRING).items() if k != "metrics"}
    return (
        own, repr(ingress.metrics), feed.next_position, feed.last_order, feed.sequence.last_arrival,
        {k: list(groups.items()) for k, groups in window.acc.items()}, sorted(window.acc_heap), window.t_max, window.out_cti,
        repr(engine.build.ids),
    )


def test_the_bulk_shape_says_why_a_query_is_not_of_it() -> None:
    from tempo.sources import ArrowSource

    table = pa.table({"seq": [0], "ts": pa.array([T0], STAMP), "key": [1], "value": [1]})
    readings = Stream.create("r", ArrowSource(table, Ev, start="ts", order="seq"), EventShape.POINT)
    assert bulk_shape(Query.build(readings.node)) == "only a window aggregate over the input through where / select / shift operators is computed in bulk"
    other = Stream.create("s", ArrowSource(table, Ev, start="ts", order="seq"), EventShape.POINT)
    both = readings.union(other).tumbling(timedelta(seconds=1)).aggregate(lambda w: KeyTotal(key=0, n=w.count(), total=0))
    assert bulk_shape(Query.build(both.node)) == "it has several inputs (merged item by item at the arrival frontier)"
