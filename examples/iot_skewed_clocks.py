"""Example 4: readings per device per minute when one device's clock runs ahead.

Four thermometers report every 20 s from 12:00:00 to 12:03:59, 5 s apart (kitchen at :00,
garage at :05, cellar at :10, attic at :15 of each 20 s round), each reading stamped with
the device's own clock. The garage is switched on at 12:02 and its clock runs 90 s ahead
(within the 5-minute early-arrival window, so its readings are accepted). The cellar's
readings come over a slow network: 1-4 s late, and the one taken at 12:01:30 is 12 s late.

The input takes Azure Stream Analytics' default event-ordering policies, as CTIs
(``EventOrderingSettings``: out-of-order tolerance 0, late-arrival tolerance 5 s,
early-arrival window 5 min) with the DROP policy, and the query counts readings per device
per one-minute tumbling window. It runs twice:

* with one global watermark: the CTI is the largest admitted start (or the arrival clock
  less 5 s if later), so the garage's first reading moves it 90 s ahead of every other
  device, whose readings from then on are out of order and dropped;
* with substreams over the device (``Stream.create(..., over=lambda r: r.device)``): each
  device has its own CTI, so only the cellar's reading that is truly late (more than 5 s)
  is dropped. The count per device keeps the device, so each device's minutes are also
  released on its own CTI (``SubstreamCti`` in ``result.raw``), as soon as its own
  readings pass the minute, instead of waiting for the input's CTI, which must allow
  for a device not heard from yet (the arrival clock less 5 s).

For each run it prints the per-device per-minute counts, the input's metrics (dropped and
adjusted by rule, the watermark delay: arrival clock minus CTI), the rejections per device
(from the substreams' counts, or from ``result.rejected`` for the global watermark), with
substreams each device's own CTI moves, delays and the minutes they released, and closes
with what the substreams saved.

Run: python examples/iot_skewed_clocks.py [--executor memory|spark|auto]  (default: in memory, at once;
spark: local Spark, which first takes some seconds to start)
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

import attrs

from tempo.executors import executor_from_args
from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventCounts,
    EventOrderingSettings,
    EventShape,
    Executor,
    Cti,
    InputMetrics,
    Point,
    Result,
    Stream,
    SubstreamCti,
)

T0 = datetime(2024, 3, 1, 12, 0)
DEVICES = ("kitchen", "garage", "cellar", "attic")
OFFSET = {"kitchen": 0, "garage": 5, "cellar": 10, "attic": 15}
"""Seconds into each 20 s round at which the device takes its reading."""
ROUNDS = 12
GARAGE_ON = 6
"""The round (12:02:00) from which the garage reports."""
GARAGE_AHEAD = timedelta(seconds=90)
CELLAR_DELAYS = (1, 3, 2, 4)
"""The cellar's network delay in seconds, by round modulo 4 ..."""
CELLAR_LATE = (4, 12)
"""... except in round 4 (the reading taken at 12:01:30), which arrives 12 s late."""


@attrs.frozen
class Reading:
    device: str
    device_time: datetime
    """The time on the device's own clock: the event's start."""
    celsius: float


@attrs.frozen
class PerMinute:
    device: str
    minute: datetime
    readings: int


def readings() -> list[Point[Reading]]:
    """The readings in arrival order, each stamped with its device's clock."""
    out: list[Point[Reading]] = []
    for i in range(ROUNDS):
        for j, device in enumerate(DEVICES):
            if device == "garage" and i < GARAGE_ON:
                continue
            taken = T0 + timedelta(seconds=20 * i + OFFSET[device])
            stamp = taken + GARAGE_AHEAD if device == "garage" else taken
            delay = 0
            if device == "cellar":
                delay = CELLAR_LATE[1] if i == CELLAR_LATE[0] else CELLAR_DELAYS[i % 4]
            celsius = round(15 + 3 * j + 0.25 * i, 2)
            out.append(Point(stamp, Reading(device, stamp, celsius), arrival=taken + timedelta(seconds=delay)))
    out.sort(key=lambda p: p.arrival or T0)  # every arrival differs, so the order is fixed
    return out


def query(substreams: bool) -> Stream[PerMinute]:
    settings = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True),
        policy=AdvanceTimePolicy.DROP,
        ordering=EventOrderingSettings(
            out_of_order_tolerance=timedelta(0),
            late_arrival_tolerance=timedelta(seconds=5),
            early_arrival_window=timedelta(minutes=5),
        ),
    )
    if substreams:
        stream = Stream.create("readings", readings(), EventShape.POINT, settings, over=lambda r: r.device)
    else:
        stream = Stream.create("readings", readings(), EventShape.POINT, settings)
    return (
        stream.group_by(lambda r: r.device)
        .tumbling(timedelta(minutes=1))
        .aggregate(lambda device, w: PerMinute(device=device, minute=w.start, readings=w.count()))
    )


def run(executor: Executor, substreams: bool) -> Result[PerMinute]:
    return executor.run(query(substreams))


def counts(result: Result[PerMinute]) -> dict[tuple[str, datetime], int]:
    """(device, minute) -> readings, whatever order the executor released them in."""
    return {(e.payload.device, e.payload.minute): e.payload.readings for e in result.events}


def released_by_own_cti(result: Result[PerMinute]) -> Counter[str]:
    """Per device, the minutes released by the device's own CTI (a ``SubstreamCti``)
    rather than by the input's: in ``raw`` each CTI follows what it released."""
    own: Counter[str] = Counter()
    waiting: list[str] = []
    for item in result.raw:
        if isinstance(item, SubstreamCti):
            own.update(waiting)
            waiting = []
        elif isinstance(item, Cti):
            waiting = []
        else:
            waiting.append(item.payload.device)
    return own


def fates(c: EventCounts) -> str:
    return (
        f"received {c.received}, admitted {c.admitted}; "
        f"dropped {c.dropped} (early {c.early_dropped}, late {c.late_dropped}, out of order {c.out_of_order_dropped}); "
        f"adjusted {c.adjusted} (late {c.late_adjusted}, out of order {c.out_of_order_adjusted})"
    )


def seconds(d: timedelta) -> str:
    return f"{d.total_seconds():+.0f} s"


def report(title: str, result: Result[PerMinute]) -> None:
    print(f"== {title} ==")
    table = counts(result)
    print("  minute   " + "".join(f"{d:>9}" for d in DEVICES))
    for minute in sorted({m for _, m in table}):
        print(f"  {minute:%H:%M}    " + "".join(f"{table.get((d, minute), '-'):>9}" for d in DEVICES))
    m: InputMetrics = result.metrics["readings"]
    print(f"  input: {fates(m)}; CTIs generated {m.ctis_generated}")
    delays = [d for _, d in m.watermark_delays]
    print(f"  watermark delay (arrival clock - CTI): min {seconds(min(delays))}, max {seconds(max(delays))}, over {len(delays)} samples")
    if m.substreams:
        own = released_by_own_cti(result)
        minutes = Counter(e.payload.device for e in result.events)
        for device in DEVICES:
            sub = m.substreams[device]
            print(f"  substream {device:<8} {fates(sub)}")
            own_delays = [d for _, d in sub.watermark_delays]
            print(
                f"            {'':<8} own CTI moved {sub.ctis_generated} times (delay {seconds(min(own_delays))} to "
                f"{seconds(max(own_delays))}); {own[device]} of {minutes[device]} minutes released by it"
            )
    else:
        rules: dict[str, Counter[str]] = {d: Counter() for d in DEVICES}
        for r in result.rejected:
            rules[r.item.payload.device][f"{r.action.value} ({r.rule.value})"] += 1
        for device in DEVICES:
            said = ", ".join(f"{n} {what}" for what, n in sorted(rules[device].items())) or "none rejected"
            print(f"  rejected  {device:<8} {said}")


def main(argv: list[str] | None = None) -> tuple[Result[PerMinute], Result[PerMinute]]:
    """Run both ways on the executor the arguments name; return (global, substreams)."""
    executor = executor_from_args(argv)
    global_ = run(executor, substreams=False)
    by_device = run(executor, substreams=True)
    report("one global watermark", global_)
    report("substreams over the device", by_device)
    g, s = global_.metrics["readings"], by_device.metrics["readings"]
    print(
        f"substreams: {s.dropped} reading(s) dropped ({s.late_dropped} truly late), {s.adjusted} adjusted; "
        f"global: {g.dropped} dropped ({g.late_dropped} late, {g.out_of_order_dropped} out of order behind "
        f"the garage's clock), {g.adjusted} adjusted"
    )
    own = sum(released_by_own_cti(by_device).values())
    print(f"substreams: {own} of {len(by_device.events)} device-minutes released by the device's own CTI, before the input's")
    return global_, by_device


if __name__ == "__main__":
    main()
