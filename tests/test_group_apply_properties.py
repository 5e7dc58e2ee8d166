"""GroupApply's defining property (docs/semantics.md 5.13), for random inputs: running a
sub-query with ``group_by(k).apply`` gives exactly the events of running it on each group's
events alone (``where(k == key)``) and uniting the results, over every operator a sub-query
may hold: windows of each kind, analytics, clipping, self-joins, anti-joins, patterns, a join
against a stream from outside, top-k, nested groups and a second window stage. The two sides
share no code: one is the plan rewrite, the other plain operators per key."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tempo
from tempo import AdvanceTimePolicy, AdvanceTimeSettings, Cti, EventShape, Stream
from tests.strategies import T, Ev, Pair, Ref, generation, input_items

SEC = timedelta(seconds=1)


def tagged(inner: type) -> Any:
    """A record of a group's tag and a sub-query's output (each field of one type: every
    executor holds it, docs/semantics.md 2.5)."""
    if inner not in _TAGGED:
        made: Any = dataclasses.make_dataclass(f"Tagged_{inner.__name__}", [("group", int), ("inner", inner)], frozen=True)
        made.__module__ = __name__
        globals()[made.__name__] = made
        _TAGGED[inner] = made
    return _TAGGED[inner]


_TAGGED: dict[type, Any] = {}


@attrs.frozen
class Stat:
    n: int
    total: int
    start: datetime


Sub = Callable[[Stream[Ev], Stream[Ref]], Stream[Any]]

SUBQUERIES: dict[str, Sub] = {
    "tumbling": lambda s, o: s.tumbling(10 * SEC).aggregate(lambda w: Stat(w.count(), w.sum(lambda e: e.value), w.start)),
    "session": lambda s, o: s.session(3 * SEC).aggregate(lambda w: Stat(w.count(), w.sum(lambda e: e.value), w.end)),
    "count_window": lambda s, o: s.count_window(2).aggregate(lambda w: Stat(w.count(), w.sum(lambda e: e.value), w.start)),
    "snapshot": lambda s, o: s.snapshot().aggregate(lambda w: Stat(w.count(), w.max(lambda e: e.value), w.start)),
    "analytic": lambda s, o: s.analytic(
        lambda e, a: Pair(e.key, tempo.coalesce(a.previous(lambda e: e.value), -1), a.sum(lambda e: e.value))
    ),
    "clip": lambda s, o: s.clip_event_duration(),
    "self_join": lambda s, o: s.join(
        s.alter_event_lifetime(SEC, 4 * SEC), lambda a, b: a.value >= b.value, lambda a, b: Pair(a.key, a.value, b.value)
    ),
    "self_anti_join": lambda s, o: s.anti_join(s.shift_event_time(2 * SEC), lambda a, b: a.value == b.value),
    "followed_by": lambda s, o: s.where(lambda e: e.value % 2 == 0).followed_by(
        s.where(lambda e: e.value % 2 == 1), lambda a, b: b.value > a.value, 5 * SEC, lambda a, b: Pair(a.key, a.value, b.value)
    ),
    "broadcast_join": lambda s, o: s.join(o, lambda a, b: a.value >= b.ref, lambda a, b: Pair(a.key, a.value, b.ref)),
    "anti_join_outside": lambda s, o: s.anti_join(o, lambda a, b: a.key == b.key),
    "top_k": lambda s, o: s.tumbling(10 * SEC).top_k(2, by=lambda e: e.value, select=lambda e, r: Pair(e.key, e.value, r)),
    "nested": lambda s, o: s.group_by(lambda e: e.value % 2).apply(
        lambda g: g.hopping(10 * SEC, 5 * SEC).aggregate(lambda w: Stat(w.count(), w.sum(lambda e: e.value), w.start)),
        lambda k, r: Stat(r.n, r.total * 10 + k, r.start),
    ),
    "two_stages": lambda s, o: (
        s.tumbling(5 * SEC)
        .aggregate(lambda w: Ev(0, w.count()))
        .tumbling(20 * SEC)
        .aggregate(lambda w: Stat(w.count(), w.max(lambda e: e.value), w.start))
    ),
    "own_keys": lambda s, o: s.group_by(lambda e: e.value % 2).tumbling(10 * SEC).aggregate(lambda k, w: Stat(w.count(), k, w.start)),
    "union_inside": lambda s, o: s.where(lambda e: e.value < 3).union(s.shift_event_time(SEC).where(lambda e: e.value > 6)),
}

KEYS: dict[str, tuple[Callable[[Ev], Any], Callable[[Any], Any]]] = {
    # (the group_by key, its tag: one value of a key, also traced on apply()'s key)
    "key": (lambda e: e.key, lambda k: k),
    "value_mod_3": (lambda e: e.value % 3, lambda k: k),
    "pair": (lambda e: (e.key, e.value % 2), lambda k: k[0] * 10 + k[1]),
}


def _normal(result: tempo.Result[Any]) -> list[tuple[Any, Any, str]]:
    return sorted((e.start, e.end, repr(e.payload)) for e in result.events)


@settings(max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(sorted(SUBQUERIES)),
    st.sampled_from(sorted(KEYS)),
    st.sampled_from(list(EventShape)),
    st.data(),
)
def test_apply_is_the_union_of_the_sub_query_run_per_group(name: str, key_name: str, shape: EventShape, data: st.DataObject) -> None:
    items = data.draw(input_items(shape, Ev, keys=3))
    outside = data.draw(input_items(EventShape.INTERVAL, Ref, keys=3, max_events=5))
    settings_ = AdvanceTimeSettings(data.draw(generation()), policy=data.draw(st.sampled_from(list(AdvanceTimePolicy))))
    items.append(Cti(T(200)))
    outside.append(Cti(T(200)))
    sub, (key, tag) = SUBQUERIES[name], KEYS[key_name]
    groups = sorted({key(i.payload) for i in items if not isinstance(i, Cti)})
    assume(groups)

    def inputs() -> tuple[Stream[Ev], Stream[Ref]]:
        s = Stream.create("in", items, shape, settings_, payload_type=Ev)
        return s, Stream.create("out", outside, EventShape.INTERVAL, settings_, payload_type=Ref)

    s, o = inputs()
    Tagged = tagged(sub(s, o).payload_type)
    applied = s.group_by(key).apply(lambda g: sub(g, o), lambda k, r: Tagged(tag(k), r))

    s, o = inputs()
    united: Stream[Any] | None = None
    for g in groups:
        one = sub(s.where(lambda e, g=g: tag(key(e)) == tag(g)), o).select(lambda r, g=g: Tagged(tag(g), r))
        united = one if united is None else united.union(one)
    assert united is not None

    executor = tempo.InMemoryExecutor()
    got, want = executor.run(applied), executor.run(united)
    assert _normal(got) == _normal(want)
    assert got.ctis[-1:] == want.ctis[-1:]


def test_a_keyed_record_unpickles_in_a_process_that_never_built_the_plan() -> None:
    """The records ``group_by().apply()`` makes for its keyed events (``keyed_class``) are
    pickled as the call that makes them: a Spark worker unpickling the cluster engine's
    keyed operator has built no plan, so the class is not in its module's namespace yet."""
    import pickle
    import subprocess
    import sys
    from pathlib import Path

    from tempo.plan.group_apply import keyed_class

    cls, names = keyed_class(Ev, ((int, False), (str, True)))
    value = cls(**dict(zip(names, (4, None))), key=1, value=2)
    script = "import pickle, sys; cls, value = pickle.loads(sys.stdin.buffer.read()); print(type(value) is cls, value)"
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-c", script], input=pickle.dumps((cls, value)), capture_output=True, cwd=root, check=True)
    assert out.stdout.decode().strip() == f"True {value!r}"
