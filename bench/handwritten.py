"""W1-W7 written by hand in PySpark: the baseline tempo's Spark executor is measured against.

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
SESSION_GAP = 5 * US
COUNT_WINDOW = 100
HOLD = 3600 * US
"""W7: a reading holds until its key's next later reading, for at most an hour."""
MS = 1_000


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
    groups = df.groupBy("key", floor_div("event_time", TUMBLE).alias("w")).agg(F.count(F.lit(1)).alias("n"), F.sum("value").alias("s"))
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
    ev = spark.read.parquet(events).select("key", "event_time", "value", floor_div("event_time", REF_PERIOD).alias("bucket"))
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


def w5(spark: SparkSession, events: str) -> DataFrame:
    """Sessions per key with a 5 s gap: count, sum(value), start and end per session.

    Gaps and islands: in event_time order within a key, an event opens a session iff it is
    the key's first or lies 5 s or more after the one before it (the latest before it, as the
    order is by time), so two events exactly 5 s apart are in different sessions; a running
    sum of those openings numbers the sessions. A session is [first event, last event + 5 s).
    """
    df = spark.read.parquet(events).select("key", "event_time", "value")
    by_time = Window.partitionBy("key").orderBy("event_time")
    previous = F.lag("event_time").over(by_time)
    opens = F.when(previous.isNull() | (F.col("event_time") - previous >= SESSION_GAP), 1).otherwise(0)
    numbered = df.select("key", "event_time", "value", opens.alias("opens")).select(
        "key",
        "event_time",
        "value",
        F.sum("opens").over(by_time.rowsBetween(Window.unboundedPreceding, Window.currentRow)).alias("session"),
    )
    sessions = numbered.groupBy("key", "session").agg(
        F.count(F.lit(1)).alias("n"),
        F.sum("value").alias("s"),
        F.min("event_time").alias("start"),
        (F.max("event_time") + F.lit(SESSION_GAP)).alias("end"),
    )
    return _event_window_checksum(sessions, "sessions")


def w6(spark: SparkSession, events: str) -> DataFrame:
    """Tumbling count windows of 100 events per key, full windows only: count, sum(value),
    first start and last start + 1 µs per window.

    Events are numbered per key in tempo's order: by event_time, ties by the payload fields in
    declaration order (``Event(key, value)``: key, then value); window = (number - 1) div 100,
    and a key's trailing partial window (fewer than 100 events) is dropped.
    """
    df = spark.read.parquet(events).select("key", "event_time", "value")
    rank = F.row_number().over(Window.partitionBy("key").orderBy("event_time", "key", "value"))
    window = ((rank - 1) / F.lit(COUNT_WINDOW)).cast("long")  # exact: rank is far below 2**53
    numbered = df.select("key", "event_time", "value", window.alias("w"))
    windows = (
        numbered.groupBy("key", "w")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum("value").alias("s"),
            F.min("event_time").alias("start"),
            (F.max("event_time") + F.lit(1)).alias("end"),
        )
        .where(F.col("n") == COUNT_WINDOW)
    )
    return _event_window_checksum(windows, "windows")


def w7(spark: SparkSession, events: str, reference: str) -> DataFrame:
    """The signal (each key's readings, a value holding until the key's next later reading,
    for at most an hour) joined on key with the reference rows it overlaps: count,
    Σ value·ref_value, Σ overlap (µs) and Σ value·floor(overlap / 1 ms).

    A reading at t holds [t, min(t + 1 h, next)), ``next`` the key's earliest reading after t:
    ``lead(event_time)`` in time order, except that readings at the same time do not clip each
    other. Within such a tie only the last row's ``lead`` is later; the others see their own
    time. So each (key, event_time) group takes the least ``lead`` that is later than its time
    (null for the key's last time; ``least`` skips nulls). That second window is clustered and
    sorted by what the first one already is: no new exchange or sort.

    The join is W4's bucket equi-join: the reference row valid at a time is the one of its
    600 s bucket (``run.check_data`` checks the data for it), so each piece of the signal is
    exploded into the buckets it touches (one, for all pieces but those that cross a bucket
    boundary and each key's last, held an hour) and joined on (key, bucket), the overlap test
    kept as a residual filter. The output lasts the overlap [max(t, valid_from), min(end, valid_to)).
    """
    df = spark.read.parquet(events).select("key", "event_time", "value")
    following = F.lead("event_time").over(Window.partitionBy("key").orderBy("event_time"))
    later = F.when(F.col("following") > F.col("event_time"), F.col("following"))
    tie = Window.partitionBy("key", "event_time")
    signal = df.select("key", "event_time", "value", following.alias("following")).select(
        "key",
        "value",
        F.col("event_time").alias("start"),
        F.least(F.col("event_time") + F.lit(HOLD), F.min(later).over(tie)).alias("end"),
    )
    pieces = signal.select(
        "key",
        "start",
        "end",
        "value",
        F.explode(F.sequence(floor_div("start", REF_PERIOD), floor_div("(`end` - 1)", REF_PERIOD))).alias("bucket"),
    )
    ref = spark.read.parquet(reference).select(
        "key", "valid_from", "valid_to", "ref_value", floor_div("valid_from", REF_PERIOD).alias("bucket")
    )
    joined = pieces.join(ref, on=["key", "bucket"], how="inner").where(
        (F.col("valid_from") < F.col("end")) & (F.col("start") < F.col("valid_to"))
    )
    overlap = F.least("end", "valid_to") - F.greatest("start", "valid_from")
    return joined.select("value", "ref_value", overlap.alias("overlap")).agg(
        F.count(F.lit(1)).alias("matched"),
        F.sum(F.col("value") * F.col("ref_value")).alias("sum_value_x_ref"),
        F.sum("overlap").alias("span"),
        F.sum(F.col("value") * F.expr(f"overlap div {MS}")).alias("sum_value_x_ms"),
    )


def _event_window_checksum(windows: DataFrame, name: str) -> DataFrame:
    """W5/W6's checksum of (key, n, s, start, end) rows, times in µs since 2024-01-01."""
    return windows.agg(
        F.count(F.lit(1)).alias(name),
        F.sum("n").alias("count"),
        F.sum("s").alias("sum"),
        F.sum(F.col("s") * F.col("key")).alias("sum_x_key"),
        F.sum(F.col("s") * floor_div("start", US)).alias("sum_x_start"),
        F.sum(F.col("end") - F.col("start")).alias("span"),
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
    if workload == "W5":
        return w5(spark, events)
    if workload == "W6":
        return w6(spark, events)
    if workload == "W7":
        return w7(spark, events, reference)
    raise ValueError(f"unknown workload {workload!r}")


def run(spark: SparkSession, workload: str, events: str, reference: str) -> Checksum:
    """Read, compute and bring the checksum into the driver."""
    return checksum_frame(spark, workload, events, reference).collect()[0].asDict()
