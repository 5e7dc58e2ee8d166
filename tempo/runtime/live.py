"""The reference engine kept alive between the micro-batches of unbounded inputs.

A live query receives each input's items a batch at a time and must give, after every
batch, exactly what the in-memory executor releases for the items seen so far, whatever
the batch boundaries. Two things make that true:

* **The arrival frontier.** The in-memory executor processes the items of all inputs in
  one sequence ordered by (arrival, declaration order, position). A live engine may process
  an item only when no input can still deliver one that comes before it: every other input
  has reached a later arrival, or the same arrival and comes later in declaration order
  (arrivals never decrease within an input). Items past the frontier wait in the engine's
  buffers. With one input everything is processed at once; an input without arrival times
  (all items at the earliest arrival) holds back every later-declared input until it ends,
  exactly as in memory.
* **State saved explicitly.** ``snapshot()`` saves each operator's and ingress's state (all
  attributes but its ``WIRING``, the ones built from the plan) with the buffers, the arrival
  clock and the id counter; ``LiveEngine.restore`` builds the plan afresh and puts the
  state back. Compiled functions are never pickled, nor anything keyed by object identity.

``take()`` drains what was released since the last call (output items, rejections, the
inputs' watermark samples), so state stays bounded by what is still open, not by the run's
length.
"""

from __future__ import annotations

import io
import itertools
import pickle
from collections import deque
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

import attrs

from tempo.events import Cti, EdgeEnd, EdgeStart, Interval, Point, SubstreamCti
from tempo.expr.schema import datetime_conformer
from tempo.plan.query import Query
from tempo.result import InputMetrics, RawItem, Rejection
from tempo.runtime.egress import Egress
from tempo.runtime.operator import Operator
from tempo.runtime.release_queues import KeyedByStart
from tempo.runtime.build import Build
from tempo.runtime.engine import build_ingresses, build_operators, rejection
from tempo.runtime.engine import output_key
from tempo.errors import InputError, RuleText, TempoError
from tempo.clocks import TimeDomain
from tempo.runtime.stamping import Stamper
from tempo.plan.nodes import SourceNode
from tempo.rules import InputRule, message
from tempo.runtime.ingress import HEARTBEAT, Ingress, Prepared, SequenceChecks, TimestampMode, checked_rows, plain_rows
from tempo.sources import TableSource
from tempo.ticks import INF, NEG_INF, from_ticks, to_ticks

STATE_FORMAT = 1
"""Bumped when the saved state's layout changes: older state is then refused, not misread."""


@attrs.frozen
class Released:
    """What a live engine released since the previous ``take()``."""

    items: list[RawItem[Any]]
    """Output items in release order: points, intervals, start edges (an event released
    before its end was known), end edges of such events, CTIs and substream CTIs."""
    rejections: list[Rejection]
    """Input events dropped or adjusted by policy, in the order they were met."""
    watermark_delays: dict[str, list[tuple[datetime, timedelta]]]
    """Per input, its new (arrival clock, clock - CTI) samples (``InputMetrics.watermark_delays``)."""
    substream_delays: dict[str, dict[Any, list[tuple[datetime, timedelta]]]]
    """Per input and substream key, the new samples of that key's own CTI moves."""


class RowFeed:
    """An input read a micro-batch of table rows at a time: the rows of each batch are put
    in order (by the source's ``order`` column) and checked as the in-memory executor checks
    a table's rows, with positions and the checks across rows (arrivals not decreasing,
    end edges closing open start edges) carrying on from the batches before."""

    def __init__(self, node: SourceNode, needs_arrival: bool) -> None:
        self.sequence = SequenceChecks(node, needs_arrival, InputRule.IMPORT_ARRIVAL)
        self.source = node.source
        self.stamper = None if node.time is TimeDomain.EVENT else Stamper(node)
        """For an input in ingestion or processing time: its stamping, carried across batches."""
        self.next_position = 0
        self.last_order: int | None = None
        """The largest order value taken so far (``order_value``)."""
        source = node.source
        self.next_order: int | None = source.dense_order_from if isinstance(source, TableSource) else None
        """With a dense order column: the order value of the next row to take."""
        self.held: Any = None
        """With a dense order column: the rows after a gap (a pyarrow Table), taken once it fills."""

    def prepare(self, node: SourceNode, table: Any) -> list[Prepared]:
        """``table`` (a pyarrow Table of the source's columns) as prepared items; an
        ``InputError`` names the input and the row's position in the whole input."""
        from tempo.tables import read_columns

        source = node.source
        assert isinstance(source, TableSource)
        first = self.next_position
        if self.next_order is not None:
            table = self._gapless(node, table)
        try:
            columns = read_columns(source, table, node.shape, node.name)
        except InputError as exc:
            if type(exc) is not InputError or exc.position is None:
                raise  # about the columns, not a row
            raise InputError(exc.input_name, first + exc.position, exc.item, exc.message, exc.rule) from None
        if source.order is not None and table.num_rows:
            import pyarrow as pa
            import pyarrow.compute as pc

            values = table.column(source.order)
            lowest = pc.min(values).as_py()
            if self.last_order is not None and order_value(lowest) <= self.last_order:
                last = from_ticks(self.last_order, naive=values.type.tz is None) if pa.types.is_timestamp(values.type) else self.last_order
                rule = message(InputRule.ORDER_BACK, column=source.order, value=lowest, last=last)
                row = table.slice(pc.index(values, lowest).as_py(), 1).to_pylist()[0]
                raise InputError(node.name, first, row, rule)
            self.last_order = order_value(pc.max(values).as_py())
        needs_arrival = self.sequence.needs_arrival
        plain = plain_rows(columns, node, needs_arrival, self.sequence.last_arrival, first)
        if plain is None:
            prepared = list(checked_rows(columns, node, needs_arrival, self.sequence, first))
        else:  # points and intervals passing the checks a column at a time
            prepared = list(plain)
            arrivals = columns[3]
            if arrivals:
                self.sequence.last_arrival = arrivals[-1]
        self.next_position = first + (self.positioned(len(prepared), prepared[-1][1], self.last_order) if prepared else 0)
        return prepared if self.stamper is None else list(self.stamper.stamp(prepared))

    def positioned(self, rows: int, last_kind: int, last_order: int | None) -> int:
        """How many of a batch's ``rows`` take a position: all but a last row that is a
        heartbeat the source added rather than a row of the data it reads (the Redis source's
        heartbeat rows: a source with such rows tells them by their order value with
        ``added_heartbeat(order) -> bool``). Positions count the input's rows as written,
        whatever the batches and the heartbeats between them; an added heartbeat has the
        position of the row after it."""
        added = getattr(self.source, "added_heartbeat", None)
        if added is not None and last_kind == HEARTBEAT and last_order is not None and added(last_order):
            return rows - 1
        return rows

    def _gapless(self, node: SourceNode, table: Any) -> Any:
        """The rows that continue the dense order without a gap (with those held before);
        the rest is held. A value given to a row before is an ``InputError`` (ORDER_REPEAT)
        as soon as the repeat arrives, whether the first row was taken, waits behind a gap,
        or came in the same batch."""
        import pyarrow as pa
        import pyarrow.compute as pc

        source = node.source
        assert isinstance(source, TableSource) and source.order is not None and self.next_order is not None
        first, expected = source.dense_order_from, self.next_order
        assert first is not None
        waiting = set(self.held.column(source.order).to_pylist()) if self.held is not None else set()
        fresh: set[int] = set()
        for row, value in enumerate(table.column(source.order).to_pylist()):
            if value is None:
                continue  # nulls sort last; read_columns names them once they are reached
            if value < first:
                where = f"lower than {first!r}, where the column starts counting (dense_order_from)"
                words = RuleText(
                    f"its {source.order!r} value {value!r} is {where}: the column counts the input's rows from {first!r}, one number each",
                    InputRule.ORDER_BACK,
                )
                raise InputError(node.name, self.next_position, table.slice(row, 1).to_pylist()[0], words)
            if value < expected:
                where = f"item #{value - first}, taken in an earlier micro-batch"
            elif value in waiting:
                where = "a row of an earlier micro-batch, which waits for the rows before it"
            elif value in fresh:
                where = "another row of this micro-batch"
            else:
                fresh.add(value)
                continue
            words = message(InputRule.ORDER_REPEAT, column=source.order, value=value, where=where, first=first)
            raise InputError(node.name, value - first, table.slice(row, 1).to_pylist()[0], words)
        if self.held is not None and self.held.num_rows:
            table = pa.concat_tables([self.held, table.select(self.held.column_names)])
        table = table.take(pc.sort_indices(table, sort_keys=[(source.order, "ascending")]))
        taken = 0
        for value in table.column(source.order).to_pylist():
            if value is None or value > expected:
                break  # a gap
            taken += 1
            expected += 1
        self.next_order = expected
        self.held = table.slice(taken)
        return table.slice(0, taken)


def order_value(value: Any) -> int:
    """An order column's value as the live engine keeps it (``RowFeed.last_order``) and the
    bulk paths compare it: an integer as it is, an instant in ticks (naive means UTC)."""
    return to_ticks(value) if isinstance(value, datetime) else int(value)


class StateError(TempoError):
    """Saved live state that cannot be used: another query's, another format, or not
    picklable (a payload class that cannot be imported by name)."""


def check_importable(query: Query) -> None:
    """Every payload class of a live query is importable by name, as its saved state needs
    (``LiveEngine.snapshot``): refused when the query starts, naming the class, rather than at
    the first batch whose state holds one of its payloads."""
    for node in query.nodes:
        cls = node.payload_type
        if "<locals>" in getattr(cls, "__qualname__", ""):
            raise StateError(
                f"the payload class {cls.__qualname__} (of {node.describe().splitlines()[0]}) is defined inside a "
                "function: a live query saves its state after every batch and reads it back on a restart, "
                "which needs every payload class importable by name; define it at module level"
            )


class LiveEngine:
    """The query's operators and ingresses, fed a batch of items at a time.

    ``push(index, items)`` hands over input ``index``'s next items (prepared, in input
    order); ``run()`` processes everything up to the arrival frontier; ``finish()``
    processes the rest and ends the inputs (flushing those whose settings say so);
    ``take()`` drains the results.
    """

    def __init__(self, query: Query, mode: TimestampMode, first_id: int = 0) -> None:
        self.query = query
        self.mode = mode
        build = self.build = Build(mode, query, first_id)
        build_ingresses(build, query)
        self.ingresses: list[Ingress] = [build.ingresses[s.name] for s in query.sources]
        built = build_operators(build, query)
        self.egress = Egress(output_key(query))
        built[id(query.root)].connect(self.egress, 0)
        self.operators: list[Operator] = [built[id(node)] for node in query.nodes] + [self.egress]
        self.buffers: list[deque[Prepared]] = [deque() for _ in self.ingresses]
        self.reached: list[int] = [NEG_INF] * len(self.ingresses)
        """Per input, the latest arrival it has delivered (or announced by ``reach``)."""
        needs_arrival = query.ordered_by_arrival
        self.feeds = [RowFeed(s, s.name in needs_arrival) for s in query.sources]
        self.finished = False
        self.given_last: set[tuple[Any, ...]] = set()
        """The watermark sample lists whose one remaining sample ``take`` has given."""
        self.attached: dict[str, Any] = {}
        """State an executor keeps beside the operators, by name, saved and restored with
        them (the cluster engine's: where the ends of open events at its window go)."""
        self._conform = datetime_conformer(query.root.payload_type, mode.naive is True)

    # ---- feeding -----------------------------------------------------------------------
    def push(self, index: int, items: Iterable[Prepared]) -> None:
        """Input ``index``'s next items, in input order."""
        buffer, reached = self.buffers[index], self.reached[index]
        for rec in items:
            buffer.append(rec)
            if rec[0] > reached:
                reached = rec[0]
        self.reached[index] = reached

    def push_rows(self, index: int, table: Any) -> None:
        """Input ``index``'s rows of one micro-batch (a pyarrow Table, any row order)."""
        node = self.query.sources[index]
        self.push(index, self.feeds[index].prepare(node, table))

    def reach(self, index: int, arrival: int) -> None:
        """Input ``index`` will deliver nothing that arrived before ``arrival`` (a source's
        clock moved without items): lets the other inputs' items through the frontier."""
        if arrival > self.reached[index]:
            self.reached[index] = arrival

    def run(self) -> None:
        """Process the buffered items that no input can still precede, in arrival order."""
        self._process(frontier=True)

    def finish(self) -> None:
        """The inputs have ended: process every buffered item, then end each input in
        declaration order (a CTI at infinity where its settings flush)."""
        self._process(frontier=False)
        for ingress in self.ingresses:
            ingress.shutdown()
        self.finished = True

    def _process(self, frontier: bool) -> None:
        buffers, reached, ingresses = self.buffers, self.reached, self.ingresses
        count = len(buffers)
        while True:
            best = -1  # the input whose next item comes first, in (arrival, declaration) order
            for i in range(count):
                if buffers[i] and (best < 0 or buffers[i][0][0] < buffers[best][0][0]):
                    best = i
            if best < 0:
                return
            # Its items go while they come before every other input's next item: the one
            # buffered, or else (at the frontier) any it may still deliver.
            limit = INF + 1
            for j in range(count):
                if j == best or not (buffers[j] or frontier):
                    continue
                bound = (buffers[j][0][0] if buffers[j] else reached[j]) + (1 if j > best else 0)
                limit = min(limit, bound)
            buffer, process = buffers[best], ingresses[best].process
            if buffer[0][0] >= limit:
                return  # held at the frontier, and so is every later item
            while buffer and buffer[0][0] < limit:
                process(buffer.popleft())

    # ---- results -----------------------------------------------------------------------
    def to_datetime(self, t: int) -> datetime:
        return from_ticks(t, naive=self.mode.naive is True)

    def take(self) -> Released:
        """Everything released since the previous call, drained from the engine."""
        dt, conform = self.to_datetime, self._conform
        items: list[RawItem[Any]] = []
        for entry in self.egress.raw:
            kind = entry[0]
            if kind == "cti":
                items.append(Cti(dt(entry[1])))
            elif kind == "key_cti":
                items.append(SubstreamCti(entry[2], dt(entry[1])))
            elif kind == "end":
                s, e, pl = entry[1][1:4]
                items.append(EdgeEnd(dt(s), dt(e), pl if conform is None else conform(pl)))
            else:
                s, e, pl = entry[1], entry[2], entry[3]
                if conform is not None:
                    pl = conform(pl)
                start = dt(s)
                if kind == "start":
                    items.append(EdgeStart(start, pl))
                elif e == s + 1:
                    items.append(Point(start, pl))
                else:
                    items.append(Interval(start, dt(INF if e is None else e), pl))
        self.egress.raw.clear()
        self.egress.ctis.clear()
        rejections = [rejection(r, dt) for r in self.build.rejected]
        self.build.rejected.clear()
        delays: dict[str, list[tuple[datetime, timedelta]]] = {}
        key_delays: dict[str, dict[Any, list[tuple[datetime, timedelta]]]] = {}
        for ingress in self.ingresses:
            delays[ingress.name] = self._drain((ingress.name,), ingress.delays)
            drained = {k: self._drain((ingress.name, k), v) for k, v in ingress.key_delays.items()}
            key_delays[ingress.name] = {k: v for k, v in drained.items() if v}
        return Released(items, rejections, delays, key_delays)

    def _drain(self, where: tuple[Any, ...], samples: list[tuple[int, int]]) -> list[tuple[datetime, timedelta]]:
        """The watermark samples not given yet; the last one stays in the list (the ingress
        compares the next with it) and is marked as given."""
        first = 1 if where in self.given_last else 0
        out = [(self.to_datetime(c), timedelta(microseconds=c - w)) for c, w in samples[first:]]
        if samples:
            del samples[:-1]
            self.given_last.add(where)
        return out

    def metrics(self) -> dict[str, InputMetrics]:
        """Each input's counts so far (watermark samples come through ``take``)."""
        out: dict[str, InputMetrics] = {}
        for ingress in self.ingresses:
            metrics = attrs.evolve(
                ingress.metrics,
                watermark_delays=[],
                substreams={k: attrs.evolve(v, watermark_delays=[]) for k, v in ingress.metrics.substreams.items()},
            )
            out[ingress.name] = metrics
        return out

    # ---- saving and restoring ----------------------------------------------------------
    def snapshot(self) -> bytes:
        """The engine's whole state, to rebuild it with ``restore`` (in another process)."""
        state = {
            "format": STATE_FORMAT,
            "shape": _shape(self.query),
            "next_id": _next_of(self.build.ids),  # read, not taken: the engine may go on after a snapshot
            "clock": self.build.clock.now,
            "naive": self.mode.naive,
            "ingresses": [state_of(i, i.WIRING) for i in self.ingresses],
            "operators": [state_of(op, op.WIRING) for op in self.operators],
            "buffers": [list(b) for b in self.buffers],
            "reached": list(self.reached),
            "finished": self.finished,
            "given_last": self.given_last,
            "attached": self.attached,
            "feeds": [
                (
                    f.sequence.last_arrival,
                    f.sequence.open_edges,
                    f.next_position,
                    f.last_order,
                    f.next_order,
                    f.held,
                    None if f.stamper is None else f.stamper.state(),
                )
                for f in self.feeds
            ],
        }
        buffer = io.BytesIO()
        try:
            StatePickler(buffer).dump(state)
        except (pickle.PicklingError, AttributeError, TypeError) as exc:
            raise StateError(
                f"the live query's state cannot be saved: {exc}. Payload classes (and values in "
                f"them) must be importable by name: define them at module level, not inside a function"
            ) from exc
        return buffer.getvalue()

    @classmethod
    def restore(cls, query: Query, blob: bytes) -> LiveEngine:
        """A live engine for ``query`` in the state ``snapshot`` saved."""
        try:
            state = pickle.loads(blob)
        except Exception as exc:
            raise StateError(f"the saved live state cannot be read: {exc}") from exc
        if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
            raise StateError("the saved live state has another format: it was written by another version of tempo")
        if state["shape"] != _shape(query):
            raise StateError("the saved live state belongs to another query (its operators differ)")
        mode = TimestampMode()
        mode.naive = state["naive"]
        engine = cls(query, mode, state["next_id"])
        engine.build.clock.now = state["clock"]
        for ingress, saved in zip(engine.ingresses, state["ingresses"]):
            put_state(ingress, saved)
        for op, saved in zip(engine.operators, state["operators"]):
            put_state(op, saved)
        engine.buffers = [deque(b) for b in state["buffers"]]
        engine.reached = state["reached"]
        engine.finished = state["finished"]
        engine.given_last = state["given_last"]
        engine.attached = state.get("attached", {})  # state saved before there was any: none
        for feed, saved in zip(engine.feeds, state["feeds"]):
            feed.sequence.last_arrival, feed.sequence.open_edges, feed.next_position, last_order = saved[:4]
            feed.last_order = None if last_order is None else order_value(last_order)  # a datetime in state saved before
            feed.next_order, feed.held = saved[4:6]
            if feed.stamper is not None:
                feed.stamper.restore(saved[6])
        return engine


def _shape(query: Query) -> list[str]:
    """What must match for saved state to fit a query: its operators' kinds in build order."""
    return [type(node).__name__ for node in query.nodes]


def state_of(obj: object, wiring: frozenset[str]) -> dict[str, Any]:
    """An operator's (or ingress's) state: its attributes that are not its wiring."""
    return {k: v for k, v in vars(obj).items() if k not in wiring}


def put_state(obj: object, state: dict[str, Any]) -> None:
    """Put ``state_of``'s state into a freshly built operator (or ingress)."""
    for name, value in state.items():
        if isinstance(value, KeyedByStart):  # its key function is compiled: the fresh one's
            value.key_of = getattr(obj, name).key_of
        setattr(obj, name, value)


def _next_of(counter: itertools.count[int]) -> int:
    """The value ``next(counter)`` would give, without taking it."""
    return int(repr(counter)[len("count(") : -1])


class StatePickler(pickle.Pickler):
    """Pickles engine state; ``itertools.count`` (the operators' tie-breaking sequences) by
    its next value, since counters cannot be pickled on every supported Python."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is itertools.count:
            return itertools.count, (_next_of(obj),)
        return NotImplemented
