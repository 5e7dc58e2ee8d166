"""The ``Result`` that ``ResultAssembly`` makes holds its events as columns and makes each
``OutputEvent`` and raw item when read (``tempo.runtime.release``): the events and raw
items read, one by one in any order or all at once, equal those made eagerly, item for
item and in order, as every executor made them before; an item read by its index is the one
the list holds later; reading some makes none of the others; the lists behave as lists.

The eager reference (``eager``) is the assembly as it was: an ``OutputEvent`` and a raw item
made per event as it was given."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import AdvanceTimeGenerationSettings, AdvanceTimeSettings, EventShape, InMemoryExecutor, Point, Stream
from tempo.events import Cti, EdgeEnd, EdgeStart, Interval, SubstreamCti
from tempo.result import OutputEvent, RawItem, Result
from tempo.runtime.release import BuiltOnRead, PayloadColumns, ResultAssembly, made_in_bulk, release_order
from tempo.runtime.replay import MERGED
from tempo.ticks import INF, TICK, from_ticks, to_ticks
from tests.budget import examples

PROPERTY = settings(
    max_examples=examples(200),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@attrs.frozen
class P:
    key: int
    label: str


BASE = to_ticks(datetime(2024, 1, 1))

# ---- the eager reference -----------------------------------------------------------------

Entry = tuple[Any, ...]
"""What an engine hands the assembly, in release order: ("event", start, end, payload,
open_edge), ("end", start, end, payload), ("cti", t) or ("key", key, t)."""


def eager(dt: Callable[[int], datetime], entries: list[Entry]) -> tuple[list[OutputEvent[P]], list[RawItem[P]]]:
    """The events and raw items as ``ResultAssembly`` made them, one per entry as it came."""
    events: list[OutputEvent[P]] = []
    raw: list[RawItem[P]] = []
    for entry in entries:
        if entry[0] == "event":
            _, start, end, payload, open_edge = entry
            begin = dt(start)
            stop = begin + TICK if end == start + 1 and not open_edge else dt(end)
            events.append(OutputEvent(begin, stop, payload))
            raw.append(
                EdgeStart(begin, payload) if open_edge else Point(begin, payload) if end == start + 1 else Interval(begin, stop, payload)
            )
        elif entry[0] == "end":
            raw.append(EdgeEnd(dt(entry[1]), dt(entry[2]), entry[3]))
        elif entry[0] == "cti":
            raw.append(Cti(dt(entry[1])))
        else:
            raw.append(SubstreamCti(entry[1], dt(entry[2])))
    return events, raw


def assembled(dt: Callable[[int], datetime], entries: list[Entry]) -> Result[P]:
    """The entries through ``ResultAssembly`` one at a time, as the reference engine gives them."""
    assembly: ResultAssembly[P] = ResultAssembly(dt)
    for entry in entries:
        if entry[0] == "event":
            assembly.event(entry[1], entry[2], entry[3], entry[4])
        elif entry[0] == "end":
            assembly.end_edge(entry[1], entry[2], entry[3])
        elif entry[0] == "cti":
            assembly.cti(entry[1])
        else:
            assembly.key_cti(entry[1], entry[2])
    return assembly.result([], {}, [], P, {})


# ---- strategies ----------------------------------------------------------------------------

ticks = st.one_of(st.integers(BASE, BASE + 50), st.integers(INF - 3, INF - 1), st.integers(0, 3))
payloads = st.builds(P, st.integers(0, 3), st.sampled_from(["a", "b", ""]))


@st.composite
def lifetimes(draw: st.DrawFn) -> tuple[int, int, bool]:
    """(start, end, open_edge): a point, an interval, an open edge (ending at infinity, or at
    the end the engine learnt since it went out)."""
    start = draw(ticks)
    kind = draw(st.sampled_from(["point", "interval", "open", "open, ended"]))
    if kind == "point":
        return start, start + 1, False
    if kind == "open":
        return start, INF, True
    end = draw(st.integers(start + 1, min(start + 20, INF)))
    return start, end, kind == "open, ended"


@st.composite
def engine_entries(draw: st.DrawFn) -> list[Entry]:
    entries: list[Entry] = []
    for _ in range(draw(st.integers(0, 25))):
        what = draw(st.sampled_from(["event", "event", "event", "end", "cti", "key"]))
        if what == "event":
            start, end, open_edge = draw(lifetimes())
            entries.append(("event", start, end, draw(payloads), open_edge))
        elif what == "end":
            start, end, _ = draw(lifetimes())
            entries.append(("end", start, end, draw(payloads)))
        elif what == "cti":
            entries.append(("cti", draw(ticks)))
        else:
            entries.append(("key", draw(st.integers(0, 3)), draw(ticks)))
    return entries


@st.composite
def read_orders(draw: st.DrawFn, length: int) -> list[int]:
    """Indexes to read one by one before the rest (negative ones too), repeats allowed."""
    if length == 0:
        return []
    return draw(st.lists(st.integers(-length, length - 1), max_size=8))


def read_then_fill(items: list[Any], order: list[int]) -> list[Any]:
    """Reads ``order`` by index, then the whole list; each item read first must be the one
    the list holds after."""
    first = [(i, items[i]) for i in order]
    whole = list(items)
    for i, item in first:
        assert whole[i] is item
    return whole


# ---- lazily made equals eagerly made -----------------------------------------------------------


@PROPERTY
@given(entries=engine_entries(), naive=st.booleans(), data=st.data())
def test_events_and_raw_read_in_any_order_equal_those_made_eagerly(entries: list[Entry], naive: bool, data: st.DataObject) -> None:
    def dt(t: int) -> datetime:
        return from_ticks(t, naive)

    events, raw = eager(dt, entries)
    result = assembled(dt, entries)
    assert len(result.events) == len(events) and len(result.raw) == len(raw)
    assert read_then_fill(result.events, data.draw(read_orders(len(events)))) == events
    assert read_then_fill(result.raw, data.draw(read_orders(len(raw)))) == raw
    # One payload object for an event's OutputEvent and its raw item, as before.
    released = [item for item in result.raw if isinstance(item, (Point, Interval, EdgeStart))]
    assert all(item.payload is event.payload for item, event in zip(released, result.events))
    assert result == attrs.evolve(result, events=events, raw=raw)


@st.composite
def released_outputs(draw: st.DrawFn) -> tuple[list[tuple[int, int, P, int]], list[tuple[Any, int]]]:
    """``release_order``'s output for random events and messages: the events whole (the
    ends of the compiled executors), each with the index of the message releasing it."""
    times = sorted(draw(st.sets(ticks, max_size=6)))
    messages: list[tuple[Any, int]] = [(MERGED, t) for t in times]
    for key in draw(st.lists(st.integers(0, 2), max_size=4)):
        messages.insert(draw(st.integers(0, len(messages))), (key, draw(ticks)))
    events = [(*draw(lifetimes())[:2], draw(payloads)) for _ in range(draw(st.integers(0, 20)))]
    ordered = sorted(events, key=lambda ev: (ev[0], ev[1]))
    keyed = draw(st.booleans())
    return release_order(ordered, messages, (lambda p: p.key) if keyed else None), messages


@PROPERTY
@given(released=released_outputs(), columns=st.booleans(), data=st.data())
def test_released_events_as_columns_equal_those_made_eagerly(
    released: tuple[list[tuple[int, int, P, int]], list[tuple[Any, int]]], columns: bool, data: st.DataObject
) -> None:
    """``released`` (Spark), and ``released_columns`` with the payloads as their fields'
    columns (the vectorised executor), against the eager loop ``released`` was."""
    events, messages = released
    entries: list[Entry] = []
    i = 0
    for index, (key, t) in enumerate(messages):
        while i < len(events) and events[i][3] == index:
            s, e, p, _ = events[i]
            entries.append(("event", s, e, p, e >= INF))
            i += 1
        entries.append(("cti", t) if key is MERGED else ("key", key, t))
    expected_events, expected_raw = eager(from_ticks, entries)

    assembly: ResultAssembly[P] = ResultAssembly(from_ticks)
    if columns:
        fields = PayloadColumns(P, [[ev[2].key for ev in events], [ev[2].label for ev in events]], len(events))
        assembly.released_columns([ev[0] for ev in events], [ev[1] for ev in events], fields, [ev[3] for ev in events], messages)
    else:
        assembly.released(events, messages)
    result = assembly.result([], {}, [], P, {})
    assert read_then_fill(result.raw, data.draw(read_orders(len(expected_raw)))) == expected_raw
    assert read_then_fill(result.events, data.draw(read_orders(len(expected_events)))) == expected_events
    assert result.substream_ctis == {k: [from_ticks(t) for k2, t in messages if k2 == k] for k, _ in messages if k is not MERGED}


# ---- reading some makes none of the others --------------------------------------------------


def test_reading_some_events_makes_only_their_payloads_and_events() -> None:
    made: list[int] = []

    def make(key: int, label: str) -> P:
        made.append(key)
        return P(key, label)

    n = 1000
    assembly: ResultAssembly[P] = ResultAssembly(from_ticks)
    fields = PayloadColumns(make, [list(range(n)), ["x"] * n], n)
    assembly.released_columns([BASE + i for i in range(n)], [BASE + i + 1 for i in range(n)], fields, [0] * n, [(MERGED, INF)])
    result = assembly.result([INF], {}, [], P, {})
    assert made == [] and len(result.events) == n and len(result.raw) == n + 1 and result.events
    seventh, last = result.events[7], result.events[-1]
    assert seventh.payload == P(7, "x") and last.payload == P(n - 1, "x")
    assert result.raw[7].payload is seventh.payload and result.raw[n] == Cti(from_ticks(INF))
    assert sorted(made) == [7, n - 1]
    assert list.__len__(result.events) == 0  # no OutputEvent held: only the two read
    assert [e.payload.key for e in result.events] == list(range(n))
    assert set(made) == set(range(n))  # the rest made in bulk (the two read again), keeping those read:
    assert result.events[7] is seventh and result.events[-1] is last and result.raw[7].payload is seventh.payload


def test_a_vectorised_run_makes_no_event_until_one_is_read() -> None:
    pytest.importorskip("polars")
    from tempo.vectorised import VectorisedExecutor

    rows = [Point(datetime(2024, 1, 1) + timedelta(seconds=s), P(s % 3, "v")) for s in range(50)]
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(10, advance_to_infinity_on_shutdown=True))
    stream = Stream.create("in", rows, EventShape.POINT, settings, payload_type=P)
    result = VectorisedExecutor().run(stream)
    assert list.__len__(result.events) == 0 and list.__len__(result.raw) == 0 and len(result.events) == 50
    assert result.events[3] == OutputEvent(rows[3].start, rows[3].start + TICK, rows[3].payload)
    assert list.__len__(result.events) == 0
    assert result == InMemoryExecutor().run(stream)  # every field, in order
    assert list.__len__(result.events) == 50


# ---- list behaviour ----------------------------------------------------------------------


def lazy(n: int) -> BuiltOnRead[int]:
    return BuiltOnRead(n, lambda i: i * 10, lambda: [i * 10 for i in range(n)])


def test_a_list_built_on_read_behaves_as_the_list_of_its_items() -> None:
    plain = [0, 10, 20]
    assert lazy(3) == plain and plain == lazy(3) and lazy(3) == lazy(3) and not lazy(3) != plain and lazy(2) != plain
    assert lazy(3) + [1] == [*plain, 1] and [1] + lazy(3) == [1, *plain] and lazy(2) + lazy(1) == [0, 10, 0]
    assert lazy(2) < plain and plain > lazy(2) and lazy(3) <= plain and lazy(3) >= plain
    assert lazy(3)[1:] == [10, 20] and lazy(3)[-1] == 20 and 20 in lazy(3) and lazy(3).index(10) == 1
    assert list(reversed(lazy(3))) == plain[::-1] and sorted(lazy(3), reverse=True) == [20, 10, 0]
    assert repr(lazy(3)) == repr(plain) and str(lazy(3)) == str(plain) and lazy(3) * 2 == plain * 2
    assert not lazy(0) and lazy(1) and len(lazy(3)) == 3 and [*lazy(3)] == plain and tuple(lazy(3)) == tuple(plain)
    for copied in (copy.copy(lazy(3)), copy.deepcopy(lazy(3)), pickle.loads(pickle.dumps(lazy(3))), lazy(3).copy()):
        assert type(copied) is list and copied == plain
    with pytest.raises(IndexError):
        lazy(3)[3]
    with pytest.raises(IndexError):
        lazy(3)[-4]
    with pytest.raises(TypeError):
        hash(lazy(3))
    changed = lazy(3)
    first = changed[0]
    changed.append(30)
    changed[1] = 11
    assert changed == [0, 11, 20, 30] and changed[0] is first and len(changed) == 4
    assert isinstance(lazy(1), list)


def test_a_result_of_plain_lists_equals_the_assembled_one() -> None:
    entries: list[Entry] = [("event", BASE, BASE + 1, P(1, "a"), False), ("cti", BASE + 5)]
    result = assembled(from_ticks, entries)
    events, raw = eager(from_ticks, entries)
    by_hand = Result(events, [], {}, [], raw, {}, None, P, {})
    assert by_hand == result and result == by_hand and repr(by_hand) == repr(result)


# ---- made_in_bulk ----------------------------------------------------------------------------


@attrs.frozen
class Base:
    a: int


@attrs.frozen
class Derived(Base):
    b: str


@attrs.frozen(cache_hash=True)
class Hashed:
    a: int


@attrs.frozen
class Checked:
    a: int = attrs.field(validator=attrs.validators.gt(0))


@attrs.define(slots=False)
class Unslotted:
    a: int


@pytest.mark.parametrize("cls", [P, Derived, Hashed, Unslotted, OutputEvent], ids=lambda c: c.__name__)
def test_made_in_bulk_equals_made_one_by_one(cls: type) -> None:
    n = len(attrs.fields(cls))
    columns = [list(range(5)) if i % 2 == 0 else [str(j) for j in range(5)] for i in range(n)]
    made = made_in_bulk(cls, columns, 5)
    one_by_one = [cls(*row) for row in zip(*columns)]
    assert made == one_by_one and [type(m) for m in made] == [cls] * 5 and repr(made) == repr(one_by_one)
    if cls.__hash__ is not None:  # a cached hash is made by the constructor: never skipped
        assert [hash(m) for m in made] == [hash(m) for m in one_by_one]


def test_made_in_bulk_runs_a_constructor_that_checks() -> None:
    with pytest.raises(ValueError):
        made_in_bulk(Checked, [[1, 0]], 2)


# ---- the vectorised executor's release order -----------------------------------------------------


@PROPERTY
@given(
    lifetimes=st.lists(st.tuples(st.integers(0, 8), st.integers(1, 3)), max_size=30),
    ctis=st.sets(st.integers(0, 12), max_size=5),
)
def test_released_rows_are_release_order_over_columns(lifetimes: list[tuple[int, int]], ctis: set[int]) -> None:
    """Which rows, in what order, each with its CTI: the same as ``release_order``, ties of
    one start and end in the frame's order."""
    pl = pytest.importorskip("polars")
    from tempo.vectorised.executor import released_rows
    from tempo.vectorised.expressions import END, START

    row = "row"
    frame = pl.DataFrame(
        {START: [s for s, _ in lifetimes], END: [s + n for s, n in lifetimes], row: list(range(len(lifetimes)))},
        schema={START: pl.Int64, END: pl.Int64, row: pl.Int64},
    )
    times = sorted(ctis)
    rows, by = released_rows(frame, times)
    decoded = sorted(zip(frame[START].to_list(), frame[END].to_list(), frame[row].to_list()), key=lambda ev: (ev[0], ev[1]))
    expected = release_order(decoded, [(MERGED, t) for t in times], None)
    assert list(zip(rows[START].to_list(), rows[END].to_list(), rows[row].to_list(), by)) == expected
    assert rows.columns == frame.columns
