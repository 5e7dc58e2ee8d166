"""Live queries on Spark Structured Streaming (``tempo.spark.streaming``), against the
in-memory executor.

The inputs are directories that receive Parquet files one at a time; after each file the
query processes what is there, and what its sink has committed so far must be exactly what
the in-memory executor releases for the rows written so far (``Result.raw``, item for item
and in release order); after ``flush()`` it must be the whole run's. Restarts on the same
checkpoint continue where the last committed batch ended; a changed query is refused.
"""

from __future__ import annotations

import os
import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tempo
from tempo import AdvanceTimeGenerationSettings, AdvanceTimePolicy, AdvanceTimeSettings, EventShape, InMemoryExecutor, Stream
from tempo.sources import ParquetSource

pytestmark = pytest.mark.spark

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


@attrs.frozen
class Reading:
    device: int
    value: float


@attrs.frozen
class Count:
    device: int
    n: int
    total: float


@attrs.frozen
class Rate:
    device: int
    rate: float


def _rows(n: int, seed: int, arrival_offset: float = 0.0) -> list[dict[str, Any]]:
    """Readings of 3 devices, starts a little out of order, arrivals increasing."""
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        start = T0 + timedelta(seconds=i * 2 + rnd.choice([0, 0, 0, -3, -13]))
        rows.append({
            "seq": i, "ts": start, "arrived": T0 + timedelta(seconds=i * 2 + arrival_offset),
            "device": rnd.randrange(3), "value": float(rnd.randrange(100)),
        })
    return rows


def _write(folder: Path, index: int, rows: list[dict[str, Any]]) -> None:
    """One file of rows, moved into ``folder`` whole (Spark must never see half a file), with
    a modification time after the previous file's (Spark orders files by it)."""
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=pa.schema([
        ("seq", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("arrived", pa.timestamp("us", tz="UTC")),
        ("device", pa.int64()), ("value", pa.float64()),
    ]))
    tmp = folder.parent / f".{folder.name}-{index}.tmp"
    pq.write_table(table, tmp)
    stamp = 1_700_000_000 + index
    os.utime(tmp, (stamp, stamp))
    os.replace(tmp, folder / f"part-{index:05d}.parquet")


def _settings(flush: bool) -> AdvanceTimeSettings:
    return AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(frequency=4, delay=timedelta(seconds=5), advance_to_infinity_on_shutdown=flush),
        policy=AdvanceTimePolicy.ADJUST,
    )


def _counts(source: Any, flush: bool) -> Stream[Count]:
    readings = Stream.create("readings", source, EventShape.POINT, _settings(flush), payload_type=Reading)
    return (
        readings.group_by(lambda r: r.device)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda k, w: Count(device=k, n=w.count(), total=w.sum(lambda r: r.value)))
    )


def _items(table: Any, payload_type: type) -> list[Any]:
    from tempo.spark.streaming import released_items

    return released_items(table.drop_columns(["tempo_batch"]), payload_type)


def test_committed_output_after_every_file_is_the_in_memory_release(spark_session: Any, tmp_path: Path) -> None:
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed

    rows = _rows(60, seed=1)
    cuts = [0, 1, 2, 9, 10, 30, 31, 60]  # files of 1, 1, 7, 1, 20, 1 and 29 rows
    inputs, out, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    _write(inputs, 0, rows[:1])  # the schema comes from the files there at the start
    live = StreamingExecutor(spark_session, str(checkpoint)).start(
        _counts(ParquetSource(str(inputs), Reading, start="ts", order="seq"), flush=True), ParquetSink(str(out))
    )
    try:
        for index, (a, b) in enumerate(zip(cuts[1:], cuts[2:]), start=1):
            _write(inputs, index, rows[a:b])
            live.process_all_available()
            prefix = pa.Table.from_pylist(rows[:b])
            expected = InMemoryExecutor().run(_counts(tempo.sources.ArrowSource(prefix, Reading, start="ts", order="seq"), flush=False))
            assert _items(read_committed(str(out)), Count) == expected.raw, f"after {b} rows"
        live.flush()
    finally:
        live.stop()
    whole = InMemoryExecutor().run(_counts(tempo.sources.ArrowSource(pa.Table.from_pylist(rows), Reading, start="ts", order="seq"), flush=True))
    assert _items(read_committed(str(out)), Count) == whole.raw
    rejected = read_committed(str(out), rejections=True).drop_columns(["tempo_batch"])
    assert len(whole.rejected) > 0 and rejected.equals(whole.rejections_table())
    assert live.progress[-1].final and [p.batch for p in live.progress] == list(range(len(live.progress)))
    assert sum(p.rows_in.get("readings", 0) for p in live.progress) == 60
