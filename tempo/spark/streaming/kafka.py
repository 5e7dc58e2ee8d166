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

``KafkaSink`` writes a live query's released output to a topic, each batch once for readers
that read committed records (Kafka transactions, see its docstring); ``read_kafka_output``
reads it back as ``read_committed`` reads a ``ParquetSink``'s.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as st

from tempo.errors import QueryBuildError, TempoError
from tempo.events import EventShape
from tempo.expr.schema import record_fields
from tempo.settings import AdvanceTimeSettings
from tempo.spark.sources import DataFrameSource, SharedScan
from tempo.spark.streaming.executor import CRASH_AT
from tempo.spark.streaming.sinks import Sink
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

_log = logging.getLogger("tempo.kafka")
"""Where the Kafka clients tempo makes log (librdkafka's lines, instead of stderr)."""

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
    over: Callable[[T], Any] | None = None,
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
    stream's CTI is the least of its partitions'). ``over``: substreams by a key of the
    payload in each partition, as ``Stream.create`` takes it (ASA's ``OVER``); a key whose
    records all go to one partition (Kafka's keyed records) has its own clock there. ``starting``:
    where a new query reads each partition from (a restart continues from its checkpoint).
    ``bounded``: read what the topic holds now, as a batch (for ``SparkExecutor`` and the
    in-memory executors), rather than live. ``options``: more of the connector's options
    (``kafka.security.protocol``, ``maxOffsetsPerTrigger``, ...)."""
    from tempo.api.stream import Stream

    if not isinstance(topic, str) or not topic:
        raise QueryBuildError(f"topic names a Kafka topic: a non-empty str, got {topic!r}")
    chosen = _partitions(bootstrap, topic, partitions)
    option, where = starting_option(starting)
    arrival_start = start is None

    def rows_of(assigned: list[int]) -> DataFrame:
        reader: Any = spark.read if bounded else spark.readStream
        reader = reader.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("assign", json.dumps({topic: assigned}))
        reader = reader.option(option, where).option("includeHeaders", "false")
        if bounded:
            reader = reader.option("endingOffsets", "latest")
        else:
            reader = reader.option("failOnDataLoss", "true")
        for key, value in (options or {}).items():
            reader = reader.option(key, value)
        return kafka_rows(reader.load(), payload_type, start=start, end=end, kind=kind, decode=decode)

    # Live, one reader of every partition, which the live executor reads once a micro-batch
    # and splits by partition (a SharedScan); bounded, one reader per partition assigned that
    # partition alone. Spark's Kafka source does not push a filter on the partition down, so
    # inputs filtered out of one reader would each read and decode every partition's records.
    scan = None if bounded else SharedScan(rows_of(chosen), PARTITION_COLUMN)

    def source(p: int) -> DataFrameSource[T]:
        df = rows_of([p]) if scan is None else scan.df.where(F.col(PARTITION_COLUMN) == p)
        return DataFrameSource(
            df,
            payload_type,
            None if arrival_start else start,
            shared=None if scan is None else (scan, p),
            end=end,
            kind=KIND_COLUMN,
            order=OFFSET_COLUMN,
            arrival=ARRIVAL_COLUMN,
        )

    streams = [Stream.create(input_name(name, p), source(p), shape, settings, over=over) for p in chosen]
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
    settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": _log}  # librdkafka's lines to logging
    return AdminClient(settings)


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


def json_value(value: Any) -> Any:
    """A field's value as JSON has it, the one encoding of the records tempo writes:
    datetimes as ISO-8601 text in UTC (microseconds, ``Z``), dates as ISO-8601 dates,
    durations as whole microseconds, records and lists field by field."""
    if isinstance(value, datetime):
        return _iso(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value // timedelta(microseconds=1)
    if isinstance(value, dict):
        return {k: json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    return value


def from_json_value(value: Any, arrow_type: Any) -> Any:
    """The inverse of ``json_value`` for a column of ``arrow_type``."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_timestamp(arrow_type):
        return datetime.fromisoformat(value).astimezone(timezone.utc)
    if pa.types.is_date(arrow_type):
        return date.fromisoformat(value)
    if pa.types.is_duration(arrow_type):
        return timedelta(microseconds=value)
    if pa.types.is_struct(arrow_type):
        return {f.name: from_json_value(value.get(f.name), f.type) for f in arrow_type}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [from_json_value(v, arrow_type.value_type) for v in value]
    return value


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
            out[f.name] = json_value(value)
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
    settings = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "logger": _log,
        **{k.replace("_", "."): v for k, v in config.items()},
    }
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


# ---- the sink --------------------------------------------------------------------------------
BATCH_HEADER = "tempo_batch"
ROW_HEADER = "tempo_row"
"""The headers of each record a ``KafkaSink`` writes: its batch and its place in the batch
(release order, and what a reader drops repeats by)."""


class KafkaSinkError(TempoError):
    """A ``KafkaSink`` cannot write: a key column the output does not have, a broker that
    refuses the transaction, or a newer writer of the same ``transactional_id`` (fenced)."""


class KafkaSink(Sink):
    """A live query's released output into the Kafka topic ``topic``, one record per released
    row (events, end edges, CTIs: ``tempo.result.released_table``'s columns), its value that
    row as JSON (``json_value``: times ISO-8601, the kind in ``tempo_kind``), its headers
    ``tempo_batch`` and ``tempo_row``; rejected input events go to ``rejections`` (default
    ``<topic>-rejections``) the same way. Topics that do not exist are created with
    ``partitions`` partitions (``create_topic``: log-append time).

    **Where records go.** Without ``key``, every record goes to partition 0, in release
    order. With ``key`` (a column of the output: a payload field, or ``tempo_key``), a record
    is keyed by that column's value as text and goes to the partition of its key (Kafka's
    murmur2 partitioner, as the Java clients place keys), so each key's records are in
    release order in one partition; a row without a key value (a CTI) goes to every
    partition, so that a reader of one partition sees time advance.

    **Exactly once** (``transactions=True``, the default), for readers that read committed
    records only (``isolation.level=read_committed``, as ``read_kafka_output`` and Spark's
    connector with ``kafka.isolation.level`` do): each batch is one Kafka transaction, which
    also commits the batch's number as an offset of the consumer group ``transactional_id``
    (Kafka's transactional offset commits), so the records and the record of their batch
    become visible together or not at all. A batch that released nothing writes no
    transaction. After a crash, the new sink's producer takes over the ``transactional_id``:
    the broker aborts the transaction the dead one left open (its records are never seen by
    committed readers), and fences the old producer if it is still alive. The batch the
    query runs again is skipped when its transaction had committed (the crash came between
    the transaction and tempo's commit record). Give each query writing a topic its own
    ``transactional_id`` (by default ``tempo:<topic>``): two writers of one id fence each
    other.

    **At least once** (``transactions=False``): each batch's records are sent by an
    idempotent producer and flushed before tempo's commit record; a batch run again after a
    crash is sent again, with the same ``tempo_batch`` and ``tempo_row``, by which a reader
    drops the repeats (``read_kafka_output`` does). Cheaper per batch (bench/README.md), and
    readable by readers that do not read committed records only.

    ``config``: more producer settings (librdkafka's names: ``{"compression.type": "lz4"}``).
    Needs confluent-kafka (the ``kafka`` extra); the producer runs on the driver, where the
    released output is."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        rejections: str | None = None,
        key: str | None = None,
        partitions: int = 1,
        transactions: bool = True,
        transactional_id: str | None = None,
        config: Mapping[str, Any] | None = None,
        timeout: float = 60.0,
    ) -> None:
        for what, name in (("topic", topic), ("rejections", rejections)):
            if name is not None and (not isinstance(name, str) or not name):
                raise QueryBuildError(f"KafkaSink's {what}= names a Kafka topic: a non-empty str, got {name!r}")
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise QueryBuildError(f"KafkaSink's partitions= is how many partitions a topic it creates has (at least 1), got {partitions!r}")
        self.bootstrap = bootstrap
        self.topic = topic
        self.rejections = rejections if rejections is not None else f"{topic}-rejections"
        self.key = key
        self.partitions = partitions
        self.transactions = transactions
        self.transactional_id = transactional_id if transactional_id is not None else f"tempo:{topic}"
        self.config = dict(config or {})
        self.timeout = timeout
        self.crash_at = os.environ.get(CRASH_AT)
        self._producer: Any = None
        self._group: Any = None
        self._topic_partitions: dict[str, list[int]] = {}
        self.last_batch: int | None = None
        """The last batch this sink knows to be in the topic (read back when it opens)."""

    def _open(self) -> None:
        if self._producer is not None:
            return
        try:
            from confluent_kafka import Consumer, Producer, TopicPartition
        except ImportError as exc:  # pragma: no cover - the extra is installed in dev
            raise QueryBuildError("KafkaSink needs confluent-kafka: pip install 'tempo[kafka]'") from exc
        for topic in (self.topic, self.rejections):
            found = topic_partitions(self.bootstrap, topic)
            if not found:
                try:
                    create_topic(self.bootstrap, topic, self.partitions)
                except Exception as exc:  # another writer may have made it meanwhile
                    if "TOPIC_ALREADY_EXISTS" not in str(exc):
                        raise KafkaSinkError(f"KafkaSink could not create topic {topic!r} at {self.bootstrap}: {exc}") from exc
                found = topic_partitions(self.bootstrap, topic)
            self._topic_partitions[topic] = found
        settings: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",  # the Java clients' placement of keys
            "logger": _log,
            **self.config,
        }
        if not self.transactions:
            self._producer = Producer(settings)
            return
        producer = Producer({**settings, "transactional.id": self.transactional_id})
        try:
            # Takes the id over: aborts what a crashed writer left open, fences a live one.
            producer.init_transactions(self.timeout)
            group = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": self.transactional_id,
                    "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "logger": _log,
                }
            )
            committed = _retrying(lambda: group.committed([TopicPartition(self.topic, 0)], timeout=self.timeout)[0].offset, self.timeout)
        except Exception as exc:
            raise KafkaSinkError(
                f"KafkaSink could not open transactions on {self.topic!r} at {self.bootstrap} (transactional_id {self.transactional_id!r}): {exc}"
            ) from exc
        self.last_batch = committed - 1 if committed >= 0 else None
        self._producer, self._group = producer, group

    def _records(self, topic: str, batch: int, table: Any) -> list[tuple[bytes | None, int | None, bytes, list[tuple[str, bytes]]]]:
        """``(key, partition, value, headers)`` of each record of ``table``'s rows."""
        if self.key is not None and table.num_rows and self.key not in table.column_names:
            raise KafkaSinkError(
                f"KafkaSink's key={self.key!r} is no column of the output written to {topic!r} (its columns: {', '.join(table.column_names)})"
            )
        keyed = self.key is not None and self.key in table.column_names
        out: list[tuple[bytes | None, int | None, bytes, list[tuple[str, bytes]]]] = []
        for row, values in enumerate(table.to_pylist()):
            value = json.dumps({k: json_value(v) for k, v in values.items()}, allow_nan=True).encode()
            headers = [(BATCH_HEADER, str(batch).encode()), (ROW_HEADER, str(row).encode())]
            key = values.get(self.key) if keyed and self.key is not None else None
            if key is not None:
                out.append((str(key).encode(), None, value, headers))
            elif keyed:  # no key value (a CTI): to every partition
                out.extend((None, p, value, headers) for p in self._topic_partitions[topic])
            else:
                out.append((None, 0, value, headers))
        return out

    def write(self, spark: SparkSession, batch: int, events: Any, rejections: Any) -> None:
        self._open()
        if self.last_batch is not None and batch <= self.last_batch:
            return  # its transaction committed before the crash that made the query run it again
        records = [
            (topic, r) for topic, table in ((self.topic, events), (self.rejections, rejections)) for r in self._records(topic, batch, table)
        ]
        if not records:
            return
        producer = self._producer
        try:
            if self.transactions:
                producer.begin_transaction()
            for topic, (key, partition, value, headers) in records:
                self._produce(topic, key, partition, value, headers)
            if self.transactions:
                from confluent_kafka import TopicPartition

                producer.send_offsets_to_transaction(
                    [TopicPartition(self.topic, 0, batch + 1)], self._group.consumer_group_metadata(), self.timeout
                )
                producer.flush(self.timeout)
                if self.crash_at == f"kafka:{batch}":  # the testing hook: records sent, not committed
                    os.kill(os.getpid(), signal.SIGKILL)
                producer.commit_transaction(self.timeout)
            else:
                left = producer.flush(self.timeout)
                if left:
                    raise KafkaSinkError(
                        f"KafkaSink: {left} records of batch {batch} were not delivered to {self.topic!r} within {self.timeout} s"
                    )
        except KafkaSinkError:
            raise
        except Exception as exc:
            raise KafkaSinkError(f"KafkaSink could not write batch {batch} to {self.topic!r} at {self.bootstrap}: {exc}") from exc
        self.last_batch = batch

    def _produce(self, topic: str, key: bytes | None, partition: int | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        extra: dict[str, Any] = {} if partition is None else {"partition": partition}
        while True:
            try:
                self._producer.produce(topic, value=value, key=key, headers=headers, **extra)
                return
            except BufferError:  # the producer's queue is full: let it send
                self._producer.poll(0.1)

    def __repr__(self) -> str:
        return f"KafkaSink({self.bootstrap!r}, {self.topic!r})"


def _retrying(call: Callable[[], T], timeout: float) -> T:
    """``call()``, again while it fails with an error Kafka calls retriable (a group
    coordinator still loading, just after the broker started or the group was made)."""
    from confluent_kafka import KafkaError, KafkaException

    # librdkafka does not mark a group coordinator that moved or is still loading retriable
    coordinator = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.COORDINATOR_NOT_AVAILABLE}
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            again = isinstance(error, KafkaError) and (error.retriable() or error.code() in coordinator)
            if not again or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def committed_records(bootstrap: str, topic: str, partitions: Sequence[int], timeout: float = 60.0) -> Iterator[Any]:
    """The committed records of ``partitions`` of ``topic`` as confluent-kafka messages, each
    partition from its first record to its end now, in offset order within a partition
    (control records and aborted transactions' records left out)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"tempo-reader-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "logger": _log,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, -2) for p in partitions])  # -2: from the first record
        ended: set[int] = set()
        while len(ended) < len(partitions):
            message: Any = consumer.poll(timeout)
            if message is None:
                raise KafkaSinkError(f"reading {topic!r} at {bootstrap}: no record and no end of partition within {timeout} s")
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    ended.add(message.partition())
                    continue
                raise KafkaSinkError(f"reading {topic!r} at {bootstrap}: {error}")
            yield message
    finally:
        consumer.close()


def read_kafka_output(bootstrap: str, topic: str, payload_type: type, *, rejections: bool = False, timeout: float = 60.0) -> Any:
    """What a ``KafkaSink`` committed to ``topic`` (or, with ``rejections``, to its rejections
    topic, ``<topic>-rejections``), as one pyarrow Table in release order, as ``read_committed``
    gives a ``ParquetSink``'s: ``tempo_batch`` and ``tempo_row`` first, then the released
    table's columns for ``payload_type``, the output's payload class (with ``rejections``:
    ``Result.rejections_table``'s columns, ``payload_type`` the input's), each row once (a
    CTI written to every partition, or a batch sent again by an at-least-once sink, is one
    row)."""
    import pyarrow as pa

    from tempo.result import Result, released_table

    name = f"{topic}-rejections" if rejections else topic
    if rejections:
        schema = Result([], [], {}, [], [], {}, None, payload_type, {name: payload_type}).rejections_table().schema
    else:
        schema = released_table([], payload_type).schema
    found = topic_partitions(bootstrap, name)
    if not found:
        raise KafkaSinkError(f"Kafka topic {name!r} at {bootstrap} does not exist: no KafkaSink wrote it")
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    for message in committed_records(bootstrap, name, found, timeout):
        headers = dict(message.headers() or [])
        if BATCH_HEADER not in headers or ROW_HEADER not in headers:
            raise KafkaSinkError(
                f"reading {name!r} at {bootstrap}: the record at partition {message.partition()}, offset {message.offset()} "
                f"has no {BATCH_HEADER}/{ROW_HEADER} headers: no KafkaSink wrote it"
            )
        place = (int(headers[BATCH_HEADER]), int(headers[ROW_HEADER]))
        rows.setdefault(place, json.loads(message.value()))
    ordered = sorted(rows)
    columns: dict[str, Any] = {
        BATCH_HEADER: pa.array([b for b, _ in ordered], pa.int64()),
        ROW_HEADER: pa.array([r for _, r in ordered], pa.int64()),
    }
    for f in schema:
        columns[f.name] = pa.array([from_json_value(rows[place].get(f.name), f.type) for place in ordered], f.type)
    return pa.table(columns)
