"""The Spark executor: tempo queries as native Spark plans, with in-memory results.

Needs the ``spark`` extra (``pip install tempo-streams[spark]``) and a Java runtime.
"""

from tempo.spark.executor import SparkExecutor
from tempo.spark.session import spark_session

__all__ = ["SparkExecutor", "spark_session"]
