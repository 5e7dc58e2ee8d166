"""The live-query benchmark (``bench/streaming.py``) on a tiny stream: tempo's live query and
the hand-written Structured Streaming query both give the W2 windows worked out by hand."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.spark

S = 1_000_000  # microseconds per second

# (key, event time in s, value), in arrival order; the fifth is 6 s late, within the 120 s both allow.
EVENTS = [(1, 0, 1.0), (2, 10, 2.0), (1, 50, 0.5), (1, 61, 4.0), (2, 55, 8.0), (1, 200, 16.0)]

# W2's windows: key 1 [0, 60) n 2 sum 1.5; key 2 [0, 60) n 2 sum 10; key 1 [60, 120) n 1 sum 4;
# key 1 [180, 240) n 1 sum 16.
EXPECTED = {
    "groups": 4,
    "count": 6,
    "sum": 31.5,
    "sum_x_key": 1.5 * 1 + 10 * 2 + 4 * 1 + 16 * 1,
    "sum_x_window": 1.5 * 0 + 10 * 0 + 4 * 1 + 16 * 3,
}


def test_both_engines_give_the_windows_worked_out_by_hand(spark_session: Any, tmp_path: Path) -> None:
    from bench.streaming import run_all, table

    events = tmp_path / "events.parquet"
    pq.write_table(
        pa.table(
            {
                "seq": pa.array(range(len(EVENTS)), pa.int64()),
                "key": pa.array([k for k, _, _ in EVENTS], pa.int32()),
                "event_time": pa.array([t * S for _, t, _ in EVENTS], pa.int64()),
                "arrival_time": pa.array([i * 1000 for i in range(len(EVENTS))], pa.int64()),
                "value": pa.array([v for _, _, v in EVENTS], pa.float64()),
            }
        ),
        events,
    )
    args = argparse.Namespace(n=len(EVENTS), batches=[2], max_files=10, engines=["tempo", "handwritten"], sinks=["parquet"])
    runs = run_all(spark_session, args, events, tmp_path / "work")
    print(table(runs))
    assert [(r.engine, r.files, r.events, r.error) for r in runs] == [("tempo", 3, 6, None), ("handwritten", 3, 6, None)]
    assert runs[0].micro_batches == 3  # tempo: one per file; Spark may add batches without data
    for r in runs:
        assert r.checksum == EXPECTED, r.engine
        assert r.status == "agree" and r.dropped == 0
        assert len(r.latencies) == 3 and all(s > 0 for s in r.latencies)
