"""What Spark's own watermark does with a late row, and what tempo's CTIs do with it (issue 12;
docs/streaming.md, "tempo's CTIs and Spark's watermark").

Three rows arrive in this order: event times 100 s, 101 s and 10 s. A hand-written Structured
Streaming query (``withWatermark("ts", "5 seconds")``, 10 s tumbling window counts, append
mode, memory sink) reads them from a Parquet directory, one file per micro-batch, so the test
decides where the batch boundaries fall: all in one batch, two batches cut either way, or one
row per batch. Each batch is run with ``processAllAvailable()`` before the next file is written.
Whether Spark keeps the late row depends on the cutting, and on whether Spark runs a batch
without data after a batch that moved the watermark (``spark.sql.streaming.noDataMicroBatches.enabled``,
on by default): each case below states, per batch, the rows read, the watermark the batch
reports, the rows its aggregation dropped as late and the windows it keeps in state.

The same three rows as a tempo query (points; a CTI after every event, 5 s behind it; DROP;
10 s tumbling counts) give one answer: the row at 10 s is always dropped, because the CTI at
96 s (101 s - 5 s) comes before it in arrival order, and it is listed as a rejection rather
than only counted. The live engine fed the same three cuttings gives that answer every time.

At the boundary, Spark holds rows against a watermark in whole milliseconds and drops a row
exactly at it; tempo holds events against a CTI in microseconds (ticks) and keeps an event
exactly at it. A row-level deduplication query shows both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest

from tempo import AdvanceTimeGenerationSettings, AdvanceTimePolicy, AdvanceTimeSettings, EventShape, InMemoryExecutor, Point, Stream
from tempo.events import Cti, Interval
from tempo.plan.query import Query
from tempo.result import Action, Rejection, Rule
from tempo.runtime.engine import prepared_inputs
from tempo.runtime.ingress import TimestampMode
from tempo.runtime.live import LiveEngine
from tempo.ticks import INFINITY

ARRIVALS = (100, 101, 10)
"""Event times in seconds since the epoch, in arrival order: the last row is 86 s late."""

CUTTINGS: dict[str, list[list[int]]] = {
    "one-batch": [[100, 101, 10]],
    "late-row-alone": [[100, 101], [10]],
    "late-row-with-101": [[100], [101, 10]],
    "three-batches": [[100], [101], [10]],
}
"""The arrivals cut into micro-batches: the row order is the same in every cutting."""


@attrs.frozen
class Batch:
    """One micro-batch as Spark's progress reports it."""

    rows: int  # numInputRows: 0 for a batch Spark ran without data
    watermark_ms: int  # eventTime.watermark: what the batch evicted state against
    dropped: int  # the stateful operator's numRowsDroppedByWatermark
    state_rows: int  # its numRowsTotal: windows (or keys) still kept after the batch


@attrs.frozen
class SparkRun:
    batches: list[Batch]
    rows: list[tuple[Any, ...]]  # what the sink received, sorted


def _utc(seconds: float) -> datetime:
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=seconds)


def _ms(text: str) -> int:
    """Spark's ISO-8601 watermark text in milliseconds since the epoch."""
    return (datetime.fromisoformat(text.replace("Z", "+00:00")) - _utc(0)) // timedelta(milliseconds=1)


def _run_spark(
    spark: Any,
    directory: Path,
    cutting: list[list[datetime]],
    no_data_batches: bool,
    name: str,
    stateful: Callable[[Any], Any],
    read: Callable[[Any], Any],
) -> SparkRun:
    """The streaming query ``stateful(rows)`` over ``cutting``, one Parquet file (column ``ts``)
    per micro-batch, appending to a memory sink; ``read`` selects the sink's columns to compare
    (times as numbers: collected timestamps would be in the Python process's time zone)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import types as T

    source = directory / "in"
    source.mkdir()
    frame = spark.readStream.schema(T.StructType([T.StructField("ts", T.TimestampType())])).parquet(str(source))
    conf = "spark.sql.streaming.noDataMicroBatches.enabled"
    # A query copies the session's configuration when it starts.
    spark.conf.set(conf, str(no_data_batches).lower())
    try:
        query = (
            stateful(frame)
            .writeStream.outputMode("append")
            .format("memory")
            .queryName(name)
            .option("checkpointLocation", str(directory / "checkpoint"))
            .start()
        )
    finally:
        spark.conf.unset(conf)
    try:
        for number, batch in enumerate(cutting):
            table = pa.table({"ts": pa.array(batch, pa.timestamp("us", "UTC"))})
            # The file source skips names starting with "_": the renamed file appears whole.
            hidden, visible = source / f"_{number}.parquet", source / f"{number}.parquet"
            pq.write_table(table, hidden)
            os.rename(hidden, visible)
            query.processAllAvailable()
        by_id: dict[int, Any] = {}
        for progress in query.recentProgress:
            if progress.stateOperators:  # not an idle trigger's report
                by_id[progress.batchId] = progress
        batches = []
        for batch_id in sorted(by_id):
            progress = by_id[batch_id]
            (operator,) = progress.stateOperators
            batches.append(
                Batch(
                    progress.numInputRows,
                    _ms(progress.eventTime["watermark"]),
                    operator.numRowsDroppedByWatermark,
                    operator.numRowsTotal,
                )
            )
        rows = sorted(tuple(r) for r in read(spark.table(name)).collect())
    finally:
        query.stop()
        spark.catalog.dropTempView(name)
    return SparkRun(batches, rows)


def _window_counts(frame: Any) -> Any:
    from pyspark.sql import functions as F

    return frame.withWatermark("ts", "5 seconds").groupBy(F.window("ts", "10 seconds")).count()


def _window_count_rows(sink: Any) -> Any:
    """(start s, end s, count) of each window count."""
    from pyspark.sql import functions as F

    return sink.select(F.unix_seconds("window.start"), F.unix_seconds("window.end"), "count")


# What Spark does, per cutting, with no-data batches (Spark's default). After a batch that
# moved the watermark Spark runs one more batch without data, so the next file's rows meet
# a watermark already at 95 s or 96 s: the late row is kept only when it comes in the same
# batch as the row at 100 s, before anything has moved the watermark past its window.
WITH_NO_DATA_BATCHES: dict[str, SparkRun] = {
    # Batch 0 reads all three rows against no watermark: [10, 20) and [100, 110) open. Its
    # max event time 101 s sets the watermark to 96 s; batch 1, without data, closes [10, 20).
    "one-batch": SparkRun([Batch(3, 0, 0, 2), Batch(0, 96_000, 0, 1)], [(10, 20, 1)]),
    # Batch 1 (no data) moves the watermark to 96 s; batch 2 drops the row at 10 s.
    "late-row-alone": SparkRun([Batch(2, 0, 0, 1), Batch(0, 96_000, 0, 1), Batch(1, 96_000, 1, 1)], []),
    # The watermark is 95 s (from 100 s alone) when the late row comes with 101 s: dropped.
    "late-row-with-101": SparkRun([Batch(1, 0, 0, 1), Batch(0, 95_000, 0, 1), Batch(2, 95_000, 1, 1), Batch(0, 96_000, 0, 1)], []),
    "three-batches": SparkRun(
        [Batch(1, 0, 0, 1), Batch(0, 95_000, 0, 1), Batch(1, 95_000, 0, 1), Batch(0, 96_000, 0, 1), Batch(1, 96_000, 1, 1)], []
    ),
}

# Without no-data batches a batch's late rows are held against the previous batch's
# watermark (the reported watermark is the one the batch evicts against): the late row
# survives one batch boundary and is dropped only after two.
WITHOUT_NO_DATA_BATCHES: dict[str, SparkRun] = {
    # Kept, but [10, 20) is never emitted: no later batch runs to evict it.
    "one-batch": SparkRun([Batch(3, 0, 0, 2)], []),
    # Batch 1 holds the late row against batch 0's watermark (none): kept, then its window
    # ends before batch 1's own watermark (96 s) and is emitted at once.
    "late-row-alone": SparkRun([Batch(2, 0, 0, 1), Batch(1, 96_000, 0, 1)], [(10, 20, 1)]),
    "late-row-with-101": SparkRun([Batch(1, 0, 0, 1), Batch(2, 95_000, 0, 1)], [(10, 20, 1)]),
    # Batch 2 holds it against batch 1's watermark, 95 s: the window [10, 20) ends at or
    # before it, so the row is dropped.
    "three-batches": SparkRun([Batch(1, 0, 0, 1), Batch(1, 95_000, 0, 1), Batch(1, 96_000, 1, 1)], []),
}


@pytest.mark.spark
@pytest.mark.parametrize("no_data_batches", [True, False], ids=["no-data-batches", "data-batches-only"])
@pytest.mark.parametrize("cutting", list(CUTTINGS))
def test_spark_keeps_or_drops_the_late_row_depending_on_the_batches(
    spark_session: Any, tmp_path: Path, cutting: str, no_data_batches: bool
) -> None:
    expected = (WITH_NO_DATA_BATCHES if no_data_batches else WITHOUT_NO_DATA_BATCHES)[cutting]
    name = f"watermark_{cutting.replace('-', '_')}_{int(no_data_batches)}"
    batches = [[_utc(s) for s in batch] for batch in CUTTINGS[cutting]]
    assert _run_spark(spark_session, tmp_path, batches, no_data_batches, name, _window_counts, _window_count_rows) == expected


def test_the_cuttings_keep_the_arrival_order() -> None:
    for batches in CUTTINGS.values():
        assert tuple(s for batch in batches for s in batch) == ARRIVALS


# ---- the same rows in tempo ----------------------------------------------------------------


@attrs.frozen
class Reading:
    seconds: int


@attrs.frozen
class Count:
    n: int


ITEMS = [Point(_utc(s), Reading(s)) for s in ARRIVALS]

# A CTI after every event at its start minus 5 s, as the watermark delay; late events dropped.
# The flush at the end releases the window still open, which Spark's run never emits.
SETTINGS = AdvanceTimeSettings(
    AdvanceTimeGenerationSettings(1, delay=timedelta(seconds=5), advance_to_infinity_on_shutdown=True),
    policy=AdvanceTimePolicy.DROP,
)


def _counts(items: list[Point[Reading]]) -> Stream[Count]:
    readings = Stream.create("readings", items, EventShape.POINT, SETTINGS)
    return readings.tumbling(timedelta(seconds=10)).aggregate(lambda w: Count(n=w.count()))


# Item by item: P(100) is checked against no CTI and generates CTI 95; P(101) against 95,
# generating 96; P(10) against 96: 10 < 96 breaks the CTI rule, so it is dropped, and the CTI
# it generates (5) is behind 96 and ignored. The window operator pulls CTI 95 back to 90, the
# start of the earliest window not yet complete ([90, 100)), and does not forward 96 (also
# 90). The flush at infinity emits [100, 110) with its two points.
EXPECTED_RAW = [Cti(_utc(90)), Interval(_utc(100), _utc(110), Count(2)), Cti(INFINITY)]
EXPECTED_REJECTIONS = [Rejection("readings", 2, Point(_utc(10), Reading(10)), Rule.START_BEFORE_CTI, Action.DROPPED, _utc(96))]


def test_tempo_drops_the_late_row_by_the_cti_before_it() -> None:
    result = InMemoryExecutor().run(_counts(ITEMS))
    assert result.raw == EXPECTED_RAW
    assert result.rejected == EXPECTED_REJECTIONS
    metrics = result.metrics["readings"]
    assert (metrics.received, metrics.admitted, metrics.dropped) == (3, 2, 1)
    assert (metrics.ctis_generated, metrics.ctis_ignored) == (3, 1)  # 95, 96 and the flush; 5


def _live_batches(batches: list[list[int]]) -> Iterator[tuple[list[Any], list[Rejection]]]:
    """The query run by the live engine a micro-batch at a time: what each batch released,
    then what the end of the input released."""
    query = Query.build(_counts(ITEMS).node)
    mode = TimestampMode()
    (prepared,) = prepared_inputs(query, mode)
    engine = LiveEngine(query, mode)
    for batch in batches:
        engine.push(0, [next(prepared) for _ in batch])
        engine.run()
        out = engine.take()
        yield out.items, out.rejections
    assert next(prepared, None) is None
    engine.finish()
    out = engine.take()
    yield out.items, out.rejections


@pytest.mark.parametrize("cutting", list(CUTTINGS))
def test_tempo_gives_one_answer_whatever_the_batches(cutting: str) -> None:
    released = list(_live_batches(CUTTINGS[cutting]))
    assert [item for items, _ in released for item in items] == EXPECTED_RAW
    assert [r for _, rejections in released for r in rejections] == EXPECTED_REJECTIONS
    # The row at 10 s is rejected in the batch that brings it, never later.
    assert [len(rejections) for _, rejections in released] == [0] * (len(CUTTINGS[cutting]) - 1) + [1, 0]


# ---- the boundary ------------------------------------------------------------------------


# Where the line falls. The first row at 100.000900 s sets the watermark to 95 s: Spark keeps
# it in whole milliseconds (100 000 ms - 5 000 ms), while rows keep their microseconds, and a
# row exactly at the watermark is late. tempo's CTI keeps the microseconds (95.000900 s) and
# only a start before it is late. A deduplication by ``ts`` holds each row, not its window,
# against the watermark. Per late row (microseconds after 95 s): (Spark drops it, tempo does).
EDGE_LATE_ROWS = {0: (True, True), 500: (False, True), 900: (False, False)}
EDGE_FIRST_ROW = _utc(100) + timedelta(microseconds=900)


def _deduplicated(frame: Any) -> Any:
    return frame.withWatermark("ts", "5 seconds").dropDuplicates(["ts"])


def _micros(sink: Any) -> Any:
    from pyspark.sql import functions as F

    return sink.select(F.unix_micros("ts"))


def _us(t: datetime) -> int:
    return (t - _utc(0)) // timedelta(microseconds=1)


@pytest.mark.spark
@pytest.mark.parametrize("late_us", list(EDGE_LATE_ROWS))
def test_spark_holds_rows_against_a_watermark_in_whole_milliseconds(spark_session: Any, tmp_path: Path, late_us: int) -> None:
    late_row = _utc(95) + timedelta(microseconds=late_us)
    dropped = EDGE_LATE_ROWS[late_us][0]
    run = _run_spark(spark_session, tmp_path, [[EDGE_FIRST_ROW], [late_row]], True, f"edge_{late_us}", _deduplicated, _micros)
    # Batch 1 runs without data to move the watermark; batch 2 holds the late row against it.
    assert run.batches == [Batch(1, 0, 0, 1), Batch(0, 95_000, 0, 1), Batch(1, 95_000, int(dropped), 1 if dropped else 2)]
    assert run.rows == [(_us(t),) for t in ([EDGE_FIRST_ROW] if dropped else [late_row, EDGE_FIRST_ROW])]


@pytest.mark.parametrize("late_us", list(EDGE_LATE_ROWS))
def test_tempo_holds_events_against_a_cti_in_ticks(late_us: int) -> None:
    late_row = _utc(95) + timedelta(microseconds=late_us)
    readings = Stream.create("readings", [Point(EDGE_FIRST_ROW, Reading(100)), Point(late_row, Reading(95))], EventShape.POINT, SETTINGS)
    result = InMemoryExecutor().run(readings)
    cti = EDGE_FIRST_ROW - timedelta(seconds=5)
    expected = [Rejection("readings", 1, Point(late_row, Reading(95)), Rule.START_BEFORE_CTI, Action.DROPPED, cti)]
    assert result.rejected == (expected if EDGE_LATE_ROWS[late_us][1] else [])


# A windowed aggregation holds the end of the row's window against the watermark, not the row:
# (first row, late row) -> (expected batches, dropped).
WINDOW_EDGES = {
    # Watermark 95 s: the row at 94 s is older, but its window [90, 100) ends after 95 s: kept.
    "window-open": ((100, 94), [Batch(1, 0, 0, 1), Batch(0, 95_000, 0, 1), Batch(1, 95_000, 0, 2)]),
    # Watermark 100 s: the row at 95 s is in [90, 100), which ends at the watermark: dropped.
    "window-ends-at-watermark": ((105, 95), [Batch(1, 0, 0, 1), Batch(0, 100_000, 0, 1), Batch(1, 100_000, 1, 1)]),
}


@pytest.mark.spark
@pytest.mark.parametrize("case", list(WINDOW_EDGES))
def test_spark_holds_a_window_count_by_the_end_of_the_window(spark_session: Any, tmp_path: Path, case: str) -> None:
    (first, late), expected = WINDOW_EDGES[case]
    name = f"edge_{case.replace('-', '_')}"
    run = _run_spark(spark_session, tmp_path, [[_utc(first)], [_utc(late)]], True, name, _window_counts, _window_count_rows)
    assert run == SparkRun(expected, [])  # no window has ended by the watermark yet
