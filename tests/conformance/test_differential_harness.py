"""The differential harness of ``test_differential.py`` without Spark, in every test run:
the same strategies against a second in-memory executor (which must always agree), and the
comparison itself (which must tolerate order and catch every difference)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings

from tempo import (
    Action,
    CtiViolationError,
    InMemoryExecutor,
    InputError,
    InputMetrics,
    OutputEvent,
    Rejection,
    Result,
    Rule,
)
from tempo.rules import InputRule
from tests.conformance.compare import Outcome, assert_executors_agree, assert_same_outcome, outcome
from tests.conformance.test_differential import DIFFERENTIAL
from tests.strategies import Builder, queries


@settings(DIFFERENTIAL, max_examples=200)
@given(query=queries(errors=True))
def test_in_memory_agrees_with_itself(query: tuple[str, Builder]) -> None:
    desc, build = query
    assert_executors_agree(InMemoryExecutor(), InMemoryExecutor(), desc, lambda: build(None))


@settings(DIFFERENTIAL, max_examples=300)
@given(query=queries(errors=True))
def test_strategy_errors_are_input_errors(query: tuple[str, Builder]) -> None:
    """The failing cases the strategy draws fail with an InputError (or a subclass), never
    with another exception: a differential failure then means the executors differ."""
    _, build = query
    o = outcome(InMemoryExecutor(), lambda: build(None))
    assert isinstance(o, (Result, InputError)), repr(o)


def _result(events: list[OutputEvent[Any]], rejected: list[Rejection] | None = None) -> Result[Any]:
    return Result(
        events=events,
        ctis=[datetime(2024, 1, 1, 0, 1)],
        metrics={"in": InputMetrics(received=len(events), admitted=len(events))},
        rejected=rejected or [],
        raw=[],
    )


def test_comparison_tolerates_order_but_not_differences() -> None:
    t = [datetime(2024, 1, 1, 0, 0, s) for s in range(4)]
    e1, e2 = OutputEvent(t[0], t[1], "a"), OutputEvent(t[2], t[3], "b")
    j1 = Rejection("in", 1, "x", Rule.START_BEFORE_CTI, Action.DROPPED, t[1])
    j2 = Rejection("in", 2, "y", Rule.START_BEFORE_CTI, Action.DROPPED, t[1])
    same: list[tuple[Outcome, Outcome]] = [
        (_result([e1, e2], [j1, j2]), _result([e2, e1], [j2, j1])),
        (CtiViolationError("in", 1, "x", "r", Rule.START_BEFORE_CTI), CtiViolationError("in", 2, "y", "other words", Rule.END_BEFORE_CTI)),
    ]
    for a, b in same:
        assert_same_outcome(a, b)
    different: list[tuple[Outcome, Outcome]] = [
        (_result([e1, e2]), _result([e1, e1])),
        (_result([e1]), _result([OutputEvent(t[0], t[2], "a")])),
        (_result([e1]), _result([OutputEvent(t[0], t[1], "a ")])),
        (_result([], [j1]), _result([], [j2])),
        (_result([e1]), Result([e1], [t[1]], {"in": InputMetrics(1, 1)}, [], [])),
        (_result([e1]), Result([e1], _result([e1]).ctis, {"in": InputMetrics(1, 0, dropped=1)}, [], [])),
        (CtiViolationError("in", 1, "x", "r", Rule.START_BEFORE_CTI), InputError("in", 1, "x", "r", InputRule.LIFETIME)),
        (_result([]), InputError("in", 1, "x", "r", InputRule.LIFETIME)),
    ]
    for a, b in different:
        with pytest.raises(AssertionError):
            assert_same_outcome(a, b)
