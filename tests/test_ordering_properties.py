"""Properties of event-ordering settings (ASA's out-of-order, late-arrival and early-arrival
policies, substreams and the query's arrival clock), for every input drawn.

The inputs are readings of a few devices, each with its own clock skew, transit delay and
jitter, merged in arrival order, with heartbeats and sometimes explicit CTIs. A reading's
payload is ``Ev(key=device, value=seq)``; ``seq`` is unique, so every output event and every
rejection can be traced to the item it came from.

* Substreams are independent: with ``over=device``, removing or changing one device's
  events changes nothing admitted or rejected of another device.
* Other inputs only move time: what an input with ordering settings admits or rejects does
  not depend on the other inputs of the query (they only move the shared arrival clock).
* Tolerance covers disorder: with an out-of-order tolerance at least the input's disorder
  and no event early or late, nothing is rejected and the flushed results equal those of
  the same events fed in start order; with a smaller tolerance something is rejected.
* Accounting: every event is admitted or dropped, once; substreams add up to the input;
  each rejection is counted under the rule its own start and arrival give; admitted starts
  lie within the arrival tolerances; every CTI comes from an in-time start less the
  out-of-order tolerance, the arrival clock less the late tolerance, or an explicit CTI;
  the watermark delay stays within the tolerances.
* Per-key progress: an output that keeps the substream key has the same results and CTIs
  as one that does not, each event released no later, by the output's CTI or its key's,
  and never starting before either already released.
* The CTI in force: each event's fate is decided by the CTI in force before it (read from
  a run of the items before it) and its substream's largest start before it, never by a
  later item.

Examples are derandomized (the same every run). Each property runs on the in-memory
executor (``test_...``) and, as a second test marked
``spark``, on every executor (``test_..._on_every_executor``, with the ``executor``
fixture). ``TEMPO_ORDERING_EXAMPLES`` sets the examples drawn there (default 8: each Spark
run takes ~0.3-1 s and a property runs a query two or more times per example).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import (
    Action,
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Cti,
    EventCounts,
    EventOrderingSettings,
    EventShape,
    Heartbeat,
    InMemoryExecutor,
    Interval,
    Point,
    Result,
    Rule,
    Stream,
    SubstreamCti,
    EdgeStart,
    TICK,
    is_infinite,
)
from tests.conformance.compare import check_result
from tests.contract import check_emission_contract, lifetimes
from tests.strategies import UNARY, Ev, KeyAgg, T

ORDERING = settings(
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

EVERY_EXECUTOR = settings(
    ORDERING,
    max_examples=int(os.environ.get("TEMPO_ORDERING_EXAMPLES", "8")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)

QUIET_RECURSION_LIMIT = pytest.mark.filterwarnings(
    # the first Spark run raises the interpreter's recursion limit, which Hypothesis notes
    "ignore:The recursion limit will not be reset:hypothesis.errors.HypothesisWarning"
)

Test = TypeVar("Test", bound=Callable[..., None])


def on_every_executor(test: Test) -> Test:
    """A property's second test, on every executor (the ``executor`` fixture): marked
    ``spark``, with ``EVERY_EXECUTOR``'s examples."""
    marked: Test = pytest.mark.spark(QUIET_RECURSION_LIMIT(EVERY_EXECUTOR(test)))
    return marked


FLUSH = AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True)
OTHER_SEQ = 10_000
"""Sequence numbers of a second input's events (or of a device's replacement events)."""


def seconds(s: int | None) -> timedelta | None:
    return None if s is None else timedelta(seconds=s)


def by_device(e: Ev) -> int:
    return e.key


# ---- inputs -----------------------------------------------------------------------------


@attrs.frozen
class Case:
    """One input with ordering settings: each device's events (in its own arrival order)
    and the other items (heartbeats, explicit CTIs), merged by arrival for a run."""

    shape: EventShape
    settings: AdvanceTimeSettings
    over: bool
    devices: dict[int, list[Any]]
    others: list[Any]

    def items(self, devices: dict[int, list[Any]] | None = None) -> list[Any]:
        """The items in arrival order (a stable sort: each device keeps its own order; at
        equal arrivals devices come in key order, then heartbeats and CTIs)."""
        devs = self.devices if devices is None else devices
        merged = [item for key in sorted(devs) for item in devs[key]] + self.others
        return sorted(merged, key=lambda item: item.arrival)

    def stream(self, items: list[Any] | None = None, name: str = "in") -> Stream[Ev]:
        return Stream.create(
            name,
            self.items() if items is None else items,
            self.shape,
            self.settings,
            payload_type=Ev,
            over=by_device if self.over else None,
        )

    @property
    def ordering(self) -> EventOrderingSettings:
        assert self.settings.ordering is not None
        return self.settings.ordering


@st.composite
def device_events(draw: st.DrawFn, device: int, shape: EventShape, first_seq: int) -> list[Any]:
    """Up to 8 readings of a device, in arrival order: sent in time order a few seconds
    apart, stamped with the device's skewed clock, arriving after its transit delay plus up
    to ``jitter`` (which reorders readings sent closer together than that). The device's
    figures are drawn; its readings come from a drawn seed (Hypothesis draws the least
    count and gap far more often than others)."""
    skew = draw(st.sampled_from([0, 0, -10, 3, 12]))
    delay = draw(st.sampled_from([0, 2, 8]))
    jitter = draw(st.sampled_from([10, 4, 25, 0]))
    rnd = random.Random(draw(st.integers(0, 10**6)))
    out: list[Any] = []
    sent = rnd.randint(0, 20)
    for seq in range(first_seq, first_seq + rnd.randint(0, 8)):
        sent += rnd.randint(0, 5)
        start, arrival, payload = T(sent + skew), T(sent + delay + rnd.randint(0, jitter)), Ev(device, seq)
        if shape is EventShape.POINT:
            out.append(Point(start, payload, arrival=arrival))
        else:
            out.append(Interval(start, start + timedelta(seconds=rnd.randint(1, 20)), payload, arrival=arrival))
    return sorted(out, key=lambda item: item.arrival)


@st.composite
def orderings(draw: st.DrawFn, over: bool) -> EventOrderingSettings:
    """Tolerances (seconds) around the skews and delays ``device_events`` draws (a late
    tolerance of 60 s makes no event late, the most common choice: then the out-of-order
    rule decides); substreams need a late-arrival tolerance."""
    late = draw(st.sampled_from([60, 60, 60, 20, 5, 0] + ([] if over else [None])))
    return EventOrderingSettings(
        timedelta(seconds=draw(st.sampled_from([0, 1, 3, 10]))),
        seconds(late),
        seconds(draw(st.sampled_from([None, 30, 5, 0]))),
    )


@st.composite
def cases(draw: st.DrawFn, over: bool | None = None, explicit_ctis: bool | None = None, first_seq: int = 0) -> Case:
    """One to four devices, heartbeats and (if ``explicit_ctis``) a few explicit CTIs,
    with flush at the end; ``None`` draws the choice."""
    shape = draw(st.sampled_from([EventShape.POINT, EventShape.INTERVAL]))
    over = draw(st.booleans()) if over is None else over
    policy = draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST]))
    settings_ = AdvanceTimeSettings(FLUSH, policy=policy, ordering=draw(orderings(over)))
    devices: dict[int, list[Any]] = {}
    seq = first_seq
    for device in range(draw(st.integers(1, 4))):
        devices[device] = draw(device_events(device, shape, seq))
        seq += len(devices[device])
    others: list[Any] = [Heartbeat(T(a)) for a in draw(st.lists(st.integers(0, 100), max_size=3))]
    if draw(st.booleans()) if explicit_ctis is None else explicit_ctis:
        stamps = draw(st.lists(st.tuples(st.integers(-10, 70), st.integers(0, 90)), max_size=3))
        others += [Cti(T(t), arrival=T(a)) for t, a in stamps]
    return Case(shape, settings_, over, devices, sorted(others, key=lambda item: item.arrival))


def events_of(items: Sequence[Any]) -> list[Any]:
    return [item for item in items if isinstance(item, (Point, Interval))]


def counts(c: EventCounts) -> tuple[int, ...]:
    """The event counts of an input or substream (without CTI counts or watermarks)."""
    return tuple(getattr(c, f.name) for f in attrs.fields(EventCounts))


def rejection_keys(result: Result[Any], keep: Callable[[Any], bool] = lambda item: True) -> list[tuple[str, ...]]:
    """The rejections of items ``keep`` accepts, as a sorted multiset without positions
    (which shift when other items come or go)."""
    return sorted(
        (j.input, j.rule.value, j.action.value, repr(j.cti), repr(j.item), repr(j.admitted_as)) for j in result.rejected if keep(j.item)
    )


def event_keys(result: Result[Any], keep: Callable[[Any], bool] = lambda payload: True) -> list[tuple[str, ...]]:
    return sorted((repr(e.start), repr(e.end), repr(e.payload)) for e in result.events if keep(e.payload))


# ---- substreams are independent -----------------------------------------------------------


@st.composite
def substream_edits(draw: st.DrawFn) -> tuple[Case, int, list[Any]]:
    """A case with substreams, a device (maybe a new one) and other events for it."""
    case = draw(cases(over=True, explicit_ctis=False))
    device = draw(st.integers(0, len(case.devices)))
    return case, device, draw(device_events(device, case.shape, OTHER_SEQ))


def check_substreams_are_independent(executor: Any, edit: tuple[Case, int, list[Any]]) -> None:
    case, device, replacement = edit
    rest = {k: v for k, v in case.devices.items() if k != device}
    runs = [executor.run(case.stream(case.items(devices))) for devices in (case.devices, rest, {**rest, device: replacement})]

    def other(payload: Ev) -> bool:
        return payload.key != device

    def fates(result: Result[Any]) -> tuple[Any, ...]:
        subs = {k: counts(c) for k, c in result.metrics["in"].substreams.items() if k != device}
        return event_keys(result, other), rejection_keys(result, lambda item: other(item.payload)), subs

    full = fates(runs[0])
    for run in runs:
        check_result(run)
    assert fates(runs[1]) == full, f"removing device {device}'s events changed another device's"
    assert fates(runs[2]) == full, f"changing device {device}'s events changed another device's"


@settings(ORDERING, max_examples=200)
@given(edit=substream_edits())
def test_substreams_are_independent(edit: tuple[Case, int, list[Any]]) -> None:
    """With ``over=device``, one device's events (removed, or others in their place) never
    change what another device has admitted (lifetimes, payloads) or rejected, nor its counts:
    each device's CTI is its own, and the input's CTI (the clock less the late tolerance) is
    never later than an event that passed the late-arrival check."""
    check_substreams_are_independent(InMemoryExecutor(), edit)


@on_every_executor
@given(edit=substream_edits())
def test_substreams_are_independent_on_every_executor(executor: Any, edit: tuple[Case, int, list[Any]]) -> None:
    check_substreams_are_independent(executor, edit)


# ---- other inputs only move time ----------------------------------------------------------


@st.composite
def two_cases(draw: st.DrawFn) -> tuple[Case, Case]:
    return draw(cases()), draw(cases(first_seq=OTHER_SEQ))


def check_other_inputs_only_move_time(executor: Any, pair: tuple[Case, Case]) -> None:
    a, b = pair
    alone = executor.run(a.stream(name="a"))
    both = executor.run(a.stream(name="a").union(b.stream(name="b")))
    check_result(both)
    assert event_keys(both, lambda payload: payload.value < OTHER_SEQ) == event_keys(alone)
    assert sorted(map(repr, (j for j in both.rejected if j.input == "a"))) == sorted(map(repr, alone.rejected))
    ma, mb = alone.metrics["a"], both.metrics["a"]
    assert counts(mb) == counts(ma)
    assert {k: counts(c) for k, c in mb.substreams.items()} == {k: counts(c) for k, c in ma.substreams.items()}


@ORDERING
@given(pair=two_cases())
def test_other_inputs_only_move_time(pair: tuple[Case, Case]) -> None:
    """What an input with ordering settings admits and rejects (with positions and CTIs
    held against) is the same alone and in a union with another such input, whose
    arrivals move the shared arrival clock: the clock only releases results sooner."""
    check_other_inputs_only_move_time(InMemoryExecutor(), pair)


@on_every_executor
@given(pair=two_cases())
def test_other_inputs_only_move_time_on_every_executor(executor: Any, pair: tuple[Case, Case]) -> None:
    check_other_inputs_only_move_time(executor, pair)


# ---- tolerance covers disorder ------------------------------------------------------------


def _count_by_key(s: Stream[Ev]) -> Stream[Any]:
    return (
        s.group_by(lambda e: e.key)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda k, w: KeyAgg(key=k, n=w.count(), total=w.sum(lambda e: e.value), start=w.start))
    )


QUERIES: dict[str, Callable[[Stream[Ev]], Stream[Any]]] = {
    # Results stamped at the CTI that completed them depend on when CTIs come, which is what
    # this property varies: they are left out.
    **{name: query for name, query in UNARY.items() if not name.endswith("_cti")},
    "count_by_key": _count_by_key,
    "where_select": lambda s: s.where(lambda e: e.value % 3 != 1).select(lambda e: Ev(key=e.key * 2, value=e.value + 1)),
}


@attrs.frozen
class Tolerated:
    """Events (and heartbeats) arriving within the arrival tolerances of ``ordering``, whose
    items have ``disorder`` (each key's own, with substreams), run through ``query``."""

    shape: EventShape
    ordering: EventOrderingSettings
    policy: AdvanceTimePolicy
    over: bool
    items: list[Any]
    disorder: int
    query: str

    def run(self, executor: Any, items: list[Any]) -> Result[Any]:
        settings_ = AdvanceTimeSettings(FLUSH, policy=self.policy, ordering=self.ordering)
        stream = Stream.create("in", items, self.shape, settings_, payload_type=Ev, over=by_device if self.over else None)
        result: Result[Any] = executor.run(QUERIES[self.query](stream))
        return result


def disorder(starts: Sequence[int]) -> int:
    """max over i of (largest start before i) - start i; 0 for ordered starts."""
    worst, latest = 0, None
    for s in starts:
        if latest is not None:
            worst = max(worst, latest - s)
        latest = s if latest is None else max(latest, s)
    return worst


@st.composite
def tolerated(draw: st.DrawFn) -> Tolerated:
    """Arrivals first (0-60 s), then each start within [arrival - L, arrival + W] (20 s
    either way without them); the disorder follows from them, and the out-of-order
    tolerance is drawn around it."""
    query = draw(st.sampled_from(sorted(QUERIES)))
    shape = draw(st.sampled_from([EventShape.POINT, EventShape.INTERVAL]))
    over = draw(st.booleans())
    late = draw(st.sampled_from([5, 15, 2, 0] + ([] if over else [None])))
    early = draw(st.sampled_from([15, None, 4, 0]))
    # The events from a drawn seed: Hypothesis draws the least count and offsets far more
    # often than others, which would leave most inputs short and in order.
    rnd = random.Random(draw(st.integers(0, 10**6)))
    arrivals = sorted(rnd.randrange(61) for _ in range(rnd.randint(1, 16)))
    items: list[Any] = []
    for seq, arrival in enumerate(arrivals):
        start = arrival + rnd.randint(-(20 if late is None else late), 20 if early is None else early)
        payload = Ev(rnd.randrange(3), seq)
        if shape is EventShape.POINT:
            items.append(Point(T(start), payload, arrival=T(arrival)))
        else:
            items.append(Interval(T(start), T(start + rnd.randint(1, 20)), payload, arrival=T(arrival)))

    def starts(key: int | None) -> list[int]:
        return [int((i.start - T(0)).total_seconds()) for i in items if key is None or i.payload.key == key]

    worst = max(disorder(starts(k)) for k in range(3)) if over else disorder(starts(None))
    margin = draw(st.sampled_from([0, 3, 10, -1, -4]))
    ordering = EventOrderingSettings(timedelta(seconds=max(0, worst + margin)), seconds(late), seconds(early))
    heartbeats = [Heartbeat(T(a)) for a in draw(st.lists(st.integers(0, 80), max_size=3))]
    items = sorted(items + heartbeats, key=lambda item: item.arrival)
    policy = draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST]))
    return Tolerated(shape, ordering, policy, over, items, worst, query)


def check_tolerance_covers_disorder(executor: Any, case: Tolerated) -> None:
    got = case.run(executor, case.items)
    check_result(got)
    m = got.metrics["in"]
    if case.ordering.out_of_order_tolerance < timedelta(seconds=case.disorder):
        # The most displaced event is held against a start it came after, less too little.
        assert any(j.rule is Rule.START_BEFORE_CTI for j in got.rejected), case
        return
    assert got.rejected == [], case
    assert (m.adjusted, m.dropped, m.admitted) == (0, 0, m.received)
    # The same events in start order, each arriving at its start: nothing to tolerate.
    in_order = sorted(events_of(case.items), key=lambda item: item.start)
    ordered = case.run(executor, [attrs.evolve(item, arrival=item.start) for item in in_order])
    assert ordered.rejected == []
    assert lifetimes(got) == lifetimes(ordered), case


@settings(ORDERING, max_examples=150)
@given(case=tolerated())
def test_tolerance_covers_disorder(case: Tolerated) -> None:
    """No event early or late and an out-of-order tolerance at least the disorder (each
    key's own, with substreams): nothing is dropped or adjusted, and after the flush the
    results equal those of the events in start order. A tolerance below the disorder
    rejects something."""
    check_tolerance_covers_disorder(InMemoryExecutor(), case)


@on_every_executor
@given(case=tolerated())
def test_tolerance_covers_disorder_on_every_executor(executor: Any, case: Tolerated) -> None:
    check_tolerance_covers_disorder(executor, case)


# ---- accounting ---------------------------------------------------------------------------


def check_accounting(executor: Any, case: Case) -> None:
    items = case.items()
    result = executor.run(case.stream(items))
    check_result(result)
    if isinstance(executor, InMemoryExecutor):
        check_emission_contract(result)
    o, policy = case.ordering, case.settings.policy
    late, early = o.late_arrival_tolerance, o.early_arrival_window
    m = result.metrics["in"]
    events = {item.payload.value: item for item in events_of(items)}
    explicit = [item for item in items if isinstance(item, Cti)]

    # Every event is received, and admitted or dropped; substreams add up to the input.
    assert m.received == len(events)
    for c in [m, *m.substreams.values()]:
        assert c.received == c.admitted + c.dropped, c
        assert c.adjusted <= c.admitted, c
    if case.over:
        assert set(m.substreams) == {item.payload.key for item in events.values()}
        assert tuple(map(sum, zip(*map(counts, m.substreams.values())))) == (counts(m) if events else ())
        for key, c in m.substreams.items():
            assert c.received == sum(1 for item in events.values() if item.payload.key == key)
    else:
        assert m.substreams == {}

    # One rejection per rejected event, naming its item; the rules follow from each event's
    # own start and arrival (early, then late), or from the CTI.
    assert len(result.rejected) == m.adjusted + m.dropped
    assert len({j.item.payload.value for j in result.rejected}) == len(result.rejected)
    is_early = {v for v, i in events.items() if early is not None and i.start > i.arrival + early}
    is_late = {v for v, i in events.items() if v not in is_early and late is not None and i.start < i.arrival - late}
    by_rule: dict[tuple[Rule, Action], set[int]] = {}
    for j in result.rejected:
        assert items[j.position] == j.item
        v = j.item.payload.value
        by_rule.setdefault((j.rule, j.action), set()).add(v)
        assert (j.action is Action.ADJUSTED) == (j.admitted_as is not None)
        if j.rule is Rule.EARLY_ARRIVAL:
            assert v in is_early and j.action is Action.DROPPED and early is not None
            assert j.cti == j.item.arrival + early
        elif j.rule is Rule.LATE_ARRIVAL:
            assert v in is_late and late is not None
            assert j.cti == j.item.arrival - late
        else:
            assert j.rule is Rule.START_BEFORE_CTI and v not in is_early
            assert j.item.start < j.cti

    def rejected(rule: Rule, action: Action) -> set[int]:
        return by_rule.get((rule, action), set())

    assert rejected(Rule.EARLY_ARRIVAL, Action.DROPPED) == is_early and m.early_dropped == len(is_early)
    assert m.late_adjusted + m.late_dropped == len(is_late)
    assert is_late <= {j.item.payload.value for j in result.rejected}, "every late event is rejected"
    if policy is AdvanceTimePolicy.DROP:
        assert m.late_adjusted == 0 and rejected(Rule.LATE_ARRIVAL, Action.DROPPED) == is_late
    else:
        # Only an interval wholly before arrival - L is dropped as late; a point moves up.
        wholly = {v for v in is_late if isinstance(events[v], Interval) and late is not None and events[v].end <= events[v].arrival - late}
        assert m.late_dropped == len(wholly) and rejected(Rule.LATE_ARRIVAL, Action.DROPPED) == wholly
    assert m.out_of_order_adjusted == len(rejected(Rule.START_BEFORE_CTI, Action.ADJUSTED))
    assert m.out_of_order_dropped == len(rejected(Rule.START_BEFORE_CTI, Action.DROPPED))
    # Counted under exactly one rule, except late and then out of order: under both.
    late_then_out_of_order = {j.item.payload.value for j in result.rejected if j.rule is Rule.START_BEFORE_CTI} & is_late
    per_rule = m.early_dropped + m.late_adjusted + m.late_dropped + m.out_of_order_adjusted + m.out_of_order_dropped
    assert per_rule == len(result.rejected) + len(late_then_out_of_order)

    # Admitted: every event not dropped, once, as received or as adjusted; within the
    # arrival tolerances (the early bound needs no explicit CTI, which may lie anywhere).
    admitted = {e.payload.value: e for e in result.events}
    assert len(admitted) == len(result.events) == m.admitted
    dropped = {j.item.payload.value for j in result.rejected if j.action is Action.DROPPED}
    assert set(admitted) == set(events) - dropped
    adjusted = {j.item.payload.value: j.admitted_as for j in result.rejected if j.action is Action.ADJUSTED}
    for v, e in admitted.items():
        item = adjusted.get(v, events[v])
        end = item.start + timedelta(microseconds=1) if isinstance(item, Point) else item.end
        assert (e.start, e.end) == (item.start, end), (e, item)
        assert e.start >= events[v].start, "an adjusted start only moves up"
        if isinstance(item, Interval):
            assert e.end == events[v].end, "an adjusted interval keeps its end"
        if late is not None:
            assert e.start >= events[v].arrival - late, (e, events[v])
        if early is not None and not explicit:
            assert e.start <= events[v].arrival + early, (e, events[v])

    # CTIs: each explicit one advances or is ignored, nothing else is ignored. Every CTI
    # before the flush's is an in-time start less O (without substreams), an item's arrival
    # (the arrival clock) less L, or an explicit CTI, and the last is the latest of them.
    assert m.ctis_explicit + m.ctis_ignored == len(explicit)
    assert m.ctis_explicit + m.ctis_generated == len(result.ctis) and is_infinite(result.ctis[-1])
    O = o.out_of_order_tolerance
    in_time = [i for v, i in events.items() if v not in is_early | is_late]
    candidates = {c.timestamp for c in explicit}
    if not case.over:
        candidates |= {i.start - O for i in in_time}
    if late is not None:
        candidates |= {i.arrival - late for i in items}
    assert set(result.ctis[:-1]) <= candidates
    assert result.ctis[-2:-1] == ([max(candidates)] if candidates else [])
    # The watermark delay never exceeds the late tolerance (with substreams it is exactly it).
    delays = m.watermark_delays
    assert [c for c, _ in delays] == sorted(c for c, _ in delays)
    for _, d in delays:
        if late is not None:
            assert d <= late, delays
            if case.over and not explicit:
                assert d == late, delays
        if early is not None and not explicit:
            # The CTI is at most the latest in-time start (<= clock + W) less O, or clock - L.
            floor = o.out_of_order_tolerance - early
            assert d >= (floor if late is None else min(floor, late)), delays


@settings(ORDERING, max_examples=200)
@given(case=cases())
def test_accounting(case: Case) -> None:
    """Every event is received once and admitted or dropped; substreams add up to the
    input; each rejection is counted under the rule its start and arrival give (late and
    then out of order: under both); admitted starts lie within the arrival tolerances; the
    output CTIs strictly increase and the watermark delay stays within the tolerances."""
    check_accounting(InMemoryExecutor(), case)


@on_every_executor
@given(case=cases())
def test_accounting_on_every_executor(executor: Any, case: Case) -> None:
    check_accounting(executor, case)


# ---- the CTI in force -----------------------------------------------------------------------


def cti_in_force(result: Result[Any]) -> Any:
    """The input's CTI when the run's items ended (the last output CTI of an identity query
    before the flush's), or None."""
    return result.ctis[-2] if len(result.ctis) >= 2 else None


def expected_fate(case: Case, item: Any, before: list[Any], cti: Any) -> tuple[Rule | None, Any]:
    """What the rules make of ``item`` given the input's CTI in force before it and the
    items before it: (rule or None, admitted item or None)."""
    o, adjust = case.ordering, case.settings.policy is AdvanceTimePolicy.ADJUST
    L, W, O = o.late_arrival_tolerance, o.early_arrival_window, o.out_of_order_tolerance

    def in_time(i: Any) -> bool:
        return not ((W is not None and i.start > i.arrival + W) or (L is not None and i.start < i.arrival - L))

    if W is not None and item.start > item.arrival + W:
        return Rule.EARLY_ARRIVAL, None
    # The substream's CTI: its largest start passing the arrival checks, less O, and never
    # before the input's CTI.
    mine = [i.start for i in before if in_time(i) and (not case.over or i.payload.key == item.payload.key)]
    bounds = [b for b in (cti, max(mine) - O if mine else None) if b is not None]
    bound = max(bounds) if bounds else None
    start, rule = item.start, None
    if L is not None and start < item.arrival - L:
        start, rule = item.arrival - L, Rule.LATE_ARRIVAL
        if not adjust or (isinstance(item, Interval) and item.end <= start):
            return rule, None
    if bound is not None and start < bound:
        start, rule = bound, Rule.START_BEFORE_CTI
        if not adjust or (isinstance(item, Interval) and item.end <= start):
            return rule, None
    return rule, attrs.evolve(item, start=start)


def check_cti_in_force(executor: Any, case: Case, positions: Sequence[int] | None = None) -> None:
    items = case.items()
    full = executor.run(case.stream(items))
    fate = {j.item.payload.value: j for j in full.rejected}
    admitted = {e.payload.value: e for e in full.events}
    at = [i for i, item in enumerate(items) if isinstance(item, (Point, Interval))]
    for i in at if positions is None else [at[p % len(at)] for p in positions if at]:
        item = items[i]
        prefix = executor.run(case.stream(items[:i]))
        # Nothing after an event decides its fate: the run of the items before it admitted
        # and rejected exactly what the whole run did of them.
        seen = {it.payload.value for it in events_of(items[:i])}
        assert event_keys(prefix) == event_keys(full, lambda p: p.value in seen)
        assert sorted(map(repr, prefix.rejected)) == sorted(map(repr, (j for j in full.rejected if j.item.payload.value in seen)))
        cti = cti_in_force(prefix)
        rule, as_admitted = expected_fate(case, item, events_of(items[:i]), cti)
        v = item.payload.value
        got = fate.get(v)
        assert (got and got.rule) == rule, (item, cti, got)
        if as_admitted is None:
            assert v not in admitted and got is not None and got.action is Action.DROPPED
            continue
        e = admitted[v]
        assert cti is None or e.start >= cti, f"{item} admitted at {e.start}, before the CTI {cti} in force"
        assert e.start == as_admitted.start, (item, cti, e)
        if got is not None:
            assert got.action is Action.ADJUSTED and got.admitted_as == as_admitted


@settings(ORDERING, max_examples=100)
@given(case=cases())
def test_every_event_meets_the_cti_in_force(case: Case) -> None:
    """Re-running each prefix of the items: an event's fate (admitted as is, adjusted to
    what, or dropped, by which rule) is decided by its own start and arrival, the input's
    CTI in force before it and its substream's largest start before it, never by a later
    item; and every admitted event starts at or after the CTI in force before it."""
    check_cti_in_force(InMemoryExecutor(), case)


@on_every_executor
@given(case=cases(), positions=st.lists(st.integers(0, 30), min_size=1, max_size=3))
def test_every_event_meets_the_cti_in_force_on_every_executor(executor: Any, case: Case, positions: list[int]) -> None:
    """As above, at a few drawn events (each a run of its prefix)."""
    check_cti_in_force(executor, case, positions)


# ---- per-key progress ---------------------------------------------------------------------


def _self_join(s: Stream[Ev]) -> Stream[Ev]:
    return s.join(
        s.where(lambda e: e.value % 2 == 0), lambda a, b: a.key == b.key, lambda a, b: Ev(key=a.key, value=a.value * 1000 + b.value)
    )


KEEPING_THE_KEY: dict[str, Callable[[Stream[Ev]], Stream[Any]]] = {
    "identity": lambda s: s,
    "where": lambda s: s.where(lambda e: e.value % 3 != 1),
    "select": lambda s: s.select(lambda e: Ev(key=e.key, value=e.value + 1)),
    "shift": lambda s: s.shift_event_time(timedelta(seconds=-4)),
    "count_by_key": _count_by_key,
    "hopping_by_key": UNARY["hopping_by_key"],
    "self_join": _self_join,
    "self_union": lambda s: s.union(s.where(lambda e: e.value % 2 == 0).select(lambda e: Ev(key=e.key, value=e.value + OTHER_SEQ))),
}


def without_the_key(s: Stream[Any]) -> Stream[Any]:
    """The same payloads, with the key computed (``key + 0``) rather than copied: the
    output no longer names the substream, so it runs on the input's CTIs alone."""
    if s.payload_type is KeyAgg:
        return s.select(lambda a: KeyAgg(key=a.key + 0, n=a.n, total=a.total, start=a.start))
    return s.select(lambda e: Ev(key=e.key + 0, value=e.value))


def epochs(result: Result[Any]) -> dict[tuple[Any, ...], list[int]]:
    """Each released event (start, end, payload repr) with the number of output CTIs
    (not substream CTIs) in ``raw`` before it: how long it waited, counted in output CTIs."""
    out: dict[tuple[Any, ...], list[int]] = {}
    n = 0
    for item in result.raw:
        if isinstance(item, Cti):
            n += 1
        elif isinstance(item, (Point, Interval, EdgeStart)):
            end = item.start + TICK if isinstance(item, Point) else getattr(item, "end", None)
            out.setdefault((item.start, end, repr(item.payload)), []).append(n)
    return {k: sorted(v) for k, v in out.items()}


def _join_two(a: Stream[Ev], b: Stream[Ev]) -> Stream[Ev]:
    return a.join(b, lambda x, y: x.key == y.key, lambda x, y: Ev(key=y.key, value=x.value * 100_000 + y.value))


TWO_INPUTS: dict[str, Callable[[Stream[Ev], Stream[Ev]], Stream[Any]]] = {
    "union": lambda a, b: a.union(b),
    "join": _join_two,
    "join_then_count": lambda a, b: _count_by_key(_join_two(a, b)),
    "shifted_union": lambda a, b: a.shift_event_time(timedelta(seconds=5)).union(b.where(lambda e: e.value % 2 == 0)),
}


def one_input(case: Case, query: str) -> Callable[[], Stream[Any]]:
    return lambda: KEEPING_THE_KEY[query](case.stream())


def two_inputs(pair: tuple[Case, Case], query: str) -> Callable[[], Stream[Any]]:
    return lambda: TWO_INPUTS[query](pair[0].stream(name="a"), pair[1].stream(name="b"))


@st.composite
def keyed_pairs(draw: st.DrawFn) -> tuple[Case, Case]:
    return draw(cases(over=True)), draw(cases(over=True, first_seq=OTHER_SEQ))


def check_per_key_progress(executor: Any, build: Callable[[], Stream[Any]]) -> None:
    keyed = executor.run(build())
    merged = executor.run(without_the_key(build()))
    check_result(keyed)
    # Per-key time changes when results go out, never what they are or the output's CTIs.
    assert lifetimes(keyed) == lifetimes(merged)
    assert keyed.ctis == merged.ctis
    assert merged.substream_ctis == {} and not any(isinstance(i, SubstreamCti) for i in merged.raw)
    # The emission contract per key: nothing of key k starts before the output's CTI or k's
    # own CTI already out; each event goes out with the output's CTI or its own key's.
    cti: Any = None
    own: dict[Any, Any] = {}
    waiting: list[Any] = []
    for item in keyed.raw:
        if isinstance(item, (Point, Interval, EdgeStart)):
            k = item.payload.key
            assert cti is None or item.start >= cti, (item, cti)
            assert k not in own or item.start >= own[k], (item, own[k])
            waiting.append(item)
        elif isinstance(item, Cti):
            cti, waiting = item.timestamp, []
        elif isinstance(item, SubstreamCti):
            assert all(w.payload.key == item.key for w in waiting), (item, waiting)
            own[item.key], waiting = item.timestamp, []
    # And never later than the output's CTIs alone would release it.
    early, late = epochs(keyed), epochs(merged)
    assert early.keys() == late.keys()
    for event, waits in early.items():
        assert all(a <= b for a, b in zip(waits, late[event])), (event, waits, late[event])


@ORDERING
@given(case=cases(over=True), query=st.sampled_from(sorted(KEEPING_THE_KEY)))
def test_per_key_progress(case: Case, query: str) -> None:
    """With substreams, an output that keeps the key (through where, select, shifts,
    windows grouped by it, joins and unions on it) has the same results and output CTIs
    as one that does not, released no later, each by the output's CTI or its own key's,
    and never starting before either already released."""
    check_per_key_progress(InMemoryExecutor(), one_input(case, query))


@ORDERING
@given(pair=keyed_pairs(), query=st.sampled_from(sorted(TWO_INPUTS)))
def test_per_key_progress_of_two_inputs(pair: tuple[Case, Case], query: str) -> None:
    """The same for two inputs with substreams unioned or joined on the key: a key's CTI
    downstream is the earlier of its CTIs on the two sides."""
    check_per_key_progress(InMemoryExecutor(), two_inputs(pair, query))


@on_every_executor
@given(case=cases(over=True), query=st.sampled_from(sorted(KEEPING_THE_KEY)))
def test_per_key_progress_on_every_executor(executor: Any, case: Case, query: str) -> None:
    check_per_key_progress(executor, one_input(case, query))


@on_every_executor
@given(pair=keyed_pairs(), query=st.sampled_from(sorted(TWO_INPUTS)))
def test_per_key_progress_of_two_inputs_on_every_executor(executor: Any, pair: tuple[Case, Case], query: str) -> None:
    check_per_key_progress(executor, two_inputs(pair, query))
