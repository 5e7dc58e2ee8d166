"""Bad input, one table of cases run on both executors.

Each row builds a query over some bad input (an item list, or a table written to Parquet,
CSV or held as a pyarrow Table) and says which tempo error it must raise and the words its
message must contain; every row runs on the in-memory executor and on Spark through the
``executor`` fixture, so both raise the same class with the same words. To add a case,
append a ``Case`` to ``CASES``: ``build`` gets a temporary directory for files.

The last tests are the good input next to it: the widenings a table may use (an integer
column for a float field, nulls in an optional field), naive and aware times combined, and
an aware constant against naive payload times (docs/semantics.md 2.5 and 8).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import pytest

import tempo
from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeImportSettings,
    AdvanceTimeSettings,
    Cti,
    CtiViolationError,
    EdgeEnd,
    EdgeStart,
    EventOrderingSettings,
    EventShape,
    ImportOrderError,
    InputError,
    InputSchemaError,
    Interval,
    Point,
    QueryBuildError,
    Stream,
)
from tempo.result import Rule
from tempo.rules import InputRule
from tempo.sources import ArrowSource, CsvSource, ParquetSource


@attrs.frozen
class R:
    k: int
    v: float


@attrs.frozen
class Other:
    k: int


@attrs.frozen
class Opt:
    k: int
    v: float | None


@attrs.frozen
class Checked:
    k: int = attrs.field(validator=attrs.validators.instance_of(int))
    v: float


@attrs.frozen
class Stamp:
    k: int
    t: datetime


T0 = datetime(2024, 1, 1)
UTC0 = T0.replace(tzinfo=timezone.utc)
FLUSH = AdvanceTimeSettings(AdvanceTimeGenerationSettings(None, advance_to_infinity_on_shutdown=True))
EVERY_EVENT = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, advance_to_infinity_on_shutdown=True))


def t(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def ts(*seconds: float | None) -> Any:
    """A naive timestamp column (microseconds) of these seconds after T0 (None: null)."""
    import pyarrow as pa

    return pa.array([None if s is None else t(s) for s in seconds], pa.timestamp("us"))


def _table(columns: dict[str, Any]) -> Any:
    import pyarrow as pa

    return pa.table(columns)


def parquet(tmp: Path, columns: dict[str, Any]) -> str:
    import pyarrow.parquet as pq

    path = tmp / "in.parquet"
    pq.write_table(_table(columns), path)
    return str(path)


# The table most cases start from: three points, one a second.
GOOD = {"ts": ts(1, 2, 3), "k": [1, 2, 3], "v": [1.5, 2.5, 3.5]}


def table_input(
    columns: dict[str, Any],
    shape: EventShape = EventShape.POINT,
    settings: AdvanceTimeSettings | None = FLUSH,
    payload: type = R,
    start: str | None = "ts",
    **source_columns: Any,
) -> Callable[[Path], Stream[Any]]:
    """A query over a Parquet file of ``columns``, read into input ``readings``."""

    def build(tmp: Path) -> Stream[Any]:
        source: ParquetSource[Any] = ParquetSource(parquet(tmp, columns), payload, start=start, **source_columns)
        return Stream.create("readings", source, shape, settings)

    return build


def items_input(
    items: Any, shape: EventShape = EventShape.POINT, settings: AdvanceTimeSettings | None = FLUSH, **create: Any
) -> Callable[[Path], Stream[Any]]:
    """A query over an item list (or whatever ``items`` is) as input ``readings``."""
    return lambda tmp: Stream.create("readings", items, shape, settings, **create)


def with_good(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


def without(name: str) -> dict[str, Any]:
    return {k: v for k, v in GOOD.items() if k != name}


@dataclass(frozen=True)
class Case:
    id: str
    build: Callable[[Path], Stream[Any]]
    error: type[Exception]
    words: tuple[str, ...]
    position: int | None = None
    """For row errors: the row (item) the error must name."""


def _csv(tmp: Path) -> Stream[Any]:
    path = tmp / "in.csv"
    path.write_text("ts,k,value\n2024-01-01 00:00:01,1,1.5\n2024-01-01 00:00:02,2,2.5\n")
    return Stream.create("readings", CsvSource(str(path), R, start="ts"), EventShape.POINT, FLUSH)


def _import_without_arrival(tmp: Path) -> Stream[Any]:
    fast = Stream.create("fast", [Point(t(1), R(1, 1.0), arrival=t(1))], EventShape.POINT, EVERY_EVENT)
    slow = Stream.create(
        "readings",
        ParquetSource(parquet(tmp, GOOD), R, start="ts"),
        EventShape.POINT,
        AdvanceTimeSettings(import_=AdvanceTimeImportSettings("fast")),
    )
    return slow.union(fast)


ORDERED = AdvanceTimeSettings(None, ordering=EventOrderingSettings(timedelta(0), None, None))

CASES: list[Case] = [
    # ---- table sources: columns that do not fit (checked before any row is read) ----
    Case(
        "table-missing-start",
        table_input(GOOD, start="time"),
        InputSchemaError,
        ("input 'readings'", "start='time' names no column", "ts (timestamp), k (integer), v (float)"),
    ),
    Case(
        "table-missing-end",
        table_input(GOOD, EventShape.INTERVAL, end="until"),
        InputSchemaError,
        ("input 'readings'", "end='until' names no column", "its columns are ts (timestamp)"),
    ),
    Case(
        "table-missing-order",
        table_input(GOOD, order="seq"),
        InputSchemaError,
        ("input 'readings'", "order='seq' names no column", "its columns are"),
    ),
    Case(
        "table-missing-arrival", table_input(GOOD, arrival="arr"), InputSchemaError, ("input 'readings'", "arrival='arr' names no column")
    ),
    Case(
        "table-missing-kind",
        table_input(GOOD, EventShape.EDGE, kind="what"),
        InputSchemaError,
        ("input 'readings'", "kind='what' names no column"),
    ),
    Case(
        "table-missing-arrival-as-start",
        table_input(GOOD, start=None, arrival="arr"),
        InputSchemaError,
        ("input 'readings'", "arrival='arr' names no column"),
    ),
    Case(
        "table-missing-payload-field",
        table_input(without("v")),
        InputSchemaError,
        ("input 'readings'", "no column for payload field v (float) of R", "its columns are ts (timestamp), k (integer)"),
    ),
    Case(
        "csv-missing-payload-field",
        _csv,
        InputSchemaError,
        ("input 'readings'", "no column for payload field v (float) of R", "CsvSource("),
    ),
    Case(
        "table-string-for-float",
        table_input(with_good(v=["a", "b", "c"])),
        InputSchemaError,
        ("input 'readings'", "R.v is declared float", "column 'v'", "is a string column", "float or integer columns"),
    ),
    Case(
        "table-float-for-int",
        table_input(with_good(k=[1.0, 2.0, 3.0])),
        InputSchemaError,
        ("R.k is declared int", "is a float column", "takes integer columns"),
    ),
    Case(
        "table-decimal-for-float",
        table_input(with_good(v=[Decimal("1.5")] * 3)),
        InputSchemaError,
        ("R.v is declared float", "is a decimal column"),
    ),
    Case(
        "table-integer-for-datetime",
        table_input({"ts": ts(1, 2), "k": [1, 2], "t": [5, 6]}, payload=Stamp),
        InputSchemaError,
        ("Stamp.t is declared datetime", "is an integer column", "takes timestamp columns"),
    ),
    Case(
        "table-string-start",
        table_input(with_good(ts=["a", "b", "c"])),
        InputSchemaError,
        ("input 'readings'", "start='ts' is a string column", "a timestamp, or an integer count of time_unit since time_origin"),
    ),
    Case(
        "table-float-end",
        table_input(with_good(te=[2.0, 3.0, 4.0]), EventShape.INTERVAL, end="te"),
        InputSchemaError,
        ("end='te' is a float column", "a timestamp, or an integer count of time_unit since time_origin"),
    ),
    Case("table-date-start", table_input(with_good(ts=[date(2024, 1, 1)] * 3)), InputSchemaError, ("start='ts' is a date column",)),
    Case(
        "table-string-order",
        table_input(with_good(seq=["a", "b", "c"]), order="seq"),
        InputSchemaError,
        ("order='seq' is a string column", "an order column must be an integer or a timestamp"),
    ),
    Case(
        "table-integer-kind",
        table_input(with_good(what=[0, 0, 0]), kind="what"),
        InputSchemaError,
        ("kind='what' is an integer column", "a kind column must be a string column"),
    ),
    Case(
        "table-time-origin-without-integer-times",
        table_input(GOOD, time_origin=UTC0),
        InputSchemaError,
        ("time_origin is set", "ts is a timestamp", "leave it out for timestamp columns"),
    ),
    Case(
        "table-file-missing",
        lambda tmp: Stream.create("readings", ParquetSource(str(tmp / "nope.parquet"), R, start="ts"), EventShape.POINT, FLUSH),
        InputSchemaError,
        ("input 'readings'", "nope.parquet', which does not exist"),
    ),
    Case(
        "csv-file-missing",
        lambda tmp: Stream.create("readings", CsvSource(str(tmp / "nope.csv"), R, start="ts"), EventShape.POINT, FLUSH),
        InputSchemaError,
        ("input 'readings'", "nope.csv', which does not exist"),
    ),
    Case(
        "table-edge-without-kind",
        table_input(GOOD, EventShape.EDGE),
        InputSchemaError,
        ("input 'readings'", "an EDGE input from a table needs a kind= column"),
    ),
    # ---- table sources: rows that break a rule (named by input, row and column) ----
    Case(
        "table-null-start",
        table_input(with_good(ts=ts(1, None, 3))),
        InputError,
        ("input 'readings'", "item #1", "the start column 'ts' is null"),
        1,
    ),
    Case(
        "table-null-start-with-ctis",
        table_input(with_good(ts=ts(1, 2, None)), settings=EVERY_EVENT),
        InputError,
        ("input 'readings'", "item #2", "the start column 'ts' is null"),
        2,
    ),
    Case(
        "table-null-arrival-as-start",
        table_input(with_good(arr=ts(1, None, 3)), start=None, arrival="arr"),
        InputError,
        ("input 'readings'", "item #2", "the arrival column 'arr' is null in 1 row", "every row needs a value"),
        2,
    ),
    Case(
        "table-null-order",
        table_input(with_good(seq=[None, 2, None]), order="seq"),
        InputError,
        ("input 'readings'", "item #1", "the order column 'seq' is null in 2 rows"),
        1,
    ),
    Case(
        "table-null-order-with-ctis",
        table_input(with_good(seq=[3, None, 1]), settings=EVERY_EVENT, order="seq"),
        InputError,
        ("item #2", "the order column 'seq' is null in 1 row"),
        2,
    ),
    Case(
        "table-null-end",
        table_input(with_good(te=ts(2, None, 4)), EventShape.INTERVAL, settings=EVERY_EVENT, end="te"),
        InputError,
        ("input 'readings'", "item #1", "the end column 'te' is null"),
        1,
    ),
    Case(
        "table-null-in-int-field",
        table_input(with_good(k=[1, 2, None])),
        InputError,
        ("input 'readings'", "item #2", "column 'k' is null", "R.k is not optional"),
        2,
    ),
    Case(
        "table-null-in-float-field-with-ctis",
        table_input(with_good(v=[1.0, None, 3.0]), settings=EVERY_EVENT),
        InputError,
        ("item #1", "column 'v' is null", "R.v is not optional"),
        1,
    ),
    Case(
        "table-null-in-validated-field",
        table_input(with_good(k=[1, None, 3]), payload=Checked),
        InputError,
        ("input 'readings'", "item #1", "column 'k' is null", "Checked.k is not optional"),
        1,
    ),
    Case(
        "table-unknown-kind",
        table_input(with_good(what=["point", "pointy", "cti"]), kind="what"),
        InputError,
        ("input 'readings'", "item #1", "the kind column 'what' must hold point, interval, start, end, cti or heartbeat"),
        1,
    ),
    Case(
        "table-null-kind",
        table_input(with_good(what=["point", "cti", None]), kind="what"),
        InputError,
        ("item #2", "the kind column 'what' must hold"),
        2,
    ),
    Case(
        "table-kind-not-of-shape",
        table_input(with_good(what=["point", "start", "cti"]), kind="what"),
        InputError,
        ("input 'readings'", "item #1", "a POINT input takes rows of kind point, cti, heartbeat, not 'start'"),
        1,
    ),
    # A heartbeat row's time is its arrival: its start column is ignored (null here), its
    # arrival must be there.
    Case(
        "table-heartbeat-without-arrival-column",
        table_input(with_good(what=["point", "heartbeat", "point"]), kind="what"),
        InputError,
        ("input 'readings'", "item #1", "a heartbeat row stands for the arrival time it carries"),
        1,
    ),
    Case(
        "table-heartbeat-null-arrival",
        table_input(
            with_good(ts=ts(1, None, 3), arr=ts(1, None, 3), what=["point", "heartbeat", "point"], seq=[0, 1, 2]),
            kind="what",
            arrival="arr",
            order="seq",
        ),
        InputError,
        ("input 'readings'", "item #1", "a heartbeat row stands for the arrival time it carries"),
        1,
    ),
    Case(
        "table-heartbeat-null-arrival-with-ordering",
        table_input(
            with_good(arr=ts(1, None, 3), what=["point", "heartbeat", "point"], seq=[0, 1, 2]),
            kind="what",
            arrival="arr",
            order="seq",
            settings=ORDERED,
        ),
        InputError,
        ("item #1", "ordering settings needs an arrival time"),
        1,
    ),
    Case(
        "table-heartbeat-arrival-decreasing",
        table_input(
            with_good(ts=ts(1, None, 3), arr=ts(2, 1, 3), what=["point", "heartbeat", "point"], seq=[0, 1, 2]),
            kind="what",
            arrival="arr",
            order="seq",
        ),
        InputError,
        ("item #1", "arrival times must not decrease"),
        1,
    ),
    Case(
        "table-end-not-after-start",
        table_input(with_good(te=ts(2, 2, 4)), EventShape.INTERVAL, end="te"),
        InputError,
        ("input 'readings'", "item #1", "end must be after start"),
        1,
    ),
    Case(
        "table-first-bad-row-wins",
        table_input(with_good(te=ts(2, 1, None)), EventShape.INTERVAL, end="te"),
        InputError,
        ("item #1", "end must be after start"),
        1,
    ),
    Case(
        "table-arrival-decreasing",
        table_input(with_good(arr=ts(1, 3, 2), seq=[0, 1, 2]), arrival="arr", order="seq"),
        InputError,
        ("input 'readings'", "item #2", "arrival times must not decrease"),
        2,
    ),
    Case(
        "table-end-edge-without-start",
        table_input(
            {"ts": ts(1, 2), "te": ts(None, 5), "what": ["start", "end"], "k": [1, 2], "v": [1.0, 2.0]},
            EventShape.EDGE,
            end="te",
            kind="what",
        ),
        InputError,
        ("input 'readings'", "item #1", "end edge without its start"),
        1,
    ),
    Case(
        "table-import-without-arrival", _import_without_arrival, ImportOrderError, ("input 'readings'", "every row needs an arrival time")
    ),
    Case(
        "table-ordering-without-arrival",
        table_input(GOOD, settings=ORDERED),
        InputSchemaError,
        ("input 'readings'", "ordering settings needs an arrival time", "an arrival= column"),
    ),
    # ---- item lists ----
    Case(
        "items-bare-payload",
        items_input([R(1, 1.0)]),
        InputError,
        ("input 'readings'", "item #0", "takes Point, Cti, Heartbeat, got R", "wrap it as Point(start, payload)"),
        0,
    ),
    Case(
        "items-bare-payload-after-events",
        items_input([Point(t(1), R(1, 1.0)), R(2, 2.0)]),
        InputError,
        ("item #1", "a POINT input takes Point, Cti, Heartbeat, got R", "wrap it as Point(start, payload)"),
        1,
    ),
    Case(
        "items-bare-payload-in-interval-input",
        items_input([Interval(t(1), t(2), R(1, 1.0)), R(2, 2.0)], EventShape.INTERVAL),
        InputError,
        ("item #1", "got R", "wrap it as Interval(start, end, payload)"),
        1,
    ),
    Case(
        "items-wrong-shape",
        items_input([Point(t(1), R(1, 1.0)), Interval(t(1), t(2), R(1, 1.0))]),
        InputError,
        (
            "input 'readings'",
            "item #1",
            "a POINT input takes Point, Cti, Heartbeat, got Interval",
            "declare the input as EventShape.INTERVAL for Interval items",
        ),
        1,
    ),
    Case(
        "items-string-in-an-int-field",
        items_input([Point(t(1), R(1, 1.0)), Point(t(2), R("2", 2.0))]),
        InputError,  # type: ignore[arg-type]
        ("input 'readings'", "item #1", "payload field R.k is declared int, but holds '2' (a str)"),
        1,
    ),
    Case(
        "items-bool-in-a-float-field",
        items_input([Point(t(1), R(1, True))]),
        InputError,
        ("item #0", "payload field R.v is declared float, but holds True (a bool)"),
        0,
    ),
    Case(
        "items-float-in-a-datetime-field",
        items_input([Point(t(1), Stamp(1, 1.5))]),
        InputError,  # type: ignore[arg-type]
        ("item #0", "payload field Stamp.t is declared datetime, but holds 1.5 (a float)"),
        0,
    ),
    Case(
        "items-string-start",
        items_input([Point("2024-01-01", R(1, 1.0))]),
        InputError,  # type: ignore[arg-type]
        ("input 'readings'", "item #0", "start must be a datetime, got str"),
        0,
    ),
    Case(
        "items-date-start",
        items_input([Point(date(2024, 1, 1), R(1, 1.0))]),
        InputError,  # type: ignore[arg-type]
        ("start must be a datetime, got date", "use datetime(y, m, d)"),
        0,
    ),
    Case(
        "items-mixed-payload-types",
        items_input([Point(t(1), R(1, 1.0)), Point(t(2), Other(2))]),
        InputError,
        ("input 'readings'", "item #1", "payload must be a R, got Other"),
        1,
    ),
    Case(
        "items-end-before-start",
        items_input([Interval(t(2), t(1), R(1, 1.0))], EventShape.INTERVAL),
        InputError,
        ("item #0", "end must be after start"),
        0,
    ),
    Case(
        "items-start-at-infinity",
        items_input([Point(datetime.max, R(1, 1.0))]),
        InputError,
        ("item #0", "an event cannot start at infinity"),
        0,
    ),
    Case(
        "items-end-edge-without-start",
        items_input([EdgeEnd(t(1), t(2), R(1, 1.0))], EventShape.EDGE),
        InputError,
        ("item #0", "end edge without its start"),
        0,
    ),
    Case(
        "items-end-edge-other-payload",
        items_input([EdgeStart(t(1), R(1, 1.0)), EdgeEnd(t(1), t(2), R(1, 2.0))], EventShape.EDGE),
        InputError,
        ("item #1", "end edge without its start"),
        1,
    ),
    Case(
        "items-cti-violation-without-settings",
        items_input([Cti(t(5)), Point(t(1), R(1, 1.0))], settings=None),
        CtiViolationError,
        ("input 'readings'", "item #1", "the event starts before the current CTI (2024-01-01 00:00:05)", "no AdvanceTimeSettings"),
        1,
    ),
    Case(
        "items-end-edge-cti-violation",
        items_input([EdgeStart(t(1), R(1, 1.0)), Cti(t(5)), EdgeEnd(t(1), t(3), R(1, 1.0))], EventShape.EDGE, settings=None),
        CtiViolationError,
        ("item #2", "the end edge ends before the current CTI (2024-01-01 00:00:05)"),
        2,
    ),
    Case(
        "items-ordering-without-arrival",
        items_input([Point(t(1), R(1, 1.0))], settings=ORDERED),
        InputError,
        ("item #0", "ordering settings needs an arrival time"),
        0,
    ),
    Case(
        "items-arrival-decreasing",
        items_input([Point(t(1), R(1, 1.0), arrival=t(5)), Point(t(2), R(1, 1.0), arrival=t(4))]),
        InputError,
        ("item #1", "arrival times must not decrease"),
        1,
    ),
    # ---- an item or row breaking two rules gets the first in tempo.rules.CHECK_ORDER ----
    Case(
        "items-two-rules-lifetime-before-payload-type",
        items_input([Interval(t(1), t(2), R(1, 1.0)), Interval(t(3), t(2), Other(2))], EventShape.INTERVAL),
        InputError,
        ("item #1", "end must be after start"),
        1,
    ),
    Case(
        "items-two-rules-payload-type-before-arrival",
        items_input([Point(t(1), R(1, 1.0), arrival=t(5)), Point(t(2), Other(2), arrival=t(4))]),
        InputError,
        ("item #1", "payload must be a R, got Other"),
        1,
    ),
    Case(
        "items-two-rules-start-before-arrival",
        items_input([Point("2024-01-01", R(1, 1.0))], settings=ORDERED),
        InputError,  # type: ignore[arg-type]
        ("item #0", "start must be a datetime, got str"),
        0,
    ),
    Case(
        "items-two-rules-cti-time-before-arrival",
        items_input([Cti("2024-01-01")], settings=ORDERED),
        InputError,  # type: ignore[arg-type]
        ("item #0", "must be a datetime, got str"),
        0,
    ),
    Case(
        "table-two-rules-lifetime-before-arrival",
        table_input(with_good(te=ts(2, 1, 4), arr=ts(1, 0, 2), seq=[0, 1, 2]), EventShape.INTERVAL, end="te", arrival="arr", order="seq"),
        InputError,
        ("item #1", "end must be after start"),
        1,
    ),
    Case(
        "table-two-rules-null-field-before-arrival",
        table_input(with_good(k=[1, None, 3], arr=ts(1, 0, 2), seq=[0, 1, 2]), arrival="arr", order="seq"),
        InputError,
        ("item #1", "column 'k' is null"),
        1,
    ),
    Case(
        "table-two-rules-kind-before-lifetime",
        table_input(with_good(te=ts(2, 1, 4), what=["interval", "start", "cti"]), EventShape.INTERVAL, end="te", kind="what"),
        InputError,
        ("item #1", "INTERVAL input takes rows of kind interval, cti, heartbeat, not 'start'"),
        1,
    ),
    # ---- sources that are not item lists ----
    Case(
        "source-pyarrow-table",
        lambda tmp: Stream.create("readings", _table(GOOD), EventShape.POINT, FLUSH),
        QueryBuildError,
        ("input 'readings'", "Table, not a list of items", "tempo.sources.ArrowSource(table, PayloadClass"),
    ),
    Case(
        "source-pandas-frame",
        lambda tmp: Stream.create("readings", _table(GOOD).to_pandas(), EventShape.POINT, FLUSH),
        QueryBuildError,
        ("input 'readings'", "DataFrame, not a list of items", "tempo.sources.ArrowSource(frame"),
    ),
    Case(
        "source-path",
        lambda tmp: Stream.create("readings", parquet(tmp, GOOD), EventShape.POINT, FLUSH),  # type: ignore[arg-type]
        QueryBuildError,
        ("input 'readings'", "tempo.sources.ParquetSource(path"),
    ),
    Case(
        "source-not-iterable",
        lambda tmp: Stream.create("readings", 42, EventShape.POINT, FLUSH),  # type: ignore[call-overload]
        QueryBuildError,
        ("input 'readings'", "must be a tempo.sources.Source or a list of items", "got int"),
    ),
    Case(
        "source-empty-list-without-type",
        items_input([]),
        QueryBuildError,
        ("input 'readings'", "cannot tell the payload type", "payload_type="),
    ),
    Case(
        "settings-import-as-a-name",
        lambda tmp: Stream.create("readings", [], EventShape.POINT, AdvanceTimeSettings(import_="other"), payload_type=R),  # type: ignore[arg-type]
        QueryBuildError,
        ("AdvanceTimeSettings.import_ must be an AdvanceTimeImportSettings", "AdvanceTimeImportSettings('other')"),
    ),
    Case(
        "source-start-not-a-name",
        lambda tmp: Stream.create("readings", ParquetSource("x.parquet", R, start=3), EventShape.POINT),  # type: ignore[arg-type]
        QueryBuildError,
        ("start= names a column", "got int 3"),
    ),
]


RULES: dict[str, InputRule | Rule] = {
    "items-cti-violation-without-settings": Rule.START_BEFORE_CTI,
    "items-end-edge-cti-violation": Rule.END_BEFORE_CTI,
    "items-bare-payload": InputRule.ITEM_KIND,
    "items-string-in-an-int-field": InputRule.FIELD_TYPE,
    "items-end-edge-without-start": InputRule.END_WITHOUT_START,
    "table-end-edge-without-start": InputRule.END_WITHOUT_START,
    "table-null-order": InputRule.NULL_ORDER,
    "table-null-start": InputRule.NULL_START,
    "table-unknown-kind": InputRule.UNKNOWN_KIND,
    "table-heartbeat-null-arrival": InputRule.HEARTBEAT_ARRIVAL,
    "table-import-without-arrival": InputRule.IMPORT_ARRIVAL,
    "table-ordering-without-arrival": InputRule.ORDERING_ARRIVAL_COLUMN,
    "table-edge-without-kind": InputRule.EDGE_KIND_COLUMN,
    "table-file-missing": InputRule.SOURCE_MISSING,
    "table-string-for-float": InputRule.COLUMNS,
    "items-arrival-decreasing": InputRule.ARRIVAL_ORDER,
    "items-two-rules-lifetime-before-payload-type": InputRule.LIFETIME,
    "items-two-rules-payload-type-before-arrival": InputRule.PAYLOAD_TYPE,
    "items-two-rules-start-before-arrival": InputRule.TIME_TYPE,
    "items-ordering-without-arrival": InputRule.ORDERING_ARRIVAL,
    "table-two-rules-null-field-before-arrival": InputRule.NULL_FIELD,
    "table-two-rules-kind-before-lifetime": InputRule.ROW_KIND,
    "table-two-rules-lifetime-before-arrival": InputRule.LIFETIME,
    "table-missing-start": InputRule.COLUMNS,
}
"""The rule (``InputError.rule``) some cases' errors carry, the same on every executor; every
``InputError`` carries one (an ``InputRule``, or the ``tempo.result.Rule`` a CTI violation
broke), its words in ``InputError.message`` (issue 30: ``rule`` used to hold the words)."""


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, executor: Any, tmp_path: Path) -> None:
    with pytest.raises(Exception) as info:
        executor.run(case.build(tmp_path))
    error = info.value
    assert type(error) is case.error, f"{type(error).__name__}: {error}"
    message = str(error)
    for word in case.words:
        assert word in message, f"{word!r} not in {message!r}"
    assert "Traceback" not in message and "org.apache" not in message
    if case.position is not None:
        assert isinstance(error, InputError) and error.position == case.position
    if isinstance(error, InputError):
        assert isinstance(error.rule, (InputRule, Rule)) and error.message in message, (error.rule, error.message)
        assert error.rule is RULES.get(case.id, error.rule), f"{case.id}: {error.rule!r}"
        again = pickle.loads(pickle.dumps(error))  # as errors cross from Spark's workers
        assert (type(again), again.rule, again.message, str(again)) == (type(error), error.rule, error.message, message)


def test_ids_are_unique() -> None:
    assert len({c.id for c in CASES}) == len(CASES)


def test_a_spark_dataframe_as_source_says_to_wrap_it(spark_session: Any) -> None:
    frame = spark_session.createDataFrame([(1, 1.5)], "k long, v double")
    with pytest.raises(QueryBuildError, match=r"tempo\.spark\.sources\.DataFrameSource\(df, PayloadClass"):
        Stream.create("readings", frame, EventShape.POINT, FLUSH)


def test_a_catalog_table_that_does_not_exist(spark_session: Any) -> None:
    from tempo.spark.sources import SparkTableSource
    from tempo.spark import SparkExecutor

    stream = Stream.create("readings", SparkTableSource("no_such_table", R, start="ts"), EventShape.POINT, FLUSH)
    with pytest.raises(InputSchemaError, match="input 'readings': SparkTableSource\\('no_such_table', R\\) names no table"):
        SparkExecutor(spark_session).run(stream)


# ---- good input next to the bad: what is accepted, and what it gives ---------------------------


def _events(executor: Any, stream: Stream[Any]) -> list[tuple[datetime, datetime, Any]]:
    return sorted(((e.start, e.end, e.payload) for e in executor.run(stream).events), key=lambda e: (e[0], e[2].k))


def test_an_integer_column_fills_a_float_field_as_floats(executor: Any, tmp_path: Path) -> None:
    source = ParquetSource(parquet(tmp_path, with_good(v=[1, 2, 3])), R, start="ts")
    out = _events(executor, Stream.create("readings", source, EventShape.POINT, FLUSH))
    assert [e[2] for e in out] == [R(1, 1.0), R(2, 2.0), R(3, 3.0)]
    assert all(type(e[2].v) is float for e in out)


def test_an_int_in_a_float_field_of_an_item_is_a_float(executor: Any) -> None:
    """As a table's integer column fills a float field (above), and as mypy lets ``R(1, 2)`` be."""
    out = _events(executor, Stream.create("readings", [Point(t(1), R(1, 2)), Point(t(2), R(2, 2.5))], EventShape.POINT, FLUSH))
    assert [e[2] for e in out] == [R(1, 2.0), R(2, 2.5)]
    assert all(type(e[2].v) is float for e in out)


def test_nulls_fill_an_optional_field(executor: Any, tmp_path: Path) -> None:
    source = ParquetSource(parquet(tmp_path, with_good(v=[1.5, None, None])), Opt, start="ts")
    out = _events(executor, Stream.create("readings", source, EventShape.POINT, FLUSH).where(lambda r: r.k > 1))
    assert [e[2] for e in out] == [Opt(2, None), Opt(3, None)]


def test_integer_times_count_from_time_origin(executor: Any, tmp_path: Path) -> None:
    columns = {"us": [0, 1_500_000], "k": [1, 2], "v": [1.0, 2.0]}
    source = ParquetSource(parquet(tmp_path, columns), R, start="us", time_origin=T0, time_unit="us")  # naive origin: UTC
    out = _events(executor, Stream.create("readings", source, EventShape.POINT, FLUSH))
    assert [e[0] for e in out] == [UTC0, UTC0 + timedelta(seconds=1.5)]


def test_an_arrow_table_and_a_pandas_frame_are_sources(executor: Any) -> None:
    for data in (_table(GOOD), _table(GOOD).to_pandas()):
        out = _events(executor, Stream.create("readings", ArrowSource(data, R, start="ts"), EventShape.POINT, FLUSH))
        assert [(e[0], e[2]) for e in out] == [(UTC0 + timedelta(seconds=i + 1), R(i + 1, i + 1.5)) for i in range(3)]


def test_an_empty_table_is_an_empty_input(executor: Any, tmp_path: Path) -> None:
    import pyarrow as pa

    columns = {"ts": pa.array([], pa.timestamp("us")), "k": pa.array([], pa.int64()), "v": pa.array([], pa.float64())}
    source = ParquetSource(parquet(tmp_path, columns), R, start="ts")
    result = executor.run(Stream.create("readings", source, EventShape.POINT, FLUSH))
    assert result.events == [] and result.metrics["readings"].received == 0


def test_a_naive_parquet_time_column_and_a_naive_item_list_combine(executor: Any, tmp_path: Path) -> None:
    """Lifetimes are instants; a naive time (list or column) is UTC. A table's times come
    back aware, so the query's results are aware UTC (semantics.md 8)."""
    table = Stream.create("table", ParquetSource(parquet(tmp_path, GOOD), R, start="ts"), EventShape.POINT, FLUSH)
    items = Stream.create("items", [Point(t(1.5), R(9, 9.0))], EventShape.POINT, FLUSH)
    out = _events(executor, table.union(items))
    assert [(e[0], e[2].k) for e in out] == [
        (UTC0 + timedelta(seconds=1), 1),
        (UTC0 + timedelta(seconds=1.5), 9),
        (UTC0 + timedelta(seconds=2), 2),
        (UTC0 + timedelta(seconds=3), 3),
    ]


def test_naive_and_aware_item_lists_combine_as_instants(executor: Any) -> None:
    naive = Stream.create("naive", [Point(t(2), R(1, 1.0))], EventShape.POINT, FLUSH)
    aware = Stream.create(
        "aware", [Point(UTC0 + timedelta(seconds=1), R(2, 2.0)), Cti(UTC0 + timedelta(seconds=3))], EventShape.POINT, FLUSH, payload_type=R
    )
    out = _events(executor, naive.union(aware))
    assert [(e[0], e[2].k) for e in out] == [(UTC0 + timedelta(seconds=1), 2), (UTC0 + timedelta(seconds=2), 1)]
    # One naive list alone keeps its convention: naive results.
    alone = _events(executor, Stream.create("naive", [Point(t(2), R(1, 1.0))], EventShape.POINT, FLUSH))
    assert alone[0][0] == t(2) and alone[0][0].tzinfo is None


@pytest.mark.parametrize(
    "constant", [datetime(2024, 1, 1, 0, 0, 2), datetime(2024, 1, 1, 1, 0, 2, tzinfo=timezone(timedelta(hours=1)))], ids=["naive", "aware"]
)
@pytest.mark.parametrize("data_aware", [False, True], ids=["naive-data", "aware-data"])
def test_payload_times_compare_as_instants(executor: Any, constant: datetime, data_aware: bool) -> None:
    """00:00:02 UTC, naive or as 01:00:02+01:00, against payload times naive or aware."""
    zone = timezone.utc if data_aware else None
    items = [Point(t(s), Stamp(s, t(s).replace(tzinfo=zone))) for s in (1, 2, 3)]
    stream = Stream.create("readings", items, EventShape.POINT, FLUSH)
    later = _events(executor, stream.where(lambda r: r.t > constant))
    same = _events(executor, stream.where(lambda r: r.t == constant))
    assert [e[2].k for e in later] == [3]
    assert [e[2].k for e in same] == [2]


def test_a_timestamp_payload_column_reads_as_aware_utc(executor: Any, tmp_path: Path) -> None:
    source = ParquetSource(parquet(tmp_path, {"ts": ts(1), "k": [1], "t": ts(7)}), Stamp, start="ts")
    out = _events(executor, Stream.create("readings", source, EventShape.POINT, FLUSH))
    assert out[0][2] == Stamp(1, UTC0 + timedelta(seconds=7)) and out[0][2].t.tzinfo is not None


def test_a_csv_source_reads_the_same_on_both_executors(executor: Any, tmp_path: Path) -> None:
    """Both executors infer a CSV's column types (pyarrow, Spark's inferSchema); the checks
    see integer, float and timestamp columns in both."""
    path = tmp_path / "in.csv"
    path.write_text("ts,k,v\n2024-01-01 00:00:01,1,1.5\n2024-01-01 00:00:02,2,2\n")
    out = _events(executor, Stream.create("readings", CsvSource(str(path), R, start="ts"), EventShape.POINT, FLUSH))
    assert [(e[0], e[2]) for e in out] == [(UTC0 + timedelta(seconds=1), R(1, 1.5)), (UTC0 + timedelta(seconds=2), R(2, 2.0))]


def test_a_json_lines_directory_reads_the_same_on_both_executors(executor: Any, tmp_path: Path) -> None:
    """Two files of JSON Lines (read in name order): times as ISO-8601 text in four spellings
    (Z, an offset, none: UTC, fractions), an int in a float field, a missing optional field,
    an extra field (ignored), a CTI row; the order column puts the rows in input order.
    With a CTI after every event: the row at 00:00:01.5, received after 00:00:03, is dropped."""
    from tempo.sources import JsonSource

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text(
        '{"seq": 0, "ts": "2024-01-01T00:00:01Z", "k": 1, "v": 1.5, "note": "extra", "kind": "point"}\n'
        '{"seq": 2, "ts": "2024-01-01T01:00:03+01:00", "k": 3, "kind": "point"}\n'
    )
    (folder / "b.jsonl").write_text(
        '{"seq": 1, "ts": "2024-01-01 00:00:02.250000", "k": 2, "v": 2, "kind": "Point"}\n'
        '{"seq": 3, "ts": "2024-01-01T00:00:01.5Z", "k": 4, "v": 4.0, "kind": "point"}\n'
        '{"seq": 4, "ts": "2024-01-01T00:00:09Z", "kind": "cti"}\n'
    )
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, advance_to_infinity_on_shutdown=True), policy=AdvanceTimePolicy.DROP)
    source = JsonSource(str(folder), Opt, start="ts", kind="kind", order="seq")
    result = executor.run(Stream.create("readings", source, EventShape.POINT, settings))
    assert [(e.start, e.payload) for e in result.events] == [
        (UTC0 + timedelta(seconds=1), Opt(1, 1.5)),
        (UTC0 + timedelta(seconds=2.25), Opt(2, 2.0)),
        (UTC0 + timedelta(seconds=3), Opt(3, None)),
    ]
    assert [(r.position, r.item.payload) for r in result.rejected] == [(3, Opt(4, 4.0))]
    # A CTI after each event at its start (the dropped one's, 1.5 s, is behind and ignored), the
    # explicit one at 9 s, and infinity at the end.
    assert result.ctis == [UTC0 + timedelta(seconds=s) for s in (1, 2.25, 3, 9)] + [tempo.INFINITY]
    assert (result.metrics["readings"].received, result.metrics["readings"].ctis_ignored) == (4, 1)


@attrs.frozen
class Stamped:
    at: datetime
    k: str


@pytest.mark.parametrize("query_aware", [False, True], ids=["naive-query", "aware-query"])
def test_output_payload_times_follow_the_query_convention(executor: Any, query_aware: bool) -> None:
    """semantics.md 8: a payload datetime comes back in the query's convention, the same
    instant: naive UTC in a naive query, aware UTC in one with aware times (an aware +02:00
    payload time 02:00 is 00:00 UTC)."""
    t0 = datetime(2024, 1, 1)
    plus2 = timezone(timedelta(hours=2))
    lifetimes = (lambda t: t.replace(tzinfo=timezone.utc)) if query_aware else (lambda t: t)
    items = [
        Point(lifetimes(t0), Stamped(t0, "naive")),
        Point(lifetimes(t0 + timedelta(seconds=1)), Stamped(datetime(2024, 1, 1, 2, tzinfo=plus2), "plus2")),
        Cti(lifetimes(datetime.max)),
    ]
    out = executor.run(Stream.create("stamped", items, EventShape.POINT)).payloads()
    utc = timezone.utc if query_aware else None
    assert sorted(out, key=lambda s: s.k) == [Stamped(t0.replace(tzinfo=utc), "naive"), Stamped(t0.replace(tzinfo=utc), "plus2")]
    assert all(s.at.tzinfo is utc for s in out)
