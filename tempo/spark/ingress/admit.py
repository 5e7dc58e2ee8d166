"""The admitted events of an input: rows as read, less the verdicts, with end edges paired
with their start edges by rank."""

from __future__ import annotations


import attrs
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from tempo.events import EventShape
from tempo.expr.schema import field_names
from tempo.runtime.replay import CtiReplay
from tempo.runtime.ingress import END, START
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.spark.columns import quoted
from tempo.ticks import INF
from tempo.spark.ingress.local_scan import count_if_clean
from tempo.spark.ingress.rows import KIND, ORDER, FILE, EVENT_KINDS, DROPPED, ADJUSTED, InputFrame, breaks_a_rule
from tempo.spark.ingress.verdicts import Verdicts, received_columns, decide


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
    assert frame.in_spark
    kind = F.col(KIND)
    if frame.static:
        received = count_if_clean(frame)
        if received is not None:  # the driver proved every row good: the plan reads only what the query needs
            return Admitted(frame.as_read(), None, frame, None, received)
        # A row that breaks a rule fails the query where it is read; run() and metrics()
        # check first and name it (see ``finish``).
        bad = breaks_a_rule(node)
        message = f"tempo: input {node.name!r} has a row with a null time or payload value, a start at infinity or an end not after its start (SparkExecutor.run names it)"
        start = F.when(bad, F.raise_error(F.lit(message)).cast("long")).otherwise(F.col(S))
        payload = [F.col(quoted(n)) for n in field_names(node.payload_type)]
        assert frame.df is not None
        out = frame.df.select(start.alias(S), F.least(F.col(E), F.lit(INF)).alias(E), *payload)
        return Admitted(out, None, frame, None)
    verdicts = decide(spark, frame, cti_replay)
    if not verdicts.events and node.shape is not EventShape.EDGE:  # every event admitted as read
        return Admitted(frame.as_read(), None, frame, verdicts)
    df = frame.df
    assert df is not None
    payload = [F.col(quoted(n)) for n in field_names(node.payload_type)]
    events = df.filter(kind.isin(*EVENT_KINDS))
    if verdicts.events:
        schema = f"{ORDER} long, {FILE} long, __status int, __adm_s long, __adm_e long"
        table = spark.createDataFrame([(o, f, status, s, e) for o, f, status, _, s, e in verdicts.events], schema)
        events = events.join(F.broadcast(table), [ORDER, FILE], "left")
        events = events.withColumn("__status", F.coalesce(F.col("__status"), F.lit(0)))
        events = events.withColumn("__adm_s", F.coalesce(F.col("__adm_s"), F.col(S))).withColumn(
            "__adm_e", F.coalesce(F.col("__adm_e"), F.col(E))
        )
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
        *[c.alias(f"__s_{i}") for i, c in enumerate(key_cols)],
        F.col("__rank").alias("__s_rank"),
        F.col("__status").alias("__start_status"),
        F.col("__adm_s").alias("__start_adm"),
        F.col(ORDER).alias("__start_o"),
        F.col(FILE).alias("__start_f"),
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
    adm_end = F.when(F.col("__status") == ADJUSTED, F.greatest(F.col("__cti"), F.col("__start_adm") + 1)).otherwise(
        F.greatest(F.col(E), F.col("__start_adm") + 1)
    )
    paired = paired.withColumn("__adm_e", adm_end)
    closing = paired.filter(F.col("__status").isin(0, ADJUSTED) & (F.col("__adm_e") < INF)).select(
        F.col("__start_o").alias("__close_o"), F.col("__start_f").alias("__close_f"), F.col("__adm_e").alias("__close_e")
    )
    admitted = events.filter(F.col("__status") != DROPPED)
    admitted = admitted.join(closing, (admitted[ORDER] == closing["__close_o"]) & (admitted[FILE] == closing["__close_f"]), "left")
    final_end = F.when(kind == START, F.coalesce(F.col("__close_e"), F.lit(INF))).otherwise(F.col("__adm_e"))
    out = admitted.select(F.col("__adm_s").alias(S), F.least(final_end, F.lit(INF)).alias(E), *payload)
    outcome = paired.filter(F.col("__status") != 0).select(ORDER, FILE, F.col("__status"), F.col("__adm_e"), *received_columns(node))
    return Admitted(out, outcome, frame, verdicts)
