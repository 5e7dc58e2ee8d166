"""The batch benchmark's W7 (each key's readings as a signal, clipped at the key's next later
reading, joined with the reference intervals): the hand-written PySpark query, tempo on Spark
and tempo in memory all give the checksums of a separate numpy computation
(``bench/numpy_w7.py``), on readings worked out by hand (ties, a hold cut short by the hour,
pieces crossing reference rows, times before the origin, a key without reference rows), on a
random data set with many ties and long gaps, and on the shared generator's data at a small N."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.spark

S = 1_000_000  # microseconds per second
FOREVER = 2**62  # valid_to of each key's last reference row, as in the shared data

# (key, event time in µs, value), in arrival order.
EVENTS: list[tuple[int, int, float]] = [
    (1, 1000 * S, 2.0),  # tied with the 4.0 below: neither clips the other
    (2, 600 * S - 1, 0.5),
    (1, -3000 * S, 1.0),  # the next later reading is at 1000 s, but the hour ends it at 600 s
    (2, 600 * S, 16.0),
    (1, 1300 * S, 8.0),  # key 1's last: holds the hour
    (3, 10 * S, 32.0),  # key 3 has no reference rows
    (1, 1000 * S, 4.0),
    (2, 1800 * S - 1, 0.25),  # key 2's last; 1 µs before the reference's last row + 600 s
    (1, -5000 * S, 64.0),  # clipped at -3000 s: before every reference row
]
# Reference rows (key, valid_from in s, ref_value), each valid until the key's next one.
REFERENCE: list[tuple[int, int, float]] = [
    (1, 0, 1.0),
    (2, 0, 0.5),
    (1, 600, 2.0),
    (2, 600, 0.25),
    (1, 1200, 4.0),
    (2, 1200, 8.0),
]
# The join's outputs worked out by hand: (value, ref_value, overlap in µs).
PAIRS: list[tuple[float, float, int]] = [
    (1.0, 1.0, 600 * S),  # [-3000 s, 600 s) ∩ [0, 600 s)
    (2.0, 2.0, 200 * S),
    (2.0, 4.0, 100 * S),  # [1000 s, 1300 s) ∩ [600, 1200), ∩ [1200, ∞)
    (4.0, 2.0, 200 * S),
    (4.0, 4.0, 100 * S),  # the same piece for the tied reading
    (8.0, 4.0, 3600 * S),  # [1300 s, 1300 s + 1 h) ∩ [1200 s, ∞)
    (0.5, 0.5, 1),  # [600 s − 1 µs, 600 s) ∩ [0, 600 s)
    (16.0, 0.25, 600 * S),
    (16.0, 8.0, 600 * S - 1),  # [600 s, 1800 s − 1 µs) over two rows
    (0.25, 8.0, 3600 * S),  # [1800 s − 1 µs, + 1 h) ∩ [1200 s, ∞)
]


def expected_by_hand() -> dict[str, Any]:
    return {
        "matched": len(PAIRS),
        "sum_value_x_ref": sum(v * r for v, r, _ in PAIRS),
        "span": sum(o for _, _, o in PAIRS),
        "sum_value_x_ms": sum(v * (o // 1000) for v, _, o in PAIRS),
    }


def write_events(path: Path, key: Any, time: Any, value: Any) -> None:
    n = len(key)
    pq.write_table(
        pa.table(
            {
                "seq": pa.array(np.arange(n), pa.int64()),
                "key": pa.array(key, pa.int32()),
                "event_time": pa.array(time, pa.int64()),
                "arrival_time": pa.array(np.arange(n) * 1000, pa.int64()),
                "value": pa.array(value, pa.float64()),
            }
        ),
        path,
    )


def write_reference(path: Path, rows: list[tuple[int, int, float]]) -> None:
    """Rows (key, valid_from in µs, ref_value) in (valid_from, key) order, each valid until the
    key's next valid_from, the last for ever: the shared data's layout."""
    rows = sorted(rows, key=lambda r: (r[1], r[0]))
    until = {}
    for k, vf, _ in reversed(rows):
        until[(k, vf)] = next((f for kk, f, _ in rows if kk == k and f > vf), FOREVER)
    pq.write_table(
        pa.table(
            {
                "key": pa.array([k for k, _, _ in rows], pa.int32()),
                "valid_from": pa.array([vf for _, vf, _ in rows], pa.int64()),
                "valid_to": pa.array([until[(k, vf)] for k, vf, _ in rows], pa.int64()),
                "arrival_time": pa.array([vf for _, vf, _ in rows], pa.int64()),
                "ref_value": pa.array([r for _, _, r in rows], pa.float64()),
            }
        ),
        path,
    )


def by_hand(tmp_path: Path) -> Any:
    from bench.engines import Data

    events, reference = tmp_path / "events.parquet", tmp_path / "reference.parquet"
    write_events(events, [k for k, _, _ in EVENTS], [t for _, t, _ in EVENTS], [v for _, _, v in EVENTS])
    write_reference(reference, [(k, vf * S, r) for k, vf, r in REFERENCE])
    return Data(len(EVENTS), events, reference)


def random_data(tmp_path: Path) -> Any:
    """40 keys, 4,000 readings at whole seconds (ties within a key are common) in [-4500 s,
    3600 s), but every fifth key has about ten readings in [-40000 s, 3600 s) (gaps past the
    hour); reference rows every 600 s from 0 to 3000 s for every key but the last. Arrival
    order is not time order (every input is flushed at the end: nothing is late)."""
    from bench.engines import Data

    rng = np.random.default_rng(20261124)
    n, keys = 4000, 40
    sparse = np.arange(keys) % 5 == 0
    weight = np.where(sparse, 0.08, 1.0)
    key = rng.choice(keys, n, p=weight / weight.sum())
    time = rng.integers(np.where(sparse[key], -40_000, -4500), 3600) * S
    value = rng.integers(0, 16_000, n) / 16
    events, reference = tmp_path / "events.parquet", tmp_path / "reference.parquet"
    write_events(events, key, time, value)
    write_reference(reference, [(k, vf * S, float(rng.integers(0, 1600)) / 16) for k in range(keys - 1) for vf in range(0, 3001, 600)])
    return Data(n, events, reference)


def shared_data(tmp_path: Path) -> Any:
    """The shared generator's data set of 20,000 events (one reference row per key)."""
    from bench.engines import Data
    from bench.run import shared_data_script

    script = shared_data_script()
    if not script.is_file():
        pytest.skip(f"no shared data generator at {script}")
    n = 20_000
    subprocess.run([sys.executable, str(script), "--n", str(n), "--out", str(tmp_path)], check=True, capture_output=True)
    return Data(n, tmp_path / f"n{n}" / "events.parquet", tmp_path / f"n{n}" / "reference.parquet")


def test_numpy_gives_the_pairs_worked_out_by_hand(tmp_path: Path) -> None:
    from bench.checksums import normalize
    from bench.numpy_w7 import checksum

    data = by_hand(tmp_path)
    assert normalize("W7", checksum(data.events, data.reference)) == normalize("W7", expected_by_hand())


@pytest.mark.parametrize("make", [by_hand, random_data, shared_data], ids=["by-hand", "random", "shared-20k"])
def test_every_engine_gives_the_numpy_checksums(spark_session: Any, tmp_path: Path, make: Any) -> None:
    from bench.checksums import normalize
    from bench.engines import Handwritten, TempoMemory, TempoSpark
    from bench.numpy_w7 import checksum
    from bench.run import check_data

    data = make(tmp_path)
    check_data(data)  # what the hand-written bucket join relies on holds here too
    want = normalize("W7", checksum(data.events, data.reference))
    assert want["matched"] > 0
    for engine in (Handwritten(spark_session), TempoSpark(lambda: spark_session), TempoMemory()):
        assert normalize("W7", engine.run("W7", data)) == want, engine.name
