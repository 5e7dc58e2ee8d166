"""The cluster engine of a live query: the driver decides time, Spark's executors hold the
window's state and do its work (``engine="cluster"``; docs/streaming.md, "Live queries on the
cluster").

Two Spark queries make one live query:

* The **time query** reads the inputs. In the driver's engine a ``_WindowFeed`` stands in the
  window's place: it passes each CTI on to the window (which so stays empty) and records
  the CTIs and the events that reach the window. A batch of one input without ordering
  settings (``planned_in_bulk``) goes in bulk: only the time columns come to the driver,
  where the bulk engine's ``plan_batch`` applies the input's time rules to them (CTIs,
  drops, adjustments) and ``apply_times`` moves the driver's engine on; Spark computes the
  stateless operators below the window and writes the batch's **stage file**: the window's
  input events (for a hopping window whose aggregates merge, each window and group's
  partial aggregates instead, ``MERGE`` rows), each with its group key, stamped with the
  window's CTI before the batch. Any other batch runs item by item in the driver's engine
  up to the window, and its stage file holds the events the feed recorded (and the ends of
  open ones, each with its event's payload, which the feed keeps until the end: it places
  the end with its event's key), each with the CTI in force when it arrived. Either way the file ends with one CTI row per CTI the
  window received in the batch (none received: the CTI before it again), carrying the
  batch's id. The batch's rejections go to a side file beside it, then tempo's
  commit record (``BatchLog``) with the driver engine's state, as on the other engines.
* The **work query** reads the stage folder as a file stream, sets Spark's watermark from
  the rows' CTIs (``tempo.spark.streaming.keyed``) and runs the window one key at a time in
  ``groupBy(lane, bucket of the group key).transformWithState`` (``KeyedProcessor``), its state in Spark's
  RocksDB state store, on the executors. A micro-batch gives back the results and the CTI
  rows of the CTIs Spark's watermark passed since the previous one. In its ``foreachBatch``
  the driver gives each result the first of those CTIs at or after its end, the one that
  released it in memory, and pushes the results (by start, end, group key) and the CTIs in
  order through the operators above the window (``LiveEngine``'s, run on the driver, their
  state in the work query's own commit records under ``cluster/work``); the output goes to
  the sink with tempo's commit protocol, the rejections of each stage batch with its last
  CTI row.

* A keyed node that reads the window's results alone through stateless operators is its
  next **hop** (``cluster_chain``), with a work query of its own: the work query below it
  stages, instead of writing the sink, what its results bring the next node (a
  ``_WindowFeed`` in that node's place in its driver's engine), a stage batch per work batch
  under the time query's protocol; the last work query writes the sink.

Each query is exactly-once on its own: the time query by tempo's records and stage files
written once under their batch id (a batch run again after a crash finds its file there);
the work query by Spark's checkpoint of the file source and the state store, and its own
commit records. What a restart reads is therefore what each left, and the output is the
in-memory executor's: each micro-batch of the work query a stretch of its release sequence,
but for the order of a window's groups among themselves, which the semantics leave open
(docs/semantics.md 5.7) and which this engine gives by group key.
"""

from __future__ import annotations

import functools
import itertools
import os
import pickle
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar, cast

import attrs
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as st

from tempo.errors import EvaluationError, TempoError, UdfResultError, UnsupportedError
from tempo.events import Cti
from tempo.expr.nodes import udf_error
from tempo.expr.schema import record_fields
from tempo.lowering.batches import FIRST, partial_columns
from tempo.plan.query import Query
from tempo.plan.windows import HoppingWindow
from tempo.result import InputMetrics, Result, released_table
from tempo.runtime import event_windows as ew
from tempo.runtime.clip import Clip
from tempo.runtime.joins import AntiJoin, Join, matching_key
from tempo.runtime.operator import Operator
from tempo.runtime.patterns import FollowedBy
from tempo.runtime.windows import Window
from tempo.plan import nodes as p
from tempo.runtime.analytics import Analytic
from tempo.runtime.bulk import (
    JOIN_KEY_TYPES,
    STATELESS,
    WHY_NOT,
    BulkShape,
    apply_times,
    consumers_of,
    reaching_checks,
    reaching_shape,
    runs_unmergeable,
    unmergeable,
)
from tempo.runtime.keyed import (
    IN_ORDER,
    KEYED_NODES,
    MATCHING,
    TWO_INPUTS,
    AntiJoinTimeline,
    JoinTimeline,
    KeyedResult,
    by_substream,
    cti_in_force,
    keyed_unsupported,
    may_reach_infinity,
    pass_cti,
    placed,
    release_order,
    released_from,
    restamp,
)
from tempo.runtime.live import LiveEngine
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.spark.columns import floor_div, worker_errors
from tempo.spark.compiler import Compiler
from tempo.spark.ingress.rows import ARR, KIND, NULLF, ORDER
from tempo.spark.sources import spark_path
from tempo.spark.streaming.bulk import BulkRunner, session_runs, window_partials
from tempo.spark.streaming.checkpoint import BatchLog
from tempo.spark.streaming.executor import (
    CRASH_AT,
    BatchProgress,
    LiveQuery,
    StoppedDuringBatch,
    committed_engine,
    input_parts,
    metrics_record,
    recognized_error,
    schema_drift_error,
)
from tempo.spark.streaming.keyed import (
    BATCH,
    CTI,
    CTI_LANE,
    CTI_ROW,
    EID,
    END,
    END_EDGE,
    ENDED,
    EVENT_LANE,
    INSERT,
    ITEM,
    JOIN_KEY,
    LANE,
    MARKER,
    MERGE,
    OUT_END,
    OUT_KIND,
    OUT_START,
    PAYLOAD,
    PORT,
    POSITION,
    RANK,
    RELEASED_BY,
    RESULT,
    RESULT_COLUMNS,
    GROUP,
    START,
    BUCKET,
    KEY_BUCKETS,
    LATEST,
    SHARED,
    KeyedProcessor,
    bucket_column,
    group_names,
    KEY_CTI,
    KEY_VALUE,
    PASSED,
    SUBSTREAM,
    join_key_name,
    output_schema,
    read_move,
    read_result,
    staged_keys,
    watermark_ms,
    work_keys,
)
from tempo.spark.streaming.layout import INPUT_COLUMN
from tempo.spark.streaming.sinks import Sink
from tempo.spark.types import driver_frame, from_wire, to_wire, wire_columns
from tempo.ticks import INF, NEG_INF, from_ticks

T = TypeVar("T")

EXECUTOR = "Spark streaming"
WATERMARK = "tempo_watermark"
"""The stage's column of each row's CTI as Spark's watermark reads it (``watermark_ms``)."""
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
STATE_CONF = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB,
    # Each batch checkpoints the keys it changed, not every key's state (docs/streaming.md).
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
"""Settings the work query runs with (``transformWithState`` needs RocksDB's state store);
set on the session when a cluster query starts."""
WAIT_SECONDS = 600.0
"""How long ``process_all_available`` waits for the work query to release a stage batch."""


Keyed = p.WindowNode | p.AnalyticNode | p.ClipNode | p.ReleaseNode | p.JoinNode | p.AntiJoinNode | p.FollowedByNode
"""The stateful node the cluster engine runs one key at a time (``tempo.runtime.keyed``)."""
Matching = p.JoinNode | p.AntiJoinNode | p.FollowedByNode
"""A keyed node of two inputs, keyed by its join key (``_join_shape``, ``MATCHING``)."""
DriverOperator = Window | ew.EventWindows | Analytic | Clip | Join | AntiJoin | FollowedBy
DRIVER_OPERATORS = (Window, ew.EventWindows, Analytic, Clip, Join, AntiJoin, FollowedBy)
"""The driver's operators in the place of a ``Keyed`` node: each holds nothing there, and
passes on the CTIs it receives and the results the executors give back."""


def cluster_query(query: Query) -> Query:
    """The query the cluster engine runs: ``query`` when a node of it with a keyed form runs
    on the executors (``_keyed_shape``, or a join, an anti-join or a pattern: ``_join_shape``), else ``query`` under a ``ReleaseNode``, which holds
    what its output would (the events waiting for a CTI past their start) by key on the
    executors and changes nothing it releases. (A query under a release is its own: the API
    never builds one.)"""
    return _placed(query)[0]


def cluster_shape(query: Query) -> BulkShape[Keyed] | str:
    """The shape of ``cluster_query(query)``'s lowest keyed node (``cluster_chain``'s first)
    when the cluster engine runs it, or why it cannot: inputs of points, intervals or edges whose events reach one stateful node with a
    keyed form (a hopping, tumbling, session, count or snapshot window, an analytic, a clip;
    ``tempo.runtime.keyed``) through where / select / shift / union operators and at most
    one join of them all (``reaching_shape``), or through any plan of such operators, joins,
    anti-joins and patterns run item by item on the driver (``_below_on_the_driver``), the
    node's state and work on the executors; anything may follow it (run on the driver, on
    its results). A query without such a node whose inputs reach a join, an anti-join or a pattern through such operators and joins has it keyed by its join
    key on the executors (``_join_shape``). Any other query runs under a release (``ReleaseNode``), the whole plan
    below it item by item on the driver, as the driver engine runs it, and the output's
    waiting events by key on the executors. The node is called the window below."""
    chain = _placed(query)[1]
    return chain if isinstance(chain, str) else chain[0]


def cluster_chain(query: Query) -> list[BulkShape[Keyed]] | str:
    """The keyed nodes of ``cluster_query(query)`` the cluster engine runs on the executors,
    lowest first (its **hops**: docs/streaming.md), or why it cannot run the query: the
    first is ``cluster_shape``'s, each next one the keyed node that reads the one before's
    results alone through where / select / shift operators (``_next_hop``). Of a keyed
    node found as ``_keyed_shape`` finds it and one found as ``_join_shape`` does, the
    chain leaving the fewer stateful operators on the driver is taken (the first of equals)."""
    return _placed(query)[1]


def _placed(query: Query) -> tuple[Query, list[BulkShape[Keyed]] | str]:
    """``cluster_query(query)`` and ``cluster_chain(query)``, each keyed shape worked out once."""
    if not isinstance(query.root, p.ReleaseNode):
        chains: list[list[BulkShape[Keyed]]] = []
        if any(isinstance(n, KEYED_NODES) for n in query.nodes):
            shape = _keyed_shape(query)
            if not isinstance(shape, str):
                chains.append(_chain(query, shape))
        joined = _join_shape(query)
        if not isinstance(joined, str):
            chains.append(_chain(query, cast("BulkShape[Keyed]", joined)))
        around = _around_chain(query)
        if not isinstance(around, str):
            chains.append(around)
        if chains:
            return query, min(chains, key=lambda chain: _left_on_the_driver(query, chain))
        key = query.substream_key(query.root)  # the output releases by a key's own CTIs too: so does the release
        query = Query.build(p.ReleaseNode(query.root, keyed_by=key))
        if key is not None and key.dtype not in JOIN_KEY_TYPES:
            return query, f"its output's substream key is of type {key.dtype.__name__}"
    shape = _keyed_shape(query)
    if isinstance(shape, str):  # the whole plan below the release, on the driver
        root = query.root
        assert isinstance(root, p.ReleaseNode)
        release = reaching_checks(query, BulkShape(tuple(query.sources), root, query.nodes.index(root)))
        shape = cast("BulkShape[Keyed] | str", release)
    return query, shape if isinstance(shape, str) else [shape]


def _chain(query: Query, *first: BulkShape[Keyed]) -> list[BulkShape[Keyed]]:
    """``first`` (the lowest keyed nodes, in order) and the keyed nodes above them that run on
    the executors too, in order."""
    consumers = consumers_of(query)
    chain = list(first)
    while (hop := _next_hop(query, chain[-1], consumers)) is not None:
        chain.append(hop)
    return chain


def _next_hop(query: Query, below: BulkShape[Keyed], consumers: dict[int, list[p.Node]]) -> BulkShape[Keyed] | None:
    """The node with a keyed form (but the release) that reads ``below``'s results alone,
    through where / select / shift operators that nothing else reads, when it runs keyed
    (``keyed_unsupported``, ``reaching_checks``); else None. The driver runs those operators
    between the two on the results ``below``'s keys give back, and stages what reaches it."""
    node = _reader_above(below.window, consumers)
    if below.partner is not None:  # a left outer join's halves: through the union of their results
        if node is None or node is not _reader_above(below.partner, consumers) or not isinstance(node, p.UnionNode):
            return None
        node = _reader_above(node, consumers)
    if node is None or not isinstance(node, KEYED_NODES) or isinstance(node, p.ReleaseNode) or keyed_unsupported(node) is not None:
        return None
    shape = reaching_checks(query, BulkShape(below.sources, node, query.nodes.index(node)), by_substream=True)
    return None if isinstance(shape, str) else cast("BulkShape[Keyed]", shape)


def _reader_above(node: p.Node, consumers: dict[int, list[p.Node]]) -> p.Node | None:
    """The first node above ``node`` that is not a where / select / shift operator, reached
    through such operators each read by that one node alone; None if a node on the way is
    read twice, or by nothing."""
    while len(readers := consumers[id(node)]) == 1:
        node = readers[0]
        if not isinstance(node, STATELESS):
            return node
    return None


def chain_nodes(chain: list[BulkShape[Keyed]]) -> list[p.Node]:
    """The nodes ``chain`` runs keyed on the executors: each shape's node and its partner."""
    return [n for shape in chain for n in (shape.window, shape.partner) if n is not None]


def _left_on_the_driver(query: Query, chain: list[BulkShape[Keyed]]) -> int:
    """How many of ``query``'s stateful operators with a keyed form ``chain`` leaves to the driver."""
    keyed = {id(n) for n in chain_nodes(chain)}
    return sum(1 for n in query.nodes if isinstance(n, (*KEYED_NODES, *MATCHING)) and id(n) not in keyed)


def _keyed_shape(query: Query) -> BulkShape[Keyed] | str:
    """The shape of ``query`` on the cluster engine, its keyed node the lowest with a keyed
    form that the inputs reach through stateless operators and one join (``reaching_shape``)
    or through ``BELOW_ON_THE_DRIVER``'s operators, or why it has none."""
    shape = reaching_shape(query, False, KEYED_NODES, by_substream=True)
    if shape == WHY_NOT:
        shape = _below_on_the_driver(query)
    if shape == WHY_NOT:
        return "the inputs reach no node with a keyed form through operators the driver runs below it"
    if isinstance(shape, str):
        return shape
    why = keyed_unsupported(shape.window)
    return cast("BulkShape[Keyed]", shape) if why is None else why


BELOW_ON_THE_DRIVER = (p.SourceNode, p.UnionNode, p.JoinNode, p.AntiJoinNode, p.FollowedByNode, *STATELESS)
"""The operators the driver may run item by item below a keyed node that is not the release
put on top: the stateless ones, and joins, anti-joins and patterns, their state (the sides
held, the pending matches) on the driver with the driver's engine, as the other engines hold
it. An anti-join's fragments and their ends (decided by the right input between CTIs) reach
the keyed node as edges do."""


def _below_on_the_driver(query: Query) -> BulkShape[p.UnaryNode] | str:
    """``reaching_shape`` for the batches run item by item (``TimeRunner``), which take any
    plan of ``BELOW_ON_THE_DRIVER`` operators below the window, a stream read by two of them
    included (a join or a union of a stream with itself, joins in sequence): the lowest node
    with a keyed form whose input's plan is made of them, holds every input, and feeds
    nothing but the window; else ``WHY_NOT``."""
    consumers = consumers_of(query)
    for index, node in enumerate(query.nodes):
        if not isinstance(node, KEYED_NODES):
            continue
        assert isinstance(node, p.UnaryNode)
        below = {id(n): n for n in node.input.subtree()}
        if (
            all(isinstance(n, BELOW_ON_THE_DRIVER) for n in below.values())
            and all(id(s) in below for s in query.sources)
            and all(id(c) in below or c is node for n in below.values() for c in consumers[id(n)])
        ):
            return reaching_checks(query, BulkShape(tuple(query.sources), node, index), by_substream=True)
    return WHY_NOT


BELOW_A_KEYED_JOIN = (p.SourceNode, p.UnionNode, p.JoinNode, *STATELESS)
"""The operators the driver may run item by item below a keyed join: none that holds an
event open (an anti-join's fragments, a pattern's matches)."""


def _join_shape(query: Query) -> BulkShape[Matching] | str:
    """The lowest join, anti-join or pattern every input reaches through
    ``BELOW_A_KEYED_JOIN``'s operators (run item by item on the driver) and that nothing else
    reads (but a join's partner: an anti-join of the same inputs on the join's equalities and
    maybe more, a left outer join's other half, run in the same keyed operator, ``_partner``),
    when it runs keyed by its join key (``tempo.runtime.keyed.KEYED_JOIN``,
    ``KEYED_ANTI_JOIN``, ``KEYED_PATTERN``; a join's and an anti-join's keys take the ends of
    their open events, a pattern reads starts only; a join equating its inputs' substream
    keys and copying one is keyed by that key and releases by its own CTIs, ``by_substream``;
    an anti-join, a pattern and any other join merge keys, and ignore those CTIs as in
    memory), and its keys are of a type keyed alike everywhere; else why not. What follows it runs on the
    driver over its results."""
    consumers = consumers_of(query)
    for index, node in enumerate(query.nodes):
        if not isinstance(node, MATCHING):
            continue
        below = {id(n): n for side in node.inputs() for n in side.subtree()}
        partner = _partner(query, node)
        if not (
            all(isinstance(n, BELOW_A_KEYED_JOIN) for n in below.values())
            and all(id(s) in below for s in query.sources)
            and all(id(c) in below or c is node or c is partner for n in below.values() for c in consumers[id(n)])
        ):
            continue
        kept = query.substream_key(node)  # a join keeping it is keyed by it (``by_substream``): an anti-join and a pattern merge keys
        if kept is not None and kept.dtype not in JOIN_KEY_TYPES:
            return f"its join's substream key is of type {kept.dtype.__name__}"
        refused = _join_key_refused(node)
        if refused is not None:
            return refused
        if partner is not None:
            return BulkShape(tuple(query.sources), node, index, partner=partner, partner_position=query.nodes.index(partner))
        return BulkShape(tuple(query.sources), node, index)
    return WHY_NOT


def _join_key_refused(node: Matching) -> str | None:
    """Why a join key of ``node`` cannot key it on the executors (a type not keyed alike
    everywhere), or None."""
    for pair in node.keys:
        for key in pair:
            if key.dtype not in JOIN_KEY_TYPES:
                return f"a join key is of type {key.dtype.__name__}"
    return None


def _around_chain(query: Query) -> list[BulkShape[Keyed]] | str:
    """A window whose results a join, an anti-join or a pattern reads alone through where /
    select / shift operators, its other input **going around** the window (events joined
    with a window's results, say counts per key joined with a reference stream), as a chain
    of the two and the hops above: the window keyed as ``_below_on_the_driver`` takes it over
    the inputs below it (a plan of ``BELOW_ON_THE_DRIVER``'s operators), the join its next
    hop, keyed by its join key as ``_join_shape`` takes it; the other input's plan of
    ``BELOW_A_KEYED_JOIN``'s operators (the two plans may share nodes, a stream reaching
    both; nothing else reads them) runs item by item on the driver, what reaches the join from it recorded by the time query among
    the window's CTI rows (``Around``) and given to the join's feed at its place by the
    window's work query. The window keeps no substream key (its results would go at a key's
    CTI, between CTI rows), nor does the join (its keys' output CTIs would need the key CTIs
    of both inputs), which has no partner; else ``WHY_NOT``."""
    consumers = consumers_of(query)
    for index, window in enumerate(query.nodes):
        join = _reader_above(window, consumers) if isinstance(window, p.WindowNode) else None
        if not isinstance(join, MATCHING) or _partner(query, join) is not None or query.substream_key(join) is not None:
            continue
        assert isinstance(window, p.WindowNode)
        port = around_port(window, join)
        if port is None:
            continue
        below = {id(n): n for n in window.input.subtree()}
        around = {id(n): n for n in join.inputs()[port].subtree()}
        both = below | around  # (a stream may reach both: each reading joined with its window's count)
        if not (
            all(isinstance(n, BELOW_ON_THE_DRIVER) for n in below.values())
            and all(isinstance(n, BELOW_A_KEYED_JOIN) for n in around.values())
            and all(id(s) in both for s in query.sources)
            and all(id(c) in both or c is window or c is join for n in both.values() for c in consumers[id(n)])
        ):
            continue
        if _join_key_refused(join) is not None or keyed_unsupported(window) is not None:
            continue
        first = reaching_checks(query, BulkShape(tuple(query.sources), window, index))  # (a window keeping a substream key: refused)
        if isinstance(first, str):
            continue
        return _chain(query, cast("BulkShape[Keyed]", first), BulkShape(tuple(query.sources), cast("Keyed", join), query.nodes.index(join)))
    return WHY_NOT


def around_port(window: p.Node, hop: p.Node) -> int | None:
    """The input of keyed node ``hop`` (a join, an anti-join or a pattern) that goes around
    ``window``, the keyed node below it in a chain (``_around_chain``); None when every input
    of ``hop`` reads ``window`` (a unary hop)."""
    if not isinstance(hop, MATCHING):
        return None
    sides = [port for port, side in enumerate(hop.inputs()) if all(n is not window for n in side.subtree())]
    return sides[0] if len(sides) == 1 else None


def _partner(query: Query, node: p.Node) -> p.AntiJoinNode | None:
    """The anti-join that runs in one keyed operator with join ``node``: one of the same two
    inputs whose equalities include the join's (a left outer join's halves, or a join and an
    anti-join of a group in ``apply``, whose results meet at a union in the order the two
    pushed them), so that every key of it lies within one of the join's keys, by which both
    are keyed; when the join merges substream keys (a join keeping one is keyed by it, an
    anti-join by its join key). Else None."""
    if not isinstance(node, p.JoinNode) or by_substream(query, node):
        return None
    for other in query.nodes:
        if (
            isinstance(other, p.AntiJoinNode)
            and other.left is node.left
            and other.right is node.right
            and all(k in other.keys for k in node.keys)
        ):
            return other
    return None


def planned_in_bulk(query: Query, shape: BulkShape[Keyed]) -> bool:
    """Whether the time query plans the query's batches over whole columns and Spark computes
    what reaches the window (one input whose time rules ``plan_batch`` applies, no join, and
    nothing but stateless operators below the window); else the driver runs each batch item
    by item up to the window (``TimeRunner``)."""
    planned = reaching_shape(query, True, KEYED_NODES)
    return (
        isinstance(planned, BulkShape)
        and planned.window is shape.window
        and planned.join is None
        and len(planned.sources) == 1
        and not by_substream(query, shape.window)  # its key CTIs come item by item
    )


def required_chain(query: Query) -> list[BulkShape[Keyed]]:
    """The query's keyed nodes on the cluster engine (``cluster_chain``); ``UnsupportedError``
    saying why it has none."""
    chain = cluster_chain(query)
    if isinstance(chain, str):
        raise UnsupportedError(EXECUTOR, "engine='cluster'", f"this query does not run on the cluster engine yet: {chain}")
    return chain


def stage_watermark(cti: int) -> int:
    """The watermark column's value for a row whose CTI is ``cti``: none yet is 0, where
    Spark's watermark starts."""
    return 0 if cti <= NEG_INF else watermark_ms(cti)


class Reached(NamedTuple):
    """An item that reached the window in the driver's engine, as ``_WindowFeed`` records it:
    an event (``INSERT``), or the end of an open one (``END_EDGE``: ``start`` the stage batch
    that staged its event, ``payload`` that event's, which places the end with its group
    key); ``cti`` the CTI in force at the window when it arrived (``cti_in_force``); a keyed
    join's events, their input (``port``) and join key's name (``join_key_name``); a keyed
    release's, their substream key's name (``key``), and its key's CTIs (``KEY_CTI``:
    ``start`` the time, ``payload`` the key)."""

    item: int
    eid: int
    start: int
    end: int | None
    payload: Any
    cti: int
    port: int = 0
    key: str | None = None


OPEN_EVENTS = "cluster.open_events"
"""The name of the driver engine's attached state (``LiveEngine.attached``) holding the open
events that reached the window: event id -> (the stage batch of its event, its payload); a
keyed join's or anti-join's, (input, event id) -> (that stage batch, (input, join key's
name)): one event may reach both inputs (a stream joined with itself), with one id."""


JOIN_TIMELINE = "cluster.join_timeline"
"""The name of the work query's engine's attached state holding a keyed join's
``JoinTimeline`` (its inputs' CTIs and the pairs given out as start edges whose ends wait),
or a keyed anti-join's ``AntiJoinTimeline`` (its inputs' CTIs and open fragments)."""
PARTNER_TIMELINE = "cluster.partner_timeline"
"""``JOIN_TIMELINE``'s for a keyed join's partner (``BulkShape.partner``): its ``AntiJoinTimeline``."""
NEARER_ENDS = "cluster.nearer_ends"
"""The name of the work query's engine's attached state holding the ends a keyed join's or
anti-join's keys gave at an arrival (its stage batch and place in it) before the CTI rows of
that stage batch came back: (stage batch, place, group, result). A join's: the end an end
edge gave a pair (``JoinTimeline.arrived``); an anti-join's: a right event's nearer end, or a
left event's own end with an open fragment (``AntiJoinTimeline.arrived``); a keyed
release's: the end of an open event gone out, and a substream key's CTI with the events it
released (``KeyedResult.by_key``)."""


OPEN_OUTPUTS = "cluster.open_outputs"
"""The name of the work query's engine's attached state holding the open outputs of an
analytic or a snapshot window: (group key's repr, the key's id of the output: an analytic's
event's, a snapshot's window start) -> the id the driver gave that output."""


def _group_key_at(key_fn: Callable[[Any], tuple[Any, ...]], index: int, payload: Any) -> Any:
    """Group key ``index`` of ``payload`` (a window's substream key among its group keys)."""
    return key_fn(payload)[index]


class _WindowFeed(Operator):
    """In the window's place on its input, in the driver's engine: passes each CTI on to the
    window (which so keeps the CTI in force, and stays empty) and records it, and records
    each item that reaches the window (``Reached``). An end carries no payload, and the
    operators below the window pass it on by event id alone: the feed keeps each open
    event's payload (in ``open``, the engine's attached state, saved with it) until its end,
    so that the end reaches the key its event went to."""

    def __init__(
        self, window: Operator, open_events: dict[int | tuple[int, int], tuple[int, Any]], partner: AntiJoin | None = None
    ) -> None:
        super().__init__()
        assert isinstance(window, DRIVER_OPERATORS)
        self.window = window
        self.partner = partner
        """A keyed join's partner (``BulkShape.partner``), cut off from its inputs (it
        stays empty): its events are the join's, staged once, with a left event of null key
        under a key of its own."""
        self.join_substream = window.substream_index if isinstance(window, Join) else None
        """A join keeping a substream key: the place of that key among its join keys. Its
        events are staged under that key's name, and the output CTI of each key, which the
        driver's join works out (``operator.KeyCtis``) and passes on, as a ``KEY_CTI`` row."""
        if self.join_substream is not None:
            window.emit_key_cti = self._stage_key_cti
        self.substream_of: Callable[[Any], Any] | None = None
        """The substream key of a payload, for a node keyed by it (``by_substream``: a release
        by that key, ``ReleaseNode.keyed_by``; a window grouping by it), else None."""
        if isinstance(window, Analytic) and window.by_key:
            self.substream_of = window.key_fn
        elif isinstance(window, Window) and window.substream_index is not None and window.key_fn is not None:
            self.substream_of = functools.partial(_group_key_at, window.key_fn, window.substream_index)
        self.open = open_events
        self.batch = -1
        """The stage batch being recorded."""
        self.ctis: list[int] = []
        self.moves: list[tuple[int, int, int]] = []
        """A keyed join's or anti-join's: beside each of ``ctis`` (the output CTI after it),
        the move of an input's CTI, (input, CTI, the number of events recorded before it),
        which the driver's ``JoinTimeline`` or ``AntiJoinTimeline`` reads."""
        self.events: list[Reached] = []
        """What reached the window in the batch, in arrival order."""
        self.around: list[Around] = []
        """What reached the input of the window's next hop that goes around it, in the batch
        (``_AroundFeed``), in arrival order."""

    def _substream(self, payload: Any) -> str | None:
        """The name of an event's substream key (``join_key_name``) for a node keyed by it, else None."""
        return None if self.substream_of is None else join_key_name((self.substream_of(payload),))

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        window = self.window
        if isinstance(window, TWO_INPUTS):
            key = matching_key(window.key_fns, port, payload)
            if key is not None and self.join_substream is not None:
                key = (key[self.join_substream],)
            # A left event of null key is an anti-join's key of its own, never covered.
            never_covered = port == 0 and (isinstance(window, AntiJoin) or self.partner is not None)
            name = join_key_name(key) if key is not None else f"null {eid}" if never_covered else None
            if name is None:
                return  # a null key matches nothing (an anti-join's left event: never covered, a key of its own)
            if end is None and isinstance(window, (Join, AntiJoin)):  # its end goes to its key
                self.open[(port, eid)] = (self.batch, (port, name))
            self.events.append(Reached(INSERT, eid, start, end, payload, window.out_cti, port, name))
            return
        if end is None:
            self.open[eid] = (self.batch, payload)
        self.events.append(Reached(INSERT, eid, start, end, payload, window.in_cti, key=self._substream(payload)))

    def end(self, port: int, eid: int, end: int) -> None:
        if isinstance(self.window, FollowedBy):
            return  # a pattern reads starts only
        held: int | tuple[int, int] = (port, eid) if isinstance(self.window, (Join, AntiJoin)) else eid
        if held not in self.open and eid in self.open:
            held = eid  # (an anti-join's, saved before its events were held by input too)
        opened = self.open.get(held)
        if opened is None:  # not open at the window: the window would ignore it too
            return
        if end < INF:  # an end at infinity leaves the event open, as at the window
            del self.open[held]
        batch, payload = opened
        if isinstance(self.window, (Join, AntiJoin)):  # to its event's key: (input, join key's name)
            port, name = payload
            self.events.append(Reached(END_EDGE, eid, batch, end, None, self.window.out_cti, port, name))
            return
        self.events.append(Reached(END_EDGE, eid, batch, end, payload, self.window.in_cti, key=self._substream(payload)))

    def key_cti(self, port: int, key: Any, t: int) -> None:
        """A substream key's CTI: to that key of a node keyed by it, at its place (the
        driver's window, which holds nothing, needs none); a join keeping the key works out
        the key's output CTI, which it passes on to ``_stage_key_cti``)."""
        if self.substream_of is not None:
            self._stage_key_cti(key, t)
        elif self.join_substream is not None:
            self.window.key_cti(port, key, t)

    def _stage_key_cti(self, key: Any, t: int) -> None:
        """Key ``key``'s CTI ``t`` to that key, at its place: a substream key's own, or a join
        keeping the key: the key's output CTI (moved at a key's CTI, or at a move of an
        input's CTI)."""
        self.events.append(Reached(KEY_CTI, -1, t, None, key, cti_in_force(self.window), key=join_key_name((key,))))

    def cti(self, port: int, t: int) -> None:
        window = self.window
        if isinstance(window, TWO_INPUTS):  # its keys hear its output CTI; the driver every move of an input's
            ctis = [side.cti for side in window.sides] if isinstance(window, Join) else window.ctis
            moved, before = ctis[port], len(self.events)
            window.cti(port, t)  # (a join keeping a substream key: the keys' output CTIs it moves follow)
            if t > moved:
                self.ctis.append(window.out_cti)
                self.moves.append((port, t, before))
            return
        window.cti(port, t)
        if not self.ctis or t > self.ctis[-1]:
            self.ctis.append(t)
            if self.substream_of is not None:  # its key CTIs go among the CTI rows by place
                self.moves.append((0, t, len(self.events)))


class Around(NamedTuple):
    """An item that reached a keyed join's input going around the window below it
    (``_around_chain``) in the time query's engine: an event (``INSERT``), the end of an open
    one (``END_EDGE``) or a CTI (``CTI_ROW``, ``start`` its time); ``place`` the number of
    the window's CTI rows of its stage batch (``_WindowFeed.ctis``) before it, where the
    window's work query gives it to the join's feed: after what the window released at
    those rows, before the next, as in memory."""

    place: int
    item: int
    eid: int
    start: int
    end: int | None
    payload: Any


class _AroundFeed(Operator):
    """In a keyed join's place on its input that goes around the window below it
    (``_around_chain``), in the time query's engine: records what reaches it in the window
    feed's ``around``, beside the window's CTI rows, and passes nothing on (the join's state
    is on the executors; the window's work query replays these at their places). A substream
    key's CTI is ignored, as the join, which merges keys, ignores it."""

    def __init__(self, feed: _WindowFeed) -> None:
        super().__init__()
        self.feed = feed

    def _record(self, item: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        self.feed.around.append(Around(len(self.feed.ctis), item, eid, start, end, payload))

    def insert(self, port: int, eid: int, start: int, end: int | None, payload: Any) -> None:
        self._record(INSERT, eid, start, end, payload)

    def end(self, port: int, eid: int, end: int) -> None:
        self._record(END_EDGE, eid, end, end, None)

    def cti(self, port: int, t: int) -> None:
        self._record(CTI_ROW, -1, t, None, None)


def go_around(feed: _WindowFeed, port: int, items: tuple[Around, ...]) -> None:
    """``items``, recorded in the time query at a keyed join's input ``port`` going around
    the window, to the join's feed in the window's work query (``feed``), in their order."""
    for a in items:
        if a.item == INSERT:
            feed.insert(port, a.eid, a.start, a.end, a.payload)
        elif a.item == END_EDGE:
            assert a.end is not None
            feed.end(port, a.eid, a.end)
        else:
            feed.cti(port, a.start)


class Shared(NamedTuple):
    """What the flush brings every bucket of keys when the window's lifetimes may reach
    infinity (``SHARED`` rows): the CTI before the batch, the last finite CTI, and the latest
    finite time over all keys, where open lifetimes end (``Window.SHARED``)."""

    before: int
    last_cti: int
    latest: int


@attrs.frozen
class StageBatch:
    """What a stage batch's side file holds: its rejections, whether it flushed the query,
    and what reached the next hop's input going around the keyed node (``Around``)."""

    rejections: list[Any]
    final: bool
    around: tuple[Around, ...] = ()


class Stage:
    """The stage folder of a cluster query's keyed node (``<checkpoint>/cluster/stage``, a
    file per time batch; ``stage<hop>``, a file per batch of the work query of the keyed node
    below, for the ``hop``-th of a chain: ``cluster_chain``) and the side files beside it
    (``<checkpoint>/cluster/batches``, ``batches<hop>``); ``work_log`` the records of the
    work query reading it."""

    def __init__(self, spark: SparkSession, query: Query, shape: BulkShape[Keyed], log: BatchLog, work_log: BatchLog, hop: int = 0) -> None:
        self.spark = spark
        self.work_log = work_log
        self.query = query
        self.shape = shape
        store = self.store = log.store
        self.root = store.join(log.checkpoint, "cluster")
        suffix = str(hop) if hop else ""
        self.folder = store.join(self.root, f"stage{suffix}")
        self.scratch = store.join(self.root, f"_scratch{suffix}")  # one batch at a time: overwritten by each
        self.sides = store.join(self.root, f"batches{suffix}")
        for path in (self.folder, self.sides):
            store.makedirs(path)
        window = shape.window
        self.keys = staged_keys(query, window)
        self.payload_type = window.inputs()[0].payload_type
        self.joined = isinstance(window, MATCHING)
        """Whether the stage holds a keyed join's, anti-join's or pattern's events: both
        inputs', their payloads pickled (``PORT``, ``JOIN_KEY``, ``PAYLOAD``)."""
        self.by_key = by_substream(query, window)
        """Whether the stage holds the rows of a node keyed by its substream key, naming that
        key (``SUBSTREAM``), its key CTIs among them (``KEY_CTI``)."""
        self.merged = isinstance(window, p.WindowNode) and unmergeable(window) is None
        self.runs = isinstance(window, p.WindowNode) and runs_unmergeable(window) is None
        self.open_lifetimes = may_reach_infinity(query, shape.window)
        """Whether the window's lifetimes may reach infinity: then the flush brings every
        bucket the last finite CTI and the latest finite time over all keys (``SHARED``)."""
        self.schema: st.StructType | None = None

    @property
    def key_columns(self) -> list[str]:
        return group_names(self.query, self.shape.window)

    def rows(self, batch: int, relation: DataFrame, before: int) -> DataFrame:
        """The window's input events ``relation`` (start, end, first place, payload) as stage
        rows: with a hopping window whose aggregates merge (``tempo.runtime.bulk.unmergeable``),
        a row per window and group (``MERGE``: the events' partial aggregates, computed here by
        Spark, so that a key's operator gets a row per window rather than per event), but for
        events spanning ``EAGER_WINDOWS`` windows or more, or reaching infinity, which go as
        events (the window keeps them aside: ``tempo.runtime.windows.Window``); with a
        session window whose events go as runs (``tempo.runtime.bulk.runs_unmergeable``), a
        row per run and group (``MERGE``, ``START`` the run's start), but for events reaching
        infinity."""
        window = self.shape.window
        if not isinstance(window, p.WindowNode) or not (self.runs or self.merged):
            return self._events(batch, relation, before)
        longest = self.query.longest_lifetime(window.input)
        if self.runs:
            if longest is not None:  # no lifetime reaches infinity: one read of the batch
                short, long = relation, None
            else:
                finite = F.col(E) < F.lit(INF)
                short, long = relation.filter(finite), relation.filter(~finite)
            partials = self._partials(window, session_runs(window, short), batch, before, F.lit(None).cast("long"), F.col("__smin"))
            return partials if long is None else self._events(batch, long, before).unionByName(partials, allowMissingColumns=True)
        spec = window.spec
        assert isinstance(spec, HoppingWindow)
        if longest is not None and spec.most_windows_past_first(longest) < Window.EAGER_WINDOWS:
            short, long = relation, None  # every lifetime is short (points, say): one read of the batch
        else:
            span = spec.last_window(F.col(E), floor_div) - spec.first_window(F.col(S), floor_div)
            condition = (span < F.lit(Window.EAGER_WINDOWS)) & (F.col(E) < F.lit(INF))
            short, long = relation.filter(condition), relation.filter(~condition)
        partials = self._partials(window, window_partials(window, short), batch, before, F.col("__k"), F.lit(None).cast("long"))
        return partials if long is None else self._events(batch, long, before).unionByName(partials, allowMissingColumns=True)

    def _partials(self, window: p.WindowNode, partials: DataFrame, batch: int, before: int, eid: Column, start: Column) -> DataFrame:
        """Rows of partial aggregates (``window_partials``' or ``session_runs``') as ``MERGE``
        stage rows: ``EID`` the hopping window, ``START`` the run's start."""
        return partials.select(
            F.col("__first").cast("long").alias(POSITION),
            F.lit(MERGE).cast("int").alias(ITEM),
            eid.alias(EID),
            start.alias(START),
            F.greatest(F.col("__smax"), F.col("__emax")).alias(END),
            F.lit(before).cast("long").alias(CTI),
            F.lit(stage_watermark(before)).cast("long").alias(WATERMARK),
            F.lit(EVENT_LANE).cast("int").alias(LANE),
            F.lit(batch).cast("long").alias(BATCH),
            *[F.col(c) for c in self.key_columns],
            F.col("__n"),
            *[F.col(c) for c in partial_columns(window)],
        )

    def _events(self, batch: int, relation: DataFrame, before: int) -> DataFrame:
        """The window's input events ``relation`` as stage rows of their own."""
        return relation.select(
            F.col(FIRST).cast("long").alias(POSITION),
            F.lit(INSERT).cast("int").alias(ITEM),
            F.col(FIRST).cast("long").alias(EID),
            F.col(S).alias(START),
            F.col(E).alias(END),
            F.lit(before).cast("long").alias(CTI),
            F.lit(stage_watermark(before)).cast("long").alias(WATERMARK),
            F.lit(EVENT_LANE).cast("int").alias(LANE),
            F.lit(batch).cast("long").alias(BATCH),
            *self.keys,
            *wire_columns(self.payload_type),
        )

    def recorded(self, batch: int, events: list[Reached]) -> DataFrame:
        """What the driver's engine sent the window in batch ``batch``, item by item
        (``_WindowFeed``), as stage rows: each at its place in the batch, with the CTI in
        force at the window when it arrived."""
        if self.joined:
            return self._joined(batch, events)
        long = st.LongType()
        leading = [st.StructField(ITEM, st.IntegerType())] + [
            st.StructField(name, long) for name in (POSITION, EID, START, END, CTI, WATERMARK)
        ]
        by_key: list[Column] = []
        if self.by_key:  # each row's substream key's name, a key CTI's key (``by_substream``)
            leading += [st.StructField(SUBSTREAM, st.StringType()), st.StructField(KEY_VALUE, st.BinaryType())]
            by_key = [F.col(SUBSTREAM), F.col(KEY_VALUE), F.lit(None).cast("int").alias(PORT)]
        blank = [None] * len(record_fields(self.payload_type))  # a key CTI's payload fields
        rows = [
            (r.item, i, r.eid, r.start, r.end, r.cti, stage_watermark(r.cti))
            + ((r.key, pickle.dumps(r.payload) if r.item == KEY_CTI else None) if self.by_key else ())
            + tuple(blank if r.item == KEY_CTI else to_wire(r.payload))
            for i, r in enumerate(events)
        ]
        relation = driver_frame(self.spark, leading, self.payload_type, rows)
        return relation.select(
            POSITION,
            ITEM,
            EID,
            START,
            END,
            CTI,
            WATERMARK,
            F.lit(EVENT_LANE).cast("int").alias(LANE),
            F.lit(batch).cast("long").alias(BATCH),
            *self.keys,
            *by_key,
            *wire_columns(self.payload_type),
        )

    def _joined(self, batch: int, events: list[Reached]) -> DataFrame:
        """``recorded`` for a keyed join, anti-join or pattern: each event with its input, its
        join key's name and its payload's wire values, pickled (an anti-join's end edge: its
        event's input and key, no payload; a join keeping a substream key: that key's name,
        and a key's output CTI as a ``KEY_CTI`` row with the key pickled)."""
        long = st.LongType()
        schema = st.StructType(
            [st.StructField(ITEM, st.IntegerType())]
            + [st.StructField(name, long) for name in (POSITION, EID, START, END, CTI, WATERMARK)]
            + [st.StructField(PORT, st.IntegerType()), st.StructField(JOIN_KEY, st.StringType()), st.StructField(PAYLOAD, st.BinaryType())]
            + ([st.StructField(KEY_VALUE, st.BinaryType())] if self.by_key else [])
        )
        rows = [
            (
                r.item,
                i,
                r.eid,
                r.start,
                r.end,
                r.cti,
                stage_watermark(r.cti),
                r.port,
                r.key,
                None if r.item in (END_EDGE, KEY_CTI) else pickle.dumps(to_wire(r.payload)),
            )
            + ((pickle.dumps(r.payload) if r.item == KEY_CTI else None,) if self.by_key else ())
            for i, r in enumerate(events)
        ]
        return self.spark.createDataFrame(rows, schema).select(
            POSITION,
            ITEM,
            EID,
            START,
            END,
            CTI,
            WATERMARK,
            F.lit(EVENT_LANE).cast("int").alias(LANE),
            F.lit(batch).cast("long").alias(BATCH),
            PORT,
            JOIN_KEY,
            PAYLOAD,
            *([KEY_VALUE] if self.by_key else []),
        )

    def markers(
        self, batch: int, ctis: list[int], shared: Shared | None = None, moves: list[tuple[int, int, int]] | None = None
    ) -> DataFrame:
        """The batch's CTI rows; with ``shared``, a ``SHARED`` row for every bucket; with
        ``moves`` (a keyed join's or anti-join's, one per CTI row), each row's place among
        them (``POSITION``), its move of an input's CTI (``PORT``, ``START``) and the number
        of the batch's events before it (``END``)."""
        assert self.schema is not None
        rows: list[dict[str, Any]] = [
            {ITEM: CTI_ROW, EID: batch, CTI: c, WATERMARK: stage_watermark(c), LANE: CTI_LANE, BATCH: batch} for c in ctis
        ]
        for position, (row, (port, t, before)) in enumerate(zip(rows, moves or [])):
            row.update({POSITION: position, PORT: port, START: t, END: before})
        if shared is not None:
            before, last_cti, latest = shared
            buckets = KEY_BUCKETS if self.key_columns else 1  # a window without keys is bucket 0's alone
            rows += [
                {
                    ITEM: SHARED,
                    EID: b,
                    START: last_cti,
                    END: latest,
                    CTI: before,
                    WATERMARK: stage_watermark(before),
                    LANE: EVENT_LANE,
                    BATCH: batch,
                }
                for b in range(buckets)
            ]
        return self.spark.createDataFrame([tuple(row.get(f.name) for f in self.schema.fields) for row in rows], self.schema)

    def fix_schema(self, events: DataFrame) -> None:
        """The stage's schema, from the stage rows of a batch (every column nullable)."""
        self.schema = st.StructType([st.StructField(f.name, f.dataType, True) for f in events.schema.fields])

    def released(self) -> int:
        """The last stage batch whose CTI rows have all come back in committed output."""
        last = self.work_log.last_committed()
        return -1 if last is None else int(self.work_log.record(last)["staged_through"])

    def latest(self) -> int:
        """The latest finite time the window's keys have seen in committed output batches
        (their ``LATEST`` rows; tracked when ``open_lifetimes``)."""
        last = self.work_log.last_committed()
        return NEG_INF if last is None else int(self.work_log.record(last).get("latest", NEG_INF))

    def path(self, batch: int) -> str:
        return self.store.join(self.folder, f"{batch:012d}.parquet")

    def side(self, batch: int) -> str:
        return self.store.join(self.sides, f"{batch}.bin")

    def write(
        self,
        batch: int,
        events: DataFrame | None,
        ctis: list[int],
        side: StageBatch,
        shared: Shared | None = None,
        moves: list[tuple[int, int, int]] | None = None,
    ) -> None:
        """Stage batch ``batch``, once: its side file, then its stage file, which a reader of
        the folder sees whole or not at all (written aside, then moved in). A batch run again
        finds both there, with the content it would write."""
        if self.store.exists(self.path(batch)) or batch <= self.released():
            return  # written before a crash (and maybe read, released and dropped since)
        self.store.write(self.side(batch), pickle.dumps(side))
        rows = self.markers(batch, ctis, shared, moves)
        if events is not None:  # the columns a batch's rows lack (partial aggregates, or events' fields) null
            have = set(events.columns)
            rows = events.select(
                *[F.col(f"`{f.name}`") if f.name in have else F.lit(None).cast(f.dataType).alias(f.name) for f in rows.schema.fields]
            ).unionByName(rows)
        rows.coalesce(1).write.mode("overwrite").parquet(spark_path(self.scratch))
        parts = [n for n in self.store.names(self.scratch) if n.endswith(".parquet")]
        assert len(parts) == 1, parts
        self.store.publish(self.store.join(self.scratch, parts[0]), self.path(batch))

    def forget(self, sides_through: int, stage_through: int) -> None:
        """Drop what no run reads again: the side files of the stage batches up to
        ``sides_through`` (their CTI rows all came back in committed output batches), and
        the stage files up to ``stage_through`` (theirs came back before the output batch
        now committing: the work query's micro-batches that read them are committed too)."""
        for name in self.store.names(self.sides):
            if name.endswith(".bin") and int(name[:-4]) <= sides_through:
                self.store.remove(self.store.join(self.sides, name))
        for name in self.store.names(self.folder):
            if name.endswith(".parquet") and int(name[:-8]) <= stage_through:
                self.store.remove(self.store.join(self.folder, name))

    def read_side(self, batch: int) -> StageBatch:
        side: StageBatch = pickle.loads(self.store.read(self.side(batch)))
        return side


class _Crashes:
    """The testing hook of ``tempo.spark.streaming.executor`` (``TEMPO_CRASH_AT``); a phase's
    name after ``prefix`` (the work query of a chain's ``hop``-th keyed node: ``work<hop>-``)."""

    def __init__(self, prefix: str = "") -> None:
        self.at = os.environ.get(CRASH_AT)
        self.prefix = prefix

    def point(self, phase: str, batch: int) -> None:
        if self.at == f"{self.prefix}{phase}:{batch}":
            os.kill(os.getpid(), signal.SIGKILL)


def fed(query: Query, shape: BulkShape[Keyed], engine: LiveEngine, batch: int, around: BulkShape[Keyed] | None = None) -> _WindowFeed:
    """The ``_WindowFeed`` in the place of ``shape``'s keyed node in ``engine`` (put there the
    first time it is asked for, at each of its inputs), emptied: it records what reaches the
    node in stage batch ``batch``; with ``around``, the next hop, a join whose other input
    goes around the node (``_around_chain``), and an ``_AroundFeed`` in its place on that
    input records what reaches it."""
    feed = _fed(query, shape, engine, batch)
    port = None if around is None else around_port(shape.window, around.window)
    if around is not None and port is not None:
        upstream = engine.operators[query.nodes.index(around.window.inputs()[port])]
        recorders = [op for op, _ in upstream.outs if isinstance(op, _AroundFeed)]
        if recorders:
            recorders[0].feed = feed
        else:
            hop = engine.operators[around.position]
            outs, upstream.outs = upstream.outs, []
            for op, at in outs:
                upstream.connect(_AroundFeed(feed) if op is hop and at == port else op, at)
    return feed


def _fed(query: Query, shape: BulkShape[Keyed], engine: LiveEngine, batch: int) -> _WindowFeed:
    """``fed`` without ``around``."""
    found = (engine.operators[query.nodes.index(n)] for n in shape.window.inputs())
    upstreams = list({id(op): op for op in found}.values())  # a self-join's input once
    feeds = [op for upstream in upstreams for op, _ in upstream.outs if isinstance(op, _WindowFeed)]
    if feeds:
        feed = feeds[0]
    else:
        window = engine.operators[shape.position]
        partner = None if shape.partner is None else engine.operators[shape.partner_position]
        assert partner is None or isinstance(partner, AntiJoin)
        feed = _WindowFeed(window, engine.attached.setdefault(OPEN_EVENTS, {}), partner)
        for upstream in upstreams:
            outs, upstream.outs = upstream.outs, []
            for op, port in outs:
                if op is not partner:
                    upstream.connect(feed if op is window else op, port)
    feed.ctis, feed.moves, feed.events, feed.around, feed.batch = [], [], [], [], batch
    return feed


def cti_at(shape: BulkShape[Keyed], engine: LiveEngine) -> int:
    """The CTI in force at ``shape``'s keyed node in ``engine`` (the driver's operator there)."""
    window = engine.operators[shape.position]
    assert isinstance(window, DRIVER_OPERATORS)
    return cti_in_force(window)


def stage_recorded(stage: Stage, batch: int, feed: _WindowFeed, before: int, side: StageBatch, shared: Shared | None = None) -> None:
    """Stage batch ``batch`` of what ``feed`` recorded (``before``: the CTI in force at the
    keyed node before it, the batch's CTI row when it moved none)."""
    events = stage.recorded(batch, feed.events) if feed.events else None
    if feed.around:
        side = attrs.evolve(side, around=tuple(feed.around))
    with worker_errors(udf_error):  # a group key's expression, evaluated by Spark
        stage.write(batch, events, list(feed.ctis) or [before], side, shared, list(feed.moves))


def flushed(stage: Stage, feed: _WindowFeed, before: int, latest: int) -> Shared | None:
    """What the flush brings every bucket of ``stage``'s keyed node when its lifetimes may
    reach infinity (``Stage.open_lifetimes``): it ends open lifetimes after the later of its
    last finite CTI and the latest finite time of its events, over every key's (``latest``
    before the batch ``feed`` recorded, and that batch's own); else None."""
    if not stage.open_lifetimes:
        return None
    last_cti = max([before, *(c for c in feed.ctis if c < INF)])
    return Shared(before, last_cti, max(latest, staged_latest(feed.events)))


def staged_latest(events: list[Reached]) -> int:
    """The latest finite time of ``events`` (their starts and ends)."""
    times = [
        t
        for r in events
        for t in ((r.start, r.end) if r.item == INSERT else (r.end,) if r.item == END_EDGE else ())
        if t is not None and t < INF
    ]
    return max(times, default=NEG_INF)


class _Batches:
    """What both runners share: one batch at a time under a lock, stop and failure."""

    def __init__(self, query: Query, log: BatchLog, crash_prefix: str = "") -> None:
        self.query = query
        self.log = log
        self.lock = threading.Lock()
        self.failure: BaseException | None = None
        self.stopping = False
        self.crash = _Crashes(crash_prefix)
        self.engine: LiveEngine | None = None
        self.engine_batch: int | None = None

    def guarded(self, run: Any, df: DataFrame, batch: int) -> None:
        if self.stopping:
            raise StoppedDuringBatch(batch)
        try:
            with self.lock:
                run(df, batch)
        except BaseException as exc:
            self.forget()
            if self.stopping:
                raise StoppedDuringBatch(batch) from None
            self.failure = exc
            raise

    def forget(self) -> None:
        """A batch failed: the engine held in memory may hold part of it."""
        self.engine = None

    def engine_after(self, batch: int | None) -> LiveEngine:
        """The engine after committed batch ``batch`` (None: at the start)."""
        if self.engine is not None and self.engine_batch == batch:
            return self.engine
        return committed_engine(self.query, self.log, batch)


class TimeRunner(_Batches):
    """The time query's ``foreachBatch`` (see the module's docstring)."""

    def __init__(
        self,
        spark: SparkSession,
        query: Query,
        shape: BulkShape[Keyed],
        log: BatchLog,
        stage: Stage,
        around: BulkShape[Keyed] | None = None,
    ) -> None:
        super().__init__(query, log)
        self.spark = spark
        self.shape = shape
        self.stage = stage
        self.around = around
        """The next hop when one of its inputs goes around the keyed node (``_around_chain``),
        whose items the stage batches' side files carry (``Around``); else None."""
        self.bulk = BulkRunner(spark, query, cast("BulkShape[p.UnaryNode]", shape))  # for planned batches only, whose window is unary
        # What goes around the keyed node is recorded by the driver's engine: item by item.
        self.planned = around is None and planned_in_bulk(query, shape)
        self.progress: list[dict[str, Any]] = []

    def _recognized(self, exc: BaseException) -> TempoError | None:
        return recognized_error(exc) or schema_drift_error(exc, self.query)

    def __call__(self, df: DataFrame, batch: int) -> None:
        self.guarded(self._run, df, batch)

    def empty_rows(self, merged: DataFrame) -> None:
        """Fix the stage's schema from the stage rows the inputs' columns make."""
        if not self.planned:
            self.stage.fix_schema(self.stage.recorded(0, []))
            return
        empty = self.spark.createDataFrame([], merged.schema)
        rows = self.stage.rows(0, self._relation(self.bulk.rows(empty, 0), None), NEG_INF)
        # A batch the plan leaves to item by item stages events (``recorded``), whatever the
        # planned batches stage: the stage holds the columns of both.
        self.stage.fix_schema(rows.unionByName(self.stage.recorded(0, []), allowMissingColumns=True))

    def _relation(self, rows: DataFrame, plan: Any) -> DataFrame:
        events = self.bulk.events(rows, 0, plan)
        compiler = Compiler(self.spark, self.query, self.bulk.replay, {self.shape.sources[0].name: events})
        window = self.shape.window
        assert isinstance(window, p.UnaryNode), "a planned batch's window has one input"
        return compiler.relation(window.input)

    def _run(self, df: DataFrame, batch: int) -> None:
        if self.log.is_committed(batch):
            return
        began = time.perf_counter()
        done = self._in_bulk(df, batch) if self.planned else None
        if done is None:
            done = self._item_by_item(df, batch)
        engine, rows, rejections = done
        self.crash.point("time-stage", batch)
        self._commit(engine, batch, {"rows": rows, "rejected": len(rejections)}, began, final=False)

    def _in_bulk(self, df: DataFrame, batch: int) -> tuple[LiveEngine, int, list[Any]] | None:
        """Stage the batch with its time rules planned over whole columns on the driver and
        the window's input computed by Spark: (the driver's engine after it, the batch's rows,
        its rejections); None when the plan cannot take it (a row breaking a rule, an
        expression failing), nothing staged."""
        engine = self.engine_after(self.log.last_committed(before=batch))
        rows = self.bulk.rows(df, 0)
        with worker_errors(self._recognized):
            times = rows.select(F.lit(0).alias(INPUT_COLUMN), ORDER, KIND, S, E, ARR, NULLF).toArrow()
        self.crash.point("time-read", batch)
        before = cti_at(self.shape, engine)
        feed = fed(self.query, self.shape, engine, batch, self.around)
        if not times.num_rows:
            self.stage.write(batch, None, [before], StageBatch([], False))
            return engine, 0, []
        planned = self.bulk.plans(engine, times)
        if planned is None:
            return None
        plans, cut = planned
        try:
            with worker_errors(udf_error):
                payloads = self.bulk.late_payloads([rows], plans, False)
                apply_times(engine, plans, cut, payloads, 0)
                engine.run()
                rejections = engine.take().rejections
                events = self.stage.rows(batch, self._relation(rows, plans[0]), before)
                self.stage.write(batch, events, list(feed.ctis) or [before], StageBatch(rejections, False))
        except (EvaluationError, UdfResultError):
            # Spark evaluates an expression on rows item by item never reaches (a row the
            # ingress drops, one a guard skips): item by item raises where the reference does.
            self.forget()
            return None
        return engine, times.num_rows, rejections

    def _item_by_item(self, df: DataFrame, batch: int) -> tuple[LiveEngine, int, list[Any]]:
        """Stage the batch as the driver engine runs it item by item up to the window (the
        inputs' time rules, and the operators below the window, their state on the driver):
        the events that reach the window go to the stage (``Stage.recorded``)."""
        engine = self.engine_after(self.log.last_committed(before=batch))  # the committed state: no bulk attempt left its mark
        with worker_errors(self._recognized):
            table = df.toArrow()
        self.crash.point("time-read", batch)
        before = cti_at(self.shape, engine)
        feed = fed(self.query, self.shape, engine, batch, self.around)
        if table.num_rows:
            for index, part in enumerate(input_parts(self.query, table)):
                if part.num_rows:
                    engine.push_rows(index, part)
        engine.run()
        rejections = engine.take().rejections
        stage_recorded(self.stage, batch, feed, before, StageBatch(rejections, False))
        return engine, table.num_rows, rejections

    def finish(self) -> int:
        """The inputs have ended: end them on the driver's engine (a CTI at infinity where
        the settings flush) and stage that as a last batch; its id."""
        with self.lock:
            last = self.log.last_committed()
            batch = 0 if last is None else last + 1
            engine = self.engine_after(last)
            before = cti_at(self.shape, engine)
            feed = fed(self.query, self.shape, engine, batch, self.around)
            engine.finish()  # what the inputs' buffers held goes on, item by item
            rejections = engine.take().rejections
            # The latest finite time over every key: what the work query gathered from them up
            # to the batches drained before the flush (a planned batch's events never reach
            # the driver).
            shared = flushed(self.stage, feed, before, self.stage.latest())
            stage_recorded(self.stage, batch, feed, before, StageBatch(rejections, True), shared)
            self.crash.point("time-stage", batch)
            self._commit(engine, batch, {"rows": 0, "rejected": len(rejections)}, time.perf_counter(), final=True)
            return batch

    def _commit(self, engine: LiveEngine, batch: int, record: dict[str, Any], began: float, final: bool) -> None:
        record = record | {
            "batch": batch,
            "final": final,
            "seconds": time.perf_counter() - began,
            "metrics": metrics_record(engine.metrics()),
        }
        self.log.commit(batch, engine.snapshot(), record, saved=lambda: self.crash.point("time-state", batch))
        self.crash.point("time-commit", batch)
        self.engine, self.engine_batch = engine, batch
        self.progress.append(record)


class WorkRunner(_Batches, Generic[T]):
    """The work query's ``foreachBatch`` (see the module's docstring): of the keyed node of
    ``stage``, the ``hop``-th of the query's chain (``cluster_chain``). The last one's
    output goes to ``sink``; any other's, what reaches the next keyed node, to that node's
    stage ``next_stage`` (a batch of it per batch of this work query, as the time query
    stages the first; the rejections and the flush go on in its side files)."""

    def __init__(
        self,
        spark: SparkSession,
        query: Query,
        shape: BulkShape[Keyed],
        payload_type: type[T],
        sink: Sink,
        log: BatchLog,
        stage: Stage,
        next_stage: Stage | None = None,
        hop: int = 0,
    ) -> None:
        super().__init__(query, log, f"work{hop}-" if hop else "")
        self.spark = spark
        self.shape = shape
        self.payload_type = payload_type
        self.sink = sink
        self.stage = stage
        self.next_stage = next_stage
        self.result_type = shape.window.payload_type
        self.progress: list[BatchProgress] = []
        self.staged_through = stage.released()
        """The last stage batch whose CTI rows have all come back (its rejections written)."""
        self.latest = stage.latest()
        """The latest finite time the window's keys have seen (``Stage.latest``)."""
        last = log.last_committed()
        self.next_latest = NEG_INF if last is None else int(log.record(last).get("next_latest", NEG_INF))
        """The latest finite time of the events staged for ``next_stage`` (``staged_latest``):
        they all passed through the driver."""
        self.around = None if next_stage is None else around_port(shape.window, next_stage.shape.window)
        """The input of the next hop that goes around this keyed node (``_around_chain``), whose
        items the stage's side files carry (``Around``), or None."""
        if next_stage is None:
            for batch in log.committed():  # a crash may have come between a commit and its publishing
                sink.publish(batch)

    def __call__(self, df: DataFrame, batch: int) -> None:
        self.guarded(self._run, df, batch)

    def _run(self, df: DataFrame, batch: int) -> None:
        if self.log.is_committed(batch):  # Spark runs a batch again when it crashed before its own commit
            # Its state stores must commit the batch again (Spark checks that each did): the
            # plan runs, its output (what was committed) goes nowhere.
            with worker_errors(recognized_error):
                df.write.format("noop").mode("overwrite").save()
            if self.next_stage is None:
                self.sink.publish(batch)
            return
        began = time.perf_counter()
        with worker_errors(recognized_error):
            table = df.toArrow()
        self.crash.point("read", batch)
        engine = self.engine_after(self.log.last_committed(before=batch))
        window = engine.operators[self.shape.position]
        assert isinstance(window, DRIVER_OPERATORS)
        partner = None if self.shape.partner is None else engine.operators[self.shape.partner_position]
        assert partner is None or isinstance(partner, AntiJoin)
        following = self.next_stage
        feed = None if following is None else fed(self.query, following.shape, engine, batch)
        before_next = NEG_INF if following is None else cti_at(following.shape, engine)
        col = {name: table.column(name).to_pylist() for name in table.column_names}
        kinds = col[OUT_KIND]
        # (stage batch, CTI, and a keyed join's or anti-join's place among them, move of an
        # input's CTI and the number of the batch's events before it)
        markers = sorted(
            (col[OUT_START][i], col[RELEASED_BY][i], *read_move(col[RANK][i], col[OUT_END][i]))
            for i in range(table.num_rows)
            if kinds[i] == MARKER
        )
        ctis = [m[1] for m in markers]
        fields = [f for f in table.column_names if f not in RESULT_COLUMNS]
        node = self.shape.window
        # Each result goes before the first of the batch's CTIs that released it in memory;
        # the ends an analytic's keys passed on after the batch's last CTI go after it.
        released: list[list[tuple[tuple[Any, ...], str, KeyedResult]]] = [[] for _ in range(len(markers) + 1)]
        partnered: list[list[tuple[tuple[Any, ...], str, KeyedResult]]] = [[] for _ in range(len(markers) + 1)]  # the partner's
        by_key = by_substream(self.query, node)
        at_arrival = isinstance(window, (Join, AntiJoin)) or by_key  # results placed by the arrival that gave them
        nearer: list[tuple[int, int, str, KeyedResult]] = engine.attached.setdefault(NEARER_ENDS, []) if at_arrival else []
        latest = self.latest
        for i in range(table.num_rows):
            if kinds[i] == LATEST:
                latest = max(latest, col[OUT_END][i])
                continue
            if kinds[i] == MARKER:
                continue
            if partner is None:
                payload = None if kinds[i] in (ENDED, PASSED) else from_wire(self.result_type, [col[f][i] for f in fields], False)
                result = read_result(kinds[i], col[RELEASED_BY][i], col[OUT_START][i], col[OUT_END][i], col[RANK][i], payload)
            else:  # payloads of the join's type and the partner's, pickled (``KeyedProcessor``)
                result = read_result(kinds[i], col[RELEASED_BY][i], col[OUT_START][i], col[OUT_END][i], col[RANK][i], None)
                if kinds[i] == RESULT:
                    assert self.shape.partner is not None
                    result_type = self.result_type if result.member == 0 else self.shape.partner.payload_type
                    result = attrs.evolve(result, payload=from_wire(result_type, pickle.loads(col[PAYLOAD][i]), False))
            member = self.shape.partner if result.member else node
            assert member is not None
            group = col[GROUP][i]
            if at_arrival and (result.ended or result.by_key is not None):  # an end told at the arrival that brought it, or a key CTI's
                arrival = result.rank[0] if result.by_key is None else result.by_key
                nearer.append((arrival >> 64, arrival & 0xFFFF_FFFF_FFFF_FFFF, group, result))
                continue
            if (
                not result.ended and released_from(member, result) > result.cti
            ):  # its key released it earlier than memory could: its place is lost
                raise AssertionError(
                    f"cluster engine: a result {result} of group {group} came back released at CTI {result.cti}, before any CTI that releases it in memory"
                )
            for at, part in placed(member, result, ctis):
                if at == len(ctis) and not (part.ended and isinstance(member, IN_ORDER)):
                    raise AssertionError(f"cluster engine: a result {part} came back with no CTI releasing it (CTIs {ctis})")
                (partnered if result.member else released)[at].append((release_order(member, part, group), group, part))
        rejections: list[Any] = []
        final = False
        staged_through = self.staged_through
        opened: dict[tuple[str, int], int] = engine.attached.setdefault(OPEN_OUTPUTS, {})
        timeline: JoinTimeline | None = engine.attached.setdefault(JOIN_TIMELINE, JoinTimeline()) if isinstance(window, Join) else None
        anti: AntiJoinTimeline | None = (
            engine.attached.setdefault(JOIN_TIMELINE, AntiJoinTimeline()) if isinstance(window, AntiJoin) else None
        )
        partner_timeline = None if partner is None else engine.attached.setdefault(PARTNER_TIMELINE, AntiJoinTimeline())
        partner_first = self.shape.partner_position < self.shape.position

        def in_their_order(join_step: Callable[[], None], partner_step: Callable[[], None]) -> None:
            """A join's step and its partner's, in the order the two read their inputs (and
            so take each arrival and CTI in memory)."""
            for step in (partner_step, join_step) if partner_first else (join_step, partner_step):
                step()

        def arrived(group: str, ends: list[KeyedResult]) -> None:
            """The ends a keyed join's or anti-join's key told at one arrival, to its timeline
            (a join's and its partner's, each to its own, in their order); a keyed release's
            end of an open event, or what a substream key's CTI released (a join's pairs
            through its timeline), then that CTI."""
            if partner is not None:
                assert partner_timeline is not None
                mine, theirs = [r for r in ends if not r.member], [r for r in ends if r.member]
                in_their_order(
                    lambda: join_arrived(group, mine) if mine else None,
                    lambda: partner_timeline.arrived(partner, group, theirs) if theirs else None,
                )
                return
            if isinstance(window, AntiJoin):
                assert anti is not None
                anti.arrived(window, group, ends)
                return
            if isinstance(window, Join) and not any(r.by_key is not None for r in ends):  # end edges: the ends they give pairs
                join_arrived(group, ends)
                return
            released = [(release_order(node, r, group), group, r) for r in ends if not r.key_cti]
            if isinstance(window, Join):
                assert timeline is not None
                for _, _, r in sorted(released, key=lambda r: r[0]):
                    oid = window.new_id()
                    window.emit_insert(oid, r.start, timeline.give(r, oid, group), r.payload)
            else:
                self._emit(window, released, None, opened)
            for r in ends:
                if r.key_cti:
                    window.emit_key_cti(r.payload, r.start)

        def join_arrived(group: str, ends: list[KeyedResult]) -> None:
            """The ends end edges gave a keyed join's pairs, to its timeline."""
            assert isinstance(window, Join) and timeline is not None
            for oid, end in timeline.arrived(group, ends):
                window.emit_end(oid, end)

        around = self.around
        side = StageBatch([], False)
        place = given = 0  # the CTI row's place among its stage batch's; the recorded items given so far (in order of place)
        for at, (stage_batch, cti, *move) in enumerate(markers):
            if at == 0 or markers[at - 1][0] != stage_batch:  # (a stage batch's CTI rows come back together)
                side, place, given = self.stage.read_side(stage_batch), 0, 0
            last_of_batch = at + 1 == len(markers) or markers[at + 1][0] != stage_batch
            if around is not None:  # what reached the next hop around this node before the row
                assert feed is not None
                due = given
                while due < len(side.around) and side.around[due].place <= place:
                    due += 1
                go_around(feed, around, side.around[given:due])
                given = due
            # What was told at the arrivals before the CTI row (held in ``nearer`` until their
            # stage batch's CTI rows come back), its move, then after the batch's last, what
            # was told at the arrivals after it.
            self._arrivals(arrived, nearer, stage_batch, move[3] if move else None)
            if partner is not None:
                assert isinstance(window, Join) and timeline is not None and partner_timeline is not None
                in_their_order(
                    lambda: self._emit_pairs(window, released[at], cti, move, timeline),
                    lambda: self._emit_fragments(partner, partnered[at], cti, move, partner_timeline),
                )
            elif isinstance(window, Join):
                assert timeline is not None
                self._emit_pairs(window, released[at], cti, move, timeline)
            elif isinstance(window, AntiJoin):
                assert anti is not None
                self._emit_fragments(window, released[at], cti, move, anti)
            else:
                self._emit(window, released[at], cti, opened)
                pass_cti(window, cti)
            place += 1
            if last_of_batch:  # the stage batch's last CTI row
                self._arrivals(arrived, nearer, stage_batch, None)
                if around is not None:  # and what reached the next hop around this node after it
                    assert feed is not None
                    go_around(feed, around, side.around[given:])
                rejections += side.rejections
                final = final or side.final
                staged_through = max(staged_through, stage_batch)
        self._emit(window, released[-1], None, opened)
        self.crash.point("engine", batch)
        out = engine.take()
        extra: dict[str, Any] = {}
        if following is None:
            events = released_table(out.items, self.payload_type)
            inputs = {s.name: s.payload_type for s in self.query.sources}
            rejected = Result([], [], {}, rejections, [], {}, None, self.payload_type, inputs).rejections_table()
            self.sink.write(self.spark, batch, events, rejected)
            self.crash.point("sink", batch)
            written, out_ctis = len(out.items), [item.timestamp.isoformat() for item in out.items if isinstance(item, Cti)]
        else:  # to the next keyed node's stage, as the time query stages the first's
            assert feed is not None
            shared = flushed(following, feed, before_next, self.next_latest) if final else None
            stage_recorded(following, batch, feed, before_next, StageBatch(rejections, final), shared)
            self.crash.point("stage", batch)
            extra["next_latest"] = max(self.next_latest, staged_latest(feed.events))
            written, out_ctis = (
                len(feed.events),
                [from_ticks(c).isoformat() for c in feed.ctis if c > NEG_INF],
            )  # (a join's output CTI: none until both inputs have one)
        state = engine.snapshot()
        previous = self.progress[-1].output_cti if self.progress else None
        progress = BatchProgress(
            batch,
            {},
            written,
            len(rejections),
            out_ctis[-1] if out_ctis else previous,
            0,
            len(state),
            time.perf_counter() - began,
            final,
            "cluster",
        )
        record = attrs.asdict(progress) | {"staged_through": staged_through, "latest": latest} | extra
        self.log.commit(batch, state, record, saved=lambda: self.crash.point("state", batch))
        self.crash.point("commit", batch)
        if following is None:
            self.sink.publish(batch)
            self.crash.point("publish", batch)
        else:
            self.next_latest = extra["next_latest"]
        self.engine, self.engine_batch = engine, batch
        self.stage.forget(staged_through, self.staged_through)
        self.staged_through, self.latest = staged_through, latest
        self.progress.append(progress)

    @staticmethod
    def _emit_pairs(
        join: Join,
        results: list[tuple[tuple[Any, ...], str, KeyedResult]],
        cti: int,
        move: list[Any],
        timeline: JoinTimeline,
    ) -> None:
        """A keyed join's CTI row (``move``: its place among its stage batch's, the input whose
        CTI moved, its CTI and the number of the batch's events before it; none for a batch
        without a move), as the join over all keys takes that move, after the ends told at the
        arrivals before it: the ends of pairs given out as start edges that the move settles,
        then, if the output CTI moves, ``results`` (the pairs it releases, with their
        ``release_order``), each whole or as a start edge (``JoinTimeline``), then the output
        CTI."""
        _, port, t, _ = move if move else (None, None, None, None)
        if port is not None and t is not None:
            for oid, end in timeline.move(port, t):
                join.emit_end(oid, end)
        if cti > timeline.out:
            for _, group, r in sorted(results, key=lambda r: r[0]):
                oid = join.new_id()
                join.emit_insert(oid, r.start, timeline.give(r, oid, group), r.payload)
            timeline.out = cti
            pass_cti(join, cti)
        elif results:
            raise AssertionError(f"cluster engine: pairs {results} came back at CTI {cti}, which the output CTI had passed")

    @staticmethod
    def _emit_fragments(
        anti: AntiJoin,
        results: list[tuple[tuple[Any, ...], str, KeyedResult]],
        cti: int,
        move: list[Any],
        timeline: AntiJoinTimeline,
    ) -> None:
        """A keyed anti-join's CTI row (``move``: as a join's, ``_emit_pairs``), as the
        anti-join over all keys takes it, after the ends told at the arrivals before it: the
        move, with ``results``, the fragments the output CTI it moves releases
        (``AntiJoinTimeline``), then the output CTI."""
        _, port, t, _ = move if move else (None, None, None, None)
        moved = cti > timeline.out
        if not moved and results:
            raise AssertionError(f"cluster engine: fragments {results} came back at CTI {cti}, which the output CTI had passed")
        timeline.move(anti, port, NEG_INF if t is None else t, cti, [(g, r) for _, g, r in sorted(results, key=lambda r: r[0])])
        if moved:
            pass_cti(anti, cti)

    @staticmethod
    def _arrivals(
        arrived: Callable[[str, list[KeyedResult]], None],
        nearer: list[tuple[int, int, str, KeyedResult]],
        stage_batch: int,
        before: int | None,
    ) -> None:
        """What was told at the arrivals of stage batch ``stage_batch``'s events before its
        ``before``-th (None: all), out of ``nearer`` (``NEARER_ENDS``), to ``arrived`` (the
        group, its results), arrival by arrival."""
        if any(n[0] < stage_batch for n in nearer):
            raise AssertionError(
                f"cluster engine: results told at arrivals {[n for n in nearer if n[0] < stage_batch]} came back after their stage batch's CTI rows"
            )
        due = sorted((n for n in nearer if n[0] == stage_batch and (before is None or n[1] < before)), key=lambda n: n[1])
        if not due:
            return
        nearer[:] = [n for n in nearer if not (n[0] == stage_batch and (before is None or n[1] < before))]
        for _, group_of_arrival in itertools.groupby(due, key=lambda n: n[1]):
            arrival = list(group_of_arrival)
            arrived(arrival[0][2], [n[3] for n in arrival])

    def _emit(
        self,
        window: DriverOperator,
        results: list[tuple[tuple[Any, ...], str, KeyedResult]],
        cti: int | None,
        opened: dict[tuple[str, int], int],
    ) -> None:
        """``results`` (each with its ``release_order`` and group), released by ``cti``, out
        of the driver's operator in the window's place in that order, each as a new event of
        its stream (a window's restamped as the query asks), but for the end of an output
        that ``cti`` releases too, which follows it; ``opened``: the driver's ids of open
        outputs, by group and the key's id of the output (an analytic's event's, a snapshot's
        window start)."""
        node = self.shape.window
        following: list[tuple[str, KeyedResult]] = []
        for _, group, r in sorted(results, key=lambda r: r[0]):
            if r.ended:
                assert r.eid is not None and r.end is not None
                if (group, r.eid) in opened:
                    window.emit_end(opened.pop((group, r.eid)), r.end)
                else:
                    following.append((group, r))
                continue
            start, end = r.start, r.end
            if isinstance(node, p.WindowNode) and end is not None:  # (cti None: released by a substream key's CTI)
                assert isinstance(window, (Window, ew.EventWindows))
                start, end = restamp(node, start, end, cti, window.in_cti_finite)
            eid = window.new_id()
            if end is None:
                assert r.eid is not None
                opened[(group, r.eid)] = eid
            window.emit_insert(eid, start, end, r.payload)
        for group, r in following:
            assert r.eid is not None and r.end is not None
            oid = opened.pop((group, r.eid), None)
            if oid is None:
                raise TempoError(
                    f"cluster engine: the work query's state holds no open output {r.eid} of group {group} for an end at tick {r.end}; "
                    f"its checkpoint {self.log.checkpoint} was written by a tempo whose state layout differs (start the query on a new checkpoint)"
                )
            window.emit_end(oid, r.end)


def work_frame(spark: SparkSession, query: Query, shape: BulkShape[Keyed], stage: Stage) -> DataFrame:
    """The work query: the stage as a stream, the window per key on the executors."""
    assert stage.schema is not None
    rows = (
        spark.readStream.schema(stage.schema)
        .option("maxFileAge", "36500d")
        .parquet(spark_path(stage.folder))
        .withColumn("__tempo_wm", F.timestamp_millis(F.col(WATERMARK)))
        .withWatermark("__tempo_wm", "1 millisecond")
        .drop("__tempo_wm", WATERMARK)  # its instants lie past the years Python's datetime holds
    )
    for name, key in work_keys(query, shape.window).items():
        rows = rows.withColumn(name, key)
    return (
        rows.withColumn(BUCKET, bucket_column(stage.key_columns))
        .groupBy(LANE, BUCKET)
        .transformWithState(
            KeyedProcessor(query, shape.position, stage.key_columns, None if shape.partner is None else shape.partner_position),
            output_schema(query, shape.position, pickled=shape.partner is not None),
            "Append",
            "EventTime",
        )
    )


class ClusterQuery(LiveQuery[T]):
    """A live query on the cluster engine: its time query and the work query of each keyed
    node of its chain, lowest first (see the module's docstring), with ``LiveQuery``'s
    methods."""

    def __init__(
        self, time_handle: Any, work_handles: list[Any], time_runner: TimeRunner, work_runners: list[WorkRunner[T]], lock: Any
    ) -> None:
        self._time = time_handle
        self._works = work_handles
        self._time_runner = time_runner
        self._work_runners = work_runners
        self._lock = lock

    def _failures(self) -> list[BaseException | None]:
        return [self._time_runner.failure, *(runner.failure for runner in self._work_runners)]

    def _drain(self, halting: bool = False) -> None:
        """Wait until each work query, lowest first, has given back every CTI row of the
        stage batches written before (by the time query, or the work query below it);
        ``halting``: stop each once it has (the flush: it stages nothing more)."""
        writers: list[_Batches] = [self._time_runner, *self._work_runners]  # each stages what the next runner reads
        for writer, runner, handle in zip(writers, self._work_runners, self._works):
            last = writer.log.last_committed()  # read once the one below has drained
            target = -1 if last is None else last
            deadline = time.monotonic() + WAIT_SECONDS
            while runner.staged_through < target:
                handle.processAllAvailable()
                if runner.staged_through >= target:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"the work query of {runner.shape.window.describe()} has not released stage batch {target} after {WAIT_SECONDS:.0f} s"
                    )
                time.sleep(0.05)
            if halting:
                self._halt(runner, handle)

    def process_all_available(self) -> None:
        """Block until every row the inputs hold now has been processed and its output committed."""
        with self._errors():
            if self._time is not None:
                self._time.processAllAvailable()
            self._drain()

    def await_termination(self, timeout: float | None = None) -> bool:
        with self._errors():
            handle = self._time if self._time is not None else self._works[-1]
            stopped = handle.awaitTermination(timeout) if timeout is not None else handle.awaitTermination()
        return stopped is None or bool(stopped)

    def _halt(self, runner: _Batches | None = None, handle: Any = None) -> None:
        if runner is None or handle is None:
            return
        runner.stopping = True
        with runner.lock:
            pass
        handle.stop()

    def stop(self) -> None:
        """Stop every query after its batch in progress; a restart continues them."""
        self._halt(self._time_runner, self._time)
        for runner, handle in zip(self._work_runners, self._works):
            self._halt(runner, handle)
        self.release()

    def flush(self) -> None:
        """The inputs have ended: as ``LiveQuery.flush``, the flush staged by the time query
        and released by the work queries, each in turn."""
        try:
            self.process_all_available()
            if self._time is not None:
                self._halt(self._time_runner, self._time)
                self._time_runner.finish()
            with self._errors():
                self._drain(halting=True)
        finally:
            self.release()

    @property
    def is_active(self) -> bool:
        return all(bool(handle.isActive) for handle in self._works) and (self._time is None or bool(self._time.isActive))

    @property
    def last_committed_batch(self) -> int | None:
        return self._work_runners[-1].log.last_committed()

    @property
    def progress(self) -> list[BatchProgress]:
        return list(self._work_runners[-1].progress)

    @property
    def metrics(self) -> dict[str, InputMetrics]:
        runner = self._time_runner
        with runner.lock:
            return runner.engine_after(runner.log.last_committed()).metrics()


def start_cluster(
    spark: SparkSession,
    query: Query,
    payload_type: type[T],
    sink: Sink,
    log: BatchLog,
    description: str,
    lock: Any,
    merged: DataFrame,
    trigger: dict[str, Any],
) -> ClusterQuery[T]:
    """Start ``query``'s time query over the inputs' stream ``merged`` and the work query of
    each keyed node of its chain (``cluster_chain``)."""
    query = cluster_query(query)
    chain = required_chain(query)
    for key, value in STATE_CONF.items():
        spark.conf.set(key, value)
    first = chain[0]
    if len(chain) > 1 or not isinstance(first.window, p.ReleaseNode) and by_substream(query, first.window) or first.partner is not None:
        # The work records of a chain, of a window or a join keyed by its substream key, or of
        # a join with its partner are not those an earlier tempo wrote for the same query (one
        # keyed node and the window above it on the driver; the release by the key and the
        # window or join below it on the driver; the join and the anti-join on the driver):
        # a checkpoint holds one layout, and the line refuses the other's.
        named = [shape.window.describe() + ("" if shape.partner is None else " with " + shape.partner.describe()) for shape in chain]
        description += "\ncluster engine: keyed nodes " + ", ".join(named)
    work_logs = [BatchLog(log.store.join(log.checkpoint, "cluster", f"work{hop or ''}"), store=log.store) for hop in range(len(chain))]
    for work_log in work_logs:
        work_log.claim(description)
    stages = [Stage(spark, query, shape, log, work_log, hop) for hop, (shape, work_log) in enumerate(zip(chain, work_logs))]
    around = chain[1] if len(chain) > 1 and around_port(chain[0].window, chain[1].window) is not None else None
    time_runner = TimeRunner(spark, query, chain[0], log, stages[0], around)
    time_runner.empty_rows(merged)
    for stage in stages[1:]:  # staged item by item by the work query below
        stage.fix_schema(stage.recorded(0, []))
    work_runners: list[WorkRunner[T]] = [
        WorkRunner(spark, query, shape, payload_type, sink, work_log, stage, stages[hop + 1] if hop + 1 < len(chain) else None, hop)
        for hop, (shape, work_log, stage) in enumerate(zip(chain, work_logs, stages))
    ]
    work_logs[-1].check_open()  # the flush was released: the query has ended
    time_handle = None
    last = log.last_committed()
    if last is None or not log.record(last).get("final"):  # else only the flush is left to release
        writer = merged.writeStream.foreachBatch(time_runner).option("checkpointLocation", log.spark_checkpoint)
        if trigger:
            writer = writer.trigger(**trigger)
        log.prepare_spark_checkpoint()
        time_handle = writer.start()
    work_handles: list[Any] = []
    try:
        for shape, stage, work_log, runner in zip(chain, stages, work_logs, work_runners):
            work = (
                work_frame(spark, query, shape, stage)
                .writeStream.foreachBatch(runner)
                .option("checkpointLocation", work_log.spark_checkpoint)
            )
            work_log.prepare_spark_checkpoint()
            work_handles.append(work.start())
    except BaseException:
        for handle in [time_handle, *work_handles]:
            if handle is not None:
                handle.stop()
        raise
    return ClusterQuery(time_handle, work_handles, time_runner, work_runners, lock)
