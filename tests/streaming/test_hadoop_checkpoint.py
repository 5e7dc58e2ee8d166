"""A live query's checkpoint and ParquetSink on a Hadoop path: S3 through s3a.

``HadoopStore`` is tempo's file access through Hadoop's ``FileSystem`` API (store.py); its
operations are checked here on Hadoop's local file system with the shared Spark session.
Then a live query in a process of its own (live_worker.py, as test_kill.py) keeps its
checkpoint (Spark's records and tempo's) and its output on a real S3 server (moto's, on
127.0.0.1), is killed with kill -9 after saving a batch's state and before its commit
record, and is restarted: the output read back from S3 with pyarrow (not through tempo) must
be the in-memory executor's whole run, item for item.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import skip_without_spark
from tests.streaming.conftest import ROOT, S3Server
from tests.budget import thorough
from tests.streaming.live_worker import FLUSHED
from tests.streaming.test_kill import MIDDLE, Worker, _assert_whole_run, _write_files
from tests.streaming.test_live_spark import _rows

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _needs_spark() -> None:
    skip_without_spark()


def test_the_hadoop_store_writes_whole_files_and_publishes_once(spark_session: Any, tmp_path: Path) -> None:
    from tempo.spark.streaming.store import HadoopStore

    store = HadoopStore(spark_session)
    root = tmp_path.as_uri()  # file:///...: Hadoop's local file system, through the JVM
    folder = store.join(root, "a", "b")
    assert not store.exists(folder) and store.names(folder) == []
    store.makedirs(folder)
    assert store.isdir(folder) and not store.isdir(store.join(folder, "none"))
    path = store.join(folder, "1.bin")
    store.write(path, b"first")
    store.write(path, bytes(range(256)) * 1000)  # replaced whole, binary content intact
    assert store.read(path) == bytes(range(256)) * 1000
    assert sorted(store.names(folder)) == ["1.bin"]  # no temporary file left behind
    assert (tmp_path / "a" / "b" / "1.bin").read_bytes() == bytes(range(256)) * 1000

    staged, final = store.join(folder, "staged"), store.join(root, "a", "final")
    store.write(staged, b"output")
    store.publish(staged, final)
    assert store.read(final) == b"output" and not store.exists(staged)
    store.write(staged, b"output")  # a crash after the publish and before Spark's commit: staged again
    store.publish(staged, final)
    assert store.read(final) == b"output" and not store.exists(staged)
    store.publish(staged, final)  # nothing staged: nothing to do
    store.remove(path)
    store.remove(path)
    assert not store.exists(path)


def test_a_hadoop_uri_without_a_spark_session_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql import SparkSession

    from tempo import TempoError
    from tempo.spark.streaming import ParquetSink, read_progress
    from tempo.spark.streaming.store import StoreUnavailableError

    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    with pytest.raises(StoreUnavailableError, match=r"a ParquetSink at 's3a://bucket/out' is reached through Spark's Hadoop file systems"):
        ParquetSink("s3a://bucket/out")
    with pytest.raises(StoreUnavailableError, match=r"checkpoint at 'hdfs://nn/ck' .* no Spark session is active"):
        read_progress("hdfs://nn/ck")
    assert issubclass(StoreUnavailableError, TempoError)


def _worker(tmp: Path, s3: S3Server, crash_at: str | None = None, engine: str = "auto", *options: str) -> int:
    """The query with its checkpoint and output on S3 (under the test's own prefix, ``_prefix``),
    run to its end (or its crash): its exit status."""
    conf = [f"--conf={key}={value}" for key, value in s3.spark_conf().items()]
    prefix = _prefix(tmp, s3)
    worker = Worker(
        tmp,
        "--flush",
        "--engine",
        engine,
        *conf,
        *options,
        crash_at=crash_at,
        checkpoint=f"s3a://{prefix}/ck",
        output=f"s3a://{prefix}/out",
    )
    status = worker.wait()
    assert status in (-9, 0, FLUSHED), worker.output()
    return status


def _prefix(tmp: Path, s3: S3Server) -> str:
    """Where a test's checkpoint and output go in the bucket, which the tests of one session share."""
    return f"{s3.bucket}/{tmp.name}"


S3_FILES = 3
"""Files the S3 kill test writes: batches 0 to 2 (the kill at ``MIDDLE``, the last), then the flush."""


@pytest.mark.parametrize(
    ("engine", "chain"),
    [("auto", False), pytest.param("cluster", False, marks=pytest.mark.slow), pytest.param("cluster", True, marks=pytest.mark.slow)],
)
def test_a_live_query_with_its_checkpoint_and_output_on_s3_survives_a_kill(
    s3_server: S3Server, tmp_path: Path, engine: str, chain: bool
) -> None:
    """Killed between a batch's state and its commit record (on the cluster engine: the time
    query's), with every record and output file on S3; the restart finishes the run
    (``chain``: two windows in sequence, the second's stage on S3 too)."""
    from pyarrow import fs

    if engine == "cluster":
        from tests.streaming.test_cluster import _skip_without_tws

        _skip_without_tws()
    rows = _rows(10 * S3_FILES, seed=11)
    _write_files(tmp_path / "in", rows, [10] * S3_FILES)
    phase = "time-state" if engine == "cluster" else "state"
    options = ["--chain"] if chain else []
    assert _worker(tmp_path, s3_server, f"{phase}:{MIDDLE}", engine, *options) == -9
    s3 = s3_server.filesystem()
    tempo_records = f"{_prefix(tmp_path, s3_server)}/ck/tempo"
    listed = {info.path.rsplit("/", 1)[1] for info in s3.get_file_info(fs.FileSelector(tempo_records, recursive=True)) if info.is_file}
    # batch MIDDLE's state is saved, its commit record is not: the batch has not happened
    assert {f"{b}.json" for b in range(MIDDLE)} <= listed and f"{MIDDLE}.bin" in listed and f"{MIDDLE}.json" not in listed
    assert "query.json" in listed
    assert not (ROOT / "s3a:").exists()  # nothing written to a local folder named like the URI (the worker's cwd)

    assert _worker(tmp_path, s3_server, None, engine, *options) == 0
    if thorough():  # flushed: a checkpoint on S3 refuses to continue too (the default suite spares this third driver)
        assert _worker(tmp_path, s3_server, None, engine, *options) == FLUSHED

    local = tmp_path / "downloaded"
    fs.copy_files(f"{_prefix(tmp_path, s3_server)}/out", str(local), source_filesystem=s3)
    if engine == "cluster":
        from tests.streaming.test_cluster import _assert_whole_run_as_sets

        _assert_whole_run_as_sets(local, rows, *options)
        if chain:
            listed = s3.get_file_info(fs.FileSelector(f"{_prefix(tmp_path, s3_server)}/ck/cluster", recursive=True))
            folders = {part for info in listed if info.is_file for part in info.path.split("/")}
            assert {"stage1", "work1"} <= folders, folders  # the second window's stage and records
    else:
        _assert_whole_run(local, rows)
