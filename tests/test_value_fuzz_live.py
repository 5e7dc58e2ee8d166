"""The value fuzz on the live engines: random queries over edge values (NaN, ±0.0, ±inf, the
extreme floats and 64-bit integers, nulls in every field, long and unicode strings, many events
at one time, times at both ends of the calendar) give what the in-memory executor gives, with a
failure budget of zero.

- The live engine item by item (``LiveEngine``): the queries of ``tests/value_strategies.py``
  over their items handed over in random batches, the state sometimes saved and restored into
  a plan built anew (pickled, with its NaN keys, huge integers and unicode strings). What it
  released, in order, is ``Result.raw`` of the in-memory run, or both raise the same tempo
  error (an ``EvaluationError`` where a division by zero or a 64-bit overflow is met).
- The bulk engines (a batch computed whole, then applied to the same engine state): window
  aggregates keyed by float, string, bool and int fields, below them where, select, union and
  a join, over tables of edge values cut into random batches, each batch in bulk or item by
  item as drawn, beside an engine taking every batch item by item (``_lockstep`` of
  ``tests/test_bulk_engine.py``): after every batch both hold the same state, and at the end
  the release is the in-memory run's. Here on the polars batch engine;
  ``tests/streaming/test_value_fuzz_spark.py`` runs the same tables on Spark's bulk engine,
  and through live Spark queries taking turns between it and the driver.

``TEMPO_VALUE_EXAMPLES`` sets the examples (default 100 each); the closing note of issue 30
gives the counts of the long run.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import InMemoryExecutor, Stream, TempoError
from tempo.plan.query import Query
from tempo.runtime.bulk import BulkShape
from tempo.runtime.engine import prepared_inputs
from tempo.runtime.ingress import TimestampMode
from tempo.runtime.live import LiveEngine
from tests.test_bulk_engine import _lockstep
from tests.value_strategies import canonical, value_queries, value_tables
from tests.budget import examples

EXAMPLES = int(os.environ.get("TEMPO_VALUE_EXAMPLES", str(examples(100))))

LIVE_FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def _reference(build: Callable[[], Stream[Any]]) -> tuple[str, str] | type[TempoError]:
    """The in-memory run: (its raw release, its rejections) as canonical text, or its error's type."""
    try:
        result = InMemoryExecutor().run(build())
    except TempoError as error:
        return type(error)
    return canonical(repr(result.raw)), canonical(repr(result.rejected))


@LIVE_FUZZ
@given(query=value_queries(), data=st.data())
def test_the_live_engine_agrees_on_edge_values(query: tuple[str, Callable[[], Stream[Any]]], data: st.DataObject) -> None:
    desc, build = query
    expected = _reference(build)
    plan = Query.build(build().node)
    mode = TimestampMode()
    pending = [list(s) for s in prepared_inputs(plan, mode)]
    engine = LiveEngine(plan, mode)
    released: list[Any] = []
    rejected: list[Any] = []
    try:
        while any(pending):
            index = data.draw(st.sampled_from([i for i, p in enumerate(pending) if p]))
            size = data.draw(st.integers(1, len(pending[index])))
            engine.push(index, pending[index][:size])
            del pending[index][:size]
            engine.run()
            out = engine.take()
            released += out.items
            rejected += out.rejections
            if data.draw(st.integers(0, 2)) == 0:  # saved and restored into a plan built anew
                engine = LiveEngine.restore(Query.build(build().node), engine.snapshot())
        engine.finish()
        out = engine.take()
    except TempoError as error:
        assert expected is type(error), f"the live engine raised {error!r}, the in-memory run gave {expected} on {desc}"
        return
    got = canonical(repr(released + out.items)), canonical(repr(rejected + out.rejections))
    assert got == expected, f"the live engine and the in-memory run differ on {desc}:\n  {got}\n  {expected}"


def _polars(query: Query, shape: BulkShape) -> Callable[[LiveEngine, list[Any]], bool]:
    pytest.importorskip("polars")
    from tempo.vectorised.batches import VectorisedBatches

    return VectorisedBatches(query, shape).run


def batches(tables: Sequence[Any], data: st.DataObject) -> Iterator[list[Any]]:
    """Every input's rows cut into the same random batches, by their place in the merged
    arrival order (``seq``)."""
    seqs = [t.column("seq").to_pylist() for t in tables]
    total = sum(len(s) for s in seqs)
    at = 0
    while at < total:
        to = at + data.draw(st.integers(1, total - at))
        yield [t.filter(pa.array([at <= s < to for s in seq], pa.bool_())) for t, seq in zip(tables, seqs)]
        at = to


@LIVE_FUZZ
@given(case=value_tables(), data=st.data())
def test_the_polars_batch_engine_agrees_on_edge_values(
    case: tuple[str, Callable[..., Stream[Any]], list[Any]], data: st.DataObject
) -> None:
    desc, build, tables = case
    _lockstep(build, batches(tables, data), data, _polars, whole=False, desc=desc)
