"""How an input advances application time: StreamInsight's AdvanceTimeSettings.

The rules these settings drive are stated once, in ``tempo/runtime/ingress.py`` (the
reference implementation) and in ``docs/semantics.md``.
"""

from __future__ import annotations

import enum
from typing import Any
from datetime import timedelta

import attrs

from tempo.errors import QueryBuildError


class AdvanceTimePolicy(enum.Enum):
    """What happens to an event that breaks the CTI rule."""

    DROP = "drop"
    """The event is not admitted; it is counted and listed in ``result.rejected``."""
    ADJUST = "adjust"
    """A start before the CTI moves to the CTI if the lifetime still reaches past it
    (a point moves to the CTI); an end edge before the CTI ends at the CTI. An
    interval that ends at or before the CTI is dropped."""


def _check_frequency(_: object, __: attrs.Attribute[int | timedelta | None], value: int | timedelta | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, timedelta)):
        raise QueryBuildError(f"AdvanceTimeGenerationSettings.frequency must be an event count (int) or a timedelta, got {value!r}")
    if isinstance(value, int) and value <= 0:
        raise QueryBuildError(f"AdvanceTimeGenerationSettings.frequency must be a positive event count, got {value}")
    if isinstance(value, timedelta) and value <= timedelta(0):
        raise QueryBuildError(f"AdvanceTimeGenerationSettings.frequency must be a positive time span, got {value}")
    if isinstance(value, timedelta) and value % timedelta(microseconds=1):
        raise QueryBuildError("frequency must be a whole number of ticks (microseconds)")


def _check_delay(_: object, __: attrs.Attribute[timedelta], value: timedelta) -> None:
    if not isinstance(value, timedelta):
        raise QueryBuildError(f"AdvanceTimeGenerationSettings.delay must be a timedelta, got {value!r}")


@attrs.frozen
class AdvanceTimeGenerationSettings:
    """Generate CTIs from the input's own events.

    ``frequency``: an ``int`` N puts a CTI after every N-th received event (end edges are
    not counted); a ``timedelta`` T puts one whenever an event's start moves the input
    into a later T-aligned period than any before. The CTI's timestamp is the triggering
    event's start minus ``delay``; a delay of minus one tick commits the event at once.
    ``advance_to_infinity_on_shutdown`` enqueues a CTI at infinity when the input ends,
    which flushes every operator's state.

    ``frequency=None`` generates no CTIs from events: with
    ``advance_to_infinity_on_shutdown=True`` the input's only CTI is the one at infinity
    when it ends. That is the setting for replaying a bounded history when only the final
    result matters: nothing can be late, so nothing is dropped or adjusted.
    """

    frequency: int | timedelta | None = attrs.field(default=None, validator=_check_frequency)
    delay: timedelta = attrs.field(default=timedelta(0), validator=_check_delay)
    advance_to_infinity_on_shutdown: bool = False


@attrs.frozen
class AdvanceTimeImportSettings:
    """Take the CTIs of another input of the same query, interleaved by arrival."""

    stream_name: str


def _check_tolerance(_: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None and attribute.name != "out_of_order_tolerance":
        return
    if not isinstance(value, timedelta):
        raise QueryBuildError(f"EventOrderingSettings.{attribute.name} must be a timedelta, got {value!r}")
    if value < timedelta(0):
        raise QueryBuildError(f"EventOrderingSettings.{attribute.name} must not be negative, got {value}")
    if value % timedelta(microseconds=1):
        raise QueryBuildError(f"EventOrderingSettings.{attribute.name} must be a whole number of ticks (microseconds)")


@attrs.frozen
class EventOrderingSettings:
    """Azure Stream Analytics' event-ordering policies, as CTIs (docs/semantics.md 3.10).

    Every item needs an arrival time. In arrival order, an event starting more than
    ``early_arrival_window`` after its arrival is dropped (under either policy) and moves no
    time; one starting more than ``late_arrival_tolerance`` before its arrival is late: the
    policy drops it or moves it to arrival minus the tolerance; then the usual CTI check
    applies, the CTI being the largest admitted start minus ``out_of_order_tolerance``, or
    arrival minus the late-arrival tolerance if that is later. ``None`` turns the early
    window or the late tolerance off. The defaults are ASA's.
    """

    out_of_order_tolerance: timedelta = attrs.field(default=timedelta(0), validator=_check_tolerance)
    late_arrival_tolerance: timedelta | None = attrs.field(default=timedelta(seconds=5), validator=_check_tolerance)
    early_arrival_window: timedelta | None = attrs.field(default=timedelta(minutes=5), validator=_check_tolerance)

    def ticks(self) -> tuple[int, int | None, int | None]:
        """(out-of-order tolerance, late-arrival tolerance, early-arrival window) in ticks."""
        from tempo.ticks import duration_ticks

        late, early = self.late_arrival_tolerance, self.early_arrival_window
        return (
            duration_ticks(self.out_of_order_tolerance),
            None if late is None else duration_ticks(late),
            None if early is None else duration_ticks(early),
        )


@attrs.frozen
class AdvanceTimeSettings:
    """Generation and/or import of CTIs for one input, and the violation policy.

    At least one of ``generation`` and ``import_`` must be given; with both, the input's
    CTI is whichever of the two is later.
    """

    generation: AdvanceTimeGenerationSettings | None = None
    import_: AdvanceTimeImportSettings | None = None
    policy: AdvanceTimePolicy = AdvanceTimePolicy.DROP
    ordering: EventOrderingSettings | None = None

    def __attrs_post_init__(self) -> None:
        for name, value, cls in (
            ("generation", self.generation, AdvanceTimeGenerationSettings),
            ("import_", self.import_, AdvanceTimeImportSettings),
            ("ordering", self.ordering, EventOrderingSettings),
        ):
            if value is not None and not isinstance(value, cls):
                hint = f" (AdvanceTimeImportSettings({value!r}))" if name == "import_" and isinstance(value, str) else ""
                article = "an" if cls.__name__[0] in "AEIOU" else "a"
                raise QueryBuildError(f"AdvanceTimeSettings.{name} must be {article} {cls.__name__} or None, got {value!r}{hint}")
        if self.generation is None and self.import_ is None and self.ordering is None:
            raise QueryBuildError(
                "AdvanceTimeSettings needs generation, import or ordering settings; "
                "got none (an input without settings takes only its explicit Cti items)"
            )
        if self.ordering is not None and self.generation is not None and self.generation.frequency is not None:
            raise QueryBuildError(
                "ordering settings generate the input's CTIs themselves: give generation settings "
                "only for the flush at the end (frequency=None)"
            )
        if self.ordering is not None and self.import_ is not None:
            raise QueryBuildError(
                "ordering settings and a CTI import do not combine: an input with ordering settings "
                "already follows the query's arrival clock, which keeps a quiet input moving"
            )
        if not isinstance(self.policy, AdvanceTimePolicy):
            raise QueryBuildError(f"AdvanceTimeSettings.policy must be an AdvanceTimePolicy, got {self.policy!r}")

    @classmethod
    def replay(cls) -> AdvanceTimeSettings:
        """Replay a bounded history and release everything at its end.

        No CTIs are generated from the events, so nothing is late, dropped or adjusted; when
        the input ends, a CTI at infinity releases every result. The same as
        ``AdvanceTimeSettings(AdvanceTimeGenerationSettings(None,
        advance_to_infinity_on_shutdown=True))``. For results released while the input is
        read, generate CTIs instead (``AdvanceTimeGenerationSettings(frequency, delay,
        advance_to_infinity_on_shutdown=True)``).
        """
        return cls(AdvanceTimeGenerationSettings(None, advance_to_infinity_on_shutdown=True))
