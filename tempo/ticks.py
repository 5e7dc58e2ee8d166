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

LONGEST_DURATION: Final = INF - (-62135596800000000)
"""From ``datetime.min`` to infinity in ticks: a duration at least this long takes any time to
infinity (and any shift back below every time)."""

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


def format_time(t: int | datetime) -> str:
    """A time as people read it: ``2024-01-01 10:00:05`` (fractions of a second only when
    present, ``+00:00`` never: tempo's times are UTC), ``infinity`` for ``INFINITY`` and
    ``-infinity`` before any time."""
    ticks = to_ticks(t) if isinstance(t, datetime) else t
    if ticks >= INF:
        return "infinity"
    if ticks <= NEG_INF:
        return "-infinity"
    text = from_ticks(ticks, naive=True).isoformat(sep=" ")
    return text.rstrip("0").rstrip(".") if "." in text else text


_UNITS: Final = ((86_400_000_000, "day"), (3_600_000_000, "h"), (60_000_000, "min"))


def format_duration(d: int | timedelta) -> str:
    """A duration as people read it: ``5 s``, ``-1 min``, ``1 h 30 min``, ``250 ms``,
    ``1 µs`` (never ``-1 day, 23:59:00``)."""
    ticks = duration_ticks(d) if isinstance(d, timedelta) else d
    if ticks == 0:
        return "0 s"
    sign, rest = ("-" if ticks < 0 else ""), abs(ticks)
    parts: list[str] = []
    for size, unit in _UNITS:
        if rest >= size:
            count, rest = divmod(rest, size)
            parts.append(f"{count} {unit}{'s' if unit == 'day' and count > 1 else ''}")
    if rest:
        if rest >= 1_000_000 or parts:
            parts.append(f"{rest / 1_000_000:.6f}".rstrip("0").rstrip(".") + " s")
        elif rest % 1000 == 0:
            parts.append(f"{rest // 1000} ms")
        else:
            parts.append(f"{rest} µs")
    return sign + " ".join(parts)
