"""Blocks of input order and their figures (step 3): running aggregates over input order
become a window per block plus a prefix over the blocks before, taken on the driver."""

from __future__ import annotations


import attrs
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as st

from tempo.errors import InputError
from tempo.runtime.ingress import CTI, END
from tempo.spark.columns import START as S
from tempo.ticks import NEG_INF
from tempo.spark import ingress as package  # for BLOCK_ROWS, read at each cut (tests shrink it)
from tempo.spark.ingress.rows import (
    KIND,
    ARR,
    BLOCK,
    ORDER,
    EVENT_KINDS,
    InputFrame,
    counted_kind,
    period_column,
    imports_ctis,
    has_ordering,
    ordered_start,
)


@attrs.define
class Blocks:
    """Rows cut into blocks by value range of ``ORDER``, with per-block figures.

    The range cut is deterministic (unlike a sampled range partitioning), so figures taken
    in one job hold in the next.
    """

    lo: int
    width: int
    rows: dict[int, int] = attrs.Factory(dict)
    counted: dict[int, int] = attrs.Factory(dict)  # events counted by count generation
    events: dict[int, int] = attrs.Factory(dict)  # rows that are not CTIs
    latest: dict[int, int] = attrs.Factory(dict)  # largest start of a counted event
    explicit: dict[int, int] = attrs.Factory(dict)  # largest CTI row
    period: dict[int, int] = attrs.Factory(dict)  # greatest period entered (time-span generation)
    arrival: dict[int, int] = attrs.Factory(dict)  # largest arrival
    ordered: dict[int, int] = attrs.Factory(dict)  # largest start passing the arrival checks (ordering settings)

    def column(self) -> Column:
        return self.of(F.col(ORDER))

    def of(self, order: Column) -> Column:
        """The block of an order value."""
        return F.floor((order - F.lit(self.lo)) / F.lit(self.width)).cast("long")

    def prefix(self, per_block: dict[int, int], combine: str, default: int) -> dict[int, int]:
        """For each block, the sum (or max) over the blocks before it."""
        out: dict[int, int] = {}
        acc = default
        for block in sorted(self.rows):
            out[block] = acc
            v = per_block.get(block)
            if v is not None:
                acc = acc + v if combine == "sum" else max(acc, v)
        return out


def cut_into_blocks(frame: InputFrame) -> None:
    """Cut the rows into blocks and take each block's figures (one job, plus one for the
    order column's range when the rows are not an item list)."""
    assert frame.df is not None
    from tempo.spark.sources import DataFrameSource

    if isinstance(frame.node.source, DataFrameSource):
        # The verdicts find their rows again by (order, file order) in later jobs; a user's
        # plan (a round-robin repartition, say) may deal rows out differently each time, so
        # it is computed once.
        frame.df = frame.df.localCheckpoint(eager=True)
    df = frame.df
    if imports_ctis(frame):
        # Imported CTIs interleave with this input by arrival (see ``scan``): one block.
        blocks = Blocks(0, 1 << 62)
    elif frame.rows is not None:  # an item list: the order column is the position
        blocks = Blocks(0, package.BLOCK_ROWS)
    else:
        known = _parquet_range(frame)
        if known is None:
            r = df.agg(F.min(ORDER).alias("lo"), F.max(ORDER).alias("hi"), F.count(F.lit(1)).alias("n")).collect()[0]
            known = (r["lo"] or 0, r["hi"] or 0, r["n"])
        lo, hi, n = known
        count = max(1, -(-n // package.BLOCK_ROWS))
        blocks = Blocks(lo, max(1, (hi - lo) // count + 1))
    df = df.withColumn(BLOCK, blocks.column())
    period = period_column(frame)
    counted = counted_kind()
    figures = (
        df.groupBy(BLOCK)
        .agg(
            F.count(F.lit(1)).alias("rows"),
            F.sum(counted.cast("long")).alias("counted"),
            F.sum(F.col(KIND).isin(*EVENT_KINDS, END).cast("long")).alias("events"),
            F.max(F.when(counted, F.col(S))).alias("latest"),
            F.max(F.when(F.col(KIND) == CTI, F.col(S))).alias("explicit"),
            (F.max(period) if period is not None else F.lit(None).cast("long")).alias("period"),
            F.max(ARR).alias("arrival"),
            (F.max(ordered_start(frame)) if has_ordering(frame) else F.lit(None).cast("long")).alias("ordered"),
        )
        .collect()
    )
    nulls = [r["rows"] for r in figures if r[BLOCK] is None]
    if nulls:  # a null in the order column: the in-memory executor sorts such rows last
        from tempo.tables import null_order_rule

        before = sum(r["rows"] for r in figures if r[BLOCK] is not None)
        raise InputError(frame.node.name, before, None, null_order_rule(frame.node.source, nulls[0]))
    for r in figures:
        b = r[BLOCK]
        blocks.rows[b] = r["rows"]
        blocks.counted[b] = r["counted"] or 0
        blocks.events[b] = r["events"] or 0
        for name in ("latest", "explicit", "period", "arrival", "ordered"):
            if r[name] is not None:
                getattr(blocks, name)[b] = r[name]
    frame.df, frame.blocks = df, blocks


def _parquet_range(frame: InputFrame) -> tuple[int, int, int] | None:
    """(min, max) of the order column and the row count, from the Parquet footers (no
    job), when the order column is an integer column with statistics in every row group."""
    from tempo.sources import ParquetSource

    source = frame.node.source
    if not isinstance(source, ParquetSource) or source.order is None:
        return None
    try:
        import pyarrow.dataset as ds
        import pyarrow.types as pt

        dataset = ds.dataset(source.path, format="parquet")
        if not pt.is_integer(dataset.schema.field(source.order).type):
            return None
        lo: int | None = None
        hi: int | None = None
        n = 0
        for fragment in dataset.get_fragments():
            meta = fragment.metadata
            column = meta.schema.names.index(source.order)
            for g in range(meta.num_row_groups):
                group = meta.row_group(g)
                stats = group.column(column).statistics
                if group.num_rows and (stats is None or not stats.has_min_max):
                    return None
                if group.num_rows:
                    lo = stats.min if lo is None else min(lo, stats.min)
                    hi = stats.max if hi is None else max(hi, stats.max)
                n += group.num_rows
    except (ImportError, OSError, KeyError, ValueError):
        return None
    if lo is None or hi is None:
        return None
    # A time column as the order column is shifted to ticks (see ``table_frame``).
    if source.order in (source.arrival, source.start, source.end):  # scaled to ticks too (``table_columns``)
        return source.integer_ticks(lo), source.integer_ticks(hi), n
    return lo, hi, n


def block_table(spark: SparkSession, frame: InputFrame) -> DataFrame:
    """Per block, what the blocks before it hold: rows, counted events, greatest period,
    the largest CTI candidate any of them can produce, and the latest arrival."""
    blocks = frame.blocks
    assert blocks is not None
    delay = frame.policy.delay
    # Generated candidates are counted events' starts minus the delay: bounded by the latest.
    bound = {b: v - delay for b, v in blocks.latest.items()} if frame.policy.generates else {}
    for b, v in blocks.explicit.items():
        bound[b] = max(bound.get(b, NEG_INF), v)
    columns = {
        "__p_rows": blocks.prefix(blocks.rows, "sum", 0),
        "__p_counted": blocks.prefix(blocks.counted, "sum", 0),
        "__p_period": blocks.prefix(blocks.period, "max", NEG_INF),
        "__p_bound": blocks.prefix(bound, "max", NEG_INF),
        "__p_arrival": blocks.prefix(blocks.arrival, "max", NEG_INF),
        "__p_ordered": blocks.prefix(blocks.ordered, "max", NEG_INF),
    }
    rows = [(b, *(columns[c][b] for c in columns)) for b in sorted(blocks.rows)]
    schema = st.StructType([st.StructField(n, st.LongType(), False) for n in (BLOCK, *columns)])
    return F.broadcast(spark.createDataFrame(rows, schema))
