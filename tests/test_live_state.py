"""A live query's saved state stays flat while CTIs advance: it holds what is still open
(windows not closed, join sides that can still match, edges not ended, outputs waiting for
release), never the history.

Each query runs over a long generated input on the live engine; its state is saved
(``LiveEngine.snapshot``) after each quarter of the input. With CTIs every 100 events the
open part is the same size all along, so the state after the last quarter must be no larger
than after the first (give or take a little for dictionaries that grew and payload values).
CI runs 10^5 events per query; the slow version 10^6.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest

from tempo import AdvanceTimeGenerationSettings, AdvanceTimeSettings, EdgeEnd, EdgeStart, EventShape, Interval, Point, Stream
from tempo.plan.query import Query
from tempo.runtime.engine import prepared_inputs
from tempo.runtime.ingress import TimestampMode
from tempo.runtime.live import LiveEngine
from tests.strategies import Ev, Ref

T0 = datetime(2026, 1, 1)
SETTINGS = AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency=100, delay=timedelta(seconds=2)))
KEYS = 50


def _points(n: int) -> Callable[[], Iterator[Any]]:
    return lambda: (
        Point(T0 + timedelta(milliseconds=100 * i), Ev(key=i % KEYS, value=i % 7), arrival=T0 + timedelta(milliseconds=100 * i))
        for i in range(n)
    )


def _intervals(n: int) -> Callable[[], Iterator[Any]]:
    """A reference interval every 10 points' time, each 3 s long: a few are open at any time.
    Both inputs have arrival times (their starts), so the live engine merges them as they
    come; without them every reference would wait for the points input to end."""
    return lambda: (
        Interval(T0 + timedelta(seconds=i), T0 + timedelta(seconds=i + 3), Ref(key=i % KEYS, ref=i % 5), arrival=T0 + timedelta(seconds=i))
        for i in range(n // 10)
    )


def _edges(n: int) -> Callable[[], Iterator[Any]]:
    """Start edges each ended 40 items later: about 20 open at any time."""

    def items() -> Iterator[Any]:
        for i in range(n // 2):
            t = T0 + timedelta(milliseconds=100 * i)
            yield EdgeStart(t, Ev(key=i % KEYS, value=i))
            if i >= 20:
                j = i - 20
                yield EdgeEnd(T0 + timedelta(milliseconds=100 * j), t, Ev(key=j % KEYS, value=j))

    return items


def _window(n: int) -> Stream[Any]:
    s = Stream.create("points", _points(n), EventShape.POINT, SETTINGS, payload_type=Ev)
    return (
        s.group_by(lambda e: e.key).hopping(timedelta(seconds=10), timedelta(seconds=5)).aggregate(lambda k, w: Ev(key=k, value=w.count()))
    )


def _join(n: int) -> Stream[Any]:
    points = Stream.create("points", _points(n), EventShape.POINT, SETTINGS, payload_type=Ev)
    refs = Stream.create("refs", _intervals(n), EventShape.INTERVAL, SETTINGS, payload_type=Ref)
    return points.join(refs, lambda a, b: a.key == b.key, lambda a, b: Ev(key=a.key, value=a.value + b.ref))


def _anti_join(n: int) -> Stream[Any]:
    points = Stream.create("points", _points(n), EventShape.POINT, SETTINGS, payload_type=Ev)
    refs = Stream.create("refs", _intervals(n), EventShape.INTERVAL, SETTINGS, payload_type=Ref)
    return points.anti_join(refs, lambda a, b: a.key == b.key)


def _edge_query(n: int) -> Stream[Any]:
    edges = Stream.create("edges", _edges(n), EventShape.EDGE, SETTINGS, payload_type=Ev)
    return edges.where(lambda e: e.value % 3 != 0)


QUERIES = {"window": _window, "join": _join, "anti_join": _anti_join, "edges": _edge_query}


def _state_sizes(build: Callable[[int], Stream[Any]], n: int) -> list[int]:
    """The saved state's size after each quarter of the inputs (interleaved by chunks)."""
    query = Query.build(build(n).node)
    mode = TimestampMode()
    streams = prepared_inputs(query, mode)
    engine = LiveEngine(query, mode)
    sizes = []
    done = [False] * len(streams)
    chunk = 1000
    pushed = 0
    quarter = n // 4
    while not all(done):
        for index, items in enumerate(streams):
            if done[index]:
                continue
            part = list(itertools.islice(items, chunk if index == 0 else chunk // 10))
            done[index] = not part
            engine.push(index, part)
            pushed += len(part) if index == 0 else 0
        engine.run()
        engine.take()
        if pushed >= quarter * (len(sizes) + 1) and len(sizes) < 3:
            sizes.append(len(engine.snapshot()))
    sizes.append(len(engine.snapshot()))
    return sizes


def _check_flat(name: str, n: int) -> None:
    sizes = _state_sizes(QUERIES[name], n)
    assert len(sizes) >= 4, sizes
    first, last = sizes[0], sizes[-1]
    assert last <= 1.25 * first + 2048, f"{name}: state grew from {first} to {last} bytes over {n} events: {sizes}"


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_live_state_stays_flat(name: str) -> None:
    _check_flat(name, 100_000)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_live_state_stays_flat_over_a_million_events(name: str) -> None:
    _check_flat(name, 1_000_000)
