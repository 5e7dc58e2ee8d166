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


def input_groups(query: Query) -> list[tuple[SharedScan | None, list[int]]]:
    """The inputs as the batch reads them, in order of their first input: each input alone
    (no scan), or the inputs of one shared scan together."""
    groups: list[tuple[SharedScan | None, list[int]]] = []
    of_scan: dict[int, list[int]] = {}
    for index in range(len(query.sources)):
        part = shared_part(query, index)
        if part is None:
            groups.append((None, [index]))
        elif id(part[0]) in of_scan:
            of_scan[id(part[0])].append(index)
        else:
            of_scan[id(part[0])] = members = [index]
            groups.append((part[0], members))
    return groups


def input_prefixes(query: Query) -> list[str]:
    """Per input, the prefix of its columns in the batch: its own, or for an input of a
    shared scan that of the scan's first input."""
    prefixes = [""] * len(query.sources)
    for _, members in input_groups(query):
        for index in members:
            prefixes[index] = input_prefix(members[0])
    return prefixes
