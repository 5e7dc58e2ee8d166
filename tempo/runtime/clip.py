"""Clipping each event's lifetime at the next start of its group (``ClipNode``).

An event's clipped end depends on the events that start after it, so the operator holds a
group's events until a CTI says no later start can clip them further.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tempo.runtime.operator import Key, Operator
from tempo.ticks import INF, NEG_INF
from tempo.plan import nodes as p
from tempo.runtime import codegen
from tempo.runtime.build import Build, compiles


class Clip(Operator):
    """Per group, the events not yet ended out, ``[eid, start, end or None, payload, out id, done]``.
    A CTI ``c`` sends each event starting before it (a start edge, or an interval if its clipped
    end is already before ``c``) and ends those whose clipped end is before ``c``: every start
    before ``c`` is known then, so no later event can clip them further."""

    WIRING = Operator.WIRING | {"key_fn", "new_id", "keep_ids"}

    def __init__(self, key_fn: Callable[[Any], Key] | None, new_id: Callable[[], int]) -> None:
        super().__init__()
        self.key_fn, self.new_id = key_fn, new_id
        self.keep_ids = False
        """Whether an output keeps its event's id rather than a new one: run one key at a time
        (``tempo.runtime.keyed``), so that its end names it the same in every run of the key."""
        self.groups: dict[Key, list[list[Any]]] = {}
        self.by_id: dict[int, list[Any]] = {}  # events whose own end is not known
        self.in_cti = NEG_INF

    @staticmethod
    def _clipped(recs: list[list[Any]]) -> list[int]:
        """The clipped end of each of a group's events, ``recs`` sorted by start (INF while
        it has no end): the earlier of its own end and the next later start."""
        later = INF  # the next start after the current one, scanning backwards
        ends = [INF] * len(recs)
        i = len(recs) - 1
        while i >= 0:
            j = i
            while j >= 0 and recs[j][1] == recs[i][1]:
                own = recs[j][2]
                ends[j] = min(later, INF if own is None else own)
                j -= 1
            later = recs[i][1]
            i = j
        return ends

    def idle(self) -> bool:
        """Whether it holds no group's events (``Window.idle``)."""
        return not self.groups and not self.by_id

    def next_release(self) -> int | None:
        """The least CTI at which this operator would emit something, None while nothing is
        due (a keyed operator's timer: ``tempo.runtime.keyed``): the first past an event's
        start not out yet, or past the clipped end of one out open."""
        dues = []
        for recs in self.groups.values():
            recs.sort(key=lambda r: r[1])
            for rec, clipped in zip(recs, self._clipped(recs)):
                if rec[4] is None:
                    dues.append(rec[1] + 1)
                elif not rec[5] and clipped < INF:
                    dues.append(clipped + 1)
        return min(dues) if dues and self.in_cti < INF else None

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        rec = [eid, start, None if end is None or end >= INF else end, payload, None, False]  # [5]: ended out
        if rec[2] is None:
            self.by_id[eid] = rec
        self.groups.setdefault(self.key_fn(payload) if self.key_fn else (), []).append(rec)

    def end(self, port: int, eid: int, end: int) -> None:
        rec = self.by_id.pop(eid, None)
        if rec is not None and end < INF:
            rec[2] = end

    def cti(self, port: int, t: int) -> None:
        if t <= self.in_cti:
            return
        self.in_cti = t
        out: list[tuple[int, list[Any], int]] = []  # (start, rec, clipped end or INF)
        for key, recs in list(self.groups.items()):
            recs.sort(key=lambda r: r[1])
            ends = self._clipped(recs)
            keep: list[list[Any]] = []
            first_open: int | None = None
            for rec, clipped in zip(recs, ends):
                final = clipped < t
                if rec[4] is None:
                    if rec[1] < t:
                        out.append((rec[1], rec, clipped if final else INF))
                        rec[5] = final
                elif not rec[5] and final:
                    self.emit_end(rec[4], clipped)
                    self.by_id.pop(rec[0], None)
                    rec[5] = True
                if not rec[5]:
                    if first_open is None:
                        first_open = rec[1]
                    keep.append(rec)
                elif first_open is not None and rec[1] > first_open:
                    keep.append(rec)  # done, but its start may still clip an event before it
            if keep:
                self.groups[key] = keep
            else:
                del self.groups[key]
        out.sort(key=lambda o: o[0])  # stable: group by group within a start
        for start, rec, clipped in out:
            rec[4] = rec[0] if self.keep_ids else self.new_id()
            if clipped < INF:
                self.by_id.pop(rec[0], None)
            self.emit_insert(rec[4], start, None if clipped >= INF else clipped, rec[3])
        self.emit_cti(t)


@compiles(p.ClipNode)
def _clip(b: Build, node: p.ClipNode) -> Operator:
    return Clip(codegen.compile_keys(node.keys) if node.keys is not None else None, b.new_id)
