"""W1-W4 written by hand in PySpark: the baseline tempo's Spark executor is measured against.

All times are int64 microseconds since 2024-01-01T00:00:00Z and stay integers throughout:
window indexes are exact integer floors (``pmod`` handles the negative early event times).
``checksum_frame`` builds, for one workload, the lazy one-row DataFrame of its checksum
(reading the Parquet files included); ``run`` collects it, which is exactly what is timed.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from bench.checksums import Checksum

US = 1_000_000
W1_FREQUENCY = 1000
W1_DELAY = 5 * US
TUMBLE = 60 * US
HOP_SIZE, HOP = 300 * US, 60 * US
REF_PERIOD = 600 * US
"""Reference rows start every 600 s of event time: valid_from is a multiple of it."""


def floor_div(column: str, d: int) -> Column:
    """``floor(column / d)`` in exact integer arithmetic (``div`` alone truncates negatives)."""
    return F.expr(f"({column} - pmod({column}, {d})) div {d}")


def w1(spark: SparkSession, events: str) -> DataFrame:
    """Ingress: a CTI after every 1000th event (seq 999, 1999, ...) at its time - 5 s; CTIs
    never go back (running max); an event is dropped iff its start < the CTI in force.

    The CTI in force for an event is the max over the triggering events before it. Including
    the event itself changes nothing (its own candidate is 5 s before its start), so the frame
    ends at the current row. ``Window.orderBy`` without partitioning funnels every row through
    a single partition (``Exchange SinglePartition``): the obvious formulation, and the peers'
    baseline.
    """
    df = spark.read.parquet(events).select("seq", "event_time")
    frame = Window.orderBy("seq").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    candidate = F.when(F.col("seq") % W1_FREQUENCY == W1_FREQUENCY - 1, F.col("event_time") - W1_DELAY)
    dropped = F.when(F.col("event_time") < F.max(candidate).over(frame), 1).otherwise(0)
    counts = df.select(dropped.alias("d")).agg(F.count(F.lit(1)).alias("n"), F.sum("d").alias("dropped"))
    return counts.select((F.col("n") - F.col("dropped")).alias("kept"), "dropped")


def w2(spark: SparkSession, events: str) -> DataFrame:
    """Tumbling 60 s windows per key: count and sum(value) per non-empty (key, window)."""
    df = spark.read.parquet(events).select("key", "event_time", "value")
    groups = df.groupBy("key", floor_div("event_time", TUMBLE).alias("w")).agg(
        F.count(F.lit(1)).alias("n"), F.sum("value").alias("s")
    )
    return groups.agg(
        F.count(F.lit(1)).alias("groups"),
        F.sum("n").alias("count"),
        F.sum("s").alias("sum"),
        F.sum(F.col("s") * F.col("key")).alias("sum_x_key"),
        F.sum(F.col("s") * F.col("w")).alias("sum_x_window"),
    )


def w3(spark: SparkSession, events: str) -> DataFrame:
    """Hopping windows of 300 s every 60 s per key: sum(value) per non-empty (key, window).

    An event at t lies in the 5 windows starting at 60 s * (floor(t / 60 s) - 4 .. floor(t / 60 s)):
    explode them, then group (Spark's partial aggregation runs before the shuffle).
    """
    df = spark.read.parquet(events).select("key", "event_time", "value")
    last = floor_div("event_time", HOP)
    first = last - (HOP_SIZE // HOP - 1)
    exploded = df.select("key", "value", F.explode(F.sequence(first, last)).alias("w"))
    groups = exploded.groupBy("key", "w").agg(F.sum("value").alias("s"))
    return groups.agg(
        F.count(F.lit(1)).alias("groups"),
        F.sum("s").alias("sum"),
        F.sum(F.col("s") * F.col("key")).alias("sum_x_key"),
        F.sum(F.col("s") * F.col("w")).alias("sum_x_window"),
    )


def w4(spark: SparkSession, events: str, reference: str) -> DataFrame:
    """Reference join on key where valid_from <= event_time < valid_to: count, Σ value·ref_value.

    An event is a point [t, t + 1 µs): it overlaps the reference lifetime [valid_from, valid_to)
    iff valid_from <= t < valid_to. valid_from is a multiple of 600 s and every reference row but
    the last of each key lasts exactly 600 s, so the matching row, if any, is the one with
    floor(valid_from / 600 s) == floor(t / 600 s): an equi-join on (key, bucket) (no range join),
    with the range test kept as a residual filter. The last row of each key (valid_to = 2**62)
    is found the same way as long as no event lies 600 s or more after the last valid_from;
    ``run.check_data`` verifies both assumptions on the data before anything is timed.
    """
    ev = spark.read.parquet(events).select(
        "key", "event_time", "value", floor_div("event_time", REF_PERIOD).alias("bucket")
    )
    ref = spark.read.parquet(reference).select(
        "key", "valid_from", "valid_to", "ref_value", floor_div("valid_from", REF_PERIOD).alias("bucket")
    )
    joined = ev.join(ref, on=["key", "bucket"], how="inner").where(
        (F.col("valid_from") <= F.col("event_time")) & (F.col("event_time") < F.col("valid_to"))
    )
    return joined.agg(
        F.count(F.lit(1)).alias("matched"),
        F.sum(F.col("value") * F.col("ref_value")).alias("sum_value_x_ref"),
    )


def checksum_frame(spark: SparkSession, workload: str, events: str, reference: str) -> DataFrame:
    """The lazy one-row checksum DataFrame of ``workload`` (use ``.explain()`` on it for the plan)."""
    if workload == "W1":
        return w1(spark, events)
    if workload == "W2":
        return w2(spark, events)
    if workload == "W3":
        return w3(spark, events)
    if workload == "W4":
        return w4(spark, events, reference)
    raise ValueError(f"unknown workload {workload!r}")


def run(spark: SparkSession, workload: str, events: str, reference: str) -> Checksum:
    """Read, compute and bring the checksum into the driver."""
    return checksum_frame(spark, workload, events, reference).collect()[0].asDict()
