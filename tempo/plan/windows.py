"""Window specifications: which windows exist, and which of them an event or a CTI reaches.

A ``WindowSpec`` is a plan-level value carried by ``WindowNode``. It owns the window
arithmetic (windows are numbered by an integer index ``k``), so that every executor uses the
same formulas: over ints in the runtime, and over a backend's column expressions given its
integer floor division (``Division``; ``tests/test_windows.py`` checks Spark's against the
ints). Times are ticks.

``HoppingWindow`` is a data-independent grid (tumbling is ``hop == size``); ``SessionWindow``,
``CountWindow`` and ``SnapshotWindow`` are cut by the events themselves. Each kind states
its rule text, its default result timestamp and the timestamps it allows (``WindowTimestamp``:
a kind allows only those whose output CTI it can state without looking at the data, see
docs/semantics.md 5.6.2); ``WindowNode`` keeps the aggregation, grouping and emission that
all window kinds share.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, ClassVar

import attrs

from tempo.errors import QueryBuildError
from tempo.ticks import INF, NEG_INF, format_duration

Division = Callable[[Any, int], Any]
"""Integer floor division of a column expression by an int, as a backend spells it (``//`` is
polars' and Python's; Spark's ``/`` divides in doubles)."""


class WindowTimestamp(enum.Enum):
    """The lifetime of a window's result (Flink's "timestamps on group operations").

    ``LIFETIME`` is the window itself; the others are points: at the window's start, at its
    last tick (``END``: a window ``[ws, we)`` ends just before ``we``, so the point stays in
    the window), at the latest or earliest start among its events (never before the window's
    start), or just before the CTI that completed the window (``CTI``: monotone, but no longer
    inside the window).
    """

    LIFETIME = "lifetime"
    START = "start"
    END = "end"
    LATEST = "latest"
    EARLIEST = "earliest"
    CTI = "cti"

    @property
    def is_point(self) -> bool:
        return self is not WindowTimestamp.LIFETIME

    def point_at(
        self,
        ws: Any,
        we: Any,
        bound: Any,
        closing: Any,
        last_finite: int = NEG_INF,
        greatest: Callable[[Any, Any], Any] = max,
        when: Callable[[Any, Any, Any], Any] = lambda cond, then, otherwise: then if cond else otherwise,
    ) -> Any:
        """Where the point result of window ``[ws, we)`` goes (every timestamp but
        ``LIFETIME``): one formula over ints (the runtime) and over a backend's columns, given
        its ``greatest`` and ``when``. ``bound``: the window's events' latest or earliest
        start (LATEST, EARLIEST; clipped to the window here); ``closing``: the CTI completing
        it (CTI; on the CTI at infinity, which has no tick before it to stand for, the
        window's last tick, or the last finite CTI, ``last_finite``, if that is later: CTIs
        pass on unchanged, and a result may not come before one)."""
        if self is WindowTimestamp.START:
            return ws
        if self is WindowTimestamp.END:
            return we - 1
        if self is WindowTimestamp.CTI:
            at_infinity = we - 1 if last_finite <= NEG_INF else greatest(we - 1, last_finite)
            return when(closing >= INF, at_infinity, closing - 1)
        assert self is not WindowTimestamp.LIFETIME and bound is not None
        return greatest(ws, bound)


@attrs.frozen
class WindowSpec:
    """Base of window specifications. ``SEMANTICS`` says which windows exist and which an
    event belongs to; ``CTI_RULE`` says which windows a CTI completes and where it pulls back.
    ``TIMESTAMPS`` are the result timestamps the kind allows, ``DEFAULT_TIMESTAMP`` the one
    used when ``aggregate`` names none."""

    SEMANTICS: ClassVar[str] = ""
    CTI_RULE: ClassVar[str] = ""
    DEFAULT_TIMESTAMP: ClassVar[WindowTimestamp] = WindowTimestamp.LIFETIME
    TIMESTAMPS: ClassVar[frozenset[WindowTimestamp]] = frozenset(WindowTimestamp)
    TIMESTAMPS_WHY: ClassVar[str] = ""
    """Why the kind refuses the timestamps it does not allow."""

    def describe(self) -> str:
        raise NotImplementedError

    def longest_window(self) -> int | None:
        """An upper bound on a window's length in ticks (None: any length)."""
        raise NotImplementedError


@attrs.frozen
class HoppingWindow(WindowSpec):
    """Windows ``[offset + k*hop, offset + k*hop + size)`` for every integer ``k``; tumbling
    when ``hop == size``. ``offset`` is in ``[0, hop)`` (the API takes it modulo ``hop``)."""

    SEMANTICS: ClassVar[str] = (
        "Windows [w, w + size) with w = offset + k*hop on the epoch; an event belongs to every "
        "window its lifetime overlaps (start < w + size and end > w)."
    )
    CTI_RULE: ClassVar[str] = (
        "A CTI c completes the windows with w + size <= c; the output CTI is min(c, w*), w* the "
        "start of the earliest window with w + size > c."
    )

    size: int
    hop: int
    offset: int

    def __attrs_post_init__(self) -> None:
        if self.size <= 0:
            raise QueryBuildError(f"window size must be positive, got {format_duration(self.size)}")
        if self.hop <= 0:
            raise QueryBuildError(f"window hop must be positive, got {format_duration(self.hop)}")

    @property
    def tumbling(self) -> bool:
        return self.size == self.hop

    def describe(self) -> str:
        kind = "Tumbling" if self.tumbling else "Hopping"
        hop = "" if self.tumbling else f" hop {format_duration(self.hop)}"
        offset = f" offset {format_duration(self.offset)}" if self.offset else ""
        return f"{kind} {format_duration(self.size)}{hop}{offset}"

    def longest_window(self) -> int | None:
        return self.size

    # ---- the grid's formulas ------------------------------------------------------------
    # Over ints (the runtime), and over column expressions with ``div``, the backend's integer
    # floor division (``tempo.lowering.Dialect.floor_div``): one formula for every executor.
    # A lifetime [s, e) overlaps windows first_window(s)..last_window(e) (none when first > last).
    def first_window(self, start: Any, div: Division | None = None) -> Any:
        """The first window ending after ``start``."""
        n = start - self.size - self.offset
        return (n // self.hop if div is None else div(n, self.hop)) + 1

    def last_window(self, end: Any, div: Division | None = None) -> Any:
        """The last window starting before ``end``."""
        n = end - self.offset - 1
        return n // self.hop if div is None else div(n, self.hop)

    def most_windows_past_first(self, longest: int) -> int:
        """The most windows beyond its first that a lifetime of at most ``longest`` ticks
        overlaps (a bound on ``last_window(e) - first_window(s)``)."""
        return (longest - 1 + self.size - 1) // self.hop

    def last_complete(self, cti: int) -> int:
        """The last window a CTI at ``cti`` completes (its end is at or before ``cti``)."""
        return (cti - self.size - self.offset) // self.hop

    def start_of(self, k: Any) -> Any:
        """The start of window ``k``; also where a CTI is pulled back to when ``k`` is the
        earliest window not yet complete."""
        return k * self.hop + self.offset

    def bounds(self, k: int) -> tuple[int, int]:
        """Window ``k`` as ``(start, end)``."""
        start = self.offset + k * self.hop
        return start, start + self.size


_POINTS_AT_RELEASE = frozenset({WindowTimestamp.END, WindowTimestamp.CTI})


@attrs.frozen
class SessionWindow(WindowSpec):
    """Per group, sessions of activity (Trill's ``SessionTimeoutWindow``, ASA's
    ``SessionWindow``). An event is active up to its last tick (``end - 1 tick``; a point's
    is its start); activity goes on while each event starts less than ``gap`` after the latest
    last tick before it. An activity is one session; with ``max_duration`` D it is cut on the
    epoch grid of D: first at the first multiple of D at or after its start plus D, then at
    every multiple of D, and each piece holding an event's start is a session of its own,
    starting at the cut (ASA: "a new window opens at that same point")."""

    SEMANTICS: ClassVar[str] = (
        "Per group, events in start order; an event starting at or after (the latest last tick before "
        "it) + gap opens a new activity, where an event's last tick is its end - 1 tick. An activity "
        "from f to its last tick L is the session [f, L + gap); with max_duration D it is cut at the "
        "first multiple of D at or after f + D and at every multiple of D after that, and each piece "
        "in which an event starts is a session from the cut."
    )
    CTI_RULE: ClassVar[str] = (
        "A CTI c completes the sessions with end <= c (an event starting at c or later can join none "
        "of them); CTIs pass unchanged, since every pending result is stamped at or after c."
    )
    DEFAULT_TIMESTAMP: ClassVar[WindowTimestamp] = WindowTimestamp.END
    TIMESTAMPS: ClassVar[frozenset[WindowTimestamp]] = frozenset({WindowTimestamp.END, WindowTimestamp.CTI})
    TIMESTAMPS_WHY: ClassVar[str] = (
        "a session's result is known only once the CTI passes its end, so a result stamped earlier "
        "would hold the output CTI back for as long as any session of any group stays open"
    )

    gap: int
    max_duration: int | None

    def __attrs_post_init__(self) -> None:
        if self.gap < 2:
            # An open edge may end at a CTI already passed, and a session a tick's gap after it
            # would then end at that CTI, its result stamped before it (docs/semantics.md 5.6.2).
            raise QueryBuildError(f"session gap must be at least 2 ticks (2 µs), got {format_duration(self.gap)}")
        if self.max_duration is not None and self.max_duration <= 0:
            raise QueryBuildError(f"session max_duration must be positive, got {format_duration(self.max_duration)}")

    def describe(self) -> str:
        cap = "" if self.max_duration is None else f" max {format_duration(self.max_duration)}"
        return f"Session gap {format_duration(self.gap)}{cap}"

    def longest_window(self) -> int | None:
        return None if self.max_duration is None else 2 * self.max_duration

    def first_cut(self, first: Any, div: Division | None = None) -> Any:
        """Where an activity starting at ``first`` is cut first: the first multiple of
        ``max_duration`` at or after ``first + max_duration`` (infinity without one; ``div``:
        as ``HoppingWindow.first_window``'s, with a duration)."""
        d = self.max_duration
        if d is None:
            return INF
        return -(-(first + d) // d) * d if div is None else -div(-(first + d), d) * d

    def piece(self, first: int, start: int) -> tuple[int, int]:
        """The session ``(start, cut)`` holding an event starting at ``start`` in the activity
        starting at ``first``: the piece between two cuts (``first`` up to the first cut)."""
        cut = self.first_cut(first)
        if start < cut:
            return first, cut
        d = self.max_duration
        assert d is not None
        begin = cut + (start - cut) // d * d
        return begin, begin + d


@attrs.frozen
class CountWindow(WindowSpec):
    """Per group, events numbered 0, 1, 2, ... in order of start (ties by payload); window
    ``k`` holds the events numbered ``[k*slide, k*slide + size)``; only full windows exist.
    With ``by="starts"`` (StreamInsight's ``CountByStartTimeWindow``) the numbers go to the
    distinct start times instead, and a window holds every event of its starts."""

    SEMANTICS: ClassVar[str] = (
        "Per group, events ranked by (start, payload), or by=starts their distinct starts ranked; "
        "window k holds ranks [k*slide, k*slide + size) and exists only once full; its bounds are "
        "[first start, last start + 1 tick)."
    )
    CTI_RULE: ClassVar[str] = (
        "A CTI c completes window k when its last event starts before c (k*slide + size <= the number "
        "of the group's events, or distinct starts, before c); CTIs pass unchanged."
    )
    DEFAULT_TIMESTAMP: ClassVar[WindowTimestamp] = WindowTimestamp.LATEST
    TIMESTAMPS: ClassVar[frozenset[WindowTimestamp]] = frozenset({WindowTimestamp.LATEST, WindowTimestamp.END, WindowTimestamp.CTI})
    TIMESTAMPS_WHY: ClassVar[str] = (
        "a count window is complete only once its last event is committed, so a result stamped at "
        "its start would hold the output CTI back for as long as a group stays quiet"
    )
    COUNTED: ClassVar[tuple[str, ...]] = ("events", "starts")

    size: int
    slide: int
    by: str = "events"
    """What is counted: ``events``, or ``starts`` (distinct start times)."""

    def __attrs_post_init__(self) -> None:
        unit = "events" if self.by == "events" else "start times"
        if self.by not in self.COUNTED:
            raise QueryBuildError(f"count window by= counts 'events' or 'starts' (distinct start times), got {self.by!r}")
        if self.size <= 0:
            raise QueryBuildError(f"count window size must be a positive number of {unit}, got {self.size}")
        if self.slide <= 0:
            raise QueryBuildError(f"count window slide must be a positive number of {unit}, got {self.slide}")

    @property
    def by_starts(self) -> bool:
        return self.by == "starts"

    def describe(self) -> str:
        slide = "" if self.slide == self.size else f" slide {self.slide}"
        return f"Count {self.size} {'start times' if self.by_starts else 'events'}{slide}"

    def longest_window(self) -> int | None:
        return None


@attrs.frozen
class SnapshotWindow(WindowSpec):
    """Per group, a window between every two consecutive endpoints (starts and ends) of the
    events, holding the events alive in it; stretches where nothing is alive give none."""

    SEMANTICS: ClassVar[str] = (
        "Per group, one window [p, q) for each two consecutive distinct endpoints p < q of the events "
        "with an event alive at p; it holds exactly the events alive at p."
    )
    CTI_RULE: ClassVar[str] = (
        "A CTI c > p fixes window [p, q)'s events (it goes out as a start edge); c > q fixes its end "
        "(the end edge); CTIs pass unchanged, but by one tick for results stamped at a window's last "
        "tick (END), which may be the tick before the CTI."
    )

    def describe(self) -> str:
        return "Snapshot"

    def longest_window(self) -> int | None:
        return None
