"""The batch benchmark's W5 (sessions) and W6 (count windows) on a tiny data set: the
hand-written PySpark queries, tempo on Spark and tempo in memory all give the checksums
worked out here, including the cases the shared data never hits (two events exactly 5 s apart,
a tie in event time across a count window's boundary, negative times)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.spark

S = 1_000_000  # microseconds per second
MS = 1_000

# (key, event time in µs, value), in arrival order.
EVENTS: list[tuple[int, int, float]] = [
    (1, 0, 1.0),
    (1, 3 * S, 2.0),
    (1, 8 * S, 4.0),  # exactly 5 s after the one before: a new session
    (2, 0, 0.5),
    (1, 13 * S - 1, 8.0),  # 1 µs less than 5 s after: the same session
    (2, -7 * S - 1, 16.0),  # late, and before the origin
    (1, 18 * S - 1, 0.25),  # exactly 5 s again
]
# Key 3: 150 events 10 ms apart, but ranks 99 and 100 share a time and arrive in the order
# (8.0, 1.0): tempo orders ties by the payload (key, then value), so 1.0 is in window 0.
for i in range(150):
    t = min(i, 99) * 10 * MS
    v = {99: 8.0, 100: 1.0}.get(i, i / 16)
    EVENTS.append((3, t, v))


def expected(workload: str) -> dict[str, Any]:
    """The checksum, from the windows listed by hand: (key, count, sum, start, end)."""
    if workload == "W5":
        key3 = [v for k, _, v in EVENTS if k == 3]
        windows = [
            (1, 2, 3.0, 0, 3 * S + 5 * S),
            (1, 2, 12.0, 8 * S, 13 * S - 1 + 5 * S),
            (1, 1, 0.25, 18 * S - 1, 18 * S - 1 + 5 * S),
            (2, 1, 16.0, -7 * S - 1, -7 * S - 1 + 5 * S),
            (2, 1, 0.5, 0, 5 * S),
            (3, 150, sum(key3), 0, 990 * MS + 5 * S),
        ]
        name = "sessions"
    else:
        first_100 = [i / 16 for i in range(99)] + [1.0]  # the tie: 1.0 before 8.0
        windows = [(3, 100, sum(first_100), 0, 990 * MS + 1)]
        name = "windows"
    return {
        name: len(windows),
        "count": sum(n for _, n, _, _, _ in windows),
        "sum": sum(s for _, _, s, _, _ in windows),
        "sum_x_key": sum(s * k for k, _, s, _, _ in windows),
        "sum_x_start": sum(s * (start // S) for _, _, s, start, _ in windows),
        "span": sum(end - start for _, _, _, start, end in windows),
    }


@pytest.fixture
def data(tmp_path: Path) -> Any:
    from bench.engines import Data

    events, reference = tmp_path / "events.parquet", tmp_path / "reference.parquet"
    pq.write_table(
        pa.table(
            {
                "seq": pa.array(range(len(EVENTS)), pa.int64()),
                "key": pa.array([k for k, _, _ in EVENTS], pa.int32()),
                "event_time": pa.array([t for _, t, _ in EVENTS], pa.int64()),
                "arrival_time": pa.array([i * MS for i in range(len(EVENTS))], pa.int64()),
                "value": pa.array([v for _, _, v in EVENTS], pa.float64()),
            }
        ),
        events,
    )
    return Data(len(EVENTS), events, reference)  # W5 and W6 never read the reference file


@pytest.mark.parametrize("workload", ["W5", "W6"])
def test_every_engine_gives_the_windows_worked_out_by_hand(spark_session: Any, data: Any, workload: str) -> None:
    from bench.checksums import normalize
    from bench.engines import Handwritten, TempoMemory, TempoSpark

    want = normalize(workload, expected(workload))
    for engine in (Handwritten(spark_session), TempoSpark(lambda: spark_session), TempoMemory()):
        assert normalize(workload, engine.run(workload, data)) == want, engine.name
