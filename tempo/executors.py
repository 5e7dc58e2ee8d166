"""Choosing an executor: the embedded default (vectorised where it applies, else in memory),
the in-memory reference, or Spark when it is installed and can start; and the batch engines
live executors may hand micro-batches to (``tempo.runtime.bulk.register_batch_engine``: the
vectorised executor's, imported when a live query asks for it)."""

from __future__ import annotations

import shutil
from typing import Literal, Protocol, TypeVar

from tempo.api.stream import Stream
from tempo.result import Result
from tempo.runtime.bulk import BatchEngineFactory, register_batch_engine

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


class EmbeddedExecutor:
    """The embedded default: runs each query in this process on the vectorised executor
    where it applies (its ``reads_in_bulk``: every input a table it reads column by column,
    every node one it compiles, and polars installed), else on the in-memory executor, the
    reference. Both give the same results; the vectorised one does not promise
    ``Result.raw`` item for item (an edge pair may show as one interval, and the order
    within one release is its own): ask for ``InMemoryExecutor`` when that matters."""

    def run(self, stream: Stream[T]) -> Result[T]:
        return self.choose(stream).run(stream)

    def choose(self, stream: Stream[T]) -> Executor:
        """The executor ``run`` uses for this query."""
        from tempo.memory import InMemoryExecutor

        try:
            from tempo.vectorised import VectorisedExecutor
        except ImportError:  # no polars: the vectorised extra is not installed
            return InMemoryExecutor()
        return VectorisedExecutor() if VectorisedExecutor.reads_in_bulk(stream) else InMemoryExecutor()


def get_executor(kind: Literal["auto", "embedded", "memory", "spark", "vectorised"] = "auto") -> Executor:
    """An executor by name; ``auto`` is local Spark when available, else the embedded
    default (``EmbeddedExecutor``: vectorised where it applies, else in memory);
    ``vectorised`` needs the ``vectorised`` extra (polars)."""
    if kind == "memory":
        from tempo.memory import InMemoryExecutor

        return InMemoryExecutor()
    if kind == "embedded" or (kind == "auto" and not spark_available()):
        return EmbeddedExecutor()
    if kind == "vectorised":
        from tempo.vectorised import VectorisedExecutor

        return VectorisedExecutor()
    from tempo.spark import SparkExecutor, spark_session

    return SparkExecutor(spark_session())


def executor_from_args(argv: list[str] | None = None) -> Executor:
    """The executor named by ``--executor embedded|memory|spark|vectorised|auto`` (default
    embedded: in this process, answering at once, where starting local Spark takes several
    seconds), for scripts."""
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--executor",
        choices=["embedded", "memory", "spark", "vectorised", "auto"],
        default="embedded",
        help="embedded (default): in this process, on polars where the vectorised executor applies, "
        "else in memory; memory: the in-memory reference; spark: local Spark (a JVM starts first, some "
        "seconds); vectorised: in this process on polars; auto: Spark when installed, else embedded",
    )
    kind = parser.parse_args(argv).executor
    if kind in ("spark", "auto"):
        print("# starting local Spark (a JVM; this takes some seconds) ...", flush=True)
    executor = get_executor(kind)
    hint = " (--executor spark runs the same query on local Spark)" if kind in ("memory", "embedded") else ""
    print(f"# running on {type(executor).__name__}{hint}", flush=True)
    return executor


def _vectorised_batches() -> BatchEngineFactory:
    from tempo.vectorised.batches import vectorised_batches  # ImportError without polars

    return vectorised_batches


register_batch_engine("vectorised", _vectorised_batches)
