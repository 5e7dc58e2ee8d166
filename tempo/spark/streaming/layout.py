"""How a live query's micro-batch holds its inputs: one DataFrame, the union of every
input's rows, each row marked with its input and its columns prefixed by it (the inputs'
columns may share names and differ in type)."""

from __future__ import annotations

INPUT_COLUMN = "__tempo_input"
"""The index of the row's input among the query's inputs."""


def input_prefix(index: int) -> str:
    """The prefix of input ``index``'s columns in the batch."""
    return f"__t{index}__"
