"""Ingress on Spark: input rows to admitted events, with the CTIs of ``tempo.memory.ingress``.

The rules are those of the in-memory ingress; this module computes them in bulk:

1. Each input becomes rows ``(position, kind, start, end, arrival, payload...)``.
2. CTI candidates per row, with running aggregates over input order: explicit CTIs, every
   N-th counted event's start minus the delay, or the start of an event entering a later
   period. Running aggregates are computed per chunk of positions (a window partitioned
   by chunk) plus a prefix over the chunks before, so no input is funnelled through one
   partition.
3. The candidates (one per N events, a few per period: small) go to the driver, where
   ``CtiReplay`` applies the never-go-back rule, imports and the flush exactly as the
   in-memory executor does, and yields each input's CTI steps and the CTIs every operator
   forwards.
4. The steps come back as rows; a running max over the union of items and steps gives the
   CTI in force before each item; the policy then drops or adjusts, and end edges are
   paired with their start edges by rank.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import attrs
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as st

from tempo.errors import CompileError, CtiViolationError, InputError
from tempo.events import EventShape
from tempo.expr.schema import field_names, record_fields
from tempo.memory.executor import CtiReplay, Key
from tempo.memory.ingress import CTI, END, INTERVAL, POINT, START, TimestampMode, item_of, prepare
from tempo.plan.nodes import SourceNode
from tempo.result import Action, InputMetrics, Rule
from tempo.settings import AdvanceTimePolicy
from tempo.sources import ItemSource, TableSource
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.spark.types import to_wire, wire_schema
from tempo.ticks import INF, NEG_INF, duration_ticks

POS, KIND, ARR, DECL, SUB, CHUNK = "__pos", "__kind", "__arr", "__decl", "__sub", "__chunk"
CHUNK_ROWS = 1 << 17
"""Rows per chunk of input order for running aggregates."""
ARRIVAL_CHUNK = 60_000_000
"""Ticks of arrival time per chunk, for inputs ordered by arrival (imports)."""


@attrs.define
class InputFrame:
    """One input as rows, with what the driver knows of it."""

    node: SourceNode
    decl: int
    df: DataFrame
    items: dict[int, Any] | None  # position -> received item, for item lists
    rows: int | None = None  # known for item lists: one chunk, no job to find the chunks
    events: int | None = None  # event rows (not CTIs), when known
    chunks: Chunks | None = None  # how a Spark-path frame is cut (see ``_chunked``)
    step_order: dict[int, tuple[int, int]] = attrs.Factory(dict)  # position -> (ORDER, FILE) of candidate rows
    prepared: list[Any] | None = None  # records admitted on the driver (small item lists)


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
        st.StructField(POS, st.LongType(), False),
        st.StructField(KIND, st.IntegerType(), False),
        st.StructField(S, st.LongType(), False),
        st.StructField(E, st.LongType(), False),
        st.StructField(ARR, st.LongType(), False),
    ]
    return st.StructType(base + list(wire_schema(payload_type).fields))


def _payload_to_internal(df: DataFrame, payload_type: type) -> DataFrame:
    """Wire columns (datetimes as longs) to the relation's columns (timestamps)."""
    from datetime import datetime

    for f in record_fields(payload_type):
        if f.dtype is datetime:
            df = df.withColumn(f.name, F.timestamp_micros(F.col(f.name)))
    return df


LOCAL_ITEMS = 100_000
"""Item lists up to this size are admitted on the driver (see ``input_frame``)."""


def input_frame(
    spark: SparkSession, node: SourceNode, decl: int, mode: TimestampMode, needs_arrival: bool, local_limit: int = LOCAL_ITEMS
) -> InputFrame:
    """The rows of one input, checked as the in-memory executor checks them.

    An item list is already in the driver's memory: up to ``local_limit`` items it is
    admitted there by the in-memory ingress itself (``prepared`` holds its records), and
    only the admitted events go to Spark. Larger lists and every table go through the
    Spark ingress below.
    """
    source = node.source
    if isinstance(source, ItemSource) or not isinstance(source, TableSource):
        if local_limit:
            prepared = list(prepare(node, mode, needs_arrival))
            if len(prepared) <= local_limit:
                items = {rec[5]: rec[6] for rec in prepared}
                return InputFrame(node, decl, None, items, rows=len(prepared), prepared=prepared)  # type: ignore[arg-type]
        rows, items = _item_rows(node, mode, needs_arrival)
        df = spark.createDataFrame(rows, _frame_schema(node.payload_type))
        df = df.withColumn(ORDER, F.col(POS)).withColumn(FILE, F.lit(0).cast("long")).drop(POS)
        n_events = sum(1 for r in rows if r[1] != CTI)
        frame = InputFrame(node, decl, _payload_to_internal(df, node.payload_type), items, len(rows), n_events)
        return _chunked(frame)
    return _table_frame(spark, node, decl, mode, needs_arrival)


def _table_frame(spark: SparkSession, node: SourceNode, decl: int, mode: TimestampMode, needs_arrival: bool) -> InputFrame:
    from tempo.sources import CsvSource, DataFrameSource, ParquetSource, SparkTableSource
    from tempo.tables import KINDS

    source = node.source
    assert isinstance(source, TableSource)
    if isinstance(source, ParquetSource):
        raw = spark.read.parquet(source.path)
    elif isinstance(source, CsvSource):
        raw = spark.read.option("header", True).option("inferSchema", True).csv(source.path)
    elif isinstance(source, DataFrameSource):
        raw = source.df
    elif isinstance(source, SparkTableSource):
        raw = spark.table(source.name)
    else:
        raise CompileError(f"the Spark executor cannot read {source!r}")
    mode.check(datetime(1970, 1, 1, tzinfo=timezone.utc), node.name, 0, None, "a table's times")  # tables are UTC
    origin = source.origin_ticks()

    def ticks(name: str) -> Column:
        col = raw.schema[name].dataType
        c = F.col(f"`{name}`")
        if isinstance(col, (st.TimestampType, st.TimestampNTZType)):
            return F.unix_micros(c.cast("timestamp"))
        return c.cast("long") + F.lit(origin)

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
        raise InputError(node.name, 0, None, "an EDGE input from a table needs a `kind` column (start/end/cti)")
    start = ticks(source.start)
    end_col = ticks(source.end) if source.end else F.lit(None).cast("long")
    end = (F.when(kind == POINT, start + 1).when(kind == START, F.lit(INF)).when(kind == CTI, start).otherwise(end_col))
    arrival = ticks(source.arrival) if source.arrival else F.lit(NEG_INF)
    # Without an order column the file order counts: monotonically_increasing_id follows it.
    order = (ticks(source.order) if source.order in (source.arrival, source.start, source.end) else F.col(f"`{source.order}`").cast("long")) if source.order else F.monotonically_increasing_id()
    names = field_names(node.payload_type)
    missing = [n for n in names if n not in raw.columns]
    if missing:
        raise InputError(node.name, 0, None, f"no column for payload field(s) {', '.join(missing)} of {node.payload_type.__name__}")
    df = raw.select(
        kind.alias(KIND), start.alias(S), end.alias(E), arrival.alias(ARR), order.alias(ORDER),
        F.monotonically_increasing_id().alias(FILE), *[F.col(f"`{n}`") for n in names],
    )
    return _chunked(InputFrame(node, decl, df, None))


ORDER, FILE = "__order", "__file"
"""Input order of a row (the order column, or file order), and the tie-break (file order)."""


@attrs.define
class Chunks:
    """Rows cut into chunks by value range of ``ORDER``: what each chunk holds.

    The range cut is deterministic (unlike a sampled range partitioning), so figures taken
    in one job hold in the next, and every running aggregate over input order is a window
    partitioned by chunk plus a prefix over the chunks before, taken on the driver.
    """

    lo: int
    width: int
    rows: dict[int, int]  # chunk -> rows
    counted: dict[int, int]  # chunk -> events counted by count generation
    events: dict[int, int]  # chunk -> event rows (not CTIs)
    period: dict[int, int]  # chunk -> greatest period entered (time-span generation)

    def column(self) -> Column:
        return F.floor((F.col(ORDER) - F.lit(self.lo)) / F.lit(self.width))

    def prefix(self, per_chunk: dict[int, int], combine: str) -> dict[int, int]:
        """For each chunk, the sum (or max) over the chunks before it."""
        out: dict[int, int] = {}
        acc: int | None = None
        for chunk in sorted(self.rows):
            if acc is not None:
                out[chunk] = acc
            v = per_chunk.get(chunk)
            if v is not None:
                acc = v if acc is None else (acc + v if combine == "sum" else max(acc, v))
        return out


def _period_column(frame: InputFrame) -> Column | None:
    gen = frame.node.settings.generation if frame.node.settings else None
    if gen is None or isinstance(gen.frequency, int):
        return None
    return F.when(F.col(KIND).isin(POINT, INTERVAL, START), F.floor(F.col(S) / duration_ticks(gen.frequency)))


def _chunked(frame: InputFrame) -> InputFrame:
    """Cut the frame into chunks (two small jobs: the range, then per-chunk figures)."""
    df = frame.df
    small = frame.rows is not None and frame.rows <= CHUNK_ROWS
    if small:
        chunks = Chunks(0, 1 << 62, {}, {}, {}, {})
    else:
        stats = df.agg(F.min(ORDER).alias("lo"), F.max(ORDER).alias("hi")).collect()[0]
        lo, hi = stats["lo"] or 0, stats["hi"] or 0
        chunks = Chunks(lo, max(1, (hi - lo) // 64 + 1), {}, {}, {}, {})
    df = df.withColumn(CHUNK, chunks.column())
    if not small:
        period = _period_column(frame)
        figures = df.groupBy(CHUNK).agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum(F.col(KIND).isin(POINT, INTERVAL, START).cast("long")).alias("counted"),
            F.sum((F.col(KIND) != CTI).cast("long")).alias("events"),
            (F.max(period) if period is not None else F.lit(None).cast("long")).alias("period"),
        ).collect()
        for r in figures:
            chunks.rows[r[CHUNK]] = r["rows"]
            chunks.counted[r[CHUNK]] = r["counted"] or 0
            chunks.events[r[CHUNK]] = r["events"] or 0
            if r["period"] is not None:
                chunks.period[r[CHUNK]] = r["period"]
        frame.events = sum(chunks.events.values())
    else:
        chunks.rows[0] = frame.rows or 0
    frame.df = df
    frame.chunks = chunks
    return frame


def _map_lookup(values: dict[int, int], key: Column, default: int) -> Column:
    if not values:
        return F.lit(default).cast("long")
    pairs: list[Column] = []
    for k, v in values.items():
        pairs += [F.lit(k), F.lit(v)]
    return F.coalesce(F.create_map(*pairs)[key], F.lit(default)).cast("long")


def candidates(frame: InputFrame) -> list[tuple[Key, str, int]]:
    """The CTI candidates of one input: (key, origin, value), to be replayed on the driver,
    computed in Spark with running aggregates over input order."""
    node = frame.node
    chunks = frame.chunks
    assert chunks is not None
    gen = node.settings.generation if node.settings else None
    counted = F.col(KIND).isin(POINT, INTERVAL, START)
    w = Window.partitionBy(CHUNK).orderBy(ORDER, FILE)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    pos = _map_lookup(chunks.prefix(chunks.rows, "sum"), F.col(CHUNK), 0) + F.row_number().over(w) - 1
    generated: Column = F.lit(None).cast("long")
    if gen is not None:
        delay = duration_ticks(gen.delay)
        if isinstance(gen.frequency, int):
            prior = _map_lookup(chunks.prefix(chunks.counted, "sum"), F.col(CHUNK), 0)
            index = prior + F.coalesce(F.sum(counted.cast("long")).over(before), F.lit(0)) + counted.cast("long")
            generated = F.when(counted & (index % gen.frequency == 0), F.col(S) - delay)
        else:
            period = _period_column(frame)
            assert period is not None
            prior = _map_lookup(chunks.prefix(chunks.period, "max"), F.col(CHUNK), NEG_INF)
            seen = F.greatest(prior, F.coalesce(F.max(period).over(before), F.lit(NEG_INF)))
            generated = F.when(counted & (seen > NEG_INF) & (period > seen), F.col(S) - delay)
    explicit = F.when(F.col(KIND) == CTI, F.col(S))
    rows = (
        frame.df.select(pos.alias(POS), ARR, ORDER, FILE, generated.alias("g"), explicit.alias("x"))
        .filter(F.col("g").isNotNull() | F.col("x").isNotNull())
        .collect()
    )
    out: list[tuple[Key, str, int]] = []
    for r in rows:
        key: Key = (r[ARR], frame.decl, r[POS], 0)
        frame.step_order[r[POS]] = (r[ORDER], r[FILE])
        out.append((key, "explicit", r["x"]) if r["x"] is not None else (key, "generated", r["g"]))
    return out


def replay(frames: Sequence[InputFrame], cti_replay: CtiReplay) -> dict[str, dict[int, list[Any]]]:
    """Feed every input to the driver-side replay, in arrival order: the CTI candidates of
    inputs admitted in Spark, the whole items of inputs admitted on the driver (whose
    admitted events are returned, by input)."""
    rows: list[tuple[Key, str, Any]] = []
    local: dict[str, dict[int, list[Any]]] = {}
    for frame in frames:
        name = frame.node.name
        if frame.prepared is not None:
            local[name] = cti_replay.admit_locally(name)
            rows.extend(((rec[0], frame.decl, rec[5], 0), name, rec) for rec in frame.prepared)
        else:
            rows.extend((key, name, (origin, value)) for key, origin, value in candidates(frame))
    rows.sort(key=lambda r: r[0])
    for key, name, what in rows:
        if name in local:
            cti_replay.feed_item(key, name, what)
        else:
            cti_replay.feed(key, name, what[0], what[1])
    cti_replay.shutdown()
    return local


def local_events(spark: SparkSession, frame: InputFrame, events: dict[int, list[Any]]) -> DataFrame:
    """The events admitted on the driver, as a relation (S, E, payload columns)."""
    rows = [(s, INF if e is None else e, *to_wire(p)) for s, e, p in events.values()]
    schema = st.StructType([st.StructField(S, st.LongType(), False), st.StructField(E, st.LongType(), False)] + list(wire_schema(frame.node.payload_type).fields))
    return _payload_to_internal(spark.createDataFrame(rows, schema), frame.node.payload_type)


def _in_force(spark: SparkSession, frame: InputFrame, steps: list[tuple[Key, int]]) -> DataFrame:
    """Each item with its position ``POS`` and ``__cti``, the CTI in force when it arrived.

    The steps (the moments this input's CTI advanced) become rows that sort right after
    the item that caused them, or, for imported CTIs, at their place in the arrival order
    across inputs. One window over items and steps, partitioned by chunk, gives both the
    running max of the steps before each item and the item's position (the items before it).
    """
    chunks = frame.chunks
    assert chunks is not None
    steps = [(k, v) for k, v in steps if k[0] < INF]  # the shutdown flush follows every item
    imports = frame.node.settings is not None and frame.node.settings.import_ is not None
    df = frame.df.withColumn(DECL, F.lit(frame.decl).cast("long")).withColumn(SUB, F.lit(0).cast("long"))
    df = df.withColumn("__v", F.lit(None).cast("long"))
    step_rows = []
    for (arr, decl, pos, _), v in steps:
        order, file = frame.step_order.get(pos, (0, 0)) if decl == frame.decl else (0, 0)
        step_rows.append((arr, decl, order, file, 1, v))
    schema = st.StructType([st.StructField(n, st.LongType(), False) for n in (ARR, DECL, ORDER, FILE, SUB, "__v")])
    steps_df = spark.createDataFrame(step_rows, schema)
    if imports:
        # Across inputs the arrival order rules: one chunk (imports usually join small
        # inputs), positions counted from the start.
        sort = [ARR, DECL, ORDER, FILE, SUB]
        df, steps_df = df.withColumn(CHUNK, F.lit(0).cast("long")), steps_df.withColumn(CHUNK, F.lit(0).cast("long"))
        row_prefix: dict[int, int] = {}
        step_prefix: dict[int, int] = {}
    else:
        sort = [ORDER, FILE, SUB]
        steps_df = steps_df.withColumn(CHUNK, chunks.column())
        row_prefix = chunks.prefix(chunks.rows, "sum")
        # Max of the steps in the chunks before each chunk, known on the driver.
        by_chunk: dict[int, int] = {}
        for _, _, order, _, _, v in step_rows:
            c = (order - chunks.lo) // chunks.width
            by_chunk[c] = max(by_chunk.get(c, NEG_INF), v)
        step_prefix = chunks.prefix(by_chunk, "max")
    unioned = df.unionByName(steps_df, allowMissingColumns=True)
    w = Window.partitionBy(CHUNK).orderBy(*sort)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    is_item = (F.col(SUB) == 0).cast("long")
    running = F.greatest(_map_lookup(step_prefix, F.col(CHUNK), NEG_INF), F.coalesce(F.max("__v").over(before), F.lit(NEG_INF)))
    position = _map_lookup(row_prefix, F.col(CHUNK), 0) + F.coalesce(F.sum(is_item).over(before), F.lit(0))
    result = unioned.withColumn("__cti", running).withColumn(POS, position)
    return result.filter(F.col(SUB) == 0).drop("__v", DECL, SUB, CHUNK, ORDER, FILE)


BAD_ROW = 5
"""Outcome status of a row that breaks the input's rules (raised as an InputError)."""


@attrs.define
class Admitted:
    """The outcome of ingress for one input, still lazy."""

    events: DataFrame  # S, E, payload columns
    outcome: DataFrame  # rows the policy did not simply admit (see ``finish``)
    frame: InputFrame
    replay: CtiReplay
    has_policy: bool


def admit(spark: SparkSession, frame: InputFrame, cti_replay: CtiReplay) -> Admitted:
    """Apply the policy to every item, against the CTI in force when it arrived."""
    node = frame.node
    names = field_names(node.payload_type)
    df = _in_force(spark, frame, cti_replay.steps[node.name])
    settings = node.settings
    has_policy = settings is not None
    adjust = settings is not None and settings.policy is AdvanceTimePolicy.ADJUST
    cti, kind, s, e = F.col("__cti"), F.col(KIND), F.col(S), F.col(E)
    events = df.filter(kind.isin(POINT, INTERVAL, START))
    viol = s < cti
    can_adjust = F.lit(adjust) & (cti < INF) & ((kind == POINT) | (e > cti))
    status = F.when(~viol, F.lit(0)).when(can_adjust, F.lit(1)).otherwise(F.lit(2))  # ok, adjusted, dropped
    events = events.withColumn("__status", status)
    events = events.withColumn("__adm_s", F.when(F.col("__status") == 1, cti).otherwise(s))
    events = events.withColumn("__adm_e", F.when((F.col("__status") == 1) & (kind == POINT), cti + 1).otherwise(e))

    received_as = _received_columns(node)
    outcome = events.select(POS, KIND, F.col("__status"), cti.alias("__c"), F.col("__adm_s"), F.col("__adm_e"), *received_as)
    bad = kind.isNull() | s.isNull() | e.isNull() | (kind.isin(INTERVAL, END) & (e <= s))
    outcome = outcome.unionByName(df.filter(bad).select(
        POS, KIND, F.lit(BAD_ROW).alias("__status"), cti.alias("__c"), F.lit(None).cast("long").alias("__adm_s"),
        F.lit(None).cast("long").alias("__adm_e"), *received_as,
    ))
    if node.shape is not EventShape.EDGE:
        out = events.filter(F.col("__status") != 2).select(
            F.col("__adm_s").alias(S), F.when(F.col("__adm_e") >= INF, F.lit(INF)).otherwise(F.col("__adm_e")).alias(E),
            *[F.col(f"`{n}`") for n in names],
        )
        return _admitted(out, outcome, frame, cti_replay, has_policy)

    # End edges: the k-th end edge with a start and payload closes the k-th such start edge.
    key_cols = [S, *names]
    rank_w = Window.partitionBy(*[F.col(f"`{c}`") for c in key_cols]).orderBy(POS)
    starts = events.filter(kind == START).withColumn("__rank", F.row_number().over(rank_w))
    ends = df.filter(kind == END).withColumn("__rank", F.row_number().over(rank_w))
    s_cols = [F.col(f"`{c}`").alias(f"__s_{i}") for i, c in enumerate(key_cols)]
    starts_k = starts.select(*s_cols, F.col("__rank").alias("__s_rank"), F.col("__status").alias("__start_status"), F.col("__adm_s").alias("__start_adm"), F.col(POS).alias("__start_pos"))
    cond = F.col("__rank") == F.col("__s_rank")
    for i, c in enumerate(key_cols):
        cond = cond & F.col(f"`{c}`").eqNullSafe(F.col(f"__s_{i}"))
    paired = ends.join(starts_k, cond, "left")
    end_viol = e < cti
    end_status = (
        F.when(F.col("__start_pos").isNull() | (F.col("__start_pos") > F.col(POS)), F.lit(4))  # no start edge before it: bad input
        .when(F.col("__start_status") == 2, F.lit(3))  # its start edge was dropped
        .when(~end_viol, F.lit(0))
        .when(F.lit(adjust), F.lit(1))
        .otherwise(F.lit(2))
    )
    paired = paired.withColumn("__status", end_status)
    adm_end = F.when(F.col("__status") == 1, F.greatest(cti, F.col("__start_adm") + 1)).otherwise(F.greatest(e, F.col("__start_adm") + 1))
    paired = paired.withColumn("__adm_e", adm_end)

    closing = paired.filter(F.col("__status").isin(0, 1) & (F.col("__adm_e") < INF)).select(
        F.col("__start_pos").alias("__close_pos"), F.col("__adm_e").alias("__close_e")
    )
    admitted = events.filter(F.col("__status") != 2)
    admitted = admitted.join(closing, admitted[POS] == closing["__close_pos"], "left")
    final_end = F.when(kind == START, F.coalesce(F.col("__close_e"), F.lit(INF))).otherwise(F.col("__adm_e"))
    final_end = F.when(final_end >= INF, F.lit(INF)).otherwise(final_end)
    out = admitted.select(F.col("__adm_s").alias(S), final_end.alias(E), *[F.col(f"`{n}`") for n in names])

    # Everything the policy did not simply admit, collected with the query's output (one
    # job): violations without a policy and unmatched end edges raise; drops and
    # adjustments become metrics and rejections. A table also reports its event count.
    outcome = outcome.unionByName(
        paired.select(POS, KIND, F.col("__status"), cti.alias("__c"), F.lit(None).cast("long").alias("__adm_s"), F.col("__adm_e"), *received_as)
    )
    return _admitted(out, outcome, frame, cti_replay, has_policy)


def _received_columns(node: SourceNode) -> list[Column]:
    """The item as received, in outcome rows (so a rejection names it without another job)."""
    from datetime import datetime

    cols = [F.col(S).alias("__os"), F.col(E).alias("__oe"), F.col(ARR).alias("__oa")]
    for f in record_fields(node.payload_type):
        c = F.col(f"`{f.name}`")
        cols.append((F.unix_micros(c) if f.dtype is datetime else c).alias(f"__p_{f.name}"))
    return cols


def _admitted(out: DataFrame, outcome: DataFrame, frame: InputFrame, cti_replay: CtiReplay, has_policy: bool) -> Admitted:
    return Admitted(out, outcome.filter(F.col("__status") != 0), frame, cti_replay, has_policy)


def finish(admitted: Admitted, rows: Sequence[Any]) -> tuple[InputMetrics, list[tuple[str, int, Any, Rule, Action, int, Any]]]:
    """Metrics and rejections of one input from its collected outcome rows (or the error)."""
    frame, node = admitted.frame, admitted.frame.node
    odd = sorted(rows, key=lambda r: r[POS])
    for r in odd:
        if r["__status"] == BAD_ROW:
            raise InputError(node.name, r[POS], _item(frame, r), "bad row: unknown kind, null time, or end not after start")
    for r in odd:
        if r["__status"] == 4:
            raise InputError(node.name, r[POS], _item(frame, r), "end edge without its start edge")
    if not admitted.has_policy:
        for r in odd:
            if r["__status"] in (1, 2):
                what = "the end edge ends" if r[KIND] == END else "the event starts"
                raise CtiViolationError(
                    node.name, r[POS], _item(frame, r),
                    f"{what} before the current CTI; this input has no AdvanceTimeSettings, "
                    "so a CTI violation is an error (give it settings with policy DROP or ADJUST)",
                )
    assert frame.events is not None
    received = frame.events
    adjusted = sum(1 for r in odd if r["__status"] == 1)
    dropped = sum(1 for r in odd if r["__status"] in (2, 3))
    replay_metrics = admitted.replay.metrics(node.name)
    metrics = InputMetrics(
        received=received,
        admitted=received - dropped,
        adjusted=adjusted,
        dropped=dropped,
        ctis_generated=replay_metrics.ctis_generated,
        ctis_imported=replay_metrics.ctis_imported,
        ctis_explicit=replay_metrics.ctis_explicit,
        ctis_ignored=replay_metrics.ctis_ignored,
    )
    rejected: list[tuple[str, int, Any, Rule, Action, int, Any]] = []
    for r in odd:
        pos, k, st_, c = r[POS], r[KIND], r["__status"], r["__c"]
        if k == END:
            rule = Rule.START_EDGE_DROPPED if st_ == 3 else Rule.END_BEFORE_CTI
            admitted_as: Any = ("end", r["__adm_e"]) if st_ == 1 else None
        else:
            rule = Rule.START_BEFORE_CTI
            admitted_as = ("lifetime", r["__adm_s"], r["__adm_e"]) if st_ == 1 else None
        action = Action.ADJUSTED if st_ == 1 else Action.DROPPED
        rejected.append((node.name, pos, _item(frame, r), rule, action, c, admitted_as))
    return metrics, rejected


def _item(frame: InputFrame, row: Any) -> Any:
    """The received item of an outcome row."""
    pos = row[POS]
    if frame.items is not None:
        return frame.items[pos]
    from tempo.spark.types import from_wire

    names = field_names(frame.node.payload_type)
    kind = row[KIND]
    payload = from_wire(frame.node.payload_type, [row[f"__p_{n}"] for n in names], naive=False) if kind != CTI else None
    return item_of((row["__oa"], kind, row["__os"], row["__oe"], payload, pos, None))
