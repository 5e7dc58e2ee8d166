"""A join run one join key at a time (``tempo.runtime.keyed``, the cluster engine's keyed
join) gives what the join over all keys gives, in its order.

The reference is the in-memory engine's join operator fed a random sequence of points,
intervals and edges (start edges, each ended later by its end edge, or never) of both
inputs, of several join keys, and each input's own CTIs; what it emits (pairs, the ends of
pairs it gave out as start edges, and output CTIs, in order) is the expected output. The keyed side cuts the same
sequence into random batches and runs, batch by batch, each join key seen so far through one
``KeyedOperator``: its saved state, its own events (each with its place in the arrival order
over all keys and its input) and the output CTIs (the least of the inputs'), a key without
events in a batch hearing only the batch's last one, as the cluster engine's keys do. Each
pair, placed before the first output CTI past its start (``placed``), ordered among the
pairs that CTI releases by ``release_order`` and split by the driver's ``JoinTimeline``
(fed every move of an input's CTI, and at each end edge's arrival the ends its key gave
pairs) where the join over all keys gave a start edge, must come out where the reference
emitted it, payload for payload, and each end where it did; each key's timer (``next_release``) must be exact: a CTI just before it
changes nothing, a CTI at it releases a pair or moves the timer on.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import attrs
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import EventShape, Stream
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.runtime.operator import Operator
from tempo.runtime.build import Build
from tempo.runtime.engine import build_operator
from tempo.runtime.ingress import TimestampMode
from tempo.runtime.keyed import Cti, End, Insert, JoinTimeline, KeyCti, KeyedItem, KeyedOperator, KeyedResult, placed, release_order
from tempo.ticks import INF, NEG_INF
from tests.budget import examples

SECOND = 1_000_000


@attrs.frozen
class Reading:
    key: int
    value: int


@attrs.frozen
class Pair:
    key: int
    left: int
    right: int


def _join(residual: bool) -> tuple[Query, p.JoinNode]:
    """Readings joined with readings on their key (and, with ``residual``, left value at most right)."""
    from tempo.sources import ArrowSource

    def readings(name: str) -> Stream[Reading]:
        table = pa.table(
            {"ts": pa.array([], pa.timestamp("us", tz="UTC")), "key": pa.array([], pa.int64()), "value": pa.array([], pa.int64())}
        )
        return Stream.create(name, ArrowSource(table, Reading, start="ts"), EventShape.INTERVAL)

    left, right = readings("left"), readings("right")
    if residual:
        joined = left.join(right, lambda a, b: (a.key == b.key) & (a.value <= b.value), lambda a, b: Pair(a.key, a.value, b.value))
    else:
        joined = left.join(right, lambda a, b: a.key == b.key, lambda a, b: Pair(a.key, a.value, b.value))
    query = Query.build(joined.node)
    [node] = [n for n in query.nodes if isinstance(n, p.JoinNode)]
    return query, node


@attrs.frozen
class PortCti:
    port: int
    t: int


Step = tuple[int, Insert | End | PortCti]
"""A join key (-1 for a CTI) and what the join receives."""


@st.composite
def sequences(draw: st.DrawFn) -> tuple[list[Step], list[int]]:
    """Events of both inputs (the ends of open ones among them) and each input's CTIs, in
    arrival order, and batch cuts."""
    steps: list[Step] = []
    ctis = [0, 0]
    open_events: list[tuple[int, Insert]] = []
    for position in range(draw(st.integers(1, 60))):
        port = draw(st.integers(0, 1))
        if draw(st.integers(0, 3)) == 0:
            ctis[port] += draw(st.integers(0, 5)) * SECOND + draw(st.sampled_from([0, 1, SECOND // 2]))
            steps.append((-1, PortCti(port, ctis[port])))
            continue
        if open_events and draw(st.integers(0, 2)) == 0:  # an end edge, at its input's CTI or later
            key, event = open_events.pop(draw(st.integers(0, len(open_events) - 1)))
            until = max(event.start + 1, ctis[event.port]) + draw(st.sampled_from([0, 0, 1, SECOND, 3 * SECOND]))
            steps.append((key, End(event.eid, until, at=position, port=event.port)))
            continue
        key = draw(st.integers(0, 2))
        start = ctis[port] + draw(st.integers(0, 6)) * SECOND + draw(st.sampled_from([0, 0, 1]))
        length = draw(st.sampled_from([1, SECOND, 3 * SECOND, 8 * SECOND, 40 * SECOND, None, None, None]))
        end = None if length is None else start + length  # None: open for ever, or till an end edge
        inserted = Insert(position, start, end, Reading(key, draw(st.integers(0, 4))), at=position, port=port)
        steps.append((key, inserted))
        if end is None and draw(st.integers(0, 3)) > 0:
            open_events.append((key, inserted))
    if draw(st.booleans()):
        steps += [(-1, PortCti(0, INF)), (-1, PortCti(1, INF))]
    cuts = sorted(set(draw(st.lists(st.integers(0, len(steps)), max_size=6))) | {len(steps)})
    return steps, cuts


class _Recorder(Operator):
    """What an operator emits, in order: (``kind``, start, end, payload) for an event ("pair"
    for the join's), ("end", the place of its event among the events, end) and ("cti", t)."""

    def __init__(self, kind: str = "pair") -> None:
        super().__init__()
        self.kind = kind
        self.seen: list[tuple[Any, ...]] = []
        self.pairs: dict[int, int] = {}

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        self.pairs[eid] = len(self.pairs)
        self.seen.append((self.kind, start, end, payload))

    def end(self, port: int, eid: int, end: int) -> None:
        self.seen.append(("end", self.pairs[eid], end))

    def cti(self, port: int, t: int) -> None:
        self.seen.append(("cti", t))


def _reference(query: Query, node: p.JoinNode, steps: list[Step]) -> list[tuple[Any, ...]]:
    mode = TimestampMode()
    mode.saw(aware=True)
    join = build_operator(Build(mode, query), node)
    recorder = _Recorder()
    join.connect(recorder, 0)
    feed_all_keys(join, (item for _, item in steps))
    return recorder.seen


def feed_all_keys(operator: Operator, items: Iterable[Insert | End | PortCti]) -> None:
    """``items`` into an operator of two inputs over all keys, in order, each input's CTIs its own."""
    for item in items:
        if isinstance(item, PortCti):
            operator.cti(item.port, item.t)
        elif isinstance(item, End):
            operator.end(item.port, item.eid, item.end)
        else:
            operator.insert(item.port, item.eid, item.start, item.end, item.payload)


def _keyed(query: Query, node: p.JoinNode, steps: list[Step], cuts: list[int]) -> tuple[list[int], list[tuple[int, KeyedResult]]]:
    """The output CTIs, and every key's results (with the key), ``steps`` cut at ``cuts`` and
    run key by key."""
    keyed = KeyedOperator(query, node)
    states: dict[int, bytes] = {}
    results: list[tuple[int, KeyedResult]] = []
    port_ctis = [NEG_INF, NEG_INF]
    out = NEG_INF
    out_ctis: list[int] = []
    begin = 0
    for cut in cuts:
        batch, begin = steps[begin:cut], cut
        per_key: dict[int, list[KeyedItem]] = defaultdict(list)
        for key in states:
            per_key[key]  # every key held hears the batch's output CTIs
        for key, item in batch:
            if isinstance(item, PortCti):
                port_ctis[item.port] = max(port_ctis[item.port], item.t)
                if min(port_ctis) > out:
                    out = min(port_ctis)
                    out_ctis.append(out)
                    for items in per_key.values():
                        items.append(Cti(out))
                continue
            if key not in per_key:
                per_key[key].append(Cti(out))  # a key new in the batch: the output CTI in force first
            per_key[key].append(item)
        for key, items in per_key.items():
            if not any(isinstance(i, (Insert, End)) for i in items):
                items = items[-1:]  # a key without events in the batch hears only its last output CTI
            released, states[key] = keyed.run(states.get(key), items)
            results += [(key, r) for r in released]
            idle = keyed.idle()
            _check_next_release(keyed, states[key])
            if idle:  # forgotten, as the state store forgets it
                del states[key]
    return out_ctis, results


def _check_next_release(keyed: KeyedOperator, state: bytes) -> None:
    due = keyed.next_release()
    if due is None:
        assert keyed.run(state, [Cti(INF)])[0] == []
        return
    assert keyed.run(state, [Cti(due - 1)])[0] == [] and keyed.next_release() == due
    released, _ = keyed.run(state, [Cti(due)])
    assert released != [] or keyed.next_release() != due


@settings(max_examples=examples(450), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(sequences(), st.booleans())
def test_a_join_run_one_key_at_a_time_gives_what_it_gives_over_all_keys_in_its_order(
    drawn: tuple[list[Step], list[int]], residual: bool
) -> None:
    steps, cuts = drawn
    query, node = _join(residual)
    assert _driven(query, node, steps, cuts) == _reference(query, node, steps)


def _driven(query: Query, node: p.JoinNode, steps: list[Step], cuts: list[int]) -> list[tuple[Any, ...]]:
    """What the keys (run batch by batch, ``steps`` cut at ``cuts``) and the driver's
    ``JoinTimeline`` emit together."""
    ctis, results = _keyed(query, node, steps, cuts)
    before: list[list[tuple[str, KeyedResult]]] = [[] for _ in range(len(ctis) + 1)]
    arrivals: dict[int, list[tuple[str, KeyedResult]]] = {}
    for key, result in results:
        if result.ended:  # a pair's end, at the arrival of the end edge that gave it
            arrivals.setdefault(result.rank[0], []).append((repr(key), result))
            continue
        assert result.end is None or result.end > result.start
        for at, part in placed(node, result, ctis):
            before[at].append((repr(key), part))
    assert before[-1] == []  # every pair goes out at an output CTI past its start
    # The driver: every move of an input's CTI in order, the ends it settles, then the pairs
    # the output CTI it moves releases, split where the join over all keys split them; at
    # each end edge's arrival, the ends its key gave.
    timeline = JoinTimeline()
    got: list[tuple[Any, ...]] = []
    oid = 0
    for _, step in steps:
        if isinstance(step, End):
            ends = arrivals.pop(step.at, [])
            if ends:
                got += [("end", o, end) for o, end in timeline.arrived(ends[0][0], [r for _, r in ends])]
            continue
        if not isinstance(step, PortCti):
            continue
        got += [("end", o, end) for o, end in timeline.move(step.port, step.t)]
        out = min(timeline.ctis)
        if out > timeline.out:
            for group, r in sorted(before[ctis.index(out)], key=lambda gr: release_order(node, gr[1], gr[0])):
                got.append(("pair", r.start, timeline.give(r, oid, group), r.payload))
                oid += 1
            got.append(("cti", out))
            timeline.out = out
    assert arrivals == {}
    return got


@pytest.mark.parametrize(
    "case", ["left ends, then the right CTI passes", "left ends, the right CTI past", "left ends before the right interval", "both end"]
)
def test_the_end_edge_of_an_open_event_ends_its_pairs_where_the_join_over_all_keys_does(case: str) -> None:
    """A left edge ``a`` from 0 and a right event ``r`` from 1 (an edge, or ``[1, 10)``), key 0;
    both CTIs at 5: the pair ``[1, ...)`` goes out as a start edge. Then ``a`` ends at 7:

    - ``r`` still open, the right CTI at 5: the end waits for the right CTI, which reaches 8;
    - ``r`` open, the right CTI at 9 already: the end goes out at the arrival of a's end;
    - ``r`` = ``[1, 10)`` (the pair waited for the left CTI to reach 10): both ends known, at once;
    - ``r`` open, then ending at 6 before the right CTI passes 7: ended at 6 at that arrival (and
      the right CTI reaching 7 later ends nothing)."""
    a, r = Reading(0, 1), Reading(0, 2)
    right_end = 10 if case == "left ends before the right interval" else None
    steps: list[Step] = [
        (0, Insert(0, 0, None, a, at=0, port=0)),
        (0, Insert(1, 1, right_end, r, at=1, port=1)),
        (-1, PortCti(0, 5)),
        (-1, PortCti(1, 9 if case == "left ends, the right CTI past" else 5)),
        (0, End(0, 7, at=4, port=0)),
    ]
    if case == "left ends, then the right CTI passes":
        steps.append((-1, PortCti(1, 8)))
    if case == "both end":
        steps += [(0, End(1, 6, at=5, port=1)), (-1, PortCti(1, 20))]
    end = 6 if case == "both end" else 7
    expected = [("pair", 1, None, Pair(0, 1, 2)), ("cti", 5), ("end", 0, end)]
    query, node = _join(False)
    assert _reference(query, node, steps) == expected
    for cuts in ([len(steps)], list(range(1, len(steps) + 1)), [3, len(steps)], [4, 5, len(steps)]):
        assert _driven(query, node, steps, cuts) == expected, cuts


@attrs.frozen
class KeyStep:
    """A substream key's CTI at one input (ASA's substreams, docs/semantics.md 3.10.4)."""

    port: int
    key: int
    t: int


def _join_keeping_the_key(residual: bool) -> tuple[Query, p.JoinNode]:
    """Readings over their key (substreams) joined with readings over theirs on that key, the
    pair copying it: the join keeps the key (``JoinNode.substream_key``)."""
    from tempo.settings import AdvanceTimeSettings, EventOrderingSettings
    from tempo.sources import ArrowSource
    from datetime import timedelta

    ordering = AdvanceTimeSettings(ordering=EventOrderingSettings(timedelta(0), timedelta(0)))

    def readings(name: str) -> Stream[Reading]:
        table = pa.table(
            {"ts": pa.array([], pa.timestamp("us", tz="UTC")), "key": pa.array([], pa.int64()), "value": pa.array([], pa.int64())}
        )
        return Stream.create(name, ArrowSource(table, Reading, start="ts"), EventShape.INTERVAL, ordering, over=lambda r: r.key)

    left, right = readings("left"), readings("right")
    on = (lambda a, b: (a.key == b.key) & (a.value <= b.value)) if residual else (lambda a, b: a.key == b.key)
    query = Query.build(left.join(right, on, lambda a, b: Pair(a.key, a.value, b.value)).node)
    [node] = [n for n in query.nodes if isinstance(n, p.JoinNode)]
    assert query.substream_key(node) is not None
    return query, node


class _KeyRecorder(_Recorder):
    def key_cti(self, port: int, key: Any, t: int) -> None:
        self.seen.append(("key_cti", t, key))


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(sequences(), st.data(), st.booleans())
def test_a_join_keeping_a_substream_key_run_one_key_at_a_time_gives_what_it_gives_over_all_keys_in_its_order(
    drawn: tuple[list[Step], list[int]],
    data: st.DataObject,
    residual: bool,
) -> None:
    """Key CTIs of either input put among the steps (each at most the start of the key's
    later events at that input). The driver's join, holding nothing, hears every input's CTI
    and key CTI and works out each key's output CTI (``operator.KeyCtis``: at a key CTI, or
    at a move of an input's CTI); each key, keyed by its substream key (``by_substream``),
    hears the output CTIs and its own output CTIs at both inputs (``KeyCti``), run batch by
    batch. The pairs a key's output CTI released, given out at its arrival through the
    driver's ``JoinTimeline`` and followed by it, and the rest as for any keyed join, are
    what the join over all keys emits, in its order."""
    steps: list[Any] = list(drawn[0])
    for _ in range(data.draw(st.integers(0, 8))):
        i = data.draw(st.integers(0, len(steps)))
        port, key = data.draw(st.integers(0, 1)), data.draw(st.integers(0, 2))
        later = [item.start for k, item in steps[i:] if k == key and isinstance(item, Insert) and item.port == port]
        bound = min(later, default=10 * SECOND)
        steps.insert(i, (key, KeyStep(port, key, data.draw(st.integers(0, max(0, bound))))))
    query, node = _join_keeping_the_key(residual)

    mode = TimestampMode()
    mode.saw(aware=True)
    reference = build_operator(Build(mode, query), node)
    recorder = _KeyRecorder()
    reference.connect(recorder, 0)
    for _, item in steps:
        if isinstance(item, KeyStep):
            reference.key_cti(item.port, item.key, item.t)
        else:
            feed_all_keys(reference, [item])

    # The driver's join (empty: it gets no events) and what it stages, in order.
    driver = build_operator(Build(mode, query), node)
    outs: list[tuple[int, int]] = []
    driver.emit_key_cti = lambda key, t: outs.append((key, t))
    staged: list[tuple[int, KeyedItem]] = []
    key_outs: dict[int, list[int]] = defaultdict(list)  # step -> the ``at`` of the key CTIs staged at it
    out_ctis: list[int] = []
    for index, (key, item) in enumerate(steps):
        if isinstance(item, (Insert, End)):
            staged.append((key, item))
            continue
        before = driver.out_cti
        if isinstance(item, KeyStep):
            driver.key_cti(item.port, item.key, item.t)
        else:
            driver.cti(item.port, item.t)
        if driver.out_cti > before:
            out_ctis.append(driver.out_cti)
            staged.append((-1, Cti(driver.out_cti)))
        for k, t in outs:
            at = 1_000_000 + len(staged)
            key_outs[index].append(at)
            staged.append((k, KeyCti(k, t, at)))
        outs.clear()

    keyed = KeyedOperator(query, node)
    states: dict[int, bytes] = {}
    results: list[KeyedResult] = []
    out = NEG_INF
    bounds = sorted({min(c, len(staged)) for c in drawn[1]} | {len(staged)})
    begin = 0
    for cut in bounds:
        per_key: dict[int, list[KeyedItem]] = defaultdict(list)
        for key in states:
            per_key[key]
        for key, item in staged[begin:cut]:
            if isinstance(item, Cti):
                out = item.t
                for items in per_key.values():
                    items.append(item)
                continue
            if key not in per_key:
                per_key[key].append(Cti(out))
            per_key[key].append(item)
        begin = cut
        for key, items in per_key.items():
            if not any(isinstance(i, (Insert, End, KeyCti)) for i in items):
                items = items[-1:]
            released, states[key] = keyed.run(states.get(key), items)
            results += released
            idle = keyed.idle()
            _check_next_release(keyed, states[key])
            if idle:
                del states[key]

    # The driver's side: as ``_driven``, and at each staged key CTI's arrival the pairs it
    # released, then the key CTI.
    before_cti: list[list[KeyedResult]] = [[] for _ in range(len(out_ctis) + 1)]
    told: dict[int, list[KeyedResult]] = defaultdict(list)
    for r in results:
        if r.ended:
            told[r.rank[0]].append(r)
        elif r.by_key is not None:
            told[r.by_key].append(r)
        else:
            for at, part in placed(node, r, out_ctis):
                before_cti[at].append(part)
    timeline = JoinTimeline()
    got: list[tuple[Any, ...]] = []
    oid = 0
    for index, (key, step) in enumerate(steps):
        if isinstance(step, End):
            ends = told.pop(step.at, [])
            if ends:
                got += [("end", o, end) for o, end in timeline.arrived(repr(key), ends)]
            continue
        if isinstance(step, PortCti):
            got += [("end", o, end) for o, end in timeline.move(step.port, step.t)]
            moved = min(timeline.ctis)
            if moved > timeline.out:
                for r in sorted(before_cti[out_ctis.index(moved)], key=lambda r: release_order(node, r, repr(r.payload.key))):
                    got.append(("pair", r.start, timeline.give(r, oid, repr(r.payload.key)), r.payload))
                    oid += 1
                got.append(("cti", moved))
                timeline.out = moved
        for at in key_outs.get(index, []):
            released = told.pop(at, [])
            for r in sorted((r for r in released if not r.key_cti), key=lambda r: release_order(node, r, "")):
                got.append(("pair", r.start, timeline.give(r, oid, repr(r.payload.key)), r.payload))
                oid += 1
            got += [("key_cti", r.start, r.payload) for r in released if r.key_cti]
    assert told == {}
    assert got == recorder.seen
