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
* Ordering settings (Azure Stream Analytics' policies, docs/semantics.md 3.10): every item
  has an arrival. An event more than the early window after its arrival is dropped; one
  more than the late tolerance L before it is late (ADJUST: to arrival − L); then the CTI
  rule against its substream's CTI. The CTI is the largest start that passed both arrival
  checks less the out-of-order tolerance (per substream key with ``over``), and never
  before the query's arrival clock less L: every such input follows the clock, so a quiet
  one keeps moving. With substreams the input's own CTI is the clock less L, and each key's
  CTI, when its own events move it ahead of that, goes downstream as a per-key CTI
  (``emit_key_cti``).
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import attrs

from tempo.clocks import TimeDomain
from tempo.errors import CtiViolationError, InputError, InputSchemaError, RuleText
from tempo.events import SHAPE_ITEMS, Cti, EdgeEnd, EdgeStart, EventShape, Heartbeat, Interval, Point
from tempo.expr.schema import FieldInfo, is_record_type, record_fields
from tempo.plan.nodes import SourceNode
from tempo.result import Action, EventCounts, InputMetrics, Rule, SubstreamMetrics
from tempo.runtime.policy import TimePolicy
from tempo.rules import InputRule, error_class, message
from tempo.sources import TableSource
from tempo.ticks import INF, NEG_INF, format_time, to_ticks

if TYPE_CHECKING:
    from tempo.tables import Columns

# Kinds of prepared items.
POINT, INTERVAL, START, END, CTI, HEARTBEAT = range(6)

_KIND = {Point: POINT, Interval: INTERVAL, EdgeStart: START, EdgeEnd: END, Cti: CTI, Heartbeat: HEARTBEAT}

Prepared = tuple[int, int, int, int, Any, int, Any]
"""(arrival, kind, start, end, payload, position, item); arrival is inherited when absent."""


class Rejected(NamedTuple):
    """One event a policy dropped or adjusted, as an ingress records it (ticks): every
    executor's ingress makes these, and ``tempo.runtime.engine.rejection`` makes the public
    ``Rejection`` of each."""

    input: str
    position: int
    item: Any
    """The item as received."""
    rule: Rule
    action: Action
    bound: int
    """The time it was held against (the CTI in force, by default)."""
    admitted_as: tuple[str, int] | tuple[str, int, int] | None
    """``("lifetime", start, end)`` or ``("end", end)`` when adjusted, else None."""


class TimestampMode:
    """How the query gives times back: naive UTC when every time its inputs gave was naive,
    else aware UTC. Every time is an instant (a naive one is UTC), so naive and aware times
    mix freely within and across inputs; tables count as aware (docs/semantics.md 8)."""

    def __init__(self) -> None:
        self.naive: bool | None = None

    def saw(self, aware: bool) -> None:
        """Note a time of an input (its convention, not its value)."""
        if aware:
            self.naive = False
        elif self.naive is None:
            self.naive = True

    def check(self, t: object, name: str, position: int, item: object, what: str) -> int:
        """``t`` in ticks, or an ``InputError`` when it is not a datetime."""
        if not isinstance(t, datetime):
            hint = " (a date has no time of day: use datetime(y, m, d))" if isinstance(t, date) else ""
            raise InputError(name, position, item, f"{what} must be a datetime, got {type(t).__name__} {t!r}{hint}", InputRule.TIME_TYPE)
        if t.replace(tzinfo=None) == datetime.max:
            return INF  # infinity is the same instant either way: tempo.INFINITY suits naive inputs too
        self.saw(t.tzinfo is not None)
        return to_ticks(t)


def prepare(node: SourceNode, mode: TimestampMode, needs_arrival: bool) -> Iterator[Prepared]:
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
        plain = plain_rows(table, node, needs_arrival)
        return plain if plain is not None else iter(list(checked_rows(table, node, needs_arrival)))
    return iter(list(_prepare_items(node, mode, needs_arrival)))


def _prepare_table(node: SourceNode, mode: TimestampMode, needs_arrival: bool) -> Iterator[Prepared]:
    """The fast path for table sources: columns straight to ticks, the same checks as for
    items (a column at a time when every row passes them)."""
    table = _read_table(node, mode)
    plain = plain_rows(table, node, needs_arrival)
    yield from plain if plain is not None else checked_rows(table, node, needs_arrival)


def _read_table(node: SourceNode, mode: TimestampMode) -> Columns:
    from tempo.tables import read_columns

    source = node.source
    assert isinstance(source, TableSource)
    if TimePolicy.of_input(node).ordered and not source.arrival:
        raise InputSchemaError(node.name, ordering_needs_arrival_column(source))
    source.check_readable(node.name)
    table = read_columns(source, source.arrow_table(), node.shape, node.name)
    if table[0]:
        mode.saw(aware=True)  # a table's times are instants, given as aware UTC datetimes
    return table


def ordering_needs_arrival_column(source: TableSource[Any]) -> RuleText:
    """The rule a table source without an arrival column breaks on an input with ordering settings."""
    return message(InputRule.ORDERING_ARRIVAL_COLUMN, source=repr(source))


def _allowed(node: SourceNode) -> set[int]:
    return {_KIND[k] for k in SHAPE_ITEMS[node.shape]} | {CTI, HEARTBEAT}


def plain_rows(
    table: Columns, node: SourceNode, needs_arrival: bool, last_arrival: int = NEG_INF, first_position: int = 0
) -> Iterator[Prepared] | None:
    """The rows as ``checked_rows`` gives them when they are all points and intervals that
    pass its checks (the usual table, checked a column at a time), else None. A live query
    gives each micro-batch's rows with the input's last arrival so far and the position of
    its first row."""
    kinds, starts, ends, arrivals, payloads, bad = table
    if bad is not None:
        return None
    if arrivals is None:
        arrivals_pass = not needs_arrival and not TimePolicy.of_input(node).ordered
    else:
        arrivals_pass = None not in arrivals and all(map(operator.le, itertools.chain((last_arrival,), arrivals), arrivals))
    if not (
        arrivals_pass
        and set(kinds) <= _allowed(node) & {POINT, INTERVAL}
        and all(map(operator.gt, ends, starts))
        and max(starts, default=NEG_INF) < INF
    ):
        return None
    n = len(kinds)
    positions = range(first_position, first_position + n)
    return zip(arrivals or itertools.repeat(last_arrival, n), kinds, starts, ends, payloads, positions, itertools.repeat(None))


def checked_rows(
    table: Columns, node: SourceNode, needs_arrival: bool, sequence: SequenceChecks | None = None, first_position: int = 0
) -> Iterator[Prepared]:
    """The rows, each checked as it is given, by the rules in ``tempo.rules.CHECK_ORDER``
    (as items are, and as the Spark ingress checks rows: ``tempo.spark.ingress.scan._bad_row``).
    A live query gives each micro-batch's rows with the input's ``sequence`` checks so far and
    the position of its first row."""
    from tempo.tables import kind_rule

    kinds, starts, ends, arrivals, payloads, bad = table
    name, shape, allowed = node.name, node.shape, _allowed(node)
    if sequence is None:
        sequence = SequenceChecks(node, needs_arrival, InputRule.IMPORT_ARRIVAL)
    for row, (kind, payload) in enumerate(zip(kinds, payloads)):
        start, end, position = starts[row], ends[row], first_position + row
        at_bad = bad if bad is not None and bad.position == row else None

        def item() -> Any:
            at = arrivals[row] if arrivals is not None and arrivals[row] is not None else NEG_INF
            return item_of((at, kind, start, end, None if kind >= CTI else payload, position, None))

        if at_bad is not None and at_bad.before_rules:
            raise InputError(name, position, at_bad.item, at_bad.message, at_bad.rule)
        if kind not in allowed:
            raise InputError(name, position, item(), kind_rule(shape, kind))
        if kind in (INTERVAL, END) and end <= start:
            raise InputError(name, position, item(), message(InputRule.LIFETIME))
        if kind < CTI and start >= INF:
            raise InputError(name, position, item(), message(InputRule.START_AT_INFINITY))
        if at_bad is not None:
            raise InputError(name, position, item(), at_bad.message, at_bad.rule)
        arrival = None if arrivals is None else arrivals[row]
        if kind == HEARTBEAT:
            if arrival is None and not sequence.ordered:  # with ordering settings: ORDERING_ARRIVAL
                raise InputError(name, position, item(), message(InputRule.HEARTBEAT_ARRIVAL))
            broken = sequence.take_arrival(arrival)
            if broken is not None:
                raise error_class(broken)(name, position, item(), message(broken))
            at = sequence.last_arrival  # a heartbeat's time is its arrival, whatever its start column holds
            yield (at, HEARTBEAT, at, at, None, position, None)
            continue
        broken = sequence.take_arrival(arrival) or sequence.pair(kind, start, payload)
        if broken is not None:
            raise error_class(broken)(name, position, item(), message(broken))
        yield (sequence.last_arrival, kind, start, end, None if kind == CTI else payload, position, None)


_SCALAR_CHECKS: dict[type, tuple[type, ...]] = {
    float: (float, int),
    int: (int,),
    bool: (bool,),
    str: (str,),
    datetime: (datetime,),
    timedelta: (timedelta,),
}
"""The values each scalar field type takes from an item (an int in a float field is widened)."""


def _typed_payload(payload: Any, fields: list[FieldInfo], name: str, position: int, item: Any) -> Any:
    """``payload`` when each of ``fields`` holds a value of its type (or None: the null rule is
    another's), with ints in float fields made floats, as a float column of a table would
    give them and Spark's schema takes them; else an ``InputError`` naming the field."""
    widened: dict[str, float] | None = None
    for f in fields:
        v = getattr(payload, f.name)
        if v is None:
            continue
        if f.element is not None:
            if isinstance(v, (list, tuple)):
                continue
            declared = f"{f.dtype.__name__}[{f.element.__name__}]"
            rule = message(InputRule.LIST_FIELD, field=f"{type(payload).__qualname__}.{f.name}", declared=declared, got=v)
            raise InputError(name, position, item, rule)
        takes = _SCALAR_CHECKS.get(f.dtype, (f.dtype,))
        if isinstance(v, takes) and (f.dtype is bool or not isinstance(v, bool)):
            if f.dtype is float and not isinstance(v, float):
                widened = {} if widened is None else widened
                widened[f.name] = float(v)  # type: ignore[arg-type]  # an int here
            continue
        rule = message(
            InputRule.FIELD_TYPE,
            field=f"{type(payload).__qualname__}.{f.name}",
            declared=f.dtype.__name__,
            got=v,
            kind=type(v).__name__,
        )
        raise InputError(name, position, item, rule)
    if widened is None:
        return payload
    return (attrs.evolve if attrs.has(type(payload)) else dataclasses.replace)(payload, **widened)


def _prepare_items(node: SourceNode, mode: TimestampMode, needs_arrival: bool) -> Iterator[Prepared]:
    """The items, each checked as it is given, by the rules in ``tempo.rules.CHECK_ORDER``
    (as table rows are: ``checked_rows``)."""
    name, shape, payload_type = node.name, node.shape, node.payload_type
    allowed = SHAPE_ITEMS[shape] + (Cti, Heartbeat)
    sequence = SequenceChecks(node, needs_arrival, InputRule.IMPORT_ITEM_ARRIVAL)
    typed_fields = [f for f in record_fields(payload_type) if f.element is not None or f.dtype in _SCALAR_CHECKS or is_record_type(f.dtype)]
    for position, item in enumerate(node.source.items()):
        if not isinstance(item, allowed):
            raise InputError(name, position, item, item_kind_rule(shape, item))
        kind = _KIND[type(item)]
        payload: Any = None
        if kind == CTI:
            assert isinstance(item, Cti)
            start = end = mode.check(item.timestamp, name, position, item, "Cti timestamp")
        elif kind != HEARTBEAT:
            assert not isinstance(item, (Cti, Heartbeat))
            start = mode.check(item.start, name, position, item, "start")
            if kind == POINT:
                end = start + 1
            elif kind == START:
                end = INF
            else:
                assert isinstance(item, (Interval, EdgeEnd))
                end = mode.check(item.end, name, position, item, "end")
                if end <= start:
                    raise InputError(name, position, item, message(InputRule.LIFETIME))
            if start >= INF:
                raise InputError(name, position, item, message(InputRule.START_AT_INFINITY))
            payload = item.payload
            if not isinstance(payload, payload_type):
                raise InputError(
                    name,
                    position,
                    item,
                    message(InputRule.PAYLOAD_TYPE, expected=payload_type.__qualname__, got=type(payload).__qualname__),
                )
            if typed_fields:
                payload = _typed_payload(payload, typed_fields, name, position, item)
        arrival_dt = item.arrival
        broken = sequence.take_arrival(None if arrival_dt is None else mode.check(arrival_dt, name, position, item, "arrival"))
        if broken is not None:
            raise error_class(broken)(name, position, item, message(broken))
        arrival = sequence.last_arrival
        if kind == HEARTBEAT:
            start = end = arrival
        broken = sequence.pair(kind, start, payload)
        if broken is not None:
            raise InputError(name, position, item, message(broken))
        yield (arrival, kind, start, end, payload, position, item)


class SequenceChecks:
    """The rules that hold across an input's items, for items and table rows alike: an
    arrival time where the settings need one, arrivals that never decrease, and each end
    edge closing an open start edge with its start and payload."""

    def __init__(self, node: SourceNode, needs_arrival: bool, import_rule: InputRule) -> None:
        self.ordered = TimePolicy.of_input(node).ordered
        self.needs_arrival = needs_arrival
        # The words differ for items and rows; an input stamped with its arrivals takes part
        # in no import (docs/semantics.md 3.11), so it needs them for that reason alone.
        self.import_rule = InputRule.STAMP_ARRIVAL if node.time is not TimeDomain.EVENT else import_rule
        self.last_arrival = NEG_INF
        """The arrival of the latest item; an item without one inherits it."""
        self.open_edges: dict[int, list[Any]] = {}  # payloads of open start edges, by start

    def take_arrival(self, arrival: int | None) -> InputRule | None:
        """Note the next item's arrival (None: not given); the rule it breaks, if any."""
        if arrival is None:
            if self.ordered:
                return InputRule.ORDERING_ARRIVAL
            return self.import_rule if self.needs_arrival else None
        if arrival < self.last_arrival:
            return InputRule.ARRIVAL_ORDER
        self.last_arrival = arrival
        return None

    def pair(self, kind: int, start: int, payload: Any) -> InputRule | None:
        """Open a start edge, or close one with an end edge; the rule broken, if any."""
        if kind == START:
            self.open_edges.setdefault(start, []).append(payload)
        elif kind == END:
            waiting = self.open_edges.get(start)
            if not waiting or payload not in waiting:
                return InputRule.END_WITHOUT_START
            waiting.remove(payload)
            if not waiting:
                del self.open_edges[start]
        return None


class ArrivalClock:
    """The query's arrival clock: the latest arrival of any item of its inputs with ordering
    settings, heartbeats included. In a replay elapsed time is arrival time, so this is
    what ASA estimates as every input's arrival time at that point of the merged arrival
    sequence; each such input follows it (``Ingress.follow``), so a quiet one keeps moving."""

    def __init__(self) -> None:
        self.now = NEG_INF
        self.followers: list[Ingress] = []

    def tick(self, arrival: int) -> None:
        if arrival > self.now:
            self.now = arrival
            for ingress in self.followers:
                ingress.follow(arrival)


class Ingress:
    """One input's time keeping: CTIs, policy, edge pairing and metrics.

    ``emit_insert(eid, start, end, payload)`` (``end`` None for an open edge),
    ``emit_end(eid, end)`` and ``emit_cti(t)`` deliver admitted events to the query.

    ``WIRING``: the attributes set from the plan when it is built (as ``Operator.WIRING``);
    the rest is the input's state, which a live query saves between micro-batches. The
    shared arrival clock and the list of rejections are saved once for the whole query.
    """

    WIRING: ClassVar[frozenset[str]] = frozenset(
        {
            "name",
            "node",
            "has_policy",
            "adjust",
            "every_n",
            "period",
            "delay",
            "flush",
            "ordered",
            "out_of_order",
            "late",
            "early",
            "key_of",
            "clock",
            "importers",
            "new_id",
            "rejected",
            "emit_insert",
            "emit_end",
            "emit_cti",
            "emit_key_cti",
        }
    )

    def __init__(
        self,
        node: SourceNode,
        new_id: Callable[[], int],
        rejected: list[Rejected],
    ) -> None:
        self.name = node.name
        self.node = node
        policy = TimePolicy.of_input(node)
        # Copied onto the ingress: ``process`` reads them for every event.
        self.has_policy = policy.has_settings
        self.adjust = policy.adjust
        self.every_n, self.period, self.delay, self.flush = policy.every_n, policy.period, policy.delay, policy.flush
        self.ordered = policy.ordered
        self.out_of_order, self.late, self.early = policy.out_of_order, policy.late, policy.early
        # Largest start admitted by the event-time rule, per substream key (one key, None,
        # without substreams).
        self.latest: dict[Any, int] = {}
        self.key_of: Callable[[Any], Any] | None = None
        if policy.over is not None:
            from tempo.runtime.codegen import compile_expression

            self.key_of = compile_expression(policy.over, 1)
        self.clock = ArrivalClock()  # replaced by the query's shared clock (see ``ArrivalClock``)
        self.delays: list[tuple[int, int]] = []  # (clock, CTI) samples, ticks
        # Per substream key, (clock, CTI) at each move of its own CTI; the last is in force.
        self.key_delays: dict[Any, list[tuple[int, int]]] = {}
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
        self.emit_key_cti: Callable[[Any, int], None] = _nowhere

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

    # ---- ordering settings: the arrival clock ---------------------------------------------
    def order_step(self, arrival: int, candidate: int, key: Any = None, key_candidate: int = NEG_INF) -> None:
        """After an item of an input with ordering settings: the CTI moves up to
        ``candidate`` (the event-time rule), then the query's arrival clock to ``arrival``;
        with substreams, then substream ``key``'s CTI up to ``key_candidate`` (its largest
        start less the tolerance), which goes downstream when ahead of the input's CTI."""
        if candidate > self.cti:
            self.advance(candidate, "generated")
        self.clock.tick(arrival)
        self._sample()
        if key_candidate > self.cti:
            moves = self.key_delays.setdefault(key, [])
            if not moves or key_candidate > moves[-1][1]:
                moves.append((self.clock.now, key_candidate))
                self._substream(key).ctis_generated += 1
                self.emit_key_cti(key, key_candidate)

    def follow(self, clock: int) -> None:
        """The query's arrival clock moved to ``clock``: the CTI trails it by the late-arrival
        tolerance (ASA's progress without events). Never counted as an ignored CTI."""
        if self.late is not None and clock - self.late > self.cti:
            self.advance(clock - self.late, "generated")
        self._sample()

    def _sample(self) -> None:
        clock, cti = self.clock.now, self.cti
        if NEG_INF < cti < INF and clock > NEG_INF and (not self.delays or self.delays[-1] != (clock, cti)):
            self.delays.append((clock, cti))

    def public_metrics(self, dt: Callable[[int], Any]) -> InputMetrics:
        """The metrics with the watermark delays as datetimes and timedeltas."""

        def delays(samples: list[tuple[int, int]]) -> list[tuple[Any, timedelta]]:
            return [(dt(c), timedelta(microseconds=c - w)) for c, w in samples]

        self.metrics.watermark_delays = delays(self.delays)
        for key, samples in self.key_delays.items():
            self.metrics.substreams[key].watermark_delays = delays(samples)
        return self.metrics

    # ---- events -------------------------------------------------------------------------
    def _reject(
        self,
        rec: Prepared,
        rule: Rule,
        action: Action,
        admitted_as: Any = None,
        bound: int | None = None,
        key: Any = None,
        late: Action | None = None,
    ) -> None:
        """On record: ``bound`` is the time the event was held against (the CTI by default);
        ``late``, what the late-arrival rule did first, if it applied."""
        self.rejected.append(
            Rejected(self.name, rec[5], rec[6] or item_of(rec), rule, action, self.cti if bound is None else bound, admitted_as)
        )
        for counts in self._counts(key):
            count_rejection(counts, rule, action, self.ordered, late)
            if action is Action.ADJUSTED:
                counts.admitted += 1

    def _counts(self, key: Any) -> list[EventCounts]:
        if self.key_of is None:
            return [self.metrics]
        return [self.metrics, self._substream(key)]

    def _substream(self, key: Any) -> SubstreamMetrics:
        sub = self.metrics.substreams.get(key)
        if sub is None:
            sub = self.metrics.substreams[key] = SubstreamMetrics()
        return sub

    def _violation(self, rec: Prepared, rule: Rule) -> None:
        raise CtiViolationError(self.name, rec[5], rec[6] or item_of(rec), cti_violation_rule(rule, self.cti))

    def process(self, rec: Prepared) -> None:
        kind = rec[1]
        if self.ordered:  # prepare() has checked that every item has an arrival
            if kind == CTI:
                self.advance(rec[2], "explicit")
            if kind in (CTI, HEARTBEAT):
                self.order_step(rec[0], NEG_INF)
            else:
                self._process_ordered(rec)
            return
        if kind == CTI:
            self.advance(rec[2], "explicit")
            return
        if kind == HEARTBEAT:
            return  # only inputs with ordering settings follow the arrival clock
        self.metrics.received += 1
        if kind == END:
            self._end_edge(rec)
            return
        if rec[2] >= self.cti:  # the usual case, without a call
            self.metrics.admitted += 1
            admitted: tuple[int, int] | None = (rec[2], rec[3])
        else:
            admitted = self.verdict(rec)
        if admitted is not None:
            eid = self.new_id()
            if kind == START:
                self.open_edges.setdefault(rec[2], []).append([rec[4], eid, admitted[0]])
                self.emit_insert(eid, admitted[0], None, rec[4])
            else:
                # A lifetime ending at infinity is open: every operator treats the two alike.
                self.emit_insert(eid, admitted[0], admitted[1] if admitted[1] < INF else None, rec[4])
        self.generate(rec[2])

    def verdict(self, rec: Prepared) -> tuple[int, int] | None:
        """The CTI rule on a received point, interval or start edge of an input without
        ordering settings: its lifetime as admitted (moved by ADJUST), or None when the
        policy drops it; counted, and on record when rejected."""
        kind, start, end = rec[1], rec[2], rec[3]
        if start >= self.cti:
            self.metrics.admitted += 1
            return start, end
        if not self.has_policy:
            self._violation(rec, Rule.START_BEFORE_CTI)
        lifetime = adjusted_lifetime(kind, end, self.cti) if self.adjust else None
        if lifetime is None:
            self._reject(rec, Rule.START_BEFORE_CTI, Action.DROPPED)
            if kind == START:
                self.open_edges.setdefault(start, []).append([rec[4], None, start])
        else:
            self._reject(rec, Rule.START_BEFORE_CTI, Action.ADJUSTED, ("lifetime", *lifetime))
        return lifetime

    def generate(self, start: int) -> None:
        """CTI generation after a received event (admitted or not) at its received start."""
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

    def _process_ordered(self, rec: Prepared) -> None:
        """A point or interval of an input with ordering settings (ASA's rules, in their
        order): early arrival drops it; late arrival adjusts or drops it; then the CTI check
        of its substream. One rejection names the last rule that applied."""
        arrival, kind, start, end, payload = rec[0], rec[1], rec[2], rec[3], rec[4]
        key = self.key_of(payload) if self.key_of is not None else None
        counts = self._counts(key)
        for c in counts:
            c.received += 1
        latest = self.latest.get(key, NEG_INF)
        lifetime: tuple[int, int] | None = (start, end)
        rule: Rule | None = None
        bound = NEG_INF
        late: Action | None = None  # what the late-arrival rule did
        if self.early is not None and start > arrival + self.early:
            lifetime, rule, bound = None, Rule.EARLY_ARRIVAL, arrival + self.early  # under either policy
        elif self.late is not None and start < arrival - self.late:
            bound = arrival - self.late
            lifetime, rule = (adjusted_lifetime(kind, end, bound) if self.adjust else None), Rule.LATE_ARRIVAL
            late = Action.DROPPED if lifetime is None else Action.ADJUSTED
        else:
            # Only an event passing both arrival checks raises its substream's time: a late
            # one, adjusted, sits at arrival minus the tolerance, which the clock already gives.
            latest = max(latest, start)
        # The substream's CTI: its latest start less the tolerance, and never before the
        # input's own (the clock less the late tolerance, and explicit CTIs).
        cti = max(self.latest.get(key, NEG_INF) - self.out_of_order, self.cti)
        if lifetime is not None and lifetime[0] < cti:
            rule, bound = Rule.START_BEFORE_CTI, cti
            lifetime = adjusted_lifetime(kind, lifetime[1], cti) if self.adjust else None
        if rule is None:
            for c in counts:
                c.admitted += 1
        elif lifetime is None:
            self._reject(rec, rule, Action.DROPPED, bound=bound, key=key, late=late)
        else:
            self._reject(rec, rule, Action.ADJUSTED, ("lifetime", *lifetime), bound=bound, key=key, late=late)
        if lifetime is not None:
            self.emit_insert(self.new_id(), lifetime[0], lifetime[1] if lifetime[1] < INF else None, payload)
        if latest > NEG_INF:
            self.latest[key] = latest
        # Without substreams the input's CTI follows its events; with them, each key's does,
        # and the input's (the min over all keys, seen or not) is the clock's alone.
        moved = latest - self.out_of_order if latest > NEG_INF else NEG_INF
        if self.key_of is None:
            self.order_step(arrival, moved)
        else:
            self.order_step(arrival, NEG_INF, key, moved)

    def _end_edge(self, rec: Prepared) -> None:
        start, end, payload = rec[2], rec[3], rec[4]
        entry = _take(self.open_edges, start, payload)
        if entry is None:  # prepare() has checked the pairing already
            raise InputError(self.name, rec[5], rec[6], message(InputRule.END_WITHOUT_START))
        _, eid, admitted_start = entry
        if eid is None:
            self._reject(rec, Rule.START_EDGE_DROPPED, Action.DROPPED)
            return
        if end < self.cti:
            if not self.has_policy:
                self._violation(rec, Rule.END_BEFORE_CTI)
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


def count_rejection(counts: EventCounts, rule: Rule, action: Action, ordered: bool, late: Action | None) -> None:
    """Count one rejection (by ``rule``, the last rule that applied) in ``counts``, except
    ``admitted``. ``late`` is what the late-arrival rule did to it first, if it applied:
    an event late and then out of order counts under both rules."""
    if action is Action.DROPPED:
        counts.dropped += 1
    else:
        counts.adjusted += 1
    if rule is Rule.EARLY_ARRIVAL:
        counts.early_dropped += 1
    if late is Action.DROPPED:
        counts.late_dropped += 1
    elif late is Action.ADJUSTED:
        counts.late_adjusted += 1
    if ordered and rule is Rule.START_BEFORE_CTI:
        if action is Action.DROPPED:
            counts.out_of_order_dropped += 1
        else:
            counts.out_of_order_adjusted += 1


def item_kind_rule(shape: EventShape, item: object) -> RuleText:
    """The rule an item of a kind its input's shape does not take breaks, with what to
    write instead: the shape that takes an event item of another kind, or the item that
    gives a bare payload its lifetime."""
    from tempo.expr.schema import is_record

    takes = ", ".join(k.__name__ for k in SHAPE_ITEMS[shape] + (Cti, Heartbeat))
    rule = message(InputRule.ITEM_KIND, shape=shape.name, takes=takes, got=type(item).__name__)
    other = [s for s, kinds in SHAPE_ITEMS.items() if isinstance(item, kinds)]
    if other:
        rule += f": declare the input as EventShape.{other[0].name} for {type(item).__name__} items"
    elif is_record(item):
        wrap = {
            EventShape.POINT: "Point(start, payload)",
            EventShape.INTERVAL: "Interval(start, end, payload)",
            EventShape.EDGE: "EdgeStart(start, payload) and EdgeEnd(start, end, payload)",
        }[shape]
        rule += f": a payload needs a lifetime, wrap it as {wrap}"
    return rule


def cti_violation_rule(rule: Rule, cti: int) -> RuleText:
    """The words of an event breaking ``rule`` (``START_BEFORE_CTI`` or ``END_BEFORE_CTI``)
    against the CTI on an input without settings; the error's rule is ``rule``."""
    what = "the end edge ends" if rule is Rule.END_BEFORE_CTI else "the event starts"
    return RuleText(message(InputRule.CTI_VIOLATION, what=what, cti=format_time(cti)), rule)


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
    if rec[1] == HEARTBEAT:
        return None if arrival is None else Heartbeat(arrival)  # a row without an arrival is no item
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


def _take(open_edges: dict[int, list[list[Any]]], start: int, payload: Any) -> list[Any] | None:
    """The first open start edge with ``start`` and ``payload``, taken out (with its start's
    entry when it was the last: what stays open must not grow with the input's length)."""
    entries = open_edges.get(start)
    if not entries:
        return None
    for i, entry in enumerate(entries):
        if entry[0] == payload:
            if len(entries) == 1:
                del open_edges[start]
                return entry
            return entries.pop(i)
    return None


def _nowhere(*_: Any) -> None:
    return None
