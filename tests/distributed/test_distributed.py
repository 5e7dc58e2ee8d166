"""A real distributed run: executors in separate JVMs and Python workers.

``local-cluster[2,1,1024]`` starts a master and two executor processes, so everything
tempo ships to executors (expressions, a ``tempo.udf``, the table-source ingress) is
serialized for real. It needs its own SparkContext, so it runs in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import spark_unavailable

pytestmark = pytest.mark.spark


def test_cluster_run_equals_in_memory() -> None:
    reason = spark_unavailable()
    if reason is not None:
        pytest.skip(reason)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(root)}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("cluster_job.py"))],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=root,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["master"] == "local-cluster[2,1,1024]"
    assert out["driver_pid"] not in out["executor_pids"] and len(out["executor_pids"]) == 2
    assert out["cluster"] == out["memory"]
    assert out["cluster"]["events"], "the job produced windows"
    assert out["cluster"]["metrics"]["readings"]["dropped"] > 0  # late readings were dropped on the cluster
    assert out["live"] == out["live_memory"] and out["live"], "the live query on the cluster gave the in-memory release"
