"""Shared fixtures: the executors the conformance suite runs on, and one Spark session.

``executor`` is parametrized over ``"memory"`` (``InMemoryExecutor``) and ``"spark"``
(``tempo.spark.SparkExecutor``); the Spark parameter carries the ``spark`` marker and is
skipped, with the reason, when pyspark, a Java runtime or ``tempo.spark.SparkExecutor``
is missing. ``tempo.spark`` (and pyspark) are imported only when a Spark test runs, and a
whole test run shares one local Spark session.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tempo import InMemoryExecutor


@functools.cache
def spark_unavailable() -> str | None:
    """Why the Spark executor cannot run here, or None when it can."""
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        return f"pyspark is not installed (install the `spark` extra): {e}"
    try:
        from tempo.spark import SparkExecutor  # noqa: F401
    except ImportError as e:
        return f"tempo.spark.SparkExecutor cannot be imported: {e}"
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and os.path.exists(os.path.join(java_home, "bin", "java"))):
        return "no Java runtime: `java` is not on PATH and JAVA_HOME is not set"
    return None


def skip_without_spark() -> None:
    reason = spark_unavailable()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """One local Spark session for the whole test run, stopped at its end."""
    skip_without_spark()
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers run this interpreter (and see tempo)
    import tempo.spark

    factory = getattr(tempo.spark, "spark_session", None)
    if factory is not None:
        # Tiny inputs: one shuffle partition and no progress bars keep each query cheap.
        spark = factory(spark_sql_shuffle_partitions="1", spark_ui_showConsoleProgress="false")
    else:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("tempo-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.default.parallelism", "2")
            .getOrCreate()
        )
    yield spark
    spark.stop()


@pytest.fixture
def spark_executor(spark_session: Any) -> Any:
    from tempo.spark import SparkExecutor

    return SparkExecutor(spark_session)


@pytest.fixture(params=["memory", pytest.param("spark", marks=pytest.mark.spark)])
def executor(request: pytest.FixtureRequest) -> Any:
    """The executor a conformance test runs its queries on."""
    if request.param == "memory":
        return InMemoryExecutor()
    skip_without_spark()
    return request.getfixturevalue("spark_executor")
