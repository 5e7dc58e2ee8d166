"""What a query releases, and the ``Result`` made of it: one assembly for both executors.

**The release rule.** An output event is released by the first output CTI past its start
or, when the output keeps a substream key (``Query.substream_key``), by the first CTI of its
own key past its start, whichever comes first. Events no such CTI passes are withheld.

The executors apply the rule at different moments, and that difference is real: the
reference engine's egress (``tempo.runtime.egress.Egress``) applies it as the CTIs come
and sees an edge event go out as a start edge and later its end; Spark sees whole lifetimes
after the run and orders them by ``release_order``. Both then hand the released events and
the output's CTI messages, in release order, to a ``ResultAssembly``.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from datetime import datetime
from typing import Any, Generic, TypeVar

from tempo.events import Cti, EdgeEnd, EdgeStart, Interval, Point, SubstreamCti
from tempo.result import InputMetrics, OutputEvent, RawItem, Rejection, Result, Withheld
from tempo.ticks import INF, TICK

T = TypeVar("T")


def release_order(
    events: list[tuple[int, int, Any]], messages: list[tuple[Any, int]], key_of: Callable[[Any], Any] | None
) -> list[tuple[int, int, Any, int]]:
    """The released ones of ``events`` (start, end, payload), each with the index in
    ``messages`` of the CTI that releases it by the release rule. ``messages`` are the
    output's CTIs as (``MERGED``, t), with its substreams' as (key, t) when ``key_of`` gives an
    output payload's key, in the order they were emitted. In release order, then start order."""
    from tempo.runtime.replay import MERGED  # the replay builds on the engine, which builds on this

    merged: tuple[list[int], list[int]] = ([], [])  # (times, indexes in messages)
    keyed: dict[Any, tuple[list[int], list[int]]] = {}
    for index, (k, t) in enumerate(messages):
        times, at = merged if k is MERGED else keyed.setdefault(k, ([], []))
        times.append(t)
        at.append(index)
    out: list[tuple[int, int, Any, int]] = []
    for s, e, pl in events:
        by = [merged] if key_of is None else [merged, keyed.get(key_of(pl), ([], []))]
        found = [at[i] for times, at in by for i in [bisect.bisect_right(times, s)] if i < len(times)]
        if found:
            out.append((s, e, pl, min(found)))
    out.sort(key=lambda ev: (ev[3], ev[0], ev[1]))
    return out


class ResultAssembly(Generic[T]):
    """A ``Result`` built from what the output released, given in release order: events
    (``event``), the end edges of released open events (``end_edge``: the reference engine
    only) and CTIs (``cti``, ``key_cti``). Times are in ticks; ``to_datetime`` turns them
    into the query's datetimes."""

    def __init__(self, to_datetime: Callable[[int], datetime]) -> None:
        self.dt = to_datetime
        self.events: list[OutputEvent[T]] = []
        self.raw: list[RawItem[T]] = []
        self.substream_ctis: dict[Any, list[datetime]] = {}

    def event(self, start: int, end: int, payload: T, open_edge: bool) -> None:
        """A released event: an open start edge (``open_edge``: ``end`` is infinity), a point
        (one tick long) or an interval."""
        begin = self.dt(start)
        stop = begin + TICK if end == start + 1 and not open_edge else self.dt(end)
        self.events.append(OutputEvent(begin, stop, payload))
        if open_edge:
            self.raw.append(EdgeStart(begin, payload))
        elif end == start + 1:
            self.raw.append(Point(begin, payload))
        else:
            self.raw.append(Interval(begin, stop, payload))

    def end_edge(self, start: int, end: int, payload: T) -> None:
        """The end of a released open event (its ``event`` came first)."""
        self.raw.append(EdgeEnd(self.dt(start), self.dt(end), payload))

    def cti(self, t: int) -> None:
        self.raw.append(Cti(self.dt(t)))

    def key_cti(self, key: Any, t: int) -> None:
        """A CTI of one substream key of the output."""
        at = self.dt(t)
        self.raw.append(SubstreamCti(key, at))
        self.substream_ctis.setdefault(key, []).append(at)

    def released(self, events: list[tuple[int, int, Any, int]], messages: list[tuple[Any, int]]) -> None:
        """``release_order``'s events, each given before the CTI that released it."""
        from tempo.runtime.replay import MERGED

        i = 0
        for index, (key, t) in enumerate(messages):
            while i < len(events) and events[i][3] == index:
                s, e, pl, _ = events[i]
                self.event(s, e, pl, open_edge=e >= INF)
                i += 1
            if key is MERGED:
                self.cti(t)
            else:
                self.key_cti(key, t)

    def result(
        self,
        ctis: list[int],
        metrics: dict[str, InputMetrics],
        rejected: list[Rejection],
        payload_type: type[T],
        input_types: dict[str, type],
        withheld: Withheld | None = None,
    ) -> Result[T]:
        """The result, with the output's CTIs (``ctis``, in ticks) and each input's metrics and rejections."""
        return Result(
            self.events,
            [self.dt(t) for t in ctis],
            metrics,
            rejected,
            self.raw,
            self.substream_ctis,
            withheld,
            payload_type,
            input_types,
        )
