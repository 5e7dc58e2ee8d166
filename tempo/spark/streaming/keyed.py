"""The cluster engine's keyed operators in Spark: a ``transformWithState`` processor around the
runtime's ``KeyedOperator`` (docs/streaming.md, "Live queries on the cluster"; the queries
around it are ``tempo.spark.streaming.cluster``'s).

The work query's rows (``COLUMNS``) are the stage's: each an item of the stateful operator's
input in the merged arrival order (its ``POSITION``), an event (``INSERT``) or the end of an
open one (``END_EDGE``), with the event's id and its lifetime in ticks, its payload's fields, and ``CTI``, the CTI in
force at the operator when the item reaches it. The watermark column holds each row's CTI as
milliseconds (``watermark_ms``), behind a delay of one millisecond, so Spark's watermark is
the latest CTI of the earlier micro-batches less one tick (``cti_of_watermark``).

Spark calls the processor once per bucket of group keys (``BUCKET``, ``KEY_BUCKETS``), and
the CTI lane's one key. Per group key, one entry of the bucket's ``groups`` map state
(``KeyState``) holds the operator's state for the key (``KeyedOperator``'s bytes; none once
the key holds nothing, ``KeyedOperator.idle``), the results waiting for their CTI and the
timer the key waits for; a batch so writes the entries of the keys it touched, not the
bucket's. A key's rows are run after the CTI of the watermark, in position order, each
preceded by the CTI in force when it arrived; results released by a CTI beyond Spark's
watermark wait in state, so that a micro-batch emits only results released by CTIs up to its
watermark: the stretch of the release sequence since the previous batch. A key waits for one
event-time timer of its bucket, at the first CTI that would release something of it, which
brings the later CTIs to a key without rows; the bucket's ``agenda`` map state says which keys
wait for which timer (``_Agenda``), so a timer runs only the keys due at it.
"""

from __future__ import annotations

import pickle
import sys
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from pyspark.sql import Column, Row
from pyspark.sql import functions as F
from pyspark.sql import types as st
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from tempo.errors import UnsupportedError
from tempo.expr.schema import field_names, is_record_type, record_fields
from tempo.spark.types import from_wire, to_wire
from tempo.plan.nodes import detached
from tempo.plan.query import Query
from tempo.plan.nodes import AnalyticNode, AntiJoinNode, ClipNode, Node, ReleaseNode, WindowNode
from tempo.runtime.bulk import grouped_key, runs_unmergeable, unmergeable
from tempo.runtime.keyed import (
    MATCHING,
    Cti,
    End,
    Insert,
    KeyCti,
    KeyedItem,
    KeyedOperator,
    KeyedResult,
    Merge,
    Run,
    by_substream,
    may_reach_infinity,
)
from tempo.lowering.batches import partial_columns, partial_values
from tempo.spark.windows import key_columns, key_names
from tempo.ticks import INF, NEG_INF

POSITION, ITEM, EID, START, END, CTI = "tempo_position", "tempo_item", "tempo_eid", "tempo_start", "tempo_end", "tempo_cti"
INSERT, END_EDGE, CTI_ROW, MERGE, SHARED, KEY_CTI = 0, 1, 2, 3, 4, 5
COLUMNS = (POSITION, ITEM, EID, START, END, CTI)
"""The stage's columns before the payload's fields: the item's place in the merged arrival
order, its kind (``INSERT``, ``END_EDGE``, ``CTI_ROW``: a row carrying only a CTI, to move
the watermark, in the CTI lane, its ``EID`` the stage batch that wrote it, or ``MERGE``: a
hopping window's partial aggregates over the key's events of a stage batch, its ``EID`` the
window, ``END`` the events' latest time, and the partial values in the columns of
``tempo.lowering.batches.window_partials``; or ``SHARED``: at the flush, what a bucket's
keys need of all keys at the CTI at infinity, its ``EID`` the bucket, ``START`` the last
finite CTI, ``END`` the window's latest finite time over all keys), the event's id, its
lifetime in ticks (``END`` null: open; an end's ``EID`` and ``START`` are the id and stage
batch of the event it ends, its payload fields that event's, so that it goes to its key),
and the CTI in force at the operator when it arrives (or, at most, before it: ``KeyedOperator``).
The stage of a node keyed by its substream key (``tempo.runtime.keyed.by_substream``: a
release by it, a window keeping it) also holds ``KEY_CTI`` rows, a substream key's CTI at
its place in the arrival order (``START`` its time), and names each row's substream key
(``SUBSTREAM``, ``KEY_VALUE``)."""
BATCH = "tempo_batch"
"""The stage's column of the stage batch a row belongs to: a key's rows are run in order of
(``BATCH``, ``POSITION``), and an event's id is made of its (``BATCH``, ``EID``) (``event_id``)."""


def event_id(batch: int, eid: int) -> int:
    """The id a key's operator knows a stage row's event by: unique over the stage batches,
    whose rows number their events each in their own way (by input order, or as the driver's
    engine did)."""
    return (batch << 64) | (eid & 0xFFFF_FFFF_FFFF_FFFF)


SUBSTREAM, KEY_VALUE = "tempo_substream", "tempo_key_value"
"""The stage columns of a node keyed by its substream key: the name of a row's substream key (``join_key_name``: the
group key its rows go by), and on a ``KEY_CTI`` row the key itself, pickled."""


PORT, JOIN_KEY, PAYLOAD = "tempo_port", "tempo_join_key", "tempo_payload"
"""A ``MATCHING`` node's stage columns in place of the payload's fields: the input an event came by
(0 left, 1 right), its join key (``join_key_name``), and its payload's values in wire form,
pickled (the two inputs' payloads differ)."""


def join_key_name(key: tuple[Any, ...]) -> str:
    """The name of a join key in the stage: equal for keys the join over all keys matches (a
    bool meets an int as the number it is, as in a dict; join keys are ints, strings or bools:
    ``tempo.runtime.bulk.JOIN_KEY_TYPES``)."""
    return repr(tuple(int(k) if isinstance(k, bool) else k for k in key))


EVENT_LANE, CTI_LANE = 0, 1
"""The first part of every group key of the work query (``LANE``): the operator's events go by
``(EVENT_LANE, *group key)``, the CTI rows all under ``(CTI_LANE, None, ...)``."""
LANE = "tempo_lane"
BUCKET = "tempo_bucket"
KEY_BUCKETS = 64
"""The work query groups the event lane's rows by a bucket of their group key (``BUCKET``,
``bucket_column``), one of ``KEY_BUCKETS``: PySpark's ``transformWithState`` pays for each
call of the processor (a message to the JVM for the key, its own Arrow batch of output) and
more for each state call (measured in bench/README.md, "The cluster engine"), so the processor is called
per bucket, keeps each group key's state in an entry of the bucket's map state, and reads
a bucket's states in one streamed read when it runs most of them. The number is part of a checkpoint's state layout: a
restart must bucket as the first run did."""


def bucket_column(key_columns: list[str]) -> Column:
    """The bucket of a stage row's group key: the same for every row of a group key, 0 in the
    CTI lane and for a window without keys; a ``SHARED`` row's, the one its ``EID`` names.
    Spark's ``xxhash64`` reads -0.0 as 0.0 and every NaN alike, as its ``groupBy`` and
    tempo's group keys do (test_cluster.py's float keys)."""
    bucket: Column = F.lit(0)
    if key_columns:
        hashed = F.pmod(F.xxhash64(*[F.col(c) for c in key_columns]), F.lit(KEY_BUCKETS))
        bucket = F.when(F.col(LANE) == F.lit(EVENT_LANE), hashed).otherwise(F.lit(0))
    return F.when(F.col(ITEM) == F.lit(SHARED), F.col(EID)).otherwise(bucket).cast("int")


SPREAD = "tempo_spread"
"""The group key of a release's stage rows (``ReleaseNode``, which has none of its own:
``group_names``): one of ``KEY_BUCKETS`` by a hash of the event's (stage batch, id), which an
end's ``START`` and ``EID`` name, so that the events spread over the buckets and an end goes
to its event's key."""


def group_names(query: Query, node: Node) -> list[str]:
    """The work query's columns of the group key of ``node``'s stage rows (a join keeping a
    substream key: its ``JOIN_KEY`` names that key)."""
    if isinstance(node, MATCHING):
        return [JOIN_KEY]
    if by_substream(query, node):
        return [SUBSTREAM]
    if isinstance(node, ReleaseNode):
        return [SPREAD]
    assert isinstance(node, (WindowNode, AnalyticNode, ClipNode))
    return key_names(node)


def staged_keys(query: Query, node: Node) -> list[Column]:
    """The group key columns the time query writes into ``node``'s stage rows, computed from
    the payload (``key_columns``); a release's none: the work query adds its ``SPREAD``
    (``work_keys``); a ``MATCHING`` node's none: the driver names each event's join key
    (``JOIN_KEY``); a node keyed by its substream key, none: the driver names it
    (``SUBSTREAM``)."""
    if isinstance(node, (ReleaseNode, *MATCHING)) or by_substream(query, node):
        return []
    assert isinstance(node, (WindowNode, AnalyticNode, ClipNode))
    return key_columns(node)


def work_keys(query: Query, node: Node) -> dict[str, Column]:
    """The group key columns the work query adds to ``node``'s stage rows as it reads them:
    a release's ``SPREAD`` (a keyed release's rows name their substream key instead)."""
    return {SPREAD: spread_column()} if isinstance(node, ReleaseNode) and not by_substream(query, node) else {}


def spread_column() -> Column:
    """``SPREAD`` of a stage row (of the event lane; a CTI row's means nothing)."""
    batch = F.when(F.col(ITEM) == F.lit(END_EDGE), F.col(START)).otherwise(F.col(BATCH))
    return F.pmod(F.xxhash64(batch, F.col(EID)), F.lit(KEY_BUCKETS))


RESULT, MARKER, LATEST, ENDED, PASSED = 0, 1, 2, 3, 4
OUT_KIND, RELEASED_BY, OUT_START, OUT_END, GROUP, RANK = (
    "tempo_kind",
    "tempo_released_by",
    "tempo_start",
    "tempo_end",
    "tempo_group",
    "tempo_rank",
)
RESULT_COLUMNS = (OUT_KIND, RELEASED_BY, OUT_START, OUT_END, GROUP, RANK)
"""An output row's columns before its payload's fields (in ``wire_schema`` form): ``RESULT``
(a result of the operator: the CTI that released it, its lifetime, its group key's
``repr`` and, an analytic's, a snapshot's or a clip's, its id in the key and rank, a hopping
window's stamped at an event its window's end, pickled in ``RANK``:
``tempo.runtime.keyed.KeyedResult``), ``ENDED`` (the end of an open result: the
CTI the key was at, its end, its group key, its id and rank, no payload),
``MARKER`` (a CTI row given back once Spark's watermark has reached its CTI:
``RELEASED_BY`` its CTI, ``OUT_START`` its ``EID``; a keyed join's, its move of an input's
CTI: ``RANK`` its place among the batch's CTI rows, the input and the number of the batch's
events before it, pickled, ``OUT_END`` the CTI), ``PASSED`` (a keyed release's substream
key's CTI, passed on: ``OUT_START`` its time, its key and arrival pickled in ``RANK``) or ``LATEST`` (for a window whose
lifetimes may reach infinity: ``OUT_END`` the latest finite time of the keys a call ran,
which the driver gathers over all keys for the flush: ``SHARED``)."""

WATERMARK_DELAY_MS = 1
WATERMARK_LIMIT_MS = (2**63 - 1) // 1000
"""The largest millisecond a Spark timestamp (microseconds in 64 bits) holds."""


def watermark_ms(tick: int) -> int:
    """The watermark column's value for a row whose CTI is ``tick``: the tick read as
    milliseconds since the epoch; the CTI at infinity the latest value Spark holds. Spark's
    watermark starts at 0 and never goes below, and its timestamps end in the year 2262: the
    CTIs it carries so lie after the epoch and before that year."""
    if tick >= INF:
        return WATERMARK_LIMIT_MS
    if not WATERMARK_DELAY_MS < tick < WATERMARK_LIMIT_MS - WATERMARK_DELAY_MS:
        raise UnsupportedError(
            "Spark streaming",
            f"a CTI at tick {tick}",
            "the cluster engine carries CTIs in Spark's watermark, whose milliseconds hold the ticks after the epoch and before 2262 only",
        )
    return tick


def cti_of_watermark(ms: int) -> int:
    """The CTI Spark's watermark ``ms`` stands for (the column's latest value, less the
    delay); none before Spark has one (0)."""
    if ms <= 0:
        return NEG_INF
    tick = ms + WATERMARK_DELAY_MS
    return INF if tick >= WATERMARK_LIMIT_MS else tick


def timer_ms(cti: int) -> int:
    """The timer that fires once Spark's watermark stands for ``cti`` or later. A CTI the
    watermark cannot carry needs no timer of its own: one before the first it carries is
    reached by that first one, and one after the last it carries only by the CTI at infinity."""
    if cti <= WATERMARK_DELAY_MS + 1:
        cti = WATERMARK_DELAY_MS + 1
    elif cti >= WATERMARK_LIMIT_MS - WATERMARK_DELAY_MS:
        cti = INF
    return watermark_ms(cti) - WATERMARK_DELAY_MS


@attrs.frozen
class KeyState:
    """What the state store holds for one group key (or the CTI lane): its operator's state
    (``KeyedOperator``'s bytes, None when it holds nothing), what waits for a later CTI
    (results, or in the CTI lane the CTI rows), and the timer it waits for (milliseconds)."""

    operator: bytes | None
    waiting: list[Any]
    timer: int | None


class _Agenda:
    """A bucket's timers: which of its group keys wait for which of its event-time timers,
    read from the ``agenda`` map state (timer -> sorted group names) as a call needs them and
    written once at its end, each timer registered while some group waits for it."""

    def __init__(self, state: Any, handle: StatefulProcessorHandle, fired: int | None) -> None:
        self.state = state
        self.handle = handle
        self.fired = fired  # the timer being handled: Spark deletes it itself
        self.entries: dict[int, set[str]] = {}
        self.held: dict[int, bool] = {}
        self.changed: set[int] = set()

    def entry(self, ms: int) -> set[str]:
        if ms not in self.entries:
            held = self.state.getValue((ms,))
            self.held[ms] = held is not None
            self.entries[ms] = set() if held is None else set(pickle.loads(held[0]))
        return self.entries[ms]

    def move(self, name: str, old: int | None, new: int | None) -> None:
        """Group ``name`` waits for timer ``new`` now, no longer for ``old``."""
        if old == new:
            return
        if old is not None:
            self.entry(old).discard(name)
            self.changed.add(old)
        if new is not None:
            self.entry(new).add(name)
            self.changed.add(new)

    def save(self) -> None:
        for ms in sorted(self.changed):
            names = self.entries[ms]
            if names:
                self.state.updateValue((ms,), (pickle.dumps(sorted(names)),))
                if not self.held[ms]:
                    self.handle.registerTimer(ms)
            elif self.held[ms]:
                self.state.removeKey((ms,))
                if ms != self.fired:
                    self.handle.deleteTimer(ms)


class _Bucket:
    """What a call read of its bucket's group keys: their saved states (bytes, None for a
    key not held), and the number of keys the bucket holds, written back if it changed."""

    def __init__(self, state: Any, size: int, states: dict[str, bytes | None]) -> None:
        self.state = state
        self.read = self.size = size
        self.states = states

    def save(self) -> None:
        if self.size != self.read:
            if self.size:
                self.state.update((self.size,))
            else:
                self.state.clear()


def adopt_script_classes(query: Query) -> None:
    """In a Spark Python worker: the record classes of ``query`` that the driver's script
    defines (module ``__main__``), which came here by value with the plan (PySpark's
    cloudpickle), put in this process's ``__main__`` under their names. A key's state is
    pickled by reference, as the driver pickles an engine's, and a worker's ``__main__`` is
    PySpark's: without them a payload class of the user's script could not be saved there,
    nor read back on another worker. A name ``__main__`` holds for something else is left."""
    main = sys.modules.get("__main__")
    if main is None:
        return
    for cls in _record_classes(query):
        name = cls.__qualname__
        if cls.__module__ != "__main__" or not name.isidentifier():  # (a class local to a function cannot be pickled anywhere)
            continue
        held = main.__dict__.get(name)
        if held is None or held is not cls and is_record_type(held) and getattr(held, "__module__", None) == "__main__":
            setattr(main, name, cls)


def _record_classes(query: Query) -> list[type]:
    """The record classes of ``query``'s streams and of their fields (nested records, list
    elements), each once."""
    found: dict[int, type] = {}
    todo = [n.payload_type for n in query.nodes]
    while todo:
        cls = todo.pop()
        if id(cls) in found or not is_record_type(cls):
            continue
        found[id(cls)] = cls
        for f in record_fields(cls):
            todo += [t for t in (f.dtype, f.element) if t is not None]
    return list(found.values())


class KeyedProcessor(StatefulProcessor):
    """One stateful node of a query in ``groupBy(LANE, BUCKET).transformWithState(...,
    "Append", "EventTime")`` (see the module's docstring): a call per bucket of group keys,
    each group key's state an entry of the bucket's ``groups`` map state.

    Under the CTI lane's one key the CTI rows wait, as markers, until Spark's watermark
    reaches their CTI: the work query's sink learns from them which CTIs a micro-batch's
    results were released by, in order (``tempo.spark.streaming.cluster``)."""

    STREAMED_SHARE = 0.25
    """The share of a bucket's keys a call must run for it to read the whole bucket's states
    in one streamed read rather than each key's alone (``_read``)."""

    def __init__(self, query: Query, node_index: int, key_columns: list[str] | None = None, partner_index: int | None = None) -> None:
        # The plan travels to Spark's Python workers, without its inputs' sources; the query's
        # properties, kept by node identity, are derived there again.
        self.root = detached(query.root)
        self.node_index = node_index
        self.key_columns = key_columns
        self.partner_index = partner_index
        """A keyed join's partner (``BulkShape.partner``), run in the same keyed operator:
        the results' payloads, of two types, go pickled (``PAYLOAD``)."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        query = Query.build(self.root)
        adopt_script_classes(query)
        node = query.nodes[self.node_index]
        self.handle = handle
        partner = None if self.partner_index is None else query.nodes[self.partner_index]
        assert partner is None or isinstance(partner, AntiJoinNode)
        self.keyed = KeyedOperator(query, node, partner=partner)
        self.payload_types = [n.payload_type for n in node.inputs()]  # a join's two, by input
        self.fields = field_names(self.payload_types[0])
        self.joined = isinstance(node, MATCHING)  # payloads pickled in PAYLOAD, by PORT
        self.moves = self.joined or by_substream(query, node)  # CTI rows with their places (``Stage.markers``)
        self.output_fields = [PAYLOAD] if partner is not None else field_names(node.payload_type)
        self.blank = [None] * len(self.output_fields)
        self.names = self.key_columns if self.key_columns is not None else group_names(query, node)  # the stage's
        self.runs = (
            isinstance(node, WindowNode) and runs_unmergeable(node) is None
        )  # MERGE rows as a session window's runs (else a hopping window's)
        self.window = (
            node if isinstance(node, WindowNode) and (self.runs or unmergeable(node) is None) else None
        )  # one that takes MERGE rows
        self.partial_columns = ["__n", *partial_columns(self.window)] if self.window is not None else []
        # Open lifetimes end, when the input ends, after the latest finite time over all keys
        # (``Window.SHARED``), which no call sees: each call reports its keys' (``LATEST``)
        # and the flush brings every bucket the driver's maximum (``SHARED``).
        self.open_lifetimes = may_reach_infinity(query, node)
        self.out = Row(*RESULT_COLUMNS, *self.output_fields)  # a Row class: Spark maps fields by name
        # A group key's state is one value, read once and written once per call: each state
        # call is a message to the JVM (bench/README.md, "The cluster engine").
        self.state = handle.getValueState("key", "state binary")  # the CTI lane's
        self.groups = handle.getMapState("groups", "name string", "state binary")
        self.size = handle.getValueState("size", "n long")  # the bucket's entries in groups
        self.agenda = handle.getMapState("agenda", "timer long", "names binary")
        self.shared = handle.getValueState("shared", "last_cti long, t_max long")  # the bucket's, from the flush

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        now = cti_of_watermark(timerValues.getCurrentWatermarkInMs())
        if key[0] == CTI_LANE:  # (stage batch, CTI, and a keyed join's or anti-join's move: ``Stage.markers``)
            moves = self.moves  # a keyed join's, anti-join's or release's stage alone has these columns
            markers = [
                (row[EID], row[CTI], row[POSITION], row[PORT], row[START], row[END]) if moves else (row[EID], row[CTI]) for row in rows
            ]
            return self._markers(markers, now, fired=False)
        by_group: dict[tuple[Any, ...], list[Row]] = {}
        names = self.names
        for row in rows:
            if row[ITEM] == SHARED:
                self.shared.update((row[START], row[END]))
                continue
            by_group.setdefault(grouped_key([row[n] for n in names]), []).append(row)
        named = {repr(group): group for group in by_group}
        agenda = _Agenda(self.agenda, self.handle, None)
        return self._run_all(agenda, list(named), lambda name: self._items(named[name], by_group[named[name]], now), now)

    def _items(self, group: tuple[Any, ...], rows: list[Row], now: int) -> list[KeyedItem]:
        """A group key's rows as its operator's items, after the watermark's CTI: what it
        releases goes now, as it does for the keys without rows (by their timers) and for the
        CTI lane's markers. A micro-batch reading several stage files gives a key rows stamped
        with CTIs beyond the watermark, which would otherwise close those windows at a later
        CTI, and hold them back with it."""
        items: list[KeyedItem] = [Cti(now)] if now > NEG_INF else []
        last = now
        fields = self.fields
        ordered = sorted(rows, key=lambda r: (r[BATCH], r[POSITION]))
        merges = [row for row in ordered if row[ITEM] == MERGE]
        if merges:
            assert self.window is not None
            values = iter(partial_values(self.window, {c: [row[c] for row in merges] for c in self.partial_columns}))
        for row in ordered:
            if row[CTI] > last:
                items.append(Cti(row[CTI]))
                last = row[CTI]
            if row[ITEM] == INSERT:
                port = row[PORT] if self.joined else 0
                wired = pickle.loads(row[PAYLOAD]) if self.joined else [row[f] for f in fields]
                payload = from_wire(self.payload_types[port], wired, False)
                items.append(
                    Insert(event_id(row[BATCH], row[EID]), row[START], row[END], payload, event_id(row[BATCH], row[POSITION]), port)
                )
            elif row[ITEM] == KEY_CTI:
                items.append(KeyCti(pickle.loads(row[KEY_VALUE]), row[START], event_id(row[BATCH], row[POSITION])))
            elif row[ITEM] == MERGE and self.runs:
                items.append(Run(group, row[START], row[END], row["__n"], next(values)))
            elif row[ITEM] == MERGE:
                items.append(Merge(group, row[EID], row["__n"], next(values), row[END]))
            else:  # an end's START is the stage batch of the event it ends
                port = row[PORT] if self.joined else 0
                items.append(End(event_id(row[START], row[EID]), row[END], event_id(row[BATCH], row[POSITION]), port))
        return items

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:
        now = cti_of_watermark(timerValues.getCurrentWatermarkInMs())
        if key[0] == CTI_LANE:
            return self._markers([], now, fired=True)
        fired = expiredTimerInfo.getExpiryTimeInMs()
        agenda = _Agenda(self.agenda, self.handle, fired)
        return self._run_all(agenda, sorted(agenda.entry(fired)), lambda name: [Cti(now)], now)

    def _run_all(self, agenda: _Agenda, names: list[str], items: Callable[[str], list[KeyedItem]], now: int) -> Iterator[Row]:
        """Run the bucket's group keys ``names`` (``items(name)``: a key's items), then save
        the bucket's agenda and size; with ``open_lifetimes``, one ``LATEST`` row after them."""
        bucket = self._read(names)
        shared: dict[str, Any] = {}
        first: list[KeyedItem] = []
        if now >= INF and self.open_lifetimes:
            held = self.shared.get()
            if held is not None:  # the flush's: as the window, which saw every key, ends open lifetimes
                first, shared = [Cti(held[0])], {"t_max": held[1]}
        out: list[Row] = []
        latest = NEG_INF
        for name in names:
            out += self._run(agenda, bucket, name, [*first, *items(name)], now, shared)
            if self.open_lifetimes:
                latest = max(latest, self.keyed.latest())
        agenda.save()
        bucket.save()
        if latest > NEG_INF:
            out.append(self.out(LATEST, None, None, latest, None, None, *self.blank))
        return iter(out)

    def _read(self, names: list[str]) -> _Bucket:
        """The saved states of the bucket's group keys ``names``: each read alone, or, when
        they are a quarter of the bucket's keys or more, all the bucket's in one streamed read
        (each state call is a round trip to the JVM: bench/README.md, "The cluster engine")."""
        held = self.size.get()
        size = 0 if held is None else int(held[0])
        if size and len(names) >= self.STREAMED_SHARE * size:
            saved = {key[0]: value[0] for key, value in self.groups.iterator()}
            states = {name: saved.get(name) for name in names}
        else:
            states = {}
            for name in names:
                value = self.groups.getValue((name,))
                states[name] = None if value is None else value[0]
        return _Bucket(self.size, size, states)

    def _load(self) -> KeyState:
        held = self.state.get()  # None for a key not seen before (or forgotten): no exists() call
        return KeyState(None, [], None) if held is None else pickle.loads(held[0])

    def _markers(self, markers: list[tuple[Any, ...]], now: int, fired: bool) -> Iterator[Row]:
        """The CTI lane: the CTI rows (stage batch, CTI, then a keyed join's or anti-join's
        place among them, move of an input's CTI and number of the batch's events before it) wait until the watermark reaches them, a stage batch's
        together, at its last CTI: the driver reads a stage batch's CTI rows whole. (Those of a
        keyed join's moves that leave its output CTI where it was carry a CTI the watermark
        reached already.)"""
        saved = self._load()
        waiting: list[tuple[Any, ...]] = saved.waiting + markers
        last: dict[Any, int] = {}
        for m in waiting:
            last[m[0]] = max(last.get(m[0], m[1]), m[1])
        out = sorted(m for m in waiting if last[m[0]] <= now)
        waiting = [m for m in waiting if last[m[0]] > now]
        due = min((last[m[0]] for m in waiting), default=None)
        registered = None if fired else saved.timer  # a timer that fired is gone already
        wanted = None if due is None else timer_ms(due)
        if registered != wanted:
            if registered is not None:
                self.handle.deleteTimer(registered)
            if wanted is not None:
                self.handle.registerTimer(wanted)
        if not waiting and wanted is None:
            self.state.clear()
        else:
            self.state.update((pickle.dumps(KeyState(None, waiting, wanted)),))
        for batch, cti, *move in out:
            position, port, t, before = (
                (*move, None)[:4] if move else (None, None, None, None)
            )  # a checkpoint of before 2026-11-28 holds no ``before``
            rank = None if port is None else pickle.dumps((position, port, before))
            yield self.out(MARKER, cti, batch, t, None, rank, *self.blank)

    def _run(self, agenda: _Agenda, bucket: _Bucket, name: str, items: list[KeyedItem], now: int, shared: dict[str, Any]) -> list[Row]:
        """Group key ``name``'s items through its operator: the results released up to
        ``now``, the rest kept with its state, and its place in the agenda moved to its next
        release."""
        held = bucket.states[name]
        saved = KeyState(None, [], None) if held is None else pickle.loads(held)
        released, state = self.keyed.run(saved.operator, items, shared)
        due = self.keyed.next_release()
        waiting = saved.waiting + released
        out = [r for r in waiting if r.cti <= now]
        waiting = [r for r in waiting if r.cti > now]
        if waiting:
            due = min([r.cti for r in waiting] + ([] if due is None else [due]))
        wanted = None if due is None else timer_ms(due)
        agenda.move(name, saved.timer, wanted)
        # The state store keeps only what a key holds: nothing for an idle operator.
        operator = None if self.keyed.idle() else state
        if operator is None and not waiting and wanted is None:
            if held is not None:
                self.groups.removeKey((name,))
                bucket.size -= 1
        else:
            self.groups.updateValue((name,), (pickle.dumps(KeyState(operator, waiting, wanted)),))
            bucket.size += 1 if held is None else 0
        return [
            self.out(ENDED, r.cti, None, r.end, name, _rank_bytes(r), *self.blank)
            if r.ended
            else self.out(PASSED, r.cti, r.start, None, name, _rank_bytes(r), *self.blank)
            if r.key_cti
            else self.out(RESULT, r.cti, r.start, r.end, name, _rank_bytes(r), *self._wired(r.payload))
            for r in out
        ]

    def _wired(self, payload: Any) -> list[Any]:
        """A result's payload as its output columns: its wire values, pickled with a partner."""
        wired = to_wire(payload)
        return [pickle.dumps(wired)] if self.partner_index is not None else list(wired)

    def close(self) -> None:
        pass


def _rank_bytes(result: KeyedResult) -> bytes | None:
    """A result's ``RANK`` column: its id in the key, rank, window end (``closes``), the
    input whose CTI decides a join's pair's end (``waits``) and, a keyed release's, the
    arrival of the substream key's CTI that released it (``by_key``; a ``PASSED`` row's, its
    key too) and, a partner's, its ``member``, pickled; None for a result with none of them (a
    window's stamped by its lifetime)."""
    if (
        result.eid is None
        and result.closes is None
        and not result.rank
        and result.waits is None
        and result.by_key is None
        and not result.member
    ):
        return None
    if result.member:  # a partner's (``KeyedOperator``): an anti-join's fragment or end
        return pickle.dumps((result.eid, result.rank, result.closes, result.waits, result.by_key, None, result.member))
    if result.by_key is not None:
        return pickle.dumps(
            (result.eid, result.rank, result.closes, result.waits, result.by_key, result.payload if result.key_cti else None)
        )
    return pickle.dumps((result.eid, result.rank, result.closes, result.waits))


def read_move(rank: bytes | None, end: int | None) -> tuple[int | None, int | None, int | None, int | None]:
    """A ``MARKER`` row's move of a keyed join's or anti-join's input CTI (its ``RANK``: the
    CTI row's place among its stage batch's, the input and the number of the batch's events
    before it; its ``OUT_END``: that input's CTI), or Nones."""
    if rank is None:
        return None, None, None, None
    position, port, *before = pickle.loads(rank)
    return position, port, end, before[0] if before else None


def read_result(kind: int, released_by: int, start: int | None, end: int | None, rank: bytes | None, payload: Any) -> KeyedResult:
    """A ``RESULT``, ``ENDED`` or ``PASSED`` row of ``KeyedProcessor`` (its columns, the
    payload read from its fields; None for an end or a key's CTI) as the ``KeyedResult`` it
    was written from."""
    eid, ranked, closes, waits, *keyed = (None, (), None, None) if rank is None else pickle.loads(rank)
    by_key, key, member = (*keyed, 0)[:3] if keyed else (None, None, 0)
    if kind == ENDED:
        return KeyedResult(released_by, 0, end, None, eid, ranked, ended=True, waits=waits, member=member)
    assert start is not None
    if kind == PASSED:
        return KeyedResult(released_by, start, None, key, eid, ranked, by_key=by_key, key_cti=True)
    return KeyedResult(released_by, start, end, payload, eid, ranked, closes=closes, waits=waits, by_key=by_key, member=member)


def output_schema(query: Query, node_index: int, pickled: bool = False) -> st.StructType:
    """The schema of ``KeyedProcessor``'s rows for the query's node ``node_index`` (``pickled``:
    with a partner, each payload's wire values pickled in ``PAYLOAD``)."""
    from tempo.spark.types import wire_schema

    leading = [st.IntegerType(), st.LongType(), st.LongType(), st.LongType(), st.StringType(), st.BinaryType()]
    fields = [st.StructField(name, dtype, True) for name, dtype in zip(RESULT_COLUMNS, leading)]
    if pickled:
        return st.StructType(fields + [st.StructField(PAYLOAD, st.BinaryType(), True)])
    return st.StructType(fields + list(wire_schema(query.nodes[node_index].payload_type).fields))
