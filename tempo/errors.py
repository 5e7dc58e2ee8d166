"""The exceptions tempo raises.

Every error names the item (input, position, node) and the rule it broke, so that a
failing pipeline says what to fix rather than where the interpreter tripped.
"""

from __future__ import annotations

import enum
from typing import overload


class TempoError(Exception):
    """Base class of every error tempo raises on purpose."""


class QueryBuildError(TempoError):
    """The query graph is invalid: a bad parameter, type, name or shape."""


class TraceError(QueryBuildError, TypeError):
    """A lambda used Python control flow that cannot be traced into an expression."""


class Rule(str, enum.Enum):
    """The rule that caught a rejected (dropped or adjusted) input event (``tempo.result.Rule``;
    a ``CtiViolationError``'s ``rule`` on an input without a policy)."""

    START_BEFORE_CTI = "start before CTI"
    """A point, interval or start edge started before the input's current CTI."""
    END_BEFORE_CTI = "end before CTI"
    """An end edge ended before the input's current CTI."""
    START_EDGE_DROPPED = "start edge dropped"
    """An end edge whose start edge had been dropped."""
    EARLY_ARRIVAL = "early arrival"
    """An event starting more than the early-arrival window after its arrival (dropped)."""
    LATE_ARRIVAL = "late arrival"
    """An event starting more than the late-arrival tolerance before its arrival."""


class Action(str, enum.Enum):
    """What an input's policy did with an event a ``Rule`` caught (``tempo.result.Action``)."""

    DROPPED = "dropped"
    """The event is not admitted."""
    ADJUSTED = "adjusted"
    """The event is admitted with its start moved to the time it was held against (a point moves
    whole; docs/semantics.md 4.1)."""


class InputRule(enum.IntEnum):
    """A rule of input items and table rows, by its code (0 is no rule broken)."""

    LIFETIME = 1
    ROW_KIND = 2
    ARRIVAL_ORDER = 3
    IMPORT_ARRIVAL = 4
    START_AT_INFINITY = 5
    ORDERING_ARRIVAL = 6
    UNKNOWN_KIND = 7
    NULL_START = 8
    NULL_END = 9
    END_WITHOUT_START = 10
    IMPORT_ITEM_ARRIVAL = 11
    HEARTBEAT_ARRIVAL = 12
    """A heartbeat row without an arrival time."""
    ORDERING_ARRIVAL_COLUMN = 13
    NO_END_COLUMN = 14
    ITEM_KIND = 15
    NULL_ORDER = 16
    CTI_VIOLATION = 17
    """The words of an event breaking the CTI rule on an input without ``AdvanceTimeSettings``;
    the ``CtiViolationError``'s ``rule`` is the ``tempo.result.Rule`` it broke
    (``START_BEFORE_CTI`` or ``END_BEFORE_CTI``, as a policy would reject it)."""
    PAYLOAD_TYPE = 18
    EDGE_KIND_COLUMN = 19
    """An EDGE input read from a table without a ``kind=`` column."""
    ORDER_BACK = 20
    """A live input's micro-batch holds a row ordered before rows already processed."""
    STAMP_ARRIVAL = 21
    """An item or row without an arrival time in an input stamped with its arrivals."""
    LIST_FIELD = 22
    """An item's payload holding something else than a list in a list field."""
    FIELD_TYPE = 23
    """An item's payload holding a value of another type than its field's (an int in a float
    field is widened, not refused)."""
    ORDER_REPEAT = 24
    """A dense order value given to two rows (``dense_order_from``): each row has its own number."""
    TIME_TYPE = 25
    """An item's start, end or arrival that is not a datetime."""
    CLOCK_EXHAUSTED = 26
    """A ``ScriptedClock`` with no reading left for an item in processing time."""
    STAMPED_CTI = 27
    """A ``Cti`` item in an input stamped by arrival or a clock, whose CTIs follow its stamps."""
    COLUMNS = 28
    """A table's columns do not fit its input (``InputSchemaError``: before any row is read)."""
    STREAM_ENTRY = 29
    """An entry of a live source's stream (Redis) that cannot be read as a row of its input."""
    SOURCE_MISSING = 30
    """A table source naming a path, table or view that does not exist, or a live file input
    with no file yet to take its columns' types from (``InputSchemaError``)."""
    SUB_MICROSECOND = 50
    """A table row's time or payload value (timestamp, duration, or integer time in ``time_unit="ns"``)
    with a part below a microsecond, which tempo's ticks cannot hold."""
    NULL_FIELD = 100
    """``NULL_FIELD + i`` (Spark's code): a null in the i-th payload field, not declared optional."""


class RuleText(str):
    """A rule's words that know their rule (``tempo.rules.message`` makes them): an
    ``InputError`` raised with them takes the rule as its ``rule``."""

    rule: InputRule | Rule

    def __new__(cls, text: str, rule: InputRule | Rule) -> RuleText:
        made = super().__new__(cls, text)
        made.rule = rule
        return made

    def __add__(self, more: str) -> RuleText:  # words added (a hint) keep the rule
        return RuleText(str(self) + more, self.rule)

    def __reduce__(self) -> tuple[type[RuleText], tuple[str, InputRule | Rule]]:
        return (RuleText, (str(self), self.rule))


class InputError(TempoError):
    """An input item broke a rule of the temporal model (lifetime, edge pairing, order...):
    ``rule`` is the rule (an ``InputRule``; for a ``CtiViolationError`` the
    ``tempo.result.Rule`` it broke), ``message`` its words with the details, the item at
    ``position`` of input ``input_name``. ``str(error)`` says all of it."""

    @overload
    def __init__(self, input_name: str, position: int, item: object, message: RuleText, rule: InputRule | Rule | None = None) -> None: ...
    @overload
    def __init__(self, input_name: str, position: int, item: object, message: str, rule: InputRule | Rule) -> None: ...
    def __init__(self, input_name: str, position: int, item: object, message: str, rule: InputRule | Rule | None = None) -> None:
        # The words made by ``tempo.rules.message`` know their rule; other words come with it
        # (the overloads make mypy refuse words without a rule).
        self.input_name = input_name
        self.position = position
        self.item = item
        self.message = str(message)
        found = rule if rule is not None else getattr(message, "rule", None)
        if not isinstance(found, (InputRule, Rule)):
            raise TypeError(f"an InputError needs its rule (an InputRule or tempo.result.Rule): {message}")
        self.rule: InputRule | Rule = found
        super().__init__(f"input {input_name!r}, item #{position} {item!r}: {message}")

    def __reduce__(self) -> tuple[type[InputError], tuple[str, int, object, str, InputRule | Rule]]:
        return (type(self), (self.input_name, self.position, self.item, self.message, self.rule))


class InputSchemaError(InputError):
    """A table source's columns do not fit its input: a column argument (``start=``,
    ``order=``...) or a payload field names no column, or a column's type cannot fill the
    time or field it is read into. Raised before any row is read, so it names no row
    (``position`` is -1, ``item`` None); ``rule`` is ``InputRule.COLUMNS`` unless the words
    name another."""

    def __init__(self, input_name: str, message: str, rule: InputRule | Rule | None = None) -> None:
        super().__init__(input_name, -1, None, message, rule or getattr(message, "rule", None) or InputRule.COLUMNS)
        self.args = (f"input {input_name!r}: {message}",)

    def __str__(self) -> str:
        return f"input {self.input_name!r}: {self.message}"

    def __reduce__(self) -> tuple[type[InputSchemaError], tuple[str, str, InputRule | Rule]]:  # type: ignore[override]
        return (InputSchemaError, (self.input_name, self.message, self.rule))


class CtiViolationError(InputError):
    """An event broke the CTI rule on an input that has no violation policy: ``rule`` is the
    ``tempo.result.Rule`` it broke (``START_BEFORE_CTI`` or ``END_BEFORE_CTI``)."""


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
