"""The value fuzz: random queries over edge values (``tests/value_strategies.py``) give the same
outcome on every executor pair, with a failure budget of zero: the same released events (their
payloads compared by repr, the sign of a zero aside: docs/semantics.md 7.4), CTIs and metrics,
or the same tempo error type (an ``EvaluationError`` where a division by zero or a 64-bit
overflow is met). ``TEMPO_VALUE_EXAMPLES`` sets the examples per pair (150 with ``--run-slow``,
``tests/budget.py``'s share of them by default); the closing note of issue 30 gives the
counts of the long run."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tempo import InMemoryExecutor, Stream
from tests.conformance.compare import Outcome, outcome
from tests.value_strategies import canonical, value_queries
from tests.budget import examples

EXAMPLES = int(os.environ.get("TEMPO_VALUE_EXAMPLES", str(examples(150))))

FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def summary(result: Outcome) -> Any:
    if isinstance(result, Exception):
        return type(result).__name__
    events = sorted((e.start, e.end, canonical(repr(e.payload))) for e in result.events)
    return events, result.ctis, result.metrics, result.withheld


def agree(reference: Any, other: Any, query: tuple[str, Callable[[], Stream[Any]]]) -> None:
    desc, build = query
    expected, got = summary(outcome(reference, build)), summary(outcome(other, build))
    assert expected == got, f"{type(reference).__name__} and {type(other).__name__} differ on {desc}:\n  {expected}\n  {got}"


@FUZZ
@given(query=value_queries())
def test_the_vectorised_executor_agrees_on_edge_values(query: tuple[str, Callable[[], Stream[Any]]]) -> None:
    pytest.importorskip("polars")
    from tempo.vectorised import VectorisedExecutor

    agree(InMemoryExecutor(), VectorisedExecutor(), query)


@pytest.mark.spark
@settings(FUZZ, max_examples=max(1, EXAMPLES // 3))
@given(query=value_queries())
def test_spark_agrees_on_edge_values(spark_session: Any, query: tuple[str, Callable[[], Stream[Any]]]) -> None:
    from tempo.spark import SparkExecutor

    agree(InMemoryExecutor(), SparkExecutor(spark_session), query)
