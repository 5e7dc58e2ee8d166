"""The query's output: what the operators emit, released as the output CTIs pass (the release
rule of ``tempo.runtime.release``), with the raw record of what went out in which order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from tempo.runtime.operator import Operator
from tempo.runtime.release_queues import ByStart, KeyedByStart


class Egress(Operator):
    """The query's output: releases an event once an output CTI passes its start.

    Events still waiting when the input ends were never committed and are not released.
    """

    def __init__(self, key_of: Callable[[Any], Any] | None = None) -> None:
        """``key_of``: the substream key of an output payload, when the output keeps one."""
        super().__init__()
        self.waiting: ByStart | KeyedByStart = ByStart()  # of events
        if key_of is not None:
            self.waiting = KeyedByStart(lambda event, _: key_of(event[3]))
        self.held: dict[int, list[Any]] = {}  # eid -> open event not yet released
        self.released_open: dict[int, list[Any]] = {}  # eid -> open event released
        # What went out, in order: an event as [kind, start, end or None, payload, eid], with
        # kind "event" (released closed) or "start" (released open); ("end", event) when a
        # released open event ends; ("cti", t); ("key_cti", t, key).
        self.raw: list[Any] = []
        self.ctis: list[int] = []

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        event = [None, start, end, payload, eid]
        if end is None:
            self.held[eid] = event
        self.waiting.push(start, event)

    def end(self, port: int, eid: int, end: int) -> None:
        event = self.held.pop(eid, None)
        if event is not None:
            event[2] = end  # goes out closed
            return
        event = self.released_open.pop(eid, None)
        if event is not None:
            event[2] = end
            self.raw.append(("end", event))

    def cti(self, port: int, t: int) -> None:
        self._release(self.waiting.pop_before(t))
        self.ctis.append(t)
        self.raw.append(("cti", t))

    def key_cti(self, port: int, key: Any, t: int) -> None:
        if isinstance(self.waiting, KeyedByStart):
            self._release(self.waiting.pop_key_before(key, t))
            self.raw.append(("key_cti", t, key))

    def _release(self, entries: Iterator[tuple[int, int, Any, Any]]) -> None:
        for _, _, event, _ in entries:
            if event[2] is None:
                event[0] = "start"
                del self.held[event[4]]
                self.released_open[event[4]] = event
            else:
                event[0] = "event"
            self.raw.append(event)
