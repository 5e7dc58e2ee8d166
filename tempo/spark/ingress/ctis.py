"""The CTIs on the driver (step 5): scan every input admitted in Spark, then replay every
input's CTIs with ``CtiReplay``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import SparkSession

from tempo.runtime.replay import Candidate, CtiReplay, Key, OrderedStep
from tempo.plan.query import Query
from tempo.ticks import NEG_INF
from tempo.spark.ingress.rows import POS, ARR, InputFrame, imports_ctis, has_ordering
from tempo.spark.ingress.scan import scan, scan_ordered


def _feed(query: Query, frames: Sequence[InputFrame]) -> tuple[CtiReplay, dict[str, dict[int, list[Any]]]]:
    """A replay of what ``frames`` hold, in arrival order: the CTI candidates of inputs
    admitted in Spark, the whole items of inputs admitted on the driver (whose admitted
    events are returned, by input)."""
    cti_replay = CtiReplay(query)
    rows: list[tuple[Key, str, Any]] = []
    local: dict[str, dict[int, list[Any]]] = {}
    for frame in frames:
        name = frame.node.name
        if frame.prepared is not None:
            local[name] = cti_replay.admit_locally(name)
            rows.extend(((rec[0], frame.decl, rec[5], 0), name, rec) for rec in frame.prepared)
        ordering = has_ordering(frame)
        for r in frame.collected:
            key: Key = (r[ARR], frame.decl, r[POS], 0)
            if ordering:
                if r["__bad"]:
                    continue  # raised by ``decide``
                if r["__x"] is not None:
                    rows.append((key, name, Candidate("explicit", r["__x"])))
                if r["__x"] is not None or r["__c"] is not None or r["__arr_step"] or r["__kc"] is not None:
                    c = NEG_INF if r["__c"] is None else r["__c"]
                    rows.append((key, name, OrderedStep(r[ARR], c, r["__key"], NEG_INF if r["__kc"] is None else r["__kc"])))
                continue
            if r["__x"] is not None:
                rows.append((key, name, Candidate("explicit", r["__x"])))
            elif r["__g"] is not None:
                rows.append((key, name, Candidate("generated", r["__g"])))
    cti_replay.feed_all(rows)
    return cti_replay, local


def replay(spark: SparkSession, query: Query, frames: Sequence[InputFrame]) -> tuple[CtiReplay, dict[str, dict[int, list[Any]]]]:
    """Scan every input admitted in Spark, then replay every input's CTIs.

    An input that imports CTIs is scanned after the inputs it imports from, with the CTIs
    they export (a replay of those inputs alone: what an input exports does not depend on
    its importers).
    """
    exporters = dict(query.imports)
    done: list[InputFrame] = []
    pending = list(frames)
    while pending:
        frame = next(f for f in pending if exporters.get(f.node.name) not in {p.node.name for p in pending})
        pending.remove(frame)
        if frame.in_spark and not frame.static and not frame.scanned:
            if has_ordering(frame):
                scan_ordered(spark, frame)
            else:
                imported = _feed(query, done)[0].steps[frame.node.name] if imports_ctis(frame) else []
                scan(spark, frame, imported)
        done.append(frame)
    return _feed(query, frames)
