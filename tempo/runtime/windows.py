"""Windows on a grid independent of the events: hopping and tumbling windows (``WindowNode``
with a ``HoppingWindow`` spec), and where a window's point result is stamped (``stamp``, which
the windows cut by the events, ``tempo.runtime.event_windows``, share).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from tempo.plan.windows import HoppingWindow, WindowTimestamp
from tempo.runtime.aggregates import Accumulator
from tempo.runtime.operator import Key, Operator
from tempo.ticks import INF, NEG_INF
from tempo.errors import UnsupportedError
from tempo.plan import nodes as p
from tempo.runtime import codegen
from tempo.runtime.build import Build, compiles


def stamp(timestamp: WindowTimestamp, ws: int, we: int, bound: int | None, closing: int, last_finite: int = NEG_INF) -> int:
    """Where the point result of window ``[ws, we)`` goes: ``WindowTimestamp.point_at`` over
    ints."""
    at: int = timestamp.point_at(ws, we, bound, closing, last_finite)
    return at


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


CUT_BY_EVENTS: dict[type, Callable[..., Operator]] = {}
"""The operator of each window kind cut by the events, by spec class
(``tempo.runtime.event_windows`` registers its kinds)."""


@compiles(p.WindowNode)
def _window(b: Build, node: p.WindowNode) -> Operator:
    """A window node's operator: a ``Window`` on a grid, or its kind's of those the events
    cut (``CUT_BY_EVENTS``); a window on the starts' timestamps appends the least or
    greatest start to its aggregates."""
    key_fn = codegen.compile_keys(node.keys) if node.keys is not None else None
    values_fn = codegen.compile_aggregate_values(node.aggregates, node.input.payload_type)
    kinds: list[p.Aggregate | p.AggregateKind] = list(node.aggregates)
    projection = codegen.compile_window_projection(node.projection)
    spec = node.spec
    if isinstance(spec, HoppingWindow):
        keyed = b.query.substream_key(node) is not None
        substream_index = node.group_index(b.query.substream_key(node.input)) if keyed else None
        if node.timestamp is WindowTimestamp.LATEST:
            kinds.append(p.AggregateKind.MAX)  # of the starts: the operator appends them
        elif node.timestamp is WindowTimestamp.EARLIEST:
            kinds.append(p.AggregateKind.MIN)
        return Window(
            spec,
            key_fn,
            values_fn,
            Accumulator(kinds),
            projection,
            b.to_datetime,
            b.new_id,
            substream_index,
            len(node.keys or ()),
            node.timestamp,
        )
    operator = CUT_BY_EVENTS.get(type(spec))
    if operator is None:
        raise UnsupportedError("in-memory", spec.describe(), "it has no window operator for this kind")
    return operator(
        spec,
        node.timestamp,
        key_fn,
        values_fn,
        Accumulator(kinds),
        projection,
        b.to_datetime,
        b.new_id,
        codegen.payload_order(node.input.payload_type),
    )
