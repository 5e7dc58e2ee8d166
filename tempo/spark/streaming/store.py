"""Where a live query's own files live: a local directory, or any file system Hadoop reaches.

tempo's records of a live query (``checkpoint.py``) and a ``ParquetSink``'s output
(``sinks.py``) need a few operations with one guarantee: a file a reader may see is whole.
``store_for(path)`` picks how:

* ``LocalStore``, for a plain path (or ``file:`` URI): POSIX. A file is written to a
  temporary name, flushed to disk (``fsync``) and renamed over the old one (atomic), and
  the directory is synced.
* ``HadoopStore``, for a URI of another scheme (``hdfs://``, ``s3a://``, ``abfss://``,
  ``gs://``, ...): Hadoop's ``FileSystem`` API, through the Spark session's JVM and Hadoop
  configuration, as Spark reaches its own checkpoint. A file is written to a temporary
  name and renamed into place. The commit protocol needs no atomic rename of directories,
  and no atomic replacement of an existing file: on HDFS the rename of a file is atomic; on
  an object store (S3 through s3a) a rename is a copy of one object and the deletion of the
  other, and a copied object appears whole or not at all. Only files that are rewritten
  before their batch commits (a state, a staged output) are replaced, by deleting the old
  one first: a crash between the two leaves that file missing, which the protocol treats as
  not yet written (the uncommitted batch runs again). Files after the commit point are
  written once (commit records) or moved once (published output): a publish that finds
  its file in place already only drops the staged copy, so a reader never sees a published
  file go missing.

A running query's hold on its checkpoint (``CheckpointLock``) is a ``flock`` on a local
file: on a Hadoop path, a file of the driver machine's temporary directory named after
the checkpoint's URI. It stops a second start on the same machine; two drivers on
different machines, on one checkpoint of a shared store, are not told apart (as with
Spark's own checkpoint): run one query per checkpoint.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any

from tempo.errors import TempoError
from tempo.sources import is_uri


class StoreUnavailableError(TempoError):
    """A live query's checkpoint or a sink was given a Hadoop URI (``hdfs://``, ``s3a://``,
    ...) while no Spark session runs: tempo reaches such paths through Spark's Hadoop file
    systems."""


def is_local(path: str) -> bool:
    """Whether ``path`` is a path of the driver's own file system (not a URI, or ``file:``)."""
    return not is_uri(path) or path.split("/", 1)[0].lower() == "file:"


def _local_path(path: str) -> str:
    if path.lower().startswith("file:"):
        rest = path[len("file:") :]
        # file:///a/b and file:/a/b are /a/b; file://host/a is not a local path Hadoop writes either
        return "/" + rest.lstrip("/") if rest.startswith("/") else rest
    return path


class Store:
    """The file operations a live query's records and a ``ParquetSink`` use (see the module's
    docstring). Paths are the store's own: local paths, or URIs."""

    def join(self, path: str, *names: str) -> str:
        raise NotImplementedError

    def makedirs(self, path: str) -> None:
        raise NotImplementedError

    def exists(self, path: str) -> bool:
        raise NotImplementedError

    def isdir(self, path: str) -> bool:
        raise NotImplementedError

    def names(self, path: str) -> list[str]:
        """The names in folder ``path`` (files and folders), in no particular order."""
        raise NotImplementedError

    def read(self, path: str) -> bytes:
        raise NotImplementedError

    def write(self, path: str, data: bytes) -> None:
        """Write ``data`` to ``path`` whole (see the module's docstring for what a crash leaves)."""
        raise NotImplementedError

    def remove(self, path: str) -> None:
        """Delete the file ``path`` if it exists."""
        raise NotImplementedError

    def publish(self, staged: str, final: str) -> None:
        """Move the file ``staged`` to ``final`` if it is still staged; when ``final`` is in
        place already (a publish repeated after a crash), only drop ``staged``."""
        raise NotImplementedError

    def lock_file(self, root: str) -> str:
        """The local file whose ``flock`` holds the checkpoint whose records are under ``root``."""
        raise NotImplementedError


class LocalStore(Store):
    """The driver's own file system, through POSIX calls."""

    def join(self, path: str, *names: str) -> str:
        return os.path.join(_local_path(path), *names)

    def makedirs(self, path: str) -> None:
        os.makedirs(_local_path(path), exist_ok=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(_local_path(path))

    def isdir(self, path: str) -> bool:
        return os.path.isdir(_local_path(path))

    def names(self, path: str) -> list[str]:
        return os.listdir(_local_path(path))

    def read(self, path: str) -> bytes:
        with open(_local_path(path), "rb") as f:
            return f.read()

    def write(self, path: str, data: bytes) -> None:
        path = _local_path(path)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def remove(self, path: str) -> None:
        try:
            os.remove(_local_path(path))
        except FileNotFoundError:
            pass

    def publish(self, staged: str, final: str) -> None:
        staged = _local_path(staged)
        if os.path.exists(staged):
            os.replace(staged, _local_path(final))  # atomic: no moment without the final file

    def lock_file(self, root: str) -> str:
        return os.path.join(_local_path(root), "lock")


class HadoopStore(Store):
    """A file system Hadoop reaches (``hdfs://``, ``s3a://``, ...), through the JVM of a
    Spark session and its Hadoop configuration (credentials and endpoints as Spark has
    them: ``spark.hadoop.fs.s3a.*`` and the like)."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark._jvm
        self._conf = spark._jsc.hadoopConfiguration()

    def _fs(self, path: str) -> tuple[Any, Any]:
        p = self._jvm.org.apache.hadoop.fs.Path(path)
        return p.getFileSystem(self._conf), p

    def join(self, path: str, *names: str) -> str:
        return "/".join([path.rstrip("/"), *names])

    def makedirs(self, path: str) -> None:
        fs, p = self._fs(path)
        fs.mkdirs(p)

    def exists(self, path: str) -> bool:
        fs, p = self._fs(path)
        return bool(fs.exists(p))

    def isdir(self, path: str) -> bool:
        fs, p = self._fs(path)
        return bool(fs.exists(p) and fs.getFileStatus(p).isDirectory())

    def names(self, path: str) -> list[str]:
        fs, p = self._fs(path)
        if not fs.exists(p):
            return []
        return [str(status.getPath().getName()) for status in fs.listStatus(p)]

    def read(self, path: str) -> bytes:
        fs, p = self._fs(path)
        stream = fs.open(p)
        try:
            data: bytes = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return bytes(data)

    def write(self, path: str, data: bytes) -> None:
        fs, p = self._fs(path)
        tmp = self._jvm.org.apache.hadoop.fs.Path(path + ".tmp")
        out = fs.create(tmp, True)
        try:
            out.write(bytearray(data))
            if out.hasCapability("hsync"):  # HDFS: on the datanodes' disks; an object store uploads on close
                out.hsync()
        finally:
            out.close()
        if fs.exists(p):
            fs.delete(p, False)
        if not fs.rename(tmp, p):
            raise OSError(f"could not rename {path}.tmp to {path} on {fs.getUri()}")

    def remove(self, path: str) -> None:
        fs, p = self._fs(path)
        fs.delete(p, False)

    def publish(self, staged: str, final: str) -> None:
        fs, s = self._fs(staged)
        if not fs.exists(s):
            return
        _, f = self._fs(final)
        if fs.exists(f):  # published before a crash: the staged copy has the same content
            fs.delete(s, False)
        elif not fs.rename(s, f):
            raise OSError(f"could not move {staged} to {final} on {fs.getUri()}")

    def lock_file(self, root: str) -> str:
        folder = os.path.join(tempfile.gettempdir(), "tempo-locks")
        os.makedirs(folder, exist_ok=True)
        return os.path.join(folder, hashlib.sha256(root.encode()).hexdigest()[:32] + ".lock")


LOCAL = LocalStore()


def store_for(path: str, spark: Any = None, what: str = "a live query's checkpoint") -> Store:
    """The store of ``path``: local for a plain path or ``file:``, else Hadoop's through
    ``spark`` (by default the active Spark session)."""
    if is_local(path):
        return LOCAL
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    if spark is None:
        raise StoreUnavailableError(
            f"{what} at {path!r} is reached through Spark's Hadoop file systems, and no Spark session is "
            "active: create the SparkSession (with the file system's settings) first"
        )
    return HadoopStore(spark)


def absolute(path: str) -> str:
    """A local path made absolute against Python's working directory (Spark would resolve a
    relative one against its JVM's); a URI as it is."""
    return os.path.abspath(_local_path(path)) if is_local(path) else path.rstrip("/")
