"""Kafka topics in, Delta Lake tables out: a real broker (KRaft, on 127.0.0.1), Spark's Kafka
connector and Delta's jars (``bash java/fetch``).

Each test writes its own topic with ``create_topic`` (log-append time: the broker stamps each
record's arrival) and reads back what the broker holds with a plain consumer: each
partition's records in offset order, their timestamps the arrivals. The expected results are
written by hand from the timelines below, and the in-memory executor run over those records
as one item list per partition (``input_name``) must give the same, whatever Spark's
micro-batches.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("pyspark")

from tempo import (  # noqa: E402
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    Cti,
    EventShape,
    Heartbeat,
    InMemoryExecutor,
    Interval,
    Point,
    Stream,
)
from tempo.spark.streaming.kafka import (  # noqa: E402
    DEFAULT_KIND_FIELD,
    create_topic,
    encode_record,
    input_name,
    kafka_stream,
    producer,
    send_heartbeats,
)
from tempo.sources import delta_table  # noqa: E402
from tempo.ticks import from_ticks  # noqa: E402

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
UTC = timezone.utc
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
_topics = itertools.count()


@attrs.frozen
class Reading:
    device: int
    value: float
    kafka_partition: int


@attrs.frozen
class Count:
    device: int
    n: int
    total: float
    partitions: int


def _topic(bootstrap: str, partitions: int) -> str:
    name = f"readings-{next(_topics)}-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, name, partitions)
    return name


def _settings(flush: bool) -> AdvanceTimeSettings:
    return AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(frequency=1, delay=timedelta(seconds=1), advance_to_infinity_on_shutdown=flush)
    )


def _readings(spark: Any, bootstrap: str, topic: str, flush: bool = True, **more: Any) -> Stream[Reading]:
    """The readings of ``topic``, live (or ``bounded=True``), their starts in the values."""
    return kafka_stream(spark, "readings", topic, Reading, bootstrap=bootstrap, start="start", settings=_settings(flush), **more)


def _counts(stream: Stream[Reading]) -> Stream[Count]:
    return (
        stream.group_by(lambda r: r.device)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda device, w: Count(device, w.count(), w.sum(lambda r: r.value), w.count_distinct(lambda r: r.kafka_partition)))
    )


def _merged_counts(stream: Stream[Reading]) -> Stream[Count]:
    """``_counts`` with aggregates the bulk engines merge (the highest partition in place of
    the count of distinct ones)."""
    return (
        stream.group_by(lambda r: r.device)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda device, w: Count(device, w.count(), w.sum(lambda r: r.value), w.max(lambda r: r.kafka_partition)))
    )


def _produce(client: Any, topic: str, rows: list[tuple[int, int, float, int]]) -> None:
    """``(partition, device, value, second)`` records, in this order, then flushed."""
    for partition, device, value, second in rows:
        value_bytes = encode_record(Reading(device, value, partition), start=T0 + timedelta(seconds=second))
        client.produce(topic, value=value_bytes, partition=partition)
    client.flush()


def _beat(client: Any, topic: str) -> None:
    """Heartbeats in the three partitions, twice, 20 ms apart: the second round arrives after
    every record before it (log-append times are milliseconds, so a first heartbeat may share
    one with the record just before it, which the merge then holds back)."""
    send_heartbeats(client, topic, [0, 1, 2])
    time.sleep(0.02)
    send_heartbeats(client, topic, [0, 1, 2])


def _records(bootstrap: str, topic: str, partitions: int) -> dict[int, list[Any]]:
    """What the broker holds, per partition in offset order, as input items: a reading is a
    point arriving at the record's timestamp, a heartbeat record a ``Heartbeat``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit": False})
    out: dict[int, list[Any]] = {}
    try:
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            items: list[Any] = []
            if high > low:
                consumer.assign([TopicPartition(topic, p, low)])
                while len(items) < high - low:
                    message = consumer.poll(10)
                    assert message is not None and message.error() is None, message and message.error()
                    arrival = from_ticks(message.timestamp()[1] * 1000)
                    value = json.loads(message.value())
                    if value.get(DEFAULT_KIND_FIELD) == "heartbeat":
                        items.append(Heartbeat(arrival))
                    else:
                        start = datetime.fromisoformat(value["start"].replace("Z", "+00:00"))
                        items.append(Point(start, Reading(value["device"], value["value"], p), arrival))
            out[p] = items
    finally:
        consumer.close()
    return out


def _reference(records: dict[int, list[Any]], flush: bool, query: Callable[[Stream[Reading]], Stream[Count]] = _counts) -> list[Any]:
    """The in-memory executor's whole run of ``query`` over the records, one input per partition."""
    streams = [
        Stream.create(input_name("readings", p), items, EventShape.POINT, _settings(flush), payload_type=Reading)
        for p, items in records.items()
    ]
    merged = streams[0]
    for other in streams[1:]:
        merged = merged.union(other)
    return InMemoryExecutor().run(query(merged)).raw


def _frontier(records: dict[int, list[Any]]) -> dict[int, list[Any]]:
    """The items a live engine has processed: an item of partition ``p`` passes once every
    other partition ``q`` has reached a later arrival, or the same arrival when ``q`` comes
    after ``p`` (inputs merge by arrival, then declaration order)."""
    reached = {p: max((i.arrival for i in items), default=None) for p, items in records.items()}

    def passes(p: int, arrival: datetime) -> bool:
        return all(r is not None and (arrival < r or (arrival == r and q > p)) for q, r in reached.items() if q != p)

    return {p: [i for i in items if passes(p, i.arrival)] for p, items in records.items()}


def _releases(raw: list[Any]) -> list[tuple[list[str], Any]]:
    """Items cut at each CTI: what it released as a sorted multiset, then the CTI. The order of
    a window's groups within one release is left open (docs/semantics.md 5.7): the cluster
    engine gives them by key, the in-memory executor by each group's first event, which on a
    partitioned topic follows the partitions' append times."""
    out: list[tuple[list[str], Any]] = []
    pending: list[str] = []
    for item in raw:
        if isinstance(item, Cti):
            out.append((sorted(pending), item))
            pending = []
        else:
            pending.append(repr(item))
    return [*out, (sorted(pending), None)]


def _events(raw: list[Any]) -> list[tuple[int, int, float, int, datetime]]:
    return sorted((e.payload.device, e.payload.n, e.payload.total, e.payload.partitions, e.start) for e in raw if isinstance(e, Interval))


# Three partitions; device d's readings go to partition d, except device 0's second, which
# goes to partition 2. Starts (seconds after T0): the first window [0, 10) holds seconds 0-8,
# the second [10, 20) seconds 11 and 12.
ROUND_1 = [(0, 0, 1.0, 0), (1, 1, 2.0, 1), (2, 2, 3.0, 2), (2, 0, 4.0, 3), (0, 0, 5.0, 6), (1, 1, 6.0, 8)]
ROUND_2 = [(0, 0, 7.0, 11), (1, 1, 8.0, 12)]


def test_a_bounded_topic_reads_its_partitions_as_inputs_merged_by_arrival(connector_session: Any, kafka_broker: Any) -> None:
    from tempo.spark import SparkExecutor
    from tempo.vectorised import VectorisedExecutor
    from tests.conformance.compare import assert_same_results

    topic = _topic(kafka_broker.bootstrap, 3)
    client = producer(kafka_broker.bootstrap)
    _produce(client, topic, ROUND_1 + ROUND_2)

    stream = _counts(_readings(connector_session, kafka_broker.bootstrap, topic, bounded=True))
    # By hand, the window [0, 10) (an interval): device 0 read 1 + 4 + 5 from partitions 0
    # and 2, device 1 2 + 6, device 2 3; window [10, 20): device 0 7, device 1 8.
    expected = [
        (0, 3, 10.0, 2, T0),
        (0, 1, 7.0, 1, T0 + timedelta(seconds=10)),
        (1, 2, 8.0, 1, T0),
        (1, 1, 8.0, 1, T0 + timedelta(seconds=10)),
        (2, 1, 3.0, 1, T0),
    ]
    on_spark = SparkExecutor(connector_session).run(stream)
    in_memory = InMemoryExecutor().run(stream)
    assert _events(in_memory.raw) == sorted(expected)
    assert in_memory.raw == _reference(_records(kafka_broker.bootstrap, topic, 3), flush=True)
    assert_same_results(in_memory, on_spark)
    assert_same_results(in_memory, VectorisedExecutor().run(stream))


def test_a_live_topic_into_delta_equals_the_in_memory_run_across_an_idle_partition_and_a_restart(
    connector_session: Any, kafka_broker: Any, tmp_path: Path
) -> None:

    from tempo.spark.streaming import DeltaSink, StreamingExecutor

    bootstrap = kafka_broker.bootstrap
    topic = _topic(bootstrap, 3)
    client = producer(bootstrap)
    out, checkpoint = tmp_path / "out", tmp_path / "ck"

    def build(flush: bool) -> Stream[Count]:
        return _counts(_readings(connector_session, bootstrap, topic, flush=flush))

    def committed() -> list[Any]:
        return _delta_items(out) if (out / "_delta_log").exists() else []

    def expected_now() -> list[Any]:
        records = _records(bootstrap, topic, 3)
        return _reference(_frontier(records), flush=False)

    _produce(client, topic, ROUND_1)
    live = StreamingExecutor(connector_session, str(checkpoint)).start(build(flush=True), DeltaSink(str(out)))
    try:
        live.process_all_available()
        assert committed() == expected_now()
        # The three partitions' inputs are read by one Kafka source, each record once.
        progress = live._handle.recentProgress
        assert {len(p.sources) for p in progress} == {1}
        assert sum(p.numInputRows for p in progress) == len(ROUND_1)
        # Partition 2 goes idle: without a heartbeat there, partitions 0 and 1 wait for it.
        _produce(client, topic, [(0, 0, 7.0, 11), (1, 1, 8.0, 12)])
        live.process_all_available()
        held = committed()
        assert held == expected_now()
        _beat(client, topic)
        live.process_all_available()
        assert committed() == expected_now()
        assert len(committed()) > len(held)
    finally:
        live.stop()
    # Restart on the checkpoint, with a record written while the query was down.
    _produce(client, topic, [(2, 2, 9.0, 14)])
    live = StreamingExecutor(connector_session, str(checkpoint)).start(build(flush=True), DeltaSink(str(out)))
    try:
        live.process_all_available()
        live.flush()
    finally:
        live.stop()
    whole = _reference(_records(bootstrap, topic, 3), flush=True)
    assert committed() == whole
    assert _events(whole) == [
        (0, 1, 7.0, 1, T0 + timedelta(seconds=10)),
        (0, 3, 10.0, 2, T0),
        (1, 1, 8.0, 1, T0 + timedelta(seconds=10)),
        (1, 2, 8.0, 1, T0),
        (2, 1, 3.0, 1, T0),
        (2, 1, 9.0, 1, T0 + timedelta(seconds=10)),
    ]
    # Every batch once: the table's versions carry the batch numbers as Delta transactions.
    table = delta_table(str(out))
    places = list(zip(table.column("tempo_batch").to_pylist(), table.column("tempo_row").to_pylist()))
    assert len(places) == len(set(places)) == len(whole)


def test_a_record_that_is_no_json_of_the_payload_is_an_input_error_naming_its_partition(connector_session: Any, kafka_broker: Any) -> None:
    from tempo import InputError

    topic = _topic(kafka_broker.bootstrap, 2)
    client = producer(kafka_broker.bootstrap)
    _produce(client, topic, [(0, 0, 1.0, 0), (1, 1, 2.0, 1)])
    client.produce(topic, value=b'{"device": "not a number", "start": "2026-03-01T10:00:02Z"}', partition=1)
    client.flush()
    stream = _counts(_readings(connector_session, kafka_broker.bootstrap, topic, bounded=True))
    with pytest.raises(InputError, match=r"readings/p1.*device") as caught:
        InMemoryExecutor().run(stream)
    assert caught.value.input_name == "readings/p1" and caught.value.position == 1


def _delta_items(out: Path) -> list[Any]:
    from tempo.spark.streaming import released_items

    table = delta_table(str(out)).sort_by([("tempo_batch", "ascending"), ("tempo_row", "ascending")])
    return released_items(table.drop_columns(["tempo_batch", "tempo_row"]), Count)


def _worker(
    kafka_broker: Any, topic: str, tmp: Path, crash_at: str | None = None, more: list[str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("TEMPO_CRASH_AT", None)
    if crash_at is not None:
        env["TEMPO_CRASH_AT"] = crash_at
    command = [
        sys.executable,
        "-m",
        "tests.streaming.kafka_worker",
        kafka_broker.bootstrap,
        topic,
        str(tmp / "ck"),
        str(tmp / "out"),
        "--flush",
        *(more or []),
    ]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(
    "phase",
    [
        # The Delta version is written, tempo's commit record is not: Delta skips the rerun's
        # (test_delta.py writes a batch again without a kill; test_kafka_sink.py kills a
        # query over Kafka in the default suite).
        pytest.param("sink", marks=pytest.mark.slow),
        pytest.param("state", marks=pytest.mark.slow),
        pytest.param("commit", marks=pytest.mark.slow),
        pytest.param("publish", marks=pytest.mark.slow),
        pytest.param("read", marks=pytest.mark.slow),
    ],
)
def test_a_kill_at_a_phase_of_a_batch_then_a_restart_puts_every_batch_in_delta_once(kafka_broker: Any, tmp_path: Path, phase: str) -> None:
    """A live query from a Kafka topic into Delta, in a process of its own, killed with
    kill -9 at ``phase`` of batch 1; a restart on the same checkpoint and table finishes the
    run: the table holds the in-memory executor's whole run, item for item, nothing twice."""
    pytest.importorskip("deltalake")
    topic = _topic(kafka_broker.bootstrap, 3)
    client = producer(kafka_broker.bootstrap)
    _produce(client, topic, ROUND_1 + ROUND_2 + [(2, 2, 9.0, 14)])
    send_heartbeats(client, topic, [0, 1, 2])
    crashed = _worker(kafka_broker, topic, tmp_path, crash_at=f"{phase}:1")
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr[-3000:]
    restarted = _worker(kafka_broker, topic, tmp_path)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr[-3000:]
    whole = _reference(_records(kafka_broker.bootstrap, topic, 3), flush=True)
    assert _delta_items(tmp_path / "out") == whole
    assert len(_events(whole)) == 6


@pytest.mark.parametrize(
    "engine", ["cluster", pytest.param("vectorised", marks=pytest.mark.slow), pytest.param("spark", marks=pytest.mark.slow)]
)
def test_every_live_engine_gives_the_in_memory_run_over_a_partitioned_topic(
    connector_session: Any, kafka_broker: Any, tmp_path: Path, engine: str
) -> None:
    """The bulk engines (every batch by polars, or by Spark's compiled plan) and the cluster
    engine (the window's state per key on Spark's executors) over the three partitions:
    after a round held back by an idle partition, after the heartbeats, and after the flush,
    release by release (``_releases``: within one, the groups' order is open)."""
    from tempo.spark.streaming import DeltaSink, StreamingExecutor

    if engine == "cluster":
        from tests.streaming.test_cluster import _skip_without_tws

        _skip_without_tws()
    bootstrap = kafka_broker.bootstrap
    topic = _topic(bootstrap, 3)
    client = producer(bootstrap)
    out = tmp_path / "out"
    stream = _merged_counts(_readings(connector_session, bootstrap, topic))
    live = StreamingExecutor(connector_session, str(tmp_path / "ck"), engine=engine).start(stream, DeltaSink(str(out)))
    try:
        _produce(client, topic, ROUND_1 + ROUND_2)
        live.process_all_available()
        held = _delta_items(out) if (out / "_delta_log").exists() else []
        assert _releases(held) == _releases(_reference(_frontier(_records(bootstrap, topic, 3)), flush=False, query=_merged_counts))
        _beat(client, topic)
        live.process_all_available()
        assert _releases(_delta_items(out)) == _releases(
            _reference(_frontier(_records(bootstrap, topic, 3)), flush=False, query=_merged_counts)
        )
        assert len(_delta_items(out)) > len(held)
        live.flush()
    finally:
        live.stop()
    whole = _reference(_records(bootstrap, topic, 3), flush=True, query=_merged_counts)
    assert _releases(_delta_items(out)) == _releases(whole) and len(_events(whole)) == 5
