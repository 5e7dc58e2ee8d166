"""``StreamingExecutor``: live tempo queries on Spark Structured Streaming.

Spark reads the inputs as streams (a directory receiving files, Redis Streams, any
streaming DataFrame) and cuts them into micro-batches; tempo's live engine
(``tempo.runtime.live``) runs on the driver inside ``foreachBatch``. Each batch's rows are
put in each input's order and processed up to the arrival frontier, so the output after
every batch is exactly what the in-memory executor releases for the same items, wherever
Spark puts the batch boundaries. The batch protocol (``checkpoint.py``) makes every batch
take effect once across crashes and restarts; docs/streaming.md explains both.

Testing hook: when the environment variable ``TEMPO_CRASH_AT`` (read when the query starts)
is ``<phase>:<batch>``, the process kills itself with SIGKILL (a real kill -9) at that point
of that batch, so that tests can check the restart after a crash anywhere in a batch. The
phases (``CRASH_PHASES``), each named by what has just been done: ``read`` (the batch's
rows are on the driver), ``engine`` (the engine ran them; for the flush batch, it ended the
inputs), ``sink`` (the sink wrote the output), ``state`` (the state file is saved, its commit
record not yet), ``commit`` (the commit record is written) and ``publish`` (the output is
published; Spark has not yet recorded the batch as done).
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import attrs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tempo.api.stream import Stream
from tempo.events import Cti
from tempo.errors import InputRule, InputSchemaError, QueryBuildError, TempoError, UnsupportedError
from tempo.expr.schema import field_names, record_fields
from tempo.plan.nodes import SourceNode, WindowNode
from tempo.plan.query import Query
from tempo.result import InputMetrics, Result, released_table
from tempo.runtime.ingress import TimestampMode
from tempo.runtime.bulk import BatchEngine, BulkShape, batch_engine, bulk_shape
from tempo.runtime.live import LiveEngine, Released, check_importable
from tempo.sources import CsvSource, JsonSource, ParquetSource, TableSource
from tempo.expr.nodes import udf_error
from tempo.spark.columns import worker_errors
from tempo.spark.sources import DataFrameSource, SharedScan, json_spark_schema, spark_path
from tempo.spark.streaming.bulk import ENGINES, BulkRunner
from tempo.spark.streaming.layout import INPUT_COLUMN, input_groups, input_prefix, input_prefixes, shared_part
from tempo.spark.streaming.checkpoint import BatchLog, CheckpointLock
from tempo.spark.streaming.store import store_for
from tempo.spark.streaming.redis import redis_entry_error
from tempo.spark.streaming.sinks import NoCommittedOutputError, Sink

T = TypeVar("T")

EXECUTOR = "Spark streaming"

BULK_ROWS = 100_000
"""With ``engine="auto"``, batches of at least this many rows are computed in bulk by Spark."""
VECTOR_ROWS = 2_000
"""With ``engine="auto"``, smaller batches collected to the driver go item by item, larger
ones in bulk by polars (the vectorised executor's ``BatchEngine``, when it is installed):
polars has a fixed cost a batch and item by item a cost a row, and the two break even below
this size (measured in bench/README.md, "Live queries"; docs/streaming.md, "Three engines")."""
BULK_GUESS = 4
"""With ``engine="auto"``, a batch after one of fewer than ``BULK_ROWS / BULK_GUESS`` rows
goes to the driver without being sized first."""
JOIN_BULK_FACTOR = 4
"""With ``engine="auto"`` and a join below the window, batches go to Spark from this many
times ``bulk_rows``: every pair goes through Spark's join and aggregation and the join's
state travels both ways, a fixed cost a batch (measured in bench/README.md, "A join below
the window")."""

CRASH_AT = "TEMPO_CRASH_AT"
"""The environment variable of the testing hook (see the module's docstring)."""
CRASH_PHASES = ("read", "engine", "sink", "state", "commit", "publish")


@attrs.frozen
class BatchProgress:
    """One committed micro-batch of a live query."""

    batch: int
    rows_in: dict[str, int]
    """Rows read per input in this batch."""
    items_out: int
    """Output items released (events, end edges, CTIs)."""
    rejected: int
    """Input events dropped or adjusted by policy in this batch."""
    output_cti: str | None
    """The last output CTI released so far (ISO text), if any."""
    buffered: int
    """Items read but waiting: at the arrival frontier for another input, or after a gap in
    a dense order column."""
    state_bytes: int
    """Size of the saved engine state after the batch."""
    seconds: float
    """Time tempo spent on the batch on the driver (engine, output, commit)."""
    final: bool = False
    """The batch that flushed the query when its inputs ended (``LiveQuery.flush``)."""
    engine: str = "driver"
    """Which engine ran the batch: ``driver`` (item by item), ``vectorised`` (in bulk on the
    driver, by polars) or ``spark`` (in bulk, by Spark's compiled plan)."""
    phases: dict[str, float] = attrs.field(factory=dict)
    """Where ``seconds`` went, in seconds per phase, in order: ``read`` (Spark's job bringing
    the batch's rows to the driver: reading and decoding the inputs; with the ``spark``
    engine, the job computing the batch in bulk), ``engine`` (tempo's engine on the driver),
    ``sink`` (the sink's ``write``) and ``state`` (the engine's state serialized; writing it
    and committing the batch come after, and are not in ``seconds``). The cluster engine's
    batches have none yet."""

    def summary(self) -> str:
        """The batch on one line, for a console: rows in per input, items out, the output
        CTI, what waits, the state's size, the time and the engine."""
        rows = ", ".join(f"{k} {v}" for k, v in self.rows_in.items())
        return (
            f"batch {self.batch}: in {rows or 'nothing'}; out {self.items_out} items; output CTI {self.output_cti}; "
            f"waiting {self.buffered}; state {self.state_bytes} B; {self.seconds * 1000:.0f} ms ({self.engine}"
            + "".join(f", {name} {seconds * 1000:.0f}" for name, seconds in self.phases.items())
            + ")"
        )


class PhaseClock:
    """The time a batch spends in each of its phases, lap by lap."""

    def __init__(self) -> None:
        self.began = self.last = time.perf_counter()
        self.phases: dict[str, float] = {}

    def lap(self, phase: str) -> None:
        """``phase`` ended now: it took the time since the previous lap."""
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self.last
        self.last = now

    def total(self) -> float:
        return time.perf_counter() - self.began


def _live_table_source(spark: SparkSession, node: SourceNode) -> DataFrame:
    """Input ``node`` as a streaming DataFrame: for a part of a shared scan, the scan's."""
    source = node.source
    if isinstance(source, DataFrameSource):
        df: DataFrame = source.df if source.shared is None else source.shared[0].df
        if not df.isStreaming:
            raise UnsupportedError(
                EXECUTOR, repr(source), f"input {node.name!r}: its DataFrame is not a streaming one (make it with spark.readStream)"
            )
        return df
    if isinstance(source, JsonSource):
        source.check_readable(node.name)
        schema = json_spark_schema(source)
        return spark.readStream.schema(schema).option("maxFileAge", "36500d").json(spark_path(source.path))
    if isinstance(source, (ParquetSource, CsvSource)):
        source.check_readable(node.name)
        if "://" not in source.path and os.path.isdir(source.path) and not _data_files(source.path):
            raise InputSchemaError(
                node.name,
                f"{source!r} reads {source.path!r}, which holds no file yet: a live Parquet or CSV input takes its "
                f"columns' types from the files there when the query starts, so land a first file before starting it",
                InputRule.SOURCE_MISSING,
            )
        # A directory that keeps receiving files. The schema is the one of the files there now;
        # maxFileAge would silently skip files with old modification times.
        path = spark_path(source.path)
        if isinstance(source, ParquetSource):
            schema = spark.read.parquet(path).schema
            return spark.readStream.schema(schema).option("maxFileAge", "36500d").parquet(path)
        schema = spark.read.option("header", True).option("inferSchema", True).csv(path).schema
        return spark.readStream.schema(schema).option("header", True).option("maxFileAge", "36500d").csv(path)
    raise UnsupportedError(
        EXECUTOR,
        repr(source),
        f"input {node.name!r}: a live query reads a directory of Parquet, CSV or JSON files, Redis Streams "
        f"(tempo.spark.streaming.redis_source) or a streaming DataFrame (DataFrameSource)",
    )


def _columns_read(node: SourceNode, df: DataFrame) -> list[str]:
    """The columns of input ``node``'s streaming DataFrame that its source reads (time,
    kind, order and arrival columns, the payload's fields), checked against the source
    when the query starts: every batch then brings only those to the driver."""
    from tempo.spark.types import frame_columns
    from tempo.tables import check_columns, column_arguments

    source = node.source
    assert isinstance(source, TableSource)
    check_columns(node.name, source, frame_columns(df.schema))
    read = {column for _, column, _ in column_arguments(source)} | set(field_names(node.payload_type))
    return [c for c in df.columns if c in read]


def _data_files(folder: str) -> bool:
    """Whether ``folder`` (or a folder in it) holds a file Spark reads: not hidden, not ``_``-prefixed."""
    for _, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        if any(not f.startswith((".", "_")) for f in files):
            return True
    return False


def _check_live_inputs(query: Query) -> None:
    for node in query.sources:
        source = node.source
        if not isinstance(source, TableSource):
            raise UnsupportedError(
                EXECUTOR, repr(source), f"input {node.name!r}: a live query reads tables (rows of a stream), not item lists"
            )
        if source.order is None:
            raise QueryBuildError(
                f"input {node.name!r} ({source!r}) needs order= (or arrival=): a live input's rows come in micro-batches "
                f"in no order of their own, so a column must say the input order"
            )
        if len(query.sources) > 1 and source.arrival is None:
            raise QueryBuildError(
                f"input {node.name!r} ({source!r}) needs arrival=: a live query with several inputs merges them in "
                f"arrival order, and without arrival times every item of an earlier-declared input would come first"
            )


def _description(query: Query) -> str:
    """What identifies a live query for its checkpoint: the plan and each input's columns."""
    lines = [query.explain()]
    for node in query.sources:
        s = node.source
        assert isinstance(s, TableSource)
        fields = ", ".join(f"{f.name}: {getattr(f.dtype, '__qualname__', f.dtype)}" for f in record_fields(node.payload_type))
        lines.append(
            f"input {node.name}: {node.payload_type.__qualname__}({fields}) start={s.start} end={s.end} kind={s.kind} "
            f"arrival={s.arrival} order={s.order}"
        )
    return "\n".join(lines)


def recognized_error(exc: BaseException) -> TempoError | None:
    """The tempo error an exception from Spark stands for (a Redis entry's or a user function's
    failure on a worker), or None: the live executor's and the cluster engine's one reading."""
    return redis_entry_error(exc) or udf_error(exc)


_DRIFT = re.compile(
    r"Encountered error while reading file (\S+?)\. Data type mismatches when reading Parquet column "
    r"\[([^\]]+)\]\. Expected Spark type (\S+?), actual Parquet type (\S+?)\."
)
_DRIFT_CAUSE = re.compile(
    r"Encountered error while reading file (\S+?)\.(?:\s|$).*?SchemaColumnConvertNotSupportedException: "
    r"column: \[([^\]]+)\], physicalType: (\S+?), logicalType: (\S+)",
    re.S,
)
_SPARK_WORDS = {
    "double": "float",
    "float": "float",
    "bigint": "integer",
    "int": "integer",
    "smallint": "integer",
    "tinyint": "integer",
    "string": "string",
    "boolean": "boolean",
    "timestamp": "timestamp",
    "timestamp_ntz": "timestamp",
    "date": "date",
}


def schema_drift_error(exc: BaseException, query: Query) -> InputSchemaError | None:
    """The ``InputSchemaError`` for a live file input's new file whose column has another
    type than the input's files had when the query started (its schema), if ``exc`` (the
    failure of the Spark job reading the batch) is Spark's refusal to read it: naming the
    input, the file, the column and both types."""
    text = str(exc)
    found = _DRIFT.search(text)
    if found is not None:
        url, column, expected, physical = found.groups()
    else:
        cause = _DRIFT_CAUSE.search(text)
        if cause is None:
            return None
        url, column, physical, expected = cause.groups()
    path = url[len("file://") :] if url.startswith("file://") else url
    path = "/" + path.lstrip("/") if url.startswith("file:") else path
    actual = f"a Parquet {physical}"
    if "://" not in path and os.path.exists(path):
        try:
            import pyarrow.parquet as pq

            from tempo.tables import arrow_column_type

            actual = arrow_column_type(pq.read_schema(path).field(column).type)
        except Exception:  # unreadable here too: Spark's word for it
            pass
    word = _SPARK_WORDS.get(expected.lower(), expected)
    files = [n for n in query.sources if isinstance(n.source, (ParquetSource, CsvSource, JsonSource))]
    within = [n for n in files if os.path.abspath(path).startswith(os.path.abspath(n.source.path))]  # type: ignore[attr-defined]
    node = within[0] if within else files[0] if len(files) == 1 else None
    name = node.name if node is not None else " or ".join(repr(n.name) for n in query.sources)
    fills = ""
    if node is not None:
        field = next((f for f in record_fields(node.payload_type) if f.name == column), None)
        if field is not None:
            fills = f" (it fills payload field {node.payload_type.__qualname__}.{column})"
    return InputSchemaError(
        name,
        f"the file {path} has column {column!r} of type {actual}, but the input reads it as {word}, its type in the "
        f"files there when the query started{fills}: every new file of a live input must keep those column types; "
        f"write {column!r} as {word} (or start a query for the new types on a new checkpoint)",
    )


def input_parts(query: Query, table: Any) -> list[Any]:
    """A micro-batch of the inputs' merged stream (a pyarrow Table) split per input, each with
    its source's own column names."""
    import pyarrow.compute as pc

    parts = []
    for index, prefix in enumerate(input_prefixes(query)):
        part = table.filter(pc.equal(table.column(INPUT_COLUMN), index)) if len(query.sources) > 1 else table
        names = [n for n in part.column_names if n.startswith(prefix)]
        parts.append(part.select(names).rename_columns([n[len(prefix) :] for n in names]))
    return parts


def committed_engine(query: Query, log: BatchLog, batch: int | None) -> LiveEngine:
    """A live engine for ``query`` in the state ``log`` holds after committed batch ``batch``
    (None: a fresh one)."""
    if batch is None:
        mode = TimestampMode()
        mode.saw(aware=True)  # live inputs are tables: their times are instants, given as aware UTC
        return LiveEngine(query, mode)
    return LiveEngine.restore(query, log.state(batch))


class _Runner(Generic[T]):
    """What runs inside ``foreachBatch`` (on the driver): one batch at a time."""

    def __init__(
        self,
        spark: SparkSession,
        query: Query,
        payload_type: type[T],
        sink: Sink,
        log: BatchLog,
        bulk: BulkRunner | None = None,
        bulk_rows: int = 0,
        vectorised: BatchEngine | None = None,
        vector_rows: int = 0,
    ) -> None:
        self.spark = spark
        self.bulk = bulk
        self.bulk_rows = bulk_rows
        self.vectorised = vectorised
        self.vector_rows = vector_rows
        self.query = query
        self.payload_type = payload_type
        self.sink = sink
        self.log = log
        self.engine: LiveEngine | None = None
        self.engine_batch: int | None = None
        self.failure: BaseException | None = None
        self.progress: list[BatchProgress] = []
        self.lock = threading.Lock()
        self.crash_at = os.environ.get(CRASH_AT)
        self.stopping = False
        self.previous_rows: int | None = None
        """Rows of the last batch with rows this run read (None before the first)."""
        for batch in log.committed():  # a crash may have come between a commit and its publishing
            sink.publish(batch)

    def engine_after(self, batch: int | None) -> LiveEngine:
        """The engine in its state after committed batch ``batch`` (None: at the start)."""
        if self.engine is not None and self.engine_batch == batch:
            return self.engine
        return committed_engine(self.query, self.log, batch)

    def _recognized(self, exc: BaseException) -> TempoError | None:
        """The tempo error a failed Spark job of a batch carries (a worker's, or a new file
        that cannot be read with the input's column types)."""
        return recognized_error(exc) or schema_drift_error(exc, self.query)

    def _crash_point(self, phase: str, batch: int) -> None:
        """The testing hook: kill -9 this process here if ``TEMPO_CRASH_AT`` says so."""
        if self.crash_at == f"{phase}:{batch}":
            os.kill(os.getpid(), signal.SIGKILL)

    def __call__(self, df: DataFrame, batch: int) -> None:
        if self.stopping:  # stop() was called: start nothing it would have to interrupt
            raise StoppedDuringBatch(batch)
        try:
            with self.lock:
                self._run(df, batch)
        except BaseException as exc:
            self.engine = None  # it may hold part of the failed batch: rebuild from the state
            if self.stopping:  # interrupted by stop(): nothing committed, a restart runs the batch
                raise StoppedDuringBatch(batch) from None
            self.failure = exc
            raise

    def _run(self, df: DataFrame, batch: int) -> None:
        if self.log.is_committed(batch):  # Spark runs a batch again when it crashed before its own commit
            self.sink.publish(batch)
            return
        clock = PhaseClock()
        engine = self.engine_after(self.log.last_committed(before=batch))
        rows_in: dict[str, int] = {}
        # With engine="auto", a batch is sized by its time columns (one Spark job) only when
        # the previous one was not much smaller than bulk_rows: small batches go straight to
        # the driver (a batch misjudged so still gives the same result, item by item).
        sized = self.previous_rows is None or self.previous_rows * BULK_GUESS >= self.bulk_rows
        if self.bulk is not None and sized:
            speculate = self.previous_rows is not None and self.previous_rows >= self.bulk_rows
            with worker_errors(self._recognized):
                counts, done = self.bulk.run(engine, df, self.bulk_rows, speculate)
            self.previous_rows = sum(counts) or self.previous_rows
            if done:
                clock.lap("read")
                self._crash_point("read", batch)
                if sum(counts):  # as item by item counts them
                    rows_in.update((node.name, count) for node, count in zip(self.query.sources, counts))
                engine.run()
                clock.lap("engine")
                self._crash_point("engine", batch)
                self._commit(engine, batch, engine.take(), rows_in, clock, final=False, used="spark")
                return
        with worker_errors(self._recognized):
            table = df.toArrow()
        clock.lap("read")
        self.previous_rows = table.num_rows or self.previous_rows  # an empty batch says nothing of the next
        self._crash_point("read", batch)
        used = "driver"
        if table.num_rows:
            parts = input_parts(self.query, table)
            rows_in.update((node.name, part.num_rows) for node, part in zip(self.query.sources, parts))
            if self.vectorised is not None and table.num_rows >= self.vector_rows and self.vectorised.run(engine, parts):
                used = "vectorised"
            else:
                for index, part in enumerate(parts):
                    if part.num_rows:
                        engine.push_rows(index, part)
        engine.run()
        clock.lap("engine")
        self._crash_point("engine", batch)
        self._commit(engine, batch, engine.take(), rows_in, clock, final=False, used=used)

    def finish(self) -> None:
        """The inputs have ended: flush the query as one last batch."""
        with self.lock:
            clock = PhaseClock()
            last = self.log.last_committed()
            engine = self.engine_after(last)
            engine.finish()
            clock.lap("engine")
            batch = 0 if last is None else last + 1
            self._crash_point("engine", batch)
            self._commit(engine, batch, engine.take(), {}, clock, final=True)

    def _commit(
        self,
        engine: LiveEngine,
        batch: int,
        released: Released,
        rows_in: dict[str, int],
        clock: PhaseClock,
        final: bool,
        used: str = "driver",
    ) -> None:
        events = released_table(released.items, self.payload_type)
        inputs = {s.name: s.payload_type for s in self.query.sources}
        rejected = Result([], [], {}, released.rejections, [], {}, None, self.payload_type, inputs).rejections_table()
        self.sink.write(self.spark, batch, events, rejected)
        clock.lap("sink")
        self._crash_point("sink", batch)
        state = engine.snapshot()
        clock.lap("state")
        ctis = [item.timestamp.isoformat() for item in released.items if isinstance(item, Cti)]
        previous = self.progress[-1].output_cti if self.progress else None
        progress = BatchProgress(
            batch,
            rows_in,
            len(released.items),
            len(released.rejections),
            ctis[-1] if ctis else previous,
            sum(len(b) for b in engine.buffers) + sum(0 if f.held is None else f.held.num_rows for f in engine.feeds),
            len(state),
            clock.total(),
            final,
            used,
            clock.phases,
        )
        self.log.commit(
            batch,
            state,
            attrs.asdict(progress) | {"metrics": metrics_record(engine.metrics())},
            saved=lambda: self._crash_point("state", batch),
        )
        self._crash_point("commit", batch)
        self.sink.publish(batch)
        self._crash_point("publish", batch)
        self.engine, self.engine_batch = engine, batch
        self.progress.append(progress)


class StoppedDuringBatch(Exception):
    """Raised inside ``foreachBatch`` when ``LiveQuery.stop`` came while a batch was about to
    run, or interrupted it: the batch did not commit, and a restart runs it again.

    Its words are those Spark looks for to tell a stop from a failure (an interruption in a
    Python ``foreachBatch``: ``StreamExecution.PROXY_ERROR``); kept short, since Spark
    matches them with a regular expression that overflows the stack on a long message (the
    Java trace of an interrupted Spark job would be one)."""

    def __init__(self, batch: int) -> None:
        super().__init__(
            f"py4j.protocol.Py4JJavaError: An error occurred while calling foreachBatch: java.lang.InterruptedException "
            f"(tempo: the live query was stopped; batch {batch} did not commit)"
        )


def metrics_record(metrics: dict[str, InputMetrics]) -> dict[str, Any]:
    """Each input's metrics as JSON values (substream keys by their repr; the watermark
    samples are not kept for a live query)."""

    def counts(m: Any) -> dict[str, Any]:
        return attrs.asdict(m, recurse=False, filter=lambda a, _: a.name not in ("watermark_delays", "substreams"))

    return {name: counts(m) | {"substreams": {repr(k): counts(v) for k, v in m.substreams.items()}} for name, m in metrics.items()}


def read_progress(checkpoint: str) -> list[dict[str, Any]]:
    """The commit records of a live query's checkpoint, in batch order: each batch's
    ``BatchProgress`` fields and ``metrics`` (each input's ``InputMetrics`` counts since the
    query first started, substream keys by their repr) - for monitoring from another process.
    A path where no live query started is ``NoCommittedOutputError`` (and is left as it is)."""
    store = store_for(checkpoint)
    if not store.isdir(store.join(checkpoint, "tempo", "commits")):
        why = "the path does not exist" if not store.exists(checkpoint) else "it has no tempo/commits/ folder"
        raise NoCommittedOutputError(
            f"{checkpoint!r} is no live query's checkpoint ({why}); read the checkpoint the query was started with "
            "(a query's start makes <checkpoint>/tempo/commits/, so a query with nothing committed yet reads as no batches)"
        )
    log = BatchLog(checkpoint, store=store)
    return [log.record(batch) for batch in log.committed()]


class LiveQuery(Generic[T]):
    """A started live query (``StreamingExecutor.start``): Spark's streaming query with
    tempo's engine behind it. Errors of the query (bad input, a udf) are raised by these
    methods as the tempo errors they are."""

    def __init__(self, handle: Any, runner: _Runner[T], lock: CheckpointLock) -> None:
        self._handle = handle
        self._runner = runner
        self._lock = lock

    def release(self) -> None:
        """Give up the checkpoint (``stop`` and ``flush`` do; the process's end does too)."""
        self._lock.release()

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except Exception:
            if not self.is_active:  # the query failed and stopped: the checkpoint is free
                self.release()
            for failure in self._failures():
                if isinstance(failure, TempoError):
                    raise failure from None
            raise

    def _failures(self) -> list[BaseException | None]:
        """What made the query's batches fail, if anything."""
        return [self._runner.failure]

    def process_all_available(self) -> None:
        """Block until every row the inputs hold now has been processed and committed."""
        with self._errors():
            self._handle.processAllAvailable()

    def await_termination(self, timeout: float | None = None) -> bool:
        """Block until the query stops (or ``timeout`` seconds pass); True if it stopped."""
        with self._errors():
            stopped = self._handle.awaitTermination(timeout) if timeout is not None else self._handle.awaitTermination()
        return stopped is None or bool(stopped)

    def stop(self) -> None:
        """Stop the query, after the batch in progress (if any) has committed. What committed
        stays committed; a restart on the same checkpoint continues after the last committed
        batch."""
        self._halt()
        self.release()

    def _halt(self) -> None:
        runner = self._runner
        runner.stopping = True
        with runner.lock:  # wait for the batch in progress; no other starts now
            pass
        self._handle.stop()

    def flush(self) -> None:
        """The inputs have ended: process what they hold, stop, then end every input (a CTI
        at infinity where its settings flush) and commit what that releases as a last batch.
        The checkpoint then belongs to a finished query: it cannot be continued."""
        self.process_all_available()
        self._halt()
        try:
            self._runner.finish()
        finally:
            self.release()

    @property
    def is_active(self) -> bool:
        return bool(self._handle.isActive)

    @property
    def last_committed_batch(self) -> int | None:
        """The id of the last batch whose output and state are committed."""
        return self._runner.log.last_committed()

    @property
    def progress(self) -> list[BatchProgress]:
        """The batches this run committed, in order."""
        return list(self._runner.progress)

    @property
    def metrics(self) -> dict[str, InputMetrics]:
        """Each input's counts since the query first started (the in-memory executor's
        ``InputMetrics``; the watermark samples are not kept for a live query)."""
        runner = self._runner
        with runner.lock:
            return runner.engine_after(runner.log.last_committed()).metrics()


class StreamingExecutor:
    """Starts tempo queries as live Spark Structured Streaming queries.

    ``checkpoint``: a directory of its own for each query (Spark's records and tempo's);
    starting again on it continues the query after its last committed batch.
    ``trigger``: Spark's trigger, as keyword arguments of ``DataStreamWriter.trigger``
    (default: a batch as soon as the previous one is done).
    ``engine``: which engine runs a batch (the results are the same): ``"driver"``, the
    reference engine item by item on the driver; for queries of the shape computed in bulk
    (inputs without ordering settings whose events reach one window aggregate through where
    / select / shift / union operators and at most one join; other queries are refused
    with ``UnsupportedError``), ``"vectorised"``, the batch in bulk on the driver by polars
    (the ``vectorised`` extra), or ``"spark"``, Spark's compiled plan; ``"auto"``
    (default), for such a query, polars for batches of at least ``vector_rows`` rows when it
    is installed, and Spark for batches of at least ``bulk_rows`` rows (``JOIN_BULK_FACTOR``
    times as many with a join; by default ``BULK_ROWS`` when polars is not installed, else
    never: polars on the driver was the faster at every batch size measured, bench/README.md,
    "Live queries"),
    else the driver item by item. docs/streaming.md, "Three engines". ``"cluster"``: the
    window's state and work on Spark's executors, in Spark's state store, the driver deciding
    time only (a query with one input reaching a hopping, tumbling, session or count window
    through where / select / shift operators; pyspark 4.1 or later): docs/streaming.md, "Live queries on the
    cluster".
    """

    def __init__(
        self,
        spark: SparkSession,
        checkpoint: str,
        trigger: Mapping[str, Any] | None = None,
        engine: str = "auto",
        bulk_rows: int | None = None,
        vector_rows: int = VECTOR_ROWS,
    ) -> None:
        if engine not in ENGINES:
            raise ValueError(f"engine= is one of {', '.join(map(repr, ENGINES))}, got {engine!r}")
        self.spark = spark
        self.checkpoint = checkpoint
        self.trigger = dict(trigger or {})
        self.engine = engine
        self.bulk_rows = bulk_rows
        self.vector_rows = vector_rows

    def start(self, stream: Stream[T], sink: Sink) -> LiveQuery[T]:
        """Start ``stream`` over its live inputs, writing released results to ``sink``."""
        query = Query.build(stream.node)
        _check_live_inputs(query)
        check_importable(query)
        log = BatchLog(self.checkpoint, self.spark)
        description = _description(query)
        if self.engine == "cluster":  # its state is of another form: the checkpoint says which engine wrote it
            description += "\nengine: cluster"
        held = _HOLDERS.get(log.root)
        if held is not None and not held.is_active:  # this process's query that failed or ended
            held.release()
        lock = log.lock(description)
        try:
            live = self._start(stream, sink, query, log, description, lock)
        except BaseException:
            lock.release()
            raise
        _HOLDERS[log.root] = live
        return live

    def _start(self, stream: Stream[T], sink: Sink, query: Query, log: BatchLog, description: str, lock: CheckpointLock) -> LiveQuery[T]:
        if self.engine == "cluster":
            from tempo.spark.streaming.cluster import required_chain, start_cluster

            required_chain(query)  # before the checkpoint is claimed for it
            log.claim(description)
            return start_cluster(self.spark, query, stream.payload_type, sink, log, description, lock, self._merged(query), self.trigger)
        log.claim(description)
        shape = bulk_shape(query)
        if self.engine in ("spark", "vectorised") and isinstance(shape, str):
            raise UnsupportedError(EXECUTOR, f"engine={self.engine!r}", f"this query's batches cannot be computed in bulk: {shape}")
        vectorised = _vectorised(query, shape, self.engine)
        vector_rows = 0 if self.engine == "vectorised" else self.vector_rows
        # Spark's engine: every batch for "spark"; for "auto" batches of bulk_rows rows or more,
        # by default only when polars is not here to compute them on the driver.
        bulk_rows = 0 if self.engine == "spark" else self.bulk_rows
        if bulk_rows is None and vectorised is None:
            bulk_rows = BULK_ROWS
        bulk = None
        if self.engine in ("auto", "spark") and isinstance(shape, BulkShape) and bulk_rows is not None:
            bulk = BulkRunner(self.spark, query, shape)
            if shape.join is not None:
                bulk_rows *= JOIN_BULK_FACTOR
        runner = _Runner(self.spark, query, stream.payload_type, sink, log, bulk, bulk_rows or 0, vectorised, vector_rows)
        log.check_open()  # after the runner published what committed: a crash may have come between the flush's commit and its publishing
        merged = self._merged(query)
        writer = merged.writeStream.foreachBatch(runner).option("checkpointLocation", log.spark_checkpoint)
        if self.trigger:
            writer = writer.trigger(**self.trigger)
        log.prepare_spark_checkpoint()
        return LiveQuery(writer.start(), runner, lock)

    def _merged(self, query: Query) -> DataFrame:
        """The inputs' streams as one, each input's columns prefixed, with its index; the
        inputs of a shared scan read once, their index told by the scan's column."""
        merged: DataFrame | None = None
        for scan, members in input_groups(query):
            if scan is None:
                (index,) = members
                node = query.sources[index]
                df = _live_table_source(self.spark, node)
                part = df.select(
                    F.lit(index).alias(INPUT_COLUMN), *[F.col(f"`{c}`").alias(input_prefix(index) + c) for c in _columns_read(node, df)]
                )
            else:
                part = self._scan_part(query, members, scan)
            merged = part if merged is None else merged.unionByName(part, allowMissingColumns=True)
        assert merged is not None
        return merged

    def _scan_part(self, query: Query, members: list[int], scan: SharedScan) -> DataFrame:
        """The rows of the inputs ``members`` of ``scan``, read once: each row's input index
        from its value of the scan's column, the columns under the first input's prefix (the
        inputs of a scan have one payload and one table layout)."""
        first = query.sources[members[0]]
        df = _live_table_source(self.spark, first)
        read = _columns_read(first, df)
        for i in members[1:]:
            if _columns_read(query.sources[i], df) != read:
                raise UnsupportedError(
                    EXECUTOR, repr(scan), f"inputs {first.name!r} and {query.sources[i].name!r} read other columns of it"
                )
        values = []
        index = F.lit(None)
        for i in members:
            part = shared_part(query, i)
            assert part is not None
            values.append(part[1])
            index = F.when(F.col(scan.column) == F.lit(part[1]), F.lit(i)).otherwise(index)
        prefix = input_prefix(members[0])
        return df.where(F.col(scan.column).isin(values)).select(
            index.cast("int").alias(INPUT_COLUMN), *[F.col(f"`{c}`").alias(prefix + c) for c in read]
        )


_HOLDERS: dict[str, LiveQuery[Any]] = {}
"""This process's live queries by checkpoint, so that a start after one of them failed takes
the checkpoint over rather than waiting for the process to end."""


def _vectorised(query: Query, shape: BulkShape[WindowNode] | str, engine: str) -> BatchEngine | None:
    """The vectorised executor's batch engine for the query when ``engine`` may use it: for
    ``"vectorised"`` it must (else ``UnsupportedError`` says why not), for ``"auto"`` when
    polars is installed and the query's inputs and operators below its window are ones it
    reads and compiles."""
    if engine not in ("auto", "vectorised") or isinstance(shape, str):
        return None
    factory = batch_engine("vectorised")
    if factory is None:
        if engine == "vectorised":
            raise UnsupportedError(
                EXECUTOR, "engine='vectorised'", "it needs the vectorised extra (polars): pip install 'tempo-streams[vectorised]'"
            )
        return None
    try:
        return factory(query, shape)
    except UnsupportedError:
        if engine == "vectorised":
            raise
        return None
