"""What a run returns, beyond its events: what it withheld, and its typed tables.

Every test runs on each executor (the ``executor`` fixture); expectations are written by
hand from docs/semantics.md (6, the release rule) and the ``Result`` docstrings.

* ``result.withheld``: the output events that a CTI at infinity after the run would still
  release, and the earliest start among them; one ``UnreleasedResultsWarning`` says so.
* ``result.to_arrow()`` / ``to_pandas()`` / ``rejections_table()``: typed columns from the
  payload annotations, the lifetime as ``tempo_start`` / ``tempo_end``, the same schema
  when empty.
* Payload fields named ``start`` and ``end`` never clash with the lifetime columns; the
  names tempo uses for its columns are reserved.

``T(s)`` is 2024-01-01 00:00:00 plus ``s`` seconds (naive); in Arrow tables every time is
``timestamp[us, UTC]``, which reads back as aware UTC (``U(s)``).
"""

from __future__ import annotations

import re
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest

from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Cti,
    EdgeStart,
    EventOrderingSettings,
    EventShape,
    InMemoryExecutor,
    Interval,
    Point,
    QueryBuildError,
    Result,
    Stream,
    UnreleasedResultsWarning,
    Withheld,
)
from tests.conformance.compare import check_result

pa = pytest.importorskip("pyarrow")

BASE = datetime(2024, 1, 1)


def T(s: float) -> datetime:
    return BASE + timedelta(seconds=s)


def U(s: float) -> datetime:
    """``T(s)`` as an Arrow timestamp reads back: aware UTC."""
    return T(s).replace(tzinfo=timezone.utc)


INF_UTC = datetime.max.replace(tzinfo=timezone.utc)


@attrs.frozen
class V:
    v: int


@attrs.frozen
class Count:
    n: int


def run(executor: Any, stream: Stream[Any]) -> Result[Any]:
    result: Result[Any] = executor.run(stream)
    check_result(result)
    return result


def quiet_run(executor: Any, stream: Stream[Any]) -> Result[Any]:
    """Run and assert that no UnreleasedResultsWarning was emitted."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnreleasedResultsWarning)
        return run(executor, stream)


FLUSH = AdvanceTimeSettings(AdvanceTimeGenerationSettings(None, advance_to_infinity_on_shutdown=True))

# --------------------------------------------------------------------------------------
# withheld results
# --------------------------------------------------------------------------------------


def test_a_pass_through_withholds_what_starts_at_or_after_the_last_cti(executor: Any) -> None:
    """* @1, * @2, |3, * @4, * @5, * @7 (explicit CTIs only): CTI 3 releases 1 and 2; 4, 5
    and 7 wait for a CTI past their start. 3 events withheld, the earliest from 4."""
    items = [Point(T(1), V(1)), Point(T(2), V(2)), Cti(T(3)), Point(T(4), V(4)), Point(T(5), V(5)), Point(T(7), V(7))]
    with pytest.warns(UnreleasedResultsWarning) as caught:
        r = run(executor, Stream.create("in", items, EventShape.POINT))
    assert [e.payload.v for e in r.events] == [1, 2]
    assert r.metrics["in"].admitted == 5
    assert r.withheld == Withheld(events=3, waiting_for=T(4))
    ours = [w for w in caught if w.category is UnreleasedResultsWarning]
    assert len(ours) == 1
    text = str(ours[0].message)
    for words in (
        "3 output events",
        "2024-01-01 00:00:04",
        "last output CTI is 2024-01-01 00:00:03",
        "advance_to_infinity_on_shutdown=True",
        "AdvanceTimeSettings.replay()",
    ):
        assert words in text, (words, text)
    assert ours[0].filename == __file__  # points at the caller of run, not into tempo


def test_windows_not_yet_closed_count_as_withheld(executor: Any) -> None:
    """tumbling(10 s) count over * @1, * @5, * @12, |20, * @25, * @31, * @47.

    CTI 20 completes [0,10) (n 2) and [10,20) (n 1), released by output CTI 20. [20,30),
    [30,40) and [40,50) are still open inside the window operator: no output event exists
    for them yet, but a CTI at infinity would emit and release all three, from 20."""
    items = [
        Point(T(1), V(1)),
        Point(T(5), V(2)),
        Point(T(12), V(3)),
        Cti(T(20)),
        Point(T(25), V(4)),
        Point(T(31), V(5)),
        Point(T(47), V(6)),
    ]
    query = Stream.create("in", items, EventShape.POINT).tumbling(timedelta(seconds=10)).aggregate(lambda w: Count(w.count()))
    with pytest.warns(UnreleasedResultsWarning, match="3 output events .*2024-01-01 00:00:20"):
        r = run(executor, query)
    assert sorted((e.start, e.payload.n) for e in r.events) == [(T(0), 2), (T(10), 1)]
    assert r.ctis == [T(20)]
    assert r.withheld == Withheld(3, T(20))


def test_no_cti_at_all_withholds_everything(executor: Any) -> None:
    """An input without settings nor Cti items: its two events are admitted and never
    released; the message says that no output CTI came."""
    with pytest.warns(UnreleasedResultsWarning, match="2 output events .*no output CTI came"):
        r = run(executor, Stream.create("in", [Point(T(6), V(1)), Point(T(2), V(2))], EventShape.POINT))
    assert r.events == [] and r.ctis == []
    assert r.withheld == Withheld(2, T(2))


def test_one_event_withheld_is_worded_in_the_singular(executor: Any) -> None:
    """A CTI of one event with delay 0 (docs/semantics.md 3.4): * @1 -> |1, * @3 -> |3,
    * @6 -> |6; 1 and 3 are released, 6 waits for a later CTI."""
    gen = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1))
    items = [Point(T(1), V(1)), Point(T(3), V(3)), Point(T(6), V(6))]
    with pytest.warns(UnreleasedResultsWarning, match="^1 output event was not released"):
        r = run(executor, Stream.create("in", items, EventShape.POINT, gen))
    assert [e.payload.v for e in r.events] == [1, 3]
    assert r.withheld == Withheld(1, T(6))


def test_the_flush_withholds_nothing_and_does_not_warn(executor: Any) -> None:
    """The same inputs ending with a CTI at infinity (AdvanceTimeSettings.replay()'s
    spelling) release everything: withheld is None and nothing is warned."""
    items = [Point(T(1), V(1)), Point(T(25), V(2)), Point(T(47), V(3))]
    query = Stream.create("in", items, EventShape.POINT, FLUSH).tumbling(timedelta(seconds=10)).aggregate(lambda w: Count(w.count()))
    r = quiet_run(executor, query)
    assert len(r.events) == 3 and r.withheld is None


def test_a_run_that_released_everything_without_a_flush_does_not_warn(executor: Any) -> None:
    """* @1, * @2, |5: the CTI released both; nothing waits, though no CTI is at infinity."""
    r = quiet_run(executor, Stream.create("in", [Point(T(1), V(1)), Point(T(2), V(2)), Cti(T(5))], EventShape.POINT))
    assert len(r.events) == 2 and r.withheld is None


def test_a_join_withholds_the_pairs_after_its_cti(executor: Any) -> None:
    """Left [0,10) and [12,20); right * @3, * @15. Both inputs have |11 after their
    first event; the join's CTI is 11: the pair at 3 is released, the pair at 15 (the
    right point inside [12,20)) waits."""
    left = Stream.create("l", [Interval(T(0), T(10), V(1)), Cti(T(11)), Interval(T(12), T(20), V(2))], EventShape.INTERVAL)
    right = Stream.create("r", [Point(T(3), V(10)), Cti(T(11)), Point(T(15), V(20))], EventShape.POINT)
    query = left.join(right, on=lambda a, b: a.v < b.v, select=lambda a, b: V(a.v + b.v))
    with pytest.warns(UnreleasedResultsWarning):
        r = run(executor, query)
    assert [(e.start, e.payload.v) for e in r.events] == [(T(3), 11)]
    assert r.withheld == Withheld(1, T(15))


# --------------------------------------------------------------------------------------
# typed tables
# --------------------------------------------------------------------------------------


@attrs.frozen
class Place:
    city: str
    floor: int | None


@attrs.frozen
class Reading:
    sensor: str
    ok: bool
    count: int
    celsius: float
    seen: datetime
    note: str | None
    spare: int | None
    place: Place


READING_SCHEMA = [
    ("tempo_start", "timestamp[us, tz=UTC]", False),
    ("tempo_end", "timestamp[us, tz=UTC]", False),
    ("sensor", "string", False),
    ("ok", "bool", False),
    ("count", "int64", False),
    ("celsius", "double", False),
    ("seen", "timestamp[us, tz=UTC]", False),
    ("note", "string", True),
    ("spare", "int64", True),
    ("place", "struct<city: string, floor: int64>", False),
]


def schema_of(table: Any) -> list[tuple[str, str, bool]]:
    return [(f.name, str(f.type), f.nullable) for f in table.schema]


def readings() -> Stream[Reading]:
    items = [
        Interval(T(1), T(3), Reading("a", True, 3, 20.5, T(100), None, 7, Place("Oslo", 2))),
        Interval(T(2), T(5), Reading("b", False, -1, -0.25, T(101), "hot", None, Place("Rome", None))),
    ]
    return Stream.create("in", items, EventShape.INTERVAL, FLUSH)


def test_to_arrow_has_typed_columns_from_the_annotations(executor: Any) -> None:
    r = quiet_run(executor, readings())
    table = r.to_arrow()
    assert schema_of(table) == READING_SCHEMA
    assert sorted(table.to_pylist(), key=lambda row: row["tempo_start"]) == [
        {
            "tempo_start": U(1),
            "tempo_end": U(3),
            "sensor": "a",
            "ok": True,
            "count": 3,
            "celsius": 20.5,
            "seen": U(100),
            "note": None,
            "spare": 7,
            "place": {"city": "Oslo", "floor": 2},
        },
        {
            "tempo_start": U(2),
            "tempo_end": U(5),
            "sensor": "b",
            "ok": False,
            "count": -1,
            "celsius": -0.25,
            "seen": U(101),
            "note": "hot",
            "spare": None,
            "place": {"city": "Rome", "floor": None},
        },
    ]


def test_an_empty_result_has_the_same_schema(executor: Any) -> None:
    r = quiet_run(executor, readings().where(lambda x: x.count > 100))
    table = r.to_arrow()
    assert table.num_rows == 0 and schema_of(table) == READING_SCHEMA


@attrs.frozen
class Tags:
    key: int
    values: list[int]


def test_a_list_field_has_its_column_type_whatever_the_values(executor: Any) -> None:
    """A list field's column is a list of its element's type, with events or without, and
    when every list is empty: a live query's batches (``released_table``) must agree, or
    its committed output would not read back as one table."""
    from tempo.result import released_table

    empty = quiet_run(executor, Stream.create("in", [Point(T(1), Tags(1, []))], EventShape.POINT, FLUSH))
    full = quiet_run(executor, Stream.create("in", [Point(T(1), Tags(1, [2, 3]))], EventShape.POINT, FLUSH))
    none = quiet_run(executor, Stream.create("in", [Point(T(1), Tags(1, [2]))], EventShape.POINT, FLUSH).where(lambda t: t.key > 1))
    for r in (empty, full, none):
        assert schema_of(r.to_arrow())[2:] == [("key", "int64", False), ("values", "list<item: int64>", False)]
        assert schema_of(released_table(r.raw, Tags))[4:] == [("key", "int64", True), ("values", "list<item: int64>", True)]
    assert full.to_arrow().column("values").to_pylist() == [[2, 3]]


def test_an_open_lifetime_ends_at_infinity_in_the_table(executor: Any) -> None:
    """An edge that never ends: [3, infinity) as 9999-12-31 23:59:59.999999 UTC."""
    from tempo import EdgeStart

    r = quiet_run(executor, Stream.create("in", [EdgeStart(T(3), V(1))], EventShape.EDGE, FLUSH))
    assert r.to_arrow().to_pylist() == [{"tempo_start": U(3), "tempo_end": INF_UTC, "v": 1}]


def test_to_pandas_keeps_the_types(executor: Any) -> None:
    pytest.importorskip("pandas")
    frame = quiet_run(executor, readings()).to_pandas().sort_values("tempo_start")
    dtypes = {name: str(t) for name, t in frame.dtypes.items()}
    assert dtypes["tempo_start"] == dtypes["seen"] == "datetime64[us, UTC]"
    assert (dtypes["ok"], dtypes["count"], dtypes["celsius"], dtypes["spare"]) == ("bool", "int64", "float64", "Int64")
    assert frame["spare"].tolist()[0] == 7 and frame["spare"].isna().tolist() == [False, True]


def test_durations_become_duration_columns() -> None:
    """timedelta fields (in-memory only: the Spark executor has no column type for them)."""

    @attrs.frozen
    class Lap:
        took: timedelta
        best: timedelta | None

    r = quiet_run(
        InMemoryExecutor(),
        Stream.create(
            "in",
            [Point(T(1), Lap(timedelta(minutes=-1), None)), Point(T(2), Lap(timedelta(seconds=90), timedelta(0)))],
            EventShape.POINT,
            FLUSH,
        ),
    )
    table = r.to_arrow()
    assert schema_of(table)[2:] == [("took", "duration[us]", False), ("best", "duration[us]", True)]
    assert table.column("took").to_pylist() == [timedelta(minutes=-1), timedelta(seconds=90)]


def test_a_value_that_does_not_fit_its_annotation_is_named() -> None:
    """A Result assembled by hand whose float field holds a string."""
    from tempo import OutputEvent

    @attrs.frozen
    class Temp:
        celsius: float

    r: Result[Temp] = Result([OutputEvent(T(1), T(2), Temp("warm"))], [T(3)], {}, [], [], payload_type=Temp)  # type: ignore[arg-type]
    with pytest.raises(QueryBuildError, match=r"Temp\.celsius is annotated float, but row 0 holds 'warm'"):
        r.to_arrow()


# --------------------------------------------------------------------------------------
# rejections_table
# --------------------------------------------------------------------------------------

REJECTION_SCHEMA = [
    ("tempo_input", "string", False),
    ("tempo_position", "int64", False),
    ("tempo_kind", "string", False),
    ("tempo_rule", "string", False),
    ("tempo_action", "string", False),
    ("tempo_start", "timestamp[us, tz=UTC]", False),
    ("tempo_end", "timestamp[us, tz=UTC]", True),
    ("tempo_arrival", "timestamp[us, tz=UTC]", True),
    ("tempo_cti", "timestamp[us, tz=UTC]", False),
    ("tempo_admitted_start", "timestamp[us, tz=UTC]", True),
    ("tempo_admitted_end", "timestamp[us, tz=UTC]", True),
]


@attrs.frozen
class Door:
    door: str
    opened: datetime
    width: float | None


def adjusting(items: list[Any]) -> Stream[Door]:
    """CTIs after every event, delay 0; events before the CTI are adjusted."""
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, advance_to_infinity_on_shutdown=True), policy=AdvanceTimePolicy.ADJUST)
    return Stream.create("doors", items, EventShape.INTERVAL, settings)


def test_rejections_keep_the_payload_as_typed_columns(executor: Any) -> None:
    """[5,6) sets the CTI to 5; [3,8) is moved to [5,8) (adjusted); [1,4) ends before the
    CTI and is dropped."""
    items = [
        Interval(T(5), T(6), Door("a", T(50), 1.5)),
        Interval(T(3), T(8), Door("b", T(30), None), arrival=T(9)),
        Interval(T(1), T(4), Door("c", T(10), 0.75)),
    ]
    r = quiet_run(executor, adjusting(items))
    table = r.rejections_table()
    assert schema_of(table) == REJECTION_SCHEMA + [
        ("door", "string", False),
        ("opened", "timestamp[us, tz=UTC]", False),
        ("width", "double", True),
    ]
    rows = sorted(table.to_pylist(), key=lambda row: row["tempo_position"])
    assert rows == [
        {
            "tempo_input": "doors",
            "tempo_position": 1,
            "tempo_kind": "Interval",
            "tempo_rule": "start before CTI",
            "tempo_action": "adjusted",
            "tempo_start": U(3),
            "tempo_end": U(8),
            "tempo_arrival": U(9),
            "tempo_cti": U(5),
            "tempo_admitted_start": U(5),
            "tempo_admitted_end": U(8),
            "door": "b",
            "opened": U(30),
            "width": None,
        },
        {
            "tempo_input": "doors",
            "tempo_position": 2,
            "tempo_kind": "Interval",
            "tempo_rule": "start before CTI",
            "tempo_action": "dropped",
            "tempo_start": U(1),
            "tempo_end": U(4),
            "tempo_arrival": None,
            "tempo_cti": U(5),
            "tempo_admitted_start": None,
            "tempo_admitted_end": None,
            "door": "c",
            "opened": U(10),
            "width": 0.75,
        },
    ]


def test_no_rejections_give_an_empty_typed_table(executor: Any) -> None:
    r = quiet_run(executor, adjusting([Interval(T(5), T(6), Door("a", T(50), 1.5))]))
    table = r.rejections_table()
    assert table.num_rows == 0
    assert schema_of(table) == REJECTION_SCHEMA + [
        ("door", "string", False),
        ("opened", "timestamp[us, tz=UTC]", False),
        ("width", "double", True),
    ]


@attrs.frozen
class Badge:
    door: str
    person: int


@attrs.frozen
class Odd:
    door: int


def test_rejections_of_two_inputs_share_the_fields_by_name(executor: Any) -> None:
    """Two inputs of different payload classes: the columns are the fields of both, by
    name (``door`` once); a field only one class has is nullable. ``input=`` keeps one
    input's rows and columns; a field of one name and two types needs it."""
    doors = adjusting([Interval(T(5), T(6), Door("a", T(50), 1.5)), Interval(T(1), T(2), Door("c", T(10), 0.5))])
    badges = Stream.create("badges", [Interval(T(1), T(2), Badge("a", 7))], EventShape.INTERVAL, FLUSH)
    r = quiet_run(executor, doors.join(badges, on=lambda d, b: d.door == b.door, select=lambda d, b: Door(d.door, d.opened, d.width)))
    table = r.rejections_table()
    assert schema_of(table)[len(REJECTION_SCHEMA) :] == [
        ("door", "string", False),
        ("opened", "timestamp[us, tz=UTC]", True),
        ("width", "double", True),
        ("person", "int64", True),
    ]
    assert [(row["tempo_input"], row["door"], row["person"]) for row in table.to_pylist()] == [("doors", "c", None)]
    only = r.rejections_table(input="badges")
    assert only.num_rows == 0 and schema_of(only)[len(REJECTION_SCHEMA) :] == [("door", "string", False), ("person", "int64", False)]
    with pytest.raises(QueryBuildError, match="no input 'nope'"):
        r.rejections_table(input="nope")

    odd = Stream.create("odd", [Interval(T(1), T(2), Odd(1))], EventShape.INTERVAL, FLUSH)
    r2 = quiet_run(executor, doors.join(odd, on=lambda d, o: d.width > o.door, select=lambda d, o: Door(d.door, d.opened, d.width)))
    with pytest.raises(QueryBuildError, match=r"'doors' and 'odd' both have a payload field 'door', of types str and int"):
        r2.rejections_table()
    assert r2.rejections_table(input="odd").num_rows == 0


# --------------------------------------------------------------------------------------
# lifetime column names
# --------------------------------------------------------------------------------------


@attrs.frozen
class Shift:
    """A payload whose own fields are named like a lifetime."""

    worker: str
    start: datetime
    end: datetime


def shifts() -> Stream[Shift]:
    items = [
        Interval(T(0), T(8), Shift("ann", T(3600), T(7200))),
        Interval(T(4), T(9), Shift("bob", T(60), T(120))),
    ]
    return Stream.create("shifts", items, EventShape.INTERVAL, FLUSH)


SHIFT_ROWS = [
    {"tempo_start": U(0), "tempo_end": U(8), "worker": "ann", "start": U(3600), "end": U(7200)},
    {"tempo_start": U(4), "tempo_end": U(9), "worker": "bob", "start": U(60), "end": U(120)},
]


def test_payload_fields_named_start_and_end_keep_their_own_columns(executor: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    r = quiet_run(executor, shifts())
    table = r.to_arrow()
    assert table.column_names == ["tempo_start", "tempo_end", "worker", "start", "end"]
    assert sorted(table.to_pylist(), key=lambda row: row["tempo_start"]) == SHIFT_ROWS
    pq.write_table(table, tmp_path / "shifts.parquet")
    assert sorted(pq.read_table(tmp_path / "shifts.parquet").to_pylist(), key=lambda row: row["tempo_start"]) == SHIFT_ROWS
    if hasattr(executor, "to_dataframe"):  # Spark: the lazy DataFrame has the same columns
        frame = executor.to_dataframe(shifts())
        assert frame.columns == ["tempo_start", "tempo_end", "worker", "start", "end"]
        frame.write.parquet(str(tmp_path / "spark"))
        back = [{k: utc(v) for k, v in row.items()} for row in pq.read_table(tmp_path / "spark").to_pylist()]
        assert sorted(back, key=lambda row: row["tempo_start"]) == SHIFT_ROWS


def utc(value: Any) -> Any:
    """A time as Spark's Parquet files give it back to pyarrow (a naive UTC pandas
    Timestamp) as an aware UTC datetime; other values as they are."""
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value


@attrs.frozen
class Clash:
    name: str
    tempo_end: datetime


def test_a_payload_field_named_like_a_tempo_column_is_a_build_error(executor: Any) -> None:
    """Any node's payload class: an input's, or a projection's further down."""
    pattern = re.compile(r"payload class Clash has a field named 'tempo_end'.*tempo_end.*tempo_start", re.S)
    clashing = Stream.create("in", [Point(T(1), Clash("x", T(2)))], EventShape.POINT, FLUSH)
    with pytest.raises(QueryBuildError, match=pattern):
        executor.run(clashing)
    projected = Stream.create("in", [Point(T(1), V(1))], EventShape.POINT, FLUSH).select(lambda r: Clash("x", T(2)))
    with pytest.raises(QueryBuildError, match=pattern):
        executor.run(projected)


def test_withheld_counts_a_flush_of_the_inputs_in_declaration_order(executor: Any) -> None:
    """``withheld`` is what the in-memory executor's flush after the run would release: each
    input's time advanced to infinity one after the other, in declaration order. Here the left
    input (open edges, CTIs imported from the right) is flushed first, so the union passes on
    the right input's CTI before infinity, and the hopping windows over the open edges count
    up to that later horizon: 3 windows are withheld, not 2 as a single flush of both would
    give. Found by the vectorised executor's differential (Spark and it had the single flush)."""
    from tests.strategies import BINARY, UNARY, Ev, Ref

    d = datetime
    left = [EdgeStart(d(2024, 1, 1), Ev(0, 0), arrival=d(2024, 1, 1))] * 4 + [Cti(d(2024, 1, 1), arrival=d(2024, 1, 1))]
    left += [EdgeStart(d(2024, 1, 1), Ev(0, 0), arrival=d(2024, 1, 1)), Cti(d(2024, 1, 1), arrival=d(2024, 1, 1))] * 4
    right = [Interval(d(2024, 1, 1), d(2024, 1, 1, 0, 0, 1), Ref(0, 0), arrival=d(2023, 12, 31, 23, 59, 52))] * 9
    right += [Interval(d(2024, 1, 1, 0, 0, 5), d(2024, 1, 1, 0, 0, 6), Ref(0, 0), arrival=d(2024, 1, 1, 0, 0, 6))]
    imports = AdvanceTimeSettings(None, AdvanceTimeImportSettings("right"), AdvanceTimePolicy.DROP)
    ordered = AdvanceTimeSettings(None, None, AdvanceTimePolicy.DROP, EventOrderingSettings(timedelta(0), timedelta(0), None))
    l = Stream.create("left", left, EventShape.EDGE, imports, payload_type=Ev)
    r = Stream.create("right", right, EventShape.INTERVAL, ordered, payload_type=Ref)
    result = run(executor, BINARY["union_then_hopping_by_key"](UNARY["shift"](l), r))
    assert result.withheld == Withheld(events=3, waiting_for=d(2023, 12, 31, 23, 59, 55))
