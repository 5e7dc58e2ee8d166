"""``tempo.runtime.verdicts`` (an input's time rules over columns) against the per-item
reference ingress (``tempo.runtime.ingress.Ingress``) on random inputs: the CTI in force at
each row, what the policy does to a row starting before it, and ASA's ordered verdicts,
whatever the cut of the rows into batches."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tempo import AdvanceTimeGenerationSettings, AdvanceTimePolicy, AdvanceTimeSettings, EventShape, Stream
from tempo.result import Action
from tempo.runtime.ingress import INTERVAL, POINT, Ingress
from tempo.runtime.policy import TimePolicy
from tempo.runtime.verdicts import GenerationState, adjusted, generation, in_force, may_be_late, ordered_verdicts, own_ctis
from tempo.settings import EventOrderingSettings
from tempo.ticks import NEG_INF

CASES = settings(derandomize=True, deadline=None, database=None)
"""Pure numpy beside the reference ingress: cheap enough for many examples in every run."""


@attrs.frozen
class Ev:
    key: int


def _node(shape: EventShape, settings: AdvanceTimeSettings, over: bool = False) -> Any:
    items: list[Any] = []
    stream = Stream.create("in", items, shape, settings, payload_type=Ev, over=(lambda e: e.key) if over else None)
    return stream.node


def _ingress(node: Any) -> tuple[Ingress, list[tuple[int, int, int | None]], list[Any]]:
    """The reference ingress of ``node``, with what it admits ``(id, start, end)`` and rejects."""
    ids = iter(range(1_000_000))
    rejected: list[Any] = []
    ingress = Ingress(node, lambda: next(ids), rejected)
    admitted: list[tuple[int, int, int | None]] = []
    ingress.emit_insert = lambda eid, start, end, payload: admitted.append((eid, start, end))
    return ingress, admitted, rejected


def _cuts(n: int, data: st.DataObject) -> list[tuple[int, int]]:
    """Random batches ``[lo, hi)`` covering ``range(n)`` in order (some empty)."""
    marks = sorted(data.draw(st.lists(st.integers(0, n), max_size=4)))
    bounds = [0, *marks, n]
    return list(zip(bounds, bounds[1:]))


@st.composite
def generated_inputs(draw: st.DrawFn) -> tuple[AdvanceTimeSettings, bool, list[tuple[int, int]]]:
    """Settings generating CTIs (by count or time span), points or intervals, and lifetimes
    ``(start, end)`` in ticks, in about time order with some rows far behind."""
    frequency: int | timedelta = draw(st.one_of(st.integers(1, 4), st.integers(1, 12).map(lambda s: timedelta(microseconds=s))))
    delay = timedelta(microseconds=draw(st.integers(0, 6)))
    adjust = draw(st.booleans())
    gen = AdvanceTimeGenerationSettings(frequency, delay=delay)
    settings_ = AdvanceTimeSettings(gen, policy=AdvanceTimePolicy.ADJUST if adjust else AdvanceTimePolicy.DROP)
    point = draw(st.booleans())
    starts = draw(st.lists(st.integers(-5, 8), min_size=0, max_size=40))
    drift = draw(st.integers(0, 2))
    lifetimes = []
    for i, s in enumerate(starts):
        start = s + i * drift
        lifetimes.append((start, start + 1 if point else start + draw(st.integers(1, 9))))
    return settings_, point, lifetimes


@settings(CASES, max_examples=300)
@given(case=generated_inputs(), data=st.data())
def test_generated_ctis_and_verdicts_over_batches_are_those_of_the_reference_ingress(
    case: tuple[AdvanceTimeSettings, bool, list[tuple[int, int]]], data: st.DataObject
) -> None:
    """Batch by batch, ``generation`` (its state carried) and ``in_force`` give the CTI the
    reference ingress holds before each row, ``adjusted`` the lifetimes it admits late rows
    with, and the CTI after the last row is the ingress's."""
    settings_, point, lifetimes = case
    node = _node(EventShape.POINT if point else EventShape.INTERVAL, settings_)
    policy = TimePolicy.of_input(node)
    ingress, admitted, _ = _ingress(node)
    expected_ctis = []
    for i, (s, e) in enumerate(lifetimes):
        expected_ctis.append(ingress.cti)
        ingress.process((NEG_INF, POINT if point else INTERVAL, s, e, Ev(0), i, None))
    starts = np.array([s for s, _ in lifetimes], dtype=np.int64)
    ends = np.array([e for _, e in lifetimes], dtype=np.int64)
    state, cti, ctis, kept_rows = GenerationState(), NEG_INF, [], []
    for lo, hi in _cuts(len(lifetimes), data):
        generated = generation(policy, starts[lo:hi], before=state)
        before, after = in_force(generated.candidates, cti)
        ctis.extend(before.tolist())
        late = starts[lo:hi] < before
        kept, moved_start, moved_end = adjusted(point, ends[lo:hi], before)
        kept &= policy.adjust
        for i in range(hi - lo):
            if not late[i]:
                kept_rows.append((int(starts[lo + i]), int(ends[lo + i])))
            elif kept[i]:
                kept_rows.append((int(moved_start[i]), int(moved_end[i])))
        state, cti = generated.state, int(after[-1]) if hi > lo else cti
    assert ctis == expected_ctis
    assert cti == ingress.cti
    assert kept_rows == [(s, e) for _, s, e in admitted]
    whole = own_ctis(policy, starts)
    expected_late = [i for i, (s, _) in enumerate(lifetimes) if s < expected_ctis[i]]
    assert whole.late.tolist() == expected_late
    assert whole.late_cti.tolist() == [expected_ctis[i] for i in expected_late]
    steps = [i for i in range(1, len(lifetimes)) if expected_ctis[i] != expected_ctis[i - 1]]
    assert set(steps) <= {p + 1 for p in whole.positions.tolist()}  # every move of the CTI comes from a candidate


@st.composite
def ordered_inputs(draw: st.DrawFn) -> tuple[AdvanceTimeSettings, bool, bool, list[tuple[int, int, int, int]]]:
    """Ordering settings (tolerances in µs, late and early on or off), substreams or not,
    points or intervals, and rows ``(arrival, start, end, key)`` with arrivals never going
    back."""
    ms = lambda lo, hi: st.integers(lo, hi).map(lambda t: timedelta(microseconds=t))  # noqa: E731
    over, point = draw(st.booleans()), draw(st.booleans())
    late = ms(0, 8) if over else st.one_of(st.none(), ms(0, 8))  # substreams need a late tolerance
    ordering = EventOrderingSettings(draw(ms(0, 6)), draw(late), draw(st.one_of(st.none(), ms(0, 8))))
    adjust = draw(st.booleans())
    settings_ = AdvanceTimeSettings(ordering=ordering, policy=AdvanceTimePolicy.ADJUST if adjust else AdvanceTimePolicy.DROP)
    rows, arrival = [], 0
    for _ in range(draw(st.integers(0, 40))):
        arrival += draw(st.integers(0, 3))
        start = arrival + draw(st.integers(-12, 12))
        rows.append((arrival, start, start + 1 if point else start + draw(st.integers(1, 9)), draw(st.integers(0, 2))))
    return settings_, over, point, rows


@settings(CASES, max_examples=300)
@given(case=ordered_inputs())
def test_ordered_verdicts_are_those_of_the_reference_ingress(
    case: tuple[AdvanceTimeSettings, bool, bool, list[tuple[int, int, int, int]]],
) -> None:
    """Each row's verdict (admitted as read, adjusted to a lifetime, or dropped; the rule
    and the time it was held against) is the reference ingress's, with or without
    substreams."""
    settings_, over, point, rows = case
    node = _node(EventShape.POINT if point else EventShape.INTERVAL, settings_, over)
    ingress, admitted, rejected = _ingress(node)
    for i, (a, s, e, k) in enumerate(rows):
        ingress.process((a, POINT if point else INTERVAL, s, e, Ev(k), i, None))
    arrivals, starts, ends, keys = (np.array([r[j] for r in rows], dtype=np.int64) for j in range(4))
    v = ordered_verdicts(TimePolicy.of_input(node), starts, ends, arrivals, keys if over else None, point)
    got_rejected = []
    got_admitted = []
    for i in range(len(rows)):
        if v.status[i]:
            action = Action.DROPPED if v.status[i] == 2 else Action.ADJUSTED
            lifetime = ("lifetime", int(v.start[i]), int(v.end[i])) if action is Action.ADJUSTED else None
            got_rejected.append((i, v.rule_at(i), action, int(v.bound[i]), lifetime))
        if v.status[i] != 2:
            got_admitted.append((int(v.start[i]), int(v.end[i])))
    assert got_rejected == [(r[1], r[3], r[4], r[5], r[6]) for r in rejected]
    assert got_admitted == [(s, e) for _, s, e in admitted]


@pytest.mark.parametrize("keys", [None, [0, 1, 0, 1, 1, 0]])
def test_ordered_verdicts_by_hand(keys: list[int] | None) -> None:
    """Points arriving at 10, with an out-of-order tolerance of 2, late tolerance 5, early
    window 3, ADJUST. Starts 10, 20 (early: more than 3 after arrival 10), 4 (late: before
    10 - 5, moved to 5, then out of order), 9, 7 and 8. Without substreams the largest
    start passing both checks is 10, so the CTI is 8: 4 (at 5) and 7 move to 8, 9 and 8
    stand. With two substreams (keys 0 1 0 1 1 0), key 1 has seen only the early 20 when 9
    comes (its CTI then 7): 9 and 7 stand, and 9 moves key 1's CTI to 7, ahead of the
    clock's 10 - 5; key 0's 4 (at 5) moves to 8 and its 8 stands."""
    settings_ = AdvanceTimeSettings(
        ordering=EventOrderingSettings(timedelta(microseconds=2), timedelta(microseconds=5), timedelta(microseconds=3)),
        policy=AdvanceTimePolicy.ADJUST,
    )
    policy = TimePolicy.of(settings_)
    starts = np.array([10, 20, 4, 9, 7, 8], dtype=np.int64)
    v = ordered_verdicts(policy, starts, starts + 1, np.full(6, 10, dtype=np.int64), None if keys is None else np.array(keys), True)
    if keys is None:
        assert v.status.tolist() == [0, 2, 1, 0, 1, 0]
        assert [v.rule_at(i).name for i in (1, 2, 4)] == ["EARLY_ARRIVAL", "START_BEFORE_CTI", "START_BEFORE_CTI"]
        assert v.start.tolist()[2] == 8 and v.start.tolist()[4] == 8
        assert v.candidate.tolist() == [8, NEG_INF, NEG_INF, NEG_INF, NEG_INF, NEG_INF]
    else:
        assert v.status.tolist() == [0, 2, 1, 0, 0, 0]
        assert v.start.tolist()[2] == 8 and v.rule_at(2).name == "START_BEFORE_CTI"
        assert v.key_candidate.tolist() == [8, NEG_INF, NEG_INF, 7, NEG_INF, NEG_INF]
    assert v.late.tolist() == [False, False, True, False, False, False]
    assert v.arrival_step.tolist() == [True, False, False, False, False, False]


@settings(CASES, max_examples=300)
@given(
    starts=st.lists(st.integers(-40, 40), max_size=60),
    latest=st.one_of(st.just(NEG_INF), st.integers(-40, 40)),
    delay=st.integers(-3, 10),
    block=st.integers(1, 9),
    drift=st.integers(0, 3),
)
def test_rows_at_risk_by_blocks_are_those_of_the_running_maximum(
    starts: list[int], latest: int, delay: int, block: int, drift: int
) -> None:
    """``may_be_late`` (blocks first, a running maximum only where a block is unsure, or over
    every row when many are) marks exactly the rows starting before the largest start
    before them less the delay, row by row. With ``drift`` the starts mostly rise, so most
    blocks are sure."""
    values = [s + i * drift for i, s in enumerate(starts)]
    expected, seen = [], latest
    for v in values:
        expected.append(v < seen - delay)
        seen = max(seen, v)
    assert may_be_late(np.array(values, dtype=np.int64), latest, delay, block).tolist() == expected


def test_time_span_generation_across_batches_by_hand() -> None:
    """Periods of 1 µs, no delay. The first batch's one event (at 5) enters period 5 without
    generating; in the next batch 1 and 2 enter no later period than 5 (2 is later than 1,
    but not than every period before it), and 6 generates a CTI at 6."""
    policy = TimePolicy.of(AdvanceTimeSettings(AdvanceTimeGenerationSettings(timedelta(microseconds=1))))
    first = generation(policy, np.array([5], dtype=np.int64))
    assert first.generates.tolist() == [False] and first.state == GenerationState(0, 5)
    second = generation(policy, np.array([1, 2, 6], dtype=np.int64), before=first.state)
    assert second.generates.tolist() == [False, False, True]
    assert second.candidates.tolist() == [NEG_INF, NEG_INF, 6] and second.state == GenerationState(0, 6)
    before, after = in_force(second.candidates, NEG_INF)
    assert before.tolist() == [NEG_INF, NEG_INF, NEG_INF] and after.tolist() == [NEG_INF, NEG_INF, 6]
