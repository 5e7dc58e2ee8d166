"""A live query on a real standalone cluster survives the loss of a worker, then of its driver.

The query (live_worker.py's counts) runs on a master with two one-core workers (conftest.py)
while files keep arriving: on the cluster engine (``engine="cluster"``: the windows' state in
the executors' state stores, the per-key work on them), or with every batch computed by
Spark's plan (``engine="spark"``: the executors scan the files and compute each batch's
partial aggregates; ``slow``). One worker and its
executor are killed with SIGKILL during the run: Spark runs the lost tasks again on the other
executor and the query goes on to the end (the default suite's case, on the cluster engine),
or goes on until the driver kills itself with SIGKILL after saving a batch's state and before
its commit record, and a new driver on the same cluster (one worker left) and checkpoint
finishes the run (``slow``). The committed
output must be the in-memory executor's whole run item for item, with the same rejections.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.budget import thorough
from tests.distributed.conftest import StandaloneCluster
from tests.streaming.live_worker import FLUSHED
from tests.streaming.test_kill import Worker, _assert_whole_run, _write_files
from tests.streaming.test_live_spark import _rows

pytestmark = pytest.mark.spark

FILES = 6 if thorough() else 5
"""Files of ten rows: the default suite writes one file after the batch the worker's kill
cuts (CI time), ``--run-slow`` two."""
KILL_WORKER_AFTER = 2
"""The batch whose commit the worker's kill follows (the next file is written at the same moment)."""
DRIVER_CRASH = 4
"""The batch at whose ``state`` phase the driver kills itself."""
WAIT_SECONDS = 240.0


def _wait_for(path: Path, driver: Worker) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not path.exists():
        assert driver.process.poll() is None, f"the driver ended before {path.name}: {driver.output()}"
        assert time.monotonic() < deadline, f"no {path.name} after {WAIT_SECONDS} s: {driver.output()}"
        time.sleep(0.2)


@pytest.mark.parametrize(
    ("engine", "driver_crash", "chain"),
    # The default suite kills a worker under the cluster engine's query; the kills of its driver
    # at each phase are test_cluster.py's, after a worker's on this cluster slow; ``chain``: two
    # windows in sequence (``live_worker --chain``), each keyed on the executors.
    [
        ("cluster", False, False),
        pytest.param("cluster", True, False, marks=pytest.mark.slow),
        pytest.param("cluster", False, True, marks=pytest.mark.slow),
        pytest.param("spark", False, False, marks=pytest.mark.slow),
        pytest.param("spark", True, False, marks=pytest.mark.slow),
    ],
    ids=["cluster-worker", "cluster-worker-then-driver", "cluster-chain-worker", "spark-worker", "spark-worker-then-driver"],
)
def test_a_live_query_goes_on_when_a_worker_dies_and_after_its_driver_dies(
    standalone_cluster: StandaloneCluster,
    tmp_path: Path,
    engine: str,
    driver_crash: bool,
    chain: bool,
) -> None:
    if engine == "cluster":
        from tests.streaming.test_cluster import _skip_without_tws

        _skip_without_tws()
    rows = _rows(10 * FILES, seed=13)
    stop = tmp_path / "stop"
    options = (
        "--until",
        str(stop),
        "--flush",
        "--engine",
        engine,
        f"--master={standalone_cluster.url}",
        "--conf=spark.executor.memory=512m",
        "--conf=spark.cores.max=2",
        *(["--chain"] if chain else []),
    )
    commits = tmp_path / "ck" / "tempo" / "commits"

    _write_files(tmp_path / "in", rows[:30], [10, 10, 10])
    driver = Worker(tmp_path, *options, crash_at=f"state:{DRIVER_CRASH}" if driver_crash else None)
    try:
        _wait_for(commits / f"{KILL_WORKER_AFTER}.json", driver)
        [app] = standalone_cluster.state()["activeapps"]
        assert app["cores"] == 2, app  # both workers' executors serve the query
        _write_files(tmp_path / "in", rows[30:40], [10], first=3)
        standalone_cluster.kill_worker(0)  # while batch 3 is read and computed
        for index in range(4, FILES):
            _write_files(tmp_path / "in", rows[index * 10 : (index + 1) * 10], [10], first=index)
            time.sleep(1.0)
        if driver_crash:
            assert driver.wait() == -9, driver.output()  # it went on past the lost worker, to its own crash
        else:
            stop.touch()
            assert driver.wait() == 0, driver.output()  # it went on past the lost worker, to the end
    finally:
        driver.kill()
    assert standalone_cluster.alive_workers() == 1
    if driver_crash:
        crashed = tmp_path / "ck" / "cluster" / "work" / "tempo" / "commits" if engine == "cluster" else commits  # the batch that crashed
        assert (crashed / f"{DRIVER_CRASH - 1}.json").exists() and not (crashed / f"{DRIVER_CRASH}.json").exists()
        stop.touch()  # every file is written: the new driver processes them all, then flushes
        restarted = Worker(tmp_path, *options)
        assert restarted.wait() == 0, restarted.output()
        if thorough():  # a start after the flush is refused (the default suite spares this third driver)
            assert Worker(tmp_path, *options).wait() == FLUSHED
    if engine == "cluster":
        from tests.streaming.test_cluster import _assert_whole_run_as_sets

        _assert_whole_run_as_sets(tmp_path / "out", rows, *(["--chain"] if chain else []))
    else:
        _assert_whole_run(tmp_path / "out", rows)
