"""``VectorisedExecutor``: bounded queries as polars plans, with exactly the reference results.

How a run goes:

1. **Ingress.** A table input whose CTIs come from its own rows (generation by count or
   period, or only the flush at the end) without kind or arrival columns, or from ASA's
   ordering settings (with an arrival column; substreams by a scalar key), with a payload class of
   scalar fields that only stores them, is read column by column: times become ticks, every
   row rule is checked over whole columns, and the policy's verdicts are taken over them
   (``_verdicts``, ``_ordered_verdicts``). Any other input, or a table breaking a row rule, goes through
   the reference ingress item by item (the error a bad row raises is then exactly the
   in-memory executor's). Either way ``CtiReplay`` gives every input's and every operator's
   CTIs as the in-memory executor computes them.
2. **Operators.** The plan compiles to one lazy polars plan (``tempo.vectorised.compiler``):
   no Python per event.
3. **Results.** The release rule orders the released rows over whole columns
   (``released_rows``; an output with a substream key goes through ``release_order``, by
   each payload's key, as the Spark executor does), and the rows' columns go to the result
   as they are: its events and payloads are made when read (``tempo.runtime.release``).

A node, window kind or aggregate without a rule here would raise ``UnsupportedError``
before anything is read (docs/vectorised.md says what it runs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

import attrs
import polars as pl

from tempo.api.stream import Stream
from tempo.errors import TempoError
from tempo.expr.nodes import udf_error
from tempo.expr.schema import record_fields
from tempo.plan.query import Query
from tempo.result import END_COLUMN, START_COLUMN, EventCounts, InputMetrics, Result, Withheld, warn_withheld
from tempo.runtime.engine import rejection
from tempo.runtime.ingress import TimestampMode
from tempo.runtime.release import ResultAssembly, release_order
from tempo.runtime.replay import MERGED, CtiReplay
from tempo.runtime.codegen import compile_expression
from tempo.tables import stores_only
from tempo.ticks import from_ticks
from tempo.vectorised.compiler import Compiler, check_supported
from tempo.vectorised.expressions import END as E
from tempo.vectorised.expressions import START as S
from tempo.vectorised.expressions import payload_columns, payload_objects
from tempo.vectorised.ingress import admit_inputs, columnar

T = TypeVar("T")


class VectorisedExecutor:
    """Runs bounded queries as columnar polars plans, with the in-memory executor's results."""

    @staticmethod
    def reads_in_bulk(stream: Stream[Any]) -> bool:
        """True when this executor has a rule for every node of the query and reads every
        input column by column (a table whose CTIs its own rows generate, or ordering
        settings; no kind column: see the module): the queries it runs
        without Python per item."""
        from tempo.errors import UnsupportedError

        query = Query.build(stream.node)
        try:
            check_supported(query)
        except UnsupportedError:
            return False
        return all(columnar(node, query) for node in query.sources)

    def run(self, stream: Stream[T]) -> Result[T]:
        """Run the query and collect its result, as ``InMemoryExecutor().run`` does."""
        with _udf_errors():
            return self._run(stream)

    def to_polars(self, stream: Stream[Any]) -> pl.DataFrame:
        """The released output events as a polars frame, without building a payload object
        per event: ``tempo_start`` and ``tempo_end`` (UTC datetimes; an open end is
        9999-12-31 23:59:59.999999), then the payload's columns (datetime fields as UTC
        datetimes), as ``Result.to_arrow`` has them. For large outputs; ``run`` gives the
        ``Result`` with the CTIs, metrics and rejections."""
        with _udf_errors():
            out = _compiled(stream).output().collect()
        utc = pl.Datetime("us", "UTC")
        columns = [pl.col(S).cast(utc).alias(START_COLUMN), pl.col(E).cast(utc).alias(END_COLUMN)]
        for f in record_fields(stream.payload_type):
            c = pl.col(f.name)
            columns.append(c.cast(utc) if f.dtype is datetime else c.cast(pl.Duration("us")) if f.dtype is timedelta else c)
        return out.select(columns)

    def explain(self, stream: Stream[Any]) -> str:
        """tempo's logical plan, the strategies its physical planning chose
        (``tempo.lowering.physical``) and the optimised polars plan of the output, one after
        the other. The inputs are read (as ``run`` reads them: the CTIs and spans plan it);
        nothing is computed."""
        with _udf_errors():
            compiler = _compiled(stream)
            output = compiler.output()
        return (
            f"== tempo logical plan ==\n{compiler.query.explain()}\n\n"
            f"== tempo physical plan ==\n{compiler.physical_plan()}\n\n"
            f"== polars plan ==\n{output.explain()}"
        )

    def metrics(self, stream: Stream[Any]) -> dict[str, InputMetrics]:
        """Each input's metrics, without computing the query's output."""
        with _udf_errors():
            query = Query.build(stream.node)
            check_supported(query)
            mode = TimestampMode()
            replay, _, counts, _ = admit_inputs(query, mode, rows_wanted=False)
            naive = mode.naive is True
            return _metrics(query, replay, counts, lambda t: from_ticks(t, naive))

    def _run(self, stream: Stream[T]) -> Result[T]:
        query = Query.build(stream.node)
        check_supported(query)
        mode = TimestampMode()
        replay, inputs, counts, spans = admit_inputs(query, mode)
        naive = mode.naive is True
        compiler = Compiler(query, replay, inputs, spans)
        out = compiler.output().collect()
        withheld = _withheld(query, replay, inputs, compiler)
        payload_type = stream.payload_type

        def dt(t: int) -> datetime:
            return from_ticks(t, naive)

        ctis = replay.ctis_of(query.root)
        key = query.substream_key(query.root)
        assembly: ResultAssembly[T] = ResultAssembly(dt)
        if key is None:
            messages: list[tuple[Any, int]] = [(MERGED, c) for c in ctis]
            released, released_by = released_rows(out, ctis)
            payloads = payload_columns(released, payload_type, naive)
            # Payloads are made when read if making one cannot fail; else now, failing the run as the others do.
            made = payloads if stores_only(payload_type) else payloads.every()
            assembly.released_columns(released[S].to_list(), released[E].to_list(), made, released_by, messages)
        else:  # each key's CTIs release too: by the key of each payload object
            messages = replay.output_ctis
            decoded = sorted(
                zip(out[S].to_list(), out[E].to_list(), payload_objects(out, payload_type, naive)), key=lambda ev: (ev[0], ev[1])
            )
            assembly.released(release_order(decoded, messages, compile_expression(key, 1)), messages)
        metrics = _metrics(query, replay, counts, dt)
        result = assembly.result(
            ctis,
            metrics,
            [rejection(r, dt) for r in replay.rejected],
            payload_type,
            {s.name: s.payload_type for s in query.sources},
            None if withheld is None else Withheld(withheld[1], dt(withheld[0])),
        )
        warn_withheld(result)
        return result


def _compiled(stream: Stream[Any]) -> Compiler:
    """The query's compilation over its admitted inputs (read as ``run`` reads them)."""
    query = Query.build(stream.node)
    check_supported(query)
    replay, inputs, _, spans = admit_inputs(query, TimestampMode())
    return Compiler(query, replay, inputs, spans)


def released_rows(out: pl.DataFrame, ctis: list[int]) -> tuple[pl.DataFrame, list[int]]:
    """The rows of ``out`` (its events) that the output CTIs ``ctis`` release, in release
    order, with the index in ``ctis`` of the CTI that releases each: ``release_order`` over
    whole columns, for an output without a substream key. An event is released by the first
    CTI after its start; the order is by that CTI, then start, then end, then ``out``'s own."""
    by = "__tempo_released_by"
    first_after = pl.Series(ctis, dtype=pl.Int64).search_sorted(out[S], side="right")
    released = out.with_columns(first_after.alias(by)).filter(pl.col(by) < len(ctis)).sort([by, S, E], maintain_order=True)
    return released.drop(by), released[by].to_list()


def _metrics(query: Query, replay: CtiReplay, counts: dict[str, EventCounts], dt: Callable[[int], datetime]) -> dict[str, InputMetrics]:
    """Each input's metrics: the replay's (CTIs, watermark delays), with the event counts of
    ``_verdicts`` for an input read column by column."""
    metrics = {}
    names = [f.name for f in attrs.fields(EventCounts)]
    for s in query.sources:
        m = replay.ingresses[s.name].public_metrics(dt)
        c = counts.get(s.name)
        if c is not None:
            m = attrs.evolve(m, **{n: getattr(c, n) for n in names})
        if isinstance(c, InputMetrics) and c.substreams:  # each key's counts, with its own CTI moves from the replay
            moved = m.substreams
            m.substreams = {
                key: attrs.evolve(sub, ctis_generated=moved[key].ctis_generated, watermark_delays=moved[key].watermark_delays)
                if key in moved
                else sub
                for key, sub in c.substreams.items()
            }
        metrics[s.name] = m
    return metrics


@contextlib.contextmanager
def _udf_errors() -> Iterator[None]:
    """A udf's result error, raised inside polars as text, raised as the ``UdfResultError`` it is."""
    try:
        yield
    except TempoError:
        raise
    except Exception as exc:
        error = udf_error(exc)
        if error is None:
            raise
        raise error from None


def _withheld(query: Query, replay: CtiReplay, inputs: dict[str, pl.LazyFrame], compiler: Compiler) -> tuple[int, int] | None:
    """(earliest start, count) of what a flush at infinity would still release; None when
    the final output CTI already is at infinity."""
    released = compiler.released()
    if released is None:
        return None
    # Collected whole: counting the withheld results computes their payloads too, as the
    # in-memory flush does, so an EvaluationError in one fails the run (semantics.md 7.4).
    flushed = Compiler(query, replay.at_infinity(), inputs, compiler.spans).output().filter(~released).collect()
    n = flushed.height
    return (int(flushed[S].min()), n) if n else None  # type: ignore[arg-type]
