"""The operators that hold no events: filter, projection, explode, lifetime shifts, union.

Each passes an event on (or drops it) as it arrives, and its CTIs at once: none waits for a
CTI to release anything. What they keep is only what names an event's end edge when it
follows (which open events passed, under which new ids) and, for the union, the CTI of each
input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tempo.runtime.operator import KeyCtis, Operator
from tempo.ticks import INF, NEG_INF, add
from tempo.plan import nodes as p
from tempo.runtime import codegen
from tempo.runtime.build import Build, compiles


class Where(Operator):
    """Filter; remembers which open edges passed so that only their ends follow."""

    WIRING = Operator.WIRING | {"predicate"}

    def __init__(self, predicate: Callable[[Any], Any]) -> None:
        super().__init__()
        self.predicate = predicate
        self.open: set[int] = set()

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        if self.predicate(payload):
            if end is None:
                self.open.add(eid)
            self.emit_insert(eid, start, end, payload)

    def end(self, port: int, eid: int, end: int) -> None:
        if eid in self.open:
            self.open.discard(eid)
            self.emit_end(eid, end)

    def cti(self, port: int, t: int) -> None:
        self.emit_cti(t)

    def key_cti(self, port: int, key: Any, t: int) -> None:
        self.emit_key_cti(key, t)


class Select(Operator):
    """Projection; ids, lifetimes and CTIs pass unchanged."""

    WIRING = Operator.WIRING | {"projection", "keeps_key"}

    def __init__(self, projection: Callable[[Any], Any], keeps_key: bool = False) -> None:
        super().__init__()
        self.projection = projection
        self.keeps_key = keeps_key

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        self.emit_insert(eid, start, end, self.projection(payload))

    def end(self, port: int, eid: int, end: int) -> None:
        self.emit_end(eid, end)

    def cti(self, port: int, t: int) -> None:
        self.emit_cti(t)

    def key_cti(self, port: int, key: Any, t: int) -> None:
        if self.keeps_key:  # the new record copies the key: the same value names it
            self.emit_key_cti(key, t)


def _finite(t: int) -> int | None:
    """Operators pass a lifetime that reaches infinity as open (None), whatever its origin."""
    return t if t < INF else None


class Explode(Operator):
    """One output per list element, each with its event's lifetime (and its end edge)."""

    WIRING = Operator.WIRING | {"items", "projection", "new_id"}

    def __init__(self, items: Callable[[Any], Any], projection: Callable[[Any, Any], Any], new_id: Callable[[], int]) -> None:
        super().__init__()
        self.items, self.projection, self.new_id = items, projection, new_id
        self.open: dict[int, list[int]] = {}  # eid of an event without an end -> its outputs' ids

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        outs = []
        for item in self.items(payload) or ():
            out = self.new_id()
            outs.append(out)
            self.emit_insert(out, start, end, self.projection(payload, item))
        if end is None and outs:
            self.open[eid] = outs

    def end(self, port: int, eid: int, end: int) -> None:
        for out in self.open.pop(eid, ()):
            self.emit_end(out, end)

    def cti(self, port: int, t: int) -> None:
        self.emit_cti(t)


class AlterLifetime(Operator):
    """Start (and CTIs) + shift; end + shift, or start + duration when a duration is set."""

    WIRING = Operator.WIRING | {"shift", "duration"}

    def __init__(self, shift: int, duration: int | None) -> None:
        super().__init__()
        self.shift, self.duration = shift, duration

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        s = add(start, self.shift)
        if s >= INF:
            return  # moved past the end of time: no lifetime left
        if self.duration is not None:
            self.emit_insert(eid, s, _finite(add(s, self.duration)), payload)
        else:
            self.emit_insert(eid, s, None if end is None else _finite(add(end, self.shift)), payload)

    def end(self, port: int, eid: int, end: int) -> None:
        shifted = add(end, self.shift)
        if self.duration is None and shifted < INF:  # with a duration every lifetime is already closed
            self.emit_end(eid, shifted)

    def cti(self, port: int, t: int) -> None:
        self.emit_cti(add(t, self.shift))

    def key_cti(self, port: int, key: Any, t: int) -> None:
        self.emit_key_cti(key, add(t, self.shift))


class Union(Operator):
    """Both inputs; right-side events get fresh ids so a stream unioned with itself stays unique."""

    WIRING = Operator.WIRING | {"new_id"}

    def __init__(self, new_id: Callable[[], int], keeps_key: bool = False) -> None:
        super().__init__()
        self.new_id = new_id
        self.ctis = [NEG_INF, NEG_INF]
        self.out_cti = NEG_INF
        self.renamed: dict[int, int] = {}
        self.keys = KeyCtis() if keeps_key else None

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        if port == 1:
            new = self.new_id()
            if end is None:
                self.renamed[eid] = new
            eid = new
        self.emit_insert(eid, start, end, payload)

    def end(self, port: int, eid: int, end: int) -> None:
        if port == 1:
            eid = self.renamed.pop(eid)
        self.emit_end(eid, end)

    def cti(self, port: int, t: int) -> None:
        self.ctis[port] = t
        out = min(self.ctis)
        if out > self.out_cti:
            self.out_cti = out
            self.emit_cti(out)
        if self.keys is not None:
            for key, key_out in self.keys.merged_moved(self.ctis, self.out_cti):
                self.emit_key_cti(key, key_out)

    def key_cti(self, port: int, key: Any, t: int) -> None:
        if self.keys is not None:
            key_out = self.keys.moved(port, key, t, self.ctis, self.out_cti)
            if key_out is not None:
                self.emit_key_cti(key, key_out)


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


@compiles(p.UnionNode)
def _union(b: Build, node: p.UnionNode) -> Operator:
    return Union(b.new_id, b.query.substream_key(node) is not None)
