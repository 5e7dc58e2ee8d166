"""Differential tests: random inputs and random small query graphs run on the in-memory
executor (the reference) and on the Spark executor must give the same results.

Same results means the same released events (as a multiset), output CTIs, metrics and
rejections (as a multiset), or the same TempoError type when a run fails
(``tests/conformance/compare.py``). Inputs and queries come from ``tests/strategies.py``:
disorder, ties, edges, intervals, explicit CTIs, CTI generation by count and by time span,
CTI imports between two inputs (with arrival times), inputs stamped in ingestion or
processing time, few and many keys, bad input items, and joins, anti-joins, unions, windows of
every kind and result timestamp, and analytics in time order, combined.

Examples are derandomized (the same every run); ``TEMPO_DIFF_EXAMPLES`` sets how many are
drawn in all (default 40: each Spark run takes ~0.3-1 s). The same harness runs without Spark in
``test_differential_harness.py``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from tempo import InMemoryExecutor
from tests.conformance.compare import assert_executors_agree
from tests.strategies import Builder, queries
from tests.budget import examples

pytestmark = [
    pytest.mark.spark,
    # the first Spark run raises the interpreter's recursion limit, which Hypothesis notes
    pytest.mark.filterwarnings("ignore:The recursion limit will not be reset:hypothesis.errors.HypothesisWarning"),
]

EXAMPLES = int(os.environ.get("TEMPO_DIFF_EXAMPLES", str(examples(40))))

DIFFERENTIAL = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


ONE_INPUT = max(1, EXAMPLES // 4)


@settings(DIFFERENTIAL, max_examples=ONE_INPUT)
@given(query=queries(errors=True, inputs=1, min_events=1))
def test_spark_agrees_on_one_input(spark_session: Any, query: tuple[str, Builder]) -> None:
    """A quarter of the examples: one input through one or two unary operators."""
    agree(spark_session, query)


@settings(DIFFERENTIAL, max_examples=max(1, EXAMPLES - ONE_INPUT))
@given(query=queries(errors=True, inputs=2, min_events=1))
def test_spark_agrees_on_two_inputs(spark_session: Any, query: tuple[str, Builder]) -> None:
    """The rest: two inputs (maybe linked by a CTI import) into a binary query graph."""
    agree(spark_session, query)


def agree(spark_session: Any, query: tuple[str, Builder]) -> None:
    from tempo.spark import SparkExecutor

    desc, build = query
    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session), desc, lambda: build(None))


@settings(DIFFERENTIAL, max_examples=max(1, EXAMPLES // 2))
@given(query=queries(errors=True, inputs=2, min_events=1))
def test_spark_ingress_agrees(spark_session: Any, query: tuple[str, Builder]) -> None:
    """Item lists admitted by the Spark ingress itself (``local_items=0``), as tables are:
    positions, CTI candidates, rows at risk and verdicts, in blocks of three rows so that
    every input spans several."""
    from tempo.spark import SparkExecutor, ingress

    desc, build = query
    saved, ingress.BLOCK_ROWS = ingress.BLOCK_ROWS, 3
    try:
        assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session, local_items=0), desc, lambda: build(None))
    finally:
        ingress.BLOCK_ROWS = saved


@settings(DIFFERENTIAL, max_examples=max(1, EXAMPLES // 2))
@given(query=queries(errors=True, min_events=1, keyed=True))
def test_spark_agrees_on_per_key_progress(spark_session: Any, query: tuple[str, Builder]) -> None:
    """Every input split into substreams by key: operators that keep the key (where, select,
    shifts, windows grouped by it, joins and unions on it) release each key's results on
    its own CTIs. Spark computes the results in bulk and must release them at the same
    CTIs, input's or key's (``release_steps``), half on each Spark ingress path."""
    agree_on_either_ingress(spark_session, query)


def agree_on_either_ingress(spark_session: Any, query: tuple[str, Builder]) -> None:
    """``agree``, with a fixed half of the examples (by their description: draws are
    derandomized) admitted by the Spark ingress itself, in blocks of three rows."""
    from tempo.spark import SparkExecutor, ingress

    desc, build = query
    saved = ingress.BLOCK_ROWS
    on_ingress = len(desc) % 2 == 0
    if on_ingress:
        ingress.BLOCK_ROWS = 3
    try:
        spark = SparkExecutor(spark_session, local_items=0) if on_ingress else SparkExecutor(spark_session)
        assert_executors_agree(InMemoryExecutor(), spark, desc, lambda: build(None))
    finally:
        ingress.BLOCK_ROWS = saved


EDGE_EXAMPLES = int(os.environ.get("TEMPO_EDGE_EXAMPLES", str(max(1, EXAMPLES // 4))))


@settings(DIFFERENTIAL, max_examples=EDGE_EXAMPLES)
@given(query=queries(errors=True, min_events=1, edges=True))
def test_spark_agrees_on_edge_values(spark_session: Any, query: tuple[str, Builder]) -> None:
    """The random query graphs over keys and values at the edges of 64 bits and times at the
    epoch and the ends of the calendar (``queries(edges=True)``), half on each Spark ingress
    path: the same results, or the same error (an ``EvaluationError`` where an integer
    leaves 64 bits). ``TEMPO_EDGE_EXAMPLES`` sets how many."""
    agree_on_either_ingress(spark_session, query)
