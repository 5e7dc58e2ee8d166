"""Batches computed in bulk (``tempo.runtime.bulk``) leave the live engine exactly where item
by item leaves it, without Spark: the partial aggregates an executor would compute are
worked out here from the batch plans, one event at a time.

For random inputs (points a little out of order, explicit CTI rows, heartbeat rows), random
time policies (count or time-span generation, any delay, DROP or ADJUST) and random hopping
windows, the rows are cut into random batches, each run either in bulk or item by item
(``LiveEngine.push_rows``), with the state sometimes saved and restored between batches.
What the engine released, its rejections and its metrics must equal the in-memory run's.
The same holds for two inputs merged by a union at the arrival frontier, where a batch goes
in bulk only when item by item would process it whole.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventShape,
    InMemoryExecutor,
    Stream,
)
from tempo.plan.query import Query
from tempo.runtime.bulk import (
    BatchPlan,
    BulkShape,
    JoinAfter,
    Partial,
    Position,
    apply_batch,
    bulk_shape,
    frontier_cut,
    WHY_NOT,
    join_before,
    plan_batch,
    plan_order,
    released_key,
)
from tempo.runtime.ingress import CTI, HEARTBEAT, TimestampMode
from tempo.runtime.live import LiveEngine
from tempo.runtime.joins import Join
from tempo.runtime.windows import Window
from tempo.tables import read_columns
from tests.strategies import Ev
from tests.budget import examples


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
    max_examples=examples(200),
    derandomize=True,
    database=None,
    deadline=None,
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
    return pa.table(
        {
            "seq": pa.array(range(n), pa.int64()),
            "kind": kinds,
            "ts": pa.array(starts, STAMP),
            "arr": pa.array([T0 + timedelta(seconds=i) for i in range(n)], STAMP),
            "key": pa.array([v % 3 for v in values], pa.int64()),
            "value": pa.array(values, pa.int64()),
        }
    )


@st.composite
def time_settings(draw: st.DrawFn) -> AdvanceTimeSettings:
    frequency = draw(st.one_of(st.integers(1, 5), st.sampled_from([timedelta(seconds=s) for s in (4, 10, 25)])))
    delay = timedelta(seconds=draw(st.sampled_from([-1, 0, 2, 3, 9])))
    policy = draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST]))
    return AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency, delay=delay, advance_to_infinity_on_shutdown=True), policy=policy)


@st.composite
def second_settings(draw: st.DrawFn) -> AdvanceTimeSettings:
    """The second input's settings: its own, or the CTIs of the first imported (with its own
    generation too, sometimes)."""
    own = draw(time_settings())
    if draw(st.booleans()):
        return own
    generation = own.generation if draw(st.booleans()) else None
    return AdvanceTimeSettings(generation, import_=AdvanceTimeImportSettings("a"), policy=own.policy)


def _query(table: Any, time: AdvanceTimeSettings, size: int, hop: int, second: bool = False) -> Stream[Any]:
    from tempo.sources import ArrowSource

    source = ArrowSource(table, Ev, start="ts", kind="kind", arrival="arr", order="seq")
    windows = (
        Stream.create("r", source, EventShape.POINT, time)
        .where(lambda e: e.value != 4)
        .group_by(lambda e: e.key)
        .hopping(timedelta(seconds=size), timedelta(seconds=hop))
        .aggregate(lambda k, w: KeyTotal(key=k, n=w.count(), total=w.sum(lambda e: e.value)))
    )
    if second:  # windows in sequence: the second runs on the engine, on the first one's results
        return (
            windows.where(lambda t: t.n > 1)
            .group_by(lambda t: t.key)
            .tumbling(timedelta(seconds=30))
            .aggregate(lambda k, w: KeyTotal(key=k, n=w.count(), total=w.max(lambda t: t.total)))
        )
    return windows


SHIFT = 2_000_000
"""The union query's shift of its second input (2 s, in ticks)."""


Admitted = tuple[int, tuple[int, int, int], int, int, Any]
"""An event a batch admits: (input, place in the merged arrival order, start, end, payload)."""
WindowEvent = tuple[Any, int, int, Any]
"""An event reaching the window: (its place in the order the window receives them, start, end, payload)."""
Model = Callable[[LiveEngine, BulkShape, list[BatchPlan], list[Admitted]], tuple[list[WindowEvent], int, Any]]
"""What an executor computes of a batch below the window, one event at a time: the events
reaching the window, the events renamed by unions, and the join's part (or None)."""
Bulk = Callable[[Query, BulkShape], Callable[[LiveEngine, list[Any]], bool]]
"""A way to run a query's batches in bulk: the model here (``_bulk``), or an executor's
``tempo.runtime.bulk.BatchEngine`` (the vectorised executor's, polars)."""


def modelled(model: Model) -> Bulk:
    return lambda query, shape: lambda engine, tables: _bulk(engine, shape, tables, model)


def vectorised(query: Query, shape: BulkShape) -> Callable[[LiveEngine, list[Any]], bool]:
    pytest.importorskip("polars")
    from tempo.vectorised.batches import VectorisedBatches

    return VectorisedBatches(query, shape).run


BULKS = pytest.mark.parametrize("bulk", ["model", "vectorised"])


def _union_model(
    engine: LiveEngine, shape: BulkShape, plans: list[BatchPlan], events: list[Admitted]
) -> tuple[list[WindowEvent], int, Any]:
    """``a.where(value != 4).union(b.shift(SHIFT)).where(value != 5)`` (or ``a.where(value != 4)``
    alone): an event of ``b`` takes a fresh id at the union, whatever the where after it does."""
    out, renamed = [], 0
    for index, place, start, end, payload in events:
        if index == 0 and payload.value == 4:  # the where
            continue
        if index == 1:
            start, end, renamed = start + SHIFT, end + SHIFT, renamed + 1
        if len(shape.sources) == 2 and payload.value == 5:  # the where after the union
            continue
        out.append((place, start, end, payload))
    return out, renamed, None


def _bulk(engine: LiveEngine, shape: BulkShape, tables: list[Any], model: Model = _union_model) -> bool:
    """The batch (each input's rows) in bulk, with what reaches the window worked out by
    ``model`` and the partials here; False (the engine untouched) when the frontier would
    hold more than heartbeats."""
    planned: dict[int, BatchPlan] = {}
    read: dict[int, Any] = {}
    for index, exporter in plan_order(shape):
        node, table = shape.sources[index], tables[index]
        kinds, starts, ends, arrivals, payloads, bad = read_columns(node.source, table, node.shape, node.name)
        assert bad is None
        order = table.column("seq").to_numpy()
        plan = plan_batch(
            engine,
            index,
            np.array(kinds),
            np.array(starts),
            np.array(ends),
            np.array(arrivals),
            order,
            None if exporter is None else planned[exporter],
        )
        assert not isinstance(plan, str), plan
        planned[index] = plan
        read[index] = (kinds, starts, ends, arrivals, payloads, order)
    plans = [planned[i] for i in range(len(tables))]
    columns = [read[i] for i in range(len(tables))]
    cut = frontier_cut(engine, plans)
    if cut is None:
        return False
    late = {}
    admitted: list[Admitted] = []
    for index, (plan, (kinds, starts, ends, arrivals, payloads, order)) in enumerate(zip(plans, columns)):
        late.update({(index, i): payloads[i] for i in plan.late})
        for i, kind in enumerate(kinds):
            if kind in (CTI, HEARTBEAT) or i in plan.dropped:
                continue
            start, end = plan.moved.get(i, (starts[i], ends[i]))
            admitted.append((index, (arrivals[i], index, int(order[i])), start, end, payloads[i]))
    reaching, renamed, join = model(engine, shape, plans, admitted)
    spec = shape.window.spec
    groups: dict[tuple[int, int], list[Any]] = {}
    t_max = None
    for first, start, end, payload in reaching:
        t_max = max(t_max or end, start, end)
        for k in range(spec.first_window(start), spec.last_window(end) + 1):
            g = groups.setdefault((k, payload.key), [first, 0, None])
            g[0] = min(g[0], first)
            g[1] += 1
            g[2] = payload.value if g[2] is None else g[2] + payload.value
    partials: list[Partial] = [(k, (key,), first, n, (total,)) for (k, key), (first, n, total) in groups.items()]
    apply_batch(engine, shape, plans, cut, late, partials, t_max, renamed, join)
    return True


@BULKS
@BULK
@given(table=rows(), time=time_settings(), window=st.sampled_from([(10, 10), (15, 5), (5, 10)]), second=st.booleans(), data=st.data())
def test_batches_in_bulk_leave_the_engine_as_item_by_item(
    bulk: str,
    table: Any,
    time: AdvanceTimeSettings,
    window: tuple[int, int],
    second: bool,
    data: st.DataObject,
) -> None:
    def batches() -> Any:
        at = 0
        while at < table.num_rows:
            size = data.draw(st.integers(1, table.num_rows - at))
            yield [table.slice(at, size)]
            at += size

    _lockstep(
        lambda: _query(table, time, *window, second=second), batches(), data, modelled(_union_model) if bulk == "model" else vectorised
    )


def _lockstep(
    query_of: Callable[[], Stream[Any]],
    batches: Iterable[list[Any]],
    data: st.DataObject,
    bulk: Bulk,
    whole: bool = True,
    desc: str = "",
) -> None:
    """Feed ``batches`` (each: the rows of every input) to a live engine, each batch in bulk
    or item by item as drawn, beside one that takes every batch item by item: after every
    batch both are in the same state (and the first is sometimes saved and restored); at the
    end, the release, the rejections and the metrics are the in-memory run's. Where the
    in-memory run raises a tempo error, the engine raises one of the same type.

    ``whole``: an only input's batch always goes in bulk when drawn (else the bulk engine may
    leave it item by item, as it does a batch where a value fails inside polars). States and
    releases are compared as text (``_text``), where NaN equals NaN."""
    from tempo import TempoError
    from tests.value_strategies import canonical

    stream = query_of()
    try:
        expected: Any = InMemoryExecutor().run(stream)
    except TempoError as error:
        expected = type(error)
    query = Query.build(stream.node)
    shape = bulk_shape(query)
    assert isinstance(shape, BulkShape), shape
    mode = TimestampMode()
    mode.saw(aware=True)
    engine = LiveEngine(query, mode)
    items_only = LiveEngine(query, mode)  # every batch item by item: the state to match
    in_bulk = bulk(query, shape)
    released: list[Any] = []
    rejections: list[Any] = []
    try:
        for batch in batches:
            drawn = data.draw(st.booleans())
            done = drawn and in_bulk(engine, batch)
            assert done or not drawn or not whole or len(batch) > 1  # an only input's batch goes whole
            if not done:
                for index, rows in enumerate(batch):
                    engine.push_rows(index, rows)
            engine.run()
            for index, rows in enumerate(batch):
                items_only.push_rows(index, rows)
            items_only.run()
            assert _text(_state(engine)) == _text(_state(items_only)), desc
            out = engine.take()
            released += out.items
            rejections += out.rejections
            if data.draw(st.integers(0, 3)) == 0:
                engine = LiveEngine.restore(Query.build(query_of().node), engine.snapshot())
        engine.finish()
        out = engine.take()
    except TempoError as error:
        assert expected is type(error), f"the engine raised {error!r}, the in-memory run gave {expected} on {desc}"
        return
    assert not isinstance(expected, type), f"the in-memory run raised {expected.__name__}, the engine did not, on {desc}"
    assert canonical(repr(released + out.items)) == canonical(repr(expected.raw)), desc
    assert canonical(repr(rejections + out.rejections)) == canonical(repr(expected.rejected)), desc
    for node in query.sources:
        assert engine.metrics()[node.name] == attrs.evolve(expected.metrics[node.name], watermark_delays=[])


def _text(state: Any) -> str:
    """An engine's state as text, dicts in no particular order (the order in which windows
    opened is the engine's own), NaN equal to NaN and -0.0 to 0.0."""
    from tests.value_strategies import canonical

    def plain(v: Any) -> Any:
        if isinstance(v, dict):
            return sorted((repr(plain(k)), plain(x)) for k, x in v.items())
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        return v

    return canonical(repr(plain(state)))


def _state(engine: LiveEngine) -> Any:
    """What must be the same after a batch either way: the ingresses' and the feeds' state,
    the frontier, the unions' CTIs, the join's held events and waiting pairs (in order; the
    ids of the events it holds are its own business), the window's open windows (groups in
    order) and the next event id."""
    from tempo.runtime.live import state_of
    from tempo.runtime.bulk import _waiting
    from tempo.runtime.joins import Join
    from tempo.runtime.stateless import Union
    from tempo.runtime.windows import Window

    window = next(op for op in engine.operators if isinstance(op, Window))
    inputs = []
    for ingress, feed in zip(engine.ingresses, engine.feeds):
        own = {k: v for k, v in state_of(ingress, ingress.WIRING).items() if k != "metrics"}
        inputs.append((own, repr(ingress.metrics), feed.next_position, feed.last_order, feed.sequence.last_arrival))
    unions = [(op.ctis, op.out_cti) for op in engine.operators if isinstance(op, Union)]
    joins = [
        (
            [
                (
                    side.cti,
                    [rec[1:5] for rec in side.by_id.values()],
                    {k: [rec[1:4] for rec in group.values()] for k, group in side.by_key.items()},
                )
                for side in op.sides
            ],
            [(start, left[1:4], right[1:4]) for start, left, right in _waiting(op)],
            op.out_cti,
        )
        for op in engine.operators
        if isinstance(op, Join)
    ]
    return (
        inputs,
        engine.reached,
        [list(b) for b in engine.buffers],
        unions,
        joins,
        {k: list(groups.items()) for k, groups in window.acc.items()},
        sorted(window.acc_heap),
        window.t_max,
        window.out_cti,
        repr(engine.build.ids),
    )


@st.composite
def two_inputs(draw: st.DrawFn) -> tuple[Any, Any, list[int]]:
    """Rows of two inputs arriving interleaved (several in each second, so arrivals tie across
    inputs), each with points a little out of order, CTI and heartbeat rows; ``seq`` is the
    row's place in the whole arrival sequence. Now and then both inputs have a heartbeat at
    the clock (as a live source adds at the end of its batch): the places after those are
    the third value, where batches often end."""
    n = draw(st.integers(2, 50))
    tables: list[dict[str, list[Any]]] = [{c: [] for c in ("seq", "kind", "ts", "arr", "key", "value")} for _ in range(2)]
    ends = []
    seq = 0

    def add(index: int, kind: str, start: datetime, arrival: datetime, value: int) -> None:
        nonlocal seq
        for column, v in zip(("seq", "kind", "ts", "arr", "key", "value"), (seq, kind, start, arrival, value % 3, value)):
            tables[index][column].append(v)
        seq += 1

    clock = T0
    for i in range(n):
        arrival = clock = max(clock, T0 + timedelta(seconds=i // 3))
        start = T0 + timedelta(seconds=i * 2 + draw(st.sampled_from([0, 0, 1, -3, -4, -11, -30])))
        add(draw(st.integers(0, 1)), draw(st.sampled_from(["point"] * 8 + ["cti", "heartbeat"])), start, arrival, draw(st.integers(-5, 9)))
        if draw(st.integers(0, 3)) == 0:  # the clock just after the items so far
            clock += timedelta(microseconds=1)
            add(0, "heartbeat", clock, clock, 0)
            add(1, "heartbeat", clock, clock, 0)
            ends.append(seq)
    schema = pa.schema(
        [("seq", pa.int64()), ("kind", pa.string()), ("ts", STAMP), ("arr", STAMP), ("key", pa.int64()), ("value", pa.int64())]
    )
    first, second = (pa.Table.from_pydict(t, schema=schema) for t in tables)
    return first, second, ends


def _union_query(tables: tuple[Any, Any], times: tuple[AdvanceTimeSettings, AdvanceTimeSettings], size: int, hop: int) -> Stream[Any]:
    from tempo.sources import ArrowSource

    a, b = (
        Stream.create(name, ArrowSource(table, Ev, start="ts", kind="kind", arrival="arr", order="seq"), EventShape.POINT, time)
        for name, table, time in zip(("a", "b"), tables, times)
    )
    return (
        a.where(lambda e: e.value != 4)
        .union(b.shift_event_time(timedelta(microseconds=SHIFT)))
        .where(lambda e: e.value != 5)
        .group_by(lambda e: e.key)
        .hopping(timedelta(seconds=size), timedelta(seconds=hop))
        .aggregate(lambda k, w: KeyTotal(key=k, n=w.count(), total=w.sum(lambda e: e.value)))
    )


@BULKS
@BULK
@given(
    tables=two_inputs(),
    times=st.tuples(time_settings(), second_settings()),
    window=st.sampled_from([(10, 10), (15, 5), (5, 10)]),
    data=st.data(),
)
def test_batches_of_two_inputs_in_bulk_leave_the_engine_as_item_by_item(
    bulk: str,
    tables: tuple[Any, Any, list[int]],
    times: tuple[AdvanceTimeSettings, AdvanceTimeSettings],
    window: tuple[int, int],
    data: st.DataObject,
) -> None:
    *tables, ends = tables
    seqs = [t.column("seq").to_numpy() for t in tables]
    total = sum(t.num_rows for t in tables)

    def batches() -> Any:
        at = 0
        while at < total:  # a batch: the rows of both inputs in a stretch of the arrival sequence
            later = [e for e in ends if e > at]
            until = (
                data.draw(st.sampled_from(later)) if later and data.draw(st.integers(0, 3)) else at + data.draw(st.integers(1, total - at))
            )
            yield [
                t.slice(int(np.searchsorted(q, at)), int(np.searchsorted(q, until) - np.searchsorted(q, at))) for t, q in zip(tables, seqs)
            ]
            at = until

    _lockstep(lambda: _union_query(tables, times, *window), batches(), data, modelled(_union_model) if bulk == "model" else vectorised)


def _seconds(*pairs: tuple[str, int], seq: int = 0) -> Any:
    """An input's rows: (kind, arrival second) each, starts at the arrival; orders from ``seq``."""
    return pa.table(
        {
            "seq": pa.array(range(seq, seq + len(pairs)), pa.int64()),
            "kind": [k for k, _ in pairs],
            "ts": pa.array([T0 + timedelta(seconds=a) for _, a in pairs], STAMP),
            "arr": pa.array([T0 + timedelta(seconds=a) for _, a in pairs], STAMP),
            "key": pa.array([0] * len(pairs), pa.int64()),
            "value": pa.array([1] * len(pairs), pa.int64()),
        }
    )


def test_a_batch_goes_in_bulk_when_the_frontier_holds_only_heartbeats() -> None:
    """Input ``a`` is declared first, so at one arrival its items come before ``b``'s. Item
    by item holds an item until every other input has reached its arrival (``b``: the same
    arrival or later; ``a``: a later one), and everything after it in the merged order. A
    batch goes in bulk when what is held then is heartbeats only; they stay held."""
    gen = AdvanceTimeSettings(AdvanceTimeGenerationSettings(100), policy=AdvanceTimePolicy.DROP)
    Rows = list[tuple[str, int]]

    def attempt(a: Rows, b: Rows, before: tuple[Rows, Rows] = ([], [])) -> list[list[int]] | None:
        """The arrivals held after the batch in bulk (None: it goes item by item), checked
        against item by item."""
        tables = (_seconds(*a, seq=100), _seconds(*b, seq=100))
        query = Query.build(_union_query(tables, (gen, gen), 10, 10).node)
        shape = bulk_shape(query)
        assert isinstance(shape, BulkShape)
        engine, items_only = LiveEngine(query, TimestampMode()), LiveEngine(query, TimestampMode())
        for index, rows in enumerate(before):
            for e in (engine, items_only):
                e.push_rows(index, _seconds(*rows))
        engine.run()
        items_only.run()
        if not _bulk(engine, shape, list(tables)):
            return None
        for index, rows in enumerate(tables):
            items_only.push_rows(index, rows)
        items_only.run()
        assert _state(engine) == _state(items_only)
        return [[rec[0] // 1_000_000 - int(T0.timestamp()) for rec in buffer] for buffer in engine.buffers]

    # b has reached 3: a's point at 3 goes; b's heartbeat at 3 waits (a may deliver at 3).
    assert attempt([("point", 1), ("point", 3)], [("point", 2), ("heartbeat", 3)]) == [[], [3]]
    # b may still deliver an item at 2 or 3 before a's point at 3.
    assert attempt([("point", 1), ("point", 3)], [("point", 2)]) is None
    # b's point at 4 waits: a may still deliver at 4 (and a's comes first).
    assert attempt([("point", 1), ("heartbeat", 4)], [("point", 2), ("point", 4), ("heartbeat", 5)]) is None
    assert attempt([("point", 1), ("heartbeat", 5)], [("point", 2), ("point", 4), ("heartbeat", 5)]) == [[], [5]]
    # a's heartbeat at 6 waits for b to pass 6.
    assert attempt([("point", 1), ("heartbeat", 6)], [("point", 2), ("heartbeat", 5)]) == [[6], []]
    # Heartbeats held from before go first; a point held from before sends the batch item by item.
    assert attempt([("point", 5), ("heartbeat", 9)], [("heartbeat", 9)], before=([("point", 1), ("heartbeat", 3)], [("point", 2)])) == [
        [],
        [9],
    ]
    assert attempt([("point", 5), ("heartbeat", 9)], [("heartbeat", 9)], before=([("point", 1)], [("point", 2)])) is None


def test_the_bulk_shape_says_why_a_query_is_not_of_it() -> None:
    from tempo.sources import ArrowSource

    table = pa.table({"seq": [0], "ts": pa.array([T0], STAMP), "key": [1], "value": [1]})
    readings = Stream.create("r", ArrowSource(table, Ev, start="ts", order="seq"), EventShape.POINT)
    assert bulk_shape(Query.build(readings.node)) == WHY_NOT
    other = Stream.create("s", ArrowSource(table, Ev, start="ts", order="seq"), EventShape.POINT)

    def total(s: Stream[Ev]) -> Stream[KeyTotal]:
        return s.tumbling(timedelta(seconds=1)).aggregate(lambda w: KeyTotal(key=0, n=w.count(), total=0))

    assert isinstance(bulk_shape(Query.build(total(readings.union(other)).node)), BulkShape)
    assert bulk_shape(Query.build(total(readings).union(total(other)).node)) == WHY_NOT
    joined = readings.join(other, lambda r, o: r.key == o.key, lambda r, o: r)
    shape = bulk_shape(Query.build(total(joined.where(lambda e: e.value > 0)).node))
    assert isinstance(shape, BulkShape) and shape.join is not None
    assert bulk_shape(Query.build(joined.node)) == WHY_NOT  # no window above the join
    third = Stream.create("t", ArrowSource(table, Ev, start="ts", order="seq"), EventShape.POINT)
    assert bulk_shape(Query.build(total(joined.join(third, lambda r, o: r.key == o.key, lambda r, o: r)).node)) == WHY_NOT
    assert bulk_shape(Query.build(total(joined.union(third)).node)) == WHY_NOT
    by_float = readings.join(other, lambda r, o: r.key * 0.5 == o.key * 0.5, lambda r, o: r)
    assert bulk_shape(Query.build(total(by_float).node)) == "a join key is of type float"
    importing = Stream.create(
        "i",
        ArrowSource(table, Ev, start="ts", order="seq", arrival="ts"),
        EventShape.POINT,
        AdvanceTimeSettings(import_=AdvanceTimeImportSettings("r")),
    )
    assert isinstance(bulk_shape(Query.build(total(readings.union(importing)).node)), BulkShape)
    chained = Stream.create(
        "j",
        ArrowSource(table, Ev, start="ts", order="seq", arrival="ts"),
        EventShape.POINT,
        AdvanceTimeSettings(import_=AdvanceTimeImportSettings("i")),
    )
    assert (
        bulk_shape(Query.build(total(readings.union(importing).union(chained)).node))
        == "input 'j' imports the CTIs of 'i', which are not all its own"
    )


DURATION = 7_000_000
"""The join query's lifetime of the second input's events (7 s, in ticks)."""


def _join_query(tables: tuple[Any, Any], times: tuple[AdvanceTimeSettings, AdvanceTimeSettings], size: int, hop: int) -> Stream[Any]:
    from tempo.sources import ArrowSource

    a, b = (
        Stream.create(name, ArrowSource(table, Ev, start="ts", kind="kind", arrival="arr", order="seq"), EventShape.POINT, time)
        for name, table, time in zip(("a", "b"), tables, times)
    )
    return (
        a.where(lambda e: e.value != 4)
        .join(
            b.alter_event_duration(timedelta(microseconds=DURATION)),
            lambda x, y: (x.key == y.key) & (x.value >= y.value - 2),
            lambda x, y: Ev(key=x.key, value=x.value * 10 + y.value),
        )
        .group_by(lambda e: e.key)
        .hopping(timedelta(seconds=size), timedelta(seconds=hop))
        .aggregate(lambda k, w: KeyTotal(key=k, n=w.count(), total=w.sum(lambda e: e.value)))
    )


def _join_model(engine: LiveEngine, shape: BulkShape, plans: list[BatchPlan], events: list[Admitted]) -> tuple[list[WindowEvent], int, Any]:
    """``_join_query`` below its window, by the rule ``JoinBefore`` states: every matching
    pair that overlaps, of an event of the batch and one held or of the batch."""
    before = join_before(engine, shape, plans)
    sides: list[list[tuple[Position, int, int, Any]]] = [
        [((0, rank, 0, 0), start, end, payload) for rank, (start, end, payload) in enumerate(held)] for held in before.sides
    ]
    new: list[list[tuple[Position, int, int, Any]]] = [[], []]
    for index, place, start, end, payload in events:
        if index == 0 and payload.value != 4:
            new[0].append(((1, *place), start, end, payload))
        elif index == 1:
            new[1].append(((1, *place), start, start + DURATION, payload))
    reaching: list[WindowEvent] = [
        (released_key(rank, start), start, end, payload) for rank, (start, end, payload) in enumerate(before.released)
    ]
    pending = []
    released = 0
    for lp, ls, le, left in sides[0] + new[0]:
        for rp, rs, re, right in sides[1] + new[1]:
            if lp[0] == rp[0] == 0 or left.key != right.key or not left.value >= right.value - 2 or not (ls < re and rs < le):
                continue
            start, later, earlier = max(ls, rs), max(lp, rp), min(lp, rp)
            if start < before.out_cti:
                reaching.append(((start, later, earlier), start, min(le, re), Ev(key=left.key, value=left.value * 10 + right.value)))
                released += 1
            else:
                pending.append(((later, earlier), ls, le, left, rs, re, right))
    held = tuple([e for e in new[port] if e[2] > before.ctis[1 - port]] for port in (0, 1))
    return reaching, 0, (before, JoinAfter(held, pending, released))


@BULKS
@BULK
@given(
    tables=two_inputs(),
    times=st.tuples(time_settings(), second_settings()),
    window=st.sampled_from([(10, 10), (15, 5), (5, 10)]),
    data=st.data(),
)
def test_batches_through_a_join_in_bulk_leave_the_engine_as_item_by_item(
    bulk: str,
    tables: tuple[Any, Any, list[int]],
    times: tuple[AdvanceTimeSettings, AdvanceTimeSettings],
    window: tuple[int, int],
    data: st.DataObject,
) -> None:
    """As for the union, with a join of the two inputs below the window: after every batch
    the join holds the same events and the same pairs wait, in the same order."""
    *tables, ends = tables
    seqs = [t.column("seq").to_numpy() for t in tables]
    total = sum(t.num_rows for t in tables)

    def batches() -> Any:
        at = 0
        while at < total:
            later = [e for e in ends if e > at]
            until = (
                data.draw(st.sampled_from(later)) if later and data.draw(st.integers(0, 3)) else at + data.draw(st.integers(1, total - at))
            )
            yield [
                t.slice(int(np.searchsorted(q, at)), int(np.searchsorted(q, until) - np.searchsorted(q, at))) for t, q in zip(tables, seqs)
            ]
            at = until

    _lockstep(lambda: _join_query(tables, times, *window), batches(), data, modelled(_join_model) if bulk == "model" else vectorised)


def _timeline(seq: int, *rows: tuple[str, int, int, int, int]) -> Any:
    """An input's rows: (kind, start second, arrival second, key, value) each; orders from ``seq``."""
    return pa.table(
        {
            "seq": pa.array(range(seq, seq + len(rows)), pa.int64()),
            "kind": [r[0] for r in rows],
            "ts": pa.array([T0 + timedelta(seconds=r[1]) for r in rows], STAMP),
            "arr": pa.array([T0 + timedelta(seconds=r[2]) for r in rows], STAMP),
            "key": pa.array([r[3] for r in rows], pa.int64()),
            "value": pa.array([r[4] for r in rows], pa.int64()),
        }
    )


@BULKS
def test_a_join_in_bulk_by_hand(bulk: str) -> None:
    """``_join_query`` with only explicit CTIs, each batch in bulk beside item by item.
    ``b``'s points last 7 s; a pair's value is a.value * 10 + b.value; windows of 5 s.

    batch 1: b0 key 0 [0, 7), b4 key 1 [4, 11); a1 key 0 at 1, a6 key 1 at 6; CTIs 2 and 2.
             Pairs (a1, b0) from 1, released (the join's CTI is 2); (a6, b4) from 6 waits.
             The join forgets a1, which ends before b's CTI; it holds a6, b0 and b4.
    batch 2: a6' key 0 at 6: pair (a6', b0) from 6. CTIs a 7, b 8: the join's CTI is 7 and
             both pairs from 6 go to the window, the waiting one first (pushed first), so the
             window [5, 10) has key 1 before key 0. a's CTI at 7 = b0's end: the join forgets
             b0 (nothing of a can overlap it now), and both a points; it holds b4 [4, 11).
    batch 3: CTIs at 20 close the windows: [0, 5) key 0 (10); [5, 10) key 1 (10), key 0 (10).
    """
    gen = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1000), policy=AdvanceTimePolicy.DROP)
    batches = [
        (
            _timeline(0, ("point", 1, 1, 0, 1), ("point", 6, 3, 1, 1), ("cti", 2, 5, 0, 0), ("heartbeat", 10, 10, 0, 0)),
            _timeline(0, ("point", 0, 0, 0, 0), ("point", 4, 2, 1, 0), ("cti", 2, 4, 0, 0), ("heartbeat", 10, 10, 0, 0)),
        ),
        (
            _timeline(10, ("point", 6, 11, 0, 1), ("cti", 7, 12, 0, 0), ("heartbeat", 20, 20, 0, 0)),
            _timeline(10, ("cti", 8, 13, 0, 0), ("heartbeat", 20, 20, 0, 0)),
        ),
        (
            _timeline(20, ("cti", 20, 21, 0, 0), ("heartbeat", 30, 30, 0, 0)),
            _timeline(20, ("cti", 20, 22, 0, 0), ("heartbeat", 30, 30, 0, 0)),
        ),
    ]
    whole = tuple(pa.concat_tables([b[i] for b in batches]) for i in (0, 1))
    query = Query.build(_join_query(whole, (gen, gen), 5, 5).node)
    shape = bulk_shape(query)
    assert isinstance(shape, BulkShape) and shape.join is not None
    engine, items_only = LiveEngine(query, TimestampMode()), LiveEngine(query, TimestampMode())
    in_bulk = (modelled(_join_model) if bulk == "model" else vectorised)(query, shape)
    held = []
    for batch in batches:
        assert in_bulk(engine, list(batch))
        engine.run()
        for index, rows in enumerate(batch):
            items_only.push_rows(index, rows)
        items_only.run()
        assert _state(engine) == _state(items_only)
        join = next(op for op in engine.operators if isinstance(op, Join))
        held.append([sorted(rec[1] // 1_000_000 - int(T0.timestamp()) for rec in side.by_id.values()) for side in join.sides])
    assert held == [[[6], [0, 4]], [[], [4]], [[], []]]  # the starts held, per side
    out = [e.payload for e in engine.take().items if hasattr(e, "payload")]
    assert out == [KeyTotal(key=0, n=1, total=10), KeyTotal(key=1, n=1, total=10), KeyTotal(key=0, n=1, total=10)]


def _by_key(source: Any, time: AdvanceTimeSettings, where: Callable[[Any], Any] = lambda e: e.value != 4) -> Stream[KeyTotal]:
    return (
        Stream.create("r", source, EventShape.POINT, time)
        .where(where)
        .group_by(lambda e: e.key)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda k, w: KeyTotal(key=k, n=w.count(), total=w.sum(lambda e: e.value)))
    )


def _one_batch(stream: Stream[Any], table: Any) -> tuple[bool, LiveEngine]:
    """``table`` as one batch through the vectorised batch engine: (whether it went in bulk,
    the engine, fed item by item when it did not)."""
    pytest.importorskip("polars")
    from tempo.vectorised.batches import VectorisedBatches

    query = Query.build(stream.node)
    shape = bulk_shape(query)
    assert isinstance(shape, BulkShape)
    engine = LiveEngine(query, TimestampMode())
    done = VectorisedBatches(query, shape).run(engine, [table])
    if not done:
        engine.push_rows(0, table)
    engine.run()
    return done, engine


GEN = AdvanceTimeSettings(AdvanceTimeGenerationSettings(2, advance_to_infinity_on_shutdown=True), policy=AdvanceTimePolicy.DROP)


def test_the_vectorised_batch_engine_takes_kind_words_in_any_case() -> None:
    """Kind words are read as item by item reads them (lowercased); the batch goes in bulk
    and the engine's state is item by item's."""
    from tempo.sources import ArrowSource

    table = _timeline(0, ("point", 1, 1, 0, 1), ("Point", 2, 2, 1, 2), ("CTI", 3, 3, 0, 0), ("point", 12, 4, 1, 3))
    stream = _by_key(ArrowSource(table, Ev, start="ts", kind="kind", arrival="arr", order="seq"), GEN)
    done, engine = _one_batch(stream, table)
    items_only = LiveEngine(Query.build(stream.node), TimestampMode())
    items_only.push_rows(0, table)
    items_only.run()
    assert done and _state(engine) == _state(items_only)


def test_the_vectorised_batch_engine_leaves_a_bad_row_to_item_by_item() -> None:
    """A null in a field not declared optional, a kind that is not one, a null order: the
    batch goes item by item, which raises the error naming the row, as it always does."""
    from tempo.errors import InputError
    from tempo.sources import ArrowSource

    good = _timeline(0, ("point", 1, 1, 0, 1), ("point", 2, 2, 1, 2), ("point", 3, 3, 0, 3))
    broken = {
        "null value": good.set_column(5, "value", pa.array([1, None, 3], pa.int64())),
        "unknown kind": good.set_column(1, "kind", pa.array(["point", "pint", "point"])),
        "null order": good.set_column(0, "seq", pa.array([0, None, 2], pa.int64())),
    }
    for name, table in broken.items():
        stream = _by_key(ArrowSource(table, Ev, start="ts", kind="kind", arrival="arr", order="seq"), GEN)
        with pytest.raises(InputError, match="'r'"):
            done, _ = _one_batch(stream, table)
            assert not done, name


def test_the_vectorised_batch_engine_leaves_a_failing_udf_to_item_by_item() -> None:
    """A udf raising inside polars: the batch goes item by item, which raises ``UdfError``
    naming the udf and the arguments, as the in-memory executor does."""
    import tempo
    from tempo.errors import UdfError
    from tempo.sources import ArrowSource

    def picky(value: int) -> bool:
        if value == 2:
            raise ValueError("two is not allowed")
        return True

    table = _timeline(0, ("point", 1, 1, 0, 1), ("point", 2, 2, 1, 2), ("point", 3, 3, 0, 3))
    stream = _by_key(
        ArrowSource(table, Ev, start="ts", kind="kind", arrival="arr", order="seq"), GEN, lambda e: tempo.udf(picky, returns=bool)(e.value)
    )
    with pytest.raises(UdfError, match="picky.*two is not allowed"):
        _one_batch(stream, table)


@attrs.define
class Checked:
    key: int = attrs.field(validator=attrs.validators.instance_of(int))
    value: int = 0


def test_the_vectorised_batch_engine_refuses_a_payload_class_that_checks_its_fields() -> None:
    """A payload class whose constructor does more than store its fields runs for every row
    item by item; the batch engine refuses the query (``engine="auto"`` then runs it item
    by item), naming the input."""
    pytest.importorskip("polars")
    from tempo.errors import UnsupportedError
    from tempo.sources import ArrowSource
    from tempo.vectorised.batches import VectorisedBatches

    table = pa.table({"seq": [0], "ts": pa.array([T0], STAMP), "key": [1], "value": [1]})
    stream = (
        Stream.create("checked", ArrowSource(table, Checked, start="ts", order="seq"), EventShape.POINT, GEN)
        .tumbling(timedelta(seconds=1))
        .aggregate(lambda w: KeyTotal(key=0, n=w.count(), total=0))
    )
    query = Query.build(stream.node)
    shape = bulk_shape(query)
    assert isinstance(shape, BulkShape)
    with pytest.raises(UnsupportedError, match="input 'checked'"):
        VectorisedBatches(query, shape)


@attrs.frozen
class Reading:
    key: float
    value: int


def test_the_vectorised_batch_engine_keys_nan_and_negative_zero_as_item_by_item() -> None:
    """Every engine keys a float group as Spark does (docs/semantics.md 7.4): all NaN in one
    group, -0.0 with 0.0. polars groups them so too, and ``apply_batch`` keys its partials
    as the engine does: the batch goes in bulk and the state is item by item's (keys NaN,
    1.0, NaN: groups 1.0 (1) and NaN (2); keys 0.0, -0.0, 1.0: 0.0 (2) and 1.0 (1))."""
    from tempo.sources import ArrowSource

    def stream(table: Any) -> Stream[Any]:
        return (
            Stream.create("r", ArrowSource(table, Reading, start="ts", order="seq"), EventShape.POINT, GEN)
            .group_by(lambda e: e.key)
            .tumbling(timedelta(seconds=10))
            .aggregate(lambda k, w: KeyTotal(key=0, n=w.count(), total=w.sum(lambda e: e.value)))
        )

    def table(keys: list[float]) -> Any:
        return pa.table(
            {
                "seq": list(range(len(keys))),
                "ts": pa.array([T0 + timedelta(seconds=i) for i in range(len(keys))], STAMP),
                "key": pa.array(keys, pa.float64()),
                "value": [1] * len(keys),
            }
        )

    for keys, counts in (([1.0, float("nan"), float("nan")], [1, 2]), ([0.0, -0.0, 1.0], [2, 1])):
        done, engine = _one_batch(stream(table(keys)), table(keys))
        items_only = LiveEngine(Query.build(stream(table(keys)).node), TimestampMode())
        items_only.push_rows(0, table(keys))
        items_only.run()
        assert done and _state(engine) == _state(items_only)
        window = next(op for op in engine.operators if isinstance(op, Window))
        assert sorted(state[0] for groups in window.acc.values() for state in groups.values()) == sorted(counts)


def test_a_timestamp_order_column_is_kept_in_ticks_and_state_saved_before_is_read() -> None:
    """The live engine keeps a timestamp order column's last value as ticks (what the bulk
    engines compare their order columns with), names a row going back with the instants,
    and reads state saved when it kept the instant itself."""
    from tempo.errors import InputError
    from tempo.sources import ArrowSource

    table = _timeline(0, ("point", 1, 1, 0, 1), ("point", 2, 2, 1, 2))
    stream = _by_key(ArrowSource(table, Ev, start="ts", kind="kind", arrival="arr"), GEN)  # ordered by "arr"
    query = Query.build(stream.node)
    engine = LiveEngine(query, TimestampMode())
    engine.push_rows(0, table)
    assert engine.feeds[0].last_order == int((T0 + timedelta(seconds=2)).timestamp() * 1_000_000)
    with pytest.raises(InputError, match=r"comes before datetime.datetime\(2026, 1, 1, 0, 0, 2, tzinfo"):
        engine.push_rows(0, _timeline(5, ("point", 1, 1, 0, 1)))
    engine.feeds[0].last_order = T0 + timedelta(seconds=2)  # type: ignore[assignment]  # as state saved before kept it
    restored = LiveEngine.restore(query, engine.snapshot())
    assert restored.feeds[0].last_order == int((T0 + timedelta(seconds=2)).timestamp() * 1_000_000)
