"""Kafka topics as inputs, on Spark's Kafka connector, and the producer helpers that write
records the way the inputs read them.

A topic of ``P`` partitions becomes ``P`` inputs of one stream, ``<name>/p<i>``, merged by
arrival as any inputs of a query are (docs/streaming.md, "Kafka topics"): each partition is
ordered by its offsets and arrives at its records' timestamps, which are the broker's
log-append times on a topic created with ``message.timestamp.type=LogAppendTime``
(``create_topic`` does). An item of one partition is processed once every other partition
has reached a later arrival, which is how Azure Stream Analytics merges the partitions of an
Event Hub: the merge waits for the slowest partition, and a heartbeat record (``send_heartbeats``)
moves an idle one. The in-memory executor gives the same result for the same records as
per-partition inputs, whatever the micro-batches.

The value of a record is decoded from JSON by default (``encode_record`` writes it): the
payload's fields by name, the times as ISO-8601 text, the kind as text. ``decode=`` takes a
function from the value column (binary) to a struct column with those fields, for Avro
(``pyspark.sql.avro.functions.from_avro``) or any encoding of the user's.

The Spark side needs the connector's jars (``bash java/fetch``, ``tempo.spark.connector_jars``);
the producer helpers need ``confluent-kafka`` (the ``kafka`` extra), imported only where a
client is made.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as st

from tempo.errors import QueryBuildError
from tempo.events import EventShape
from tempo.expr.schema import record_fields
from tempo.settings import AdvanceTimeSettings
from tempo.spark.sources import DataFrameSource
from tempo.spark.types import payload_schema
from tempo.ticks import to_ticks

if TYPE_CHECKING:
    from tempo.api.stream import Stream

T = TypeVar("T")

PARTITION_COLUMN = "kafka_partition"
"""The partition a row was read from (an int): a payload field of this name receives it, so
a query can keep a substream per partition (``over=lambda r: r.kafka_partition``)."""

OFFSET_COLUMN = "kafka_offset"
"""The order of a partition's rows: the record's offset."""

ARRIVAL_COLUMN = "kafka_arrival"
"""The arrival time of a row: the record's timestamp (the broker's log-append time on a
topic created by ``create_topic``)."""

KIND_COLUMN = "kafka_kind"
"""The kind of a row: the value's kind field (``kind=``, else ``tempo_kind``) when present,
else ``point`` (``interval`` when ``end=`` is given)."""

DEFAULT_KIND_FIELD = "tempo_kind"
"""The field of a value that holds its kind when ``kind=`` is not given: heartbeats
(``send_heartbeats``) write ``{"tempo_kind": "heartbeat"}``."""

HEARTBEAT = "heartbeat"

Decoder = Callable[[Column], Column]
"""From the records' value column (binary) to a struct column of the payload's fields, the
time fields and the kind field (any missing field is read as null)."""


def input_name(name: str, partition: int) -> str:
    """The name of the input reading partition ``partition`` of the stream ``name``."""
    return f"{name}/p{partition}"


def value_schema(payload_type: type, start: str | None, end: str | None, kind: str) -> st.StructType:
    """The schema values are decoded with: the payload's fields by their Spark types (a field
    named ``PARTITION_COLUMN`` is the partition's, not the value's), the start and end fields
    as timestamps, the kind field as text."""
    fields = [f for f in payload_schema(payload_type).fields if f.name != PARTITION_COLUMN]
    names = {f.name for f in fields}
    for time_field in (start, end):
        if time_field is not None and time_field not in names:
            fields.append(st.StructField(time_field, st.TimestampType(), True))
    if kind not in names:
        fields.append(st.StructField(kind, st.StringType(), True))
    return st.StructType(fields)


def kafka_rows(
    records: DataFrame,
    payload_type: type,
    *,
    start: str | None,
    end: str | None,
    kind: str | None,
    decode: Decoder | None,
) -> DataFrame:
    """The connector's rows (``key, value, topic, partition, offset, timestamp, ...``) as a
    table source's: the decoded fields, ``PARTITION_COLUMN``, ``OFFSET_COLUMN``,
    ``ARRIVAL_COLUMN`` and ``KIND_COLUMN``."""
    kind_field = kind if kind is not None else DEFAULT_KIND_FIELD
    schema = value_schema(payload_type, start, end, kind_field)
    # A value that is not JSON of the schema reads as nulls (from_json's PERMISSIVE mode), and
    # a null where the payload field is not optional is the InputError naming the row, as for
    # a JSON file's rows.
    value = decode(F.col("value")) if decode is not None else F.from_json(F.col("value").cast("string"), schema)
    decoded = records.select(
        value.alias("v"),
        F.col("partition").cast("long").alias(PARTITION_COLUMN),
        F.col("offset").alias(OFFSET_COLUMN),
        F.col("timestamp").alias(ARRIVAL_COLUMN),
    )
    default_kind = "interval" if end is not None else "point"
    columns: list[Column] = [F.col(f"v.{f.name}").alias(f.name) for f in schema.fields if f.name != kind_field]
    columns += [
        F.col(PARTITION_COLUMN),
        F.col(OFFSET_COLUMN),
        F.col(ARRIVAL_COLUMN),
        F.coalesce(F.col(f"v.{kind_field}"), F.lit(default_kind)).alias(KIND_COLUMN),
    ]
    return decoded.select(*columns)


def starting_option(starting: str | datetime) -> tuple[str, str]:
    """The connector's option for where a new query starts reading each partition:
    ``"earliest"``, ``"latest"``, or the first record at or after an instant."""
    if isinstance(starting, datetime):
        return "startingTimestamp", str(to_ticks(starting) // 1000)
    if starting in ("earliest", "latest"):
        return "startingOffsets", starting
    raise QueryBuildError(f'starting= is "earliest", "latest" or a datetime, got {starting!r}')


def kafka_stream(
    spark: SparkSession,
    name: str,
    topic: str,
    payload_type: type[T],
    *,
    bootstrap: str,
    partitions: int | Sequence[int] | None = None,
    shape: EventShape = EventShape.POINT,
    settings: AdvanceTimeSettings | None = None,
    start: str | None = None,
    end: str | None = None,
    kind: str | None = None,
    decode: Decoder | None = None,
    starting: str | datetime = "earliest",
    bounded: bool = False,
    options: Mapping[str, str] | None = None,
) -> Stream[T]:
    """The records of ``topic`` as a stream: one input per partition (``input_name``),
    merged by arrival (see the module's docstring).

    ``partitions``: how many the topic has, or which to read; None asks the broker (needs the
    ``kafka`` extra). A partition added to the topic later is not read by this stream: build
    the query again on a new checkpoint. ``start`` (and ``end``, ``kind``) name fields of the
    value, as ``TableSource`` takes columns; without ``start`` an event's start is its
    arrival. ``settings``: each partition's ``AdvanceTimeSettings``, as for any input (the
    stream's CTI is the least of its partitions'). ``starting``:
    where a new query reads each partition from (a restart continues from its checkpoint).
    ``bounded``: read what the topic holds now, as a batch (for ``SparkExecutor`` and the
    in-memory executors), rather than live. ``options``: more of the connector's options
    (``kafka.security.protocol``, ``maxOffsetsPerTrigger``, ...)."""
    from tempo.api.stream import Stream

    if not isinstance(topic, str) or not topic:
        raise QueryBuildError(f"topic names a Kafka topic: a non-empty str, got {topic!r}")
    chosen = _partitions(bootstrap, topic, partitions)
    option, where = starting_option(starting)
    reader: Any = spark.read if bounded else spark.readStream
    reader = reader.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    reader = reader.option(option, where).option("includeHeaders", "false")
    if bounded:
        reader = reader.option("endingOffsets", "latest")
    else:
        reader = reader.option("failOnDataLoss", "true")
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    # One reader for the whole topic: Spark reads it once per micro-batch, and each
    # partition's input is a filter of it.
    rows = kafka_rows(reader.load(), payload_type, start=start, end=end, kind=kind, decode=decode)
    arrival_start = start is None
    streams = [
        Stream.create(
            input_name(name, p),
            DataFrameSource(
                rows.where(F.col(PARTITION_COLUMN) == p),
                payload_type,
                start=None if arrival_start else start,
                end=end,
                kind=KIND_COLUMN,
                order=OFFSET_COLUMN,
                arrival=ARRIVAL_COLUMN,
            ),
            shape,
            settings,
        )
        for p in chosen
    ]
    merged = streams[0]
    for other in streams[1:]:
        merged = merged.union(other)
    return merged


def _partitions(bootstrap: str, topic: str, partitions: int | Sequence[int] | None) -> list[int]:
    if partitions is None:
        found = topic_partitions(bootstrap, topic)
        if not found:
            raise QueryBuildError(f"Kafka topic {topic!r} at {bootstrap} does not exist (or has no partitions)")
        return found
    if isinstance(partitions, int) and not isinstance(partitions, bool):
        if partitions < 1:
            raise QueryBuildError(f"partitions= is how many the topic has (at least 1), got {partitions!r}")
        return list(range(partitions))
    if isinstance(partitions, bool):
        raise QueryBuildError(f"partitions= is how many the topic has, or which: an int or a list of ints, got {partitions!r}")
    chosen = list(partitions)
    if not chosen or any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in chosen) or len(set(chosen)) != len(chosen):
        raise QueryBuildError(f"partitions= lists distinct partition numbers (ints from 0), got {partitions!r}")
    return sorted(chosen)


# ---- the producer side (confluent-kafka) ----------------------------------------------------
def _admin(bootstrap: str) -> Any:
    try:
        from confluent_kafka.admin import AdminClient
    except ImportError as exc:  # pragma: no cover - the extra is installed in dev
        raise QueryBuildError("the Kafka helpers need confluent-kafka: pip install 'tempo[kafka]'") from exc
    return AdminClient({"bootstrap.servers": bootstrap})


def topic_partitions(bootstrap: str, topic: str, timeout: float = 10.0) -> list[int]:
    """The partitions ``topic`` has now (empty when it does not exist)."""
    admin = _admin(bootstrap)
    metadata = admin.list_topics(topic, timeout=timeout)
    found = metadata.topics.get(topic)
    if found is None or found.error is not None:
        return []
    return sorted(found.partitions)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, *, log_append_time: bool = True, timeout: float = 30.0) -> None:
    """Create ``topic`` with ``partitions`` partitions (replication factor 1), whose record
    timestamps are the broker's log-append times when ``log_append_time`` (tempo's arrival)."""
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # exported without __all__

    config = {"message.timestamp.type": "LogAppendTime"} if log_append_time else {}
    admin = _admin(bootstrap)  # kept until the result is in: a client destroyed earlier cancels it
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config)])[topic].result(timeout)


def add_partitions(bootstrap: str, topic: str, total: int, timeout: float = 30.0) -> None:
    """Grow ``topic`` to ``total`` partitions."""
    from confluent_kafka.admin import NewPartitions  # type: ignore[attr-defined]  # exported without __all__

    admin = _admin(bootstrap)
    admin.create_partitions([NewPartitions(topic, total)])[topic].result(timeout)


def _iso(value: datetime) -> str:
    aware = value if value.tzinfo is not None else value.replace(tzinfo=timezone.utc)
    return aware.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def encode_record(
    payload: Any,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    kind: str | None = None,
    fields: Mapping[str, str] | None = None,
) -> bytes:
    """The JSON value ``kafka_stream`` decodes: the payload's fields (datetimes as ISO-8601
    text in UTC, None left out), ``start``/``end`` under the field names ``fields`` maps
    ``"start"``/``"end"``/``"kind"`` to (default: those words, ``tempo_kind`` for the kind)."""
    names = {"start": "start", "end": "end", "kind": DEFAULT_KIND_FIELD, **(fields or {})}
    out: dict[str, Any] = {}
    if payload is not None:
        for f in record_fields(type(payload)):
            value = getattr(payload, f.name)
            if value is None or f.name == PARTITION_COLUMN:
                continue
            out[f.name] = _iso(value) if isinstance(value, datetime) else value
    for what, value in (("start", start), ("end", end)):
        if value is not None:
            out[names[what]] = _iso(value)
    if kind is not None:
        out[names["kind"]] = kind
    return json.dumps(out, allow_nan=True).encode()


def producer(bootstrap: str, **config: Any) -> Any:
    """A confluent-kafka ``Producer`` for ``bootstrap`` (idempotent: a retried send is not
    written twice), with ``config`` added (dots as underscores: ``linger_ms=5``)."""
    try:
        from confluent_kafka import Producer
    except ImportError as exc:  # pragma: no cover
        raise QueryBuildError("the Kafka helpers need confluent-kafka: pip install 'tempo[kafka]'") from exc
    settings = {"bootstrap.servers": bootstrap, "enable.idempotence": True, **{k.replace("_", "."): v for k, v in config.items()}}
    return Producer(settings)


def send_heartbeats(client: Any, topic: str, partitions: Sequence[int], kind_field: str = DEFAULT_KIND_FIELD) -> None:
    """One heartbeat record in each of ``partitions``: on a log-append-time topic it says that
    the partition has reached the broker's clock, which lets the other partitions' records
    through the merge while this one is idle. ``kind_field``: the value field the stream reads
    kinds from (its ``kind=``). Flushes the producer."""
    value = json.dumps({kind_field: HEARTBEAT}).encode()
    for p in partitions:
        client.produce(topic, value=value, partition=p)
    client.flush()
