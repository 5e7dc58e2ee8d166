"""Ingress: input items become checked events and CTIs, by the rules of ``AdvanceTimeSettings``.

This module is the reference statement of ingress semantics (docs/semantics.md explains
them with timelines):

* Every item is checked on its own first (kind for the shape, payload type, lifetime,
  timestamps all naive or all aware, arrival times not decreasing, end edges matched to an
  open start edge by start and payload). For inputs given as sequences this runs over all
  items before the first event is processed.
* The CTI rule: after CTI ``c``, points, intervals and start edges start at or after ``c``;
  end edges end at or after ``c``. CTIs never go back; one at or before the current CTI is
  ignored.
* Generation: after every N-th received event (end edges not counted), or when an event
  enters a later ``T``-aligned period than any before (the first event only sets the
  period), a CTI at that event's received start minus the delay.
* Import: every CTI that advances the exporting input advances the importing one at the
  same point of the arrival sequence; with generation too, the later CTI wins.
* Violations: DROP rejects the event; ADJUST moves a violating start (or point) to the CTI
  when the lifetime reaches past it, else drops it, and ends a violating end edge at the
  CTI. Without settings a violation is an error. Everything rejected is recorded.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from tempo.errors import CtiViolationError, ImportOrderError, InputError
from tempo.events import SHAPE_ITEMS, Cti, EdgeEnd, EdgeStart, Interval, Point
from tempo.plan.nodes import SourceNode
from tempo.result import Action, InputMetrics, Rule
from tempo.settings import AdvanceTimePolicy
from tempo.sources import TableSource
from tempo.ticks import INF, NEG_INF, duration_ticks, to_ticks

if TYPE_CHECKING:
    from tempo.tables import Payloads

# Kinds of prepared items.
POINT, INTERVAL, START, END, CTI = range(5)

_KIND = {Point: POINT, Interval: INTERVAL, EdgeStart: START, EdgeEnd: END, Cti: CTI}

Prepared = tuple[int, int, int, int, Any, int, Any]
"""(arrival, kind, start, end, payload, position, item); arrival is inherited when absent."""


class TimestampMode:
    """Whether the query's timestamps are naive (UTC) or aware; mixing them is an error."""

    def __init__(self) -> None:
        self.naive: bool | None = None

    def check(self, t: object, name: str, position: int, item: object, what: str) -> int:
        if not isinstance(t, datetime):
            raise InputError(name, position, item, f"{what} must be a datetime, got {type(t).__name__}")
        naive = t.tzinfo is None
        if t.replace(tzinfo=None) == datetime.max:
            return INF  # infinity is the same instant either way: tempo.INFINITY suits naive inputs too
        if self.naive is None:
            self.naive = naive
        elif self.naive != naive:
            raise InputError(
                name, position, item,
                "naive and timezone-aware timestamps are mixed in this query; use one or the other "
                "(naive timestamps mean UTC)",
            )
        return to_ticks(t)


def prepare(
    node: SourceNode, mode: TimestampMode, needs_arrival: bool
) -> Iterator[Prepared]:
    """Check and convert one input's items, in input order."""
    if isinstance(node.source, TableSource):
        return _prepare_table(node, mode, needs_arrival)
    return _prepare_items(node, mode, needs_arrival)


def prepare_checked(node: SourceNode, mode: TimestampMode, needs_arrival: bool) -> Iterator[Prepared]:
    """``prepare`` for an input whose items are all there (a table or a materialized item
    list): every item is checked before the first is given, so a bad one stops the run
    before anything is processed. Table rows that pass the checks a column at a time are
    given straight from the columns, not held as records."""
    if isinstance(node.source, TableSource):
        table = _read_table(node, mode)
        plain = _plain_rows(table, node, needs_arrival)
        return plain if plain is not None else iter(list(_checked_rows(table, node, needs_arrival)))
    return iter(list(_prepare_items(node, mode, needs_arrival)))


Columns = tuple[list[int], list[int], list[int], list[int] | None, "Payloads"]
"""A table's (kinds, starts, ends, arrivals, payloads) in input order."""


def _prepare_table(node: SourceNode, mode: TimestampMode, needs_arrival: bool) -> Iterator[Prepared]:
    """The fast path for table sources: columns straight to ticks, the same checks as for
    items (a column at a time when every row passes them)."""
    table = _read_table(node, mode)
    plain = _plain_rows(table, node, needs_arrival)
    yield from plain if plain is not None else _checked_rows(table, node, needs_arrival)


def _read_table(node: SourceNode, mode: TimestampMode) -> Columns:
    from tempo.tables import read_columns

    source = node.source
    assert isinstance(source, TableSource)
    table = read_columns(source, source.arrow_table(), node.shape)
    if table[0]:
        mode.check(datetime(1970, 1, 1, tzinfo=timezone.utc), node.name, 0, None, "a table's times")  # tables are UTC
    return table


def _allowed(node: SourceNode) -> set[int]:
    return {_KIND[k] for k in SHAPE_ITEMS[node.shape]} | {CTI}


def _plain_rows(table: Columns, node: SourceNode, needs_arrival: bool) -> Iterator[Prepared] | None:
    """The rows as ``_checked_rows`` gives them when they are all points and intervals that
    pass its checks (the usual table, checked a column at a time), else None."""
    kinds, starts, ends, arrivals, payloads = table
    if arrivals is None:
        arrivals_pass = not needs_arrival
    else:
        arrivals_pass = None not in arrivals and all(map(operator.le, itertools.chain((NEG_INF,), arrivals), arrivals))
    if not (arrivals_pass and set(kinds) <= _allowed(node) & {POINT, INTERVAL} and all(map(operator.gt, ends, starts)) and max(starts, default=NEG_INF) < INF):
        return None
    n = len(kinds)
    return zip(arrivals or itertools.repeat(NEG_INF, n), kinds, starts, ends, payloads, range(n), itertools.repeat(None))


def _checked_rows(table: Columns, node: SourceNode, needs_arrival: bool) -> Iterator[Prepared]:
    """The rows, each checked as it is given."""
    kinds, starts, ends, arrivals, payloads = table
    name, shape, allowed = node.name, node.shape, _allowed(node)
    last_arrival = NEG_INF
    open_edges: dict[int, list[Any]] = {}
    for position, (kind, payload) in enumerate(zip(kinds, payloads)):
        start, end = starts[position], ends[position]
        if arrivals is None or arrivals[position] is None:
            if needs_arrival:
                raise ImportOrderError(name, position, payload, "this input takes part in a CTI import, so every row needs an arrival time")
            arrival = last_arrival
        else:
            arrival = arrivals[position]
            if arrival < last_arrival:
                raise InputError(name, position, payload, "arrival times must not decrease within an input")
            last_arrival = arrival
        if kind not in allowed:
            raise InputError(name, position, payload, f"a {shape.name} input cannot take a row of kind {kind}")
        if kind != CTI and start >= INF:
            raise InputError(name, position, payload, "an event cannot start at infinity")
        if kind in (INTERVAL, END) and end <= start:
            raise InputError(name, position, payload, "end must be after start (lifetimes are [start, end))")
        if kind == START:
            open_edges.setdefault(start, []).append(payload)
        elif kind == END:
            waiting = open_edges.get(start)
            if not waiting or payload not in waiting:
                raise InputError(name, position, payload, "end edge without its start: no open start edge has this start and payload")
            waiting.remove(payload)
        yield (arrival, kind, start, end, None if kind == CTI else payload, position, None)


def _prepare_items(node: SourceNode, mode: TimestampMode, needs_arrival: bool) -> Iterator[Prepared]:
    name, shape, payload_type = node.name, node.shape, node.payload_type
    allowed = SHAPE_ITEMS[shape] + (Cti,)
    last_arrival = NEG_INF
    open_edges: dict[int, list[Any]] = {}
    for position, item in enumerate(node.source.items()):
        if not isinstance(item, allowed):
            kinds = ", ".join(k.__name__ for k in allowed)
            raise InputError(name, position, item, f"a {shape.name} input takes {kinds}, got {type(item).__name__}")
        kind = _KIND[type(item)]
        arrival_dt = item.arrival
        if arrival_dt is None:
            if needs_arrival:
                raise ImportOrderError(
                    name, position, item,
                    "this input takes part in a CTI import, so every item needs an arrival time "
                    "(without one the import cannot be ordered against the other input)",
                )
            arrival = last_arrival
        else:
            arrival = mode.check(arrival_dt, name, position, item, "arrival")
            if arrival < last_arrival:
                raise InputError(name, position, item, "arrival times must not decrease within an input")
            last_arrival = arrival
        if kind == CTI:
            assert isinstance(item, Cti)
            t = mode.check(item.timestamp, name, position, item, "Cti timestamp")
            yield (arrival, CTI, t, t, None, position, item)
            continue
        assert not isinstance(item, Cti)
        payload = item.payload
        if not isinstance(payload, payload_type):
            raise InputError(
                name, position, item,
                f"payload must be a {payload_type.__qualname__}, got {type(payload).__qualname__}",
            )
        start = mode.check(item.start, name, position, item, "start")
        if start >= INF:
            raise InputError(name, position, item, "an event cannot start at infinity")
        if kind == POINT:
            end = start + 1
        elif kind == START:
            end = INF
            open_edges.setdefault(start, []).append(payload)
        else:
            assert isinstance(item, (Interval, EdgeEnd))
            end = mode.check(item.end, name, position, item, "end")
            if end <= start:
                raise InputError(name, position, item, "end must be after start (lifetimes are [start, end))")
            if kind == END:
                waiting = open_edges.get(start)
                if not waiting or payload not in waiting:
                    raise InputError(
                        name, position, item,
                        "end edge without its start: no open start edge has this start and payload",
                    )
                waiting.remove(payload)
        yield (arrival, kind, start, end, payload, position, item)


class Ingress:
    """One input's time keeping: CTIs, policy, edge pairing and metrics.

    ``emit_insert(eid, start, end, payload)`` (``end`` None for an open edge),
    ``emit_end(eid, end)`` and ``emit_cti(t)`` deliver admitted events to the query.
    """

    def __init__(
        self,
        node: SourceNode,
        new_id: Callable[[], int],
        rejected: list[tuple[str, int, Any, Rule, Action, int, Any]],
    ) -> None:
        self.name = node.name
        self.node = node
        settings = node.settings
        self.has_policy = settings is not None
        self.adjust = settings is not None and settings.policy is AdvanceTimePolicy.ADJUST
        gen = settings.generation if settings else None
        self.every_n = gen.frequency if gen and isinstance(gen.frequency, int) else 0
        self.period = duration_ticks(gen.frequency) if gen and isinstance(gen.frequency, timedelta) else 0
        self.delay = duration_ticks(gen.delay) if gen else 0
        self.flush = bool(gen and gen.advance_to_infinity_on_shutdown)
        ordering = settings.ordering if settings else None
        self.ordered = ordering is not None
        self.out_of_order = duration_ticks(ordering.out_of_order_tolerance) if ordering else 0
        self.late = duration_ticks(ordering.late_arrival_tolerance) if ordering and ordering.late_arrival_tolerance is not None else None
        self.early = duration_ticks(ordering.early_arrival_window) if ordering and ordering.early_arrival_window is not None else None
        self.latest_admitted = NEG_INF  # largest admitted start (ordering settings)
        self.cti = NEG_INF
        self.count = 0
        self.last_period: int | None = None
        self.metrics = InputMetrics()
        self.importers: list[Ingress] = []
        self.new_id = new_id
        self.rejected = rejected
        # Open start edges by their received start, in arrival order: [payload, event id
        # (None if the policy dropped the edge), admitted start]. The k-th end edge with a
        # given start and payload closes the k-th start edge with them.
        self.open_edges: dict[int, list[list[Any]]] = {}
        self.emit_insert: Callable[[int, int, int | None, Any], None] = _nowhere
        self.emit_end: Callable[[int, int], None] = _nowhere
        self.emit_cti: Callable[[int], None] = _nowhere

    # ---- CTIs ---------------------------------------------------------------------------
    def advance(self, t: int, origin: str) -> None:
        """Move this input's CTI to ``t`` (if later) and pass it on to importers."""
        if t <= self.cti:
            self.metrics.ctis_ignored += 1
            return
        self.cti = t
        if origin == "generated":
            self.metrics.ctis_generated += 1
        elif origin == "imported":
            self.metrics.ctis_imported += 1
        else:
            self.metrics.ctis_explicit += 1
        self.emit_cti(t)
        for importer in self.importers:
            importer.advance(t, "imported")

    def shutdown(self) -> None:
        if self.flush:
            self.advance(INF, "generated")

    # ---- events -------------------------------------------------------------------------
    def _reject(self, rec: Prepared, rule: Rule, action: Action, admitted_as: Any = None, bound: int | None = None) -> None:
        """On record: ``bound`` is the time the event was held against (the CTI by default)."""
        self.rejected.append((self.name, rec[5], rec[6] or item_of(rec), rule, action, self.cti if bound is None else bound, admitted_as))
        if action is Action.DROPPED:
            self.metrics.dropped += 1
        else:
            self.metrics.adjusted += 1
            self.metrics.admitted += 1
        if rule is Rule.EARLY_ARRIVAL:
            self.metrics.early_dropped += 1
        elif rule is Rule.LATE_ARRIVAL:
            if action is Action.DROPPED:
                self.metrics.late_dropped += 1
            else:
                self.metrics.late_adjusted += 1

    def _violation(self, rec: Prepared, what: str) -> None:
        raise CtiViolationError(
            self.name, rec[5], rec[6] or item_of(rec),
            f"{what} before the current CTI ({self.cti} us); this input has no AdvanceTimeSettings, "
            "so a CTI violation is an error (give it settings with policy DROP or ADJUST)",
        )

    def process(self, rec: Prepared) -> None:
        kind = rec[1]
        if kind == CTI:
            self.advance(rec[2], "explicit")
            return
        self.metrics.received += 1
        if self.ordered and rec[0] <= NEG_INF:
            raise InputError(self.name, rec[5], rec[6] or item_of(rec), "an input with ordering settings needs an arrival time on every item")
        if kind == END:
            self._end_edge(rec)
            self._order_cti(rec[0], None)
            return
        start, end, payload = rec[2], rec[3], rec[4]
        lifetime: tuple[int, int] | None = (start, end)
        rule: Rule | None = None  # the last check that moved or dropped the event
        bound = NEG_INF  # the time that check held it against
        if self.ordered:
            lifetime, rule, bound = self._arrival_checks(rec)
        if lifetime is not None and lifetime[0] < self.cti:
            if not self.has_policy:
                self._violation(rec, "the event starts")
            rule, bound = Rule.START_BEFORE_CTI, self.cti
            lifetime = self._policy(kind, lifetime[1], bound)
        if rule is None:
            self.metrics.admitted += 1
        elif lifetime is None:
            self._reject(rec, rule, Action.DROPPED, bound=bound)
            if kind == START:
                self.open_edges.setdefault(start, []).append([payload, None, start])
        else:
            self._reject(rec, rule, Action.ADJUSTED, ("lifetime", *lifetime), bound=bound)
        admitted_start: int | None = None
        if lifetime is not None:
            admitted_start, end = lifetime
        if admitted_start is not None:
            eid = self.new_id()
            if kind == START:
                self.open_edges.setdefault(start, []).append([payload, eid, admitted_start])
                self.emit_insert(eid, admitted_start, None, payload)
            else:
                # A lifetime ending at infinity is open: every operator treats the two alike.
                self.emit_insert(eid, admitted_start, end if end < INF else None, payload)
        if self.ordered:
            self._order_cti(rec[0], admitted_start)
            return
        # Generation counts every received event, admitted or not, at its received start.
        if self.every_n:
            self.count += 1
            if self.count % self.every_n == 0:
                self.advance(start - self.delay, "generated")
        elif self.period:
            period = start // self.period
            if self.last_period is None:
                self.last_period = period
            elif period > self.last_period:
                self.last_period = period
                self.advance(start - self.delay, "generated")

    def _arrival_checks(self, rec: Prepared) -> tuple[tuple[int, int] | None, Rule | None, int]:
        """The early and late checks of ordering settings, before the CTI check: the lifetime
        the event goes on with (None: dropped), the rule that changed it, and its bound."""
        kind, arrival, start, end = rec[1], rec[0], rec[2], rec[3]
        if self.early is not None and start > arrival + self.early:
            return None, Rule.EARLY_ARRIVAL, arrival + self.early  # dropped under either policy
        if self.late is not None and start < arrival - self.late:
            bound = arrival - self.late
            return self._policy(kind, end, bound), Rule.LATE_ARRIVAL, bound
        return (start, end), None, NEG_INF

    def _policy(self, kind: int, end: int, bound: int) -> tuple[int, int] | None:
        """The lifetime an event starting before ``bound`` is admitted with (ADJUST), or None."""
        return adjusted_lifetime(kind, end, bound) if self.adjust else None

    def _order_cti(self, arrival: int, admitted_start: int | None) -> None:
        """After each item of an input with ordering settings: the CTI trails the largest
        admitted start by the out-of-order tolerance, and the arrival by the late-arrival
        tolerance."""
        if admitted_start is not None and admitted_start > self.latest_admitted:
            self.latest_admitted = admitted_start
        candidate = self.latest_admitted - self.out_of_order if self.latest_admitted > NEG_INF else NEG_INF
        if self.late is not None:
            candidate = max(candidate, arrival - self.late)
        if candidate > NEG_INF:
            self.advance(candidate, "generated")

    def _end_edge(self, rec: Prepared) -> None:
        start, end, payload = rec[2], rec[3], rec[4]
        entry = _take(self.open_edges.get(start), payload)
        if entry is None:  # prepare() has checked the pairing already
            raise InputError(self.name, rec[5], rec[6], "end edge without its start edge")
        _, eid, admitted_start = entry
        if eid is None:
            self._reject(rec, Rule.START_EDGE_DROPPED, Action.DROPPED)
            return
        if end < self.cti:
            if not self.has_policy:
                self._violation(rec, "the end edge ends")
            if not self.adjust:
                # Dropped: the event stays open, as the rule says; it is on record here.
                self._reject(rec, Rule.END_BEFORE_CTI, Action.DROPPED)
                return
            end = max(self.cti, admitted_start + 1)
            self._reject(rec, Rule.END_BEFORE_CTI, Action.ADJUSTED, ("end", end))
        else:
            self.metrics.admitted += 1
            # A start edge moved up to the CTI may now start where this edge ends; the
            # lifetime keeps one tick rather than becoming empty (the move is on record).
            end = max(end, admitted_start + 1)
        if end < INF:  # ending at infinity leaves the event open
            self.emit_end(eid, end)


def adjusted_lifetime(kind: int, end: int, cti: int) -> tuple[int, int] | None:
    """The lifetime ADJUST gives an event (point, interval or start edge) starting before
    ``cti``, or None when it must be dropped: a point always moves to the CTI, a longer
    lifetime starts there if it still reaches past it; nothing moves to infinity."""
    if cti < INF and (kind == POINT or end > cti):
        return cti, cti + 1 if kind == POINT else end
    return None


def item_of(rec: Prepared) -> Any:
    """The input item a table row stands for (table sources are UTC, so aware datetimes)."""
    from tempo.ticks import from_ticks

    arrival = None if rec[0] <= NEG_INF else from_ticks(rec[0])
    kind, start, end, payload = rec[1], from_ticks(rec[2]), rec[3], rec[4]
    if kind == POINT:
        return Point(start, payload, arrival)
    if kind == INTERVAL:
        return Interval(start, from_ticks(end), payload, arrival)
    if kind == START:
        return EdgeStart(start, payload, arrival)
    if kind == END:
        return EdgeEnd(start, from_ticks(end), payload, arrival)
    return Cti(start, arrival)


def _take(entries: list[list[Any]] | None, payload: Any) -> list[Any] | None:
    if not entries:
        return None
    for i, entry in enumerate(entries):
        if entry[0] == payload:
            return entries.pop(i)
    return None


def _nowhere(*_: Any) -> None:
    return None

