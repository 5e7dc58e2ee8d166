"""The keyed window's ``transformWithState`` processor (tempo/spark/streaming/keyed.py), run by
pyspark's ``TwsTester`` (its state and event-time timers in memory, the watermark set by hand
as Spark sets it), releases what the window operator over all keys releases, and each
micro-batch only what CTIs up to its watermark release.

The random sequences are test_keyed_operator.py's (without the CTI at infinity, which the
watermark cannot carry to keys without rows: docs/streaming.md), moved into 2023. Batch by
batch, each key's rows go to ``handleInputRows`` with the watermark Spark would have (the
greatest CTI of the batches before, less the delay), which then also fires the timers due;
after the last batch the watermark moves once more, as in Spark's batch without data.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo.plan.windows import WindowTimestamp
from tempo.runtime.keyed import Cti, End, Insert, KeyedResult
from tempo.ticks import INF
from tests.test_keyed_operator import SECOND, Op, Stats, _reference, _Stamped, _stats_node, _window_node, feeds

pytest.importorskip("pyspark.sql.streaming.tws_tester")

BASE = 1_700_000_000 * SECOND
"""2023-11-14: the sequences' times moved to where Spark's watermark carries them."""


def _moved(ops: list[Op]) -> list[Op]:
    out: list[Op] = []
    for key, item in ops:
        if isinstance(item, Cti):
            if item.t >= INF:
                continue
            out.append((key, Cti(item.t + BASE)))
        elif isinstance(item, Insert):
            out.append((key, Insert(item.eid, item.start + BASE, None if item.end is None else item.end + BASE, item.payload)))
        else:
            out.append((key, End(item.eid, item.end + BASE)))
    return out


def _row(position: int, key: int, item: Insert | End, cti: int) -> Any:
    from pyspark.sql import Row

    from tempo.spark.streaming.keyed import BATCH, CTI, EID, END, END_EDGE, INSERT, ITEM, POSITION, START

    if isinstance(item, Insert):
        fields = {ITEM: INSERT, START: item.start, "key": item.payload.key, "value": item.payload.value}
    else:
        fields = {ITEM: END_EDGE, START: 0, "key": key, "value": None}  # an end's START: its event's stage batch
    return Row(**{POSITION: position, EID: item.eid, END: item.end, CTI: cti, BATCH: 0, **fields})


def _results(rows: list[Any]) -> list[KeyedResult]:
    """The results among the processor's rows (not the CTI lane's markers)."""
    from tempo.spark.streaming.keyed import RESULT, read_result

    return [
        read_result(RESULT, r.tempo_released_by, r.tempo_start, r.tempo_end, r.tempo_rank, Stats(r.key, r.n, r.total, r.low))
        for r in rows
        if r.tempo_kind == RESULT
    ]


def _batches(tester: Any, ops: list[Op], cuts: list[int]) -> Iterator[tuple[int, int, list[Any]]]:
    """Run ``ops`` cut at ``cuts`` through ``tester`` as Spark would, batch by batch: each
    batch's rows per key (two buckets: keys share them) with the watermark Spark would have
    (the greatest CTI of the batches before, less the delay), which fires the timers due, and
    after the last the batch without data that moves the watermark once more. For each batch,
    the CTIs of the watermark before it and of its own, and the processor's rows."""
    from tempo.spark.streaming.keyed import EVENT_LANE, cti_of_watermark, timer_ms

    cti = BASE  # the CTI in force: the sequences' first CTI is at their time 0
    latest = cti
    begin = 0
    watermark = 0  # Spark's, before any batch
    for cut in [*cuts, len(ops), None]:
        before = cti_of_watermark(watermark)
        rows: list[Any] = []
        if timer_ms(latest) > watermark:
            watermark = timer_ms(latest)
            rows += tester.setWatermark(watermark)
        if cut is None:  # the batch without data
            yield before, cti_of_watermark(watermark), rows
            return
        per_bucket: dict[int, list[Any]] = defaultdict(list)
        for position, (key, item) in enumerate(ops[begin:cut], start=begin):
            if isinstance(item, Cti):
                cti = max(cti, item.t)
            else:
                per_bucket[key % 2].append(_row(position, key, item, cti))
        begin = max(begin, cut)
        for bucket, bucket_rows in per_bucket.items():
            rows += tester.test((EVENT_LANE, bucket), bucket_rows)
        yield before, cti_of_watermark(watermark), rows
        latest = cti


def _released_by(expected: list[KeyedResult]) -> dict[tuple[Any, ...], int]:
    """Each result of the operator over all keys by (start, end, group key, window end when
    the stamp does not say it): the CTI that released it."""
    return {_seen(r): r.cti for r in expected}


def _seen(r: KeyedResult) -> tuple[Any, ...]:
    return (r.start, r.end, r.payload.key, r.closes)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(
    feeds(),
    st.sampled_from([(4, 2), (2, 2), (6, 1)]),
    st.sampled_from([0.0, 2.0]),
    st.sampled_from([WindowTimestamp.LIFETIME, WindowTimestamp.LATEST]),
)
def test_the_keyed_processor_releases_what_the_window_releases_batch_by_batch(
    feed: tuple[list[Op], list[int]],
    spec: tuple[int, int],
    share: float,
    stamp: WindowTimestamp,
) -> None:
    """(``share``: a bucket's keys are read all at once, or each alone; ``stamp``: results
    stamped by their window's lifetime, or at their latest event, carrying the window's end.)"""
    from pyspark.sql.streaming.tws_tester import TwsTester

    from tempo.spark.streaming.keyed import CTI, KeyedProcessor

    raw, cuts = feed
    ops = _moved(raw)
    cuts = [min(c, len(ops)) for c in cuts]
    size, hop = spec
    query, node = _stats_node(lambda g: _Stamped(g.hopping(timedelta(seconds=size), timedelta(seconds=hop)), stamp))
    processor = KeyedProcessor(query, query.nodes.index(node), ["key"])
    processor.STREAMED_SHARE = share
    tester = TwsTester(processor, timeMode="EventTime", eventTimeExtractor=lambda r: r[CTI])
    expected = _reference(query, node, ops)
    released_by = _released_by(expected)
    got: list[KeyedResult] = []
    for before, now, rows in _batches(tester, ops, cuts):
        fired = _results(rows)
        # Each batch releases the stretch of the release sequence its watermark adds.
        assert all(before < released_by[_seen(r)] <= now for r in fired)
        got += fired
    latest = now
    final = [(*_seen(r), r.payload) for r in expected if r.cti <= latest]
    assert sorted((*_seen(r), r.payload) for r in got) == sorted(final)


def _analytic_results(rows: list[Any]) -> list[KeyedResult]:
    """The analytic's results and ends among the processor's rows, as ``KeyedResult``s."""
    from tempo.spark.streaming.keyed import ENDED, RESULT, read_result
    from tests.test_keyed_operator import Trend

    return [
        read_result(
            r.tempo_kind,
            r.tempo_released_by,
            r.tempo_start,
            r.tempo_end,
            r.tempo_rank,
            None if r.tempo_kind == ENDED else Trend(r.key, r.value, r.previous, r.total, r.n),
        )
        for r in rows
        if r.tempo_kind in (RESULT, ENDED)
    ]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(feeds())
def test_the_keyed_processor_releases_what_the_analytic_releases_batch_by_batch(feed: tuple[list[Op], list[int]]) -> None:
    """An analytic's keys in the processor: each batch gives back the outputs the CTIs up to
    its watermark release and the ends that arrived by then, and all of them, each before the
    first CTI that released it and in ``release_order``, are the analytic's over all keys."""
    import bisect

    from pyspark.sql.streaming.tws_tester import TwsTester

    from tempo.runtime.keyed import release_order, released_from
    from tempo.spark.streaming.keyed import CTI, KeyedProcessor
    from tests.test_keyed_operator import _analytic_node

    raw, cuts = feed
    ops = [(k, attrs.evolve(item, at=i) if isinstance(item, End) else item) for i, (k, item) in enumerate(_moved(raw))]
    cuts = [min(c, len(ops)) for c in cuts]
    query, node = _analytic_node()
    processor = KeyedProcessor(query, query.nodes.index(node), ["key"])
    tester = TwsTester(processor, timeMode="EventTime", eventTimeExtractor=lambda r: r[CTI])
    ctis = sorted({item.t for _, item in ops if isinstance(item, Cti)})

    def released(r: KeyedResult) -> int:
        return bisect.bisect_left(ctis, released_from(node, r))

    got: list[KeyedResult] = []
    for before, now, rows in _batches(tester, ops, cuts):
        fired = _analytic_results(rows)
        for r in fired:  # an output once the watermark passed the CTI that released it; an end once it reached the CTI it came after
            assert before <= r.cti <= now if r.ended else before < ctis[released(r)] <= now
        got += fired
    latest = now

    def seen(r: KeyedResult) -> tuple[Any, ...]:
        return (released(r), r.ended, r.start, r.end, r.payload, r.eid, r.rank[:1])

    expected = [seen(r) for r in _reference(query, node, ops) if r.cti <= latest]
    ordered = sorted(got, key=lambda r: (released(r), release_order(node, r, repr(r.payload and r.payload.key))))
    assert [seen(r) for r in ordered] == expected


def _stage_query(spark_session: Any, tmp_path: Any, files: list[list[Any]], per_trigger: int) -> dict[int, list[Any]]:
    """Stage files of (position, Insert or None for a CTI row, CTI) rows, read ``per_trigger``
    files a micro-batch by ``groupBy(lane, bucket of the key).transformWithState`` on RocksDB, Spark's
    watermark from the rows' CTIs: the processor's rows per micro-batch."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql import GroupedData
    from pyspark.sql import functions as F

    if not hasattr(GroupedData, "transformWithState"):
        pytest.skip("transformWithState over rows needs pyspark 4.1 or later")

    from tempo.spark.streaming.keyed import (
        BATCH,
        BUCKET,
        CTI,
        CTI_LANE,
        CTI_ROW,
        EID,
        END,
        EVENT_LANE,
        ITEM,
        LANE,
        POSITION,
        START,
        KeyedProcessor,
        bucket_column,
        output_schema,
    )

    schema = pa.schema(
        [
            (POSITION, pa.int64()),
            (ITEM, pa.int32()),
            (EID, pa.int64()),
            (START, pa.int64()),
            (END, pa.int64()),
            (CTI, pa.int64()),
            (LANE, pa.int32()),
            (BATCH, pa.int64()),
            ("key", pa.int64()),
            ("value", pa.float64()),
        ]
    )
    stage = tmp_path / "stage"
    stage.mkdir()
    for index, rows in enumerate(files):
        table = [
            {
                POSITION: pos,
                ITEM: CTI_ROW,
                EID: index,
                START: None,
                END: None,
                CTI: cti,
                LANE: CTI_LANE,
                BATCH: index,
                "key": None,
                "value": None,
            }
            if item is None
            else {
                POSITION: pos,
                ITEM: 0,
                EID: item.eid,
                START: item.start,
                END: item.end,
                CTI: cti,
                LANE: EVENT_LANE,
                BATCH: index,
                "key": item.payload.key,
                "value": item.payload.value,
            }
            for pos, item, cti in rows
        ]
        path = stage / f"part-{index}.parquet"
        pq.write_table(pa.Table.from_pylist(table, schema=schema), path)
        # Spark's file source takes the oldest files first: files written within one tick of
        # the clock would come in any order (seen under load).
        os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))
    query, node = _window_node(2, 2)
    provider = "spark.sql.streaming.stateStore.providerClass"
    previous = spark_session.conf.get(provider, None)
    spark_session.conf.set(provider, "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    try:
        rows = (
            spark_session.readStream.schema(spark_session.read.parquet(str(stage)).schema)
            .option("maxFilesPerTrigger", per_trigger)
            .parquet(str(stage))
            .withColumn("tempo_watermark", F.timestamp_millis(F.col(CTI)))
            .withWatermark("tempo_watermark", "1 millisecond")
            .drop("tempo_watermark")  # its instants lie past the years Python's datetime holds
        )
        index = query.nodes.index(node)
        keyed = rows.withColumn(BUCKET, bucket_column(["key"])).groupBy(LANE, BUCKET)
        out = keyed.transformWithState(KeyedProcessor(query, index, ["key"]), output_schema(query, index), "Append", "EventTime")
        batches: dict[int, list[Any]] = {}
        handle = (
            out.writeStream.foreachBatch(lambda df, batch: batches.__setitem__(batch, df.collect()))
            .option("checkpointLocation", str(tmp_path / "ck"))
            .start()
        )
        try:
            handle.processAllAvailable()
        finally:
            handle.stop()
    finally:
        if previous is None:
            spark_session.conf.unset(provider)
        else:
            spark_session.conf.set(provider, previous)
    return batches


@pytest.mark.slow  # the cluster engine's lockstep tests and the test below run the processor on Spark by default
def test_the_keyed_processor_in_a_streaming_query_on_spark(spark_session: Any, tmp_path: Any) -> None:
    """The processor in a real query: stage files read as a stream, Spark's watermark from the
    rows' CTIs (as milliseconds, behind one), ``groupBy(lane, bucket of the key).transformWithState`` on RocksDB.
    Tumbling windows of 2 s; times in seconds after BASE:

        file 0: key 1 at 1, key 2 at 2.5 (CTI in force 0); a CTI row at 3
        file 1: key 1 at 3.5 (CTI 3); a CTI row at 6

    Micro-batch 0 releases nothing (no watermark yet); batch 1 (watermark: CTI 3) key 1's
    [0, 2), by its timer; the batch without data after it (CTI 6) key 1's [2, 4) and key 2's
    [2, 4), by their timers, though neither has rows there. Each file's CTI row comes back
    from the CTI lane once the watermark has reached its CTI."""
    from tempo.spark.streaming.keyed import MARKER, RESULT
    from tempo.runtime.keyed import Insert
    from tests.test_keyed_operator import Reading

    s = SECOND
    files = [
        [
            (0, Insert(0, BASE + 1 * s, BASE + 1 * s + 1, Reading(1, 1.0)), BASE),
            (1, Insert(1, BASE + 2 * s + s // 2, BASE + 2 * s + s // 2 + 1, Reading(2, 2.0)), BASE),
            (2, None, BASE + 3 * s),
        ],
        [(3, Insert(2, BASE + 3 * s + s // 2, BASE + 3 * s + s // 2 + 1, Reading(1, 4.0)), BASE + 3 * s), (4, None, BASE + 6 * s)],
    ]
    batches = _stage_query(spark_session, tmp_path, files, 1)
    released = {
        b: sorted((r.key, (r.tempo_start - BASE) // s, r.n, r.total) for r in rows if r.tempo_kind == RESULT) for b, rows in batches.items()
    }
    assert released == {0: [], 1: [(1, 0, 1, 1.0)], 2: [(1, 2, 1, 4.0), (2, 2, 1, 2.0)]}
    # The CTI rows come back once the watermark has reached them: file 0's in batch 1, file 1's in batch 2.
    markers = {
        b: [(r.tempo_start, (r.tempo_released_by - BASE) // s) for r in rows if r.tempo_kind == MARKER] for b, rows in batches.items()
    }
    assert markers == {0: [], 1: [(0, 3)], 2: [(1, 6)]}


def test_a_key_with_rows_beyond_the_watermark_first_releases_what_the_watermark_released(spark_session: Any, tmp_path: Any) -> None:
    """Two stage files a micro-batch: a key's rows may carry a CTI beyond Spark's watermark
    (the file after the one that moved it), while its timer is due. Tumbling windows of 2 s;
    times in seconds after BASE:

        file 0: key 1 at 1 (CTI in force 0); a CTI row at 3
        file 1: key 2 at 3.5 (CTI 3); a CTI row at 4
        file 2: key 2 at 4.5 (CTI 4); a CTI row at 6
        file 3: key 1 at 6.5 (CTI 6); a CTI row at 8

    Micro-batch 1 (files 2 and 3, watermark: CTI 4) gives back the CTI rows at 3 and 4, so key
    2's [2, 4) and key 1's [0, 2), which the CTI at 3 released, must come in it too, though key 1's rows there say
    CTI 6 (found late, it would come with the next batch and be taken as released at 6)."""
    from tempo.spark.streaming.keyed import MARKER, RESULT
    from tempo.runtime.keyed import Insert
    from tests.test_keyed_operator import Reading

    s = SECOND

    def at(eid: int, key: int, t: float) -> Insert:
        return Insert(eid, BASE + int(t * s), BASE + int(t * s) + 1, Reading(key, float(eid)))

    files = [
        [(0, at(0, 1, 1), BASE), (1, None, BASE + 3 * s)],
        [(2, at(1, 2, 3.5), BASE + 3 * s), (3, None, BASE + 4 * s)],
        [(4, at(2, 2, 4.5), BASE + 4 * s), (5, None, BASE + 6 * s)],
        [(6, at(3, 1, 6.5), BASE + 6 * s), (7, None, BASE + 8 * s)],
    ]
    batches = _stage_query(spark_session, tmp_path, files, 2)
    released = {b: sorted((r.key, (r.tempo_start - BASE) // s) for r in rows if r.tempo_kind == RESULT) for b, rows in batches.items()}
    markers = {b: sorted((r.tempo_released_by - BASE) // s for r in rows if r.tempo_kind == MARKER) for b, rows in batches.items()}
    assert markers[1] == [3, 4] and released[1] == [(1, 0), (2, 2)], (released, markers)
