"""A SparkSession set up for tempo: UTC session time zone, few shuffle partitions, no UI, and a
quiet console (no progress bar, only errors logged) so a program's own output stays readable."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from tempo.errors import TempoError

DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "4g",
    "spark.ui.showConsoleProgress": "false",
}

LOG_CONFIG = Path(__file__).with_name("log4j2.properties")
"""Errors only, on stderr: the driver's log4j2 configuration unless the user gives their own."""


CHECKOUT_CONNECTORS = Path(__file__).resolve().parents[2] / "java" / "spark-lib"

DELTA_SETTINGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Delta replays a table's log in 50 tasks by default, several times per commit: a live
    # sink's table commits once per batch, and its log is small.
    "spark.databricks.delta.snapshotPartitions": "1",
}
"""The settings Delta Lake needs in a session (its commands and catalog; writes refuse to
run without them), and the size of its log replays."""


class ConnectorsMissingError(TempoError):
    """``spark_session(connectors=True)`` found no connector jars."""


def connector_jars() -> list[str]:
    """The jars of Spark's Kafka connector and Delta Lake that ``bash java/fetch`` put in the
    checkout's ``java/spark-lib`` (or the folder ``TEMPO_SPARK_JARS`` names), for
    ``spark.jars``."""
    folder = Path(os.environ.get("TEMPO_SPARK_JARS", CHECKOUT_CONNECTORS))
    jars = sorted(str(j) for j in folder.glob("*.jar"))
    if not any("spark-sql-kafka" in j for j in jars) or not any("delta-spark" in j for j in jars):
        raise ConnectorsMissingError(
            f"no Kafka connector and Delta jars in {folder}: run `bash java/fetch` in tempo's checkout (it fetches them from "
            "Maven Central for the installed pyspark), or point TEMPO_SPARK_JARS at a folder holding them"
        )
    return jars


def spark_session(master: str | None = None, app_name: str = "tempo", connectors: bool = False, **conf: str) -> SparkSession:
    """Get or create a session for tempo. Workers run this interpreter (``PYSPARK_PYTHON``).

    ``connectors``: with Spark's Kafka connector and Delta Lake (``connector_jars`` as
    ``spark.jars``, and ``DELTA_SETTINGS``), for ``kafka_stream``, ``DeltaSink`` and
    ``DeltaSource``; a session already running keeps the jars it started with.

    ``master`` defaults to the one ``spark-submit`` configured, else ``local[2]``. Keyword
    settings name Spark options with underscores for dots (``spark_sql_shuffle_partitions``).

    The console stays quiet: no progress bar and only errors from Spark's own logging
    (``LOG_CONFIG``), unless ``spark_ui_showConsoleProgress`` or a log4j2 configuration in
    ``spark_driver_extraJavaOptions`` say otherwise. A local master binds to the loopback
    address (``SPARK_LOCAL_IP``, unless already set), which also spares the warning about the
    host name. Starting a local session takes some seconds (a JVM starts); later queries reuse it.
    """
    from pyspark import SparkConf

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    configured = SparkConf().get("spark.master", None)
    chosen = master or configured or "local[2]"
    if chosen.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    given = {k.replace("_", "."): v for k, v in conf.items()}
    extra: dict[str, str] = {}
    if connectors:
        jars = ",".join(connector_jars() + [j for j in given.pop("spark.jars", "").split(",") if j])
        extra = {**DELTA_SETTINGS, "spark.jars": jars}
    settings = {**DEFAULTS, **extra, **given}
    java_options = settings.get("spark.driver.extraJavaOptions", "")
    if "log4j2.configurationFile" not in java_options:
        settings["spark.driver.extraJavaOptions"] = f"{java_options} -Dlog4j2.configurationFile={LOG_CONFIG.as_uri()}".strip()
    builder = SparkSession.builder.master(chosen).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():
        # PySpark 4.3 imports its test helpers while starting the context, which warn that
        # pandas 3 is not fully supported when it is installed: tempo uses no pandas on Spark.
        warnings.filterwarnings("ignore", "PySpark does not yet fully support pandas", FutureWarning)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def session_setting(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    """``key`` set to ``value`` in ``spark`` for the ``with`` block, then as it was (unset if it
    was not set): for a setting one read or write needs and the rest of the session must not see."""
    before = spark.conf.get(key, None)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, before)


TASK_FAILURE_LOGGERS = (
    "org.apache.spark.executor.Executor",
    "org.apache.spark.scheduler.TaskSetManager",
    "org.apache.spark.sql.execution.streaming.MicroBatchExecution",
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",  # its package in later Spark 4 releases
)
"""The driver's loggers that write a failed task's (or a failed live query's) Java trace to
stderr: off in ``LOG_CONFIG``, since the failure reaches the caller as an exception anyway
(tempo's error, or Spark's with its message)."""


def quiet_task_failures(spark: SparkSession) -> None:
    """Turn off ``TASK_FAILURE_LOGGERS`` in a session that was not made by ``spark_session``
    (a ``SparkSession.builder`` of the user's, a notebook's), as ``LOG_CONFIG`` has them: a
    tempo error raised in a Spark task then reaches the caller with nothing else on stderr.
    Spark's other logging is left as the session has it. A session's driver JVM is one per
    process: this holds for every session of the process, until it ends."""
    jvm: Any = getattr(spark.sparkContext, "_jvm")
    off = jvm.org.apache.logging.log4j.Level.OFF
    for name in TASK_FAILURE_LOGGERS:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, off)
