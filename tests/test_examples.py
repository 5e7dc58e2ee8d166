"""The examples run, and print what their docstrings promise (checked by hand here)."""

from __future__ import annotations

import runpy
import subprocess
import sys
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import attrs

from tempo import TICK, Result, Withheld

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

import commit_every_event  # noqa: E402
import hopping_averages  # noqa: E402
import iot_skewed_clocks  # noqa: E402
import sessions_and_counts  # noqa: E402
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


def test_sessions_and_counts_cut_visits_rank_by_time_and_stay_aligned() -> None:
    visits, load, hourly = sessions_and_counts.main()
    at = lambda h, m: datetime(2024, 5, 1, h, m)  # noqa: E731
    # ann: 0, 5, 12 (then 40 minutes without a view), 52, 60. bob: every 20 minutes from 09:00
    # to 12:00, cut at 12:00: the first multiple of 2 h at or after 09:00 + 2 h.
    assert sorted((v.payload.user, v.payload.views, v.payload.first, v.payload.until) for v in visits.events) == [
        ("ann", 2, at(9, 52), at(10, 30)),
        ("ann", 3, at(9, 0), at(9, 42)),
        ("bob", 1, at(12, 0), at(12, 30)),
        ("bob", 9, at(9, 0), at(12, 0)),
    ]
    assert all(e.end == e.start + TICK and e.start == e.payload.until - TICK for e in visits.events)
    # Every three views of a user in time order; bob's 09:40 arrived late but ranks third.
    assert sorted((e.payload.user, e.payload.since, e.start, round(e.payload.avg_ms, 6)) for e in load.events) == [
        ("ann", at(9, 0), at(9, 12), round(670 / 3, 6)),
        ("bob", at(9, 0), at(9, 40), 120.0),
        ("bob", at(10, 0), at(10, 40), 180.0),
        ("bob", at(11, 0), at(11, 40), 240.0),
    ]
    # 10-minute counts at their last tick fall into the hour of their window.
    assert [(e.payload.hour, e.payload.views, e.payload.windows) for e in hourly.events] == [
        (at(9, 0), 7, 5),
        (at(10, 0), 4, 3),
        (at(11, 0), 3, 3),
        (at(12, 0), 1, 1),
    ]


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
    # Order #3 (at 9 s) waits for a CTI past 9 s; with delay -1 tick nothing waits.
    assert results["delay -1 tick"].withheld is None
    assert results["delay 0"].withheld == Withheld(events=1, waiting_for=t9)


def test_iot_skewed_clocks_substreams_keep_the_other_devices_readings() -> None:
    """Rounds every 20 s from 12:00:00 (b = 12:00:00 + 20 i, i = 0..11); in each, in arrival
    order (O = 0, L = 5 s, E = 5 min, DROP):

        kitchen  starts b       arrives b
        garage   starts b+95 s  arrives b+5 s     (from round 6, b = 12:02:00; 90 s ahead < E)
        cellar   starts b+10 s  arrives b+11..14 s (delay 1, 3, 2, 4 s by i % 4, all <= L)
        attic    starts b+15 s  arrives b+15 s

    except the cellar's round-4 reading (12:01:30), which arrives at 12:01:42, after the
    kitchen's 12:01:40: 12 s > L, so it is late and dropped under both watermarks.

    Global watermark, CTI = max(largest admitted start, clock - 5 s): up to round 5 every
    reading starts at or after the latest start before it (each device is 5 s after the
    previous one, the cellar's delays keep it before the attic), so all are admitted but
    the late one. Round 6: kitchen 12:02:00 is admitted; the garage's 12:03:35 moves the CTI
    there; from then on the CTI is the garage's latest start, b - 20 s + 95 s = b + 75 s or
    later, ahead of every other reading (at most b + 15 s): the cellar and attic in rounds
    6-11 (6 each) and the kitchen in rounds 7-11 (5) are out of order, 17 dropped.

    Substreams: each device's CTI is max(its own latest start, clock - 5 s); each device's
    readings come in order, and the clock before a reading is at most the reading's arrival,
    so only the late cellar reading is dropped.
    """
    global_, by_device = iot_skewed_clocks.main(["--executor", "memory"])

    def at(minute: int, second: int) -> datetime:
        return datetime(2024, 3, 1, 12, minute, second)

    g = global_.metrics["readings"]
    assert (g.received, g.admitted, g.adjusted, g.dropped) == (42, 24, 0, 18)
    assert (g.early_dropped, g.late_dropped, g.out_of_order_dropped) == (0, 1, 17)
    late = (at(1, 30), "cellar", "late arrival", "dropped")
    out_of_order = {
        (at(2 + (20 * i + s) // 60, (20 * i + s) % 60), device, "start before CTI", "dropped")
        for device, s, first in (("kitchen", 0, 1), ("cellar", 10, 0), ("attic", 15, 0))
        for i in range(first, 6)
    }
    assert len(out_of_order) == 17
    assert {(r.item.payload.device_time, r.item.payload.device, r.rule.value, r.action.value) for r in global_.rejected} == out_of_order | {
        late
    }
    # The attic's 12:02:15 is held against the garage's first reading, 12:03:35.
    assert [r.cti for r in global_.rejected if r.item.start == at(2, 15)] == [at(3, 35)]
    # A CTI move for each of the 17 admitted readings of rounds 0-5 (not the late one: the
    # CTI is the kitchen's 12:01:40, ahead of 12:01:42 - 5 s), the kitchen's 12:02:00 and
    # the 6 garage readings, then the flush.
    assert g.ctis_generated == 17 + 1 + 6 + 1
    delays = [d for _, d in g.watermark_delays]
    # Behind by at most the cellar's 4 s delay; 90 s ahead just after a garage reading.
    assert (min(delays), max(delays)) == (timedelta(seconds=-90), timedelta(seconds=4))

    s = by_device.metrics["readings"]
    assert (s.received, s.admitted, s.adjusted, s.dropped, s.late_dropped, s.out_of_order_dropped) == (42, 41, 0, 1, 1, 0)
    assert [(r.item.payload.device_time, r.item.payload.device, r.rule.value, r.action.value) for r in by_device.rejected] == [late]
    subs = {d: (c.received, c.admitted, c.dropped, c.late_dropped) for d, c in s.substreams.items()}
    assert subs == {"kitchen": (12, 12, 0, 0), "garage": (6, 6, 0, 0), "cellar": (12, 11, 1, 1), "attic": (12, 12, 0, 0)}
    # Every arrival differs, so the input's CTI (the clock - 5 s) moves 42 times; then the flush.
    assert s.ctis_generated == 43
    assert {d for _, d in s.watermark_delays} == {timedelta(seconds=5)}
    # Each admitted reading arrives at most 4 s after its stamp (the garage's 90 s before),
    # so it moves its device's own CTI, to its stamp, ahead of the clock - 5 s.
    own = {d: (c.ctis_generated, {w for _, w in c.watermark_delays}) for d, c in s.substreams.items()}
    assert own == {
        "kitchen": (12, {timedelta(0)}),
        "attic": (12, {timedelta(0)}),
        "cellar": (11, {timedelta(seconds=n) for n in (1, 2, 3, 4)}),
        "garage": (6, {timedelta(seconds=-90)}),
    }
    # The count keeps the device, so a device's minute goes out on its own CTI when that
    # passes the minute's end before the input's (clock - 5 s) does: the kitchen's reading
    # at m+1:00:00 closes minute m when the input's CTI is m:59:55 (minutes 12:00-12:02);
    # the garage's 12:04:15 and 12:05:15 close its 12:03 and 12:04. The input's CTI passes
    # m+1:00:00 at the next arrival after m+1:00:05, before the attic's m+1:00:15 and the
    # cellar's (m+1:00:10 plus its delay), so theirs go out on it. The last minutes go out
    # with the flush.
    assert iot_skewed_clocks.released_by_own_cti(by_device) == {"kitchen": 3, "garage": 2}
    # The kitchen's CTIs at the output: its readings' stamps pulled back to the minute.
    assert by_device.substream_ctis["kitchen"] == [at(m, 0) for m in range(4)]
    assert iot_skewed_clocks.released_by_own_cti(global_) == {}

    # Per device and minute: three readings a minute each; the garage's are stamped
    # 12:03:35, :55, 12:04:15, :35, :55, 12:05:15.
    garage = {("garage", at(3, 0)): 2, ("garage", at(4, 0)): 3, ("garage", at(5, 0)): 1}
    full = {(d, at(m, 0)): 3 for d in ("kitchen", "cellar", "attic") for m in range(4)}
    assert iot_skewed_clocks.counts(by_device) == full | garage | {("cellar", at(1, 0)): 2}
    assert iot_skewed_clocks.counts(global_) == (
        {(d, at(m, 0)): 3 for d in ("kitchen", "cellar", "attic") for m in range(2)}
        | garage
        | {("cellar", at(1, 0)): 2, ("kitchen", at(2, 0)): 1}
    )
    assert global_.ctis[-1] == by_device.ctis[-1] == datetime.max


LIVE_EXAMPLES = {"live_iot.py", "live_kafka.py"}
"""Examples of live queries: they need Spark and redis-server or a Kafka broker, and run in tests/streaming."""


@pytest.mark.parametrize(
    "script", sorted(p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith("_") and p.name not in LIVE_EXAMPLES)
)
def test_example_runs_as_a_script(script: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "argv", [script, "--executor", "memory"])
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    out = capsys.readouterr().out
    assert out.startswith("# running on InMemoryExecutor") and len(out.splitlines()) > 2


def rounded(result: Result[Any]) -> Result[Any]:
    """The main example's result with its averages to 1e-9: float sums depend on summation
    order, which Spark and polars do not fix."""

    def fix(item: Any) -> Any:
        payload = getattr(item, "payload", None)
        return item if payload is None else attrs.evolve(item, payload=attrs.evolve(payload, celsius=round(payload.celsius, 9)))

    return attrs.evolve(result, events=[fix(e) for e in result.events], raw=[fix(i) for i in result.raw])


def same_example_results(executor: Any) -> None:
    """Every example on ``executor`` gives the in-memory executor's results."""
    from tests.conformance.compare import assert_same_results

    assert_same_results(rounded(hopping_averages.main(executor)), rounded(hopping_averages.main()))
    for got, want in zip(slow_fast_sync.main(executor), slow_fast_sync.main()):
        assert_same_results(got, want)
    for got, want in zip(sessions_and_counts.main(executor), sessions_and_counts.main()):
        assert_same_results(got, want)
    got_by_label, want_by_label = commit_every_event.main(executor), commit_every_event.main()
    for label in want_by_label:
        assert_same_results(got_by_label[label], want_by_label[label])


@pytest.mark.spark
def test_examples_give_the_same_results_on_spark(spark_executor: Any) -> None:
    """The README's main example (and the others) on local Spark, equal to in memory."""
    same_example_results(spark_executor)


def test_examples_give_the_same_results_on_the_vectorised_executor() -> None:
    """The examples on the vectorised executor (polars), equal to in memory."""
    pytest.importorskip("polars")
    from tempo.executors import EmbeddedExecutor
    from tempo.vectorised import VectorisedExecutor

    same_example_results(VectorisedExecutor())
    same_example_results(EmbeddedExecutor())


def test_main_example_runs_embedded_by_default() -> None:
    """The README's first command: no flag, the embedded executor, results at once."""
    run = subprocess.run([sys.executable, str(EXAMPLES / "hopping_averages.py")], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("# running on EmbeddedExecutor")
    assert lines[1].split() == ["window", "sensor", "n", "avg", "°C"]
    assert run.stderr == ""


@pytest.mark.spark
def test_main_example_on_spark_keeps_the_console_clean() -> None:
    """On local Spark the program's output is not interleaved with progress bars or Spark's
    start-up warnings: at most the JVM's own one-line notice remains on stderr."""
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / "hopping_averages.py"), "--executor", "spark"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[:2] == ["# starting local Spark (a JVM; this takes some seconds) ...", "# running on SparkExecutor"]
    assert lines[2].split() == ["window", "sensor", "n", "avg", "°C"]
    noise = [line for line in run.stderr.splitlines() if not line.startswith("WARNING: Using incubator modules")]
    assert noise == [], run.stderr
    assert "[Stage" not in run.stdout + run.stderr
