"""``VectorisedExecutor``: bounded queries as polars plans, with exactly the reference results.

How a run goes:

1. **Ingress.** A table input whose CTIs come from its own rows (generation by count or
   period, or only the flush at the end), without kind or arrival columns, with a payload
   class of scalar fields that only stores them, is read column by column: times become
   ticks, every row rule is checked over whole columns, and the policy's verdicts are taken
   over them (``_verdicts``). Any other input, or a table breaking a row rule, goes through
   the reference ingress item by item (the error a bad row raises is then exactly the
   in-memory executor's). Either way ``CtiReplay`` gives every input's and every operator's
   CTIs as the in-memory executor computes them.
2. **Operators.** The plan compiles to one lazy polars plan (``tempo.vectorised.compiler``):
   no Python per event.
3. **Results.** The released rows are turned into payloads and assembled by the release
   rule, as the Spark executor does.

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
from tempo.clocks import TimeDomain
from tempo.errors import TempoError
from tempo.events import EventShape
from tempo.expr.nodes import udf_error
from tempo.expr.schema import is_record_type, record_fields
from tempo.plan.nodes import SourceNode
from tempo.plan.query import Query
from tempo.result import END_COLUMN, START_COLUMN, Action, EventCounts, InputMetrics, Result, Rule, Withheld, warn_withheld
from tempo.runtime.engine import rejection
from tempo.runtime.ingress import INTERVAL, POINT, TimestampMode, adjusted_lifetime, count_rejection, item_of, prepare
from tempo.runtime.policy import TimePolicy
from tempo.runtime.release import ResultAssembly, release_order
from tempo.runtime.replay import MERGED, CtiReplay, Key
from tempo.runtime.stamping import stamped
from tempo.runtime.codegen import compile_expression
from tempo.sources import ParquetSource, TableSource
from tempo.ticks import INF, NEG_INF, from_ticks
from tempo.vectorised.compiler import Compiler, check_supported
from tempo.vectorised.expressions import END as E
from tempo.vectorised.expressions import START as S
from tempo.vectorised.expressions import from_column, payload_schema, to_column

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

    def metrics(self, stream: Stream[Any]) -> dict[str, InputMetrics]:
        """Each input's metrics, without computing the query's output."""
        with _udf_errors():
            query = Query.build(stream.node)
            check_supported(query)
            mode = TimestampMode()
            replay, _, counts = _ingress(query, mode)
            naive = mode.naive is True
            return _metrics(query, replay, counts, lambda t: from_ticks(t, naive))

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
        metrics = _metrics(query, replay, counts, dt)
        result = assembly.result(
            ctis, metrics, [rejection(r, dt) for r in replay.rejected], payload_type,
            {s.name: s.payload_type for s in query.sources}, None if withheld is None else Withheld(withheld[1], dt(withheld[0])),
        )
        warn_withheld(result)
        return result


def _metrics(query: Query, replay: CtiReplay, counts: dict[str, EventCounts], dt: Callable[[int], datetime]) -> dict[str, InputMetrics]:
    """Each input's metrics: the replay's (CTIs, watermark delays), with the event counts of
    ``_verdicts`` for an input read column by column."""
    metrics = {}
    for s in query.sources:
        m = replay.ingresses[s.name].public_metrics(dt)
        if s.name in counts:
            m = attrs.evolve(m, **attrs.asdict(counts[s.name]))
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
        if f.dtype in (datetime, timedelta) or f.element is not None or is_record_type(f.dtype):
            values = [from_column(v, f.dtype, f.element, naive) for v in values]
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
        and _generated_only(TimePolicy.of_input(node))
        and _stores_only(source.payload_type)
        and all(f.element is None and not is_record_type(f.dtype) for f in record_fields(source.payload_type))
    )


def _generated_only(policy: TimePolicy) -> bool:
    """The input's CTIs come from its own rows alone (generation by count or period, or only
    the flush), so each row's CTI in force is a running maximum over the rows before it."""
    return policy.import_from is None and not policy.ordered and (policy.has_settings or not policy.generates)


def _table_frame(node: SourceNode) -> pl.DataFrame:
    """A table source's rows as a polars frame, its columns checked against the source and
    the payload first (``tempo.tables.check_columns``). A single Parquet file is read by
    polars itself with only the columns the input reads (no copy through Arrow); any other
    table through its ``arrow_table``."""
    import os

    from tempo.tables import arrow_column_type, check_columns, table_columns

    source = node.source
    assert isinstance(source, TableSource)
    if isinstance(source, ParquetSource) and os.path.isfile(source.path):
        import pyarrow.parquet as pq

        schema = pq.read_schema(source.path)
        check_columns(node.name, source, {f.name: arrow_column_type(f.type) for f in schema})
        wanted = [c for c in (source.start, source.end, source.order) if c] + [f.name for f in record_fields(node.payload_type)]
        return pl.read_parquet(source.path, columns=list(dict.fromkeys(wanted)))
    table = source.arrow_table()
    check_columns(node.name, source, table_columns(table))
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def _read_columns(node: SourceNode) -> pl.DataFrame | None:
    """A table input as a frame of ticks and payload columns, or None when a row breaks a
    rule (the reference ingress then raises its error)."""
    source = node.source
    assert isinstance(source, TableSource)
    source.check_readable(node.name)
    raw = _table_frame(node)
    if source.order is not None:
        if raw[source.order].null_count():
            return None
        raw = raw.sort(source.order, maintain_order=True)
    origin = source.origin_ticks()

    def ticks(name: str) -> pl.Expr | None:
        dtype = raw.schema[name]
        if dtype == pl.Null:
            return None
        if isinstance(dtype, pl.Datetime):  # an instant: a naive one is UTC
            return pl.col(name).dt.epoch("us")
        return pl.col(name).cast(pl.Int64) + origin if origin else pl.col(name).cast(pl.Int64)

    start = ticks(source.start) if source.start else None
    end = ticks(source.end) if node.shape is EventShape.INTERVAL and source.end else None
    if start is None or (node.shape is EventShape.INTERVAL and end is None):
        return None
    columns = [start.alias(S), (start + 1 if end is None else end).alias(E)]
    schema = payload_schema(node.payload_type)
    for f in record_fields(node.payload_type):
        c = pl.col(f.name)
        if isinstance(raw.schema[f.name], pl.Datetime):
            c = c.dt.epoch("us")
        columns.append(c.cast(schema[f.name]).alias(f.name))
    frame = raw.select(columns)
    required = [S, E, *[f.name for f in record_fields(node.payload_type) if not f.nullable]]
    broken = pl.any_horizontal([pl.col(n).is_null() for n in required]) | (pl.col(E) <= pl.col(S)) | (pl.col(S) >= INF)
    return None if frame.select(broken.any()).item() else frame


def _verdicts(node: SourceNode, frame: pl.DataFrame, rejected: list[Any]) -> tuple[pl.DataFrame, EventCounts, list[tuple[int, int]]]:
    """The ingress rules of ``tempo.runtime.ingress`` over a table's columns, for an input
    whose CTIs its own rows generate: every row (admitted or not) counts towards generation,
    so the candidates (``Ingress.generate``) are a function of the rows alone, and the CTI
    in force at a row is the running maximum of the candidates before it. A row starting
    before it is dropped or adjusted by the policy (``Ingress.verdict``), counted and put on
    record in ``rejected``. Returns the admitted rows, the counts, and the candidates
    ``(position, value)`` for the CTI replay."""
    policy = TimePolicy.of_input(node)
    counts = EventCounts(received=frame.height, admitted=frame.height)
    if not policy.generates:
        return frame, counts, []
    start = pl.col(S)
    if policy.every_n:
        candidate = pl.when((pl.int_range(1, pl.len() + 1) % policy.every_n) == 0).then(start - policy.delay)
    else:
        period = start // policy.period
        before = period.cum_max().shift(1)
        candidate = pl.when(before.is_not_null() & (period > before)).then(start - policy.delay)
    frame = frame.with_columns(candidate.alias("__cand"), pl.int_range(pl.len()).alias("__pos"))
    frame = frame.with_columns(pl.col("__cand").cum_max().shift(1).forward_fill().fill_null(NEG_INF).alias("__cti"))
    candidates = list(zip(*frame.filter(pl.col("__cand").is_not_null()).select("__pos", "__cand").to_dict(as_series=False).values()))
    late = start < pl.col("__cti")
    if not frame.select(late.any()).item():
        return frame.drop("__cand", "__pos", "__cti"), counts, candidates
    point = node.shape is EventShape.POINT
    adjusted = policy.adjust & (pl.lit(point) | (pl.col(E) > pl.col("__cti")))
    fields = record_fields(node.payload_type)
    for row in frame.filter(late).iter_rows(named=True):
        cti = row["__cti"]
        values = [from_ticks(row[f.name]) if f.dtype is datetime and row[f.name] is not None else row[f.name] for f in fields]
        payload = node.payload_type(*values)
        rec = (NEG_INF, POINT if point else INTERVAL, row[S], row[E], payload, row["__pos"], None)
        lifetime = adjusted_lifetime(rec[1], row[E], cti) if policy.adjust else None
        action = Action.DROPPED if lifetime is None else Action.ADJUSTED
        rejected.append((node.name, row["__pos"], item_of(rec), Rule.START_BEFORE_CTI, action, cti, None if lifetime is None else ("lifetime", *lifetime)))
        count_rejection(counts, Rule.START_BEFORE_CTI, action, False, None)
        counts.admitted -= 1 if lifetime is None else 0
    moved = pl.when(late & adjusted).then(pl.col("__cti")).otherwise(start)
    ends = pl.when(late & adjusted & pl.lit(point)).then(pl.col("__cti") + 1).otherwise(pl.col(E))
    kept = frame.filter(~late | adjusted).with_columns(moved.alias(S), ends.alias(E))
    return kept.drop("__cand", "__pos", "__cti"), counts, candidates


def _ingress(query: Query, mode: TimestampMode) -> tuple[CtiReplay, dict[str, pl.LazyFrame], dict[str, EventCounts]]:
    """Every input admitted (column by column, or item by item through the reference
    ingress) and the CTIs of the whole query replayed."""
    replay = CtiReplay(query)
    needs_arrival = query.ordered_by_arrival
    frames: dict[str, pl.LazyFrame] = {}
    counts: dict[str, EventCounts] = {}
    local: dict[str, dict[int, list[Any]]] = {}
    rows: list[tuple[Key, str, Any]] = []
    for decl, node in enumerate(query.sources):
        read = _read_columns(node) if _columnar(node, needs_arrival) else None
        if read is not None:
            mode.saw(aware=True)  # a table's times are instants, given as aware UTC datetimes
            admitted, counts[node.name], candidates = _verdicts(node, read, replay.rejected)
            frames[node.name] = admitted.lazy()
            rows.extend(((NEG_INF, decl, position, 0), node.name, ("generated", value)) for position, value in candidates)
            continue
        local[node.name] = replay.admit_locally(node.name)
        for rec in stamped(node, prepare(node, mode, node.name in needs_arrival)):
            rows.append(((rec[0], decl, rec[5], 0), node.name, rec))
    rows.sort(key=lambda r: r[0])
    for key, name, what in rows:
        if name in local:
            replay.feed_item(key, name, what)
        else:
            replay.feed(key, name, what[0], what[1])
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
            data[f.name].append(to_column(getattr(payload, f.name), f.dtype, f.element))
    schema = {S: pl.Int64, E: pl.Int64, **payload_schema(node.payload_type)}
    return pl.DataFrame(data, schema=schema).lazy()

