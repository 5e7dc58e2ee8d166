"""``explode`` (docs/semantics.md 5.5.1), on every executor: one event per list element, in
list order, each with its input event's lifetime; nothing for an empty or null list. Expected
outputs are written by hand from 5.5.1."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pyarrow as pa
import pytest

from tempo import TICK, AdvanceTimeSettings, Cti, EdgeEnd, EdgeStart, EventShape, Interval, Point, QueryBuildError, Stream
from tempo.sources import ArrowSource
from tests.conformance.test_operators import evs, key, run

BASE = datetime(2024, 1, 1)
INF = datetime.max


def T(s: float) -> datetime:
    return BASE + timedelta(seconds=s)


@attrs.frozen
class Order:
    id: int
    lines: list[str | None] | None


@attrs.frozen
class Line:
    order: int
    sku: str | None


@attrs.frozen
class Part:
    sku: str
    qty: int


@attrs.frozen
class Crate:
    id: int
    parts: tuple[Part, ...]


@attrs.frozen
class Qty:
    crate: int
    sku: str
    qty: int


def lines(s: Stream[Order]) -> Stream[Line]:
    return s.explode(lambda o: o.lines, lambda o, sku: Line(order=o.id, sku=sku))


def test_intervals_points_and_lists_empty_null_or_with_nulls(executor: Any) -> None:
    """
    ::

                     0    5    10
                     |....|....|
        in             [===)       o1 lines=[a, b]
        in               *         o2 lines=[]
        in                *        o3 lines=None
        in                  [=)    o4 lines=[c, None]
        CTIs              ^    ^   5, 10
        out            [===)       (o1, a), (o1, b), released at CTI 5
        out                 [=)    (o4, c), (o4, None), released at CTI 10
    """
    items: list[Any] = [
        Interval(T(1), T(5), Order(1, ["a", "b"])),
        Interval(T(3), T(3) + TICK, Order(2, [])),
        Interval(T(4), T(4) + TICK, Order(3, None)),
        Cti(T(5)),
        Interval(T(7), T(9), Order(4, ["c", None])),
        Cti(T(10)),
    ]
    r = run(executor, lines(Stream.create("orders", items, EventShape.INTERVAL)))
    assert sorted(evs(r), key=key) == sorted(
        [
            (T(1), T(5), Line(1, "a")),
            (T(1), T(5), Line(1, "b")),
            (T(7), T(9), Line(4, "c")),
            (T(7), T(9), Line(4, None)),
        ],
        key=key,
    )
    assert r.ctis == [T(5), T(10)]


def test_an_edges_outputs_are_ended_by_its_end_edge(executor: Any) -> None:
    """o5 opens at 2 with [x, y] and ends at 6; o6 opens at 8 and never ends.

    ::

                     0    5    10
                     |....|....|
        in             [===)       o5: EdgeStart(2), EdgeEnd(2, 6)
        in                   [==>  o6: EdgeStart(8), never ended
        CTIs            ^      ^   3, 9
        out            [===)       (o5, x), (o5, y)
        out                  [==>  (o6, z), open
    """
    items: list[Any] = [
        EdgeStart(T(2), Order(5, ["x", "y"])),
        Cti(T(3)),
        EdgeEnd(T(2), T(6), Order(5, ["x", "y"])),
        EdgeStart(T(8), Order(6, ["z"])),
        Cti(T(9)),
    ]
    r = run(executor, lines(Stream.create("orders", items, EventShape.EDGE)))
    assert sorted(evs(r), key=key) == sorted(
        [
            (T(2), T(6), Line(5, "x")),
            (T(2), T(6), Line(5, "y")),
            (T(8), INF, Line(6, "z")),
        ],
        key=key,
    )
    assert r.ctis == [T(3), T(9)]


def test_a_tuple_of_records_keeps_list_order(executor: Any) -> None:
    """Crates holding a tuple of part records (arrays of structs on Spark), flushed at the
    end: each part of each crate at its crate's time, in order; an empty crate gives none."""
    items = [
        Point(T(1), Crate(1, (Part("a", 2), Part("b", 1)))),
        Point(T(2), Crate(2, ())),
        Point(T(2), Crate(3, (Part("a", 5),))),
    ]
    s = Stream.create("crates", items, EventShape.POINT, AdvanceTimeSettings.replay())
    r = run(executor, s.explode(lambda c: c.parts, lambda c, p: Qty(crate=c.id, sku=p.sku, qty=p.qty * 10)))
    assert sorted(evs(r), key=key) == sorted(
        [
            (T(1), T(1) + TICK, Qty(1, "a", 20)),
            (T(1), T(1) + TICK, Qty(1, "b", 10)),
            (T(2), T(2) + TICK, Qty(3, "a", 50)),
        ],
        key=key,
    )


@attrs.frozen
class Basket:
    id: int
    items: list[int]


@attrs.frozen
class Item:
    basket: int
    price: int


def test_a_list_column_of_a_table_then_a_window_over_the_elements(executor: Any) -> None:
    """Baskets at 1 and 12 s with prices [3, 4] and [5]; exploded and summed per 10 s window:
    [0,10) 7 over 2 items, [10,20) 5 over 1."""
    table = pa.table({"ts": [T(1), T(12)], "id": [1, 2], "items": [[3, 4], [5]]})
    s = Stream.create("baskets", ArrowSource(table, Basket, start="ts"), EventShape.POINT, AdvanceTimeSettings.replay())

    @attrs.frozen
    class Total:
        n: int
        total: int

    out = (
        s.explode(lambda b: b.items, lambda b, price: Item(b.id, price))
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda w: Total(w.count(), w.sum(lambda i: i.price)))
    )
    r = executor.run(out)  # a table's timestamps are UTC instants: results are aware
    utc = [T(s).replace(tzinfo=timezone.utc) for s in (0, 10, 20)]
    assert evs(r) == [(utc[0], utc[1], Total(2, 7)), (utc[1], utc[2], Total(1, 5))]


def test_explode_takes_a_list_field() -> None:
    s = Stream.create("orders", [Point(T(1), Order(1, ["a"]))], EventShape.POINT)
    with pytest.raises(QueryBuildError, match="explode\\(\\) takes a list field"):
        s.explode(lambda o: o.id, lambda o, sku: Line(order=o.id, sku=None))  # type: ignore[arg-type,misc]


def test_a_list_field_holding_something_else_is_an_input_error(executor: Any) -> None:
    from tempo import InputError, InputSchemaError

    bad = Stream.create("orders", [Point(T(1), Order(1, ["a"])), Point(T(2), Order(2, 5))], EventShape.POINT)  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"item #1 .*Order.lines is declared a list \(list\[str\]\), but holds 5"):
        executor.run(lines(bad))
    table = pa.table({"ts": [T(1)], "id": [1], "items": [["x", "y"]]})
    strings = Stream.create("baskets", ArrowSource(table, Basket, start="ts"), EventShape.POINT, AdvanceTimeSettings.replay())
    with pytest.raises(InputSchemaError, match=r"Basket.items is declared list\[int\], but its column 'items' .* is a list<string> column"):
        executor.run(strings.explode(lambda b: b.items, lambda b, price: Item(b.id, price)))
