"""Example 6: visits as sessions, rolling counts, and results that stay in their window.

Page views per user: a visit is a session that ends 30 minutes after the user's last view
(``session(gap=30 min, max_duration=2 h)``). A user who never pauses is cut on the two-hour
grid: first at the first multiple of two hours at least two hours after the visit began (bob,
from 09:00, at 12:00), then every two hours. ``count_window(3)`` averages each user's load
times over every three views in time order, whatever order they arrived in. A tumbling
10-minute count of views, stamped at each window's last tick (``WindowTimestamp.END``), feeds
an hourly total: each 10-minute result falls into the hour its window belongs to, and the
window's output CTI is not pulled back.

Run: python examples/sessions_and_counts.py [--executor memory|spark|auto]  (default: in memory)
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

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
    WindowTimestamp,
)
from tempo.executors import executor_from_args

T0 = datetime(2024, 5, 1, 9, 0)


@attrs.frozen
class View:
    user: str
    page: str
    load_ms: int


@attrs.frozen
class Visit:
    user: str
    views: int
    first: datetime
    until: datetime


@attrs.frozen
class LoadTimes:
    user: str
    avg_ms: float
    since: datetime


@attrs.frozen
class Views:
    views: int


@attrs.frozen
class HourlyViews:
    hour: datetime
    views: int
    windows: int


def _views() -> list[Point[View]]:
    # ann: three views, a 40-minute pause, two more; bob: one view every 20 minutes for three
    # hours (never a pause of 30 minutes), his view at 09:40 arriving after the one at 10:20.
    items = [(0, "ann", "home", 120), (5, "ann", "cart", 340), (12, "ann", "pay", 210)]
    items += [(52, "ann", "home", 90), (60, "ann", "help", 150)]
    items += [(m, "bob", f"p{m}", 100 + m) for m in range(0, 181, 20) if m != 40]
    items.sort(key=lambda i: i[0])
    items.insert(next(i for i, item in enumerate(items) if item[0] > 80), (40, "bob", "p40", 140))
    return [Point(T0 + timedelta(minutes=m), View(u, page, ms)) for m, u, page, ms in items]


SETTINGS = AdvanceTimeSettings(
    AdvanceTimeGenerationSettings(frequency=4, delay=timedelta(minutes=45), advance_to_infinity_on_shutdown=True),
    policy=AdvanceTimePolicy.DROP,
)


def queries() -> tuple[Stream[Visit], Stream[LoadTimes], Stream[HourlyViews]]:
    views = Stream.create("views", _views(), EventShape.POINT, SETTINGS)
    visits = (
        views.group_by(lambda v: v.user)
        .session(timedelta(minutes=30), max_duration=timedelta(hours=2))
        .aggregate(lambda user, w: Visit(user=user, views=w.count(), first=w.start, until=w.end))
    )
    load = (
        views.group_by(lambda v: v.user)
        .count_window(3)
        .aggregate(lambda user, w: LoadTimes(user=user, avg_ms=w.avg(lambda v: v.load_ms), since=w.start))
    )
    hourly = (
        views.tumbling(timedelta(minutes=10))
        .aggregate(lambda w: Views(views=w.count()), timestamp=WindowTimestamp.END)
        .tumbling(timedelta(hours=1))
        .aggregate(lambda w: HourlyViews(hour=w.start, views=w.sum(lambda v: v.views), windows=w.count()))
    )
    return visits, load, hourly


def main(executor: Executor | None = None) -> tuple[Result[Visit], Result[LoadTimes], Result[HourlyViews]]:
    ex = executor or InMemoryExecutor()
    visits, load, hourly = (ex.run(q) for q in queries())
    print("visits (a point at each visit's last tick):")
    for e in sorted(visits.events, key=lambda e: (e.payload.user, e.start)):
        v = e.payload
        print(f"  {v.user}: {v.views} view{'s' * (v.views != 1)} from {v.first:%H:%M} until {v.until:%H:%M}")
    print("load times, every three views in time order:")
    for e in sorted(load.events, key=lambda e: (e.payload.user, e.start)):
        print(f"  {e.payload.user}: {e.payload.avg_ms:.1f} ms over the views from {e.payload.since:%H:%M} to {e.start:%H:%M}")
    print("views per hour, from 10-minute counts stamped at their window's last tick:")
    for e in hourly.events:
        h = e.payload
        print(f"  {h.hour:%H:%M}: {h.views} view{'s' * (h.views != 1)} in {h.windows} ten-minute window{'s' * (h.windows != 1)}")
    return visits, load, hourly


if __name__ == "__main__":
    main(executor_from_args())
