"""The second engine of a live query: a micro-batch computed by Spark's compiled plan.

The driver engine (``tempo.runtime.live``) handles every item in Python, which is exact
and fast for small batches but costs Python's work per event (measured in bench/README.md,
"Live queries"). For queries of the bulk shape
(``tempo.runtime.bulk.bulk_shape``: inputs without ordering settings whose
events reach one window aggregate through where / select / shift / union operators and at
most one join), a large batch runs here instead, in two Spark jobs over the batch's rows
(a few more with a join, below):

1. the time columns alone (input, order, kind, start, end, arrival: a few bytes a row) come
   to the driver, where ``plan_batch`` applies each input's time rules to whole columns;
2. Spark computes the stateless operators and unions and each window and group's partial
   aggregates (the compiler's own rules, with each row's place in the merged arrival order
   riding along); only the partials come back, a row per window and group.

With a join, the events it holds and the waiting pairs the batch releases go to Spark with
the batch; the pairs the batch releases are the window's input, and the pairs still
waiting with the count of released ones, and the batch's events the join still holds come
back (two more jobs; the join's inputs are cached for them). ``apply_batch`` merges them
into the driver engine's open windows and runs the batch's few special rows (CTIs, late
rows) through their ingresses, so the state after the batch is the one item by item gives
and either engine may take the next batch. A batch that breaks a rule of its own (a null, a
bad lifetime, order or arrival going back), holds events spanning many windows, or leaves
more than heartbeats held at the arrival frontier is run item by item instead, which names
the rule and the row, or holds the rows back.

The relations are ``tempo.lowering.batches``' rules, which the vectorised engine shares;
here an event's place and a join input event's position are structs (``tempo.spark.dialect``).
"""

from __future__ import annotations

from typing import Any

import attrs
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.window import Window as Frame
from pyspark.sql import functions as F
from pyspark.sql import types as st
from pyspark.storagelevel import StorageLevel

from tempo.errors import EvaluationError, UdfResultError
from tempo.events import EventShape
from tempo.expr.nodes import udf_error
from tempo.expr.schema import field_names
from tempo.lowering import batches
from tempo.lowering.batches import FIRST, POSITION, Found
from tempo.plan.nodes import UnaryNode, WindowNode
from tempo.plan.query import Query
from tempo.plan.windows import SessionWindow
from tempo.runtime.bulk import (
    BatchPlan,
    BulkShape,
    FrontierCut,
    JoinAfter,
    JoinBefore,
    Position,
    apply_batch,
    frontier_cut,
    join_before,
    plan_batch,
    plan_order,
    released_key,
)
from tempo.runtime.live import LiveEngine
from tempo.runtime.ingress import INTERVAL, POINT
from tempo.runtime.replay import CtiReplay
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.spark.columns import quoted, worker_errors
from tempo.spark.compiler import Compiler, overlapping_pairs
from tempo.spark.dialect import POSITION_TYPE, SparkDialect
from tempo.spark.windows import key_names
from tempo.spark.ingress.read import table_columns
from tempo.spark.ingress.rows import ARR, KIND, NULLF, ORDER, TableProjection
from tempo.sources import TableSource
from tempo.spark.streaming.layout import INPUT_COLUMN, input_prefixes
from tempo.spark.types import driver_frame, from_wire, to_wire, wire_columns
from tempo.ticks import INF

ENGINES = ("auto", "driver", "vectorised", "spark", "cluster")
"""A live query's engines: ``driver`` runs every batch item by item on the driver;
``vectorised`` every batch of a bulk-shaped query in bulk on the driver, by polars (the
vectorised executor's ``BatchEngine``); ``spark`` every batch of such a query in Spark;
``auto`` each batch on the one that suits its size (``tempo.spark.streaming.executor``);
``cluster`` the window's state and work on Spark's executors, the driver deciding time only
(``tempo.spark.streaming.cluster``)."""


@attrs.define
class BulkRunner:
    """Runs batches of one bulk-shaped query in Spark (see the module's docstring)."""

    spark: SparkSession
    query: Query
    shape: BulkShape[UnaryNode]
    """The query's shape: its window is a window for ``_aggregate`` (the cluster engine runs
    only the inputs' rows through the runner)."""
    replay: CtiReplay = attrs.field(init=False)
    _columns: dict[int, tuple[list[Column], tuple[tuple[str, str], ...]]] = attrs.field(init=False, factory=dict)
    _threads: Any = attrs.field(init=False, default=None)

    def __attrs_post_init__(self) -> None:
        self.replay = CtiReplay(self.query)  # the compiler's stateless rules never read it

    def rows(self, batch: DataFrame, index: int) -> DataFrame:
        """Input ``index``'s rows of the live query's batch, as the ingress's rows, with the
        order values the live engine keeps (``tempo.runtime.live.order_value``: an integer
        order column that is also a time column is not shifted by the time origin here)."""
        if index not in self._columns:  # the same for every batch: built (and checked) once
            prefix = input_prefixes(self.query)[index]
            own = [F.col(f"`{c}`").alias(c[len(prefix) :]) for c in batch.columns if c.startswith(prefix)]
            schema = batch.select(*own).schema
            source = self.shape.sources[index].source
            assert isinstance(source, TableSource) and source.order is not None
            sql = dict(table_columns(self.shape.sources[index], schema, False))
            if isinstance(schema[source.order].dataType, st.IntegralType):  # as it is, even a time column
                sql[ORDER] = f"CAST({quoted(source.order)} AS BIGINT)"
            self._columns[index] = own, tuple(sql.items())
        own, columns = self._columns[index]
        mine = batch if len(self.shape.sources) == 1 else batch.filter(F.col(INPUT_COLUMN) == index)
        return TableProjection(mine.select(*own), columns).frame()

    def run(self, engine: LiveEngine, batch: DataFrame, min_rows: int, speculate: bool) -> tuple[list[int], bool]:
        """Compute the batch into ``engine`` when it has at least ``min_rows`` rows: (its rows
        per input, whether it was done). Not done (``engine`` untouched): the batch must go
        item by item.

        ``speculate``: start the partials job at once, beside the time columns' job, on the
        guess that no row is late (else it runs again with the late rows' fixes): the two
        jobs overlap, and the driver's work on the time columns with both."""
        rows = [self.rows(batch, index) for index in range(len(self.shape.sources))]
        # A join's pairs depend on the CTIs the batch brings (which it releases): no guess.
        guess = self._pool().submit(self._partials, rows, None) if speculate and self.shape.join is None else None
        try:
            times = rows[0].select(F.lit(0).alias(INPUT_COLUMN), ORDER, KIND, S, E, ARR, NULLF)
            for index, more in enumerate(rows[1:], start=1):
                times = times.unionByName(more.select(F.lit(index).alias(INPUT_COLUMN), ORDER, KIND, S, E, ARR, NULLF))
            table = times.toArrow()
            counts = self._counts(table)
            if table.num_rows < max(min_rows, 1):
                return counts, table.num_rows == 0
            planned = self.plans(engine, table)
            if planned is None:
                return counts, False
            plans, cut = planned
            naive = engine.mode.naive is True
            try:
                with worker_errors(udf_error):
                    payloads = self.late_payloads(rows, plans, naive)
                    join = None
                    if self.shape.join is not None:
                        before = join_before(engine, self.shape, plans)
                        found, after = self._join_partials(rows, plans, before, naive)
                        join = before, after
                    elif guess is not None and not any(plan.late for plan in plans):
                        found, guess = guess.result(), None
                    else:
                        found = self._partials(rows, plans)
            except (EvaluationError, UdfResultError):
                # Spark computed an expression over rows item by item may never evaluate (a
                # row the ingress drops, one a guard skips): the batch goes item by item,
                # which raises the error where the reference does, as the polars engine does.
                return counts, False
            if found is None:
                return counts, False
            apply_batch(engine, self.shape, plans, cut, payloads, *found, join)
            return counts, True
        finally:
            if guess is not None:  # not used: let it end (its errors, if any, come again item by item)
                guess.exception()

    def _pool(self) -> Any:
        from concurrent.futures import ThreadPoolExecutor

        if self._threads is None:
            self._threads = ThreadPoolExecutor(1, thread_name_prefix="tempo-bulk")
        return self._threads

    def _counts(self, table: Any) -> list[int]:
        import numpy as np

        return (
            np.bincount(table.column(INPUT_COLUMN).to_numpy(), minlength=len(self.shape.sources)).tolist()
            if table.num_rows
            else [0] * len(self.shape.sources)
        )

    def plans(self, engine: LiveEngine, table: Any) -> tuple[list[BatchPlan], FrontierCut] | None:
        """Each input's batch plan from the time columns and what the arrival frontier holds,
        or None when the rows break a rule or the frontier holds more than heartbeats."""
        import numpy as np
        import pyarrow.compute as pc

        for name in (ORDER, KIND, S, E):
            if table.column(name).null_count:
                return None
        if pc.count(table.column(NULLF)).as_py():  # a null in a field not declared optional
            return None
        planned: dict[int, BatchPlan] = {}
        for index, exporter in plan_order(self.shape):
            node = self.shape.sources[index]
            part = table if len(self.shape.sources) == 1 else table.filter(pc.equal(table.column(INPUT_COLUMN), index))
            source = node.source
            assert isinstance(source, TableSource)  # bulk_shape has checked it
            has_arrival = source.arrival is not None
            if has_arrival and part.column(ARR).null_count:
                return None
            col = {name: part.column(name).to_numpy() for name in (ORDER, KIND, S, E, ARR)}
            if np.any(np.diff(col[ORDER]) < 0):  # a file's rows are usually in order already
                order = np.argsort(col[ORDER], kind="stable")
                col = {name: values[order] for name, values in col.items()}
            plan = plan_batch(
                engine,
                index,
                col[KIND].astype(np.int64),
                col[S],
                col[E],
                col[ARR] if has_arrival else None,
                col[ORDER],
                None if exporter is None else planned[exporter],
            )
            if isinstance(plan, str):
                return None
            planned[index] = plan
        plans = [planned[index] for index in range(len(self.shape.sources))]
        cut = frontier_cut(engine, plans)
        return None if cut is None else (plans, cut)

    def late_payloads(self, rows: list[DataFrame], plans: list[BatchPlan], naive: bool) -> dict[tuple[int, int], Any]:
        """The payloads of the late rows (for their rejections), by (input, row)."""
        out: dict[tuple[int, int], Any] = {}
        for plan in plans:
            if not plan.late:
                continue
            by_order = {int(plan.orders[i]): i for i in plan.late}
            payload_type = self.shape.sources[plan.index].payload_type
            found = rows[plan.index].filter(F.col(ORDER).isin(list(by_order))).select(ORDER, *wire_columns(payload_type)).collect()
            out.update({(plan.index, by_order[r[0]]): from_wire(payload_type, list(r)[1:], naive) for r in found})
        return out

    def events(self, rows: DataFrame, index: int, plan: BatchPlan | None) -> DataFrame:
        """Input ``index``'s admitted events of the batch as its relation, with their place
        in the merged arrival order (``plan`` None: as if no row were late)."""
        node = self.shape.sources[index]
        kind = POINT if node.shape is EventShape.POINT else INTERVAL
        events = rows.filter(F.col(KIND) == kind)
        if plan is not None and plan.late:
            orders = plan.orders
            fixes = [(int(orders[i]), None, None) for i in plan.dropped] + [(int(orders[i]), s, e) for i, (s, e) in plan.moved.items()]
            schema = st.StructType(
                [st.StructField("__o", st.LongType()), st.StructField("__s", st.LongType()), st.StructField("__e", st.LongType())]
            )
            fix = F.broadcast(self.spark.createDataFrame(fixes, schema))
            events = events.join(fix, events[ORDER] == fix["__o"], "left")
            # Dropped rows have no new start; moved ones take theirs.
            events = (
                events.filter(F.col("__o").isNull() | F.col("__s").isNotNull())
                .withColumn(S, F.coalesce(F.col("__s"), F.col(S)))
                .withColumn(E, F.coalesce(F.col("__e"), F.col(E)))
            )
        names = field_names(node.payload_type)
        payload = [F.col(f"`{n}`") for n in names]
        if len(self.shape.sources) == 1:  # the input order alone (a struct costs its aggregation twice the time)
            return events.select(F.col(S), F.col(E), F.col(ORDER).alias(FIRST), *payload)
        first = F.struct(F.col(ARR).alias("a"), F.lit(index).cast("int").alias("i"), F.col(ORDER).alias("o"))
        return events.select(F.col(S), F.col(E), first.alias(FIRST), *payload)

    def _partials(self, rows: list[DataFrame], plans: list[BatchPlan] | None) -> Found | None:
        """Each window and group's partial aggregates over the batch (the window's input
        computed by the compiler's rules), the latest time the window operator sees, and the
        events renamed by unions, counted in the same job; None when an event spans too many
        windows for bulk (or reaches infinity)."""
        inputs = {
            node.name: self.events(rows[index], index, None if plans is None else plans[index])
            for index, node in enumerate(self.shape.sources)
        }
        compiler = Compiler(self.spark, self.query, self.replay, inputs)
        below = self.shape.window.input
        return self._aggregate(compiler, compiler.relation(below), len(self.shape.sources) > 1, batches.renamed_events(compiler, below))

    def _join_partials(
        self,
        rows: list[DataFrame],
        plans: list[BatchPlan],
        before: JoinBefore,
        naive: bool,
    ) -> tuple[Found | None, JoinAfter]:
        """As ``_partials``, through the join (``tempo.runtime.bulk.JoinBefore`` states the
        rule): the pairs of an event of the batch and one held or of the batch; those the
        batch releases go on to the window, with their place in the join's emission order
        as the groups' first event; the others, and the batch's events the join still holds,
        come back to the driver."""
        join = self.shape.join
        assert join is not None
        inputs = {node.name: self.events(rows[index], index, plans[index]) for index, node in enumerate(self.shape.sources)}
        compiler = Compiler(self.spark, self.query, self.replay, inputs)
        # Each side's events of the batch are read by three jobs (those the join still holds,
        # the pairs waiting, the window's partials): they are computed once.
        cached: list[DataFrame] = []
        try:
            return self._join_batch(compiler, before, naive, cached)
        finally:
            for df in cached:
                df.unpersist()

    def _join_batch(self, compiler: Compiler, before: JoinBefore, naive: bool, cached: list[DataFrame]) -> tuple[Found | None, JoinAfter]:
        """``_join_partials``'s work, the DataFrames it caches put in ``cached``."""
        join = self.shape.join
        assert join is not None
        d = compiler.d
        kept: DataFrame | None = None
        for port, (node, events) in enumerate(((join.left, before.sides[0]), (join.right, before.sides[1]))):
            fresh = batches.join_side(compiler, node).persist(StorageLevel.MEMORY_AND_DISK)
            cached.append(fresh)
            still = batches.still_held(d, fresh, before.ctis[1 - port]).select(
                F.lit(port).alias("__port"),
                POSITION,
                S,
                E,
                F.struct(*wire_columns(node.payload_type)).alias(f"__payload{port}"),
            )
            kept = still if kept is None else kept.unionByName(still, allowMissingColumns=True)
            old = driver_frame(
                self.spark,
                [_long_field(S), _long_field(E), st.StructField(POSITION, POSITION_TYPE)],
                node.payload_type,
                [(s, e, (0, rank, 0, 0), *to_wire(payload)) for rank, (s, e, payload) in enumerate(events)],
            )
            compiler.built[id(node)] = fresh.unionByName(old)
        assert kept is not None
        held: list[list[tuple[Position, int, int, Any]]] = [[], []]
        for port, position, held_start, held_end, *payloads in _collect(kept):
            if held_end >= INF:  # a shift took its end to infinity: open, which item by item handles
                return None, JoinAfter(([], []), [], 0)
            held[port].append(
                (position, held_start, held_end, from_wire((join.left, join.right)[port].payload_type, payloads[port], naive))
            )
        pairs = batches.placed_pairs(d, overlapping_pairs(compiler, join, batches.fresh_pair(d)))
        out = before.out_cti
        # The waiting pairs, and in one more row the count of the released ones and of the
        # events unions renamed below the join: one job (Spark reuses the join's exchanges).
        still = pairs.filter(~batches.released(d, out)).select(
            "__later",
            "__earlier",
            f"__l_{S}",
            f"__l_{E}",
            *wire_columns(join.left.payload_type, "__l_"),
            f"__r_{S}",
            f"__r_{E}",
            *wire_columns(join.right.payload_type, "__r_"),
        )
        counts = pairs.filter(batches.released(d, out)).agg(F.count(F.lit(1)).alias("__released"))
        renames = batches.renamed_events(compiler, join)
        counts = (
            counts.crossJoin(renames.agg(F.count(F.lit(1)).alias("__renamed")))
            if renames is not None
            else counts.withColumn("__renamed", F.lit(0).cast("long"))
        )
        rows_back = _collect(still.unionByName(counts, allowMissingColumns=True))  # the two counts last
        count, renamed = next(r[-2:] for r in rows_back if r[-2] is not None)
        waiting = [r[:-2] for r in rows_back if r[-2] is None]
        width = len(field_names(join.left.payload_type))
        pending = [
            (
                (r[0], r[1]),
                r[2],
                r[3],
                from_wire(join.left.payload_type, r[4 : 4 + width], naive),
                r[4 + width],
                r[5 + width],
                from_wire(join.right.payload_type, r[6 + width :], naive),
            )
            for r in waiting
        ]
        old_released = driver_frame(
            self.spark,
            [_long_field(S), _long_field(E), st.StructField("__later", POSITION_TYPE), st.StructField("__earlier", POSITION_TYPE)],
            join.payload_type,
            [(s, e, *released_key(rank, s)[1:], *to_wire(payload)) for rank, (s, e, payload) in enumerate(before.released)],
        )
        compiler.built[id(join)] = batches.window_input(d, old_released, batches.released_pairs(compiler, join, pairs, out))
        found = self._aggregate(compiler, compiler.relation(self.shape.window.input), True, None)
        if found is not None:
            found = found[0], found[1], renamed
        return found, JoinAfter((held[0], held[1]), pending, count)

    def _aggregate(self, compiler: Compiler, df: DataFrame, several: bool, renames: DataFrame | None) -> Found | None:
        """The window's partials over its input ``df`` (``tempo.lowering.batches.window_partials``,
        its events' latest times per row, in one job), read on the driver; ``several``: the
        first places are structs (of several inputs, or a join's pairs), else order values;
        ``renames``: counted in the same job (``tempo.lowering.batches.renamed_events``)."""
        window = self.shape.window
        assert isinstance(window, WindowNode)
        d = compiler.d
        grouped = batches.window_partials(d, window, batches.partial_spans(d, window, df), renames).toArrow()
        col = {name: grouped.column(name).to_pylist() for name in grouped.column_names}
        firsts = [_as_tuple(first) for first in col["__first"]] if several else col["__first"]  # structs arrive as dicts, in field order
        return batches.read_partials(window, col, firsts)


def window_partials(window: WindowNode, df: DataFrame) -> DataFrame:
    """``tempo.lowering.batches.window_partials`` on Spark over a hopping window's input
    events ``df`` (start, end, first place ``FIRST``, payload): a row per window and group."""
    d = SparkDialect()
    partials: DataFrame = batches.window_partials(d, window, batches.partial_spans(d, window, df))
    return partials


def session_runs(window: WindowNode, df: DataFrame) -> DataFrame:
    """A session window's events ``df`` (start, end before infinity, first place ``FIRST``,
    payload) as runs: per group, its events in order of start, a new run where one starts at
    or after the previous ones' latest last tick + gap (where the operator would open a new
    session, were there no other events: ``tempo.runtime.event_windows.Sessions.merge_run``).
    A row per run (``__run``) and group (``__key0``, ...), with ``window_partials``' columns
    but ``__k`` and ``__span``: the count, the first place, the latest start and end, the
    partial values; and the run's start (``__smin``)."""
    spec = window.spec
    assert isinstance(spec, SessionWindow) and spec.max_duration is None
    d = SparkDialect()
    names = key_names(window)
    events = df.select(F.col(S), F.col(E), F.col(FIRST), *d.keys(window), *d.values(window))
    ordered = Frame.partitionBy(*names).orderBy(S, FIRST)
    reach = F.max(F.col(E) - F.lit(1 - spec.gap)).over(ordered.rowsBetween(Frame.unboundedPreceding, -1))
    opens = F.when(reach.isNull() | (F.col(S) >= reach), F.lit(1)).otherwise(F.lit(0))
    runs = events.withColumn("__opens", opens).withColumn("__run", F.sum("__opens").over(ordered.rowsBetween(Frame.unboundedPreceding, 0)))
    return runs.groupBy("__run", *names).agg(F.min(S).alias("__smin"), *batches.partial_aggregates(d, window), *batches.latest_times(d))


def _collect(df: DataFrame) -> list[tuple[Any, ...]]:
    """``df``'s rows on the driver, structs as tuples (through Arrow: far faster than
    ``collect`` for more than a few rows)."""
    import pyarrow as pa

    table = df.toArrow()
    columns = [[_as_tuple(v) for v in c.to_pylist()] if isinstance(c.type, pa.StructType) else c.to_pylist() for c in table.columns]
    return list(zip(*columns))


def _as_tuple(value: Any) -> Any:
    """A struct (a dict from Arrow, fields in order), nested ones too, as a tuple."""
    return tuple(_as_tuple(v) for v in value.values()) if isinstance(value, dict) else value


def _long_field(name: str) -> st.StructField:
    return st.StructField(name, st.LongType(), False)
