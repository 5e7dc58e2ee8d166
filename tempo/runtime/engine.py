"""The reference engine: a query's plan as push-based operators, run one item at a time.

``run_query`` is what ``InMemoryExecutor.run`` does; executors that compute events in bulk use
the same pieces on the driver (``tempo.runtime.replay.CtiReplay``). The plan is compiled by a
visitor keyed by node class (``tempo.runtime.build.compiles``) into the operators of the
family modules ``tempo.runtime.operator`` lists, each of which registers its operators' build
beside them; inputs are checked and merged into one arrival sequence
(``ingress.py``, ``process_in_arrival_order``); the output is assembled into a ``Result``
(``result_of``, by ``release.ResultAssembly``) with what a flush would still release
(``withheld``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import attrs

from tempo.errors import EvaluationError
from tempo.expr.schema import datetime_conformer
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.result import Rejection, Result, Withheld, warn_withheld
from tempo.runtime import codegen

# Every family module, each registering the build of its operators (``tempo.runtime.build``).
from tempo.runtime import analytics, clip, event_windows, joins, patterns, stateless, windows  # noqa: F401
from tempo.runtime.build import COMPILERS, Build, compiles
from tempo.runtime.egress import Egress
from tempo.runtime.operator import Operator
from tempo.runtime.ingress import Ingress, Prepared, Rejected, TimestampMode, prepare, prepare_checked
from tempo.runtime.release import ResultAssembly
from tempo.runtime.stamping import stamped
from tempo.sources import ItemSource, TableSource
from tempo.ticks import INF

T = TypeVar("T")


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
    return COMPILERS(build, node)


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
