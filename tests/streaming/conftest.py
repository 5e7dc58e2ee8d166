"""Fixtures of the streaming tests: a real redis-server on 127.0.0.1 for the whole run.

``redis_server`` starts Debian's ``redis-server`` (``.ci/run`` installs it) on a free port,
without persistence, and yields its URL. Where it is missing the tests that need it are
skipped, except under CI (the ``CI`` environment variable set), where they fail: CI must
never pass by skipping them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

START_SECONDS = 10.0
"""How long redis-server may take to answer PING."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _ping(port: int) -> bool:
    """Whether a server answers PING on ``port`` (RESP spoken by hand: no client needed)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL (``redis://127.0.0.1:<port>/0``) of a redis-server started for this test run
    and killed at its end."""
    binary = shutil.which("redis-server")
    if binary is None:
        reason = "redis-server is not installed (Debian package redis-server; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}: CI must run the Redis tests, not skip them")
        pytest.skip(reason)
    pytest.importorskip("redis", reason="the `redis` client is not installed (the `streaming` extra)")
    directory: Path = tmp_path_factory.mktemp("redis")
    port = _free_port()
    log = (directory / "redis.log").open("w")
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(directory)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + START_SECONDS
        while not _ping(port):
            if server.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(f"redis-server did not answer PING on port {port}: {(directory / 'redis.log').read_text()[-2000:]}")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.kill()
        server.wait()
        log.close()
