"""Table sources (Parquet) on both executors: random inputs written to a file, read back
by the in-memory executor (pyarrow) and by Spark, must give the same results.

Spark admits a table through its own ingress (``tempo/spark/ingress.py``): blocks of the
order column, one scan for CTI candidates and rows at risk, verdicts on the driver, or no
ingress work at all when nothing can be late. Blocks are made tiny here so that every
input spans several, and the rows are written in a shuffled file order so that the order
column, not the file order, must rule.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    Cti,
    EdgeEnd,
    EdgeStart,
    EventShape,
    Heartbeat,
    InMemoryExecutor,
    InputError,
    Interval,
    Point,
    Stream,
)
from tempo.sources import ParquetSource
from tests.conformance.compare import assert_executors_agree
from tests.strategies import BASE, UNARY, Ev, advance_settings, input_items, with_arrivals
from tests.budget import examples

pytestmark = pytest.mark.spark

ORIGIN = BASE.replace(tzinfo=timezone.utc)
KIND = {Point: "point", Interval: "interval", EdgeStart: "start", EdgeEnd: "end", Cti: "cti", Heartbeat: "heartbeat"}


def _us(t: datetime | None) -> int | None:
    return None if t is None else (t.replace(tzinfo=timezone.utc) - ORIGIN) // timedelta(microseconds=1)


def write_table(items: list[Any], path: Path, shuffle_seed: int | None) -> dict[str, Any]:
    """``items`` as a Parquet file (times in microseconds since ``ORIGIN``), with a ``seq``
    column in item order; returns the ParquetSource column arguments that read it back."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for seq, it in enumerate(items):
        end = getattr(it, "end", None)
        payload = getattr(it, "payload", None)
        start = it.timestamp if isinstance(it, Cti) else None if isinstance(it, Heartbeat) else it.start
        rows.append(
            {
                "seq": seq,
                "kind": KIND[type(it)],
                "start": _us(start),
                "end": _us(end),
                "arrival": _us(it.arrival),
                "key": payload.key if payload else 0,
                "value": payload.value if payload else 0,
            }
        )
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(rows)
    columns: dict[str, Any] = {"order": "seq", "time_origin": ORIGIN, "time_unit": "us"}
    names = ["seq", "start", "key", "value"]
    if any(isinstance(it, (Cti, EdgeStart, EdgeEnd, Heartbeat)) for it in items):
        names.append("kind")
        columns["kind"] = "kind"
    if any(isinstance(it, (Interval, EdgeEnd)) for it in items):
        names.append("end")
        columns["end"] = "end"
    if any(it.arrival is not None for it in items):
        names.append("arrival")
        columns["arrival"] = "arrival"
    types = {
        "seq": pa.int64(),
        "kind": pa.string(),
        "start": pa.int64(),
        "end": pa.int64(),
        "arrival": pa.int64(),
        "key": pa.int64(),
        "value": pa.int64(),
    }
    table = pa.table({n: pa.array([r[n] for r in rows], types[n]) for n in names})
    pq.write_table(table, path, row_group_size=7)  # several row groups: footers are read for the range
    return columns


TABLES = settings(
    max_examples=examples(12),
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


@st.composite
def table_queries(draw: st.DrawFn) -> tuple[str, list[Any], EventShape, AdvanceTimeSettings | None, str, bool]:
    shape = draw(st.sampled_from([EventShape.POINT, EventShape.INTERVAL, EventShape.EDGE]))
    items = draw(input_items(shape, Ev, max_events=30, min_events=1))
    if draw(st.booleans()):
        items = draw(with_arrivals(items))
        # Heartbeat rows (their start column null) between the rows, at the arrival before them.
        for at in sorted(draw(st.lists(st.integers(0, len(items)), max_size=3)), reverse=True):
            items.insert(at, Heartbeat(items[at - 1].arrival if at else items[0].arrival))
    flush_only = AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True))
    adv = draw(st.one_of(advance_settings(), st.just(flush_only)))
    op = draw(st.sampled_from(sorted(UNARY)))
    shuffled = draw(st.booleans())
    return f"{shape.name} {op} {adv} shuffled={shuffled} {items}", items, shape, adv, op, shuffled


@TABLES
@given(case=table_queries(), on_driver=st.booleans())
def test_tables_agree(spark_session: Any, tmp_path_factory: Any, monkeypatch: Any, case: Any, on_driver: bool) -> None:
    """``on_driver``: a table the driver scan takes (points or intervals in order, CTIs
    generated) is scanned there, else by the block figures and the scan job."""
    from tempo.spark import SparkExecutor, ingress

    monkeypatch.setattr(ingress, "BLOCK_ROWS", 4)
    desc, items, shape, adv, op, shuffled = case
    path = tmp_path_factory.mktemp("table") / "in.parquet"
    columns = write_table(items, path, 7 if shuffled else None)

    def build() -> Stream[Any]:
        source = ParquetSource(str(path), Ev, start="start", **columns)
        return UNARY[op](Stream.create("in", source, shape, adv))

    spark = SparkExecutor(spark_session) if on_driver else SparkExecutor(spark_session, local_scan_rows=0)
    assert_executors_agree(InMemoryExecutor(), spark, f"{desc} on_driver={on_driver}", build)


def test_nothing_late_table_reads_without_ingress_jobs_and_still_checks_rows(spark_session: Any, tmp_path: Path) -> None:
    """Flush-only settings on a table without kind or arrival columns: nothing can be late,
    so Spark admits every row as read. A row that breaks a rule (an interval ending at its
    start, item #2) still fails: run() names it as the in-memory executor does, and a lazy
    DataFrame fails when Spark reads the row."""
    from tempo.spark import SparkExecutor

    T = lambda s: BASE + timedelta(seconds=s)  # noqa: E731
    good = [Interval(T(5), T(9), Ev(1, 1)), Interval(T(1), T(3), Ev(2, 2)), Interval(T(4), T(8), Ev(1, 3))]
    settings_ = AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True))
    path = tmp_path / "good.parquet"
    columns = write_table(good, path, None)
    assert set(columns) == {"order", "time_origin", "time_unit", "end"}  # no kind, no arrival column
    query = lambda p: Stream.create("in", ParquetSource(str(p), Ev, start="start", **columns), EventShape.INTERVAL, settings_)  # noqa: E731
    spark = SparkExecutor(spark_session)
    result = spark.run(query(path))
    # Out of order, yet nothing is late: there is no CTI before the one at infinity.
    assert sorted((e.start, e.end, e.payload.value) for e in result.events) == [
        (T(1).replace(tzinfo=timezone.utc), T(3).replace(tzinfo=timezone.utc), 2),
        (T(4).replace(tzinfo=timezone.utc), T(8).replace(tzinfo=timezone.utc), 3),
        (T(5).replace(tzinfo=timezone.utc), T(9).replace(tzinfo=timezone.utc), 1),
    ]
    assert result.metrics["in"].received == 3 and result.metrics["in"].dropped == 0
    assert [c.year for c in result.ctis] == [9999]

    bad_path = tmp_path / "bad.parquet"
    write_table(good[:2] + [Interval(T(6), T(6), Ev(3, 3))], bad_path, None)
    with pytest.raises(InputError) as memory_error:
        InMemoryExecutor().run(query(bad_path))
    with pytest.raises(InputError) as spark_error:
        spark.run(query(bad_path))
    assert spark_error.value.position == memory_error.value.position == 2
    frame = spark.to_dataframe(query(bad_path))  # lazy: nothing read yet
    with pytest.raises(Exception, match="tempo: input .in. has a row with a null time"):
        frame.collect()


def test_a_table_event_cannot_start_at_infinity(spark_session: Any, tmp_path: Path) -> None:
    """As for items, a table row whose event starts at infinity (item #1 here) is an
    InputError on both executors, with or without CTIs to check."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tempo.spark import SparkExecutor
    from tempo.ticks import INF

    origin_us = (ORIGIN - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)
    path = tmp_path / "inf.parquet"
    pq.write_table(pa.table({"seq": [0, 1, 2], "start": [5, INF - origin_us, 7], "key": [1, 1, 1], "value": [1, 2, 3]}), path)
    source = ParquetSource(str(path), Ev, start="start", order="seq", time_origin=ORIGIN, time_unit="us")
    for adv in (
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True)),
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, advance_to_infinity_on_shutdown=True)),
    ):
        for executor in (InMemoryExecutor(), SparkExecutor(spark_session)):
            with pytest.raises(InputError, match="cannot start at infinity") as error:
                executor.run(Stream.create("in", source, EventShape.POINT, adv))
            assert error.value.position == 1, executor


def test_a_table_end_past_infinity_is_an_open_end(spark_session: Any, tmp_path: Path) -> None:
    """An end column may mark "never ends" by any value at or past infinity (the shared
    benchmark's reference table writes 2**62 microseconds since its origin): the event is
    open, its end infinity, on every executor and whether Spark admits the table as read
    (flush only, its projection straight from the file) or through its ingress (CTIs).

    Timeline (seconds since ORIGIN): [0, 10) v1, [5, forever) v2, [7, 12) v3.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tempo.spark import SparkExecutor
    from tempo.ticks import INFINITY

    path = tmp_path / "forever.parquet"
    second = 1_000_000
    pq.write_table(
        pa.table(
            {
                "seq": [0, 1, 2],
                "start": [0, 5 * second, 7 * second],
                "end": [10 * second, 2**62, 12 * second],
                "key": [1, 1, 2],
                "value": [1, 2, 3],
            }
        ),
        path,
    )
    source = ParquetSource(str(path), Ev, start="start", end="end", order="seq", time_origin=ORIGIN, time_unit="us")
    at = lambda s: ORIGIN + timedelta(seconds=s)  # noqa: E731
    expected = [(at(0), at(10), 1), (at(5), INFINITY, 2), (at(7), at(12), 3)]
    for adv in (
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True)),
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, advance_to_infinity_on_shutdown=True)),
    ):
        for executor in (InMemoryExecutor(), SparkExecutor(spark_session), SparkExecutor(spark_session, local_scan_rows=0)):
            query = Stream.create("in", source, EventShape.INTERVAL, adv)
            result = executor.run(query)
            assert sorted((e.start, e.end, e.payload.value) for e in result.events) == expected, (executor, adv)
            if isinstance(executor, SparkExecutor):  # the lazy frame's open end is infinity too
                rows = executor.to_dataframe(query).collect()
                ends = sorted((r["value"], r["tempo_end"].replace(tzinfo=None)) for r in rows)
                assert ends == [(v, e.replace(tzinfo=None)) for _, e, v in expected], (executor, adv)
