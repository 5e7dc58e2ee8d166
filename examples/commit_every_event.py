"""Example 3: committing every event at once with a delay of minus one tick.

With a CTI after every event (frequency 1) at the event's own time (delay 0), a point at
``t`` is not yet committed by the CTI at ``t``: a CTI commits only what lies strictly
before it. So the latest event always waits for the next one. A delay of minus one tick
puts each CTI just after its event, and every event is released as soon as it arrives.
Neither input is flushed at its end, so ``result.withheld`` shows what still waits: with delay
0, the last order (tempo also warns about it, with ``UnreleasedResultsWarning``, which this
example silences because it prints the same figures itself).

Run: python examples/commit_every_event.py [--executor memory|spark|auto]  (default: in memory)
"""

from __future__ import annotations

import warnings
from datetime import datetime, timedelta

import attrs

from tempo.executors import executor_from_args
from tempo import (
    TICK,
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventShape,
    Executor,
    InMemoryExecutor,
    Point,
    Result,
    Stream,
    UnreleasedResultsWarning,
)

T0 = datetime(2024, 5, 1, 9, 0)


@attrs.frozen
class Order:
    id: int
    amount: float


ORDERS = [Point(T0 + timedelta(seconds=s), Order(i, 10.0 * (i + 1))) for i, s in enumerate((0, 3, 4, 9))]


def run(delay: timedelta, executor: Executor) -> Result[Order]:
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, delay), policy=AdvanceTimePolicy.DROP)
    large = Stream.create("orders", ORDERS, EventShape.POINT, settings).where(lambda o: o.amount >= 20)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreleasedResultsWarning)  # main() prints result.withheld
        return executor.run(large)


def main(executor: Executor | None = None) -> dict[str, Result[Order]]:
    ex = executor or InMemoryExecutor()
    results = {"delay -1 tick": run(-TICK, ex), "delay 0": run(timedelta(0), ex)}
    for label, result in results.items():
        released = ", ".join(f"#{e.payload.id}@{e.start:%S}s" for e in result.events)
        waiting = result.withheld
        held = "nothing withheld" if waiting is None else f"{waiting.events} withheld from {waiting.waiting_for:%S}s"
        print(f"{label:>13}: released {released}; last CTI {result.ctis[-1]:%H:%M:%S.%f}; {held}")
    return results


if __name__ == "__main__":
    main(executor_from_args())
