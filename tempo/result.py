"""What running a query returns, the same type from every executor."""

from __future__ import annotations

import enum
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar, Union

import attrs

from tempo.events import Cti, EdgeEnd, EdgeStart, Interval, Point, SubstreamCti

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
    """The time the event was held against: the input's (or its substream's) CTI when the
    item arrived, or for the ordering rules arrival + early window / arrival − late
    tolerance."""
    admitted_as: Any = None
    """For an adjusted event, the item as admitted; None when dropped."""


@attrs.define
class EventCounts:
    """What happened to the events of one input, or of one substream of it.
    ``received == admitted + dropped``; each rejection is also counted under its rule."""

    received: int = 0
    """Event items read (points, intervals, start and end edges; not CTIs or heartbeats)."""
    admitted: int = 0
    """Event items that entered the query, adjusted or not."""
    adjusted: int = 0
    """Admitted after the ADJUST policy changed their lifetime."""
    dropped: int = 0
    """Not admitted (DROP policy, ADJUST of a lifetime wholly before the CTI, an early
    arrival, or an end edge whose start edge was dropped)."""
    early_dropped: int = 0
    """Events dropped for starting more than the early-arrival window after their arrival."""
    late_adjusted: int = 0
    """Events moved up to their arrival minus the late-arrival tolerance."""
    late_dropped: int = 0
    """Events dropped for starting more than the late-arrival tolerance before their arrival."""
    out_of_order_adjusted: int = 0
    """Events of an input with ordering settings moved up to the CTI (ASA's out-of-order
    adjustment). An event both late and out of order counts here and as late."""
    out_of_order_dropped: int = 0
    """Events of an input with ordering settings dropped for starting before the CTI."""


@attrs.define
class SubstreamMetrics(EventCounts):
    """What happened to the events of one substream (one key of ``over=``), and how its own
    time moved."""

    ctis_generated: int = 0
    """Times the key's CTI moved ahead of the input's, by the key's own events (its largest
    start less the out-of-order tolerance)."""
    watermark_delays: list[tuple[datetime, timedelta]] = attrs.Factory(list)
    """``(arrival clock, arrival clock - the key's CTI)`` each time the key's own events
    move its CTI ahead of the input's. Between those moves (and for a key without any) the
    key runs at the input's CTI, whose delays are ``InputMetrics.watermark_delays``."""


@attrs.define
class InputMetrics(EventCounts):
    """What happened at one input: its events' fate, its CTIs, and for inputs with
    ordering settings the watermark delay and the per-substream counts."""

    ctis_generated: int = 0
    """Generated CTIs that advanced the input's time (ordering settings generate too)."""
    ctis_imported: int = 0
    """Imported CTIs that advanced the input's time."""
    ctis_explicit: int = 0
    """Explicit ``Cti`` items that advanced the input's time."""
    ctis_ignored: int = 0
    """CTIs at or before the input's current CTI (CTIs never go back). Ordering settings
    move the CTI continuously and count only the moves, never an ignored CTI."""
    watermark_delays: list[tuple[datetime, timedelta]] = attrs.Factory(list)
    """Inputs with ordering settings: ``(arrival clock, arrival clock - CTI)`` each time
    either changes, before the flush at the end."""
    substreams: dict[Any, SubstreamMetrics] = attrs.Factory(dict)
    """Inputs with substreams (``over=``): each key's counts and its own CTI moves."""


RawItem = Union[Point[T], Interval[T], EdgeStart[T], EdgeEnd[T], Cti, SubstreamCti]


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
    """Inserts, end edges and CTIs (and ``SubstreamCti``) interleaved as the query
    released them."""
    substream_ctis: dict[Any, list[datetime]] = attrs.Factory(dict)
    """When the output keeps a substream key (docs/semantics.md 3.10.4): each key's own
    output CTIs, those that moved it ahead of ``ctis``, in order."""

    def payloads(self) -> list[T]:
        """The payloads of ``events``, in order."""
        return [e.payload for e in self.events]

    def rejections_table(self) -> Any:
        """``rejected`` as a pyarrow Table, one row per rejection, to keep wherever tables go
        (``pyarrow.parquet.write_table``, ``spark.createDataFrame``): input, position, item
        kind, rule, action, the received start/end/arrival, ``cti`` (the time the event was
        held against), the admitted start/end (null when dropped) and the payload's repr."""
        import pyarrow as pa

        rows = []
        for j in self.rejected:
            item, admitted = j.item, j.admitted_as
            rows.append({
                "input": j.input, "position": j.position, "kind": type(item).__name__,
                "rule": j.rule.value, "action": j.action.value,
                "start": getattr(item, "start", None), "end": getattr(item, "end", None),
                "arrival": getattr(item, "arrival", None), "cti": j.cti,
                "admitted_start": getattr(admitted, "start", None), "admitted_end": getattr(admitted, "end", None),
                "payload": repr(getattr(item, "payload", None)),
            })
        names = ["input", "position", "kind", "rule", "action", "start", "end", "arrival", "cti", "admitted_start", "admitted_end", "payload"]
        if not rows:
            return pa.table({n: pa.array([], pa.string()) for n in names})
        return pa.Table.from_pylist(rows)
