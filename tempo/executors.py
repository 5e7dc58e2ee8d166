"""Choosing an executor: the in-memory one, or Spark when it is installed and can start."""

from __future__ import annotations

import shutil
from typing import Literal, Protocol, TypeVar

from tempo.api.stream import Stream
from tempo.result import Result

T = TypeVar("T")


class Executor(Protocol):
    """What every executor offers: run a query to a ``Result``."""

    def run(self, stream: Stream[T]) -> Result[T]: ...


def spark_available() -> bool:
    """True when pyspark is importable and a Java runtime is on the PATH."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return shutil.which("java") is not None


def get_executor(kind: Literal["auto", "memory", "spark"] = "auto") -> Executor:
    """An executor by name; ``auto`` is local Spark when available, else in memory."""
    if kind == "memory" or (kind == "auto" and not spark_available()):
        from tempo.memory import InMemoryExecutor

        return InMemoryExecutor()
    from tempo.spark import SparkExecutor, spark_session

    return SparkExecutor(spark_session())


def executor_from_args(argv: list[str] | None = None) -> Executor:
    """The executor named by ``--executor memory|spark|auto`` (default memory: the embedded
    executor answers at once, where starting local Spark takes several seconds), for scripts."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--executor", choices=["memory", "spark", "auto"], default="memory",
        help="memory (default): in this process; spark: local Spark (a JVM starts first, some "
        "seconds); auto: Spark when installed, else memory",
    )
    kind = parser.parse_args(argv).executor
    if kind != "memory":
        print("# starting local Spark (a JVM; this takes some seconds) ...", flush=True)
    executor = get_executor(kind)
    hint = " (--executor spark runs the same query on local Spark)" if kind == "memory" else ""
    print(f"# running on {type(executor).__name__}{hint}", flush=True)
    return executor
