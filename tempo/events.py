"""Input items: the events and CTIs an input delivers, and the shape an input declares.

An event carries a lifetime on application time; a ``Cti`` commits time. Any item may
carry an ``arrival`` time, which orders the items of several inputs into one arrival
sequence (see ``docs/semantics.md``, "Arrival order").
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Generic, TypeVar, Union

import attrs

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class EventShape(enum.Enum):
    """The shape of the events an input delivers."""

    POINT = "point"
    """Lifetime ``[t, t + 1 tick)``."""
    INTERVAL = "interval"
    """Lifetime ``[start, end)``, both known on arrival."""
    EDGE = "edge"
    """A start edge opens ``[start, ∞)``; a later end edge sets the end."""


@attrs.frozen
class Point(Generic[T_co]):
    """A point event: lifetime ``[start, start + 1 tick)``."""

    start: datetime
    payload: T_co
    arrival: datetime | None = None


@attrs.frozen
class Interval(Generic[T_co]):
    """An interval event: lifetime ``[start, end)``; ``end`` must be after ``start``."""

    start: datetime
    end: datetime
    payload: T_co
    arrival: datetime | None = None


@attrs.frozen
class EdgeStart(Generic[T_co]):
    """The start edge of an event whose end is not known yet: lifetime ``[start, ∞)``."""

    start: datetime
    payload: T_co
    arrival: datetime | None = None


@attrs.frozen
class EdgeEnd(Generic[T_co]):
    """The end edge closing the start edge with the same ``start`` and ``payload``."""

    start: datetime
    end: datetime
    payload: T_co
    arrival: datetime | None = None


@attrs.frozen
class Cti:
    """A current time increment: nothing later may start before ``timestamp``."""

    timestamp: datetime
    arrival: datetime | None = None


@attrs.frozen
class SubstreamCti:
    """In a query's raw output only: the CTI of one substream ``key`` moved to ``timestamp``,
    ahead of the query's CTI. That key's results starting before it are final and released
    (see ``docs/semantics.md``, "Substreams")."""

    key: object
    timestamp: datetime


@attrs.frozen
class Heartbeat:
    """The arrival clock moved to ``arrival`` with no event: an input with ordering settings
    advances its CTI to ``arrival`` minus its late-arrival tolerance, and so does every
    other such input of the query (see ``docs/semantics.md``, "Progress without events").
    On an input without ordering settings it changes no result: it says only that the input
    has reached ``arrival``, which lets a live query's other inputs through its frontier.
    A table row of kind ``heartbeat`` is one."""

    arrival: datetime


Event = Union[Point[T], Interval[T], EdgeStart[T], EdgeEnd[T]]
"""Any event item."""

InputItem = Union[Point[T], Interval[T], EdgeStart[T], EdgeEnd[T], Cti, Heartbeat]
"""Anything an input may deliver."""

SHAPE_ITEMS: dict[EventShape, tuple[type, ...]] = {
    EventShape.POINT: (Point,),
    EventShape.INTERVAL: (Interval,),
    EventShape.EDGE: (EdgeStart, EdgeEnd),
}
"""Which event items each shape admits (every shape admits ``Cti`` and ``Heartbeat``)."""
