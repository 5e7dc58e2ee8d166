"""The cluster engine's keyed operators in Spark: a ``transformWithState`` processor around the
runtime's ``KeyedOperator`` (docs/streaming.md, "Live queries on the cluster"; built so far:
the processor, not yet the queries around it).

The work query's rows (``COLUMNS``) are the stage's: each an item of the stateful operator's
input in the merged arrival order (its ``POSITION``), an event (``INSERT``) or the end of an
open one (``END_EDGE``), with the event's id and its lifetime in ticks, its payload's fields, and ``CTI``, the CTI in
force at the operator when the item reaches it. The watermark column holds each row's CTI as
milliseconds (``watermark_ms``), behind a delay of one millisecond, so Spark's watermark is
the latest CTI of the earlier micro-batches less one tick (``cti_of_watermark``).

Per key, one value state holds the operator's state for the key (``KeyedOperator``'s bytes)
and one the results waiting for their CTI. A key's rows are run in position order, each
preceded by the CTI in force when it arrived; results released by a CTI beyond Spark's
watermark wait in state, so that a micro-batch emits only results released by CTIs up to its
watermark: the stretch of the release sequence since the previous batch. One event-time
timer per key, at the first CTI that would release something of it, brings the later CTIs
to a key without rows.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from tempo.errors import UnsupportedError
from tempo.expr.schema import field_names
from tempo.plan.query import Query
from tempo.runtime.keyed import Cti, End, Insert, KeyedItem, KeyedOperator, KeyedResult
from tempo.ticks import INF, NEG_INF

POSITION, ITEM, EID, START, END, CTI = "tempo_position", "tempo_item", "tempo_eid", "tempo_start", "tempo_end", "tempo_cti"
INSERT, END_EDGE, CTI_ROW = 0, 1, 2
COLUMNS = (POSITION, ITEM, EID, START, END, CTI)
"""The stage's columns before the payload's fields: the item's place in the merged arrival
order, its kind (``INSERT``, ``END_EDGE``, or ``CTI_ROW``: a row carrying only a CTI, to move
the watermark, under a key of its own that the processor leaves alone), the event's id (an end's: the event it ends),
its lifetime in ticks (``END`` null: open), and the CTI in force at the operator when it
arrives."""
RESULT_COLUMNS = ("tempo_released_by", "tempo_start", "tempo_end")
"""A result's columns before its payload's fields: the CTI that released it and its lifetime."""

WATERMARK_DELAY_MS = 1
WATERMARK_LIMIT_MS = (2**63 - 1) // 1000
"""The largest millisecond a Spark timestamp (microseconds in 64 bits) holds."""


def watermark_ms(tick: int) -> int:
    """The watermark column's value for a row whose CTI is ``tick``: the tick read as
    milliseconds since the epoch; the CTI at infinity the latest value Spark holds. Spark's
    watermark starts at 0 and never goes below, and its timestamps end in the year 2262: the
    CTIs it carries so lie after the epoch and before that year."""
    if tick >= INF:
        return WATERMARK_LIMIT_MS
    if not WATERMARK_DELAY_MS < tick < WATERMARK_LIMIT_MS - WATERMARK_DELAY_MS:
        raise UnsupportedError(
            "Spark streaming", f"a CTI at tick {tick}",
            "the cluster engine carries CTIs in Spark's watermark, whose milliseconds hold the ticks after the epoch and before 2262 only",
        )
    return tick


def cti_of_watermark(ms: int) -> int:
    """The CTI Spark's watermark ``ms`` stands for (the column's latest value, less the
    delay); none before Spark has one (0)."""
    if ms <= 0:
        return NEG_INF
    tick = ms + WATERMARK_DELAY_MS
    return INF if tick >= WATERMARK_LIMIT_MS else tick


def timer_ms(cti: int) -> int:
    """The timer that fires once Spark's watermark stands for ``cti`` or later."""
    return watermark_ms(cti) - WATERMARK_DELAY_MS


class KeyedProcessor(StatefulProcessor):
    """One stateful node of a query, per key, in ``groupBy(key).transformWithState(...,
    "Append", "EventTime")`` (see the module's docstring)."""

    def __init__(self, query: Query, node_index: int) -> None:
        # The plan travels to Spark's Python workers; the query's properties, kept by node
        # identity, are derived there again.
        self.root = query.root
        self.node_index = node_index

    def init(self, handle: StatefulProcessorHandle) -> None:
        query = Query.build(self.root)
        node = query.nodes[self.node_index]
        self.handle = handle
        self.keyed = KeyedOperator(query, node)
        self.payload_type = node.inputs()[0].payload_type
        self.fields = field_names(self.payload_type)
        self.output_fields = field_names(node.payload_type)
        self.operator = handle.getValueState("operator", "state binary")
        self.waiting = handle.getValueState("waiting", "results binary")

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:
        items: list[KeyedItem] = []
        last = NEG_INF
        for row in sorted(rows, key=lambda r: r[POSITION]):
            if row[ITEM] == CTI_ROW:
                continue
            if row[CTI] > last:
                items.append(Cti(row[CTI]))
                last = row[CTI]
            if row[ITEM] == INSERT:
                payload = self.payload_type(**{f: row[f] for f in self.fields})
                items.append(Insert(row[EID], row[START], row[END], payload))
            else:
                items.append(End(row[EID], row[END]))
        if not items:  # the CTI rows' key
            return iter(())
        return self._run(items, cti_of_watermark(timerValues.getCurrentWatermarkInMs()))

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:
        now = cti_of_watermark(timerValues.getCurrentWatermarkInMs())
        return self._run([Cti(now)], now)

    def _run(self, items: list[KeyedItem], now: int) -> Iterator[Row]:
        saved = self.operator.get()  # None for a key not seen before: no exists() call to the JVM
        held = self.waiting.get()
        waiting: list[KeyedResult] = [] if held is None else pickle.loads(held[0])
        released, state = self.keyed.run(None if saved is None else saved[0], items)
        due = self.keyed.next_release()
        self.operator.update((state,))
        waiting += released
        out = [r for r in waiting if r.cti <= now]
        waiting = [r for r in waiting if r.cti > now]
        if waiting:
            self.waiting.update((pickle.dumps(waiting),))
            due = min([r.cti for r in waiting] + ([] if due is None else [due]))
        else:
            self.waiting.clear()
        for old in list(self.handle.listTimers()):
            self.handle.deleteTimer(old)
        if due is not None:
            self.handle.registerTimer(timer_ms(due))
        for r in out:
            yield Row(**dict(zip(RESULT_COLUMNS, (r.cti, r.start, r.end))), **{f: getattr(r.payload, f) for f in self.output_fields})

    def close(self) -> None:
        pass
