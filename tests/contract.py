"""Checks of the emission contract on a result's raw output, shared by the test modules."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from tempo import Cti, EdgeEnd, EdgeStart, Interval, Point, Result, SubstreamCti, is_infinite


def check_emission_contract(result: Result[Any]) -> None:
    """Raw output obeys the CTI rule; CTIs strictly increase; ends follow their starts."""
    cti: datetime | None = None
    open_edges: Counter[tuple[datetime, Any]] = Counter()
    for item in result.raw:
        if isinstance(item, Cti):
            assert cti is None or item.timestamp > cti, f"CTI {item.timestamp} not after {cti}"
            cti = item.timestamp
        elif isinstance(item, (Point, Interval, EdgeStart)):
            assert cti is None or item.start >= cti, f"{item} starts before the released CTI {cti}"
            if isinstance(item, Interval):
                assert item.end > item.start
            if isinstance(item, EdgeStart):
                open_edges[(item.start, _key(item.payload))] += 1
        elif isinstance(item, EdgeEnd):
            assert cti is None or item.end >= cti, f"{item} ends before the released CTI {cti}"
            assert item.end > item.start
            k = (item.start, _key(item.payload))
            assert open_edges[k] > 0, f"{item} has no released start edge"
            open_edges[k] -= 1
    assert [c.timestamp for c in result.raw if isinstance(c, Cti)] == result.ctis
    # Each released item is followed by the CTI that released it: the output's, or (when the
    # output keeps a substream key) its key's, past its start.
    later: datetime | None = None
    for item in reversed(result.raw):
        if isinstance(item, (Cti, SubstreamCti)):
            later = item.timestamp if later is None else max(later, item.timestamp)
        elif isinstance(item, (Point, Interval, EdgeStart)):
            assert later is not None and item.start < later, f"{item} released without a CTI past its start"
    for ev in result.events:
        assert ev.end > ev.start or is_infinite(ev.end)


def _key(payload: Any) -> Any:
    try:
        hash(payload)
        return payload
    except TypeError:
        return repr(payload)


def lifetimes(result: Result[Any]) -> Counter[tuple[datetime, datetime, Any]]:
    """The output events as a multiset of (start, end, payload)."""
    return Counter((e.start, e.end, _key(e.payload)) for e in result.events)
