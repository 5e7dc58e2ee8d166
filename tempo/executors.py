"""Choosing an executor: the in-memory one, or Spark when it is installed and can start."""

from __future__ import annotations

import shutil
from typing import Literal, Protocol, TypeVar

from tempo.api.stream import Stream
from tempo.result import Result

T = TypeVar("T")
SinkT = TypeVar("SinkT", contravariant=True)


class Executor(Protocol):
    """What every executor offers: run a query over bounded inputs to a ``Result``."""

    def run(self, stream: Stream[T]) -> Result[T]: ...


class StartedQuery(Protocol):
    """A query started over unbounded inputs, releasing results to a sink as its CTIs advance.

    The place for live queries: an executor that runs unbounded inputs returns one of these
    from ``start``; the bounded ``run`` stays as it is. No executor implements it yet (the
    live Spark Structured Streaming executor will)."""

    def process_all_available(self) -> None:
        """Block until everything the inputs have delivered so far has been processed."""
        ...

    def await_termination(self, timeout: float | None = None) -> bool:
        """Block until the query stops (or ``timeout`` seconds pass); True if it stopped."""
        ...

    def stop(self) -> None:
        """Stop the query; what its sink has committed stays committed."""
        ...


class StreamingExecutor(Protocol[SinkT]):
    """An executor that starts queries over unbounded inputs (see ``StartedQuery``)."""

    def start(self, stream: Stream[T], sink: SinkT) -> StartedQuery: ...


def spark_available() -> bool:
    """True when pyspark is importable and a Java runtime is on the PATH."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return shutil.which("java") is not None


def get_executor(kind: Literal["auto", "memory", "spark", "vectorised"] = "auto") -> Executor:
    """An executor by name; ``auto`` is local Spark when available, else in memory;
    ``vectorised`` needs the ``vectorised`` extra (polars)."""
    if kind == "memory" or (kind == "auto" and not spark_available()):
        from tempo.memory import InMemoryExecutor

        return InMemoryExecutor()
    if kind == "vectorised":
        from tempo.vectorised import VectorisedExecutor

        return VectorisedExecutor()
    from tempo.spark import SparkExecutor, spark_session

    return SparkExecutor(spark_session())


def executor_from_args(argv: list[str] | None = None) -> Executor:
    """The executor named by ``--executor memory|spark|vectorised|auto`` (default memory: the
    embedded executor answers at once, where starting local Spark takes several seconds), for
    scripts."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--executor", choices=["memory", "spark", "vectorised", "auto"], default="memory",
        help="memory (default): in this process; spark: local Spark (a JVM starts first, some "
        "seconds); vectorised: in this process on polars; auto: Spark when installed, else memory",
    )
    kind = parser.parse_args(argv).executor
    if kind in ("spark", "auto"):
        print("# starting local Spark (a JVM; this takes some seconds) ...", flush=True)
    executor = get_executor(kind)
    hint = " (--executor spark runs the same query on local Spark)" if kind == "memory" else ""
    print(f"# running on {type(executor).__name__}{hint}", flush=True)
    return executor
