"""The rules an input's items and rows must pass, and their words: one table for every ingress.

An item or row breaking one of these stops the run with an ``InputError`` (or
``ImportOrderError``) carrying the rule's message. Each rule has a code: the Spark ingress
computes the code of the first rule a row breaks as a column (``__bad``) and reads the
words from here, so both executors say the same. The rules an *event* can break against a
CTI (and which the policy then drops or adjusts) are ``tempo.result.Rule``; Spark's codes
for those are ``CTI_RULE_CODES``.
"""

from __future__ import annotations

from typing import Any

from tempo.errors import ImportOrderError, InputError, InputRule, RuleText
from tempo.result import Rule

__all__ = ["CHECK_ORDER", "CTI_RULE_CODES", "InputRule", "MESSAGES", "error_class", "message"]


CHECK_ORDER: tuple[InputRule, ...] = (
    InputRule.ITEM_KIND,
    InputRule.UNKNOWN_KIND,
    InputRule.NULL_START,
    InputRule.NULL_END,
    InputRule.SUB_MICROSECOND,
    InputRule.ROW_KIND,
    InputRule.LIFETIME,
    InputRule.START_AT_INFINITY,
    InputRule.PAYLOAD_TYPE,
    InputRule.LIST_FIELD,
    InputRule.FIELD_TYPE,
    InputRule.NULL_FIELD,
    InputRule.ORDERING_ARRIVAL,
    InputRule.HEARTBEAT_ARRIVAL,
    InputRule.IMPORT_ARRIVAL,
    InputRule.IMPORT_ITEM_ARRIVAL,
    InputRule.STAMP_ARRIVAL,
    InputRule.ARRIVAL_ORDER,
    InputRule.END_WITHOUT_START,
)
"""The order in which an item or table row is checked, on both executors: its kind, its
times (an item's times are checked for their type between its kind and its lifetime), its
lifetime, a start at infinity, its payload (type, nulls), its arrival, then end-edge
pairing. A table row's values are read with its times: a value below a microsecond in any
time or payload column it uses (``SUB_MICROSECOND``) comes right after its null times. An
item or row breaking several rules gets the first one's message. The
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
    InputRule.EDGE_KIND_COLUMN: ("an EDGE input from a table needs a kind= column (start, end or cti per row): {source} has none"),
    InputRule.UNKNOWN_KIND: "the kind column {column!r} must hold point, interval, start, end, cti or heartbeat (in any case)",
    InputRule.NULL_START: "the {arg} column {column!r} is null",
    InputRule.NULL_END: "the {arg} column {column!r} is null",
    InputRule.NO_END_COLUMN: "a row of kind {kind!r} needs an end= column",
    InputRule.ITEM_KIND: "a {shape} input takes {takes}, got {got}",
    InputRule.NULL_ORDER: (
        "the {arg} column {column!r} is null in {count} row{plural}; the rows are taken in order of it, so every row needs a value"
    ),
    InputRule.PAYLOAD_TYPE: "payload must be a {expected}, got {got}",
    InputRule.CTI_VIOLATION: (
        "{what} before the current CTI ({cti}); this input has no AdvanceTimeSettings, "
        "so a CTI violation is an error (give it settings with policy DROP or ADJUST)"
    ),
    InputRule.END_WITHOUT_START: "end edge without its start: no open start edge has this start and payload",
    InputRule.HEARTBEAT_ARRIVAL: (
        "a heartbeat row stands for the arrival time it carries, so it needs one (an arrival= column, not null in the row)"
    ),
    InputRule.ORDER_BACK: (
        "its {column!r} value {value!r} comes before {last!r}, the last value of rows already processed "
        "in an earlier micro-batch: a live input must deliver its rows in the order of that column"
    ),
    InputRule.ORDER_REPEAT: (
        "a repeat of {column!r} value {value!r}, first seen in {where}: the column counts the input's rows "
        "from {first!r} (dense_order_from), one number each, so no two rows may have the same"
    ),
    InputRule.SUB_MICROSECOND: (
        "column {column!r} ({type}), read into {what}, holds a value with a part below a microsecond: tempo's "
        "times are whole microseconds, so it cannot be read exactly; round or truncate the column to microseconds"
    ),
    InputRule.NULL_FIELD: (
        "column {column!r} is null, but the payload field {cls}.{field} is not optional: "
        "declare it `... | None`, or fill or filter out the nulls"
    ),
}


def message(rule: InputRule, **details: Any) -> RuleText:
    """The words of ``rule``, with the details its message names filled in; the text carries
    the rule (``RuleText``), so the ``InputError`` raised with it has it as ``rule``."""
    return RuleText(MESSAGES[rule].format(**details) if details else MESSAGES[rule], rule)


def error_class(rule: InputRule) -> type[InputError]:
    """What breaking ``rule`` raises: an import without arrival times cannot be ordered."""
    return ImportOrderError if rule in (InputRule.IMPORT_ARRIVAL, InputRule.IMPORT_ITEM_ARRIVAL) else InputError


CTI_RULE_CODES: dict[int, Rule] = {1: Rule.EARLY_ARRIVAL, 2: Rule.LATE_ARRIVAL, 3: Rule.START_BEFORE_CTI}
"""Spark's codes (its ``__rule`` column) for the rules of an input with ordering settings."""
