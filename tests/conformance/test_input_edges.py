"""Three input edges, one decision each on every executor (docs/semantics.md 2.5):

* timestamps and durations of any Arrow unit (s, ms, us, ns; with or without a time zone)
  are read exactly, in time columns and payload fields alike, and a value with a part below
  a microsecond is an ``InputError`` (``InputRule.SUB_MICROSECOND``) naming the row;
* an integer time column needs ``time_unit=`` (else ``InputSchemaError`` before any row is
  read), and is scaled by it exactly;
* a payload field of a type not every executor holds is a ``QueryBuildError`` when the
  query is built; ``timedelta`` fields, which every executor holds, run everywhere.

Expected outputs are written by hand.
"""

from __future__ import annotations

import decimal  # noqa: F401  # read by the payload classes exec'd below
import enum
import typing  # noqa: F401  # read by the payload classes exec'd below
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest

from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    EventShape,
    InputError,
    InputSchemaError,
    Point,
    QueryBuildError,
    Stream,
)
from tempo.rules import InputRule
from tempo.sources import ArrowSource, ParquetSource

FLUSH = AdvanceTimeSettings(AdvanceTimeGenerationSettings(None, advance_to_infinity_on_shutdown=True))
T0 = datetime(2024, 1, 1)
UTC0 = T0.replace(tzinfo=timezone.utc)


@attrs.frozen
class Timed:
    k: int
    at: datetime
    took: timedelta


# The finest part each unit holds, so that a reader cutting it shows.
FINEST = {"s": timedelta(seconds=1), "ms": timedelta(milliseconds=1), "us": timedelta(microseconds=1), "ns": timedelta(microseconds=1)}


def _table(unit: str, zone: str | None, ns_extra: int = 0) -> Any:
    """Two intervals (start, end, a payload time and duration) in ``unit``; ``ns_extra``
    nanoseconds added to the second row's start (ns only)."""
    import pyarrow as pa

    step = FINEST[unit]
    starts = [T0 + 2 * step, T0 + 5 * step]
    ns = pa.array([int((t - datetime(1970, 1, 1)) / timedelta(microseconds=1)) * 1000 for t in starts], pa.int64())
    if ns_extra:
        ns = pa.array([ns[0].as_py(), ns[1].as_py() + ns_extra], pa.int64())
    stamp = pa.timestamp(unit, tz=zone)
    start = ns.cast(pa.timestamp("ns", tz=zone)).cast(stamp) if not ns_extra else ns.cast(pa.timestamp("ns", tz=zone))
    return pa.table(
        {
            "ts": start,
            "te": pa.array([t + 3 * step for t in starts], pa.timestamp("us")).cast(pa.timestamp(unit)),
            "k": [1, 2],
            "at": pa.array([T0 + step, T0 + 7 * step], pa.timestamp("us")).cast(pa.timestamp(unit, tz=zone)),
            "took": pa.array([step, 4 * step], pa.duration("us")).cast(pa.duration(unit)),
        }
    )


def _expected(unit: str) -> list[tuple[datetime, datetime, Timed]]:
    step = FINEST[unit]
    return [
        (UTC0 + 2 * step, UTC0 + 5 * step, Timed(1, UTC0 + step, step)),
        (UTC0 + 5 * step, UTC0 + 8 * step, Timed(2, UTC0 + 7 * step, 4 * step)),
    ]


def _run(executor: Any, source: Any, shape: EventShape = EventShape.INTERVAL) -> list[tuple[datetime, datetime, Any]]:
    result = executor.run(Stream.create("timed", source, shape, FLUSH))
    return sorted((e.start, e.end, e.payload) for e in result.events)


def _source(table: Any, how: str, tmp_path: Path) -> Any:
    """``table`` of intervals as an input: written to a Parquet file, or as it is."""
    if how == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, tmp_path / "in.parquet")
        return ParquetSource(str(tmp_path / "in.parquet"), Timed, start="ts", end="te")
    return ArrowSource(table, Timed, start="ts", end="te")


@pytest.mark.parametrize("zone", [None, "Europe/Paris"], ids=["naive", "zoned"])
@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
@pytest.mark.parametrize("how", ["parquet", "arrow"])
def test_timestamps_and_durations_of_every_unit_are_read_exactly(
    executor: Any, tmp_path: Path, unit: str, zone: str | None, how: str
) -> None:
    """Before: a nanosecond Parquet file was Spark's PARQUET_TYPE_ILLEGAL, a duration column in
    Parquet an "integer column" on Spark, durations of another unit than us misread by the
    vectorised executor, and ``timedelta`` fields had no Spark column."""
    source = _source(_table(unit, zone), how, tmp_path)
    assert _run(executor, source) == _expected(unit)


def test_a_parquet_file_written_by_pandas_is_read_exactly(executor: Any, tmp_path: Path) -> None:
    """pandas writes ``timestamp[ns]`` (and ``duration[ns]``), even for whole seconds."""
    import pandas as pd

    frame = pd.DataFrame(
        {
            "ts": pd.to_datetime(["2024-01-01 00:00:01", "2024-01-01 00:00:02.000250"], format="ISO8601"),
            "k": [1, 2],
            "at": pd.to_datetime(["2024-01-01 10:00:00", "2024-01-01 11:00:00.5"], format="ISO8601"),
            "took": pd.to_timedelta(["1s", "1500us"]),
        }
    )
    frame.to_parquet(tmp_path / "in.parquet")
    out = _run(executor, ParquetSource(str(tmp_path / "in.parquet"), Timed, start="ts"), EventShape.POINT)
    us = timedelta(microseconds=1)
    assert out == [
        (UTC0 + timedelta(seconds=1), UTC0 + timedelta(seconds=1) + us, Timed(1, UTC0 + timedelta(hours=10), timedelta(seconds=1))),
        (
            UTC0 + timedelta(seconds=2, microseconds=250),
            UTC0 + timedelta(seconds=2, microseconds=251),
            Timed(2, UTC0 + timedelta(hours=11, milliseconds=500), timedelta(microseconds=1500)),
        ),
    ]


def _nanos(column: str, row: int, extra: int = 1) -> Any:
    """The good table in ns, one value of ``column`` at ``row`` moved by ``extra`` ns."""
    import pyarrow as pa

    table = _table("ns", None)
    i = table.schema.get_field_index(column)
    values = table.column(i).cast(pa.int64()).to_pylist()
    values[row] += extra
    return table.set_column(i, column, pa.array(values, pa.int64()).cast(table.schema.field(i).type))


@pytest.mark.parametrize(
    "column, row, what",
    [("ts", 1, "the start time"), ("te", 0, "the end time"), ("at", 1, "payload field Timed.at"), ("took", 0, "payload field Timed.took")],
)
@pytest.mark.parametrize("how", ["parquet", "arrow"])
def test_a_value_below_a_microsecond_is_an_input_error(executor: Any, tmp_path: Path, column: str, row: int, what: str, how: str) -> None:
    """Before: a raw ``ArrowInvalid`` in memory, the value cut silently on the vectorised
    executor, PARQUET_TYPE_ILLEGAL on Spark."""
    source = _source(_nanos(column, row), how, tmp_path)
    with pytest.raises(InputError) as info:
        executor.run(Stream.create("timed", source, EventShape.INTERVAL, FLUSH))
    error = info.value
    assert type(error) is InputError and error.position == row and error.rule is InputRule.SUB_MICROSECOND
    text = str(error)
    assert text.startswith(f"input 'timed', item #{row}")
    assert f"column {column!r} (" in text and f"read into {what}, holds a value with a part below a microsecond" in text


def test_a_value_below_a_microsecond_comes_after_null_times_and_before_the_row_kind(executor: Any, tmp_path: Path) -> None:
    """CHECK_ORDER: a row's null times, then its values below a microsecond, then its kind
    against the shape; a row's payload below a microsecond counts only for an event."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ns = [1_704_067_201_000_000_000 + i * 1_000_000_000 for i in range(4)]
    table = pa.table(
        {
            "ts": pa.array([ns[0], None, ns[2] + 1, ns[3]], pa.int64()).cast(pa.timestamp("ns")),
            "what": ["cti", "point", "start", "point"],
            "k": [0, 1, 2, 3],
            "at": pa.array([ns[0] + 7, ns[1], ns[2], ns[3]], pa.int64()).cast(pa.timestamp("ns")),  # row 0 a CTI: not read
            "took": pa.array([0, 0, 0, 0], pa.duration("ns")),
        }
    )
    pq.write_table(table, tmp_path / "in.parquet")
    source = ParquetSource(str(tmp_path / "in.parquet"), Timed, start="ts", kind="what")
    with pytest.raises(InputError) as info:  # row 1: a null start
        executor.run(Stream.create("timed", source, EventShape.POINT, FLUSH))
    assert info.value.position == 1 and "the start column 'ts' is null" in str(info.value)
    pq.write_table(
        table.set_column(0, "ts", pa.array([ns[0], ns[1], ns[2] + 1, ns[3]], pa.int64()).cast(pa.timestamp("ns"))), tmp_path / "in.parquet"
    )
    with pytest.raises(InputError) as info:  # row 2: a start edge in a POINT input, its start below a microsecond
        executor.run(Stream.create("timed", source, EventShape.POINT, FLUSH))
    assert info.value.position == 2 and info.value.rule is InputRule.SUB_MICROSECOND


@attrs.frozen
class Reading:
    k: int


def _integers(tmp_path: Path, values: list[int]) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"t": pa.array(values, pa.int64()), "k": list(range(len(values)))}), tmp_path / "in.parquet")
    return str(tmp_path / "in.parquet")


def test_an_integer_time_column_without_time_unit_is_refused(executor: Any, tmp_path: Path) -> None:
    """Before: epoch seconds read as microseconds, windows landing in 1970."""
    source = ParquetSource(_integers(tmp_path, [1_704_067_201, 1_704_067_202]), Reading, start="t")
    with pytest.raises(InputSchemaError) as info:
        executor.run(Stream.create("secs", source, EventShape.POINT, FLUSH))
    assert str(info.value).startswith("input 'secs': start='t' is an integer column of ParquetSource(")
    assert "but the source has no time_unit" in str(info.value) and 'time_unit="s"' in str(info.value)


@pytest.mark.parametrize(
    "unit, values, seconds",
    [
        ("s", [1_704_067_201, 1_704_067_262], [1, 62]),
        ("ms", [1_704_067_201_500, 1_704_067_202_001], [1.5, 2.001]),
        ("us", [1_704_067_201_000_001, 1_704_067_202_000_000], [1.000001, 2]),
        ("ns", [1_704_067_201_000_001_000, 1_704_067_202_000_000_000], [1.000001, 2]),
    ],
)
def test_integer_times_are_scaled_by_their_unit(executor: Any, tmp_path: Path, unit: Any, values: list[int], seconds: list[float]) -> None:
    source = ParquetSource(_integers(tmp_path, values), Reading, start="t", order="t", time_unit=unit)
    out = _run(executor, source, EventShape.POINT)
    assert [e[0] for e in out] == [UTC0 + timedelta(microseconds=round(s * 1_000_000)) for s in seconds]


def test_integer_times_count_their_unit_from_time_origin(executor: Any, tmp_path: Path) -> None:
    source = ParquetSource(_integers(tmp_path, [0, 90]), Reading, start="t", time_unit="s", time_origin=T0)
    assert [e[0] for e in _run(executor, source, EventShape.POINT)] == [UTC0, UTC0 + timedelta(seconds=90)]


def test_integer_nanoseconds_below_a_microsecond_are_an_input_error(executor: Any, tmp_path: Path) -> None:
    source = ParquetSource(_integers(tmp_path, [1_000, 2_500]), Reading, start="t", time_unit="ns")
    with pytest.raises(InputError) as info:
        executor.run(Stream.create("nanos", source, EventShape.POINT, FLUSH))
    assert info.value.position == 1 and info.value.rule is InputRule.SUB_MICROSECOND
    assert "column 't' (integer, time_unit=\"ns\"), read into the start time" in str(info.value)


def test_time_unit_without_an_integer_time_column_is_refused(executor: Any, tmp_path: Path) -> None:
    table = _table("us", None)
    with pytest.raises(InputSchemaError, match="time_unit is set, but no time column of ArrowSource.* is an integer column"):
        executor.run(Stream.create("timed", ArrowSource(table, Timed, start="ts", end="te", time_unit="s"), EventShape.INTERVAL, FLUSH))


class Color(enum.Enum):
    RED = 1


@pytest.mark.parametrize(
    "annotation, shown, use",
    [
        ("object", "object", "one of bool, int, float, str, datetime, timedelta"),
        ("typing.Any", "Any", "one of bool"),
        ("Color", "Color", "str (the member's name)"),
        ("tuple[int, str]", "tuple[int, str]", "list[X] or tuple[X, ...]"),
        ("int | str", "int | str", "one type per field"),
        ("list[list[int]]", "list[list[int]]", "a list of records"),
        ("typing.Literal['a', 'b']", "Literal['a', 'b']", "the values' own type"),
        ("decimal.Decimal", "Decimal", "float"),
        ("dict[str, int] | None", "dict[str, int]", "a record class"),
    ],
)
def test_a_payload_field_not_every_executor_holds_is_refused_on_every_executor(
    executor: Any, annotation: str, shown: str, use: str
) -> None:
    """Before: such fields ran in memory and failed later elsewhere ("type 'object'")."""
    namespace: dict[str, Any] = {**globals()}  # the annotations resolve in this module (decimal, typing, Color)
    exec(f"@attrs.frozen\nclass Odd:\n    k: int\n    x: {annotation}\n", namespace)
    odd = namespace["Odd"]
    with pytest.raises(QueryBuildError) as info:
        executor.run(Stream.create("odd", [], EventShape.POINT, payload_type=odd).where(lambda r: r.k > 0))
    assert str(info.value).startswith(f"payload field Odd.x is typed {shown}, which tempo's executors do not all hold")
    assert f"; use {use}" in str(info.value)


@attrs.frozen
class Lap:
    k: int
    took: timedelta
    best: timedelta | None


def test_timedelta_fields_run_on_every_executor(executor: Any) -> None:
    """Before: the Spark executor had no column for a ``timedelta`` field."""
    items = [
        Point(T0, Lap(1, timedelta(seconds=90), None)),
        Point(T0 + timedelta(seconds=1), Lap(2, timedelta(microseconds=-1), timedelta(0))),
    ]
    out = executor.run(Stream.create("laps", items, EventShape.POINT, FLUSH).where(lambda r: r.k > 0)).payloads()
    assert sorted(out, key=lambda r: r.k) == [Lap(1, timedelta(seconds=90), None), Lap(2, timedelta(microseconds=-1), timedelta(0))]


def test_a_rejected_rows_payload_holds_its_fields_as_declared(executor: Any) -> None:
    """Rows k=1 at 0 s, k=2 at 10 s, k=3 at 0 s, a CTI generated after every event (DROP):
    k=3 starts before the CTI at 10 s and is dropped. Its rejection's item is the payload as
    the row gives it, on every executor: its time an aware datetime, its duration a timedelta
    (not the microseconds a column holds)."""
    import pyarrow as pa

    from tempo import AdvanceTimePolicy

    table = pa.table(
        {
            "ts": pa.array([UTC0, UTC0 + timedelta(seconds=10), UTC0], pa.timestamp("us", tz="UTC")),
            "k": pa.array([1, 2, 3], pa.int64()),
            "at": pa.array([UTC0 + timedelta(hours=k) for k in (1, 2, 3)], pa.timestamp("ms", tz="UTC")),
            "took": pa.array([timedelta(seconds=k) for k in (1, 2, 3)], pa.duration("us")),
        }
    )
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, advance_to_infinity_on_shutdown=True), policy=AdvanceTimePolicy.DROP)
    result = executor.run(Stream.create("timed", ArrowSource(table, Timed, start="ts"), EventShape.POINT, settings))
    assert [j.item for j in result.rejected] == [Point(UTC0, Timed(3, UTC0 + timedelta(hours=3), timedelta(seconds=3)))]
    assert [type(j.item.payload.took) for j in result.rejected] == [timedelta]
