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
    has_arrival: bool
    rows: int | None = None  # known for item lists: one chunk, no job to find the chunks
    events: int | None = None  # event rows (not CTIs), when known
    local: list[tuple[Any, ...]] | None = None  # the rows themselves, for item lists
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
                return InputFrame(node, decl, None, items, False, len(prepared), None, None, prepared)  # type: ignore[arg-type]
        rows, items = _item_rows(node, mode, needs_arrival)
        df = spark.createDataFrame(rows, _frame_schema(node.payload_type))
        has_arrival = any(getattr(i, "arrival", None) is not None for i in items.values())
        n_events = sum(1 for r in rows if r[1] != CTI)
        return InputFrame(node, decl, _payload_to_internal(df, node.payload_type), items, has_arrival, len(rows), n_events, rows)
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
    mode.check(__import__("datetime").datetime(1970, 1, 1, tzinfo=__import__("datetime").timezone.utc), node.name, 0, None, "a table's times")
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
    order = F.col(f"`{source.order}`") if source.order else F.monotonically_increasing_id()
    names = field_names(node.payload_type)
    missing = [n for n in names if n not in raw.columns]
    if missing:
        raise InputError(node.name, 0, None, f"no column for payload field(s) {', '.join(missing)} of {node.payload_type.__name__}")
    df = raw.select(
        kind.alias(KIND), start.alias(S), end.alias(E), arrival.alias(ARR), order.alias("__order"),
        F.monotonically_increasing_id().alias("__file"), *[F.col(f"`{n}`") for n in names],
    )
    df = _dense_positions(df, ["__order", "__file"])
    bad = df.filter(
        F.col(KIND).isNull() | F.col(S).isNull() | F.col(E).isNull()
        | (F.col(KIND).isin(INTERVAL, END) & (F.col(E) <= F.col(S)))
    ).orderBy(POS).limit(1).collect()
    if bad:
        row = bad[0]
        raise InputError(node.name, row[POS], row.asDict(), "bad row: unknown kind, null time, or end not after start")
    return InputFrame(node, decl, df.drop("__order", "__file"), None, source.arrival is not None)


def _dense_positions(df: DataFrame, order: list[str]) -> DataFrame:
    """Positions 0..n-1 in ``order``: per-partition counts, then prefix offsets."""
    ranked = df.repartitionByRange(*order).sortWithinPartitions(*order).withColumn("__pid", F.spark_partition_id())
    counts: dict[int, int] = {r["__pid"]: r["count"] for r in ranked.groupBy("__pid").count().collect()}
    offsets, total = {}, 0
    for pid in sorted(counts):
        offsets[pid] = total
        total += counts[pid]
    offset = _map_lookup(offsets, F.col("__pid"), 0)
    w = Window.partitionBy("__pid").orderBy(*order)
    return ranked.withColumn(POS, offset + F.row_number().over(w) - 1).drop("__pid")


def _step_prefix(prefix: list[tuple[int, int]]) -> Column:
    """The value of a step function of the chunk: ``v`` from chunk ``c`` on, for each (c, v)."""
    if not prefix:
        return F.lit(NEG_INF)
    chunks = F.array(*[F.lit(c) for c, _ in prefix])
    values = F.array(*[F.lit(v) for _, v in prefix])
    # Number of boundaries at or below this chunk = index of the step in force (1-based).
    count = F.size(F.filter(chunks, lambda b: b <= F.col(CHUNK)))
    return F.when(count == 0, F.lit(NEG_INF)).otherwise(F.element_at(values, count))


def _map_lookup(values: dict[int, int], key: Column, default: int) -> Column:
    if not values:
        return F.lit(default).cast("long")
    pairs: list[Column] = []
    for k, v in values.items():
        pairs += [F.lit(k), F.lit(v)]
    return F.coalesce(F.create_map(*pairs)[key], F.lit(default)).cast("long")


def _running_before(
    df: DataFrame, order: Sequence[str], specs: dict[str, tuple[str, Column]], single_chunk: bool = False
) -> DataFrame:
    """For each row, aggregates ("sum" or "max") of a value over the rows before it in ``order``.

    Chunks of ``CHUNK_ROWS`` positions are aggregated as a whole (one small job), the
    prefix over earlier chunks is taken on the driver, and a window partitioned by chunk
    adds the rows before within the chunk.
    """
    df = df.withColumn(CHUNK, F.floor(F.col(POS) / CHUNK_ROWS))
    aggs = [(F.sum if kind == "sum" else F.max)(value).alias(name) for name, (kind, value) in specs.items()]
    per_chunk = {} if single_chunk else {r[CHUNK]: r for r in df.groupBy(CHUNK).agg(*aggs).collect()}
    w = Window.partitionBy(CHUNK).orderBy(*order).rowsBetween(Window.unboundedPreceding, -1)
    for name, (kind, value) in specs.items():
        prefix: dict[int, int] = {}
        acc: int | None = None
        for chunk in sorted(per_chunk):
            if acc is not None:
                prefix[chunk] = acc
            v = per_chunk[chunk][name]
            if v is not None:
                acc = v if acc is None else (acc + v if kind == "sum" else max(acc, v))
        inner = (F.sum if kind == "sum" else F.max)(value).over(w)
        before = _map_lookup(prefix, F.col(CHUNK), 0 if kind == "sum" else NEG_INF)
        if kind == "sum":
            df = df.withColumn(name, before + F.coalesce(inner, F.lit(0)))
        else:
            df = df.withColumn(name, F.greatest(before, F.coalesce(inner, F.lit(NEG_INF))))
    return df.drop(CHUNK)


def _local_candidates(frame: InputFrame) -> list[tuple[Key, str, int]]:
    """Candidates of an item list, which the driver holds anyway: the same rules as below."""
    assert frame.local is not None
    node = frame.node
    gen = node.settings.generation if node.settings else None
    out: list[tuple[Key, str, int]] = []
    count, last_period = 0, None
    for pos, kind, start, _, arrival, *_ in frame.local:
        key: Key = (arrival, frame.decl, pos, 0)
        if kind == CTI:
            out.append((key, "explicit", start))
            continue
        if gen is None or kind == END:
            continue
        delay = duration_ticks(gen.delay)
        if isinstance(gen.frequency, int):
            count += 1
            if count % gen.frequency == 0:
                out.append((key, "generated", start - delay))
        else:
            period = start // duration_ticks(gen.frequency)
            if last_period is not None and period > last_period:
                out.append((key, "generated", start - delay))
            last_period = period if last_period is None else max(last_period, period)
    return out


def candidates(frame: InputFrame) -> list[tuple[Key, str, int]]:
    """The CTI candidates of one input: (key, origin, value), to be replayed on the driver.

    A table's are computed in Spark with running aggregates over input order; an item
    list's on the driver, which already holds its items.
    """
    if frame.local is not None:
        return _local_candidates(frame)
    node = frame.node
    gen = node.settings.generation if node.settings else None
    df = frame.df.select(POS, KIND, S, ARR)
    small = frame.rows is not None and frame.rows <= CHUNK_ROWS
    counted = F.col(KIND).isin(POINT, INTERVAL, START)
    generated: Column = F.lit(None).cast("long")
    if gen is not None:
        delay = duration_ticks(gen.delay)
        if isinstance(gen.frequency, int):
            df = _running_before(df, [POS], {"__count": ("sum", counted.cast("long"))}, small)
            index = F.col("__count") + counted.cast("long")
            generated = F.when(counted & (index % gen.frequency == 0), F.col(S) - delay)
        else:
            period = F.floor(F.col(S) / duration_ticks(gen.frequency))
            df = _running_before(df, [POS], {"__period": ("max", F.when(counted, period))}, small)
            generated = F.when(counted & (F.col("__period") > NEG_INF) & (period > F.col("__period")), F.col(S) - delay)
    explicit = F.when(F.col(KIND) == CTI, F.col(S))
    rows = df.select(POS, ARR, generated.alias("g"), explicit.alias("x")).filter(F.col("g").isNotNull() | F.col("x").isNotNull()).collect()
    out: list[tuple[Key, str, int]] = []
    for r in rows:
        key: Key = (r[ARR], frame.decl, r[POS], 0)
        if r["x"] is not None:
            out.append((key, "explicit", r["x"]))
        else:
            out.append((key, "generated", r["g"]))
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
    """Each item with ``__cti``: the input's CTI in force when it arrived.

    The steps (the moments this input's CTI advanced) become rows that sort right after
    the item that caused them; a running max over items and steps does the rest. An input
    that imports CTIs is ordered by arrival across inputs, so its running max is chunked by
    arrival time rather than by position.
    """
    steps = [(k, v) for k, v in steps if k[0] < INF]  # the shutdown flush follows every item
    if not steps:
        return frame.df.withColumn("__cti", F.lit(NEG_INF))
    imports = frame.node.settings is not None and frame.node.settings.import_ is not None
    df = frame.df.withColumn(DECL, F.lit(frame.decl)).withColumn(SUB, F.lit(0)).withColumn("__v", F.lit(None).cast("long"))
    schema = st.StructType([st.StructField(n, st.LongType(), False) for n in (ARR, DECL, POS, SUB, "__v")])
    step_rows = spark.createDataFrame([(k[0], k[1], k[2], 1, v) for k, v in steps], schema)
    unioned = df.unionByName(step_rows, allowMissingColumns=True)
    if imports:
        order, chunk, width = [ARR, DECL, POS, SUB], ARR, ARRIVAL_CHUNK
        step_chunk = [k[0] // width for k, _ in steps]
    else:
        order, chunk, width = [POS, SUB], POS, CHUNK_ROWS
        step_chunk = [k[2] // width for k, _ in steps]
    # Max of the steps in the chunks before each chunk: known on the driver.
    last: dict[int, int] = {}
    for c, (_, v) in zip(step_chunk, steps):
        last[c] = max(last.get(c, NEG_INF), v)
    prefix: dict[int, int] = {}
    acc = NEG_INF
    for c in sorted(last):
        prefix[c + 1] = max(acc, last[c])  # holds from chunk c+1 on, until the next chunk with steps
        acc = prefix[c + 1]
    unioned = unioned.withColumn(CHUNK, F.floor(F.col(chunk) / width))
    before_chunk = _step_prefix(sorted(prefix.items()))
    w = Window.partitionBy(CHUNK).orderBy(*order).rowsBetween(Window.unboundedPreceding, -1)
    running = F.greatest(before_chunk, F.coalesce(F.max("__v").over(w), F.lit(NEG_INF)))
    result = unioned.withColumn("__cti", running).drop(CHUNK)
    return result.filter(F.col(SUB) == 0).drop("__v", DECL, SUB)


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

    outcome = events.select(POS, KIND, F.col("__status"), cti.alias("__c"), F.col("__adm_s"), F.col("__adm_e"))
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
        F.when(F.col("__start_pos").isNull(), F.lit(4))  # no start edge: bad input
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
        paired.select(POS, KIND, F.col("__status"), cti.alias("__c"), F.lit(None).cast("long").alias("__adm_s"), F.col("__adm_e"))
    )
    return _admitted(out, outcome, frame, cti_replay, has_policy)


def _admitted(out: DataFrame, outcome: DataFrame, frame: InputFrame, cti_replay: CtiReplay, has_policy: bool) -> Admitted:
    outcome = outcome.filter(F.col("__status") != 0)
    if frame.events is None:
        counted = frame.df.filter(F.col(KIND) != CTI).agg(F.count(F.lit(1)).alias("__c"))
        outcome = outcome.unionByName(
            counted.select(F.lit(-1).cast("long").alias(POS), F.lit(-1).alias(KIND), F.lit(RECEIVED).alias("__status"), F.col("__c"),
                           F.lit(None).cast("long").alias("__adm_s"), F.lit(None).cast("long").alias("__adm_e"))
        )
    return Admitted(out, outcome, frame, cti_replay, has_policy)


RECEIVED = 9
"""Status of the extra outcome row that carries a table's event count."""


def finish(admitted: Admitted, rows: Sequence[Any]) -> tuple[InputMetrics, list[tuple[str, int, Any, Rule, Action, int, Any]]]:
    """Metrics and rejections of one input from its collected outcome rows (or the error)."""
    frame, node = admitted.frame, admitted.frame.node
    odd = sorted((r for r in rows if r["__status"] != RECEIVED), key=lambda r: r[POS])
    for r in odd:
        if r["__status"] == 4:
            raise InputError(node.name, r[POS], _item(frame, r[POS]), "end edge without its start edge")
    if not admitted.has_policy:
        for r in odd:
            if r["__status"] in (1, 2):
                what = "the end edge ends" if r[KIND] == END else "the event starts"
                raise CtiViolationError(
                    node.name, r[POS], _item(frame, r[POS]),
                    f"{what} before the current CTI; this input has no AdvanceTimeSettings, "
                    "so a CTI violation is an error (give it settings with policy DROP or ADJUST)",
                )
    if frame.events is not None:
        received = frame.events
    else:
        received = sum(r["__c"] for r in rows if r["__status"] == RECEIVED)
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
        rejected.append((node.name, pos, _item(frame, pos), rule, action, c, admitted_as))
    return metrics, rejected


def _item(frame: InputFrame, pos: int) -> Any:
    if frame.items is not None:
        return frame.items[pos]
    row = frame.df.filter(F.col(POS) == pos).collect()[0]
    from tempo.spark.types import from_wire

    names = field_names(frame.node.payload_type)
    payload = from_wire(frame.node.payload_type, [row[n] for n in names], naive=False) if row[KIND] != CTI else None
    arrival = row[ARR]
    return item_of((arrival, row[KIND], row[S], row[E], payload, pos, None))
