"""tempo's part of a live query's checkpoint directory, and the commit protocol.

Spark keeps its own records under ``<checkpoint>/spark``: it writes ``offsets/N`` before it
runs micro-batch N and ``commits/N`` after ``foreachBatch`` returns, and after a crash it
runs batch N again with the same input. ``foreachBatch`` is therefore at-least-once; tempo
makes each batch take effect exactly once with its own records under
``<checkpoint>/tempo``:

* ``query.json``: the query's fingerprint, written on the first start; a later start with
  another query is refused (``CheckpointMismatchError``).
* ``lock``: held (``flock``) by the running query, naming it (``CheckpointLock``); a second
  start while it runs is refused (``CheckpointInUseError``).
* ``state/N.bin``: the live engine's state after batch N.
* ``commits/N.json``: batch N's commit record. Its presence is the commit point: written
  (to a temporary name, flushed to disk, then renamed) only after batch N's outputs and
  state are complete. A batch whose record exists is not run again; one without a record
  is recomputed from the state of the last committed batch, and everything it wrote before
  the crash is overwritten with the same content.

Files are written whole (``store.py``): a kill -9 at any moment leaves either the old file
or the new, or, for a file rewritten before its batch commits, none, which reads as a batch
not yet run. The checkpoint is a local path or a Hadoop URI (``hdfs://``, ``s3a://``, ...),
as Spark's own checkpoint may be; the commit protocol needs no atomic rename of folders.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from typing import Any

from tempo.errors import TempoError
from tempo.spark.streaming.store import Store, absolute, store_for


class CheckpointMismatchError(TempoError):
    """A live query was started on a checkpoint written by another query (or one that was
    flushed and ended): continuing would mix two queries' state and output."""


class CheckpointInUseError(TempoError):
    """A live query was started on a checkpoint that a running query holds: two queries on one
    checkpoint would take turns on its batches and split the output between their sinks."""


class CheckpointLock:
    """A running live query's hold on its checkpoint: an exclusive ``flock`` on a local file
    (``<checkpoint>/tempo/lock``, or for a checkpoint on a Hadoop path one of the driver's
    temporary folder: ``store.py``), which holds who took it. The kernel drops the lock when
    the holding process dies (a kill -9 included), so a restart after a crash takes it at
    once; a second start while the holder runs, in this process or another, is refused
    naming it."""

    def __init__(self, path: str, checkpoint: str, description: str) -> None:
        import datetime
        import fcntl
        import socket

        self.path = path
        self.fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(self.fd, 4096).decode(errors="replace").strip() or "a process that has not written its name yet"
            os.close(self.fd)
            self.fd = None
            raise CheckpointInUseError(
                f"the checkpoint {checkpoint!r} is held by a running live query ({holder}); "
                "stop that query first, or start this one on another checkpoint"
            ) from None
        first_line = description.splitlines()[0] if description else ""
        now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, f"process {os.getpid()} on {socket.gethostname()}, started {now}: {first_line}".encode(), 0)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None


def fingerprint(description: str) -> str:
    return hashlib.sha256(description.encode()).hexdigest()


class BatchLog:
    """The records under ``<checkpoint>/tempo``, on the checkpoint's store."""

    def __init__(self, checkpoint: str, spark: Any = None, store: Store | None = None) -> None:
        # Absolute, so that Spark's part of it is where tempo's is (Spark would resolve a
        # relative path against the JVM's working directory).
        self.checkpoint = absolute(checkpoint)
        self.store = store or store_for(checkpoint, spark)
        self.root = self.store.join(self.checkpoint, "tempo")
        self.states = self.store.join(self.root, "state")
        self.commits = self.store.join(self.root, "commits")
        self.store.makedirs(self.states)
        self.store.makedirs(self.commits)

    @property
    def spark_checkpoint(self) -> str:
        return self.store.join(self.checkpoint, "spark")

    def prepare_spark_checkpoint(self) -> None:
        """Make Spark's checkpoint folder, and drop what a process killed while Spark wrote an
        entry of its offset or commit log left there: Hadoop's checkpoint file manager writes
        an entry to a hidden temporary file, then renames it, so a kill between leaves
        ``.N.<uuid>.tmp`` (and its ``.crc``). Spark's log ignores it, but Spark refuses to start
        from batch 0 while its offsets folder holds any file ("should be empty on batch 0").
        The checkpoint's lock keeps every other writer away, so no such file is in use."""
        self.store.makedirs(self.spark_checkpoint)
        for log in ("offsets", "commits"):
            folder = self.store.join(self.spark_checkpoint, log)
            if not self.store.exists(folder):
                continue
            for name in self.store.names(folder):
                if name.startswith(".") and (name.endswith(".tmp") or name.endswith(".tmp.crc")):
                    self.store.remove(self.store.join(folder, name))

    def lock(self, description: str) -> CheckpointLock:
        return CheckpointLock(self.store.lock_file(self.root), self.checkpoint, description)

    def claim(self, description: str) -> None:
        """Record the query on a new checkpoint, or check that it is the recorded one."""
        path = self.store.join(self.root, "query.json")
        mine = {"fingerprint": fingerprint(description), "query": description}
        if not self.store.exists(path):
            self.store.write(path, json.dumps(mine, indent=1).encode())
            return
        recorded = json.loads(self.store.read(path))
        if recorded.get("fingerprint") != mine["fingerprint"]:
            raise CheckpointMismatchError(
                f"the checkpoint {self.checkpoint!r} belongs to another query; a live query "
                f"continues only the query that wrote its checkpoint (start a changed query on a new "
                f"checkpoint). Recorded:\n{recorded.get('query')}\nStarting:\n{description}"
            )

    def check_open(self) -> None:
        """Refuse to continue a query that was flushed (its last commit is the final batch)."""
        final = self.last_committed()
        if final is not None and self.record(final).get("final"):
            raise CheckpointMismatchError(
                f"the live query of checkpoint {self.checkpoint!r} was flushed (its inputs "
                f"ended, batch {final}): it cannot continue; start it again on a new checkpoint"
            )

    def committed(self) -> list[int]:
        """The committed batch ids, in order."""
        return sorted(int(n[:-5]) for n in self.store.names(self.commits) if n.endswith(".json"))

    def last_committed(self, before: int | None = None) -> int | None:
        ids = [n for n in self.committed() if before is None or n < before]
        return ids[-1] if ids else None

    def is_committed(self, batch: int) -> bool:
        return self.store.exists(self._commit(batch))

    def record(self, batch: int) -> dict[str, Any]:
        record: dict[str, Any] = json.loads(self.store.read(self._commit(batch)))
        return record

    def state(self, batch: int) -> bytes:
        return self.store.read(self.store.join(self.states, f"{batch}.bin"))

    def commit(self, batch: int, state: bytes, record: dict[str, Any], saved: Callable[[], None] = lambda: None) -> None:
        """Save batch ``batch``'s state, then its commit record (the commit point); drop
        the states no restart can need any more (all but this one and the one before).
        ``saved`` is called between the two (the executor's crash hook for tests)."""
        self.store.write(self.store.join(self.states, f"{batch}.bin"), state)
        saved()
        self.store.write(self._commit(batch), json.dumps(record, default=str).encode())
        for name in self.store.names(self.states):
            if name.endswith(".bin") and int(name[:-4]) < batch - 1:
                self.store.remove(self.store.join(self.states, name))

    def _commit(self, batch: int) -> str:
        return self.store.join(self.commits, f"{batch}.json")
