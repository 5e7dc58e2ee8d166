"""Delta Lake tables as bounded inputs (``DeltaSource``): written by Spark with Delta's jars,
read by Spark's Delta reader and, without a JVM, by delta-rs on the in-memory and vectorised
executors, a version of the table or its latest."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from tempo import AdvanceTimeGenerationSettings, AdvanceTimeSettings, EventShape, InMemoryExecutor, InputSchemaError, Interval, Stream  # noqa: E402
from tempo.sources import DeltaSource  # noqa: E402

pytestmark = pytest.mark.spark

UTC = timezone.utc
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


@attrs.frozen
class Reading:
    device: int
    value: float


@attrs.frozen
class Total:
    device: int
    total: float


def _totals(path: str, version: int | None) -> Stream[Total]:
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency=1, advance_to_infinity_on_shutdown=True))
    readings = Stream.create("readings", DeltaSource(path, Reading, start="ts", order="ts", version=version), EventShape.POINT, settings)
    return readings.group_by(lambda r: r.device).tumbling(timedelta(seconds=10)).aggregate(lambda d, w: Total(d, w.sum(lambda r: r.value)))


def test_a_delta_table_reads_the_same_on_every_executor_at_each_version(connector_session: Any, tmp_path: Path) -> None:
    from tempo.spark import SparkExecutor
    from tempo.vectorised import VectorisedExecutor
    from tests.conformance.compare import assert_same_results

    path = str(tmp_path / "readings")
    first = [(0, 1.0, T0), (1, 2.0, T0 + timedelta(seconds=1)), (0, 3.0, T0 + timedelta(seconds=12))]
    second = [(1, 4.0, T0 + timedelta(seconds=5))]
    for rows in (first, second):  # version 0, then version 1
        connector_session.createDataFrame(rows, "device long, value double, ts timestamp").write.format("delta").mode("append").save(path)

    def totals(result: Any) -> list[tuple[int, float, datetime]]:
        return sorted((e.payload.device, e.payload.total, e.start) for e in result.raw if isinstance(e, Interval))

    # By hand: version 0 holds windows [0, 10) with device 0: 1, device 1: 2, and [10, 20)
    # with device 0: 3; version 1 adds 4 to device 1's first window.
    at = {
        0: [(0, 1.0, T0), (0, 3.0, T0 + timedelta(seconds=10)), (1, 2.0, T0)],
        1: [(0, 1.0, T0), (0, 3.0, T0 + timedelta(seconds=10)), (1, 6.0, T0)],
    }
    for version, expected in ((0, at[0]), (1, at[1]), (None, at[1])):
        memory = InMemoryExecutor().run(_totals(path, version))
        assert totals(memory) == expected, version
        assert_same_results(memory, VectorisedExecutor().run(_totals(path, version)), f"version {version}")
        assert_same_results(memory, SparkExecutor(connector_session).run(_totals(path, version)), f"version {version}")


def test_a_path_that_is_no_delta_table_is_named(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(InputSchemaError, match="no Delta table"):
        InMemoryExecutor().run(_totals(str(tmp_path / "plain"), None))
    with pytest.raises(Exception, match="version="):
        DeltaSource(str(tmp_path), Reading, start="ts", version=-1)


@pytest.mark.parametrize("writer", ["delta-rs", "spark"])
def test_a_delta_sink_batch_written_again_after_a_crash_is_in_the_table_once(
    connector_session: Any, tmp_path: Path, writer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DeltaSink's part of exactly once, without a query: batch 1 written, then written
    again by a new sink (the restart after a crash between the write and tempo's commit
    record) under the same Delta transaction version, which Delta skips; batch 2 goes on.
    A local table is written by delta-rs; ``spark``: as a Hadoop path is, by Spark's Delta."""
    import pyarrow as pa

    from tempo import Cti
    from tempo.result import Result, released_table
    from tempo.sources import delta_table
    from tempo.spark.streaming import DeltaSink

    def batch(total: float, second: int) -> Any:
        start = T0 + timedelta(seconds=second)
        return released_table([Interval(start, start + timedelta(seconds=10), Total(0, total)), Cti(start + timedelta(seconds=10))], Total)

    if writer == "spark":
        monkeypatch.setattr(DeltaSink, "_delta_rs_path", lambda self, path: None)
    none = Result([], [], {}, [], [], {}, None, Total, {"readings": Reading}).rejections_table()
    out = str(tmp_path / "out")
    DeltaSink(out).write(connector_session, 0, batch(1.0, 0), none)
    DeltaSink(out).write(connector_session, 1, batch(2.0, 10), none)
    restarted = DeltaSink(out)
    restarted.write(connector_session, 1, batch(2.0, 10), none)
    restarted.write(connector_session, 2, batch(3.0, 20), none)
    table = delta_table(out).sort_by([("tempo_batch", "ascending"), ("tempo_row", "ascending")])
    assert list(zip(table.column("tempo_batch").to_pylist(), table.column("tempo_row").to_pylist())) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
        (2, 0),
        (2, 1),
    ]
    assert [t for t in table.column("total").to_pylist() if t is not None] == [1.0, 2.0, 3.0]
    assert delta_table(out + "_rejections").num_rows == 0 and isinstance(table, pa.Table)
    # Spark's Delta reader sees the same rows, and the transactions by the batch numbers.
    assert connector_session.read.format("delta").load(out).count() == 6
    history = connector_session.sql(f"DESCRIBE HISTORY delta.`{out}`").select("version").collect()
    assert len(history) == 3, "three versions: batch 1 written again added none"
