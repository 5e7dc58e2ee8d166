"""The live query's second engine: batches computed in bulk by Spark (``engine="spark"`` /
``"auto"``), against the in-memory executor.

Each query is fed the same random rows cut into random files; files of at least
``BULK_ROWS`` rows go to Spark, smaller ones item by item on the driver, so the engines
take turns on one engine state. After every file the committed output must be exactly the
in-memory executor's release for the rows so far (``Result.raw``, item for item and in
release order), the rejections its rejections, and after the flush the whole run's, with
the inputs' metrics. Values are multiples of 1/16 so that sums are exact in any order.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tempo
from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventOrderingSettings,
    EventShape,
    InMemoryExecutor,
    IngestionTime,
    ProcessingTime,
    Stream,
)
from tempo.sources import ParquetSource
from tests.streaming.test_live_spark import land

pytestmark = pytest.mark.spark

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
BULK_ROWS = 6


@attrs.frozen
class Reading:
    device: int
    value: float | None
    site: str | None


@attrs.frozen
class Stat:
    device: int
    n: int
    total: float | None
    low: float | None
    mean: float | None


@attrs.frozen
class Overall:
    n: int
    high: float | None


def _rows(n: int, seed: int, ctis: bool, intervals: bool) -> list[dict[str, Any]]:
    """Readings of 3 devices, starts out of order by up to 40 s (some late for any CTI
    rule below), arrivals increasing; a few explicit CTI rows when ``ctis``."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        start = T0 + timedelta(seconds=i * 2 + rnd.choice([0, 0, 0, -3, -13, -40]), microseconds=rnd.choice([0, 0, 7]))
        kind = "cti" if ctis and rnd.random() < 0.06 else ("interval" if intervals else "point")
        rows.append(
            {
                "seq": i,
                "kind": kind,
                "ts": start,
                "te": start + timedelta(seconds=rnd.choice([1, 5, 30])),
                "arrived": T0 + timedelta(seconds=i * 2),
                "device": rnd.randrange(3),
                "value": None if rnd.random() < 0.1 else rnd.randrange(-50, 100) / 16,
                "site": rnd.choice(["a", "b", None]),
            }
        )
    return rows


def _edge_rows(n: int, seed: int, ctis: bool) -> list[dict[str, Any]]:
    """``_rows``' readings as start edges, about four in five ended by an end edge (the same
    start and payload, ending 1, 5 or 30 s later) 1 to 15 rows after it; some of those end
    before the CTI in force, and the others stay open until the input ends."""
    rnd = random.Random(seed)
    starts = _rows(n, seed, ctis, intervals=False)
    placed: list[tuple[float, dict[str, Any]]] = []
    for i, row in enumerate(starts):
        if row["kind"] == "cti":
            placed.append((i, row))
            continue
        placed.append((i, {**row, "kind": "start"}))
        if rnd.random() < 0.8:
            end = {**row, "kind": "end", "te": row["ts"] + timedelta(seconds=rnd.choice([1, 5, 30]))}
            placed.append((i + rnd.randrange(1, 16) + 0.5, end))
    rows = [row for _, row in sorted(placed, key=lambda p: p[0])][:n]
    for i, row in enumerate(rows):  # the input order, and arrivals increasing with it
        row["seq"], row["arrived"] = i, T0 + timedelta(seconds=i * 2)
    return rows


SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("kind", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("te", pa.timestamp("us", tz="UTC")),
        ("arrived", pa.timestamp("us", tz="UTC")),
        ("device", pa.int64()),
        ("value", pa.float64()),
        ("site", pa.string()),
    ]
)


def _write(folder: Path, index: int, rows: list[dict[str, Any]]) -> None:
    land(folder, index, lambda tmp: pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp))


@attrs.frozen
class Case:
    name: str
    frequency: int | timedelta
    delay: int
    policy: AdvanceTimePolicy
    shape: EventShape
    ctis: bool
    query: Callable[[Stream[Reading]], Stream[Any]]
    ordering: EventOrderingSettings | None = None
    """Ordering settings (arrival-time rules, by the rows' ``arrived``), if any."""
    time: IngestionTime | ProcessingTime | None = None
    """Stamped as read (by the rows' ``arrived``), if given: ``frequency``, ``delay`` and
    ``policy`` then play no part, and the input's CTI rows are refused (no CTI rule takes them)."""


def _by_device(s: Stream[Reading]) -> Stream[Stat]:
    return (
        s.where(lambda r: r.device != 2)
        .group_by(lambda r: r.device)
        .tumbling(timedelta(seconds=10))
        .aggregate(
            lambda k, w: Stat(
                device=k, n=w.count(), total=w.sum(lambda r: r.value), low=w.min(lambda r: r.value), mean=w.avg(lambda r: r.value)
            )
        )
    )


def _hopping(s: Stream[Reading]) -> Stream[Overall]:
    return (
        s.shift_event_time(timedelta(seconds=-3))
        .hopping(timedelta(seconds=20), timedelta(seconds=5))
        .aggregate(lambda w: Overall(n=w.count(), high=w.max(lambda r: r.value)))
        .where(lambda o: o.n > 1)
    )


@attrs.frozen
class Peak:
    device: int
    windows: int
    busiest: int | None


def _in_sequence(s: Stream[Reading]) -> Stream[Peak]:
    """Per-device counts over 10 s, then per device over 30 s the busiest of them: the second
    window runs on the engine, on the first one's results."""
    return (
        _by_device(s)
        .group_by(lambda c: c.device)
        .tumbling(timedelta(seconds=30))
        .aggregate(lambda k, w: Peak(device=k, windows=w.count(), busiest=w.max(lambda c: c.n)))
    )


CASES = [
    Case("count, drop", 4, 5, AdvanceTimePolicy.DROP, EventShape.POINT, False, _by_device),
    Case("count, adjust, cti rows", 3, 2, AdvanceTimePolicy.ADJUST, EventShape.POINT, True, _hopping),
    Case("period, drop, intervals", timedelta(seconds=15), 1, AdvanceTimePolicy.DROP, EventShape.INTERVAL, False, _by_device),
    Case("period, adjust, intervals, cti rows", timedelta(seconds=8), 0, AdvanceTimePolicy.ADJUST, EventShape.INTERVAL, True, _hopping),
    Case("count, drop, windows in sequence", 2, 4, AdvanceTimePolicy.DROP, EventShape.POINT, True, _in_sequence),
]


def _stream(case: Case, source: Any, flush: bool) -> Stream[Any]:
    """The case's query; ``flush``: a CTI at infinity when the input ends (the whole run)."""
    end = "te" if case.shape in (EventShape.INTERVAL, EventShape.EDGE) else None
    kind = "kind" if case.ctis or end else None
    arrival = {} if case.ordering is None and case.time is None else {"arrival": "arrived"}
    table_source = source(start="ts", end=end, kind=kind, order="seq", **arrival)
    if case.time is not None:
        time = attrs.evolve(case.time, advance_to_infinity_on_shutdown=flush)
        return case.query(Stream.create("readings", table_source, case.shape, payload_type=Reading, time=time))
    frequency = case.frequency if case.ordering is None else None  # ordering settings make the CTIs
    gen = AdvanceTimeGenerationSettings(frequency=frequency, delay=timedelta(seconds=case.delay), advance_to_infinity_on_shutdown=flush)
    settings = AdvanceTimeSettings(gen, policy=case.policy, ordering=case.ordering)
    return case.query(Stream.create("readings", table_source, case.shape, settings, payload_type=Reading))


def _items(table: Any, payload_type: type) -> list[Any]:
    from tempo.spark.streaming import released_items

    return released_items(table.drop_columns(["tempo_batch"]), payload_type)


BULK_ENGINES = ["spark", "vectorised"]
"""The bulk engines ``engine="auto"`` hands batches of at least ``BULK_ROWS`` rows to, here."""


def _executor(spark: Any, checkpoint: str, bulk: str, **kw: Any) -> Any:
    """A ``StreamingExecutor`` on ``engine="auto"`` sending batches of ``BULK_ROWS`` rows or
    more to ``bulk`` (Spark, or polars on the driver) and smaller ones item by item."""
    from tempo.spark.streaming import StreamingExecutor

    if bulk == "spark":
        return StreamingExecutor(spark, checkpoint, bulk_rows=kw.pop("bulk_rows", BULK_ROWS), vector_rows=10**9, **kw)
    pytest.importorskip("polars")
    return StreamingExecutor(spark, checkpoint, vector_rows=kw.pop("bulk_rows", BULK_ROWS), **kw)


def in_lockstep(
    tmp_path: Path,
    case: Case,
    seed: int,
    files: int,
    start: Callable[[Stream[Any], Any], Any],
    same: Callable[[list[Any]], Any] = list,
) -> Any:
    """The case's query started by ``start(query, sink)`` over random rows cut into
    ``files`` + 2 random files: after each file its committed output must be the in-memory
    executor's release for the rows so far, after the flush the whole run's, with its
    rejections and metrics (output items compared as ``same`` makes them). The live query."""
    from tempo.spark.streaming import ParquetSink, read_committed

    rnd = random.Random(seed)
    rows = (
        _edge_rows(90, seed, case.ctis) if case.shape is EventShape.EDGE else _rows(90, seed, case.ctis, case.shape is EventShape.INTERVAL)
    )
    cuts = sorted({0, 1, len(rows)} | {rnd.randrange(2, len(rows)) for _ in range(files)})
    inputs, out = tmp_path / "in", tmp_path / "out"
    _write(inputs, 0, rows[:1])
    parquet = lambda **kw: ParquetSource(str(inputs), Reading, **kw)  # noqa: E731
    query = _stream(case, parquet, flush=True)
    live = start(query, ParquetSink(str(out)))
    try:
        for index, (a, b) in enumerate(zip(cuts[1:], cuts[2:]), start=1):
            _write(inputs, index, rows[a:b])
            live.process_all_available()
            prefix = pa.Table.from_pylist(rows[:b], schema=SCHEMA)
            arrow = lambda **kw: tempo.sources.ArrowSource(prefix, Reading, **kw)  # noqa: E731
            expected = InMemoryExecutor().run(_stream(case, arrow, flush=False))
            payload = query.payload_type
            assert same(_items(read_committed(str(out)), payload)) == same(expected.raw), f"after {b} rows"
        live.flush()
    finally:
        live.stop()
    whole_source = lambda **kw: tempo.sources.ArrowSource(pa.Table.from_pylist(rows, schema=SCHEMA), Reading, **kw)  # noqa: E731
    whole = InMemoryExecutor().run(_stream(case, whole_source, flush=True))
    assert same(_items(read_committed(str(out)), query.payload_type)) == same(whole.raw)
    rejected = read_committed(str(out), rejections=True).drop_columns(["tempo_batch"])
    assert (len(whole.rejected) > 0 or case.time is not None) and rejected.equals(whole.rejections_table())  # stamps are never late
    assert live.metrics["readings"] == attrs.evolve(whole.metrics["readings"], watermark_delays=[])
    return live


SLOW_ON_SPARK = {"count, adjust, cti rows", "period, drop, intervals"}
"""Cases the default suite runs on the vectorised bulk engine only (``--run-slow``: on Spark's
too), within CI's time budget; Spark's bulk engine runs the other cases."""


@pytest.mark.parametrize(
    ("case", "bulk"),
    [
        pytest.param(c, b, marks=pytest.mark.slow if b == "spark" and c.name in SLOW_ON_SPARK else (), id=f"{c.name}-{b}")
        for c in CASES
        for b in BULK_ENGINES
    ],
)
def test_batches_in_bulk_and_item_by_item_give_the_in_memory_release(spark_session: Any, tmp_path: Path, case: Case, bulk: str) -> None:
    executor = _executor(spark_session, str(tmp_path / "ck"), bulk)
    live = in_lockstep(tmp_path, case, CASES.index(case), 8, executor.start)
    engines = [p.engine for p in live.progress if not p.final]
    assert bulk in engines and "driver" in engines and set(engines) == {bulk, "driver"}, engines  # the engines took turns


def test_the_bulk_engines_refuse_a_query_they_cannot_compute_in_bulk(spark_session: Any, tmp_path: Path) -> None:
    from tempo.errors import UnsupportedError
    from tempo.spark.streaming import ParquetSink, StreamingExecutor

    inputs = tmp_path / "in"
    _write(inputs, 0, _rows(3, 0, False, False))
    readings = Stream.create(
        "readings",
        ParquetSource(str(inputs), Reading, start="ts", order="seq"),
        EventShape.POINT,
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(4)),
        payload_type=Reading,
    )
    for engine in ("spark", "vectorised"):
        with pytest.raises(UnsupportedError, match=f"engine='{engine}'.*cannot be computed in bulk: only a window aggregate"):
            StreamingExecutor(spark_session, str(tmp_path / "ck"), engine=engine).start(
                readings.where(lambda r: r.device > 0), ParquetSink(str(tmp_path / "out"))
            )
    with pytest.raises(ValueError, match="engine= is one of"):
        StreamingExecutor(spark_session, str(tmp_path / "ck"), engine="gpu")


def _with_a_long_event(spark: Any, tmp_path: Path, bulk: str, lasting: timedelta, flush: bool) -> tuple[list[dict[str, Any]], Case, Any]:
    """Intervals over 5 s windows in four files, the 26th lasting ``lasting`` from 51 s (the
    latest start so far: not late), run live on ``bulk``: the rows, the case and the query
    (stopped; flushed at the end when ``flush``)."""
    from tempo.spark.streaming import ParquetSink, StreamingExecutor

    rows = _rows(40, 21, ctis=False, intervals=True)
    rows[25]["ts"] = T0 + timedelta(seconds=51)
    rows[25]["te"] = rows[25]["ts"] + lasting
    inputs, out = tmp_path / "in", tmp_path / "out"
    _write(inputs, 0, rows[:10])
    case = Case("long", 3, 1, AdvanceTimePolicy.DROP, EventShape.INTERVAL, False, _short_windows)
    parquet = lambda **kw: ParquetSource(str(inputs), Reading, **kw)  # noqa: E731
    live = StreamingExecutor(spark, str(tmp_path / "ck"), engine=bulk).start(_stream(case, parquet, flush), ParquetSink(str(out)))
    try:
        live.process_all_available()
        for index, (a, b) in enumerate([(10, 20), (20, 30), (30, 40)], start=1):
            _write(inputs, index, rows[a:b])
            live.process_all_available()
        if flush:
            live.flush()
    finally:
        live.stop()
    return rows, case, live


@pytest.mark.parametrize("bulk", BULK_ENGINES)
def test_a_batch_with_an_event_spanning_many_windows_goes_item_by_item(spark_session: Any, tmp_path: Path, bulk: str) -> None:
    """Intervals over 5 s windows, one of them 10 minutes long (120 windows): the window
    operator keeps such an event aside rather than in each window, which a bulk batch does
    not do, so its batch runs item by item; the batches around it run in bulk; the output
    is the in-memory executor's."""
    from tempo.spark.streaming import read_committed

    rows, case, live = _with_a_long_event(spark_session, tmp_path, bulk, timedelta(minutes=10), True)
    whole_source = lambda **kw: tempo.sources.ArrowSource(pa.Table.from_pylist(rows, schema=SCHEMA), Reading, **kw)  # noqa: E731
    assert _items(read_committed(str(tmp_path / "out")), Stat) == InMemoryExecutor().run(_stream(case, whole_source, True)).raw
    assert [p.engine for p in live.progress if not p.final] == [bulk, bulk, "driver", bulk]


@pytest.mark.parametrize("bulk", BULK_ENGINES)
def test_a_batch_with_an_event_spanning_billions_of_windows_goes_item_by_item(spark_session: Any, tmp_path: Path, bulk: str) -> None:
    """As above, the long interval lasting 1,000 years (6.3 billion 5 s windows, more than
    any array holds): both engines send its batch item by item without listing its windows
    (``tempo.lowering.batches.window_partials``). No flush (its windows up to infinity are
    more than any run computes): the output is what the driver engine releases item by item
    up to the last CTI, whose windows the long event is in."""
    from tempo.plan.query import Query
    from tempo.runtime.ingress import TimestampMode
    from tempo.runtime.live import LiveEngine
    from tempo.spark.streaming import read_committed

    rows, case, live = _with_a_long_event(spark_session, tmp_path, bulk, timedelta(days=365_250), False)
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    reference = LiveEngine(
        Query.build(_stream(case, lambda **kw: tempo.sources.ArrowSource(table, Reading, **kw), False).node), TimestampMode()
    )
    reference.push_rows(0, table)
    reference.run()
    expected = reference.take().items
    long_windows = [
        i
        for i in expected
        if getattr(i, "payload", None) is not None and i.payload.device == rows[25]["device"] and i.start >= T0 + timedelta(seconds=50)
    ]
    assert len(long_windows) == 5  # its device's windows from its start up to the last CTI
    assert _items(read_committed(str(tmp_path / "out")), Stat) == expected
    assert [p.engine for p in live.progress if not p.final] == [bulk, bulk, "driver", bulk]


def _short_windows(s: Stream[Reading]) -> Stream[Stat]:
    return (
        s.group_by(lambda r: r.device)
        .tumbling(timedelta(seconds=5))
        .aggregate(
            lambda k, w: Stat(
                device=k, n=w.count(), total=w.sum(lambda r: r.value), low=w.min(lambda r: r.value), mean=w.avg(lambda r: r.value)
            )
        )
    )


def _union_of_two(a: Any, b: Any, flush: bool) -> Stream[Stat]:
    gen = AdvanceTimeGenerationSettings(frequency=3, delay=timedelta(seconds=2), advance_to_infinity_on_shutdown=flush)
    settings = AdvanceTimeSettings(gen, policy=AdvanceTimePolicy.ADJUST)
    first = Stream.create("a", a, EventShape.POINT, settings, payload_type=Reading)
    second = Stream.create("b", b, EventShape.POINT, settings, payload_type=Reading)
    return _by_device(first.union(second.shift_event_time(timedelta(seconds=1))))


def _join_of_two(a: Any, b: Any, flush: bool, imports: bool = False) -> Stream[Stat]:
    gen = AdvanceTimeGenerationSettings(frequency=3, delay=timedelta(seconds=2), advance_to_infinity_on_shutdown=flush)
    settings = AdvanceTimeSettings(gen, policy=AdvanceTimePolicy.ADJUST)
    first = Stream.create("a", a, EventShape.POINT, settings, payload_type=Reading)
    if imports:  # b's CTIs are a's, as they reach b in the merged arrival order
        settings = AdvanceTimeSettings(import_=AdvanceTimeImportSettings("a"), policy=AdvanceTimePolicy.DROP)
    second = Stream.create("b", b, EventShape.POINT, settings, payload_type=Reading)
    return _by_device(
        first.join(
            second.alter_event_duration(timedelta(seconds=9)),
            lambda x, y: x.device == y.device,
            lambda x, y: Reading(device=x.device, value=x.value, site=y.site),
        )
    )


def _join_importing(a: Any, b: Any, flush: bool) -> Stream[Stat]:
    return _join_of_two(a, b, flush, imports=True)


@pytest.mark.parametrize(
    ("combine", "bulk"),
    [
        # Spark's bulk engine: slow (CI time), the vectorised one the same mechanism by default.
        pytest.param(c, b, marks=pytest.mark.slow if b == "spark" else (), id=f"{name}-{b}")
        for c, name in [(_union_of_two, "union"), (_join_of_two, "join"), (_join_importing, "join-importing")]
        for b in BULK_ENGINES
    ],
)
def test_two_inputs_in_bulk_at_the_arrival_frontier(
    spark_session: Any, tmp_path: Path, combine: Callable[[Any, Any, bool], Stream[Stat]], bulk: str
) -> None:
    """Two inputs with arrival times, merged by a union (or joined) into a window. Each run of the query
    (``availableNow``, restarted on its checkpoint) takes a file of each input, which ends
    with a heartbeat at the clock: item by item would process the batch whole but hold
    input b's heartbeat (input a may still deliver an item at that time), so the batch goes
    in bulk and the heartbeat stays held. A first run with a's file alone holds a's points
    at the frontier, so the next batch goes item by item. After every run the committed
    output is what item by item gives (the in-memory release of the rows up to the
    frontier), and at the end the whole run's."""
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed
    from tempo.spark.streaming.checkpoint import BatchLog
    from tempo.spark.streaming.executor import JOIN_BULK_FACTOR

    rnd = random.Random(9)
    rows = _rows(120, 9, ctis=True, intervals=False)
    for row in rows:
        row["kind"] = "point" if row["kind"] == "cti" and rnd.random() < 0.5 else row["kind"]
    split: list[list[list[dict[str, Any]]]] = [[[], []] for _ in range(6)]
    for i, row in enumerate(rows):
        row["seq"] = 10 * i
        split[i * 6 // len(rows)][rnd.randrange(2)].append(row)
    for step, (a_rows, b_rows) in enumerate(split):  # both inputs' clocks at the step's end
        last = max(a_rows + b_rows, key=lambda r: r["seq"])
        clock = last["arrived"] + timedelta(seconds=1)
        for part in (a_rows, b_rows):
            part.append(dict(last, seq=last["seq"] + 1, kind="heartbeat", arrived=clock, ts=clock))
    folders = tmp_path / "a", tmp_path / "b"
    out = tmp_path / "out"

    def source(folder: Any, **kw: Any) -> Any:
        return ParquetSource(str(folder), Reading, **kw) if isinstance(folder, Path) else tempo.sources.ArrowSource(folder, Reading, **kw)

    def query(a: Any, b: Any, flush: bool) -> Stream[Stat]:
        return combine(
            source(a, start="ts", kind="kind", order="seq", arrival="arrived"),
            source(b, start="ts", kind="kind", order="seq", arrival="arrived"),
            flush,
        )

    live_query = query(*folders, flush=True)
    # With a join, auto goes to Spark from JOIN_BULK_FACTOR times bulk_rows.
    bulk_rows = BULK_ROWS if combine is _union_of_two else BULK_ROWS // JOIN_BULK_FACTOR
    engines = []
    for step in range(len(split)):
        for index, folder in enumerate(folders):
            if step or index == 0:  # b's first file comes with a's second
                _write(folder, step, split[step][index])
        if step == 0:  # a live Parquet input takes its columns' types from a first file
            folders[1].mkdir()
            with pytest.raises(tempo.errors.InputSchemaError, match="holds no file yet"):
                StreamingExecutor(spark_session, str(tmp_path / "ck")).start(live_query, ParquetSink(str(out)))
            _write(folders[1], 0, [])
        if step == 1:
            _write(folders[1], 100, split[0][1])
        executor = _executor(spark_session, str(tmp_path / "ck"), bulk, trigger={"availableNow": True}, bulk_rows=bulk_rows)
        live = executor.start(live_query, ParquetSink(str(out)))
        live.await_termination()
        engines += [p.engine for p in live.progress]
        # Item by item after the same files: what the engine released is the run's output.
        a_rows = [r for s in split[: step + 1] for r in s[0]]
        b_rows = [r for s in split[: step + 1] for r in s[1]] if step else []
        from tempo.runtime.live import LiveEngine
        from tempo.runtime.ingress import TimestampMode
        from tempo.plan.query import Query

        reference = LiveEngine(
            Query.build(query(pa.Table.from_pylist(a_rows, schema=SCHEMA), pa.Table.from_pylist(b_rows, schema=SCHEMA), False).node),
            TimestampMode(),
        )
        reference.push_rows(0, pa.Table.from_pylist(a_rows, schema=SCHEMA))
        if b_rows:
            reference.push_rows(1, pa.Table.from_pylist(b_rows, schema=SCHEMA))
        reference.run()
        assert _items(read_committed(str(out)), Stat) == [i for i in reference.take().items], f"after step {step}"
        # The engine state the run saved counts the event ids taken as item by item does (a
        # union's second input takes one per event, whatever the where after it drops).
        log = BatchLog(str(tmp_path / "ck"))
        saved = LiveEngine.restore(Query.build(live_query.node), log.state(log.last_committed()))
        assert repr(saved.build.ids) == repr(reference.build.ids), f"after step {step}"
    live = StreamingExecutor(spark_session, str(tmp_path / "ck")).start(live_query, ParquetSink(str(out)))
    live.flush()
    whole = InMemoryExecutor().run(
        query(*(pa.Table.from_pylist([r for s in split for r in s[i]], schema=SCHEMA) for i in range(2)), flush=True)
    )
    assert _items(read_committed(str(out)), Stat) == whole.raw
    assert len(whole.rejected) > 0
    assert engines[:2] == ["driver", "driver"] and engines.count(bulk) >= 3 and set(engines) == {bulk, "driver"}, engines


ORDERED_BY = {
    "a timestamp (the arrival column)": dict(start="ts", arrival="arrived"),
    "an integer time column, with time_origin": dict(start="tick", order="tick", time_origin=T0, time_unit="us"),
}


@pytest.mark.parametrize("bulk", BULK_ENGINES)
@pytest.mark.parametrize("ordered_by", list(ORDERED_BY), ids=["timestamp", "integer-time"])
def test_the_engines_take_turns_on_any_order_column(spark_session: Any, tmp_path: Path, bulk: str, ordered_by: str) -> None:
    """The input's order is a timestamp column (``order`` defaults to ``arrival``), or an
    integer time column counted from ``time_origin``: the engines keep its last value alike
    (``order_value``), so small batches item by item and large ones in bulk follow each
    other, and the output is the in-memory executor's."""
    from tempo.spark.streaming import ParquetSink, read_committed

    rows = _rows(60, 31, ctis=False, intervals=False)
    for row in rows:
        row["tick"] = (row["arrived"] - T0) // timedelta(microseconds=1) + 7
    schema = SCHEMA.append(pa.field("tick", pa.int64()))
    gen = AdvanceTimeGenerationSettings(frequency=4, delay=timedelta(seconds=5), advance_to_infinity_on_shutdown=True)

    def query(source: Any) -> Stream[Stat]:
        readings = Stream.create(
            "readings",
            source(**ORDERED_BY[ordered_by]),
            EventShape.POINT,
            AdvanceTimeSettings(gen, policy=AdvanceTimePolicy.DROP),
            payload_type=Reading,
        )
        return _by_device(readings)

    inputs, out = tmp_path / "in", tmp_path / "out"
    write = lambda index, part: land(inputs, index, lambda tmp: pq.write_table(pa.Table.from_pylist(part, schema=schema), tmp))  # noqa: E731
    write(0, rows[:2])
    live = _executor(spark_session, str(tmp_path / "ck"), bulk).start(
        query(lambda **kw: ParquetSource(str(inputs), Reading, **kw)), ParquetSink(str(out))
    )
    try:
        live.process_all_available()
        for index, (a, b) in enumerate([(2, 4), (4, 20), (20, 22), (22, 40), (40, 60)], start=1):
            write(index, rows[a:b])
            live.process_all_available()
        live.flush()
    finally:
        live.stop()
    whole = InMemoryExecutor().run(query(lambda **kw: tempo.sources.ArrowSource(pa.Table.from_pylist(rows, schema=schema), Reading, **kw)))
    assert _items(read_committed(str(out)), Stat) == whole.raw
    assert [p.engine for p in live.progress if not p.final] == ["driver", "driver", bulk, "driver", bulk, bulk]


@attrs.frozen
class ByValue:
    value: float | None
    n: int
    devices: int | None


@pytest.mark.parametrize("bulk", BULK_ENGINES)
def test_float_keys_are_keyed_alike_by_every_engine(spark_session: Any, tmp_path: Path, bulk: str) -> None:
    """Grouped by a float field holding NaN, -0.0 and 0.0 (docs/semantics.md 7.4: one NaN
    group, -0.0 with 0.0 shown as 0.0), in batches on ``bulk`` and item by item by turns:
    within the first 10 s, values NaN, -0.0, NaN, 0.0, 1.5, NaN, -0.0, 0.0 give NaN (3
    events), 0.0 (4) and 1.5 (1); the output is the in-memory executor's, item for item."""
    from tempo.spark.streaming import ParquetSink, read_committed

    values = [math.nan, -0.0, math.nan, 0.0, 1.5, math.nan, -0.0, 0.0, 2.0, math.nan, -0.0]
    rows = [
        {
            "seq": i,
            "kind": "point",
            "ts": T0 + timedelta(seconds=i if i < 8 else 10 + i),
            "te": None,
            "arrived": T0 + timedelta(seconds=i),
            "device": i % 3,
            "value": v,
            "site": None,
        }
        for i, v in enumerate(values)
    ]

    def query(source: Any) -> Stream[ByValue]:
        gen = AdvanceTimeSettings(AdvanceTimeGenerationSettings(3, advance_to_infinity_on_shutdown=True))
        return (
            Stream.create("readings", source(start="ts", order="seq"), EventShape.POINT, gen, payload_type=Reading)
            .group_by(lambda r: r.value)
            .tumbling(timedelta(seconds=10))
            .aggregate(lambda k, w: ByValue(value=k, n=w.count(), devices=w.sum(lambda r: r.device)))
        )

    inputs, out = tmp_path / "in", tmp_path / "out"
    _write(inputs, 0, rows[:7])  # in bulk
    live = _executor(spark_session, str(tmp_path / "ck"), bulk).start(
        query(lambda **kw: ParquetSource(str(inputs), Reading, **kw)), ParquetSink(str(out))
    )
    try:
        live.process_all_available()
        _write(inputs, 1, rows[7:9])  # item by item
        live.process_all_available()
        _write(inputs, 2, rows[9:])
        live.process_all_available()
        live.flush()
    finally:
        live.stop()
    whole = InMemoryExecutor().run(query(lambda **kw: tempo.sources.ArrowSource(pa.Table.from_pylist(rows, schema=SCHEMA), Reading, **kw)))
    got = _items(read_committed(str(out)), ByValue)
    assert repr(got) == repr(whole.raw)
    first = sorted((repr(e.payload.value), e.payload.n) for e in whole.events if e.start == T0)
    assert first == [("0.0", 4), ("1.5", 1), ("nan", 3)]
    assert [p.engine for p in live.progress if not p.final][:2] == [bulk, "driver"]
