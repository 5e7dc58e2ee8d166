"""The policy's verdicts on the rows a scan collected, decided on the driver with the CTI in
force when each arrived; the received items and positions of the rows they name."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import attrs
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from tempo.errors import CtiViolationError, ImportOrderError, InputError, RuleText
from tempo.expr.schema import field_names, record_fields
from tempo.runtime.replay import CtiReplay, Key
from tempo.runtime.ingress import CTI, END, HEARTBEAT, INTERVAL, adjusted_lifetime, count_rejection, cti_violation_rule, item_of
from tempo.plan.nodes import SourceNode
from tempo.result import Action, InputMetrics, Rule, SubstreamMetrics
from tempo.rules import CTI_RULE_CODES, InputRule, message
from tempo.sources import TableSource
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.ticks import NEG_INF
from tempo.spark.ingress.rows import (
    POS,
    KIND,
    ARR,
    BLOCK,
    ORDER,
    FILE,
    BAD_ROW,
    BAD_KIND,
    BAD_ARRIVAL,
    NO_ARRIVAL,
    BAD_START,
    NO_ORDER_ARRIVAL,
    NO_HEARTBEAT_ARRIVAL,
    UNKNOWN_KIND,
    NULL_START,
    NULL_END,
    NULL_FIELD,
    SUB_MICRO,
    DROPPED,
    ADJUSTED,
    InputFrame,
    has_ordering,
)


@attrs.define
class Verdicts:
    """What the policy did to an input's at-risk rows, decided on the driver."""

    events: list[tuple[int, int, int, int, int, int]]  # (ORDER, FILE, status, cti, start, end) of events not admitted as read
    ends: list[tuple[int, int, int]]  # (ORDER, FILE, cti) of end edges ending before their CTI
    positions: dict[tuple[int, int], int]  # (ORDER, FILE) -> position, of the rows collected
    rules: dict[tuple[int, int], Rule] = attrs.Factory(dict)  # the rule of each event verdict, when not START_BEFORE_CTI only
    counts: InputMetrics | None = None  # ordering settings: the counts, per rule and substream


def cti_in_force(steps: list[tuple[Key, int]]) -> Any:
    """The CTI in force at a key of the merged order, from an input's CTI steps (sorted by key)."""
    keys = [k for k, _ in steps]

    def at(key: Key) -> int:
        i = bisect.bisect_left(keys, key)
        return steps[i - 1][1] if i else NEG_INF

    return at


def _bad_rule(frame: InputFrame, code: int, kind: int | None) -> RuleText:
    """The rule a row collected with ``__bad`` = ``code`` breaks (the in-memory executor's words)."""
    from tempo.tables import kind_rule, null_field_rule, null_time_rule

    source = frame.node.source
    if code in (BAD_ROW, BAD_ARRIVAL, NO_ARRIVAL, BAD_START, NO_ORDER_ARRIVAL, NO_HEARTBEAT_ARRIVAL):
        return message(InputRule(code))
    if code == BAD_KIND:
        return kind_rule(frame.node.shape, kind)  # type: ignore[arg-type]
    assert isinstance(source, TableSource)
    if code == UNKNOWN_KIND:
        return message(InputRule.UNKNOWN_KIND, column=source.kind)
    if code == NULL_START:
        return null_time_rule("start" if source.start_given else "arrival", source.start)
    if code == NULL_END:
        if not source.end:
            return message(InputRule.NO_END_COLUMN, kind="interval" if kind == INTERVAL else "end")
        return null_time_rule("end", source.end)
    if code >= NULL_FIELD + SUB_MICRO:  # a value below a microsecond (``below_microsecond_columns``)
        from tempo.tables import sub_microsecond_rule

        column, what, type_text = frame.below[code - NULL_FIELD - SUB_MICRO]
        return sub_microsecond_rule(what, column, type_text)
    name = record_fields(frame.node.payload_type)[code - NULL_FIELD].name
    return null_field_rule(frame.node.payload_type, name, name)


def decide(spark: SparkSession, frame: InputFrame, cti_replay: CtiReplay) -> Verdicts:
    """The policy's verdict on every at-risk row (raising for rows that break a rule)."""
    node = frame.node
    rows = sorted(frame.collected, key=lambda r: r[POS])
    for r in rows:
        if r["__bad"]:
            error = ImportOrderError if r["__bad"] == NO_ARRIVAL else InputError
            raise error(node.name, r[POS], received_items(spark, frame, [r])[row_key(r)], _bad_rule(frame, r["__bad"], r[KIND]))
    if has_ordering(frame):
        return _ordered_verdicts(frame, rows)
    in_force = cti_in_force(cti_replay.steps[node.name])
    adjust = frame.policy.adjust
    events: list[tuple[int, int, int, int, int, int]] = []
    ends: list[tuple[int, int, int]] = []
    for r in rows:
        if not r["__risk"]:
            continue
        cti = in_force((r[ARR], frame.decl, r[POS], 0))
        kind, s, e = r[KIND], r[S], r[E]
        if kind == END:
            if e < cti:
                ends.append((r[ORDER], r[FILE], cti))
            continue
        if s >= cti:
            continue
        if not frame.policy.has_settings:
            raise CtiViolationError(
                node.name,
                r[POS],
                received_items(spark, frame, [r])[row_key(r)],
                cti_violation_rule(Rule.START_BEFORE_CTI, cti),
            )
        lifetime = adjusted_lifetime(kind, e, cti) if adjust else None
        if lifetime is not None:
            events.append((r[ORDER], r[FILE], ADJUSTED, cti, *lifetime))
        else:
            events.append((r[ORDER], r[FILE], DROPPED, cti, s, e))
    return Verdicts(events, ends, {row_key(r): r[POS] for r in rows})


def _ordered_verdicts(frame: InputFrame, rows: Sequence[Any]) -> Verdicts:
    """The verdicts ``scan_ordered`` computed, and the counts they make (as the in-memory
    ingress counts them: an event both late and out of order counts under both rules)."""
    counts = InputMetrics(received=sum(frame.blocks.events.values()) if frame.blocks else 0)
    substreams = frame.node.over is not None
    for r in rows:
        if r["__first"]:
            counts.substreams[r["__key"]] = SubstreamMetrics(received=r["__key_events"])
    events: list[tuple[int, int, int, int, int, int]] = []
    rules: dict[tuple[int, int], Rule] = {}
    for r in rows:
        status = r["__status"]
        if not status:
            continue
        events.append((r[ORDER], r[FILE], status, r["__bound"], r["__adm_s"], r["__adm_e"]))
        rules[row_key(r)] = CTI_RULE_CODES[r["__rule"]]
        action = Action.DROPPED if status == DROPPED else Action.ADJUSTED
        late = (Action.ADJUSTED if r["__late_kept"] else Action.DROPPED) if r["__late"] else None
        for c in (counts, counts.substreams[r["__key"]]) if substreams else (counts,):
            count_rejection(c, rules[row_key(r)], action, True, late)
    for every in (counts, *counts.substreams.values()):
        every.admitted = every.received - every.dropped
    return Verdicts(events, [], {row_key(r): r[POS] for r in rows}, rules, counts)


def row_key(r: Any) -> tuple[int, int]:
    """A collected row's name among the input's rows: (order value, file)."""
    return (r[ORDER], r[FILE])


def received_columns(node: SourceNode) -> list[Column]:
    """The columns a received item is rebuilt from: kind, times, arrival and the payload on the wire."""
    cols = [F.col(KIND), F.col(S), F.col(E), F.col(ARR)]
    for f in record_fields(node.payload_type):
        c = F.col(f"`{f.name}`")
        cols.append((F.unix_micros(c) if f.dtype is datetime else c).alias(f"__p_{f.name}"))
    return cols


def received_items(spark: SparkSession, frame: InputFrame, rows: Sequence[Any]) -> dict[tuple[int, int], Any]:
    """The received items of some rows (each with ``ORDER``, ``FILE``, ``POS``), by key."""
    if frame.items is not None:  # an item list: its order column is the position
        return {row_key(r): frame.items[r[ORDER]] for r in rows}
    if not rows:
        return {}
    from tempo.spark.types import from_wire

    assert frame.df is not None
    keys = spark.createDataFrame([(r[ORDER], r[FILE], r[POS]) for r in rows], f"{ORDER} long, {FILE} long, {POS} long")
    found = frame.df.join(F.broadcast(keys), [ORDER, FILE]).select(ORDER, FILE, POS, *received_columns(frame.node)).collect()
    names = field_names(frame.node.payload_type)
    out: dict[tuple[int, int], Any] = {}
    for r in found:
        payload = None
        if r[KIND] not in (CTI, HEARTBEAT):
            wire = [r[f"__p_{n}"] for n in names]
            try:
                payload = from_wire(frame.node.payload_type, wire, naive=False)
            except Exception:  # the payload class refuses the row (a validator against a null): show the values
                payload = dict(zip(names, wire))
        if r[KIND] is None or r[S] is None or r[E] is None:  # a row that is no item: its payload shows it
            out[row_key(r)] = payload
            continue
        out[row_key(r)] = item_of((r[ARR], r[KIND], r[S], r[E], payload, r[POS], None))
    return out


def row_positions(spark: SparkSession, frame: InputFrame, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """Positions of rows the scan did not collect: the rows before them in their block,
    plus the blocks before (only for the few end edges the pairing rejects)."""
    if frame.items is not None:
        return {k: k[0] for k in keys}
    if not keys:
        return {}
    assert frame.df is not None and frame.blocks is not None
    prefix = frame.blocks.prefix(frame.blocks.rows, "sum", 0)
    wanted = spark.createDataFrame([(o, f) for o, f in keys], "__ko long, __kf long").withColumn(BLOCK, frame.blocks.of(F.col("__ko")))
    earlier = (F.col(ORDER) < F.col("__ko")) | ((F.col(ORDER) == F.col("__ko")) & (F.col(FILE) < F.col("__kf")))
    counts = frame.df.join(F.broadcast(wanted), BLOCK).groupBy(BLOCK, "__ko", "__kf").agg(F.sum(earlier.cast("long")).alias("n")).collect()
    return {(r["__ko"], r["__kf"]): prefix[r[BLOCK]] + r["n"] for r in counts}
