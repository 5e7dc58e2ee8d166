"""The three engines the benchmark compares, each running W1-W7 from Parquet to checksum.

* ``handwritten``: the queries written by hand in PySpark (``bench/handwritten.py``).
* ``tempo-spark``: the tempo queries of ``bench/tempo_queries.py`` on ``tempo.spark.SparkExecutor``,
  then the same checksum aggregation in Spark.
* ``tempo-memory``: the same tempo queries on ``tempo.InMemoryExecutor``, checksums in Python.

An engine whose imports fail (tempo.spark or tempo.sources.ParquetSource not there yet) is
reported "not available" by ``make_engine`` and the others still run.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from bench.checksums import Checksum

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ENGINES = ("handwritten", "tempo-spark", "tempo-memory", "tempo-vectorised")


@attrs.frozen
class Data:
    """One data set of the shared generator."""

    n: int
    events: Path
    reference: Path


class Engine:
    name: str = ""
    uses_spark: bool = False

    def run(self, workload: str, data: Data) -> Checksum:
        raise NotImplementedError


class NotAvailable(Exception):
    """The engine cannot run here; the message says why."""


class Handwritten(Engine):
    name = "handwritten"
    uses_spark = True

    def __init__(self, spark: SparkSession) -> None:
        from bench import handwritten

        self.spark, self.hw = spark, handwritten

    def run(self, workload: str, data: Data) -> Checksum:
        return self.hw.run(self.spark, workload, str(data.events), str(data.reference))

    def explain(self, workload: str, data: Data) -> str:
        df = self.hw.checksum_frame(self.spark, workload, str(data.events), str(data.reference))
        return _spark_plan(df)


class TempoSpark(Engine):
    name = "tempo-spark"
    uses_spark = True

    def __init__(self, spark: Callable[[], SparkSession]) -> None:
        try:
            from tempo.spark import SparkExecutor

            from bench import tempo_queries
        except ImportError as e:
            raise NotAvailable(f"{type(e).__name__}: {e}") from e
        self.spark, self.q = spark(), tempo_queries
        self.executor = SparkExecutor(self.spark)

    def run(self, workload: str, data: Data) -> Checksum:
        from pyspark.sql import functions as F

        q, ev, ref = self.q, str(data.events), str(data.reference)
        if workload == "W1":
            m = self.executor.metrics(q.w1(ev))["events"]
            return {"kept": m.admitted, "dropped": m.dropped}
        if workload == "W4":
            df = self.executor.to_dataframe(q.w4(ev, ref))
            row = df.agg(F.count(F.lit(1)).alias("matched"), F.sum("product").alias("sum_value_x_ref")).collect()[0]
            return row.asDict()
        if workload == "W7":
            return _signal_checksum(self.executor.to_dataframe(q.w7(ev, ref)))
        if workload in ("W5", "W6"):
            df = self.executor.to_dataframe(q.w5(ev) if workload == "W5" else q.w6(ev))
            return _event_window_checksum(df, "sessions" if workload == "W5" else "windows", q.ORIGIN_US)
        stream = q.w2(ev) if workload == "W2" else q.w3(ev)
        df = self.executor.to_dataframe(stream)
        return _window_checksum(df, with_count=workload == "W2", origin_us=q.ORIGIN_US)

    def explain(self, workload: str, data: Data) -> str:
        q, ev, ref = self.q, str(data.events), str(data.reference)
        stream: Any = {
            "W1": lambda: q.w1(ev),
            "W2": lambda: q.w2(ev),
            "W3": lambda: q.w3(ev),
            "W4": lambda: q.w4(ev, ref),
            "W5": lambda: q.w5(ev),
            "W6": lambda: q.w6(ev),
            "W7": lambda: q.w7(ev, ref),
        }[workload]()
        return str(self.executor.explain(stream))


def _spark_plan(df: DataFrame) -> str:
    """Spark's physical plan of ``df``, as ``df.explain()`` prints it."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        df.explain()
    return buffer.getvalue()


def _window_checksum(df: DataFrame, with_count: bool, origin_us: int) -> Checksum:
    """W2/W3 checksums of a window output DataFrame (``key``, ``total``[, ``n``], ``tempo_start``)."""
    from pyspark.sql import functions as F

    minute = 60_000_000
    since_origin = F.unix_micros(F.col("tempo_start")) - F.lit(origin_us)
    w = ((since_origin - F.pmod(since_origin, F.lit(minute))) / F.lit(minute)).cast("long")
    aggs = [F.count(F.lit(1)).alias("groups")]
    if with_count:
        aggs.append(F.sum("n").alias("count"))
    aggs += [
        F.sum("total").alias("sum"),
        F.sum(F.col("total") * F.col("key")).alias("sum_x_key"),
        F.sum(F.col("total") * w).alias("sum_x_window"),
    ]
    return df.agg(*aggs).collect()[0].asDict()


def _event_window_checksum(df: DataFrame, name: str, origin_us: int) -> Checksum:
    """W5/W6 checksums of a session or count window output DataFrame (``key``, ``n``,
    ``total``, ``start``, ``end``; the payload's timestamps)."""
    from pyspark.sql import functions as F

    second = 1_000_000
    start = F.unix_micros(F.col("start")) - F.lit(origin_us)
    end = F.unix_micros(F.col("end")) - F.lit(origin_us)
    start_s = ((start - F.pmod(start, F.lit(second))) / F.lit(second)).cast("long")
    return (
        df.agg(
            F.count(F.lit(1)).alias(name),
            F.sum("n").alias("count"),
            F.sum("total").alias("sum"),
            F.sum(F.col("total") * F.col("key")).alias("sum_x_key"),
            F.sum(F.col("total") * start_s).alias("sum_x_start"),
            F.sum(end - start).alias("span"),
        )
        .collect()[0]
        .asDict()
    )


def _signal_checksum(df: DataFrame) -> Checksum:
    """W7 checksums of the join's output DataFrame (``value``, ``product``, and the lifetime,
    the overlap, in ``tempo_start`` and ``tempo_end``)."""
    from pyspark.sql import functions as F

    overlap = F.unix_micros(F.col("tempo_end")) - F.unix_micros(F.col("tempo_start"))
    return (
        df.select("value", "product", overlap.alias("overlap"))
        .agg(
            F.count(F.lit(1)).alias("matched"),
            F.sum("product").alias("sum_value_x_ref"),
            F.sum("overlap").alias("span"),
            F.sum(F.col("value") * F.expr("overlap div 1000")).alias("sum_value_x_ms"),
        )
        .collect()[0]
        .asDict()
    )


class TempoMemory(Engine):
    name = "tempo-memory"

    def __init__(self) -> None:
        try:
            from tempo import InMemoryExecutor
            from tempo.ticks import to_ticks

            from bench import tempo_queries
        except ImportError as e:
            raise NotAvailable(f"{type(e).__name__}: {e}") from e
        self.q, self.executor, self.to_ticks = tempo_queries, InMemoryExecutor(), to_ticks

    def run(self, workload: str, data: Data) -> Checksum:
        q, ev, ref = self.q, str(data.events), str(data.reference)
        if workload == "W1":
            m = self.executor.run(q.w1(ev)).metrics["events"]
            return {"kept": m.admitted, "dropped": m.dropped}
        if workload == "W4":
            products = [e.payload.product for e in self.executor.run(q.w4(ev, ref)).events]
            return {"matched": len(products), "sum_value_x_ref": sum(products)}
        if workload == "W7":
            return self._signal(q.w7(ev, ref))
        if workload in ("W5", "W6"):
            return self._event_windows(q.w5(ev) if workload == "W5" else q.w6(ev), workload)
        result = self.executor.run(q.w2(ev) if workload == "W2" else q.w3(ev))
        minute, origin = 60_000_000, q.ORIGIN_US
        groups = count = 0
        total = by_key = by_window = 0.0
        for e in result.events:
            p = e.payload
            groups += 1
            total += p.total
            by_key += p.total * p.key
            by_window += p.total * ((self.to_ticks(e.start) - origin) // minute)
            if workload == "W2":
                count += p.n
        out: Checksum = {"groups": groups, "sum": total, "sum_x_key": by_key, "sum_x_window": by_window}
        if workload == "W2":
            out["count"] = count
        return out

    def _signal(self, stream: Any) -> Checksum:
        """W7 checksums of the join's outputs (payload ``value``, ``product``; lifetime the overlap)."""
        to_ticks = self.to_ticks
        matched = span = 0
        by_ref = by_ms = 0.0
        for e in self.executor.run(stream).events:
            overlap = to_ticks(e.end) - to_ticks(e.start)
            matched += 1
            by_ref += e.payload.product
            span += overlap
            by_ms += e.payload.value * (overlap // 1000)
        return {"matched": matched, "sum_value_x_ref": by_ref, "span": span, "sum_value_x_ms": by_ms}

    def _event_windows(self, stream: Any, workload: str) -> Checksum:
        """W5/W6 checksums of the results' payloads (``key``, ``n``, ``total``, ``start``, ``end``)."""
        second, origin, to_ticks = 1_000_000, self.q.ORIGIN_US, self.to_ticks
        windows = count = span = 0
        total = by_key = by_start = 0.0
        for e in self.executor.run(stream).events:
            p = e.payload
            start = to_ticks(p.start) - origin
            windows += 1
            count += p.n
            total += p.total
            by_key += p.total * p.key
            by_start += p.total * (start // second)
            span += to_ticks(p.end) - origin - start
        return {
            "sessions" if workload == "W5" else "windows": windows,
            "count": count,
            "sum": total,
            "sum_x_key": by_key,
            "sum_x_start": by_start,
            "span": span,
        }


class TempoVectorised(TempoMemory):
    """The vectorised executor (polars), with the checksums of ``TempoMemory`` over its
    ``Result``: its time includes building the result's payload objects."""

    name = "tempo-vectorised"

    def __init__(self) -> None:
        super().__init__()
        try:
            from tempo.vectorised import VectorisedExecutor
        except ImportError as e:
            raise NotAvailable(f"{type(e).__name__}: {e}") from e
        self.executor = VectorisedExecutor()  # type: ignore[assignment]

    def run(self, workload: str, data: Data) -> Checksum:
        """W1 from the metrics alone (``metrics``), W2-W4 from the released events as a polars
        frame (``to_polars``: no payload object per event); the others through
        ``TempoMemory``'s checksums of the ``Result``."""
        import polars as pl

        q, ev, ref = self.q, str(data.events), str(data.reference)
        if workload == "W1":
            m = self.executor.metrics(q.w1(ev))["events"]  # type: ignore[attr-defined]
            return {"kept": m.admitted, "dropped": m.dropped}
        if workload not in ("W2", "W3", "W4"):
            return super().run(workload, data)
        if workload == "W4":
            out = self.executor.to_polars(q.w4(ev, ref))  # type: ignore[attr-defined]
            return {"matched": out.height, "sum_value_x_ref": out["product"].sum()}
        out = self.executor.to_polars(q.w2(ev) if workload == "W2" else q.w3(ev))  # type: ignore[attr-defined]
        window = (pl.col("tempo_start").dt.epoch("us") - q.ORIGIN_US) // 60_000_000
        sums = out.select(
            pl.len().alias("groups"),
            pl.col("total").sum().alias("sum"),
            (pl.col("total") * pl.col("key")).sum().alias("sum_x_key"),
            (pl.col("total") * window).sum().alias("sum_x_window"),
            *([pl.col("n").sum().alias("count")] if workload == "W2" else []),
        ).row(0, named=True)
        return {k: (int(v) if k in ("groups", "count") else float(v)) for k, v in sums.items()}


def make_engine(name: str, spark: Callable[[], SparkSession]) -> Engine:
    """The engine called ``name``; raises ``NotAvailable`` if it cannot run here."""
    if name == "handwritten":
        return Handwritten(spark())
    if name == "tempo-spark":
        return TempoSpark(spark)
    if name == "tempo-memory":
        return TempoMemory()
    if name == "tempo-vectorised":
        return TempoVectorised()
    raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINES)}")
