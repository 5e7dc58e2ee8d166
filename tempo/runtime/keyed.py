"""A stateful operator run one key at a time: the cluster engine's keyed operators.

On the cluster (docs/streaming.md, "Live queries on the cluster") a stateful operator's work
is spread over Spark's executors by its group key, each key's state kept in Spark's state
store, while the driver decides time. ``KeyedOperator`` is the runtime's side of that: the
operator the in-memory engine builds for the plan node (``tempo.runtime.operator`` and its
family modules, the one
implementation of its rules), built once, into which one key's saved state is put, that
key's items are pushed, and whose state is taken out again.

What a key is fed, and why the results are the in-memory engine's:

* its events (inserts, and the ends of its open ones) in arrival order, each event id
  unique over the whole input (its position serves); for a hopping window, in their place,
  the aggregates of a batch's events per window (``Merge``), as the bulk engines merge them
  (``tempo.runtime.bulk``: exact, since every event a batch admits reaches only windows its
  CTIs have not closed); for a session window without a max_duration, the runs of a batch's
  events (``Run``: events whose sessions would chain, aggregated apart);
* every CTI the operator's input receives, in order, up to the key's last item and then up
  to the CTI its results are wanted at. A CTI's effect on one group depends only on that
  group's events and the CTIs before it (a window closes a group's windows ending at or
  before it), so a key sees exactly what it would see beside the other keys;
* the operator's ``SHARED`` state, computed over every key's events by whoever sees them
  all (for the window, the latest finite time, where open lifetimes end when the input
  ends): combined into the key's own before its items.
* for a node keyed by its substream key rather than its group key (``by_substream``: the
  output's release by that key, a window keeping it), that key's own CTIs at their places
  among its events (``KeyCti``): all the groups of one substream key are one key, and what
  a key's CTI releases goes out at its arrival.

The operators with a keyed form: hopping and tumbling windows, sessions, count windows and
snapshots (``KEYED_STAMPS``), analytics (``order_by_time``, ``analytic``),
``clip_event_duration``, the join, the anti-join and the
pattern (keyed by their join key, fed the output CTI at both inputs: ``KEYED_JOIN``,
``KEYED_ANTI_JOIN``, ``KEYED_PATTERN``) and the output's release (``ReleaseNode``: an ``order_by_time`` whose
payloads all tie, which the cluster engine puts on top of a query without another). Each result comes with the CTI that released it; a window's stamped
so that this CTI follows from it (a result stamped otherwise is stamped again by
``restamp``), an analytic's and a release's with its event's id and rank, a snapshot's start edges with their
window's start as id (``ids_by_start``: one window of a group starts there), a clip's outputs
with their events' ids, and the ends of open outputs as results of their own. The results of
all keys, each placed before the first CTI that released it in memory (``placed``, from
``released_from``) and in ``release_order`` among those, are the in-memory engine's, but for
the order of a window's groups among themselves, which the semantics leave open (docs/semantics.md 5.7).
"""

from __future__ import annotations

import bisect
import heapq
import io
import pickle
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from tempo.errors import UnsupportedError
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.plan.windows import CountWindow, HoppingWindow, SessionWindow, SnapshotWindow, WindowTimestamp
from tempo.runtime import event_windows as ew
from tempo.runtime.analytics import Analytic
from tempo.runtime.clip import Clip
from tempo.runtime.joins import AntiJoin, Join, final_end
from tempo.runtime.operator import Operator
from tempo.runtime.patterns import FollowedBy
from tempo.runtime.windows import Window, stamp
from tempo.runtime.build import Build
from tempo.runtime.engine import build_operator
from tempo.runtime.ingress import TimestampMode
from tempo.runtime.live import StatePickler, put_state, state_of
from tempo.ticks import INF, NEG_INF

EXECUTOR = "keyed"


@attrs.frozen
class Insert:
    """An event of the key reaching the operator (at its input ``port``: a join's left 0 or
    right 1): ``eid`` unique over the whole input, ``at`` its place in the arrival order over
    all keys (an analytic's, a release's and a join's outputs of one start go in that order)."""

    eid: int
    start: int
    end: int | None
    payload: Any
    at: int = 0
    port: int = 0


@attrs.frozen
class End:
    """The end of the key's open event ``eid`` (of input ``port``); ``at`` its place in the
    arrival order over all keys (an analytic's output ends in that order)."""

    eid: int
    end: int
    at: int = 0
    port: int = 0


@attrs.frozen
class Cti:
    """A CTI of the operator's input."""

    t: int


@attrs.frozen
class KeyCti:
    """A CTI of one substream key of the input of a node keyed by that key (``by_substream``);
    ``at`` its place in the arrival order over all keys."""

    key: Any
    t: int
    at: int


@attrs.frozen
class Merge:
    """A hopping window's aggregates over some of the key's events, computed apart
    (``tempo.runtime.windows.Window.merge`` states the terms)."""

    key: tuple[Any, ...]
    k: int | None
    n: int
    values: tuple[Any, ...]
    t_max: int


@attrs.frozen
class Run:
    """A session window's run of some of the key's events, its aggregates computed apart
    (``tempo.runtime.event_windows.Sessions.merge_run`` states the terms): ``n`` events from
    ``start``, ending by ``end``."""

    key: tuple[Any, ...]
    start: int
    end: int
    n: int
    values: tuple[Any, ...]


KeyedItem = Insert | End | Cti | KeyCti | Merge | Run


@attrs.frozen
class KeyedResult:
    """A result the key's part of the operator released, at ``cti`` (the CTI being processed,
    or for an analytic's end the CTI in force when it arrived): an event (``ended`` False;
    ``end`` None while open) or the end of one released open (``ended``: ``start`` unknown, 0).
    ``eid`` is its id in the key (an analytic's and a clip's: its event's, unique over all
    keys; a snapshot's: its window's start); an analytic's ``rank`` is an event's (payload
    order, arrival) among those one CTI releases in its group, an end's (its arrival,)
    (``release_order``)."""

    cti: int
    start: int
    end: int | None
    payload: Any
    eid: int | None = None
    rank: tuple[Any, ...] = ()
    ended: bool = False
    closes: int | None = None
    """For a hopping window's result stamped at its earliest or latest event, the end of its
    window: where the CTI that released it follows from, which its lifetime does not say."""
    waits: int | None = None
    """For a join's pair of an open event (or one ending at infinity) and one ending at
    ``end``: the open one's input, whose own CTI decides when that end goes out
    (``JoinTimeline``); for an anti-join's open fragment, 1: ``end`` is the end it has so far,
    which the inputs' CTIs make final (``AntiJoinTimeline``); for an end it is told at an
    arrival, 0 when that end is the left event's own (nearer or not)."""
    by_key: int | None = None
    """For a keyed release: the arrival of the substream key's CTI that released this event
    (or, with ``key_cti``, that this result is: ``payload`` its key, ``start`` its time)."""
    key_cti: bool = False
    member: int = 0
    """Which operator of a ``KeyedOperator`` with a partner gave it: 0 the node's, 1 the partner's."""


class Collector(Operator):
    """Records what an operator connected to it emits, with the CTI being processed
    (``cti_now``, set by whoever feeds the operator), the rank the operator told (``rank``)
    and the arrival of the item being fed over all keys (``arrival``); with ``ids``, each result's id (an
    analytic's outputs keep their events' ids: ``Analytic.keep_ids``)."""

    def __init__(self, ids: bool = False) -> None:
        super().__init__()
        self.ids = ids
        self.cti_now = NEG_INF
        self.arrival = 0
        self.ranked: tuple[Any, ...] = ()
        self.window_end: int | None = None
        self.waiting: int | None = None
        self.by_key: int | None = None
        """The arrival of the substream key's CTI being fed, if one is."""
        self.results: list[KeyedResult] = []

    def rank(self, rank: tuple[Any, ...]) -> None:
        self.ranked = rank

    def window(self, end: int) -> None:
        self.window_end = end

    def waits(self, port: int | None) -> None:
        self.waiting = port

    def arrived(self) -> int:
        """The arrival of the item being fed, over all keys."""
        return self.arrival

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        self.results.append(
            KeyedResult(
                self.cti_now,
                start,
                end,
                payload,
                eid if self.ids else None,
                self.ranked,
                closes=self.window_end,
                waits=self.waiting,
                by_key=self.by_key,
            )
        )
        self.window_end = self.waiting = None

    def end(self, port: int, eid: int, end: int) -> None:  # an analytic's or a snapshot's open output ending, an anti-join's nearer end
        if not self.ids:
            raise AssertionError("a keyed hopping, session or count window emits whole lifetimes, no end edges")
        self.results.append(KeyedResult(self.cti_now, 0, end, None, eid, (self.arrival,), ended=True, waits=self.waiting))
        self.waiting = None

    def cti(self, port: int, t: int) -> None:  # the operator's output CTI is the driver's to decide
        return None

    def key_cti(self, port: int, key: Any, t: int) -> None:  # a keyed release's: passed on at its place
        assert self.by_key is not None
        self.results.append(KeyedResult(self.cti_now, t, None, key, rank=(self.by_key,), by_key=self.by_key, key_cti=True))


_W = WindowTimestamp
KEYED_STAMPS: dict[type, dict[WindowTimestamp, WindowTimestamp]] = {
    HoppingWindow: {
        _W.LIFETIME: _W.LIFETIME,
        _W.END: _W.END,
        _W.START: _W.LIFETIME,
        _W.CTI: _W.END,
        _W.EARLIEST: _W.EARLIEST,
        _W.LATEST: _W.LATEST,  # results carrying their window's end beside the stamp (``closes``)
    },
    SessionWindow: {_W.END: _W.END, _W.CTI: _W.END},
    CountWindow: {_W.END: _W.END, _W.LATEST: _W.LATEST, _W.CTI: _W.END},  # a count window's latest start is its last tick
    # A snapshot's results are start edges ended later, or points at the window's start or its
    # last tick: each released just past a time it carries (``released_from``).
    SnapshotWindow: {
        _W.LIFETIME: _W.LIFETIME,
        _W.START: _W.START,
        _W.EARLIEST: _W.EARLIEST,
        _W.LATEST: _W.LATEST,
        _W.END: _W.END,
        _W.CTI: _W.END,
    },
}
"""The windows with a keyed form, each result stamp they take mapped to the stamp a key's
operator computes with: one from whose results the CTI that released each follows, whoever
learns it (``released_from``; a key without rows in a batch hears only the batch's last
CTI): a hopping window's, a session's and a count window's end where the window ends, a
snapshot's start where the window starts or end where it ends. Whoever learns that CTI then
stamps the result as the query asks (``restamp``). A hopping window's result stamped at its
earliest or latest event carries its window's end beside the stamp (``KeyedResult.closes``)."""


KEYED_NODES = (p.WindowNode, p.AnalyticNode, p.ClipNode, p.ReleaseNode)
"""The kinds of plan node with a keyed form (a window's, for the kinds in ``KEYED_STAMPS``)."""

KEYED_JOIN = p.JoinNode
"""The join's keyed form: a key holds its join key's events of both inputs and the pairs
waiting for an output CTI past their start. It is fed the output CTI (the least of the
inputs') at both inputs: its pairs go out at the same output CTIs, and it drops a held event
no later than the join over all keys, which drops it at the other input's CTI. A pair of an
open event and one ending at ``end`` goes out whole, with the open one's input
(``KeyedResult.waits``), whose own CTI decides whether the join over all keys gave it whole
or as a start edge ended later: the driver, which sees every move of the inputs' CTIs, splits
it so (``JoinTimeline``). The ends of its open events reach it too (``End``, of either input):
the end such an end gives a pair already out goes at its arrival (an ``ENDED`` result of the
pair's id, ``joins.pair_id``, with the input still open, if any), which the driver places among the
moves of the inputs' CTIs (``JoinTimeline.arrived``). A join keeping a substream key is keyed
by that key (``by_substream``: its join keys of one substream key in one key), and hears
each key's output CTI (the least of that key's CTIs at the inputs, which the driver works
out as the join over all keys does, ``operator.KeyCtis``) at both inputs, as a ``KeyCti``:
the pairs it releases go out at its arrival."""


class JoinTimeline:
    """The driver's side of a keyed join: each input's CTI and the output CTI, as the join over
    all keys has them, and the pairs it gave out as start edges (the join's own rule,
    ``tempo.runtime.joins.Join``: a pair's end is final once both ends are known, or the
    input whose event is open has its CTI at or past it). Fed, in arrival order, every move of
    an input's CTI (``move``: the ends it settles), each pair as the output CTI releases it
    (``give``: whole, or a start edge whose end waits), and the ends the end edges of open
    events give pairs, at their arrival (``arrived``)."""

    def __init__(self) -> None:
        self.ctis = [NEG_INF, NEG_INF]
        self.out = NEG_INF
        self.waiting: tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]] = ([], [])
        """Per input, the pairs given out as start edges whose end waits for that input's CTI:
        (end, order given, output id), a heap (an entry whose pair ended since is skipped)."""
        self.given = 0
        self.open: dict[tuple[str, int], int] = {}
        """The pairs given out as start edges and not ended yet: (join key's name, the key's
        pair id) -> output id; ``open_ids`` the other way."""
        self.open_ids: dict[int, tuple[str, int]] = {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update({"open": {}, "open_ids": {}} | state)  # a timeline saved before pairs had ids

    def move(self, port: int, t: int) -> list[tuple[int, int]]:
        """Input ``port``'s CTI moves to ``t``: the pairs whose ends it settles, (output id, end),
        in the join's order (by end, then as given out)."""
        if t <= self.ctis[port]:
            return []
        self.ctis[port] = t
        heap, settled = self.waiting[port], []
        while heap and heap[0][0] <= t:
            end, _, oid = heapq.heappop(heap)
            if self._close(oid):
                settled.append((oid, end))
        return settled

    def give(self, result: KeyedResult, oid: int, group: str) -> int | None:
        """The end pair ``result`` of join key ``group`` (given output id ``oid``) goes out with
        now: its end if it is final (both ends known, or the open event's input's CTI at or
        past it), else None: a start edge, ended by a move of that CTI or at an arrival."""
        if result.end is not None and (result.waits is None or self.ctis[result.waits] >= result.end):
            return result.end
        if result.end is not None:
            assert result.waits is not None
            self._wait(result.waits, result.end, oid)
        assert result.eid is not None, "a keyed join's pairs carry their ids"
        self.open[(group, result.eid)] = oid
        self.open_ids[oid] = (group, result.eid)
        return None

    def arrived(self, group: str, ends: Iterable[KeyedResult]) -> list[tuple[int, int]]:
        """The end edge of an open event of join key ``group`` arrived, giving pairs ``ends``
        (the key's ``ENDED`` results at its arrival, each with the input still open, if any):
        the pairs it ends now, (output id, end), in order; the others wait for that input's
        CTI."""
        settled = []
        for r in ends:
            assert r.eid is not None and r.end is not None
            oid = self.open.get((group, r.eid))
            if oid is None:  # given whole, or ended by a move of a CTI already
                continue
            if r.waits is None or self.ctis[r.waits] >= r.end:
                self._close(oid)
                settled.append((oid, r.end))
            else:
                self._wait(r.waits, r.end, oid)
        return settled

    def _wait(self, port: int, end: int, oid: int) -> None:
        heapq.heappush(self.waiting[port], (end, self.given, oid))
        self.given += 1

    def _close(self, oid: int) -> bool:
        """Forget open pair ``oid``: whether it was open."""
        key = self.open_ids.pop(oid, None)
        if key is None:
            return False
        del self.open[key]
        return True


KEYED_ANTI_JOIN = p.AntiJoinNode
"""The anti-join's keyed form: a key holds its join key's left events and the right events
that may still cover them (a left event whose key is null is a key of its own, never
covered), fed the output CTI at both inputs, and the ends of its open events (``End``, of
either input). It gives each fragment (an uncovered stretch of a left event) once, at the
output CTI whose sweep finds it, with its left event's id and rank (start, id, end): whole if
that sweep decides its end, else open with the end the key's events give it so far; and the
nearer end a right event or the left event's own end brings an open fragment, at its
arrival. The anti-join over all keys ends an open fragment as soon as the right input's CTI
makes its end final, between output CTIs too: the driver, which sees every move of the
inputs' CTIs, does (``AntiJoinTimeline``)."""


class AntiJoinTimeline:
    """The driver's side of a keyed anti-join: each input's CTI and the output CTI, as the
    anti-join over all keys has them, and the fragments open at it, in the order it settles
    them (``open``), each with the end it has so far. Fed, in arrival order, every move of an
    input's CTI with the fragments the output CTI it moves releases (``move``: its sweep, then
    the ends the right input's CTI makes final), and the nearer ends a right event or a left
    event's end brought, at its arrival (``arrived``); it emits through ``op``, an anti-join operator in the keyed one's
    place (its ``new_id``, ``emit_insert``, ``emit_end``). The anti-join's own rules,
    ``tempo.runtime.joins.AntiJoin``: a fragment's end is final once the right input's CTI
    reaches it and the left event cannot end before it (``final_end``); a sweep to ``c`` gives whole the fragments ending before ``c`` or with their
    left event at ``c``, and ends, in the place of their left event, the open ones it ends."""

    def __init__(self) -> None:
        self.ctis = [NEG_INF, NEG_INF]
        self.out = NEG_INF
        self.open: dict[tuple[str, int], list[Any]] = {}
        """(join key's name, left event's id) -> [output id, end so far (INF: none), the left
        event's end (None: not known yet), its start], in the order the anti-join over all
        keys keeps them."""

    def arrived(self, op: AntiJoin, group: str, ends: Iterable[KeyedResult]) -> None:
        """A right event of join key ``group``, or the end of a left one, arrived, bringing
        open fragments the ``ends`` (the key's ``ENDED`` results at its arrival): a right
        event's are nearer; a left event's own end (``waits`` 0) is told whether nearer or not,
        since knowing it may make a later cut final (and its fragment may have ended already,
        as the key cannot know). Those it makes final end now."""
        for r in ends:
            assert r.eid is not None and r.end is not None
            held = self.open.get((group, r.eid))
            if held is None:  # a left event's end after its fragment ended
                continue
            held[1] = min(held[1], r.end)
            if r.waits == 0:
                held[2] = r.end
        self._settle(op, group)

    def move(self, op: AntiJoin, port: int | None, t: int, out: int, fragments: Iterable[tuple[str, KeyedResult]]) -> None:
        """Input ``port``'s CTI moves to ``t`` (None: no move), the output CTI to ``out``, which
        releases ``fragments`` (group, result); the caller emits the output CTI after."""
        if port is not None and t > self.ctis[port]:
            self.ctis[port] = t
        if out > self.out:
            self._sweep(op, out, fragments)
            self.out = out
            self._settle(op, None)
        elif port == 1:
            self._settle(op, None)

    def _sweep(self, op: AntiJoin, c: int, fragments: Iterable[tuple[str, KeyedResult]]) -> None:
        items: list[tuple[tuple[Any, ...], tuple[str, int], KeyedResult | None]] = [
            ((held[3], key[1], 0, 0), key, None) for key, held in self.open.items() if held[1] < c or held[1] == c == held[2]
        ]
        for group, fragment in fragments:
            assert fragment.eid is not None
            items.append(((fragment.rank[0], fragment.rank[1], 1, fragment.start), (group, fragment.eid), fragment))
        closed: set[tuple[str, int]] = set()
        for _, key, r in sorted(items, key=lambda item: item[0]):
            if r is None:  # its left event's sweep ends its open fragment
                op.emit_end(self.open[key][0], self.open[key][1])
                closed.add(key)
                continue
            left_end = r.rank[2]
            if r.end is not None and (r.end < c or r.end == c == left_end):
                op.emit_insert(op.new_id(), r.start, r.end, r.payload)
                continue
            oid = op.new_id()
            op.emit_insert(oid, r.start, None, r.payload)
            self.open[key] = [oid, INF if r.end is None else r.end, left_end, r.rank[0]]  # in its old place, if it had one
            closed.discard(key)
        for key in closed:
            del self.open[key]

    def _settle(self, op: AntiJoin, group: str | None) -> None:
        """End the open fragments (of ``group`` alone, if given) whose end the right input's CTI
        has made final, in the order held."""
        for key, held in list(self.open.items()):
            if (group is None or key[0] == group) and final_end(held[1], self.ctis, held[2]):
                op.emit_end(held[0], held[1])
                del self.open[key]


KEYED_PATTERN = p.FollowedByNode
"""The pattern's keyed form: a key holds its join key's left events waiting and right events
not yet matched, fed the output CTI at both inputs. Its matches are points at their right
event's start, whole, released with the output CTI past it and ranked as the pattern over all
keys emits them (``tempo.runtime.patterns.FollowedBy``); end edges reach it and change
nothing (a pattern reads starts only)."""

MATCHING = (KEYED_JOIN, KEYED_ANTI_JOIN, KEYED_PATTERN)
"""The keyed nodes of two inputs, keyed by their join key (their operators: ``TWO_INPUTS``)."""

IN_ORDER = (p.AnalyticNode, p.ReleaseNode)
"""The keyed nodes built as an ``Analytic`` (a release is an ``order_by_time`` tying every
payload): an output goes once a CTI passes its start, the end of an open one as it arrives."""


def by_substream(query: Query, node: p.Node) -> bool:
    """Whether ``node``'s keyed form is keyed by its substream key rather than its group key:
    a node with a keyed form that keeps the key (the output's release by it,
    ``ReleaseNode.keyed_by``; a hopping window grouping by it, ``WindowNode.substream_key``;
    a join equating its inputs' keys and copying one, ``JoinNode.substream_key``, whose keys
    hear each key's output CTI at both inputs, as they hear the output CTI: ``KEYED_JOIN``).
    Its output moves on each key's own CTIs, which close that key's groups ahead of the
    input's CTI: all groups of one substream key are one key of the keyed form, fed that
    key's CTIs at their places among its events (``KeyCti``), and the results a key's CTI
    releases go out at its arrival (``KeyedResult.by_key``)."""
    return isinstance(node, (*KEYED_NODES, KEYED_JOIN)) and query.substream_key(node) is not None


def keyed_unsupported(node: p.Node) -> str | None:
    """Why ``node``'s operator cannot run one key at a time yet, or None."""
    if isinstance(node, (*IN_ORDER, p.ClipNode, *MATCHING)):
        return None
    if not isinstance(node, p.WindowNode):
        return f"{type(node).__name__} has no keyed form yet"
    stamps = KEYED_STAMPS.get(type(node.spec))
    if stamps is None:
        return f"{node.spec.describe()} has no keyed form yet"
    if node.timestamp not in stamps:
        taken = ", ".join(sorted(t.name for t in stamps))
        return f"its window's results are stamped {node.timestamp.name} (a keyed {node.spec.describe()} stamps them {taken})"
    return None


def restamp(window: p.WindowNode, start: int, end: int, released_by: int | None, last_finite: int) -> tuple[int, int]:
    """The lifetime of a result of ``window``'s keyed operator (computed with the stamp
    ``KEYED_STAMPS`` gives: ``[start, end)``, ``end`` the window's end) stamped as the window
    asks, ``released_by`` the CTI that released it (None: a substream key's CTI, which
    releases no result stamped at the releasing CTI: ``WindowNode.substream_key``) and
    ``last_finite`` the last finite CTI before that one (``tempo.runtime.windows.stamp``,
    the one rule)."""
    if KEYED_STAMPS[type(window.spec)][window.timestamp] is window.timestamp:
        return start, end
    assert released_by is not None or window.timestamp is not WindowTimestamp.CTI, (
        "a window stamped at the releasing CTI keeps no substream key"
    )
    t = stamp(window.timestamp, start, end, None, NEG_INF if released_by is None else released_by, last_finite)
    return t, t + 1


def may_reach_infinity(query: Query, window: p.Node) -> bool:
    """Whether ``window``'s input lifetimes may reach infinity: then its open lifetimes end,
    when the input ends, after the latest finite time over all keys (``Window.SHARED``),
    which the keys must be given at the flush. An analytic ends no lifetime of its own."""
    return isinstance(window, p.WindowNode) and query.longest_lifetime(window.input) is None


def released_from(node: p.Node, result: KeyedResult) -> int:
    """The least CTI that released ``result`` of ``node``'s keyed operator in memory: the
    first CTI at or after it did (a key without rows in a batch hears only the batch's last
    CTI, so ``result.cti`` may be later). A window's result closes with its window, at its
    end (which a result stamped at an event carries beside it: ``closes``); an analytic's output goes once a CTI passes its start, and the end of an open one
    as it arrives, before the CTI after the one then in force (a release's alike). A snapshot's window is fixed
    by a CTI past its start and ends at a CTI past its end (docs/semantics.md 5.6.4): a start
    edge or a point at the start goes then, a point at its last tick or the edge's end then.
    A clipped event goes once a CTI passes its start, its end once a CTI passes it (5.5.2)."""
    if isinstance(node, IN_ORDER):
        return result.cti + 1 if result.ended else result.start + 1
    if isinstance(node, MATCHING):  # a pair, a fragment or a match goes once the output CTI passes its start
        return result.start + 1
    if isinstance(node, p.ClipNode):
        return result.end + 1 if result.ended and result.end is not None else result.start + 1
    assert isinstance(node, p.WindowNode)
    if isinstance(node.spec, SnapshotWindow):
        at_end = result.ended or KEYED_STAMPS[SnapshotWindow][node.timestamp] is _W.END
        return result.end + 1 if at_end and result.end is not None else result.start + 1
    if result.closes is not None:
        return result.closes
    assert result.end is not None
    return result.end


def release_order(node: p.Node, result: KeyedResult, group: str) -> tuple[Any, ...]:
    """The place of ``result`` (of group key ``group``, by ``repr``) among the results of all
    keys one CTI releases, as the operator over all keys orders them: a window's by start and
    end (its groups among themselves by key: the semantics leave that order open,
    docs/semantics.md 5.7), a snapshot's ends first, by end; an analytic's ends first, in
    arrival order, as they went out before the CTI, then its events by start, payload order
    and arrival (events of two groups never tie on the payload, of which the group key is a
    function); a release's as an analytic's, its events by start and arrival alone. An end whose event the same CTI releases follows that event (the driver's
    ``_emit``)."""
    if result.ended and isinstance(node, IN_ORDER):
        return (0, result.rank)
    if result.ended:  # a snapshot's or a clip's edge ending: its groups among themselves as a window's
        return (0, result.end, group, result.eid)
    if isinstance(node, p.AnalyticNode):
        okey, arrival = result.rank
        return (1, result.start, okey, group, arrival)
    if isinstance(node, p.ReleaseNode):  # the output's own order: by start, then arrival over all keys
        return (1, result.start, result.rank[1])
    if isinstance(node, (KEYED_JOIN, KEYED_PATTERN)):  # by start, then as pushed (a pair) or matched (a match)
        return (1, result.start, result.rank)
    if isinstance(node, KEYED_ANTI_JOIN):  # as its sweep: by its left event's start and id (AntiJoinTimeline)
        return (1, result.rank[0], result.rank[1], result.start)
    if isinstance(node, p.ClipNode):  # a group's events of one start in arrival order, as their ids are
        return (1, result.start, group, result.eid)
    if result.closes is not None:  # stamped at an event: the window's results go in order of window
        return (1, result.closes, group)
    return (1, result.start, INF if result.end is None else result.end, group)


def placed(node: p.Node, result: KeyedResult, ctis: Sequence[int]) -> list[tuple[int, KeyedResult]]:
    """Where ``result`` of ``node``'s keyed operator goes among ``ctis`` (sorted): before the
    one at the index given, the first that released it in memory (``released_from``; the
    length of ``ctis``: after the last, for an analytic's end passed on after it). A clipped
    event whose end its key knew when it gave it out (a key without rows hears only the
    batch's last CTI) may have gone out in memory as a start edge, before a CTI passed that
    end: then it goes as a start edge, and its end as a result of its own, each where it went."""
    at = bisect.bisect_left(ctis, released_from(node, result))
    if isinstance(node, p.ClipNode) and not result.ended and result.end is not None:
        ended = KeyedResult(result.cti, 0, result.end, None, result.eid, ended=True)
        end_at = bisect.bisect_left(ctis, released_from(node, ended))
        if end_at > at:
            return [(at, attrs.evolve(result, end=None)), (end_at, ended)]
    return [(at, result)]


TIMED = (Window, ew.Sessions, ew.CountWindows, ew.Snapshots, Analytic, Clip, Join, AntiJoin, FollowedBy)
"""The operators with a keyed form: each says when a key of it is due (``next_release``) and
whether it holds nothing (``idle``)."""


def keyed_collector(operator: Operator) -> Collector:
    """A ``Collector`` connected to ``operator``, which is set to give its outputs the ids a
    key keeps across runs (an analytic's and a clip's: their events'; a snapshot's: its
    window's start; a join's: its pairs', ``joins.pair_id``; an anti-join's: its left events') and, an analytic, to tell each output's rank."""
    collector = Collector(ids=isinstance(operator, (Analytic, ew.Snapshots, Clip, Join, AntiJoin)))
    if isinstance(operator, Analytic):
        operator.keep_ids, operator.tell_rank = True, collector.rank
        operator.arrival = collector.arrived
    if isinstance(operator, Clip):
        operator.keep_ids = True
    if isinstance(operator, (Join, AntiJoin)):
        operator.arrival, operator.tell_rank, operator.tell_waits = collector.arrived, collector.rank, collector.waits
    if isinstance(operator, FollowedBy):
        operator.arrival, operator.tell_rank = collector.arrived, collector.rank
    if isinstance(operator, ew.Snapshots):
        operator.ids_by_start = True
    if isinstance(operator, Window):
        operator.tell_window = collector.window
    operator.connect(collector, 0)
    return collector


class KeyedOperator:
    """The operator of one plan node, run one key at a time (see the module's docstring);
    with a ``partner`` (a left outer join's anti-join beside its join: the same inputs, the
    same join key), the partner's operator too, fed the same items, each key's state the
    pair of theirs and its results marked with their ``member``."""

    def __init__(self, query: Query, node: p.Node, mode: TimestampMode | None = None, partner: p.AntiJoinNode | None = None) -> None:
        self.partner = None if partner is None else KeyedOperator(query, partner, mode)
        why = keyed_unsupported(node)
        if why is not None:
            raise UnsupportedError(EXECUTOR, node.describe().splitlines()[0], why)
        if mode is None:
            mode = TimestampMode()
            mode.saw(aware=True)  # live inputs are tables: their times are instants, given as aware UTC
        if isinstance(node, p.WindowNode) and KEYED_STAMPS[type(node.spec)][node.timestamp] is not node.timestamp:
            # The same plan, its window computing with the stamp its keyed form takes.
            computing = KEYED_STAMPS[type(node.spec)][node.timestamp]
            index = next(i for i, n in enumerate(query.nodes) if n is node)
            computing_node = attrs.evolve(node, timestamp=computing)
            query = Query.build(p.rebuilt(query.root, lambda n: computing_node if n is node else None))
            node = query.nodes[index]
        self.operator = build_operator(Build(mode, query), node)
        self.collector = keyed_collector(self.operator)
        self.fresh = self._save()

    def _save(self) -> bytes:
        buffer = io.BytesIO()
        StatePickler(buffer).dump(state_of(self.operator, self.operator.WIRING))
        return buffer.getvalue()

    def run(
        self, state: bytes | None, items: Iterable[KeyedItem], shared: Mapping[str, Any] | None = None
    ) -> tuple[list[KeyedResult], bytes]:
        """Put the key's ``state`` (None: a key not seen before) into the operator, combine
        ``shared`` into it, push ``items`` in order: the results released, and the state after."""
        if self.partner is not None:
            items = list(items)
            mine, theirs = (None, None) if state is None else pickle.loads(state)
            results, mine = self._run(mine, items, shared)
            partnered, theirs = self.partner.run(theirs, items, shared)
            return results + [attrs.evolve(r, member=1) for r in partnered], pickle.dumps((mine, theirs))
        return self._run(state, items, shared)

    def _run(self, state: bytes | None, items: Iterable[KeyedItem], shared: Mapping[str, Any] | None) -> tuple[list[KeyedResult], bytes]:
        op, collector = self.operator, self.collector
        put_state(op, pickle.loads(self.fresh if state is None else state))
        for name, value in (shared or {}).items():
            setattr(op, name, op.SHARED[name](getattr(op, name), value))
        collector.results = []
        collector.cti_now = cti_in_force(op)  # the key's, until its items bring another
        feed(op, collector, items)
        return collector.results, self._save()

    def idle(self) -> bool:
        """Whether the key whose state ``run`` just left holds nothing: its state may be
        dropped, and a fresh operator, given the CTI in force before the key's next items,
        does what it would."""
        assert isinstance(self.operator, TIMED)
        return self.operator.idle() and (self.partner is None or self.partner.idle())

    def latest(self) -> int:
        """The latest finite time the key whose state ``run`` just left has seen (the
        operator's shared ``t_max``): the greatest over all keys is where the operator, had
        it seen them all, ends open lifetimes when the input ends."""
        assert isinstance(self.operator, (Window, ew.EventWindows))
        return self.operator.t_max

    def next_release(self) -> int | None:
        """The least CTI at which the key whose state ``run`` just left would release a
        result (None: it holds nothing), where its timer goes."""
        assert isinstance(self.operator, TIMED)
        due = [t for t in (self.operator.next_release(), None if self.partner is None else self.partner.next_release()) if t is not None]
        return min(due, default=None)


def feed(op: Operator, collector: Collector, items: Iterable[KeyedItem]) -> None:
    """Push ``items`` into ``op`` (connected to ``collector``) in order."""
    for item in items:
        if isinstance(item, Insert):
            collector.arrival = item.at
            op.insert(item.port, item.eid, item.start, item.end, item.payload)
        elif isinstance(item, End):
            collector.arrival = item.at
            op.end(item.port, item.eid, item.end)
        elif isinstance(item, Merge):
            assert isinstance(op, Window)
            op.merge(item.key, item.k, item.n, item.values, item.t_max)
        elif isinstance(item, Run):
            assert isinstance(op, ew.Sessions)
            op.merge_run(item.key, item.start, item.end, item.n, item.values)
        elif isinstance(item, KeyCti):
            collector.arrival = collector.by_key = item.at
            op.key_cti(0, item.key, item.t)
            if isinstance(op, TWO_INPUTS):  # a join's key hears its key's output CTI at both inputs
                op.key_cti(1, item.key, item.t)
            collector.by_key = None
        else:
            collector.cti_now = item.t
            pass_cti(op, item.t)


def cti_in_force(op: Operator) -> int:
    """The CTI in force at a keyed operator's input: the output CTI of an operator of two
    inputs (``TWO_INPUTS``), which its keys are fed at both, or the CTI the operator received
    last (none yet: NEG_INF)."""
    return op.out_cti if isinstance(op, TWO_INPUTS) else int(getattr(op, "in_cti", NEG_INF))


def pass_cti(op: Operator, t: int) -> None:
    """CTI ``t`` into a keyed operator, at each of its inputs (the output CTI at both of an
    operator of two inputs)."""
    op.cti(0, t)
    if isinstance(op, TWO_INPUTS):
        op.cti(1, t)


TWO_INPUTS = (Join, AntiJoin, FollowedBy)
"""The keyed operators of two inputs (of ``MATCHING``'s nodes)."""
