"""Null tests, coalesce, explicit constants and udf result checks, on every executor.

Every expectation is written by hand from docs/semantics.md section 7 (nulls): ``is_null``
and ``is_not_null`` are never null, ``coalesce`` gives its first non-null argument (a float
where the arguments mix ints and floats), a null condition counts as false, and a udf's
result is checked against its declared type.

Timeline of ``NULLS`` (points, then a CTI at 10):

    a(v=1.5, n=None)@1   b(v=None, n=4)@2   c(v=None, n=None)@3   d(v=-2.0, n=7)@4   |10
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest

import tempo
from tempo import Cti, EventShape, Interval, Point, Stream, UdfError, UdfResultError
from tests.conformance.compare import check_result, same_items

BASE = datetime(2024, 1, 1)


def T(s: float) -> datetime:
    return BASE + timedelta(seconds=s)


@attrs.frozen
class M:
    name: str
    v: float | None
    n: int | None


@attrs.frozen
class Filled:
    name: str
    v: float
    n: int
    missing: bool
    first: float | None


@attrs.frozen
class Ref:
    name: str
    label: str | None


@attrs.frozen
class Labelled:
    name: str
    label: str


@attrs.frozen
class Group:
    n: int
    count: int
    total: float


@attrs.frozen
class Out:
    name: str
    x: float | None


@attrs.frozen
class Flag:
    name: str
    ok: bool | None


A_, B_, C_, D_ = M("a", 1.5, None), M("b", None, 4), M("c", None, None), M("d", -2.0, 7)
NULLS = [A_, B_, C_, D_]


def nulls() -> Stream[M]:
    return Stream.create("m", [*(Point(T(i + 1), p) for i, p in enumerate(NULLS)), Cti(T(10))], EventShape.POINT)


def run(executor: Any, stream: Stream[Any]) -> tempo.Result[Any]:
    result: tempo.Result[Any] = executor.run(stream)
    check_result(result)
    return result


def pt(s: float, payload: Any) -> tuple[datetime, datetime, Any]:
    return (T(s), T(s) + tempo.TICK, payload)


def evs(result: tempo.Result[Any]) -> list[tuple[datetime, datetime, Any]]:
    return [(e.start, e.end, e.payload) for e in result.events]


AT = {p.name: (i + 1, p) for i, p in enumerate(NULLS)}


@pytest.mark.parametrize(
    ("predicate", "kept"),
    [
        (lambda e: tempo.is_null(e.v), "bc"),
        (lambda e: tempo.is_not_null(e.v), "ad"),
        (lambda e: tempo.is_null(e.n), "ac"),
        (lambda e: ~tempo.is_null(e.v), "ad"),
        (lambda e: tempo.not_(tempo.is_not_null(e.n)), "ac"),
        (lambda e: tempo.is_null(e.v) & tempo.is_not_null(e.n), "b"),
        (lambda e: tempo.is_null(e.v) | tempo.is_null(e.n), "abc"),
        (lambda e: tempo.is_null(e.v * 2 + e.n), "abc"),  # null if either is: only d has both
        (lambda e: tempo.is_null(e.v > 0), "bc"),  # a null comparison is null
        (lambda e: tempo.is_not_null(e.name), "abcd"),
        (lambda e: tempo.coalesce(e.v, 0.0) > 0, "a"),
        (lambda e: tempo.coalesce(e.v, e.n, -1.0) >= 0, "ab"),  # 1.5, 4, -1, -2
        (lambda e: tempo.coalesce(e.n, 5) == 5, "ac"),
        (lambda e: tempo.coalesce(e.v, e.n) < 0, "d"),  # c: coalesce(null, null) is null
        (lambda e: tempo.lit(True), "abcd"),
        (lambda e: tempo.lit(False), ""),
        (lambda e: tempo.when(tempo.is_null(e.v), e.n == 4, e.v > 0), "ab"),
    ],
    ids=[
        "is_null",
        "is_not_null",
        "is_null-int",
        "invert",
        "not_",
        "and",
        "or",
        "arith",
        "comparison",
        "never-null",
        "coalesce",
        "coalesce-3",
        "coalesce-int",
        "coalesce-all-null",
        "lit-true",
        "lit-false",
        "when",
    ],
)
def test_null_tests_and_coalesce_in_where(executor: Any, predicate: Callable[[M], bool], kept: str) -> None:
    r = run(executor, nulls().where(predicate))
    same_items(executor, evs(r), [pt(*AT[n]) for n in kept])
    assert r.ctis == [T(10)]


def test_null_tests_and_coalesce_in_select(executor: Any) -> None:
    """Each point mapped: v or 0.0, n or -1, whether v is null, the first of v and n."""
    q = nulls().select(
        lambda m: Filled(
            name=m.name,
            v=tempo.coalesce(m.v, 0.0),
            n=tempo.coalesce(m.n, -1),
            missing=tempo.is_null(m.v),
            first=tempo.coalesce(m.v, m.n),
        )
    )
    r = run(executor, q)
    expected = [
        pt(1, Filled("a", 1.5, -1, False, 1.5)),
        pt(2, Filled("b", 0.0, 4, True, 4.0)),
        pt(3, Filled("c", 0.0, -1, True, None)),
        pt(4, Filled("d", -2.0, 7, False, -2.0)),
    ]
    same_items(executor, evs(r), expected)
    for e in r.events:  # an int picked by a float coalesce is a float on every executor
        assert e.payload.first is None or type(e.payload.first) is float
        assert type(e.payload.v) is float and type(e.payload.n) is int and type(e.payload.missing) is bool


def test_coalesce_as_group_key_and_aggregate_argument(executor: Any) -> None:
    """group by n or 0 over [0, 10): key 0 holds a and c, key 4 b, key 7 d; the total adds v or 0."""
    q = (
        nulls()
        .group_by(lambda m: tempo.coalesce(m.n, 0))
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda n, w: Group(n=n, count=w.count(), total=w.sum(lambda m: tempo.coalesce(m.v, 0.0))))
    )
    r = run(executor, q)
    window = (T(0), T(10))
    same_items(
        executor,
        sorted(evs(r), key=lambda e: e[2].n),
        [(*window, Group(0, 2, 1.5)), (*window, Group(4, 1, 0.0)), (*window, Group(7, 1, -2.0))],
    )


def test_null_tests_in_join_and_anti_join_predicates(executor: Any) -> None:
    """Refs [0, 10): a(label y), b(label None), c(label x). Join on the name where the left v is
    null: b and c; the label or "none". Anti join on the name where the right label is not
    null: b (its ref has no label) and d (no ref) stay."""
    refs = Stream.create(
        "refs",
        [Interval(T(0), T(10), Ref("a", "y")), Interval(T(0), T(10), Ref("b", None)), Interval(T(0), T(10), Ref("c", "x")), Cti(T(10))],
        EventShape.INTERVAL,
    )
    joined = nulls().join(
        refs,
        on=lambda m, ref: (m.name == ref.name) & tempo.is_null(m.v),
        select=lambda m, ref: Labelled(name=m.name, label=tempo.coalesce(ref.label, "none")),
    )
    r = run(executor, joined)
    same_items(executor, evs(r), [pt(2, Labelled("b", "none")), pt(3, Labelled("c", "x"))])
    anti = nulls().anti_join(refs, on=lambda m, ref: (m.name == ref.name) & tempo.is_not_null(ref.label))
    r = run(executor, anti)
    same_items(executor, evs(r), [pt(*AT["b"]), pt(*AT["d"])])


def test_explicit_constant_join_predicate_is_a_cross_join(executor: Any) -> None:
    """on=tempo.lit(True): every overlapping pair matches (4 points x 3 refs alive)."""
    refs = Stream.create(
        "refs",
        [Interval(T(0), T(10), Ref("a", "y")), Interval(T(0), T(10), Ref("b", None)), Interval(T(0), T(2.5), Ref("c", "x")), Cti(T(10))],
        EventShape.INTERVAL,
    )
    q = nulls().join(refs, on=lambda m, ref: tempo.lit(True), select=lambda m, ref: Labelled(m.name, ref.name))
    r = run(executor, q)
    expected = [pt(s, Labelled(n, rn)) for n, (s, _) in AT.items() for rn in ("a", "b")]
    expected += [pt(1, Labelled("a", "c")), pt(2, Labelled("b", "c"))]
    same_items(executor, sorted(evs(r), key=repr), sorted(expected, key=repr))


# --------------------------------------------------------------------------------------
# udf results are checked against the declared type, with one error on every executor
# --------------------------------------------------------------------------------------


def _label(v: float | None) -> Any:
    return "hot" if v is not None and v > 1 else v


def _twice(n: int | None) -> Any:
    return None if n is None else n * 2


def _positive(n: int | None) -> Any:
    return n is not None and n > 0


def _as_int(n: int | None) -> Any:
    return 1 if n else 0


def test_udf_returning_a_str_for_float_raises_on_every_executor(executor: Any) -> None:
    """a's v 1.5 gives "hot": not a float. The error names the udf, both types, the value and
    the arguments; on Spark it is the same tempo error, not a Py4J trace or a silent NULL."""
    label = tempo.udf(_label, float)
    q = nulls().select(lambda m: Out(name=m.name, x=label(m.v)))
    with pytest.raises(UdfResultError) as info:
        executor.run(q)
    e = info.value
    assert (e.udf, e.declared, e.actual, e.value, e.arguments) == ("_label", "float", "str", "'hot'", "(1.5,)")
    msg = str(e)
    for word in ("'_label'", "float", "'hot'", "str", "(1.5,)"):
        assert word in msg, word
    assert "Py4J" not in msg and "Traceback" not in msg


def _reciprocal_gap(v: float | None) -> Any:
    return None if v is None else 1 / (v - 1.5)


def test_udf_raising_is_a_udf_error_on_every_executor(executor: Any) -> None:
    """a's v 1.5 makes _reciprocal_gap divide by zero. Every executor raises ``UdfError``
    naming the udf, the exception's type and message and the arguments (on Spark from the
    Python worker, in the vectorised executor from inside polars, never their own error); in
    memory the ZeroDivisionError is its cause."""
    gap = tempo.udf(_reciprocal_gap, float)
    q = nulls().select(lambda m: Out(name=m.name, x=gap(m.v)))
    with pytest.raises(UdfError) as info:
        executor.run(q)
    e = info.value
    assert (e.udf, e.error, e.text, e.arguments) == ("_reciprocal_gap", "ZeroDivisionError", "float division by zero", "(1.5,)")
    assert str(e) == "udf '_reciprocal_gap' raised ZeroDivisionError: float division by zero (for the arguments (1.5,))"
    if isinstance(executor, tempo.InMemoryExecutor):
        assert isinstance(e.__cause__, ZeroDivisionError)


def test_udf_int_for_float_is_a_float_and_none_passes(executor: Any) -> None:
    """_twice gives an int (8, 14) or None; declared float: 8.0 and 14.0, None as is."""
    twice = tempo.udf(_twice, float)
    r = run(executor, nulls().select(lambda m: Out(name=m.name, x=twice(m.n))))
    same_items(executor, evs(r), [pt(1, Out("a", None)), pt(2, Out("b", 8.0)), pt(3, Out("c", None)), pt(4, Out("d", 14.0))])
    assert all(e.payload.x is None or type(e.payload.x) is float for e in r.events)


def test_udf_bool_is_not_an_int(executor: Any) -> None:
    """_positive returns a bool: fine where bool is declared, an error where int is."""
    as_bool = tempo.udf(_positive, bool)
    r = run(executor, nulls().where(lambda m: as_bool(m.n)))
    same_items(executor, evs(r), [pt(*AT["b"]), pt(*AT["d"])])
    as_int = tempo.udf(_positive, int)
    with pytest.raises(UdfResultError) as info:
        executor.run(nulls().where(lambda m: as_int(m.n) > 0))
    assert (info.value.declared, info.value.actual) == ("int", "bool")


def test_udf_int_for_a_bool_predicate_raises(executor: Any) -> None:
    """A udf declared bool whose function returns 0/1 is refused in a where predicate too."""
    flag = tempo.udf(_as_int, bool)
    with pytest.raises(UdfResultError) as info:
        executor.run(nulls().select(lambda m: Flag(name=m.name, ok=flag(m.n))))
    assert (info.value.udf, info.value.declared, info.value.actual) == ("_as_int", "bool", "int")
    assert "for the arguments" in str(info.value)


def test_udf_in_an_aggregate_argument_is_checked(executor: Any) -> None:
    """The check holds wherever the udf runs: here in an aggregate argument."""
    label = tempo.udf(_label, float)
    q = nulls().tumbling(timedelta(seconds=10)).aggregate(lambda w: Out(name="w", x=w.sum(lambda m: tempo.coalesce(label(m.v), 0.0))))
    with pytest.raises(UdfResultError, match="_label"):
        executor.run(q)


@attrs.frozen
class Bit:
    name: str
    flag: bool
    n: int


@attrs.frozen
class Total:
    name: str
    total: int


def test_a_bool_is_the_number_it_is(executor: Any) -> None:
    """As in Python (docs/semantics.md 7.1): True == 1, True + True == 2, and a join key of a
    bool meets an int. Timeline: a(T, 1)@1  b(F, 1)@2  c(T, 2)@3  d(F, 0)@4  |10; the other
    input of the join: one(n=1) and zero(n=0), both over [0, 10)."""
    bits = [Bit("a", True, 1), Bit("b", False, 1), Bit("c", True, 2), Bit("d", False, 0)]
    stream = Stream.create("bits", [*(Point(T(i + 1), b) for i, b in enumerate(bits)), Cti(T(10))], EventShape.POINT)
    equal = run(executor, stream.where(lambda b: b.flag == b.n))
    assert evs(equal) == [pt(1, bits[0]), pt(4, bits[3])]
    sums = run(executor, stream.select(lambda b: Total(name=b.name, total=b.flag + b.flag + b.n)))
    assert [e.payload for e in sums.events] == [Total("a", 3), Total("b", 1), Total("c", 4), Total("d", 0)]
    mixed = run(executor, stream.select(lambda b: Total(name=b.name, total=tempo.when(b.n > 1, b.flag, b.n) + tempo.coalesce(b.flag, 5))))
    assert [e.payload for e in mixed.events] == [Total("a", 2), Total("b", 1), Total("c", 2), Total("d", 0)]
    numbers = Stream.create(
        "numbers",
        [Interval(T(0), T(10), Bit("one", False, 1)), Interval(T(0), T(10), Bit("zero", False, 0)), Cti(T(10))],
        EventShape.INTERVAL,
    )
    joined = run(executor, stream.join(numbers, lambda b, m: b.flag == m.n, lambda b, m: Total(name=b.name, total=m.n)))
    assert sorted((e.payload.name, e.payload.total) for e in joined.events) == [("a", 1), ("b", 0), ("c", 1), ("d", 0)]
