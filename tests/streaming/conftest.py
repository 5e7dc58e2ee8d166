"""Fixtures of the streaming tests: a real redis-server and a real S3 server on 127.0.0.1.

``redis_server`` starts Debian's ``redis-server`` (``.ci/run`` installs it) on a free port,
without persistence, and yields its URL. ``s3_server`` starts moto's S3 server (the ``moto``
package's server mode, in the ``dev`` extra) and yields ``S3Server``: its endpoint, a bucket,
and the Spark settings that reach it through s3a with the jars ``java/fetch`` put in
``java/lib``. Where a component is missing the tests that need it are skipped, except under
CI (the ``CI`` environment variable set), where they fail: CI must never pass by skipping
them.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

ROOT = Path(__file__).resolve().parents[2]
JARS = ROOT / "java" / "lib"

START_SECONDS = 10.0
"""How long redis-server may take to answer PING."""


def _missing(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI must run these tests, not skip them")
    pytest.skip(reason)


def _free_port() -> int:
    return _free_ports(1)[0]


def _free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 (the broker launcher's, which users run too)."""
    from tempo.spark.streaming.kafka_broker import free_ports

    return free_ports(n)


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
        _missing("redis-server is not installed (Debian package redis-server; .ci/run installs it)")
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


@attrs.frozen
class S3Server:
    """A running S3 server (moto's) with one empty bucket, and how Spark reaches it."""

    endpoint: str
    bucket: str

    def spark_conf(self) -> dict[str, str]:
        """Spark settings for s3a:// paths on this server: hadoop-aws and the AWS SDK from
        java/lib on the class path (no copy of the 700 MB of jars per session, as spark.jars
        would make), path-style requests over plain HTTP, moto's fixed credentials."""
        classpath = os.pathsep.join(str(jar) for jar in sorted(JARS.glob("*.jar")))
        return {
            "spark.driver.extraClassPath": classpath,
            "spark.executor.extraClassPath": classpath,
            "spark.hadoop.fs.s3a.endpoint": self.endpoint,
            "spark.hadoop.fs.s3a.endpoint.region": "us-east-1",
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
            "spark.hadoop.fs.s3a.access.key": "testing",
            "spark.hadoop.fs.s3a.secret.key": "testing",
            "spark.hadoop.fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            # RocksDB's state store uploads its files with copyFromLocalFile, which s3a hands to
            # the AWS SDK's asynchronous client; against moto's server that client takes the
            # interim "100 Continue" for the answer and fails the upload. The plain copy goes
            # through s3a's output stream, as tempo's own files do.
            "spark.hadoop.fs.s3a.optimized.copy.from.local.enabled": "false",
        }

    def filesystem(self) -> Any:
        """pyarrow's view of the server, to read what a query wrote without tempo or Spark."""
        from pyarrow import fs

        return fs.S3FileSystem(
            access_key="testing",
            secret_key="testing",
            endpoint_override=self.endpoint,
            scheme="http",
            region="us-east-1",
            allow_bucket_creation=True,
        )


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server on a free port of 127.0.0.1 for this test run, with a bucket "tempo"."""
    try:
        import moto.server  # noqa: F401
    except ImportError:
        _missing("moto's S3 server is not installed (the `dev` extra: moto[server])")
    if not any(JARS.glob("hadoop-aws-*.jar")):
        _missing("the s3a jars are not in java/lib (run: bash java/fetch)")
    directory: Path = tmp_path_factory.mktemp("s3")
    port = _free_port()
    log = (directory / "moto.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_SECONDS * 3
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    pytest.fail(f"moto's S3 server did not listen on port {port}: {(directory / 'moto.log').read_text()[-2000:]}")
                time.sleep(0.1)
        s3 = S3Server(endpoint, "tempo")
        s3.filesystem().create_dir(s3.bucket)
        yield s3
    finally:
        server.kill()
        server.wait()
        log.close()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Kafka broker (KRaft, one node) on 127.0.0.1 for this test run, from the jars
    ``java/fetch`` put in ``java/kafka-lib`` (``tempo.spark.streaming.kafka_broker``)."""
    pytest.importorskip("confluent_kafka", reason="confluent-kafka is not installed (the `kafka` extra)")
    from tempo.spark.streaming.kafka_broker import KafkaBroker, KafkaBrokerError, broker_jars

    try:
        broker_jars()
    except KafkaBrokerError as exc:
        _missing(str(exc))
    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    try:
        broker.start()
    except KafkaBrokerError as exc:
        pytest.fail(str(exc))
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def connector_session(spark_session: Any) -> Any:
    """The shared session, which must have Spark's Kafka connector and Delta (``java/fetch``)."""
    jars = spark_session.conf.get("spark.jars", "")
    if "spark-sql-kafka" not in jars or "delta-spark" not in jars:
        _missing("the shared Spark session has no Kafka connector or Delta jars (run: bash java/fetch)")
    return spark_session
