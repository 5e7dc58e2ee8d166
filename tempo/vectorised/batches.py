"""A live query's micro-batch computed in bulk on the driver by polars: the vectorised
executor's ``tempo.runtime.bulk.BatchEngine``.

A live executor collects each micro-batch's rows to the driver as Arrow tables, where the
live engine (``tempo.runtime.live``) takes them one item at a time, some microseconds an
event. For queries of the bulk shape (``tempo.runtime.bulk.bulk_shape``) this engine takes
the same tables column by column instead:

1. each input's rows become columns of ticks and codes (order, kind, lifetime, arrival)
   beside the payload columns; a null where a rule forbids one, a kind that is not one, or
   columns that do not fit the source send the batch item by item, which names the rule and
   the row;
2. ``plan_batch`` applies each input's time rules over those columns, and ``frontier_cut``
   says what the arrival frontier holds;
3. the stateless operators and unions below the window (the vectorised compiler's own
   rules) and the window's partial aggregates per window and group run as polars plans,
   each event carrying its rank in the merged arrival order (``FIRST``) so that groups keep
   the order item by item gives them. With a join below the window, the events its sides
   hold and the waiting pairs the batch releases come from the engine (``join_before``), the
   batch's pairs are made here by the rule ``tempo.runtime.bulk.JoinBefore`` states, and the
   pairs still waiting and the batch's events the join still holds go back (``JoinAfter``).
   These relations are ``tempo.lowering.batches``' rules, which Spark's bulk engine shares;
   here a join input event's position is an integer rank too (``HELD``);
4. ``apply_batch`` merges the partials into the engine and runs the batch's few special
   rows (CTIs, late rows) through their ingresses.

Nothing leaves the driver: a batch costs what collecting its rows costs, which item by item
pays too, and polars' fixed cost a batch (measured in bench/README.md, "Live queries"). Float sums and averages add a batch's values in
polars' order rather than one by one (docs/streaming.md, as for Spark's bulk engine).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import polars as pl

from tempo.errors import TempoError, UnsupportedError
from tempo.events import EventShape
from tempo.expr.nodes import udf_error
from tempo.expr.schema import field_names, record_fields
from tempo.lowering.batches import (
    FIRST,
    POSITION,
    Found,
    fresh_pair,
    join_side,
    latest_times,
    partial_spans,
    placed_pairs,
    read_partials,
    refused,
    released,
    released_pairs,
    renamed_events,
    still_held,
    widest,
    window_input,
    window_partials,
)
from tempo.plan import nodes as p
from tempo.plan.query import Query
from tempo.runtime.bulk import (
    BatchPlan,
    BulkShape,
    FrontierCut,
    JoinAfter,
    JoinBefore,
    Partial,
    Position,
    apply_batch,
    frontier_cut,
    join_before,
    plan_batch,
    plan_order,
)
from tempo.runtime.ingress import HEARTBEAT, INTERVAL, POINT
from tempo.runtime.replay import CtiReplay
from tempo.sources import TableSource
from tempo.ticks import INF, NEG_INF
from tempo.vectorised.compiler import Compiler, check_nodes, matched, prefixed
from tempo.vectorised.expressions import END as E
from tempo.vectorised.expressions import START as S
from tempo.vectorised.expressions import EXECUTOR, events_frame, payload_objects
from tempo.vectorised.ingress import below_microsecond, payload_columns, scalar_table, ticks_of, kind_codes, respelled_kinds

if TYPE_CHECKING:
    from tempo.runtime.live import LiveEngine

ROW, ORDER, KIND, ARR = "__tempo_row", "__tempo_order", "__tempo_kind", "__tempo_arr"
"""A row's place in its input's Arrow table, its order value, kind code and arrival (ticks)."""


def vectorised_batches(query: Query, shape: BulkShape[p.WindowNode]) -> VectorisedBatches:
    """The ``tempo.runtime.bulk.BatchEngineFactory`` of this executor."""
    return VectorisedBatches(query, shape)


@attrs.frozen
class _Batch:
    """A batch's admitted events per input (lazy, with ``FIRST``), and each rank's place in
    the merged arrival order: ``places[rank]`` is ``(arrival, input, order)``."""

    events: dict[str, pl.LazyFrame]
    places: Callable[[int], tuple[int, int, int]]


class VectorisedBatches:
    """Computes one bulk-shaped live query's batches with polars (see the module's docstring).
    Raises ``UnsupportedError`` when a node below the window (or the window's keys and
    aggregates) has no rule in this executor, or an input's payload class does more than
    store scalar fields (its constructor runs for every row item by item, so it must here)."""

    def __init__(self, query: Query, shape: BulkShape[p.WindowNode]) -> None:
        check_nodes(shape.window.subtree())
        for node in shape.sources:
            if not scalar_table(node):
                raise UnsupportedError(
                    EXECUTOR,
                    f"input {node.name!r}",
                    "it reads a live batch column by column only into a payload class of "
                    "scalar fields that only stores them (no validators, converters or __init__ of its own)",
                )
        self.query, self.shape = query, shape
        self.replay = CtiReplay(query)  # the stateless rules never read it

    def run(self, engine: LiveEngine, tables: Sequence[Any]) -> bool:
        """``tempo.runtime.bulk.BatchEngine.run``. A udf failing inside polars, or a value that
        a column cannot hold, sends the batch item by item, which raises the error as the
        reference does."""
        try:
            computed = self._compute(engine, tables)
        except Exception as exc:  # a udf's own exception comes through polars as raised, marked (``udf_error``)
            if udf_error(exc) is None and not isinstance(exc, (pl.exceptions.ComputeError, pl.exceptions.InvalidOperationError)):
                raise
            return False
        if computed is None:
            return False
        apply_batch(engine, self.shape, *computed)  # the engine changes only here
        return True

    def _compute(
        self,
        engine: LiveEngine,
        tables: Sequence[Any],
    ) -> (
        tuple[list[BatchPlan], FrontierCut, dict[tuple[int, int], Any], list[Partial], int | None, int, tuple[JoinBefore, JoinAfter] | None]
        | None
    ):
        """What ``apply_batch`` takes for the batch, the engine left as it is; None when the
        batch must go item by item."""
        frames: list[pl.DataFrame] = []
        for index, table in enumerate(tables):
            frame = self._rows(index, table)
            if frame is None:
                return None
            frames.append(frame)
        planned: dict[int, BatchPlan] = {}
        for index, exporter in plan_order(self.shape):
            frame = frames[index]
            arrivals = frame[ARR].to_numpy() if frame[ARR].dtype != pl.Null else None
            plan = plan_batch(
                engine,
                index,
                frame[KIND].to_numpy(),
                frame[S].to_numpy(),
                frame[E].to_numpy(),
                arrivals,
                frame[ORDER].to_numpy(),
                None if exporter is None else planned[exporter],
            )
            if isinstance(plan, str):
                return None
            planned[index] = plan
        plans = [planned[index] for index in range(len(frames))]
        cut = frontier_cut(engine, plans)
        if cut is None:
            return None
        batch = self._events(frames, plans)
        join: tuple[JoinBefore, JoinAfter] | None = None
        found: Found | None
        if self.shape.join is None:
            compiler = Compiler(self.query, self.replay, batch.events, carried=(FIRST,))
            below = self.shape.window.input
            found = _partials(compiler, self.shape.window, compiler.relation(below), below)
        else:
            before = join_before(engine, self.shape, plans)
            joined = self._join(batch, before, engine.mode.naive is True)
            if joined is None:
                return None
            found, after = joined
            join = before, after
        if found is None:
            return None
        late: dict[tuple[int, int], Any] = {}
        for plan in plans:
            if plan.late:
                read = _payloads_of_rows(self.shape.sources[plan.index], tables[plan.index], frames[plan.index], plan.late)
                late.update(((plan.index, i), payload) for i, payload in zip(plan.late, read))
        return plans, cut, late, *found, join

    def _rows(self, index: int, table: Any) -> pl.DataFrame | None:
        """Input ``index``'s rows of the batch in input order: ``ROW``, ``ORDER``, ``KIND``,
        the lifetime (a point's end its start + 1, a CTI's and a heartbeat's their time, a
        heartbeat's time its arrival), ``ARR`` (null without an arrival column) and the
        payload columns; None when a row breaks a rule or the columns do not fit."""
        from tempo.tables import check_columns, table_columns

        node = self.shape.sources[index]
        source = node.source
        assert isinstance(source, TableSource) and source.order is not None  # a live input has an order column
        try:
            check_columns(node.name, source, table_columns(table))
        except TempoError:
            return None
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        schema = frame.schema
        ticks = ticks_of(schema, source.origin_ticks(), source.time_unit)
        start = ticks(source.start) if source.start else None
        end = ticks(source.end) if node.shape is EventShape.INTERVAL and source.end else None
        arrival = ticks(source.arrival) if source.arrival else None
        order = ticks_of(schema, 0)(source.order)  # the values item by item keeps (``order_value``)
        kind = kind_codes(node, schema)
        if (
            order is None
            or kind is None
            or start is None
            or (source.arrival and arrival is None)
            or (node.shape is EventShape.INTERVAL and end is None)
        ):
            return None
        event = POINT if node.shape is EventShape.POINT else INTERVAL
        required = [f.name for f in record_fields(node.payload_type) if not f.nullable]
        k, own = pl.col(KIND), pl.col("__start")
        rows = frame.select(
            pl.int_range(pl.len(), dtype=pl.Int64).alias(ROW),
            order.alias(ORDER),
            kind.alias(KIND),
            start.alias("__start"),
            (end if end is not None else start + 1).alias("__end"),
            (arrival if arrival is not None else pl.lit(None)).alias(ARR),
            pl.any_horizontal(pl.lit(False), *[pl.col(n).is_null() for n in required]).alias("__null"),
            *payload_columns(node, schema),
        )
        rows = rows.with_columns(respelled_kinds(source, frame.lazy(), rows[KIND]).alias(KIND))
        time = pl.when(k == HEARTBEAT).then(pl.col(ARR)).otherwise(own) if arrival is not None else own
        rows = rows.with_columns(time.alias(S)).with_columns(pl.when(k == event).then(pl.col("__end")).otherwise(pl.col(S)).alias(E))
        bad = pl.col(ORDER).is_null() | k.is_null() | pl.col(S).is_null() | pl.col(E).is_null() | ((k == event) & pl.col("__null"))
        if arrival is not None:
            bad = bad | pl.col(ARR).is_null()
        below = below_microsecond(source, schema)  # a value below a microsecond: item by item names it
        if rows.select(bad.any()).item() or (below is not None and frame.select(below.any()).item()):
            return None
        if not rows[ORDER].is_sorted():
            rows = rows.sort(ORDER, maintain_order=True)
        return rows.drop("__start", "__end", "__null")

    def _events(self, frames: list[pl.DataFrame], plans: list[BatchPlan]) -> _Batch:
        """Each input's admitted events of the batch (moved ones at their new lifetimes), with
        their rank in the merged arrival order (``FIRST``)."""
        import numpy as np

        kept: list[pl.DataFrame] = []
        for frame, plan, node in zip(frames, plans, self.shape.sources):
            keep = plan.kinds == (POINT if node.shape is EventShape.POINT else INTERVAL)
            if plan.late:
                starts, ends = plan.starts.copy(), plan.ends.copy()
                for i, (s, e) in plan.moved.items():
                    starts[i], ends[i] = s, e
                keep[sorted(plan.dropped)] = False
                frame = frame.with_columns(pl.Series(S, starts), pl.Series(E, ends))
            kept.append(frame.filter(pl.Series(keep)))
        # The merged arrival order: (arrival, input, order); without arrival times every item
        # is at the earliest arrival, so the inputs come in declaration order.
        arrivals = np.concatenate(
            [f[ARR].to_numpy().astype(np.int64) if f[ARR].dtype != pl.Null else np.full(f.height, NEG_INF, np.int64) for f in kept]
        )
        inputs = np.concatenate([np.full(f.height, i, np.int64) for i, f in enumerate(kept)])
        orders = np.concatenate([f[ORDER].to_numpy() for f in kept])
        by_place = np.lexsort((orders, inputs, arrivals))
        rank = np.empty(len(orders), np.int64)
        rank[by_place] = np.arange(len(orders))
        bounds = np.cumsum([0, *(f.height for f in kept)])
        events = {
            node.name: f.with_columns(pl.Series(FIRST, rank[bounds[i] : bounds[i + 1]]))
            .lazy()
            .select(
                pl.col(S),
                pl.col(E),
                pl.col(FIRST),
                *[pl.col(n) for n in field_names(node.payload_type)],
            )
            for i, (node, f) in enumerate(zip(self.shape.sources, kept))
        }

        def place(r: int) -> tuple[int, int, int]:
            at = by_place[r]
            return int(arrivals[at]), int(inputs[at]), int(orders[at])

        return _Batch(events, place)

    def _join(self, batch: _Batch, before: JoinBefore, naive: bool) -> tuple[Found | None, JoinAfter] | None:
        """The batch through the join (``JoinBefore`` states the rule, ``tempo.lowering.batches``
        its relations): each side's events of the batch and those it held before (at their
        positions, ``HELD``); the matching overlapping pairs with an event of the batch;
        those the batch releases go on to the window in the join's emission order after the
        waiting ones it releases; the others, and the batch's events the join still holds,
        go back. None: the batch goes item by item (a shift took a held event's end to
        infinity)."""
        join = self.shape.join
        assert join is not None
        compiler = Compiler(self.query, self.replay, batch.events, carried=(FIRST,))
        d = compiler.d

        def position(rank: int) -> Position:
            return (0, rank + HELD, 0, 0) if rank < 0 else (1, *batch.places(rank))

        held: tuple[list[tuple[Position, int, int, Any]], list[tuple[Position, int, int, Any]]] = ([], [])
        for port, (node, kept) in enumerate(((join.left, before.sides[0]), (join.right, before.sides[1]))):
            fresh = join_side(compiler, node).collect()
            still = still_held(d, fresh.lazy(), before.ctis[1 - port]).collect()
            if still.height and int(still[E].max()) >= INF:
                return None
            for rank, s, e, payload in zip(still[POSITION], still[S], still[E], payload_objects(still, node.payload_type, naive)):
                held[port].append((position(rank), s, e, payload))
            old_events = events_frame(node.payload_type, kept).with_columns(_held_ranks().alias(POSITION))
            compiler.built[id(node)] = pl.concat([fresh, old_events.select(fresh.columns)]).lazy()
        ls, le, rs, re = pl.col(f"__l_{S}"), pl.col(f"__l_{E}"), pl.col(f"__r_{S}"), pl.col(f"__r_{E}")
        sides = prefixed(compiler.relation(join.left), "__l_"), prefixed(compiler.relation(join.right), "__r_")
        pairs = placed_pairs(d, matched(join, *sides).filter((ls < re) & (rs < le) & fresh_pair(d))).collect()
        out = before.out_cti
        waiting = pairs.filter(~released(d, out))
        payloads = [
            payload_objects(
                waiting.select(pl.col(f"{prefix}{n}").alias(n) for n in field_names(node.payload_type)), node.payload_type, naive
            )
            for prefix, node in (("__l_", join.left), ("__r_", join.right))
        ]
        pending = [
            ((position(later), position(earlier)), l_s, l_e, l_p, r_s, r_e, r_p)
            for later, earlier, l_s, l_e, r_s, r_e, l_p, r_p in zip(
                waiting["__later"],
                waiting["__earlier"],
                waiting[f"__l_{S}"],
                waiting[f"__l_{E}"],
                waiting[f"__r_{S}"],
                waiting[f"__r_{E}"],
                *payloads,
            )
        ]
        # The waiting pairs the batch releases, their push (``released_key``) as ``HELD`` ranks.
        old = events_frame(join.payload_type, before.released).with_columns(
            _held_ranks().alias("__later"), pl.lit(-HELD).alias("__earlier")
        )
        now = released_pairs(compiler, join, pairs.lazy(), out)
        compiler.built[id(join)] = window_input(d, old.lazy(), now)
        found = _partials(compiler, self.shape.window, compiler.relation(self.shape.window.input), join)
        return found, JoinAfter(held, pending, pairs.height - waiting.height)


HELD = 2**62
"""A join input event's ``Position`` as an integer, which compares as the positions do: a
batch event's is its rank ``FIRST``; one a side held before the batch, ``(0, rank, 0, 0)``,
is ``rank - HELD``, below every batch event's."""


def _held_ranks() -> pl.Expr:
    """``rank - HELD`` of each row (``HELD``)."""
    return pl.int_range(pl.len(), dtype=pl.Int64) - HELD


def _partials(compiler: Compiler, window: p.WindowNode, df: pl.LazyFrame, below: p.Node) -> Found | None:
    """The window's partial aggregates over its input ``df`` with the events renamed by unions
    below ``below`` (``tempo.lowering.batches.window_partials``), read on the driver. The
    events' latest times are read over their spans first, in process: a batch refused
    (``refused``) lists no windows."""
    d = compiler.d
    spans = partial_spans(d, window, df).collect()
    latest = spans.select(widest(d), *latest_times(d)).row(0)
    if refused(latest[0], latest[2]):
        return None
    grouped = window_partials(d, window, spans.lazy(), latest=False).collect()
    column = {name: grouped[name].to_list() for name in grouped.columns}
    renames = renamed_events(compiler, below)  # counted apart: a plan of its own costs less than their rows among the windows'
    renamed = 0 if renames is None else int(d.scalars(renames, [d.count()])[0])
    return read_partials(window, column, column["__first"], latest, renamed)


def _payloads_of_rows(node: p.SourceNode, table: Any, frame: pl.DataFrame, rows: list[int]) -> list[Any]:
    """The payloads of the batch's rows ``rows`` (places in input order), read as item by
    item reads them (``tempo.tables.read_columns``), for their rejections."""
    import pyarrow as pa

    from tempo.tables import read_columns

    source = node.source
    picked = table.take(pa.array(frame[ROW].gather(rows).to_list(), pa.int64()))
    payloads = read_columns(source, picked, node.shape, node.name)[4]
    return [payloads[i] for i in range(len(rows))]
