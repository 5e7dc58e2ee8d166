"""An anti-join run one join key at a time (``tempo.runtime.keyed``, the cluster engine's
keyed anti-join) gives what the anti-join over all keys gives, in its order.

The reference is the in-memory engine's anti-join fed a random sequence of points, intervals
and edges (start edges, each ended later or never) of both inputs, of several join keys (a
left event's key null now and then: never covered), and each input's own CTIs; what it emits (fragments, the ends of
fragments it gave out open, and output CTIs, in order) is the expected output. The keyed side
cuts the same sequence into random batches and runs each batch as the cluster engine's keys
run: a key with events hears the output CTI in force before each of them (each with its place
in the arrival order and its input), a key whose timer (``next_release``) the batch's last
output CTI reaches hears that CTI, every key from its saved state. The driver's
``AntiJoinTimeline``, fed every move of an input's CTI in order with the fragments the output
CTI releases (``placed``, in ``release_order``) and each right event's nearer ends at its
arrival, must emit what the reference emitted, item for item; each key's timer must be exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import EventShape, Stream
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.runtime.joins import AntiJoin
from tempo.runtime.operator import Operator
from tempo.runtime.build import Build
from tempo.runtime.engine import build_operator
from tempo.runtime.ingress import TimestampMode
from tempo.runtime.keyed import AntiJoinTimeline, Cti, End, Insert, KeyedItem, KeyedOperator, KeyedResult, pass_cti, placed, release_order
from tempo.ticks import INF, NEG_INF
from tests.budget import examples
from tests.test_keyed_join import PortCti, _check_next_release, _Recorder, feed_all_keys

SECOND = 1_000_000


@attrs.frozen
class Reading:
    key: int | None
    value: int


def _anti_join(residual: bool) -> tuple[Query, p.AntiJoinNode]:
    """Readings with no reading of their key on the right (and, with ``residual``, none of a
    value at least theirs)."""
    from tempo.sources import ArrowSource

    def readings(name: str) -> Stream[Reading]:
        table = pa.table(
            {"ts": pa.array([], pa.timestamp("us", tz="UTC")), "key": pa.array([], pa.int64()), "value": pa.array([], pa.int64())}
        )
        return Stream.create(name, ArrowSource(table, Reading, start="ts"), EventShape.INTERVAL)

    left, right = readings("left"), readings("right")
    if residual:
        anti = left.anti_join(right, lambda a, b: (a.key == b.key) & (a.value <= b.value))
    else:
        anti = left.anti_join(right, lambda a, b: a.key == b.key)
    query = Query.build(anti.node)
    [node] = [n for n in query.nodes if isinstance(n, p.AntiJoinNode)]
    return query, node


Step = Insert | End | PortCti


@st.composite
def sequences(draw: st.DrawFn) -> tuple[list[Step], list[int]]:
    """Events of both inputs (the ends of open ones among them), and each input's CTIs, in
    arrival order, and batch cuts."""
    steps: list[Step] = []
    ctis = [0, 0]
    open_events: list[Insert] = []
    for position in range(draw(st.integers(1, 50))):
        port = draw(st.integers(0, 1))
        if draw(st.integers(0, 3)) == 0:
            ctis[port] += draw(st.integers(0, 5)) * SECOND + draw(st.sampled_from([0, 1, SECOND // 2]))
            steps.append(PortCti(port, ctis[port]))
            continue
        if open_events and draw(st.integers(0, 3)) == 0:  # an end edge, at its input's CTI or later
            event = open_events.pop(draw(st.integers(0, len(open_events) - 1)))
            until = max(event.start + 1, ctis[event.port]) + draw(st.sampled_from([0, 0, 1, SECOND, 3 * SECOND]))
            steps.append(End(event.eid, until, at=position, port=event.port))
            continue
        key = draw(st.sampled_from([0, 1, 2, 3, 0, 1, None]))
        start = ctis[port] + draw(st.integers(0, 6)) * SECOND + draw(st.sampled_from([0, 0, 1]))
        length = draw(st.sampled_from([1, 1, SECOND, 3 * SECOND, 8 * SECOND, 40 * SECOND, None]))
        end = None if length is None else start + length  # None: open for ever, or till an end edge
        inserted = Insert(position, start, end, Reading(key, draw(st.integers(0, 4))), at=position, port=port)
        steps.append(inserted)
        if end is None and draw(st.booleans()):
            open_events.append(inserted)
    if draw(st.booleans()):
        steps += [PortCti(0, INF), PortCti(1, INF)]
    cuts = sorted(set(draw(st.lists(st.integers(0, len(steps)), max_size=6))) | {len(steps)})
    return steps, cuts


def _recorded(query: Query, node: p.Node) -> tuple[Operator, _Recorder]:
    """The in-memory engine's operator of ``node``, connected to a recorder."""
    mode = TimestampMode()
    mode.saw(aware=True)
    operator = build_operator(Build(mode, query), node)
    recorder = _Recorder("fragment")
    operator.connect(recorder, 0)
    return operator, recorder


def _reference(query: Query, node: p.Node, steps: list[Step]) -> list[tuple[Any, ...]]:
    """What ``node``'s operator over all keys emits, fed ``steps``."""
    operator, recorder = _recorded(query, node)
    feed_all_keys(operator, steps)
    return recorder.seen


def group_of(item: Insert) -> str | None:
    """The key an event goes to (as the cluster engine's feed names it): its join key, a left
    event of a null key its own, a right event of a null key none (it covers nothing)."""
    if item.payload.key is None:
        return None if item.port == 1 else f"null {item.eid}"
    return repr((item.payload.key,))


def _keyed(
    query: Query,
    node: p.Node,
    steps: list[Step],
    cuts: list[int],
    group_of: Callable[[Insert], str | None] = group_of,
    ends: bool = True,
    partner: p.AntiJoinNode | None = None,
) -> list[tuple[str, KeyedResult]]:
    """Every key's results (with its group), ``steps`` cut at ``cuts`` and run key by key,
    each event going to the key ``group_of`` names (None: none), its end (with ``ends``) too;
    with ``partner``, ``node``'s and the partner's operators as one (``KeyedOperator``)."""
    groups: dict[int, str | None] = {}
    keyed = KeyedOperator(query, node, partner=partner)
    states: dict[str, bytes] = {}
    timers: dict[str, int] = {}
    results: list[tuple[str, KeyedResult]] = []
    port_ctis = [NEG_INF, NEG_INF]
    begin = 0
    for cut in cuts:
        batch, begin = steps[begin:cut], cut
        rows: dict[str, list[KeyedItem]] = {}
        for item in batch:
            if isinstance(item, PortCti):
                port_ctis[item.port] = max(port_ctis[item.port], item.t)
                continue
            if isinstance(item, End):
                group = groups[item.eid] if ends else None
            else:
                group = groups[item.eid] = group_of(item)
            if group is not None:
                rows.setdefault(group, []).extend([Cti(min(port_ctis)), item])  # the output CTI in force first
        last = min(port_ctis)

        def run(group: str, items: list[KeyedItem]) -> None:
            released, state = keyed.run(states.get(group), items)
            results.extend((group, r) for r in released)
            due, idle = keyed.next_release(), keyed.idle()
            states[group] = state
            timers.pop(group, None)
            if due is not None:
                timers[group] = due
            _check_next_release(keyed, state)
            if idle:
                del states[group]  # forgotten, as the state store forgets it (its timer may stay)

        for group, items in rows.items():
            run(group, items)
        for group, due in sorted(timers.items()):
            if due <= last:  # its timer fires: it hears the batch's last output CTI
                run(group, [Cti(last)])
    return results


@settings(max_examples=examples(450), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(sequences(), st.booleans())
def test_an_anti_join_run_one_key_at_a_time_gives_what_it_gives_over_all_keys_in_its_order(
    drawn: tuple[list[Step], list[int]],
    residual: bool,
) -> None:
    steps, cuts = drawn
    query, node = _anti_join(residual)
    assert _driven(query, node, steps, cuts) == _reference(query, node, steps)


def _halves(residual: bool) -> tuple[Query, p.JoinNode, p.AntiJoinNode]:
    """A left outer join of readings by key (with ``residual``, of a value at least theirs):
    its join and its anti-join."""
    _, alone = _anti_join(residual)
    left, right = (Stream[Reading](n) for n in alone.inputs())
    on: Callable[[Any, Any], Any] = (lambda a, b: (a.key == b.key) & (a.value <= b.value)) if residual else (lambda a, b: a.key == b.key)
    query = Query.build(left.left_outer_join(right, on, lambda a, b: Reading(a.key, b.value), Reading(None, -1)).node)
    [join] = [n for n in query.nodes if isinstance(n, p.JoinNode)]
    [anti] = [n for n in query.nodes if isinstance(n, p.AntiJoinNode)]
    return query, join, anti


def _by_group(results: list[tuple[str, KeyedResult]]) -> dict[str, list[KeyedResult]]:
    grouped: dict[str, list[KeyedResult]] = {}
    for group, result in results:
        grouped.setdefault(group, []).append(result)
    return grouped


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(sequences(), st.booleans())
def test_a_join_and_its_anti_join_run_as_one_keyed_operator_give_what_each_gives_alone(
    drawn: tuple[list[Step], list[int]],
    residual: bool,
) -> None:
    """A left outer join's halves as one keyed operator (``KeyedOperator``'s partner, the
    cluster engine's ``BulkShape.partner``), keyed as the anti-join is: each key's results of
    each half, in order, are what that half gives run alone (the join's null-keyed left events
    in keys of their own, which it ignores). The pair's state is kept while either half holds
    something (``idle``), and the key's timer is the earlier of theirs (``next_release``,
    checked exact by ``_keyed``): a key whose join half is done but whose anti-join half still
    holds a fragment keeps it."""
    steps, cuts = drawn
    query, join, anti = _halves(residual)
    both = _by_group(_keyed(query, join, steps, cuts, partner=anti))
    anti_half = {g: [attrs.evolve(r, member=0) for r in rs if r.member == 1] for g, rs in both.items()}
    assert {g: rs for g, rs in anti_half.items() if rs} == _by_group(_keyed(query, anti, steps, cuts))
    join_half = {g: [r for r in rs if r.member == 0] for g, rs in both.items()}
    joined = _by_group(_keyed(query, join, steps, cuts, group_of=lambda item: None if item.payload.key is None else group_of(item)))
    assert {g: rs for g, rs in join_half.items() if rs} == joined


def _run_both(steps: list[Step], cuts: list[int], residual: bool = False) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(what the anti-join over all keys emits, what the keys and the driver emit)."""
    query, node = _anti_join(residual)
    return _reference(query, node, steps), _driven(query, node, steps, cuts)


def _driven(query: Query, node: p.AntiJoinNode, steps: list[Step], cuts: list[int]) -> list[tuple[Any, ...]]:
    """What the keys (run batch by batch, ``steps`` cut at ``cuts``) and the driver's
    ``AntiJoinTimeline`` emit together."""
    results = _keyed(query, node, steps, cuts)
    ctis: list[int] = []
    port_ctis = [NEG_INF, NEG_INF]
    for step in steps:
        if isinstance(step, PortCti):
            port_ctis[step.port] = max(port_ctis[step.port], step.t)
            if min(port_ctis) > (ctis[-1] if ctis else NEG_INF):
                ctis.append(min(port_ctis))
    released: list[list[tuple[tuple[Any, ...], str, KeyedResult]]] = [[] for _ in range(len(ctis) + 1)]
    nearer: dict[int, list[tuple[str, KeyedResult]]] = {}
    for group, result in results:
        if result.ended:  # a nearer end, at the arrival of the right event that brought it
            nearer.setdefault(result.rank[0], []).append((group, result))
            continue
        assert result.end is None or result.end > result.start
        for at, part in placed(node, result, ctis):
            released[at].append((release_order(node, part, group), group, part))
    assert released[-1] == []  # every fragment goes out at an output CTI past its start
    # The driver: every move of an input's CTI and every right event's arrival, in order.
    anti, recorder = _recorded(query, node)
    assert isinstance(anti, AntiJoin)
    timeline = AntiJoinTimeline()
    for step in steps:
        if isinstance(step, PortCti):
            if step.t <= timeline.ctis[step.port]:
                continue
            out = min(step.t if step.port == i else timeline.ctis[i] for i in (0, 1))
            moved = out > timeline.out
            fragments = [(g, r) for _, g, r in sorted(released[ctis.index(out)], key=lambda r: r[0])] if moved else []
            timeline.move(anti, step.port, step.t, out, fragments)
            if moved:
                pass_cti(anti, out)
            continue
        ends = nearer.pop(step.at, [])
        if ends:
            assert len({g for g, _ in ends}) == 1
            timeline.arrived(anti, ends[0][0], [r for _, r in ends])
    assert nearer == {}
    return recorder.seen


def test_fragments_ended_by_the_right_inputs_cti_alone_end_in_the_order_the_anti_join_holds_them() -> None:
    """A's first fragment ends in the sweep to 10 and its second opens in that sweep: A keeps
    its place before B among the open fragments, so the right CTI's move to 30, which the
    output CTI (held at 10 by the left input) does not follow, ends A's before B's."""
    a, b = Reading(0, 0), Reading(1, 0)
    steps: list[Step] = [
        Insert(0, 0, 100, a, at=0, port=0),
        Insert(1, 0, 100, b, at=1, port=0),
        PortCti(0, 10),
        PortCti(1, 1),  # output CTI 1: A and B open from 0
        Insert(4, 5, 6, Reading(0, 9), at=4, port=1),  # covers A over [5, 6)
        PortCti(1, 10),  # output CTI 10: A's first ends at 5, its second opens at 6
        Insert(6, 20, 21, Reading(1, 9), at=6, port=1),  # B's end: 20, once the right CTI passes it
        Insert(7, 20, 21, Reading(0, 9), at=7, port=1),  # A's second's end: 20
        PortCti(1, 30),  # the right CTI alone: both ends final, A's first
    ]
    expected = [
        ("fragment", 0, None, a),
        ("fragment", 0, None, b),
        ("cti", 1),
        ("end", 0, 5),
        ("fragment", 6, None, a),
        ("cti", 10),
        ("end", 2, 20),
        ("end", 1, 20),
    ]
    for cuts in ([len(steps)], list(range(1, len(steps) + 1)), [3, 6, len(steps)]):
        reference, driven = _run_both(steps, cuts)
        assert reference == expected
        assert driven == expected


def test_a_cut_of_an_open_left_edges_fragment_waits_until_the_left_cannot_end_before_it() -> None:
    """b>>@20 (an open edge), the left CTI at 25; a right point at 30 and the right CTI at 35:
    b may still end before 30, so its fragment stays open until b's end arrives (at 27: ended
    there; at 40: the cut at 30 is final then, told to the driver though not nearer) or the
    left CTI reaches 30 (docs/semantics.md 5.9)."""
    b = Reading(0, 0)
    opening: list[Step] = [
        Insert(0, 20, None, b, at=0, port=0),
        PortCti(0, 25),
        Insert(2, 30, 31, Reading(0, 9), at=2, port=1),
        PortCti(1, 35),  # output CTI 25: b's fragment opens at 20
    ]
    for then, end in ((End(0, 27, at=4, port=0), 27), (End(0, 40, at=4, port=0), 30), (PortCti(0, 30), 30)):
        steps = [*opening, then]
        expected = [("fragment", 20, None, b), ("cti", 25), ("end", 0, end)] + ([("cti", 30)] if isinstance(then, PortCti) else [])
        for cuts in ([len(steps)], list(range(1, len(steps) + 1)), [4, len(steps)]):
            reference, driven = _run_both(steps, cuts)
            assert reference == expected
            assert driven == expected
    reference, driven = _run_both(opening, [len(opening)])
    assert reference == driven == [("fragment", 20, None, b), ("cti", 25)]
