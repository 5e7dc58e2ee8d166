"""The reference engine: a query's plan as push-based operators, run one item at a time.

``run_query`` is what ``InMemoryExecutor.run`` does; executors that compute events in bulk use
the same pieces on the driver (``tempo.runtime.replay.CtiReplay``). The plan is compiled by a
visitor keyed by node class (``compiles``) into the operators of the family modules
``tempo.runtime.operator`` lists; inputs are checked and merged into one arrival sequence
(``ingress.py``, ``process_in_arrival_order``); the output is assembled into a ``Result``
(``result_of``, by ``release.ResultAssembly``) with what a flush would still release
(``withheld``).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import attrs

from tempo.dispatch import Registry
from tempo.errors import EvaluationError, UnsupportedError
from tempo.expr.schema import datetime_conformer
from tempo.expr import nodes as x
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.plan.windows import CountWindow, HoppingWindow, SessionWindow, SnapshotWindow, WindowTimestamp
from tempo.result import Rejection, Result, Withheld, warn_withheld
from tempo.runtime import aggregates, codegen
from tempo.runtime import analytics
from tempo.runtime import event_windows as ew
from tempo.runtime.clip import Clip
from tempo.runtime.egress import Egress
from tempo.runtime.joins import AntiJoin, Join
from tempo.runtime.operator import Operator
from tempo.runtime.patterns import FollowedBy
from tempo.runtime.stateless import AlterLifetime, Explode, Select, Union, Where
from tempo.runtime.windows import Window
from tempo.runtime.ingress import ArrivalClock, Ingress, Prepared, Rejected, TimestampMode, prepare, prepare_checked
from tempo.runtime.release import ResultAssembly
from tempo.runtime.stamping import stamped
from tempo.sources import ItemSource, TableSource
from tempo.ticks import INF, from_ticks

T = TypeVar("T")

_COMPILERS: Registry[Build, Operator] = Registry("in-memory", "plan node")
compiles = _COMPILERS.rule
"""Register the compiler of one node class."""


class Build:
    """State of one compilation: shared id counter and timestamp convention.

    ``first_id``: the first event id handed out (a live query rebuilt from saved state
    continues its ids)."""

    def __init__(self, mode: TimestampMode, query: Query, first_id: int = 0) -> None:
        self.query = query
        self.ids = itertools.count(first_id)
        self.new_id: Callable[[], int] = self.ids.__next__
        self.mode = mode
        self.rejected: list[Rejected] = []
        self.ingresses: dict[str, Ingress] = {}
        self.clock = ArrivalClock()

    def to_datetime(self, t: int) -> Any:
        return from_ticks(t, naive=self.mode.naive is True)


def _join_keys(node: p.MatchingNode) -> tuple[Callable[[Any], Any], Callable[[Any], Any]] | None:
    if not node.keys:
        return None
    left = codegen.compile_keys([a for a, _ in node.keys], side=0)
    right = codegen.compile_keys([b for _, b in node.keys], side=1)
    return left, right


@compiles(p.SourceNode)
def _source(b: Build, node: p.SourceNode) -> Operator:
    return _SourceOp(b.ingresses[node.name])


class _SourceOp(Operator):
    """Connects an ``Ingress`` to the operators that consume its input."""

    WIRING = Operator.WIRING | {"ingress"}

    def __init__(self, ingress: Ingress) -> None:
        super().__init__()
        self.ingress = ingress

    def connect(self, op: Operator, port: int) -> None:
        super().connect(op, port)
        self.ingress.emit_insert = self.emit_insert
        self.ingress.emit_end = self.emit_end
        self.ingress.emit_cti = self.emit_cti
        self.ingress.emit_key_cti = self.emit_key_cti


@compiles(p.WhereNode)
def _where(b: Build, node: p.WhereNode) -> Operator:
    return Where(codegen.compile_expression(node.predicate, 1))


@compiles(p.SelectNode)
def _select(b: Build, node: p.SelectNode) -> Operator:
    return Select(codegen.compile_expression(node.projection, 1), b.query.substream_key(node) is not None)


@compiles(p.EventTimeNode)
def _event_time(b: Build, node: p.EventTimeNode) -> Operator:
    return Select(_same, keeps_key=b.query.substream_key(node) is not None)


def _same(payload: Any) -> Any:
    return payload


@compiles(p.ClipNode)
def _clip(b: Build, node: p.ClipNode) -> Operator:
    return Clip(codegen.compile_keys(node.keys) if node.keys is not None else None, b.new_id)


@compiles(p.ExplodeNode)
def _explode(b: Build, node: p.ExplodeNode) -> Operator:
    return Explode(
        codegen.compile_expression(node.items, 1),
        codegen.compile_function([node.projection], ["a0", "item"], inputs=["a0"]),
        b.new_id,
    )


@compiles(p.AlterLifetimeNode)
def _alter(b: Build, node: p.AlterLifetimeNode) -> Operator:
    return AlterLifetime(node.shift, node.duration)


@compiles(p.WindowNode)
def _window(b: Build, node: p.WindowNode) -> Operator:
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
            aggregates.Accumulator(kinds),
            projection,
            b.to_datetime,
            b.new_id,
            substream_index,
            len(node.keys or ()),
            node.timestamp,
        )
    windows: dict[type, type[ew.EventWindows]] = {SessionWindow: ew.Sessions, CountWindow: ew.CountWindows, SnapshotWindow: ew.Snapshots}
    operator = windows.get(type(spec))
    if operator is None:
        raise UnsupportedError("in-memory", spec.describe(), "it has no window operator for this kind")
    return operator(
        spec,
        node.timestamp,
        key_fn,
        values_fn,
        aggregates.Accumulator(kinds),
        projection,
        b.to_datetime,
        b.new_id,
        codegen.payload_order(node.input.payload_type),
    )


@compiles(p.AnalyticNode)
def _analytic(b: Build, node: p.AnalyticNode) -> Operator:
    previous = [(i, a.limit) for i, a in enumerate(node.analytics) if isinstance(a, p.Previous)]
    running = [(i, a) for i, a in enumerate(node.analytics) if isinstance(a, p.Aggregate)]
    identity = not node.analytics and isinstance(node.projection, x.Input)
    return analytics.Analytic(
        codegen.compile_keys(node.keys) if node.keys is not None else None,
        codegen.payload_order(node.input.payload_type),
        previous,
        codegen.compile_function([a.arg for a in node.analytics if isinstance(a, p.Previous)], ["a0"], as_tuple=True),
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
    release = analytics.Analytic(key_fn, _no_values, [], _no_values, [], _no_values, aggregates.Accumulator([]), None, b.new_id)
    release.by_key = node.keyed_by is not None
    return release


@compiles(p.JoinNode)
def _join(b: Build, node: p.JoinNode) -> Operator:
    residual = None if node.residual is None else codegen.compile_expression(node.residual, 2)
    keyed = b.query.substream_key(node) is not None
    substream_index = node.key_index((b.query.substream_key(node.left), b.query.substream_key(node.right))) if keyed else None
    return Join(_join_keys(node), residual, codegen.compile_expression(node.projection, 2), b.new_id, substream_index)


@compiles(p.FollowedByNode)
def _followed_by(b: Build, node: p.FollowedByNode) -> Operator:
    residual = None if node.residual is None else codegen.compile_expression(node.residual, 2)
    return FollowedBy(
        _join_keys(node),
        residual,
        codegen.compile_expression(node.projection, 2),
        codegen.payload_order(node.right.payload_type),
        node.within,
        b.new_id,
    )


@compiles(p.AntiJoinNode)
def _anti_join(b: Build, node: p.AntiJoinNode) -> Operator:
    residual = None if node.residual is None else codegen.compile_expression(node.residual, 2)
    return AntiJoin(_join_keys(node), residual, b.new_id)


@compiles(p.UnionNode)
def _union(b: Build, node: p.UnionNode) -> Operator:
    return Union(b.new_id, b.query.substream_key(node) is not None)


def run_query(query: Query) -> Result[Any]:
    """Run ``query`` over all of its inputs, one item at a time in arrival order.

    Output events that no CTI released are counted in ``Result.withheld`` (and an
    ``UnreleasedResultsWarning`` says so): to count them, every input's time is advanced
    to infinity after the result is taken."""
    mode = TimestampMode()
    build = Build(mode, query)
    build_ingresses(build, query)
    streams = prepared_inputs(query, mode)
    built = build_operators(build, query)
    egress = Egress(output_key(query))
    built[id(query.root)].connect(egress, 0)

    ingresses = [build.ingresses[s.name] for s in query.sources]
    try:
        _read(streams, ingresses)
    except EvaluationError as error:
        check_inputs(query)  # an input breaking a rule is the run's error (docs/semantics.md 7.4)
        raise error
    result = result_of(egress, build, query)
    withheld = _withheld(egress, ingresses, build.to_datetime)
    if withheld is None:
        return result
    result = attrs.evolve(result, withheld=withheld)
    warn_withheld(result)
    return result


def check_inputs(query: Query) -> None:
    """Every input read through its ingress again, with no operator after it: raises the
    ``InputError`` of the first input item breaking a rule, if any. A run that met an
    ``EvaluationError`` calls this first, so that bad input is reported as a batch executor
    reports it, whatever the operators meet on the way (it checks the inputs whole before
    computing anything)."""
    build = Build(TimestampMode(), query)
    build_ingresses(build, query)
    _read(prepared_inputs(query, build.mode), [build.ingresses[s.name] for s in query.sources])


def _read(streams: list[Iterator[Prepared]], ingresses: list[Ingress]) -> None:
    """Every item through its input's ingress, in arrival order, then each input's end."""
    process_in_arrival_order(streams, [ingress.process for ingress in ingresses])
    for ingress in ingresses:
        ingress.shutdown()


def prepared_inputs(query: Query, mode: TimestampMode) -> list[Iterator[Prepared]]:
    """Each input's items checked and converted, in input order. A fixed input (a table, an
    item list) is checked whole before anything is processed; generated items as they come."""
    needs_arrival = query.ordered_by_arrival
    streams: list[Iterator[Prepared]] = []
    for source in query.sources:
        fixed = isinstance(source.source, TableSource) or (isinstance(source.source, ItemSource) and source.source.materialized is not None)
        streams.append(stamped(source, (prepare_checked if fixed else prepare)(source, mode, source.name in needs_arrival)))
    return streams


def _withheld(egress: Egress, ingresses: list[Ingress], dt: Callable[[int], Any]) -> Withheld | None:
    """After the result is taken: what the query would still release if every input's time
    advanced to infinity. Each input's CTI moves there (as the flush at the end would, in
    declaration order, but without touching the metrics), and the events that then reach
    the output are counted."""
    released = len(egress.raw)
    for ingress in ingresses:
        if ingress.cti < INF:
            ingress.cti = INF
            ingress.emit_cti(INF)
    starts = [entry[1] for entry in egress.raw[released:] if entry[0] in ("event", "start")]
    if not starts:
        return None
    return Withheld(len(starts), dt(min(starts)))


def output_key(query: Query) -> Callable[[Any], Any] | None:
    """The substream key of an output payload, when the query's output keeps one: the key the
    query's ``Egress`` releases by, built alike by ``run_query`` and the live engine."""
    key = query.substream_key(query.root)
    return None if key is None else codegen.compile_expression(key, 1)


def build_ingresses(build: Build, query: Query) -> dict[str, Ingress]:
    """One ``Ingress`` per input, each exporting its CTIs to the inputs that import them."""
    clock = build.clock
    for source in query.sources:
        ingress = build.ingresses[source.name] = Ingress(source, build.new_id, build.rejected)
        if ingress.ordered:
            ingress.clock = clock
            clock.followers.append(ingress)
    for importer, exporter in query.imports:
        build.ingresses[exporter].importers.append(build.ingresses[importer])
    return build.ingresses


def build_operator(build: Build, node: p.Node) -> Operator:
    """The operator of one plan node, not yet connected to any other."""
    return _COMPILERS(build, node)


def build_operators(build: Build, query: Query) -> dict[int, Operator]:
    """Every node's operator, wired to its consumers (inputs before consumers)."""
    built: dict[int, Operator] = {}
    for node in query.nodes:
        op = build_operator(build, node)
        built[id(node)] = op
        for port, child in enumerate(node.inputs()):
            built[id(child)].connect(op, port)
    return built


def rejection(record: Rejected, dt: Callable[[int], Any]) -> Rejection:
    """A recorded rejection (ticks, ``admitted`` as ("lifetime", start, ...) or ("end", end))
    as the public ``Rejection``, with datetimes made by ``dt``."""
    name, position, item, rule, action, cti, admitted = record
    admitted_as = None
    if admitted is not None:
        field = "start" if admitted[0] == "lifetime" else "end"
        admitted_as = attrs.evolve(item, **{field: dt(admitted[1])})
    return Rejection(name, position, item, rule, action, dt(cti), admitted_as)


def process_in_arrival_order(streams: list[Iterator[Prepared]], processes: list[Callable[[Prepared], None]]) -> None:
    """Merge the inputs into one arrival sequence, ordered by (arrival, declaration order,
    position), and process each item there.

    Items of the input first in that order go straight to processing while they come
    before the next item of any other input; the heap of the inputs' next items is touched
    only when another input takes over.
    """
    heads: list[tuple[int, int, Prepared, Iterator[Prepared]]] = []  # (arrival, input, item, rest)
    for index, items in enumerate(streams):
        for rec in items:
            heads.append((rec[0], index, rec, items))
            break
    heapq.heapify(heads)
    while heads:
        _, index, rec, items = heapq.heappop(heads)
        process = processes[index]
        process(rec)
        if not heads:
            for rec in items:
                process(rec)
            return
        next_arrival, next_index = heads[0][0], heads[0][1]
        for rec in items:
            if rec[0] < next_arrival or (rec[0] == next_arrival and index < next_index):
                process(rec)
            else:
                heapq.heappush(heads, (rec[0], index, rec, items))
                break


def result_of(egress: Egress, build: Build, query: Query) -> Result[Any]:
    """The result of the egress's released output (``tempo.runtime.release``): its events
    in the order the egress released them, an open edge as its start and then its end."""
    assembly: ResultAssembly[Any] = ResultAssembly(build.to_datetime)
    # Payload times in the query's convention, as the lifetimes (and as Spark gives them).
    conform = datetime_conformer(query.root.payload_type, build.mode.naive is True)
    for entry in egress.raw:
        kind = entry[0]
        if kind == "cti":
            assembly.cti(entry[1])
        elif kind == "key_cti":
            assembly.key_cti(entry[2], entry[1])
        elif kind == "end":
            s, e, pl = entry[1][1:4]
            assembly.end_edge(s, e, pl if conform is None else conform(pl))
        else:
            s, e, pl = entry[1], entry[2], entry[3]
            if conform is not None:
                pl = conform(pl)
            open_edge = kind == "start"
            assembly.event(s, INF if e is None else e, pl, open_edge)
    dt = build.to_datetime
    return assembly.result(
        egress.ctis,
        {s.name: build.ingresses[s.name].public_metrics(dt) for s in query.sources},
        [rejection(r, dt) for r in build.rejected],
        query.root.payload_type,
        {s.name: s.payload_type for s in query.sources},
    )
