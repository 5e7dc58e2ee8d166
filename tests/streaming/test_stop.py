"""``LiveQuery.stop()`` while a batch is running: quiet, and the batch is not lost.

Spark's ``stop()`` interrupts the query's thread; inside a Python ``foreachBatch`` a Spark job
then fails with an exception whose long message Spark's own check for "interrupted by stop"
cannot read (a regular expression that overflows the stack), and the JVM printed a
``StackOverflowError`` with its trace. tempo's ``stop()`` waits for the batch in progress to
commit and lets no other start (``StoppedDuringBatch``). The worker (stop_worker.py) stops
the query while batch 1's sink runs a Spark job of a few seconds, then restarts and flushes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import skip_without_spark

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def test_stop_during_a_batch_prints_no_java_trace_and_the_batch_commits(tmp_path: Path) -> None:
    skip_without_spark()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    done = subprocess.run(
        [sys.executable, "-m", "tests.streaming.stop_worker", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for noise in ("Exception in thread", "StackOverflowError", "\tat org.apache", "\tat java."):
        assert noise not in done.stderr, done.stderr[-3000:]
    assert "stopped after batch 1" in done.stdout, done.stdout  # the batch in progress committed
    assert "committed 2 " in done.stdout, done.stdout  # then only the flush
