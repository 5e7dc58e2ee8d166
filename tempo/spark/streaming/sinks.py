"""Where a live query's released output goes, a micro-batch at a time.

Each batch's output is what the query released in that batch, in release order
(``tempo.result.released_table``: events, end edges of events released open, CTIs), and the
input events its ingress dropped or adjusted (``Result.rejections_table``'s columns).

* ``ParquetSink(path)``: one Parquet file per batch and output, written exactly once: each
  file is written under ``_staging`` and moved into place only after the batch's commit
  record exists, so a reader of the directory (``spark.read.parquet(path)``, which skips
  names starting with ``_``) sees committed batches only; ``read_committed(path)`` reads
  them in batch order. Rejections go to ``path/_rejections``, in the same way.
* ``CallbackSink(on_batch)``: ``on_batch(events, rejections, batch_id)`` with two Spark
  DataFrames. Spark may call it again for a batch after a crash (before the batch
  committed): make it idempotent by the batch id (overwrite, or skip ids already seen).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from tempo.errors import TempoError
from tempo.events import Cti, EdgeEnd, EdgeStart, Interval, Point, SubstreamCti
from tempo.expr.schema import is_record_type, record_fields
from tempo.result import KEY_COLUMN, RawItem
from tempo.spark.session import session_setting
from tempo.sources import local_path
from tempo.spark.streaming.store import absolute, store_for

EVENTS = ""
REJECTIONS = "_rejections"


def _part(batch: int) -> str:
    return f"part-{batch:012d}.parquet"


class Sink:
    """What a live query writes each batch's output to (see the module's docstring)."""

    def write(self, spark: SparkSession, batch: int, events: Any, rejections: Any) -> None:
        """Batch ``batch``'s output (pyarrow Tables), before the batch commits; a batch run
        again after a crash writes the same again."""
        raise NotImplementedError

    def publish(self, batch: int) -> None:
        """Batch ``batch`` has committed: make its output visible (again, after a crash)."""


class NoCommittedOutputError(TempoError, FileNotFoundError):
    """``read_committed`` was given a path that holds no ``ParquetSink`` output, or
    ``read_progress`` one that is no live query's checkpoint (a typo would otherwise read as
    an output with nothing committed)."""


class ParquetSink(Sink):
    """A directory of Parquet files, one per committed batch (see the module's docstring):
    a local path, or a Hadoop URI (``hdfs://``, ``s3a://``, ...) written through the Spark
    session's file systems (``store.py``)."""

    def __init__(self, path: str) -> None:
        self.path = absolute(path)
        self.store = store_for(path, what="a ParquetSink")
        for what in (EVENTS, REJECTIONS):  # an output with nothing committed yet reads as empty
            self.store.makedirs(self.store.join(self.path, what) if what else self.path)

    def _dirs(self, what: str) -> tuple[str, str]:
        final = self.store.join(self.path, what) if what else self.path
        return self.store.join(final, "_staging"), final

    def write(self, spark: SparkSession, batch: int, events: Any, rejections: Any) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        for what, table in ((EVENTS, events), (REJECTIONS, rejections)):
            staging, _ = self._dirs(what)
            self.store.makedirs(staging)
            buffer = pa.BufferOutputStream()
            pq.write_table(table, buffer)
            self.store.write(self.store.join(staging, _part(batch)), buffer.getvalue().to_pybytes())

    def publish(self, batch: int) -> None:
        for what in (EVENTS, REJECTIONS):
            staging, final = self._dirs(what)
            self.store.publish(self.store.join(staging, _part(batch)), self.store.join(final, _part(batch)))

    def __repr__(self) -> str:
        return f"ParquetSink({self.path!r})"


class DeltaSink(Sink):
    """A Delta Lake table of the released items (the columns of a ``ParquetSink``'s files
    after ``tempo_batch`` and ``tempo_row``, the item's place in its batch: release order is
    by the two, as a table's rows have no order of their own), and one of the rejected input
    events (``rejections``, default ``<path>_rejections``), each batch appended exactly once.

    Each batch is one Delta transaction carrying the application id ``app_id`` and the batch
    number as its version (Delta's idempotent writes, ``txnAppId``/``txnVersion``): a batch
    run again after a crash writes the same rows under the same version, which Delta skips,
    so the table holds every committed batch once. A batch is written before tempo's commit
    record, so a batch that crashed between the two is in the table already and is skipped
    when it runs again. Batches that release nothing add no version, except the first,
    which creates the tables. Give each query writing one table its own ``app_id`` (by
    default the table's path). A local table is written by delta-rs (``deltalake``, the
    ``delta`` extra) on the driver when it is installed, which skips a version already in the
    table by the same rule; other paths, or without it, by Spark, which needs Delta's jars in
    the session (``bash java/fetch``, ``tempo.spark.connector_jars``). Spark, delta-rs,
    polars and DuckDB read the tables."""

    def __init__(self, path: str, *, rejections: str | None = None, app_id: str | None = None) -> None:
        self.path = absolute(path)
        self.rejections = absolute(rejections) if rejections is not None else self.path.rstrip("/") + "_rejections"
        self.app_id = app_id if app_id is not None else f"tempo:{self.path}"
        self.created: set[str] = set()
        """The tables this sink has seen exist (so empty batches need not write)."""

    def write(self, spark: SparkSession, batch: int, events: Any, rejections: Any) -> None:
        import pyarrow as pa

        for path, table in ((self.path, events), (self.rejections, rejections)):
            if table.num_rows == 0 and self._exists(spark, path):
                continue
            n = table.num_rows
            table = table.add_column(0, "tempo_row", pa.array(range(n), pa.int64()))
            table = table.add_column(0, "tempo_batch", pa.array([batch] * n, pa.int64()))
            local = self._delta_rs_path(path)
            if local is not None:
                self._append_by_delta_rs(local, batch, table)
            else:
                self._append_by_spark(spark, path, batch, table)
            self.created.add(path)

    def _delta_rs_path(self, path: str) -> str | None:
        """Where delta-rs writes ``path`` on the driver (None: Spark writes it): a local
        table, when ``deltalake`` is installed. A Spark job per batch costs about a second however few
        the rows, delta-rs some milliseconds (bench/README.md, "Sinks"); Hadoop URIs
        (``s3a://``, ``hdfs://``) go through Spark, which has their file systems."""
        local = local_path(path)
        if local is None:
            return None
        try:
            import deltalake  # noqa: F401
        except ImportError:
            return None
        return local

    def _append_by_delta_rs(self, local: str, batch: int, table: Any) -> None:
        from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

        if os.path.isdir(os.path.join(local, "_delta_log")):
            done = DeltaTable(local).transaction_version(self.app_id)
            if done is not None and done >= batch:  # Delta's rule, as Spark's writer applies it
                return
        commit = CommitProperties(app_transactions=[Transaction(self.app_id, batch)])
        write_deltalake(local, table, mode="append", schema_mode="merge", commit_properties=commit)

    def _append_by_spark(self, spark: SparkSession, path: str, batch: int, table: Any) -> None:
        df = spark.createDataFrame(table) if table.num_rows else spark.createDataFrame([], _spark_schema(table.schema))
        # Spark writes Parquet timestamps as INT96 nanoseconds unless told otherwise, which
        # readers other than Spark take as nanoseconds and cannot hold the open end
        # 9999-12-31 in: microseconds, tempo's tick, as the ParquetSink's files have them.
        with session_setting(spark, "spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS"):
            (
                df.write.format("delta")
                .mode("append")
                .option("txnAppId", self.app_id)
                .option("txnVersion", str(batch))
                .option("mergeSchema", "true")
                .save(path)
            )

    def _exists(self, spark: SparkSession, path: str) -> bool:
        if path in self.created:
            return True
        local = self._delta_rs_path(path)
        if local is not None:
            found = os.path.isdir(os.path.join(local, "_delta_log"))
        else:
            found = bool(spark._jvm.io.delta.tables.DeltaTable.isDeltaTable(spark._jsparkSession, path))  # type: ignore[union-attr]
        if found:
            self.created.add(path)
        return found

    def __repr__(self) -> str:
        return f"DeltaSink({self.path!r})"


def _spark_schema(schema: Any) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


class CallbackSink(Sink):
    """Calls ``on_batch(events, rejections, batch_id)`` with Spark DataFrames, at least once
    per batch (see the module's docstring)."""

    def __init__(self, on_batch: Callable[[DataFrame, DataFrame, int], None]) -> None:
        self.on_batch = on_batch

    def write(self, spark: SparkSession, batch: int, events: Any, rejections: Any) -> None:
        self.on_batch(spark.createDataFrame(events), spark.createDataFrame(rejections), batch)

    def __repr__(self) -> str:
        return f"CallbackSink({getattr(self.on_batch, '__qualname__', self.on_batch)!r})"


def read_committed(path: str, rejections: bool = False) -> Any:
    """The committed output of a ``ParquetSink`` directory as one pyarrow Table, batch by
    batch in release order, with a ``tempo_batch`` column first; ``rejections=True``: the
    rejected input events instead."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    store = store_for(path, what="a ParquetSink's output")
    folder = store.join(path, REJECTIONS) if rejections else path
    if not store.isdir(folder):
        why = "the path does not exist" if not store.exists(path) else f"it has no {REJECTIONS}/ folder"
        raise NoCommittedOutputError(
            f"{path!r} is no ParquetSink's output ({why}); read the path the query's ParquetSink was given "
            "(a sink makes its folders when it is made, so an output with nothing committed yet reads as empty)"
        )
    names = sorted(n for n in store.names(folder) if n.startswith("part-") and n.endswith(".parquet"))
    tables = []
    for name in names:
        table = pq.read_table(pa.BufferReader(store.read(store.join(folder, name))))
        batch = int(name[len("part-") : -len(".parquet")])
        tables.append(table.add_column(0, "tempo_batch", pa.array([batch] * table.num_rows, pa.int64())))
    if not tables:
        return pa.table({"tempo_batch": pa.array([], pa.int64())})
    return pa.concat_tables(tables, promote_options="default")


def released_items(table: Any, payload_type: type) -> list[RawItem[Any]]:
    """The rows of ``read_committed`` (or of one batch) as output items, the inverse of
    ``tempo.result.released_table`` (a substream CTI's key is its repr)."""
    fields = [f.name for f in record_fields(payload_type)] if is_record_type(payload_type) else []
    out: list[RawItem[Any]] = []
    for read in table.to_pylist():
        # Arrow gives UTC times with a zoneinfo; tempo's are datetime.timezone.utc.
        row = {k: v.astimezone(timezone.utc) if isinstance(v, datetime) and v.tzinfo is not None else v for k, v in read.items()}
        kind, start, end = row["tempo_kind"], row["tempo_start"], row["tempo_end"]
        if kind == "cti":
            out.append(Cti(start))
            continue
        if kind == "substream_cti":
            out.append(SubstreamCti(row[KEY_COLUMN], start))
            continue
        payload = payload_type(**{f: row[f] for f in fields})
        if kind == "point":
            out.append(Point(start, payload))
        elif kind == "interval":
            out.append(Interval(start, end, payload))
        elif kind == "start":
            out.append(EdgeStart(start, payload))
        else:
            out.append(EdgeEnd(start, end, payload))
    return out
