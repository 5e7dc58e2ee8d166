"""A one-node Apache Kafka broker (KRaft: broker and controller in one process) on 127.0.0.1,
for tests and for trying tempo's Kafka inputs on one machine.

    python -m tempo.spark.streaming.kafka_broker --dir /tmp/kafka [--port 9092]

The broker's jars come from Maven Central by ``bash java/fetch`` (``java/kafka-lib``, or the
folder ``TEMPO_KAFKA_JARS`` names); it needs ``java`` (17 or later). Its data live in
``directory``: ``restart()`` (or a new ``KafkaBroker`` on the same directory and ports) finds
the topics and records again. Replication factors are 1, transactions included, so
transactional producers work on one node.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from types import TracebackType

from tempo.errors import TempoError

CHECKOUT_JARS = Path(__file__).resolve().parents[3] / "java" / "kafka-lib"
START_SECONDS = 60.0
"""How long a broker may take to answer metadata requests after it starts."""


class KafkaBrokerError(TempoError):
    """The broker cannot be started: no jars, no java, or it did not come up (its log's end is
    in the message)."""


def broker_jars() -> Path:
    """The folder of the broker's jars: ``TEMPO_KAFKA_JARS``, else the checkout's ``java/kafka-lib``."""
    folder = Path(os.environ.get("TEMPO_KAFKA_JARS", CHECKOUT_JARS))
    if not any(folder.glob("kafka_2.13-*.jar")):
        raise KafkaBrokerError(
            f"no Kafka broker jars in {folder}: run `bash java/fetch` in tempo's checkout (it fetches them from Maven Central), "
            "or point TEMPO_KAFKA_JARS at a folder holding kafka_2.13 and its dependencies"
        )
    return folder


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports of 127.0.0.1 (each socket held until all are chosen)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaBroker:
    """A broker process on ``127.0.0.1:port`` (a free port when None) keeping its data in
    ``directory``. ``start()`` formats the directory on first use and waits until the broker
    answers; ``stop()`` shuts it down cleanly, ``kill()`` with SIGKILL (a crash);
    ``restart()`` starts it again on the same data and ports. A context manager: started on
    entry, stopped on exit."""

    def __init__(self, directory: str | os.PathLike[str], port: int | None = None, jars: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory).resolve()
        self.jars = Path(jars) if jars is not None else None
        # The controller's address is written into the storage when it is formatted: a broker
        # on data formatted before takes the ports it had then (``ports``).
        ports = self.directory / "ports"
        if ports.exists():
            kept = [int(p) for p in ports.read_text().split()]
            self.port, self.controller_port = (port if port is not None else kept[0]), kept[1]
        else:
            chosen = free_ports(3)
            self.port = port if port is not None else chosen[0]
            self.controller_port = next(p for p in chosen[1:] if p != self.port)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` of this broker."""
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    def _config(self) -> Path:
        path = self.directory / "server.properties"
        data = self.directory / "data"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(data),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "false",
            # A restart after a kill waits out the dead broker's session: keep it short.
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
        }
        path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        return path

    def _java(self, main: str, *args: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise KafkaBrokerError("java is not on the PATH: the Kafka broker needs a JDK or JRE 17 or later")
        folder = self.jars if self.jars is not None else broker_jars()
        logs = self.directory / "logs"
        # The quick compiler alone: a broker for tests and trials starts in half the time.
        return [java, "-Xmx512m", "-XX:TieredStopAtLevel=1", f"-Dkafka.logs.dir={logs}", "-cp", str(folder / "*"), main, *args]

    def start(self) -> KafkaBroker:
        """Start the broker (formatting its storage the first time) and wait until it answers."""
        if self.process is not None and self.process.poll() is None:
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self._config()
        (self.directory / "ports").write_text(f"{self.port} {self.controller_port}\n")
        if not (self.directory / "data" / "meta.properties").exists():
            formatted = subprocess.run(
                self._java("kafka.tools.StorageTool", "format", "-t", _cluster_id(), "-c", str(config)),
                capture_output=True,
                text=True,
            )
            if formatted.returncode != 0:
                raise KafkaBrokerError(
                    f"formatting the broker's storage in {self.directory} failed: {formatted.stdout[-2000:]}{formatted.stderr[-2000:]}"
                )
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(self._java("kafka.Kafka", str(config)), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self._wait()
        return self

    def _wait(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while True:
            if self.process is not None and self.process.poll() is not None:
                raise KafkaBrokerError(f"the Kafka broker exited with {self.process.returncode}: {self._log_tail()}")
            if self._answers():
                return
            if time.monotonic() > deadline:
                self.kill()
                raise KafkaBrokerError(
                    f"the Kafka broker did not answer on {self.bootstrap} within {START_SECONDS:.0f} s: {self._log_tail()}"
                )
            time.sleep(0.2)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
        except OSError:
            return False
        try:
            from confluent_kafka.admin import AdminClient
        except ImportError:
            return True  # listening: as much as can be told without a client
        try:
            AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=2)
            return True
        except Exception:  # not ready yet (KafkaException)
            return False

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the broker down cleanly (SIGTERM), killing it if it takes longer than ``timeout``."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """Kill the broker with SIGKILL, as a crash would."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process = None

    def restart(self) -> KafkaBroker:
        """Stop the broker (if running) and start it again on the same data and ports."""
        self.stop()
        return self.start()

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tempo.spark.streaming.kafka_broker", description=__doc__.splitlines()[0])
    parser.add_argument("--dir", required=True, help="where the broker keeps its data (created; reused on a restart)")
    parser.add_argument("--port", type=int, default=9092, help="the client port on 127.0.0.1 (default 9092)")
    args = parser.parse_args(argv)
    broker = KafkaBroker(args.dir, port=args.port)
    try:
        broker.start()
    except KafkaBrokerError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"Kafka broker on {broker.bootstrap} (data in {broker.directory}); Ctrl-C stops it", flush=True)
    try:
        assert broker.process is not None
        broker.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
