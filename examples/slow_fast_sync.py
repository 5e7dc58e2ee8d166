"""Example 1: a fast stream joined with a slow reference stream that imports its CTIs.

Sensor readings (points) arrive every few seconds and commit time by themselves. Each
device's calibration is a slow reference stream of edges: a new calibration starts an
edge and ends the previous one, perhaps once an hour. A join releases results only up to
the older of its inputs' CTIs, so on its own the reference stream would hold every
result back until its next change. Importing the readings' CTIs into the reference input
(``AdvanceTimeImportSettings("readings")``) lets the join keep pace with the readings.

Run: python examples/slow_fast_sync.py [--executor memory|spark|auto]  (default: in memory)
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from tempo.executors import executor_from_args
from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EdgeEnd,
    EdgeStart,
    EventShape,
    Executor,
    InMemoryExecutor,
    InputItem,
    Point,
    Result,
    Stream,
    TICK,
)

T0 = datetime(2024, 1, 1, 8, 0)


@attrs.frozen
class Reading:
    device: str
    raw: float


@attrs.frozen
class Calibration:
    device: str
    offset: float


@attrs.frozen
class Calibrated:
    device: str
    value: float


def readings() -> list[InputItem[Reading]]:
    """One reading every 5 s for a minute, alternating devices, arriving when taken."""
    out: list[InputItem[Reading]] = []
    for i in range(12):
        t = T0 + timedelta(seconds=5 * i)
        out.append(Point(t, Reading("a" if i % 2 == 0 else "b", 20.0 + i), arrival=t))
    return out


def calibrations() -> list[InputItem[Calibration]]:
    """Calibrations known from 07:00; device b is recalibrated at 08:00:30, announced 2 s ahead."""
    early = T0 - timedelta(hours=1)
    a = Calibration("a", 0.5)
    b1, b2 = Calibration("b", -1.0), Calibration("b", -2.0)
    switch = T0 + timedelta(seconds=30)
    announced = switch - timedelta(seconds=2)
    return [
        EdgeStart(early, a, arrival=early),
        EdgeStart(early, b1, arrival=early),
        EdgeEnd(early, switch, b1, arrival=announced),
        EdgeStart(switch, b2, arrival=announced),
    ]


def query(import_ctis: bool) -> Stream[Calibrated]:
    fast = Stream.create(
        "readings",
        readings(),
        EventShape.POINT,
        # A CTI just after every reading: each one is committed as soon as it arrives.
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, -TICK), policy=AdvanceTimePolicy.DROP),
    )
    slow_settings = (
        AdvanceTimeSettings(import_=AdvanceTimeImportSettings("readings"), policy=AdvanceTimePolicy.ADJUST)
        if import_ctis
        else None  # only its own (here: none) explicit CTIs
    )
    slow = Stream.create("calibrations", calibrations(), EventShape.EDGE, slow_settings)
    return fast.join(
        slow,
        lambda r, c: r.device == c.device,
        lambda r, c: Calibrated(device=r.device, value=r.raw + c.offset),
    )


def main(executor: Executor | None = None) -> tuple[Result[Calibrated], Result[Calibrated]]:
    executor = executor or InMemoryExecutor()
    synced = executor.run(query(import_ctis=True))
    unsynced = executor.run(query(import_ctis=False))
    print("With imported CTIs the join keeps pace with the readings:")
    for e in synced.events:
        print(f"  {e.start:%H:%M:%S}  {e.payload.device}  {e.payload.value:6.2f}")
    print(f"  output CTIs: {len(synced.ctis)}, the last at {synced.ctis[-1]:%H:%M:%S.%f}")
    print(f"  calibrations input: {synced.metrics['calibrations']}")
    print("Without them the reference stream never commits time, so nothing is released:")
    print(f"  events released: {len(unsynced.events)}, output CTIs: {len(unsynced.ctis)}")
    return synced, unsynced


if __name__ == "__main__":
    main(executor_from_args())
