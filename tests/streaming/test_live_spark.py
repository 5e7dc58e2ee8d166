"""Live queries on Spark Structured Streaming (``tempo.spark.streaming``), against the
in-memory executor.

The inputs are directories that receive Parquet files one at a time; after each file the
query processes what is there, and what its sink has committed so far must be exactly what
the in-memory executor releases for the rows written so far (``Result.raw``, item for item
and in release order); after ``flush()`` it must be the whole run's. Restarts on the same
checkpoint continue where the last committed batch ended; a changed query is refused.
"""

from __future__ import annotations

import os
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
    EventShape,
    InMemoryExecutor,
    Stream,
)
from tempo.sources import ParquetSource

pytestmark = pytest.mark.spark

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


@attrs.frozen
class Reading:
    device: int
    value: float


@attrs.frozen
class Count:
    device: int
    n: int
    total: float


@attrs.frozen
class Rate:
    device: int
    rate: float


def _rows(n: int, seed: int, arrival_offset: float = 0.0) -> list[dict[str, Any]]:
    """Readings of 3 devices, starts a little out of order, arrivals increasing."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        start = T0 + timedelta(seconds=i * 2 + rnd.choice([0, 0, 0, -3, -13]))
        rows.append(
            {
                "seq": i,
                "ts": start,
                "arrived": T0 + timedelta(seconds=i * 2 + arrival_offset),
                "device": rnd.randrange(3),
                "value": float(rnd.randrange(100)),
            }
        )
    return rows


def land(folder: Path, index: int, write: Callable[[Path], None], suffix: str = ".parquet") -> None:
    """File ``index`` of ``folder``, written by ``write`` aside and moved in whole (Spark must
    never see half a file), with a modification time after the previous file's (Spark
    orders files by it)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".{folder.name}-{index}.tmp"
    write(tmp)
    stamp = 1_700_000_000 + index
    os.utime(tmp, (stamp, stamp))
    os.replace(tmp, folder / f"part-{index:05d}{suffix}")


READINGS = pa.schema(
    [
        ("seq", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("arrived", pa.timestamp("us", tz="UTC")),
        ("device", pa.int64()),
        ("value", pa.float64()),
    ]
)


def _write(folder: Path, index: int, rows: list[dict[str, Any]]) -> None:
    """One Parquet file of readings."""
    land(folder, index, lambda tmp: pq.write_table(pa.Table.from_pylist(rows, schema=READINGS), tmp))


def _settings(flush: bool) -> AdvanceTimeSettings:
    return AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(frequency=4, delay=timedelta(seconds=5), advance_to_infinity_on_shutdown=flush),
        policy=AdvanceTimePolicy.ADJUST,
    )


def _counts(source: Any, flush: bool) -> Stream[Count]:
    readings = Stream.create("readings", source, EventShape.POINT, _settings(flush), payload_type=Reading)
    return (
        readings.group_by(lambda r: r.device)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda k, w: Count(device=k, n=w.count(), total=w.sum(lambda r: r.value)))
    )


def _counts_per_half_minute(source: Any, flush: bool) -> Stream[Count]:
    """``_counts``, then per device its counts of 30 s added up: two windows in sequence, two
    keyed nodes on the cluster engine (its hops)."""
    return (
        _counts(source, flush)
        .where(lambda c: c.n > 0)
        .group_by(lambda c: c.device)
        .tumbling(timedelta(seconds=30))
        .aggregate(lambda k, w: Count(device=k, n=w.sum(lambda c: c.n), total=w.sum(lambda c: c.total)))
    )


def _outer_counts(source: Any, flush: bool) -> Stream[Count]:
    """Each reading with the readings of its device above 50 in the 5 s before it (a left
    outer join, -1.0 where there is none), counted per device in 10 s windows: on the
    cluster engine the join and its anti-join in one keyed operator, the window their next
    hop."""
    readings = Stream.create("readings", source, EventShape.POINT, _settings(flush), payload_type=Reading)
    recent = readings.where(lambda r: r.value > 50).alter_event_duration(timedelta(seconds=5))
    joined = readings.left_outer_join(recent, lambda a, b: a.device == b.device, lambda a, b: Reading(a.device, b.value), Reading(-1, -1.0))
    return (
        joined.group_by(lambda r: r.device)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda k, w: Count(device=k, n=w.count(), total=w.sum(lambda r: r.value)))
    )


def _counts_beside(source: Any, flush: bool) -> Stream[Count]:
    """Each reading with the count of its device's readings in its 10 s window (the count's
    ``n``, the reading's value as ``total``): the readings go around the window into the
    join; on the cluster engine the window keyed, the join its next hop."""
    readings = Stream.create("readings", source, EventShape.POINT, _settings(flush), payload_type=Reading)
    counts = (
        readings.group_by(lambda r: r.device)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda k, w: Count(device=k, n=w.count(), total=w.sum(lambda r: r.value)))
    )
    return counts.join(readings, lambda c, r: c.device == r.device, lambda c, r: Count(device=r.device, n=c.n, total=r.value))


@attrs.frozen
class Previous:
    device: int
    value: float
    previous: float | None
    total: float


def _sessions(source: Any, flush: bool) -> Stream[Count]:
    readings = Stream.create("readings", source, EventShape.POINT, _settings(flush), payload_type=Reading)
    return (
        readings.group_by(lambda r: r.device)
        .session(timedelta(seconds=5), max_duration=timedelta(seconds=20))
        .aggregate(lambda k, w: Count(device=k, n=w.count(), total=w.sum(lambda r: r.value)))
    )


def _count_windows(source: Any, flush: bool) -> Stream[Count]:
    readings = Stream.create("readings", source, EventShape.POINT, _settings(flush), payload_type=Reading)
    return (
        readings.group_by(lambda r: r.device)
        .count_window(3, slide=2)
        .aggregate(lambda k, w: Count(device=k, n=w.count(), total=w.sum(lambda r: r.value)))
    )


def _analytics(source: Any, flush: bool) -> Stream[Previous]:
    readings = Stream.create("readings", source, EventShape.POINT, _settings(flush), payload_type=Reading)
    return readings.group_by(lambda r: r.device).analytic(
        lambda k, r, a: Previous(k, r.value, a.previous(lambda r: r.value, timedelta(seconds=8)), a.sum(lambda r: r.value))
    )


def _ingested(source: Any, flush: bool) -> Stream[Count]:
    """Stamped with the arrival column (ingestion time), a CTI every 4 s of stamps."""
    readings = Stream.create(
        "readings",
        source,
        EventShape.POINT,
        payload_type=Reading,
        time=tempo.IngestionTime(cti_every=timedelta(seconds=4), advance_to_infinity_on_shutdown=flush),
    )
    return (
        readings.group_by(lambda r: r.device)
        .session(timedelta(seconds=5))
        .aggregate(lambda k, w: Count(device=k, n=w.count(), total=w.sum(lambda r: r.value)))
    )


QUERIES: dict[str, tuple[Callable[[Any, bool], Stream[Any]], type]] = {
    "ingestion_time": (_ingested, Count),
    "tumbling": (_counts, Count),
    "session": (_sessions, Count),
    "count_window": (_count_windows, Count),
    "analytic": (_analytics, Previous),
}


def _flushed_against_memory(live: Any, rows: list[dict[str, Any]]) -> Any:
    """Process what the inputs hold, flush and stop ``live``: the in-memory run of the counts
    over ``rows``, flushed, to compare with."""
    try:
        live.process_all_available()
        live.flush()
    finally:
        live.stop()
    return InMemoryExecutor().run(
        _counts(tempo.sources.ArrowSource(pa.Table.from_pylist(rows), Reading, start="ts", order="seq"), flush=True)
    )


def _items(table: Any, payload_type: type) -> list[Any]:
    from tempo.spark.streaming import released_items

    return released_items(table.drop_columns(["tempo_batch"]), payload_type)


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_committed_output_after_every_file_is_the_in_memory_release(spark_session: Any, tmp_path: Path, name: str) -> None:
    """Tumbling windows (which may run in bulk), and the window kinds cut by the events and the
    analytics in time order (item by item on the driver)."""
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed

    build, payload = QUERIES[name]

    rows = _rows(60, seed=1)
    cuts = [0, 1, 2, 9, 10, 30, 31, 60]  # files of 1, 1, 7, 1, 20, 1 and 29 rows
    inputs, out, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    _write(inputs, 0, rows[:1])  # the schema comes from the files there at the start
    live = StreamingExecutor(spark_session, str(checkpoint)).start(
        build(ParquetSource(str(inputs), Reading, start="ts", arrival="arrived", order="seq"), flush=True), ParquetSink(str(out))
    )
    try:
        for index, (a, b) in enumerate(zip(cuts[1:], cuts[2:]), start=1):
            _write(inputs, index, rows[a:b])
            live.process_all_available()
            prefix = pa.Table.from_pylist(rows[:b])
            expected = InMemoryExecutor().run(
                build(tempo.sources.ArrowSource(prefix, Reading, start="ts", arrival="arrived", order="seq"), flush=False)
            )
            assert _items(read_committed(str(out)), payload) == expected.raw, f"after {b} rows"
        live.flush()
    finally:
        live.stop()
    whole = InMemoryExecutor().run(
        build(tempo.sources.ArrowSource(pa.Table.from_pylist(rows), Reading, start="ts", arrival="arrived", order="seq"), flush=True)
    )
    assert _items(read_committed(str(out)), payload) == whole.raw
    rejected = read_committed(str(out), rejections=True).drop_columns(["tempo_batch"])
    # Late readings are adjusted in event time; stamped with arrivals, nothing is late.
    assert (len(whole.rejected) > 0) == (name != "ingestion_time") and rejected.equals(whole.rejections_table())
    assert live.progress[-1].final and [p.batch for p in live.progress] == list(range(len(live.progress)))
    assert sum(p.rows_in.get("readings", 0) for p in live.progress) == 60
    # Each batch's time, phase by phase: what it read, the engine, the sink, the state.
    for p in live.progress:
        phases = list(p.phases)
        assert phases == (["engine", "sink", "state"] if p.final else ["read", "engine", "sink", "state"]), p
        assert 0 <= sum(p.phases.values()) <= p.seconds, p
        assert f"engine {p.phases['engine'] * 1000:.0f}" in p.summary()


def test_a_restart_continues_after_the_last_committed_batch(spark_session: Any, tmp_path: Path) -> None:
    """Stop after two files, start a new executor on the same checkpoint (as a new process
    would), write the rest: the output is the whole run's, nothing repeated or lost."""
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed

    rows = _rows(40, seed=2)
    inputs, out, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    source = ParquetSource(str(inputs), Reading, start="ts", order="seq")
    _write(inputs, 0, rows[:15])
    first = StreamingExecutor(spark_session, str(checkpoint)).start(_counts(source, flush=True), ParquetSink(str(out)))
    _write(inputs, 1, rows[15:20])
    first.process_all_available()
    first.stop()
    committed = first.last_committed_batch
    _write(inputs, 2, rows[20:33])  # arrives while the query is down
    second = StreamingExecutor(spark_session, str(checkpoint)).start(_counts(source, flush=True), ParquetSink(str(out)))
    try:
        _write(inputs, 3, rows[33:])
        second.process_all_available()
        second.flush()
    finally:
        second.stop()
    assert committed is not None and second.progress[0].batch == committed + 1
    whole = InMemoryExecutor().run(
        _counts(tempo.sources.ArrowSource(pa.Table.from_pylist(rows), Reading, start="ts", order="seq"), flush=True)
    )
    assert _items(read_committed(str(out)), Count) == whole.raw
    assert second.metrics["readings"].received == 40
    from tempo.spark.streaming import read_progress

    records = read_progress(str(checkpoint))
    assert [r["batch"] for r in records] == list(range(len(records))) and records[-1]["final"]
    assert records[-1]["metrics"]["readings"]["received"] == 40
    assert records[-1]["metrics"]["readings"]["dropped"] + records[-1]["metrics"]["readings"]["adjusted"] == len(whole.rejected)


@pytest.mark.parametrize("engine", ["auto", pytest.param("cluster", marks=pytest.mark.slow)])  # one function clears both queries' logs
def test_a_start_after_a_kill_while_spark_wrote_its_first_offsets_goes_on(spark_session: Any, tmp_path: Path, engine: str) -> None:
    """A process killed while Spark wrote the offsets of its first batch leaves the entry's
    hidden temporary file (``.0.<uuid>.tmp``, written aside, then renamed), and Spark refuses
    to start from batch 0 with any file in its offsets folder: the next start clears such
    files (the checkpoint's lock keeps other writers away) and runs the whole input."""
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed

    rows = _rows(30, seed=5)
    inputs, out, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    source = ParquetSource(str(inputs), Reading, start="ts", order="seq")
    _write(inputs, 0, rows)
    spark_logs = [checkpoint / "spark"] + ([checkpoint / "cluster" / "work" / "spark"] if engine == "cluster" else [])
    for log in spark_logs:
        (log / "offsets").mkdir(parents=True)
        (log / "offsets" / ".0.5d1c0c7e-6f0e-4a57-9d41-2b6f0c1e9a11.tmp").write_text('v1\n{"batchWatermarkMs":0,')  # cut short
        (log / "offsets" / "..0.5d1c0c7e-6f0e-4a57-9d41-2b6f0c1e9a11.tmp.crc").write_bytes(b"crc")
    live = StreamingExecutor(spark_session, str(checkpoint), engine=engine).start(_counts(source, flush=True), ParquetSink(str(out)))
    whole = _flushed_against_memory(live, rows)
    from tests.streaming.test_cluster import groups_as_sets  # the cluster engine's windows give their groups by key

    compared = groups_as_sets if engine == "cluster" else list
    assert compared(_items(read_committed(str(out)), Count)) == compared(whole.raw)
    for log in spark_logs:
        assert not [p.name for p in (log / "offsets").iterdir() if p.name.endswith(".tmp")]


def test_relative_paths_are_read_where_the_script_runs(spark_session: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A script that moved to another directory after Spark started (the JVM keeps the one
    it started in) gives tempo relative paths: the input, the checkpoint and the output are
    all the ones under the script's directory, for a live query and a batch run alike, and
    nothing lands where the JVM started."""
    from tempo.spark import SparkExecutor
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed

    jvm_dir = Path.cwd()
    before = set(os.listdir(jvm_dir))
    monkeypatch.chdir(tmp_path)
    rows = _rows(20, seed=5)
    _write(Path("in"), 0, rows[:12])
    source = ParquetSource("in", Reading, start="ts", order="seq")
    live = StreamingExecutor(spark_session, "ck").start(_counts(source, flush=True), ParquetSink("out"))
    try:
        _write(Path("in"), 1, rows[12:])
        live.process_all_available()
        live.flush()
    finally:
        live.stop()
    whole = InMemoryExecutor().run(
        _counts(tempo.sources.ArrowSource(pa.Table.from_pylist(rows), Reading, start="ts", order="seq"), flush=True)
    )
    assert _items(read_committed("out"), Count) == whole.raw
    assert (tmp_path / "ck" / "spark").is_dir() and (tmp_path / "ck" / "tempo").is_dir()
    batch = SparkExecutor(spark_session).run(_counts(source, flush=True))
    assert sorted(map(repr, batch.events)) == sorted(map(repr, whole.events))  # events of one release: any order
    assert set(os.listdir(jvm_dir)) == before


def test_a_changed_query_or_a_flushed_one_is_refused(spark_session: Any, tmp_path: Path) -> None:
    from tempo.spark.streaming import CheckpointMismatchError, ParquetSink, StreamingExecutor

    inputs, checkpoint = tmp_path / "in", tmp_path / "ck"
    source = ParquetSource(str(inputs), Reading, start="ts", order="seq")
    _write(inputs, 0, _rows(5, seed=3))
    live = StreamingExecutor(spark_session, str(checkpoint)).start(_counts(source, flush=True), ParquetSink(str(tmp_path / "out")))
    live.process_all_available()
    live.stop()
    changed = _counts(source, flush=True).where(lambda c: c.n > 1)
    with pytest.raises(CheckpointMismatchError, match="belongs to another query"):
        StreamingExecutor(spark_session, str(checkpoint)).start(changed, ParquetSink(str(tmp_path / "out")))
    again = StreamingExecutor(spark_session, str(checkpoint)).start(_counts(source, flush=True), ParquetSink(str(tmp_path / "out")))
    again.flush()
    with pytest.raises(CheckpointMismatchError, match="was flushed"):
        StreamingExecutor(spark_session, str(checkpoint)).start(_counts(source, flush=True), ParquetSink(str(tmp_path / "out")))


@pytest.mark.parametrize("engine", ["auto", "cluster"])
def test_bad_input_stops_the_query_with_the_tempo_error_naming_the_row(spark_session: Any, tmp_path: Path, engine: str) -> None:
    """A row whose order goes back behind rows of an earlier batch, and then (on a fresh
    query) a null start: the query stops with the InputError, naming the input and the
    row's position in the whole input; what committed before stays. The cluster engine
    says the same as the driver's."""
    from tempo.errors import InputError
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed

    if engine == "cluster":
        from tests.streaming.test_cluster import _skip_without_tws

        _skip_without_tws()

    rows = _rows(10, seed=4)
    inputs, out = tmp_path / "in", tmp_path / "out"
    source = ParquetSource(str(inputs), Reading, start="ts", order="seq")
    _write(inputs, 0, rows[5:])
    live = StreamingExecutor(spark_session, str(tmp_path / "ck"), engine=engine).start(_counts(source, flush=True), ParquetSink(str(out)))
    try:
        live.process_all_available()
        _write(inputs, 1, rows[:5])  # seq 0..4 after seq 5..9 were processed
        with pytest.raises(InputError, match=r"input 'readings', item #5 .*'seq' value 0 comes before 9") as caught:
            live.process_all_available()
        assert type(caught.value) is InputError
    finally:
        live.stop()
    assert read_committed(str(out)).num_rows > 0

    broken = [dict(rows[0]), dict(rows[1], ts=None)]
    _write(tmp_path / "in2", 0, broken)
    source2 = ParquetSource(str(tmp_path / "in2"), Reading, start="ts", order="seq")
    live = StreamingExecutor(spark_session, str(tmp_path / "ck2"), engine=engine).start(
        _counts(source2, flush=True), ParquetSink(str(tmp_path / "out2"))
    )
    try:
        with pytest.raises(InputError, match=r"input 'readings', item #1 .*the start column 'ts' is null"):
            live.process_all_available()
    finally:
        live.stop()


@pytest.mark.parametrize("engine", ["driver", "spark"])
def test_a_new_file_whose_column_type_changed_is_an_input_schema_error(spark_session: Any, tmp_path: Path, engine: str) -> None:
    """Schema drift (issue 30): a file landing with a string ``value`` column where the files
    at the start had doubles stops the query with an InputSchemaError naming the input, the
    file, the column and both types, from process_all_available and await_termination alike
    (it was Spark's StreamingQueryException, the cause deep in its stack trace)."""
    from tempo.errors import InputSchemaError
    from tempo.rules import InputRule
    from tempo.spark.streaming import ParquetSink, StreamingExecutor

    rows = _rows(8, seed=5)
    inputs = tmp_path / "in"
    _write(inputs, 0, rows[:4])
    source = ParquetSource(str(inputs), Reading, start="ts", order="seq")
    live = StreamingExecutor(spark_session, str(tmp_path / "ck"), engine=engine).start(
        _counts(source, flush=True), ParquetSink(str(tmp_path / "out"))
    )
    try:
        live.process_all_available()
        drifted = pa.Table.from_pylist([dict(r, value=str(r["value"])) for r in rows[4:]])
        land(inputs, 1, lambda tmp: pq.write_table(drifted, tmp))
        expected = (
            rf"input 'readings': the file {inputs / 'part-00001.parquet'} has column 'value' of type string, but the input "
            r"reads it as float, its type in the files there when the query started \(it fills payload field Reading.value\)"
        )
        with pytest.raises(InputSchemaError, match=expected) as caught:
            live.process_all_available()
        assert caught.value.rule is InputRule.COLUMNS and "org.apache" not in str(caught.value)
        with pytest.raises(InputSchemaError, match=expected):
            live.await_termination(30)
        # The failed query gave up its checkpoint: a start with the file written again with
        # the input's types runs the batch again, and goes on.
        _write(inputs, 1, rows[4:])
        again = StreamingExecutor(spark_session, str(tmp_path / "ck"), engine=engine).start(
            _counts(source, flush=True), ParquetSink(str(tmp_path / "out"))
        )
        again.process_all_available()
        assert sum(p.rows_in.get("readings", 0) for p in again.progress) == 4
        again.stop()
    finally:
        live.stop()


def test_a_dense_order_value_seen_twice_is_reported_when_its_file_lands(spark_session: Any, tmp_path: Path) -> None:
    """A dense order (``dense_order_from=0``): the first file holds rows 2 to 4 (0 and 1 are
    missing: they wait), the second repeats 3. The repeat stops the query as it arrives,
    saying what happened (issue 30: it waited for the gap, then read as a row going back)."""
    from tempo.errors import InputError
    from tempo.rules import InputRule
    from tempo.spark.streaming import ParquetSink, StreamingExecutor

    rows = _rows(6, seed=6)
    inputs = tmp_path / "in"
    _write(inputs, 0, rows[2:5])
    source = ParquetSource(str(inputs), Reading, start="ts", order="seq", dense_order_from=0)
    live = StreamingExecutor(spark_session, str(tmp_path / "ck")).start(_counts(source, flush=True), ParquetSink(str(tmp_path / "out")))
    try:
        live.process_all_available()
        assert live.metrics["readings"].received == 0  # 2 to 4 wait for 0 and 1
        _write(inputs, 1, [rows[3], rows[5]])
        with pytest.raises(
            InputError,
            match=(
                r"input 'readings', item #3 .*: a repeat of 'seq' value 3, first seen in a row of an earlier micro-batch, "
                r"which waits for the rows before it"
            ),
        ) as caught:
            live.process_all_available()
        assert caught.value.rule is InputRule.ORDER_REPEAT
    finally:
        live.stop()


@attrs.frozen
class Limit:
    device: int
    limit: float


@attrs.frozen
class Over:
    device: int
    value: float
    limit: float


def _join(readings_source: Any, limits_source: Any, flush: bool) -> Stream[Over]:
    """Readings joined with a slow reference stream of limits (intervals) that imports the
    readings' CTIs, as docs/semantics.md's CTI import: the limits' CTI follows the readings'."""
    readings = Stream.create("readings", readings_source, EventShape.POINT, _settings(flush), payload_type=Reading)
    limits = Stream.create(
        "limits",
        limits_source,
        EventShape.INTERVAL,
        AdvanceTimeSettings(
            AdvanceTimeGenerationSettings(frequency=None, advance_to_infinity_on_shutdown=flush),
            import_=AdvanceTimeImportSettings("readings"),
            policy=AdvanceTimePolicy.DROP,
        ),
        payload_type=Limit,
    )
    return readings.join(limits, lambda r, m: r.device == m.device, lambda r, m: Over(r.device, r.value, m.limit)).where(
        lambda o: o.value > o.limit
    )


def test_two_inputs_merge_in_arrival_order_whatever_the_batches(spark_session: Any, tmp_path: Path) -> None:
    """Two inputs written as files in an interleaving unrelated to their arrival times: the
    committed output after every step is the in-memory release for the rows written so far
    up to the arrival frontier, and the final output is the whole run's."""
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed

    readings = _rows(40, seed=5, arrival_offset=0.5)
    rnd = random.Random(6)
    limits = [
        {
            "seq": i,
            "ts": T0 + timedelta(seconds=20 * i - 5),
            "end": T0 + timedelta(seconds=20 * i + 30),
            "arrived": T0 + timedelta(seconds=20 * i),
            "device": rnd.randrange(3),
            "limit": float(rnd.randrange(100)),
        }
        for i in range(5)
    ]
    limit_schema = pa.schema(
        [
            ("seq", pa.int64()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("end", pa.timestamp("us", tz="UTC")),
            ("arrived", pa.timestamp("us", tz="UTC")),
            ("device", pa.int64()),
            ("limit", pa.float64()),
        ]
    )

    def write_limits(index: int, part: list[dict[str, Any]]) -> None:
        land(tmp_path / "limits", index, lambda tmp: pq.write_table(pa.Table.from_pylist(part, schema=limit_schema), tmp))

    def sources(r: Any, m: Any, arrow: bool) -> tuple[Any, Any]:
        make = tempo.sources.ArrowSource if arrow else ParquetSource
        return (
            make(r, Reading, start="ts", order="seq", arrival="arrived"),
            make(m, Limit, start="ts", end="end", order="seq", arrival="arrived"),
        )

    _write(tmp_path / "readings", 0, readings[:3])
    write_limits(0, limits[:1])
    live = StreamingExecutor(spark_session, str(tmp_path / "ck")).start(
        _join(*sources(str(tmp_path / "readings"), str(tmp_path / "limits"), False), flush=True), ParquetSink(str(tmp_path / "out"))
    )
    steps = [("r", 3, 20), ("m", 1, 2), ("r", 20, 25), ("m", 2, 5), ("r", 25, 40)]
    written = {"r": 3, "m": 1}
    try:
        for index, (which, a, b) in enumerate(steps, start=1):
            if which == "r":
                _write(tmp_path / "readings", index, readings[a:b])
            else:
                write_limits(index, limits[a:b])
            written[which] = b
            live.process_all_available()
            # What memory releases for a prefix of both inputs up to the frontier: every item
            # arriving before the other input's latest arrival (or at it, if declared first).
            r_upto, m_upto = readings[: written["r"]], limits[: written["m"]]
            r_last, m_last = r_upto[-1]["arrived"], m_upto[-1]["arrived"]
            r_in = [r for r in r_upto if r["arrived"] <= m_last]
            m_in = [m for m in m_upto if m["arrived"] < r_last]
            expected = InMemoryExecutor().run(
                _join(
                    *sources(
                        pa.Table.from_pylist(r_in, schema=pa.Table.from_pylist(readings).schema),
                        pa.Table.from_pylist(m_in, schema=limit_schema),
                        True,
                    ),
                    flush=False,
                )
            )
            assert _items(read_committed(str(tmp_path / "out")), Over) == expected.raw, f"after step {index}"
        live.flush()
    finally:
        live.stop()
    whole = InMemoryExecutor().run(
        _join(*sources(pa.Table.from_pylist(readings), pa.Table.from_pylist(limits, schema=limit_schema), True), flush=True)
    )
    assert _items(read_committed(str(tmp_path / "out")), Over) == whole.raw
    assert len(whole.events) > 0


def test_a_streaming_dataframe_of_the_users_own_and_a_callback_sink(spark_session: Any, tmp_path: Path) -> None:
    """The user's own streaming DataFrame (here Spark's file source with an explicit schema
    and one file per trigger) as a DataFrameSource, and a CallbackSink: the callback gets each
    batch's released items and rejections as DataFrames with the batch id, and they add up to
    the in-memory run."""
    from tempo.spark.sources import DataFrameSource
    from tempo.spark.streaming import CallbackSink, StreamingExecutor, released_items

    rows = _rows(30, seed=7)
    inputs = tmp_path / "in"
    for index, (a, b) in enumerate([(0, 10), (10, 11), (11, 30)]):
        _write(inputs, index, rows[a:b])
    schema = "seq long, ts timestamp, arrived timestamp, device long, value double"
    df = spark_session.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(inputs))
    batches: dict[int, tuple[Any, Any]] = {}

    def on_batch(events: Any, rejections: Any, batch_id: int) -> None:
        batches[batch_id] = (events.toArrow(), rejections.toArrow())

    live = StreamingExecutor(spark_session, str(tmp_path / "ck")).start(
        _counts(DataFrameSource(df, Reading, start="ts", order="seq"), flush=True), CallbackSink(on_batch)
    )
    try:
        live.process_all_available()
        live.flush()
    finally:
        live.stop()
    assert sorted(batches) == list(range(4))  # one batch per file, then the flush
    whole = InMemoryExecutor().run(
        _counts(tempo.sources.ArrowSource(pa.Table.from_pylist(rows), Reading, start="ts", order="seq"), flush=True)
    )
    assert [i for b in sorted(batches) for i in released_items(batches[b][0], Count)] == whole.raw
    assert sum(batches[b][1].num_rows for b in batches) == len(whole.rejected)


def test_files_with_equal_modification_times_in_any_order_with_a_dense_order(spark_session: Any, tmp_path: Path) -> None:
    """Six files with one modification time, read one per batch: Spark's file source takes
    them in no defined order. With ``dense_order_from=0`` (the seq column counts the rows)
    rows after a gap wait for the missing file, so the output is the in-memory run's."""
    from tempo.spark.sources import DataFrameSource
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed

    rows = _rows(36, seed=8)
    inputs = tmp_path / "in"
    order = list(range(6))
    random.Random(9).shuffle(order)
    for index in order:
        _write(inputs, index, rows[index * 6 : index * 6 + 6])
    for name in os.listdir(inputs):
        os.utime(inputs / name, (1_700_000_000, 1_700_000_000))
    schema = "seq long, ts timestamp, arrived timestamp, device long, value double"
    df = spark_session.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(inputs))
    source = DataFrameSource(df, Reading, start="ts", order="seq", dense_order_from=0)
    live = StreamingExecutor(spark_session, str(tmp_path / "ck")).start(_counts(source, flush=True), ParquetSink(str(tmp_path / "out")))
    whole = _flushed_against_memory(live, rows)
    assert _items(read_committed(str(tmp_path / "out")), Count) == whole.raw
    assert len(live.progress) == 7


def _write_json(folder: Path, index: int, rows: list[dict[str, Any]]) -> None:
    """One file of JSON Lines (times as ISO-8601 text)."""
    import json

    text = "".join(json.dumps({**r, "ts": r["ts"].isoformat(), "arrived": r["arrived"].isoformat()}) + "\n" for r in rows)
    land(folder, index, lambda tmp: tmp.write_text(text), suffix=".jsonl")


def test_a_directory_of_json_lines_files(spark_session: Any, tmp_path: Path) -> None:
    """The counts query over a directory receiving JSON Lines files: after every file the
    committed output is the in-memory executor's release for the files so far (read by
    ``JsonSource`` from the same directory), and after the flush the whole run's."""
    from tempo.sources import JsonSource
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed

    rows = _rows(30, seed=9)
    inputs, out = tmp_path / "in", tmp_path / "out"
    source = JsonSource(str(inputs), Reading, start="ts", order="seq")
    _write_json(inputs, 0, rows[:4])
    live = StreamingExecutor(spark_session, str(tmp_path / "ck")).start(_counts(source, flush=True), ParquetSink(str(out)))
    try:
        for index, (a, b) in enumerate([(4, 5), (5, 17), (17, 30)], start=1):
            live.process_all_available()
            expected = InMemoryExecutor().run(_counts(source, flush=False))
            assert _items(read_committed(str(out)), Count) == expected.raw, f"before row {a}"
            _write_json(inputs, index, rows[a:b])
        live.flush()
    finally:
        live.stop()
    whole = InMemoryExecutor().run(_counts(source, flush=True))
    assert _items(read_committed(str(out)), Count) == whole.raw and len(whole.raw) > 10
    assert live.metrics["readings"].received == 30
