"""A tempo error raised in a Spark task reaches the user as that tempo error, with nothing but
it on stderr (issue 30): no Java stack trace, no "ERROR Executor" or "TaskSetManager" line,
for a batch query and a live one. A fresh process with the session ``tempo.spark.spark_session()``
makes, as a user's program has."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import skip_without_spark

pytestmark = pytest.mark.spark

PROGRAM = textwrap.dedent(
    """
    import sys
    from datetime import datetime, timedelta, timezone
    import attrs
    import pyarrow as pa
    import pyarrow.parquet as pq
    import tempo
    from tempo import AdvanceTimeGenerationSettings, AdvanceTimeSettings, EventShape, Point, Stream, TempoError
    from tempo.sources import ParquetSource
    from tempo.spark import SparkExecutor, spark_session
    from tempo.spark.streaming import ParquetSink, StreamingExecutor

    @attrs.frozen
    class R:
        n: int
        d: int

    @attrs.frozen
    class Q:
        q: float

    def boom(v: int) -> int:
        raise ValueError("boom")

    spark = spark_session()
    t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    items = [Point(t0, R(1, 0)), Point(t0 + timedelta(seconds=1), R(2, 1))]
    s = Stream.create("r", items, EventShape.POINT, AdvanceTimeSettings.replay())
    for q in (s.select(lambda r: Q(r.n / r.d)), s.select(lambda r: Q(tempo.udf(boom, int)(r.n) * 1.0))):
        try:
            SparkExecutor(spark).run(q)
        except TempoError as e:
            print("caught", type(e).__name__, e, flush=True)
    folder = sys.argv[1]
    pq.write_table(pa.table({"seq": [0, 1], "ts": pa.array([t0, t0], pa.timestamp("us", tz="UTC")), "n": [1, 2], "d": [1, 1]}), folder + "/in/part-0.parquet")
    live_input = Stream.create("r", ParquetSource(folder + "/in", R, start="ts", order="seq"), EventShape.POINT,
                               AdvanceTimeSettings(AdvanceTimeGenerationSettings(1)))
    live = StreamingExecutor(spark, folder + "/ck", engine="driver").start(
        live_input.select(lambda r: Q(tempo.udf(boom, int)(r.n) * 1.0)), ParquetSink(folder + "/out"))
    try:
        live.process_all_available()
    except TempoError as e:
        print("caught", type(e).__name__, e, flush=True)
    finally:
        live.stop()
    """
)


def test_a_failing_query_leaves_only_the_tempo_error_on_stderr(tmp_path: Path) -> None:
    skip_without_spark()
    (tmp_path / "in").mkdir()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    run = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path)], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "caught EvaluationError division by zero in (r.n / r.d) (for the values (1, 0))",
        "caught UdfError udf 'boom' raised ValueError: boom (for the arguments (2,))",
        "caught UdfError udf 'boom' raised ValueError: boom (for the arguments (1,))",
    ]
    # The JVM's own notice of the incubator module Spark 4 loads is all that is left.
    noise = [line for line in run.stderr.splitlines() if line.strip() and "incubator modules" not in line]
    assert noise == [], "\\n".join(noise[:40])
