"""The cluster engine with payload classes of the user's script (module ``__main__``):
PySpark brings them to its Python workers by value with the plan, where a key's state,
pickled by reference, must find them again (``tempo.spark.streaming.keyed.adopt_script_classes``).

The classes below are made the script's as a script's are: their module is ``__main__`` and
the driver's ``__main__`` holds them under their names (the test process's ``__main__`` is
pytest's, as a user's is their script); Spark's Python workers are processes of their own
either way, whose ``__main__`` is PySpark's."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from tempo import Stream
from tests.streaming.test_cluster import _flushed_on_the_cluster

pytestmark = pytest.mark.spark


@attrs.frozen
class ScriptReading:
    key: str
    value: float


@attrs.frozen
class ScriptCount:
    key: str
    n: int


@attrs.frozen
class ScriptSeen:
    key: str
    value: float
    n: int


SCRIPT_CLASSES = (ScriptReading, ScriptCount, ScriptSeen)
for _cls in SCRIPT_CLASSES:
    _cls.__module__ = "__main__"


def _seen(grouped: Any) -> Stream[ScriptSeen]:
    """Each reading with its key's count in its 10 s window: a window, then a join holding
    both classes' payloads in its keys' state."""
    readings: Stream[ScriptReading] = grouped._stream
    counts = grouped.tumbling(timedelta(seconds=10)).aggregate(lambda k, w: ScriptCount(k, w.count()))
    return counts.join(readings, lambda c, r: c.key == r.key, lambda c, r: ScriptSeen(r.key, r.value, c.n))


def test_payload_classes_of_the_users_script_run_on_the_cluster_engine(spark_session: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """Points (seconds) a 1, b 3, a 4 | a 12, b 15, b 17, a CTI at each: a's window [0, 10)
    n 2, b's n 1, a's [10, 20) n 1, b's n 2, each reading paired with its own window's
    count, as in memory. Without the classes put in the workers' ``__main__`` the join's keys
    fail to save their state (``PicklingError``: no ``ScriptReading`` on ``__main__``)."""
    from datetime import datetime, timezone

    import pyarrow as pa

    from tempo import EventShape

    for cls in SCRIPT_CLASSES:
        monkeypatch.setattr(sys.modules["__main__"], cls.__qualname__, cls, raising=False)
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = [[(1, "a", 1.0), (3, "b", 2.0), (4, "a", 3.0)], [(12, "a", 4.0), (15, "b", 5.0), (17, "b", 6.0)]]
    files = [[{"ts": base + timedelta(seconds=s), "key": k, "value": v} for s, k, v in part] for part in rows]
    for seq, row in enumerate(row for part in files for row in part):
        row["seq"] = seq
    schema = pa.schema([("seq", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("key", pa.string()), ("value", pa.float64())])
    committed, whole = _flushed_on_the_cluster(spark_session, tmp_path, files, schema, EventShape.POINT, _seen, ScriptReading, ScriptSeen)
    assert sorted(map(repr, committed)) == sorted(map(repr, whole))
    seen = sorted(
        (type(r).__name__, (r.start - base).seconds, r.payload.key, r.payload.value, r.payload.n)
        for r in committed
        if hasattr(r, "payload")
    )
    assert seen == [
        ("Point", 1, "a", 1.0, 2),
        ("Point", 3, "b", 2.0, 1),
        ("Point", 4, "a", 3.0, 2),
        ("Point", 12, "a", 4.0, 1),
        ("Point", 15, "b", 5.0, 2),
        ("Point", 17, "b", 6.0, 2),
    ], seen
