"""A real Spark standalone cluster on 127.0.0.1: a master and two workers, each a JVM of its
own started from the scripts inside pyspark (``bin/spark-class``), so that tests can submit a
live query to it and kill a worker with SIGKILL while it runs.

Each worker offers one core and starts its executor JVM as a child, in the worker's process
group: killing the group is a machine going down (the worker and its executor at once). The
workers run this interpreter's Python (``PYSPARK_PYTHON``) with the repository on
``PYTHONPATH``, so that executors import tempo and the tests' payload classes as the driver
does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import spark_unavailable, with_repo_on_path
from tests.streaming.conftest import _free_ports

START_SECONDS = 90.0
"""How long the master and its workers may take to start and register (JVMs, on a busy machine)."""


class StandaloneCluster:
    """A running master and its workers (see the module's docstring)."""

    def __init__(self, folder: Path, workers: int) -> None:
        import pyspark

        self.folder = folder
        self.spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
        # Distinct ports, chosen at once: a master's web UI port given to a worker too (a port
        # freed and handed out again) left the master's JSON behind another page.
        self.port, self.ui_port, *worker_ports = _free_ports(2 + workers)
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = with_repo_on_path(
            {
                **os.environ,
                "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable,
                "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            }
        )
        self.processes: list[subprocess.Popen[bytes]] = []
        self.master = self._daemon(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(self.ui_port),
        )
        self.workers = [
            self._daemon(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(worker_ports[i]),
                "--work-dir",
                str(folder / f"worker{i}"),
            )
            for i in range(workers)
        ]
        try:
            self.wait_for_workers(workers)
        except BaseException:
            self.stop()
            raise

    def _daemon(self, name: str, main: str, *args: str) -> subprocess.Popen[bytes]:
        with open(self.folder / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                [self.spark_class, main, *args], env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.processes.append(process)
        return process

    def state(self) -> dict[str, Any]:
        """The master's view (its web UI's JSON): workers with their state, applications."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as response:
            state: dict[str, Any] = json.load(response)
            return state

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")
        except (OSError, ValueError):  # not serving yet, or not the master's JSON (wait_for_workers gives up with the logs)
            return 0

    def wait_for_workers(self, count: int) -> None:
        deadline = time.monotonic() + START_SECONDS
        while self.alive_workers() < count:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.processes):
                logs = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in sorted(self.folder.glob("*.log")))
                pytest.fail(f"the standalone cluster did not start {count} workers:\n{logs}")
            time.sleep(0.5)

    def kill_worker(self, index: int) -> None:
        """kill -9 worker ``index`` and its executor (its whole process group)."""
        try:
            os.killpg(self.workers[index].pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.workers[index].wait()

    def stop(self) -> None:
        for process in reversed(self.processes):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[StandaloneCluster]:
    """A master and two one-core workers on 127.0.0.1 for one test, killed at its end."""
    reason = spark_unavailable()
    if reason is not None:
        pytest.skip(reason)
    folder = tmp_path / "cluster"
    folder.mkdir()
    cluster = StandaloneCluster(folder, workers=2)
    try:
        yield cluster
    finally:
        cluster.stop()
