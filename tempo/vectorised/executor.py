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
3. **Results.** The released rows are turned into payloads and assembled by the release
   rule, as the Spark executor does.

A node, window kind or aggregate without a rule here would raise ``UnsupportedError``
before anything is read (docs/vectorised.md says what it runs).
"""

from __future__ import annotations

import contextlib
import functools
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
from tempo.result import END_COLUMN, START_COLUMN, Action, EventCounts, InputMetrics, Result, Rule, SubstreamMetrics, Withheld, warn_withheld
from tempo.runtime.engine import rejection
from tempo.runtime.ingress import INTERVAL, POINT, TimestampMode, adjusted_lifetime, count_rejection, item_of, prepare
from tempo.runtime.policy import TimePolicy
from tempo.runtime.release import ResultAssembly, release_order
from tempo.runtime.replay import MERGED, CtiReplay, Key
from tempo.runtime.stamping import stamped
from tempo.runtime.codegen import compile_expression
from tempo.sources import ParquetSource, TableSource
from tempo.tables import Span
from tempo.ticks import INF, NEG_INF, from_ticks
from tempo.vectorised.compiler import Compiler, check_supported
from tempo.vectorised.expressions import END as E
from tempo.vectorised.expressions import START as S
from tempo.vectorised.expressions import from_column, payload_schema, to_column

T = TypeVar("T")

ARR = "__tempo_arr"
"""The arrival column (ticks) of an input with ordering settings, among its narrow columns."""
KEY = "__tempo_key"
"""The substream key of an input with ordering settings and substreams, among its narrow columns."""


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
        return all(_columnar(node, query.ordered_by_arrival) for node in query.sources)

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
            replay, inputs, _, spans = _ingress(query, TimestampMode())
            out = Compiler(query, replay, inputs, spans).output().collect()
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
            replay, _, counts, _ = _ingress(query, mode, rows_wanted=False)
            naive = mode.naive is True
            return _metrics(query, replay, counts, lambda t: from_ticks(t, naive))

    def _run(self, stream: Stream[T]) -> Result[T]:
        query = Query.build(stream.node)
        check_supported(query)
        mode = TimestampMode()
        replay, inputs, counts, spans = _ingress(query, mode)
        naive = mode.naive is True
        compiler = Compiler(query, replay, inputs, spans)
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
                if key in moved else sub
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
    flushed = Compiler(query, replay.at_infinity(), inputs, compiler.spans).output().filter(~released)
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
    policy = TimePolicy.of_input(node)
    return (
        isinstance(source, TableSource)
        and node.time is TimeDomain.EVENT
        and node.shape in (EventShape.POINT, EventShape.INTERVAL)
        and source.kind is None
        and node.name not in needs_arrival
        and (node.over is None or _ordered_only(policy))
        and (_generated_only(policy) and source.arrival is None or _ordered_only(policy) and source.arrival is not None)
        and _stores_only(source.payload_type)
        and all(f.element is None and not is_record_type(f.dtype) for f in record_fields(source.payload_type))
    )


def _generated_only(policy: TimePolicy) -> bool:
    """The input's CTIs come from its own rows alone (generation by count or period, or only
    the flush), so each row's CTI in force is a running maximum over the rows before it."""
    return policy.import_from is None and not policy.ordered and (policy.has_settings or not policy.generates)


def _ordered_only(policy: TimePolicy) -> bool:
    """The input's CTIs follow ASA's ordering settings alone (see ``_ordered_verdicts``)."""
    return policy.ordered and policy.import_from is None


def _scan_table(node: SourceNode) -> tuple[pl.LazyFrame, list[str]]:
    """A table source's rows as a lazy polars frame, its columns checked against the source
    and the payload first (``tempo.tables.check_columns``), and the payload columns not
    declared optional that may hold a null. A single Parquet file is scanned by polars
    itself, so a query reads only the columns it needs, batch by batch; its statistics may
    prove columns free of nulls. Any other table is read through its ``arrow_table``."""
    import os

    from tempo.tables import arrow_column_type, check_columns, parquet_proves_no_nulls, table_columns

    source = node.source
    assert isinstance(source, TableSource)
    required = [f.name for f in record_fields(node.payload_type) if not f.nullable]
    if isinstance(source, ParquetSource) and os.path.isfile(source.path):
        import pyarrow.parquet as pq

        file = pq.ParquetFile(source.path)
        check_columns(node.name, source, {f.name: arrow_column_type(f.type) for f in file.schema_arrow})
        return pl.scan_parquet(source.path), [] if parquet_proves_no_nulls(file, required) else required
    table = source.arrow_table()
    check_columns(node.name, source, table_columns(table))
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame.lazy(), [n for n in required if frame[n].null_count()]


@attrs.frozen
class _Table:
    """A table input read column by column: ``rows`` (lazy: S, E and the payload columns, in
    input order), its row count, and, when the policy has verdicts to take (generated CTIs,
    ordering settings), ``narrow``: the columns they are taken over, collected."""

    rows: pl.LazyFrame
    count: int
    narrow: pl.DataFrame | None  # S, E for intervals, ARR with ordering settings

    def span(self) -> Span | None:
        """Where the rows lie (``tempo.tables.Span``): one more pass over the start and end
        columns, streamed, taken only for a join that may use it."""
        if not self.count:
            return None
        finite = pl.col(E) < INF
        figures = self.rows.select(
            pl.col(S).min(), pl.max_horizontal(pl.col(S).max() + 1, pl.col(E).filter(finite).max()).alias("__last"),
            finite.sum().alias("__finite"), (pl.col(E) - pl.col(S)).filter(finite).cast(pl.Float64).sum().alias("__length"),
        ).collect(engine="streaming").row(0)
        return Span(self.count, int(figures[0]), int(figures[1]), int(figures[2]), float(figures[3] or 0.0))


def _read_columns(node: SourceNode) -> _Table | None:
    """A table input as columns of ticks and payload values, or None when a row breaks a
    rule (the reference ingress then raises its error). Only the columns the checks need
    are read here: the order, start and end columns, and payload columns whose nulls the
    file's statistics do not rule out; the payload is left to the query's own scan."""
    source = node.source
    assert isinstance(source, TableSource)
    source.check_readable(node.name)
    raw, nullable = _scan_table(node)
    schema = raw.collect_schema()
    origin = source.origin_ticks()

    def ticks(name: str) -> pl.Expr | None:
        dtype = schema[name]
        if dtype == pl.Null:
            return None
        if isinstance(dtype, pl.Datetime):  # an instant: a naive one is UTC
            return pl.col(name).dt.epoch("us")
        return pl.col(name).cast(pl.Int64) + origin if origin else pl.col(name).cast(pl.Int64)

    start = ticks(source.start) if source.start else None
    end = ticks(source.end) if node.shape is EventShape.INTERVAL and source.end else None
    if start is None or (node.shape is EventShape.INTERVAL and end is None):
        return None
    times = [start.alias(S), (start + 1 if end is None else end).alias(E)]
    policy = TimePolicy.of_input(node)
    ordered = policy.ordered
    arrival = ticks(source.arrival) if ordered and source.arrival else None
    if ordered and arrival is None:
        return None

    def broken(ends: pl.Expr) -> pl.Expr:
        return (pl.col(S).is_null() | ends.is_null() | (ends <= pl.col(S)) | (pl.col(S) >= INF)).any()


    order = pl.col(source.order) if source.order is not None else None
    verdicts = policy.generates or ordered
    point = node.shape is EventShape.POINT
    # With generated CTIs or ordering settings the verdicts need the start column (and the
    # end, for intervals; the arrival) in memory: the rows are checked there. Otherwise the
    # checks run batch by batch, keeping no column, and only the order column is collected,
    # to see whether the rows are in order.
    wanted = (times[:1] if point else times) if verdicts else []
    if arrival is not None:
        wanted = [*wanted, arrival.alias(ARR)]
    if order is not None:
        wanted = [*wanted, order.alias("__order")]
    narrow = raw.select(wanted).collect() if wanted else None
    if verdicts:
        assert narrow is not None
        count, bad = narrow.select(pl.len(), broken(pl.col(S) + 1 if point else pl.col(E))).row(0)
        if arrival is not None:
            bad = bad or narrow[ARR].null_count() > 0
    else:
        count, bad = raw.select(*times).select(pl.len(), broken(pl.col(E))).collect(engine="streaming").row(0)
    if nullable:
        bad = bad or any(raw.select(pl.col(n).null_count() for n in nullable).collect(engine="streaming").row(0))
    if bad or (narrow is not None and order is not None and narrow["__order"].null_count()):
        return None
    if narrow is not None and order is not None:
        if not narrow["__order"].is_sorted():
            raw = raw.sort(order, maintain_order=True)  # a stable sort: rows of equal order keep file order
            narrow = narrow.sort("__order", maintain_order=True)
        narrow = narrow.drop("__order")
    if arrival is not None:
        assert narrow is not None
        if not narrow[ARR].is_sorted():  # arrivals going back: the reference ingress names the row
            return None
    payload = payload_schema(node.payload_type)
    columns = list(times)
    for f in record_fields(node.payload_type):
        c = pl.col(f.name)
        if isinstance(schema[f.name], pl.Datetime):
            c = c.dt.epoch("us")
        columns.append(c.cast(payload[f.name]).alias(f.name))
    rows = raw.select(columns)
    if node.over is not None:  # substreams: each row's key, a scalar as the payload's field gives it
        from tempo.vectorised.expressions import Scope, expr

        keys = rows.select(expr(node.over, Scope()).alias(KEY)).collect()
        if keys.schema[KEY] not in (pl.Int64, pl.Int32, pl.String, pl.Boolean):
            return None
        assert narrow is not None
        narrow = narrow.with_columns(keys[KEY])
    return _Table(rows, int(count), narrow if verdicts else None)


def _verdicts(
    node: SourceNode, table: _Table, rejected: list[Any], rows_wanted: bool = True
) -> tuple[pl.LazyFrame, EventCounts, list[tuple[int, int]]]:
    """The ingress rules of ``tempo.runtime.ingress`` over a table's columns, for an input
    whose CTIs its own rows generate: every row (admitted or not) counts towards generation,
    so the candidates (``Ingress.generate``) are a function of the rows alone, and the CTI
    in force at a row is the running maximum of the candidates before it. A row starting
    before it is dropped or adjusted by the policy (``Ingress.verdict``), counted and put on
    record in ``rejected``. Returns the admitted rows (lazy), the counts, and the candidates
    ``(position, value)`` for the CTI replay. Only the narrow columns are computed on; the
    payloads of the rows rejected are read when there are some, unless ``rows_wanted`` is
    False (the metrics alone: then neither rejections nor admitted rows are made)."""
    policy = TimePolicy.of_input(node)
    counts = EventCounts(received=table.count, admitted=table.count)
    if table.narrow is None:
        return table.rows, counts, []
    start = pl.col(S)
    position = pl.int_range(pl.len(), dtype=pl.Int64).alias("__pos")
    if policy.every_n:
        found, late_rows = _every_n(table.narrow, policy.every_n, policy.delay)
    else:
        period = start // policy.period
        before = period.cum_max().shift(1)
        candidate = pl.when(before.is_not_null() & (period > before)).then(start - policy.delay)
        ranked = table.narrow.lazy().with_columns(candidate.alias("__cand"), position)
        ranked = ranked.with_columns(pl.col("__cand").cum_max().shift(1).forward_fill().fill_null(NEG_INF).alias("__cti"))
        found, late_rows = pl.collect_all([
            ranked.filter(pl.col("__cand").is_not_null()).select("__pos", "__cand"),
            ranked.filter(start < pl.col("__cti")).select("__pos", "__cti"),
        ])
    candidates = list(zip(found["__pos"].to_list(), found["__cand"].to_list()))
    if not late_rows.height:
        return table.rows, counts, candidates
    late_starts = table.narrow[S].gather(late_rows["__pos"])
    late_ends = table.narrow[E].gather(late_rows["__pos"]) if E in table.narrow.columns else late_starts + 1
    late_rows = late_rows.with_columns(late_starts.alias(S), late_ends.alias(E))
    kind = POINT if node.shape is EventShape.POINT else INTERVAL
    fields = record_fields(node.payload_type)
    # Without rows wanted (the metrics alone), the verdicts are only counted: no payload read.
    payloads = _payloads_at(table, late_rows["__pos"]) if rows_wanted else [None] * late_rows.height
    changes: dict[str, list[Any]] = {"__pos": [], "__s": [], "__e": []}
    for row, late in zip(payloads, late_rows.iter_rows(named=True)):
        cti = late["__cti"]
        lifetime = adjusted_lifetime(kind, late[E], cti) if policy.adjust else None
        action = Action.DROPPED if lifetime is None else Action.ADJUSTED
        count_rejection(counts, Rule.START_BEFORE_CTI, action, False, None)
        counts.admitted -= 1 if lifetime is None else 0
        if row is not None:
            rec = (NEG_INF, kind, late[S], late[E], _payload(node, fields, row), late["__pos"], None)
            rejected.append((node.name, late["__pos"], item_of(rec), Rule.START_BEFORE_CTI, action, cti, None if lifetime is None else ("lifetime", *lifetime)))
        changes["__pos"].append(late["__pos"])
        changes["__s"].append(None if lifetime is None else lifetime[0])
        changes["__e"].append(None if lifetime is None else lifetime[1])
    return (_admitted(table, changes) if rows_wanted else table.rows), counts, candidates


def _payloads_at(table: _Table, positions: pl.Series) -> list[dict[str, Any]]:
    """The payload columns of the rows at these positions (ascending), read for them alone."""
    position = pl.int_range(pl.len(), dtype=pl.Int64).alias("__pos")
    wanted = pl.DataFrame({"__pos": positions}, schema={"__pos": pl.Int64}).lazy()
    return table.rows.with_columns(position).join(wanted, on="__pos", how="semi", maintain_order="left").collect().rows(named=True)


def _payload(node: SourceNode, fields: Any, row: dict[str, Any]) -> Any:
    values = [from_ticks(row[f.name]) if f.dtype is datetime and row[f.name] is not None else row[f.name] for f in fields]
    return node.payload_type(*values)


def _admitted(table: _Table, changes: dict[str, list[Any]]) -> pl.LazyFrame:
    """The rows less the verdicts: ``changes`` gives each rejected row's position and its
    admitted lifetime (``__s``, ``__e``), null when it is dropped."""
    position = pl.int_range(pl.len(), dtype=pl.Int64).alias("__pos")
    verdicts = pl.DataFrame(changes, schema={"__pos": pl.Int64, "__s": pl.Int64, "__e": pl.Int64}).with_columns(pl.lit(True).alias("__late"))
    return (
        table.rows.with_columns(position).join(verdicts.lazy(), on="__pos", how="left", maintain_order="left")
        .filter(pl.col("__late").is_null() | pl.col("__s").is_not_null())
        .with_columns(pl.coalesce("__s", S).alias(S), pl.coalesce("__e", E).alias(E))
        .drop("__pos", "__s", "__e", "__late")
    )


_CODES = {0: None, 1: Rule.EARLY_ARRIVAL, 2: Rule.START_BEFORE_CTI, 3: Rule.LATE_ARRIVAL}


def _ordered_verdicts(
    node: SourceNode, table: _Table, rejected: list[Any], rows_wanted: bool = True
) -> tuple[pl.LazyFrame, InputMetrics, list[tuple[int, int, int, Any, int]]]:
    """ASA's ordering settings over a table's columns, as the Spark scan takes them
    (``tempo.spark.ingress.scan.scan_ordered``): each verdict depends on two running figures
    over input order only, the largest start that passed both arrival checks before the row
    and, here without CTI rows, nothing else, so the early, late and out-of-order checks and
    the ADJUST arithmetic are columns. Returns the admitted rows, the counts, and the rows
    that move time ``(position, arrival, candidate, key, key candidate)`` for the replay's
    ``feed_ordered`` (a new largest start less the out-of-order tolerance, or a later
    arrival; with substreams, a new largest start of a key whose CTI it moves ahead of the
    input's), which gives the input's and the keys' CTIs, the clock-following CTIs and the
    watermark delays as in memory. With substreams the running figure is each key's."""
    policy = TimePolicy.of_input(node)
    narrow = table.narrow
    assert narrow is not None
    out_of_order, late, early = policy.out_of_order, policy.late, policy.early
    point = node.shape is EventShape.POINT
    start, arrival = pl.col(S), pl.col(ARR)
    end = start + 1 if point else pl.col(E)
    is_early = (start > arrival + early) if early is not None else pl.lit(False)
    is_late = (~is_early & (start < arrival - late)) if late is not None else pl.lit(False)
    ordered = pl.when(~pl.col("__early") & ~pl.col("__late")).then(start)
    keyed = KEY in narrow.columns
    before = pl.col("__ordered").cum_max().shift(1).forward_fill()  # cum_max is null at a null
    before = (before.over(KEY) if keyed else before).fill_null(NEG_INF)  # with substreams: the key's own figure
    cti = pl.col("__before") - out_of_order
    late_bound = (arrival - late) if late is not None else pl.lit(None, dtype=pl.Int64)
    late_kept = pl.lit(policy.adjust) & (pl.lit(point) | (end > late_bound))
    late_s = pl.when(pl.col("__late")).then(late_bound).otherwise(start)
    alive = ~pl.col("__early") & ~(pl.col("__late") & ~late_kept)
    out_now = alive & (late_s < cti)
    out_kept = pl.lit(policy.adjust) & (cti < INF) & (pl.lit(point) | (end > cti))
    adm_s = pl.when(out_now).then(cti).otherwise(late_s)
    dropped = pl.col("__early") | (pl.col("__late") & ~late_kept) | (out_now & ~out_kept)
    ranked = narrow.lazy().with_columns(
        is_early.fill_null(False).alias("__early"), is_late.fill_null(False).alias("__late"), pl.int_range(pl.len(), dtype=pl.Int64).alias("__pos")
    ).with_columns(ordered.alias("__ordered")).with_columns(before.alias("__before"))
    verdicts = ranked.with_columns(
        pl.when(dropped).then(2).when(pl.col("__late") | out_now).then(1).otherwise(0).alias("__status"),
        pl.when(pl.col("__early")).then(1).when(out_now).then(2).when(pl.col("__late")).then(3).otherwise(0).alias("__rule"),
        pl.when(pl.col("__early")).then(arrival + (early or 0)).when(out_now).then(cti).otherwise(late_bound).alias("__bound"),
        adm_s.alias("__adm_s"), pl.when(pl.lit(point)).then(adm_s + 1).otherwise(end).alias("__adm_e"), late_kept.alias("__late_kept"),
        pl.when(pl.lit(not keyed) & (pl.col("__ordered") > pl.col("__before"))).then(pl.col("__ordered") - out_of_order).alias("__c"),
        # With substreams, a new largest start of the key moves the key's own CTI, which goes
        # downstream when it is ahead of the input's (at least the arrival less the late tolerance).
        pl.when(
            pl.lit(keyed and late is not None) & (pl.col("__ordered") > pl.col("__before"))
            & (pl.col("__ordered") - out_of_order > arrival - (late or 0))
        ).then(pl.col("__ordered") - out_of_order).alias("__kc"),
        (arrival > arrival.cum_max().shift(1)).fill_null(True).alias("__arr_step"),
        (pl.col(KEY) if keyed else pl.lit(None)).alias("__key"),
    )
    found, moving = pl.collect_all([
        verdicts.filter(pl.col("__status") != 0).select(
            "__pos", S, *([] if point else [E]), ARR, "__status", "__rule", "__bound", "__adm_s", "__adm_e", "__late", "__late_kept", "__key"
        ),
        verdicts.filter(pl.col("__c").is_not_null() | pl.col("__kc").is_not_null() | pl.col("__arr_step")).select("__pos", ARR, "__c", "__key", "__kc"),
    ])
    moves = [(p, a, NEG_INF if c is None else c, k, NEG_INF if kc is None else kc) for p, a, c, k, kc in moving.iter_rows()]
    counts = InputMetrics(received=table.count)
    if keyed:
        for key, n in narrow.group_by(KEY).len().iter_rows():
            counts.substreams[key] = SubstreamMetrics(received=n)
    fields = record_fields(node.payload_type)
    payloads = _payloads_at(table, found["__pos"]) if rows_wanted and found.height else [None] * found.height
    changes: dict[str, list[Any]] = {"__pos": [], "__s": [], "__e": []}
    for row, r in zip(payloads, found.iter_rows(named=True)):
        rule = _CODES[r["__rule"]]
        assert rule is not None
        action = Action.DROPPED if r["__status"] == 2 else Action.ADJUSTED
        late_action = (Action.ADJUSTED if r["__late_kept"] else Action.DROPPED) if r["__late"] else None
        for c in (counts, counts.substreams[r["__key"]]) if keyed else (counts,):
            count_rejection(c, rule, action, True, late_action)
        admitted_as = ("lifetime", r["__adm_s"], r["__adm_e"]) if action is Action.ADJUSTED else None
        if row is not None:
            rec = (r[ARR], POINT if point else INTERVAL, r[S], r[S] + 1 if point else r[E], _payload(node, fields, row), r["__pos"], None)
            rejected.append((node.name, r["__pos"], item_of(rec), rule, action, r["__bound"], admitted_as))
        changes["__pos"].append(r["__pos"])
        changes["__s"].append(r["__adm_s"] if admitted_as else None)
        changes["__e"].append(r["__adm_e"] if admitted_as else None)
    for every in (counts, *counts.substreams.values()):
        every.admitted = every.received - every.dropped
    return (_admitted(table, changes) if rows_wanted else table.rows), counts, moves


def _every_n(narrow: pl.DataFrame, every_n: int, delay: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Count generation's candidates ``(__pos, __cand)`` and the rows starting before the CTI
    in force ``(__pos, __cti)``, without a column per row: the candidates are the starts of
    rows N-1, 2N-1, ... less the delay, so the CTI in force in the k-th run of N rows is the
    largest of the first k candidates, and the rows are compared with it N at a time."""
    import numpy as np

    starts = narrow[S].to_numpy()
    n = len(starts)
    positions = np.arange(every_n - 1, n, every_n, dtype=np.int64)
    values = starts[every_n - 1::every_n] - delay
    in_force = np.maximum.accumulate(np.concatenate(([NEG_INF], values)))  # [k]: rows kN .. kN+N-1
    runs = n // every_n
    late = np.flatnonzero(starts[: runs * every_n].reshape(runs, every_n) < in_force[:runs, None])
    late = np.concatenate((late, runs * every_n + np.flatnonzero(starts[runs * every_n:] < in_force[runs])))
    found = pl.DataFrame({"__pos": positions, "__cand": values}, schema={"__pos": pl.Int64, "__cand": pl.Int64})
    return found, pl.DataFrame({"__pos": late, "__cti": in_force[late // every_n]}, schema={"__pos": pl.Int64, "__cti": pl.Int64})


def _ingress(
    query: Query, mode: TimestampMode, rows_wanted: bool = True
) -> tuple[CtiReplay, dict[str, pl.LazyFrame], dict[str, EventCounts], dict[str, Callable[[], Span | None]]]:
    """Every input admitted (column by column, or item by item through the reference
    ingress) and the CTIs of the whole query replayed; how to take the span of each table
    read column by column. ``rows_wanted=False``: for the metrics alone (a table's rejections and
    admitted rows are not made)."""
    replay = CtiReplay(query)
    spans: dict[str, Callable[[], Span | None]] = {}
    needs_arrival = query.ordered_by_arrival
    frames: dict[str, pl.LazyFrame] = {}
    counts: dict[str, EventCounts] = {}
    local: dict[str, dict[int, list[Any]]] = {}
    rows: list[tuple[Key, str, Any]] = []
    for decl, node in enumerate(query.sources):
        read = _read_columns(node) if _columnar(node, needs_arrival) else None
        if read is not None:
            mode.saw(aware=True)  # a table's times are instants, given as aware UTC datetimes
            spans[node.name] = functools.cache(read.span)  # taken once, if a join asks
            if TimePolicy.of_input(node).ordered:
                frames[node.name], counts[node.name], moves = _ordered_verdicts(node, read, replay.rejected, rows_wanted)
                rows.extend(((arrival, decl, position, 0), node.name, ("ordered", arrival, c, k, kc)) for position, arrival, c, k, kc in moves)
                continue
            frames[node.name], counts[node.name], candidates = _verdicts(node, read, replay.rejected, rows_wanted)
            rows.extend(((NEG_INF, decl, position, 0), node.name, ("generated", value)) for position, value in candidates)
            continue
        local[node.name] = replay.admit_locally(node.name)
        for rec in stamped(node, prepare(node, mode, node.name in needs_arrival)):
            rows.append(((rec[0], decl, rec[5], 0), node.name, rec))
    replay.feed_all(rows)
    for node in query.sources:
        if node.name in local:
            frames[node.name] = _events_frame(node, local[node.name])
    return replay, frames, counts, spans


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

