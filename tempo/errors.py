"""The exceptions tempo raises.

Every error names the item (input, position, node) and the rule it broke, so that a
failing pipeline says what to fix rather than where the interpreter tripped.
"""

from __future__ import annotations


class TempoError(Exception):
    """Base class of every error tempo raises on purpose."""


class QueryBuildError(TempoError):
    """The query graph is invalid: a bad parameter, type, name or shape."""


class TraceError(QueryBuildError, TypeError):
    """A lambda used Python control flow that cannot be traced into an expression."""


class InputError(TempoError):
    """An input item broke a rule of the temporal model (lifetime, edge pairing, order...)."""

    def __init__(self, input_name: str, position: int, item: object, rule: str) -> None:
        self.input_name = input_name
        self.position = position
        self.item = item
        self.rule = rule
        super().__init__(f"input {input_name!r}, item #{position} {item!r}: {rule}")


class CtiViolationError(InputError):
    """An event broke the CTI rule on an input that has no violation policy."""


class ImportOrderError(InputError):
    """CTIs are imported between inputs whose items cannot be put in one arrival order."""


class CompileError(TempoError):
    """An executor cannot express a node of the logical plan."""
