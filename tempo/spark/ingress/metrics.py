"""An input's metrics and rejections, from its verdicts and pairing outcome; the one-job
check of an input where nothing can be late."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from tempo.errors import CtiViolationError, InputError
from tempo.runtime.replay import CtiReplay
from tempo.runtime.ingress import Rejected, cti_violation_rule
from tempo.result import Action, InputMetrics, Rule
from tempo.rules import InputRule, message
from tempo.spark.ingress.admit import Admitted
from tempo.spark.ingress.blocks import cut_into_blocks
from tempo.spark.ingress.rows import POS, ARR, ORDER, FILE, ADJUSTED, breaks_a_rule
from tempo.spark.ingress.scan import scan
from tempo.spark.ingress.verdicts import cti_in_force, received_items, row_key, row_positions, decide


def finish(
    spark: SparkSession, admitted: Admitted, outcome: Sequence[Any], cti_replay: CtiReplay, with_items: bool
) -> tuple[InputMetrics, list[Rejected]]:
    """Metrics and rejections of one input, from its verdicts and its collected pairing
    outcome (raising for end edges without their start edge). ``with_items``: name the
    received item of each rejection (one more job for a table with rejections)."""
    frame, node = admitted.frame, admitted.frame.node
    replay_metrics = cti_replay.metrics(node.name)

    def with_ctis(m: InputMetrics) -> InputMetrics:
        m.ctis_generated, m.ctis_imported = replay_metrics.ctis_generated, replay_metrics.ctis_imported
        m.ctis_explicit, m.ctis_ignored = replay_metrics.ctis_explicit, replay_metrics.ctis_ignored
        return m

    if admitted.verdicts is None:
        n = validate(spark, admitted, cti_replay)
        return with_ctis(InputMetrics(received=n, admitted=n)), []
    verdicts = admitted.verdicts
    # (key, position, status, cti, admitted_as, rule) of every rejection.
    found: list[tuple[tuple[int, int], int, int, int, Any, Rule]] = []
    for o, f, status, cti, s, e in verdicts.events:
        rule = verdicts.rules.get((o, f), Rule.START_BEFORE_CTI)
        found.append(((o, f), verdicts.positions[(o, f)], status, cti, ("lifetime", s, e) if status == ADJUSTED else None, rule))
    in_force = cti_in_force(cti_replay.steps[node.name])
    late = {(o, f): c for o, f, c in verdicts.ends}
    odd = list(outcome)
    positions = row_positions(spark, frame, [row_key(r) for r in odd if row_key(r) not in verdicts.positions])
    positions.update(verdicts.positions)
    for r in sorted(odd, key=lambda r: positions[row_key(r)]):
        k, pos = row_key(r), positions[row_key(r)]
        if r["__status"] == 4:
            raise InputError(node.name, pos, received_items(spark, frame, [_with_pos(r, pos)])[k], message(InputRule.END_WITHOUT_START))
        if not frame.policy.has_settings:
            raise CtiViolationError(
                node.name,
                pos,
                received_items(spark, frame, [_with_pos(r, pos)])[k],
                cti_violation_rule(Rule.END_BEFORE_CTI, late[k] if k in late else in_force((r[ARR], frame.decl, pos, 0))),
            )
        cti = late[k] if k in late else in_force((r[ARR], frame.decl, pos, 0))
        rule = Rule.START_EDGE_DROPPED if r["__status"] == 3 else Rule.END_BEFORE_CTI
        found.append((k, pos, r["__status"], cti, ("end", r["__adm_e"]) if r["__status"] == ADJUSTED else None, rule))
    found.sort(key=lambda x: x[1])
    assert frame.blocks is not None
    received = sum(frame.blocks.events.values())
    dropped = sum(1 for x in found if x[2] != ADJUSTED)
    if verdicts.counts is not None:
        metrics = with_ctis(attrs.evolve(verdicts.counts))
    else:
        metrics = InputMetrics(received=received, admitted=received - dropped, adjusted=len(found) - dropped, dropped=dropped)
        with_ctis(metrics)
    if not with_items:
        return metrics, []
    items = received_items(spark, frame, [{ORDER: k[0], FILE: k[1], POS: pos} for k, pos, *_ in found])
    rejected = [
        Rejected(node.name, pos, items[k], rule, Action.ADJUSTED if status == ADJUSTED else Action.DROPPED, cti, admitted_as)
        for k, pos, status, cti, admitted_as, rule in found
    ]
    return metrics, rejected


def validate(spark: SparkSession, admitted: Admitted, cti_replay: CtiReplay) -> int:
    """Count the rows of an input where nothing can be late, checking each (one job; none
    when ``admit`` had the driver prove them good, ``count_if_clean``); a row that breaks a
    rule raises as the in-memory executor raises, named by the scan."""
    if admitted.received is None:
        frame = admitted.frame
        assert frame.df is not None
        bad = breaks_a_rule(frame.node)
        r = frame.df.agg(F.count(F.lit(1)).alias("n"), F.max(bad.cast("int")).alias("bad")).collect()[0]
        if r["bad"]:
            frame.static = False
            cut_into_blocks(frame)
            scan(spark, frame, [])
            decide(spark, frame, cti_replay)
        admitted.received = r["n"]
    return admitted.received


def _with_pos(row: Any, pos: int) -> dict[str, Any]:
    return {ORDER: row[ORDER], FILE: row[FILE], POS: pos}
