"""Which operators keep the substream key (``Node.substream_key``, docs/semantics.md
3.10.4): the key must reach the output as a copied field, named by an expression over the
output payload; anything else merges the keys."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest

from tempo import AdvanceTimeSettings, EventOrderingSettings, EventShape, Point, Stream
from tempo.expr import nodes as x
from tempo.plan.query import Query


@attrs.frozen
class Reading:
    device: str
    site: str
    value: int


@attrs.frozen
class Renamed:
    sensor: str
    value: int


@attrs.frozen
class Count:
    device: str
    n: int


@attrs.frozen
class Pair:
    device: str
    left: int
    right: int


SETTINGS = AdvanceTimeSettings(ordering=EventOrderingSettings())
ITEMS = [Point(datetime(2024, 1, 1), Reading("d1", "s1", 1), arrival=datetime(2024, 1, 1))]


def readings(name: str = "r", over: bool = True) -> Stream[Reading]:
    return Stream.create(name, ITEMS, EventShape.POINT, SETTINGS, over=(lambda r: r.device) if over else None)


def key_of(stream: Stream[Any]) -> str | None:
    """The output's substream key as ``Type.field``, or None."""
    key = Query.build(stream.node).substream_key(stream.node)
    if key is None:
        return None
    assert isinstance(key, x.Attr) and isinstance(key.base, x.Input) and key.base.index == 0
    return f"{key.base.record.__name__}.{key.name}"


def count(s: Stream[Reading], by_site: bool = False) -> Stream[Count]:
    grouped = s.group_by(lambda r: r.site) if by_site else s.group_by(lambda r: r.device)
    return grouped.tumbling(timedelta(minutes=1)).aggregate(lambda k, w: Count(k, w.count()))


def pair(a: Reading, b: Reading) -> Pair:
    return Pair(a.device, a.value, b.value)


CASES: list[tuple[str, Any, str | None]] = [
    ("input", lambda: readings(), "Reading.device"),
    ("input without over", lambda: readings(over=False), None),
    ("where", lambda: readings().where(lambda r: r.value > 0), "Reading.device"),
    ("shift", lambda: readings().shift_event_time(timedelta(seconds=1)), "Reading.device"),
    ("select copying the key", lambda: readings().select(lambda r: Renamed(r.device, r.value)), "Renamed.sensor"),
    ("select computing from it", lambda: readings().select(lambda r: Renamed(r.device + "x", r.value)), None),
    ("select dropping it", lambda: readings().select(lambda r: Renamed(r.site, r.value)), None),
    ("window by the key", lambda: count(readings()), "Count.device"),
    ("window by another field", lambda: count(readings(), by_site=True), None),
    ("window without groups", lambda: readings().tumbling(timedelta(minutes=1)).aggregate(lambda w: Count("all", w.count())), None),
    ("join on the key", lambda: readings("a").join(readings("b"), lambda a, b: a.device == b.device, pair), "Pair.device"),
    (
        "join on the key and more",
        lambda: readings("a").join(readings("b"), lambda a, b: (a.site == b.site) & (a.device == b.device), pair),
        "Pair.device",
    ),
    ("join on another field", lambda: readings("a").join(readings("b"), lambda a, b: a.site == b.site, pair), None),
    (
        "join of one side with substreams",
        lambda: readings("a").join(readings("b", over=False), lambda a, b: a.device == b.device, pair),
        None,
    ),
    ("union", lambda: readings("a").union(readings("b")), "Reading.device"),
    ("union with an input without over", lambda: readings("a").union(readings("b", over=False)), None),
    ("anti-join on the key", lambda: readings("a").anti_join(readings("b"), lambda a, b: a.device == b.device), None),
    (
        "window after a select renaming it",
        lambda: (
            readings()
            .select(lambda r: Renamed(r.device, r.value))
            .group_by(lambda r: r.sensor)
            .tumbling(timedelta(minutes=1))
            .aggregate(lambda k, w: Count(k, w.count()))
        ),
        "Count.device",
    ),
]


@pytest.mark.parametrize("build,expected", [(b, e) for _, b, e in CASES], ids=[c[0] for c in CASES])
def test_which_operators_keep_the_key(build: Any, expected: str | None) -> None:
    assert key_of(build()) == expected
