"""The exceptions tempo raises.

Every error names the item (input, position, node) and the rule it broke, so that a
failing pipeline says what to fix rather than where the interpreter tripped.
"""

from __future__ import annotations

import enum


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


class InputSchemaError(InputError):
    """A table source's columns do not fit its input: a column argument (``start=``,
    ``order=``...) or a payload field names no column, or a column's type cannot fill the
    time or field it is read into. Raised before any row is read, so it names no row
    (``position`` is -1, ``item`` None)."""

    def __init__(self, input_name: str, rule: str) -> None:
        super().__init__(input_name, -1, None, rule)
        self.args = (f"input {input_name!r}: {rule}",)

    def __str__(self) -> str:
        return f"input {self.input_name!r}: {self.rule}"

    def __reduce__(self) -> tuple[type[InputSchemaError], tuple[str, str]]:
        return (InputSchemaError, (self.input_name, self.rule))


class CtiViolationError(InputError):
    """An event broke the CTI rule on an input that has no violation policy."""


class ImportOrderError(InputError):
    """CTIs are imported between inputs whose items cannot be put in one arrival order."""


class CompileError(TempoError):
    """An executor cannot express a node of the logical plan."""


class UnsupportedError(CompileError):
    """An executor cannot run a plan node, an expression or a source of the query.

    Every executor raises this one error for what it lacks, whichever compiler finds it,
    naming ``executor`` (its name, as in "the Spark executor"), ``what`` (the node,
    expression or source) and ``reason``. It is a ``CompileError`` so that code catching
    that keeps working: ``CompileError`` remains the base of what stops a query from being
    compiled, ``UnsupportedError`` the case where another executor might run it."""

    def __init__(self, executor: str, what: str, reason: str) -> None:
        self.executor = executor
        self.what = what
        self.reason = reason
        super().__init__(f"the {executor} executor cannot run {what}: {reason}")

    def __reduce__(self) -> tuple[type[UnsupportedError], tuple[str, str, str]]:
        return (UnsupportedError, (self.executor, self.what, self.reason))


class UdfError(TempoError):
    """A ``tempo.udf`` function, or a method of a user-defined aggregate, raised an exception.
    On the in-memory executor the exception is this error's ``__cause__``; on Spark and the
    vectorised executor, which run the function in a worker or inside polars, its type and
    message are carried back as text."""

    def __init__(self, udf: str, error: str, text: str, arguments: str) -> None:
        self.udf = udf
        self.error = error
        self.text = text
        self.arguments = arguments
        super().__init__(f"udf {udf!r} raised {error}: {text} (for the arguments {arguments})")


class UdfResultError(TempoError):
    """A ``tempo.udf`` function returned a value of another type than it declared."""

    def __init__(self, udf: str, declared: str, actual: str, value: str, arguments: str) -> None:
        self.udf = udf
        self.declared = declared
        self.actual = actual
        self.value = value
        self.arguments = arguments
        super().__init__(
            f"udf {udf!r} is declared to return {declared} but returned {value} (a {actual}) "
            f"for the arguments {arguments}: return a {declared} or None, or declare the type it returns"
        )

    def __reduce__(self) -> tuple[type[UdfResultError], tuple[str, str, str, str, str]]:
        return (UdfResultError, (self.udf, self.declared, self.actual, self.value, self.arguments))


class EvaluationRule(str, enum.Enum):
    """What an expression's evaluation may break, on every executor (docs/semantics.md 7.4)."""

    DIVISION_BY_ZERO = "division by zero"
    INTEGER_OVERFLOW = "integer overflow: the result is outside 64-bit integers (-2**63 to 2**63 - 1)"

    def __str__(self) -> str:
        return self.value


class EvaluationError(TempoError):
    """An expression or aggregate could not be evaluated for an event or window: a division by
    zero, or an integer result outside 64 bits (``rule``: an ``EvaluationRule``). The same
    error on every executor, naming the expression as written (with the lambda's parameter
    names), the rule, and the operands of a failing event (on Spark and the vectorised
    executor one such event, whichever the engine met first)."""

    def __init__(self, expression: str, rule: EvaluationRule, values: str) -> None:
        self.expression = expression
        self.rule = rule
        self.values = values
        super().__init__(f"{rule} in {expression} (for the values {values})")

    def __reduce__(self) -> tuple[type[EvaluationError], tuple[str, EvaluationRule, str]]:
        return (EvaluationError, (self.expression, self.rule, self.values))
