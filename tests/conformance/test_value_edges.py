"""Values at the edges, decided once and the same on every executor (docs/semantics.md 7.4).

Division by zero and integer results outside 64 bits are ``tempo.EvaluationError`` naming the
expression or aggregate as written; an expression is evaluated only where the in-memory
executor evaluates it (the taken branch of ``tempo.when``, the right side of ``&`` / ``|``
where the left does not decide, a ``coalesce`` value only where those before it are null), so
a guarded division never fails. Floats compare in one total order (NaN equals NaN and is
greater than every number), and float keys group and join as Spark's do: one NaN group,
-0.0 with 0.0 (shown as 0.0). Each expected value below is worked out by hand in its docstring.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import attrs
import pytest

import tempo
from tempo import Cti, EvaluationError, EvaluationRule, EventShape, Point, Stream

from tests.conformance.compare import check_result

BASE = datetime(2024, 1, 1)
NAN = float("nan")
BIG = 2**62


def T(s: float) -> datetime:
    return BASE + timedelta(seconds=s)


@attrs.frozen
class Pair:
    name: str
    n: int
    d: int


@attrs.frozen
class Ratio:
    name: str
    q: float


@attrs.frozen
class Whole:
    name: str
    q: int


@attrs.frozen
class MaybeRatio:
    name: str
    q: float | None


@attrs.frozen
class Num:
    name: str
    v: int


@attrs.frozen
class Sums:
    n: int
    total: int
    mean: float


@attrs.frozen
class Reading:
    name: str
    k: float


@attrs.frozen
class Grouped:
    k: float
    n: int


@attrs.frozen
class Joined:
    left: str
    right: str


@attrs.frozen
class Floats:
    name: str
    a: float
    b: float


def run(executor: Any, stream: Stream[Any]) -> tempo.Result[Any]:
    result: tempo.Result[Any] = executor.run(stream)
    check_result(result)
    return result


def pairs() -> Stream[Pair]:
    """a(n=1, d=2)@1, b(n=3, d=0)@2, c(n=-4, d=3)@3, then |10."""
    data = [Pair("a", 1, 2), Pair("b", 3, 0), Pair("c", -4, 3)]
    return Stream.create("pairs", [*(Point(T(i + 1), p) for i, p in enumerate(data)), Cti(T(10))], EventShape.POINT)


def numbers(*values: int) -> Stream[Num]:
    """One point per value, a second apart from 1 s, then |100: all in the minute [0, 60)."""
    items: list[Any] = [Point(T(i + 1), Num(f"v{i}", v)) for i, v in enumerate(values)]
    return Stream.create("numbers", [*items, Cti(T(100))], EventShape.POINT)


# ---- division by zero -----------------------------------------------------------------------


@pytest.mark.parametrize("op", ["/", "//", "%"])
def test_division_by_zero_is_an_evaluation_error(executor: Any, op: str) -> None:
    """b has d=0: evaluating n op d for b fails on every executor with the expression as
    written (the lambda's own names) and the rule, as Python's ZeroDivisionError would."""
    query = {
        "/": lambda: pairs().select(lambda r: Ratio(r.name, r.n / r.d)),
        "//": lambda: pairs().select(lambda r: Whole(r.name, r.n // r.d)),
        "%": lambda: pairs().select(lambda r: Whole(r.name, r.n % r.d)),
    }[op]()
    with pytest.raises(EvaluationError) as raised:
        executor.run(query)
    assert raised.value.rule is EvaluationRule.DIVISION_BY_ZERO
    assert raised.value.expression == f"(r.n {op} r.d)"
    assert str(raised.value).startswith(f"division by zero in (r.n {op} r.d) (for the values (3, 0")


def test_a_guarded_division_is_not_evaluated_where_its_guard_fails(executor: Any) -> None:
    """The division is evaluated only for a (1/2) and c (-4/3): b's d=0 is behind
    ``r.d != 0`` in ``&``, in ``when``'s condition, and in a coalesce's first value.
    where: a (0.5 > 0) kept, c (-1.33) not; when: a 0.5, b 0.0, c -4/3."""
    kept = run(executor, pairs().where(lambda r: (r.d != 0) & (r.n / r.d > 0)))
    assert [e.payload.name for e in kept.events] == ["a"]
    either = run(executor, pairs().where(lambda r: (r.d == 0) | (r.n / r.d > 0)))
    assert sorted(e.payload.name for e in either.events) == ["a", "b"]
    chosen = run(executor, pairs().select(lambda r: Ratio(r.name, tempo.when(r.d != 0, r.n / r.d, 0.0))))
    assert sorted((e.payload.name, e.payload.q) for e in chosen.events) == [("a", 0.5), ("b", 0.0), ("c", -4 / 3)]


def test_try_divide_gives_null_on_a_zero_divisor(executor: Any) -> None:
    """try_divide(n, d): a 0.5, b None (3 / 0), c -4/3; typed float | None."""
    r = run(executor, pairs().select(lambda r: MaybeRatio(r.name, tempo.try_divide(r.n, r.d))))
    assert sorted(((e.payload.name, e.payload.q) for e in r.events), key=repr) == [("a", 0.5), ("b", None), ("c", -4 / 3)]
    filled = run(executor, pairs().select(lambda r: Ratio(r.name, tempo.coalesce(tempo.try_divide(r.n, r.d), -1.0))))
    assert sorted((e.payload.name, e.payload.q) for e in filled.events) == [("a", 0.5), ("b", -1.0), ("c", -4 / 3)]


def test_float_floor_division_and_remainder(executor: Any) -> None:
    """``//`` on floats is floor(a / b), as SQL and polars compute it (1.0 / 0.1 rounds to
    10.0, so 10.0, where Python's own ``//`` corrects to 9.0); ``%`` is Python's (C's fmod,
    the divisor's sign): 1.0 % 0.1 = 0.09999999999999995, -7.5 % 2.0 = 0.5, 7.5 % -2.0 = -0.5."""
    data = [Floats("x", 1.0, 0.1), Floats("y", -7.5, 2.0), Floats("z", 7.5, -2.0)]
    s = Stream.create("f", [*(Point(T(i + 1), p) for i, p in enumerate(data)), Cti(T(10))], EventShape.POINT)
    floor = run(executor, s.select(lambda r: Ratio(r.name, r.a // r.b)))
    assert sorted((e.payload.name, e.payload.q) for e in floor.events) == [("x", 10.0), ("y", -4.0), ("z", -4.0)]
    rem = run(executor, s.select(lambda r: Ratio(r.name, r.a % r.b)))
    assert sorted((e.payload.name, e.payload.q) for e in rem.events) == [("x", 0.09999999999999995), ("y", 0.5), ("z", -0.5)]


# ---- integers are 64-bit --------------------------------------------------------------------


@pytest.mark.parametrize(
    "make, expression",
    [
        (lambda s: s.select(lambda r: Num(r.name, r.v * 2)), "(r.v * 2)"),
        (lambda s: s.select(lambda r: Num(r.name, r.v + r.v)), "(r.v + r.v)"),
        (lambda s: s.select(lambda r: Num(r.name, -r.v - r.v - r.v)), "((-(r.v) - r.v) - r.v)"),
    ],
    ids=["mul", "add", "sub"],
)
def test_integer_overflow_in_an_expression_is_an_evaluation_error(executor: Any, make: Any, expression: str) -> None:
    """v = 2**62: 2**63 is one past the largest 64-bit integer, and -3·2**62 below the least."""
    with pytest.raises(EvaluationError) as raised:
        executor.run(make(numbers(1, BIG)))
    assert raised.value.rule is EvaluationRule.INTEGER_OVERFLOW
    assert raised.value.expression == expression


def test_integers_at_the_limits_are_exact(executor: Any) -> None:
    """2**62 + (2**62 - 1) = 2**63 - 1 fits exactly; so does -(2**63 - 1) - 1 = -2**63."""
    s = numbers(BIG - 1)
    top = run(executor, s.select(lambda r: Num(r.name, r.v + (r.v + 1))))
    assert [e.payload.v for e in top.events] == [2**63 - 1]
    low = run(executor, numbers(2**63 - 1).select(lambda r: Num(r.name, -r.v - 1)))
    assert [e.payload.v for e in low.events] == [-(2**63)]


def window_sums(s: Stream[Num]) -> Stream[Sums]:
    return s.tumbling(timedelta(minutes=1)).aggregate(lambda w: Sums(n=w.count(), total=w.sum(lambda r: r.v), mean=w.avg(lambda r: r.v)))


def test_a_sum_past_64_bits_is_an_evaluation_error_naming_the_aggregate(executor: Any) -> None:
    """20 values of 2**62 in the window [0, 60): their sum 5·2**64 does not fit 64 bits."""
    with pytest.raises(EvaluationError) as raised:
        executor.run(window_sums(numbers(*[BIG] * 20)))
    assert raised.value.rule is EvaluationRule.INTEGER_OVERFLOW
    assert raised.value.expression == "w.sum(r.v)"


def test_a_withheld_result_is_computed_as_a_flush_would_compute_it(executor: Any) -> None:
    """2**62 at 1 s and 2**62 at 2 s, with no CTI at all: nothing is released, but counting
    what a flush would release (``Result.withheld``) computes the window [0, 60) whose sum
    2**63 does not fit 64 bits: every executor raises. Below 64 bits (2**62 and 1) the run
    gives no events and counts one withheld result from 0 s."""

    def unflushed(*values: int) -> Stream[Sums]:
        items = [Point(T(i + 1), Num(f"v{i}", v)) for i, v in enumerate(values)]
        return window_sums(Stream.create("numbers", items, EventShape.POINT))

    with pytest.raises(EvaluationError) as raised:
        executor.run(unflushed(BIG, BIG))
    assert raised.value.expression == "w.sum(r.v)"
    with pytest.warns(tempo.UnreleasedResultsWarning):
        result = executor.run(unflushed(BIG, 1))
    assert result.events == [] and result.withheld == tempo.Withheld(1, T(0))


def test_bad_input_is_the_error_of_a_run_that_also_overflows(executor: Any) -> None:
    """v0 = 2**62 at 1 s overflows in v * 2 when it is selected; the third item, a point at
    0 s after the CTI at 5 s, breaks the input's rule (no settings: a CTI violation is an
    error). A batch executor checks its inputs before it computes: the run's error is the
    CtiViolationError naming item #2, on every executor."""
    items: list[Any] = [Point(T(1), Num("v0", BIG)), Cti(T(5)), Point(T(0), Num("v1", 1))]
    query = Stream.create("numbers", items, EventShape.POINT).select(lambda r: Num(r.name, r.v * 2))
    with pytest.raises(tempo.CtiViolationError) as raised:
        executor.run(query)
    assert raised.value.position == 2


@attrs.frozen
class Widened:
    name: str
    x: float
    top: float | None
    flag: int


def test_an_integer_in_a_float_field_is_a_float(executor: Any) -> None:
    """A record's field holds the type it declares: v0 = 3 put in a float field is 3.0 and
    True in an int field is 1 (not the int 3, nor True, which compare equal but print
    otherwise), in a select and in a window's result (max of the ints 3 and 2**53 + 1 is
    2**53 + 1, as a float 2**53)."""
    selected = run(executor, numbers(3).select(lambda r: Widened(r.name, r.v, r.v, r.v > 0)))
    assert [repr(e.payload) for e in selected.events] == ["Widened(name='v0', x=3.0, top=3.0, flag=1)"]
    windowed = run(
        executor,
        numbers(3, 2**53 + 1)
        .tumbling(timedelta(minutes=1))
        .aggregate(lambda w: Widened("w", w.count(), w.max(lambda r: r.v), w.count() > 1)),
    )
    assert [repr(e.payload) for e in windowed.events] == ["Widened(name='w', x=2.0, top=9007199254740992.0, flag=1)"]


@attrs.frozen
class Quartiles:
    q1: int | None
    q2: int | None
    q3: int | None
    q4: int | None


def test_percentile_approx_ranks_integers_as_doubles(executor: Any) -> None:
    """Values 5, 2**53 + 1, 2**62 + 1 and 2**63 - 1 in the window [0, 60). percentile_approx
    ranks values as doubles, as Spark's summary holds them: the values of rank 1, 2, 3 and 4
    (fractions 0.25 to 1) are 5, then 2**53 + 1 and 2**62 + 1 made doubles (2**53 and 2**62)
    and back, and 2**63 - 1, whose double 2**63 comes back as the largest long."""
    result = run(
        executor,
        numbers(5, 2**53 + 1, 2**62 + 1, 2**63 - 1)
        .tumbling(timedelta(minutes=1))
        .aggregate(lambda w: Quartiles(*(w.percentile_approx(lambda r: r.v, f) for f in (0.25, 0.5, 0.75, 1.0)))),
    )
    assert [e.payload for e in result.events] == [Quartiles(5, 2**53, 2**62, 2**63 - 1)]


def test_integer_sums_add_exactly_whatever_the_order(executor: Any) -> None:
    """2**62 + 2**62 - 2**62 - 2**62 + 5 = 5, though the first two already pass 2**63: only
    the window's sum must fit. In the next window [60, 120), 2**62 - 1 and 2**62 sum to
    2**63 - 1, which fits, and average the exact total made a float, over 2."""
    items: list[Any] = [Point(T(i + 1), Num(f"v{i}", v)) for i, v in enumerate([BIG, BIG, -BIG, -BIG, 5])]
    items += [Point(T(61), Num("x", BIG - 1)), Point(T(62), Num("y", BIG)), Cti(T(200))]
    r = run(executor, window_sums(Stream.create("numbers", items, EventShape.POINT)))
    assert [(e.start, e.payload) for e in r.events] == [
        (T(0), Sums(n=5, total=5, mean=1.0)),
        (T(60), Sums(n=2, total=2**63 - 1, mean=float(2**63 - 1) / 2)),
    ]


# ---- floats: one total order, keys as Spark groups them ------------------------------------


def readings(*keys: float) -> Stream[Reading]:
    items: list[Any] = [Point(T(i + 1), Reading(f"r{i}", k)) for i, k in enumerate(keys)]
    return Stream.create("readings", [*items, Cti(T(100))], EventShape.POINT)


def test_nan_and_negative_zero_keys_group_as_spark_groups_them(executor: Any) -> None:
    """Keys NaN, -0.0, NaN, 0.0, 1.0, NaN: three groups, NaN (3 events), 0.0 (2: -0.0 is 0.0,
    shown as 0.0) and 1.0 (1)."""
    q = (
        readings(NAN, -0.0, NAN, 0.0, 1.0, NAN)
        .group_by(lambda r: r.k)
        .tumbling(timedelta(minutes=1))
        .aggregate(lambda k, w: Grouped(k=k, n=w.count()))
    )
    events = run(executor, q).events
    got = sorted((("nan" if math.isnan(e.payload.k) else repr(e.payload.k)), e.payload.n) for e in events)
    assert got == [("0.0", 2), ("1.0", 1), ("nan", 3)]  # repr: 0.0, not -0.0


def test_nan_and_negative_zero_keys_join_as_spark_joins_them(executor: Any) -> None:
    """Left keys NaN (l0), -0.0 (l1), 2.0 (l2); right NaN (r0), 0.0 (r1), 3.0 (r2), all
    points at the same second: l0-r0 and l1-r1 match, the others meet nothing."""

    def side(name: str, keys: list[float]) -> Stream[Reading]:
        items: list[Any] = [Point(T(1), Reading(f"{name}{i}", k)) for i, k in enumerate(keys)]
        return Stream.create(name, [*items, Cti(T(10))], EventShape.POINT)

    q = side("l", [NAN, -0.0, 2.0]).join(side("r", [NAN, 0.0, 3.0]), lambda a, b: a.k == b.k, lambda a, b: Joined(a.name, b.name))
    assert sorted((e.payload.left, e.payload.right) for e in run(executor, q).events) == [("l0", "r0"), ("l1", "r1")]


def test_floats_compare_in_one_total_order(executor: Any) -> None:
    """NaN equals NaN and is greater than every number: of a=NaN, b=1.0, c=-inf, d=inf,
    ``k > 1.0`` keeps a and d, ``k == k`` keeps all four, ``k >= inf`` keeps a and d,
    ``k < NaN`` keeps b, c and d."""
    s = readings(NAN, 1.0, -math.inf, math.inf)

    def kept(predicate: Any) -> list[str]:
        return sorted(e.payload.name for e in run(executor, s.where(predicate)).events)

    assert kept(lambda r: r.k > 1.0) == ["r0", "r3"]
    assert kept(lambda r: r.k == r.k) == ["r0", "r1", "r2", "r3"]
    assert kept(lambda r: r.k >= math.inf) == ["r0", "r3"]
    assert kept(lambda r: r.k < tempo.lit(NAN)) == ["r1", "r2", "r3"]


@attrs.frozen
class Mixed:
    name: str
    i: int
    f: float


def test_an_integer_meets_a_float_as_a_float(executor: Any) -> None:
    """i = 2**53 + 1 against f = 2.0**53: as floats both are 2**53 (the integer rounds to it),
    so ``i > f`` is false and ``i == f`` true on every executor, as Spark and polars compare
    (Python alone compares the exact values)."""
    s = Stream.create("m", [Point(T(1), Mixed("x", 2**53 + 1, 2.0**53)), Cti(T(10))], EventShape.POINT)
    assert run(executor, s.where(lambda r: r.i > r.f)).events == []
    assert [e.payload.name for e in run(executor, s.where(lambda r: r.i == r.f)).events] == ["x"]
