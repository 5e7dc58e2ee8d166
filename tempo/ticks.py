"""Application time as integer ticks.

At the API, timestamps are ``datetime`` (naive means UTC) and durations ``timedelta``.
Inside tempo every timestamp is an ``int`` count of microseconds since the Unix epoch:
one tick is one microsecond, which is Spark's precision, so both executors compute on
the same integers and agree exactly.

Positive infinity (open lifetimes, the final CTI) is ``datetime.max`` (9999-12-31
23:59:59.999999), as StreamInsight uses ``DateTimeOffset.MaxValue``. Arithmetic on
lifetimes saturates there, so an open end stays open when shifted.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Final

TICK: Final = timedelta(microseconds=1)
"""One tick: the smallest step of application time."""

_EPOCH_AWARE: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)
_EPOCH_NAIVE: Final = datetime(1970, 1, 1)

INFINITY: Final = datetime.max.replace(tzinfo=timezone.utc)
"""Positive infinity: the end of an open lifetime and the timestamp of the final CTI."""

INF: Final = 253402300799999999
"""``INFINITY`` in ticks."""

NEG_INF: Final = -(2**62)
"""Before any timestamp: the CTI of an input that has not advanced yet."""


def duration_ticks(d: timedelta) -> int:
    """A timedelta as a whole number of ticks (timedeltas hold whole microseconds)."""
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def to_ticks(t: datetime) -> int:
    """A datetime as ticks since the epoch; naive datetimes are read as UTC."""
    if t.tzinfo is None:
        if t == datetime.max:
            return INF
        return duration_ticks(t - _EPOCH_NAIVE)
    if t == INFINITY:
        return INF
    return duration_ticks(t - _EPOCH_AWARE)


def from_ticks(ticks: int, naive: bool = False) -> datetime:
    """Ticks back to a UTC datetime (naive if asked); ``INF`` becomes ``INFINITY``."""
    if ticks >= INF:
        return datetime.max if naive else INFINITY
    if naive:
        return _EPOCH_NAIVE + timedelta(microseconds=ticks)
    return _EPOCH_AWARE + timedelta(microseconds=ticks)


def is_infinite(t: datetime) -> bool:
    """True for tempo's positive infinity, naive or aware."""
    return t.replace(tzinfo=None) == datetime.max


def add(ticks: int, delta: int) -> int:
    """Saturating addition: infinity stays infinity and nothing passes it."""
    if ticks >= INF:
        return INF
    return min(ticks + delta, INF)

