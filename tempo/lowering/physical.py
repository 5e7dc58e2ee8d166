"""The physical planning step of the DataFrame executors: each strategy chosen once, here,
from the plan's stream properties, and carried out by the shared rules on every backend. A
compilation records each choice (``Lowering.planned``), which ``explain`` prints.

**Hopping and tumbling windows** (``window_plan``; ``tempo.lowering.windows.hopping`` carries
it out): a lifetime that reaches at most one window (points, or lifetimes no longer than the
gap between windows) goes to it with no range to explode (``ONE_WINDOW``); overlapping
windows over points whose aggregates merge from parts are built by panes (``PANES``: the
points aggregated once per pane of width ``gcd(size, hop)``, each pane's values merged by
the windows holding it, rather than each point read into ``size / hop`` windows); else each
event goes to every window its lifetime overlaps (``EXPLODED``).

**Joins**: how a join finds its pairs, chosen from the plan's stream properties
(``Query.longest_lifetime``), where the inputs lie in time (``Span``) and whether the join
has keys; ``tempo.lowering.joins.overlapping_pairs`` carries it out.

Open-source Spark has no range join, and polars none on keys: an overlap join is a hash join
on the keys (every pair without them) with the overlap tested on every pair of a key. So
when one side's lifetimes are bounded, both sides also join on a **time bucket** of width
``W``: each event is listed in every bucket its lifetime overlaps, and a pair is kept in the
bucket of its output start ``max(l.s, r.s)`` only, which both list, so it is found once (a
side of points lists one bucket: each pair meets once anyway). ``W`` is at least the bounded
side's longest lifetime, so its events list a bucket or two. With both sides bounded, that
is all.

With one side unbounded, its events are cut to where the bounded side's lie when both
inputs' spans are known: a pair's output start is within the bounded event's lifetime, so no
other bucket can hold it (``cut_buckets``). Otherwise, without keys, ``W`` is also the
unbounded side's median length, and its events spanning more than ``SPAN_BUCKETS`` buckets
(an open one, say) go to one extra bucket, ``LONG_BUCKET``, which every event of the bounded
side lists too; with keys, the plain hash join on them: a key's events meet every event of
the key, and the extra rows of ``LONG_BUCKET`` cost what the buckets save (measured in
bench/README.md, "Latest figures", W4 on Spark).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable

import attrs

from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.plan.windows import HoppingWindow
from tempo.tables import Span
from tempo.ticks import format_duration


class WindowPlan(enum.Enum):
    """How a hopping or tumbling window finds each event's windows (this module's docstring)."""

    ONE_WINDOW = "each event in the one window it reaches"
    PANES = "by panes"
    EXPLODED = "each event in every window it overlaps"


def window_plan(query: Query, node: p.WindowNode, merges: Callable[[], bool]) -> WindowPlan:
    """The plan of a hopping or tumbling window; ``merges``: whether the backend merges every
    one of its aggregates from parts (``tempo.lowering.windows.pane_merges``), asked only of
    overlapping windows over points (a Spark column costs a JVM call to build)."""
    spec = node.spec
    assert isinstance(spec, HoppingWindow)
    longest = query.longest_lifetime(node.input)
    if longest == 1 and spec.size > spec.hop and merges():
        return WindowPlan.PANES
    if longest is not None and spec.size >= spec.hop and spec.most_windows_past_first(longest) == 0:
        return WindowPlan.ONE_WINDOW
    return WindowPlan.EXPLODED


def describe_window_plan(plan: WindowPlan, node: p.WindowNode) -> str:
    """``plan`` as ``explain`` prints it (a pane's width with ``PANES``)."""
    spec = node.spec
    assert isinstance(spec, HoppingWindow)
    if plan is WindowPlan.PANES:
        return f"{plan.value} of {format_duration(math.gcd(spec.size, spec.hop))}"
    return str(plan.value)


LONG_BUCKET = -(2**63)
"""The time bucket of events too long to list their buckets (no real bucket is this low)."""
SPAN_BUCKETS = 4
"""An event of the unbounded side overlapping more buckets than this is long."""


@attrs.frozen
class TimeBuckets:
    """A join on time buckets of ``width`` ticks as well as on its keys.

    ``points``: for each side (left, right), whether its lifetimes are points, each listed in
    its start's bucket alone. ``unbounded``: the side (0 left, 1 right) whose lifetimes are
    not bounded, None when both are. ``cut``: ``(first, last)``, where that side's lifetimes
    are cut to (the others' span); ``long_apart``: whether that side's long events go to
    ``LONG_BUCKET`` instead."""

    width: int
    points: tuple[bool, bool]
    unbounded: int | None = None
    cut: tuple[int, int] | None = None
    long_apart: bool = False

    def describe(self) -> str:
        """The plan as ``explain`` prints it."""
        said = [f"on the keys and time buckets of {format_duration(self.width)}"]
        if self.unbounded is not None:
            side = ("left", "right")[self.unbounded]
            if self.cut is not None:
                said.append(f"the {side} side cut to the other's span")
            if self.long_apart:
                said.append(f"the {side} side's long events in one bucket of their own")
        return ", ".join(said)

    @property
    def found_once(self) -> bool:
        """Whether each pair meets in one bucket only: a side of points lists one bucket of
        its lifetime (``LONG_BUCKET`` beside it is met only by events that list nothing else)."""
        return any(self.points)


def join_buckets(
    query: Query,
    node: p.JoinNode,
    span: Callable[[p.Node], Span | None],
    median_length: Callable[[p.Node], int | None],
) -> TimeBuckets | None:
    """How ``node`` finds its pairs (this module's docstring): on time buckets, or None for
    the join on its keys alone. ``span``: where an input's lifetimes lie (``Lowering.span``),
    taken only for a join of a bounded side with an unbounded one; ``median_length``: the
    median length of an input's lifetimes that end, measured (an action) only for such a
    join without keys whose spans are not both known."""
    sides = (node.left, node.right)
    bounds = query.longest_lifetime(node.left), query.longest_lifetime(node.right)
    if bounds == (None, None):
        return None
    longest = max(b for b in bounds if b is not None)
    points = (bounds[0] == 1, bounds[1] == 1)
    if None not in bounds:
        return TimeBuckets(max(longest, 1), points)
    unbounded = bounds.index(None)
    bounded_span = span(sides[1 - unbounded])
    other_span = span(sides[unbounded]) if bounded_span is not None else None
    planned = cut_buckets(bounded_span, other_span, longest) if bounded_span is not None and other_span is not None else None
    if planned is not None:
        width, first, last = planned
        return TimeBuckets(width, points, unbounded, cut=(first, last))
    if node.keys:
        return None
    median = median_length(sides[unbounded])
    return TimeBuckets(max(longest, 1, median or 1), points, unbounded, long_apart=True)


def cut_buckets(bounded: Span, unbounded: Span, longest: int) -> tuple[int, int, int] | None:
    """How to join a side of lifetimes at most ``longest`` ticks long (spanning ``bounded``)
    with a side of any lifetimes (spanning ``unbounded``) on time buckets: ``(width, first,
    last)``, the unbounded side's lifetimes cut to ``[first, last)``, the bounded side's span
    (a pair's output start lies within the bounded event, so no bucket outside it holds a
    pair), in buckets as wide as the longer of ``longest`` and the unbounded side's mean
    finite length (so a lifetime that ends lists a bucket or two). None when the rows listed
    would be more than three times the two sides' rows (open lifetimes cut to a wide span,
    with short finite ones, list many)."""
    first, last = bounded.first, bounded.last
    width = max(longest, 1, math.ceil(unbounded.mean_length() or (last - first)))
    if unbounded.listed(width, first, last) > 3 * (bounded.rows + unbounded.rows):
        return None
    return width, first, last
