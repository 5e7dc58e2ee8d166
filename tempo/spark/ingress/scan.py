"""The scan jobs (step 4): one pass over an input's narrow rows in input order, collecting
only the rows that matter; for an input with ordering settings, every verdict as columns."""

from __future__ import annotations


from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as st

from tempo.events import EventShape
from tempo.runtime.replay import Key
from tempo.runtime.ingress import CTI, END, HEARTBEAT, INTERVAL, POINT, START
from tempo.result import Rule
from tempo.rules import CHECK_ORDER, CTI_RULE_CODES, InputRule
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.spark.columns import Scope, column
from tempo.ticks import INF, NEG_INF
from tempo.spark.ingress.blocks import block_table
from tempo.spark.ingress.rows import (
    POS,
    KIND,
    ARR,
    BLOCK,
    ORDER,
    FILE,
    NULLF,
    SUB_MICRO,
    EVENT_KINDS,
    BAD_ROW,
    BAD_KIND,
    BAD_ARRIVAL,
    NO_ARRIVAL,
    BAD_START,
    NO_ORDER_ARRIVAL,
    NO_HEARTBEAT_ARRIVAL,
    UNKNOWN_KIND,
    NULL_START,
    NULL_END,
    NULL_FIELD,
    DROPPED,
    ADJUSTED,
    InputFrame,
    counted_kind,
    period_column,
    imports_ctis,
    has_ordering,
    tolerances,
    early_late,
    ordered_start,
)


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
    policy = frame.policy
    df = _imported_in_force(spark, frame, imported) if imports_ctis(frame) else frame.df.withColumn("__imp", F.lit(None).cast("long"))
    w = Window.partitionBy(BLOCK).orderBy(ORDER, FILE)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    kind, counted = F.col(KIND), counted_kind()
    period = period_column(frame)
    delay, generates = policy.delay, policy.generates
    # One window over the narrow rows: running aggregates within the block; the blocks
    # before come from the figures (a broadcast join after the window keeps its partitioning).
    none = F.lit(None).cast("long")
    rn = F.row_number().over(w)
    df = df.select(
        BLOCK,
        ORDER,
        FILE,
        KIND,
        S,
        E,
        ARR,
        NULLF,
        "__imp",
        rn.alias("__rn"),
        # Only the running aggregates the input needs: each costs the window a pass.
        (F.sum(counted.cast("long")).over(w.rowsBetween(Window.unboundedPreceding, 0)) if frame.kinds_vary else none).alias("__counted"),
        (F.max(period).over(before) if period is not None else none).alias("__period_before"),
        (F.max(ARR).over(before) if frame.has_arrival else none).alias("__arr_in_block"),
        # A generated CTI is some counted event's start minus the delay: the latest start
        # before a row bounds them all (a CTI row's time bounds itself).
        (F.max(F.when(counted, F.col(S))).over(before) - delay if generates else none).alias("__latest_before"),
        (F.max(F.when(kind == CTI, F.col(S))).over(before) if frame.kinds_vary else none).alias("__explicit_before"),
    ).join(block_table(spark, frame), BLOCK)
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
    bound = F.greatest(F.col("__p_bound"), F.col("__latest_before"), F.col("__explicit_before"), F.col("__imp"), F.lit(NEG_INF))
    df = df.select(
        ORDER,
        FILE,
        KIND,
        S,
        E,
        ARR,
        NULLF,
        bound.alias("__bound"),
        (F.col("__p_rows") + F.col("__rn") - 1).alias(POS),
        generated.alias("__g"),
        F.when(kind == CTI, F.col(S)).alias("__x"),
        F.greatest(F.col("__p_arrival"), F.col("__arr_in_block")).alias("__arr_before"),
    )
    bound = F.col("__bound")
    risk = (kind.isin(*EVENT_KINDS) & (F.col(S) < bound)) | ((kind == END) & (F.col(E) < bound))
    bad = _bad_row(frame)
    arrival = F.coalesce(F.col(ARR), F.col("__arr_before"), F.lit(NEG_INF)).alias(ARR)  # a missing arrival is the last one
    kept = df.select(
        POS, ORDER, FILE, KIND, S, E, arrival, "__g", "__x", F.coalesce(risk, F.lit(False)).alias("__risk"), bad.alias("__bad")
    )
    frame.collected = kept.filter(F.col("__g").isNotNull() | F.col("__x").isNotNull() | F.col("__risk") | (F.col("__bad") != 0)).collect()


def _bad_row(frame: InputFrame) -> Column:
    """Why a row breaks a rule (``BAD_*``), or 0; needs ``__arr_before``, the latest arrival
    before it in the input."""
    kind = F.col(KIND)
    shape_kinds = {EventShape.POINT: (POINT,), EventShape.INTERVAL: (INTERVAL,), EventShape.EDGE: (START, END)}[frame.node.shape]
    allowed = (*shape_kinds, CTI, HEARTBEAT)
    # Each rule's test and code, chained in the one order of the checks (CHECK_ORDER).
    tests: dict[InputRule, tuple[Column, Column]] = {
        InputRule.UNKNOWN_KIND: (kind.isNull(), F.lit(UNKNOWN_KIND)),
        InputRule.NULL_START: ((kind != HEARTBEAT) & F.col(S).isNull(), F.lit(NULL_START)),
        InputRule.NULL_END: (kind.isin(INTERVAL, END) & F.col(E).isNull(), F.lit(NULL_END)),
        InputRule.ROW_KIND: (~kind.isin(*allowed), F.lit(BAD_KIND)),
        InputRule.LIFETIME: (kind.isin(INTERVAL, END) & (F.col(E) <= F.col(S)), F.lit(BAD_ROW)),
        InputRule.START_AT_INFINITY: (~kind.isin(CTI, HEARTBEAT) & (F.col(S) >= INF), F.lit(BAD_START)),
        InputRule.SUB_MICROSECOND: (F.col(NULLF) >= SUB_MICRO, F.col(NULLF) + NULL_FIELD),  # its kind is in NULLF
        InputRule.NULL_FIELD: (~kind.isin(CTI, HEARTBEAT) & (F.col(NULLF) < SUB_MICRO), F.col(NULLF) + NULL_FIELD),
        InputRule.ORDERING_ARRIVAL: (F.lit(has_ordering(frame)) & F.col(ARR).isNull(), F.lit(NO_ORDER_ARRIVAL)),
        InputRule.HEARTBEAT_ARRIVAL: (
            (kind == HEARTBEAT) & (F.col(ARR).isNull() | F.lit(not frame.has_arrival)),
            F.lit(NO_HEARTBEAT_ARRIVAL),
        ),
        InputRule.IMPORT_ARRIVAL: (F.lit(frame.needs_arrival) & F.col(ARR).isNull(), F.lit(NO_ARRIVAL)),
        InputRule.ARRIVAL_ORDER: (F.col(ARR) < F.col("__arr_before"), F.lit(BAD_ARRIVAL)),
    }
    (first_test, first_code), *rest = [tests[rule] for rule in CHECK_ORDER if rule in tests]
    bad = F.when(first_test, first_code)  # one CASE: the first rule broken wins
    for test, code in rest:
        bad = bad.when(test, code)
    return bad.otherwise(F.lit(0))


# ASA's rules (``Ingress._process_ordered``) look like a sequential state machine, but each
# verdict depends on only two running figures over input order: the largest start that
# passed both arrival checks (per substream key) and the largest CTI row before the row.
# The clock term never decides a verdict: an event that passes the late check starts at or
# after its own arrival less the tolerance, so after any clock less the tolerance. So the
# verdicts are columns of one window; the driver gets only the rows that move time (for
# the exact CTIs and watermark delays of ``CtiReplay``), the rejections, and per key the
# count of its events.


def scan_ordered(spark: SparkSession, frame: InputFrame) -> None:
    """The one pass over the rows of an input with ordering settings: every verdict as
    columns (see above), collecting the rejections, the rows that move time, the rows
    breaking a rule and the first row of each substream (with its count of events)."""
    assert frame.df is not None and frame.blocks is not None
    node = frame.node
    out_of_order, late, early = tolerances(frame)
    adjust = frame.policy.adjust
    w = Window.partitionBy(BLOCK).orderBy(ORDER, FILE)
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    kind, start, end, arrival = F.col(KIND), F.col(S), F.col(E), F.col(ARR)
    event = kind.isin(POINT, INTERVAL)
    is_early, is_late = early_late(frame)
    none = F.lit(None).cast("long")
    key = column(node.over, Scope()) if node.over is not None else None
    df = frame.df.select(
        "*",
        ordered_start(frame).alias("__ordered"),
        is_early.alias("__early"),
        is_late.alias("__late"),
        (key if key is not None else F.lit(None)).alias("__key"),
    )
    df = df.select(
        "*",
        F.row_number().over(w).alias("__rn"),
        F.max(ARR).over(before).alias("__arr_in_block"),
        F.max(F.when(kind == CTI, start)).over(before).alias("__explicit_in_block"),
        (F.max("__ordered").over(before) if key is None else none).alias("__ordered_in_block"),
    ).join(block_table(spark, frame), BLOCK)
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
        F.when(F.col("__early"), F.lit(code[Rule.EARLY_ARRIVAL]))
        .when(out_of_order_now, F.lit(code[Rule.START_BEFORE_CTI]))
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
        POS,
        ORDER,
        FILE,
        KIND,
        S,
        E,
        ARR,
        _bad_row(frame).alias("__bad"),
        F.coalesce(status, F.lit(0)).alias("__status"),
        rule.alias("__rule"),
        bound.alias("__bound"),
        adm_s.alias("__adm_s"),
        adm_e.alias("__adm_e"),
        F.col("__late"),
        late_kept.alias("__late_kept"),
        candidate.alias("__c"),
        key_candidate.alias("__kc"),
        arrival_step.alias("__arr_step"),
        F.when(kind == CTI, start).alias("__x"),
        F.col("__key"),
        first_of_key.alias("__first"),
        key_events.alias("__key_events"),
    )
    frame.collected = kept.filter(
        (F.col("__bad") != 0)
        | (F.col("__status") != 0)
        | F.col("__c").isNotNull()
        | F.col("__arr_step")
        | F.col("__x").isNotNull()
        | F.col("__first")
        | F.col("__kc").isNotNull()
    ).collect()
