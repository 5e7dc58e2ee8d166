"""Exactly once under kill -9: a live query in a process of its own (live_worker.py) is
killed at each phase of a batch (the executor's ``TEMPO_CRASH_AT`` hook) or, as a whole
process group, at random moments while files keep arriving; a restart on the same
checkpoint and output then finishes the run, and the committed output must be the
in-memory executor's whole run item for item (nothing lost, nothing twice), with the same
rejections.

Each worker process starts a JVM (10-15 s) and a run takes over a minute, so the default
suite kills the live production once (and test_hadoop_checkpoint.py a batch
with the checkpoint on S3, tests/distributed/test_standalone_live.py a worker and then the
driver of the cluster engine); every phase, the flush batch, the first batch, batches on
the bulk engines, two inputs held at the frontier and a loop of several random kills are
marked ``slow`` (``nox -s slow``).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tempo
from tempo import InMemoryExecutor
from tests.conftest import skip_without_spark, with_repo_on_path
from tests.streaming.live_worker import FLUSHED
from tests.streaming.test_live_spark import Count, Reading, _counts, _items, _rows, _write, land

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
RUN_SECONDS = 240.0
"""How long one worker process may take (a JVM start and a few batches)."""

FILES = 6
"""Files written before the per-phase runs: batches 0 to 5, then the flush is batch 6."""
MIDDLE, FINAL = 2, FILES


@pytest.fixture(autouse=True)
def _needs_spark() -> None:
    skip_without_spark()


class Worker:
    """One live_worker.py process, the leader of a process group of its own (with its JVM
    and Python workers)."""

    def __init__(
        self,
        tmp: Path,
        *options: str,
        crash_at: str | None = None,
        checkpoint: str | None = None,
        output: str | None = None,
    ) -> None:
        """The query over ``tmp/in``, on ``checkpoint`` and into ``output`` (by default
        ``tmp/ck`` and ``tmp/out``)."""
        env = with_repo_on_path({k: v for k, v in os.environ.items() if k != "TEMPO_CRASH_AT"})
        if crash_at is not None:
            env["TEMPO_CRASH_AT"] = crash_at
        self.log = tmp / "worker.log"
        where = [checkpoint or str(tmp / "ck"), output or str(tmp / "out")]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.streaming.live_worker", str(tmp / "in"), *where, *options],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self) -> None:
        """kill -9 the whole process group, as a machine or container would go down."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self) -> int:
        """The worker's exit status (-9: killed), once it and every process of its group are gone."""
        try:
            status = self.process.wait(RUN_SECONDS)
        finally:
            self.kill()  # the JVM of a killed driver would exit by itself soon after: not soon enough for a restart
        return status

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


def _write_files(folder: Path, rows: list[dict[str, Any]], sizes: list[int], first: int = 0) -> None:
    at = 0
    for index, size in enumerate(sizes, start=first):
        _write(folder, index, rows[at : at + size])
        at += size


def _assert_whole_run(out: Path, rows: list[dict[str, Any]]) -> None:
    from tempo.spark.streaming import read_committed

    whole = InMemoryExecutor().run(
        _counts(tempo.sources.ArrowSource(pa.Table.from_pylist(rows), Reading, start="ts", order="seq"), flush=True)
    )
    assert _items(read_committed(str(out)), Count) == whole.raw
    rejected = read_committed(str(out), rejections=True).drop_columns(["tempo_batch"])
    assert len(whole.rejected) > 0 and rejected.equals(whole.rejections_table())


def _left_behind(tmp: Path, batch: int) -> dict[str, bool]:
    part = f"part-{batch:012d}.parquet"
    return {
        "staged": (tmp / "out" / "_staging" / part).exists(),
        "state": (tmp / "ck" / "tempo" / "state" / f"{batch}.bin").exists(),
        "committed": (tmp / "ck" / "tempo" / "commits" / f"{batch}.json").exists(),
        "published": (tmp / "out" / part).exists(),
    }


# What a kill at each phase leaves of its batch, by the protocol of checkpoint.py and sinks.py.
LEFT_BEHIND = {
    "read": dict(staged=False, state=False, committed=False, published=False),
    "engine": dict(staged=False, state=False, committed=False, published=False),
    "sink": dict(staged=True, state=False, committed=False, published=False),
    "state": dict(staged=True, state=True, committed=False, published=False),
    "commit": dict(staged=True, state=True, committed=True, published=False),
    "publish": dict(staged=False, state=True, committed=True, published=True),
}

slow = pytest.mark.slow


@pytest.mark.parametrize(
    ("phase", "batch"),
    [
        # the default suite kills at "state" with the checkpoint on S3 (test_hadoop_checkpoint.py)
        pytest.param("state", MIDDLE, marks=slow),
        pytest.param("sink", MIDDLE, marks=slow),
        pytest.param("commit", MIDDLE, marks=slow),
        pytest.param("read", MIDDLE, marks=slow),
        pytest.param("engine", MIDDLE, marks=slow),
        pytest.param("publish", MIDDLE, marks=slow),
        pytest.param("state", 0, marks=slow),
        *[pytest.param(phase, FINAL, marks=slow) for phase in ("engine", "sink", "state", "commit", "publish")],
    ],
)
def test_a_kill_at_a_phase_of_a_batch_then_a_restart_commits_the_whole_run_once(tmp_path: Path, phase: str, batch: int) -> None:
    """Killed at ``phase`` of ``batch`` (FINAL: the flush), the worker leaves what the
    protocol says; a restart on the same checkpoint and output finishes the run exactly."""
    from tempo.spark.streaming.executor import CRASH_PHASES

    assert tuple(LEFT_BEHIND) == CRASH_PHASES
    rows = _rows(60, seed=11)
    _write_files(tmp_path / "in", rows, [10] * FILES)
    crashed = Worker(tmp_path, "--flush", crash_at=f"{phase}:{batch}")
    assert crashed.wait() == -signal.SIGKILL, crashed.output()
    assert _left_behind(tmp_path, batch) == LEFT_BEHIND[phase]
    flushed_already = batch == FINAL and phase in ("commit", "publish")
    restarted = Worker(tmp_path, "--flush")
    assert restarted.wait() == (FLUSHED if flushed_already else 0), restarted.output()
    _assert_whole_run(tmp_path / "out", rows)


@pytest.mark.parametrize(
    ("engine", "phase", "batch"),
    [
        pytest.param("spark", "engine", MIDDLE, marks=slow),
        pytest.param("spark", "commit", MIDDLE, marks=slow),
        pytest.param("spark", "sink", MIDDLE, marks=slow),
        pytest.param("spark", "read", 0, marks=slow),
        pytest.param("vectorised", "engine", MIDDLE, marks=slow),
        pytest.param("vectorised", "commit", MIDDLE, marks=slow),
    ],
)
def test_a_kill_during_a_batch_computed_in_bulk_then_a_restart_on_the_other_engine(
    tmp_path: Path, engine: str, phase: str, batch: int
) -> None:
    """The same with every batch computed in bulk (``engine="spark"``, or ``"vectorised"``:
    polars on the driver), killed at ``phase`` of ``batch``; the restart runs every batch on
    the driver item by item, from the state the bulk batches saved: the whole run once, as
    in memory."""
    if engine == "vectorised":
        pytest.importorskip("polars")
    rows = _rows(60, seed=12)
    _write_files(tmp_path / "in", rows, [10] * FILES)
    crashed = Worker(tmp_path, "--flush", "--engine", engine, crash_at=f"{phase}:{batch}")
    assert crashed.wait() == -signal.SIGKILL, crashed.output()
    assert _left_behind(tmp_path, batch) == LEFT_BEHIND[phase]
    restarted = Worker(tmp_path, "--flush", "--engine", "driver")
    assert restarted.wait() == 0, restarted.output()
    _assert_whole_run(tmp_path / "out", rows)
    from tempo.spark.streaming import read_progress

    engines = [r["engine"] for r in read_progress(str(tmp_path / "ck")) if not r["final"]]
    done = batch + 1 if LEFT_BEHIND[phase]["committed"] else batch  # batches committed before the kill
    assert engines[:done] == [engine] * done and set(engines[done:]) == {"driver"}, engines


def write_limits(folder: Path, index: int, part: list[dict[str, Any]]) -> None:
    """One file of limits (test_live_spark's two-input query)."""
    import pyarrow.parquet as pq

    land(folder, index, lambda tmp: pq.write_table(pa.Table.from_pylist(part, schema=LIMITS), tmp))


LIMITS = pa.schema(
    [
        ("seq", pa.int64()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("end", pa.timestamp("us", tz="UTC")),
        ("arrived", pa.timestamp("us", tz="UTC")),
        ("device", pa.int64()),
        ("limit", pa.float64()),
    ]
)


@pytest.mark.parametrize(
    ("phase", "batch"),
    [pytest.param("state", MIDDLE, marks=slow), pytest.param("engine", MIDDLE, marks=slow), pytest.param("commit", 1, marks=slow)],
)
def test_a_kill_with_two_inputs_held_at_the_frontier_then_a_restart(tmp_path: Path, phase: str, batch: int) -> None:
    """The two-input query (readings joined with a slow stream of limits importing their
    CTIs): each micro-batch takes a file of each, so readings wait at the arrival frontier
    for the limits, in the saved state, across the kill; the restart commits the whole run
    once, as in memory."""
    from datetime import timedelta

    from tempo.spark.streaming import read_committed
    from tests.streaming.test_live_spark import T0, Over, _join

    readings = _rows(60, seed=14, arrival_offset=0.5)
    limits = [
        {
            "seq": i,
            "ts": T0 + timedelta(seconds=15 * i - 5),
            "end": T0 + timedelta(seconds=15 * i + 40),
            "arrived": T0 + timedelta(seconds=15 * i),
            "device": i % 3,
            "limit": float(20 * i % 100),
        }
        for i in range(8)
    ]
    _write_files(tmp_path / "in", readings, [10] * FILES)
    for index, (a, b) in enumerate([(0, 2), (2, 4), (4, 6), (6, 8)]):
        write_limits(tmp_path / "limits", index, limits[a:b])
    crashed = Worker(tmp_path, "--flush", "--join", str(tmp_path / "limits"), crash_at=f"{phase}:{batch}")
    assert crashed.wait() == -signal.SIGKILL, crashed.output()
    assert _left_behind(tmp_path, batch) == LEFT_BEHIND[phase]
    restarted = Worker(tmp_path, "--flush", "--join", str(tmp_path / "limits"))
    assert restarted.wait() == 0, restarted.output()

    def arrow(rows: list[dict[str, Any]], schema: Any, payload: type, **columns: str) -> Any:
        return tempo.sources.ArrowSource(pa.Table.from_pylist(rows, schema=schema), payload, order="seq", arrival="arrived", **columns)

    from tests.streaming.test_live_spark import Limit

    whole = InMemoryExecutor().run(
        _join(
            arrow(readings, pa.Table.from_pylist(readings).schema, Reading, start="ts"),
            arrow(limits, LIMITS, Limit, start="ts", end="end"),
            flush=True,
        )
    )
    assert _items(read_committed(str(tmp_path / "out")), Over) == whole.raw and len(whole.events) > 3
    rejected = read_committed(str(tmp_path / "out"), rejections=True).drop_columns(["tempo_batch"])
    assert rejected.equals(whole.rejections_table())
    from tempo.spark.streaming import read_progress

    assert any(r["buffered"] for r in read_progress(str(tmp_path / "ck"))), "no item waited at the frontier"


def _live_production(tmp: Path, seed: int, files: int, kills: int) -> None:
    """A producer thread writes ``files`` files (random sizes, a random pause after each)
    while the worker runs; the worker's process group is killed ``kills`` times, each at a
    random moment after the worker committed a batch (or after 30 s), and restarted; when
    the producer is done the last worker processes the rest and flushes."""
    rnd = random.Random(seed)
    sizes = [rnd.randint(1, 8) for _ in range(files)]
    pauses = [rnd.uniform(0.1, 0.8) for _ in range(files)]
    rows = _rows(sum(sizes), seed=seed)
    commits = tmp / "ck" / "tempo" / "commits"
    _write_files(tmp / "in", rows, sizes[:1])  # something to do at once

    def produce() -> None:
        at = sizes[0]
        for index in range(1, files):
            time.sleep(pauses[index])
            _write(tmp / "in", index, rows[at : at + sizes[index]])
            at += sizes[index]

    producer = threading.Thread(target=produce)
    producer.start()
    stop = tmp / "STOP"
    try:
        for _ in range(kills):
            before = len(os.listdir(commits)) if commits.exists() else 0
            worker = Worker(tmp, "--until", str(stop), "--flush")
            waited = time.monotonic()
            while (len(os.listdir(commits)) if commits.exists() else 0) <= before and time.monotonic() - waited < 30:
                assert worker.process.poll() is None, worker.output()
                time.sleep(0.05)
            time.sleep(rnd.uniform(0.0, 2.0))
            worker.kill()
            assert worker.wait() == -signal.SIGKILL, worker.output()
        last = Worker(tmp, "--until", str(stop), "--flush")
    finally:
        producer.join()
    stop.touch()
    assert last.wait() == 0, last.output()
    _assert_whole_run(tmp / "out", rows)


def test_a_kill_of_the_process_group_during_live_production_then_a_restart_commits_the_whole_run_once(tmp_path: Path) -> None:
    _live_production(tmp_path, seed=21, files=8, kills=1)


@slow
def test_several_random_kills_during_live_production(tmp_path: Path) -> None:
    _live_production(tmp_path, seed=22, files=80, kills=4)
