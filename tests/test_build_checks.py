"""What the plan can know is refused when the query is built, by the operator call that makes
the mistake, with words that say what is wrong and the form to write (issue 30): two
different inputs of one name, streams of two notions of time meeting, and lambdas taking
another number of arguments than the operator passes."""

from __future__ import annotations

import decimal  # noqa: F401 - the annotations below name it
import re
from datetime import datetime, timedelta

import attrs
import pytest

from tempo import EventShape, IngestionTime, Point, QueryBuildError, Stream


@attrs.frozen
class R:
    k: int
    v: int


@attrs.frozen
class Out:
    k: int
    n: int


T0 = datetime(2024, 1, 1)


def stream(name: str, **kw: object) -> Stream[R]:
    return Stream.create(name, [Point(T0, R(1, 1))], EventShape.POINT, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("operator", ["union", "join", "anti_join", "followed_by"])
def test_two_different_inputs_of_one_name_are_refused_by_the_operator(operator: str) -> None:
    a, b = stream("x"), stream("x")
    calls = {
        "union": lambda: a.union(b),
        "join": lambda: a.join(b, lambda l, r: l.k == r.k, lambda l, r: Out(l.k, r.v)),
        "anti_join": lambda: a.anti_join(b, lambda l, r: l.k == r.k),
        "followed_by": lambda: a.followed_by(b, lambda l, r: l.k == r.k, timedelta(seconds=5), lambda l, r: Out(l.k, r.v)),
    }
    with pytest.raises(QueryBuildError, match=f"^{operator} brings together two different inputs named 'x': input names must be unique"):
        calls[operator]()


def test_one_input_used_twice_is_no_duplicate() -> None:
    a = stream("x")
    joined = a.join(a.shift_event_time(timedelta(seconds=1)), lambda l, r: l.k == r.k, lambda l, r: Out(l.k, r.v))
    assert joined.union(joined).node is not None


def test_a_duplicate_deeper_in_the_plan_is_found_too() -> None:
    left = stream("x").union(stream("y"))
    with pytest.raises(QueryBuildError, match="two different inputs named 'y'"):
        left.join(stream("y"), lambda l, r: l.k == r.k, lambda l, r: Out(l.k, r.v))


def test_streams_of_two_notions_of_time_are_refused_by_the_operator() -> None:
    left = stream("a").union(stream("b"))
    with pytest.raises(
        QueryBuildError,
        match=r"^anti_join brings together a stream in event time and one in ingestion time \(inputs 'a', 'b' and input 'c'\)",
    ):
        left.anti_join(stream("c", time=IngestionTime()), lambda l, r: l.k == r.k)


@pytest.mark.parametrize(
    "build, words",
    [
        (
            lambda s: s.group_by(lambda r: r.k).tumbling(timedelta(minutes=1)).aggregate(lambda w: Out(0, w.count())),
            r"^a grouped aggregate takes \(key, w\), as in lambda key, w: \.\.\.; the function given for the aggregate\(\) projection takes \(w\)",
        ),
        (
            lambda s: s.tumbling(timedelta(minutes=1)).aggregate(lambda k, w: Out(k, w.count())),
            r"^an aggregate without group_by takes \(w\) alone",
        ),
        (lambda s: s.where(lambda r, q: r.k > 1), r"^the where\(\) predicate takes \(event\)"),
        (lambda s: s.join(stream("y"), lambda l: l.k == 1, lambda l, r: Out(l.k, r.v)), r"^the join on= predicate takes \(left, right\)"),
        (lambda s: s.analytic(lambda a: Out(0, a.count())), r"^an analytic without group_by takes \(event, a\)"),
        (lambda s: s.group_by(lambda r: r.k).analytic(lambda r, a: Out(0, a.count())), r"^a grouped analytic takes \(key, event, a\)"),
        (lambda s: s.tumbling(timedelta(minutes=1)).top_k(2, lambda r: r.v, lambda r: r), r"^the top_k select= takes \(event, rank\)"),
        (lambda s: s.group_by(lambda r: r.k).apply(lambda g: g, lambda r: r), r"^the apply\(\) select= takes \(key, result\)"),
        (
            lambda s: s.left_outer_join(stream("y"), lambda l, r: l.k == r.k, lambda l: Out(l.k, 0), R(0, 0)),
            r"^the left_outer_join select= takes \(left, right\)",
        ),
        (
            lambda s: s.left_outer_join(
                stream("y"), lambda l, r: l.k == r.k, lambda l, r: Out(l.k, r.v), unmatched=lambda l, r: Out(l.k, 0)
            ),
            r"^the left_outer_join unmatched= takes \(left\), as in lambda left: \.\.\.",
        ),
    ],
    ids=[
        "grouped-aggregate",
        "aggregate",
        "where",
        "join-on",
        "analytic",
        "grouped-analytic",
        "top_k-select",
        "apply-select",
        "left_outer_join-select",
        "left_outer_join-unmatched",
    ],
)
def test_a_lambda_of_the_wrong_arity_is_told_the_form_to_write(build: object, words: str) -> None:
    with pytest.raises(QueryBuildError, match=words):
        build(stream("x"))  # type: ignore[operator]


def test_the_embedded_default_is_importable_from_tempo() -> None:
    """README's executor table names ``EmbeddedExecutor``: a user imports it from ``tempo``."""
    from tempo import EmbeddedExecutor, InMemoryExecutor

    result = EmbeddedExecutor().run(stream("x").where(lambda r: r.v > 0))
    assert result.events == InMemoryExecutor().run(stream("x").where(lambda r: r.v > 0)).events


@pytest.mark.parametrize(
    "annotation, shown",
    [
        ("decimal.Decimal", "Decimal"),
        ("dict[str, int]", "dict[str, int]"),
        ("frozenset[int]", "frozenset[int]"),
        ("set[str] | None", "set[str]"),
        ("list[decimal.Decimal]", "Decimal"),
        ("bytes", "bytes"),
    ],
)
def test_a_payload_field_no_executor_holds_is_refused_when_the_query_is_built(annotation: str, shown: str) -> None:
    """Such a field ran in memory and failed later on the vectorised executor and Spark
    ("type 'object'", without the field's name): now Stream.create refuses it on every
    executor, naming the class, the field, its type and what to use."""
    namespace: dict[str, object] = {"attrs": attrs, "__name__": __name__}  # annotations resolve in this module
    exec(f"@attrs.frozen\nclass Odd:\n    name: str\n    x: {annotation}\n", namespace)
    odd = namespace["Odd"]
    with pytest.raises(
        QueryBuildError, match=rf"^payload field Odd\.x is typed {re.escape(shown)}, which tempo's executors do not all hold.*; use "
    ):
        Stream.create("odd", [], EventShape.POINT, payload_type=odd)  # type: ignore[call-overload]
    with pytest.raises(QueryBuildError, match=r"^payload field Odd\.x is typed"):  # an operator's output record too
        stream("x").select(lambda r: odd(name="a", x=None))  # type: ignore[operator]


def test_result_rejections_names_the_attribute_that_holds_them() -> None:
    """The docs speak of a run's "rejections" (and ``rejections_table()``); the list is
    ``Result.rejected``, and ``result.rejections`` says so rather than a bare AttributeError."""
    from tempo import InMemoryExecutor

    result = InMemoryExecutor().run(stream("x"))
    with pytest.raises(AttributeError, match=r"no attribute 'rejections': the dropped and adjusted input events are result\.rejected"):
        result.rejections  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError, match=r"no attribute 'evnts'"):
        result.evnts  # type: ignore[attr-defined]  # noqa: B018
    assert result.rejected == [] and not hasattr(result, "rejections")
