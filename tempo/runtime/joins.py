"""The operators matching two inputs by key over time: the temporal join (``JoinNode``) and
the left anti semi join (``AntiJoinNode``), with the rules they share with the pattern
(``tempo.runtime.patterns``) and with their keyed forms (``tempo.runtime.keyed``): a
matching key, an output CTI of two inputs, a pair's id and when an anti-join's fragment
ends.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from typing import Any, cast

from tempo.runtime.operator import Key, KeyCtis, Operator
from tempo.runtime.release_queues import ByStart, KeyedByStart
from tempo.ticks import INF, NEG_INF
from tempo.plan import nodes as p
from tempo.runtime import codegen
from tempo.runtime.build import Build, compiles, join_keys


class _Side:
    """One side of a join: live events indexed by key, with their ends for purging."""

    __slots__ = ("by_key", "by_id", "ends", "cti")

    def __init__(self) -> None:
        self.by_key: dict[Key, dict[int, list[Any]]] = {}
        self.by_id: dict[int, list[Any]] = {}
        self.ends = ByStart()  # the ids of closed events by end, for purging
        self.cti = NEG_INF

    def add(self, rec: list[Any]) -> None:
        eid, key = rec[0], rec[4]
        group = self.by_key.get(key)
        if group is None:
            group = self.by_key[key] = {}
        group[eid] = rec
        self.by_id[eid] = rec
        if rec[2] is not None:
            self.ends.push(rec[2], eid)

    def purge(self, upto: int) -> None:
        """Drop closed events ending at or before ``upto``: nothing later can overlap them."""
        for _, _, eid, _ in self.ends.pop_before(upto + 1):
            rec = self.by_id.pop(eid, None)
            if rec is not None:
                group = self.by_key[rec[4]]
                del group[eid]
                if not group:
                    del self.by_key[rec[4]]


# Event record in a join side: [eid, start, end or None, payload, key, open outputs]
# Output record: [oid or None, left rec, right rec, closed]


class Join(Operator):
    """Temporal inner join with hash keys and a residual predicate.

    Matching pairs wait by output start until the output CTI passes it. An
    output whose end is not yet determined goes out as a start edge; its end edge follows
    once the end is known: both ends known, or the known end at or before the CTI of the
    side whose end is unknown (that side can no longer end earlier).

    Run one join key at a time (``tempo.runtime.keyed``), the join is given ``arrival``, the
    place of the item being inserted in the arrival order over all keys, and ``tell_rank``:
    a pair waits ranked by (that arrival, its place among the pairs the key made before),
    which orders the pairs of one start over all keys as the join over all keys pushed them,
    and its rank is told before it goes out. It is then fed the output CTI at both inputs,
    not their own CTIs, which decide when the end of a pair of an open event goes out: so a
    pair whose end is known goes out whole, the input whose own CTI decides that end told
    first (``tell_waits``: None for a pair of two ends known), and the driver splits it where
    the join over all keys would have (``tempo.runtime.keyed.JoinTimeline``). A pair goes out
    with its events' ids as its id (``pair_id``); when the end edge of one of its open events
    arrives, the pair's end known then goes out at that arrival (``emit_end`` of the pair's
    id, the input still open told first), for the driver to end it now or at that input's
    CTI.
    """

    WIRING = Operator.WIRING | {"key_fns", "residual", "projection", "new_id", "arrival", "tell_rank", "tell_waits", "substream_index"}

    def __init__(
        self,
        key_fns: tuple[Callable[[Any], Key], Callable[[Any], Key]] | None,
        residual: Callable[[Any, Any], Any] | None,
        projection: Callable[[Any, Any], Any],
        new_id: Callable[[], int],
        substream_index: int | None = None,
    ) -> None:
        super().__init__()
        self.key_fns = key_fns
        self.residual = residual
        self.projection = projection
        self.new_id = new_id
        self.substream_index = substream_index
        self.sides = (_Side(), _Side())
        # Matching left and right recs by output start; per substream key too when the join
        # equates the inputs' substream keys (key ``substream_index`` of the left rec's key).
        self.pending: ByStart | KeyedByStart = ByStart()
        self.keys: KeyCtis | None = None
        if substream_index is not None:
            i = substream_index
            self.pending = KeyedByStart(lambda left, right: left[4][i])
            self.keys = KeyCtis()
        self.watches: tuple[list[tuple[int, int, list[Any]]], list[tuple[int, int, list[Any]]]] = ([], [])
        self.seq = itertools.count()
        self.out_cti = NEG_INF
        self.arrival: Callable[[], int] | None = None
        self.tell_rank: Callable[[tuple[Any, ...]], None] | None = None
        self.tell_waits: Callable[[int | None], None] | None = None

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        key: Key = self.key_fns[port](payload) if self.key_fns else ()
        for k in key:
            if k is None:
                return  # a null key matches nothing
        # Only an open event can have open outputs to end; () spares the others a list.
        rec: list[Any] = [eid, start, end, payload, key, [] if end is None else ()]
        other = self.sides[1 - port]
        group = other.by_key.get(key)
        if group:
            residual, pending = self.residual, self.pending
            at = None if self.arrival is None else self.arrival()
            for orec in group.values():
                ostart, oend = orec[1], orec[2]
                if (oend is not None and oend <= start) or (end is not None and end <= ostart):
                    continue
                left, right = (rec, orec) if port == 0 else (orec, rec)
                if residual is not None and not residual(left[3], right[3]):
                    continue
                pending.push(start if start > ostart else ostart, left, right, None if at is None else (at, next(self.seq)))
        if end is None or end > other.cti:
            self.sides[port].add(rec)

    def end(self, port: int, eid: int, end: int) -> None:
        rec = self.sides[port].by_id.get(eid)
        if rec is None:
            return
        rec[2] = end
        self.sides[port].ends.push(end, eid)
        for out in rec[5]:
            if self.tell_waits is not None:
                self._tell_end(out)
            else:
                self._try_close(out)
        rec[5] = [o for o in rec[5] if not o[3]]

    def cti(self, port: int, t: int) -> None:
        side = self.sides[port]
        if t <= side.cti:
            return
        side.cti = t
        watch = self.watches[port]
        while watch and watch[0][0] <= t:
            _, _, out = heapq.heappop(watch)
            self._try_close(out)
        out_cti = min(self.sides[0].cti, self.sides[1].cti)
        if out_cti > self.out_cti:
            tell = self.tell_rank
            for _, rank, left, right in self.pending.pop_before(out_cti):
                if tell is not None:
                    tell(cast("tuple[Any, ...]", rank))  # ranked when told: (arrival, place)
                self._emit(left, right)
            self.out_cti = out_cti
            self.emit_cti(out_cti)
        if self.keys is not None:
            for key, key_out in self.keys.merged_moved([self.sides[0].cti, self.sides[1].cti], self.out_cti):
                self._release_key(key, key_out)
        self.sides[1 - port].purge(t)

    def idle(self) -> bool:
        """Whether the join holds nothing: no event on either side, no pair waiting. (A join
        keeping a substream key run by key hears each key's output CTI only when it moves:
        a fresh one given it passes it on as this one would.)"""
        if self.sides[0].by_id or self.sides[1].by_id or self.watches[0] or self.watches[1]:
            return False
        return self.pending.first_start() is None

    def next_release(self) -> int | None:
        """The least output CTI at which the join would release a pair (the first past the
        earliest start waiting) or drop a closed event no later event can match (the first
        at or past its end), or None."""
        dues = [side.ends.first_start() for side in self.sides]
        first = self.pending.first_start()
        dues.append(None if first is None else first + 1)
        known = [d for d in dues if d is not None]
        # An event ending at the output CTI (its end edge came after that CTI) goes at the next.
        return max(min(known), self.out_cti + 1) if known else None

    def restate(self, held: tuple[list[list[Any]], list[list[Any]]], pending: list[tuple[int, list[Any], list[Any]]]) -> None:
        """Hold ``held`` (per side, event records in the order received) and let ``pending``
        (start, left record, right record) wait, in emission order (start, then push): the
        state a batch computed in bulk (``tempo.runtime.bulk``) leaves. Closed events only."""
        sides = (_Side(), _Side())
        for side, old, recs in zip(sides, self.sides, held):
            side.cti = old.cti
            for rec in recs:
                side.add(rec)
        self.sides = sides
        self.pending = ByStart()
        for start, left, right in pending:
            self.pending.push(start, left, right)

    def key_cti(self, port: int, key: Any, t: int) -> None:
        if self.keys is not None:
            key_out = self.keys.moved(port, key, t, [self.sides[0].cti, self.sides[1].cti], self.out_cti)
            if key_out is not None:
                self._release_key(key, key_out)

    def _release_key(self, key: Any, key_out: int) -> None:
        """Key ``key``'s output CTI moved to ``key_out``: its pairs starting before go out."""
        assert isinstance(self.pending, KeyedByStart)
        tell = self.tell_rank
        for _, rank, left, right in self.pending.pop_key_before(key, key_out):
            if tell is not None:
                tell(cast("tuple[Any, ...]", rank))
            self._emit(left, right)
        self.emit_key_cti(key, key_out)

    def _end_of(self, out: list[Any]) -> tuple[int, int | None]:
        """(known end or INF, the side still unknown if the end is not determined yet)."""
        le, re = out[1][2], out[2][2]
        known = INF
        if le is not None and le < known:
            known = le
        if re is not None and re < known:
            known = re
        if le is None and self.sides[0].cti < known:
            return known, 0
        if re is None and self.sides[1].cti < known:
            return known, 1
        return known, None

    def _emit(self, left: list[Any], right: list[Any]) -> None:
        start = max(left[1], right[1])
        le, re = left[2], right[2]
        if (le is not None and le <= start) or (re is not None and re <= start):
            return  # an end that arrived later ruled out the overlap
        payload = self.projection(left[3], right[3])
        if self.tell_waits is not None:  # run by key: whole, with the input that decides when its end goes out
            known = min([e for e in (le, re) if e is not None], default=INF)
            self.tell_waits(None if known >= INF or (le is not None and re is not None) else 0 if le is None else 1)
            pid = pair_id(left[0], right[0])
            self.emit_insert(pid, start, known if known < INF else None, payload)
            if le is None or re is None:  # an end edge may still end it
                tracked: list[Any] = [pid, left, right, False]
                for rec in (left, right):
                    if rec[2] is None:
                        rec[5].append(tracked)
            return
        if le is not None and re is not None:
            end = le if le < re else re
            if end < INF:
                self.emit_insert(self.new_id(), start, end, payload)  # both ends known
                return
        out: list[Any] = [None, left, right, False]
        end, waiting = self._end_of(out)
        oid = self.new_id()
        if waiting is None and end < INF:
            self.emit_insert(oid, start, end, payload)
            return
        out[0] = oid
        self.emit_insert(oid, start, None, payload)
        if le is None:
            left[5].append(out)
        if re is None:
            right[5].append(out)
        if waiting is not None and end < INF:
            heapq.heappush(self.watches[waiting], (end, next(self.seq), out))

    def _tell_end(self, out: list[Any]) -> None:
        """Run by key, an end edge of one of ``out``'s events arrived: the pair's end known now
        goes out, the input whose CTI decides it told first (None: both ends known, it is
        final)."""
        if out[3]:
            return
        le, re = out[1][2], out[2][2]
        known = min([e for e in (le, re) if e is not None], default=INF)
        if known >= INF:
            return
        both = le is not None and re is not None
        assert self.tell_waits is not None
        self.tell_waits(None if both else 0 if le is None else 1)
        self.emit_end(out[0], known)
        out[3] = both

    def _try_close(self, out: list[Any]) -> None:
        if out[3] or out[0] is None:
            return
        end, waiting = self._end_of(out)
        if waiting is None and end < INF:
            out[3] = True
            self.emit_end(out[0], end)
        elif waiting is not None and end < INF:
            heapq.heappush(self.watches[waiting], (end, next(self.seq), out))


def pair_id(left: int, right: int) -> int:
    """The id a keyed join gives a pair of the events ``left`` and ``right`` (ids below
    2**64): one per pair, the same in every run of the key."""
    return left << 64 | right


def matching_key(key_fns: tuple[Callable[[Any], Key], Callable[[Any], Key]] | None, port: int, payload: Any) -> Key | None:
    """Input ``port``'s key of ``payload`` for a matching operator (``()`` without keys), or
    None when a key is null: a null key matches nothing."""
    key: Key = key_fns[port](payload) if key_fns else ()
    return None if any(k is None for k in key) else key


def final_end(at: int, ctis: Sequence[int], left_end: int | None) -> bool:
    """Whether an anti-join's open fragment ending at ``at`` (its first matching right start,
    or its left event's end) as far as the events held tell ends there now
    (docs/semantics.md 5.9): no right event can start before ``at`` (the right input's CTI at
    or past it), and the left event cannot end before it either: its end ``left_end`` is
    known (None: an open edge; an end at infinity counts as not known, as the batch
    executors, which see the whole input, cannot tell it from an edge never ended), or the
    left input's CTI is at or past ``at`` (an end edge never comes before its input's CTI).
    The one rule of ``AntiJoin._settle`` and the cluster engine's
    ``tempo.runtime.keyed.AntiJoinTimeline``."""
    return at < INF and at <= ctis[1] and ((left_end is not None and left_end < INF) or at <= ctis[0])


def output_cti(ctis: list[int], port: int, t: int, out: int) -> int | None:
    """Input ``port``'s CTI ``t`` recorded in ``ctis``: the new output CTI, the least of the
    inputs', if it moved past ``out``; else None."""
    if t <= ctis[port]:
        return None
    ctis[port] = t
    c = min(ctis)
    return c if c > out else None


class AntiJoin(Operator):
    """Left anti semi join by a sweep over time, one output-CTI step at a time.

    When the output CTI moves from ``p`` to ``c``, everything in ``[p, c)`` is known: no
    later left or right event can start before ``c``. Each left event touched by a change
    in ``[p, c)`` (its own start or end, or a matching right event starting or ending) is
    swept over that span: uncovered stretches become output fragments; a fragment still
    uncovered at ``c`` goes out as a start edge. It is ended by a later sweep, or as soon as
    its end is final (``_settle``: at a move of the right input's CTI, a right event's
    arrival or the left's end's): the first matching right start, or the left's own end,
    once no right event can start before it and the left cannot end before it
    (``final_end``).

    Run one join key at a time (``tempo.runtime.keyed``, given ``arrival``), the anti-join is
    fed the output CTI at both inputs and ends no fragment itself: the driver, which sees
    every move of the right input's CTI, does (``tempo.runtime.keyed.AntiJoinTimeline``). Each
    fragment goes out with its left event's id and rank ``(start, id, end)`` (``tell_rank``),
    whole when the sweep decides its end, else open (``tell_waits(1)``: its end waits for the
    right input's CTI) with the end the events held give it so far (``_first_end``); a right
    event that brings an open fragment's end nearer sends that end (``emit_end`` of the
    left's id), at its arrival, and so does the end of a left event with an open fragment,
    nearer or not (told as the left's own end: ``tell_waits(0)``; it may make a cut final).
    """

    WIRING = Operator.WIRING | {"key_fns", "residual", "new_id", "arrival", "tell_rank", "tell_waits"}

    def __init__(
        self,
        key_fns: tuple[Callable[[Any], Key], Callable[[Any], Key]] | None,
        residual: Callable[[Any, Any], Any] | None,
        new_id: Callable[[], int],
    ) -> None:
        super().__init__()
        self.key_fns = key_fns
        self.residual = residual
        self.new_id = new_id
        self.ctis = [NEG_INF, NEG_INF]
        self.out_cti = NEG_INF
        # left rec: [eid, start, end or None, payload, key, open fragment id or None,
        #            time up to which its output is final (a fragment ended by _settle)]
        # Marks say when a left needs a sweep: at its start (swept once the CTI passes it)
        # and at its end minus a tick (a left ending exactly at the CTI closes its last
        # fragment in that sweep).
        self.lefts: dict[int, list[Any]] = {}
        self.lefts_by_key: dict[Key, dict[int, list[Any]]] = {}
        self.left_marks: list[tuple[int, int]] = []  # (time, eid): a left starts or ends
        self.open_lefts: dict[int, list[Any]] = {}  # the lefts with an open fragment
        # right rec: [eid, start, end or None, payload, key]
        self.rights: dict[int, list[Any]] = {}
        self.rights_by_key: dict[Key, dict[int, list[Any]]] = {}
        self.right_marks: list[tuple[int, int, Key]] = []  # (time, seq, key)
        self.right_ends: list[tuple[int, int]] = []
        self.seq = itertools.count()
        self.arrival: Callable[[], int] | None = None
        self.tell_rank: Callable[[tuple[Any, ...]], None] | None = None
        self.tell_waits: Callable[[int | None], None] | None = None

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        key = matching_key(self.key_fns, port, payload)
        if port == 0:
            # (run by key, an eighth: the end its open fragment has so far)
            rec = [eid, start, end, payload, key, None, NEG_INF, INF]
            self.lefts[eid] = rec
            if key is not None:
                self.lefts_by_key.setdefault(key, {})[eid] = rec
            heapq.heappush(self.left_marks, (start, eid))
            if end is not None:
                heapq.heappush(self.left_marks, (end - 1, eid))  # see _end_mark
        elif key is not None:
            self.rights[eid] = [eid, start, end, payload, key]
            self.rights_by_key.setdefault(key, {})[eid] = self.rights[eid]
            heapq.heappush(self.right_marks, (start, next(self.seq), key))
            if end is not None:
                heapq.heappush(self.right_marks, (end, next(self.seq), key))
                heapq.heappush(self.right_ends, (end, eid))
            if self.arrival is not None:  # run by key: it may bring an open fragment's end nearer
                for rec in [r for r in self.open_lefts.values() if r[4] == key]:
                    if self.out_cti <= start < rec[7] and (self.residual is None or self.residual(rec[3], payload)):
                        rec[7] = start
                        self.emit_end(rec[0], start)
            elif start <= self.ctis[1]:  # starting at the right CTI: it may settle an open fragment's end
                for rec in [r for r in self.open_lefts.values() if r[4] == key]:
                    self._settle(rec)

    def end(self, port: int, eid: int, end: int) -> None:
        if port == 0:
            rec = self.lefts.get(eid)
            if rec is None:
                return
            rec[2] = end
            if self.arrival is not None:  # run by key: the driver ends open fragments (AntiJoinTimeline)
                if rec[5] is not None:  # the driver hears the left's end: a cut may be final now
                    assert self.tell_waits is not None
                    rec[7] = min(rec[7], end)
                    self.tell_waits(0)
                    self.emit_end(rec[0], end)
                if end > self.out_cti:
                    heapq.heappush(self.left_marks, (end - 1, eid))  # see _end_mark
                else:  # at the output CTI: its open fragment ends there (the driver's)
                    rec[5] = None
                    self.open_lefts.pop(rec[0], None)
                    self._retire(rec, self.out_cti)
                return
            if end > self.out_cti:
                heapq.heappush(self.left_marks, (end - 1, eid))  # see _end_mark
                if rec[5] is not None:
                    self._settle(rec)
                return
            # Ending exactly at the output CTI (an end is never before its input's CTI, which
            # is at or past the output's): the last sweep reached its end, so its open
            # fragment ends there now; no later CTI need come to close it.
            if rec[5] is not None:
                self._end_fragment(rec, end)
            self._retire(rec, self.out_cti)
        else:
            rrec = self.rights.get(eid)
            if rrec is not None:
                rrec[2] = end
                heapq.heappush(self.right_marks, (end, next(self.seq), rrec[4]))
                heapq.heappush(self.right_ends, (end, eid))

    def cti(self, port: int, t: int) -> None:
        c = output_cti(self.ctis, port, t, self.out_cti)
        if c is None:
            if port == 1 and self.ctis[1] > self.out_cti:  # the right input alone moved on
                self._settle_open()
            return
        p = self.out_cti
        touched: dict[int, list[Any]] = {}
        while self.left_marks and self.left_marks[0][0] < c:
            _, eid = heapq.heappop(self.left_marks)
            rec = self.lefts.get(eid)
            if rec is not None:
                touched[eid] = rec
        while self.right_marks and self.right_marks[0][0] < c:
            _, _, key = heapq.heappop(self.right_marks)
            touched.update(self.lefts_by_key.get(key, {}))
        for rec in sorted(touched.values(), key=lambda r: (r[1], r[0])):
            self._sweep(rec, p, c)
        self.out_cti = c
        self._settle_open()  # the right CTI is at or past c: a right event starting there settles an end
        self.emit_cti(c)
        while self.right_ends and self.right_ends[0][0] <= c:
            _, eid = heapq.heappop(self.right_ends)
            rrec = self.rights.pop(eid, None)
            if rrec is not None:
                group = self.rights_by_key[rrec[4]]
                del group[eid]
                if not group:
                    del self.rights_by_key[rrec[4]]

    def _end_fragment(self, rec: list[Any], at: int) -> None:
        self.emit_end(rec[5], at)
        rec[5] = None
        self.open_lefts.pop(rec[0], None)

    def _settle_open(self) -> None:
        if self.arrival is not None:
            return  # run by key: the driver settles ends (AntiJoinTimeline)
        for rec in list(self.open_lefts.values()):
            self._settle(rec)

    def _first_end(self, rec: list[Any], since: int) -> int:
        """The end of ``rec``'s fragment open at ``since`` as far as the events held tell: the
        earliest of the first matching right start at or after ``since`` and the left's own
        end (INF: neither)."""
        at = INF if rec[2] is None else rec[2]
        for rrec in self.rights_by_key.get(rec[4], {}).values() if rec[4] is not None else ():
            if since <= rrec[1] < at and (self.residual is None or self.residual(rec[3], rrec[3])):
                at = rrec[1]
        return at

    def _settle(self, rec: list[Any]) -> None:
        """End ``rec``'s open fragment now if its end (``_first_end`` from the output CTI) is
        final (``final_end``). Its output is then final up to there, and later sweeps start
        from it."""
        at = self._first_end(rec, self.out_cti)
        if final_end(at, self.ctis, rec[2]):
            self._end_fragment(rec, at)
            rec[6] = at

    def _sweep(self, rec: list[Any], p: int, c: int) -> None:
        start, end, payload, key = rec[1], rec[2], rec[3], rec[4]
        lo = max(p, start, rec[6])
        hi = c if end is None else min(c, end)
        if lo >= hi:
            if rec[5] is not None and end is not None:
                # The left ended exactly where the last sweep stopped (an end is never
                # before the CTI): its open fragment ends there.
                self._end_fragment(rec, end)
            self._retire(rec, c)
            return
        covered: list[tuple[int, int]] = []
        if key is not None:
            for rrec in self.rights_by_key.get(key, {}).values():
                rs, re = rrec[1], INF if rrec[2] is None else rrec[2]
                if rs < hi and re > lo and (self.residual is None or self.residual(payload, rrec[3])):
                    covered.append((max(rs, lo), min(re, hi)))
        covered.sort()
        gaps: list[tuple[int, int]] = []
        cursor = lo
        for cs, ce in covered:
            if cs > cursor:
                gaps.append((cursor, cs))
            cursor = max(cursor, ce)
        if cursor < hi:
            gaps.append((cursor, hi))
        open_id = rec[5]
        keyed = self.arrival is not None  # the driver ends open fragments (AntiJoinTimeline)
        if open_id is not None and not (gaps and gaps[0][0] == lo):
            if not keyed:
                self.emit_end(open_id, lo)  # covered from the start of this span
            open_id = None
        closes_at_end = end is not None and end <= c
        for i, (gs, ge) in enumerate(gaps):
            continuing = i == 0 and open_id is not None
            reaches_span_end = ge == hi and not closes_at_end
            if continuing:
                if not reaches_span_end:
                    if not keyed:
                        self.emit_end(open_id, ge)
                    open_id = None
                continue
            if keyed:
                assert self.tell_rank is not None and self.tell_waits is not None
                self.tell_rank((start, rec[0], end))
                if reaches_span_end:
                    open_id, rec[7] = rec[0], self._first_end(rec, c)
                    self.tell_waits(1)
                    self.emit_insert(open_id, gs, rec[7] if rec[7] < INF else None, payload)
                else:
                    self.emit_insert(rec[0], gs, ge, payload)
            elif reaches_span_end:
                open_id = self.new_id()
                self.emit_insert(open_id, gs, None, payload)
            else:
                self.emit_insert(self.new_id(), gs, ge, payload)
        rec[5] = open_id
        if open_id is None:
            self.open_lefts.pop(rec[0], None)
        else:
            self.open_lefts[rec[0]] = rec
        self._retire(rec, c)

    def idle(self) -> bool:
        """Whether the anti-join holds no event of either input."""
        return not (self.lefts or self.rights)

    def next_release(self) -> int | None:
        """The least output CTI at which the anti-join would sweep a left event (past a start
        or an end of it or of a right event of its key: a mark) or drop a right event no
        later left can meet (at its end), or None."""
        dues = [heap[0][0] + 1 for heap in (self.left_marks, self.right_marks) if heap]
        if self.right_ends:
            dues.append(self.right_ends[0][0])
        return max(min(dues), self.out_cti + 1) if dues else None  # an end at the output CTI is swept at the next

    def _retire(self, rec: list[Any], c: int) -> None:
        if rec[2] is not None and rec[2] <= c:
            self.lefts.pop(rec[0], None)
            if rec[4] is not None:
                group = self.lefts_by_key.get(rec[4])
                if group is not None:
                    group.pop(rec[0], None)
                    if not group:
                        del self.lefts_by_key[rec[4]]


@compiles(p.JoinNode)
def _join(b: Build, node: p.JoinNode) -> Operator:
    residual = None if node.residual is None else codegen.compile_expression(node.residual, 2)
    keyed = b.query.substream_key(node) is not None
    substream_index = node.key_index((b.query.substream_key(node.left), b.query.substream_key(node.right))) if keyed else None
    return Join(join_keys(node), residual, codegen.compile_expression(node.projection, 2), b.new_id, substream_index)


@compiles(p.AntiJoinNode)
def _anti_join(b: Build, node: p.AntiJoinNode) -> Operator:
    residual = None if node.residual is None else codegen.compile_expression(node.residual, 2)
    return AntiJoin(join_keys(node), residual, b.new_id)
