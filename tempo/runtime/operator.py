"""The protocol of the in-memory operators (``Operator``) and the per-key CTIs of an operator
with two inputs that keeps the substream key (``KeyCtis``, the union's and the join's).

The operators are push-based, one event at a time, their state purged as CTIs pass; each
family has a module beside this one: ``stateless`` (where, select, explode, lifetime shifts,
union), ``clip``, ``windows`` (a grid of windows), ``event_windows`` (windows cut by the
events), ``analytics`` (events in time order), ``joins`` (join, anti-join), ``patterns``
(followed-by) and ``egress`` (the query's output), the queues they wait in for release in
``release_queues``.

Every operator receives ``insert(port, eid, start, end, payload)`` (``end`` is None for
an open edge whose end is not known yet), ``end(port, eid, end)`` for such an edge, and
``cti(port, t)``, and pushes the same three calls downstream. Event ids are unique within
a stream; operators that make new events take fresh ids. Times are ticks.

Below an input with substreams, ``key_cti(port, key, t)`` says that the events of one
substream key will start at or after ``t``, ahead of the stream's CTI: the key's CTI is
the later of the two. Operators that keep the key (``Node.substream_key``) act on it and
pass it on; the others ignore it, so their output runs on the stream's CTI alone.

The semantics and CTI rule of each operator are stated on its plan node
(``tempo/plan/nodes.py``); the notes on each operator explain how the rule is met.
Stateful operators release an output only once their output CTI passes its start, which
is exactly when the emission contract requires it, and which makes outputs independent of
how the inputs interleave.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from tempo.ticks import NEG_INF

Key = tuple[Any, ...]


class Operator:
    """Base: fan-out to the consumers of this operator's output.

    ``emit_insert``, ``emit_end`` and ``emit_cti`` reach every consumer connected so far;
    with one consumer (the usual case) they are its methods bound to its port, so an event
    takes no extra call per operator.

    ``WIRING`` names the attributes an operator gets from the plan when it is built (compiled
    functions, parameters, its consumers); everything else is its state, which a live query
    saves after each micro-batch and puts back into a freshly built operator
    (``tempo.runtime.live``). A compiled function left out of ``WIRING`` makes saving fail
    loudly (it cannot be pickled), never restore silently wrong.
    """

    WIRING: ClassVar[frozenset[str]] = frozenset({"outs", "emit_insert", "emit_end", "emit_cti", "emit_key_cti"})
    SHARED: ClassVar[Mapping[str, Callable[[Any, Any], Any]]] = {}
    """State that is not any one group's but the operator's over all of them (beside the CTIs
    it receives), each with how two values combine: an operator run one key at a time
    (``tempo.runtime.keyed``) gets it from whoever sees every key's events."""

    def __init__(self) -> None:
        self.outs: list[tuple[Operator, int]] = []
        self.emit_insert: Callable[[int, int, int | None, Any], None] = _nowhere
        self.emit_end: Callable[[int, int], None] = _nowhere
        self.emit_cti: Callable[[int], None] = _nowhere
        self.emit_key_cti: Callable[[Any, int], None] = _nowhere

    def connect(self, op: Operator, port: int) -> None:
        """Send this operator's output to input ``port`` of ``op`` too."""
        self.outs.append((op, port))
        self.emit_insert = _each([functools.partial(o.insert, p) for o, p in self.outs])
        self.emit_end = _each([functools.partial(o.end, p) for o, p in self.outs])
        self.emit_cti = _each([functools.partial(o.cti, p) for o, p in self.outs])
        self.emit_key_cti = _each([functools.partial(o.key_cti, p) for o, p in self.outs])

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        raise NotImplementedError

    def end(self, port: int, eid: int, end: int) -> None:
        raise NotImplementedError

    def cti(self, port: int, t: int) -> None:
        raise NotImplementedError

    def key_cti(self, port: int, key: Any, t: int) -> None:
        """A substream's CTI; an operator that merges keys ignores it."""
        return None


def _each(calls: list[Callable[..., None]]) -> Callable[..., None]:
    """One call that makes all of ``calls`` in turn with its arguments."""
    if len(calls) == 1:
        return calls[0]

    def each(*args: Any) -> None:
        for call in calls:
            call(*args)

    return each


def _nowhere(*_: Any) -> None:
    return None


class KeyCtis:
    """Per-key CTIs of an operator with two inputs that keeps the substream key (union,
    join): key ``k``'s output CTI is the minimum over the inputs of ``k``'s CTI there,
    which is the later of that input's CTI and the last ``key_cti`` for ``k`` from it.
    Only keys ahead of an input's CTI are kept; the rest run at the inputs' CTIs."""

    __slots__ = ("ahead", "out")

    def __init__(self) -> None:
        self.ahead: dict[Any, list[int]] = {}  # key -> its CTI from each input (NEG_INF: none)
        self.out: dict[Any, int] = {}  # key -> its output CTI as last emitted

    def _out(self, key: Any, ctis: list[int], out_cti: int) -> int | None:
        own = self.ahead[key]
        key_out = min(max(own[0], ctis[0]), max(own[1], ctis[1]))
        if key_out > out_cti and key_out > self.out.get(key, NEG_INF):
            self.out[key] = key_out
            return key_out
        return None

    def moved(self, port: int, key: Any, t: int, ctis: list[int], out_cti: int) -> int | None:
        """``key_cti(port, key, t)`` arrived: the key's new output CTI, if it moved."""
        own = self.ahead.get(key)
        if own is None:
            own = self.ahead[key] = [NEG_INF, NEG_INF]
        if t <= own[port]:
            return None
        own[port] = t
        return self._out(key, ctis, out_cti)

    def merged_moved(self, ctis: list[int], out_cti: int) -> list[tuple[Any, int]]:
        """An input's CTI moved: the keys whose output CTI moved with it (a key ahead on
        one input now meets a later CTI on the other). Keys no longer ahead anywhere go."""
        moved: list[tuple[Any, int]] = []
        for key in list(self.ahead):
            own = self.ahead[key]
            if own[0] <= ctis[0] and own[1] <= ctis[1]:
                del self.ahead[key]
                self.out.pop(key, None)
                continue
            key_out = self._out(key, ctis, out_cti)
            if key_out is not None:
                moved.append((key, key_out))
        return moved


# ---------------------------------------------------------------------------------------
