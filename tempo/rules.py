"""The rules an input's items and rows must pass, and their words: one table for every ingress.

An item or row breaking one of these stops the run with an ``InputError`` (or
``ImportOrderError``) carrying the rule's message. Each rule has a code: the Spark ingress
computes the code of the first rule a row breaks as a column (``__bad``) and reads the
words from here, so both executors say the same. The rules an *event* can break against a
CTI (and which the policy then drops or adjusts) are ``tempo.result.Rule``; Spark's codes
for those are ``CTI_RULE_CODES``.
"""

from __future__ import annotations

import enum
from typing import Any

from tempo.errors import ImportOrderError, InputError
from tempo.result import Rule


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
    """An event breaking the CTI rule on an input without ``AdvanceTimeSettings``."""
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
    NULL_FIELD = 100
    """``NULL_FIELD + i`` (Spark's code): a null in the i-th payload field, not declared optional."""


CHECK_ORDER: tuple[InputRule, ...] = (
    InputRule.ITEM_KIND,
    InputRule.UNKNOWN_KIND, InputRule.NULL_START, InputRule.NULL_END, InputRule.ROW_KIND,
    InputRule.LIFETIME,
    InputRule.START_AT_INFINITY,
    InputRule.PAYLOAD_TYPE, InputRule.LIST_FIELD, InputRule.FIELD_TYPE, InputRule.NULL_FIELD,
    InputRule.ORDERING_ARRIVAL, InputRule.HEARTBEAT_ARRIVAL, InputRule.IMPORT_ARRIVAL, InputRule.IMPORT_ITEM_ARRIVAL,
    InputRule.STAMP_ARRIVAL, InputRule.ARRIVAL_ORDER,
    InputRule.END_WITHOUT_START,
)
"""The order in which an item or table row is checked, on both executors: its kind, its
times (an item's times are checked for their type between its kind and its lifetime), its
lifetime, a start at infinity, its payload (type, nulls), its arrival, then end-edge
pairing. An item or row breaking several rules gets the first one's message. The
reference ingress (``tempo.runtime.ingress``: items and rows) checks in this order; the
Spark ingress builds its ``__bad`` column from it (``tempo.spark.ingress.scan._bad_row``)."""


MESSAGES: dict[InputRule, str] = {
    InputRule.LIFETIME: "end must be after start (lifetimes are [start, end))",
    InputRule.ROW_KIND: "a {shape} input takes rows of kind {takes}, not {kind!r}",
    InputRule.ARRIVAL_ORDER: "arrival times must not decrease within an input",
    InputRule.IMPORT_ARRIVAL: "this input takes part in a CTI import, so every row needs an arrival time",
    InputRule.IMPORT_ITEM_ARRIVAL: (
        "this input takes part in a CTI import, so every item needs an arrival time "
        "(without one the import cannot be ordered against the other input)"
    ),
    InputRule.LIST_FIELD: "payload field {field} is declared a list ({declared}), but holds {got!r}",
    InputRule.FIELD_TYPE: "payload field {field} is declared {declared}, but holds {got!r} (a {kind})",
    InputRule.STAMP_ARRIVAL: (
        "this input is stamped with its arrivals (ingestion time, or processing time on an ArrivalClock), "
        "so every item needs an arrival time"
    ),
    InputRule.START_AT_INFINITY: "an event cannot start at infinity",
    InputRule.ORDERING_ARRIVAL: "an input with ordering settings needs an arrival time on every item",
    InputRule.ORDERING_ARRIVAL_COLUMN: (
        "an input with ordering settings needs an arrival time on every item: give {source} an arrival= column"
    ),
    InputRule.EDGE_KIND_COLUMN: (
        "an EDGE input from a table needs a kind= column (start, end or cti per row): {source} has none"
    ),
    InputRule.UNKNOWN_KIND: "the kind column {column!r} must hold point, interval, start, end, cti or heartbeat (in any case)",
    InputRule.NULL_START: "the {arg} column {column!r} is null",
    InputRule.NULL_END: "the {arg} column {column!r} is null",
    InputRule.NO_END_COLUMN: "a row of kind {kind!r} needs an end= column",
    InputRule.ITEM_KIND: "a {shape} input takes {takes}, got {got}",
    InputRule.NULL_ORDER: (
        "the {arg} column {column!r} is null in {count} row{plural}; the rows are taken in order "
        "of it, so every row needs a value"
    ),
    InputRule.PAYLOAD_TYPE: "payload must be a {expected}, got {got}",
    InputRule.CTI_VIOLATION: (
        "{what} before the current CTI ({cti}); this input has no AdvanceTimeSettings, "
        "so a CTI violation is an error (give it settings with policy DROP or ADJUST)"
    ),
    InputRule.END_WITHOUT_START: "end edge without its start: no open start edge has this start and payload",
    InputRule.HEARTBEAT_ARRIVAL: (
        "a heartbeat row stands for the arrival time it carries, so it needs one "
        "(an arrival= column, not null in the row)"
    ),
    InputRule.ORDER_BACK: (
        "its {column!r} value {value!r} comes before {last!r}, the last value of rows already processed "
        "in an earlier micro-batch: a live input must deliver its rows in the order of that column"
    ),
    InputRule.NULL_FIELD: (
        "column {column!r} is null, but the payload field {cls}.{field} is not optional: "
        "declare it `... | None`, or fill or filter out the nulls"
    ),
}


def message(rule: InputRule, **details: Any) -> str:
    """The words of ``rule``, with the details its message names filled in."""
    return MESSAGES[rule].format(**details) if details else MESSAGES[rule]


def error_class(rule: InputRule) -> type[InputError]:
    """What breaking ``rule`` raises: an import without arrival times cannot be ordered."""
    return ImportOrderError if rule in (InputRule.IMPORT_ARRIVAL, InputRule.IMPORT_ITEM_ARRIVAL) else InputError


CTI_RULE_CODES: dict[int, Rule] = {1: Rule.EARLY_ARRIVAL, 2: Rule.LATE_ARRIVAL, 3: Rule.START_BEFORE_CTI}
"""Spark's codes (its ``__rule`` column) for the rules of an input with ordering settings."""
