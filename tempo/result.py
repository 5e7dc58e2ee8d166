"""What running a query returns, the same type from every executor."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, Generic, TypeVar, Union

import attrs

from tempo.events import Cti, EdgeEnd, EdgeStart, Interval, Point

T = TypeVar("T")


@attrs.frozen(order=False)
class OutputEvent(Generic[T]):
    """One output event with its whole lifetime (output edges are coalesced)."""

    start: datetime
    end: datetime
    """``tempo.INFINITY`` (or naive ``datetime.max``) when the lifetime never closed."""
    payload: T


class Rule(str, enum.Enum):
    """The rule that caught a rejected (dropped or adjusted) input event."""

    START_BEFORE_CTI = "start before CTI"
    """A point, interval or start edge started before the input's current CTI."""
    END_BEFORE_CTI = "end before CTI"
    """An end edge ended before the input's current CTI."""
    START_EDGE_DROPPED = "start edge dropped"
    """An end edge whose start edge had been dropped."""
    EARLY_ARRIVAL = "early arrival"
    """An event starting more than the early-arrival window after its arrival (dropped)."""
    LATE_ARRIVAL = "late arrival"
    """An event starting more than the late-arrival tolerance before its arrival."""


class Action(str, enum.Enum):
    DROPPED = "dropped"
    ADJUSTED = "adjusted"


@attrs.frozen
class Rejection:
    """An input event that a violation policy dropped or adjusted."""

    input: str
    position: int
    """Index of the item within its input (CTIs count)."""
    item: Any
    """The item as it was received."""
    rule: Rule
    action: Action
    cti: datetime
    """The input's CTI when the item arrived."""
    admitted_as: Any = None
    """For an adjusted event, the item as admitted; None when dropped."""


@attrs.define
class InputMetrics:
    """What happened at one input. ``received == admitted + dropped``."""

    received: int = 0
    """Event items read (points, intervals, start and end edges; not CTIs)."""
    admitted: int = 0
    """Event items that entered the query, adjusted or not."""
    adjusted: int = 0
    """Admitted after the ADJUST policy changed their lifetime."""
    dropped: int = 0
    """Not admitted (DROP policy, ADJUST of a lifetime wholly before the CTI, or an end
    edge whose start edge was dropped)."""
    ctis_generated: int = 0
    """Generated CTIs that advanced the input's time."""
    ctis_imported: int = 0
    """Imported CTIs that advanced the input's time."""
    ctis_explicit: int = 0
    """Explicit ``Cti`` items that advanced the input's time."""
    ctis_ignored: int = 0
    """CTIs of any origin at or before the input's current CTI (CTIs never go back)."""
    early_dropped: int = 0
    """Events dropped for arriving too early (ordering settings)."""
    late_adjusted: int = 0
    """Events moved up to arrival minus the late-arrival tolerance (ordering settings)."""
    late_dropped: int = 0
    """Events dropped for arriving too late (ordering settings)."""


RawItem = Union[Point[T], Interval[T], EdgeStart[T], EdgeEnd[T], Cti]


@attrs.frozen
class Result(Generic[T]):
    """The output of one run."""

    events: list[OutputEvent[T]]
    """Released output events in release order."""
    ctis: list[datetime]
    """The query's output CTIs in order."""
    metrics: dict[str, InputMetrics]
    """Per input name."""
    rejected: list[Rejection]
    """Every dropped or adjusted input event, with the rule that caught it."""
    raw: list[RawItem[T]]
    """Inserts, end edges and CTIs interleaved as the query released them."""

    def payloads(self) -> list[T]:
        """The payloads of ``events``, in order."""
        return [e.payload for e in self.events]
