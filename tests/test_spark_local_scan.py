"""The Spark ingress's scan on the driver (``tempo.spark.ingress.local_scan``): a table with
CTIs generated from its own rows is scanned with numpy over its narrow columns instead of by
the block figures and the scan job, and must give exactly what both of those give.

Each test checks that the driver scan was the path taken (or that it gave up), so that a
test of the fast path cannot pass on the slow one.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventShape,
    InMemoryExecutor,
    InputError,
    Stream,
)
from tempo.sources import ArrowSource, ParquetSource
from tests.conformance.compare import assert_executors_agree
from tests.budget import examples

pytestmark = pytest.mark.spark

ORIGIN = datetime(2026, 1, 1, tzinfo=timezone.utc)
S = 1_000_000  # microseconds


@attrs.frozen
class Reading:
    key: int
    value: float


def _table(times_s: list[float], seq: list[int] | None = None, ends_s: list[float] | None = None) -> Any:
    import pyarrow as pa

    columns: dict[str, Any] = {
        "t": pa.array([int(t * S) for t in times_s], pa.int64()),
        "key": pa.array([i % 3 for i in range(len(times_s))], pa.int64()),
        "value": pa.array([float(i) for i in range(len(times_s))], pa.float64()),
    }
    if seq is not None:
        columns["seq"] = pa.array(seq, pa.int64())
    if ends_s is not None:
        columns["e"] = pa.array([int(t * S) for t in ends_s], pa.int64())
    return pa.table(columns)


def _write(table: Any, path: Path, row_group_size: int = 3) -> str:
    import pyarrow.parquet as pq

    pq.write_table(table, path, row_group_size=row_group_size)
    return str(path)


@pytest.fixture
def scans(monkeypatch: Any) -> list[str]:
    """Which scan ran for each input: "driver" or "spark" (the block figures and scan job);
    batches of 2 rows, so that the driver carries its running figures across batches."""
    from tempo.spark.ingress import ctis, local_scan, read

    monkeypatch.setattr(local_scan, "_BATCH_ROWS", 2)
    taken: list[str] = []
    real_local, real_scan = read.scan_locally, ctis.scan

    def local(frame: Any) -> bool:
        done = real_local(frame)
        if done:
            taken.append("driver")
        return done

    def spark(*args: Any) -> None:
        taken.append("spark")
        real_scan(*args)

    monkeypatch.setattr(read, "scan_locally", local)
    monkeypatch.setattr(ctis, "scan", spark)
    return taken


EVERY_2_DROP = AdvanceTimeSettings(
    AdvanceTimeGenerationSettings(frequency=2, delay=timedelta(seconds=2), advance_to_infinity_on_shutdown=True),
    policy=AdvanceTimePolicy.DROP,
)


def test_late_rows_dropped_on_the_driver_scan(spark_session: Any, tmp_path: Path, scans: list[str]) -> None:
    """seq:   0    1    2    3    4    5
    t (s):  10   12    3   15   20    8
    A CTI after every 2nd event at its start - 2 s: after seq 1 at 10 (12 - 2); seq 2 starts
    at 3 < 10: dropped; after seq 3 at 13; seq 5 starts at 8 < 13: dropped (it is the 6th
    event: its CTI at 6 is behind 13 and ignored); the flush at the end."""
    from tempo.spark import SparkExecutor

    path = _write(_table([10, 12, 3, 15, 20, 8], seq=[0, 1, 2, 3, 4, 5]), tmp_path / "in.parquet")
    stream = Stream.create(
        "in", ParquetSource(path, Reading, start="t", order="seq", time_origin=ORIGIN, time_unit="us"), EventShape.POINT, EVERY_2_DROP
    )
    result = SparkExecutor(spark_session).run(stream)
    assert scans == ["driver"]
    assert sorted((e.start - ORIGIN).total_seconds() for e in result.events) == [10, 12, 15, 20]
    assert [(j.position, (j.cti - ORIGIN).total_seconds()) for j in result.rejected] == [(2, 10), (5, 13)]
    m = result.metrics["in"]
    assert (m.received, m.admitted, m.dropped, m.ctis_generated, m.ctis_ignored) == (6, 4, 2, 3, 1)
    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session), "timeline", lambda: stream)


def test_file_order_of_one_parquet_file(spark_session: Any, tmp_path: Path, scans: list[str]) -> None:
    """Without an order column, one Parquet file's rows arrive in file order, as the
    in-memory executor reads them: the same timeline as above."""
    from tempo.spark import SparkExecutor

    path = _write(_table([10, 12, 3, 15, 20, 8]), tmp_path / "in.parquet")
    stream = Stream.create(
        "in", ParquetSource(path, Reading, start="t", time_origin=ORIGIN, time_unit="us"), EventShape.POINT, EVERY_2_DROP
    )
    result = SparkExecutor(spark_session).run(stream)
    assert scans == ["driver"]
    assert [j.position for j in result.rejected] == [2, 5]
    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session), "file order", lambda: stream)


def test_adjusted_intervals_from_an_arrow_table(spark_session: Any, scans: list[str]) -> None:
    """ADJUST, intervals, time-span generation (a CTI when an event enters a later 10 s period,
    at its start): [2, 9) enters no later period; [11, 30) enters period 1: CTI 11;
    [5, 14) starts before 11 and ends after: adjusted to [11, 14); [7, 9) ends before 11:
    dropped; [21, 25) enters period 2: CTI 21."""
    from tempo.spark import SparkExecutor

    table = _table([2, 11, 5, 7, 21], seq=[10, 20, 30, 40, 50], ends_s=[9, 30, 14, 9, 25])
    adv = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(frequency=timedelta(seconds=10), advance_to_infinity_on_shutdown=True),
        policy=AdvanceTimePolicy.ADJUST,
    )
    source = ArrowSource(table, Reading, start="t", end="e", order="seq", time_origin=ORIGIN, time_unit="us")
    stream = Stream.create("in", source, EventShape.INTERVAL, adv)
    result = SparkExecutor(spark_session).run(stream)
    assert scans == ["driver"]
    secs = lambda t: (t - ORIGIN).total_seconds()  # noqa: E731
    assert sorted((secs(e.start), secs(e.end)) for e in result.events) == [(2, 9), (11, 14), (11, 30), (21, 25)]
    assert [(j.position, j.action.name) for j in result.rejected] == [(2, "ADJUSTED"), (3, "DROPPED")]
    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session), "arrow", lambda: stream)


def test_gives_up_and_the_spark_scan_names_the_row(spark_session: Any, tmp_path: Path, scans: list[str]) -> None:
    """An order column that does not increase in file order, or a row breaking a rule (an
    interval ending at its start), is left to the Spark scan, which raises as in memory."""
    from tempo.spark import SparkExecutor

    shuffled = _write(_table([10, 12, 3, 15], seq=[0, 2, 1, 3]), tmp_path / "shuffled.parquet")
    stream = Stream.create(
        "in", ParquetSource(shuffled, Reading, start="t", order="seq", time_origin=ORIGIN, time_unit="us"), EventShape.POINT, EVERY_2_DROP
    )
    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session), "shuffled", lambda: stream)
    assert scans == ["spark"]
    scans.clear()

    bad = _write(_table([10, 12, 3, 15], seq=[0, 1, 2, 3], ends_s=[11, 13, 3, 16]), tmp_path / "bad.parquet")
    source = ParquetSource(bad, Reading, start="t", end="e", order="seq", time_origin=ORIGIN, time_unit="us")
    with pytest.raises(InputError, match=r"item #2 .*end must be after start"):
        SparkExecutor(spark_session).run(Stream.create("in", source, EventShape.INTERVAL, EVERY_2_DROP))
    assert scans == ["spark"]


CASES = settings(
    max_examples=examples(10),
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@st.composite
def tables(draw: st.DrawFn) -> tuple[str, list[float], list[float] | None, bool, AdvanceTimeSettings]:
    n = draw(st.integers(1, 14))
    times = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n))
    intervals = draw(st.booleans())
    ends = [t + draw(st.integers(1, 12)) for t in times] if intervals else None
    by_count = draw(st.booleans())
    generation = AdvanceTimeGenerationSettings(
        frequency=draw(st.integers(1, 4)) if by_count else timedelta(seconds=draw(st.sampled_from([5, 10]))),
        delay=timedelta(seconds=draw(st.integers(0, 6))),
        advance_to_infinity_on_shutdown=draw(st.booleans()),
    )
    policy = draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST]))
    file_order = draw(st.booleans())
    return (
        f"{times} ends={ends} {generation} {policy} file_order={file_order}",
        [float(t) for t in times],
        ([float(e) for e in ends] if ends else None),
        file_order,
        AdvanceTimeSettings(generation, policy=policy),
    )


@CASES
@given(case=tables())
def test_driver_scan_agrees_with_the_spark_scan_and_memory(spark_session: Any, tmp_path_factory: Any, scans: list[str], case: Any) -> None:
    """Random tables with generated CTIs: the driver scan, the Spark scan (``local_scan_rows=0``)
    and the in-memory executor give the same results (events, release steps, CTIs, metrics,
    rejections)."""
    from tempo.spark import SparkExecutor

    desc, times, ends, file_order, adv = case
    seq = None if file_order else [3 * i + 1 for i in range(len(times))]  # gaps: positions are not the order values
    path = _write(_table(times, seq, ends), tmp_path_factory.mktemp("t") / "in.parquet")
    shape = EventShape.INTERVAL if ends else EventShape.POINT
    columns: dict[str, Any] = {"end": "e"} if ends else {}
    if not file_order:
        columns["order"] = "seq"

    def build() -> Stream[Any]:
        source = ParquetSource(path, Reading, start="t", time_origin=ORIGIN, time_unit="us", **columns)
        return Stream.create("in", source, shape, adv).where(lambda r: r.value >= 0)

    scans.clear()
    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session), desc, build)
    assert scans == ["driver"], desc
    scans.clear()
    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session, local_scan_rows=0), desc, build)
    assert scans == ["spark"], desc


FLUSH_ONLY = AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True))


@pytest.fixture
def checks(monkeypatch: Any) -> list[int | None]:
    """What the driver's check of an input where nothing can be late gave: its row count
    (proven good, no Spark job) or None (left to the Spark job)."""
    import importlib

    admit = importlib.import_module("tempo.spark.ingress.admit")  # the module, not the function the package exports
    seen: list[int | None] = []
    real = admit.count_if_clean

    def spy(frame: Any) -> int | None:
        seen.append(real(frame))
        return seen[-1]

    monkeypatch.setattr(admit, "count_if_clean", spy)
    return seen


def test_nothing_late_rows_are_proven_good_on_the_driver(spark_session: Any, tmp_path: Path, checks: list[int | None]) -> None:
    """A flush-only table is checked before the query: points by the Parquet statistics, an
    interval table by reading its times. Both executors count every row."""
    from tempo.spark import SparkExecutor

    points = _write(_table([10, 12, 3, 15], seq=[0, 1, 2, 3]), tmp_path / "points.parquet")
    intervals = _write(_table([10, 12, 3, 15], seq=[0, 1, 2, 3], ends_s=[11, 20, 4, 16]), tmp_path / "intervals.parquet")
    for path, shape, columns in ((points, EventShape.POINT, {}), (intervals, EventShape.INTERVAL, {"end": "e"})):
        checks.clear()
        stream = Stream.create(
            "in", ParquetSource(path, Reading, start="t", order="seq", time_origin=ORIGIN, time_unit="us", **columns), shape, FLUSH_ONLY
        )
        result = SparkExecutor(spark_session).run(stream)
        assert checks == [4] and result.metrics["in"].received == result.metrics["in"].admitted == 4
        assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session), str(shape), lambda: stream)


def test_a_bad_row_where_nothing_is_late_is_left_to_spark_to_name(spark_session: Any, tmp_path: Path, checks: list[int | None]) -> None:
    """An interval ending at its start, a null in a field that takes none: the driver proves
    nothing, and the Spark job names the row as the in-memory executor does."""
    import pyarrow as pa

    from tempo.spark import SparkExecutor

    ends_at_start = _write(_table([10, 12, 3], seq=[0, 1, 2], ends_s=[11, 12, 4]), tmp_path / "bad_end.parquet")
    null_value = _table([10, 12, 3], seq=[0, 1, 2]).set_column(2, "value", pa.array([1.0, None, 3.0], pa.float64()))
    null_path = _write(null_value, tmp_path / "null.parquet")
    cases = [
        (ends_at_start, EventShape.INTERVAL, {"end": "e"}, r"item #1 .*end must be after start"),
        (null_path, EventShape.POINT, {}, r"item #1 .*value"),
    ]
    for path, shape, columns, message in cases:
        checks.clear()
        stream = Stream.create(
            "in", ParquetSource(path, Reading, start="t", order="seq", time_origin=ORIGIN, time_unit="us", **columns), shape, FLUSH_ONLY
        )
        errors = []
        for executor in (InMemoryExecutor(), SparkExecutor(spark_session)):
            with pytest.raises(InputError, match=message) as info:
                executor.run(stream)
            errors.append(str(info.value))
        assert errors[0] == errors[1] and checks == [None]


@settings(CASES, max_examples=examples(8))
@given(case=tables(), data=st.data())
def test_driver_scan_of_a_table_with_arrivals_feeds_its_importer(
    spark_session: Any, tmp_path_factory: Any, scans: list[str], case: Any, data: st.DataObject
) -> None:
    """Random tables with generated CTIs and an arrival column, whose CTIs a small table of
    levels imports (ADJUST): the driver scan of the first keys each CTI by its row's arrival,
    so the importer meets them where the in-memory executor does; the same results with the
    Spark scan."""
    import pyarrow as pa

    from tempo import AdvanceTimeImportSettings
    from tempo.spark import SparkExecutor

    desc, times, ends, file_order, adv = case
    n = len(times)
    # Without an order column the arrival column gives the order, which the driver scan
    # takes only when it strictly increases.
    gaps = data.draw(st.lists(st.integers(1 if file_order else 0, 3), min_size=n, max_size=n))
    arrivals = [sum(gaps[: i + 1]) for i in range(n)]
    table = _table(times, None if file_order else [3 * i + 1 for i in range(n)], ends).append_column(
        "arr", pa.array([a * S for a in arrivals], pa.int64())
    )
    path = _write(table, tmp_path_factory.mktemp("t") / "in.parquet")
    m = data.draw(st.integers(1, 5))
    levels = pa.table(
        {
            "t": pa.array([data.draw(st.integers(0, 40)) * S for _ in range(m)], pa.int64()),
            "arr": pa.array(sorted(data.draw(st.integers(0, 3 * n)) * S for _ in range(m)), pa.int64()),
            "key": pa.array([i % 3 for i in range(m)], pa.int64()),
            "value": pa.array([float(i) for i in range(m)], pa.float64()),
        }
    )
    shape = EventShape.INTERVAL if ends else EventShape.POINT
    columns: dict[str, Any] = {"end": "e"} if ends else {}
    if not file_order:
        columns["order"] = "seq"
    importing = AdvanceTimeSettings(import_=AdvanceTimeImportSettings("in"), policy=AdvanceTimePolicy.ADJUST)

    def build() -> Stream[Any]:
        readings = Stream.create(
            "in", ParquetSource(path, Reading, start="t", arrival="arr", time_origin=ORIGIN, time_unit="us", **columns), shape, adv
        )
        level = Stream.create(
            "levels",
            ArrowSource(levels, Reading, start="t", arrival="arr", time_origin=ORIGIN, time_unit="us"),
            EventShape.POINT,
            importing,
        )
        return readings.join(level, on=lambda r, l: r.key == l.key, select=lambda r, l: Reading(r.key, r.value + l.value))

    scans.clear()
    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session), desc, build)
    assert scans[0] == "driver", (desc, scans)
    scans.clear()
    assert_executors_agree(InMemoryExecutor(), SparkExecutor(spark_session, local_scan_rows=0), desc, build)
    assert scans[0] == "spark", (desc, scans)
