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
    """The executor named by ``--executor auto|memory|spark`` (default auto), for scripts."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--executor", choices=["auto", "memory", "spark"], default="auto")
    kind = parser.parse_args(argv).executor
    executor = get_executor(kind)
    print(f"# running on {type(executor).__name__}")
    return executor
