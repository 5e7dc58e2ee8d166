"""``VectorisedExecutor``: bounded queries as polars plans, with exactly the reference results.

How a run goes:

1. **Ingress.** A table input where nothing can be late (no CTI from its settings before it
   ends, no kind or arrival column, a payload class that only stores its fields) is read
   column by column: its times become ticks, and every row rule (nulls in fields that take
   none, lifetimes, starts at infinity) is checked over whole columns. Any other input, or a
   table breaking a rule, goes through the reference ingress item by item (the error a bad
   row raises is then exactly the in-memory executor's). Either way ``CtiReplay`` gives every
   input's and every operator's CTIs as the in-memory executor computes them.
2. **Operators.** The plan compiles to one lazy polars plan (``tempo.vectorised.compiler``):
   no Python per event.
3. **Results.** The released rows are turned into payloads and assembled by the release
   rule, as the Spark executor does.

The executor is being built up (issue 15): nodes, window kinds and aggregates it has no
rule for raise ``UnsupportedError`` before anything is read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, TypeVar

import attrs
import polars as pl

from tempo.api.stream import Stream
from tempo.clocks import TimeDomain
from tempo.errors import TempoError
from tempo.events import EventShape
from tempo.expr.nodes import udf_error
from tempo.expr.schema import record_fields
from tempo.plan.nodes import SourceNode
from tempo.plan.query import Query
from tempo.result import END_COLUMN, START_COLUMN, Result, Withheld, warn_withheld
from tempo.runtime.engine import rejection
from tempo.runtime.ingress import TimestampMode, prepare
from tempo.runtime.policy import TimePolicy
from tempo.runtime.release import ResultAssembly, release_order
from tempo.runtime.replay import MERGED, CtiReplay, Key
from tempo.runtime.stamping import stamped
from tempo.runtime.codegen import compile_expression
from tempo.sources import TableSource
from tempo.ticks import INF, duration_ticks, from_ticks, to_ticks
from tempo.vectorised.compiler import Compiler, check_supported
from tempo.vectorised.expressions import END as E
from tempo.vectorised.expressions import START as S
from tempo.vectorised.expressions import payload_schema

T = TypeVar("T")


class VectorisedExecutor:
    """Runs bounded queries as columnar polars plans, with the in-memory executor's results."""

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
            query = Query.build(stream.node)
            check_supported(query)
            replay, inputs, _ = _ingress(query, TimestampMode())
            out = Compiler(query, replay, inputs).output().collect()
        utc = pl.Datetime("us", "UTC")
        columns = [pl.col(S).cast(utc).alias(START_COLUMN), pl.col(E).cast(utc).alias(END_COLUMN)]
        for f in record_fields(stream.payload_type):
            c = pl.col(f.name)
            columns.append(c.cast(utc) if f.dtype is datetime else c.cast(pl.Duration("us")) if f.dtype is timedelta else c)
        return out.select(columns)

    def _run(self, stream: Stream[T]) -> Result[T]:
        query = Query.build(stream.node)
        check_supported(query)
        mode = TimestampMode()
        replay, inputs, counts = _ingress(query, mode)
        naive = mode.naive is True
        compiler = Compiler(query, replay, inputs)
        out = compiler.output().collect()
        withheld = _withheld(query, replay, inputs, compiler)
        payload_type = stream.payload_type
        decoded = sorted(
            zip(out[S].to_list(), out[E].to_list(), _payloads(out, payload_type, naive)), key=lambda ev: (ev[0], ev[1])
        )

        def dt(t: int) -> datetime:
            return from_ticks(t, naive)

        ctis = replay.ctis_of(query.root)
        key = query.substream_key(query.root)
        messages: list[tuple[Any, int]] = replay.output_ctis if key is not None else [(MERGED, c) for c in ctis]
        assembly: ResultAssembly[T] = ResultAssembly(dt)
        assembly.released(release_order(decoded, messages, None if key is None else compile_expression(key, 1)), messages)
        metrics = {}
        for s in query.sources:
            m = replay.ingresses[s.name].public_metrics(dt)
            if s.name in counts:  # read column by column: every row admitted
                m = attrs.evolve(m, received=counts[s.name], admitted=counts[s.name])
            metrics[s.name] = m
        result = assembly.result(
            ctis, metrics, [rejection(r, dt) for r in replay.rejected], payload_type,
            {s.name: s.payload_type for s in query.sources}, None if withheld is None else Withheld(withheld[1], dt(withheld[0])),
        )
        warn_withheld(result)
        return result


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
    flushed = Compiler(query, replay.at_infinity(), inputs).output().filter(~released)
    stats = flushed.select(pl.col(S).min().alias("s"), pl.len().alias("n")).collect()
    n = int(stats["n"][0])
    return (int(stats["s"][0]), n) if n else None


def _payloads(frame: pl.DataFrame, payload_type: type, naive: bool) -> list[Any]:
    """The payload records of the output rows."""
    fields = record_fields(payload_type)
    columns = []
    for f in fields:
        values = frame[f.name].to_list()
        if f.dtype is datetime:
            values = [None if v is None else from_ticks(v, naive) for v in values]
        elif f.dtype is timedelta:
            values = [None if v is None else timedelta(microseconds=v) for v in values]
        columns.append(values)
    return [payload_type(*row) for row in zip(*columns)] if columns else [payload_type() for _ in range(frame.height)]


# ---- ingress ---------------------------------------------------------------------------------


def _columnar(node: SourceNode, needs_arrival: set[str]) -> bool:
    """Whether ``node`` may be read column by column (see the module docstring)."""
    from tempo.tables import _stores_only

    source = node.source
    return (
        isinstance(source, TableSource)
        and node.time is TimeDomain.EVENT
        and node.shape in (EventShape.POINT, EventShape.INTERVAL)
        and source.kind is None
        and source.arrival is None
        and node.name not in needs_arrival
        and node.over is None
        and TimePolicy.of_input(node).nothing_can_be_late
        and _stores_only(source.payload_type)
    )


def _read_columns(node: SourceNode) -> pl.DataFrame | None:
    """A table input as a frame of ticks and payload columns, or None when a row breaks a
    rule (the reference ingress then raises its error)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from tempo.tables import check_columns, table_columns

    source = node.source
    assert isinstance(source, TableSource)
    source.check_readable(node.name)
    table = source.arrow_table()
    check_columns(node.name, source, table_columns(table))
    if source.order is not None:
        if table.column(source.order).null_count:
            return None
        table = table.take(pc.sort_indices(table, sort_keys=[(source.order, "ascending")]))
    origin = source.origin_ticks()

    def ticks(name: str) -> Any:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            return pc.cast(pc.cast(col, pa.timestamp("us", tz="UTC")), pa.int64())
        if pa.types.is_null(col.type):
            return None
        return pc.add(pc.cast(col, pa.int64()), origin) if origin else pc.cast(col, pa.int64())

    start = ticks(source.start)
    if start is None or start.null_count:
        return None
    columns: dict[str, Any] = {S: start}
    if node.shape is EventShape.POINT:
        columns[E] = pc.add(start, 1)
    else:
        end = ticks(source.end) if source.end else None
        if end is None or end.null_count:
            return None
        columns[E] = end
    schema = payload_schema(node.payload_type)
    for f in record_fields(node.payload_type):
        col = table.column(f.name)
        if col.null_count and not f.nullable:
            return None
        if f.dtype is datetime and pa.types.is_timestamp(col.type):
            col = pc.cast(pc.cast(col, pa.timestamp("us", tz="UTC")), pa.int64())
        columns[f.name] = col
    frame = pl.from_arrow(pa.table(columns))
    assert isinstance(frame, pl.DataFrame)
    frame = frame.with_columns([pl.col(n).cast(t) for n, t in schema.items()])
    bad = frame.select(((pl.col(E) <= pl.col(S)) | (pl.col(S) >= INF)).any()).item()
    return None if bad else frame


def _ingress(query: Query, mode: TimestampMode) -> tuple[CtiReplay, dict[str, pl.LazyFrame], dict[str, int]]:
    """Every input admitted (column by column, or item by item through the reference
    ingress) and the CTIs of the whole query replayed."""
    replay = CtiReplay(query)
    needs_arrival = query.ordered_by_arrival
    frames: dict[str, pl.LazyFrame] = {}
    counts: dict[str, int] = {}
    local: dict[str, dict[int, list[Any]]] = {}
    rows: list[tuple[Key, str, Any]] = []
    for decl, node in enumerate(query.sources):
        read = _read_columns(node) if _columnar(node, needs_arrival) else None
        if read is not None:
            mode.saw(aware=True)  # a table's times are instants, given as aware UTC datetimes
            frames[node.name], counts[node.name] = read.lazy(), read.height
            continue
        local[node.name] = replay.admit_locally(node.name)
        for rec in stamped(node, prepare(node, mode, node.name in needs_arrival)):
            rows.append(((rec[0], decl, rec[5], 0), node.name, rec))
    rows.sort(key=lambda r: r[0])
    for key, name, rec in rows:
        replay.feed_item(key, name, rec)
    replay.shutdown()
    for node in query.sources:
        if node.name in local:
            frames[node.name] = _events_frame(node, local[node.name])
    return replay, frames, counts


def _events_frame(node: SourceNode, events: dict[int, list[Any]]) -> pl.LazyFrame:
    """Events admitted item by item, as a relation."""
    fields = record_fields(node.payload_type)
    data: dict[str, list[Any]] = {S: [], E: [], **{f.name: [] for f in fields}}
    for start, end, payload in events.values():
        data[S].append(start)
        data[E].append(INF if end is None else end)
        for f in fields:
            v = getattr(payload, f.name)
            if f.dtype is datetime and v is not None:
                v = to_ticks(v)
            elif f.dtype is timedelta and v is not None:
                v = duration_ticks(v)
            data[f.name].append(v)
    schema = {S: pl.Int64, E: pl.Int64, **payload_schema(node.payload_type)}
    return pl.DataFrame(data, schema=schema).lazy()

