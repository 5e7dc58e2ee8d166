"""A live engine's micro-batch computed in bulk, with the same result as item by item.

``LiveEngine`` processes a batch one item at a time: exact, but one Python call chain per
event. For the queries of one shape (``bulk_shape``: inputs without ordering settings, whose
CTIs are their own or imported from one whose are, and whose events reach one hopping or
tumbling window aggregate through stateless operators and unions, and at most one join of
them all; anything may follow the window), a large batch can instead be computed in bulk by
an executor (Spark's compiled plan) and put into the same engine state, so that the next
batch may go either way:

1. ``plan_batch``: each input's time rules over whole columns (numpy). An event's fate
   depends only on the CTI in force when it arrives, and with count or time-span
   generation that CTI is a running maximum over the rows before it: no row's verdict
   feeds back into generation (every received event counts, admitted or not). The plan
   names the rows that matter one by one (**special rows**: those that generate a CTI,
   CTI rows, and late rows, which the policy drops or moves) and the lifetimes of the
   moved ones. Rows that break a rule of their own are not planned: the batch is then run
   item by item, which raises the error the in-memory executor gives.
2. The executor computes, over the admitted events (moved ones at their new lifetimes),
   the stateless operators and each window's **partial aggregates** per window and group,
   with the first event that reached it in the merged arrival order (``Partial``). With a
   join, the executor also gets the join's state (``join_before``) and computes the pairs
   the batch makes; those its CTIs release go on to the window (``JoinBefore`` states why
   and in what order), the others and the events the join still holds come back
   (``JoinAfter``).
3. ``apply_batch``: the partials are merged into the window operator's open windows (in
   order of first event, so groups are kept, and later emitted, in the order item by item
   gives), then the special rows go through their input's own ``Ingress`` in the merged
   arrival order: rejections are recorded with the CTI in force, and each CTI moves
   through the operators, closing windows and releasing results, exactly as item by item.

With several inputs, item by item processes the items of all inputs in one sequence, by
(arrival, declaration order, position), up to the arrival frontier (``tempo.runtime.live``).
A batch goes in bulk when nothing but heartbeats is held at the frontier before it and
after it (``frontier_cut``), as when every input's source adds a heartbeat at its clock.

Why merging before the CTIs is exact: an event admitted after its input's CTI ``c`` starts
at or after ``c``, so it only reaches windows ending after ``c``, which no CTI up to ``c``
closes; stateless operators keep that (a shift moves events and CTIs alike), and a union's
CTI is the lower of its inputs'. The one difference: float sums
and averages combine a batch's values in the executor's order, not one by one (as on batch
Spark; docs/spark.md, "Known differences").
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, cast

import attrs

from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.clocks import TimeDomain
from tempo.plan.windows import HoppingWindow, SessionWindow, WindowTimestamp
from tempo.runtime.codegen import canonical_key
from tempo.runtime.joins import Join
from tempo.runtime.release_queues import ByStart
from tempo.runtime.windows import Window
from tempo.runtime.ingress import CTI, HEARTBEAT, INTERVAL, POINT, Prepared
from tempo.runtime.verdicts import GenerationState, adjusted, generation, in_force
from tempo.runtime.policy import TimePolicy
from tempo.events import EventShape
from tempo.sources import TableSource
from tempo.ticks import INF, NEG_INF, add

if TYPE_CHECKING:
    from tempo.runtime.live import LiveEngine

STATELESS = (p.WhereNode, p.SelectNode, p.AlterLifetimeNode)
"""Operators whose output events depend on one input event each (and CTIs likewise)."""
KEY_TYPES = (int, float, str, bool)
JOIN_KEY_TYPES = (int, str, bool)
"""Join keys Spark compares as Python's dict does (a float NaN equals itself in Spark, not in
a dict; a bool meets an int as the number it is on both)."""
WHY_NOT = (
    "only a window aggregate over the inputs through where / select / shift / union operators, "
    "and at most one join below it, is computed in bulk"
)
ARGUMENT_TYPES = (int, float)


N = TypeVar("N", bound=p.Node, covariant=True)
"""The stateful node of a ``BulkShape``."""


@attrs.frozen
class BulkShape(Generic[N]):
    """A query whose batches can be computed in bulk: its inputs, its window (or the one
    stateful node every input reaches, ``reaching_shape``) and the join below it, if any."""

    sources: tuple[p.SourceNode, ...]
    """The query's inputs, in declaration order."""
    window: N
    position: int
    """The window's place among the query's nodes (and the live engine's operators)."""
    join: p.JoinNode | None = None
    join_position: int = -1
    partner: p.AntiJoinNode | None = None
    """The cluster engine's: an anti-join run in one keyed operator with the join in the
    window's place (a left outer join's two halves), or None."""
    partner_position: int = -1


def window_shape(query: Query, planned: bool = True) -> BulkShape[p.WindowNode] | str:
    """The query's inputs, its one window and the join below it, when every input's events
    reach that window through stateless operators and unions (and at most one join of them
    all) and (``planned``) every input's time rules can be planned over whole columns; else
    why not. What the window and the join may be is for each engine to say (``bulk_shape``)."""
    shape = reaching_shape(query, planned, (p.WindowNode,))
    return shape if isinstance(shape, str) else cast("BulkShape[p.WindowNode]", shape)


def reaching_shape(
    query: Query,
    planned: bool,
    kinds: tuple[type[p.UnaryNode], ...],
    by_substream: bool = False,
) -> BulkShape[p.UnaryNode] | str:
    """``window_shape`` for a stateful node of one of ``kinds`` in the window's place
    (``by_substream``: as ``reaching_checks`` takes it)."""
    for source in query.sources:
        policy = TimePolicy.of_input(source)
        if planned and policy.ordered:
            return f"input {source.name!r} has ordering settings (arrival-time rules)"
        if planned and policy.import_from is not None:
            exporter = next(s for s in query.sources if s.name == policy.import_from)
            if TimePolicy.of_input(exporter).import_from is not None:
                return f"input {source.name!r} imports the CTIs of {policy.import_from!r}, which are not all its own"
        if planned and source.shape is EventShape.EDGE:
            return f"input {source.name!r} is of edges"
        if planned and (not isinstance(source.source, TableSource) or source.source.dense_order_from is not None):
            return f"input {source.name!r} holds rows after gaps in its dense order"
        if planned and source.time is not TimeDomain.EVENT:
            return f"input {source.name!r} is stamped as it is read (ingestion or processing time)"
    # Every input's events must reach the one window through stateless operators and unions
    # (or these and one join of them all), each with no other consumer: what is above the
    # window (any operators) sees only its results, which the engine's own window operator
    # emits either way.
    consumers = consumers_of(query)

    def climb(node: p.Node, through: tuple[type, ...]) -> p.Node:
        while isinstance(node, through) and len(consumers[id(node)]) == 1:
            node = consumers[id(node)][0]
        return node

    reached = [climb(source, (p.SourceNode, p.UnionNode, *STATELESS)) for source in query.sources]
    join = reached[0] if isinstance(reached[0], p.JoinNode) and all(node is reached[0] for node in reached) else None
    if join is not None:
        # One join of whole subtrees: what reaches the window is only the pairs it emits.
        above = consumers[id(join)]
        reached = [climb(above[0], STATELESS) if len(above) == 1 else join]
    window = reached[0]
    if not isinstance(window, kinds) or any(node is not window for node in reached):
        return WHY_NOT
    position = {id(n): i for i, n in enumerate(query.nodes)}
    shape = BulkShape(tuple(query.sources), window, position[id(window)], join, -1 if join is None else position[id(join)])
    return reaching_checks(query, shape, by_substream)


def consumers_of(query: Query) -> dict[int, list[p.Node]]:
    """Each node's consumers in ``query``, by the node's ``id``."""
    consumers: dict[int, list[p.Node]] = {id(n): [] for n in query.nodes}
    for n in query.nodes:
        for child in n.inputs():
            consumers[id(child)].append(n)
    return consumers


def reaching_checks(query: Query, shape: BulkShape[N], by_substream: bool = False) -> BulkShape[N] | str:
    """``shape``, or why its stateful node cannot run apart from the rest: it keeps a
    substream key (its CTIs are per key; but a release by that key, ``ReleaseNode.keyed_by``,
    and, ``by_substream``, for an engine that runs such a node keyed by that key and feeds
    each key its own CTIs, any node keeping one of the types a join key takes:
    ``tempo.runtime.keyed.by_substream``), or a group key of a type not keyed alike everywhere."""
    window = shape.window
    kept = query.substream_key(window)
    if kept is not None and not p.keyed_release(window):  # a keyed release goes by the key's CTIs
        what = "window" if isinstance(window, p.WindowNode) else type(window).__name__.removesuffix("Node")
        if not by_substream:
            return f"its {what} keeps a substream key"
        if kept.dtype not in JOIN_KEY_TYPES:
            return f"its {what}'s substream key is of type {kept.dtype.__name__}"
    for key in getattr(window, "keys", None) or ():
        if key.dtype not in KEY_TYPES:
            return f"a group key is of type {key.dtype.__name__}"
    return shape


def bulk_shape(query: Query) -> BulkShape[p.WindowNode] | str:
    """The query's ``BulkShape``, or why its batches must go item by item."""
    shape = window_shape(query)
    if isinstance(shape, str):
        return shape
    join, window = shape.join, shape.window
    if join is not None:
        if query.substream_key(join) is not None:
            return "its join keeps a substream key"
        for pair in join.keys:
            for key in pair:
                if key.dtype not in JOIN_KEY_TYPES:
                    return f"a join key is of type {key.dtype.__name__}"
    if window.timestamp is not WindowTimestamp.LIFETIME and isinstance(window.spec, HoppingWindow):
        return f"its window's results are stamped {window.timestamp.name}"
    why = unmergeable(window)
    return shape if why is None else why


def unmergeable(window: p.WindowNode) -> str | None:
    """Why the window's aggregates over part of its events cannot be computed apart and
    merged into its state (``Partial``, ``tempo.runtime.windows.Window.merge``), or None."""
    if not isinstance(window.spec, HoppingWindow):
        return f"its window is {window.spec.describe()}"
    if window.timestamp in (WindowTimestamp.EARLIEST, WindowTimestamp.LATEST):
        return f"its results are stamped at an event ({window.timestamp.name}), whose start the partial aggregates do not carry"
    return _aggregates_unmergeable(window)


def runs_unmergeable(window: p.WindowNode) -> str | None:
    """Why a session window cannot take a batch's events of a group as runs, each run's
    aggregates computed apart (``tempo.runtime.event_windows.Sessions.merge_run``), or None."""
    if not isinstance(window.spec, SessionWindow):
        return f"its window is {window.spec.describe()}"
    if window.spec.max_duration is not None:
        return "its sessions are cut at a max_duration, which may fall inside a run"
    return _aggregates_unmergeable(window)


def _aggregates_unmergeable(window: p.WindowNode) -> str | None:
    for a in window.aggregates:
        if not a.kind.mergeable:
            return f"it aggregates {a.kind}, which the bulk path does not merge"
        if a.arg is not None and a.arg.dtype not in ARGUMENT_TYPES:
            return f"an aggregate's argument is of type {a.arg.dtype.__name__}"
    return None


@attrs.frozen
class BatchPlan:
    """What an input's time rules make of its rows of one batch (in input order)."""

    index: int
    """The input's place among the query's inputs."""
    rows: int
    special: list[int]
    """Rows to go through the ingress one by one: CTI rows, rows generating a CTI, late rows."""
    moved: dict[int, tuple[int, int]]
    """Late rows the policy moves: their admitted lifetime."""
    dropped: frozenset[int]
    """Late rows the policy drops."""
    events: int
    """Received events (points and intervals) in the batch."""
    kinds: Any
    starts: Any
    ends: Any
    arrivals: Any
    events_before: Any
    """Per row, the received events of the batch before it."""
    orders: Any
    last_order: int | None
    """The input's largest order value after the batch (``tempo.runtime.live.order_value``)."""
    first_position: int
    cti: int
    """The input's CTI after the batch."""
    ctis: Any
    """Its CTI after each row, from its own rows (what an importer takes)."""
    added: int = 0
    """1 when the batch's last row is a heartbeat the source added (``RowFeed.positioned``):
    it takes no position."""

    def arrival(self, row: int) -> int:
        """Row ``row``'s arrival (the earliest without an arrival column, as item by item)."""
        return NEG_INF if self.arrivals is None else int(self.arrivals[row])

    @property
    def late(self) -> list[int]:
        """Rows starting before the CTI in force (dropped or moved): the executor gives their payloads."""
        return sorted(self.dropped | self.moved.keys())


def plan_order(shape: BulkShape[Any]) -> list[tuple[int, int | None]]:
    """The inputs in the order their batch plans are made, each with the input whose CTIs it
    imports (``plan_batch``'s ``exporter``), which comes before it."""
    index = {node.name: i for i, node in enumerate(shape.sources)}
    exporters = [TimePolicy.of_input(node).import_from for node in shape.sources]
    return sorted(((i, None if e is None else index[e]) for i, e in enumerate(exporters)), key=lambda pair: pair[1] is not None)


def plan_batch(
    engine: LiveEngine,
    index: int,
    kinds: Any,
    starts: Any,
    ends: Any,
    arrivals: Any | None,
    orders: Any,
    exporter: BatchPlan | None = None,
) -> BatchPlan | str:
    """The plan of input ``index``'s rows of one batch, or why they must go item by item.
    The columns are numpy arrays in input order (``orders`` ascending); ``ends`` of points
    are their start + 1 and ``arrivals`` None when the input has no arrival column. With
    imported CTIs, ``exporter`` is the plan of the input they come from: its CTIs reach this
    one in the merged arrival order. Pure: the engine's state is read, not changed."""
    import numpy as np

    ingress, feed = engine.ingresses[index], engine.feeds[index]
    node = engine.query.sources[index]
    n = len(kinds)
    if n and (np.any(np.diff(orders) <= 0) or (feed.last_order is not None and orders[0] <= feed.last_order)):
        return "the order column repeats or goes back"
    event_kind = POINT if node.shape is EventShape.POINT else INTERVAL
    is_event = kinds == event_kind
    is_cti = kinds == CTI
    if not np.all(is_event | is_cti | (kinds == HEARTBEAT)):
        return "a row of another kind"
    if np.any(is_event & ((starts >= INF) | (ends <= starts) | (ends >= INF))):
        return "an event with a bad or open lifetime"
    if arrivals is not None:
        if n and (arrivals[0] < feed.sequence.last_arrival or np.any(np.diff(arrivals) < 0)):
            return "arrival times going back"
    elif np.any(kinds == HEARTBEAT):
        return "a heartbeat row without arrival times"
    cti0 = ingress.cti
    generated = generation(TimePolicy.of_input(node), starts, is_event, GenerationState(ingress.count, ingress.last_period))
    generates = generated.generates
    before_rows, after = in_force(np.where(is_cti, starts, generated.candidates), cti0)
    final = int(after[-1]) if n else cti0
    if exporter is not None and exporter.rows:
        # The exporter's CTI after each of its rows reaches this input before its rows that
        # come later in the merged order (arrival, then declaration order).
        if arrivals is None or exporter.arrivals is None:
            return "imported CTIs without arrival times"  # item by item names the rule
        before = np.searchsorted(exporter.arrivals, arrivals, side="right" if exporter.index < index else "left")
        imported = np.where(before > 0, exporter.ctis[np.maximum(before - 1, 0)], NEG_INF)
        before_rows = np.maximum(before_rows, imported)
        final = max(final, exporter.cti)
    late_mask = is_event & (starts < before_rows)
    late = np.flatnonzero(late_mask)
    if len(late) and not ingress.has_policy:
        return "an event breaks the CTI rule on an input without a policy"
    moved: dict[int, tuple[int, int]] = {}
    dropped: list[int] = []
    if len(late):
        kept, moved_start, moved_end = adjusted(kinds[late] == POINT, ends[late], before_rows[late])
        kept &= ingress.adjust
        dropped = late[~kept].tolist()
        moved = dict(zip(late[kept].tolist(), zip(moved_start[kept].tolist(), moved_end[kept].tolist())))
    special_mask = generates | is_cti | late_mask
    if ingress.period and ingress.last_period is None and np.any(is_event):
        special_mask[int(np.argmax(is_event))] = True  # the input's first event sets the period
    events_before = np.cumsum(is_event) - is_event
    return BatchPlan(
        index,
        n,
        np.flatnonzero(special_mask).tolist(),
        moved,
        frozenset(dropped),
        int(np.count_nonzero(is_event)),
        kinds,
        starts,
        ends,
        arrivals,
        events_before,
        orders,
        int(orders[-1]) if n else feed.last_order,
        feed.next_position,
        final,
        after,
        n - feed.positioned(n, int(kinds[-1]), int(orders[-1])) if n else 0,
    )


@attrs.frozen
class FrontierCut:
    """Where item by item stops a batch at the arrival frontier (``LiveEngine.run``): only
    heartbeats may be held (they do nothing but move their input's arrival), else the
    batch goes item by item."""

    released: list[int]
    """Per input, how many of the heartbeats held from before the batch now go."""
    held: list[list[int]]
    """Per input, its rows of the batch held at the frontier (heartbeats), in input order."""


TAIL_LIMIT = 10_000
"""Rows near the frontier worked out one by one; a batch with more (inputs without arrival
times, which hold each other back until they end) goes item by item."""


def frontier_cut(engine: LiveEngine, plans: list[BatchPlan]) -> FrontierCut | None:
    """What item by item would hold at the arrival frontier after the batch (``plans``, one
    per input), or None when that is not only heartbeats.

    Items are processed in the merged order (arrival, input, position) until the first that
    an input may still precede: one with no item left whose arrival so far is earlier (or
    the same, for an input declared before). Since the order goes by arrival, only items
    arriving at or after the earliest of the inputs' latest arrivals can be held."""
    buffers = engine.buffers
    if any(rec[1] != HEARTBEAT for buffer in buffers for rec in buffer):
        return None
    count = len(plans)
    if count == 1:  # nothing holds an only input back
        return FrontierCut([len(buffers[0])], [[]])
    reached = list(engine.reached)
    for plan in plans:
        if plan.rows and plan.arrivals is not None:
            reached[plan.index] = max(reached[plan.index], int(plan.arrivals[-1]))
    low = min(reached)
    tail: list[tuple[int, int, int, int, int]] = []  # (arrival, input, 0 held before / 1 in the batch, place, kind)
    for plan in plans:
        i = plan.index
        tail += [(rec[0], i, 0, n, HEARTBEAT) for n, rec in enumerate(buffers[i]) if rec[0] >= low]
        if plan.rows:
            first = 0 if plan.arrivals is None else int(plan.arrivals.searchsorted(low))
            if plan.rows - first > TAIL_LIMIT:
                return None
            tail += [(plan.arrival(r), i, 1, r, int(plan.kinds[r])) for r in range(first, plan.rows)]
    tail.sort()
    last = [-1] * count  # each input's last place in the tail
    for m, item in enumerate(tail):
        last[item[1]] = m
    cut = len(tail)
    for m, (arrival, i, *_) in enumerate(tail):
        if any(j != i and m > last[j] and arrival >= reached[j] + (1 if j > i else 0) for j in range(count)):
            cut = m
            break
    if any(item[4] != HEARTBEAT for item in tail[cut:]):
        return None
    released = [len(b) - sum(1 for item in tail[cut:] if item[1] == i and item[2] == 0) for i, b in enumerate(buffers)]
    held: list[list[int]] = [[] for _ in plans]
    for item in tail[cut:]:
        if item[2] == 1:
            held[item[1]].append(item[3])
    return FrontierCut(released, held)


Position = tuple[int, int, int, int]
"""An event's place in the order a join received its events: ``(0, rank, 0, 0)`` for one a
side held before the batch (``rank``: its place among those), ``(1, arrival, input, order)``
for one of the batch (its place in the merged arrival order)."""

HeldEvent = tuple[int, int, Any]
"""An event a join side holds: (start, end, payload)."""


@attrs.frozen
class JoinBefore:
    """What an executor needs of the join's state to compute a batch in bulk (``join_before``).

    The join pairs an event with those of the other side it overlaps when the later of the
    two arrives, and pushes the pair to wait by start; a CTI emits the waiting pairs starting
    before it, in order of (start, push). Which pairs a batch makes does not depend on when
    the join forgets an event (its end at or before the other side's CTI: nothing arriving
    later can overlap it), so they are all the overlapping, matching pairs of an event of
    the batch and one held or of the batch; each is pushed as the later arrives, after its
    partners received before (``Position``); the batch's CTIs release those starting before
    the join's output CTI after the batch (``min(ctis)``), in order of
    ``(start, later position, earlier position)``."""

    sides: tuple[list[HeldEvent], list[HeldEvent]]
    """The events each side holds before the batch, in the order received (their rank)."""
    released: list[tuple[int, int, Any]]
    """The pairs waiting before the batch that its CTIs release, in emission order (their
    rank): (start, end, output payload)."""
    ctis: tuple[int, int]
    """Each side's CTI after the batch."""

    @property
    def out_cti(self) -> int:
        """The join's output CTI after the batch: pairs starting before it are released."""
        return min(self.ctis)


@attrs.frozen
class JoinAfter:
    """What an executor found of the batch's own join events and pairs (see ``JoinBefore``)."""

    held: tuple[list[tuple[Position, int, int, Any]], list[tuple[Position, int, int, Any]]]
    """Per side, the batch's events it still holds after the batch (their end after the other
    side's CTI): (position, start, end, payload), in any order."""
    pending: list[tuple[tuple[Position, Position], int, int, Any, int, int, Any]]
    """The batch's pairs still waiting after it: (their push, as (later position, earlier
    position); the left event's start, end, payload; the right event's), in any order."""
    released: int
    """How many of the batch's pairs its CTIs release."""


def released_key(rank: int, start: int) -> tuple[int, Position, Position]:
    """The emission order of the ``rank``-th pair of ``JoinBefore.released``: before the
    batch's own pairs of the same start, which are ``(start, later, earlier)``."""
    return start, (0, rank, 0, 0), (0, 0, 0, 0)


def join_before(engine: LiveEngine, shape: BulkShape[Any], plans: list[BatchPlan]) -> JoinBefore:
    """The join's state before the batch (``plans``), as an executor needs it. Pure."""
    join = engine.operators[shape.join_position]
    assert isinstance(join, Join) and shape.join is not None
    finals = {shape.sources[plan.index].name: plan.cti for plan in plans}
    ctis = (
        max(join.sides[0].cti, _last_cti(shape.join.left, finals)),
        max(join.sides[1].cti, _last_cti(shape.join.right, finals)),
    )
    out = min(ctis)
    released = [(start, min(left[2], right[2]), join.projection(left[3], right[3])) for start, left, right in _waiting(join) if start < out]
    return JoinBefore(
        (
            [(rec[1], rec[2], rec[3]) for rec in join.sides[0].by_id.values()],
            [(rec[1], rec[2], rec[3]) for rec in join.sides[1].by_id.values()],
        ),
        released,
        ctis,
    )


def _waiting(join: Join) -> list[tuple[int, list[Any], list[Any]]]:
    """The join's waiting pairs in emission order: (start, left event, right event)."""
    pending = join.pending
    assert isinstance(pending, ByStart)  # bulk_shape refuses a join keeping a substream key
    return [(start, left, right) for start, _, left, right in pending.entries()]


def _last_cti(node: p.Node, finals: dict[str, int]) -> int:
    """The last CTI ``node`` has passed on after the batch (``NEG_INF``: none), from its
    inputs' CTIs ``finals``, by where / select / shift (which pass each CTI on, shifted) and
    union (the lower of its inputs' last ones) operators."""
    if isinstance(node, p.SourceNode):
        return finals[node.name]
    if isinstance(node, (p.WhereNode, p.SelectNode)):
        return _last_cti(node.input, finals)
    if isinstance(node, p.AlterLifetimeNode):
        t = _last_cti(node.input, finals)
        return t if t <= NEG_INF else add(t, node.shift)
    assert isinstance(node, p.UnionNode)
    return min(_last_cti(node.left, finals), _last_cti(node.right, finals))


def _put_join(engine: LiveEngine, shape: BulkShape[Any], before: JoinBefore, after: JoinAfter) -> None:
    """Leave the join as item by item would after the batch: each side holds the events that
    end after the other side's CTI, the pairs not released wait."""
    join = engine.operators[shape.join_position]
    assert isinstance(join, Join)
    held: list[list[list[Any]]] = []
    for port, side in enumerate(join.sides):
        other = before.ctis[1 - port]
        recs = [rec for rec in side.by_id.values() if rec[2] > other]
        key_of = join.key_fns[port] if join.key_fns else None
        for (_, _, i, order), start, end, payload in sorted(after.held[port], key=lambda e: e[0]):
            key = key_of(payload) if key_of else ()
            if None not in key:  # an event with a null key matches nothing and is not held
                # Its id only keys it in the side (closed events get no end): (input, order)
                # is unique there and never one of the query's own ids.
                recs.append([(i, order), start, end, payload, key, ()])
        held.append(recs)
    out = before.out_cti
    pending = [(start, left, right) for start, left, right in _waiting(join) if start >= out]
    for _, ls, le, lp, rs, re, rp in sorted(after.pending, key=lambda pair: (max(pair[1], pair[4]), pair[0])):
        pending.append((max(ls, rs), [None, ls, le, lp, (), ()], [None, rs, re, rp, (), ()]))
    join.restate((held[0], held[1]), pending)


First = Any
"""A window group's first event: its place in the order the window receives them, comparable
within a batch. Events reaching the window from the inputs: ``(arrival, input, order)``, their
place in the merged arrival order; from a join: the pair's emission order (``JoinBefore``)."""

Partial = tuple[int, tuple[Any, ...], First, int, tuple[Any, ...]]
"""One window and group's aggregates over a batch's events (``Accumulator.merge``):
``(window, group key, first, count, values)``. ``first`` is the place of the first event
that reached it (groups are kept in this order); ``values``, per aggregate with an
argument, its sum, min or max (None without a value), or for an average (total, count of
values)."""


def apply_batch(
    engine: LiveEngine,
    shape: BulkShape[Any],
    plans: list[BatchPlan],
    cut: FrontierCut,
    payloads: dict[tuple[int, int], Any],
    partials: Iterable[Partial],
    t_max: int | None,
    renamed: int,
    join: tuple[JoinBefore, JoinAfter] | None = None,
) -> None:
    """Put a batch computed in bulk into ``engine``: the window's partials, then the special
    rows through their ingresses in the merged arrival order, and the heartbeats ``cut``
    holds at the frontier. ``payloads``: the late rows' payloads, by (input, row);
    ``renamed``: how many events the batch brought to a union's second input (each takes a
    fresh event id there); ``join``: the join's state before the batch and what the executor
    found of the batch's join events and pairs."""
    window = engine.operators[shape.position]
    assert isinstance(window, Window)
    for k, key, _, n, values in sorted(partials, key=lambda part: (part[0], part[2])):
        window.merge(grouped_key(key), k, n, values, NEG_INF)
    if t_max is not None and t_max > window.t_max:
        window.t_max = t_max
    if join is not None:  # before the CTIs: they find the released pairs gone
        _put_join(engine, shape, *join)
    apply_times(engine, plans, cut, payloads, renamed + (0 if join is None else len(join[0].released) + join[1].released))


def grouped_key(key: Sequence[Any]) -> tuple[Any, ...]:
    """A group key an executor grouped by, as the in-memory engine keys it: a float as
    ``canonical_key`` makes it (one NaN object, 0.0 for -0.0), whichever engine grouped."""
    return tuple(canonical_key(v) if isinstance(v, float) else v for v in key)


def apply_times(engine: LiveEngine, plans: list[BatchPlan], cut: FrontierCut, payloads: dict[tuple[int, int], Any], ids: int) -> None:
    """The time part of ``apply_batch``: the batch's special rows through their ingresses in
    the merged arrival order (rejections recorded, CTIs through the operators), then each
    input's counts, positions and arrival, the heartbeats ``cut`` holds at the frontier, and
    the event ids the batch's events took, beyond ``ids`` more (renamed events, join pairs).
    The cluster engine applies only this: its window's events go to Spark's executors."""
    counts = [engine.ingresses[plan.index].count for plan in plans]
    special = sorted((plan.arrival(i), n, i) for n, plan in enumerate(plans) for i in plan.special)
    special_events = [0] * len(plans)
    for _, n, i in special:
        plan = plans[n]
        ingress = engine.ingresses[plan.index]
        kind, start = int(plan.kinds[i]), int(plan.starts[i])
        if kind == CTI:
            ingress.advance(start, "explicit")
            continue
        special_events[n] += 1
        rec: Prepared = (plan.arrival(i), kind, start, int(plan.ends[i]), payloads.get((plan.index, i)), plan.first_position + i, None)
        if ingress.every_n:  # the count generation goes by (time-span generation keeps its own)
            ingress.count = counts[n] + int(plan.events_before[i])
        ingress.metrics.received += 1
        admitted = ingress.verdict(rec)
        expected = None if i in plan.dropped else plan.moved.get(i, (start, int(plan.ends[i])))
        if admitted != expected:
            raise AssertionError(f"bulk ingress: row {rec[5]} of input {ingress.name!r} planned {expected}, the ingress gives {admitted}")
        ingress.generate(start)
    for n, plan in enumerate(plans):
        ingress, feed = engine.ingresses[plan.index], engine.feeds[plan.index]
        plain = plan.events - special_events[n]
        if ingress.every_n:
            ingress.count = counts[n] + plan.events
        ingress.metrics.received += plain
        ingress.metrics.admitted += plain
        ids += plan.events - len(plan.dropped)
        feed.next_position = plan.first_position + plan.rows - plan.added
        feed.last_order = plan.last_order
        if plan.arrivals is not None and plan.rows:
            feed.sequence.last_arrival = max(feed.sequence.last_arrival, int(plan.arrivals[-1]))
            engine.reach(plan.index, feed.sequence.last_arrival)
        buffer = engine.buffers[plan.index]
        for _ in range(cut.released[plan.index]):
            buffer.popleft()  # heartbeats: nothing to do
        for r in cut.held[plan.index]:
            arrival = plan.arrival(r)
            buffer.append((arrival, HEARTBEAT, arrival, arrival, None, plan.first_position + r, None))
    deque(itertools.islice(engine.build.ids, ids), maxlen=0)  # their event ids


class BatchEngine(Protocol):
    """An executor's way of computing a live query's micro-batches in bulk on the driver, where
    the batch's rows already are (a live executor collects them there to run them item by
    item): the executor computes the partials of step 2 above over the batch's columns, and
    ``apply_batch`` puts them into the engine. Made per query by a ``BatchEngineFactory``."""

    def run(self, engine: LiveEngine, tables: Sequence[Any]) -> bool:
        """Compute the batch ``tables`` (per input, a pyarrow Table of its source's columns, in
        any row order) into ``engine``, as item by item would leave it; False, with
        ``engine`` untouched, when the batch must go item by item instead (a row breaking a
        rule, which item by item names; more than heartbeats held at the arrival frontier;
        an event spanning many windows)."""
        ...


BatchEngineFactory = Callable[[Query, BulkShape[Any]], BatchEngine]
"""Makes a query's ``BatchEngine``; raises ``tempo.errors.UnsupportedError`` saying why when
the executor cannot compute that query's batches."""

_BATCH_ENGINES: dict[str, Callable[[], BatchEngineFactory]] = {}


def register_batch_engine(name: str, load: Callable[[], BatchEngineFactory]) -> None:
    """Make the batch engine ``name`` available to live executors. ``load`` imports the
    executor that provides it only when a live query asks for it (raising ``ImportError``
    when that executor's extra is not installed): the runtime never imports an executor,
    and ``tempo.executors`` registers those it knows."""
    _BATCH_ENGINES[name] = load


def batch_engine(name: str) -> BatchEngineFactory | None:
    """The factory of the batch engine ``name``, or None when it is not registered or its
    executor cannot be imported here."""
    load = _BATCH_ENGINES.get(name)
    if load is None:
        return None
    try:
        return load()
    except ImportError:
        return None
