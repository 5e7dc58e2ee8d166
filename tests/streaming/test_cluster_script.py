"""The cluster engine run from a user's script whose payload classes are its own (module
``__main__``), in a process of its own: PySpark brings them to its Python workers by value
with the plan, where a key's state, pickled by reference, must find them again
(``tempo.spark.streaming.keyed.adopt_script_classes``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.streaming.test_cluster import _skip_without_tws

pytestmark = pytest.mark.spark

SCRIPT = '''
import json, sys
from datetime import datetime, timedelta, timezone

import attrs
import pyarrow as pa
import pyarrow.parquet as pq

from tempo import AdvanceTimeGenerationSettings, AdvanceTimeSettings, EventShape, InMemoryExecutor, Stream
from tempo.sources import ArrowSource, ParquetSource


@attrs.frozen
class Reading:
    key: str
    value: float


@attrs.frozen
class Count:
    key: str
    n: int


@attrs.frozen
class Seen:
    key: str
    value: float
    n: int


def query(source):
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency=1, delay=timedelta(0), advance_to_infinity_on_shutdown=True))
    readings = Stream.create("readings", source, EventShape.POINT, settings, payload_type=Reading)
    counts = readings.group_by(lambda r: r.key).tumbling(timedelta(seconds=10)).aggregate(lambda k, w: Count(k, w.count()))
    return counts.join(readings, lambda c, r: c.key == r.key, lambda c, r: Seen(r.key, r.value, c.n))


if __name__ == "__main__":
    from tempo.spark import spark_session
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed, released_items

    folder, checkpoint, out = sys.argv[1:4]
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = [(1, "a", 1.0), (3, "b", 2.0), (4, "a", 3.0), (12, "a", 4.0), (15, "b", 5.0), (17, "b", 6.0)]
    table = pa.table({"seq": list(range(len(rows))), "ts": [base + timedelta(seconds=s) for s, _, _ in rows],
                      "key": [k for _, k, _ in rows], "value": [v for _, _, v in rows]})
    pq.write_table(table, folder + "/part-0.parquet")
    spark = spark_session(spark_sql_shuffle_partitions="1")
    live = StreamingExecutor(spark, checkpoint, engine="cluster").start(query(ParquetSource(folder, Reading, start="ts", order="seq")), ParquetSink(out))
    try:
        live.flush()
    finally:
        live.stop()
    got = [e for e in released_items(read_committed(out).drop_columns(["tempo_batch"]), Seen) if hasattr(e, "payload")]
    want = [e for e in InMemoryExecutor().run(query(ArrowSource(table, Reading, start="ts", order="seq"))).raw if hasattr(e, "payload")]
    print(json.dumps({"same": sorted(map(repr, got)) == sorted(map(repr, want)),
                      "seen": sorted([int((e.start - base).total_seconds()), e.payload.key, e.payload.value, e.payload.n] for e in got)}))
'''


def test_payload_classes_of_the_users_script_run_on_the_cluster_engine(tmp_path: Path) -> None:
    """Each reading with its key's count in its 10 s window (a window, then a join holding
    both classes' payloads in its keys' state), from a script defining its classes at its
    top level: points a 1, b 3, a 4 | a 12, b 15, b 17 (seconds) give a's window [0, 10)
    n 2, b's n 1, a's [10, 20) n 1, b's n 2, and each reading with its own window's count."""
    _skip_without_tws()
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT)
    folder = tmp_path / "in"
    folder.mkdir()
    done = subprocess.run(
        [sys.executable, str(script), str(folder), str(tmp_path / "ck"), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    printed: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert printed["seen"] == [[1, "a", 1.0, 2], [3, "b", 2.0, 1], [4, "a", 3.0, 2], [12, "a", 4.0, 1], [15, "b", 5.0, 2], [17, "b", 6.0, 2]]
    assert printed["same"]
