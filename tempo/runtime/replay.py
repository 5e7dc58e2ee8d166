"""CTIs replayed on the driver, for executors that compute events in bulk.

An executor that computes events in bulk (Spark) still needs CTIs exactly as the reference
engine produces them: which CTIs each input ends up with after generation, import and the
never-go-back rule, and what each operator forwards. CTIs are few, so ``CtiReplay`` runs them
(and the items an executor chooses to admit on the driver) through the same ``Ingress`` and
operator code as ``tempo.runtime.engine``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.result import InputMetrics
from tempo.runtime.operator import Operator
from tempo.runtime.build import Build
from tempo.runtime.engine import build_ingresses, build_operators
from tempo.runtime.ingress import Prepared, TimestampMode
from tempo.ticks import INF, NEG_INF


class _CtiRecorder(Operator):
    """Records the CTIs one operator emits (events are not replayed); with ``keyed``, its
    substreams' CTIs too, interleaved with its CTIs as ``(key, t)`` (``(_MERGED, t)``)."""

    def __init__(self, ctis: list[int], finals: dict[Any, int], keyed: list[tuple[Any, int]] | None = None) -> None:
        super().__init__()
        self.ctis = ctis
        self.finals = finals
        self.keyed = keyed

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        return None

    def end(self, port: int, eid: int, end: int) -> None:
        return None

    def cti(self, port: int, t: int) -> None:
        self.ctis.append(t)
        if self.keyed is not None:
            self.keyed.append((MERGED, t))

    def key_cti(self, port: int, key: Any, t: int) -> None:
        self.finals[key] = t
        if self.keyed is not None:
            self.keyed.append((key, t))


MERGED = object()
"""In ``CtiReplay.output_ctis``: the query's own CTI rather than a substream's."""

Key = tuple[int, int, int, int]


class Candidate(NamedTuple):
    """A CTI an input's rows ask for, found where its items are processed (``CtiReplay.feed``)."""

    origin: str
    """``"generated"`` or ``"explicit"``."""
    value: int


class OrderedStep(NamedTuple):
    """What an item of an input with ordering settings, admitted elsewhere, does to time
    (``CtiReplay.feed_ordered``)."""

    arrival: int
    candidate: int
    """The input's CTI its event-time rule asks for (``NEG_INF``: none)."""
    substream: Any = None
    substream_candidate: int = NEG_INF
    """With substreams: the key's CTI it asks for."""


class CtiReplay:
    """Runs only the CTIs of a query through its operators, in arrival order.

    An executor that computes events in bulk (Spark) still needs CTIs exactly as the
    in-memory executor produces them: which CTIs each input ends up with after generation,
    import and the never-go-back rule, and what each operator forwards. CTIs are few, so
    this replays them on the driver through the same ``Ingress`` and operator code.
    Feed ``(key, input, origin, value)`` rows sorted by key, where ``key`` is
    ``(arrival, declaration, position, 0)``; then ``shutdown()`` (``feed_all`` does both).
    """

    def __init__(self, query: Query) -> None:
        build = Build(TimestampMode(), query)
        self.rejected = build.rejected
        self.query = query
        self.key: Key = (0, 0, 0, 0)
        self.steps: dict[str, list[tuple[Key, int]]] = {s.name: [] for s in query.sources}
        self.node_ctis: dict[int, list[int]] = {}
        self.node_key_ctis: dict[int, dict[Any, int]] = {}
        self.output_ctis: list[tuple[Any, int]] = []
        """The output's CTIs and its substreams' (``(key, t)``, ``(MERGED, t)``), in order."""
        self.fed: list[tuple[str, tuple[Any, ...]]] = []
        """Every call feeding this replay, in order, for ``at_infinity`` to replay them."""
        self.local: set[str] = set()
        """The inputs admitted here, item by item (``admit_locally``)."""
        self.ingresses = build_ingresses(build, query)
        built = build_operators(build, query)
        for node in query.nodes:
            self.node_ctis[id(node)], self.node_key_ctis[id(node)] = [], {}
            keyed = self.output_ctis if node is query.root else None
            built[id(node)].connect(_CtiRecorder(self.node_ctis[id(node)], self.node_key_ctis[id(node)], keyed), 0)
        for name, ingress in self.ingresses.items():
            ingress.emit_cti = self._stepper(name, ingress.emit_cti)

    def _stepper(self, name: str, forward: Callable[[int], None]) -> Callable[[int], None]:
        steps = self.steps[name]

        def emit(t: int) -> None:
            steps.append((self.key, t))
            forward(t)

        return emit

    def feed(self, key: Key, input_name: str, origin: str, value: int) -> None:
        """A CTI candidate of an input whose items are processed elsewhere."""
        self.fed.append(("feed", (key, input_name, origin, value)))
        self.key = key
        self.ingresses[input_name].advance(value, origin)

    def feed_ordered(
        self, key: Key, input_name: str, arrival: int, candidate: int, substream: Any = None, substream_candidate: int = NEG_INF
    ) -> None:
        """An item of an input with ordering settings admitted elsewhere, reduced to what
        moves time: its arrival and the CTI its event-time rule asks for (with substreams:
        for its key)."""
        self.fed.append(("feed_ordered", (key, input_name, arrival, candidate, substream, substream_candidate)))
        self.key = key
        self.ingresses[input_name].order_step(arrival, candidate, substream, substream_candidate)

    def admit_locally(self, input_name: str) -> dict[int, list[Any]]:
        """Process this input's whole items here (``feed_item``); returns its admitted
        events by id, ``[start, end or None, payload]``, filled in as items are fed."""
        self.fed.append(("admit_locally", (input_name,)))
        self.local.add(input_name)
        events: dict[int, list[Any]] = {}
        ingress = self.ingresses[input_name]

        def insert(eid: int, start: int, end: int | None, payload: Any) -> None:
            events[eid] = [start, end, payload]

        def end(eid: int, t: int) -> None:
            events[eid][1] = t

        ingress.emit_insert, ingress.emit_end = insert, end
        return events

    def feed_item(self, key: Key, input_name: str, rec: Prepared) -> None:
        """One item of an input admitted locally: the in-memory ingress rules, exactly."""
        self.fed.append(("feed_item", (key, input_name, rec)))
        self.key = key
        self.ingresses[input_name].process(rec)

    def feed_all(self, rows: list[tuple[Key, str, Any]]) -> None:
        """Feed every input's rows in arrival order (by key), then shut down. A row is
        ``(key, input, what)``: ``what`` is a whole item of an input admitted here
        (``admit_locally`` first), an ``OrderedStep`` (``feed_ordered``) or a ``Candidate``
        (``feed``)."""
        rows.sort(key=lambda r: r[0])
        for key, name, what in rows:
            if name in self.local:
                self.feed_item(key, name, what)
            elif isinstance(what, OrderedStep):
                self.feed_ordered(key, name, *what)
            else:
                self.feed(key, name, *what)
        self.shutdown()

    def shutdown(self) -> None:
        for i, source in enumerate(self.query.sources):
            self.key = (INF, i, 0, 1)
            self.ingresses[source.name].shutdown()

    def metrics(self, name: str) -> InputMetrics:
        return self.ingresses[name].metrics

    def latest_finite_cti(self, input_name: str) -> int:
        """The latest finite CTI the input reached (``NEG_INF`` if none)."""
        finite = [t for _, t in self.steps[input_name] if t < INF]
        return finite[-1] if finite else NEG_INF

    def ctis_of(self, node: p.Node) -> list[int]:
        """The CTIs ``node`` emits, in order."""
        return self.node_ctis[id(node)]

    def at_infinity(self) -> CtiReplay:
        """This replay as it would end if every input's time then advanced to infinity, as
        the in-memory executor's ``_withheld`` advances them: one input after the other, in
        declaration order (so an operator of two inputs may see a CTI between, where the
        input flushed first was the one holding it back). A new replay fed the same calls,
        then flushed; for compiling what a flush would release."""
        view = CtiReplay(self.query)
        for name, args in self.fed:
            getattr(view, name)(*args)
        view.shutdown()
        for i, source in enumerate(self.query.sources):
            ingress = view.ingresses[source.name]
            view.key = (INF, i, 0, 2)
            if ingress.cti < INF:
                ingress.cti = INF
                ingress.emit_cti(INF)
        return view

    def key_ctis_of(self, node: p.Node) -> dict[Any, int]:
        """The last CTI of each substream key ``node`` emits (when it keeps the key)."""
        return self.node_key_ctis[id(node)]
