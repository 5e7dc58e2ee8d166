"""An input's rows inside the Spark ingress: their columns, the codes they carry, the frame
the driver keeps of each input, and the per-row columns its time policy defines."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import attrs
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from tempo.expr.schema import field_names
from tempo.runtime.ingress import INTERVAL, POINT, START
from tempo.plan.nodes import SourceNode
from tempo.spark.columns import floor_div
from tempo.runtime.policy import TimePolicy
from tempo.sources import ParquetSource, TableSource
from tempo.tables import Span
from tempo.rules import InputRule
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.spark.columns import quoted
from tempo.ticks import INF

if TYPE_CHECKING:
    from tempo.spark.ingress.blocks import Blocks


POS, KIND, ARR, BLOCK = "__pos", "__kind", "__arr", "__block"
ORDER, FILE = "__order", "__file"
"""Input order of a row (the order column, or file order), and the tie-break (file order)."""
NULLF = "__nullf"
"""The index of a row's first payload field that is null but not declared optional, else null;
or, before it, ``SUB_MICRO + j`` for a value below a microsecond in the j-th column of
``tempo.tables.nanosecond_columns`` that the row uses."""
SUB_MICRO = 1000
"""Where ``NULLF``'s codes of values below a microsecond begin (``__bad``: ``NULL_FIELD + NULLF``)."""
EVENT_KINDS = (POINT, INTERVAL, START)
"""Kinds that are received events with a start (counted by count generation)."""

# Why a row was collected as breaking a rule (the ``__bad`` column): the rule's code.
BAD_ROW, BAD_KIND, BAD_ARRIVAL, NO_ARRIVAL, BAD_START, NO_ORDER_ARRIVAL, UNKNOWN_KIND, NULL_START, NULL_END, NULL_FIELD = (
    int(r)
    for r in (
        InputRule.LIFETIME,
        InputRule.ROW_KIND,
        InputRule.ARRIVAL_ORDER,
        InputRule.IMPORT_ARRIVAL,
        InputRule.START_AT_INFINITY,
        InputRule.ORDERING_ARRIVAL,
        InputRule.UNKNOWN_KIND,
        InputRule.NULL_START,
        InputRule.NULL_END,
        InputRule.NULL_FIELD,
    )
)
"""``NULL_FIELD + i``: a null in the i-th payload field, which is not declared optional."""
NO_HEARTBEAT_ARRIVAL = int(InputRule.HEARTBEAT_ARRIVAL)

DROPPED, ADJUSTED = 2, 1
"""A verdict's status (0: admitted as read)."""


@attrs.frozen
class TableProjection:
    """A table input's rows as read (``raw``) and each ``InputFrame`` column as SQL over them
    (name, SQL), not yet a DataFrame: Spark analyses every DataFrame operation when it is
    built, so an input admitted as read takes its events' columns straight from ``raw``
    (``InputFrame.as_read``), one operation rather than two."""

    raw: DataFrame
    columns: tuple[tuple[str, str], ...]

    def frame(self) -> DataFrame:
        return self.raw.selectExpr(*(f"{sql} AS {quoted(name)}" for name, sql in self.columns))  # SQL: one JVM call

    def sql(self, name: str) -> str:
        return next(sql for n, sql in self.columns if n == name)

    def replaced(self, name: str, sql: str) -> TableProjection:
        return TableProjection(self.raw, tuple((n, sql if n == name else s) for n, s in self.columns))


@attrs.define
class InputFrame:
    """One input as rows, with what the driver knows of it."""

    node: SourceNode
    decl: int
    _df: DataFrame | None  # the rows (``df``), built from ``projection`` when first asked for
    items: dict[int, Any] | None  # position -> received item, for item lists
    prepared: list[Any] | None = None  # records admitted on the driver (small item lists)
    rows: int | None = None  # known for item lists
    static: bool = False  # nothing can be late: every row is admitted as read
    needs_arrival: bool = False  # the input takes part in an import
    kinds_vary: bool = True  # rows may be of several kinds (else: all events of the shape)
    has_arrival: bool = True  # rows carry arrival times
    blocks: Blocks | None = None
    collected: list[Any] = attrs.Factory(list)  # what the scan kept, read by column name: Rows, or dicts from the driver's scan
    scanned: bool = False  # collected on the driver already (``local_scan``)
    scan_limit: int = 0  # rows the driver may read to scan or check this input (``local_scan``)
    span: Span | None = None  # where its rows lie, when the driver read them (``local_scan``)
    projection: TableProjection | None = None  # a table's rows, before ``df`` is built
    below: tuple[tuple[str, str, str], ...] = ()  # (column, what, type) of ``SUB_MICRO + j`` (``below_microsecond_columns``)
    policy: TimePolicy = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.policy = TimePolicy.of_input(self.node)

    @property
    def df(self) -> DataFrame | None:
        """The rows in Spark (None: an item list admitted on the driver)."""
        if self._df is None and self.projection is not None:
            self._df = self.projection.frame()
        return self._df

    @df.setter
    def df(self, value: DataFrame | None) -> None:
        self._df = value

    @property
    def in_spark(self) -> bool:
        """Whether the rows are in Spark (``df`` is not None), without building them."""
        return self._df is not None or self.projection is not None

    def replace_column(self, name: str, constant: str) -> None:
        """Column ``name`` of the rows becomes ``constant`` (SQL), in the projection while
        the rows are not built yet."""
        if self._df is None and self.projection is not None:
            self.projection = self.projection.replaced(name, constant)
        else:
            assert self._df is not None
            self._df = self._df.withColumn(name, F.expr(constant))

    def as_read(self) -> DataFrame:
        """The events as read, each row of an event kind one: start, end (at most infinity),
        payload fields."""
        rows: DataFrame | None
        if self._df is None and self.projection is not None and not self.kinds_vary:  # straight from the table
            rows, sql = self.projection.raw, self.projection.sql
        else:
            rows, sql = self.df, quoted
            assert rows is not None
            rows = rows.filter(F.col(KIND).isin(*EVENT_KINDS)) if self.kinds_vary else rows
        names = field_names(self.node.payload_type)
        columns = [f"{sql(S)} AS {S}", f"least({sql(E)}, {INF}) AS {E}", *(f"{sql(n)} AS {quoted(n)}" for n in names)]
        return rows.selectExpr(*columns)  # SQL: one JVM call


def counted_kind() -> Column:
    """Whether a row is an event that counts towards CTI generation (a point, interval or start edge)."""
    return F.col(KIND).isin(*EVENT_KINDS)


def period_column(frame: InputFrame) -> Column | None:
    """The reference's ``start // period`` of a counted row (time-span generation), else None."""
    if not frame.policy.period:
        return None
    return F.when(counted_kind(), floor_div(F.col(S), frame.policy.period))  # the reference's start // period (runtime/ingress.py)


def imports_ctis(frame: InputFrame) -> bool:
    """Whether the input imports another input's CTIs."""
    return frame.policy.import_from is not None


def has_ordering(frame: InputFrame) -> bool:
    """Whether ASA's ordering settings decide the input's CTIs."""
    return frame.policy.ordered


def tolerances(frame: InputFrame) -> tuple[int, int | None, int | None]:
    """The input's (out-of-order, late, early) tolerances in ticks."""
    policy = frame.policy
    assert policy.ordered
    return policy.out_of_order, policy.late, policy.early


def early_late(frame: InputFrame) -> tuple[Column, Column]:
    """(early, late) of each row, by the input's arrival-time rules."""
    _, late, early = tolerances(frame)
    event = F.col(KIND).isin(POINT, INTERVAL)
    is_early = (event & (F.col(S) > F.col(ARR) + early)) if early is not None else F.lit(False)
    is_late = (event & ~is_early & (F.col(S) < F.col(ARR) - late)) if late is not None else F.lit(False)
    return F.coalesce(is_early, F.lit(False)), F.coalesce(is_late, F.lit(False))


def ordered_start(frame: InputFrame) -> Column:
    """The start of an event that passes both arrival checks (what raises time), else null."""
    early, late = early_late(frame)
    return F.when(F.col(KIND).isin(POINT, INTERVAL) & ~early & ~late, F.col(S))


def breaks_a_rule(node: SourceNode) -> Column:
    """A row of an input where nothing can be late (points or intervals) breaking a rule."""
    return (
        F.col(S).isNull()
        | F.col(E).isNull()
        | (F.col(S) >= INF)
        | ((F.col(KIND) == INTERVAL) & (F.col(E) <= F.col(S)))
        | F.col(NULLF).isNotNull()
        | F.col(ORDER).isNull()
    )


def single_parquet_file(source: TableSource[Any]) -> bool:
    """A ``ParquetSource`` reading one local file, whose rows Spark numbers in file order
    (``_metadata.row_index``)."""
    return isinstance(source, ParquetSource) and "://" not in source.path and os.path.isfile(source.path)
