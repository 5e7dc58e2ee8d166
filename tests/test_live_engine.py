"""The live engine (``tempo.runtime.live``) gives exactly the in-memory executor's result for
any cutting of the inputs into micro-batches, with its state saved and restored into a
freshly built query between batches.

For random queries and inputs (``tests/strategies.py``): the inputs are handed over in
random chunks, interleaved at random between the inputs; after each chunk the engine runs
up to the arrival frontier, and sometimes its state goes through ``snapshot`` and
``LiveEngine.restore`` on a plan built again from the same user code. What it released
across all batches, followed by ``finish()``, must be ``Result.raw`` of the in-memory run,
item for item and in order, with the same rejections and metrics. And what it has released
after any batch is a prefix of that (nothing released is ever taken back or reordered).
"""

from __future__ import annotations

import itertools
import os
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import EvaluationError, InMemoryExecutor, Point, Stream, is_infinite
from tempo.events import Cti, EventShape
from tempo.plan.query import Query
from tempo.runtime.engine import prepared_inputs
from tempo.runtime.ingress import TimestampMode
from tempo.runtime.live import LiveEngine, StateError
from tempo.settings import AdvanceTimeGenerationSettings, AdvanceTimeSettings
from tests.strategies import Builder, Ev, queries

LIVE = settings(
    max_examples=150,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def _live_run(build: Builder, flush: bool, data: st.DataObject) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Run the query live over random batches; (released items, rejections, metrics)."""
    query = Query.build(build(flush).node)
    mode = TimestampMode()
    streams = prepared_inputs(query, mode)
    pending = [list(s) for s in streams]
    engine = LiveEngine(query, mode)
    released: list[Any] = []
    rejections: list[Any] = []
    delays: dict[str, list[Any]] = {s.name: [] for s in query.sources}

    def drain() -> None:
        out = engine.take()
        released.extend(out.items)
        rejections.extend(out.rejections)
        for name, samples in out.watermark_delays.items():
            delays[name] += samples

    while any(pending):
        index = data.draw(st.sampled_from([i for i, p in enumerate(pending) if p]))
        size = data.draw(st.integers(1, max(1, len(pending[index]))))
        engine.push(index, pending[index][:size])
        del pending[index][:size]
        engine.run()
        drain()
        if data.draw(st.integers(0, 3)) == 0:  # save, and go on in a plan built anew
            engine = LiveEngine.restore(Query.build(build(flush).node), engine.snapshot())
    engine.finish()
    drain()
    metrics = engine.metrics()
    for name, m in metrics.items():
        m.watermark_delays = delays[name]
    return released, rejections, metrics


@LIVE
@given(query=queries(), flush=st.booleans(), data=st.data())
def test_live_batches_give_the_in_memory_result(query: tuple[str, Builder], flush: bool, data: st.DataObject) -> None:
    desc, build = query
    try:
        expected = InMemoryExecutor().run(build(flush))
    except Exception:
        return  # bad input: covered elsewhere (a live query fails where the bad item arrives)
    released, rejections, metrics = _live_run(build, flush, data)
    assert released == expected.raw, desc
    assert rejections == expected.rejected, desc
    for name, m in expected.metrics.items():
        live = metrics[name]
        assert (live.received, live.admitted, live.dropped, live.adjusted) == (m.received, m.admitted, m.dropped, m.adjusted), desc
        assert (live.ctis_generated, live.ctis_imported, live.ctis_explicit, live.ctis_ignored) == (
            m.ctis_generated,
            m.ctis_imported,
            m.ctis_explicit,
            m.ctis_ignored,
        ), desc
        assert live.watermark_delays == m.watermark_delays, desc


@settings(LIVE, max_examples=60)
@given(query=queries(keyed=True), flush=st.booleans(), data=st.data())
def test_live_batches_give_the_in_memory_result_with_substreams(query: tuple[str, Builder], flush: bool, data: st.DataObject) -> None:
    """The same with every input split into substreams (per-key CTIs, keyed release)."""
    test_live_batches_give_the_in_memory_result.hypothesis.inner_test(query, flush, data)  # type: ignore[attr-defined]


@settings(LIVE, max_examples=int(os.environ.get("TEMPO_LIVE_EDGE_EXAMPLES", "60")))
@given(query=queries(edges=True), data=st.data())
def test_live_batches_give_the_in_memory_result_on_edge_values(query: tuple[str, Builder], data: st.DataObject) -> None:
    """The same over keys and values at the edges of 64 bits and times at the epoch and the
    ends of the calendar (``queries(edges=True)``), flushed: where the in-memory run raises
    an ``EvaluationError`` (an integer leaving 64 bits), the live engine raises it too, in
    some batch or at the flush, unless the error was in a result no CTI released (an input
    without a flush): the in-memory run computes those to count them (``Result.withheld``,
    docs/semantics.md 7.4), a live engine never does."""
    desc, build = query
    try:
        InMemoryExecutor().run(build(True))
    except EvaluationError:
        try:
            released = _live_run(build, True, data)[0]
        except EvaluationError:
            return
        ctis = [item.timestamp for item in released if isinstance(item, Cti)]
        assert ctis == [] or not is_infinite(ctis[-1]), f"the live engine released everything without the error: {desc}"
        return
    except Exception:
        return  # bad input: covered elsewhere
    test_live_batches_give_the_in_memory_result.hypothesis.inner_test(query, True, data)  # type: ignore[attr-defined]


T0 = datetime(2026, 1, 1)


def _t(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_an_item_waits_at_the_frontier_until_the_other_input_passes_its_arrival() -> None:
    """Timeline (arrivals in brackets): left delivers a point at 5 [arrival 10]; right has
    delivered nothing, so it could still deliver something arriving before 10: nothing is
    processed. Right delivers a CTI at 20 [arrival 12]: left's point (arrival 10) comes
    first and is processed; right's CTI waits, as left may still deliver something
    arriving before 12. Left delivers a CTI at 30 [arrival 13]: right's CTI goes; left's
    waits, as right has only reached 12; once right's source says it reached 14
    (``reach``, a clock moving without items) it is processed, the union's CTI becomes
    min(30, 20) = 20 and releases the point."""
    left_items = [Point(_t(5), Ev(key=1, value=1), arrival=_t(10)), Cti(_t(30), arrival=_t(13))]
    right_items = [Cti(_t(20), arrival=_t(12))]
    left = Stream.create("left", left_items, EventShape.POINT, payload_type=Ev)
    right = Stream.create("right", right_items, EventShape.POINT, payload_type=Ev)
    query = Query.build(left.union(right).node)
    mode = TimestampMode()
    streams = [list(s) for s in prepared_inputs(query, mode)]
    engine = LiveEngine(query, mode)
    engine.push(0, streams[0][:1])
    engine.run()
    assert engine.ingresses[0].metrics.received == 0  # held: right may still come first
    engine.push(1, streams[1])
    engine.run()
    assert engine.ingresses[0].metrics.received == 1
    assert engine.ingresses[1].metrics.ctis_explicit == 0
    engine.push(0, streams[0][1:])
    engine.run()
    assert engine.ingresses[1].metrics.ctis_explicit == 1
    assert engine.ingresses[0].metrics.ctis_explicit == 0  # held: right is at 12 only
    assert engine.take().items == []
    engine.reach(1, int((_t(14) - datetime(1970, 1, 1)) / timedelta(microseconds=1)))
    engine.run()
    assert engine.take().items == [Point(_t(5), Ev(key=1, value=1)), Cti(_t(20))]


def test_state_of_another_query_is_refused() -> None:
    settings_ = AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency=1))
    items = [Point(_t(1), Ev(key=1, value=1))]
    plain = Stream.create("left", items, EventShape.POINT, settings_, payload_type=Ev)
    engine = LiveEngine(Query.build(plain.node), TimestampMode())
    other = Query.build(plain.where(lambda e: e.value > 0).node)
    with pytest.raises(StateError, match="another query"):
        LiveEngine.restore(other, engine.snapshot())


def test_state_with_an_unimportable_payload_class_says_why() -> None:
    import attrs

    @attrs.frozen
    class Local:
        v: int

    items = [Point(_t(1), Local(1))]
    stream = Stream.create("left", items, EventShape.POINT, payload_type=Local)
    query = Query.build(stream.node)
    mode = TimestampMode()
    engine = LiveEngine(query, mode)
    engine.push(0, itertools.chain.from_iterable(prepared_inputs(query, mode)))
    engine.run()
    with pytest.raises(StateError, match="module level"):
        engine.snapshot()


def _dense_rows(*seqs: int) -> Any:
    """Rows of an input whose ``seq`` column counts them (its start and value follow it)."""
    import pyarrow as pa

    return pa.table(
        {
            "seq": pa.array(seqs, pa.int64()),
            "ts": pa.array([T0 + timedelta(seconds=s) for s in seqs], pa.timestamp("us", tz="UTC")),
            "key": pa.array([1] * len(seqs), pa.int64()),
            "value": pa.array(list(seqs), pa.int64()),
        }
    )


def test_rows_after_a_gap_in_a_dense_order_wait_for_the_missing_ones() -> None:
    """An input whose order column counts rows 0, 1, 2, ... (``dense_order_from=0``) gets its
    rows in three batches out of order: [3, 4], [0, 1], [2, 5]. Nothing is processed until
    row 0 is there; then 0 and 1; then 2 to 5: the input as it was written. A row number
    seen twice is an InputError naming it."""
    from tempo.errors import InputError
    from tempo.sources import ArrowSource

    settings_ = AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency=1, delay=timedelta(0)))
    source = ArrowSource(_dense_rows(), Ev, start="ts", order="seq", dense_order_from=0)
    query = Query.build(Stream.create("left", source, EventShape.POINT, settings_).node)
    mode = TimestampMode()
    mode.saw(aware=True)
    engine = LiveEngine(query, mode)
    received = []
    for batch in ([3, 4], [0, 1], [2, 5]):
        engine.push_rows(0, _dense_rows(*batch))
        engine.run()
        received.append(engine.ingresses[0].metrics.received)
        engine = LiveEngine.restore(query, engine.snapshot())  # held rows are state too
    assert received == [0, 2, 6]
    starts = [item.start for item in engine.take().items if isinstance(item, Point)]
    assert starts == [(T0 + timedelta(seconds=s)).replace(tzinfo=timezone.utc) for s in range(5)]  # each released by the next one's CTI
    with pytest.raises(InputError, match=r"item #4 .*a repeat of 'seq' value 4, first seen in item #4, taken in an earlier micro-batch"):
        engine.push_rows(0, _dense_rows(4, 6))


def test_a_dense_order_value_given_twice_is_reported_when_it_arrives() -> None:
    """A dense order value given to a second row is an InputError (ORDER_REPEAT) as soon as
    that row arrives, saying where the value was first seen: a row of an earlier batch still
    waiting behind the gap at 0 and 1, another row of the same batch (waiting or not), or a
    row taken already. (Issue 30: the first two waited for the gap, then read as "comes
    before 2, the last value of rows already processed in an earlier micro-batch".)"""
    from tempo.errors import InputError
    from tempo.rules import InputRule
    from tempo.sources import ArrowSource

    settings_ = AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency=1, delay=timedelta(0)))
    cases = [
        ([[2, 5], [2]], 2, "a row of an earlier micro-batch, which waits for the rows before it"),
        ([[3, 5, 3]], 3, "another row of this micro-batch"),
        ([[0, 1, 0]], 0, "another row of this micro-batch"),
        ([[0, 1], [2, 1]], 1, "item #1, taken in an earlier micro-batch"),
    ]
    for batches, value, where in cases:
        source = ArrowSource(_dense_rows(), Ev, start="ts", order="seq", dense_order_from=0)
        engine = LiveEngine(Query.build(Stream.create("left", source, EventShape.POINT, settings_).node), TimestampMode())
        with pytest.raises(InputError) as caught:
            for batch in batches:
                engine.push_rows(0, _dense_rows(*batch))
                engine.run()
        assert caught.value.rule is InputRule.ORDER_REPEAT and caught.value.position == value
        assert caught.value.message == (
            f"a repeat of 'seq' value {value}, first seen in {where}: the column counts the input's rows from 0 "
            "(dense_order_from), one number each, so no two rows may have the same"
        ), batches
        assert "comes before" not in str(caught.value)
    source = ArrowSource(_dense_rows(), Ev, start="ts", order="seq", dense_order_from=1)
    engine = LiveEngine(Query.build(Stream.create("left", source, EventShape.POINT, settings_).node), TimestampMode())
    with pytest.raises(InputError, match=r"'seq' value 0 is lower than 1, where the column starts counting") as below:
        engine.push_rows(0, _dense_rows(2, 0))
    assert below.value.rule is InputRule.ORDER_BACK


def test_a_heartbeat_row_lets_the_other_input_through_the_frontier() -> None:
    """``reach`` as table rows: right (no ordering settings) delivers a CTI at 20 [arrival 12],
    then only a heartbeat row [14]. Left's CTI at 30 [13] waits at the frontier until the
    heartbeat says right has reached 14; then the union releases what the in-memory run of
    the same tables gives, where the heartbeat changes no result."""
    import pyarrow as pa

    from tempo.sources import ArrowSource

    def table(rows: list[tuple[str, int | None, int, int]]) -> Any:
        stamp = pa.timestamp("us", tz="UTC")
        at = [None if s is None else _t(s) for _, s, _, _ in rows]
        return pa.table(
            {
                "kind": [k for k, _, _, _ in rows],
                "start": pa.array(at, stamp),
                "arr": pa.array([_t(a) for _, _, a, _ in rows], stamp),
                "seq": [q for _, _, _, q in rows],
                "key": [1] * len(rows),
                "value": [1] * len(rows),
            }
        )

    left = table([("point", 5, 10, 0), ("cti", 30, 13, 1)])
    right = table([("cti", 20, 12, 0), ("heartbeat", None, 14, 1)])

    def build(left_table: Any, right_table: Any) -> Stream[Ev]:
        def source(t: Any) -> ArrowSource[Ev]:
            return ArrowSource(t, Ev, start="start", kind="kind", arrival="arr", order="seq")

        return Stream.create("left", source(left_table), EventShape.POINT).union(
            Stream.create("right", source(right_table), EventShape.POINT)
        )

    query = Query.build(build(left, right).node)
    mode = TimestampMode()
    mode.saw(aware=True)
    engine = LiveEngine(query, mode)
    engine.push_rows(0, left)
    engine.push_rows(1, right.slice(0, 1))
    engine.run()
    assert engine.ingresses[0].metrics.received == 1 and engine.ingresses[0].metrics.ctis_explicit == 0  # held: right is at 12
    engine.push_rows(1, right.slice(1))
    engine.run()
    assert engine.ingresses[0].metrics.ctis_explicit == 1
    assert engine.ingresses[1].metrics.received == 0  # a heartbeat is no event
    expected = InMemoryExecutor().run(build(left, right)).raw
    assert (
        engine.take().items
        == expected
        == [Point(_t(5).replace(tzinfo=timezone.utc), Ev(key=1, value=1)), Cti(_t(20).replace(tzinfo=timezone.utc))]
    )


def test_a_stamped_input_keeps_its_stamping_across_batches_and_restarts() -> None:
    """Rows in ingestion time (stamped with their arrival column) arrive in three batches, the
    engine saved and restored after each: the stamps, and the edge whose end comes two
    batches after its start, are those of the in-memory run of the whole table (its start
    stamped at its arrival 2 s, its end at its end edge's arrival 7 s; own times ignored)."""
    import pyarrow as pa

    from tempo import IngestionTime
    from tempo.sources import ArrowSource

    def rows(*seqs: int) -> Any:
        kinds = {0: "start", 1: "start", 2: "end", 3: "start", 4: "end", 5: "end"}  # edges 0-4, 1-2, 3-5
        values = {0: 7, 1: 1, 2: 1, 3: 3, 4: 7, 5: 3}
        return pa.table(
            {
                "seq": pa.array(seqs, pa.int64()),
                "kind": pa.array([kinds[s] for s in seqs], pa.string()),
                "ts": pa.array([T0 + timedelta(hours=1) for _ in seqs], pa.timestamp("us", tz="UTC")),
                "end": pa.array([T0 + timedelta(hours=2) for _ in seqs], pa.timestamp("us", tz="UTC")),
                "arrived": pa.array([T0 + timedelta(seconds=2 + s) for s in seqs], pa.timestamp("us", tz="UTC")),
                "key": pa.array([1] * len(seqs), pa.int64()),
                "value": pa.array([values[s] for s in seqs], pa.int64()),
            }
        )

    def query(table: Any) -> Query:
        source = ArrowSource(table, Ev, start="ts", end="end", kind="kind", arrival="arrived", order="seq")
        stream = Stream.create("in", source, EventShape.EDGE, time=IngestionTime(advance_to_infinity_on_shutdown=True))
        return Query.build(stream.node)

    whole = InMemoryExecutor().run(Stream(query(rows(0, 1, 2, 3, 4, 5)).root))
    live_query = query(rows())
    mode = TimestampMode()
    mode.saw(aware=True)
    engine = LiveEngine(live_query, mode)
    released: list[Any] = []
    for batch in ([0, 1], [2, 3], [4, 5]):
        engine.push_rows(0, rows(*batch))
        engine.run()
        released += engine.take().items
        engine = LiveEngine.restore(live_query, engine.snapshot())
    engine.finish()
    released += engine.take().items
    assert released == whole.raw
    edge = [e for e in whole.events if e.payload.value == 7]
    assert [(e.start, e.end) for e in edge] == [
        (T0.replace(tzinfo=timezone.utc) + timedelta(seconds=2), T0.replace(tzinfo=timezone.utc) + timedelta(seconds=6))
    ]


@attrs.frozen
class Reading:
    v: float


@attrs.frozen
class Group:
    v: float
    n: int
    distinct: int


@attrs.frozen
class Both:
    a: float
    b: float


def test_nan_keys_and_distinct_values_stay_one_across_a_restore() -> None:
    """Timeline: a NaN reading at 1 s and 2 s, the engine saved and restored, a NaN reading at
    3 s, then the flush. Grouped by the reading (one NaN group, docs/semantics.md 7.4), the
    window [0, 60) holds all three in one group, one distinct value; joined on the reading
    with itself (lifetimes of 10 s), the NaN at 3 s meets the two before the restore and
    itself: 3·3 = 9 pairs. The engine's dicts and sets find the NaN key by identity, which
    a restore must keep."""
    import math

    items = [Point(_t(s), Reading(math.nan)) for s in (1, 2, 3)]
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True))

    def grouped() -> Stream[Group]:
        s = Stream.create("r", list(items), EventShape.POINT, settings)
        return (
            s.group_by(lambda r: r.v)
            .tumbling(timedelta(minutes=1))
            .aggregate(lambda k, w: Group(k, w.count(), w.count_distinct(lambda r: r.v)))
        )

    def joined() -> Stream[Both]:
        s = Stream.create("r", list(items), EventShape.POINT, settings).alter_event_duration(timedelta(seconds=10))
        return s.join(s, lambda a, b: a.v == b.v, lambda a, b: Both(a.v, b.v))

    for build, expected in ((grouped, "[Group(v=nan, n=3, distinct=1)]"), (joined, "9 pairs")):
        query = Query.build(build().node)
        mode = TimestampMode()
        engine = LiveEngine(query, mode)
        prepared = list(prepared_inputs(query, mode)[0])
        engine.push(0, prepared[:2])
        engine.run()
        released = engine.take().items
        engine = LiveEngine.restore(Query.build(build().node), engine.snapshot())
        engine.push(0, prepared[2:])
        engine.run()
        engine.finish()
        released += engine.take().items
        events = [i.payload for i in released if not isinstance(i, Cti)]
        assert (repr(events) if build is grouped else f"{len(events)} pairs") == expected


@attrs.frozen
class _Lagged:
    value: int
    back: int | None


def test_an_analytic_state_saved_before_previous_took_an_offset_restores_its_look_back() -> None:
    """State saved by a tempo whose ``previous`` kept one ``(start, values)`` per group is
    read as the one event back it holds: after the restore the next event sees it."""
    import pickle

    items = [Point(_t(1), Ev(key=1, value=10)), Cti(_t(2)), Point(_t(3), Ev(key=1, value=20)), Cti(_t(4))]
    stream = Stream.create("in", items, EventShape.POINT, payload_type=Ev)
    query = Query.build(stream.group_by(lambda e: e.key).analytic(lambda k, e, a: _Lagged(e.value, a.previous(lambda e: e.value))).node)
    mode = TimestampMode()
    prepared = list(prepared_inputs(query, mode)[0])
    engine = LiveEngine(query, mode)
    engine.push(0, prepared[:2])
    engine.run()
    assert [i.payload for i in engine.take().items if isinstance(i, Point)] == [_Lagged(10, None)]
    state = pickle.loads(engine.snapshot())
    (analytic,) = [s for s in state["operators"] if "last" in s]
    assert analytic["last"] == {(1,): [[(_ticks(_t(1)), 10)]]}
    analytic["last"] = {(1,): (_ticks(_t(1)), (10,))}  # the earlier layout
    restored = LiveEngine.restore(query, pickle.dumps(state))
    restored.push(0, prepared[2:])
    restored.run()
    assert [i.payload for i in restored.take().items if isinstance(i, Point)] == [_Lagged(20, 10)]


def _ticks(t: datetime) -> int:
    return (t - datetime(1970, 1, 1)) // timedelta(microseconds=1)
