"""A live query's checkpoint belongs to one running query (issue 30): a second start while it
runs is refused naming the holder, in this process or another; the holder's stop, or its
death (kill -9 of a real process), frees the checkpoint at once. Reading an output path that
holds no sink's output is an error, not an empty table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tempo import AdvanceTimeGenerationSettings, AdvanceTimeSettings, EventShape, Stream
from tempo.sources import ParquetSource
from tests.streaming.test_live_spark import T0, Reading, land


@attrs.frozen
class Count:
    n: int


def _query(inputs: Path) -> Stream[Count]:
    land(
        inputs,
        0,
        lambda tmp: pq.write_table(
            pa.table({"seq": [0], "ts": pa.array([T0], pa.timestamp("us", tz="UTC")), "device": [1], "value": [1.0]}), tmp
        ),
    )
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1))
    readings = Stream.create("readings", ParquetSource(str(inputs), Reading, start="ts", order="seq"), EventShape.POINT, settings)
    return readings.tumbling(timedelta(seconds=10)).aggregate(lambda w: Count(n=w.count()))


@pytest.mark.spark
def test_a_second_start_on_a_running_checkpoint_is_refused_naming_the_holder(spark_session: Any, tmp_path: Path) -> None:
    from tempo.spark.streaming import CheckpointInUseError, ParquetSink, StreamingExecutor

    executor = StreamingExecutor(spark_session, str(tmp_path / "ck"))
    first = executor.start(_query(tmp_path / "in"), ParquetSink(str(tmp_path / "out")))
    try:
        first.process_all_available()
        with pytest.raises(
            CheckpointInUseError,
            match=rf"is held by a running live query \(process {os.getpid()} on .*started .*Z?.*\); stop that query first",
        ):
            executor.start(_query(tmp_path / "in"), ParquetSink(str(tmp_path / "other")))
        assert first.is_active  # the refused start left the first query running
    finally:
        first.stop()
    again = executor.start(_query(tmp_path / "in"), ParquetSink(str(tmp_path / "out")))  # free once stopped
    again.stop()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from tempo.spark.streaming.checkpoint import BatchLog
    lock = BatchLog(sys.argv[1]).lock("held by the test's second process")
    print("holding", flush=True)
    time.sleep(120)
    """
)


def test_a_checkpoint_held_by_a_killed_process_is_free_at_once(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from tempo.spark.streaming.checkpoint import BatchLog, CheckpointInUseError

    root = tmp_path / "ck" / "tempo"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "ck")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with pytest.raises(CheckpointInUseError, match=rf"\(process {holder.pid} on .*: held by the test's second process\)"):
            BatchLog(str(tmp_path / "ck")).lock("the restart")
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
    taken = BatchLog(str(tmp_path / "ck")).lock("the restart")  # the kernel dropped the dead holder's lock
    assert f"process {os.getpid()} " in (root / "lock").read_text()
    taken.release()


def test_reading_a_path_that_holds_no_output_is_an_error(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from tempo import TempoError
    from tempo.spark.streaming import NoCommittedOutputError, ParquetSink, read_committed

    with pytest.raises(NoCommittedOutputError, match=r"'.*typo' is no ParquetSink's output \(the path does not exist\)"):
        read_committed(str(tmp_path / "typo"))
    assert issubclass(NoCommittedOutputError, TempoError)
    ParquetSink(str(tmp_path / "out"))  # a sink with nothing committed yet reads as empty
    assert read_committed(str(tmp_path / "out")).num_rows == 0
    assert read_committed(str(tmp_path / "out"), rejections=True).num_rows == 0


def test_reading_the_progress_of_a_path_that_is_no_checkpoint_is_an_error(tmp_path: Path) -> None:
    """``read_progress`` of a typo was an empty list, and made the typo a checkpoint's folders."""
    pytest.importorskip("pyspark")
    from tempo.spark.streaming import NoCommittedOutputError, read_progress
    from tempo.spark.streaming.checkpoint import BatchLog

    with pytest.raises(NoCommittedOutputError, match=r"'.*typo' is no live query's checkpoint \(the path does not exist\)"):
        read_progress(str(tmp_path / "typo"))
    assert not (tmp_path / "typo").exists()
    BatchLog(str(tmp_path / "ck"))  # as a start makes it: nothing committed yet reads as no batches
    assert read_progress(str(tmp_path / "ck")) == []


@pytest.mark.spark
def test_a_payload_class_defined_in_a_function_is_refused_when_the_query_starts(spark_session: Any, tmp_path: Path) -> None:
    from tempo.spark.streaming import ParquetSink, StateError, StreamingExecutor

    @attrs.frozen
    class Local:
        n: int

    query = _query(tmp_path / "in").select(lambda c: Local(c.n))
    with pytest.raises(StateError, match=r"the payload class .*<locals>\.Local .*is defined inside a function.*define it at module level"):
        StreamingExecutor(spark_session, str(tmp_path / "ck")).start(query, ParquetSink(str(tmp_path / "out")))
    # the refused start holds nothing: a good query starts on the same checkpoint
    StreamingExecutor(spark_session, str(tmp_path / "ck")).start(_query(tmp_path / "in"), ParquetSink(str(tmp_path / "out"))).stop()
