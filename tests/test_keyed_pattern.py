"""A pattern (``followed_by``) run one join key at a time (``tempo.runtime.keyed``, the
cluster engine's keyed pattern) gives what the pattern over all keys gives, in its order.

The reference is the in-memory engine's pattern operator fed a random sequence of events of
both inputs (``tests/test_keyed_anti_join.py``'s: points, intervals, events open for ever,
several join keys, null keys now and then, end edges, each input's own CTIs); what it emits (matches,
points at their right event's start, and output CTIs) is the expected output. The keyed side
runs the sequence cut into random batches as the cluster engine's keys run it (an event of a
null key reaches none: it matches nothing); each match, placed before the first output CTI
past its start (``placed``) and ordered among the matches that CTI releases by
``release_order``, must come out where the reference emitted it; each key's timer must be
exact.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import EventShape, Stream
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.runtime.keyed import Insert, KeyedResult, placed, release_order
from tempo.ticks import NEG_INF
from tests.budget import examples
from tests.test_keyed_anti_join import SECOND, Reading, Step, _keyed, _reference, sequences


def _pattern(residual: bool) -> tuple[Query, p.FollowedByNode]:
    """A reading followed within 5 s by one of its key (and, with ``residual``, of a value at
    least its): a point at the second, the first's key and the second's value."""
    from tempo.sources import ArrowSource

    def readings(name: str) -> Stream[Reading]:
        table = pa.table(
            {"ts": pa.array([], pa.timestamp("us", tz="UTC")), "key": pa.array([], pa.int64()), "value": pa.array([], pa.int64())}
        )
        return Stream.create(name, ArrowSource(table, Reading, start="ts"), EventShape.INTERVAL)

    left, right = readings("left"), readings("right")
    within = timedelta(microseconds=5 * SECOND)
    if residual:
        matched = left.followed_by(
            right, lambda a, b: (a.key == b.key) & (a.value <= b.value), within, lambda a, b: Reading(a.key, b.value)
        )
    else:
        matched = left.followed_by(right, lambda a, b: a.key == b.key, within, lambda a, b: Reading(a.key, b.value))
    query = Query.build(matched.node)
    [node] = [n for n in query.nodes if isinstance(n, p.FollowedByNode)]
    return query, node


def _key_of(item: Insert) -> str | None:
    """The key an event goes to: its join key; a null key's none (it matches nothing)."""
    return None if item.payload.key is None else repr((item.payload.key,))


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True, database=None)
@given(sequences(), st.booleans())
def test_a_pattern_run_one_key_at_a_time_gives_what_it_gives_over_all_keys_in_its_order(
    drawn: tuple[list[Step], list[int]],
    residual: bool,
) -> None:
    steps, cuts = drawn
    query, node = _pattern(residual)
    expected = _reference(query, node, steps)  # ends reach the pattern too: it reads starts only
    ctis = [s[1] for s in expected if s[0] == "cti"]
    results = _keyed(query, node, steps, cuts, _key_of, ends=False)  # the cluster engine stages no end for a pattern
    released: list[list[tuple[tuple[Any, ...], KeyedResult]]] = [[] for _ in range(len(ctis) + 1)]
    for group, result in results:
        assert not result.ended and result.end == result.start + 1
        for at, part in placed(node, result, ctis):
            released[at].append((release_order(node, part, group), part))
    assert released[-1] == []
    got: list[tuple[Any, ...]] = []
    for at, cti in enumerate(ctis):
        got += [("fragment", r.start, r.end, r.payload) for _, r in sorted(released[at], key=lambda r: r[0])]
        got.append(("cti", cti))
    assert got == expected
    assert NEG_INF not in ctis
