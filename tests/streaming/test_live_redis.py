"""A live query over two Redis streams, end to end: a real redis-server, ``redis_source``
inputs and ``StreamingExecutor``, against the in-memory executor.

Readings flow into one stream; a slow reference stream of limits (intervals importing the
readings' CTIs: the query of ``test_live_spark``'s two-input test) goes idle. The limits source has ``heartbeat=``: its batches end with
heartbeat rows at the broker's clock, so the limits input keeps reaching later arrivals and
the readings keep passing the arrival frontier. The expected output is built from what was
produced: each stream's entries (read back with XRANGE; the entry ID gives the arrival) and
the heartbeats of the batches Spark logged (``batch_heartbeat`` of each logged pair of
offsets, as the reader computes them), as item lists in arrival order, run in memory and cut
at the frontier where the live engine must hold the rest.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("pyspark")

from tempo import (  # noqa: E402
    Heartbeat,
    InMemoryExecutor,
    Interval,
    Point,
    Stream,
)
from tempo.spark.streaming.redis import add_event, batch_heartbeat, redis_source  # noqa: E402
from tempo.ticks import from_ticks  # noqa: E402
from tests.streaming.test_live_spark import Limit, Over, Reading, _join  # noqa: E402

pytestmark = pytest.mark.spark

UTC = timezone.utc
T0 = datetime(2026, 11, 23, 21, 0, tzinfo=UTC)
HEARTBEAT = timedelta(seconds=3)
"""Longer than a batch takes here, so that ``process_all_available`` finds the sources idle."""
_keys = itertools.count()


def _arrival(entry_id: str) -> datetime:
    return from_ticks(int(entry_id.split("-")[0]) * 1000)


def _logged_offsets(spark_checkpoint: str, last_batch: int) -> list[list[dict[str, Any]]]:
    """Per batch Spark ran up to ``last_batch``, the end offset of each source (readings,
    limits) it logged (a flush's last batch is tempo's own: it has none)."""
    out = []
    for batch in range(last_batch + 1):
        path = Path(spark_checkpoint) / "offsets" / str(batch)
        if path.exists():
            lines = path.read_text().splitlines()
            out.append([json.loads(line) for line in lines[2:]])  # a version line, then the batch's metadata
    return out


def _items(client: Any, key: str, offsets: list[dict[str, Any]], make: Any) -> list[Any]:
    """The items input ``key`` delivered over the logged ``offsets``: each batch's entries
    (arrival from the entry ID), then its heartbeat, if the reader gives it one."""
    items: list[Any] = []
    start: dict[str, Any] = {"id": "0-0", "clock_ms": 0}
    for end in offsets:
        assert end["id"] == "0-0" or client.xrange(key, end["id"], end["id"]), f"{end} is no offset of {key}"
        if end == start:
            continue
        for raw_id, fields in client.xrange(key, f"({start['id']}", end["id"]) if end["id"] != start["id"] else []:
            entry_id = raw_id.decode()
            items.append(make(fields, _arrival(entry_id)))
        beat = batch_heartbeat(start, end)
        if beat is not None:
            items.append(Heartbeat(from_ticks(beat * 1000)))
        start = end
    return items


def _reading(fields: dict[bytes, bytes], arrival: datetime) -> Point[Reading]:
    start = from_ticks(int(fields[b"start"]))
    return Point(start, Reading(int(fields[b"device"]), float(fields[b"value"])), arrival)


def _limit(fields: dict[bytes, bytes], arrival: datetime) -> Interval[Limit]:
    start, end = from_ticks(int(fields[b"start"])), from_ticks(int(fields[b"end"]))
    return Interval(start, end, Limit(int(fields[b"device"]), float(fields[b"limit"])), arrival)


def _reached(items: list[Any]) -> datetime | None:
    return max((i.arrival for i in items), default=None)


def _up_to_frontier(readings: list[Any], limits: list[Any]) -> tuple[list[Any], list[Any]]:
    """The items the live engine has processed: readings (declared first) arriving at or
    before the latest arrival the limits reached, limits arriving before the readings'."""
    r_last, m_last = _reached(readings), _reached(limits)
    return (
        [i for i in readings if m_last is not None and i.arrival <= m_last],
        [i for i in limits if r_last is not None and i.arrival < r_last],
    )


def _run(readings: list[Any], limits: list[Any], flush: bool) -> list[Any]:
    return InMemoryExecutor().run(_join(readings, limits, flush)).raw


def _committed(out: Path) -> list[Any]:
    from tempo.spark.streaming import read_committed, released_items

    return released_items(read_committed(str(out)).drop_columns(["tempo_batch"]), Over)


def test_an_idle_reference_stream_with_heartbeats_lets_the_readings_through(spark_session: Any, redis_server: str, tmp_path: Path) -> None:
    import redis

    from tempo.spark.streaming import ParquetSink, StreamingExecutor

    client = redis.Redis.from_url(redis_server)
    suffix = f"{next(_keys)}-{uuid.uuid4().hex[:8]}"
    r_key, m_key = f"readings-{suffix}", f"limits-{suffix}"
    values = itertools.count(3)

    def produce_readings(n: int) -> None:
        for _ in range(n):
            v = next(values)
            add_event(client, r_key, Reading(v % 3, float(v % 17)), start=T0 + timedelta(seconds=v))
            time.sleep(0.002)  # entries a few milliseconds apart, as a sensor would send them

    def build(flush: bool) -> Stream[Over]:
        return _join(
            redis_source(spark_session, r_key, Reading, url=redis_server),
            redis_source(spark_session, m_key, Limit, end="end", url=redis_server, heartbeat=HEARTBEAT),
            flush,
        )

    for device in range(3):
        add_event(client, m_key, Limit(device, 4.0 + device), start=T0, end=T0 + timedelta(hours=1))
    produce_readings(5)
    out, checkpoint = tmp_path / "out", tmp_path / "ck"
    executor = StreamingExecutor(spark_session, str(checkpoint))
    live = executor.start(build(flush=True), ParquetSink(str(out)))

    beats: list[int] = []  # heartbeat items of the limits, each time they are counted

    def expected(flush: bool, heartbeats: bool = True) -> list[Any]:
        last = live.last_committed_batch
        assert last is not None
        logged = _logged_offsets(live._runner.log.spark_checkpoint, last)
        readings = _items(client, r_key, [o[0] for o in logged], _reading)
        limits = _items(client, m_key, [o[1] for o in logged], _limit)
        beats.append(sum(isinstance(i, Heartbeat) for i in limits))
        if not heartbeats:
            limits = [i for i in limits if not isinstance(i, Heartbeat)]
        if not flush:
            readings, limits = _up_to_frontier(readings, limits)
        return _run(readings, limits, flush)

    try:
        live.process_all_available()
        assert _committed(out) == expected(flush=False)
        # The limits go idle; the readings keep coming. Each heartbeat of the limits moves
        # the frontier, so readings after the last limit are released.
        for _ in range(2):
            produce_readings(6)
            live.process_all_available()
            time.sleep(HEARTBEAT.total_seconds() + 0.5)
            live.process_all_available()
            assert _committed(out) == expected(flush=False)
        without_heartbeats = expected(flush=False, heartbeats=False)
        assert len(_committed(out)) > len(without_heartbeats)
        assert beats[-1] >= 3  # the first batch's, and one per idle wait at least
    finally:
        live.stop()
    # Restart on the same checkpoint, with readings and a limit written while it was down.
    produce_readings(4)
    add_event(client, m_key, Limit(1, 2.0), start=T0 + timedelta(seconds=40), end=T0 + timedelta(hours=1))
    produce_readings(3)
    live = StreamingExecutor(spark_session, str(checkpoint)).start(build(flush=True), ParquetSink(str(out)))
    try:
        live.process_all_available()
        time.sleep(HEARTBEAT.total_seconds() + 0.5)
        live.process_all_available()
        assert _committed(out) == expected(flush=False)
        live.flush()
    finally:
        live.stop()
    whole = expected(flush=True)
    assert _committed(out) == whole
    assert sum(isinstance(i, Point) for i in whole) > 10
    client.close()


@attrs.frozen
class Count:
    n: int


@pytest.mark.parametrize("engine", ["driver", "vectorised"])
def test_a_rejections_position_counts_the_streams_entries_not_the_sources_heartbeats(
    spark_session: Any,
    redis_server: str,
    tmp_path: Path,
    engine: str,
) -> None:
    """Positions count the rows of an input as written (docs/semantics.md 2.5, 4.3): for a
    Redis input, the stream's entries. The heartbeat rows the source adds to its batches
    (``batch_heartbeat``, as many as the batches' timing makes) take none, so the late 5th
    entry is rejected at position 4 however many heartbeats came before it (issue 30: they
    were counted, on the driver and in bulk)."""
    import redis

    from tempo import AdvanceTimeGenerationSettings, AdvanceTimePolicy, AdvanceTimeSettings, EventShape
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed

    client = redis.Redis.from_url(redis_server)
    key = f"late-{next(_keys)}-{uuid.uuid4().hex[:8]}"
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, delay=timedelta(0)), policy=AdvanceTimePolicy.DROP)
    source = redis_source(spark_session, key, Reading, url=redis_server)
    query = (
        Stream.create("readings", source, EventShape.POINT, settings).tumbling(timedelta(seconds=10)).aggregate(lambda w: Count(w.count()))
    )
    out = tmp_path / "out"
    live = StreamingExecutor(spark_session, str(tmp_path / "ck"), engine=engine).start(query, ParquetSink(str(out)))
    try:
        for batch in ((10, 20, 30), (40,), (5,)):  # 5 s comes before the CTI at 40 s: dropped
            for seconds in batch:
                add_event(client, key, Reading(1, 1.0), start=T0 + timedelta(seconds=seconds))
            time.sleep(0.05)  # the broker's clock passes the last entry: the batch ends with a heartbeat
            live.process_all_available()
        last = live.last_committed_batch
        assert last is not None
        offsets = [o[0] for o in _logged_offsets(live._runner.log.spark_checkpoint, last)]
        beats = sum(batch_heartbeat(a, b) is not None for a, b in zip([{"id": "0-0", "clock_ms": 0}, *offsets], offsets))
        assert beats == 3, offsets  # heartbeat rows came before the late entry
    finally:
        live.stop()
        client.close()
    rejected = read_committed(str(out), rejections=True)
    assert rejected.column("tempo_position").to_pylist() == [4]
    assert rejected.column("tempo_rule").to_pylist() == ["start before CTI"]
