"""Comparing results across executors.

Every executor must agree on what a query computes: the released events (as a multiset of
lifetimes and payloads), which CTI released each (``release_steps``), the output CTIs and
the substreams' ones, the per-input metrics, the rejected input events (as a multiset) and
what was withheld (``Result.withheld``).
What they need not agree on is how the output is represented: ``result.raw`` (the Spark
executor may show an edge pair as one interval, released as the start edge would be),
and the order of events or rejections released by the same CTI.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Union

from tempo import Cti, EdgeStart, Interval, Point, Result, Stream, SubstreamCti, TempoError, is_infinite
from tests.conftest import Capability, promises

EventKey = tuple[datetime, datetime, str]
RejectionKey = tuple[str, int, str, str, datetime, str, str]


def event_multiset(result: Result[Any]) -> list[EventKey]:
    """The released events as a sorted multiset of (start, end, payload repr)."""
    return sorted((e.start, e.end, repr(e.payload)) for e in result.events)


def rejection_multiset(result: Result[Any]) -> list[RejectionKey]:
    """The rejections as a sorted multiset of (input, position, rule, action, cti, item
    repr, admitted_as repr)."""
    return sorted(
        (j.input, j.position, _value(j.rule), _value(j.action), j.cti, repr(j.item), repr(j.admitted_as)) for j in result.rejected
    )


ReleaseStep = tuple[list[Any], tuple[Any, ...]]


def release_steps(
    result: Result[Any],
    event: Callable[[Any], Any] = lambda item: (item.start, repr(item.payload)),
    time: Callable[[datetime], Any] = lambda t: t,
) -> list[ReleaseStep]:
    """``raw`` as the CTIs, each with what it released: ``event`` of each released item
    before it (by default its start and payload repr; sorted, as the order within one
    release is the executor's) and the CTI, ``("cti", time(t))`` or ``("key", key,
    time(t))``. Every released item is followed by the CTI that released it."""
    steps: list[ReleaseStep] = []
    released: list[Any] = []
    for item in result.raw:
        if isinstance(item, Cti):
            steps.append((sorted(released), ("cti", time(item.timestamp))))
            released = []
        elif isinstance(item, SubstreamCti):
            steps.append((sorted(released), ("key", item.key, time(item.timestamp))))
            released = []
        elif isinstance(item, (Point, Interval, EdgeStart)):
            released.append(event(item))
    assert not released, f"released without a CTI after them: {released}"
    return steps


def _value(member: Any) -> str:
    """An enum member (Rule, Action) as its string value."""
    return str(getattr(member, "value", member))


def assert_same_results(a: Result[Any], b: Result[Any], context: str = "") -> None:
    """``a`` and ``b`` agree on events (multiset), ctis, metrics, rejected (multiset) and
    withheld."""
    where = f" ({context})" if context else ""
    assert a.ctis == b.ctis, f"ctis differ{where}:\n  {a.ctis}\n  {b.ctis}"
    assert a.substream_ctis == b.substream_ctis, f"substream ctis differ{where}:\n  {a.substream_ctis}\n  {b.substream_ctis}"
    assert a.metrics == b.metrics, f"metrics differ{where}:\n  {a.metrics}\n  {b.metrics}"
    ea, eb = event_multiset(a), event_multiset(b)
    assert ea == eb, f"events differ{where}:\n  only in a: {_minus(ea, eb)}\n  only in b: {_minus(eb, ea)}"
    sa, sb = release_steps(a), release_steps(b)
    assert sa == sb, f"released by other CTIs{where}:\n  {sa}\n  {sb}"
    ra, rb = rejection_multiset(a), rejection_multiset(b)
    assert ra == rb, f"rejected differ{where}:\n  only in a: {_minus(ra, rb)}\n  only in b: {_minus(rb, ra)}"
    assert a.withheld == b.withheld, f"withheld differ{where}:\n  {a.withheld}\n  {b.withheld}"


Outcome = Union[Result[Any], TempoError]
"""What running a query gave: its result, or the TempoError it raised."""


def outcome(executor: Any, build: Callable[[], Stream[Any]]) -> Outcome:
    """Build the query afresh and run it on ``executor``; a TempoError is the outcome."""
    try:
        result: Result[Any] = executor.run(build())
    except TempoError as e:
        return e
    assert isinstance(result, Result), f"{type(executor).__name__}.run returned {result!r}"
    return result


def assert_same_outcome(a: Outcome, b: Outcome, context: str = "") -> None:
    """Both runs failed with the same TempoError type, or both gave the same results."""
    if isinstance(a, TempoError) or isinstance(b, TempoError):
        assert type(a) is type(b), f"one run raised, the other did not, or not the same error ({context}):\n  a: {a!r}\n  b: {b!r}"
        return
    assert_same_results(a, b, context)


def assert_executors_agree(reference: Any, other: Any, desc: str, build: Callable[[], Stream[Any]]) -> None:
    """Build and run a query on both executors: they raise the same TempoError type, or
    both give results that pass ``check_result`` and agree (``assert_same_results``)."""
    expected = outcome(reference, build)
    got = outcome(other, build)
    for o in (expected, got):
        if isinstance(o, Result):
            check_result(o)
    assert_same_outcome(expected, got, f"a: {type(reference).__name__}, b: {type(other).__name__}; {desc}")


def _minus(a: Sequence[Any], b: Sequence[Any]) -> list[Any]:
    rest = list(b)
    out = []
    for x in a:
        if x in rest:
            rest.remove(x)
        else:
            out.append(x)
    return out


def same_items(executor: object, got: Sequence[Any], expected: Sequence[Any]) -> None:
    """``got`` equals ``expected`` as a multiset on every executor, and item for item (in
    order) on executors promising ``RAW_ITEMS`` (the reference's release order). For lists
    whose order within one CTI is the executor's own (events or rejections released together)."""
    assert sorted(map(repr, got)) == sorted(map(repr, expected)), f"\n  got      {list(got)}\n  expected {list(expected)}"
    if promises(executor, Capability.RAW_ITEMS):
        assert list(got) == list(expected)


def check_result(result: Result[Any]) -> None:
    """What every executor's result must satisfy.

    * output CTIs strictly increase;
    * every released event ends after its start, and was released by a CTI past its start:
      the first CTI after it in ``raw`` (a ``SubstreamCti`` of its key when the output
      keeps a substream key; without one, by the first output CTI past its start, so the
      CTI that releases each event never goes back along ``events``; events released by
      the same CTI may come in any order);
    * the metrics add up.
    """
    ctis = result.ctis
    assert all(x < y for x, y in zip(ctis, ctis[1:])), f"output CTIs do not strictly increase: {ctis}"
    for e in result.events:
        assert e.end > e.start or is_infinite(e.end), f"{e} has an empty lifetime"
    if result.substream_ctis:
        _check_keyed_release(result)
    else:
        released_by: list[int] = []
        for e in result.events:
            assert ctis and e.start < ctis[-1], f"{e} released without a CTI past its start (CTIs {ctis})"
            released_by.append(next(i for i, c in enumerate(ctis) if c > e.start))
        assert released_by == sorted(released_by), f"events not in release order: {result.events}"
    for name, m in result.metrics.items():
        assert m.received == m.admitted + m.dropped, (name, m)
        assert m.adjusted <= m.admitted, (name, m)
    if result.withheld is not None:  # what waits never started before the last output CTI
        assert result.withheld.events >= 1, result.withheld
        assert not ctis or not is_infinite(ctis[-1]), f"{result.withheld} after a CTI at infinity"
        assert not ctis or result.withheld.waiting_for >= ctis[-1], (result.withheld, ctis[-1])


def _check_keyed_release(result: Result[Any]) -> None:
    """With substreams at the output: each event in ``raw`` is released by the next CTI
    (of either kind) after it, which is past its start; a key's CTIs strictly increase
    and are ahead of the output CTI; ``substream_ctis`` lists them."""
    merged: datetime | None = None
    by_key: dict[Any, list[datetime]] = {}
    group: list[Any] = []
    for item in result.raw:
        if isinstance(item, (Cti, SubstreamCti)):
            for ev in group:
                assert ev.start < item.timestamp, f"{ev} released by {item}, which is not past its start"
            group = []
            if isinstance(item, Cti):
                merged = item.timestamp
            else:
                assert merged is None or item.timestamp > merged, f"{item} not ahead of the output CTI {merged}"
                seen = by_key.setdefault(item.key, [])
                assert not seen or item.timestamp > seen[-1], f"{item} not after the key's CTI {seen[-1]}"
                seen.append(item.timestamp)
        elif isinstance(item, (Point, Interval, EdgeStart)):
            group.append(item)
    assert not group, f"{group} released without a CTI after them"
    assert by_key == result.substream_ctis, (by_key, result.substream_ctis)
