"""Events in time order, with analytics over the events before them (``AnalyticNode``).

Each group's events wait in a heap by (start, payload order) until a CTI passes their start;
they then go out in that order, every event before them being known. Peers (equal start and
payload) are taken together: they see the same running aggregates (their whole peer group
included) and the same previous value (that of the last event before them), so their
results do not depend on the order in which they arrived. Events a CTI releases go out in
(start, payload) order over all groups.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any, ClassVar

from tempo.runtime.aggregates import Accumulator
from tempo.runtime.codegen import Order
from tempo.runtime.operator import Key, Operator
from tempo.ticks import NEG_INF
from tempo.expr import nodes as x
from tempo.plan import nodes as p
from tempo.runtime import aggregates, codegen
from tempo.runtime.build import Build, compiles


class Analytic(Operator):
    """``previous`` lists, per ``Previous`` analytic, its index among the analytics, its
    limit (None: none) and its offset; ``previous_fn`` gives an event's values of their
    arguments then of their conditions (whether the event counts for each), in that order,
    and ``default_fn`` the current event's defaults. ``running`` lists the indexes of the running aggregates, whose arguments
    ``values_fn`` gives and ``accumulator`` folds. With ``projection`` None the events pass
    unchanged, ids included (``order_by_time``)."""

    WIRING: ClassVar[frozenset[str]] = Operator.WIRING | {
        "key_fn",
        "order",
        "previous",
        "previous_fn",
        "default_fn",
        "running",
        "values_fn",
        "accumulator",
        "projection",
        "new_id",
        "width",
        "keep_ids",
        "tell_rank",
        "arrival",
        "by_key",
    }

    def __init__(
        self,
        key_fn: Callable[[Any], Key] | None,
        order: Order,
        previous: list[tuple[int, int | None, int]],
        previous_fn: Callable[[Any], tuple[Any, ...]],
        default_fn: Callable[[Any], tuple[Any, ...]],
        running: list[int],
        values_fn: Callable[[Any, int], tuple[Any, ...]],
        accumulator: Accumulator,
        projection: Callable[[Key, Any, list[Any]], Any] | None,
        new_id: Callable[[], int],
    ) -> None:
        super().__init__()
        self.key_fn, self.order = key_fn, order
        self.previous, self.previous_fn, self.default_fn = previous, previous_fn, default_fn
        self.running, self.values_fn, self.accumulator = running, values_fn, accumulator
        self.projection, self.new_id = projection, new_id
        self.width = len(previous) + len(running)
        # The keyed form's (``tempo.runtime.keyed``): each output keeps its event's id, unique
        # over all keys, and its rank among the outputs one CTI releases in its group
        # ((payload order, arrival)) is told before it goes out, so that the results of all
        # keys can be put in this operator's order.
        self.keep_ids = False
        self.tell_rank: Callable[[tuple[Any, ...]], None] | None = None
        # The keyed form's arrival of the event being inserted, over all keys (its place in the
        # stage), ahead of the operator's own count: a key's events arrive in that order too.
        self.arrival: Callable[[], int] | None = None
        # A keyed release's (``ReleaseNode.keyed_by``): its groups are the output's substream
        # keys, and a key's own CTI releases that group's events as the output would.
        self.by_key = False
        self.waiting: dict[Key, list[tuple[int, tuple[Any, ...], int, list[Any]]]] = {}
        self.state: dict[Key, list[Any]] = {}  # group -> running aggregates' state
        # group -> per previous analytic, (start, value) of the last ``offset`` events out that
        # met its condition, the latest last
        self.last: dict[Key, list[list[tuple[int, Any]]]] = {}
        self.open: dict[int, list[Any]] = {}  # eid of an event without an end -> its entry
        self.in_cti = NEG_INF
        self.arrivals = itertools.count()

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        key = self.key_fn(payload) if self.key_fn else ()
        entry = [eid, end, payload, None]  # entry[3]: the output's id once out
        if end is None:
            self.open[eid] = entry
        seq = next(self.arrivals) if self.arrival is None else self.arrival()
        heapq.heappush(self.waiting.setdefault(key, []), (start, self.order(payload), seq, entry))

    def end(self, port: int, eid: int, end: int) -> None:
        entry = self.open.pop(eid, None)
        if entry is None:
            return
        entry[1] = end
        if entry[3] is not None:
            self.emit_end(entry[3], end)

    def cti(self, port: int, t: int) -> None:
        if t <= self.in_cti:
            return
        self.in_cti = t
        self._release_before(list(self.waiting), t)
        self.emit_cti(t)

    def key_cti(self, port: int, key: Any, t: int) -> None:
        """A substream key's CTI: a keyed release's group ``key`` goes out up to it, and the
        key's CTI passes on; an analytic merges keys and ignores it."""
        if not self.by_key:
            return
        if key in self.waiting:
            self._release_before([key], t)
        self.emit_key_cti(key, t)

    def _release_before(self, keys: list[Key], t: int) -> None:
        """The events of groups ``keys`` starting before ``t``, out in order."""
        out: list[tuple[int, tuple[Any, ...], int, list[Any], Any]] = []
        for key in keys:
            heap = self.waiting[key]
            peers: list[tuple[int, tuple[Any, ...], int, list[Any]]] = []
            while heap and heap[0][0] < t:
                item = heapq.heappop(heap)
                if peers and (item[0], item[1]) != (peers[0][0], peers[0][1]):
                    self._release(key, peers, out)
                    peers = []
                peers.append(item)
            if peers:
                self._release(key, peers, out)
            if not heap:
                del self.waiting[key]
        out.sort(key=lambda o: (o[0], o[1], o[2]))
        for start, okey, seq, entry, payload in out:
            eid = entry[0] if self.projection is None or self.keep_ids else self.new_id()
            entry[3] = eid
            if self.tell_rank is not None:
                self.tell_rank((okey, seq))
            self.emit_insert(eid, start, entry[1], payload)

    def next_release(self) -> int | None:
        """The least CTI that would release an event held (the first past the earliest
        start waiting), or None."""
        starts = [heap[0][0] for heap in self.waiting.values() if heap]
        return min(starts) + 1 if starts else None

    def idle(self) -> bool:
        """Whether the operator holds nothing: no event waiting or open, no group's running
        aggregates or previous value (a group's analytics run over all its history)."""
        return not (self.waiting or self.state or self.last or self.open)

    def _recent(self, key: Key) -> list[list[tuple[int, Any]]]:
        """Group ``key``'s events back per previous analytic (``last``)."""
        recent = self.last.get(key)
        if isinstance(recent, tuple):  # saved by tempo before offsets: (start, values) of the last event
            recent = [[(recent[0], value)] for value in recent[1]]
        if recent is None:
            recent = [[] for _ in self.previous]
        self.last[key] = recent
        return recent

    def _release(self, key: Key, peers: list[tuple[int, tuple[Any, ...], int, list[Any]]], out: list[Any]) -> None:
        """One peer group of ``key``, in order: their outputs, appended to ``out``."""
        start = peers[0][0]
        if self.projection is None:
            out.extend((start, okey, seq, entry, entry[2]) for start, okey, seq, entry in peers)
            return
        aggs: list[Any] = [None] * self.width
        if self.running:
            state = self.state.get(key)
            for _, _, _, entry in peers:
                state = self.accumulator.fold(state, self.values_fn(entry[2], start))
            assert state is not None
            self.state[key] = state
            for i, value in zip(self.running, self.accumulator.results(state)):
                aggs[i] = value
        if self.previous:
            payload = peers[0][3][2]  # peers are equal: one payload stands for all
            recent = self._recent(key)
            defaults = self.default_fn(payload)
            for j, (i, limit, offset) in enumerate(self.previous):
                found = recent[j]
                if len(found) >= offset and (limit is None or start - found[-offset][0] < limit):
                    aggs[i] = found[-offset][1]
                else:
                    aggs[i] = defaults[j]
            values = self.previous_fn(payload)
            width = len(self.previous)
            for j, (_, _, offset) in enumerate(self.previous):
                if values[width + j] is True:  # each peer is an event back for those after them
                    found = recent[j]
                    found.extend([(start, values[j])] * min(len(peers), offset))
                    del found[:-offset]
        for start, okey, seq, entry in peers:
            out.append((start, okey, seq, entry, self.projection(key, entry[2], aggs)))


@compiles(p.AnalyticNode)
def _analytic(b: Build, node: p.AnalyticNode) -> Operator:
    previous = [(i, a) for i, a in enumerate(node.analytics) if isinstance(a, p.Previous)]
    running = [(i, a) for i, a in enumerate(node.analytics) if isinstance(a, p.Aggregate)]
    identity = not node.analytics and isinstance(node.projection, x.Input)
    counts = [x.Lit(True) if a.when is None else a.when for _, a in previous]
    return Analytic(
        codegen.compile_keys(node.keys) if node.keys is not None else None,
        codegen.payload_order(node.input.payload_type),
        [(i, a.limit, a.offset) for i, a in previous],
        codegen.compile_function([*(a.arg for _, a in previous), *counts], ["a0"], as_tuple=True),
        codegen.compile_function([x.Lit(None) if a.default is None else a.default for _, a in previous], ["a0"], as_tuple=True),
        [i for i, _ in running],
        codegen.compile_aggregate_values([a for _, a in running], node.input.payload_type),
        aggregates.Accumulator([a for _, a in running]),
        None if identity else codegen.compile_function([node.projection], ["key", "a0", "aggs"], inputs=["a0"]),
        b.new_id,
    )


def _no_values(payload: Any, start: int = 0) -> tuple[Any, ...]:
    return ()


@compiles(p.ReleaseNode)
def _release(b: Build, node: p.ReleaseNode) -> Operator:
    """The output's release as an operator: ``order_by_time`` with every payload tied, so that
    events of one start go out in order of arrival, as the output releases them; grouped by
    the substream key it releases by (``keyed_by``), whose CTIs release a group's events."""
    key_fn = None if node.keyed_by is None else codegen.compile_expression(node.keyed_by, 1)
    release = Analytic(key_fn, _no_values, [], _no_values, _no_values, [], _no_values, aggregates.Accumulator([]), None, b.new_id)
    release.by_key = node.keyed_by is not None
    return release
