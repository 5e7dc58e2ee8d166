"""A tempo error raised in a Spark task reaches the user as that tempo error, with nothing but
it on stderr (issue 30): no Java stack trace, no "ERROR Executor" or "TaskSetManager" line,
for a batch query and a live one. A fresh process with the session ``tempo.spark.spark_session()``
makes, as a user's program has."""

from __future__ import annotations

import os
import re
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

    if sys.argv[2] == "tempo":
        spark = spark_session()
    else:  # the user's own session, quietened by tempo's helper
        from pyspark.sql import SparkSession
        from tempo.spark import quiet_task_failures
        spark = SparkSession.builder.master("local[2]").config("spark.sql.session.timeZone", "UTC").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        quiet_task_failures(spark)
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
    # A failure that is not tempo's reaches the user as Spark's exception, with its message.
    from pyspark.sql import functions as F
    from tempo.spark.sources import DataFrameSource
    failing = F.when(F.col("id") >= 0, F.raise_error(F.lit("a failure not tempo's"))).otherwise(F.col("id"))
    bad = spark.range(2).select(F.col("id").alias("seq"), F.lit(t0).alias("ts"), failing.alias("n"), F.col("id").alias("d"))
    try:
        SparkExecutor(spark).run(Stream.create("b", DataFrameSource(bad, R, start="ts", order="seq"), EventShape.POINT,
                                               AdvanceTimeSettings.replay()))
    except TempoError as e:
        print("caught as tempo's", type(e).__name__, e, flush=True)
    except Exception as e:
        print("caught Spark's", "a failure not tempo's" in str(e), flush=True)
    """
)


STARTUP = re.compile(
    r"Using Spark's default log4j profile|Setting default log level|To adjust logging level|"
    r"\S+ \S+ WARN (Utils|NativeCodeLoader): |\s*\[Stage \d+:"
)
"""What a session of the user's own prints before its program sets a level: Spark's notices
and (not turned off there) its progress bars; none is about a failure."""


def _without_worker_eof(lines: list[str]) -> list[str]:
    """``lines`` without the traceback PySpark 4.2's worker daemon prints when Spark cancels
    a task whose worker is still reading its input (the other tasks of a failed stage):
    a traceback through ``pyspark/daemon.py`` ending in a bare ``EOFError``. PySpark 4.3 no
    longer prints it; tempo cannot reach it (docs/spark.md, "A failing query's stderr")."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("Traceback (most recent call last):"):
            j = i + 1
            while j < len(lines) and lines[j].startswith(" "):
                j += 1
            block = lines[i : j + 1]
            if j < len(lines) and lines[j].strip() == "EOFError" and any("pyspark/daemon.py" in b for b in block):
                i = j + 1
                continue
        out.append(lines[i])
        i += 1
    return out


@pytest.mark.parametrize("session", ["tempo", pytest.param("own", marks=pytest.mark.slow)])
def test_a_failing_query_leaves_only_the_tempo_error_on_stderr(tmp_path: Path, session: str) -> None:
    """``tempo``: the session ``spark_session()`` makes; ``own``: a session the user built,
    given ``quiet_task_failures`` (docs/spark.md)."""
    skip_without_spark()
    (tmp_path / "in").mkdir()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    run = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path), session], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    # Which row's task fails first is Spark's choice: either argument may be the one named.
    expected = [
        r"caught EvaluationError division by zero in \(r\.n / r\.d\) \(for the values \(1, 0\)\)",
        r"caught UdfError udf 'boom' raised ValueError: boom \(for the arguments \([12],\)\)",
        r"caught UdfError udf 'boom' raised ValueError: boom \(for the arguments \([12],\)\)",
        r"caught Spark's True",
    ]
    lines = run.stdout.splitlines()
    assert len(lines) == len(expected) and all(re.fullmatch(e, line) for e, line in zip(expected, lines)), run.stdout
    # The JVM's own notice of the incubator module Spark 4 loads is all that is left.
    noise = [line for line in run.stderr.splitlines() if line.strip() and "incubator modules" not in line]
    noise = _without_worker_eof(noise)
    if session == "own":  # Spark's own start-up notices, before the program sets its level
        noise = [line for line in noise if not re.match(STARTUP, line)]
    assert noise == [], "\\n".join(noise[:40])
