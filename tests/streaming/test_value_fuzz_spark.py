"""The value fuzz on live Spark queries: the tables of edge values of
``tests/value_strategies.value_tables`` (NaN, ±0.0, ±inf, extreme floats and 64-bit integers,
nulls, long and unicode strings, times at both ends of the calendar) written as Parquet files
in random cuts, each file taken by a run of the live query, batches of at least three rows in
bulk by Spark and smaller ones item by item on the driver, so that the engines take turns on one
state and every value goes through Spark's file source, the wire to the driver and the sink.
The committed output after the flush is the in-memory release, item for item (NaN equal to
NaN, -0.0 to 0.0), or the query fails with the in-memory run's tempo error.

Spark's bulk engine is also run alone, in lockstep with item by item, over the same tables.
``TEMPO_VALUE_LIVE_EXAMPLES`` sets the live queries' examples (default 4: each starts a live
query, ~3 s), ``TEMPO_VALUE_EXAMPLES`` the bulk engine's (default 10); the closing note of
issue 30 gives the counts of the long runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import InMemoryExecutor, Stream, TempoError
from tempo.sources import ParquetSource
from tests.streaming.test_live_spark import land
from tests.test_bulk_engine import _lockstep
from tests.test_value_fuzz_live import batches
from tests.value_strategies import Val, canonical, value_tables

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("TEMPO_VALUE_LIVE_EXAMPLES", "4"))


@settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(case=value_tables(), data=st.data())
def test_live_spark_agrees_on_edge_values(
    spark_session: Any, tmp_path_factory: Any, case: tuple[str, Callable[[], Stream[Any]], list[Any]], data: st.DataObject
) -> None:
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed, released_items

    desc, build, tables = case
    try:
        expected: Any = canonical(repr(InMemoryExecutor().run(build()).raw))
    except TempoError as error:
        expected = type(error)
    root = Path(tmp_path_factory.mktemp("values"))
    folders = [root / f"in{i}" for i in range(len(tables))]
    seqs = [t.column("seq").to_pylist() for t in tables]
    total = sum(len(s) for s in seqs)
    cuts = sorted({0, total, *data.draw(st.lists(st.integers(1, max(1, total - 1)), max_size=3))})

    def write(index: int, low: int, high: int) -> None:
        for folder, table, seq in zip(folders, tables, seqs):
            part = table.filter(pa.array([low <= s < high for s in seq], pa.bool_()))
            land(folder, index, lambda tmp: pq.write_table(part, tmp))

    write(0, 0, cuts[1])  # every input has a first file, for its schema
    live_query = build(lambda i, **columns: ParquetSource(str(folders[i]), Val, **columns))
    executor = StreamingExecutor(spark_session, str(root / "ck"), bulk_rows=3, vector_rows=10**9)
    live = executor.start(live_query, ParquetSink(str(root / "out")))
    try:
        live.process_all_available()
        for index, (low, high) in enumerate(zip(cuts[1:], cuts[2:]), start=1):
            write(index, low, high)
            live.process_all_available()
        live.flush()
    except TempoError as error:
        assert expected is type(error), f"the live query raised {error!r}, the in-memory run gave {expected} on {desc}"
        return
    finally:
        live.stop()
    got = canonical(repr(released_items(read_committed(str(root / "out")).drop_columns(["tempo_batch"]), live_query.payload_type)))
    assert got == expected, f"the live query and the in-memory run differ on {desc}:\n  {got}\n  {expected}"


BULK_EXAMPLES = int(os.environ.get("TEMPO_VALUE_EXAMPLES", "10"))


@settings(
    max_examples=BULK_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
@given(case=value_tables(), data=st.data())
def test_the_spark_bulk_engine_agrees_on_edge_values(
    spark_session: Any, case: tuple[str, Callable[..., Stream[Any]], list[Any]], data: st.DataObject
) -> None:
    """Spark's bulk engine alone, in lockstep with item by item (``_lockstep`` of
    ``tests/test_bulk_engine.py``): each batch of the tables, drawn in bulk, is one
    DataFrame laid out as a live query's micro-batch (every input's columns prefixed, its
    rows marked), computed by Spark and applied to the engine's state."""
    from tempo.plan.query import Query
    from tempo.runtime.bulk import BulkShape
    from tempo.runtime.live import LiveEngine
    from tempo.spark.streaming.bulk import BulkRunner
    from tempo.spark.streaming.layout import INPUT_COLUMN, input_prefix

    def spark_bulk(query: Query, shape: BulkShape) -> Callable[[LiveEngine, Any], bool]:
        runner = BulkRunner(spark_session, query, shape)

        def run(engine: LiveEngine, tables: Any) -> bool:
            from pyspark.sql import functions as F

            merged = None
            for index, table in enumerate(tables):
                df = spark_session.createDataFrame(table)
                part = df.select(F.lit(index).alias(INPUT_COLUMN), *[F.col(c).alias(input_prefix(index) + c) for c in df.columns])
                merged = part if merged is None else merged.unionByName(part, allowMissingColumns=True)
            return runner.run(engine, merged, 1, False)[1]

        return run

    desc, build, tables = case
    _lockstep(build, batches(tables, data), data, spark_bulk, whole=False, desc=desc)
