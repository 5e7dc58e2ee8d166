"""The vectorised executor's ingress: every input admitted, column by column where it can be
(docs/vectorised.md, "How it runs" 1), else item by item through the reference ingress, and
the CTIs of the whole query replayed (``CtiReplay``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import attrs
import polars as pl

from tempo.clocks import TimeDomain
from tempo.events import EventShape
from tempo.expr.schema import is_record_type, record_fields
from tempo.plan.nodes import SourceNode
from tempo.plan.query import Query
from tempo.result import Action, EventCounts, InputMetrics, Rule, SubstreamMetrics
from tempo.runtime.ingress import (
    Rejected,
    CTI,
    END,
    HEARTBEAT,
    INTERVAL,
    POINT,
    START,
    TimestampMode,
    adjusted_lifetime,
    count_rejection,
    item_of,
    prepare,
)
from tempo.runtime.policy import TimePolicy
from tempo.runtime.replay import Candidate, CtiReplay, Key, OrderedStep
from tempo.runtime.stamping import stamped
from tempo.runtime.verdicts import generation, in_force, ordered_verdicts, own_ctis
from tempo.sources import ParquetSource, TableSource
from tempo.tables import Span
from tempo.ticks import INF, NEG_INF
from tempo.vectorised.expressions import END as E
from tempo.vectorised.expressions import START as S
from tempo.vectorised.expressions import events_frame, from_column, payload_schema

ARR = "__tempo_arr"
"""The arrival column (ticks) of an input with ordering settings, among its narrow columns."""
KEY = "__tempo_key"
"""The substream key of an input with ordering settings and substreams, among its narrow columns."""


def columnar(node: SourceNode, query: Query) -> bool:
    """Whether ``node`` may be read column by column (docs/vectorised.md)."""
    return _reads_columns(node, query.ordered_by_arrival) or _reads_items(node, query)


def scalar_table(node: SourceNode) -> bool:
    """Whether ``node`` is a table in event time whose payload class only stores scalar
    fields: what either column path (``_read_columns``, ``_read_items``) reads."""
    from tempo.tables import stores_only

    source = node.source
    return (
        isinstance(source, TableSource)
        and node.time is TimeDomain.EVENT
        and stores_only(source.payload_type)
        and all(f.element is None and not is_record_type(f.dtype) for f in record_fields(source.payload_type))
    )


def _reads_columns(node: SourceNode, needs_arrival: set[str]) -> bool:
    """Whether ``node`` is a table of points or intervals whose CTIs its own rows generate,
    or ordering settings give, read column by column by ``_read_columns``."""
    source = node.source
    policy = TimePolicy.of_input(node)
    return (
        scalar_table(node)
        and isinstance(source, TableSource)
        and node.shape in (EventShape.POINT, EventShape.INTERVAL)
        and source.kind is None
        and node.name not in needs_arrival
        and (node.over is None or _ordered_only(policy))
        and (_generated_only(policy) and source.arrival is None or _ordered_only(policy) and source.arrival is not None)
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
    stated: tuple[Span | None] | None = None  # the span a Parquet file's statistics give

    def span(self) -> Span | None:
        """Where the rows lie (``tempo.tables.Span``): from the file's statistics, or one
        more pass over the start and end columns, streamed, taken only for a join that may
        use it."""
        if self.stated is not None:
            return self.stated[0]
        return _span(self.rows) if self.count else None


def ticks_of(schema: pl.Schema, origin: int, unit: str | None = None) -> Callable[[str], pl.Expr | None]:
    """A time column of the table as ticks (None for a column of nulls only): a timestamp of
    any unit, or an integer count of ``unit`` (``TableSource.time_unit``; None: as it is, for
    an order column) since ``origin``, scaled by one multiply. A nanosecond value below a
    microsecond is cut here: ``below_microsecond`` finds it first."""
    from tempo.tables import TIME_UNITS

    multiply, divide = TIME_UNITS[unit or "us"]

    def ticks(name: str) -> pl.Expr | None:
        dtype = schema[name]
        if dtype == pl.Null:
            return None
        if isinstance(dtype, pl.Datetime):  # an instant: a naive one is UTC
            return pl.col(name).dt.epoch("us")
        c = pl.col(name).cast(pl.Int64)
        c = c * multiply if multiply != 1 else c // divide if divide != 1 else c
        return c + origin if origin else c

    return ticks


def below_microsecond(source: TableSource[Any], schema: pl.Schema) -> pl.Expr | None:
    """Whether a row holds a value with a part below a microsecond in a column it reads
    (``tempo.tables.nanosecond_columns``: a nanosecond timestamp or duration in a time
    column or a datetime or timedelta field, an integer time in ``time_unit="ns"``), or None
    when no column may: such a table goes item by item, where the reference ingress names
    the row (docs/semantics.md 2.5)."""
    from tempo.tables import nanosecond_columns

    def arrow(dtype: Any) -> Any:
        import pyarrow as pa

        if isinstance(dtype, (pl.Datetime, pl.Duration)):
            unit = dtype.time_unit or "us"
            return pa.timestamp(unit) if isinstance(dtype, pl.Datetime) else pa.duration(unit)
        return pa.int64() if dtype.is_integer() else pa.null()

    columns = nanosecond_columns(source, {name: arrow(dtype) for name, dtype in schema.items()})
    if not columns:
        return None
    return pl.any_horizontal(*[(pl.col(n).cast(pl.Int64) % 1000 != 0).fill_null(False) for n in columns])


def payload_columns(node: SourceNode, schema: pl.Schema) -> list[pl.Expr]:
    """The payload's columns as the plan holds them (datetimes in ticks, each field's type)."""
    payload = payload_schema(node.payload_type)
    columns = []
    for f in record_fields(node.payload_type):
        c = pl.col(f.name)
        if isinstance(schema[f.name], pl.Datetime):
            c = c.dt.epoch("us")
        elif isinstance(schema[f.name], pl.Duration):  # any unit, as microseconds
            c = c.dt.total_microseconds()
        columns.append(c.cast(payload[f.name]).alias(f.name))
    return columns


def _open_table(node: SourceNode) -> tuple[TableSource[Any], pl.LazyFrame, list[str], pl.Schema, Callable[[str], pl.Expr | None]]:
    """A table input checked readable and scanned (``_scan_table``: the frame and the
    payload columns that may hold a null), its schema, and its time columns as ticks."""
    source = node.source
    assert isinstance(source, TableSource)
    source.check_readable(node.name)
    raw, nullable = _scan_table(node)
    schema = raw.collect_schema()
    return source, raw, nullable, schema, ticks_of(schema, source.origin_ticks(), source.time_unit)


def _read_columns(node: SourceNode, follows_order: bool = True) -> _Table | None:
    """A table input as columns of ticks and payload values, or None when a row breaks a
    rule (the reference ingress then raises its error). Only the columns the checks need
    are read here: the order, start and end columns, and payload columns whose nulls the
    file's statistics do not rule out; the payload is left to the query's own scan.
    ``follows_order``: whether the query's results may depend on the order of events that
    start together (``Query.follows_input_order``)."""
    source, raw, nullable, schema, ticks = _open_table(node)
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
    # Without verdicts, and where no operator looks at the order of events starting
    # together, the rows may be taken in any order: the order column is only checked.
    if order is not None and not verdicts and not follows_order:
        order = None
        checked_order = [pl.col(source.order).is_null().alias("__null_order")] if source.order else []
    else:
        checked_order = []
    # With generated CTIs or ordering settings the verdicts need the start column (and the
    # end, for intervals; the arrival) in memory: the rows are checked there. Otherwise the
    # checks run batch by batch, keeping no column, or not at all when a Parquet file's
    # statistics prove them (``points_proved_by_statistics``), and only the order column is
    # collected, to see whether the rows are in order.
    wanted = (times[:1] if point else times) if verdicts else []
    if arrival is not None:
        wanted = [*wanted, arrival.alias(ARR)]
    if order is not None:
        wanted = [*wanted, order.alias("__order")]
    narrow = raw.select(wanted).collect() if wanted else None
    proved = None
    if verdicts:
        assert narrow is not None
        count, bad = narrow.select(pl.len(), broken(pl.col(S) + 1 if point else pl.col(E))).row(0)
        if arrival is not None:
            bad = bad or narrow[ARR].null_count() > 0
    elif point and (proved := _proved_by_statistics(source)) is not None:
        count, bad, nullable = proved[0], False, []
    else:
        count, bad, *null_order = (
            raw.select(*times, *checked_order)
            .select(pl.len(), broken(pl.col(E)), *(pl.col("__null_order").any() for _ in checked_order))
            .collect(engine="streaming")
            .row(0)
        )
        bad = bad or any(null_order)
    if nullable:
        bad = bad or any(raw.select(pl.col(n).null_count() for n in nullable).collect(engine="streaming").row(0))
    below = below_microsecond(source, schema)
    if below is not None:
        bad = bad or raw.select(below.any()).collect(engine="streaming").item()
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
    rows = raw.select(*times, *payload_columns(node, schema))
    if node.over is not None:  # substreams: each row's key, a scalar as the payload's field gives it
        from tempo.vectorised.expressions import Scope, expr

        keys = rows.select(expr(node.over, Scope()).alias(KEY)).collect()
        if keys.schema[KEY] not in (pl.Int64, pl.Int32, pl.String, pl.Boolean):
            return None
        assert narrow is not None
        narrow = narrow.with_columns(keys[KEY])
    return _Table(rows, int(count), narrow if verdicts else None, None if proved is None else (proved[1],))


def _proved_by_statistics(source: TableSource[Any]) -> tuple[int, Span | None] | None:
    """The row count and span of a single Parquet file of points whose statistics prove
    every row good (``tempo.tables.points_proved_by_statistics``), else None."""
    import os

    if not (isinstance(source, ParquetSource) and os.path.isfile(source.path)):
        return None
    import pyarrow.parquet as pq

    from tempo.tables import points_proved_by_statistics

    return points_proved_by_statistics([pq.ParquetFile(source.path)], source)


def _verdicts(
    node: SourceNode, table: _Table, rejected: list[Rejected], rows_wanted: bool = True
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
    own = own_ctis(policy, table.narrow[S].to_numpy())
    candidates = list(zip(own.positions.tolist(), own.values.tolist()))
    late_rows = pl.DataFrame({"__pos": own.late, "__cti": own.late_cti}, schema={"__pos": pl.Int64, "__cti": pl.Int64})
    if not late_rows.height:
        return table.rows, counts, candidates
    late_starts = table.narrow[S].gather(late_rows["__pos"])
    late_ends = table.narrow[E].gather(late_rows["__pos"]) if E in table.narrow.columns else late_starts + 1
    late_rows = late_rows.with_columns(late_starts.alias(S), late_ends.alias(E))
    kind = POINT if node.shape is EventShape.POINT else INTERVAL
    fields = record_fields(node.payload_type)
    # Without rows wanted (the metrics alone), the verdicts are only counted: no payload read.
    payloads = _payloads_at(table.rows, late_rows["__pos"]) if rows_wanted else [None] * late_rows.height
    changes: dict[str, list[Any]] = {"__pos": [], "__s": [], "__e": []}
    for row, late in zip(payloads, late_rows.iter_rows(named=True)):
        cti = late["__cti"]
        lifetime = adjusted_lifetime(kind, late[E], cti) if policy.adjust else None
        action = Action.DROPPED if lifetime is None else Action.ADJUSTED
        count_rejection(counts, Rule.START_BEFORE_CTI, action, False, None)
        counts.admitted -= 1 if lifetime is None else 0
        if row is not None:
            rec = (NEG_INF, kind, late[S], late[E], _payload(node, fields, row), late["__pos"], None)
            rejected.append(
                Rejected(
                    node.name,
                    late["__pos"],
                    item_of(rec),
                    Rule.START_BEFORE_CTI,
                    action,
                    cti,
                    None if lifetime is None else ("lifetime", *lifetime),
                )
            )
        changes["__pos"].append(late["__pos"])
        changes["__s"].append(None if lifetime is None else lifetime[0])
        changes["__e"].append(None if lifetime is None else lifetime[1])
    return (_admitted(table, changes) if rows_wanted else table.rows), counts, candidates


def _payloads_at(rows: pl.LazyFrame, positions: pl.Series) -> list[dict[str, Any]]:
    """The payload columns of the rows at these positions (ascending), read for them alone."""
    position = pl.int_range(pl.len(), dtype=pl.Int64).alias("__pos")
    wanted = pl.DataFrame({"__pos": positions}, schema={"__pos": pl.Int64}).lazy()
    return rows.with_columns(position).join(wanted, on="__pos", how="semi", maintain_order="left").collect().rows(named=True)


def _payload(node: SourceNode, fields: Any, row: dict[str, Any]) -> Any:
    """A rejected row's payload, as the reference ingress makes it (a table's times are aware)."""
    return node.payload_type(*(from_column(row[f.name], f.dtype, f.element, naive=False) for f in fields))


def _admitted(table: _Table, changes: dict[str, list[Any]]) -> pl.LazyFrame:
    """The rows less the verdicts: ``changes`` gives each rejected row's position and its
    admitted lifetime (``__s``, ``__e``), null when it is dropped."""
    position = pl.int_range(pl.len(), dtype=pl.Int64).alias("__pos")
    verdicts = pl.DataFrame(changes, schema={"__pos": pl.Int64, "__s": pl.Int64, "__e": pl.Int64}).with_columns(
        pl.lit(True).alias("__late")
    )
    return (
        table.rows.with_columns(position)
        .join(verdicts.lazy(), on="__pos", how="left", maintain_order="left")
        .filter(pl.col("__late").is_null() | pl.col("__s").is_not_null())
        .with_columns(pl.coalesce("__s", S).alias(S), pl.coalesce("__e", E).alias(E))
        .drop("__pos", "__s", "__e", "__late")
    )


def _ordered_verdicts(
    node: SourceNode, table: _Table, rejected: list[Rejected], rows_wanted: bool = True
) -> tuple[pl.LazyFrame, InputMetrics, list[tuple[int, int, int, Any, int]]]:
    """ASA's ordering settings over a table's columns (``tempo.runtime.verdicts.
    ordered_verdicts``). Returns the admitted rows, the counts, and the rows that move time
    ``(position, arrival, candidate, key, key candidate)`` for the replay's
    ``feed_ordered`` (a new largest start less the out-of-order tolerance, or a later
    arrival; with substreams, a new largest start of a key whose CTI it moves ahead of the
    input's), which gives the input's and the keys' CTIs, the clock-following CTIs and the
    watermark delays as in memory."""
    import numpy as np

    policy = TimePolicy.of_input(node)
    narrow = table.narrow
    assert narrow is not None
    point = node.shape is EventShape.POINT
    keyed = KEY in narrow.columns
    starts, arrivals = narrow[S].to_numpy(), narrow[ARR].to_numpy()
    ends = starts + 1 if point else narrow[E].to_numpy()
    codes = narrow[KEY].rank("dense").to_numpy() if keyed else None
    v = ordered_verdicts(policy, starts, ends, arrivals, codes, point)
    rejected_rows = np.flatnonzero(v.status)
    moving = np.flatnonzero((v.candidate > NEG_INF) | (v.key_candidate > NEG_INF) | v.arrival_step)
    keys = narrow[KEY].gather(rejected_rows).to_list() if keyed else [None] * len(rejected_rows)
    moving_keys = narrow[KEY].gather(moving).to_list() if keyed else [None] * len(moving)
    moves = list(
        zip(moving.tolist(), arrivals[moving].tolist(), v.candidate[moving].tolist(), moving_keys, v.key_candidate[moving].tolist())
    )
    counts = InputMetrics(received=table.count)
    if keyed:
        for key, n in narrow.group_by(KEY).len().iter_rows():
            counts.substreams[key] = SubstreamMetrics(received=n)
    fields = record_fields(node.payload_type)
    wanted = rows_wanted and len(rejected_rows)
    payloads = _payloads_at(table.rows, pl.Series(rejected_rows, dtype=pl.Int64)) if wanted else [None] * len(rejected_rows)
    changes: dict[str, list[Any]] = {"__pos": [], "__s": [], "__e": []}
    for row, i, key in zip(payloads, rejected_rows.tolist(), keys):
        rule = v.rule_at(i)
        action = Action.DROPPED if v.status[i] == 2 else Action.ADJUSTED
        late_action = (Action.ADJUSTED if v.late_kept[i] else Action.DROPPED) if v.late[i] else None
        for c in (counts, counts.substreams[key]) if keyed else (counts,):
            count_rejection(c, rule, action, True, late_action)
        admitted_as = ("lifetime", int(v.start[i]), int(v.end[i])) if action is Action.ADJUSTED else None
        if row is not None:
            rec = (int(arrivals[i]), POINT if point else INTERVAL, int(starts[i]), int(ends[i]), _payload(node, fields, row), i, None)
            rejected.append(Rejected(node.name, i, item_of(rec), rule, action, int(v.bound[i]), admitted_as))
        changes["__pos"].append(i)
        changes["__s"].append(admitted_as[1] if admitted_as else None)
        changes["__e"].append(admitted_as[2] if admitted_as else None)
    for every in (counts, *counts.substreams.values()):
        every.admitted = every.received - every.dropped
    return (_admitted(table, changes) if rows_wanted else table.rows), counts, moves


def admit_inputs(
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
    as_items: dict[str, tuple[int, SourceNode, _Items]] = {}

    def item_by_item(decl: int, node: SourceNode) -> None:  # the reference ingress, on the replay
        local[node.name] = replay.admit_locally(node.name)
        for rec in stamped(node, prepare(node, mode, node.name in needs_arrival)):
            rows.append(((rec[0], decl, rec[5], 0), node.name, rec))

    for decl, node in enumerate(query.sources):
        if _reads_items(node, query):
            items = _read_items(node, node.name in needs_arrival)
            if items is not None:
                mode.saw(aware=True)
                as_items[node.name] = (decl, node, items)
                continue
        read = _read_columns(node, query.follows_input_order) if _reads_columns(node, needs_arrival) else None
        if read is not None:
            mode.saw(aware=True)  # a table's times are instants, given as aware UTC datetimes
            spans[node.name] = functools.cache(read.span)  # taken once, if a join asks
            if TimePolicy.of_input(node).ordered:
                frames[node.name], counts[node.name], moves = _ordered_verdicts(node, read, replay.rejected, rows_wanted)
                rows.extend(
                    ((arrival, decl, position, 0), node.name, OrderedStep(arrival, c, k, kc)) for position, arrival, c, k, kc in moves
                )
                continue
            frames[node.name], counts[node.name], candidates = _verdicts(node, read, replay.rejected, rows_wanted)
            rows.extend(((NEG_INF, decl, position, 0), node.name, Candidate("generated", value)) for position, value in candidates)
            continue
        item_by_item(decl, node)
    # Tables read as items, each after the input it imports from (whose CTIs do not depend on it).
    while as_items:
        name = next(n for n, (_, node, _) in as_items.items() if TimePolicy.of_input(node).import_from not in as_items)
        decl, node, items = as_items.pop(name)
        exporter = TimePolicy.of_input(node).import_from
        verdicts = None
        if exporter is None or exporter not in local:
            imported = None if exporter is None else _imported(query, node, decl, items, [r for r in rows if r[1] not in local])
            verdicts = _item_verdicts(node, items, imported, replay.rejected, rows_wanted)
        if verdicts is None:  # the reference ingress raises the error, or admits what imports from it
            item_by_item(decl, node)
            continue
        frames[name], counts[name], moved = verdicts
        rows.extend(((arrival, decl, position, 0), name, Candidate(origin, value)) for position, arrival, origin, value in moved)
        spans[name] = functools.cache(functools.partial(_span, frames[name]))
    replay.feed_all(rows)
    for node in query.sources:
        if node.name in local:
            frames[node.name] = events_frame(node.payload_type, local[node.name].values()).lazy()
    return replay, frames, counts, spans


def _imported(query: Query, node: SourceNode, decl: int, items: _Items, fed: list[tuple[Key, str, Any]]) -> pl.Series:
    """The CTI ``node`` imports in force at each of its rows: the latest step of the input it
    imports from keyed before the row, from a replay of what the inputs read so far feed
    (the inputs it imports from among them, read column by column)."""
    import numpy as np

    exporter = TimePolicy.of_input(node).import_from
    assert exporter is not None
    replay = CtiReplay(query)
    replay.feed_all(list(fed))
    steps = replay.steps[exporter]
    arrivals = np.array([key[0] for key, _ in steps], dtype=np.int64)
    values = np.array([NEG_INF, *(t for _, t in steps)], dtype=np.int64)
    # A step keyed (arrival, declaration, ...) comes before a row of this input at the same
    # arrival when its input is declared first.
    first = [s.name for s in query.sources].index(exporter) < decl
    at = np.searchsorted(arrivals, items.narrow[ARR].to_numpy(), side="right" if first else "left")
    return pl.Series("__imported", values[at], dtype=pl.Int64)


def _span(rows: pl.LazyFrame) -> Span | None:
    """Where the admitted events lie (``tempo.tables.Span``), one streamed pass."""
    finite = pl.col(E) < INF
    figures = (
        rows.select(
            pl.len(),
            pl.col(S).min(),
            pl.max_horizontal(pl.col(S).max() + 1, pl.col(E).filter(finite).max()).alias("__last"),
            finite.sum().alias("__finite"),
            (pl.col(E) - pl.col(S)).filter(finite).cast(pl.Float64).sum().alias("__length"),
        )
        .collect(engine="streaming")
        .row(0)
    )
    if not figures[0]:
        return None
    return Span(int(figures[0]), int(figures[1]), int(figures[2]), int(figures[3]), float(figures[4] or 0.0))


# ---- tables whose rows are items of every kind ------------------------------------------------
#
# A table with a kind column (edges, CTI rows, heartbeats), an arrival column without ordering
# settings, or taking part in an import. Its CTIs are the running maximum of what advanced it
# before each row: its CTI rows, its generated candidates (functions of its rows alone), and
# the CTIs it imports (known first, from a replay of the inputs it imports from, which do not
# depend on it). So each row's CTI in force is a column, and only the rows that start (an end
# edge: end) before it, with the end edges of start edges that did, go through Python, in
# input order, by the rules of ``Ingress.verdict`` and ``Ingress._end_edge``.

_EVENTS = (POINT, INTERVAL, START)
"""The kinds counted by generation and checked against the CTI at their start."""


def _reads_items(node: SourceNode, query: Query) -> bool:
    """Whether ``node`` is such a table, read column by column (an input it imports from
    must be one too; rows that break a rule still go item by item, for the reference error)."""
    source = node.source
    policy = TimePolicy.of_input(node)
    if not (
        scalar_table(node)
        and isinstance(source, TableSource)
        and not policy.ordered
        and node.over is None
        and (source.kind is not None or source.arrival is not None or node.name in query.ordered_by_arrival)
        and (source.arrival is not None or node.name not in query.ordered_by_arrival)
    ):
        return False
    if node.shape is EventShape.EDGE and not _compares_fields(source.payload_type):
        return False  # an end edge closes the start edge with an equal payload: by its fields alone
    return policy.import_from is None or _reads_items(query.source(policy.import_from), query)


def kind_codes(node: SourceNode, schema: pl.Schema) -> pl.Expr | None:
    """Each row's kind code (``tempo.tables.KINDS``; null for a word that is not one in
    lowercase: ``respelled_kinds``), or the shape's one kind without a kind column; None when
    the kind column does not hold text."""
    from tempo.tables import KINDS

    source = node.source
    assert isinstance(source, TableSource)
    if source.kind is None:
        return pl.lit(POINT if node.shape is EventShape.POINT else INTERVAL, pl.Int64)
    if schema[source.kind] != pl.String:
        return None
    # Lowercase words by comparisons (faster than a lookup: bench/README.md, "Latest figures",
    # tempo-vectorised); other spellings
    # by a second pass, lowercased, when some row is left without a kind.
    word = pl.col(source.kind)
    chain: Any = pl
    for name, code in KINDS.items():
        chain = chain.when(word == name).then(code)
    kinds: pl.Expr = chain.otherwise(None).cast(pl.Int64)
    return kinds


def respelled_kinds(source: TableSource[Any], raw: pl.LazyFrame, kinds: pl.Series) -> pl.Series:
    """``kinds`` (``kind_codes``) with the words in other spellings read, lowercased, when
    some row other than a null one was left without a kind (nulls stay null)."""
    from tempo.tables import KINDS

    unread = kinds.null_count()
    if not unread or source.kind is None or unread == raw.select(pl.col(source.kind).null_count()).collect().item():
        return kinds
    lowered = raw.select(pl.col(source.kind).str.to_lowercase().replace_strict(KINDS, default=None, return_dtype=pl.Int64))
    return lowered.collect().to_series()


def _compares_fields(cls: type) -> bool:
    """True when instances of ``cls`` are equal when their fields are (attrs' generated ``__eq__``)."""
    code = getattr(cls.__dict__.get("__eq__"), "__code__", None)
    return code is not None and code.co_filename.startswith("<attrs generated")


@attrs.frozen
class _Items:
    """A table read as items: ``narrow`` (collected, in input order) holds each row's
    ``__pos``, ``__kind``, S and E (an end edge's own end; a start edge's is infinity, a CTI's
    and a heartbeat's their time) and ARR (inherited where absent, ``NEG_INF`` before any);
    ``rows`` (lazy) the payload columns, in the same order."""

    narrow: pl.DataFrame
    rows: pl.LazyFrame


def _read_items(node: SourceNode, needs_arrival: bool) -> _Items | None:
    """The table's rows as items, or None when a row breaks a rule (the reference ingress
    then raises its error): a kind unknown or not of the shape, a null time, an end not
    after its start, a start at infinity, a null in a field not declared optional, a
    heartbeat or (with an import) any row without an arrival, arrivals going back."""
    source, raw, nullable, schema, ticks = _open_table(node)
    start = ticks(source.start) if source.start else None
    if start is None:
        return None
    end = ticks(source.end) if source.end else None
    arrival = ticks(source.arrival) if source.arrival else None
    kind = kind_codes(node, schema)
    if kind is None:
        return None
    order = [pl.col(source.order).alias("__order")] if source.order is not None else []
    null = pl.any_horizontal(pl.col(n).is_null() for n in nullable) if nullable else pl.lit(False)
    below = below_microsecond(source, schema)
    if below is not None and raw.select(below.any()).collect().item():
        return None
    narrow = raw.select(
        kind.alias("__kind"),
        start.alias("__s"),
        (end if end is not None else pl.lit(None, pl.Int64)).alias("__e"),
        (arrival if arrival is not None else pl.lit(None, pl.Int64)).alias("__arr"),
        null.alias("__null"),
        *order,
    ).collect()
    narrow = narrow.with_columns(respelled_kinds(source, raw, narrow["__kind"]).alias("__kind"))
    if order:
        if narrow["__order"].null_count():
            return None
        if not narrow["__order"].is_sorted():
            raw = raw.sort(source.order, maintain_order=True)  # a stable sort: rows of equal order keep file order
            narrow = narrow.sort("__order", maintain_order=True)
    k, s, e, arr = pl.col("__kind"), pl.col("__s"), pl.col("__e"), pl.col("__arr")
    allowed = {EventShape.POINT: [POINT], EventShape.INTERVAL: [INTERVAL], EventShape.EDGE: [START, END]}[node.shape]
    bad = (
        k.is_null()
        | ~k.is_in([*allowed, CTI, HEARTBEAT])
        | (s.is_null() & (k != HEARTBEAT))
        | (k.is_in([INTERVAL, END]) & (e.is_null() | (e <= s)))
        | ((k < CTI) & ((s >= INF) | pl.col("__null")))
        | (arr.is_null() & ((k == HEARTBEAT) | pl.lit(needs_arrival)))
    )
    inherited = arr.forward_fill().fill_null(NEG_INF)
    checks = narrow.select(
        bad.any().alias("bad"), inherited.is_sorted().alias("sorted"), (inherited.max() < INF).fill_null(True).alias("finite")
    )
    if checks.row(0) != (False, True, True):
        return None
    narrow = narrow.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("__pos"),
        k,
        inherited.alias(ARR),
        pl.when(k == HEARTBEAT).then(inherited).otherwise(s).alias(S),  # a heartbeat's time is its arrival
        pl.when(k == POINT)
        .then(s + 1)
        .when(k == START)
        .then(INF)
        .when(k.is_in([INTERVAL, END]))
        .then(e)
        .when(k == HEARTBEAT)
        .then(inherited)
        .otherwise(s)
        .alias(E),
    )
    return _Items(narrow, raw.select(*payload_columns(node, schema)))


def _item_verdicts(
    node: SourceNode, items: _Items, imported: pl.Series | None, rejected: list[Rejected], rows_wanted: bool = True
) -> tuple[pl.LazyFrame, EventCounts, list[tuple[int, int, str, int]]] | None:
    """The ingress rules over a table read as items: the admitted events (lazy; an edge pair
    as one lifetime), the counts, and the rows that advance its CTI ``(position, arrival,
    origin, value)`` for the replay. ``imported``: the CTI the input imports in force at each
    row. None when the rows would raise instead (an event before a CTI without settings, an
    end edge without its start edge): the reference ingress raises the error."""
    import numpy as np

    policy = TimePolicy.of_input(node)
    narrow = items.narrow
    k = pl.col("__kind")
    counted = k.is_in(list(_EVENTS))
    row_kinds, row_starts = narrow["__kind"].to_numpy(), narrow[S].to_numpy()
    is_event, is_cti = np.isin(row_kinds, list(_EVENTS)), row_kinds == CTI
    generated = generation(policy, row_starts, is_event)
    candidate = np.where(is_cti, row_starts, generated.candidates)
    cti, _ = in_force(candidate)
    if imported is not None:
        cti = np.maximum(cti, imported.to_numpy())
    table = narrow.with_columns(
        pl.Series("__cand", candidate, dtype=pl.Int64).set(pl.Series(~(is_cti | generated.generates)), None),
        pl.Series("__cti", cti, dtype=pl.Int64),
        pl.Series("__late", is_event & (row_starts < cti)),
    )
    # Edges: the k-th end edge with a start and payload closes the k-th start edge with them.
    paired = None
    if node.shape is EventShape.EDGE:
        paired = _pair_edges(node, items, table)
        if paired is None:
            return None
    at_risk = pl.col("__late")
    if paired is not None:
        table = table.join(
            paired.select("__epos", "__spos", "__start_late"), left_on="__pos", right_on="__epos", how="left", maintain_order="left"
        )
        at_risk = at_risk | ((k == END) & ((pl.col(E) < pl.col("__cti")) | pl.col("__start_late").fill_null(False)))
    risky = table.filter(at_risk)
    if risky.height and not policy.has_settings:
        return None  # a CTI violation: the reference ingress raises it
    counts = EventCounts(received=int(table.select((counted | (k == END)).sum()).item()))
    payloads = _payloads_at(items.rows, risky["__pos"]) if rows_wanted and risky.height else [None] * risky.height
    fields = record_fields(node.payload_type)
    outcome: dict[int, int | None] = {}  # a late start edge's position -> its admitted start (None: dropped)
    changes: dict[str, list[Any]] = {"__pos": [], "__s": [], "__e": []}  # lifetimes as admitted; null: dropped
    closed: dict[int, int] = {}  # a start edge's position -> its end, decided here

    def reject(r: dict[str, Any], payload: Any, rule: Rule, action: Action, admitted_as: Any) -> None:
        count_rejection(counts, rule, action, False, None)
        if payload is not None:
            rec = (r[ARR], r["__kind"], r[S], r[E], _payload(node, fields, payload), r["__pos"], None)
            rejected.append(Rejected(node.name, r["__pos"], item_of(rec), rule, action, r["__cti"], admitted_as))

    for r, payload in zip(risky.iter_rows(named=True), payloads):
        kind, cti, position = r["__kind"], r["__cti"], r["__pos"]
        if kind != END:  # Ingress.verdict
            lifetime = adjusted_lifetime(kind, r[E], cti) if policy.adjust else None
            if lifetime is None:
                reject(r, payload, Rule.START_BEFORE_CTI, Action.DROPPED, None)
            else:
                reject(r, payload, Rule.START_BEFORE_CTI, Action.ADJUSTED, ("lifetime", *lifetime))
            if kind == START:
                outcome[position] = None if lifetime is None else lifetime[0]
            changes["__pos"].append(position)
            changes["__s"].append(None if lifetime is None else lifetime[0])
            changes["__e"].append(None if lifetime is None else INF if kind == START else lifetime[1])
            continue
        opened = r["__spos"]  # Ingress._end_edge
        admitted_start = outcome[opened] if opened in outcome else int(narrow[S][opened])
        if admitted_start is None:
            reject(r, payload, Rule.START_EDGE_DROPPED, Action.DROPPED, None)
            continue
        end = r[E]
        if end < cti:
            if not policy.adjust:
                reject(r, payload, Rule.END_BEFORE_CTI, Action.DROPPED, None)  # the event stays open
                continue
            end = max(cti, admitted_start + 1)
            reject(r, payload, Rule.END_BEFORE_CTI, Action.ADJUSTED, ("end", end))
        closed[opened] = max(end, admitted_start + 1)
    counts.admitted = counts.received - counts.dropped
    found = table.filter(pl.col("__cand").is_not_null())
    candidates = [
        (p, a, "explicit" if kind == CTI else "generated", v)
        for p, a, kind, v in zip(found["__pos"].to_list(), found[ARR].to_list(), found["__kind"].to_list(), found["__cand"].to_list())
    ]
    if not rows_wanted:
        return items.rows, counts, candidates
    # The events as admitted: points, intervals and start edges (rows are positions here),
    # each start edge ending where its end edge does (decided above when either was at
    # risk), else open.
    starts, ends, keep = table[S], table[E], table.select(counted).to_series()
    if paired is not None:
        safe = paired.filter(~pl.col("__end_risk"))
        ends = ends.scatter(safe["__spos"], safe["__end"])
    moved = pl.DataFrame(changes, schema={"__pos": pl.Int64, "__s": pl.Int64, "__e": pl.Int64})
    if moved.height:
        kept = moved.filter(pl.col("__s").is_not_null())
        keep = keep.scatter(moved["__pos"], False).scatter(kept["__pos"], True)
        starts, ends = starts.scatter(kept["__pos"], kept["__s"]), ends.scatter(kept["__pos"], kept["__e"])
    if closed:
        ends = ends.scatter(list(closed), list(closed.values()))
    times = pl.DataFrame([starts, ends, keep.alias("__keep")]).lazy()
    events = pl.concat([times, items.rows], how="horizontal").filter(pl.col("__keep")).drop("__keep")
    return events, counts, candidates


def _pair_edges(node: SourceNode, items: _Items, table: pl.DataFrame) -> pl.DataFrame | None:
    """Each end edge's start edge ``(__epos, __spos, __end, __start_late, __end_risk)``: the
    k-th end edge with a start and payload closes the k-th start edge with them (equal
    payloads close in the order they opened). None when an end edge has no start edge
    before it, or an edge's float field holds NaN (which equals nothing, itself included)."""
    names = [f.name for f in record_fields(node.payload_type)]
    k = pl.col("__kind")
    edges = table.filter(k.is_in([START, END])).select("__pos", "__kind", S, E, "__cti", "__late")
    if not edges.height:
        return pl.DataFrame(
            schema={"__epos": pl.Int64, "__spos": pl.Int64, "__end": pl.Int64, "__start_late": pl.Boolean, "__end_risk": pl.Boolean}
        )
    position = pl.int_range(pl.len(), dtype=pl.Int64).alias("__pos")
    payloads = items.rows.with_columns(position).join(edges.lazy().select("__pos"), on="__pos", how="semi", maintain_order="left").collect()
    edges = edges.join(payloads, on="__pos", how="left", maintain_order="left")
    floats = [n for n in names if edges.schema[n].is_float()]
    if floats and edges.select(pl.any_horizontal(pl.col(n).is_nan().any() for n in floats)).item():
        return None
    keys = [S, *names]
    edges = edges.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over([*keys, "__kind"]).alias("__rank"))
    opens = edges.filter(k == START).select(*keys, "__rank", pl.col("__pos").alias("__spos"), pl.col("__late").alias("__start_late"))
    closes = edges.filter(k == END).select(
        *keys, "__rank", pl.col("__pos").alias("__epos"), pl.col(E).alias("__end"), (pl.col(E) < pl.col("__cti")).alias("__end_risk")
    )
    paired = closes.join(opens, on=[*keys, "__rank"], how="left", nulls_equal=True, maintain_order="left")
    if paired.select((pl.col("__spos").is_null() | (pl.col("__spos") > pl.col("__epos"))).any()).item():
        return None  # an end edge without its start edge: the reference ingress names it
    return paired.select("__epos", "__spos", "__end", "__start_late", (pl.col("__end_risk") | pl.col("__start_late")).alias("__end_risk"))
