"""The examples run, and print what their docstrings promise (checked by hand here)."""

from __future__ import annotations

import runpy
import sys
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import attrs

from tempo import TICK, Result

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

import commit_every_event  # noqa: E402
import hopping_averages  # noqa: E402
import slow_fast_sync  # noqa: E402


def test_slow_fast_sync_keeps_pace_with_the_fast_stream() -> None:
    synced, unsynced = slow_fast_sync.main()
    t0 = slow_fast_sync.T0
    # Readings every 5 s alternate a, b with raw 20, 21, ...; a's offset is +0.5,
    # b's is -1.0 until 08:00:30 and -2.0 from then on.
    expected = []
    for i in range(12):
        device = "a" if i % 2 == 0 else "b"
        offset = 0.5 if device == "a" else (-1.0 if i * 5 < 30 else -2.0)
        expected.append((t0 + timedelta(seconds=5 * i), device, 20.0 + i + offset))
    assert [(e.start, e.payload.device, e.payload.value) for e in synced.events] == expected
    # Each output is a point: the intersection of a point with an edge.
    assert all(e.end == e.start + TICK for e in synced.events)
    # One output CTI per reading, just after it: the join keeps pace with the readings.
    assert synced.ctis == [t0 + timedelta(seconds=5 * i) + TICK for i in range(12)]
    assert synced.metrics["calibrations"].ctis_imported == 12
    assert unsynced.events == [] and unsynced.ctis == []


def test_hopping_averages_drop_late_readings_and_cover_each_reading_twice() -> None:
    result = hopping_averages.main()
    m = result.metrics["readings"]
    assert (m.received, m.admitted, m.dropped) == (135, 132, 3)
    assert sorted(r.item.payload.sensor for r in result.rejected) == ["east", "north", "south"]
    assert result.ctis[-1] == datetime.max  # flushed at the end (naive inputs, naive infinity)
    for e in result.events:
        assert e.end - e.start == timedelta(minutes=1)
        assert e.start.second in (0, 30) and e.payload.window_start == e.start
    # Size 60 s, hop 30 s: every admitted reading lies in exactly two windows.
    per_sensor = Counter[str]()
    for e in result.events:
        per_sensor[e.payload.sensor] += e.payload.readings
    assert per_sensor == {"north": 88, "south": 88, "east": 88}
    # Readings start 12:00:00 on the sensor clock, shifted 2 minutes: first window 12:01:30.
    assert result.events[0].start == datetime(2024, 3, 1, 12, 1, 30)


def test_commit_every_event_minus_one_tick_releases_the_last_event() -> None:
    results = commit_every_event.main()
    assert [e.payload.id for e in results["delay -1 tick"].events] == [1, 2, 3]
    assert [e.payload.id for e in results["delay 0"].events] == [1, 2]
    t9 = commit_every_event.T0 + timedelta(seconds=9)
    assert results["delay -1 tick"].ctis[-1] == t9 + TICK
    assert results["delay 0"].ctis[-1] == t9


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_")))
def test_example_runs_as_a_script(script: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [script, "--executor", "memory"])
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    out = capsys.readouterr().out
    assert out.startswith("# running on InMemoryExecutor") and len(out.splitlines()) > 2


@pytest.mark.spark
def test_examples_give_the_same_results_on_spark(spark_executor: Any) -> None:
    """The README's main example (and the others) on local Spark, equal to in memory."""
    from tests.conformance.compare import assert_same_results

    def rounded(result: Result[Any]) -> Result[Any]:
        # Float sums depend on summation order, which Spark does not fix: compare to 1e-9.
        events = [attrs.evolve(e, payload=attrs.evolve(e.payload, celsius=round(e.payload.celsius, 9))) for e in result.events]
        return attrs.evolve(result, events=events)

    assert_same_results(rounded(hopping_averages.main(spark_executor)), rounded(hopping_averages.main()))
    for got, want in zip(slow_fast_sync.main(spark_executor), slow_fast_sync.main()):
        assert_same_results(got, want)
    spark_results, memory_results = commit_every_event.main(spark_executor), commit_every_event.main()
    for label in memory_results:
        assert_same_results(spark_results[label], memory_results[label])
