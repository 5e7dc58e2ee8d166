"""``InMemoryExecutor``: runs a query one event at a time in this process.

The executor is a thin wrapper of the reference engine (``tempo.runtime.engine``): it builds
the query's plan and runs it there.
"""

from __future__ import annotations

from typing import TypeVar

from tempo.api.stream import Stream
from tempo.plan.query import Query
from tempo.result import Result
from tempo.runtime.engine import run_query

T = TypeVar("T")


class InMemoryExecutor:
    """Runs queries in this process: tempo's reference semantics.

    Events are processed as they arrive; operator state is purged as CTIs pass, so memory
    follows the open windows and lifetimes rather than the length of the input.
    """

    def run(self, stream: Stream[T]) -> Result[T]:
        """Run the query whose output is ``stream`` over all of its inputs.

        Output events that no CTI released are counted in ``Result.withheld`` (and an
        ``UnreleasedResultsWarning`` says so): to count them, every input's time is advanced
        to infinity after the result is taken."""
        return run_query(Query.build(stream.node))
