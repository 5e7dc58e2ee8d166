"""How a live query's micro-batch holds its inputs: one DataFrame, the union of every
input's rows, each row marked with its input and its columns prefixed by it (the inputs'
columns may share names and differ in type). Inputs read from one ``SharedScan`` (a Kafka
topic's partitions) share the columns, and the prefix, of the first of them."""

from __future__ import annotations

from typing import Any

from tempo.plan.query import Query
from tempo.spark.sources import DataFrameSource, SharedScan

INPUT_COLUMN = "__tempo_input"
"""The index of the row's input among the query's inputs."""


def input_prefix(index: int) -> str:
    """The prefix of input ``index``'s columns in the batch."""
    return f"__t{index}__"


def shared_part(query: Query, index: int) -> tuple[SharedScan, Any] | None:
    """The shared scan input ``index`` is a part of, and its value of the scan's column, if any."""
    source = query.sources[index].source
    return source.shared if isinstance(source, DataFrameSource) else None


def scan_of(query: Query, index: int) -> SharedScan | None:
    """The shared scan input ``index`` is a part of, if any."""
    part = shared_part(query, index)
    return None if part is None else part[0]


def input_prefixes(query: Query) -> list[str]:
    """Per input, the prefix of its columns in the batch: its own, or for an input of a
    shared scan that of the scan's first input."""
    first: dict[int, int] = {}
    prefixes = []
    for index in range(len(query.sources)):
        scan = scan_of(query, index)
        prefixes.append(input_prefix(index if scan is None else first.setdefault(id(scan), index)))
    return prefixes
