"""examples/live_kafka.py runs against a real Kafka broker, and a second run on the same work
folder continues the query: later batch ids, and every alert in the Delta output once."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_kafka_example_runs_and_continues_after_a_restart(
    connector_session: Any, kafka_broker: Any, tmp_path: Path, capsys: Any
) -> None:
    pytest.importorskip("deltalake")
    from tempo.sources import delta_table
    from tempo.spark.streaming import read_progress

    sys.path.insert(0, str(EXAMPLES))
    try:
        import live_kafka
    finally:
        sys.path.remove(str(EXAMPLES))
    work = tmp_path / "work"
    common = ["--work", str(work), "--bootstrap", kafka_broker.bootstrap, "--topic", f"example-{uuid.uuid4().hex[:8]}"]
    # --min-batches: each run commits batches of its own however loaded the machine is.
    assert live_kafka.main([*common, "--seconds", "6", "--min-batches", "2"]) == 0
    first = [r["batch"] for r in read_progress(str(work / "checkpoint"))]
    assert live_kafka.main([*common, "--seconds", "6", "--min-batches", "2", "--seed", "2"]) == 0
    second = [r["batch"] for r in read_progress(str(work / "checkpoint"))][len(first) :]
    printed = capsys.readouterr().out
    assert "batch 0:" in printed and "alerts committed" in printed
    assert first and second and min(second) == max(first) + 1, (first, second)
    table = delta_table(str(work / "out"))
    places = list(zip(table.column("tempo_batch").to_pylist(), table.column("tempo_row").to_pylist()))
    assert len(places) == len(set(places)), "a batch appended twice"
    rows = [r for r in table.to_pylist() if r["tempo_kind"] == "point"]
    assert rows and all(r["celsius"] > r["max_celsius"] for r in rows)
    assert {r["device"] for r in rows} <= set(live_kafka.DEVICES)
