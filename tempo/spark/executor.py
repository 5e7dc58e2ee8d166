"""``SparkExecutor``: runs tempo queries as native Spark plans over bounded inputs."""

from __future__ import annotations

import contextlib
import functools
import io
from datetime import datetime
from typing import Any, TypeVar

import attrs
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from tempo.api.stream import Stream
from tempo.expr.schema import record_fields
from tempo.runtime.codegen import compile_expression
from tempo.runtime.engine import rejection
from tempo.runtime.release import ResultAssembly, release_order
from tempo.runtime.replay import MERGED, CtiReplay
from tempo.runtime.ingress import TimestampMode
from tempo.plan.query import Query
from tempo.errors import EvaluationError
from tempo.result import END_COLUMN, START_COLUMN, InputMetrics, Result, Withheld, warn_withheld
from tempo.spark import ingress
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.spark.columns import quoted, spark_action, udf_errors
from tempo.spark.compiler import Compiler, check_supported
from tempo.spark.types import from_wire, wire_columns
from tempo.tables import Span
from tempo.ticks import from_ticks

T = TypeVar("T")


@attrs.define
class _Prepared:
    query: Query
    replay: CtiReplay
    admitted: dict[str, ingress.Admitted]
    naive: bool
    compiler: Compiler


class SparkExecutor:
    """Runs queries on Spark with exactly the in-memory executor's results.

    Inputs are read and checked, CTIs are computed as the in-memory executor computes
    them (see ``tempo.spark.ingress``), and each plan node becomes DataFrame operations
    (``tempo.spark.compiler``). ``to_dataframe`` keeps the result lazy.
    """

    def __init__(self, spark: SparkSession, local_items: int = ingress.LOCAL_ITEMS, local_scan_rows: int = ingress.LOCAL_SCAN_ROWS) -> None:
        """``local_items``: item lists up to this size are admitted on the driver (0: never).
        ``local_scan_rows``: tables up to this many rows whose narrow columns the driver can
        read are scanned there, when the scan applies (``tempo.spark.ingress.local_scan``;
        0: never)."""
        self.spark = spark
        self.local_items = local_items
        self.local_scan_rows = local_scan_rows

    def _prepare(self, stream: Stream[Any]) -> _Prepared:
        query = Query.build(stream.node)
        check_supported(query)
        mode = TimestampMode()
        needs_arrival = query.ordered_by_arrival
        frames = [
            ingress.input_frame(self.spark, source, decl, mode, source.name in needs_arrival, self.local_items, self.local_scan_rows)
            for decl, source in enumerate(query.sources)
        ]
        replay, local = ingress.replay(self.spark, query, frames)
        admitted: dict[str, ingress.Admitted] = {}
        relations: dict[str, DataFrame] = {}
        for f in frames:
            if f.node.name in local:
                relations[f.node.name] = ingress.local_events(self.spark, f, local[f.node.name])
            else:
                admitted[f.node.name] = ingress.admit(self.spark, f, replay)
                relations[f.node.name] = admitted[f.node.name].events
        spans = {f.node.name: functools.partial(_given, f.span) for f in frames if f.span is not None}
        compiler = Compiler(self.spark, query, replay, relations, spans)
        return _Prepared(query, replay, admitted, mode.naive is True, compiler)

    def _outcomes(self, prepared: _Prepared, extra: DataFrame | None = None) -> tuple[list[Any], dict[str, list[Any]]]:
        """Collect the output (if given) and the edge inputs' pairing outcomes in one job."""
        tagged: DataFrame | None = None
        names = [n for n, a in prepared.admitted.items() if a.outcome is not None]
        for i, name in enumerate(names):
            outcome = prepared.admitted[name].outcome
            assert outcome is not None
            part = outcome.withColumn("__input", F.lit(i))
            tagged = part if tagged is None else tagged.unionByName(part, allowMissingColumns=True)
        by_input: dict[str, list[Any]] = {n: [] for n in prepared.admitted}
        if tagged is None:
            return ([list(r) for r in extra.collect()] if extra is not None else []), by_input
        if extra is None:
            rows = tagged.collect()
            out: list[Any] = []
        else:
            payload_cols = [c for c in extra.columns]
            both = extra.withColumn("__input", F.lit(-1)).unionByName(tagged, allowMissingColumns=True)
            rows_all = both.collect()
            out = [[r[c] for c in payload_cols] for r in rows_all if r["__input"] == -1]
            rows = [r for r in rows_all if r["__input"] != -1]
        for r in rows:
            by_input[names[r["__input"]]].append(r)
        return out, by_input

    def _finish(
        self, prepared: _Prepared, by_input: dict[str, list[Any]], with_items: bool = True
    ) -> dict[str, tuple[InputMetrics, list[Any]]]:
        """Metrics and rejections of every input (raising for bad input admitted in Spark)."""
        out: dict[str, tuple[InputMetrics, list[Any]]] = {}
        for s in prepared.query.sources:
            if s.name in prepared.admitted:
                out[s.name] = ingress.finish(self.spark, prepared.admitted[s.name], by_input[s.name], prepared.replay, with_items)
            else:
                out[s.name] = (prepared.replay.metrics(s.name), [r for r in prepared.replay.rejected if r.input == s.name])
            # The watermark delays are the replay's: it sees every move of CTI and clock.
            replayed = prepared.replay.ingresses[s.name].public_metrics(lambda t: from_ticks(t, prepared.naive))
            metrics = out[s.name][0]
            metrics.watermark_delays = replayed.watermark_delays
            for key, sub in metrics.substreams.items():  # and so are each key's own CTI moves
                moved = replayed.substreams.get(key)
                if moved is not None:
                    sub.ctis_generated, sub.watermark_delays = moved.ctis_generated, moved.watermark_delays
        return out

    @spark_action
    def to_dataframe(self, stream: Stream[Any]) -> DataFrame:
        """The released output events as a lazy DataFrame: ``tempo_start`` and ``tempo_end``
        (timestamps; an open end is 9999-12-31 23:59:59.999999), then the payload's columns,
        as ``Result.to_arrow`` has them. Payload fields cannot take those two names (they are
        reserved: ``tempo.result.RESERVED_COLUMNS``).

        Every input is checked first, so bad input raises here, except a row breaking a
        rule in an input where nothing can be late: that fails the query where it is read.
        """
        prepared = self._prepare(stream)
        if any(a.outcome is not None for a in prepared.admitted.values()):
            self._finish(prepared, self._outcomes(prepared)[1], with_items=False)
        out = prepared.compiler.output()
        names = [f.name for f in record_fields(stream.payload_type)]
        return out.selectExpr(  # SQL: one JVM call for the projection
            f"timestamp_micros({S}) AS {quoted(START_COLUMN)}",
            f"timestamp_micros({E}) AS {quoted(END_COLUMN)}",
            *map(quoted, names),
        )

    @spark_action
    def metrics(self, stream: Stream[Any]) -> dict[str, InputMetrics]:
        """Each input's metrics, without computing the query's output."""
        prepared = self._prepare(stream)
        return {name: m for name, (m, _) in self._finish(prepared, self._outcomes(prepared)[1], with_items=False).items()}

    @spark_action
    def explain(self, stream: Stream[Any]) -> str:
        """tempo's logical plan, the strategies its physical planning chose
        (``tempo.lowering.physical``) and the Spark plan of the output, one after the other."""
        prepared = self._prepare(stream)
        buffer = io.StringIO()
        output = prepared.compiler.output()
        with contextlib.redirect_stdout(buffer):
            output.explain(mode="formatted")
        return (
            f"== tempo logical plan ==\n{prepared.query.explain()}\n\n"
            f"== tempo physical plan ==\n{prepared.compiler.physical_plan()}\n\n"
            f"== Spark plan ==\n{buffer.getvalue()}"
        )

    @spark_action
    def run(self, stream: Stream[T]) -> Result[T]:
        """Run the query and collect its result, as ``InMemoryExecutor().run`` does, with
        ``Result.withheld`` (and its ``UnreleasedResultsWarning``) computed in the same job."""
        prepared = self._prepare(stream)
        naive = prepared.naive
        cols = [F.col(S), F.col(E), *wire_columns(stream.payload_type)]
        for admitted in prepared.admitted.values():  # inputs read as they are: check them first
            if admitted.verdicts is None:
                ingress.validate(self.spark, admitted, prepared.replay)
        output = prepared.compiler.output().select(*cols)
        summary = _withheld_summary(self.spark, prepared, cols)
        if summary is not None:  # collected in the same job, marked by the last two columns
            output = output.withColumn(_WITHHELD, F.lit(False)).unionByName(summary, allowMissingColumns=True)
        try:
            with udf_errors():
                rows, by_input = self._outcomes(prepared, output)
        except EvaluationError:
            # An input breaking a rule is the run's error, whatever the operators met on the way
            # (docs/semantics.md 7.4): the inputs' own outcomes first, raising it if there is one.
            self._finish(prepared, self._outcomes(prepared)[1])
            raise
        withheld = None
        if summary is not None:
            counts = [r for r in rows if r[-2]]
            rows = [r[:-2] for r in rows if not r[-2]]
            if counts and counts[0][1]:
                withheld = Withheld(counts[0][1], from_ticks(counts[0][0], naive))
        finished = self._finish(prepared, by_input)
        decoded = sorted(
            ((r[0], r[1], from_wire(stream.payload_type, list(r)[2:], naive)) for r in rows),
            key=lambda ev: (ev[0], ev[1]),
        )

        def dt(t: int) -> datetime:
            return from_ticks(t, naive)

        ctis = prepared.replay.ctis_of(prepared.query.root)
        key = prepared.query.substream_key(prepared.query.root)
        messages: list[tuple[Any, int]] = [(MERGED, c) for c in ctis]
        if key is not None:  # the output keeps a substream key: each key's CTIs release too
            messages = prepared.replay.output_ctis
        # Spark has whole lifetimes, so the release rule orders them here (the reference
        # engine's egress applies it as CTIs come); an event ending at infinity is an open edge.
        assembly: ResultAssembly[T] = ResultAssembly(dt)
        assembly.released(release_order(decoded, messages, None if key is None else compile_expression(key, 1)), messages)
        result = assembly.result(
            ctis,
            {s.name: finished[s.name][0] for s in prepared.query.sources},
            [rejection(r, dt) for s in prepared.query.sources for r in finished[s.name][1]],
            stream.payload_type,
            {s.name: s.payload_type for s in prepared.query.sources},
            withheld,
        )
        warn_withheld(result)
        return result


_WITHHELD = "__tempo_withheld"
"""Marks the row of ``_withheld_summary`` among the output rows collected with it."""
_EVALUATED = "__tempo_evaluated"
"""The summary's hash of the withheld results' payloads (computed, never read)."""


def _withheld_summary(spark: SparkSession, prepared: _Prepared, cols: list[Column]) -> DataFrame | None:
    """What the query would still release if every input's time then advanced to infinity,
    as one row: the earliest start (``S``) and the count (``E``). The plan is compiled again
    as the in-memory executor's flush after the run would leave it (``CtiReplay.at_infinity``:
    every node ends with a CTI at infinity, so windows close and joins end their overlaps),
    and its rows the release rule did not let out are counted. None when the final output
    CTI is at infinity: nothing is withheld then.

    Counting them computes their payloads (``cols``) too, as the in-memory flush does: an
    ``EvaluationError`` in a withheld result fails the run (docs/semantics.md 7.4). A hash
    of every payload column, kept in the row, stops Spark from pruning them."""
    released = prepared.compiler.released()
    if released is None:
        return None
    inputs = prepared.compiler.inputs
    flushed = Compiler(spark, prepared.query, prepared.replay.at_infinity(), inputs, prepared.compiler.spans).output()
    withheld = flushed.filter(~released).select(*cols)
    payload = [F.col(f"`{c}`") for c in withheld.columns[2:]]
    evaluated = F.max(F.xxhash64(*payload) if payload else F.lit(0))
    return (
        withheld.agg(F.min(F.col(S)).alias(S), F.count(F.lit(1)).alias(E), evaluated.alias(_EVALUATED))
        .withColumn(_WITHHELD, F.lit(True))
        .select(S, E, _WITHHELD, _EVALUATED)
    )


def _given(span: Span) -> Span:
    """A span the driver took already (``Lowering.spans`` takes one when a join asks)."""
    return span
