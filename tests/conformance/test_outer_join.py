"""``left_outer_join`` (docs/semantics.md 5.9.1) on every executor: the inner join's pairs and
the unmatched parts of each left lifetime, the right side standing in as ``default``.
Expectations written by hand from 5.9.1."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from tempo import Cti, EventShape, Interval, QueryBuildError, Stream
from tests.conformance.test_operators import A, L, R, T, iv, run
from tests.conformance.test_window_kinds import check, check_raw_steps


@attrs.frozen
class Out:
    id: int
    a: str
    b: str


NOBODY = R(-1, "-")


def outer(left: Stream[L], right: Stream[R]) -> Stream[Out]:
    return left.left_outer_join(right, on=lambda l, r: l.id == r.id, select=lambda l, r: Out(id=l.id, a=l.a, b=r.b), default=NOBODY)


def test_matched_pairs_and_unmatched_parts(executor: Any) -> None:
    """
    ::

                     0    5    10   15   20
        left a        [========)            a (id 1) [1, 10)
        left c         [=)                  c (id 2) [2, 4): no right has id 2
        right r          [=)                r (id 1) [3, 5)
        right s                [====)       s (id 1) [7, 12)
        CTIs (both)            ^         ^  6 (left, then right), 20

        out (a, r) [3, 5); (a, -) [1, 3); (c, -) [2, 4): released by CTI 6
        out (a, -) [5, 7): at CTI 6 nothing covers it yet, so it goes out as a start edge at 5,
                    ended at 7 once s (starting at 7, after CTI 6) is known at CTI 20
        out (a, s) [7, 10): released by CTI 20
    """
    a, c = L(1, "a"), L(2, "c")
    r, s = R(1, "r"), R(1, "s")
    left = Stream.create(
        "left",
        [
            Interval(T(1), T(10), a, arrival=A(1)),
            Interval(T(2), T(4), c, arrival=A(2)),
            Cti(T(6), arrival=A(3)),
            Cti(T(20), arrival=A(7)),
        ],
        EventShape.INTERVAL,
    )
    right = Stream.create(
        "right",
        [
            Interval(T(3), T(5), r, arrival=A(4)),
            Cti(T(6), arrival=A(5)),
            Interval(T(7), T(12), s, arrival=A(6)),
            Cti(T(20), arrival=A(8)),
        ],
        EventShape.INTERVAL,
    )
    result = run(executor, outer(left, right))
    check(
        result,
        [
            (T(6), [iv(3, 5, Out(1, "a", "r")), iv(1, 3, Out(1, "a", "-")), iv(2, 4, Out(2, "c", "-")), iv(5, 7, Out(1, "a", "-"))]),
            (T(20), [iv(7, 10, Out(1, "a", "s"))]),
        ],
    )
    check_raw_steps(
        executor,
        result,
        [
            (
                [
                    ("interval", T(3), T(5), Out(1, "a", "r")),
                    ("interval", T(1), T(3), Out(1, "a", "-")),
                    ("interval", T(2), T(4), Out(2, "c", "-")),
                    ("start", T(5), Out(1, "a", "-")),
                ],
                T(6),
            ),
            ([("end", T(5), T(7), Out(1, "a", "-")), ("interval", T(7), T(10), Out(1, "a", "s"))], T(20)),
        ],
    )


def test_a_left_never_matched_is_whole_and_a_right_alone_gives_nothing(executor: Any) -> None:
    """left c [2, 4) (id 2); right r [1, 9) (id 1): no pair; c whole with the default; r alone
    gives nothing (a left outer join keeps the left side only)."""
    left = Stream.create("left", [Interval(T(2), T(4), L(2, "c")), Cti(T(10))], EventShape.INTERVAL)
    right = Stream.create("right", [Interval(T(1), T(9), R(1, "r")), Cti(T(10))], EventShape.INTERVAL)
    check(run(executor, outer(left, right)), [(T(10), [iv(2, 4, Out(2, "c", "-"))])])


@attrs.frozen
class Maybe:
    id: int
    b: str | None


def test_unmatched_projects_the_left_alone(executor: Any) -> None:
    """Trill's outer selector: a null where the right side's field is not optional. Left a
    [1, 6) (id 1), right r [3, 4): (a, r) [3, 4); (a, None) [1, 3) and [4, 6)."""
    left = Stream.create("left", [Interval(T(1), T(6), L(1, "a")), Cti(T(10))], EventShape.INTERVAL)
    right = Stream.create("right", [Interval(T(3), T(4), R(1, "r")), Cti(T(10))], EventShape.INTERVAL)
    q = left.left_outer_join(
        right, on=lambda l, r: l.id == r.id, select=lambda l, r: Maybe(id=l.id, b=r.b), unmatched=lambda l: Maybe(id=l.id, b=None)
    )
    check(run(executor, q), [(T(10), [iv(3, 4, Maybe(1, "r")), iv(1, 3, Maybe(1, None)), iv(4, 6, Maybe(1, None))])])


def test_default_or_unmatched_and_their_types() -> None:
    left = Stream.create("left", [Cti(T(1))], EventShape.INTERVAL, payload_type=L)
    right = Stream.create("right", [Cti(T(1))], EventShape.INTERVAL, payload_type=R)

    def select(l: L, r: R) -> Out:
        return Out(id=l.id, a=l.a, b=r.b)

    on = lambda l, r: l.id == r.id  # noqa: E731
    with pytest.raises(QueryBuildError, match="must be a R, the right side's payload type"):
        left.left_outer_join(right, on, select, default=L(1, "x"))  # type: ignore[misc]
    with pytest.raises(QueryBuildError, match="either default= .* or unmatched="):
        left.left_outer_join(right, on, select)
    with pytest.raises(QueryBuildError, match="not both or neither"):
        left.left_outer_join(right, on, select, NOBODY, unmatched=lambda l: Out(id=l.id, a=l.a, b="-"))
    with pytest.raises(QueryBuildError, match="unmatched= gives Maybe but select= gives Out"):
        left.left_outer_join(right, on, select, unmatched=lambda l: Maybe(id=l.id, b=None))
