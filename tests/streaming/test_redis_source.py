"""The Redis Streams source (tempo.spark.streaming.redis) against a real redis-server and,
for the streaming reads, the test run's Spark session.

Entries are produced with ``add_event`` and read by ``spark.readStream`` through
``redis_source`` into a ``foreachBatch`` sink that keeps each batch's rows with its id; the
expected rows are written by hand from the values produced.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from tempo.errors import InputError, QueryBuildError, UnsupportedError  # noqa: E402
from tempo.spark.streaming.redis import (  # noqa: E402
    ARRIVAL_COLUMN,
    KIND_COLUMN,
    ORDER_COLUMN,
    Layout,
    RedisEntryError,
    RedisEventError,
    add_event,
    batch_heartbeat,
    decode_value,
    encode_value,
    heartbeat_order,
    order_of,
    raising_redis_errors,
    redis_entry_error,
    redis_source,
)

UTC = timezone.utc
T0 = datetime(2026, 11, 23, 20, 0, tzinfo=UTC)
_keys = itertools.count()


@dataclass(frozen=True)
class Reading:
    sensor: str
    count: int
    value: float
    ok: bool
    seen: datetime
    note: str | None


@pytest.fixture
def client(redis_server: str) -> Iterator[Any]:
    import redis

    c = redis.Redis.from_url(redis_server)
    yield c
    c.close()


@pytest.fixture
def stream_key() -> str:
    """A stream of its own for each test (the server is shared by the whole run)."""
    return f"readings-{next(_keys)}-{uuid.uuid4().hex[:8]}"


def micros(t: datetime) -> int:
    return (t - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def run(source: Any, checkpoint: Path, available_now: bool = False) -> list[tuple[int, list[dict[str, Any]]]]:
    """Run the source's streaming DataFrame until it has read what is there (by
    ``processAllAvailable``, or as a ``trigger(availableNow=True)`` query); each non-empty
    batch's rows in order with its id. Timestamps come as microseconds (no local time zone)."""
    from pyspark.sql import functions as F

    df = source.df
    stamps = [f.name for f in df.schema.fields if f.dataType.typeName() == "timestamp"]
    df = df.select(*[F.unix_micros(F.col(c)).alias(c) if c in stamps else F.col(c) for c in df.columns])
    batches: list[tuple[int, list[dict[str, Any]]]] = []

    def sink(batch: Any, batch_id: int) -> None:
        batches.append((batch_id, [r.asDict() for r in batch.orderBy(ORDER_COLUMN).collect()]))

    writer = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    query = (writer.trigger(availableNow=True) if available_now else writer).start()
    try:
        with raising_redis_errors():
            if available_now:
                query.awaitTermination()
            else:
                query.processAllAvailable()
    finally:
        query.stop()
    return [(i, rows) for i, rows in batches if rows]


def expected_id_columns(entry_id: str) -> dict[str, int]:
    ms, seq = (int(p) for p in entry_id.split("-"))
    return {ORDER_COLUMN: ms * 4194304 + 2 * seq + 1, ARRIVAL_COLUMN: ms * 1000}


def entries_and_heartbeats(rows: list[dict[str, Any]], kind: str = "kind") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A batch's entry rows, and its heartbeat rows (checked: at most one, the last row,
    ordered and arriving at its clock after every entry of the batch)."""
    entries = [r for r in rows if r[kind] != "heartbeat"]
    beats = [r for r in rows if r[kind] == "heartbeat"]
    assert len(beats) <= 1 and rows[len(entries) :] == beats
    for beat in beats:
        assert beat[ORDER_COLUMN] == heartbeat_order(beat[ARRIVAL_COLUMN] // 1000)
        assert all(e[ARRIVAL_COLUMN] < beat[ARRIVAL_COLUMN] for e in entries)
    return entries, beats


# --- the encoding, without Spark ----------------------------------------------------------


def test_order_column_is_ms_shifted_by_22_bits_plus_odd_seq() -> None:
    assert order_of("1700000000000-5") == (1700000000000 * 4194304 + 11, 1700000000000)
    assert order_of("0-0") == (1, 0)
    assert order_of("1-2097151")[0] == 2 * 4194304 - 1
    with pytest.raises(ValueError, match="sequence number 2097152 .* more than 21 bits"):
        order_of("1-2097152")
    with pytest.raises(ValueError, match="2\\*\\*41 or more"):
        order_of(f"{2**41}-0")


def test_a_heartbeat_sorts_between_the_entries_of_earlier_milliseconds_and_of_its_own() -> None:
    """The broker may give an entry appended after the clock was read at C the ID C-0: the
    heartbeat at C must come before it, and after every entry of C - 1."""
    clock = 1700000000000
    assert order_of(f"{clock - 1}-2097151")[0] < heartbeat_order(clock) < order_of(f"{clock}-0")[0]


def test_a_batch_ends_with_a_heartbeat_when_the_clock_passed_its_last_entry() -> None:
    start = {"id": "5-0", "clock_ms": 6, "at_end": True}
    assert batch_heartbeat(start, {"id": "8-3", "clock_ms": 9, "at_end": True}) == 9
    assert batch_heartbeat(start, {"id": "5-0", "clock_ms": 7, "at_end": True}) == 7  # an idle stream's new offset
    assert batch_heartbeat(start, {"id": "9-0", "clock_ms": 9, "at_end": True}) is None  # the entries reach the clock
    assert batch_heartbeat(start, {"id": "8-3", "clock_ms": 9, "at_end": False}) is None  # entries after 8-3 wait
    assert batch_heartbeat(start, {"id": "5-0", "clock_ms": 6, "at_end": True}) is None  # no later clock
    assert batch_heartbeat({"id": "0-0", "clock_ms": 0}, {"id": "8-3", "clock_ms": 9, "at_end": True}) == 9


@pytest.mark.parametrize(
    ("value", "value_type", "text"),
    [
        (-42, "int", "-42"),
        (2**63 - 1, "int", "9223372036854775807"),
        (0.1, "float", "0.1"),
        (3, "float", "3.0"),
        (float("inf"), "float", "inf"),
        (True, "bool", "true"),
        (False, "bool", "false"),
        ("héllo, wörld", "str", "héllo, wörld"),
        ("", "str", ""),
        (datetime(1970, 1, 1, 0, 0, 1, 5, tzinfo=UTC), "datetime", "1000005"),
        (datetime(1970, 1, 1, 0, 0, 1, 5), "datetime", "1000005"),  # naive is UTC
        (datetime(2026, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1))), "datetime", "1767225600000000"),
    ],
)
def test_values_encode_as_documented_and_decode_back(value: Any, value_type: str, text: str) -> None:
    assert encode_value(value, value_type) == text
    back = decode_value(text.encode("utf-8"), value_type)
    if value_type == "datetime":
        assert back == (value if value.tzinfo else value.replace(tzinfo=UTC)) and back.tzinfo is not None
    else:
        assert back == value and type(back) is type(float(value) if value_type == "float" else value)


@pytest.mark.parametrize(
    ("text", "value_type", "rule"),
    [
        (b"12x", "int", "'12x' is not a 64-bit decimal integer"),
        (b" 12", "int", "' 12' is not a 64-bit decimal integer"),
        (b"9223372036854775808", "int", "is not a 64-bit decimal integer"),
        (b"1" * 5000, "int", "is not a 64-bit decimal integer"),
        (b"1_0", "float", "'1_0' is not a float"),
        (b"one", "float", "'one' is not a float"),
        (b"True", "bool", "'True' is not a bool: write true or false"),
        (b"2026-01-01T00:00:00Z", "datetime", "is not a datetime: write the decimal count of microseconds"),
        (b"\xff", "str", "is not UTF-8 text"),
    ],
)
def test_bad_field_text_is_refused_with_the_rule(text: bytes, value_type: str, rule: str) -> None:
    with pytest.raises(ValueError, match=rule.replace("(", "\\(")):
        decode_value(text, value_type)


def test_encoding_refuses_a_value_of_another_type() -> None:
    for value, value_type in ((True, "int"), (1.5, "int"), ("1", "float"), (1, "bool"), (1, "str"), (0, "datetime")):
        with pytest.raises(ValueError, match="is not a"):
            encode_value(value, value_type)


def test_decode_names_the_stream_entry_field_and_rule() -> None:
    layout = Layout.of(Reading, "start", None, "kind")
    good = {b"sensor": b"a", b"count": b"1", b"value": b"0.5", b"ok": b"true", b"seen": b"7", b"start": b"9"}
    assert layout.decode("s", "3-1", {**good, b"kind": b"point"}) == (
        "a",
        1,
        0.5,
        True,
        datetime(1970, 1, 1, 0, 0, 0, 7, tzinfo=UTC),
        None,
        datetime(1970, 1, 1, 0, 0, 0, 9, tzinfo=UTC),
        "point",
        3 * 4194304 + 3,
        datetime(1970, 1, 1, 0, 0, 0, 3000, tzinfo=UTC),
    )
    good[b"kind"] = b"point"
    missing = {k: v for k, v in good.items() if k != b"count"}
    with pytest.raises(RedisEntryError) as info:
        layout.decode("s", "3-1", missing)
    assert str(info.value) == "redis stream 's', entry 3-1, field 'count': the field is missing: the payload field is not Optional"
    assert (info.value.stream_key, info.value.entry_id, info.value.field) == ("s", "3-1", "count")
    assert isinstance(info.value, InputError)
    # A CTI carries no payload: only its start is required.
    assert layout.decode("s", "3-2", {b"kind": b"cti", b"start": b"9"})[:6] == (None,) * 6
    # A heartbeat entry is its arrival alone: no payload, no start needed.
    assert layout.decode("s", "3-2", {b"kind": b"HeartBeat"})[:8] == (None,) * 7 + ("HeartBeat",)
    assert layout.heartbeat_row(4)[5:] == (
        None,
        datetime(1970, 1, 1, 0, 0, 0, 4000, tzinfo=UTC),
        "heartbeat",
        4 * 4194304,
        datetime(1970, 1, 1, 0, 0, 0, 4000, tzinfo=UTC),
    )
    # Without a kind field every entry is a point (an interval with end=) in KIND_COLUMN.
    assert Layout.of(Reading, "start", None, None).decode("s", "3-1", good)[7] == "point"
    assert Layout.of(Reading, "start", "end", None).decode("s", "3-1", good)[8] == "interval"
    assert Layout.of(Reading, "start", None, None).schema().names[-3] == KIND_COLUMN
    with pytest.raises(RedisEntryError, match="field 'kind': 'later' is no kind"):
        layout.decode("s", "3-3", {**good, b"kind": b"later"})
    with pytest.raises(RedisEntryError, match="entry 3-4, field 'kind': the field is missing: the source reads each entry's kind from it"):
        layout.decode("s", "3-4", {k: v for k, v in good.items() if k != b"kind"})
    with pytest.raises(RedisEntryError, match="entry 3-1, field 'start': the field is missing: every entry needs its start time"):
        layout.decode("s", "3-1", {k: v for k, v in good.items() if k != b"start"})


def test_redis_errors_carry_their_rule_across_workers() -> None:
    """``rule`` is the rule (issue 30: it held the words, now in ``message``), the same after
    pickling and after the text a worker raises (``for_driver``) is read on the driver."""
    import pickle

    from tempo.rules import InputRule

    layout = Layout.of(Reading, "start", None, "kind")
    good = {b"sensor": b"a", b"count": b"1", b"value": b"0.5", b"ok": b"true", b"seen": b"7", b"start": b"9", b"kind": b"point"}
    cases = [
        ({**good, b"count": b"12x"}, InputRule.STREAM_ENTRY, "'12x' is not a 64-bit decimal integer"),
        ({k: v for k, v in good.items() if k != b"count"}, InputRule.NULL_FIELD, "the field is missing: the payload field is not Optional"),
        ({k: v for k, v in good.items() if k != b"start"}, InputRule.NULL_START, "the field is missing: every entry needs its start time"),
        ({**good, b"kind": b"later"}, InputRule.UNKNOWN_KIND, "'later' is no kind"),
    ]
    for fields, rule, words in cases:
        with pytest.raises(RedisEntryError) as info:
            layout.decode("s", "3-1", fields)
        error = info.value
        assert error.rule is rule and error.message.startswith(words) and str(error).endswith(error.message)
        for again in (pickle.loads(pickle.dumps(error)), redis_entry_error(error.for_driver())):
            assert again is not None and (type(again), again.rule, again.message, str(again)) == (
                RedisEntryError,
                rule,
                error.message,
                str(error),
            )
    with pytest.raises(RedisEventError) as event:
        add_event(None, "s", Reading("a", None, 0.5, True, T0, None), start=T0)  # type: ignore[arg-type]
    assert event.value.rule is InputRule.NULL_FIELD and event.value.message == "field 'count' is None, and it is not Optional"
    again = pickle.loads(pickle.dumps(event.value))
    assert (again.rule, again.message, str(again)) == (InputRule.NULL_FIELD, event.value.message, str(event.value))


def test_layouts_refuse_colliding_names_and_unsupported_fields() -> None:
    with pytest.raises(QueryBuildError, match="start='count' names an entry field that is already taken"):
        Layout.of(Reading, "count", None, None)
    with pytest.raises(QueryBuildError, match="end='start' names an entry field that is already taken"):
        Layout.of(Reading, "start", "start", None)
    with pytest.raises(QueryBuildError, match="'redis_order' is a column the Redis Streams source fills itself"):
        Layout.of(Reading, "redis_order", None, None)
    with pytest.raises(QueryBuildError, match="'redis_kind' is a column the Redis Streams source fills itself"):
        Layout.of(Reading, "start", None, "redis_kind")

    @dataclass(frozen=True)
    class Nested:
        inner: Reading

    with pytest.raises(UnsupportedError, match="field 'inner' of .*Nested.*reads only bool, int, float, str and datetime"):
        Layout.of(Nested, "start", None, None)


def test_add_event_writes_the_documented_fields(client: Any, stream_key: str) -> None:
    reading = Reading("a", 7, 0.25, False, T0, None)
    entry_id = add_event(client, stream_key, reading, start=T0, end=T0 + timedelta(seconds=1), kind="interval", start_field="ts")
    [(raw_id, fields)] = client.xrange(stream_key)
    assert raw_id.decode() == entry_id
    t0 = str(micros(T0)).encode()
    assert fields == {
        b"sensor": b"a",
        b"count": b"7",
        b"value": b"0.25",
        b"ok": b"false",
        b"seen": t0,
        b"ts": t0,
        b"end": str(micros(T0) + 1_000_000).encode(),
        b"kind": b"interval",
    }
    with pytest.raises(RedisEventError) as info:
        add_event(client, stream_key, Reading(None, 7, 0.25, False, T0, None), start=T0)  # type: ignore[arg-type]
    assert (
        str(info.value)
        == f"redis stream {stream_key!r}, event {Reading(None, 7, 0.25, False, T0, None)!r}: field 'sensor' is None, and it is not Optional"
    )  # type: ignore[arg-type]
    assert isinstance(info.value, InputError)
    with pytest.raises(RedisEventError, match="field 'count': '7' \\(a str\\) is not a int"):
        add_event(client, stream_key, Reading("a", "7", 0.25, False, T0, None), start=T0)  # type: ignore[arg-type]
    with pytest.raises(RedisEventError, match="field 'start': 0 \\(a int\\) is not a datetime"):
        add_event(client, stream_key, reading, start=0)  # type: ignore[arg-type]
    with pytest.raises(QueryBuildError, match="start='sensor' names an entry field that is already taken"):
        add_event(client, stream_key, reading, start=T0, start_field="sensor")
    assert client.xlen(stream_key) == 1  # refused events write nothing


# --- streaming reads with Spark -----------------------------------------------------------


@pytest.mark.spark
def test_every_entry_is_read_once_in_id_order_with_its_types(
    spark_session: Any, redis_server: str, client: Any, stream_key: str, tmp_path: Path
) -> None:
    from tempo.spark.types import frame_columns
    from tempo.tables import check_columns

    readings = [
        Reading("a", 1, 0.5, True, T0, "first"),
        Reading("b", -2, 1e-300, False, T0 + timedelta(microseconds=1), None),
        Reading("a", 2**62, float("-inf"), True, datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), ""),
    ]
    before = client.time()
    ids = [add_event(client, stream_key, r, start=T0 + timedelta(seconds=i), kind="point") for i, r in enumerate(readings)]
    ids.append(add_event(client, stream_key, None, start=T0 + timedelta(seconds=5), kind="cti"))
    after = client.time()

    source = redis_source(spark_session, stream_key, Reading, start="start", kind="kind", url=redis_server)
    assert source.df.isStreaming
    assert (source.order, source.arrival, source.start, source.kind) == (ORDER_COLUMN, ARRIVAL_COLUMN, "start", "kind")
    check_columns("readings", source, frame_columns(source.df.schema))  # what the executor checks first
    assert source.df.columns == ["sensor", "count", "value", "ok", "seen", "note", "start", "kind", ORDER_COLUMN, ARRIVAL_COLUMN]

    batches = run(source, tmp_path / "checkpoint", available_now=True)
    rows = [row for _, row_list in batches for row in entries_and_heartbeats(row_list)[0]]
    t0 = micros(T0)
    assert rows == [
        {
            "sensor": "a",
            "count": 1,
            "value": 0.5,
            "ok": True,
            "seen": t0,
            "note": "first",
            "start": t0,
            "kind": "point",
            **expected_id_columns(ids[0]),
        },
        {
            "sensor": "b",
            "count": -2,
            "value": 1e-300,
            "ok": False,
            "seen": t0 + 1,
            "note": None,
            "start": t0 + 1_000_000,
            "kind": "point",
            **expected_id_columns(ids[1]),
        },
        {
            "sensor": "a",
            "count": 2**62,
            "value": float("-inf"),
            "ok": True,
            "seen": 946684799999999,
            "note": "",
            "start": t0 + 2_000_000,
            "kind": "point",
            **expected_id_columns(ids[2]),
        },
        {
            "sensor": None,
            "count": None,
            "value": None,
            "ok": None,
            "seen": None,
            "note": None,
            "start": t0 + 5_000_000,
            "kind": "cti",
            **expected_id_columns(ids[3]),
        },
    ]
    # The arrival is the broker's clock at XADD: between its clock before and after.
    broker_ms = [int(s) * 1000 + int(us) // 1000 for s, us in (before, after)]
    assert all(broker_ms[0] * 1000 <= r[ARRIVAL_COLUMN] <= broker_ms[1] * 1000 for r in rows)
    assert [r[ORDER_COLUMN] for r in rows] == sorted(r[ORDER_COLUMN] for r in rows)


@pytest.mark.spark
def test_batches_are_capped_and_a_restart_continues_after_the_last_batch(
    spark_session: Any, redis_server: str, client: Any, stream_key: str, tmp_path: Path
) -> None:
    def produce(counts: range) -> list[str]:
        return [add_event(client, stream_key, Reading("s", n, 0.0, True, T0, None), start=T0 + timedelta(seconds=n)) for n in counts]

    def counts_by_batch(batches: list[tuple[int, list[dict[str, Any]]]]) -> list[tuple[int, list[int]]]:
        return [(i, [r["count"] for r in entries_and_heartbeats(rows, KIND_COLUMN)[0]]) for i, rows in batches]

    source = redis_source(spark_session, stream_key, Reading, url=redis_server, max_entries_per_batch=2)
    checkpoint = tmp_path / "checkpoint"
    produce(range(5))
    assert counts_by_batch(run(source, checkpoint)) == [(0, [0, 1]), (1, [2, 3]), (2, [4])]
    # Entries added while no query runs are read by the next run from the same checkpoint,
    # capped from where the last batch ended, and nothing is read twice.
    ids = produce(range(5, 8))
    batches = run(source, checkpoint)
    assert [rows for _, rows in counts_by_batch(batches)] == [[5, 6], [7]]
    assert [i for i, _ in batches] == sorted(i for i, _ in batches) and batches[0][0] >= 3
    assert [r[ORDER_COLUMN] for _, rows in batches for r in entries_and_heartbeats(rows, KIND_COLUMN)[0]] == [
        expected_id_columns(i)[ORDER_COLUMN] for i in ids
    ]


def _pyspark_before(version: tuple[int, int]) -> bool:
    try:
        import pyspark
    except ImportError:
        return True
    return tuple(int(p) for p in pyspark.__version__.split(".")[:2]) < version


@pytest.mark.spark
@pytest.mark.skipif(
    _pyspark_before((4, 2)), reason="PySpark before 4.2 asks a Python source for its latest offset once per available-now run"
)
def test_an_available_now_run_reads_what_was_there_in_capped_batches(
    spark_session: Any, redis_server: str, client: Any, stream_key: str, tmp_path: Path
) -> None:
    """``trigger(availableNow=True)`` with ``max_entries_per_batch=2`` over 5 entries: one
    run reads them all, two a batch, and ends; the next run reads what came since."""

    def produce(counts: range) -> None:
        for n in counts:
            add_event(client, stream_key, Reading("s", n, 0.0, True, T0, None), start=T0 + timedelta(seconds=n))

    source = redis_source(
        spark_session, stream_key, Reading, url=redis_server, max_entries_per_batch=2, heartbeat=timedelta(milliseconds=1)
    )
    checkpoint = tmp_path / "checkpoint"
    produce(range(5))
    first = run(source, checkpoint, available_now=True)
    assert [[r["count"] for r in entries_and_heartbeats(rows, KIND_COLUMN)[0]] for _, rows in first] == [[0, 1], [2, 3], [4]]
    produce(range(5, 8))
    second = run(source, checkpoint, available_now=True)
    assert [[r["count"] for r in entries_and_heartbeats(rows, KIND_COLUMN)[0]] for _, rows in second] == [[5, 6], [7]]


@pytest.mark.spark
def test_a_bad_entry_reaches_the_driver_as_a_redis_entry_error(
    spark_session: Any, redis_server: str, client: Any, stream_key: str, tmp_path: Path
) -> None:
    add_event(client, stream_key, Reading("a", 1, 0.5, True, T0, None), start=T0)
    bad_id = client.xadd(stream_key, {"sensor": "b", "count": "12x", "value": "1.0", "ok": "true", "seen": "0", "start": "0"}).decode()
    source = redis_source(spark_session, stream_key, Reading, url=redis_server)
    with pytest.raises(RedisEntryError) as info:
        run(source, tmp_path / "checkpoint")
    assert str(info.value) == f"redis stream {stream_key!r}, entry {bad_id}, field 'count': '12x' is not a 64-bit decimal integer"
    assert (info.value.stream_key, info.value.entry_id, info.value.field) == (stream_key, bad_id, "count")


@pytest.mark.spark
def test_redis_source_refuses_bad_arguments(spark_session: Any) -> None:
    with pytest.raises(QueryBuildError, match="max_entries_per_batch must be a positive int or None, got 0"):
        redis_source(spark_session, "k", Reading, max_entries_per_batch=0)
    with pytest.raises(QueryBuildError, match="stream_key names a Redis stream"):
        redis_source(spark_session, "", Reading)
    with pytest.raises(QueryBuildError, match="heartbeat must be a timedelta of at least 1 ms"):
        redis_source(spark_session, "k", Reading, heartbeat=timedelta(0))


# --- the stream reader's offsets, without Spark (as Spark's planner and workers call it) ---


def reader(redis_server: str, stream_key: str, **options: str) -> Any:
    from tempo.spark.streaming.redis import RedisStreamReader

    layout = Layout.of(Reading, "start", None, None).to_json()
    return RedisStreamReader({"url": redis_server, "stream_key": stream_key, "layout": layout, **options})


def produce(client: Any, stream_key: str, counts: range) -> list[str]:
    return [add_event(client, stream_key, Reading("s", n, 0.0, True, T0, None), start=T0) for n in counts]


def read_counts(r: Any, start: dict[str, Any], end: dict[str, Any]) -> list[int]:
    """The counts of the entries a batch reads (its heartbeat row left out)."""
    return [row[1] for p in r.partitions(start, end) for row in r.read(p) if row[-3] != "heartbeat"]


def read_heartbeats(r: Any, start: dict[str, Any], end: dict[str, Any]) -> list[tuple[int, int]]:
    """(order, arrival in ms) of a batch's heartbeat rows."""
    return [(row[-2], micros(row[-1]) // 1000) for p in r.partitions(start, end) for row in r.read(p) if row[-3] == "heartbeat"]


def test_offsets_move_by_the_cap_and_replays_read_the_same_entries(
    redis_server: str, client: Any, stream_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tempo.spark.streaming import redis as source_module

    monkeypatch.setattr(source_module, "PAGE_ENTRIES", 2)  # a batch of 3 reads two pages
    r = reader(redis_server, stream_key, max_entries_per_batch="3")
    start = r.initialOffset()
    assert start == {"id": "0-0", "clock_ms": 0}
    assert r.latestOffset() == start  # an empty stream: no batch
    ids = produce(client, stream_key, range(7))
    ends = [r.latestOffset() for _ in range(4)]
    assert [e["id"] for e in ends] == [ids[2], ids[5], ids[6], ids[6]]
    assert ends[3] is ends[2]  # nothing new: the same offset, so Spark runs no batch
    broker_ms = int(client.time()[0]) * 1000
    assert all(broker_ms - 60_000 <= e["clock_ms"] <= broker_ms + 1000 for e in ends)
    batches = [read_counts(r, a, b) for a, b in zip([start, *ends], ends)]
    assert batches == [[0, 1, 2], [3, 4, 5], [6], []]
    assert [read_counts(r, a, b) for a, b in zip([start, *ends], ends)] == batches  # a replay


def test_a_restarted_reader_continues_from_the_offset_spark_restores(redis_server: str, client: Any, stream_key: str) -> None:
    ids = produce(client, stream_key, range(5))
    restarted = reader(redis_server, stream_key, max_entries_per_batch="2")
    logged = {"id": ids[2], "clock_ms": 5}
    # Spark 4.0 tells a restarted source where it stands by planning (logged, logged).
    assert restarted.partitions(logged, logged) == []
    end = restarted.latestOffset()
    assert end["id"] == ids[4]
    assert read_counts(restarted, logged, end) == [3, 4]


def test_an_idle_stream_gets_a_new_offset_only_after_the_heartbeat(redis_server: str, client: Any, stream_key: str) -> None:
    import time

    ids = produce(client, stream_key, range(1))
    quiet = reader(redis_server, stream_key)
    beating = reader(redis_server, stream_key, heartbeat_ms="20")
    first, first_beat = quiet.latestOffset(), beating.latestOffset()
    assert first["id"] == first_beat["id"] == ids[0]
    time.sleep(0.05)
    assert quiet.latestOffset() is first
    beat = beating.latestOffset()
    assert beat["id"] == ids[0] and beat["clock_ms"] >= first_beat["clock_ms"] + 20
    assert read_counts(beating, first_beat, beat) == []
    assert read_heartbeats(beating, first_beat, beat) == [(heartbeat_order(beat["clock_ms"]), beat["clock_ms"])]
    assert beating.latestOffset() is beat  # the next heartbeat counts from this one
    # A restarted reader counts the next heartbeat from the clock of the offset Spark restores.
    restarted = reader(redis_server, stream_key, heartbeat_ms="60000")
    restarted.partitions(beat, beat)
    assert restarted.latestOffset() == beat


def test_heartbeat_rows_keep_order_and_arrival_growing_across_batches(redis_server: str, client: Any, stream_key: str) -> None:
    """Entries appended right after an offset read the clock (often in the same millisecond)
    and idle stretches with heartbeats, in turns: over all batches the order column only
    grows and the arrivals never decrease (what the live executor requires of an input),
    every batch that read the stream to a clock past its last entry ends with a heartbeat at
    that clock, and a replay of the same offsets gives the same rows."""
    import time

    r = reader(redis_server, stream_key, heartbeat_ms="1")
    offsets = [r.initialOffset()]
    for n in range(12):
        if n % 3:
            produce(client, stream_key, range(n, n + 2))
        else:
            time.sleep(0.003)
        end = r.latestOffset()
        if end is not offsets[-1]:
            offsets.append(end)
    batches = [[row for p in r.partitions(a, b) for row in r.read(p)] for a, b in zip(offsets, offsets[1:])]
    rows = [row for batch in batches for row in batch]
    orders, arrivals = [row[-2] for row in rows], [row[-1] for row in rows]
    assert orders == sorted(set(orders)) and arrivals == sorted(arrivals)
    assert sorted(row[1] for row in rows if row[-3] != "heartbeat") == sorted(n + i for n in range(12) if n % 3 for i in (0, 1))
    beats = [row for row in rows if row[-3] == "heartbeat"]
    assert len(beats) >= 3  # the idle turns at least
    for a, b, batch in zip(offsets, offsets[1:], batches):
        expected = batch_heartbeat(a, b)
        assert [micros(row[-1]) // 1000 for row in batch if row[-3] == "heartbeat"] == ([] if expected is None else [expected])
    assert [[row for p in r.partitions(a, b) for row in r.read(p)] for a, b in zip(offsets, offsets[1:])] == batches
