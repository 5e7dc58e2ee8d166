"""What a query releases, and the ``Result`` made of it: one assembly for every executor.

**The release rule.** An output event is released by the first output CTI past its start
or, when the output keeps a substream key (``Query.substream_key``), by the first CTI of its
own key past its start, whichever comes first. Events no such CTI passes are withheld.

The executors apply the rule at different moments, and that difference is real: the
reference engine's egress (``tempo.runtime.egress.Egress``) applies it as the CTIs come
and sees an edge event go out as a start edge and later its end; Spark sees whole lifetimes
after the run and orders them by ``release_order`` (the vectorised executor by the same
rule over whole columns). All of them then hand the released events and the output's CTI
messages, in release order, to a ``ResultAssembly``.

**The result's events.** The assembly keeps the events as columns (``ReleasedEvents``: start
and end ticks, open edges, payloads, or the payloads' fields as ``PayloadColumns``), and the
``Result``'s ``events`` and ``raw`` are ``BuiltOnRead`` lists over them: an item read by its
index is made alone, anything else makes every item in bulk (a time converted once for the
run of events sharing it, slotted attrs objects filled column by column: ``made_in_bulk``)
and leaves a plain list. The items are those an eager assembly made, in the same order; a
run pays nothing per event for events nobody reads.
"""

from __future__ import annotations

import bisect
import collections
import functools
import itertools
import operator
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, Generic, SupportsIndex, TypeVar, overload

import attrs

from tempo.events import Cti, EdgeEnd, EdgeStart, Interval, Point, SubstreamCti
from tempo.result import InputMetrics, OutputEvent, RawItem, Rejection, Result, Withheld
from tempo.ticks import INF

T = TypeVar("T")
X = TypeVar("X")
Y = TypeVar("Y")


def release_order(
    events: list[tuple[int, int, Any]], messages: list[tuple[Any, int]], key_of: Callable[[Any], Any] | None
) -> list[tuple[int, int, Any, int]]:
    """The released ones of ``events`` (start, end, payload), each with the index in
    ``messages`` of the CTI that releases it by the release rule. ``messages`` are the
    output's CTIs as (``MERGED``, t), with its substreams' as (key, t) when ``key_of`` gives an
    output payload's key, in the order they were emitted. In release order, then start order."""
    from tempo.runtime.replay import MERGED  # the replay builds on the engine, which builds on this

    merged: tuple[list[int], list[int]] = ([], [])  # (times, indexes in messages)
    keyed: dict[Any, tuple[list[int], list[int]]] = {}
    for index, (k, t) in enumerate(messages):
        times, at = merged if k is MERGED else keyed.setdefault(k, ([], []))
        times.append(t)
        at.append(index)
    out: list[tuple[int, int, Any, int]] = []
    for s, e, pl in events:
        by = [merged] if key_of is None else [merged, keyed.get(key_of(pl), ([], []))]
        found = [at[i] for times, at in by for i in [bisect.bisect_right(times, s)] if i < len(times)]
        if found:
            out.append((s, e, pl, min(found)))
    out.sort(key=lambda ev: (ev[3], ev[0], ev[1]))
    return out


def made_in_bulk(cls: Callable[..., X], columns: Sequence[Iterable[Any]], length: int) -> list[X]:
    """``[cls(*row) for row in zip(*columns)]`` (``length`` rows; ``columns``: every argument).
    A slotted attrs class whose ``__init__`` only stores its fields (``stores_only``) and
    that holds nothing else has its objects made without calling it, each field's slot
    filled column by column: a fifth of the time per object."""
    slots = _stored_slots(cls) if isinstance(cls, type) else None
    if slots is None or len(slots) != len(columns):
        return list(map(cls, *columns)) if columns else [cls() for _ in range(length)]
    create: Callable[[Any], X] = object.__new__
    made = list(map(create, itertools.repeat(cls, length)))
    for fill, column in zip(slots, columns):
        collections.deque(map(fill, made, column), maxlen=0)  # the slots' own setters: no __setattr__
    return made


@functools.cache
def _stored_slots(cls: type) -> tuple[Callable[[Any, Any], None], ...] | None:
    """The setters of ``cls``'s field slots, in its ``__init__``'s order, when making an
    object of it is no more than filling them (see ``made_in_bulk``); else None."""
    from tempo.tables import stores_only

    new: Any = cls.__new__
    if new is not object.__new__ or cls.__dictoffset__ or not stores_only(cls):
        return None
    names = [a.name for a in attrs.fields(cls)]
    declared = [c.__dict__.get("__slots__", ()) for c in cls.__mro__]
    slots = {slot for d in declared for slot in ((d,) if isinstance(d, str) else d)} - {"__weakref__"}
    if slots != set(names):
        return None
    setters = [getattr(cls, name) for name in names]
    if not all(isinstance(s, types.MemberDescriptorType) for s in setters):
        return None
    return tuple(s.__set__ for s in setters)


class PayloadColumns(Generic[T]):
    """Payloads given as their fields' columns (in ``record_fields`` order), each made by
    ``make(*fields)`` when first read. ``make`` must not fail (``tempo.tables.stores_only``):
    a payload made after the run cannot raise the run's error."""

    def __init__(self, make: Callable[..., T], columns: Sequence[Sequence[Any]], length: int) -> None:
        self.make, self.columns, self.length = make, columns, length

    def one(self, index: int) -> T:
        return self.make(*[column[index] for column in self.columns])

    def every(self) -> list[T]:
        return made_in_bulk(self.make, self.columns, self.length)


class BuiltOnRead(list[X]):
    """A list whose items are made when first read: one at a time by an index, all of them
    (in bulk) by anything else, after which it is a plain list holding them. An item read by
    its index is the one the list holds afterwards. ``len`` and truth need no item; a copy,
    pickle or ``copy.deepcopy`` is a plain ``list``."""

    __slots__ = ("_length", "_one", "_every", "_made", "_lock")

    def __init__(self, length: int, one: Callable[[int], X], every: Callable[[], list[X]], lock: threading.Lock | None = None) -> None:
        """``one(i)`` makes item ``i``, ``every()`` all of them. Lists whose items are made
        from the same state share its ``lock``."""
        super().__init__()
        self._length, self._one, self._every = length, one, every
        self._made: dict[int, X] | None = {}
        """The items read by their index so far; None once every item is held."""
        self._lock = threading.Lock() if lock is None else lock  # threads reading at once make each item once

    def _filled(self) -> BuiltOnRead[X]:
        with self._lock:
            made = self._made
            if made is not None:
                items = self._every()
                for index, item in made.items():
                    items[index] = item
                list.extend(self, items)
                self._made = None
        return self

    def __len__(self) -> int:
        return self._length if self._made is not None else list.__len__(self)

    @overload
    def __getitem__(self, index: SupportsIndex) -> X: ...
    @overload
    def __getitem__(self, index: slice) -> list[X]: ...
    def __getitem__(self, index: SupportsIndex | slice) -> X | list[X]:
        if self._made is None:  # set only once every item is held
            return list.__getitem__(self, index)
        if isinstance(index, slice):
            return list.__getitem__(self._filled(), index)
        try:
            at = operator.index(index)
        except TypeError:
            raise TypeError(f"list indices must be integers or slices, not {type(index).__name__}") from None
        if at < 0:
            at += self._length
        if not 0 <= at < self._length:
            raise IndexError("list index out of range")
        with self._lock:
            made = self._made
            if made is None:
                return list.__getitem__(self, at)
            if at not in made:
                made[at] = self._one(at)
            return made[at]

    def __iter__(self) -> Iterator[X]:
        return list.__iter__(self._filled())

    def __eq__(self, other: object) -> bool:
        return list.__eq__(self._filled(), _filled(other))

    def __ne__(self, other: object) -> bool:
        return list.__ne__(self._filled(), _filled(other))

    def __lt__(self, other: list[X]) -> bool:
        return list.__lt__(self._filled(), _filled(other))

    def __le__(self, other: list[X]) -> bool:
        return list.__le__(self._filled(), _filled(other))

    def __gt__(self, other: list[X]) -> bool:
        return list.__gt__(self._filled(), _filled(other))

    def __ge__(self, other: list[X]) -> bool:
        return list.__ge__(self._filled(), _filled(other))

    @overload
    def __add__(self, other: list[X]) -> list[X]: ...
    @overload
    def __add__(self, other: list[Y]) -> list[X | Y]: ...
    def __add__(self, other: list[Any]) -> list[Any]:
        return list.__add__(self._filled(), _filled(other))

    def __radd__(self, other: list[Any]) -> list[Any]:
        # Before list's own __add__, which would read this list's (unfilled) storage.
        return list.__add__(_filled(other), self._filled())

    def __repr__(self) -> str:
        return list.__repr__(self._filled())

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[type[list[X]], tuple[list[X]]]:
        return list, (list(self._filled()),)


def _filled(other: Any) -> Any:
    return other._filled() if isinstance(other, BuiltOnRead) else other


def _filled_first(name: str) -> Callable[..., Any]:
    method = getattr(list, name)

    def filled_first(self: BuiltOnRead[Any], *args: Any, **kwargs: Any) -> Any:
        return method(self._filled(), *args, **kwargs)

    filled_first.__name__ = filled_first.__qualname__ = name
    filled_first.__doc__ = method.__doc__
    return filled_first


# Every other method of list reads or changes the items themselves: they are all made first.
for _name in (
    "__contains__",
    "__reversed__",
    "__mul__",
    "__rmul__",
    "__imul__",
    "__iadd__",
    "__setitem__",
    "__delitem__",
    "__sizeof__",
    "append",
    "clear",
    "copy",
    "count",
    "extend",
    "index",
    "insert",
    "pop",
    "remove",
    "reverse",
    "sort",
):
    setattr(BuiltOnRead, _name, _filled_first(_name))


class ReleasedEvents(Generic[T]):
    """The released events of a run as columns, in release order: start and end ticks,
    whether each went out as an open start edge, and the payloads. ``event`` and ``raw_event``
    make one event's ``OutputEvent`` and raw item, ``events`` and ``raw_events`` all of them
    at once. One payload object serves an
    event's ``OutputEvent`` and its raw item."""

    def __init__(
        self,
        to_datetime: Callable[[int], datetime],
        starts: list[int],
        ends: list[int],
        open_edges: list[bool],
        payloads: list[T] | PayloadColumns[T],
    ) -> None:
        self.dt = to_datetime
        self.starts, self.ends, self.open_edges = starts, ends, open_edges
        self._payloads = payloads
        self._payload_made: dict[int, T] = {}
        self._times: tuple[list[datetime], list[datetime]] | None = None

    def __len__(self) -> int:
        return len(self.starts)

    def payload(self, index: int) -> T:
        payloads = self._payloads
        if isinstance(payloads, list):
            return payloads[index]
        made = self._payload_made.get(index)
        if made is None:
            made = self._payload_made[index] = payloads.one(index)
        return made

    def payloads(self) -> list[T]:
        payloads = self._payloads
        if isinstance(payloads, PayloadColumns):
            every = payloads.every()
            for index, made in self._payload_made.items():
                every[index] = made
            self._payloads = payloads = every
            self._payload_made.clear()
        return payloads

    def lifetime(self, index: int) -> tuple[datetime, datetime]:
        """The event's start and end as datetimes: an open edge's end is infinity, or the end
        the engine learnt since; a point's, ``to_datetime(start + 1)``, is its start + 1 tick."""
        return self.dt(self.starts[index]), self.dt(self.ends[index])

    def lifetimes(self) -> tuple[list[datetime], list[datetime]]:
        """Every event's ``lifetime``, as two columns."""
        if self._times is None:
            self._times = (_converted(self.starts, self.dt), _converted(self.ends, self.dt))
        return self._times

    def event(self, index: int) -> OutputEvent[T]:
        begin, stop = self.lifetime(index)
        return OutputEvent(begin, stop, self.payload(index))

    def events(self) -> list[OutputEvent[T]]:
        begins, stops = self.lifetimes()
        return made_in_bulk(OutputEvent, (begins, stops, self.payloads()), len(begins))

    def raw_event(self, index: int) -> RawItem[T]:
        """The event as it went out: an open start edge, a point or an interval."""
        begin, stop = self.lifetime(index)
        return self._item(self.starts[index], self.ends[index], self.open_edges[index], begin, stop, self.payload(index))

    def raw_events(self) -> list[RawItem[T]]:
        begins, stops = self.lifetimes()
        payloads, n = self.payloads(), len(begins)
        nothing = itertools.repeat(None, n)  # no arrival
        if not any(self.open_edges):  # all points or all intervals, as most outputs are: made in bulk
            if all(e == s + 1 for s, e in zip(self.starts, self.ends)):
                return made_in_bulk(Point, (begins, payloads, nothing), n)
            if all(e != s + 1 for s, e in zip(self.starts, self.ends)):
                return made_in_bulk(Interval, (begins, stops, payloads, nothing), n)
        return list(map(self._item, self.starts, self.ends, self.open_edges, begins, stops, payloads))

    @staticmethod
    def _item(start: int, end: int, open_edge: bool, begin: datetime, stop: datetime, payload: T) -> RawItem[T]:
        if open_edge:
            return EdgeStart(begin, payload)
        if end == start + 1:
            return Point(begin, payload)
        return Interval(begin, stop, payload)


def _converted(ticks: list[int], to_datetime: Callable[[int], datetime]) -> list[datetime]:
    """``[to_datetime(t) for t in ticks]``, converting a time only when it differs from the
    one before: events released together by start share their starts (a window's results,
    their ends too), and a column of distinct times pays one comparison each."""
    out: list[datetime] = []
    append = out.append
    last, value = None, None
    for t in ticks:
        if t != last:
            last, value = t, to_datetime(t)
        append(value)  # type: ignore[arg-type]  # set on the first time
    return out


class ResultAssembly(Generic[T]):
    """A ``Result`` built from what the output released, given in release order: events
    (``event``, or all at once as columns: ``released``, ``released_columns``), the end edges
    of released open events (``end_edge``: the reference engine only) and CTIs (``cti``,
    ``key_cti``). Times are in ticks; ``to_datetime`` turns them into the query's datetimes.

    The result holds the events as columns (``ReleasedEvents``): its ``events`` and ``raw``
    are ``BuiltOnRead`` lists, whose items are made when read, so a run makes no object per
    event that nobody reads. Every time is checked to convert when the result is made (the
    extremes, as conversion is monotonic), so a run's errors stay the run's."""

    def __init__(self, to_datetime: Callable[[int], datetime]) -> None:
        self.dt = to_datetime
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.open_edges: list[bool] = []
        self.payloads: list[T] | PayloadColumns[T] = []
        self.layout: list[int | RawItem[T]] = []
        """``raw`` in order: an event's index among the columns, or an item made already
        (a CTI, a substream's CTI, an end edge)."""
        self.substream_ctis: dict[Any, list[datetime]] = {}

    def event(self, start: int, end: int, payload: T, open_edge: bool) -> None:
        """A released event: an open start edge (``open_edge``: its end is infinity, or the
        end the engine learnt since, which ``OutputEvent.end`` holds), a point (one tick
        long) or an interval."""
        assert isinstance(self.payloads, list)
        self.layout.append(len(self.starts))
        self.starts.append(start)
        self.ends.append(end)
        self.open_edges.append(open_edge)
        self.payloads.append(payload)

    def end_edge(self, start: int, end: int, payload: T) -> None:
        """The end of a released open event (its ``event`` came first)."""
        self.layout.append(EdgeEnd(self.dt(start), self.dt(end), payload))

    def cti(self, t: int) -> None:
        self.layout.append(Cti(self.dt(t)))

    def key_cti(self, key: Any, t: int) -> None:
        """A CTI of one substream key of the output."""
        at = self.dt(t)
        self.layout.append(SubstreamCti(key, at))
        self.substream_ctis.setdefault(key, []).append(at)

    def released(self, events: list[tuple[int, int, Any, int]], messages: list[tuple[Any, int]]) -> None:
        """``release_order``'s events, each given before the CTI that released it."""
        starts, ends, payloads, by = (list(column) for column in zip(*events)) if events else ([], [], [], [])
        self.released_columns(starts, ends, payloads, by, messages)

    def released_columns(
        self,
        starts: list[int],
        ends: list[int],
        payloads: list[T] | PayloadColumns[T],
        released_by: list[int],
        messages: list[tuple[Any, int]],
    ) -> None:
        """Events as columns in release order, as ``released`` takes them: ``released_by``
        is each event's index in ``messages`` (the CTI releasing it, so never decreasing); an
        event ending at infinity is an open edge. ``PayloadColumns`` only into an empty assembly."""
        from tempo.runtime.replay import MERGED

        first = len(self.starts)
        if isinstance(payloads, PayloadColumns):
            if first:
                raise ValueError("ResultAssembly.released_columns: PayloadColumns go only into an assembly without events")
            self.payloads = payloads
        else:
            assert isinstance(self.payloads, list)
            self.payloads.extend(payloads)
        self.starts.extend(starts)
        self.ends.extend(ends)
        self.open_edges.extend([e >= INF for e in ends])
        done = 0
        for index, (key, t) in enumerate(messages):
            upto = bisect.bisect_right(released_by, index, done)
            self.layout.extend(range(first + done, first + upto))
            done = upto
            if key is MERGED:
                self.cti(t)
            else:
                self.key_cti(key, t)

    def result(
        self,
        ctis: list[int],
        metrics: dict[str, InputMetrics],
        rejected: list[Rejection],
        payload_type: type[T],
        input_types: dict[str, type],
        withheld: Withheld | None = None,
    ) -> Result[T]:
        """The result, with the output's CTIs (``ctis``, in ticks) and each input's metrics and rejections."""
        if self.starts:  # every time converts, or the run fails here as it did when it made every event
            for t in (min(self.starts), max(self.ends)):
                self.dt(t)
        released = ReleasedEvents(self.dt, self.starts, self.ends, self.open_edges, self.payloads)
        layout = self.layout

        def raw_item(position: int) -> RawItem[T]:
            slot = layout[position]
            return released.raw_event(slot) if type(slot) is int else slot  # type: ignore[return-value]

        def raw_items() -> list[RawItem[T]]:
            made = released.raw_events()
            return [made[slot] if type(slot) is int else slot for slot in layout]  # type: ignore[misc]

        lock = threading.Lock()  # one for both lists: they make their items from one ReleasedEvents
        return Result(
            BuiltOnRead(len(released), released.event, released.events, lock),
            [self.dt(t) for t in ctis],
            metrics,
            rejected,
            BuiltOnRead(len(layout), raw_item, raw_items, lock),
            self.substream_ctis,
            withheld,
            payload_type,
            input_types,
        )
