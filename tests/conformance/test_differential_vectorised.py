"""Differential tests of the vectorised executor: random inputs and query graphs
(``tests/strategies.py``) run on the in-memory executor (the reference) and on the
vectorised executor give the same results (``assert_executors_agree``): released events,
output CTIs, metrics and rejections, or the same error.

The vectorised executor is being built up (issue 15): queries with a node it has no rule
for yet are rejected from the draw (Hypothesis' ``reject``), and the share of drawn queries
it runs is asserted, so that a rule lost shows as a failure, not as fewer examples.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, reject, settings

from tempo import InMemoryExecutor, UnsupportedError
from tempo.plan.query import Query
from tests.conformance.compare import assert_executors_agree
from tests.strategies import Builder, queries
from tests.budget import examples

polars = pytest.importorskip("polars")

EXAMPLES = int(os.environ.get("TEMPO_VECTORISED_EXAMPLES", str(examples(300))))

VECTORISED = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def agree(query: tuple[str, Builder]) -> None:
    from tempo.vectorised import VectorisedExecutor
    from tempo.vectorised.compiler import check_supported

    desc, build = query
    try:
        check_supported(Query.build(build(None).node))
    except UnsupportedError:
        reject()
    except Exception:
        pass  # a query that fails to build fails alike on both executors, below
    assert_executors_agree(InMemoryExecutor(), VectorisedExecutor(), desc, lambda: build(None))


@VECTORISED
@given(query=queries(errors=True, min_events=1))
def test_vectorised_agrees(query: tuple[str, Builder]) -> None:
    agree(query)


@settings(VECTORISED, max_examples=max(1, EXAMPLES // 3))
@given(query=queries(errors=True, min_events=1, keyed=True))
def test_vectorised_agrees_on_per_key_progress(query: tuple[str, Builder]) -> None:
    agree(query)


@settings(VECTORISED, max_examples=int(os.environ.get("TEMPO_EDGE_EXAMPLES", str(EXAMPLES))))
@given(query=queries(errors=True, min_events=1, edges=True))
def test_vectorised_agrees_on_edge_values(query: tuple[str, Builder]) -> None:
    """The random query graphs over keys and values at the edges of 64 bits and times at the
    epoch and the ends of the calendar (``queries(edges=True)``)."""
    agree(query)
