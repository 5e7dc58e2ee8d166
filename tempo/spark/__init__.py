"""The Spark executor: tempo queries as native Spark plans, with in-memory results.

Needs the ``spark`` extra (``pip install tempo-streams[spark]``) and a Java runtime.
"""

from tempo.spark.executor import SparkExecutor
from tempo.spark.session import quiet_task_failures, spark_session

__all__ = ["SparkExecutor", "quiet_task_failures", "spark_session"]
