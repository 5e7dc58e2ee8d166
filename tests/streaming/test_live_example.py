"""examples/live_iot.py runs against a real redis-server, and a second run on the same work
folder continues the query: later batch ids, and every alert committed exactly once."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_the_live_example_runs_and_continues_after_a_restart(spark_session: Any, redis_server: str, tmp_path: Path, capsys: Any) -> None:
    sys.path.insert(0, str(EXAMPLES))
    try:
        import live_iot
    finally:
        sys.path.remove(str(EXAMPLES))
    import redis

    from tempo.spark.streaming import read_committed, read_progress

    broker = redis.Redis.from_url(redis_server)
    broker.delete("readings", "limits")  # the example's stream keys: start from empty streams
    work = str(tmp_path / "work")
    # --min-batches: each run commits batches of its own however loaded the machine is (a run
    # of fixed seconds committed none on a busy CI machine).
    assert live_iot.main(["--work", work, "--seconds", "10", "--min-batches", "2", "--redis", redis_server]) == 0
    checkpoint = str(tmp_path / "work" / "checkpoint")
    first = [r["batch"] for r in read_progress(checkpoint)]
    assert live_iot.main(["--work", work, "--seconds", "15", "--min-batches", "3", "--redis", redis_server, "--seed", "2"]) == 0
    both = read_committed(str(tmp_path / "work" / "out"))
    printed = capsys.readouterr().out
    assert "batch 0:" in printed and "alerts committed" in printed
    # The second run goes on from the first's checkpoint: its batches come after the first's
    # (whether they released an alert or not depends on how fast the machine is).
    second = [r["batch"] for r in read_progress(checkpoint)][len(first) :]
    assert first and second and min(second) == max(first) + 1, (first, second)
    alerts = [(r["tempo_start"], r["device"], r["celsius"], r["max_celsius"]) for r in both.to_pylist() if r["tempo_kind"] == "point"]
    assert alerts and len(alerts) == len(set(alerts))
    assert all(celsius > limit for _, _, celsius, limit in alerts)
    broker.delete("readings", "limits")
