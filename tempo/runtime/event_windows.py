"""Windows cut by the events themselves: sessions, count windows and snapshots.

Unlike hopping windows, which windows exist depends on the events, so each operator keeps
its group's events until a CTI makes a window final (the spec's ``CTI_RULE``) and only then
computes its aggregates. Every result not yet out is stamped at or after the input CTI
(``WindowSpec.TIMESTAMPS`` admits no other stamp for these kinds), so CTIs pass unchanged.
Results a CTI completes go out in order of their stamps, then of their group's first
appearance.

On the CTI at infinity every window is complete; open lifetimes end just after the latest
finite time the operator has seen (an event time, or its last finite CTI).
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections import deque
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar, NamedTuple

from tempo.plan import windows as w
from tempo.plan.windows import WindowSpec, WindowTimestamp
from tempo.runtime.aggregates import Accumulator
from tempo.runtime.codegen import Order
from tempo.runtime.operator import Key, Operator
from tempo.runtime.windows import CUT_BY_EVENTS, stamp
from tempo.ticks import INF, NEG_INF


class EventWindows(Operator):
    """What the three kinds share: grouping, aggregating a window's events, emitting."""

    WIRING: ClassVar[frozenset[str]] = Operator.WIRING | {
        "spec",
        "timestamp",
        "key_fn",
        "values_fn",
        "accumulator",
        "projection",
        "to_datetime",
        "new_id",
        "order",
        "ids_by_start",
    }
    SHARED = {"t_max": max}  # where open lifetimes end when the input ends: over every group's events

    def __init__(
        self,
        spec: WindowSpec,
        timestamp: WindowTimestamp,
        key_fn: Callable[[Any], Key] | None,
        values_fn: Callable[[Any, int], tuple[Any, ...]],
        accumulator: Accumulator,
        projection: Callable[[Key, list[Any], datetime, datetime], Any],
        to_datetime: Callable[[int], datetime],
        new_id: Callable[[], int],
        order: Order,
    ) -> None:
        super().__init__()
        self.spec, self.timestamp = spec, timestamp
        self.key_fn, self.values_fn, self.accumulator = key_fn, values_fn, accumulator
        self.projection, self.to_datetime, self.new_id, self.order = projection, to_datetime, new_id, order
        self.in_cti = NEG_INF
        self.in_cti_finite = NEG_INF
        self.t_max = NEG_INF  # the latest finite time seen: starts and ends
        self.outbox: list[tuple[int, int, int | None, Any]] = []  # (start, eid, end, payload), in the order queued
        self.ids_by_start = False
        """Whether a result's id is its window's start rather than a new id: a snapshot's run
        one key at a time (``tempo.runtime.keyed``), whose group has one window per start, so
        that the end of a start edge names it the same in every run of the key."""

    def _seen(self, t: int) -> None:
        if NEG_INF < t < INF and t > self.t_max:
            self.t_max = t

    def horizon(self) -> int:
        """Where an open lifetime ends on the CTI at infinity: just after the later of the
        latest finite time seen and the last finite CTI (not just before it, as for hopping
        windows: a window it ends would else end at that CTI, and its result, stamped at its
        last tick, would come after the CTI that already passed it)."""
        return max(self.t_max, self.in_cti_finite) + 1

    def state(self, values: list[tuple[Any, ...]]) -> list[Any]:
        """The aggregate state of a window's events' ``values``."""
        state: list[Any] | None = None
        for v in values:
            state = self.accumulator.fold(state, v)
        assert state is not None
        return state

    def result(self, key: Key, state: list[Any], ws: int, we: int, closing: int, edge: bool = False) -> int:
        """Queue one result of window ``[ws, we)``: the point its timestamp gives (``closing``
        is the CTI completing the window), or with ``edge`` a start edge at ``ws``. Returns
        the result's id."""
        payload = self.projection(key, self.accumulator.results(state), self.to_datetime(ws), self.to_datetime(we))
        eid = ws if self.ids_by_start else self.new_id()
        if edge:
            self.outbox.append((ws, eid, None, payload))
        else:
            t = stamp(self.timestamp, ws, we, we - 1, closing, self.in_cti_finite)
            self.outbox.append((t, eid, t + 1, payload))
        return eid

    def flush_outbox(self) -> None:
        self.outbox.sort(key=lambda o: o[0])  # stable: queued order within a stamp
        for start, eid, end, payload in self.outbox:
            self.emit_insert(eid, start, end, payload)
        self.outbox = []

    def cti(self, port: int, t: int) -> None:
        if t <= self.in_cti:
            return
        self.in_cti = t
        if t < INF:
            self.in_cti_finite = t
        self.advance(t)
        self.flush_outbox()
        self.emit_cti(self.out_cti(t))

    def out_cti(self, t: int) -> int:
        """The CTI to forward after ``t``: ``t`` (every result not yet out is stamped at or
        after it)."""
        return t

    def advance(self, c: int) -> None:
        raise NotImplementedError


class _Activity:
    """A group's current activity and the session (piece of it) events go into now."""

    __slots__ = ("key", "last", "open", "begin", "cut", "first", "state")

    def __init__(self, key: Key, first: int, cut: int) -> None:
        self.key = key
        self.last = NEG_INF  # the latest last tick of its events whose end is known
        self.open = 0  # its events whose end is not known yet
        self.first = first  # where the activity began (the first cut counts from it)
        self.begin = first  # the current session's start
        self.cut = cut  # the current session's cut (infinity without max_duration)
        self.state: list[Any] | None = None  # the current session's aggregates (None: no event yet)

    def until(self, gap: int) -> int:
        """Where the activity ends unless an event starts before."""
        return INF if self.open else self.last + gap


class _RunParts(NamedTuple):
    """A run's partial aggregates (``Sessions.merge_run``), in an event record's values slot
    (told from an event's values, a plain tuple, by its type)."""

    n: int
    parts: tuple[Any, ...]


class Sessions(EventWindows):
    """Per group: the events not yet committed (a heap by start), and the current activity,
    into which a CTI folds the events starting before it in start order (the order of events
    with one start does not matter: they share a session)."""

    spec: w.SessionWindow

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.waiting: dict[Key, list[tuple[int, int, list[Any]]]] = {}  # group -> heap of (start, seq, rec)
        self.activities: dict[Key, _Activity] = {}
        self.open_edges: dict[int, list[Any]] = {}  # eid -> rec, for events whose end is not known
        self.arrivals = itertools.count()

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        key = self.key_fn(payload) if self.key_fn else ()
        self._seen(start)
        finite = None if end is None or end >= INF else end
        if finite is None:
            self.open_edges[eid] = rec = [start, None, self.values_fn(payload, start), None]  # rec[3]: its activity
        else:
            self._seen(finite)
            rec = [start, finite, self.values_fn(payload, start), None]
        heapq.heappush(self.waiting.setdefault(key, []), (start, next(self.arrivals), rec))

    def merge_run(self, key: Key, start: int, end: int, n: int, parts: tuple[Any, ...]) -> None:
        """A run of ``n`` events of group ``key`` arriving together, their aggregates computed
        apart (``Accumulator.merge``'s ``parts``): the first starts at ``start``, each next
        before the latest last tick of those before it + gap, and none ends after ``end``
        (finite). Without a max_duration this is exact: the run is folded as one event when a
        CTI passes its start, where its events would each be folded when a CTI passes theirs,
        and no CTI in between can end their activity (each starts before the activity's end
        as the ones before it leave it); other events only join activities, never split them."""
        assert self.spec.max_duration is None
        self._seen(start)
        self._seen(end)
        rec = [start, end, _RunParts(n, parts), None]
        heapq.heappush(self.waiting.setdefault(key, []), (start, next(self.arrivals), rec))

    def end(self, port: int, eid: int, end: int) -> None:
        if end >= INF or eid not in self.open_edges:
            return
        rec = self.open_edges.pop(eid)
        self._seen(end)
        self._ended(rec, end)

    @staticmethod
    def _ended(rec: list[Any], end: int) -> None:
        rec[1] = end
        activity: _Activity | None = rec[3]
        if activity is not None:
            activity.open -= 1
            activity.last = max(activity.last, end - 1)

    def advance(self, c: int) -> None:
        if c >= INF:
            end = self.horizon()
            for rec in self.open_edges.values():
                self._ended(rec, end)
            self.open_edges.clear()
        gap, spec = self.spec.gap, self.spec
        for key in list(self.waiting):
            heap = self.waiting[key]
            while heap and heap[0][0] < c:
                start, _, rec = heapq.heappop(heap)
                act = self.activities.get(key)
                if act is not None and start >= act.until(gap):
                    self._close(act, c)
                    act = None
                if act is None:
                    act = self.activities[key] = _Activity(key, start, spec.first_cut(start))
                elif start >= act.cut:  # the activity goes on past a cut: a new session
                    self._close_session(act, c)
                    act.begin, act.cut = spec.piece(act.first, start)
                values = rec[2]
                if type(values) is _RunParts:
                    act.state = self.accumulator.fold_partial(act.state, values.n, values.parts)
                else:
                    act.state = self.accumulator.fold(act.state, values)
                if rec[1] is None:
                    act.open += 1
                    rec[3] = act
                else:
                    act.last = max(act.last, rec[1] - 1)
            if not heap:
                del self.waiting[key]
        for act in list(self.activities.values()):
            if act.until(gap) <= c:
                self._close(act, c)
            elif act.cut <= c:  # the session is final; the activity may go on past the cut
                self._close_session(act, c)

    def idle(self) -> bool:
        """Whether it holds no group's state (``Window.idle``)."""
        return not self.activities and not self.waiting and not self.open_edges

    def next_release(self) -> int | None:
        """A CTI at or before the least at which this operator would emit a result, None while
        it holds nothing (a keyed operator's timer: ``tempo.runtime.keyed``): a current
        session's end (its activity's, or its cut), or for an event waiting to be folded in, the
        least end a session it opens may have (its start + gap; with a cut, just after its
        start, where a cut may fall)."""
        if self.in_cti >= INF:  # the input ended: nothing is released any more
            return None
        gap, cap = self.spec.gap, self.spec.max_duration
        ends = [min(a.until(gap), a.cut) for a in self.activities.values() if a.state is not None]
        ends += [heap[0][0] + (gap if cap is None else 1) for heap in self.waiting.values() if heap]
        return min(ends) if ends else None

    def _close_session(self, act: _Activity, c: int) -> None:
        if act.state is not None:
            self.result(act.key, act.state, act.begin, min(act.until(self.spec.gap), act.cut), c)
            act.state = None

    def _close(self, act: _Activity, c: int) -> None:
        self._close_session(act, c)
        del self.activities[act.key]


class CountWindows(EventWindows):
    """Per group: the events not yet committed, in (start, payload) order, and the last
    ``size`` committed ones with the number committed so far (the next rank); with
    ``by="starts"``, the last ``size`` committed starts, each with its events."""

    spec: w.CountWindow

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.waiting: dict[Key, list[tuple[int, tuple[Any, ...], int, tuple[Any, ...]]]] = {}
        # group -> (count, last ones): (start, values) per event, or (start, [values, ...]) per start
        self.ranked: dict[Key, tuple[int, deque[tuple[int, Any]]]] = {}
        self.arrivals = itertools.count()

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        key = self.key_fn(payload) if self.key_fn else ()
        heapq.heappush(self.waiting.setdefault(key, []), (start, self.order(payload), next(self.arrivals), self.values_fn(payload, start)))

    def end(self, port: int, eid: int, end: int) -> None:
        return None  # a count window's events and bounds are their starts

    def idle(self) -> bool:
        """Never, once it has seen an event: a group's count of events places its windows."""
        return not self.waiting and not self.ranked

    def next_release(self) -> int | None:
        """The least CTI at which this operator would emit a result, None while no group
        holds enough waiting events to fill its next window (a keyed operator's timer:
        ``tempo.runtime.keyed``): just after the start of the event that fills it."""
        if self.in_cti >= INF:  # the input ended: nothing is released any more
            return None
        size, slide = self.spec.size, self.spec.slide
        dues = []
        for key, heap in self.waiting.items():
            count = self.ranked[key][0] if key in self.ranked else 0
            filled = max(count + 1, size)  # the count at which the group's next window is full
            filled += -(filled - size) % slide
            need = filled - count
            if self.spec.by_starts:
                starts = sorted({e[0] for e in heap})
                if len(starts) >= need:
                    dues.append(starts[need - 1] + 1)
            elif len(heap) >= need:
                dues.append(heapq.nsmallest(need, heap)[-1][0] + 1)
        return min(dues) if dues else None

    def advance(self, c: int) -> None:
        size, slide = self.spec.size, self.spec.slide
        for key in list(self.waiting):
            heap = self.waiting[key]
            count, last = self.ranked.get(key) or (0, deque(maxlen=size))
            while heap and heap[0][0] < c:
                start, _, _, values = heapq.heappop(heap)
                if self.spec.by_starts:  # the unit counted is a start: all its events, in payload order
                    events = [values]
                    while heap and heap[0][0] == start:
                        events.append(heapq.heappop(heap)[3])
                    last.append((start, events))
                else:
                    last.append((start, values))
                count += 1
                if count >= size and (count - size) % slide == 0:
                    held = [v for _, vs in last for v in vs] if self.spec.by_starts else [v for _, v in last]
                    self.result(key, self.state(held), last[0][0], start + 1, c)
            self.ranked[key] = (count, last)
            if not heap:
                del self.waiting[key]


def _next_point(points: list[int], t: int) -> int:
    """The first of ``points`` (sorted) after ``t``; infinity if none."""
    i = bisect.bisect_right(points, t)
    return points[i] if i < len(points) else INF


class Snapshots(EventWindows):
    """Per group: the events not yet behind ``done`` (the time before which every window is
    out), and the window whose result waits for its end (``pending``: its start, and its
    start edge's id or its aggregate state).

    A window's end ``q`` is final at a CTI ``c > q``: every endpoint before ``c`` is known then
    (an event starting at ``c``, or an end edge ending at ``c``, may come after the CTI at
    ``c``). A window still waiting may thus end at ``c`` and, stamped END, start at ``c - 1``:
    the output CTI is held a tick back for END."""

    spec: w.SnapshotWindow

    def out_cti(self, t: int) -> int:
        return t - 1 if self.timestamp is WindowTimestamp.END and t < INF else t

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.events: dict[Key, dict[int, list[Any]]] = {}  # group -> eid -> [start, end or None, values]
        self.done: dict[Key, int] = {}
        self.pending: dict[Key, tuple[int, Any]] = {}
        self.where: dict[int, Key] = {}  # eid of an event without an end -> its group

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        key = self.key_fn(payload) if self.key_fn else ()
        self._seen(start)
        finite = None if end is None or end >= INF else end
        if finite is None:
            self.where[eid] = key
        else:
            self._seen(finite)
        self.events.setdefault(key, {})[eid] = [start, finite, self.values_fn(payload, start)]

    def end(self, port: int, eid: int, end: int) -> None:
        key = self.where.pop(eid, None)
        if key is None or end >= INF:
            if key is not None:
                self.where[eid] = key
            return
        self._seen(end)
        self.events[key][eid][1] = end

    def _points(self, key: Key) -> list[int]:
        """The group's endpoints from ``done`` on (``done`` is one too: its event may be
        forgotten already)."""
        done = self.done.get(key, NEG_INF)
        events = self.events[key]
        return sorted({t for e in events.values() for t in (e[0], e[1]) if t is not None and t >= done} | ({done} - {NEG_INF}))

    @staticmethod
    def _alive(events: dict[int, list[Any]], t: int) -> bool:
        return any(e[0] <= t and (e[1] is None or e[1] > t) for e in events.values())

    @staticmethod
    def _first_alive(points: list[int], events: dict[int, list[Any]]) -> int | None:
        """The first of ``points`` (sorted) at which one of ``events`` is alive: for each
        event the first point at or after its start, if before its end (a bisection per event,
        not a scan of every event per point)."""
        first: int | None = None
        for e in events.values():
            i = bisect.bisect_left(points, e[0])
            if i < len(points) and (e[1] is None or points[i] < e[1]) and (first is None or points[i] < first):
                first = points[i]
        return first

    def idle(self) -> bool:
        """Whether it holds no group's events or waiting window (``Window.idle``): a group's
        ``done`` lies before every event still to come, which start at or after the CTI."""
        return not self.events and not self.pending

    def next_release(self) -> int | None:
        """The least CTI at which this operator would emit a result, None while none is due
        (a keyed operator's timer: ``tempo.runtime.keyed``): just past the end of the window
        a group waits on (its end edge or result goes then; a point at its start is out, and
        the group forgets the window then, so that a key's state does not outlive its last
        window), else just past the start of a group's next window (its end, for a result that
        waits for it). A window's end not known yet is where an open event ends: at the CTI at
        infinity."""
        if self.in_cti >= INF:  # the input ended: nothing is released any more
            return None
        waits_for_end = self.timestamp in (WindowTimestamp.END, WindowTimestamp.CTI)
        dues = []
        for key, events in self.events.items():
            points = self._points(key)
            pending = self.pending.get(key)
            due: int | None
            if pending is None:  # the next window's start; its end, for a result that waits for it
                due = self._first_alive(points, events)
                if due is not None and waits_for_end:
                    due = _next_point(points, due)
            else:  # the window's end: its end edge or result goes then, or (its point out) the
                # group forgets it then, and a next window may start there
                due = _next_point(points, pending[0])
            if due is not None:
                dues.append(min(due + 1, INF))
        return min(dues) if dues else None

    def advance(self, c: int) -> None:
        if c >= INF:
            end = self.horizon()
            for eid, key in self.where.items():
                self.events[key][eid][1] = end
            self.where.clear()
        lifetime = self.timestamp is WindowTimestamp.LIFETIME
        waits_for_end = self.timestamp in (WindowTimestamp.END, WindowTimestamp.CTI)
        for key in list(self.events):
            events = self.events[key]
            done = self.done.get(key, NEG_INF)
            points = self._points(key)
            i = 0
            while True:
                # the next endpoint after the pending window's start, or the next window start
                pending = self.pending.get(key)
                if pending is not None:
                    p = pending[0]
                    while i < len(points) and points[i] <= p:
                        i += 1
                    q = points[i] if i < len(points) else None
                    if q is None or q >= c:  # an end at c may still be learned after the CTI at c
                        break
                    del self.pending[key]
                    if lifetime:
                        self.flush_outbox()  # its start edge goes out before its end
                        self.emit_end(pending[1], q)
                    elif waits_for_end:
                        self.result(key, pending[1], p, q, c)
                    done = q
                    continue
                while i < len(points) and not self._alive(events, points[i]):
                    i += 1
                if i == len(points) or points[i] >= c:
                    break
                p = points[i]
                state = self.state([e[2] for e in events.values() if e[0] <= p and (e[1] is None or e[1] > p)])
                if waits_for_end:
                    self.pending[key] = (p, state)
                elif lifetime:
                    self.pending[key] = (p, self.result(key, state, p, p, c, edge=True))
                else:
                    self.pending[key] = (p, None)
                    self.result(key, state, p, p + 1, c)  # START, EARLIEST, LATEST: a point at p
            self.done[key] = done
            for eid in [eid for eid, e in events.items() if e[1] is not None and e[1] <= done]:
                del events[eid]
            if not events and key not in self.pending:
                del self.events[key]


CUT_BY_EVENTS.update({w.SessionWindow: Sessions, w.CountWindow: CountWindows, w.SnapshotWindow: Snapshots})
