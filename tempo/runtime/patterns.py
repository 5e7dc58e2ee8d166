"""Patterns over two inputs: A followed by B within a time (``FollowedByNode``)."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

from tempo.runtime.joins import matching_key, output_cti
from tempo.runtime.operator import Key, Operator
from tempo.ticks import NEG_INF
from tempo.plan import nodes as p
from tempo.runtime import codegen
from tempo.runtime.build import Build, compiles, join_keys


class FollowedBy(Operator):
    """A followed by B within ``within`` ticks (``FollowedByNode``): the left events wait per
    key, the right ones in order of (start, payload) until the output CTI passes their start.
    Then each right event, in that order, completes every waiting left event it follows
    (``a.start < b.start < a.start + within``, the residual holding) that nothing completed
    before: a left event's first such right event. Left events no future right event can
    follow (``start + within`` at or before the CTI) are forgotten.

    Run one join key at a time (``tempo.runtime.keyed``), the pattern orders its right events
    by their arrival over all keys (``arrival``) and tells each match's rank (``tell_rank``:
    the right event's start, payload order and arrival, the match's place among its
    matches), the order in which the pattern over all keys emits it."""

    WIRING = Operator.WIRING | {"key_fns", "residual", "projection", "order", "within", "new_id", "arrival", "tell_rank"}

    def __init__(
        self,
        key_fns: tuple[Callable[[Any], Key], Callable[[Any], Key]] | None,
        residual: Callable[[Any, Any], Any] | None,
        projection: Callable[[Any, Any], Any],
        order: Callable[[Any], Any],
        within: int,
        new_id: Callable[[], int],
    ) -> None:
        super().__init__()
        self.key_fns, self.residual, self.projection, self.order = key_fns, residual, projection, order
        self.within, self.new_id = within, new_id
        self.lefts: dict[Key, list[tuple[int, Any]]] = {}  # key -> (start, payload), not yet followed
        self.rights: list[tuple[int, Any, int, Key, Any]] = []  # heap of (start, payload order, seq, key, payload)
        self.seq = itertools.count()
        self.ctis = [NEG_INF, NEG_INF]
        self.out_cti = NEG_INF
        self.arrival: Callable[[], int] | None = None
        self.tell_rank: Callable[[tuple[Any, ...]], None] | None = None

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        key = matching_key(self.key_fns, port, payload)
        if key is None:
            return
        if port == 0:
            self.lefts.setdefault(key, []).append((start, payload))
        else:
            seq = next(self.seq) if self.arrival is None else self.arrival()
            heapq.heappush(self.rights, (start, self.order(payload), seq, key, payload))

    def end(self, port: int, eid: int, end: int) -> None:
        return None  # a pattern reads starts only

    def cti(self, port: int, t: int) -> None:
        c = output_cti(self.ctis, port, t, self.out_cti)
        if c is None:
            return
        while self.rights and self.rights[0][0] < c:
            b_start, b_order, b_seq, key, b = heapq.heappop(self.rights)
            waiting = self.lefts.get(key)
            if not waiting:
                continue
            left: list[tuple[int, Any]] = []
            for place, (a_start, a) in enumerate(waiting):
                if a_start < b_start < a_start + self.within and (self.residual is None or self.residual(a, b)):
                    if self.tell_rank is not None:
                        self.tell_rank((b_start, b_order, b_seq, place))
                    self.emit_insert(self.new_id(), b_start, b_start + 1, self.projection(a, b))
                else:
                    left.append((a_start, a))
            self.lefts[key] = left
        for key in list(self.lefts):
            alive = [(s, a) for s, a in self.lefts[key] if s + self.within > c]
            if alive:
                self.lefts[key] = alive
            else:
                del self.lefts[key]
        self.out_cti = c
        self.emit_cti(c)

    def idle(self) -> bool:
        """Whether the pattern holds no event waiting."""
        return not (self.lefts or self.rights)

    def next_release(self) -> int | None:
        """The least output CTI at which the pattern would match a right event (the first past
        its start) or forget a left one (at its start plus ``within``), or None."""
        dues = [s + self.within for waiting in self.lefts.values() for s, _ in waiting]
        if self.rights:
            dues.append(self.rights[0][0] + 1)
        return min(dues) if dues else None


@compiles(p.FollowedByNode)
def _followed_by(b: Build, node: p.FollowedByNode) -> Operator:
    residual = None if node.residual is None else codegen.compile_expression(node.residual, 2)
    return FollowedBy(
        join_keys(node),
        residual,
        codegen.compile_expression(node.projection, 2),
        codegen.payload_order(node.right.payload_type),
        node.within,
        b.new_id,
    )
