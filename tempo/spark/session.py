"""A SparkSession set up for tempo: UTC session time zone, few shuffle partitions, no UI."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.memory": "4g",
}


def spark_session(master: str | None = None, app_name: str = "tempo", **conf: str) -> SparkSession:
    """Get or create a session for tempo. Workers run this interpreter (``PYSPARK_PYTHON``).

    ``master`` defaults to the one ``spark-submit`` configured, else ``local[2]``. Keyword
    settings name Spark options with underscores for dots (``spark_sql_shuffle_partitions``).
    """
    from pyspark import SparkConf

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    configured = SparkConf().get("spark.master", None)
    builder = SparkSession.builder.master(master or configured or "local[2]").appName(app_name)
    for key, value in {**DEFAULTS, **{k.replace("_", "."): v for k, v in conf.items()}}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
