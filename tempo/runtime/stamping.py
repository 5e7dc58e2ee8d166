"""Inputs in ingestion or processing time (``tempo.clocks``): their checked items stamped.

Every executor takes an input's items through ``prepare`` (tables and item lists, and a live
query's rows a micro-batch at a time), so this one step, applied to what ``prepare`` gives,
stamps them alike everywhere: each event starts at its reading (its arrival, plus the
clock's lag, or the clock's reading), which never decreases; an interval or a point keeps
its length, a start edge opens at its reading and its end edge ends at its own reading (one
tick after the start at the least). The items were checked with their own times first;
what follows them (the ingress: CTIs from the stamps) sees only the stamps.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from typing import Any

from tempo.clocks import ScriptedClock, SystemClock, TimeDomain, arrival_lag
from tempo.errors import InputError, InputRule
from tempo.plan.nodes import SourceNode
from tempo.runtime.ingress import CTI, END, HEARTBEAT, START, Prepared
from tempo.ticks import duration_ticks, to_ticks


class Stamper:
    """The stamping of one input; its state (the latest reading, the start edges still open,
    how many scripted readings are used) carries on from one batch of items to the next and
    is saved with a live query's state."""

    def __init__(self, node: SourceNode) -> None:
        self.name = node.name
        self.notion = node.notion
        lag = arrival_lag(node.notion)
        self.lag = None if lag is None else duration_ticks(lag)
        self.latest: int | None = None
        self.opened: dict[int, list[tuple[Any, int]]] = {}  # an edge's own start -> [(payload, stamped start)]
        self.used = 0  # scripted readings taken

    def state(self) -> tuple[int | None, dict[int, list[tuple[Any, int]]], int]:
        return self.latest, self.opened, self.used

    def restore(self, state: tuple[int | None, dict[int, list[tuple[Any, int]]], int]) -> None:
        self.latest, self.opened, self.used = state

    def _reading(self, rec: Prepared) -> int:
        if self.lag is not None:
            return rec[0] + self.lag  # the item's arrival (prepare required one)
        clock = getattr(self.notion, "clock", None)
        if isinstance(clock, ScriptedClock):
            if self.used >= len(clock.times):
                raise InputError(
                    self.name, rec[5], rec[6], "the ScriptedClock has no reading left for this item", InputRule.CLOCK_EXHAUSTED
                )
            self.used += 1
            return to_ticks(clock.times[self.used - 1])
        assert isinstance(clock, SystemClock)
        return to_ticks(datetime.now(timezone.utc))

    def stamp(self, records: Iterable[Prepared]) -> Iterator[Prepared]:
        for rec in records:
            arrival, kind, start, end, payload, position, item = rec
            if kind == HEARTBEAT:
                yield rec
                continue
            if kind == CTI:
                raise InputError(
                    self.name,
                    position,
                    item,
                    f"an input in {self.notion.domain.value} takes no Cti items: its CTIs follow its stamps",
                    InputRule.STAMPED_CTI,
                )
            reading = self._reading(rec)
            if self.latest is not None and reading < self.latest:
                reading = self.latest  # readings never go back
            self.latest = reading
            if kind == START:
                self.opened.setdefault(start, []).append((payload, reading))
                yield (arrival, kind, reading, end, payload, position, item)
            elif kind == END:
                waiting = self.opened[start]  # prepare() has paired it with its start edge
                index = next(i for i, (p, _) in enumerate(waiting) if p == payload)
                opened = waiting.pop(index)[1]
                if not waiting:
                    del self.opened[start]
                yield (arrival, kind, opened, max(reading, opened + 1), payload, position, item)
            else:  # a point or an interval keeps its length
                yield (arrival, kind, reading, reading + (end - start), payload, position, item)


def stamped(node: SourceNode, records: Iterator[Prepared]) -> Iterator[Prepared]:
    """``records`` of ``node`` (from ``prepare``), stamped when its input is in ingestion or
    processing time."""
    return records if node.time is TimeDomain.EVENT else Stamper(node).stamp(records)
