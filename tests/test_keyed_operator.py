"""A window operator (hopping, tumbling, sessions) run one key at a time
(``tempo.runtime.keyed``) releases what the operator run over all keys releases.

The reference is the in-memory engine's own window operator fed a random sequence of
events of several keys (points, intervals, lifetimes spanning more than the operator adds
on arrival, open events ended later or never) and CTIs, the CTI at infinity last at times.
The keyed side cuts the same sequence into random batches and, batch by batch, runs each key
seen so far through one ``KeyedOperator``: its saved state, its own events and every CTI,
and the latest finite time over all keys' events (``SHARED``); after each, the key's
``next_release`` must be the first CTI that releases something of it (for sessions, at or
before it, and a CTI at it must change the key's state: the timer moves on). A key that holds
nothing after a batch (``idle``) is forgotten, and comes back as a new key. Both sides' results, with the
CTI that released each, sorted by (CTI, start, end, group key), must be equal, payloads
exactly (a key's float sums add its events in arrival order on both sides).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import attrs
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import EventShape, Stream, UnsupportedError
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.plan.windows import WindowTimestamp
from tempo.runtime.event_windows import CountWindows, Snapshots
from tempo.runtime.clip import Clip
from tempo.runtime.windows import Window as WindowOperator
from tempo.runtime.build import Build
from tempo.runtime.engine import build_operator
from tempo.runtime.ingress import TimestampMode
from tempo.runtime.analytics import Analytic
from tempo.plan.windows import CountWindow, HoppingWindow, SessionWindow, SnapshotWindow
from tempo.runtime.keyed import (
    KEYED_STAMPS,
    Cti,
    End,
    Insert,
    KeyCti,
    KeyedItem,
    KeyedOperator,
    KeyedResult,
    by_substream,
    feed,
    keyed_collector,
    placed,
    release_order,
    released_from,
)
from tempo.ticks import INF, NEG_INF
from tests.budget import examples

SECOND = 1_000_000


@attrs.frozen
class Reading:
    key: int
    value: float


@attrs.frozen
class Stats:
    key: int
    n: int
    total: float | None
    low: float | None


def _readings(shape: EventShape = EventShape.INTERVAL) -> Stream[Reading]:
    """An input of readings (empty: the operators under test are fed by hand)."""
    from tempo.sources import ArrowSource

    table = pa.table(
        {"ts": pa.array([], pa.timestamp("us", tz="UTC")), "key": pa.array([], pa.int64()), "value": pa.array([], pa.float64())}
    )
    return Stream.create("r", ArrowSource(table, Reading, start="ts"), shape)


def _stats_node(windowed: Callable[[Any], Any]) -> tuple[Query, p.WindowNode]:
    """The window ``windowed`` makes of the readings grouped by key, aggregated into Stats."""
    grouped = _readings().group_by(lambda r: r.key)
    stream = windowed(grouped).aggregate(
        lambda k, w: Stats(key=k, n=w.count(), total=w.sum(lambda r: r.value), low=w.min(lambda r: r.value))
    )
    query = Query.build(stream.node)
    [node] = [n for n in query.nodes if isinstance(n, p.WindowNode)]
    return query, node


def _window_node(size: int = 4, hop: int = 2) -> tuple[Query, p.WindowNode]:
    return _stats_node(lambda g: g.hopping(timedelta(seconds=size), timedelta(seconds=hop)))


def _session_node(gap: int = 3, cap: int | None = None) -> tuple[Query, p.WindowNode]:
    """Per-key sessions, ``gap`` seconds, cut every ``cap`` seconds when given."""
    return _stats_node(lambda g: g.session(timedelta(seconds=gap), max_duration=None if cap is None else timedelta(seconds=cap)))


def _count_node(size: int = 3, slide: int = 2) -> tuple[Query, p.WindowNode]:
    """Per-key count windows of ``size`` events every ``slide``."""
    return _stats_node(lambda g: g.count_window(size, slide=slide))


Op = tuple[int, KeyedItem]
"""A key (-1 for a CTI, which every key gets) and what it is fed."""


@st.composite
def feeds(draw: st.DrawFn) -> tuple[list[Op], list[int]]:
    """A sequence of events and CTIs as a window's input receives them, and batch cuts."""
    ops: list[Op] = []
    cti = 0
    open_events: dict[int, tuple[int, int]] = {}  # eid -> (key, start)
    for eid in range(draw(st.integers(1, 40))):
        action = draw(st.sampled_from(["point", "point", "interval", "long", "open", "end", "cti", "cti"]))
        if action == "cti":
            cti += draw(st.integers(0, 5)) * SECOND + draw(st.sampled_from([0, 0, 1, SECOND // 2]))
            ops.append((-1, Cti(cti)))
            continue
        if action == "end":
            if open_events:
                ended = draw(st.sampled_from(sorted(open_events)))
                key, start = open_events.pop(ended)
                ops.append((key, End(ended, max(start + 1, cti) + draw(st.integers(0, 150)) * SECOND)))
            continue
        key = draw(st.integers(0, 3))
        start = cti + draw(st.integers(0, 6)) * SECOND + draw(st.sampled_from([0, 0, 1, 999_999]))
        value = draw(st.sampled_from([0.1, 0.2, 1.5, -3.25, 1e16, 7.0]))
        end: int | None
        if action == "point":
            end = start + 1
        elif action == "interval":
            end = start + draw(st.integers(1, 9 * SECOND))
        elif action == "long":
            end = start + draw(st.integers(130, 400)) * SECOND  # more windows than are added on arrival
        else:
            end = None
            open_events[eid] = (key, start)
        ops.append((key, Insert(eid, start, end, Reading(key, value))))
    if draw(st.booleans()):
        ops.append((-1, Cti(INF)))
    cuts = sorted(set(draw(st.lists(st.integers(0, len(ops)), max_size=6))) | {len(ops)})
    return ops, cuts


def _reference(query: Query, node: p.Node, ops: list[Op]) -> list[KeyedResult]:
    mode = TimestampMode()
    mode.saw(aware=True)
    window = build_operator(Build(mode, query), node)
    recorder = keyed_collector(window)  # as the keyed form runs it, to compare ids and ranks
    feed(window, recorder, [item for _, item in ops])
    return recorder.results


def _time(item: KeyedItem) -> int:
    if isinstance(item, Insert):
        return max(item.start, item.end if item.end is not None and item.end < INF else NEG_INF)
    return item.end if isinstance(item, End) and item.end < INF else NEG_INF


def _keyed(query: Query, node: p.Node, sequence: list[Op], cuts: list[int], coarse: bool = False) -> list[KeyedResult]:
    """``sequence`` cut at ``cuts``, each key run batch by batch; with ``coarse``, a key with no
    items in a batch hears only its last CTI, as the cluster engine's keys do."""
    keyed = KeyedOperator(query, node)
    states: dict[int, bytes] = {}
    results: list[KeyedResult] = []
    last_cti = NEG_INF
    t_max = NEG_INF
    begin = 0
    for cut in cuts:
        batch = sequence[begin:cut]
        begin = cut
        t_max = max([t_max, *(_time(item) for _, item in batch)])
        per_key: dict[int, list[KeyedItem]] = defaultdict(list)
        for key in states:
            per_key[key]  # every key seen so far hears the batch's CTIs
        for key, item in batch:
            # A key new in the batch: the CTI in force when it appears first (as a stage row
            # carries it), for the batch's CTIs before it were before its events.
            if key >= 0 and key not in per_key:
                per_key[key].append(Cti(last_cti))
            if key < 0:
                assert isinstance(item, Cti)
                last_cti = max(last_cti, item.t)
                for items in per_key.values():
                    items.append(item)
            else:
                per_key[key].append(item)
        shared = {"t_max": t_max} if isinstance(node, p.WindowNode) else {}
        for key, items in per_key.items():
            if coarse and not any(isinstance(item, (Insert, End, KeyCti)) for item in items):
                items = items[-1:]
            released, states[key] = keyed.run(states.get(key), items, shared)
            results += released
            idle = keyed.idle()
            _check_next_release(keyed, states[key], shared)
            if idle:  # forgotten, as the state store forgets it: it comes back as a new key
                del states[key]
    return results


def _check_next_release(keyed: KeyedOperator, state: bytes, shared: dict[str, int]) -> None:
    """The key's timer time: a CTI just before it releases nothing, one at it something (a
    window's and an analytic's is exact); a session's may come earlier, but a CTI at it moves
    the key on."""
    due = keyed.next_release()
    if due is None:
        assert keyed.run(state, [Cti(INF)], shared)[0] == []
        return
    assert keyed.run(state, [Cti(due - 1)], shared)[0] == []
    released, after = keyed.run(state, [Cti(due)], shared)
    if isinstance(keyed.operator, Snapshots) and keyed.operator.timestamp in (
        WindowTimestamp.START,
        WindowTimestamp.EARLIEST,
        WindowTimestamp.LATEST,
    ):
        assert released != [] or keyed.idle() or keyed.next_release() != due  # a window out at its start is forgotten at its end
    elif isinstance(keyed.operator, (WindowOperator, CountWindows, Snapshots, Analytic, Clip)):
        assert released != []
    else:
        assert released != [] or keyed.next_release() != due


def _order(result: KeyedResult) -> tuple[Any, ...]:
    return (result.cti, result.start, result.end, result.payload.key)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(feeds(), st.sampled_from([(4, 2), (2, 2), (6, 1), (3, 2)]))
def test_a_window_run_one_key_at_a_time_releases_what_it_releases_over_all_keys(
    feed: tuple[list[Op], list[int]], spec: tuple[int, int]
) -> None:
    sequence, cuts = feed
    query, node = _window_node(*spec)
    expected = sorted(_reference(query, node, sequence), key=_order)
    got = sorted(_keyed(query, node, sequence, cuts), key=_order)
    assert got == expected


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(feeds(), st.sampled_from([(3, 2), (1, 1), (2, 3), (4, 4)]))
def test_count_windows_run_one_key_at_a_time_release_what_they_release_over_all_keys(
    feed: tuple[list[Op], list[int]], spec: tuple[int, int]
) -> None:
    sequence, cuts = feed
    query, node = _count_node(*spec)
    expected = sorted(_reference(query, node, sequence), key=_order)
    got = sorted(_keyed(query, node, sequence, cuts), key=_order)
    assert got == expected


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(feeds(), st.sampled_from([(3, None), (2, None), (5, 7), (3, 4)]))
def test_sessions_run_one_key_at_a_time_release_what_they_release_over_all_keys(
    feed: tuple[list[Op], list[int]], spec: tuple[int, int | None]
) -> None:
    sequence, cuts = feed
    query, node = _session_node(*spec)
    expected = sorted(_reference(query, node, sequence), key=_order)
    got = sorted(_keyed(query, node, sequence, cuts), key=_order)
    assert got == expected


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(feeds(), st.sampled_from([(4, 2), (3, 3), (6, 1)]), st.sampled_from([WindowTimestamp.EARLIEST, WindowTimestamp.LATEST]))
def test_hopping_results_stamped_at_an_event_carry_their_window_s_end(
    feed: tuple[list[Op], list[int]], spec: tuple[int, int], timestamp: WindowTimestamp
) -> None:
    """A hopping window's results stamped at their earliest or latest event: each carries
    its window's end (``closes``), by which ``released_from`` gives the CTI that released it
    over all keys, and keys hearing only a batch's last CTI, placed by it and ordered by
    ``release_order``, give the operator's results over all keys, in its order of windows
    (the groups of one window as a set)."""
    sequence, cuts = feed
    size, hop = spec
    query, node = _stats_node(lambda g: _Stamped(g.hopping(timedelta(seconds=size), timedelta(seconds=hop)), timestamp))
    ctis = sorted({item.t for _, item in sequence if isinstance(item, Cti)})

    def released(r: KeyedResult) -> int:
        return bisect.bisect_left(ctis, released_from(node, r))

    def seen(r: KeyedResult) -> tuple[Any, ...]:
        return (released(r), r.closes, repr(r.payload), r.start, r.end)

    reference = _reference(query, node, sequence)
    for r in reference:
        assert r.closes is not None and r.end == r.start + 1 and r.closes - size * SECOND <= r.start < r.closes, r
        assert ctis[released(r)] == r.cti, r
    got = sorted(
        _keyed(query, node, sequence, cuts, coarse=True),
        key=lambda r: (released(r), release_order(node, r, repr(r.payload.key)), repr(r.payload)),
    )
    assert list(map(seen, got)) == sorted(map(seen, reference), key=lambda v: (v[0], v[1], v[2]))  # a window's groups as a set
    assert [seen(r)[:2] for r in reference] == [seen(r)[:2] for r in got]  # windows in the operator's order


def _snapshot_node(timestamp: WindowTimestamp) -> tuple[Query, p.WindowNode]:
    """Per-key snapshot windows, their results stamped ``timestamp``."""
    return _stats_node(lambda g: _Stamped(g.snapshot(), timestamp))


@attrs.frozen
class _Stamped:
    """A windowed stream whose ``aggregate`` stamps its results ``timestamp``."""

    windowed: Any
    timestamp: WindowTimestamp

    def aggregate(self, fn: Any) -> Any:
        return self.windowed.aggregate(fn, timestamp=self.timestamp)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(
    feeds(),
    st.sampled_from(
        [WindowTimestamp.LIFETIME, WindowTimestamp.EARLIEST, WindowTimestamp.START, WindowTimestamp.END, WindowTimestamp.LATEST]
    ),
)
def test_snapshots_run_one_key_at_a_time_release_what_they_release_over_all_keys(
    feed: tuple[list[Op], list[int]], timestamp: WindowTimestamp
) -> None:
    """Each key's results and the ends of its start edges, each placed before the first CTI
    that released it by ``released_from`` (which must be the CTI that did, over all keys), are
    the snapshots' over all keys: lifetimes, payloads and ids (a window's start) alike; the
    key's timer is exact (``_check_next_release``)."""
    sequence, cuts = feed
    query, node = _snapshot_node(timestamp)
    ctis = sorted({item.t for _, item in sequence if isinstance(item, Cti)})

    def released(r: KeyedResult) -> int:
        return bisect.bisect_left(ctis, released_from(node, r))

    def seen(r: KeyedResult) -> tuple[Any, ...]:
        return (released(r), r.ended, r.start, r.end, repr(r.payload), r.eid)

    reference = _reference(query, node, sequence)
    for r in reference:
        assert ctis[released(r)] == r.cti, r
    assert sorted(map(seen, _keyed(query, node, sequence, cuts, coarse=True))) == sorted(map(seen, reference))


def _clip_node(grouped: bool = True) -> tuple[Query, p.ClipNode]:
    """The readings' lifetimes clipped at the next start of their key (of any, ungrouped)."""
    readings = _readings()
    stream = readings.group_by(lambda r: r.key).clip_event_duration() if grouped else readings.clip_event_duration()
    query = Query.build(stream.node)
    [node] = [n for n in query.nodes if isinstance(n, p.ClipNode)]
    return query, node


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(feeds(), st.booleans())
def test_clipped_events_run_one_key_at_a_time_give_what_the_clip_over_all_keys_gives(
    feed: tuple[list[Op], list[int]], grouped: bool
) -> None:
    """Each key's outputs and ends, a key without items in a batch hearing only its last CTI,
    each placed before the CTI that released it in memory (``placed``: an event the key gave
    out with its clipped end, which memory gave out as a start edge before a CTI passed that
    end, as a start edge and its end), are the clip's over all keys: lifetimes, payloads and
    ids (the events') alike; ``placed`` gives each of the clip's own outputs the CTI that did."""
    sequence, cuts = feed
    if not grouped:  # one key
        sequence = [(min(key, 0), item) for key, item in sequence]
    query, node = _clip_node(grouped)
    ctis = sorted({item.t for _, item in sequence if isinstance(item, Cti)})

    def parts(results: list[KeyedResult]) -> list[tuple[Any, ...]]:
        return sorted(
            (at, r.ended, r.start, -1 if r.end is None else r.end, repr(r.payload), r.eid)
            for result in results
            for at, r in placed(node, result, ctis)
        )

    reference = _reference(query, node, sequence)
    for r in reference:
        [(at, _)] = placed(node, r, ctis)
        assert ctis[at] == r.cti, r
    assert parts(_keyed(query, node, sequence, cuts, coarse=True)) == parts(reference)


@attrs.frozen
class Trend:
    key: int
    value: float
    previous: float | None
    total: float
    n: int


def _analytic_node() -> tuple[Query, p.AnalyticNode]:
    """Per key, the previous value within 3 s and running aggregates of the readings."""
    grouped = _readings().group_by(lambda r: r.key)
    stream = grouped.analytic(
        lambda k, r, a: Trend(k, r.value, a.previous(lambda r: r.value, timedelta(seconds=3)), a.sum(lambda r: r.value), a.count())
    )
    query = Query.build(stream.node)
    [node] = [n for n in query.nodes if isinstance(n, p.AnalyticNode)]
    return query, node


def _release_node() -> tuple[Query, p.ReleaseNode]:
    """The output's release over the readings (the cluster engine's on top of a query without
    a stateful node): its keys are any split of the events, an end going to its event's."""
    query = Query.build(p.ReleaseNode(_readings().node))
    assert isinstance(query.root, p.ReleaseNode)
    return query, query.root


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(feeds(), st.sampled_from(["analytic", "release"]))
def test_an_analytic_run_one_key_at_a_time_releases_what_it_releases_over_all_keys(feed: tuple[list[Op], list[int]], kind: str) -> None:
    """Each key's outputs and the ends of its open ones, each before the first CTI that
    released it (``released_from``) and in ``release_order`` among those, are the analytic's
    over all keys in its own order: ids (the events') and payload orders alike. The same for
    the output's release, whose outputs of one start go by arrival over all keys (each item
    carries its place in the whole sequence, as a stage row does)."""
    sequence, cuts = feed
    sequence = [(k, attrs.evolve(item, at=i) if isinstance(item, (Insert, End)) else item) for i, (k, item) in enumerate(sequence)]
    query, node = _analytic_node() if kind == "analytic" else _release_node()
    ctis = sorted({item.t for _, item in sequence if isinstance(item, Cti)})

    def released(r: KeyedResult) -> int:  # the index of the CTI that released it (len: after the last)
        return bisect.bisect_left(ctis, released_from(node, r))

    def seen(r: KeyedResult) -> tuple[Any, ...]:
        return (released(r), r.ended, r.start, r.end, r.payload, r.eid, r.rank)

    reference = _reference(query, node, sequence)
    for r in reference:  # the rule gives the CTI that released each output, and puts each end after the CTI it came after
        assert (ctis[released(r) - 1] if r.ended else ctis[released(r)]) == r.cti, r
    expected = [seen(r) for r in reference]
    got = [
        seen(r)
        for r in sorted(
            _keyed(query, node, sequence, cuts), key=lambda r: (released(r), release_order(node, r, repr(r.payload and r.payload.key)))
        )
    ]
    assert got == expected


def _keyed_release_node() -> tuple[Query, p.ReleaseNode]:
    """The output's release over the readings keeping their key as a substream key: released
    by each key's own CTIs too."""
    from tempo.expr.trace import trace_records

    query = Query.build(p.ReleaseNode(_readings().node, keyed_by=trace_records(lambda r: r.key, [Reading])))
    assert isinstance(query.root, p.ReleaseNode)
    return query, query.root


def _with_key_ctis(sequence: list[Op], data: st.DataObject) -> list[Op]:
    """``sequence`` with key CTIs put among its items, each at most the start of its key's
    later events (as ASA's substreams admit them), often just past one of the key's starts
    so far, where a release's bound (start < t) bites; every item numbered by its place."""
    for _ in range(data.draw(st.integers(0, 8))):
        i = data.draw(st.integers(0, len(sequence)))
        key = data.draw(st.integers(0, 3))
        later = [item.start for k, item in sequence[i:] if k == key and isinstance(item, Insert)]
        in_force = max([0, *(item.t for _, item in sequence[:i] if isinstance(item, Cti) and item.t < INF)])
        bound = min(later, default=in_force + 10 * SECOND)
        past = [item.start + 1 for k, item in sequence[:i] if k == key and isinstance(item, Insert) and item.start < bound]
        t = data.draw(st.sampled_from(past) if past and data.draw(st.booleans()) else st.integers(0, max(0, bound)))
        sequence.insert(i, (key, KeyCti(key, t, 0)))
    return [(k, attrs.evolve(item, at=i) if isinstance(item, (Insert, End, KeyCti)) else item) for i, (k, item) in enumerate(sequence)]


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(
    feeds(),
    st.data(),
    st.sampled_from([(4, 2), (2, 2), (6, 1), (3, 2)]),
    st.sampled_from([WindowTimestamp.LIFETIME, WindowTimestamp.END, WindowTimestamp.LATEST]),
)
def test_a_window_keeping_a_substream_key_run_one_key_at_a_time_releases_what_it_releases_over_all_keys(
    feed: tuple[list[Op], list[int]],
    data: st.DataObject,
    spec: tuple[int, int],
    timestamp: WindowTimestamp,
) -> None:
    """A hopping window grouping by the input's substream key (``by_substream``): each key of
    its keyed form holds the key's groups and hears the key's own CTIs at their places among
    the events (keys hearing only a batch's last CTI otherwise). Every result goes out where
    the window over all keys gives it: at the arrival of the key CTI that released it
    (``by_key``), else at the first CTI past ``released_from``, in ``release_order`` there;
    and each key CTI the window passes on, at its arrival, with the time it has (pulled back
    to a window's start). The window over all keys, fed the same items, is the reference."""
    from tempo.events import EventShape as Shape
    from tempo.settings import AdvanceTimeSettings, EventOrderingSettings

    sequence = _with_key_ctis(feed[0], data)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(sequence)), max_size=6))) | {len(sequence)})
    size, hop = spec
    table = pa.table(
        {"ts": pa.array([], pa.timestamp("us", tz="UTC")), "key": pa.array([], pa.int64()), "value": pa.array([], pa.float64())}
    )
    from tempo.sources import ArrowSource

    ordering = AdvanceTimeSettings(ordering=EventOrderingSettings(timedelta(0), timedelta(0)))
    over = Stream.create("r", ArrowSource(table, Reading, start="ts"), Shape.INTERVAL, ordering, over=lambda r: r.key)
    windowed = over.group_by(lambda r: r.key).hopping(timedelta(seconds=size), timedelta(seconds=hop))
    stream = _Stamped(windowed, timestamp).aggregate(
        lambda k, w: Stats(key=k, n=w.count(), total=w.sum(lambda r: r.value), low=w.min(lambda r: r.value))
    )
    query = Query.build(stream.node)
    [node] = [n for n in query.nodes if isinstance(n, p.WindowNode)]
    assert by_substream(query, node)
    ctis = [item.t for _, item in sequence if isinstance(item, Cti)]
    moving = [
        (i, item.t)
        for i, (_, item) in enumerate(sequence)
        if isinstance(item, Cti) and item.t > max(ctis[: ctis.index(item.t)], default=NEG_INF)
    ]
    places = [t for _, t in moving]

    def where(r: KeyedResult) -> tuple[Any, ...]:
        """Where ``r`` goes among the items: (the place of what released it, then its order there)."""
        if r.by_key is not None:
            return (r.by_key, 1 if r.key_cti else 0, () if r.key_cti else release_order(node, r, repr(r.payload.key)))
        at = bisect.bisect_left(places, released_from(node, r))
        return (moving[at][0] if at < len(moving) else len(sequence), 0, release_order(node, r, repr(r.payload.key)))

    def shown(results: list[KeyedResult]) -> list[tuple[Any, ...]]:
        return sorted((where(r), r.start, r.end, r.payload) for r in results)

    # The reference, fed by hand rather than by ``feed`` (which the keyed side uses).
    mode = TimestampMode()
    mode.saw(aware=True)
    window = build_operator(Build(mode, query), node)
    recorder = keyed_collector(window)
    for _, item in sequence:
        if isinstance(item, Insert):
            window.insert(0, item.eid, item.start, item.end, item.payload)
        elif isinstance(item, End):
            window.end(0, item.eid, item.end)
        elif isinstance(item, KeyCti):
            recorder.by_key = item.at
            window.key_cti(0, item.key, item.t)
            recorder.by_key = None
        else:
            assert isinstance(item, Cti)
            recorder.cti_now = item.t
            window.cti(0, item.t)
    assert shown(_keyed(query, node, sequence, cuts, coarse=True)) == shown(recorder.results)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(feeds(), st.data())
def test_a_release_by_substream_key_run_one_key_at_a_time_gives_what_the_output_releases(
    feed: tuple[list[Op], list[int]], data: st.DataObject
) -> None:
    """Key CTIs put among the events (each at most the start of its key's later events) reach
    only their key. Each key's results, put in order as the cluster engine's driver does (what
    an arrival told, an end or a key CTI with the events it released, before the first CTI row
    after it; the rest before the first CTI past its start, in ``release_order``), are what the
    output over all keys releases (``Egress`` with the substream key), in its order: events
    whole or open, ends, CTIs and key CTIs, ids and all."""
    from tempo.runtime.egress import Egress

    sequence = _with_key_ctis(feed[0], data)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(sequence)), max_size=6))) | {len(sequence)})
    query, node = _keyed_release_node()

    # The reference: the output over all keys, fed the CTIs that move (no operator passes on another).
    egress = Egress(lambda payload: payload.key)
    moving: list[tuple[int, int]] = []  # (place, CTI)
    for i, (_, item) in enumerate(sequence):
        if isinstance(item, Insert):
            egress.insert(0, item.eid, item.start, item.end, item.payload)
        elif isinstance(item, End):
            egress.end(0, item.eid, item.end)
        elif isinstance(item, KeyCti):
            egress.key_cti(0, item.key, item.t)
        elif isinstance(item, Cti) and (not moving or item.t > moving[-1][1]):
            moving.append((i, item.t))
            egress.cti(0, item.t)
    expected = [
        ("cti", r[1])
        if r[0] == "cti"
        else ("key_cti", r[1], r[2])
        if r[0] == "key_cti"
        else ("end", r[1][4], r[1][2])
        if r[0] == "end"
        else ("start", r[1], r[3], r[4])
        if r[0] == "start"
        else ("event", r[1], r[2], r[3], r[4])
        for r in egress.raw
    ]

    # The keys' results, placed as the driver places them (``WorkRunner``).
    results = _keyed(query, node, sequence, cuts, coarse=True)
    told = sorted(
        (r.by_key if r.by_key is not None else r.rank[0], r.key_cti, () if r.key_cti else release_order(node, r, ""), i)
        for i, r in enumerate(results)
        if r.ended or r.by_key is not None
    )
    ctis = [t for _, t in moving]
    by_cti: list[list[KeyedResult]] = [[] for _ in range(len(ctis) + 1)]
    for r in results:
        if not (r.ended or r.by_key is not None):
            by_cti[bisect.bisect_left(ctis, released_from(node, r))].append(r)
    got: list[tuple[Any, ...]] = []

    def out(r: KeyedResult) -> None:
        if r.key_cti:
            got.append(("key_cti", r.start, r.payload))
        elif r.ended:
            got.append(("end", r.eid, r.end))
        else:
            got.append(("start", r.start, r.payload, r.eid) if r.end is None else ("event", r.start, r.end, r.payload, r.eid))

    for (place, t), released in zip([*moving, (len(sequence), None)], by_cti):
        while told and told[0][0] < place:  # a key CTI's events (by start and arrival) before the key CTI
            out(results[told.pop(0)[3]])
        for r in sorted(released, key=lambda r: release_order(node, r, "")):
            out(r)
        if t is not None:
            got.append(("cti", t))
    assert got == expected


@st.composite
def batches(draw: st.DrawFn) -> list[tuple[list[tuple[int, int, int, float]], list[int]]]:
    """Batches as the cluster engine's planned path gives a window: the CTI in force before the
    batch, its events (key, start at or after that CTI, finite end, value), then its CTIs.
    Values add exactly, in any order."""
    out = []
    cti = 0
    for _ in range(draw(st.integers(1, 6))):
        events = []
        for _ in range(draw(st.integers(0, 12))):
            start = cti + draw(st.integers(0, 12)) * SECOND + draw(st.sampled_from([0, 0, 1, 999_999]))
            end = start + (1 if draw(st.booleans()) else draw(st.integers(1, 6 * SECOND)))
            events.append((draw(st.integers(0, 2)), start, end, draw(st.sampled_from([0.5, 1.25, -3.0, 7.0]))))
        ctis = []
        for _ in range(draw(st.integers(0, 3))):
            cti += draw(st.integers(0, 6)) * SECOND + draw(st.sampled_from([0, 1, SECOND // 2]))
            ctis.append(cti)
        out.append((events, ctis))
    return out


def _runs(events: list[tuple[int, int, int, float]], gap: int) -> list[Any]:
    """A batch's events of each key as runs, by the rule ``session_runs`` gives Spark: in
    order of start (then place), a new run where an event starts at or after the latest last
    tick of the run's events before it + gap."""
    from tempo.runtime.keyed import Run

    runs: list[Run] = []
    for key in sorted({e[0] for e in events}):
        mine = sorted(((start, place, end, value) for place, (k, start, end, value) in enumerate(events) if k == key))
        chain: list[tuple[int, int, int, float]] = []
        for event in [*mine, None]:
            if chain and (event is None or event[0] >= max(e[2] for e in chain) - 1 + gap):
                values = [e[3] for e in chain]
                runs.append(Run((key,), chain[0][0], max(e[2] for e in chain), len(chain), (sum(values), min(values))))
                chain = []
            if event is not None:
                chain.append(event)
    return runs


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(batches(), st.sampled_from([3, 2, 5]))
def test_sessions_given_each_batch_s_runs_release_what_its_events_release(batched: list[Any], gap: int) -> None:
    """Per key, a batch's events as runs (aggregated apart) give the sessions its events give,
    at the same CTIs, however the batches' CTIs fall among the runs and the runs of the
    batches chain."""
    query, node = _session_node(gap)
    events_fed: list[KeyedItem] = [Cti(0)]
    runs_fed: list[KeyedItem] = [Cti(0)]
    eid = 0
    for events, ctis in batched:
        for key, start, end, value in events:
            events_fed.append(Insert(eid, start, end, Reading(key, value)))
            eid += 1
        runs_fed += _runs(events, gap * SECOND)
        events_fed += [Cti(c) for c in ctis]
        runs_fed += [Cti(c) for c in ctis]
    events_fed.append(Cti(INF))
    runs_fed.append(Cti(INF))
    keyed = KeyedOperator(query, node)
    expected, _ = keyed.run(None, events_fed)
    got, _ = keyed.run(None, runs_fed)
    assert sorted(got, key=_order) == sorted(expected, key=_order)


def test_a_timeline_of_runs_by_hand() -> None:
    """Sessions, gap 3 s, key 1. Batch 1 (CTI 0): points at 1 and 3 s (one run: 3 < 1 + 3),
    one at 7 s (a run of its own: 7 >= 3 + 3); its CTI at 5 s closes nothing (the session
    from 1 s lasts until 6 s). Batch 2 (CTI 5 s): a point at 5 s, a run alone that chains the
    first (5 < 6) and the third (7 < 8): one session [1, 10) of 4 events, a point at its last
    tick, released by the CTI at infinity, as the events themselves give it."""
    from tempo.runtime.keyed import Run

    query, node = _session_node(3)
    keyed = KeyedOperator(query, node)
    s = SECOND
    first = _runs([(1, 1 * s, 1 * s + 1, 1.0), (1, 3 * s, 3 * s + 1, 2.0), (1, 7 * s, 7 * s + 1, 4.0)], 3 * s)
    assert first == [Run((1,), 1 * s, 3 * s + 1, 2, (3.0, 1.0)), Run((1,), 7 * s, 7 * s + 1, 1, (4.0, 4.0))]
    out, state = keyed.run(None, [Cti(0), *first, Cti(5 * s)])
    assert out == []
    out, state = keyed.run(state, [Run((1,), 5 * s, 5 * s + 1, 1, (8.0, 8.0)), Cti(9 * s)])
    assert out == []  # the session lasts until 7 s + 3 s
    out, _ = keyed.run(state, [Cti(INF)])
    assert [(r.cti, r.start, r.end, r.payload) for r in out] == [(INF, 10 * s - 1, 10 * s, Stats(1, 4, 15.0, 1.0))]


def test_a_timeline_by_hand() -> None:
    """Tumbling windows of 2 s; key 1 has an event in [0, 2) and one open from 3 s; key 2 one in
    [2, 4). The CTI at 2 s releases key 1's first window; the CTI at 5 s key 2's [2, 4) and key 1's
    [2, 4) (the open event, alive there); at infinity the open event ends after the latest finite
    time seen over both keys, 6 s (key 2's event ends there), so key 1's windows [4, 6) and [6, 8)
    come out, though key 1 saw nothing past 3 s itself."""
    query, node = _window_node(2, 2)
    keyed = KeyedOperator(query, node)
    s = SECOND
    one, state1 = keyed.run(None, [Cti(0), Insert(0, 1 * s, 1 * s + 1, Reading(1, 1.0)), Cti(2 * s)])
    two, state2 = keyed.run(None, [Cti(2 * s), Insert(1, 2 * s, 6 * s, Reading(2, 2.0))])
    assert [(r.cti, r.start, r.payload) for r in one] == [(2 * s, 0, Stats(1, 1, 1.0, 1.0))]
    assert two == []
    one, state1 = keyed.run(state1, [Insert(2, 3 * s, None, Reading(1, 5.0)), Cti(5 * s)], {"t_max": 6 * s})
    two, state2 = keyed.run(state2, [Cti(5 * s)], {"t_max": 6 * s})
    assert [(r.cti, r.start, r.end, r.payload) for r in one] == [(5 * s, 2 * s, 4 * s, Stats(1, 1, 5.0, 5.0))]
    assert [(r.cti, r.start, r.end, r.payload) for r in two] == [(5 * s, 2 * s, 4 * s, Stats(2, 1, 2.0, 2.0))]
    one, _ = keyed.run(state1, [Cti(INF)], {"t_max": 6 * s})
    assert [(r.start, r.end, r.payload) for r in one] == [(4 * s, 6 * s, Stats(1, 1, 5.0, 5.0)), (6 * s, 8 * s, Stats(1, 1, 5.0, 5.0))]
    two, _ = keyed.run(state2, [Cti(INF)], {"t_max": 6 * s})
    assert [(r.start, r.end, r.payload) for r in two] == [(4 * s, 6 * s, Stats(2, 1, 2.0, 2.0))]


def test_other_operators_are_refused_until_they_have_a_keyed_form() -> None:
    readings = _readings(EventShape.POINT)
    query = Query.build(readings.union(readings.shift_event_time(timedelta(seconds=1))).node)
    [node] = [n for n in query.nodes if isinstance(n, p.UnionNode)]
    with pytest.raises(UnsupportedError, match="UnionNode has no keyed form yet"):
        KeyedOperator(query, node)


def test_every_result_stamp_a_window_kind_allows_has_a_keyed_form() -> None:
    for kind in (HoppingWindow, SessionWindow, CountWindow, SnapshotWindow):
        assert set(KEYED_STAMPS[kind]) == set(kind.TIMESTAMPS), kind.__name__


def test_a_snapshot_timeline_by_hand() -> None:
    """docs/semantics.md 5.6.4's timeline, counts: key 1 gets a = [1, 6), b = [3, 8), c = [10, 12)
    and the CTIs 4, 7, 9, 13 s; key 2 gets d = [2, 5) and, having no rows after it, hears only
    the CTI at 13 s. Key 1 gives the table's items at its CTIs; key 2 gives its start edge at 2 s
    and its end at 5 s both at 13 s, and ``released_from`` places them where the operator over
    both keys releases them: the edge at the CTI at 4 s (the first past 2 s), its end at 7 s
    (the first past 5 s). Each start edge's id is its window's start, by which its end names it."""
    query, node = _snapshot_node(WindowTimestamp.LIFETIME)
    keyed = KeyedOperator(query, node)
    s = SECOND
    ctis = [4 * s, 7 * s, 9 * s, 13 * s]
    one, _ = keyed.run(
        None,
        [
            Cti(0),
            Insert(0, 1 * s, 6 * s, Reading(1, 1.0)),
            Insert(1, 3 * s, 8 * s, Reading(1, 2.0)),
            Cti(4 * s),
            Cti(7 * s),
            Cti(9 * s),
            Insert(2, 10 * s, 12 * s, Reading(1, 4.0)),
            Cti(13 * s),
        ],
    )
    two, _ = keyed.run(None, [Cti(0), Insert(3, 2 * s, 5 * s, Reading(2, 8.0)), Cti(13 * s)])

    def seen(r: KeyedResult) -> tuple[Any, ...]:
        at = ctis[bisect.bisect_left(ctis, released_from(node, r))] // s
        return (
            at,
            r.cti // s,
            r.ended,
            r.start // s,
            None if r.end is None else r.end // s,
            r.eid and r.eid // s,
            r.payload and r.payload.n,
        )

    assert [seen(r) for r in one] == [
        (4, 4, False, 1, None, 1, 1),
        (4, 4, True, 0, 3, 1, None),  # [1, 3): an interval out of the CTI at 4
        (4, 4, False, 3, None, 3, 2),
        (7, 7, True, 0, 6, 3, None),
        (7, 7, False, 6, None, 6, 1),
        (9, 9, True, 0, 8, 6, None),
        (13, 13, False, 10, None, 10, 1),
        (13, 13, True, 0, 12, 10, None),
    ]
    assert [seen(r) for r in two] == [(4, 13, False, 2, None, 2, 1), (7, 13, True, 0, 5, 2, None)]


def test_a_clip_timeline_by_hand() -> None:
    """docs/semantics.md 5.5.2's timeline, key b's part: b@2 and b@8 (start edges) arrive before
    the CTI at 3 s; key b then has no rows and hears only the CTI at 12 s, at which it gives out
    [2, 8) (clipped by b@8) whole and b@8 as a start edge. Over all keys the clip gave b@2 out at
    the CTI at 3 s as a start edge (8 was not final: an event could still start before it) and
    ended it at the CTI at 9 s, with b@8: ``placed`` puts the start edge before the CTI at 3 s,
    its end and b@8 before the CTI at 9 s."""
    query, node = _clip_node()
    keyed = KeyedOperator(query, node)
    s = SECOND
    ctis = [3 * s, 6 * s, 9 * s, 12 * s]
    out, _ = keyed.run(None, [Cti(0), Insert(0, 2 * s, None, Reading(2, 1.0)), Insert(1, 8 * s, None, Reading(2, 2.0)), Cti(12 * s)])
    assert [(r.cti, r.start, r.end, r.eid) for r in out] == [(12 * s, 2 * s, 8 * s, 0), (12 * s, 8 * s, None, 1)]
    got = [(ctis[at] // s, r.ended, r.start // s, r.end and r.end // s, r.eid) for result in out for at, r in placed(node, result, ctis)]
    assert got == [(3, False, 2, None, 0), (9, True, 0, 8, 0), (9, False, 8, None, 1)]


def test_a_snapshot_key_whose_last_window_went_out_at_its_start_is_forgotten_at_its_end() -> None:
    """Stamped START, a key's window [0, 5 s) goes out as a point at the CTI at 1 s; its timer is
    the window's end, just past 5 s, where the key forgets the window: its state does not
    outlive its last window in the state store."""
    query, node = _snapshot_node(WindowTimestamp.START)
    keyed = KeyedOperator(query, node)
    s = SECOND
    out, state = keyed.run(None, [Cti(0), Insert(0, 0, 5 * s, Reading(1, 1.0)), Cti(1 * s)])
    assert [(r.start, r.end) for r in out] == [(0, 1)] and not keyed.idle()
    assert keyed.next_release() == 5 * s + 1
    out, _ = keyed.run(state, [Cti(5 * s + 1)])
    assert out == [] and keyed.idle() and keyed.next_release() is None
