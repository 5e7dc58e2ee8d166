"""Example 2: per-sensor hopping-window averages, after correcting the sensors' clock.

The sensors' clock runs 2 minutes behind, so ``shift_event_time`` moves every reading
(and every CTI) 2 minutes forward. CTIs are generated after every 10 readings, 5 s behind
the 10th reading's time; readings arriving more than 5 s late are dropped (DROP) and
reported. Each sensor gets a 1-minute average every 30 s.

Run: python examples/hopping_averages.py [--executor memory|spark|auto]  (default: in memory, at once;
spark: local Spark, which first takes some seconds to start)
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import attrs

from tempo.executors import executor_from_args
from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventShape,
    Executor,
    InMemoryExecutor,
    Point,
    Result,
    Stream,
)

T0 = datetime(2024, 3, 1, 12, 0)


@attrs.frozen
class Reading:
    sensor: str
    celsius: float


@attrs.frozen
class Average:
    sensor: str
    window_start: datetime
    readings: int
    celsius: float


def readings(seed: int = 7) -> list[Point[Reading]]:
    """Three sensors, one reading each every 4 s for 3 minutes; a few arrive late."""
    rnd = random.Random(seed)
    out = []
    for i in range(45):
        for j, sensor in enumerate(("north", "south", "east")):
            t = T0 + timedelta(seconds=4 * i + j)
            out.append(Point(t, Reading(sensor, round(18 + j + rnd.random() * 4, 2))))
    # Late arrivals: move every 25th reading back in the arrival order by 8-10 positions,
    # which is 10+ seconds of lateness: beyond the 5 s delay, so DROP rejects them.
    for k in range(25, len(out), 25):
        late = out.pop(k)
        out.insert(k + 9, late)
    return out


def query() -> Stream[Average]:
    settings = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(frequency=10, delay=timedelta(seconds=5), advance_to_infinity_on_shutdown=True),
        policy=AdvanceTimePolicy.DROP,
    )
    return (
        Stream.create("readings", readings(), EventShape.POINT, settings)
        .shift_event_time(timedelta(minutes=2))
        .group_by(lambda r: r.sensor)
        .hopping(size=timedelta(minutes=1), hop=timedelta(seconds=30))
        .aggregate(lambda sensor, w: Average(sensor=sensor, window_start=w.start, readings=w.count(), celsius=w.avg(lambda r: r.celsius)))
    )


def main(executor: Executor | None = None) -> Result[Average]:
    result = (executor or InMemoryExecutor()).run(query())
    print(f"{'window':>8}  {'sensor':<6} {'n':>3}  {'avg °C':>7}")
    for e in result.events:
        a = e.payload
        print(f"{a.window_start:%H:%M:%S}  {a.sensor:<6} {a.readings:>3}  {a.celsius:7.2f}")
    m = result.metrics["readings"]
    print(f"received {m.received}, admitted {m.admitted}, dropped {m.dropped}, CTIs generated {m.ctis_generated}")
    for r in result.rejected:
        print(
            f"  {r.action.value}: #{r.position} {r.item.payload.sensor} at {r.item.start:%H:%M:%S} ({r.rule.value}, CTI {r.cti:%H:%M:%S})"
        )
    return result


if __name__ == "__main__":
    main(executor_from_args())
