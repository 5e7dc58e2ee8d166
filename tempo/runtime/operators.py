"""The in-memory operators: push-based, one event at a time, state purged as CTIs pass.

Every operator receives ``insert(port, eid, start, end, payload)`` (``end`` is None for
an open edge whose end is not known yet), ``end(port, eid, end)`` for such an edge, and
``cti(port, t)``, and pushes the same three calls downstream. Event ids are unique within
a stream; operators that make new events take fresh ids. Times are ticks.

Below an input with substreams, ``key_cti(port, key, t)`` says that the events of one
substream key will start at or after ``t``, ahead of the stream's CTI: the key's CTI is
the later of the two. Operators that keep the key (``Node.substream_key``) act on it and
pass it on; the others ignore it, so their output runs on the stream's CTI alone.

The semantics and CTI rule of each operator are stated on its plan node
(``tempo/plan/nodes.py``); the notes here explain how the rule is met.
Stateful operators release an output only once their output CTI passes its start, which
is exactly when the emission contract requires it, and which makes outputs independent of
how the inputs interleave.
"""

from __future__ import annotations

import functools
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, ClassVar, cast

from tempo.plan.windows import HoppingWindow, WindowTimestamp
from tempo.runtime.codegen import Accumulator
from tempo.ticks import INF, NEG_INF, add

Key = tuple[Any, ...]


class Operator:
    """Base: fan-out to the consumers of this operator's output.

    ``emit_insert``, ``emit_end`` and ``emit_cti`` reach every consumer connected so far;
    with one consumer (the usual case) they are its methods bound to its port, so an event
    takes no extra call per operator.

    ``WIRING`` names the attributes an operator gets from the plan when it is built (compiled
    functions, parameters, its consumers); everything else is its state, which a live query
    saves after each micro-batch and puts back into a freshly built operator
    (``tempo.runtime.live``). A compiled function left out of ``WIRING`` makes saving fail
    loudly (it cannot be pickled), never restore silently wrong.
    """

    WIRING: ClassVar[frozenset[str]] = frozenset({"outs", "emit_insert", "emit_end", "emit_cti", "emit_key_cti"})
    SHARED: ClassVar[Mapping[str, Callable[[Any, Any], Any]]] = {}
    """State that is not any one group's but the operator's over all of them (beside the CTIs
    it receives), each with how two values combine: an operator run one key at a time
    (``tempo.runtime.keyed``) gets it from whoever sees every key's events."""

    def __init__(self) -> None:
        self.outs: list[tuple[Operator, int]] = []
        self.emit_insert: Callable[[int, int, int | None, Any], None] = _nowhere
        self.emit_end: Callable[[int, int], None] = _nowhere
        self.emit_cti: Callable[[int], None] = _nowhere
        self.emit_key_cti: Callable[[Any, int], None] = _nowhere

    def connect(self, op: Operator, port: int) -> None:
        """Send this operator's output to input ``port`` of ``op`` too."""
        self.outs.append((op, port))
        self.emit_insert = _each([functools.partial(o.insert, p) for o, p in self.outs])
        self.emit_end = _each([functools.partial(o.end, p) for o, p in self.outs])
        self.emit_cti = _each([functools.partial(o.cti, p) for o, p in self.outs])
        self.emit_key_cti = _each([functools.partial(o.key_cti, p) for o, p in self.outs])

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        raise NotImplementedError

    def end(self, port: int, eid: int, end: int) -> None:
        raise NotImplementedError

    def cti(self, port: int, t: int) -> None:
        raise NotImplementedError

    def key_cti(self, port: int, key: Any, t: int) -> None:
        """A substream's CTI; an operator that merges keys ignores it."""
        return None


def _each(calls: list[Callable[..., None]]) -> Callable[..., None]:
    """One call that makes all of ``calls`` in turn with its arguments."""
    if len(calls) == 1:
        return calls[0]

    def each(*args: Any) -> None:
        for call in calls:
            call(*args)

    return each


def _nowhere(*_: Any) -> None:
    return None


class Where(Operator):
    """Filter; remembers which open edges passed so that only their ends follow."""

    WIRING = Operator.WIRING | {"predicate"}

    def __init__(self, predicate: Callable[[Any], Any]) -> None:
        super().__init__()
        self.predicate = predicate
        self.open: set[int] = set()

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        if self.predicate(payload):
            if end is None:
                self.open.add(eid)
            self.emit_insert(eid, start, end, payload)

    def end(self, port: int, eid: int, end: int) -> None:
        if eid in self.open:
            self.open.discard(eid)
            self.emit_end(eid, end)

    def cti(self, port: int, t: int) -> None:
        self.emit_cti(t)

    def key_cti(self, port: int, key: Any, t: int) -> None:
        self.emit_key_cti(key, t)


class Select(Operator):
    """Projection; ids, lifetimes and CTIs pass unchanged."""

    WIRING = Operator.WIRING | {"projection", "keeps_key"}

    def __init__(self, projection: Callable[[Any], Any], keeps_key: bool = False) -> None:
        super().__init__()
        self.projection = projection
        self.keeps_key = keeps_key

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        self.emit_insert(eid, start, end, self.projection(payload))

    def end(self, port: int, eid: int, end: int) -> None:
        self.emit_end(eid, end)

    def cti(self, port: int, t: int) -> None:
        self.emit_cti(t)

    def key_cti(self, port: int, key: Any, t: int) -> None:
        if self.keeps_key:  # the new record copies the key: the same value names it
            self.emit_key_cti(key, t)


def _finite(t: int) -> int | None:
    """Operators pass a lifetime that reaches infinity as open (None), whatever its origin."""
    return t if t < INF else None


class Explode(Operator):
    """One output per list element, each with its event's lifetime (and its end edge)."""

    WIRING = Operator.WIRING | {"items", "projection", "new_id"}

    def __init__(self, items: Callable[[Any], Any], projection: Callable[[Any, Any], Any], new_id: Callable[[], int]) -> None:
        super().__init__()
        self.items, self.projection, self.new_id = items, projection, new_id
        self.open: dict[int, list[int]] = {}  # eid of an event without an end -> its outputs' ids

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        outs = []
        for item in self.items(payload) or ():
            out = self.new_id()
            outs.append(out)
            self.emit_insert(out, start, end, self.projection(payload, item))
        if end is None and outs:
            self.open[eid] = outs

    def end(self, port: int, eid: int, end: int) -> None:
        for out in self.open.pop(eid, ()):
            self.emit_end(out, end)

    def cti(self, port: int, t: int) -> None:
        self.emit_cti(t)


class Clip(Operator):
    """Per group, the events not yet ended out, ``[eid, start, end or None, payload, out id, done]``.
    A CTI ``c`` sends each event starting before it (a start edge, or an interval if its clipped
    end is already before ``c``) and ends those whose clipped end is before ``c``: every start
    before ``c`` is known then, so no later event can clip them further."""

    WIRING = Operator.WIRING | {"key_fn", "new_id", "keep_ids"}

    def __init__(self, key_fn: Callable[[Any], Key] | None, new_id: Callable[[], int]) -> None:
        super().__init__()
        self.key_fn, self.new_id = key_fn, new_id
        self.keep_ids = False
        """Whether an output keeps its event's id rather than a new one: run one key at a time
        (``tempo.runtime.keyed``), so that its end names it the same in every run of the key."""
        self.groups: dict[Key, list[list[Any]]] = {}
        self.by_id: dict[int, list[Any]] = {}  # events whose own end is not known
        self.in_cti = NEG_INF

    @staticmethod
    def _clipped(recs: list[list[Any]]) -> list[int]:
        """The clipped end of each of a group's events, ``recs`` sorted by start (INF while
        it has no end): the earlier of its own end and the next later start."""
        later = INF  # the next start after the current one, scanning backwards
        ends = [INF] * len(recs)
        i = len(recs) - 1
        while i >= 0:
            j = i
            while j >= 0 and recs[j][1] == recs[i][1]:
                own = recs[j][2]
                ends[j] = min(later, INF if own is None else own)
                j -= 1
            later = recs[i][1]
            i = j
        return ends

    def idle(self) -> bool:
        """Whether it holds no group's events (``Window.idle``)."""
        return not self.groups and not self.by_id

    def next_release(self) -> int | None:
        """The least CTI at which this operator would emit something, None while nothing is
        due (a keyed operator's timer: ``tempo.runtime.keyed``): the first past an event's
        start not out yet, or past the clipped end of one out open."""
        dues = []
        for recs in self.groups.values():
            recs.sort(key=lambda r: r[1])
            for rec, clipped in zip(recs, self._clipped(recs)):
                if rec[4] is None:
                    dues.append(rec[1] + 1)
                elif not rec[5] and clipped < INF:
                    dues.append(clipped + 1)
        return min(dues) if dues and self.in_cti < INF else None

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        rec = [eid, start, None if end is None or end >= INF else end, payload, None, False]  # [5]: ended out
        if rec[2] is None:
            self.by_id[eid] = rec
        self.groups.setdefault(self.key_fn(payload) if self.key_fn else (), []).append(rec)

    def end(self, port: int, eid: int, end: int) -> None:
        rec = self.by_id.pop(eid, None)
        if rec is not None and end < INF:
            rec[2] = end

    def cti(self, port: int, t: int) -> None:
        if t <= self.in_cti:
            return
        self.in_cti = t
        out: list[tuple[int, list[Any], int]] = []  # (start, rec, clipped end or INF)
        for key, recs in list(self.groups.items()):
            recs.sort(key=lambda r: r[1])
            ends = self._clipped(recs)
            keep: list[list[Any]] = []
            first_open: int | None = None
            for rec, clipped in zip(recs, ends):
                final = clipped < t
                if rec[4] is None:
                    if rec[1] < t:
                        out.append((rec[1], rec, clipped if final else INF))
                        rec[5] = final
                elif not rec[5] and final:
                    self.emit_end(rec[4], clipped)
                    self.by_id.pop(rec[0], None)
                    rec[5] = True
                if not rec[5]:
                    if first_open is None:
                        first_open = rec[1]
                    keep.append(rec)
                elif first_open is not None and rec[1] > first_open:
                    keep.append(rec)  # done, but its start may still clip an event before it
            if keep:
                self.groups[key] = keep
            else:
                del self.groups[key]
        out.sort(key=lambda o: o[0])  # stable: group by group within a start
        for start, rec, clipped in out:
            rec[4] = rec[0] if self.keep_ids else self.new_id()
            if clipped < INF:
                self.by_id.pop(rec[0], None)
            self.emit_insert(rec[4], start, None if clipped >= INF else clipped, rec[3])
        self.emit_cti(t)


class AlterLifetime(Operator):
    """Start (and CTIs) + shift; end + shift, or start + duration when a duration is set."""

    WIRING = Operator.WIRING | {"shift", "duration"}

    def __init__(self, shift: int, duration: int | None) -> None:
        super().__init__()
        self.shift, self.duration = shift, duration

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        s = add(start, self.shift)
        if s >= INF:
            return  # moved past the end of time: no lifetime left
        if self.duration is not None:
            self.emit_insert(eid, s, _finite(add(s, self.duration)), payload)
        else:
            self.emit_insert(eid, s, None if end is None else _finite(add(end, self.shift)), payload)

    def end(self, port: int, eid: int, end: int) -> None:
        shifted = add(end, self.shift)
        if self.duration is None and shifted < INF:  # with a duration every lifetime is already closed
            self.emit_end(eid, shifted)

    def cti(self, port: int, t: int) -> None:
        self.emit_cti(add(t, self.shift))

    def key_cti(self, port: int, key: Any, t: int) -> None:
        self.emit_key_cti(key, add(t, self.shift))


class Union(Operator):
    """Both inputs; right-side events get fresh ids so a stream unioned with itself stays unique."""

    WIRING = Operator.WIRING | {"new_id"}

    def __init__(self, new_id: Callable[[], int], keeps_key: bool = False) -> None:
        super().__init__()
        self.new_id = new_id
        self.ctis = [NEG_INF, NEG_INF]
        self.out_cti = NEG_INF
        self.renamed: dict[int, int] = {}
        self.keys = KeyCtis() if keeps_key else None

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        if port == 1:
            new = self.new_id()
            if end is None:
                self.renamed[eid] = new
            eid = new
        self.emit_insert(eid, start, end, payload)

    def end(self, port: int, eid: int, end: int) -> None:
        if port == 1:
            eid = self.renamed.pop(eid)
        self.emit_end(eid, end)

    def cti(self, port: int, t: int) -> None:
        self.ctis[port] = t
        out = min(self.ctis)
        if out > self.out_cti:
            self.out_cti = out
            self.emit_cti(out)
        if self.keys is not None:
            for key, key_out in self.keys.merged_moved(self.ctis, self.out_cti):
                self.emit_key_cti(key, key_out)

    def key_cti(self, port: int, key: Any, t: int) -> None:
        if self.keys is not None:
            key_out = self.keys.moved(port, key, t, self.ctis, self.out_cti)
            if key_out is not None:
                self.emit_key_cti(key, key_out)


class KeyCtis:
    """Per-key CTIs of an operator with two inputs that keeps the substream key (union,
    join): key ``k``'s output CTI is the minimum over the inputs of ``k``'s CTI there,
    which is the later of that input's CTI and the last ``key_cti`` for ``k`` from it.
    Only keys ahead of an input's CTI are kept; the rest run at the inputs' CTIs."""

    __slots__ = ("ahead", "out")

    def __init__(self) -> None:
        self.ahead: dict[Any, list[int]] = {}  # key -> its CTI from each input (NEG_INF: none)
        self.out: dict[Any, int] = {}  # key -> its output CTI as last emitted

    def _out(self, key: Any, ctis: list[int], out_cti: int) -> int | None:
        own = self.ahead[key]
        key_out = min(max(own[0], ctis[0]), max(own[1], ctis[1]))
        if key_out > out_cti and key_out > self.out.get(key, NEG_INF):
            self.out[key] = key_out
            return key_out
        return None

    def moved(self, port: int, key: Any, t: int, ctis: list[int], out_cti: int) -> int | None:
        """``key_cti(port, key, t)`` arrived: the key's new output CTI, if it moved."""
        own = self.ahead.get(key)
        if own is None:
            own = self.ahead[key] = [NEG_INF, NEG_INF]
        if t <= own[port]:
            return None
        own[port] = t
        return self._out(key, ctis, out_cti)

    def merged_moved(self, ctis: list[int], out_cti: int) -> list[tuple[Any, int]]:
        """An input's CTI moved: the keys whose output CTI moved with it (a key ahead on
        one input now meets a later CTI on the other). Keys no longer ahead anywhere go."""
        moved: list[tuple[Any, int]] = []
        for key in list(self.ahead):
            own = self.ahead[key]
            if own[0] <= ctis[0] and own[1] <= ctis[1]:
                del self.ahead[key]
                self.out.pop(key, None)
                continue
            key_out = self._out(key, ctis, out_cti)
            if key_out is not None:
                moved.append((key, key_out))
        return moved


# ---------------------------------------------------------------------------------------
# Waiting for release


class ByStart:
    """Entries ``(start, seq, a, b)`` released in order of start, then of arrival, up to a time.

    Entries arriving in order of start join a first-in-first-out run, which costs nothing to
    keep in order. The others are set aside until the next release and sorted then: merged
    into the run if there are many (a burst, such as a whole input joined at once), else
    pushed onto a heap. Releasing merges the run and the heap. An entry holds up to two
    items itself, so that waiting costs one object.
    """

    __slots__ = ("run", "aside", "late", "seq")

    def __init__(self) -> None:
        self.run: deque[tuple[int, int, Any, Any]] = deque()  # in order
        self.aside: list[tuple[int, int, Any, Any]] = []  # out of order, since the last release
        self.late: list[tuple[int, int, Any, Any]] = []  # a heap
        self.seq = itertools.count()

    def push(self, start: int, a: Any, b: Any = None, rank: Any = None) -> None:
        """Let ``(a, b)`` wait for a release past ``start``; ``rank`` orders the entries of one
        start in its place (all or none of them ranked): by default, their order of arrival."""
        entry = (start, next(self.seq) if rank is None else rank, a, b)
        if not self.run or self.run[-1][0] <= start:
            self.run.append(entry)
        else:
            self.aside.append(entry)

    def entries(self) -> list[tuple[int, int, Any, Any]]:
        """Every entry, in release order, none removed."""
        return sorted(itertools.chain(self.run, self.aside, self.late))

    def first_start(self) -> int | None:
        """The earliest start waiting, or None."""
        starts = [entry[0] for entry in self.aside]
        if self.run:
            starts.append(self.run[0][0])
        if self.late:
            starts.append(self.late[0][0])
        return min(starts) if starts else None

    def __len__(self) -> int:
        return len(self.run) + len(self.aside) + len(self.late)

    def pop_before(self, t: int) -> Iterator[tuple[int, int, Any, Any]]:
        """The entries starting before ``t``, in order, each removed as it is yielded."""
        if self.aside:
            # Merging costs about as much as pushing onto the heap once the run is at most
            # eight times as long as what joins it (bench/README.md, "Latest figures", tempo-memory).
            if 8 * len(self.aside) >= len(self.run):
                self.run = deque(sorted(itertools.chain(self.run, self.aside)))
            else:
                for entry in self.aside:
                    heapq.heappush(self.late, entry)
            self.aside = []
        run, late = self.run, self.late
        while True:
            if run and run[0][0] < t and not (late and late[0] < run[0]):
                yield run.popleft()
            elif late and late[0][0] < t:
                yield heapq.heappop(late)
            else:
                return


class KeyedByStart:
    """A ``ByStart`` whose entries also wait per substream key, so that one key's entries
    can be released on that key's CTI: ``pop_key_before``. Each entry is in both orders
    and goes out once, from whichever releases it first."""

    __slots__ = ("all", "by_key", "key_of")

    def __init__(self, key_of: Callable[[Any, Any], Any]) -> None:
        self.all = ByStart()
        self.by_key: dict[Any, ByStart] = {}
        self.key_of = key_of  # (a, b) -> substream key

    def __getstate__(self) -> tuple[ByStart, dict[Any, ByStart]]:
        return self.all, self.by_key  # ``key_of`` is compiled: the restored owner sets it again

    def __setstate__(self, state: tuple[ByStart, dict[Any, ByStart]]) -> None:
        self.all, self.by_key = state

    def push(self, start: int, a: Any, b: Any = None, rank: Any = None) -> None:
        cell = [a, b, False]  # the entry, and whether it went out
        self.all.push(start, cell, None, rank)
        key = self.key_of(a, b)
        waiting = self.by_key.get(key)
        if waiting is None:
            waiting = self.by_key[key] = ByStart()
        waiting.push(start, cell, None, rank)

    def pop_before(self, t: int) -> Iterator[tuple[int, int, Any, Any]]:
        return _first_out(self.all.pop_before(t))

    def pop_key_before(self, key: Any, t: int) -> Iterator[tuple[int, int, Any, Any]]:
        waiting = self.by_key.get(key)
        if waiting is None:
            return
        yield from _first_out(waiting.pop_before(t))
        if not waiting.run and not waiting.late and not waiting.aside:
            del self.by_key[key]

    def first_start(self) -> int | None:
        """The earliest start of an entry not out yet, or None (one a key's CTI released
        stays in ``all`` until the CTI passes it)."""
        return min((entry[0] for entry in itertools.chain(self.all.run, self.all.aside, self.all.late) if not entry[2][2]), default=None)


def _first_out(entries: Iterator[tuple[int, int, Any, Any]]) -> Iterator[tuple[int, int, Any, Any]]:
    """The ``KeyedByStart`` entries among ``entries`` not out yet, each marked as out."""
    for start, seq, cell, _ in entries:
        if not cell[2]:
            cell[2] = True
            yield start, seq, cell[0], cell[1]


# ---------------------------------------------------------------------------------------
# Windows


def stamp(timestamp: WindowTimestamp, ws: int, we: int, bound: int | None, closing: int, last_finite: int = NEG_INF) -> int:
    """Where the point result of window ``[ws, we)`` goes (every timestamp but LIFETIME):
    ``bound`` is its events' latest or earliest start (LATEST, EARLIEST; clipped to the
    window), ``closing`` the CTI completing it (CTI; on the CTI at infinity, which has no tick
    before it to stand for, the window's last tick, or the last finite CTI, ``last_finite``,
    if that is later: CTIs passed on unchanged, a result may not come before it)."""
    if timestamp is WindowTimestamp.START:
        return ws
    if timestamp is WindowTimestamp.END:
        return we - 1
    if timestamp is WindowTimestamp.CTI:
        return max(we - 1, last_finite) if closing >= INF else closing - 1
    assert bound is not None
    return max(ws, bound)


class Window(Operator):
    """Hopping/tumbling windows with aggregates, per group; ``spec`` numbers the windows.

    Events spanning a few windows are added to each window's accumulators on arrival.
    Open edges and very long lifetimes are kept aside and added to each window as it
    closes, so that an event alive for days does not enumerate its windows up front.
    A CTI ``c`` closes the windows whose end is at or before ``c`` (all of them on the
    CTI at infinity, where open lifetimes end after the latest finite time seen).

    With ``timestamp`` LATEST or EARLIEST the accumulator's last aggregate is the max or min
    of the events' starts (``with_start``), the result's stamp rather than a payload value.
    """

    EAGER_WINDOWS = 64
    SHARED = {"t_max": max}  # where open lifetimes end when the input ends: over every group's events
    WIRING = Operator.WIRING | {
        "keys_count",
        "substream_index",
        "spec",
        "_k_lo",
        "_k_hi",
        "key_fn",
        "values_fn",
        "accumulator",
        "projection",
        "to_datetime",
        "new_id",
        "timestamp",
        "with_start",
        "passes_ctis",
        "tell_window",
    }

    def __init__(
        self,
        spec: HoppingWindow,
        key_fn: Callable[[Any], Key] | None,
        values_fn: Callable[[Any, int], tuple[Any, ...]],
        accumulator: Accumulator,
        projection: Callable[[Key, list[Any], datetime, datetime], Any],
        to_datetime: Callable[[int], datetime],
        new_id: Callable[[], int],
        substream_index: int | None = None,
        keys_count: int = 0,
        timestamp: WindowTimestamp = WindowTimestamp.LIFETIME,
    ) -> None:
        super().__init__()
        self.timestamp = timestamp
        self.with_start = timestamp in (WindowTimestamp.LATEST, WindowTimestamp.EARLIEST)
        # Results stamped at the window's last tick or at the releasing CTI are never before
        # the input CTI while pending: CTIs pass unchanged.
        self.passes_ctis = timestamp in (WindowTimestamp.END, WindowTimestamp.CTI)
        self.closing = NEG_INF  # the CTI closing windows now (the stamp of timestamp=CTI)
        # The keyed form's (``tempo.runtime.keyed``): told the end of each result's window
        # before a result stamped at an event goes out, whose lifetime does not say it.
        self.tell_window: Callable[[int], None] | None = None
        self.keys_count = keys_count
        self.substream_index = substream_index  # which group key is the substream key
        self.key_in: dict[Any, int] = {}  # substream key -> its CTI, when ahead
        self.key_next: dict[Any, int] = {}  # substream key -> its first window not closed
        self.key_out: dict[Any, int] = {}  # substream key -> its output CTI as last emitted
        self.spec = spec
        # The spec's own bound methods: no extra call per event over methods of this class.
        self._k_lo = spec.first_window
        self._k_hi = spec.last_window
        self.key_fn = key_fn
        self.values_fn = values_fn  # an event's aggregate arguments, as ``accumulator.add`` takes them
        self.accumulator = accumulator
        self.projection = projection
        self.to_datetime = to_datetime
        self.new_id = new_id
        self.acc: dict[int, dict[Key, list[Any]]] = {}  # window index -> group -> state
        self.acc_heap: list[int] = []
        self.long: dict[int, list[Any]] = {}  # eid -> [key, values, k_lo, k_hi or None]
        self.next_k: int | None = None  # first window index not yet closed
        self.in_cti = NEG_INF
        self.in_cti_finite = NEG_INF
        self.out_cti = NEG_INF
        self.t_max = NEG_INF

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        key = self.key_fn(payload) if self.key_fn else ()
        values = self.values_fn(payload, start)
        if self.with_start:
            values = (*values, start)
        if start > self.t_max:
            self.t_max = start
        k_lo = self._k_lo(start)
        if end is None or end >= INF:
            self.long[eid] = [key, values, k_lo, None]
            return
        if end > self.t_max:
            self.t_max = end
        k_hi = self._k_hi(end)
        if k_hi - k_lo >= self.EAGER_WINDOWS:
            self.long[eid] = [key, values, k_lo, k_hi]
        elif k_hi >= k_lo:
            self.accumulator.add(self.acc, self.acc_heap, key, values, k_lo, k_hi)

    def end(self, port: int, eid: int, end: int) -> None:
        rec = self.long.get(eid)
        if rec is None:
            return
        if end < INF and end > self.t_max:
            self.t_max = end
        k_hi = self._k_hi(end)
        k_lo = rec[2] if self.next_k is None else max(rec[2], self.next_k)
        if k_hi - k_lo < self.EAGER_WINDOWS:
            del self.long[eid]
            if k_hi >= k_lo:
                self.accumulator.add(self.acc, self.acc_heap, rec[0], rec[1], k_lo, k_hi)
        else:
            rec[3] = k_hi

    def cti(self, port: int, t: int) -> None:
        if t <= self.in_cti:
            return
        self.in_cti = t
        if t >= INF:
            # Open lifetimes end just after the latest finite time this operator has seen:
            # an event time, or the instant before the last finite CTI (known to be alive).
            horizon = max(self.t_max, self.in_cti_finite - 1)
            open_hi = self._k_hi(horizon + 1) if horizon > NEG_INF else None
            his = [r[3] if r[3] is not None else open_hi for r in self.long.values()]
            candidates = [k for k in self.acc] + [h for h in his if h is not None]
            limit: int | None = max(candidates) if candidates else None
        else:
            self.in_cti_finite = t
            limit = self.spec.last_complete(t)
            open_hi = limit
        self.closing = t
        if limit is not None:
            self._close(limit, open_hi)
        if t >= INF:
            out = INF
        else:
            assert limit is not None
            self.next_k = limit + 1 if self.next_k is None else max(self.next_k, limit + 1)
            out = t if self.passes_ctis else min(t, self.spec.start_of(self.next_k))
        if out > self.out_cti:
            self.out_cti = out
            self.emit_cti(out)

    def merge(self, key: Key, k: int | None, n: int, values: tuple[Any, ...], t_max: int) -> None:
        """Window ``k``'s aggregates of ``n`` events of group ``key`` computed apart (a
        ``tempo.runtime.bulk.Partial``), as if those events had arrived now, with
        ``t_max`` the latest finite time among them; ``k`` None: events in no window, which
        only move ``t_max``. The events each span fewer than ``EAGER_WINDOWS`` windows and
        none reaches infinity (those arrive one by one)."""
        if k is not None:
            self.accumulator.merge(self.acc, self.acc_heap, key, k, n, values)
        if t_max > self.t_max:
            self.t_max = t_max

    def idle(self) -> bool:
        """Whether it holds no group's state: a keyed operator forgets such a key, and a
        fresh operator given the CTI in force behaves alike (``tempo.runtime.keyed``). A
        substream key's CTI, window and output CTI ahead of the input's are state too: a
        fresh operator would take the key's CTI at that time again, and pass it on again."""
        if self.acc or self.long:
            return False
        next_k = NEG_INF if self.next_k is None else self.next_k
        return (
            all(t <= self.in_cti for t in self.key_in.values())
            and all(t <= self.out_cti for t in self.key_out.values())
            and all(k <= next_k for k in self.key_next.values())
        )

    def next_release(self) -> int | None:
        """The least CTI at which this operator would emit a result, None while it holds
        nothing: the end of its first window holding an event, or that a long or open
        lifetime reaches (a keyed operator's timer: ``tempo.runtime.keyed``)."""
        if self.in_cti >= INF:  # the input ended: nothing is released any more
            return None
        firsts = [min(self.acc)] if self.acc else []
        for rec in self.long.values():
            lo = rec[2] if self.next_k is None else max(rec[2], self.next_k)
            if rec[3] is None or rec[3] >= lo:
                firsts.append(lo)
        return self.spec.bounds(min(firsts))[1] if firsts else None

    def key_cti(self, port: int, key: Any, t: int) -> None:
        """A substream's CTI ahead of the input's: that key's groups close their windows
        ending at or before ``t``, and its CTI is pulled back like the input's."""
        i = self.substream_index
        if i is None or t <= self.in_cti or t <= self.key_in.get(key, NEG_INF):
            return
        self.key_in[key] = t
        self.closing = t
        limit = self.spec.last_complete(t)
        first = self.key_next.get(key, NEG_INF)
        if self.next_k is not None and self.next_k > first:
            first = self.next_k
        if limit >= first:
            self._close_key(key, i, first, limit)
            first = limit + 1
        self.key_next[key] = first
        out = t if self.passes_ctis else min(t, self.spec.start_of(first))
        if out > self.out_cti and out > self.key_out.get(key, NEG_INF):
            self.key_out[key] = out
            self.emit_key_cti(key, out)

    def _close_key(self, key: Any, i: int, first: int, limit: int) -> None:
        """Emit the windows ``first..limit`` of the groups of substream ``key``, in order."""
        for eid, rec in list(self.long.items()):
            if rec[0][i] != key:
                continue
            hi = limit if rec[3] is None else min(rec[3], limit)
            lo = max(rec[2], first)
            if lo <= hi:
                self.accumulator.add(self.acc, self.acc_heap, rec[0], rec[1], lo, hi)
            if rec[3] is not None and rec[3] <= limit:
                del self.long[eid]
            else:
                rec[2] = max(rec[2], limit + 1)
        only = self.keys_count == 1
        for k in sorted(w for w in self.acc if w <= limit):
            groups = self.acc[k]
            mine = [(key,)] if only else [g for g in groups if g[i] == key]
            found = [(g, groups.pop(g)) for g in mine if g in groups]
            if found:
                self._emit_window(k, found)
            if not groups:
                del self.acc[k]  # its index stays on the heap; _close skips it

    def _emit_window(self, k: int, groups: Iterable[tuple[Key, list[Any]]]) -> None:
        """One output per group of window ``k``, from its aggregate state."""
        ws, we = self.spec.bounds(k)
        ws_dt, we_dt = self.to_datetime(ws), self.to_datetime(we)
        results = self.accumulator.results
        if self.timestamp is WindowTimestamp.LIFETIME:
            for key, state in groups:
                self.emit_insert(self.new_id(), ws, we, self.projection(key, results(state), ws_dt, we_dt))
            return
        for key, state in groups:
            values = results(state)
            t = stamp(self.timestamp, ws, we, values.pop() if self.with_start else None, self.closing, self.in_cti_finite)
            if self.tell_window is not None:
                self.tell_window(we)
            self.emit_insert(self.new_id(), t, t + 1, self.projection(key, values, ws_dt, we_dt))

    def _close(self, limit: int, open_hi: int | None) -> None:
        """Emit every non-empty window with index <= limit, in order of window start."""
        # Long lifetimes join the windows being closed after the events added on arrival.
        for rec in self.long.values():
            lo = rec[2] if self.next_k is None else max(rec[2], self.next_k)
            hi = rec[3] if rec[3] is not None else open_hi
            if hi is None:
                continue
            hi = min(hi, limit)
            if lo <= hi:
                self.accumulator.add(self.acc, self.acc_heap, rec[0], rec[1], lo, hi)
        while self.acc_heap and self.acc_heap[0] <= limit:
            k = heapq.heappop(self.acc_heap)
            self._emit_window(k, self.acc.pop(k, {}).items())
        # Forget long lifetimes that end before the next open window.
        nxt = limit + 1
        for eid in [e for e, r in self.long.items() if r[3] is not None and r[3] < nxt]:
            del self.long[eid]


# ---------------------------------------------------------------------------------------
# Joins


class _Side:
    """One side of a join: live events indexed by key, with their ends for purging."""

    __slots__ = ("by_key", "by_id", "ends", "cti")

    def __init__(self) -> None:
        self.by_key: dict[Key, dict[int, list[Any]]] = {}
        self.by_id: dict[int, list[Any]] = {}
        self.ends = ByStart()  # the ids of closed events by end, for purging
        self.cti = NEG_INF

    def add(self, rec: list[Any]) -> None:
        eid, key = rec[0], rec[4]
        group = self.by_key.get(key)
        if group is None:
            group = self.by_key[key] = {}
        group[eid] = rec
        self.by_id[eid] = rec
        if rec[2] is not None:
            self.ends.push(rec[2], eid)

    def purge(self, upto: int) -> None:
        """Drop closed events ending at or before ``upto``: nothing later can overlap them."""
        for _, _, eid, _ in self.ends.pop_before(upto + 1):
            rec = self.by_id.pop(eid, None)
            if rec is not None:
                group = self.by_key[rec[4]]
                del group[eid]
                if not group:
                    del self.by_key[rec[4]]


# Event record in a join side: [eid, start, end or None, payload, key, open outputs]
# Output record: [oid or None, left rec, right rec, closed]


class Join(Operator):
    """Temporal inner join with hash keys and a residual predicate.

    Matching pairs wait by output start until the output CTI passes it. An
    output whose end is not yet determined goes out as a start edge; its end edge follows
    once the end is known: both ends known, or the known end at or before the CTI of the
    side whose end is unknown (that side can no longer end earlier).

    Run one join key at a time (``tempo.runtime.keyed``), the join is given ``arrival``, the
    place of the item being inserted in the arrival order over all keys, and ``tell_rank``:
    a pair waits ranked by (that arrival, its place among the pairs the key made before),
    which orders the pairs of one start over all keys as the join over all keys pushed them,
    and its rank is told before it goes out. It is then fed the output CTI at both inputs,
    not their own CTIs, which decide when the end of a pair of an open event goes out: so a
    pair whose end is known goes out whole, the input whose own CTI decides that end told
    first (``tell_waits``: None for a pair of two ends known), and the driver splits it where
    the join over all keys would have (``tempo.runtime.keyed.JoinTimeline``). A pair goes out
    with its events' ids as its id (``pair_id``); when the end edge of one of its open events
    arrives, the pair's end known then goes out at that arrival (``emit_end`` of the pair's
    id, the input still open told first), for the driver to end it now or at that input's
    CTI.
    """

    WIRING = Operator.WIRING | {"key_fns", "residual", "projection", "new_id", "arrival", "tell_rank", "tell_waits", "substream_index"}

    def __init__(
        self,
        key_fns: tuple[Callable[[Any], Key], Callable[[Any], Key]] | None,
        residual: Callable[[Any, Any], Any] | None,
        projection: Callable[[Any, Any], Any],
        new_id: Callable[[], int],
        substream_index: int | None = None,
    ) -> None:
        super().__init__()
        self.key_fns = key_fns
        self.residual = residual
        self.projection = projection
        self.new_id = new_id
        self.substream_index = substream_index
        self.sides = (_Side(), _Side())
        # Matching left and right recs by output start; per substream key too when the join
        # equates the inputs' substream keys (key ``substream_index`` of the left rec's key).
        self.pending: ByStart | KeyedByStart = ByStart()
        self.keys: KeyCtis | None = None
        if substream_index is not None:
            i = substream_index
            self.pending = KeyedByStart(lambda left, right: left[4][i])
            self.keys = KeyCtis()
        self.watches: tuple[list[tuple[int, int, list[Any]]], list[tuple[int, int, list[Any]]]] = ([], [])
        self.seq = itertools.count()
        self.out_cti = NEG_INF
        self.arrival: Callable[[], int] | None = None
        self.tell_rank: Callable[[tuple[Any, ...]], None] | None = None
        self.tell_waits: Callable[[int | None], None] | None = None

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        key: Key = self.key_fns[port](payload) if self.key_fns else ()
        for k in key:
            if k is None:
                return  # a null key matches nothing
        # Only an open event can have open outputs to end; () spares the others a list.
        rec: list[Any] = [eid, start, end, payload, key, [] if end is None else ()]
        other = self.sides[1 - port]
        group = other.by_key.get(key)
        if group:
            residual, pending = self.residual, self.pending
            at = None if self.arrival is None else self.arrival()
            for orec in group.values():
                ostart, oend = orec[1], orec[2]
                if (oend is not None and oend <= start) or (end is not None and end <= ostart):
                    continue
                left, right = (rec, orec) if port == 0 else (orec, rec)
                if residual is not None and not residual(left[3], right[3]):
                    continue
                pending.push(start if start > ostart else ostart, left, right, None if at is None else (at, next(self.seq)))
        if end is None or end > other.cti:
            self.sides[port].add(rec)

    def end(self, port: int, eid: int, end: int) -> None:
        rec = self.sides[port].by_id.get(eid)
        if rec is None:
            return
        rec[2] = end
        self.sides[port].ends.push(end, eid)
        for out in rec[5]:
            if self.tell_waits is not None:
                self._tell_end(out)
            else:
                self._try_close(out)
        rec[5] = [o for o in rec[5] if not o[3]]

    def cti(self, port: int, t: int) -> None:
        side = self.sides[port]
        if t <= side.cti:
            return
        side.cti = t
        watch = self.watches[port]
        while watch and watch[0][0] <= t:
            _, _, out = heapq.heappop(watch)
            self._try_close(out)
        out_cti = min(self.sides[0].cti, self.sides[1].cti)
        if out_cti > self.out_cti:
            tell = self.tell_rank
            for _, rank, left, right in self.pending.pop_before(out_cti):
                if tell is not None:
                    tell(cast("tuple[Any, ...]", rank))  # ranked when told: (arrival, place)
                self._emit(left, right)
            self.out_cti = out_cti
            self.emit_cti(out_cti)
        if self.keys is not None:
            for key, key_out in self.keys.merged_moved([self.sides[0].cti, self.sides[1].cti], self.out_cti):
                self._release_key(key, key_out)
        self.sides[1 - port].purge(t)

    def idle(self) -> bool:
        """Whether the join holds nothing: no event on either side, no pair waiting. (A join
        keeping a substream key run by key hears each key's output CTI only when it moves:
        a fresh one given it passes it on as this one would.)"""
        if self.sides[0].by_id or self.sides[1].by_id or self.watches[0] or self.watches[1]:
            return False
        return self.pending.first_start() is None

    def next_release(self) -> int | None:
        """The least output CTI at which the join would release a pair (the first past the
        earliest start waiting) or drop a closed event no later event can match (the first
        at or past its end), or None."""
        dues = [side.ends.first_start() for side in self.sides]
        first = self.pending.first_start()
        dues.append(None if first is None else first + 1)
        known = [d for d in dues if d is not None]
        # An event ending at the output CTI (its end edge came after that CTI) goes at the next.
        return max(min(known), self.out_cti + 1) if known else None

    def restate(self, held: tuple[list[list[Any]], list[list[Any]]], pending: list[tuple[int, list[Any], list[Any]]]) -> None:
        """Hold ``held`` (per side, event records in the order received) and let ``pending``
        (start, left record, right record) wait, in emission order (start, then push): the
        state a batch computed in bulk (``tempo.runtime.bulk``) leaves. Closed events only."""
        sides = (_Side(), _Side())
        for side, old, recs in zip(sides, self.sides, held):
            side.cti = old.cti
            for rec in recs:
                side.add(rec)
        self.sides = sides
        self.pending = ByStart()
        for start, left, right in pending:
            self.pending.push(start, left, right)

    def key_cti(self, port: int, key: Any, t: int) -> None:
        if self.keys is not None:
            key_out = self.keys.moved(port, key, t, [self.sides[0].cti, self.sides[1].cti], self.out_cti)
            if key_out is not None:
                self._release_key(key, key_out)

    def _release_key(self, key: Any, key_out: int) -> None:
        """Key ``key``'s output CTI moved to ``key_out``: its pairs starting before go out."""
        assert isinstance(self.pending, KeyedByStart)
        tell = self.tell_rank
        for _, rank, left, right in self.pending.pop_key_before(key, key_out):
            if tell is not None:
                tell(cast("tuple[Any, ...]", rank))
            self._emit(left, right)
        self.emit_key_cti(key, key_out)

    def _end_of(self, out: list[Any]) -> tuple[int, int | None]:
        """(known end or INF, the side still unknown if the end is not determined yet)."""
        le, re = out[1][2], out[2][2]
        known = INF
        if le is not None and le < known:
            known = le
        if re is not None and re < known:
            known = re
        if le is None and self.sides[0].cti < known:
            return known, 0
        if re is None and self.sides[1].cti < known:
            return known, 1
        return known, None

    def _emit(self, left: list[Any], right: list[Any]) -> None:
        start = max(left[1], right[1])
        le, re = left[2], right[2]
        if (le is not None and le <= start) or (re is not None and re <= start):
            return  # an end that arrived later ruled out the overlap
        payload = self.projection(left[3], right[3])
        if self.tell_waits is not None:  # run by key: whole, with the input that decides when its end goes out
            known = min([e for e in (le, re) if e is not None], default=INF)
            self.tell_waits(None if known >= INF or (le is not None and re is not None) else 0 if le is None else 1)
            pid = pair_id(left[0], right[0])
            self.emit_insert(pid, start, known if known < INF else None, payload)
            if le is None or re is None:  # an end edge may still end it
                tracked: list[Any] = [pid, left, right, False]
                for rec in (left, right):
                    if rec[2] is None:
                        rec[5].append(tracked)
            return
        if le is not None and re is not None:
            end = le if le < re else re
            if end < INF:
                self.emit_insert(self.new_id(), start, end, payload)  # both ends known
                return
        out: list[Any] = [None, left, right, False]
        end, waiting = self._end_of(out)
        oid = self.new_id()
        if waiting is None and end < INF:
            self.emit_insert(oid, start, end, payload)
            return
        out[0] = oid
        self.emit_insert(oid, start, None, payload)
        if le is None:
            left[5].append(out)
        if re is None:
            right[5].append(out)
        if waiting is not None and end < INF:
            heapq.heappush(self.watches[waiting], (end, next(self.seq), out))

    def _tell_end(self, out: list[Any]) -> None:
        """Run by key, an end edge of one of ``out``'s events arrived: the pair's end known now
        goes out, the input whose CTI decides it told first (None: both ends known, it is
        final)."""
        if out[3]:
            return
        le, re = out[1][2], out[2][2]
        known = min([e for e in (le, re) if e is not None], default=INF)
        if known >= INF:
            return
        both = le is not None and re is not None
        assert self.tell_waits is not None
        self.tell_waits(None if both else 0 if le is None else 1)
        self.emit_end(out[0], known)
        out[3] = both

    def _try_close(self, out: list[Any]) -> None:
        if out[3] or out[0] is None:
            return
        end, waiting = self._end_of(out)
        if waiting is None and end < INF:
            out[3] = True
            self.emit_end(out[0], end)
        elif waiting is not None and end < INF:
            heapq.heappush(self.watches[waiting], (end, next(self.seq), out))


def pair_id(left: int, right: int) -> int:
    """The id a keyed join gives a pair of the events ``left`` and ``right`` (ids below
    2**64): one per pair, the same in every run of the key."""
    return left << 64 | right


def matching_key(key_fns: tuple[Callable[[Any], Key], Callable[[Any], Key]] | None, port: int, payload: Any) -> Key | None:
    """Input ``port``'s key of ``payload`` for a matching operator (``()`` without keys), or
    None when a key is null: a null key matches nothing."""
    key: Key = key_fns[port](payload) if key_fns else ()
    return None if any(k is None for k in key) else key


def final_end(at: int, ctis: Sequence[int], left_end: int | None) -> bool:
    """Whether an anti-join's open fragment ending at ``at`` (its first matching right start,
    or its left event's end) as far as the events held tell ends there now
    (docs/semantics.md 5.9): no right event can start before ``at`` (the right input's CTI at
    or past it), and the left event cannot end before it either: its end ``left_end`` is
    known (None: an open edge; an end at infinity counts as not known, as the batch
    executors, which see the whole input, cannot tell it from an edge never ended), or the
    left input's CTI is at or past ``at`` (an end edge never comes before its input's CTI).
    The one rule of ``AntiJoin._settle`` and the cluster engine's
    ``tempo.runtime.keyed.AntiJoinTimeline``."""
    return at < INF and at <= ctis[1] and ((left_end is not None and left_end < INF) or at <= ctis[0])


def output_cti(ctis: list[int], port: int, t: int, out: int) -> int | None:
    """Input ``port``'s CTI ``t`` recorded in ``ctis``: the new output CTI, the least of the
    inputs', if it moved past ``out``; else None."""
    if t <= ctis[port]:
        return None
    ctis[port] = t
    c = min(ctis)
    return c if c > out else None


class AntiJoin(Operator):
    """Left anti semi join by a sweep over time, one output-CTI step at a time.

    When the output CTI moves from ``p`` to ``c``, everything in ``[p, c)`` is known: no
    later left or right event can start before ``c``. Each left event touched by a change
    in ``[p, c)`` (its own start or end, or a matching right event starting or ending) is
    swept over that span: uncovered stretches become output fragments; a fragment still
    uncovered at ``c`` goes out as a start edge. It is ended by a later sweep, or as soon as
    its end is final (``_settle``: at a move of the right input's CTI, a right event's
    arrival or the left's end's): the first matching right start, or the left's own end,
    once no right event can start before it and the left cannot end before it
    (``final_end``).

    Run one join key at a time (``tempo.runtime.keyed``, given ``arrival``), the anti-join is
    fed the output CTI at both inputs and ends no fragment itself: the driver, which sees
    every move of the right input's CTI, does (``tempo.runtime.keyed.AntiJoinTimeline``). Each
    fragment goes out with its left event's id and rank ``(start, id, end)`` (``tell_rank``),
    whole when the sweep decides its end, else open (``tell_waits(1)``: its end waits for the
    right input's CTI) with the end the events held give it so far (``_first_end``); a right
    event that brings an open fragment's end nearer sends that end (``emit_end`` of the
    left's id), at its arrival, and so does the end of a left event with an open fragment,
    nearer or not (told as the left's own end: ``tell_waits(0)``; it may make a cut final).
    """

    WIRING = Operator.WIRING | {"key_fns", "residual", "new_id", "arrival", "tell_rank", "tell_waits"}

    def __init__(
        self,
        key_fns: tuple[Callable[[Any], Key], Callable[[Any], Key]] | None,
        residual: Callable[[Any, Any], Any] | None,
        new_id: Callable[[], int],
    ) -> None:
        super().__init__()
        self.key_fns = key_fns
        self.residual = residual
        self.new_id = new_id
        self.ctis = [NEG_INF, NEG_INF]
        self.out_cti = NEG_INF
        # left rec: [eid, start, end or None, payload, key, open fragment id or None,
        #            time up to which its output is final (a fragment ended by _settle)]
        # Marks say when a left needs a sweep: at its start (swept once the CTI passes it)
        # and at its end minus a tick (a left ending exactly at the CTI closes its last
        # fragment in that sweep).
        self.lefts: dict[int, list[Any]] = {}
        self.lefts_by_key: dict[Key, dict[int, list[Any]]] = {}
        self.left_marks: list[tuple[int, int]] = []  # (time, eid): a left starts or ends
        self.open_lefts: dict[int, list[Any]] = {}  # the lefts with an open fragment
        # right rec: [eid, start, end or None, payload, key]
        self.rights: dict[int, list[Any]] = {}
        self.rights_by_key: dict[Key, dict[int, list[Any]]] = {}
        self.right_marks: list[tuple[int, int, Key]] = []  # (time, seq, key)
        self.right_ends: list[tuple[int, int]] = []
        self.seq = itertools.count()
        self.arrival: Callable[[], int] | None = None
        self.tell_rank: Callable[[tuple[Any, ...]], None] | None = None
        self.tell_waits: Callable[[int | None], None] | None = None

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        key = matching_key(self.key_fns, port, payload)
        if port == 0:
            # (run by key, an eighth: the end its open fragment has so far)
            rec = [eid, start, end, payload, key, None, NEG_INF, INF]
            self.lefts[eid] = rec
            if key is not None:
                self.lefts_by_key.setdefault(key, {})[eid] = rec
            heapq.heappush(self.left_marks, (start, eid))
            if end is not None:
                heapq.heappush(self.left_marks, (end - 1, eid))  # see _end_mark
        elif key is not None:
            self.rights[eid] = [eid, start, end, payload, key]
            self.rights_by_key.setdefault(key, {})[eid] = self.rights[eid]
            heapq.heappush(self.right_marks, (start, next(self.seq), key))
            if end is not None:
                heapq.heappush(self.right_marks, (end, next(self.seq), key))
                heapq.heappush(self.right_ends, (end, eid))
            if self.arrival is not None:  # run by key: it may bring an open fragment's end nearer
                for rec in [r for r in self.open_lefts.values() if r[4] == key]:
                    if self.out_cti <= start < rec[7] and (self.residual is None or self.residual(rec[3], payload)):
                        rec[7] = start
                        self.emit_end(rec[0], start)
            elif start <= self.ctis[1]:  # starting at the right CTI: it may settle an open fragment's end
                for rec in [r for r in self.open_lefts.values() if r[4] == key]:
                    self._settle(rec)

    def end(self, port: int, eid: int, end: int) -> None:
        if port == 0:
            rec = self.lefts.get(eid)
            if rec is None:
                return
            rec[2] = end
            if self.arrival is not None:  # run by key: the driver ends open fragments (AntiJoinTimeline)
                if rec[5] is not None:  # the driver hears the left's end: a cut may be final now
                    assert self.tell_waits is not None
                    rec[7] = min(rec[7], end)
                    self.tell_waits(0)
                    self.emit_end(rec[0], end)
                if end > self.out_cti:
                    heapq.heappush(self.left_marks, (end - 1, eid))  # see _end_mark
                else:  # at the output CTI: its open fragment ends there (the driver's)
                    rec[5] = None
                    self.open_lefts.pop(rec[0], None)
                    self._retire(rec, self.out_cti)
                return
            if end > self.out_cti:
                heapq.heappush(self.left_marks, (end - 1, eid))  # see _end_mark
                if rec[5] is not None:
                    self._settle(rec)
                return
            # Ending exactly at the output CTI (an end is never before its input's CTI, which
            # is at or past the output's): the last sweep reached its end, so its open
            # fragment ends there now; no later CTI need come to close it.
            if rec[5] is not None:
                self._end_fragment(rec, end)
            self._retire(rec, self.out_cti)
        else:
            rrec = self.rights.get(eid)
            if rrec is not None:
                rrec[2] = end
                heapq.heappush(self.right_marks, (end, next(self.seq), rrec[4]))
                heapq.heappush(self.right_ends, (end, eid))

    def cti(self, port: int, t: int) -> None:
        c = output_cti(self.ctis, port, t, self.out_cti)
        if c is None:
            if port == 1 and self.ctis[1] > self.out_cti:  # the right input alone moved on
                self._settle_open()
            return
        p = self.out_cti
        touched: dict[int, list[Any]] = {}
        while self.left_marks and self.left_marks[0][0] < c:
            _, eid = heapq.heappop(self.left_marks)
            rec = self.lefts.get(eid)
            if rec is not None:
                touched[eid] = rec
        while self.right_marks and self.right_marks[0][0] < c:
            _, _, key = heapq.heappop(self.right_marks)
            touched.update(self.lefts_by_key.get(key, {}))
        for rec in sorted(touched.values(), key=lambda r: (r[1], r[0])):
            self._sweep(rec, p, c)
        self.out_cti = c
        self._settle_open()  # the right CTI is at or past c: a right event starting there settles an end
        self.emit_cti(c)
        while self.right_ends and self.right_ends[0][0] <= c:
            _, eid = heapq.heappop(self.right_ends)
            rrec = self.rights.pop(eid, None)
            if rrec is not None:
                group = self.rights_by_key[rrec[4]]
                del group[eid]
                if not group:
                    del self.rights_by_key[rrec[4]]

    def _end_fragment(self, rec: list[Any], at: int) -> None:
        self.emit_end(rec[5], at)
        rec[5] = None
        self.open_lefts.pop(rec[0], None)

    def _settle_open(self) -> None:
        if self.arrival is not None:
            return  # run by key: the driver settles ends (AntiJoinTimeline)
        for rec in list(self.open_lefts.values()):
            self._settle(rec)

    def _first_end(self, rec: list[Any], since: int) -> int:
        """The end of ``rec``'s fragment open at ``since`` as far as the events held tell: the
        earliest of the first matching right start at or after ``since`` and the left's own
        end (INF: neither)."""
        at = INF if rec[2] is None else rec[2]
        for rrec in self.rights_by_key.get(rec[4], {}).values() if rec[4] is not None else ():
            if since <= rrec[1] < at and (self.residual is None or self.residual(rec[3], rrec[3])):
                at = rrec[1]
        return at

    def _settle(self, rec: list[Any]) -> None:
        """End ``rec``'s open fragment now if its end (``_first_end`` from the output CTI) is
        final (``final_end``). Its output is then final up to there, and later sweeps start
        from it."""
        at = self._first_end(rec, self.out_cti)
        if final_end(at, self.ctis, rec[2]):
            self._end_fragment(rec, at)
            rec[6] = at

    def _sweep(self, rec: list[Any], p: int, c: int) -> None:
        start, end, payload, key = rec[1], rec[2], rec[3], rec[4]
        lo = max(p, start, rec[6])
        hi = c if end is None else min(c, end)
        if lo >= hi:
            if rec[5] is not None and end is not None:
                # The left ended exactly where the last sweep stopped (an end is never
                # before the CTI): its open fragment ends there.
                self._end_fragment(rec, end)
            self._retire(rec, c)
            return
        covered: list[tuple[int, int]] = []
        if key is not None:
            for rrec in self.rights_by_key.get(key, {}).values():
                rs, re = rrec[1], INF if rrec[2] is None else rrec[2]
                if rs < hi and re > lo and (self.residual is None or self.residual(payload, rrec[3])):
                    covered.append((max(rs, lo), min(re, hi)))
        covered.sort()
        gaps: list[tuple[int, int]] = []
        cursor = lo
        for cs, ce in covered:
            if cs > cursor:
                gaps.append((cursor, cs))
            cursor = max(cursor, ce)
        if cursor < hi:
            gaps.append((cursor, hi))
        open_id = rec[5]
        keyed = self.arrival is not None  # the driver ends open fragments (AntiJoinTimeline)
        if open_id is not None and not (gaps and gaps[0][0] == lo):
            if not keyed:
                self.emit_end(open_id, lo)  # covered from the start of this span
            open_id = None
        closes_at_end = end is not None and end <= c
        for i, (gs, ge) in enumerate(gaps):
            continuing = i == 0 and open_id is not None
            reaches_span_end = ge == hi and not closes_at_end
            if continuing:
                if not reaches_span_end:
                    if not keyed:
                        self.emit_end(open_id, ge)
                    open_id = None
                continue
            if keyed:
                assert self.tell_rank is not None and self.tell_waits is not None
                self.tell_rank((start, rec[0], end))
                if reaches_span_end:
                    open_id, rec[7] = rec[0], self._first_end(rec, c)
                    self.tell_waits(1)
                    self.emit_insert(open_id, gs, rec[7] if rec[7] < INF else None, payload)
                else:
                    self.emit_insert(rec[0], gs, ge, payload)
            elif reaches_span_end:
                open_id = self.new_id()
                self.emit_insert(open_id, gs, None, payload)
            else:
                self.emit_insert(self.new_id(), gs, ge, payload)
        rec[5] = open_id
        if open_id is None:
            self.open_lefts.pop(rec[0], None)
        else:
            self.open_lefts[rec[0]] = rec
        self._retire(rec, c)

    def idle(self) -> bool:
        """Whether the anti-join holds no event of either input."""
        return not (self.lefts or self.rights)

    def next_release(self) -> int | None:
        """The least output CTI at which the anti-join would sweep a left event (past a start
        or an end of it or of a right event of its key: a mark) or drop a right event no
        later left can meet (at its end), or None."""
        dues = [heap[0][0] + 1 for heap in (self.left_marks, self.right_marks) if heap]
        if self.right_ends:
            dues.append(self.right_ends[0][0])
        return max(min(dues), self.out_cti + 1) if dues else None  # an end at the output CTI is swept at the next

    def _retire(self, rec: list[Any], c: int) -> None:
        if rec[2] is not None and rec[2] <= c:
            self.lefts.pop(rec[0], None)
            if rec[4] is not None:
                group = self.lefts_by_key.get(rec[4])
                if group is not None:
                    group.pop(rec[0], None)
                    if not group:
                        del self.lefts_by_key[rec[4]]


class FollowedBy(Operator):
    """A followed by B within ``within`` ticks (``FollowedByNode``): the left events wait per
    key, the right ones in order of (start, payload) until the output CTI passes their start.
    Then each right event, in that order, completes every waiting left event it follows
    (``a.start < b.start < a.start + within``, the residual holding) that nothing completed
    before: a left event's first such right event. Left events no future right event can
    follow (``start + within`` at or before the CTI) are forgotten.

    Run one join key at a time (``tempo.runtime.keyed``), the pattern orders its right events
    by their arrival over all keys (``arrival``) and tells each match's rank (``tell_rank``:
    the right event's start, payload order and arrival, the match's place among its
    matches), the order in which the pattern over all keys emits it."""

    WIRING = Operator.WIRING | {"key_fns", "residual", "projection", "order", "within", "new_id", "arrival", "tell_rank"}

    def __init__(
        self,
        key_fns: tuple[Callable[[Any], Key], Callable[[Any], Key]] | None,
        residual: Callable[[Any, Any], Any] | None,
        projection: Callable[[Any, Any], Any],
        order: Callable[[Any], Any],
        within: int,
        new_id: Callable[[], int],
    ) -> None:
        super().__init__()
        self.key_fns, self.residual, self.projection, self.order = key_fns, residual, projection, order
        self.within, self.new_id = within, new_id
        self.lefts: dict[Key, list[tuple[int, Any]]] = {}  # key -> (start, payload), not yet followed
        self.rights: list[tuple[int, Any, int, Key, Any]] = []  # heap of (start, payload order, seq, key, payload)
        self.seq = itertools.count()
        self.ctis = [NEG_INF, NEG_INF]
        self.out_cti = NEG_INF
        self.arrival: Callable[[], int] | None = None
        self.tell_rank: Callable[[tuple[Any, ...]], None] | None = None

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        key = matching_key(self.key_fns, port, payload)
        if key is None:
            return
        if port == 0:
            self.lefts.setdefault(key, []).append((start, payload))
        else:
            seq = next(self.seq) if self.arrival is None else self.arrival()
            heapq.heappush(self.rights, (start, self.order(payload), seq, key, payload))

    def end(self, port: int, eid: int, end: int) -> None:
        return None  # a pattern reads starts only

    def cti(self, port: int, t: int) -> None:
        c = output_cti(self.ctis, port, t, self.out_cti)
        if c is None:
            return
        while self.rights and self.rights[0][0] < c:
            b_start, b_order, b_seq, key, b = heapq.heappop(self.rights)
            waiting = self.lefts.get(key)
            if not waiting:
                continue
            left: list[tuple[int, Any]] = []
            for place, (a_start, a) in enumerate(waiting):
                if a_start < b_start < a_start + self.within and (self.residual is None or self.residual(a, b)):
                    if self.tell_rank is not None:
                        self.tell_rank((b_start, b_order, b_seq, place))
                    self.emit_insert(self.new_id(), b_start, b_start + 1, self.projection(a, b))
                else:
                    left.append((a_start, a))
            self.lefts[key] = left
        for key in list(self.lefts):
            alive = [(s, a) for s, a in self.lefts[key] if s + self.within > c]
            if alive:
                self.lefts[key] = alive
            else:
                del self.lefts[key]
        self.out_cti = c
        self.emit_cti(c)

    def idle(self) -> bool:
        """Whether the pattern holds no event waiting."""
        return not (self.lefts or self.rights)

    def next_release(self) -> int | None:
        """The least output CTI at which the pattern would match a right event (the first past
        its start) or forget a left one (at its start plus ``within``), or None."""
        dues = [s + self.within for waiting in self.lefts.values() for s, _ in waiting]
        if self.rights:
            dues.append(self.rights[0][0] + 1)
        return min(dues) if dues else None


class Egress(Operator):
    """The query's output: releases an event once an output CTI passes its start.

    Events still waiting when the input ends were never committed and are not released.
    """

    def __init__(self, key_of: Callable[[Any], Any] | None = None) -> None:
        """``key_of``: the substream key of an output payload, when the output keeps one."""
        super().__init__()
        self.waiting: ByStart | KeyedByStart = ByStart()  # of events
        if key_of is not None:
            self.waiting = KeyedByStart(lambda event, _: key_of(event[3]))
        self.held: dict[int, list[Any]] = {}  # eid -> open event not yet released
        self.released_open: dict[int, list[Any]] = {}  # eid -> open event released
        # What went out, in order: an event as [kind, start, end or None, payload, eid], with
        # kind "event" (released closed) or "start" (released open); ("end", event) when a
        # released open event ends; ("cti", t); ("key_cti", t, key).
        self.raw: list[Any] = []
        self.ctis: list[int] = []

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        event = [None, start, end, payload, eid]
        if end is None:
            self.held[eid] = event
        self.waiting.push(start, event)

    def end(self, port: int, eid: int, end: int) -> None:
        event = self.held.pop(eid, None)
        if event is not None:
            event[2] = end  # goes out closed
            return
        event = self.released_open.pop(eid, None)
        if event is not None:
            event[2] = end
            self.raw.append(("end", event))

    def cti(self, port: int, t: int) -> None:
        self._release(self.waiting.pop_before(t))
        self.ctis.append(t)
        self.raw.append(("cti", t))

    def key_cti(self, port: int, key: Any, t: int) -> None:
        if isinstance(self.waiting, KeyedByStart):
            self._release(self.waiting.pop_key_before(key, t))
            self.raw.append(("key_cti", t, key))

    def _release(self, entries: Iterator[tuple[int, int, Any, Any]]) -> None:
        for _, _, event, _ in entries:
            if event[2] is None:
                event[0] = "start"
                del self.held[event[4]]
                self.released_open[event[4]] = event
            else:
                event[0] = "event"
            self.raw.append(event)
