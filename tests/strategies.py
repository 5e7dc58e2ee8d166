"""Random inputs and random small query graphs, for property and differential tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, ClassVar

import attrs
from hypothesis import strategies as st

import tempo
from tempo import coalesce
from tempo import (
    AdvanceTimeGenerationSettings,
    ArrivalClock,
    IngestionTime,
    ProcessingTime,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Cti,
    EdgeEnd,
    EdgeStart,
    EventOrderingSettings,
    EventShape,
    Heartbeat,
    Interval,
    Point,
    Stream,
    WindowTimestamp,
)

BASE = datetime(2024, 1, 1)
ARRIVAL_BASE = datetime(2024, 6, 1)


EDGE_INTS = [2**63 - 1, -(2**63), 2**62, -(2**62), 2**62 + 1, 2**53 + 1, -(2**53 + 1), 2**31, -1]
"""Integers at the edges of 64 bits and of a double's exact integers, for ``queries(edges=True)``."""

EDGE_BASES = [datetime(1970, 1, 1), datetime(1969, 12, 31, 23, 59, 30), datetime(1, 1, 1, 0, 30), datetime(9999, 12, 31, 23, 0)]
"""Where ``queries(edges=True)`` may move the events' time line (``BASE``): the epoch and just
before it (negative ticks), and half an hour from either end of Python's calendar."""


def T(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


def A(seconds: float) -> datetime:
    """An arrival time (orders the items of several inputs into one sequence)."""
    return ARRIVAL_BASE + timedelta(seconds=seconds)


@attrs.frozen
class Ev:
    key: int
    value: int


@attrs.frozen
class Ref:
    key: int
    ref: int


@attrs.frozen
class Pair:
    key: int
    value: int
    ref: int


@attrs.frozen
class Agg:
    n: int
    total: int
    low: int
    high: int


@attrs.frozen
class KeyAgg:
    key: int
    n: int
    total: int
    start: datetime


@attrs.frozen
class Spread:
    """The aggregates that depend on the events' order, or keep all values (5.6.5)."""

    key: int
    distinct: int
    first: int
    last: int
    median: float
    approx: int
    values: list[int]


@st.composite
def input_items(
    draw: st.DrawFn,
    shape: EventShape,
    payload: Callable[[int, int], Any],
    max_events: int = 14,
    keys: int = 3,
    min_events: int = 0,
    edges: bool = False,
) -> list[Any]:
    """Events of one shape with some disorder, a few explicit CTIs, edges paired later.

    Keys are drawn from ``range(keys)``: few keys give many matches and big groups, many
    keys give many groups and few matches. ``edges``: now and then a key or a value is one
    of ``EDGE_INTS`` instead.
    """
    n = draw(st.integers(min_events, max_events))
    items: list[Any] = []
    open_edges: list[Any] = []
    key_values, values = st.integers(0, keys - 1), st.integers(0, 9)
    if edges:
        key_values = st.one_of(key_values, key_values, key_values, st.sampled_from(EDGE_INTS))
        values = st.one_of(values, values, st.sampled_from(EDGE_INTS))
    for _ in range(n):
        start = T(draw(st.integers(0, 60)))
        p = payload(draw(key_values), draw(values))
        if shape is EventShape.POINT:
            items.append(Point(start, p))
        elif shape is EventShape.INTERVAL:
            items.append(Interval(start, start + timedelta(seconds=draw(st.integers(1, 25))), p))
        else:
            items.append(EdgeStart(start, p))
            open_edges.append(items[-1])
        if draw(st.integers(0, 9)) == 0:
            items.append(Cti(T(draw(st.integers(0, 60)))))
    # End edges arrive later than their start edges, each at most once; some never end.
    for edge in open_edges:
        if draw(st.booleans()):
            at = next(i for i, it in enumerate(items) if it is edge)  # equal edges may repeat
            pos = draw(st.integers(at + 1, len(items)))
            end = edge.start + timedelta(seconds=draw(st.integers(1, 30)))
            items.insert(pos, EdgeEnd(edge.start, end, edge.payload))
    return items


@st.composite
def with_arrivals(draw: st.DrawFn, items: list[Any], spread: int = 60, base: datetime = ARRIVAL_BASE) -> list[Any]:
    """``items`` with a non-decreasing arrival time on every item (ties within and across
    inputs happen: across inputs they go to the input declared first). Arrivals are
    ``base`` plus 0 to ``spread`` seconds: ``BASE`` puts them on the events' own time line,
    as the inputs with ordering settings of the same query have them."""
    arrivals = sorted(draw(st.lists(st.integers(0, spread), min_size=len(items), max_size=len(items))))
    return [attrs.evolve(item, arrival=base + timedelta(seconds=a)) for item, a in zip(items, arrivals)]


@st.composite
def ordered_arrivals(draw: st.DrawFn, items: list[Any]) -> list[Any]:
    """The items of an input with ordering settings (points or intervals, and CTIs): each
    gets an arrival near its own start, on the events' time line (``BASE``), and the list is
    put in arrival order (a stable sort), maybe with a few ``Heartbeat`` items.

    An event arrives ``delay + skew[key % 3] + jitter`` seconds after it starts: ``delay``
    (negative: the sender's clock runs ahead) is the input's, the skew its key's (a device
    whose clock is off), and the jitter, up to ``disorder`` seconds, puts the arrival order
    out of start order. So early, late and out-of-order events all happen, more or fewer
    of each against the tolerances ``ordering_settings`` draws.
    """
    delay = draw(st.sampled_from([-8, 0, 4, 20]))
    disorder = draw(st.sampled_from([0, 3, 12, 40]))
    skews = draw(st.lists(st.sampled_from([0, 0, -6, 15]), min_size=3, max_size=3))
    timed: list[tuple[int, Any]] = []
    for item in items:
        if isinstance(item, Cti):
            at = draw(st.integers(0, 70))
        else:
            offset = delay + skews[item.payload.key % 3] + (draw(st.integers(0, disorder)) if disorder else 0)
            at = int((item.start - BASE).total_seconds()) + offset
        timed.append((at, item))
    if draw(st.integers(0, 3)) in (1, 2):
        timed += [(a, None) for a in draw(st.lists(st.integers(0, 90), min_size=1, max_size=2))]
    timed.sort(key=lambda pair: pair[0])
    return [Heartbeat(T(a)) if item is None else attrs.evolve(item, arrival=T(a)) for a, item in timed]


@st.composite
def bad_item(draw: st.DrawFn, items: list[Any], shape: EventShape, payload: Callable[[int, int], Any]) -> list[Any]:
    """``items`` with one item that breaks a rule of the input (an InputError at run time)."""
    p = payload(0, 0)
    bad: Any = draw(
        st.sampled_from(
            {
                EventShape.POINT: [Interval(T(5), T(6), p), EdgeStart(T(5), p)],
                EventShape.INTERVAL: [Interval(T(5), T(5), p), Interval(T(6), T(5), p), Point(T(5), p)],
                EventShape.EDGE: [EdgeEnd(T(99), T(100), p), Point(T(5), p)],
            }[shape]
        )
    )
    out = list(items)
    at = draw(st.integers(0, len(out)))
    if out:  # the arrival of a neighbour, so that arrivals stay in order and present
        bad = attrs.evolve(bad, arrival=out[max(at - 1, 0)].arrival)
    out.insert(at, bad)
    return out


@st.composite
def generation(draw: st.DrawFn) -> AdvanceTimeGenerationSettings:
    """CTI generation by event count or by time span (or none: only the flush), with a delay
    and maybe a final flush."""
    frequency: int | timedelta | None = draw(
        st.one_of(
            st.none(),
            st.integers(1, 4),
            st.sampled_from([6, 10]),
            st.sampled_from([timedelta(seconds=1), timedelta(seconds=5), timedelta(seconds=12), timedelta(seconds=30)]),
        )
    )
    delay = draw(st.sampled_from([timedelta(0), timedelta(seconds=3), timedelta(seconds=10), -tempo.TICK]))
    flush = draw(st.booleans())
    return AdvanceTimeGenerationSettings(frequency, delay, flush)


@st.composite
def ordering_settings(draw: st.DrawFn) -> EventOrderingSettings:
    """Event-ordering tolerances (seconds) around the delays and disorder that
    ``ordered_arrivals`` draws; ``None`` turns the late tolerance or the early window off."""
    out_of_order = draw(st.sampled_from([0, 2, 5, 15]))
    late = draw(st.sampled_from([None, 0, 3, 10, 30]))
    early = draw(st.sampled_from([None, 0, 5, 20]))
    return EventOrderingSettings(
        timedelta(seconds=out_of_order),
        None if late is None else timedelta(seconds=late),
        None if early is None else timedelta(seconds=early),
    )


def is_ordered(settings: AdvanceTimeSettings | None) -> bool:
    """Whether an input with these settings has ordering settings (and so needs arrivals)."""
    return settings is not None and settings.ordering is not None


@st.composite
def advance_settings(
    draw: st.DrawFn, import_from: str | None = None, shape: EventShape | None = None, keyed: bool = False
) -> AdvanceTimeSettings | None:
    """Settings of one input; with ``import_from``, CTIs imported from that input (and
    maybe generated too: the later CTI wins). Given the input's ``shape``, about half of
    the point and interval inputs that import nothing (a fifth of the inputs ``queries``
    draws) get ordering settings instead of generation, maybe with the flush at the end;
    without ``shape``, the draws are as before. ``keyed``: always ordering settings with a
    late-arrival tolerance, as substreams need."""
    policy = draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST]))
    if keyed:
        ordering = draw(ordering_settings())
        if ordering.late_arrival_tolerance is None:
            ordering = attrs.evolve(ordering, late_arrival_tolerance=timedelta(seconds=draw(st.sampled_from([0, 3, 10]))))
        flush = AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True) if draw(st.booleans()) else None
        return AdvanceTimeSettings(flush, policy=policy, ordering=ordering)
    if import_from is not None:
        gen = draw(st.one_of(st.none(), generation()))
        return AdvanceTimeSettings(gen, AdvanceTimeImportSettings(import_from), policy)
    if shape in (EventShape.POINT, EventShape.INTERVAL) and draw(st.integers(0, 3)) in (1, 2):
        flush = AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True) if draw(st.booleans()) else None
        return AdvanceTimeSettings(flush, policy=policy, ordering=draw(ordering_settings()))
    if draw(st.integers(0, 9)) == 7:
        return None
    return AdvanceTimeSettings(draw(generation()), policy=policy)


@st.composite
def substreams(draw: st.DrawFn, settings: AdvanceTimeSettings | None) -> bool:
    """Whether an input with these settings is split into substreams by its payload's key
    (``over=``): sometimes, when it has ordering settings with a late-arrival tolerance."""
    if settings is None or settings.ordering is None or settings.ordering.late_arrival_tolerance is None:
        return False
    return draw(st.booleans())


def _key(e: Any) -> Any:
    return e.key


class Range:
    """A user-defined aggregate (docs/semantics.md 5.6.6): max − min of int values, None without any."""

    returns: ClassVar[type] = int

    def zero(self) -> tuple[int, int] | None:
        return None

    def accumulate(self, state: tuple[int, int] | None, values: Any) -> tuple[int, int] | None:
        import pyarrow.compute as pc

        if len(values) == 0:
            return state
        return self.merge(state, (pc.min(values).as_py(), pc.max(values).as_py()))

    def merge(self, a: tuple[int, int] | None, b: tuple[int, int] | None) -> tuple[int, int] | None:
        if a is None or b is None:
            return a if b is None else b
        return (min(a[0], b[0]), max(a[1], b[1]))

    def result(self, state: tuple[int, int] | None) -> int | None:
        return None if state is None else state[1] - state[0]


def _agg(w: tempo.Window[Any]) -> Agg:
    return Agg(n=w.count(), total=w.sum(lambda e: e.value), low=w.min(lambda e: e.value), high=w.max(lambda e: e.value))


Unary = Callable[[Stream[Ev]], Stream[Any]]

UNARY: dict[str, Unary] = {
    "identity": lambda s: s,
    "where": lambda s: s.where(lambda e: e.value % 2 == 0),
    "select": lambda s: s.select(lambda e: Ev(key=e.key, value=e.value * 3 + 1)),
    "shift": lambda s: s.shift_event_time(timedelta(seconds=-4)),
    "duration": lambda s: s.alter_event_duration(timedelta(seconds=7)),
    "lifetime": lambda s: s.alter_event_lifetime(timedelta(seconds=2), timedelta(seconds=3)),
    "tumbling": lambda s: s.tumbling(timedelta(seconds=10)).aggregate(_agg),
    "hopping_by_key": lambda s: (
        s.group_by(lambda e: e.key)
        .hopping(timedelta(seconds=10), timedelta(seconds=4))
        .aggregate(lambda k, w: KeyAgg(key=k, n=w.count(), total=w.sum(lambda e: e.value), start=w.start))
    ),
    "self_union": lambda s: s.union(s.where(lambda e: e.key == 1)),
    # Result timestamps other than the window's lifetime (docs/semantics.md 5.6.1).
    "tumbling_end": lambda s: s.tumbling(timedelta(seconds=10)).aggregate(
        lambda w: Ev(key=w.count(), value=w.sum(lambda e: e.value)), timestamp=WindowTimestamp.END
    ),
    "tumbling_start": lambda s: s.tumbling(timedelta(seconds=10)).aggregate(_agg, timestamp=WindowTimestamp.START),
    "tumbling_cti": lambda s: s.tumbling(timedelta(seconds=10)).aggregate(_agg, timestamp=WindowTimestamp.CTI),
    "hopping_earliest": lambda s: s.hopping(timedelta(seconds=10), timedelta(seconds=4)).aggregate(
        _agg, timestamp=WindowTimestamp.EARLIEST
    ),
    "hopping_by_key_latest": lambda s: (
        s.group_by(lambda e: e.key)
        .hopping(timedelta(seconds=10), timedelta(seconds=4))
        .aggregate(lambda k, w: KeyAgg(key=k, n=w.count(), total=w.sum(lambda e: e.value), start=w.start), timestamp=WindowTimestamp.LATEST)
    ),
    # Windows cut by the events (docs/semantics.md 5.6.2-5.6.4).
    "session_by_key": lambda s: (
        s.group_by(lambda e: e.key).session(timedelta(seconds=3)).aggregate(lambda k, w: Ev(key=k, value=w.count()))
    ),
    "session_capped_cti": lambda s: s.session(timedelta(seconds=2), max_duration=timedelta(seconds=5)).aggregate(
        _agg, timestamp=WindowTimestamp.CTI
    ),
    "count_by_key": lambda s: (
        s.group_by(lambda e: e.key)
        .count_window(3, slide=2)
        .aggregate(lambda k, w: KeyAgg(key=k, n=w.count(), total=w.sum(lambda e: e.value), start=w.start))
    ),
    "count_cti": lambda s: s.count_window(2).aggregate(_agg, timestamp=WindowTimestamp.CTI),
    "count_starts_by_key": lambda s: (
        s.group_by(lambda e: e.key)
        .count_window(2, slide=1, by="starts")
        .aggregate(lambda k, w: KeyAgg(key=k, n=w.count(), total=w.sum(lambda e: e.value), start=w.start))
    ),
    "snapshot_by_key": lambda s: s.group_by(lambda e: e.key).snapshot().aggregate(lambda k, w: Ev(key=k, value=w.count())),
    "snapshot_start": lambda s: s.snapshot().aggregate(_agg, timestamp=WindowTimestamp.START),
    # Each end clipped at the next start (docs/semantics.md 5.5.2).
    "clip_by_key": lambda s: s.group_by(lambda e: e.key).clip_event_duration(),
    "clip": lambda s: s.clip_event_duration(),
    # In time order, with analytics (docs/semantics.md 5.11).
    "order_by_time": lambda s: s.order_by_time(),
    "analytic_by_key": lambda s: s.group_by(lambda e: e.key).analytic(
        lambda k, e, a: Pair(key=k, value=a.count(), ref=coalesce(a.previous(lambda e: e.value, timedelta(seconds=4)), -1))
    ),
    # ASA's LAG in full: an offset, a default, a condition (docs/semantics.md 5.11).
    "analytic_lag": lambda s: s.group_by(lambda e: e.key).analytic(
        lambda k, e, a: Pair(
            key=k,
            value=a.previous(lambda e: e.value, timedelta(seconds=5), offset=2, default=-1, when=lambda e: e.value % 2 == 0),
            ref=a.previous(lambda e: e.value, offset=3, default=lambda e: e.value),
        )
    ),
    "analytic_running": lambda s: s.analytic(
        lambda e, a: Agg(
            n=a.count(), total=a.sum(lambda e: e.value), low=a.min(lambda e: e.value), high=coalesce(a.previous(lambda e: e.value), -1)
        )
    ),
    # Aggregates that depend on the events' order or keep every value (docs/semantics.md 5.6.5);
    # the variances are left out, as float sums in another order may differ in the last bits.
    "hopping_spread": lambda s: (
        s.group_by(lambda e: e.key)
        .hopping(timedelta(seconds=10), timedelta(seconds=4))
        .aggregate(
            lambda k, w: Spread(
                key=k,
                distinct=w.count_distinct(lambda e: e.value % 3),
                first=w.first(lambda e: e.value),
                last=w.last(lambda e: e.value),
                median=w.median(lambda e: e.value),
                approx=w.percentile_approx(lambda e: e.value, 0.3),
                values=w.collect(lambda e: e.value),
            )
        )
    ),
    "tumbling_uda": lambda s: (
        s.group_by(lambda e: e.key)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda k, w: Ev(key=k, value=coalesce(w.uda(Range(), lambda e: e.value), -1)))
    ),
    # Top-k per window (docs/semantics.md 5.6.7): ties share a rank, nulls rank least.
    "hopping_top_by_key": lambda s: (
        s.group_by(lambda e: e.key)
        .hopping(timedelta(seconds=10), timedelta(seconds=5))
        .top_k(2, by=lambda e: e.value, select=lambda e, rank: Pair(key=e.key, value=e.value, ref=rank), descending=True)
    ),
    "snapshot_top": lambda s: s.snapshot().top_k(
        1, by=lambda e: (e.key, e.value), select=lambda e, rank: Pair(key=e.key, value=e.value, ref=rank)
    ),
    "session_top_end": lambda s: s.session(timedelta(seconds=3)).top_k(
        2, by=lambda e: (e.value % 3, e.key), select=lambda e, rank: Pair(key=e.key, value=e.value, ref=rank), descending=(False, True)
    ),
    # GroupApply (5.13): windows keyed inside and out, a self-join and clip + snapshot per group.
    "apply_count_by_key": lambda s: s.group_by(lambda e: e.value % 3).apply(
        lambda g: (
            g.group_by(lambda e: e.key)
            .count_window(2)
            .aggregate(lambda k, w: KeyAgg(key=k, n=w.count(), total=w.sum(lambda e: e.value), start=w.start))
        ),
        lambda k, r: KeyAgg(key=r.key, n=r.n, total=r.total * 10 + k, start=r.start),
    ),
    "apply_self_join": lambda s: s.group_by(lambda e: e.key).apply(
        lambda g: g.join(
            g.alter_event_lifetime(timedelta(seconds=1), timedelta(seconds=4)),
            lambda a, b: a.value >= b.value,
            lambda a, b: Pair(key=a.key, value=a.value, ref=b.value),
        ),
        lambda k, r: r,
    ),
    "apply_clip_snapshot": lambda s: s.group_by(lambda e: e.key).apply(
        lambda g: g.clip_event_duration().snapshot().aggregate(_agg), lambda k, r: Pair(key=k, value=r.n, ref=r.total)
    ),
    "analytic_spread": lambda s: s.analytic(
        lambda e, a: Spread(
            key=e.key,
            distinct=a.count_distinct(lambda e: e.key),
            first=a.first(lambda e: e.value),
            last=a.last(lambda e: e.key),
            median=a.percentile(lambda e: e.value, 0.75),
            approx=a.percentile_approx(lambda e: e.value, 0.5),
            values=a.collect(lambda e: e.key),
        )
    ),
    "snapshot_end": lambda s: (
        s.group_by(lambda e: e.key)
        .snapshot()
        .aggregate(lambda k, w: KeyAgg(key=k, n=w.count(), total=w.sum(lambda e: e.value), start=w.end), timestamp=WindowTimestamp.END)
    ),
}


def _pair(a: Ev, b: Ref) -> Pair:
    return Pair(key=a.key, value=a.value, ref=b.ref)


def _by_key(s: Stream[Ev]) -> Stream[Ev]:
    """Per key and 10 s window: the count as key, value (a stream of Ev to join on)."""
    return s.group_by(lambda e: e.key).tumbling(timedelta(seconds=10)).aggregate(lambda k, w: Ev(key=k, value=w.count()))


Binary = Callable[[Stream[Ev], Stream[Ref]], Stream[Any]]

BINARY: dict[str, Binary] = {
    "join": lambda l, r: l.join(r, lambda a, b: a.key == b.key, _pair),
    "join_residual": lambda l, r: l.join(r, lambda a, b: (a.key == b.key) & (a.value > b.ref), _pair),
    # No equality key: on Spark a join on time buckets when one side's lifetimes are bounded.
    "join_no_key": lambda l, r: l.join(r, lambda a, b: a.value >= b.ref, _pair),
    "anti_join": lambda l, r: l.anti_join(r, lambda a, b: a.key == b.key),
    "union_as_ev": lambda l, r: l.union(r.select(lambda b: Ev(key=b.key, value=b.ref))),
    "join_then_tumbling": lambda l, r: (
        l.join(r, lambda a, b: a.key == b.key, _pair)
        .tumbling(timedelta(seconds=10))
        .aggregate(
            lambda w: Agg(n=w.count(), total=w.sum(lambda e: e.value + e.ref), low=w.min(lambda e: e.ref), high=w.max(lambda e: e.value))
        )
    ),
    "window_then_join": lambda l, r: _by_key(l).join(r, lambda a, b: a.key == b.key, _pair),
    "join_then_session": lambda l, r: (
        l.join(r, lambda a, b: a.key == b.key, _pair)
        .group_by(lambda p: p.key)
        .session(timedelta(seconds=4))
        .aggregate(lambda k, w: KeyAgg(key=k, n=w.count(), total=w.sum(lambda e: e.ref), start=w.start))
    ),
    "union_then_analytic": lambda l, r: (
        l.union(r.select(lambda b: Ev(key=b.key, value=b.ref)))
        .group_by(lambda e: e.key)
        .analytic(
            lambda k, e, a: Pair(
                key=k, value=e.value, ref=coalesce(a.previous(lambda e: e.value, timedelta(seconds=6)), a.max(lambda e: e.value))
            )
        )
    ),
    "union_then_count": lambda l, r: l.union(r.select(lambda b: Ev(key=b.key, value=b.ref))).count_window(2).aggregate(_agg),
    "anti_join_shifted": lambda l, r: l.anti_join(r.shift_event_time(timedelta(seconds=3)), lambda a, b: a.key == b.key),
    "left_outer_join": lambda l, r: l.left_outer_join(r, lambda a, b: a.key == b.key, _pair, Ref(key=-1, ref=-1)),
    "followed_by": lambda l, r: l.followed_by(r, lambda a, b: (a.key == b.key) & (b.ref != a.value), timedelta(seconds=5), _pair),
    "union_then_hopping_by_key": lambda l, r: (
        l.union(r.select(lambda b: Ev(key=b.key, value=b.ref)))
        .group_by(lambda e: e.key)
        .hopping(timedelta(seconds=10), timedelta(seconds=5))
        .aggregate(lambda k, w: KeyAgg(key=k, n=w.count(), total=w.sum(lambda e: e.value), start=w.start))
    ),
    # GroupApply (5.13) joining the right input whole in every group of the left.
    "apply_broadcast": lambda l, r: l.group_by(lambda e: e.key).apply(
        lambda g: g.join(r, lambda a, b: a.value >= b.ref, _pair).union(
            g.anti_join(r, lambda a, b: a.value == b.ref).select(lambda a: Pair(key=a.key, value=a.value, ref=-1))
        ),
        lambda k, p: p,
    ),
    "join_where_select": lambda l, r: (
        l.join(r, lambda a, b: a.key == b.key, _pair)
        .where(lambda p: p.value >= p.ref)
        .select(lambda p: Ev(key=p.key, value=p.value - p.ref))
    ),
}


Builder = Callable[[bool | None], Stream[Any]]
"""Builds the query; a bool overrides every input's flush-on-shutdown flag."""


def _flush(settings: AdvanceTimeSettings | None, flush: bool | None) -> AdvanceTimeSettings | None:
    if settings is None or flush is None:
        return settings
    if settings.generation is None:
        if settings.ordering is None:
            return settings
        # Ordering settings generate their own CTIs: generation is only the flush at the end.
        return attrs.evolve(settings, generation=AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=flush))
    return attrs.evolve(settings, generation=attrs.evolve(settings.generation, advance_to_infinity_on_shutdown=flush))


def _create(name: str, items: list[Any], shape: EventShape, settings: AdvanceTimeSettings | None, payload: type, over: bool) -> Stream[Any]:
    return Stream.create(name, items, shape, settings, payload_type=payload, over=_key if over else None)


@st.composite
def _missing_arrival(draw: st.DrawFn, items: list[Any]) -> list[Any]:
    """Rarely, an input with ordering settings whose first item, an event, has no arrival
    (an InputError: such an input needs an arrival on every item)."""
    if items and isinstance(items[0], (Point, Interval)) and draw(st.integers(0, 14)) == 7:
        return [attrs.evolve(items[0], arrival=None), *items[1:]]
    return items


def moved(items: list[Any], base: datetime) -> list[Any]:
    """``items`` with the events' time line moved from ``BASE`` to ``base``: every event time,
    CTI and arrival on that line (within minutes of ``BASE``) by the same amount, and the
    arrivals on the line of ``ARRIVAL_BASE``, which only order the items, to 20 minutes
    after ``base`` (so that they stay inside the calendar)."""
    if base == BASE:
        return items
    by = base - BASE

    def move(t: datetime | None) -> datetime | None:
        if t is None:
            return None
        return t + by if t < ARRIVAL_BASE else base + timedelta(minutes=20) + (t - ARRIVAL_BASE)

    out = []
    for item in items:
        times = {f: move(getattr(item, f)) for f in ("start", "end", "timestamp", "arrival") if hasattr(item, f)}
        out.append(attrs.evolve(item, **times))
    return out


@st.composite
def queries(
    draw: st.DrawFn,
    errors: bool = False,
    inputs: int | None = None,
    min_events: int = 0,
    keyed: bool = False,
    edges: bool = False,
    binary: str | None = None,
) -> tuple[str, Builder]:
    """A description and a builder of a random query over one or two random inputs.

    Two inputs may be linked by a CTI import (one imports the other's CTIs; then every item
    of both carries an arrival time) or just interleaved by arrival times. A point or
    interval input that imports nothing may have ordering settings (``advance_settings``):
    then its items carry arrivals near their starts (``ordered_arrivals``), maybe with
    heartbeats, it may be split into substreams by key, and when the query has one, arrivals
    given to its other input lie on the same time line. With ``errors``, a few queries get a
    bad input item or an item without the arrival an import or ordering settings need, so
    that the run fails with an InputError. ``inputs`` (1 or 2) fixes the number of inputs;
    every input has at least ``min_events`` events. ``keyed``: every input is a point or
    interval input split into substreams by key, with no import, so that every operator
    keeping the key runs on per-key CTIs. ``binary`` fixes the operator of two inputs (a key of
    ``BINARY``; the query then has two inputs).

    Rare choices compare a drawn integer with a middle value: Hypothesis draws the bounds of
    a range far more often than the values between them.
    """
    keys = 40 if draw(st.integers(0, 9)) in (4, 5) else 3
    shapes = [EventShape.POINT, EventShape.INTERVAL] if keyed else list(EventShape)
    left_shape = draw(st.sampled_from(shapes))
    left_items = draw(input_items(left_shape, Ev, keys=keys, min_events=min_events, edges=edges))
    base = draw(st.sampled_from([BASE, *EDGE_BASES])) if edges else BASE
    where = "" if base == BASE else f"; from {base}"
    first = draw(st.sampled_from(sorted(UNARY)))
    if binary is not None or inputs == 2 or (inputs is None and draw(st.booleans())):
        right_shape = draw(st.sampled_from(shapes))
        right_items = draw(input_items(right_shape, Ref, keys=keys, min_events=min_events, edges=edges))
        links = ["none", "arrival"] if keyed else ["none", "none", "arrival", "right imports left", "left imports right"]
        link = draw(st.sampled_from(links))
        left_settings = draw(advance_settings("right" if link == "left imports right" else None, left_shape, keyed))
        right_settings = draw(advance_settings("left" if link == "right imports left" else None, right_shape, keyed))
        left_over = keyed or draw(substreams(left_settings))
        right_over = keyed or draw(substreams(right_settings))
        base = BASE if is_ordered(left_settings) or is_ordered(right_settings) else ARRIVAL_BASE
        if is_ordered(left_settings):
            left_items = draw(ordered_arrivals(left_items))
        elif link != "none":
            left_items = draw(with_arrivals(left_items, base=base))
        if is_ordered(right_settings):
            right_items = draw(ordered_arrivals(right_items))
        elif link != "none":
            right_items = draw(with_arrivals(right_items, base=base))
        if errors and "imports" in link and (left_items or right_items) and draw(st.integers(0, 14)) == 7:
            side = left_items if left_items and (not right_items or draw(st.booleans())) else right_items
            i = draw(st.integers(0, len(side) - 1))
            side[i] = attrs.evolve(side[i], arrival=None)  # an ImportOrderError
        if errors and is_ordered(left_settings):
            left_items = draw(_missing_arrival(left_items))
        if errors and draw(st.integers(0, 19)) == 7:
            right_items = draw(bad_item(right_items, right_shape, Ref))
        second = binary if binary is not None else draw(st.sampled_from(sorted(BINARY)))
        pre = draw(st.sampled_from(["identity", "where", "shift", "duration"]))
        left_items, right_items = moved(left_items, base), moved(right_items, base)

        def build2(flush: bool | None = None) -> Stream[Any]:
            left = _create("left", left_items, left_shape, _flush(left_settings, flush), Ev, left_over)
            right = _create("right", right_items, right_shape, _flush(right_settings, flush), Ref, right_over)
            return BINARY[second](UNARY[pre](left), right)

        desc = (
            f"{second}({pre}(left {left_shape.name} {left_settings}{' over key' if left_over else ''}),"
            f" right {right_shape.name} {right_settings}{' over key' if right_over else ''}); {link}; keys {keys}{where}"
            f"\n  left:  {left_items!r}\n  right: {right_items!r}"
        )
        return desc, build2
    left_settings = draw(advance_settings(shape=left_shape, keyed=keyed))
    left_over = keyed or draw(substreams(left_settings))
    if is_ordered(left_settings):
        left_items = draw(ordered_arrivals(left_items))
        if errors:
            left_items = draw(_missing_arrival(left_items))
    if errors and draw(st.integers(0, 19)) == 7:
        left_items = draw(bad_item(left_items, left_shape, Ev))
    then = draw(st.sampled_from(["identity", "where", "select", "shift", "tumbling"]))
    # Sometimes the input is stamped as it is read (docs/semantics.md 3.11): ingestion time, or
    # processing time on an arrival clock; its items then need arrivals and take no CTIs.
    notion: IngestionTime | ProcessingTime | None = None
    if not keyed and not left_over and draw(st.integers(0, 6)) == 3:
        left_items = draw(with_arrivals([i for i in left_items if not isinstance(i, Cti)], base=BASE))
        every = draw(st.sampled_from([0, 3, 10]))
        notion = draw(
            st.sampled_from(
                [
                    IngestionTime(cti_every=timedelta(seconds=every)),
                    ProcessingTime(ArrivalClock(timedelta(seconds=every % 4))),
                ]
            )
        )

    left_items = moved(left_items, base)

    def build1(flush: bool | None = None) -> Stream[Any]:
        if notion is None:
            left = _create("left", left_items, left_shape, _flush(left_settings, flush), Ev, left_over)
        else:
            time = notion if flush is None else attrs.evolve(notion, advance_to_infinity_on_shutdown=flush)
            left = Stream.create("left", left_items, left_shape, payload_type=Ev, time=time)
        out = UNARY[first](left)
        if then != "identity" and out.payload_type is Ev:
            out = UNARY[then](out)
        return out

    over = " over key" if left_over else ""
    described = left_settings if notion is None else notion
    return f"{then}({first}(left {left_shape.name} {described}{over})); keys {keys}{where}\n  left: {left_items!r}", build1
