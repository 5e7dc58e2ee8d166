"""Memory follows the open windows and lifetimes, not the length of the stream.

Each query runs over a lazily generated input of N and of 8N events; the peak memory of
the run (tracemalloc) must not grow with N, because operators purge state as CTIs pass
and the lazy input is never held whole.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import attrs

from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EdgeEnd,
    EdgeStart,
    EventShape,
    InMemoryExecutor,
    InputItem,
    ItemSource,
    Point,
    Stream,
)

T0 = datetime(2024, 1, 1)


@attrs.frozen
class Tick:
    key: int
    value: int


@attrs.frozen
class Ref:
    key: int
    factor: int


@attrs.frozen
class Total:
    n: int
    total: int


def ticks(n: int) -> Callable[[], Iterator[InputItem[Tick]]]:
    def gen() -> Iterator[InputItem[Tick]]:
        for i in range(n):
            t = T0 + timedelta(milliseconds=10 * i)
            yield Point(t, Tick(i % 50, i % 7), arrival=t)

    return gen


def refs(n: int) -> Callable[[], Iterator[InputItem[Ref]]]:
    """Per key a reference edge that is replaced every 5 s of the ticks' time."""

    def gen() -> Iterator[InputItem[Ref]]:
        span = n * 10 // 1000 + 1
        for s in range(0, span, 5):
            t = T0 + timedelta(seconds=s)
            for key in range(50):
                if s:
                    prev = T0 + timedelta(seconds=s - 5)
                    yield EdgeEnd(prev, t, Ref(key, s - 5), arrival=t - timedelta(milliseconds=1))
                yield EdgeStart(t, Ref(key, s), arrival=t - timedelta(milliseconds=1))

    return gen


def peak_bytes(build: Callable[[int], Stream[Any]], n: int) -> tuple[int, int]:
    stream = build(n)
    tracemalloc.start()
    result = InMemoryExecutor().run(stream)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, len(result.events)


SETTINGS = AdvanceTimeSettings(AdvanceTimeGenerationSettings(100, timedelta(seconds=1)), policy=AdvanceTimePolicy.DROP)


def windowed(n: int) -> Stream[Total]:
    src = Stream.create("ticks", ItemSource(ticks(n), Tick), EventShape.POINT, SETTINGS)
    return src.tumbling(timedelta(seconds=60)).aggregate(lambda w: Total(n=w.count(), total=w.sum(lambda e: e.value)))


def joined(n: int) -> Stream[Total]:
    src = Stream.create("ticks", ItemSource(ticks(n), Tick), EventShape.POINT, SETTINGS)
    ref_settings = AdvanceTimeSettings(import_=AdvanceTimeImportSettings("ticks"), policy=AdvanceTimePolicy.ADJUST)
    ref = Stream.create("refs", ItemSource(refs(n), Ref), EventShape.EDGE, ref_settings)
    pairs = src.join(ref, lambda a, b: a.key == b.key, lambda a, b: Tick(key=a.key, value=a.value * b.factor))
    return pairs.tumbling(timedelta(seconds=60)).aggregate(lambda w: Total(n=w.count(), total=w.sum(lambda e: e.value)))


def test_window_state_does_not_grow_with_the_stream() -> None:
    small, small_out = peak_bytes(windowed, 6_000)
    large, large_out = peak_bytes(windowed, 48_000)
    assert large_out > small_out  # the large run really did more windows
    assert large < 2 * small, (small, large)


def test_join_state_does_not_grow_with_the_stream() -> None:
    small, small_out = peak_bytes(joined, 6_000)
    large, large_out = peak_bytes(joined, 48_000)
    assert large_out > small_out
    assert large < 2 * small, (small, large)
