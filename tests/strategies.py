"""Random inputs and random small query graphs, for property and differential tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs
from hypothesis import strategies as st

import tempo
from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Cti,
    EdgeEnd,
    EdgeStart,
    EventShape,
    Interval,
    Point,
    Stream,
)

BASE = datetime(2024, 1, 1)


def T(seconds: float) -> datetime:
    return BASE + timedelta(seconds=seconds)


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


@st.composite
def input_items(draw: st.DrawFn, shape: EventShape, payload: Callable[[int, int], Any], max_events: int = 14) -> list[Any]:
    """Events of one shape with some disorder, a few explicit CTIs, edges paired later."""
    n = draw(st.integers(0, max_events))
    items: list[Any] = []
    open_edges: list[Any] = []
    for _ in range(n):
        start = T(draw(st.integers(0, 60)))
        p = payload(draw(st.integers(0, 2)), draw(st.integers(0, 9)))
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
def advance_settings(draw: st.DrawFn) -> AdvanceTimeSettings | None:
    if draw(st.integers(0, 9)) == 0:
        return None
    frequency: int | timedelta = draw(st.one_of(st.integers(1, 4), st.sampled_from([timedelta(seconds=5), timedelta(seconds=12)])))
    delay = draw(st.sampled_from([timedelta(0), timedelta(seconds=3), timedelta(seconds=10), -tempo.TICK]))
    flush = draw(st.booleans())
    policy = draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST]))
    return AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency, delay, flush), policy=policy)


Unary = Callable[[Stream[Ev]], Stream[Any]]

UNARY: dict[str, Unary] = {
    "identity": lambda s: s,
    "where": lambda s: s.where(lambda e: e.value % 2 == 0),
    "select": lambda s: s.select(lambda e: Ev(key=e.key, value=e.value * 3 + 1)),
    "shift": lambda s: s.shift_event_time(timedelta(seconds=-4)),
    "duration": lambda s: s.alter_event_duration(timedelta(seconds=7)),
    "lifetime": lambda s: s.alter_event_lifetime(timedelta(seconds=2), timedelta(seconds=3)),
    "tumbling": lambda s: s.tumbling(timedelta(seconds=10)).aggregate(
        lambda w: Agg(n=w.count(), total=w.sum(lambda e: e.value), low=w.min(lambda e: e.value), high=w.max(lambda e: e.value))
    ),
    "hopping_by_key": lambda s: s.group_by(lambda e: e.key).hopping(timedelta(seconds=10), timedelta(seconds=4)).aggregate(
        lambda k, w: KeyAgg(key=k, n=w.count(), total=w.sum(lambda e: e.value), start=w.start)
    ),
    "self_union": lambda s: s.union(s.where(lambda e: e.key == 1)),
}

Binary = Callable[[Stream[Ev], Stream[Ref]], Stream[Any]]

BINARY: dict[str, Binary] = {
    "join": lambda l, r: l.join(r, lambda a, b: a.key == b.key, lambda a, b: Pair(key=a.key, value=a.value, ref=b.ref)),
    "join_residual": lambda l, r: l.join(
        r, lambda a, b: (a.key == b.key) & (a.value > b.ref), lambda a, b: Pair(key=a.key, value=a.value, ref=b.ref)
    ),
    "anti_join": lambda l, r: l.anti_join(r, lambda a, b: a.key == b.key),
    "union_as_ev": lambda l, r: l.union(r.select(lambda b: Ev(key=b.key, value=b.ref))),
}


Builder = Callable[[bool | None], Stream[Any]]
"""Builds the query; a bool overrides every input's flush-on-shutdown flag."""


def _flush(settings: AdvanceTimeSettings | None, flush: bool | None) -> AdvanceTimeSettings | None:
    if settings is None or settings.generation is None or flush is None:
        return settings
    return attrs.evolve(settings, generation=attrs.evolve(settings.generation, advance_to_infinity_on_shutdown=flush))


@st.composite
def queries(draw: st.DrawFn) -> tuple[str, Builder]:
    """A description and a builder of a random query over one or two random inputs."""
    left_shape = draw(st.sampled_from(list(EventShape)))
    left_items = draw(input_items(left_shape, Ev))
    left_settings = draw(advance_settings())
    first = draw(st.sampled_from(sorted(UNARY)))
    if draw(st.booleans()):
        right_shape = draw(st.sampled_from(list(EventShape)))
        right_items = draw(input_items(right_shape, Ref))
        right_settings = draw(advance_settings())
        second = draw(st.sampled_from(sorted(BINARY)))
        pre = draw(st.sampled_from(["identity", "where", "shift", "duration"]))

        def build2(flush: bool | None = None) -> Stream[Any]:
            left = Stream.create("left", left_items, left_shape, _flush(left_settings, flush), payload_type=Ev)
            right = Stream.create("right", right_items, right_shape, _flush(right_settings, flush), payload_type=Ref)
            return BINARY[second](UNARY[pre](left), right)

        desc = f"{second}({pre}(left {left_shape.name} {left_settings}), right {right_shape.name} {right_settings})"
        return desc, build2
    then = draw(st.sampled_from(["identity", "where", "select", "shift", "tumbling"]))

    def build1(flush: bool | None = None) -> Stream[Any]:
        left = Stream.create("left", left_items, left_shape, _flush(left_settings, flush), payload_type=Ev)
        out = UNARY[first](left)
        if then != "identity" and out.payload_type is Ev:
            out = UNARY[then](out)
        return out

    return f"{then}({first}(left {left_shape.name} {left_settings}))", build1
