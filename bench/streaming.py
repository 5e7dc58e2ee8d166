"""W2 (or W5) as a live query: tempo's StreamingExecutor against hand-written Structured Streaming.

    python bench/streaming.py --n 2000000 [--batches 10000,100000,1000000] [--max-files 20]
                              [--engines tempo,handwritten] [--workload W2|W5]
                              [--source files|kafka] [--partitions 4] [--bootstrap HOST:PORT]
                              [--sink parquet,delta]

The first N events of the shared data set (``../shared/bench/``) are cut into batches of one
size each, prepared beforehand. For each batch size and engine (one after the other, in one
Spark session) a fresh query reads an empty input, and the batches are delivered to it one
at a time, each when the previous one has been processed (``processAllAvailable``), so every
micro-batch reads exactly one batch and its latency is not queueing (``processAllAvailable``
is called again when it returned before the batch was read: ``stream_batches``). Two sources:

* ``--source files`` (the default): the batches are Parquet files written outside a watched
  directory and landed into it (an atomic rename, modification times increasing).
* ``--source kafka``: the batches are records of a Kafka topic of ``--partitions``
  partitions (default 4), a topic per (batch size, engine, sink), on a broker the bench starts in
  its work directory (``tempo.spark.streaming.kafka_broker``) unless ``--bootstrap`` names
  one. A record is an event's JSON (``kafka_stream``'s encoding, ``encode_record``; encoded
  before any timing), keyed by the event's key and sent to partition ``key % partitions``,
  so each partition holds its keys, in the data's arrival order. A batch is produced in one
  Kafka transaction (confluent-kafka, lingering and batching), ending with a heartbeat in
  every partition (``send_heartbeats``, after the records are appended: the arrival merge of
  tempo's per-partition inputs lets every record of the batch through); both engines read
  with ``kafka.isolation.level=read_committed`` and no ``maxOffsetsPerTrigger``, so a batch is
  invisible until its commit and then read whole by one micro-batch (the table's "reads"
  column counts the micro-batches that read records: one per batch when it held, see
  ``KAFKA_OPTIONS``).

Per engine and batch size the table shows:

* events/s: the streamed events / (from the first batch delivered to the last processed).
  For Kafka this is the query's own rate, the producer's time left out: events / the sum
  over batches of (commit returned -> processed); "events/s with produce" counts from the
  first record produced instead;
* median latency: a file landed -> the query has processed and committed it
  (``processAllAvailable`` returned); for Kafka, the batch's first record produced ->
  processed, shown with its two parts, "produce" (first record produced -> the
  transaction committed: the batch visible) and "query" (visible -> processed); and the
  engine's own median batch time (tempo: ``BatchProgress.seconds``, the driver's work;
  Spark: ``triggerExecution`` of the batches that read events);
* for tempo, two parts of its median batch (``BatchProgress.phases``): "read", Spark's job
  bringing the batch's rows to the driver (the source read and decoded; with the ``spark``
  engine the bulk job), and "engine", tempo's engine on the driver; and "ran on", the
  engines that ran the batches (``BatchProgress.engine``), with how many each;
* for tempo, the median time of its sink's ``write`` and ``publish`` in a batch that read
  events (``--sink parquet``: ``ParquetSink``, the default; ``--sink delta``: ``DeltaSink``;
  ``--sink parquet,delta``: each tempo engine once with each),
  timed by a wrapper in this file, and part of ``BatchProgress.seconds``;
* reads and micro-batches: the micro-batches that read rows (one per batch when each batch
  was read whole by one) and all the micro-batches run while the batches were streamed;
* the end: the time to release the windows still open after the last batch (tempo:
  ``LiveQuery.flush``; Spark: two more batches of one sentinel row, see ``run_handwritten``);
* the checksum of the final output (W2's five values, WORKLOADS.md), exact against the
  published one when the whole data set was streamed, else against the other runs'.

The engines do the same work: W2 (count and sum per key and tumbling 60 s window) with
windows released as event time passes. tempo: the query of ``bench/tempo_queries.py`` with
a CTI after every 1000th event 120 s behind it (``--ctis every-1000``; on Kafka the same
settings for each partition's input); Spark: a watermark 120 s behind the largest event
time. No event is later than 120 s, so neither drops a row (the Spark row counts it dropped
are shown) and the final windows are the same.
With ``--workload W5`` both run per-key sessions with a 5 s gap instead (tempo: W5 of
``bench/tempo_queries.py``; Spark: ``session_window`` with a gap of 5 s - 1 µs, see
``SESSION_GAP``), checked by W5's checksum.
With ``--workload W2-hop`` tempo's engines run W2 and then each window through a second
tumbling 60 s window per key (``bench/tempo_queries.py``'s ``w2_hop``: W2's windows again,
checked by W2's checksum), which the cluster engine runs as two keyed nodes in sequence;
the hand-written query has no second node to run and is not run.
See bench/README.md, "Live queries" and "Live queries on Kafka (issue 33)".
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # `import bench`, and tempo from this checkout

from bench.checksums import Checksum, differences, normalize, reference  # noqa: E402
from bench.run import RESULTS, default_data_dir, ensure_data, fmt_rate, make_spark  # noqa: E402

from tempo.spark.streaming.sinks import DeltaSink, ParquetSink, Sink  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from tempo import Stream

ENGINES = ("tempo", "tempo-driver", "tempo-vectorised", "tempo-spark", "tempo-cluster", "handwritten")
"""``tempo``: ``StreamingExecutor``'s default engine choice (``auto``); ``tempo-driver`` /
``tempo-vectorised`` / ``tempo-spark``: every batch on that engine; ``tempo-cluster``: the
cluster engine (the windows' state on Spark's executors, docs/streaming.md)."""
DEFAULT_ENGINES = ("tempo", "handwritten")
ORIGIN_US = 1_704_067_200 * 1_000_000
"""2024-01-01T00:00:00Z in Unix microseconds: the data's event times are offsets from it."""
WATERMARK_DELAY = "120 seconds"
SESSION_GAP = "4999999 microseconds"
"""The hand-written sessions' gap: W5's 5 s less a microsecond. Spark's ``session_window``
merges two sessions that touch ([a, b) and [b, c)), so with a gap of 5 s an event exactly
5 s after its key's latest would extend that session, where W5 (WORKLOADS.md's table in
bench/README.md) starts a new one; with 5 s - 1 µs (the times are microseconds) it extends
a session exactly when it comes less than 5 s after, and a session's end is its last event
+ 5 s - 1 µs, read back as + 5 s."""
SENTINEL_KEY = -1
SENTINEL_AFTER_US = 86_400 * 1_000_000
"""The sentinel rows (Spark's end of input) lie a day after the last event."""


# ---- the files -------------------------------------------------------------------------------
@attrs.frozen
class Files:
    """One batch size's files, written beforehand, to be landed one at a time."""

    batch: int
    events: int
    paths: list[Path]
    sentinels: list[Path]
    """Spark's end of input: two files of one row with key -1, a day after the last event."""
    empty: Path
    """A file of no rows, landed before a query starts: tempo takes the schema from the
    directory's files."""


def write_files(events: Path, n: int, batch: int, max_files: int, folder: Path) -> Files:
    """The first ``min(n, batch * max_files)`` events (whole batches) as files of ``batch`` rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    count = min(n, batch * max_files) // batch * batch
    if count == 0:
        raise SystemExit(f"--n {n} is smaller than one batch of {batch}")
    table = pq.read_table(events).slice(0, count)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, offset in enumerate(range(0, count, batch)):
        p = folder / f"part-{i:05d}.parquet"
        pq.write_table(table.slice(offset, batch), p)
        paths.append(p)
    last_seq = pc.max(table.column("seq")).as_py()
    last_time = pc.max(table.column("event_time")).as_py() + SENTINEL_AFTER_US
    sentinels = []
    for j in range(2):
        row = pa.table(
            {
                "seq": pa.array([last_seq + 1 + j], pa.int64()),
                "key": pa.array([SENTINEL_KEY], pa.int32()),
                "event_time": pa.array([last_time + j], pa.int64()),
                "arrival_time": pa.array([last_time + j], pa.int64()),
                "value": pa.array([0.0], pa.float64()),
            }
        ).cast(table.schema)
        p = folder / f"sentinel-{j}.parquet"
        pq.write_table(row, p)
        sentinels.append(p)
    empty = folder / "empty.parquet"
    pq.write_table(table.slice(0, 0), empty)
    return Files(batch, count, paths, sentinels, empty)


class Lander:
    """Lands files into a watched directory: a copy renamed into place (Spark must never see
    half a file) with a modification time after the previous one's (Spark orders files by
    it, at millisecond resolution)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0
        folder.mkdir(parents=True, exist_ok=True)

    def land(self, source: Path) -> float:
        """Land a copy of ``source``; returns the time (``perf_counter``) it was in place."""
        tmp = self.folder.parent / f".{self.folder.name}-{self.count}.tmp"
        shutil.copyfile(source, tmp)
        stamp = 1_700_000_000 + self.count
        os.utime(tmp, (stamp, stamp))
        os.replace(tmp, self.folder / f"{self.count:05d}-{source.name}")
        self.count += 1
        return time.perf_counter()


# ---- the Kafka records -----------------------------------------------------------------------
KAFKA_OPTIONS = {"kafka.isolation.level": "read_committed"}
"""The connector options both engines add (tempo's ``kafka_stream`` sets ``startingOffsets``
earliest, ``includeHeaders`` false and ``failOnDataLoss`` true, which the hand-written query
sets too): committed records only, so that a batch, one transaction, becomes visible at its
commit. No ``maxOffsetsPerTrigger``: a micro-batch reads everything committed. (The broker
writes a commit's markers partition by partition just after the commit returns, so a
micro-batch starting in that moment can still see part of a batch: the "reads" column
shows it.)"""

PRODUCER_CONFIG = {
    "linger_ms": 20,
    "batch_num_messages": 100_000,
    "batch_size": 1_000_000,
    "queue_buffering_max_messages": 2_000_000,
    "queue_buffering_max_kbytes": 2_000_000,
}
"""confluent-kafka's settings for sending a batch fast: records gathered for up to 20 ms
into requests of up to 1 MB per partition, and room in the client's queue for a whole
batch of 1M records (no compression: the broker is on this machine)."""

HEARTBEAT_AFTER_S = 0.002
"""Between the last record of a batch appended and its heartbeats: the broker's clock
(milliseconds) has moved past every record's log-append time, so each record has a later
arrival in every other partition and the merge lets it through."""


@attrs.frozen
class Batch:
    """One batch's records, encoded: the values (JSON), keys and partitions, in arrival order."""

    values: list[str]
    keys: list[bytes]
    partitions: list[int]


@attrs.frozen
class Records:
    """One batch size's events as Kafka records, encoded beforehand, to be produced a batch at a time."""

    batch: int
    events: int
    partitions: int
    batches: list[Batch]
    sentinels: list[Batch]
    """Spark's end of input: two batches of one record with key -1, a day after the last event."""


def encode_values(keys: list[int], values: list[float], micros: Any) -> list[str]:
    """The JSON values ``encode_record(Event(key, value), start=t, fields={"start": "event_time"})``
    writes, made without a datetime per event (``encode_records`` checks them against it):
    ``micros`` are Unix microseconds (a pyarrow int64 array)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    # Arrow's %S of a microsecond timestamp has the six digits of the fraction, as tempo's %S.%f.
    times = pc.strftime(micros.cast(pa.timestamp("us")), format="%Y-%m-%dT%H:%M:%S").to_pylist()
    return [f'{{"key": {k}, "value": {v!r}, "event_time": "{t}Z"}}' for k, v, t in zip(keys, values, times)]


def check_encoding(keys: list[int], values: list[float], micros: Any, encoded: list[str]) -> None:
    """The fast encoding is tempo's own (``encode_record``), checked on every 997th event."""
    from datetime import datetime, timedelta, timezone

    from bench.tempo_queries import Event
    from tempo.spark.streaming.kafka import encode_record

    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    for i in range(0, len(encoded), 997):
        start = epoch + timedelta(microseconds=micros[i].as_py())
        expected = encode_record(Event(keys[i], values[i]), start=start, fields={"start": "event_time"}).decode()
        if encoded[i] != expected:
            raise SystemExit(f"the bench's Kafka encoding of event {i} is {encoded[i]!r}, tempo's encode_record gives {expected!r}")


def encode_records(events: Path, n: int, batch: int, max_files: int, partitions: int) -> Records:
    """The first ``min(n, batch * max_files)`` events (whole batches) as records, batch by batch."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    count = min(n, batch * max_files) // batch * batch
    if count == 0:
        raise SystemExit(f"--n {n} is smaller than one batch of {batch}")
    table = pq.read_table(events, columns=["seq", "key", "event_time", "value"]).slice(0, count)
    seq = table.column("seq")
    if count > 1 and not pc.all(pc.greater(seq.slice(1), seq.slice(0, count - 1))).as_py():
        raise SystemExit(f"{events}: the events are not in arrival (seq) order")
    batches = []
    for offset in range(0, count, batch):
        part = table.slice(offset, batch)
        keys = part.column("key").to_pylist()
        values = part.column("value").to_pylist()
        micros = pc.add(part.column("event_time"), ORIGIN_US).combine_chunks()
        encoded = encode_values(keys, values, micros)
        check_encoding(keys, values, micros, encoded)
        batches.append(Batch(encoded, [str(k).encode() for k in keys], [k % partitions for k in keys]))
    last_us = ORIGIN_US + pc.max(table.column("event_time")).as_py() + SENTINEL_AFTER_US
    sentinels = []
    for j in range(2):
        micros = pa.array([last_us + j], pa.int64())
        sentinels.append(Batch(encode_values([SENTINEL_KEY], [0.0], micros), [str(SENTINEL_KEY).encode()], [SENTINEL_KEY % partitions]))
    return Records(batch, count, partitions, batches, sentinels)


class KafkaFeed:
    """Produces batches to a topic of its own (created here, with log-append times), each
    batch in one transaction ending with a heartbeat per partition."""

    def __init__(self, bootstrap: str, topic: str, records: Records) -> None:
        from tempo.spark.streaming.kafka import create_topic, producer

        self.topic = topic
        self.records = records
        self.batches = len(records.batches)
        create_topic(bootstrap, topic, records.partitions)
        self.client = producer(bootstrap, transactional_id=f"{topic}-producer", **PRODUCER_CONFIG)
        self.client.init_transactions(60)

    def deliver(self, i: int) -> tuple[float, float]:
        """Produce batch ``i``: returns the times (``perf_counter``) its first record was
        produced and its transaction committed (the batch visible to the queries)."""
        return self._send(self.records.batches[i], heartbeats=True)

    def rows(self, i: int) -> int:
        """The records of batch ``i``: its events and a heartbeat per partition."""
        return len(self.records.batches[i].values) + self.records.partitions

    def end(self, j: int) -> None:
        self._send(self.records.sentinels[j], heartbeats=False)

    def _send(self, batch: Batch, heartbeats: bool) -> tuple[float, float]:
        from tempo.spark.streaming.kafka import send_heartbeats

        client, topic = self.client, self.topic
        began = time.perf_counter()
        client.begin_transaction()
        produce = client.produce
        for value, key, partition in zip(batch.values, batch.keys, batch.partitions):
            try:
                produce(topic, value, key, partition)
            except BufferError:  # the client's queue is full: let it send, then again
                client.poll(0.05)
                produce(topic, value, key, partition)
        if heartbeats:
            client.flush()  # every record appended before the heartbeats
            time.sleep(HEARTBEAT_AFTER_S)
            send_heartbeats(client, topic, list(range(self.records.partitions)))
        client.commit_transaction()
        return began, time.perf_counter()


def warm_up_kafka(spark: SparkSession, bootstrap: str, topic: str) -> None:
    """A few records through the connector (its classes loaded, its consumers made) before
    the first timed run, as ``make_spark`` warms up the Parquet reader."""
    from tempo.spark.streaming.kafka import create_topic, producer

    create_topic(bootstrap, topic, 1)
    client = producer(bootstrap)
    for i in range(10):
        client.produce(topic, f'{{"key": {i}}}', str(i).encode(), 0)
    client.flush()
    (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**KAFKA_OPTIONS)
        .load()
        .selectExpr("count(1)", "max(offset)")
        .collect()
    )


# ---- feeding the queries ---------------------------------------------------------------------
class FilesFeed:
    """Lands one batch size's files into a watched directory, one at a time."""

    def __init__(self, files: Files, lander: Lander) -> None:
        self.files = files
        self.lander = lander
        self.batches = len(files.paths)

    def deliver(self, i: int) -> tuple[float, float]:
        """Land file ``i``: the time it was in place, twice (it is visible when it is delivered)."""
        landed = self.lander.land(self.files.paths[i])
        return landed, landed

    def rows(self, i: int) -> int:
        return self.files.batch

    def end(self, j: int) -> None:
        self.lander.land(self.files.sentinels[j])


Feed = FilesFeed | KafkaFeed


@attrs.frozen
class Setup:
    """How a run reads and writes: ``--source``, ``--partitions``, the broker, tempo's sink (one of ``--sink``)."""

    source: str = "files"
    partitions: int = 4
    bootstrap: str | None = None
    sink: str = "parquet"
    tag: str = ""
    """Part of every topic's name (the run's start time), so that runs on one broker do not meet."""

    def topic(self, batch: int, engine: str) -> str:
        return f"tempo-bench-{self.tag}-{WORKLOAD}-b{batch}-{engine}-{self.sink}"


def tempo_input(spark: SparkSession, data: Files | Records, work: Path, setup: Setup, engine: str) -> tuple[Stream[Any], Feed]:
    """tempo's events input and what feeds it: a watched directory holding one file of no
    rows (tempo takes the schema from the files there at the start), or a Kafka topic read
    by ``kafka_stream`` (one input per partition, each with the file input's CTI settings)."""
    from bench import tempo_queries

    if isinstance(data, Files):
        lander = Lander(work / "tempo-in")
        lander.land(data.empty)
        return tempo_queries.events_input(str(lander.folder)), FilesFeed(data, lander)
    from tempo.spark.streaming.kafka import kafka_stream

    assert setup.bootstrap is not None
    feed = KafkaFeed(setup.bootstrap, setup.topic(data.batch, engine), data)
    events = kafka_stream(
        spark,
        "events",
        feed.topic,
        tempo_queries.Event,
        bootstrap=setup.bootstrap,
        partitions=data.partitions,
        start="event_time",
        settings=tempo_queries.EVERY_1000,
        options=KAFKA_OPTIONS,
    )
    return events, feed


def handwritten_input(spark: SparkSession, data: Files | Records, work: Path, setup: Setup) -> tuple[DataFrame, Feed]:
    """The hand-written query's events (``key``, ``value``, and the event time as a timestamp
    ``ts``) and what feeds them: Spark's Parquet stream of a watched directory, or Spark's
    Kafka source with ``from_json`` (heartbeats, which have no key, left out)."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F
    from pyspark.sql import types as st

    if isinstance(data, Files):
        lander = Lander(work / "spark-in")
        lander.land(data.empty)
        schema = spark.read.parquet(str(data.empty)).schema
        assert pq.read_schema(data.empty).names == schema.names
        src = spark.readStream.schema(schema).option("maxFileAge", "36500d").parquet(str(lander.folder))
        timed = src.select("key", "value", F.timestamp_micros(F.col("event_time") + F.lit(ORIGIN_US)).alias("ts"))
        return timed, FilesFeed(data, lander)
    assert setup.bootstrap is not None
    feed = KafkaFeed(setup.bootstrap, setup.topic(data.batch, "handwritten"), data)
    schema = st.StructType(
        [
            st.StructField("key", st.LongType()),
            st.StructField("value", st.DoubleType()),
            st.StructField("event_time", st.TimestampType()),
        ]
    )
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", setup.bootstrap)
        .option("subscribe", feed.topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "false")
        .option("failOnDataLoss", "true")
        .options(**KAFKA_OPTIONS)
        .load()
    )
    events = records.select(F.from_json(F.col("value").cast("string"), schema).alias("v")).select("v.*")
    timed = events.where(F.col("key").isNotNull()).select("key", "value", F.col("event_time").alias("ts"))
    return timed, feed


# ---- tempo's sink, timed ---------------------------------------------------------------------
def timed_sink(kind: str, path: str) -> TimedSink:
    return TimedSink(DeltaSink(path) if kind == "delta" else ParquetSink(path))


class TimedSink(Sink):
    """A tempo sink whose ``write`` and ``publish`` (the two calls a live query makes of it)
    are timed per batch: the bench's own wrapper, tempo's sinks unchanged."""

    def __init__(self, inner: ParquetSink | DeltaSink) -> None:
        self.inner = inner
        self.seconds: dict[int, float] = {}
        """Per batch: its write and publish, in seconds."""

    def write(self, spark: SparkSession, batch: int, events: Any, rejections: Any) -> None:
        began = time.perf_counter()
        self.inner.write(spark, batch, events, rejections)
        self.seconds[batch] = self.seconds.get(batch, 0.0) + time.perf_counter() - began

    def publish(self, batch: int) -> None:
        began = time.perf_counter()
        self.inner.publish(batch)
        self.seconds[batch] = self.seconds.get(batch, 0.0) + time.perf_counter() - began

    def read(self, spark: SparkSession) -> DataFrame:
        """What the sink holds, as a DataFrame."""
        if isinstance(self.inner, DeltaSink):
            return spark.read.format("delta").load(self.inner.path)
        return spark.read.parquet(self.inner.path)


# ---- the runs --------------------------------------------------------------------------------
@attrs.define
class Run:
    """One engine's run over one batch size's batches."""

    engine: str
    batch: int
    events: int
    source: str = "files"
    sink: str = "parquet"
    files: int = 0
    """Batches delivered (files landed, or Kafka transactions)."""
    seconds: float = 0.0
    """First batch delivered -> last batch processed (for Kafka: from the first record produced)."""
    latencies: list[float] = attrs.field(factory=list)
    """Per batch: delivered -> processed and committed (for Kafka: first record produced -> processed)."""
    produce_seconds: list[float] = attrs.field(factory=list)
    """Kafka, per batch: first record produced -> transaction committed (the batch visible)."""
    query_seconds: list[float] = attrs.field(factory=list)
    """Per batch: visible -> processed (files: the same as ``latencies``)."""
    engine_batch_seconds: list[float] = attrs.field(factory=list)
    """The engine's own time for each batch that read events."""
    sink_seconds: list[float] = attrs.field(factory=list)
    """tempo: its sink's write and publish in each batch that read events."""
    batch_phases: list[dict[str, float]] = attrs.field(factory=list)
    """tempo: ``BatchProgress.phases`` of each batch that read events (read, engine, sink,
    state)."""
    batch_engines: list[str] = attrs.field(factory=list)
    """tempo: which engine ran each batch that read events (``BatchProgress.engine``)."""
    micro_batches: int = 0
    """Micro-batches the query ran while the batches were streamed (Spark runs one without
    data after a batch that moved the watermark, to emit the windows it closed)."""
    reads: int = 0
    """Micro-batches that read events while the batches were streamed: one per batch when
    each batch was read whole by one micro-batch."""
    early_returns: int = 0
    """``processAllAvailable`` calls that returned before the batch was read (``stream_batches``)."""
    end_seconds: float = 0.0
    dropped: int | None = None
    checksum: Checksum | None = None
    status: str = ""
    error: str | None = None

    @property
    def events_per_s(self) -> float | None:
        """The table's events/s: for Kafka the query's own (the producer's time left out)."""
        if self.source == "kafka":
            return self.events / sum(self.query_seconds) if self.query_seconds else None
        return self.events / self.seconds if self.seconds else None

    @property
    def events_per_s_with_produce(self) -> float | None:
        return self.events / self.seconds if self.seconds else None

    @property
    def median_latency(self) -> float | None:
        return _median(self.latencies)

    @property
    def median_produce(self) -> float | None:
        return _median(self.produce_seconds)

    @property
    def median_query(self) -> float | None:
        return _median(self.query_seconds)

    @property
    def median_engine_batch(self) -> float | None:
        return _median(self.engine_batch_seconds)

    @property
    def median_sink(self) -> float | None:
        return _median(self.sink_seconds)

    def median_phase(self, phase: str) -> float | None:
        return _median([p[phase] for p in self.batch_phases if phase in p])

    def engines_used(self) -> str:
        """tempo: the engines that ran its batches, with how many each (``spark 3, driver 1``)."""
        counts = {e: self.batch_engines.count(e) for e in dict.fromkeys(self.batch_engines)}
        return ", ".join(f"{e} {n}" for e, n in counts.items())


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


WORKLOAD = "W2"
"""The workload the runs compute (``--workload``): W2, W2-hop or W5."""


def window_checksum(df: DataFrame) -> Checksum:
    """The workload's checksum of a DataFrame of its results: W2's windows (``key``, ``n``,
    ``total``, ``tempo_start``), or W5's sessions (``key``, ``n``, ``total``, ``start``, ``end``)."""
    from bench.engines import _event_window_checksum, _window_checksum

    if WORKLOAD == "W5":
        return normalize("W5", _event_window_checksum(df, "sessions", ORIGIN_US))
    return normalize("W2", _window_checksum(df, with_count=True, origin_us=ORIGIN_US))


def stream_batches(run: Run, feed: Feed, process: Callable[[], None], rows_read: Callable[[], int | None]) -> None:
    """Deliver the batches one at a time, each when ``process()`` has processed the one before.

    ``processAllAvailable`` can return before a batch delivered just before the call has
    been read: a trigger that asked the source for its latest offsets (or listed the
    directory) before the batch was visible, and finished after the call, finds no new data
    and ends the wait. So ``process()`` is called again until the query has read every row
    delivered (``rows_read()``: the rows its micro-batches read so far, None where the engine
    does not count them); ``Run.early_returns`` counts the calls that came back too soon."""
    first = None
    delivered = 0
    for i in range(feed.batches):
        began, visible = feed.deliver(i)
        delivered += feed.rows(i)
        first = began if first is None else first
        for _ in range(EARLY_RETURNS_MAX):
            process()
            read = rows_read()
            if read is None or read >= delivered:
                break
            run.early_returns += 1
        else:
            raise RuntimeError(f"the query has read {rows_read()} rows of the {delivered} delivered, after {EARLY_RETURNS_MAX} waits")
        done = time.perf_counter()
        run.latencies.append(done - began)
        run.query_seconds.append(done - visible)
        if run.source == "kafka":
            run.produce_seconds.append(visible - began)
        run.files += 1
    assert first is not None
    run.seconds = time.perf_counter() - first


EARLY_RETURNS_MAX = 100


def tempo_query(events: Stream[Any]) -> Stream[Any]:
    """The workload over tempo's events input."""
    from bench import tempo_queries

    if WORKLOAD == "W5":
        return tempo_queries.sessions(events)
    windows = tempo_queries.tumbling_counts(events)
    return tempo_queries.tumbling_counts_again(windows) if WORKLOAD == "W2-hop" else windows


def run_tempo(spark: SparkSession, data: Files | Records, work: Path, setup: Setup, name: str = "tempo") -> Run:
    """tempo's live query: ``StreamingExecutor`` with the engine ``name`` says, the sink
    ``setup.sink`` says (timed); the windows left open after the last batch are released by
    ``flush()``."""
    from bench import tempo_queries
    from tempo.spark.streaming import StreamingExecutor

    tempo_queries.CTIS = "every-1000"
    run = Run(name, data.batch, data.events, setup.source, setup.sink)
    events, feed = tempo_input(spark, data, work, setup, name)
    sink = timed_sink(setup.sink, str(work / "tempo-out"))
    engine = {
        "tempo": "auto",
        "tempo-driver": "driver",
        "tempo-vectorised": "vectorised",
        "tempo-spark": "spark",
        "tempo-cluster": "cluster",
    }[name]
    executor = StreamingExecutor(spark, str(work / "tempo-checkpoint"), engine=engine)
    live = executor.start(tempo_query(events), sink)
    try:
        live.process_all_available()
        before = len(live.progress)

        def rows_read() -> int | None:  # the cluster engine's progress does not count its rows
            return None if name == "tempo-cluster" else sum(sum(p.rows_in.values()) for p in live.progress[before:])

        stream_batches(run, feed, live.process_all_available, rows_read)
        streamed = live.progress[before:]
        # The cluster engine's progress is its output batches (rows_in is the time query's).
        read = [p for p in streamed if sum(p.rows_in.values()) or p.engine == "cluster"]
        run.engine_batch_seconds = [p.seconds for p in read]
        run.batch_phases = [p.phases for p in read]
        run.batch_engines = [p.engine for p in read]
        run.sink_seconds = [sink.seconds[p.batch] for p in read if p.batch in sink.seconds]
        run.micro_batches = len(streamed)
        run.reads = len(read)
        began = time.perf_counter()
        live.flush()
        run.end_seconds = time.perf_counter() - began
        run.dropped = sum(m.dropped for m in live.metrics.values())
    finally:
        live.stop()
    windows = sink.read(spark).where("tempo_kind = 'point'" if WORKLOAD == "W5" else "tempo_kind = 'interval'")
    run.checksum = window_checksum(windows)
    return run


def handwritten_query(timed: DataFrame) -> DataFrame:
    """W2 written by hand for Structured Streaming over ``timed`` (``key``, ``value``, the
    event time ``ts``): a watermark 120 s behind, ``groupBy(key, window(60 s))``, count and
    sum (append mode emits a window once the watermark has passed its end). W5: sessions
    (``session_window``, see ``SESSION_GAP``) under the same watermark."""
    from pyspark.sql import functions as F

    if WORKLOAD == "W5":  # sessions: [first event, last event + gap), emitted once the watermark passes the end
        return (
            timed.withWatermark("ts", WATERMARK_DELAY)
            .groupBy("key", F.session_window("ts", SESSION_GAP))
            .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))
            .select(
                "key",
                "n",
                "total",
                F.col("session_window.start").alias("start"),
                (F.col("session_window.end") + F.expr("INTERVAL 1 MICROSECOND")).alias("end"),
            )
        )
    return (
        timed.withWatermark("ts", WATERMARK_DELAY)
        .groupBy("key", F.window("ts", "60 seconds"))
        .agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("total"))
        .select("key", "n", "total", F.col("window.start").alias("tempo_start"))
    )


def run_handwritten(spark: SparkSession, data: Files | Records, work: Path, setup: Setup) -> Run:
    """The hand-written query with Spark's own Parquet sink (exactly once through its
    ``_spark_metadata`` log). Append mode emits a window only after a batch has moved the
    watermark past its end, so Spark's end of input is two sentinel batches of one row a
    day after the last event (key -1, left out of the checksum): the first moves the
    watermark past every real window, the batch of the second emits them. For the same
    reason the windows a batch closes are emitted by the micro-batch after its own: Spark
    runs one without data when a batch moved the watermark, and ``processAllAvailable``
    waits for it, so the latency measured here counts it, as tempo's counts the release
    of the windows."""
    run = Run("handwritten", data.batch, data.events, setup.source, "parquet")
    timed, feed = handwritten_input(spark, data, work, setup)
    out = work / "spark-out"
    query = (
        handwritten_query(timed)
        .writeStream.outputMode("append")
        .format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(work / "spark-checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
        before = len(query.recentProgress)
        stream_batches(run, feed, query.processAllAvailable, lambda: sum(p["numInputRows"] for p in query.recentProgress[before:]))
        streamed = query.recentProgress[before:]
        run.micro_batches = len(streamed)
        run.reads = sum(1 for p in streamed if p["numInputRows"])
        began = time.perf_counter()
        for j in range(len(data.sentinels)):
            feed.end(j)
            query.processAllAvailable()
        run.end_seconds = time.perf_counter() - began
        progress = query.recentProgress
    finally:
        query.stop()
    run.engine_batch_seconds = [p["durationMs"]["triggerExecution"] / 1000 for p in progress if p["numInputRows"] and p["numInputRows"] > 1]
    run.dropped = sum(op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p.get("stateOperators", []))
    windows = spark.read.parquet(str(out)).where(f"key != {SENTINEL_KEY}")
    run.checksum = window_checksum(windows)
    return run


RUNNERS: dict[str, Any] = {
    "tempo": run_tempo,
    "tempo-driver": functools.partial(run_tempo, name="tempo-driver"),
    "tempo-vectorised": functools.partial(run_tempo, name="tempo-vectorised"),
    "tempo-spark": functools.partial(run_tempo, name="tempo-spark"),
    "tempo-cluster": functools.partial(run_tempo, name="tempo-cluster"),
    "handwritten": run_handwritten,
}


# ---- the table -------------------------------------------------------------------------------
def judge(runs: list[Run], n_data: int) -> None:
    """Each run's checksum against the published one (when all events were streamed) or
    against the other engines' on the same events."""
    for r in runs:
        if r.status:
            continue
        assert r.checksum is not None
        expected = reference(n_data, WORKLOAD.removesuffix("-hop")) if r.events == n_data else None  # W2-hop gives W2's windows
        if expected is not None:
            diff = differences(expected, r.checksum)
            r.status = "exact" if not diff else "FAIL"
            r.error = "; ".join(diff) or None
            continue
        peers = [p for p in runs if p is not r and p.batch == r.batch and p.checksum is not None]
        r.status = "no ref" if not peers else "agree" if all(p.checksum == r.checksum for p in peers) else "DIFFER"


def _seconds(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f} s"


def table(runs: list[Run]) -> str:
    """The runs as a text table; with Kafka, the produce and query parts of the latency and
    the rate with the producer's time counted too."""
    kafka = any(r.source == "kafka" for r in runs)
    rate = {(r.batch, r.engine): r.events_per_s for r in runs}

    def ratio(r: Run) -> str:
        hw = rate.get((r.batch, "handwritten"))
        return f"{r.events_per_s / hw:.2f}x" if r.engine.startswith("tempo") and r.events_per_s and hw else ""

    columns: list[tuple[str, Callable[[Run], str], bool]] = [
        ("batch", lambda r: f"{r.batch:,}", True),
        ("engine", lambda r: r.engine, False),
        ("sink", lambda r: r.sink, False),
        ("batches" if kafka else "files", lambda r: str(r.files), True),
        ("reads", lambda r: str(r.reads), True),
        ("micro-batches", lambda r: str(r.micro_batches), True),
        ("events", lambda r: f"{r.events:,}", True),
        ("events/s", lambda r: fmt_rate(r.events_per_s), True),
        ("tempo/hw", ratio, True),
    ]
    if kafka:
        columns += [
            ("with produce", lambda r: fmt_rate(r.events_per_s_with_produce), True),
            ("median latency", lambda r: _seconds(r.median_latency), True),
            ("produce", lambda r: _seconds(r.median_produce), True),
            ("query", lambda r: _seconds(r.median_query), True),
        ]
    else:
        columns.append(("median latency", lambda r: _seconds(r.median_latency), True))
    columns += [
        ("median batch", lambda r: _seconds(r.median_engine_batch), True),
        ("read", lambda r: _seconds(r.median_phase("read")), True),
        ("engine", lambda r: _seconds(r.median_phase("engine")), True),
        ("sink write", lambda r: _seconds(r.median_sink), True),
        ("ran on", lambda r: r.engines_used(), False),
        ("end", lambda r: _seconds(r.end_seconds, 2), True),
        ("dropped", lambda r: "-" if r.dropped is None else str(r.dropped), True),
        ("checksum", lambda r: r.status, False),
    ]
    head = [c[0] for c in columns]
    body = [[c[1](r) for c in columns] for r in runs]
    widths = [max(len(line[i]) for line in (head, *body)) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if columns[i][2] else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    notes = [f"  {r.batch:,} {r.engine}: {r.error}" for r in runs if r.error]
    notes += [
        f"  {r.batch:,} {r.engine} ({r.sink}): {r.early_returns} processAllAvailable calls returned before the batch was read (waited again)"
        for r in runs
        if r.early_returns
    ]
    return "\n".join([line(head), line(["-" * w for w in widths]), *(line(b) for b in body)] + (["", "notes:", *notes] if notes else []))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2_000_000, help="the data set (default 2,000,000 events)")
    ap.add_argument("--batches", default="10000,100000,1000000", help="events per batch (file), comma-separated")
    ap.add_argument("--max-files", type=int, default=20, help="stream at most this many batches per batch size (default 20)")
    ap.add_argument("--engines", default=",".join(DEFAULT_ENGINES), help=f"comma-separated, of {','.join(ENGINES)}")
    ap.add_argument("--data-dir", type=Path, default=default_data_dir(), help="default: $TEMPO_BENCH_DATA or <tmp>/tempo-bench-data")
    ap.add_argument("--work", type=Path, default=None, help="files, checkpoints and outputs (default: a temporary directory, removed)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--shuffle-partitions", type=int, default=4)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument(
        "--workload",
        default="W2",
        choices=("W2", "W2-hop", "W5"),
        help="W2 (tumbling windows, default), W2-hop (W2 then a second window per key: tempo's engines only) or W5 (sessions)",
    )
    ap.add_argument("--source", default="files", choices=("files", "kafka"), help="files landed in a directory (default) or a Kafka topic")
    ap.add_argument("--partitions", type=int, default=4, help="--source kafka: the topics' partitions (default 4)")
    ap.add_argument("--bootstrap", default=None, help="--source kafka: a running broker (default: one started in the work directory)")
    ap.add_argument(
        "--sink", default="parquet", help="tempo's sinks, comma-separated: parquet (ParquetSink, the default) and/or delta (DeltaSink)"
    )
    ap.add_argument("--out", type=Path, default=None, help="JSON results (default bench/results/streaming[-w5][-kafka][-delta].json)")
    args = ap.parse_args(argv)
    if args.out is None:
        name = "streaming" + {"W5": "-w5", "W2-hop": "-w2-hop"}.get(args.workload, "")
        name += "-kafka" if args.source == "kafka" else ""
        name += "".join(f"-{sink}" for sink in args.sink.split(",") if sink.strip() != "parquet")
        args.out = RESULTS / f"{name}.json"
    args.batches = [int(b) for b in args.batches.split(",") if b.strip()]
    args.sinks = [k.strip() for k in args.sink.split(",") if k.strip()]
    if not args.sinks or any(k not in ("parquet", "delta") for k in args.sinks):
        ap.error(f"--sink takes parquet and/or delta, got {args.sink!r}")
    args.engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    for e in args.engines:
        if e not in ENGINES:
            ap.error(f"unknown engine {e!r}; choose from {', '.join(ENGINES)}")
    if args.workload == "W2-hop" and "handwritten" in args.engines:
        ap.error("--workload W2-hop runs tempo's engines only (the hand-written query has no second node)")
    if any(b < 1 for b in args.batches) or args.max_files < 1 or args.partitions < 1:
        ap.error("--batches, --max-files and --partitions must be positive")
    if args.source != "kafka" and args.bootstrap is not None:
        ap.error("--bootstrap is for --source kafka")
    return args


def run_all(spark: SparkSession, args: argparse.Namespace, events: Path, work: Path, setup: Setup | None = None) -> list[Run]:
    """Every (batch size, engine) run, engines one after the other for each batch size
    (``setup``: files into a ParquetSink unless given)."""
    setup = setup if setup is not None else Setup()
    runs = []
    for batch in args.batches:
        data: Files | Records
        if setup.source == "kafka":
            print(f"batch {batch:,}: encoding the records", flush=True)
            data = encode_records(events, args.n, batch, args.max_files, setup.partitions)
            count = len(data.batches)
        else:
            data = write_files(events, args.n, batch, args.max_files, work / f"b{batch}" / "files")
            count = len(data.paths)
        for name in args.engines:
            for sink in args.sinks if name.startswith("tempo") else ["parquet"]:  # the hand-written query: Spark's Parquet sink
                print(f"batch {batch:,}: {name}, {sink}, {count} {'batches' if setup.source == 'kafka' else 'files'}", flush=True)
                run_work = work / f"b{batch}" / f"{name}-{sink}"
                try:
                    runs.append(RUNNERS[name](spark, data, run_work, attrs.evolve(setup, sink=sink)))
                except Exception as e:  # noqa: BLE001 - one failing engine must not stop the others
                    import traceback

                    traceback.print_exc()
                    runs.append(Run(name, batch, data.events, setup.source, sink, status="error", error=f"{type(e).__name__}: {e}"))
    judge(runs, args.n)
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    global WORKLOAD
    args = parse_args(argv)
    WORKLOAD = args.workload
    load_start = list(os.getloadavg())
    data = ensure_data(args.n, args.data_dir)
    work = args.work or Path(tempfile.mkdtemp(prefix="tempo-bench-streaming-"))
    broker = None
    setup = Setup(args.source, args.partitions, args.bootstrap, args.sinks[0], time.strftime("%Y%m%d-%H%M%S"))
    if args.source == "kafka" and args.bootstrap is None:
        from tempo.spark.streaming.kafka_broker import KafkaBroker

        broker = KafkaBroker(work / "kafka")
        print(f"starting a Kafka broker in {broker.directory}", flush=True)
        broker.start()
        setup = attrs.evolve(setup, bootstrap=broker.bootstrap)
    connectors = args.source == "kafka" or "delta" in args.sinks
    try:
        print(
            f"starting Spark ({args.master}, {args.shuffle_partitions} shuffle partitions{', connectors' if connectors else ''})",
            flush=True,
        )
        spark = make_spark(args.master, args.shuffle_partitions, args.driver_memory, data.events, connectors=connectors)
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "10000")
        try:
            if setup.bootstrap is not None:
                warm_up_kafka(spark, setup.bootstrap, f"tempo-bench-{setup.tag}-warm-up")
            runs = run_all(spark, args, data.events, work, setup)
        finally:
            spark.stop()
    finally:
        if broker is not None:
            broker.stop()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    load_end = list(os.getloadavg())
    print()
    print(table(runs))
    print(
        f"\nload average (1, 5, 15 min): {', '.join(f'{x:.1f}' for x in load_start)} at the start, "
        f"{', '.join(f'{x:.1f}' for x in load_end)} at the end, on {os.cpu_count()} CPUs"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    derived = (
        "events_per_s",
        "events_per_s_with_produce",
        "median_latency",
        "median_produce",
        "median_query",
        "median_engine_batch",
        "median_sink",
    )
    args.out.write_text(
        json.dumps(
            {
                "n": args.n,
                "workload": args.workload,
                "source": args.source,
                "partitions": args.partitions if args.source == "kafka" else None,
                "sinks": args.sinks,
                "max_files": args.max_files,
                "master": args.master,
                "shuffle_partitions": args.shuffle_partitions,
                "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                "load_average": {"start": load_start, "end": load_end},
                "runs": [attrs.asdict(r) | {k: getattr(r, k) for k in derived} for r in runs],
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nwrote {args.out}")
    return 1 if any(r.status in ("FAIL", "error", "DIFFER") for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
