"""Flink's notions of time, per input: where an event's start comes from.

``EventTime`` (the default) takes it from the data. ``IngestionTime`` stamps each event with
its arrival at the input, and ``ProcessingTime`` with a clock reading as the input processes
it; for both, the input's CTIs follow the stamps, which never decrease, so nothing is ever
late (docs/semantics.md 3.11). A query mixes time domains only where it says so: a stream of
ingestion time meets one of event time after ``Stream.as_event_time()``, and processing time
meets nothing else.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta, timezone
from typing import Any

import attrs

from tempo.errors import QueryBuildError


class TimeDomain(enum.Enum):
    """Which notion of time a stream's lifetimes are in."""

    EVENT = "event time"
    INGESTION = "ingestion time"
    PROCESSING = "processing time"


class Clock:
    """Where processing time is read: one reading per input item, in the input's order."""

    def readings(self) -> Iterator[datetime | None]:
        """A fresh reader for one run: ``next`` gives the reading for the next item (None:
        the item's arrival plus ``lag``, see ``ArrivalClock``)."""
        raise NotImplementedError


def _check_lag(_: object, __: Any, value: object) -> None:
    if not isinstance(value, timedelta):
        raise QueryBuildError(f"ArrivalClock(lag=...) takes a timedelta, got {value!r}")


def _check_times(_: object, __: Any, value: tuple[object, ...]) -> None:
    for t in value:
        if not isinstance(t, datetime):
            raise QueryBuildError(f"ScriptedClock takes datetimes, got {t!r}")


@attrs.frozen
class ArrivalClock(Clock):
    """The item's arrival plus ``lag``: a repeatable clock (a fixed processing delay), the
    one batch runs over recorded arrivals use."""

    lag: timedelta = attrs.field(default=timedelta(0), validator=_check_lag)

    def readings(self) -> Iterator[datetime | None]:
        while True:
            yield None


@attrs.frozen
class ScriptedClock(Clock):
    """The given readings in turn, one per item (for tests)."""

    times: Sequence[datetime] = attrs.field(converter=tuple, validator=_check_times)

    def readings(self) -> Iterator[datetime | None]:
        yield from self.times


@attrs.frozen
class SystemClock(Clock):
    """The machine's clock (UTC, time-zone aware): not repeatable."""

    def readings(self) -> Iterator[datetime | None]:
        while True:
            yield datetime.now(timezone.utc)


@attrs.frozen
class TimeNotion:
    """Base of the per-input time notions."""

    @property
    def domain(self) -> TimeDomain:
        raise NotImplementedError


@attrs.frozen
class EventTime(TimeNotion):
    """The start comes from the data (the default)."""

    @property
    def domain(self) -> TimeDomain:
        return TimeDomain.EVENT


def _check_every(_: object, __: Any, value: timedelta) -> None:
    if not isinstance(value, timedelta) or value < timedelta(0):
        raise QueryBuildError(f"cti_every must be a timedelta of zero or more, got {value!r}")


@attrs.frozen
class IngestionTime(TimeNotion):
    """Each event starts at its arrival at the input (intervals keep their duration; an end
    edge ends at its own arrival). A CTI follows the stamps: at each new stamp when
    ``cti_every`` is zero, else at the first stamp in each later ``cti_every`` period (3.3).
    ``advance_to_infinity_on_shutdown`` flushes at the end, as in ``AdvanceTimeGenerationSettings``."""

    cti_every: timedelta = attrs.field(default=timedelta(0), validator=_check_every)
    advance_to_infinity_on_shutdown: bool = False

    @property
    def domain(self) -> TimeDomain:
        return TimeDomain.INGESTION


def arrival_lag(notion: TimeNotion) -> timedelta | None:
    """How far after its arrival an input in ``notion`` stamps each item: zero in ingestion
    time, the lag on an ``ArrivalClock``; None when the stamps do not come from arrivals."""
    if isinstance(notion, IngestionTime):
        return timedelta(0)
    clock = getattr(notion, "clock", None)
    return clock.lag if isinstance(clock, ArrivalClock) else None


@attrs.frozen
class ProcessingTime(TimeNotion):
    """Each event starts at the ``clock``'s reading when the input processes it (readings are
    made non-decreasing); a CTI follows every reading, so windows close as the clock passes
    their end. Repeatable only with a repeatable clock (``ArrivalClock``, ``ScriptedClock``)."""

    clock: Clock = attrs.field(factory=SystemClock)
    advance_to_infinity_on_shutdown: bool = False

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.clock, Clock):
            raise QueryBuildError(f"ProcessingTime(clock=...) takes a tempo Clock, got {self.clock!r}")

    @property
    def domain(self) -> TimeDomain:
        return TimeDomain.PROCESSING
