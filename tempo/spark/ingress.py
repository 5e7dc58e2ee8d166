"""Ingress on Spark: input rows to admitted events, with the CTIs of ``tempo.runtime.ingress``.

The rules are those of the in-memory ingress; this module computes them in bulk, moving
as little data as the settings allow:

1. Each input becomes rows ``(kind, start, end, arrival, order, file order, payload...)``.
2. **Nothing can be late** when an input generates no CTIs before its end, imports none
   and holds no CTI rows: every row is admitted as read, and no job runs before the query.
3. Otherwise the rows are cut into **blocks** of about ``BLOCK_ROWS`` by the range of the
   order column, and one job takes per-block figures (rows, counted events, latest start,
   ...). Running aggregates over input order are then a window partitioned by block plus a
   prefix over the blocks before, taken on the driver: no input is funnelled through one
   partition.
4. One **scan** job runs that window over the narrow rows (no payload) and collects only
   the few rows that matter: CTI candidates (every N-th counted event, period changes,
   CTI rows), rows that break a rule, and rows **at risk**: those starting before the
   largest candidate that could precede them. A row not at risk is admitted as read, so
   the policy's work is confined to the rows collected.
5. On the driver, ``CtiReplay`` applies the never-go-back rule, imports and the flush
   exactly as the in-memory executor does; with its steps, each at-risk row gets the CTI
   in force when it arrived and the policy's verdict. The verdicts go back as a small
   broadcast table joined to the rows; end edges are paired with their start edges by rank.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import attrs
from pyspark.sql import Column, DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as st

from tempo.errors import CtiViolationError, ImportOrderError, InputError, InputSchemaError
from tempo.events import EventShape
from tempo.expr.schema import field_names, record_fields
from tempo.runtime.replay import CtiReplay, Key
from tempo.runtime.ingress import (
    CTI, END, HEARTBEAT, INTERVAL, POINT, START, TimestampMode, adjusted_lifetime,
    count_rejection, cti_violation_rule, item_of, ordering_needs_arrival_column, prepare,
)
from tempo.plan.nodes import SourceNode
from tempo.plan.query import Query
from tempo.result import Action, InputMetrics, Rule, SubstreamMetrics
from tempo.runtime.policy import TimePolicy
from tempo.runtime.rules import CTI_RULE_CODES, InputRule, message
from tempo.sources import ItemSource, TableSource
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.spark.columns import Scope, column
from tempo.spark.types import to_wire, wire_schema
from tempo.ticks import INF, NEG_INF

POS, KIND, ARR, BLOCK = "__pos", "__kind", "__arr", "__block"
ORDER, FILE = "__order", "__file"
NULLF = "__nullf"
"""The index of a row's first payload field that is null but not declared optional, else null."""
"""Input order of a row (the order column, or file order), and the tie-break (file order)."""
BLOCK_ROWS = 1 << 14
"""Rows per block of input order, about: the unit of running aggregates."""
LOCAL_ITEMS = 100_000
"""Item lists up to this size are admitted on the driver (see ``input_frame``)."""
EVENT_KINDS = (POINT, INTERVAL, START)
"""Kinds that are received events with a start (counted by count generation)."""

# Why a row was collected as breaking a rule (the ``__bad`` column): the rule's code.
BAD_ROW, BAD_KIND, BAD_ARRIVAL, NO_ARRIVAL, BAD_START, NO_ORDER_ARRIVAL, UNKNOWN_KIND, NULL_START, NULL_END, NULL_FIELD = (
    int(r) for r in (
        InputRule.LIFETIME, InputRule.ROW_KIND, InputRule.ARRIVAL_ORDER, InputRule.IMPORT_ARRIVAL, InputRule.START_AT_INFINITY,
        InputRule.ORDERING_ARRIVAL, InputRule.UNKNOWN_KIND, InputRule.NULL_START, InputRule.NULL_END, InputRule.NULL_FIELD,
    )
)
"""``NULL_FIELD + i``: a null in the i-th payload field, which is not declared optional."""


@attrs.define
class Blocks:
    """Rows cut into blocks by value range of ``ORDER``, with per-block figures.

    The range cut is deterministic (unlike a sampled range partitioning), so figures taken
    in one job hold in the next.
    """

    lo: int
    width: int
    rows: dict[int, int] = attrs.Factory(dict)
    counted: dict[int, int] = attrs.Factory(dict)  # events counted by count generation
    events: dict[int, int] = attrs.Factory(dict)  # rows that are not CTIs
    latest: dict[int, int] = attrs.Factory(dict)  # largest start of a counted event
    explicit: dict[int, int] = attrs.Factory(dict)  # largest CTI row
    period: dict[int, int] = attrs.Factory(dict)  # greatest period entered (time-span generation)
    arrival: dict[int, int] = attrs.Factory(dict)  # largest arrival
    ordered: dict[int, int] = attrs.Factory(dict)  # largest start passing the arrival checks (ordering settings)

    def column(self) -> Column:
        return self.of(F.col(ORDER))

    def of(self, order: Column) -> Column:
        """The block of an order value."""
        return F.floor((order - F.lit(self.lo)) / F.lit(self.width)).cast("long")

    def prefix(self, per_block: dict[int, int], combine: str, default: int) -> dict[int, int]:
        """For each block, the sum (or max) over the blocks before it."""
        out: dict[int, int] = {}
        acc = default
        for block in sorted(self.rows):
            out[block] = acc
            v = per_block.get(block)
            if v is not None:
                acc = acc + v if combine == "sum" else max(acc, v)
        return out


@attrs.define
class InputFrame:
    """One input as rows, with what the driver knows of it."""

    node: SourceNode
    decl: int
    df: DataFrame | None
    items: dict[int, Any] | None  # position -> received item, for item lists
    prepared: list[Any] | None = None  # records admitted on the driver (small item lists)
    rows: int | None = None  # known for item lists
    static: bool = False  # nothing can be late: every row is admitted as read
    needs_arrival: bool = False  # the input takes part in an import
    kinds_vary: bool = True  # rows may be of several kinds (else: all events of the shape)
    has_arrival: bool = True  # rows carry arrival times
    blocks: Blocks | None = None
    collected: list[Row] = attrs.Factory(list)  # what the scan job kept (see ``scan``)
    policy: TimePolicy = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.policy = TimePolicy.of(self.node.settings, self.node.over)


def _item_rows(node: SourceNode, mode: TimestampMode, needs_arrival: bool) -> tuple[list[tuple[Any, ...]], dict[int, Any]]:
    rows: list[tuple[Any, ...]] = []
    items: dict[int, Any] = {}
    for arrival, kind, start, end, payload, position, item in prepare(node, mode, needs_arrival):
        values = to_wire(payload) if payload is not None else [None] * len(record_fields(node.payload_type))
        rows.append((position, kind, start, end, arrival, *values))
        items[position] = item
    return rows, items


def _frame_schema(payload_type: type) -> st.StructType:
    base = [
        st.StructField(ORDER, st.LongType(), False),
        st.StructField(KIND, st.IntegerType(), False),
        st.StructField(S, st.LongType(), False),
        st.StructField(E, st.LongType(), False),
        st.StructField(ARR, st.LongType(), False),
    ]
    return st.StructType(base + list(wire_schema(payload_type).fields))


def _payload_to_internal(df: DataFrame, payload_type: type) -> DataFrame:
    """Wire columns (datetimes as longs) to the relation's columns (timestamps)."""
    for f in record_fields(payload_type):
        if f.dtype is datetime:
            df = df.withColumn(f.name, F.timestamp_micros(F.col(f.name)))
    return df


def input_frame(
    spark: SparkSession, node: SourceNode, decl: int, mode: TimestampMode, needs_arrival: bool, local_limit: int = LOCAL_ITEMS
) -> InputFrame:
    """The rows of one input, checked as the in-memory executor checks them.

    An item list is already in the driver's memory: up to ``local_limit`` items it is
    admitted there by the in-memory ingress itself (``prepared`` holds its records), and
    only the admitted events go to Spark. Larger lists and every table go through the
    Spark ingress.
    """
    source = node.source
    if isinstance(source, ItemSource) or not isinstance(source, TableSource):
        if local_limit:
            prepared = list(prepare(node, mode, needs_arrival))
            if len(prepared) <= local_limit:
                items = {rec[5]: rec[6] for rec in prepared}
                return InputFrame(node, decl, None, items, prepared=prepared, rows=len(prepared))
        rows, items = _item_rows(node, mode, needs_arrival)
        df = spark.createDataFrame(rows, _frame_schema(node.payload_type)).withColumn(FILE, F.lit(0).cast("long"))
        df = df.withColumn(NULLF, F.lit(None).cast("int"))  # prepare() has checked the items
        frame = InputFrame(node, decl, _payload_to_internal(df, node.payload_type), items, rows=len(rows))
        # prepare() has checked every row; without CTI rows nothing can be late.
        frame.static = frame.policy.nothing_can_be_late and all(r[1] != CTI for r in rows) and node.shape is not EventShape.EDGE
    else:
        frame = _table_frame(spark, node, decl, needs_arrival)
        mode.saw(aware=True)  # a table's times are instants, given as aware UTC datetimes
    frame.needs_arrival = needs_arrival
    if not frame.static:
        _cut(frame)
    return frame


def _table_frame(spark: SparkSession, node: SourceNode, decl: int, needs_arrival: bool) -> InputFrame:
    from tempo.spark.sources import read_table
    from tempo.spark.types import frame_columns
    from tempo.tables import KINDS, check_columns

    source = node.source
    assert isinstance(source, TableSource)
    raw = read_table(spark, node.name, source)
    if node.ordering is not None and not source.arrival:
        raise InputSchemaError(node.name, ordering_needs_arrival_column(source))
    check_columns(node.name, source, frame_columns(raw.schema))
    if needs_arrival and not source.arrival:
        raise ImportOrderError(node.name, 0, None, message(InputRule.IMPORT_ARRIVAL))
    origin = source.origin_ticks()

    def ticks(name: str, shift: bool = True) -> Column:
        col = raw.schema[name].dataType
        c = F.col(f"`{name}`")
        if isinstance(col, (st.TimestampType, st.TimestampNTZType)):
            return F.unix_micros(c.cast("timestamp"))
        return c.cast("long") + F.lit(origin) if shift else c.cast("long")

    if source.kind is not None:
        k = F.lower(F.col(f"`{source.kind}`").cast("string"))
        kind = F.lit(None).cast("int")
        for name, code in KINDS.items():
            kind = F.when(k == name, F.lit(code)).otherwise(kind)
    elif node.shape is EventShape.POINT:
        kind = F.lit(POINT)
    elif node.shape is EventShape.INTERVAL:
        kind = F.lit(INTERVAL)
    else:
        raise InputSchemaError(node.name, f"an EDGE input from a table needs a kind= column (start, end or cti per row): {source!r} has none")
    start = ticks(source.start)
    end_col = ticks(source.end) if source.end else F.lit(None).cast("long")
    end = F.when(kind == POINT, start + 1).when(kind == START, F.lit(INF)).when(kind == CTI, start).otherwise(end_col)
    arrival = ticks(source.arrival) if source.arrival else F.lit(NEG_INF)
    # Without an order column the file order counts: monotonically_increasing_id follows it.
    order = (ticks(source.order) if source.order in (source.arrival, source.start, source.end) else ticks(source.order, shift=False)) if source.order else F.monotonically_increasing_id()
    names = field_names(node.payload_type)
    df = raw.select(
        kind.alias(KIND), start.alias(S), end.alias(E), arrival.alias(ARR), order.alias(ORDER),
        F.monotonically_increasing_id().alias(FILE), *_payload_columns(node.payload_type), _null_field(node.payload_type),
    )
    frame = InputFrame(node, decl, df, None, kinds_vary=source.kind is not None, has_arrival=source.arrival is not None)
    # Arrival times are checked (non-decreasing) by the scan; without an arrival column,
    # a kind column or CTIs from settings, there is nothing to check but each row itself.
    frame.static = frame.policy.nothing_can_be_late and source.kind is None and source.arrival is None
    return frame


def _payload_columns(payload_type: type) -> list[Column]:
    """A table's payload columns as the fields declare them: an integer column widened for
    a float field, a timestamp without time zone read as UTC (as the in-memory executor
    reads them; ``check_columns`` has checked the types)."""
    out = []
    for f in record_fields(payload_type):
        c = F.col(f"`{f.name}`")
        if f.dtype is float:
            c = c.cast("double")
        elif f.dtype is datetime:
            c = c.cast("timestamp")
        out.append(c.alias(f.name))
    return out


def _null_field(payload_type: type) -> Column:
    """``NULLF`` of a table's rows."""
    first: Column = F.lit(None).cast("int")
    for i, f in reversed(list(enumerate(record_fields(payload_type)))):
        if not f.nullable:
            first = F.when(F.col(f"`{f.name}`").isNull(), F.lit(i)).otherwise(first)
    return first.alias(NULLF)


def _counted() -> Column:
    return F.col(KIND).isin(*EVENT_KINDS)


def _period_column(frame: InputFrame) -> Column | None:
    if not frame.policy.period:
        return None
    return F.when(_counted(), F.floor(F.col(S) / frame.policy.period))


def _imports(frame: InputFrame) -> bool:
    return frame.policy.import_from is not None


def _cut(frame: InputFrame) -> None:
    """Cut the rows into blocks and take each block's figures (one job, plus one for the
    order column's range when the rows are not an item list)."""
    assert frame.df is not None
    from tempo.spark.sources import DataFrameSource

    if isinstance(frame.node.source, DataFrameSource):
        # The verdicts find their rows again by (order, file order) in later jobs; a user's
        # plan (a round-robin repartition, say) may deal rows out differently each time, so
        # it is computed once.
        frame.df = frame.df.localCheckpoint(eager=True)
    df = frame.df
    if _imports(frame):
        # Imported CTIs interleave with this input by arrival (see ``scan``): one block.
        blocks = Blocks(0, 1 << 62)
    elif frame.rows is not None:  # an item list: the order column is the position
        blocks = Blocks(0, BLOCK_ROWS)
    else:
        known = _parquet_range(frame)
        if known is None:
            r = df.agg(F.min(ORDER).alias("lo"), F.max(ORDER).alias("hi"), F.count(F.lit(1)).alias("n")).collect()[0]
            known = (r["lo"] or 0, r["hi"] or 0, r["n"])
        lo, hi, n = known
        count = max(1, -(-n // BLOCK_ROWS))
        blocks = Blocks(lo, max(1, (hi - lo) // count + 1))
    df = df.withColumn(BLOCK, blocks.column())
    period = _period_column(frame)
    counted = _counted()
    figures = df.groupBy(BLOCK).agg(
        F.count(F.lit(1)).alias("rows"),
        F.sum(counted.cast("long")).alias("counted"),
        F.sum(F.col(KIND).isin(*EVENT_KINDS, END).cast("long")).alias("events"),
        F.max(F.when(counted, F.col(S))).alias("latest"),
        F.max(F.when(F.col(KIND) == CTI, F.col(S))).alias("explicit"),
        (F.max(period) if period is not None else F.lit(None).cast("long")).alias("period"),
        F.max(ARR).alias("arrival"),
        (F.max(_ordered_start(frame)) if _ordering(frame) else F.lit(None).cast("long")).alias("ordered"),
    ).collect()
    nulls = [r["rows"] for r in figures if r[BLOCK] is None]
    if nulls:  # a null in the order column: the in-memory executor sorts such rows last
        from tempo.tables import null_order_rule

        before = sum(r["rows"] for r in figures if r[BLOCK] is not None)
        raise InputError(frame.node.name, before, None, null_order_rule(frame.node.source, nulls[0]))
    for r in figures:
        b = r[BLOCK]
        blocks.rows[b] = r["rows"]
        blocks.counted[b] = r["counted"] or 0
        blocks.events[b] = r["events"] or 0
        for name in ("latest", "explicit", "period", "arrival", "ordered"):
            if r[name] is not None:
                getattr(blocks, name)[b] = r[name]
    frame.df, frame.blocks = df, blocks


def _parquet_range(frame: InputFrame) -> tuple[int, int, int] | None:
    """(min, max) of the order column and the row count, from the Parquet footers (no
    job), when the order column is an integer column with statistics in every row group."""
    from tempo.sources import ParquetSource

    source = frame.node.source
    if not isinstance(source, ParquetSource) or source.order is None:
        return None
    try:
        import pyarrow.dataset as ds
        import pyarrow.types as pt

        dataset = ds.dataset(source.path, format="parquet")
        if not pt.is_integer(dataset.schema.field(source.order).type):
            return None
        lo: int | None = None
        hi: int | None = None
        n = 0
        for fragment in dataset.get_fragments():
            meta = fragment.metadata
            column = meta.schema.names.index(source.order)
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                stats = group.column(column).statistics
                if group.num_rows and (stats is None or not stats.has_min_max):
                    return None
                if group.num_rows:
                    lo = stats.min if lo is None else min(lo, stats.min)
                    hi = stats.max if hi is None else max(hi, stats.max)
                n += group.num_rows
    except (ImportError, OSError, KeyError, ValueError):
        return None
    if lo is None or hi is None:
        return None
    # A time column as the order column is shifted to ticks (see ``_table_frame``).
    shift = source.origin_ticks() if source.order in (source.arrival, source.start, source.end) else 0
    return lo + shift, hi + shift, n


def _block_table(spark: SparkSession, frame: InputFrame) -> DataFrame:
    """Per block, what the blocks before it hold: rows, counted events, greatest period,
    the largest CTI candidate any of them can produce, and the latest arrival."""
    blocks = frame.blocks
    assert blocks is not None
    delay = frame.policy.delay
    # Generated candidates are counted events' starts minus the delay: bounded by the latest.
    bound = {b: v - delay for b, v in blocks.latest.items()} if frame.policy.generates else {}
    for b, v in blocks.explicit.items():
        bound[b] = max(bound.get(b, NEG_INF), v)
    columns = {
        "__p_rows": blocks.prefix(blocks.rows, "sum", 0),
        "__p_counted": blocks.prefix(blocks.counted, "sum", 0),
        "__p_period": blocks.prefix(blocks.period, "max", NEG_INF),
        "__p_bound": blocks.prefix(bound, "max", NEG_INF),
        "__p_arrival": blocks.prefix(blocks.arrival, "max", NEG_INF),
        "__p_ordered": blocks.prefix(blocks.ordered, "max", NEG_INF),
    }
    rows = [(b, *(columns[c][b] for c in columns)) for b in sorted(blocks.rows)]
    schema = st.StructType([st.StructField(n, st.LongType(), False) for n in (BLOCK, *columns)])
    return F.broadcast(spark.createDataFrame(rows, schema))


def _imported_in_force(spark: SparkSession, frame: InputFrame, imported: list[tuple[Key, int]]) -> DataFrame:
    """The rows with ``__imp``: the largest CTI imported before each arrived."""
    assert frame.df is not None
    df = frame.df.withColumn("__decl", F.lit(frame.decl).cast("long")).withColumn("__v", F.lit(None).cast("long"))
    schema = st.StructType([st.StructField(n, st.LongType(), False) for n in (ARR, "__decl", "__v")])
    steps = spark.createDataFrame([(k[0], k[1], v) for k, v in imported if k[0] < INF], schema)
    unioned = df.withColumn("__step", F.lit(0)).unionByName(steps.withColumn("__step", F.lit(1)), allowMissingColumns=True)
    # Arrival order across inputs: (arrival, declaration); an input's own rows keep their order.
    w = Window.partitionBy(F.lit(0)).orderBy(ARR, "__decl", ORDER, FILE, "__step").rowsBetween(Window.unboundedPreceding, -1)
    return unioned.withColumn("__imp", F.max("__v").over(w)).filter(F.col("__step") == 0).drop("__decl", "__v", "__step")


def scan(spark: SparkSession, frame: InputFrame, imported: list[tuple[Key, int]]) -> None:
    """The one pass over an input's rows in input order (see the module's step 4).

    Keeps, with its position: every CTI candidate (``__g`` generated, ``__x`` a CTI row),
    every row at risk (``__risk``: it starts, or an end edge ends, before the largest
    candidate or imported CTI that can precede it), and every row breaking a rule
    (``__bad``). ``imported``: the CTIs imported into this input (exact, computed from the
    inputs it imports from).
    """
    assert frame.df is not None and frame.blocks is not None
    node = frame.node
    policy = frame.policy
    df = _imported_in_force(spark, frame, imported) if _imports(frame) else frame.df.withColumn("__imp", F.lit(None).cast("long"))
    w = Window.partitionBy(BLOCK).orderBy(ORDER, FILE)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    kind, counted = F.col(KIND), _counted()
    period = _period_column(frame)
    delay, generates = policy.delay, policy.generates
    # One window over the narrow rows: running aggregates within the block; the blocks
    # before come from the figures (a broadcast join after the window keeps its partitioning).
    none = F.lit(None).cast("long")
    rn = F.row_number().over(w)
    df = df.select(
        BLOCK, ORDER, FILE, KIND, S, E, ARR, NULLF, "__imp", rn.alias("__rn"),
        # Only the running aggregates the input needs: each costs the window a pass.
        (F.sum(counted.cast("long")).over(w.rowsBetween(Window.unboundedPreceding, 0)) if frame.kinds_vary else none).alias("__counted"),
        (F.max(period).over(before) if period is not None else none).alias("__period_before"),
        (F.max(ARR).over(before) if frame.has_arrival else none).alias("__arr_in_block"),
        # A generated CTI is some counted event's start minus the delay: the latest start
        # before a row bounds them all (a CTI row's time bounds itself).
        (F.max(F.when(counted, F.col(S))).over(before) - delay if generates else none).alias("__latest_before"),
        (F.max(F.when(kind == CTI, F.col(S))).over(before) if frame.kinds_vary else none).alias("__explicit_before"),
    ).join(_block_table(spark, frame), BLOCK)
    generated: Column = F.lit(None).cast("long")
    if generates:
        if policy.every_n:
            index = F.col("__p_counted") + (F.col("__counted") if frame.kinds_vary else F.col("__rn"))  # else every row counts
            generated = F.when(counted & (index % policy.every_n == 0), F.col(S) - delay)
        else:
            assert period is not None
            seen = F.greatest(F.col("__p_period"), F.coalesce(F.col("__period_before"), F.lit(NEG_INF)))
            generated = F.when(counted & (seen > NEG_INF) & (period > seen), F.col(S) - delay)
    # The largest CTI that can be in force at a row: any candidate or imported CTI before it.
    bound = F.greatest(
        F.col("__p_bound"), F.col("__latest_before"), F.col("__explicit_before"), F.col("__imp"), F.lit(NEG_INF)
    )
    df = df.select(
        ORDER, FILE, KIND, S, E, ARR, NULLF, bound.alias("__bound"),
        (F.col("__p_rows") + F.col("__rn") - 1).alias(POS),
        generated.alias("__g"), F.when(kind == CTI, F.col(S)).alias("__x"),
        F.greatest(F.col("__p_arrival"), F.col("__arr_in_block")).alias("__arr_before"),
    )
    bound = F.col("__bound")
    risk = (kind.isin(*EVENT_KINDS) & (F.col(S) < bound)) | ((kind == END) & (F.col(E) < bound))
    bad = _bad_row(frame)
    arrival = F.coalesce(F.col(ARR), F.col("__arr_before"), F.lit(NEG_INF)).alias(ARR)  # a missing arrival is the last one
    kept = df.select(POS, ORDER, FILE, KIND, S, E, arrival, "__g", "__x", F.coalesce(risk, F.lit(False)).alias("__risk"), bad.alias("__bad"))
    frame.collected = kept.filter(F.col("__g").isNotNull() | F.col("__x").isNotNull() | F.col("__risk") | (F.col("__bad") != 0)).collect()


def _bad_row(frame: InputFrame) -> Column:
    """Why a row breaks a rule (``BAD_*``), or 0; needs ``__arr_before``, the latest arrival
    before it in the input."""
    kind = F.col(KIND)
    allowed = {EventShape.POINT: (POINT, CTI), EventShape.INTERVAL: (INTERVAL, CTI), EventShape.EDGE: (START, END, CTI)}[frame.node.shape]
    if _ordering(frame):
        allowed = (*allowed, HEARTBEAT)
    # In the order of the in-memory executor's checks (``tempo.runtime.ingress._checked_rows``).
    bad = (
        F.when(kind.isNull(), F.lit(UNKNOWN_KIND))
        .when(F.col(S).isNull(), F.lit(NULL_START))
        .when(kind.isin(INTERVAL, END) & F.col(E).isNull(), F.lit(NULL_END))
        .when(~kind.isin(*allowed), F.lit(BAD_KIND))
        .when(kind.isin(INTERVAL, END) & (F.col(E) <= F.col(S)), F.lit(BAD_ROW))
        .when(~kind.isin(CTI, HEARTBEAT) & (F.col(S) >= INF), F.lit(BAD_START))
    )
    bad = bad.when((kind != CTI) & F.col(NULLF).isNotNull(), F.col(NULLF) + NULL_FIELD)
    return (
        bad.when(F.lit(_ordering(frame)) & F.col(ARR).isNull(), F.lit(NO_ORDER_ARRIVAL))
        .when(F.lit(frame.needs_arrival) & F.col(ARR).isNull(), F.lit(NO_ARRIVAL))
        .when(F.col(ARR) < F.col("__arr_before"), F.lit(BAD_ARRIVAL))
        .otherwise(F.lit(0))
    )


# ---- inputs with ordering settings ----------------------------------------------------------
#
# ASA's rules (``Ingress._process_ordered``) look like a sequential state machine, but each
# verdict depends on only two running figures over input order: the largest start that
# passed both arrival checks (per substream key) and the largest CTI row before the row.
# The clock term never decides a verdict: an event that passes the late check starts at or
# after its own arrival less the tolerance, so after any clock less the tolerance. So the
# verdicts are columns of one window; the driver gets only the rows that move time (for
# the exact CTIs and watermark delays of ``CtiReplay``), the rejections, and per key the
# count of its events.

def _ordering(frame: InputFrame) -> bool:
    return frame.policy.ordered


def _tolerances(frame: InputFrame) -> tuple[int, int | None, int | None]:
    policy = frame.policy
    assert policy.ordered
    return policy.out_of_order, policy.late, policy.early


def _early_late(frame: InputFrame) -> tuple[Column, Column]:
    """(early, late) of each row, by the input's arrival-time rules."""
    _, late, early = _tolerances(frame)
    event = F.col(KIND).isin(POINT, INTERVAL)
    is_early = (event & (F.col(S) > F.col(ARR) + early)) if early is not None else F.lit(False)
    is_late = (event & ~is_early & (F.col(S) < F.col(ARR) - late)) if late is not None else F.lit(False)
    return F.coalesce(is_early, F.lit(False)), F.coalesce(is_late, F.lit(False))


def _ordered_start(frame: InputFrame) -> Column:
    """The start of an event that passes both arrival checks (what raises time), else null."""
    early, late = _early_late(frame)
    return F.when(F.col(KIND).isin(POINT, INTERVAL) & ~early & ~late, F.col(S))


def scan_ordered(spark: SparkSession, frame: InputFrame) -> None:
    """The one pass over the rows of an input with ordering settings: every verdict as
    columns (see above), collecting the rejections, the rows that move time, the rows
    breaking a rule and the first row of each substream (with its count of events)."""
    assert frame.df is not None and frame.blocks is not None
    node = frame.node
    out_of_order, late, early = _tolerances(frame)
    adjust = frame.policy.adjust
    w = Window.partitionBy(BLOCK).orderBy(ORDER, FILE)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    kind, start, end, arrival = F.col(KIND), F.col(S), F.col(E), F.col(ARR)
    event = kind.isin(POINT, INTERVAL)
    is_early, is_late = _early_late(frame)
    none = F.lit(None).cast("long")
    key = column(node.over, Scope()) if node.over is not None else None
    df = frame.df.select(
        "*", _ordered_start(frame).alias("__ordered"), is_early.alias("__early"), is_late.alias("__late"),
        (key if key is not None else F.lit(None)).alias("__key"),
    )
    df = df.select(
        "*", F.row_number().over(w).alias("__rn"),
        F.max(ARR).over(before).alias("__arr_in_block"),
        F.max(F.when(kind == CTI, start)).over(before).alias("__explicit_in_block"),
        (F.max("__ordered").over(before) if key is None else none).alias("__ordered_in_block"),
    ).join(_block_table(spark, frame), BLOCK)
    df = df.withColumn(POS, F.col("__p_rows") + F.col("__rn") - 1)
    df = df.withColumn("__arr_before", F.greatest(F.col("__p_arrival"), F.col("__arr_in_block")))
    if key is None:
        ordered_before = F.greatest(F.col("__p_ordered"), F.col("__ordered_in_block"), F.lit(NEG_INF))
        first_of_key, key_events = F.lit(False), none
    else:
        # Each substream's running figure: the window partitioned by key spreads the keys
        # over the cluster (non-events apart, so a null key stays a key like any other).
        wk = Window.partitionBy(event, F.col("__key")).orderBy(ORDER, FILE)
        ordered_before = F.coalesce(F.max("__ordered").over(wk.rowsBetween(Window.unboundedPreceding, -1)), F.lit(NEG_INF))
        first_of_key = event & (F.row_number().over(wk) == 1)
        key_events = F.count(F.lit(1)).over(Window.partitionBy(event, F.col("__key")))
    df = df.withColumn("__ordered_before", ordered_before)
    # The CTI an event is checked against: its substream's latest start less the
    # tolerance, or a CTI row before it (the clock's term never decides, see above).
    cti = F.greatest(F.col("__ordered_before") - out_of_order, F.col("__p_bound"), F.col("__explicit_in_block"))
    late_bound = (arrival - late) if late is not None else none
    late_kept = F.lit(adjust) & ((kind == POINT) | (end > late_bound))
    late_s = F.when(F.col("__late"), late_bound).otherwise(start)
    alive = event & ~F.col("__early") & ~(F.col("__late") & ~late_kept)
    out_of_order_now = alive & (late_s < cti)
    ooo_kept = F.lit(adjust) & (cti < INF) & ((kind == POINT) | (end > cti))
    adm_s = F.when(out_of_order_now, cti).otherwise(late_s)
    adm_e = F.when(kind == POINT, adm_s + 1).otherwise(end)
    status = (
        F.when(F.col("__early") | (F.col("__late") & ~late_kept) | (out_of_order_now & ~ooo_kept), F.lit(DROPPED))
        .when(F.col("__late") | out_of_order_now, F.lit(ADJUSTED))
        .otherwise(F.lit(0))
    )
    code = {rule: c for c, rule in CTI_RULE_CODES.items()}
    rule = (
        F.when(F.col("__early"), F.lit(code[Rule.EARLY_ARRIVAL])).when(out_of_order_now, F.lit(code[Rule.START_BEFORE_CTI]))
        .when(F.col("__late"), F.lit(code[Rule.LATE_ARRIVAL]))
    )
    bound = F.when(F.col("__early"), arrival + (early if early is not None else 0)).when(out_of_order_now, cti).otherwise(late_bound)
    # What moves time: a new largest start (without substreams), a later arrival, a CTI row.
    ordered_step = F.col("__ordered") > F.col("__ordered_before")
    candidate = F.when(ordered_step & F.lit(key is None), F.col("__ordered") - out_of_order)
    # With substreams, a new largest start of the key moves the key's own CTI, which goes
    # downstream when ahead of the input's (at least the arrival less the late tolerance).
    key_candidate = none
    if key is not None and late is not None:
        key_candidate = F.when(ordered_step & (F.col("__ordered") - out_of_order > arrival - late), F.col("__ordered") - out_of_order)
    arrival_step = F.coalesce(arrival > F.col("__arr_before"), F.lit(True))
    kept = df.select(
        POS, ORDER, FILE, KIND, S, E, ARR, _bad_row(frame).alias("__bad"),
        F.coalesce(status, F.lit(0)).alias("__status"), rule.alias("__rule"), bound.alias("__bound"),
        adm_s.alias("__adm_s"), adm_e.alias("__adm_e"), F.col("__late"), late_kept.alias("__late_kept"),
        candidate.alias("__c"), key_candidate.alias("__kc"), arrival_step.alias("__arr_step"), F.when(kind == CTI, start).alias("__x"),
        F.col("__key"), first_of_key.alias("__first"), key_events.alias("__key_events"),
    )
    frame.collected = kept.filter(
        (F.col("__bad") != 0) | (F.col("__status") != 0) | F.col("__c").isNotNull() | F.col("__arr_step")
        | F.col("__x").isNotNull() | F.col("__first") | F.col("__kc").isNotNull()
    ).collect()


def _ordered_verdicts(frame: InputFrame, rows: Sequence[Any]) -> Verdicts:
    """The verdicts ``scan_ordered`` computed, and the counts they make (as the in-memory
    ingress counts them: an event both late and out of order counts under both rules)."""
    counts = InputMetrics(received=sum(frame.blocks.events.values()) if frame.blocks else 0)
    substreams = frame.node.over is not None
    for r in rows:
        if r["__first"]:
            counts.substreams[r["__key"]] = SubstreamMetrics(received=r["__key_events"])
    events: list[tuple[int, int, int, int, int, int]] = []
    rules: dict[tuple[int, int], Rule] = {}
    for r in rows:
        status = r["__status"]
        if not status:
            continue
        events.append((r[ORDER], r[FILE], status, r["__bound"], r["__adm_s"], r["__adm_e"]))
        rules[_key(r)] = CTI_RULE_CODES[r["__rule"]]
        action = Action.DROPPED if status == DROPPED else Action.ADJUSTED
        late = (Action.ADJUSTED if r["__late_kept"] else Action.DROPPED) if r["__late"] else None
        for c in (counts, counts.substreams[r["__key"]]) if substreams else (counts,):
            count_rejection(c, rules[_key(r)], action, True, late)
    for every in (counts, *counts.substreams.values()):
        every.admitted = every.received - every.dropped
    return Verdicts(events, [], {_key(r): r[POS] for r in rows}, rules, counts)


# ---- CTIs on the driver -------------------------------------------------------------------


def _feed(query: Query, frames: Sequence[InputFrame]) -> tuple[CtiReplay, dict[str, dict[int, list[Any]]]]:
    """A replay of what ``frames`` hold, in arrival order: the CTI candidates of inputs
    admitted in Spark, the whole items of inputs admitted on the driver (whose admitted
    events are returned, by input)."""
    cti_replay = CtiReplay(query)
    rows: list[tuple[Key, str, Any]] = []
    local: dict[str, dict[int, list[Any]]] = {}
    for frame in frames:
        name = frame.node.name
        if frame.prepared is not None:
            local[name] = cti_replay.admit_locally(name)
            rows.extend(((rec[0], frame.decl, rec[5], 0), name, rec) for rec in frame.prepared)
        ordering = _ordering(frame)
        for r in frame.collected:
            key: Key = (r[ARR], frame.decl, r[POS], 0)
            if ordering:
                if r["__bad"]:
                    continue  # raised by ``decide``
                if r["__x"] is not None:
                    rows.append((key, name, ("explicit", r["__x"])))
                if r["__x"] is not None or r["__c"] is not None or r["__arr_step"] or r["__kc"] is not None:
                    c = NEG_INF if r["__c"] is None else r["__c"]
                    rows.append((key, name, ("ordered", r[ARR], c, r["__key"], NEG_INF if r["__kc"] is None else r["__kc"])))
                continue
            if r["__x"] is not None:
                rows.append((key, name, ("explicit", r["__x"])))
            elif r["__g"] is not None:
                rows.append((key, name, ("generated", r["__g"])))
    rows.sort(key=lambda r: r[0])
    for key, name, what in rows:
        if name in local:
            cti_replay.feed_item(key, name, what)
        elif what[0] == "ordered":
            cti_replay.feed_ordered(key, name, what[1], what[2], what[3], what[4])
        else:
            cti_replay.feed(key, name, what[0], what[1])
    cti_replay.shutdown()
    return cti_replay, local


def replay(spark: SparkSession, query: Query, frames: Sequence[InputFrame]) -> tuple[CtiReplay, dict[str, dict[int, list[Any]]]]:
    """Scan every input admitted in Spark, then replay every input's CTIs.

    An input that imports CTIs is scanned after the inputs it imports from, with the CTIs
    they export (a replay of those inputs alone: what an input exports does not depend on
    its importers).
    """
    exporters = dict(query.imports)
    done: list[InputFrame] = []
    pending = list(frames)
    while pending:
        frame = next(f for f in pending if exporters.get(f.node.name) not in {p.node.name for p in pending})
        pending.remove(frame)
        if frame.df is not None and not frame.static:
            if _ordering(frame):
                scan_ordered(spark, frame)
            else:
                imported = _feed(query, done)[0].steps[frame.node.name] if _imports(frame) else []
                scan(spark, frame, imported)
        done.append(frame)
    return _feed(query, frames)


# ---- the policy -----------------------------------------------------------------------------

DROPPED, ADJUSTED = 2, 1


@attrs.define
class Verdicts:
    """What the policy did to an input's at-risk rows, decided on the driver."""

    events: list[tuple[int, int, int, int, int, int]]  # (ORDER, FILE, status, cti, start, end) of events not admitted as read
    ends: list[tuple[int, int, int]]  # (ORDER, FILE, cti) of end edges ending before their CTI
    positions: dict[tuple[int, int], int]  # (ORDER, FILE) -> position, of the rows collected
    rules: dict[tuple[int, int], Rule] = attrs.Factory(dict)  # the rule of each event verdict, when not START_BEFORE_CTI only
    counts: InputMetrics | None = None  # ordering settings: the counts, per rule and substream


def _in_force(steps: list[tuple[Key, int]]) -> Any:
    keys = [k for k, _ in steps]

    def at(key: Key) -> int:
        i = bisect.bisect_left(keys, key)
        return steps[i - 1][1] if i else NEG_INF

    return at


def _bad_rule(frame: InputFrame, code: int, kind: int | None) -> str:
    """The rule a row collected with ``__bad`` = ``code`` breaks (the in-memory executor's words)."""
    from tempo.tables import kind_rule, null_field_rule, null_time_rule

    source = frame.node.source
    if code in (BAD_ROW, BAD_ARRIVAL, NO_ARRIVAL, BAD_START, NO_ORDER_ARRIVAL):
        return message(InputRule(code))
    if code == BAD_KIND:
        return kind_rule(frame.node.shape, kind)  # type: ignore[arg-type]
    assert isinstance(source, TableSource)
    if code == UNKNOWN_KIND:
        return message(InputRule.UNKNOWN_KIND, column=source.kind)
    if code == NULL_START:
        return null_time_rule("start" if source.start_given else "arrival", source.start)
    if code == NULL_END:
        if not source.end:
            return message(InputRule.NO_END_COLUMN, kind="interval" if kind == INTERVAL else "end")
        return null_time_rule("end", source.end)
    name = record_fields(frame.node.payload_type)[code - NULL_FIELD].name
    return null_field_rule(frame.node.payload_type, name, name)


def decide(spark: SparkSession, frame: InputFrame, cti_replay: CtiReplay) -> Verdicts:
    """The policy's verdict on every at-risk row (raising for rows that break a rule)."""
    node = frame.node
    rows = sorted(frame.collected, key=lambda r: r[POS])
    for r in rows:
        if r["__bad"]:
            error = ImportOrderError if r["__bad"] == NO_ARRIVAL else InputError
            raise error(node.name, r[POS], _items(spark, frame, [r])[_key(r)], _bad_rule(frame, r["__bad"], r[KIND]))
    if _ordering(frame):
        return _ordered_verdicts(frame, rows)
    in_force = _in_force(cti_replay.steps[node.name])
    adjust = frame.policy.adjust
    events: list[tuple[int, int, int, int, int, int]] = []
    ends: list[tuple[int, int, int]] = []
    for r in rows:
        if not r["__risk"]:
            continue
        cti = in_force((r[ARR], frame.decl, r[POS], 0))
        kind, s, e = r[KIND], r[S], r[E]
        if kind == END:
            if e < cti:
                ends.append((r[ORDER], r[FILE], cti))
            continue
        if s >= cti:
            continue
        if not frame.policy.has_settings:
            raise CtiViolationError(
                node.name, r[POS], _items(spark, frame, [r])[_key(r)], cti_violation_rule("the event starts", cti),
            )
        lifetime = adjusted_lifetime(kind, e, cti) if adjust else None
        if lifetime is not None:
            events.append((r[ORDER], r[FILE], ADJUSTED, cti, *lifetime))
        else:
            events.append((r[ORDER], r[FILE], DROPPED, cti, s, e))
    return Verdicts(events, ends, {_key(r): r[POS] for r in rows})


def _key(r: Any) -> tuple[int, int]:
    return (r[ORDER], r[FILE])


def _received_columns(node: SourceNode) -> list[Column]:
    cols = [F.col(KIND), F.col(S), F.col(E), F.col(ARR)]
    for f in record_fields(node.payload_type):
        c = F.col(f"`{f.name}`")
        cols.append((F.unix_micros(c) if f.dtype is datetime else c).alias(f"__p_{f.name}"))
    return cols


def _items(spark: SparkSession, frame: InputFrame, rows: Sequence[Any]) -> dict[tuple[int, int], Any]:
    """The received items of some rows (each with ``ORDER``, ``FILE``, ``POS``), by key."""
    if frame.items is not None:  # an item list: its order column is the position
        return {_key(r): frame.items[r[ORDER]] for r in rows}
    if not rows:
        return {}
    from tempo.spark.types import from_wire

    assert frame.df is not None
    keys = spark.createDataFrame([(r[ORDER], r[FILE], r[POS]) for r in rows], f"{ORDER} long, {FILE} long, {POS} long")
    found = frame.df.join(F.broadcast(keys), [ORDER, FILE]).select(ORDER, FILE, POS, *_received_columns(frame.node)).collect()
    names = field_names(frame.node.payload_type)
    out: dict[tuple[int, int], Any] = {}
    for r in found:
        payload = None
        if r[KIND] != CTI:
            wire = [r[f"__p_{n}"] for n in names]
            try:
                payload = from_wire(frame.node.payload_type, wire, naive=False)
            except Exception:  # the payload class refuses the row (a validator against a null): show the values
                payload = dict(zip(names, wire))
        if r[KIND] is None or r[S] is None or r[E] is None:  # a row that is no item: its payload shows it
            out[_key(r)] = payload
            continue
        out[_key(r)] = item_of((r[ARR], r[KIND], r[S], r[E], payload, r[POS], None))
    return out


def _positions(spark: SparkSession, frame: InputFrame, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """Positions of rows the scan did not collect: the rows before them in their block,
    plus the blocks before (only for the few end edges the pairing rejects)."""
    if frame.items is not None:
        return {k: k[0] for k in keys}
    if not keys:
        return {}
    assert frame.df is not None and frame.blocks is not None
    prefix = frame.blocks.prefix(frame.blocks.rows, "sum", 0)
    wanted = spark.createDataFrame([(o, f) for o, f in keys], "__ko long, __kf long").withColumn(BLOCK, frame.blocks.of(F.col("__ko")))
    earlier = (F.col(ORDER) < F.col("__ko")) | ((F.col(ORDER) == F.col("__ko")) & (F.col(FILE) < F.col("__kf")))
    counts = frame.df.join(F.broadcast(wanted), BLOCK).groupBy(BLOCK, "__ko", "__kf").agg(F.sum(earlier.cast("long")).alias("n")).collect()
    return {(r["__ko"], r["__kf"]): prefix[r[BLOCK]] + r["n"] for r in counts}


# ---- admitted events ----------------------------------------------------------------------


@attrs.define
class Admitted:
    """The outcome of ingress for one input admitted in Spark, still lazy."""

    events: DataFrame  # S, E, payload columns
    outcome: DataFrame | None  # end edges the pairing rejects or adjusts (EDGE inputs)
    frame: InputFrame
    verdicts: Verdicts | None  # None when nothing can be late
    received: int | None = None  # rows, once counted (see ``validate``)


def admit(spark: SparkSession, frame: InputFrame, cti_replay: CtiReplay) -> Admitted:
    """The admitted events: rows as read, less the verdicts, with end edges paired."""
    node = frame.node
    assert frame.df is not None
    names = field_names(node.payload_type)
    payload = [F.col(f"`{n}`") for n in names]
    kind = F.col(KIND)
    if frame.static:
        # A row that breaks a rule fails the query where it is read; run() and metrics()
        # check first and name it (see ``finish``).
        bad = _breaks_a_rule(node)
        message = f"tempo: input {node.name!r} has a row with a null time or payload value, a start at infinity or an end not after its start (SparkExecutor.run names it)"
        start = F.when(bad, F.raise_error(F.lit(message)).cast("long")).otherwise(F.col(S))
        out = frame.df.select(start.alias(S), F.least(F.col(E), F.lit(INF)).alias(E), *payload)
        return Admitted(out, None, frame, None)
    verdicts = decide(spark, frame, cti_replay)
    df = frame.df
    events = df.filter(kind.isin(*EVENT_KINDS))
    if verdicts.events:
        schema = f"{ORDER} long, {FILE} long, __status int, __adm_s long, __adm_e long"
        table = spark.createDataFrame([(o, f, status, s, e) for o, f, status, _, s, e in verdicts.events], schema)
        events = events.join(F.broadcast(table), [ORDER, FILE], "left")
        events = events.withColumn("__status", F.coalesce(F.col("__status"), F.lit(0)))
        events = events.withColumn("__adm_s", F.coalesce(F.col("__adm_s"), F.col(S))).withColumn("__adm_e", F.coalesce(F.col("__adm_e"), F.col(E)))
    else:
        events = events.withColumn("__status", F.lit(0)).withColumn("__adm_s", F.col(S)).withColumn("__adm_e", F.col(E))
    if node.shape is not EventShape.EDGE:
        out = events.filter(F.col("__status") != DROPPED).select(
            F.col("__adm_s").alias(S), F.least(F.col("__adm_e"), F.lit(INF)).alias(E), *payload
        )
        return Admitted(out, None, frame, verdicts)

    # End edges: the k-th end edge with a start and payload closes the k-th such start edge.
    adjust = frame.policy.adjust
    key_cols = [F.col(S), *payload]
    rank_w = Window.partitionBy(*key_cols).orderBy(ORDER, FILE)
    starts = events.filter(kind == START).withColumn("__rank", F.row_number().over(rank_w))
    ends = df.filter(kind == END)
    if verdicts.ends:
        late = spark.createDataFrame(verdicts.ends, f"{ORDER} long, {FILE} long, __cti long")
        ends = ends.join(F.broadcast(late), [ORDER, FILE], "left")
    else:
        ends = ends.withColumn("__cti", F.lit(None).cast("long"))
    ends = ends.withColumn("__rank", F.row_number().over(rank_w))
    starts_k = starts.select(
        *[c.alias(f"__s_{i}") for i, c in enumerate(key_cols)], F.col("__rank").alias("__s_rank"),
        F.col("__status").alias("__start_status"), F.col("__adm_s").alias("__start_adm"),
        F.col(ORDER).alias("__start_o"), F.col(FILE).alias("__start_f"),
    )
    cond = F.col("__rank") == F.col("__s_rank")
    for i, c in enumerate(key_cols):
        cond = cond & c.eqNullSafe(F.col(f"__s_{i}"))
    paired = ends.join(starts_k, cond, "left")
    start_after = (F.col("__start_o") > F.col(ORDER)) | ((F.col("__start_o") == F.col(ORDER)) & (F.col("__start_f") > F.col(FILE)))
    status = (
        F.when(F.col("__start_o").isNull() | start_after, F.lit(4))  # no start edge before it: bad input
        .when(F.col("__start_status") == DROPPED, F.lit(3))  # its start edge was dropped
        .when(F.col("__cti").isNull(), F.lit(0))
        .when(F.lit(adjust), F.lit(ADJUSTED))
        .otherwise(F.lit(DROPPED))
    )
    paired = paired.withColumn("__status", status)
    # A start edge moved up to the CTI may now start where this edge ends: one tick stays.
    adm_end = F.when(F.col("__status") == ADJUSTED, F.greatest(F.col("__cti"), F.col("__start_adm") + 1)).otherwise(F.greatest(F.col(E), F.col("__start_adm") + 1))
    paired = paired.withColumn("__adm_e", adm_end)
    closing = paired.filter(F.col("__status").isin(0, ADJUSTED) & (F.col("__adm_e") < INF)).select(
        F.col("__start_o").alias("__close_o"), F.col("__start_f").alias("__close_f"), F.col("__adm_e").alias("__close_e")
    )
    admitted = events.filter(F.col("__status") != DROPPED)
    admitted = admitted.join(closing, (admitted[ORDER] == closing["__close_o"]) & (admitted[FILE] == closing["__close_f"]), "left")
    final_end = F.when(kind == START, F.coalesce(F.col("__close_e"), F.lit(INF))).otherwise(F.col("__adm_e"))
    out = admitted.select(F.col("__adm_s").alias(S), F.least(final_end, F.lit(INF)).alias(E), *payload)
    outcome = paired.filter(F.col("__status") != 0).select(ORDER, FILE, F.col("__status"), F.col("__adm_e"), *_received_columns(node))
    return Admitted(out, outcome, frame, verdicts)


def finish(
    spark: SparkSession, admitted: Admitted, outcome: Sequence[Any], cti_replay: CtiReplay, with_items: bool
) -> tuple[InputMetrics, list[tuple[str, int, Any, Rule, Action, int, Any]]]:
    """Metrics and rejections of one input, from its verdicts and its collected pairing
    outcome (raising for end edges without their start edge). ``with_items``: name the
    received item of each rejection (one more job for a table with rejections)."""
    frame, node = admitted.frame, admitted.frame.node
    replay_metrics = cti_replay.metrics(node.name)

    def with_ctis(m: InputMetrics) -> InputMetrics:
        m.ctis_generated, m.ctis_imported = replay_metrics.ctis_generated, replay_metrics.ctis_imported
        m.ctis_explicit, m.ctis_ignored = replay_metrics.ctis_explicit, replay_metrics.ctis_ignored
        return m

    if admitted.verdicts is None:
        n = validate(spark, admitted, cti_replay)
        return with_ctis(InputMetrics(received=n, admitted=n)), []
    verdicts = admitted.verdicts
    # (key, position, status, cti, admitted_as, rule) of every rejection.
    found: list[tuple[tuple[int, int], int, int, int, Any, Rule]] = []
    for o, f, status, cti, s, e in verdicts.events:
        rule = verdicts.rules.get((o, f), Rule.START_BEFORE_CTI)
        found.append(((o, f), verdicts.positions[(o, f)], status, cti, ("lifetime", s, e) if status == ADJUSTED else None, rule))
    in_force = _in_force(cti_replay.steps[node.name])
    late = {(o, f): c for o, f, c in verdicts.ends}
    odd = list(outcome)
    positions = _positions(spark, frame, [_key(r) for r in odd if _key(r) not in verdicts.positions])
    positions.update(verdicts.positions)
    for r in sorted(odd, key=lambda r: positions[_key(r)]):
        k, pos = _key(r), positions[_key(r)]
        if r["__status"] == 4:
            raise InputError(node.name, pos, _items(spark, frame, [_with_pos(r, pos)])[k], message(InputRule.END_WITHOUT_START))
        if not frame.policy.has_settings:
            raise CtiViolationError(
                node.name, pos, _items(spark, frame, [_with_pos(r, pos)])[k],
                cti_violation_rule("the end edge ends", late[k] if k in late else in_force((r[ARR], frame.decl, pos, 0))),
            )
        cti = late[k] if k in late else in_force((r[ARR], frame.decl, pos, 0))
        rule = Rule.START_EDGE_DROPPED if r["__status"] == 3 else Rule.END_BEFORE_CTI
        found.append((k, pos, r["__status"], cti, ("end", r["__adm_e"]) if r["__status"] == ADJUSTED else None, rule))
    found.sort(key=lambda x: x[1])
    assert frame.blocks is not None
    received = sum(frame.blocks.events.values())
    dropped = sum(1 for x in found if x[2] != ADJUSTED)
    if verdicts.counts is not None:
        metrics = with_ctis(attrs.evolve(verdicts.counts))
    else:
        metrics = InputMetrics(
            received=received, admitted=received - dropped, adjusted=len(found) - dropped, dropped=dropped
        )
        with_ctis(metrics)
    if not with_items:
        return metrics, []
    items = _items(spark, frame, [{ORDER: k[0], FILE: k[1], POS: pos} for k, pos, *_ in found])
    rejected = [
        (node.name, pos, items[k], rule, Action.ADJUSTED if status == ADJUSTED else Action.DROPPED, cti, admitted_as)
        for k, pos, status, cti, admitted_as, rule in found
    ]
    return metrics, rejected


def _breaks_a_rule(node: SourceNode) -> Column:
    """A row of an input where nothing can be late (points or intervals) breaking a rule."""
    return (
        F.col(S).isNull() | F.col(E).isNull() | (F.col(S) >= INF) | ((F.col(KIND) == INTERVAL) & (F.col(E) <= F.col(S)))
        | F.col(NULLF).isNotNull() | F.col(ORDER).isNull()
    )


def validate(spark: SparkSession, admitted: Admitted, cti_replay: CtiReplay) -> int:
    """Count the rows of an input where nothing can be late, checking each (one job); a row
    that breaks a rule raises as the in-memory executor raises, named by the scan."""
    if admitted.received is None:
        frame = admitted.frame
        assert frame.df is not None
        bad = _breaks_a_rule(frame.node)
        r = frame.df.agg(F.count(F.lit(1)).alias("n"), F.max(bad.cast("int")).alias("bad")).collect()[0]
        if r["bad"]:
            frame.static = False
            _cut(frame)
            scan(spark, frame, [])
            decide(spark, frame, cti_replay)
        admitted.received = r["n"]
    return admitted.received


def _with_pos(row: Any, pos: int) -> dict[str, Any]:
    return {ORDER: row[ORDER], FILE: row[FILE], POS: pos}


def local_events(spark: SparkSession, frame: InputFrame, events: dict[int, list[Any]]) -> DataFrame:
    """The events admitted on the driver, as a relation (S, E, payload columns)."""
    rows = [(s, INF if e is None else e, *to_wire(p)) for s, e, p in events.values()]
    schema = st.StructType([st.StructField(S, st.LongType(), False), st.StructField(E, st.LongType(), False)] + list(wire_schema(frame.node.payload_type).fields))
    return _payload_to_internal(spark.createDataFrame(rows, schema), frame.node.payload_type)
