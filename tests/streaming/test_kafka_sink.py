"""Kafka as a sink (``KafkaSink``): a live query from a Kafka topic into another, on a real
broker. The output read back with committed reads only (``read_kafka_output``) must equal,
after every step, the in-memory executor's run over the records processed so far
(``test_kafka._frontier``), whatever Spark's micro-batches (cut at random sizes here), across
a restart, a broker killed while the query runs, and kill -9 of the driver inside and after
a batch's transaction.
"""

from __future__ import annotations

import random
import signal
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("confluent_kafka")

from tempo.spark.streaming.kafka import (  # noqa: E402
    BATCH_HEADER,
    KafkaSink,
    KafkaSinkError,
    producer,
    read_kafka_output,
    send_heartbeats,
)
from tests.streaming.test_kafka import (  # noqa: E402
    ROUND_1,
    ROUND_2,
    T0,
    Count,
    _counts,
    _events,
    _frontier,
    _produce,
    _readings,
    _records,
    _reference,
    _topic,
    _worker,
)

pytestmark = pytest.mark.spark


def _output(bootstrap: str, topic: str) -> list[Any]:
    from tempo.spark.streaming import released_items

    table = read_kafka_output(bootstrap, topic, Count)
    return released_items(table.drop_columns(["tempo_batch", "tempo_row"]), Count)


def _raw_records(bootstrap: str, topic: str) -> dict[int, list[tuple[bytes | None, int, int]]]:
    """Per partition of a sink's topic, in offset order: (key, batch, row) of each committed record."""
    from tempo.spark.streaming.kafka import ROW_HEADER, committed_records, topic_partitions

    partitions = topic_partitions(bootstrap, topic)
    out: dict[int, list[tuple[bytes | None, int, int]]] = {p: [] for p in partitions}
    for m in committed_records(bootstrap, topic, partitions, timeout=20):
        headers = dict(m.headers())
        out[m.partition()].append((m.key(), int(headers[BATCH_HEADER]), int(headers[ROW_HEADER])))
    return out


@pytest.mark.parametrize(
    "into", ["kafka", pytest.param("kafka-at-least-once", marks=pytest.mark.slow), pytest.param("delta", marks=pytest.mark.slow)]
)
def test_a_live_query_into_a_keyed_topic_equals_the_in_memory_run_under_random_micro_batches(
    connector_session: Any, kafka_broker: Any, tmp_path: Path, into: str
) -> None:
    """Three rounds of random readings with heartbeats; the query is stopped and started
    again after the second, and the broker is killed (kill -9) and restarted after the
    first while the query runs (Spark's reader and the sink's producer reconnect). Into a
    KafkaSink with transactions, without, or into a DeltaSink."""
    from tempo.spark.streaming import DeltaSink, Sink, StreamingExecutor
    from tests.streaming.test_kafka import _delta_items

    bootstrap = kafka_broker.bootstrap
    rng = random.Random({"kafka": 33, "kafka-at-least-once": 34, "delta": 35}[into])
    source = _topic(bootstrap, 3)
    sink_topic = f"{source}-out"
    client = producer(bootstrap)
    checkpoint = tmp_path / "ck"
    cut = str(rng.randint(1, 4))  # records per micro-batch (Spark's cut), at random

    def start() -> Any:
        stream = _counts(_readings(connector_session, bootstrap, source, options={"maxOffsetsPerTrigger": cut}))
        sink: Sink = DeltaSink(str(tmp_path / "out"))
        if into != "delta":
            sink = KafkaSink(bootstrap, sink_topic, key="device", partitions=2, transactions=into == "kafka")
        return StreamingExecutor(connector_session, str(checkpoint)).start(stream, sink)

    def output() -> list[Any]:
        if into == "delta":
            return _delta_items(tmp_path / "out") if (tmp_path / "out" / "_delta_log").exists() else []
        return _output(bootstrap, sink_topic)

    def check() -> None:
        assert output() == _reference(_frontier(_records(bootstrap, source, 3)), flush=False)

    # Readings over 40 seconds in random order per round, three rounds, heartbeats after each.
    rows = [(rng.randrange(3), rng.randrange(4), float(i), second) for i, second in enumerate(sorted(rng.sample(range(40), 18)))]
    rounds = [rows[:6], rows[6:12], rows[12:]]
    live = start()
    try:
        for round_number, chunk in enumerate(rounds[:2]):
            if round_number == 1:
                kafka_broker.kill()
                kafka_broker.restart()
                client = producer(bootstrap)
            _produce(client, source, chunk)
            live.process_all_available()
            check()
            send_heartbeats(client, source, [0, 1, 2])
            live.process_all_available()
            check()
    finally:
        live.stop()
    _produce(client, source, rounds[2])
    send_heartbeats(client, source, [0, 1, 2])
    live = start()
    try:
        live.process_all_available()
        check()
        live.flush()
    finally:
        live.stop()
    whole = _reference(_records(bootstrap, source, 3), flush=True)
    assert output() == whole
    # Sums over every reading: nothing lost or counted twice.
    assert sum(e[2] for e in _events(whole)) == sum(r[2] for r in rows)
    if into == "delta":
        return
    # Each device's records in one partition, in release order; CTIs (no key) in every one.
    records = _raw_records(bootstrap, sink_topic)
    homes: dict[bytes, set[int]] = {}
    for p, found in records.items():
        assert [place for _, *place in found] == sorted(place for _, *place in found), f"partition {p} is not in release order"
        for key, *_ in found:
            if key is not None:
                homes.setdefault(key, set()).add(p)
    assert all(len(h) == 1 for h in homes.values()) and len(homes) >= 2
    ctis = [{(b, r) for k, b, r in found if k is None} for found in records.values()]
    assert ctis[0] == ctis[1] and ctis[0], "a CTI goes to every partition"


def test_kill_9_inside_and_after_a_batchs_transaction_then_restarts_write_every_batch_once(kafka_broker: Any, tmp_path: Path) -> None:
    """A live query from Kafka into a KafkaSink, in a process of its own: killed with kill -9
    at ``kafka:0`` (batch 0's records sent, its transaction open: the restart's producer
    aborts it), restarted and killed at ``sink:1`` (the flush batch's transaction committed,
    tempo's commit record not: its rerun is skipped), restarted to the end. Committed readers
    see the whole run once, item for item. (Twelve records a micro-batch: batch 0 reads every
    record, heartbeats included, and batch 1 flushes.)"""
    bootstrap = kafka_broker.bootstrap
    topic = _topic(bootstrap, 3)
    client = producer(bootstrap)
    _produce(client, topic, ROUND_1 + ROUND_2 + [(2, 2, 9.0, 14)])
    send_heartbeats(client, topic, [0, 1, 2])
    sink = ["--sink", f"kafka:{topic}-out", "--per-trigger", "12"]
    for crash_at in ("kafka:0", "sink:1"):
        crashed = _worker(kafka_broker, topic, tmp_path, crash_at=crash_at, more=sink)
        assert crashed.returncode == -signal.SIGKILL, crash_at + crashed.stdout + crashed.stderr[-3000:]
    restarted = _worker(kafka_broker, topic, tmp_path, more=sink)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr[-3000:]
    whole = _reference(_records(bootstrap, topic, 3), flush=True)
    assert _output(bootstrap, f"{topic}-out") == whole
    assert len(_events(whole)) == 6
    batches = set(read_kafka_output(bootstrap, f"{topic}-out", Count).column(BATCH_HEADER).to_pylist())
    assert batches == {0, 1}, "the killed batches are the ones that released: their transactions were tested"
    # The aborted transaction's records are in the log, unseen by committed readers.
    from confluent_kafka import Consumer, TopicPartition

    uncommitted = Consumer({"bootstrap.servers": bootstrap, "group.id": "all", "isolation.level": "read_uncommitted"})
    try:
        low, high = uncommitted.get_watermark_offsets(TopicPartition(f"{topic}-out", 0), timeout=10)
    finally:
        uncommitted.close()
    committed_records = sum(len(v) for v in _raw_records(bootstrap, f"{topic}-out").values())
    assert high - low > committed_records, "batch 0's aborted records (and the transaction markers) hold offsets"


def _batch(*counts: tuple[int, int, float, int]) -> Any:
    """A released table of ``(device, n, total, second)`` windows of 10 s, then a CTI."""
    from tempo import Cti, Interval
    from tempo.result import released_table

    items: list[Any] = [Interval(T0 + timedelta(seconds=s), T0 + timedelta(seconds=s + 10), Count(d, n, t, 1)) for d, n, t, s in counts]
    last = max(s for *_, s in counts)
    return released_table([*items, Cti(T0 + timedelta(seconds=last + 10))], Count)


def _no_rejections() -> Any:
    from tempo.result import Result

    return Result([], [], {}, [], [], {}, None, Count, {"readings": Count}).rejections_table()


def test_a_batch_run_again_after_its_transaction_committed_is_skipped_and_an_old_writer_is_fenced(kafka_broker: Any) -> None:
    """The sink's part of exactly once, without a query: a new sink (the restart) takes the
    transactional id over, finds batch 1 committed, and skips it when it comes again; the
    old sink, still alive, can write no more."""
    bootstrap = kafka_broker.bootstrap
    topic = f"fenced-{uuid.uuid4().hex[:8]}"
    first = KafkaSink(bootstrap, topic, key="device", partitions=2)
    first.write(None, 0, _batch((0, 2, 3.0, 0), (1, 1, 5.0, 0)), _no_rejections())  # type: ignore[arg-type]
    first.write(None, 1, _batch((0, 1, 7.0, 10)), _no_rejections())  # type: ignore[arg-type]
    again = KafkaSink(bootstrap, topic, key="device", partitions=2)
    again.write(None, 1, _batch((0, 1, 7.0, 10)), _no_rejections())  # type: ignore[arg-type]
    assert again.last_batch == 1
    again.write(None, 2, _batch((1, 4, 1.0, 20)), _no_rejections())  # type: ignore[arg-type]
    with pytest.raises(KafkaSinkError, match="fenced"):
        first.write(None, 3, _batch((1, 1, 1.0, 30)), _no_rejections())  # type: ignore[arg-type]
    table = read_kafka_output(bootstrap, topic, Count)
    assert table.column("tempo_batch").to_pylist() == [0, 0, 0, 1, 1, 2, 2]
    assert [(r["device"], r["n"]) for r in table.to_pylist() if r["tempo_kind"] == "interval"] == [(0, 2), (1, 1), (0, 1), (1, 4)]


def test_an_at_least_once_sink_sends_a_batch_again_and_the_reader_drops_the_repeats(kafka_broker: Any) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = f"repeats-{uuid.uuid4().hex[:8]}"
    batch = _batch((0, 2, 3.0, 0), (1, 1, 5.0, 0))
    for _ in range(2):  # the same batch after a crash before tempo's commit record
        KafkaSink(bootstrap, topic, transactions=False).write(None, 0, batch, _no_rejections())  # type: ignore[arg-type]
    assert sum(len(found) for found in _raw_records(bootstrap, topic).values()) == 2 * batch.num_rows
    table = read_kafka_output(bootstrap, topic, Count)
    assert table.drop_columns(["tempo_batch", "tempo_row"]).to_pylist() == batch.to_pylist()


def test_a_key_the_output_does_not_have_is_a_tempo_error_naming_the_columns(kafka_broker: Any) -> None:
    sink = KafkaSink(kafka_broker.bootstrap, f"keys-{uuid.uuid4().hex[:8]}", key="sensor")
    with pytest.raises(KafkaSinkError, match=r"key='sensor' is no column of the output .*device"):
        sink.write(None, 0, _batch((0, 1, 1.0, 0)), _no_rejections())  # type: ignore[arg-type]


def test_the_times_and_kinds_of_released_rows_read_back_as_written() -> None:
    """The JSON encoding of the records, both ways, by hand (no broker)."""
    import pyarrow as pa

    from tempo.spark.streaming.kafka import from_json_value, json_value

    start = T0 + timedelta(microseconds=7)
    assert json_value(start) == "2026-03-01T10:00:00.000007Z"
    assert json_value(timedelta(seconds=2, microseconds=5)) == 2_000_005
    assert json_value({"a": [start]}) == {"a": ["2026-03-01T10:00:00.000007Z"]}
    assert from_json_value("2026-03-01T10:00:00.000007Z", pa.timestamp("us", "UTC")) == start
    assert from_json_value(2_000_005, pa.duration("us")) == timedelta(seconds=2, microseconds=5)
    nested = pa.struct([pa.field("at", pa.list_(pa.timestamp("us", "UTC")))])
    assert from_json_value({"at": ["2026-03-01T10:00:00.000007Z"]}, nested) == {"at": [start]}
