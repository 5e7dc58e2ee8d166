"""Reading an input into rows (the module's step 1): an item list on the driver or sent to
Spark, a table by Spark's own readers; and the events admitted on the driver as a relation."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as st

from tempo.errors import ImportOrderError, InputSchemaError
from tempo.events import EventShape
from tempo.expr.schema import record_fields
from tempo.runtime.ingress import CTI, END, HEARTBEAT, INTERVAL, POINT, START, TimestampMode, ordering_needs_arrival_column, prepare
from tempo.runtime.policy import TimePolicy
from tempo.plan.nodes import SourceNode
from tempo.rules import InputRule, message
from tempo.clocks import TimeDomain
from tempo.runtime.stamping import stamped
from tempo.sources import ItemSource, TableSource
from tempo.spark.columns import END as E
from tempo.spark.columns import quoted
from tempo.spark.columns import START as S
from tempo.spark.types import driver_frame, to_wire
from tempo.ticks import INF, NEG_INF
from tempo.spark.ingress.blocks import cut_into_blocks
from tempo.spark.ingress.local_scan import LOCAL_SCAN_ROWS, scan_locally
from tempo.spark.ingress.rows import KIND, ARR, ORDER, FILE, NULLF, SUB_MICRO, InputFrame, TableProjection, single_parquet_file


def below_microsecond_columns(
    source: TableSource[Any], schema: st.StructType, arrow: Mapping[str, Any] | None
) -> dict[str, tuple[str, str]]:
    """``tempo.tables.nanosecond_columns`` of a table Spark reads with ``schema`` (its
    columns' Arrow types, ``arrow``, where the driver knows them)."""
    import pyarrow as pa

    from tempo.tables import nanosecond_columns

    types = {n: t for n, t in (arrow or {}).items() if n in schema.names}
    for field in schema.fields:
        if field.name not in types and isinstance(field.dataType, (st.LongType, st.IntegerType, st.ShortType, st.ByteType)):
            types[field.name] = pa.int64()
    return nanosecond_columns(source, types)


LOCAL_ITEMS = 100_000
"""Item lists up to this size are admitted on the driver (see ``input_frame``)."""


def _item_rows(node: SourceNode, mode: TimestampMode, needs_arrival: bool) -> tuple[list[tuple[Any, ...]], dict[int, Any]]:
    rows: list[tuple[Any, ...]] = []
    items: dict[int, Any] = {}
    for arrival, kind, start, end, payload, position, item in stamped(node, prepare(node, mode, needs_arrival)):
        values = to_wire(payload) if payload is not None else [None] * len(record_fields(node.payload_type))
        rows.append((position, kind, start, end, arrival, *values))
        items[position] = item
    return rows, items


_ITEM_FIELDS = [
    st.StructField(ORDER, st.LongType(), False),
    st.StructField(KIND, st.IntegerType(), False),
    st.StructField(S, st.LongType(), False),
    st.StructField(E, st.LongType(), False),
    st.StructField(ARR, st.LongType(), False),
]
"""The time columns of ``_item_rows``' rows, before their payloads."""


def input_frame(
    spark: SparkSession,
    node: SourceNode,
    decl: int,
    mode: TimestampMode,
    needs_arrival: bool,
    local_limit: int = LOCAL_ITEMS,
    scan_limit: int = LOCAL_SCAN_ROWS,
) -> InputFrame:
    """The rows of one input, checked as the in-memory executor checks them.

    An item list is already in the driver's memory: up to ``local_limit`` items it is
    admitted there by the in-memory ingress itself (``prepared`` holds its records), and
    only the admitted events go to Spark. Larger lists and every table go through the
    Spark ingress; a table of up to ``scan_limit`` rows that ``scan_locally`` can read is
    scanned on the driver.
    """
    source = node.source
    # A stamped input (ingestion or processing time) is stamped on the driver, in input order.
    if isinstance(source, ItemSource) or not isinstance(source, TableSource) or node.time is not TimeDomain.EVENT:
        if local_limit:
            prepared = list(stamped(node, prepare(node, mode, needs_arrival)))
            if len(prepared) <= local_limit:
                items = {rec[5]: rec[6] for rec in prepared}
                return InputFrame(node, decl, None, items, prepared=prepared, rows=len(prepared))
        rows, items = _item_rows(node, mode, needs_arrival)
        df = driver_frame(spark, _ITEM_FIELDS, node.payload_type, rows).withColumn(FILE, F.lit(0).cast("long"))
        df = df.withColumn(NULLF, F.lit(None).cast("int"))  # prepare() has checked the items
        frame = InputFrame(node, decl, df, items, rows=len(rows))
        # prepare() has checked every row; without CTI rows nothing can be late.
        frame.static = (
            frame.policy.nothing_can_be_late and all(r[1] not in (CTI, HEARTBEAT) for r in rows) and node.shape is not EventShape.EDGE
        )
    else:
        frame = table_frame(spark, node, decl, needs_arrival)
        mode.saw(aware=True)  # a table's times are instants, given as aware UTC datetimes
    frame.needs_arrival = needs_arrival
    frame.scan_limit = scan_limit
    if not frame.static and not scan_locally(frame):
        cut_into_blocks(frame)
    return frame


def table_frame(spark: SparkSession, node: SourceNode, decl: int, needs_arrival: bool) -> InputFrame:
    """The rows of a table input as ``InputFrame`` columns."""
    from tempo.spark.sources import arrow_types, read_table

    source = node.source
    assert isinstance(source, TableSource)
    raw = read_table(spark, node.name, source)
    arrow = arrow_types(source)
    projection = TableProjection(raw, tuple(table_columns(node, raw.schema, needs_arrival, arrow)))
    frame = InputFrame(
        node, decl, None, None, kinds_vary=source.kind is not None, has_arrival=source.arrival is not None, projection=projection
    )
    frame.below = tuple((name, *told) for name, told in below_microsecond_columns(source, raw.schema, arrow).items())
    # Arrival times are checked (non-decreasing) by the scan; without an arrival column,
    # a kind column or CTIs from settings, there is nothing to check but each row itself.
    frame.static = frame.policy.nothing_can_be_late and source.kind is None and source.arrival is None
    return frame


def table_columns(
    node: SourceNode, schema: st.StructType, needs_arrival: bool, arrow: Mapping[str, Any] | None = None
) -> list[tuple[str, str]]:
    """The ``InputFrame`` columns of a table input's rows of ``schema`` as (name, SQL
    expression) pairs (for ``TableProjection``: the JVM parses the whole projection in one
    call, where building it of Columns takes one or more calls per function and operator),
    after checking the columns against the source's arguments and payload fields.

    ``arrow``: the columns' Arrow types where the driver knows them (``arrow_types``): a
    column Spark holds as a long that is a nanosecond timestamp, or a duration of any unit
    (as Parquet stores them, and as ``read_table`` hands an Arrow table's nanoseconds over),
    is read as one, exactly; a nanosecond value with a part below a microsecond is
    ``SUB_MICROSECOND`` (in ``NULLF``, before the row's nulls)."""
    import pyarrow.types as pa_types

    from tempo.spark.types import frame_columns
    from tempo.tables import DURATION, KINDS, TIME_UNITS, TIMESTAMP, check_columns

    source = node.source
    assert isinstance(source, TableSource)
    if TimePolicy.of_input(node).ordered and not source.arrival:
        raise InputSchemaError(node.name, ordering_needs_arrival_column(source))
    longs = {  # columns Spark holds as longs that are timestamps or durations: name -> Arrow type
        name: t
        for name, t in (arrow or {}).items()
        if name in schema.names and isinstance(schema[name].dataType, st.LongType) and (pa_types.is_timestamp(t) or pa_types.is_duration(t))
    }
    column_words = frame_columns(schema)
    column_words.update((name, TIMESTAMP if pa_types.is_timestamp(t) else DURATION) for name, t in longs.items())
    check_columns(node.name, source, column_words)
    if needs_arrival and not source.arrival:
        raise ImportOrderError(node.name, 0, None, message(InputRule.IMPORT_ARRIVAL))
    origin = source.origin_ticks()
    multiply, divide = TIME_UNITS[source.time_unit or "us"]

    def micros(name: str, per_tick: tuple[int, int]) -> str:
        """A long count of a unit (``(multiply, divide)`` per tick) as whole ticks, floored."""
        c = f"CAST({quoted(name)} AS BIGINT)"
        return (
            f"({c} * {per_tick[0]})"
            if per_tick[0] != 1
            else f"(({c} - pmod({c}, {per_tick[1]})) div {per_tick[1]})"
            if per_tick[1] != 1
            else c
        )

    def long_unit(name: str) -> tuple[int, int]:
        return TIME_UNITS[longs[name].unit]

    def ticks(name: str, shift: bool = True) -> str:
        if isinstance(schema[name].dataType, (st.TimestampType, st.TimestampNTZType)):
            return f"unix_micros(CAST({quoted(name)} AS TIMESTAMP))"
        if not shift:  # an order column: its values as they are (a nanosecond timestamp's exact order)
            return f"CAST({quoted(name)} AS BIGINT)"
        if name in longs:
            return micros(name, long_unit(name))
        return f"({micros(name, (multiply, divide))} + {origin})" if origin else micros(name, (multiply, divide))

    if source.kind is not None:
        words = " ".join(f"WHEN '{name}' THEN {code}" for name, code in KINDS.items())
        kind = f"(CASE lower(CAST({quoted(source.kind)} AS STRING)) {words} ELSE CAST(NULL AS INT) END)"
    elif node.shape is EventShape.POINT:
        kind = str(POINT)
    elif node.shape is EventShape.INTERVAL:
        kind = str(INTERVAL)
    else:
        raise InputSchemaError(node.name, message(InputRule.EDGE_KIND_COLUMN, source=repr(source)))
    arrival = ticks(source.arrival) if source.arrival else f"CAST({NEG_INF} AS BIGINT)"
    end_col = ticks(source.end) if source.end else "CAST(NULL AS BIGINT)"
    if source.kind is None:  # every row one kind: its start and end as they are (Spark analyses less)
        start = ticks(source.start)
        end = f"{start} + 1" if node.shape is EventShape.POINT else end_col
    else:
        start = f"(CASE WHEN {kind} = {HEARTBEAT} THEN {arrival} ELSE {ticks(source.start)} END)"  # a heartbeat's time is its arrival
        end = (
            f"CASE WHEN {kind} = {POINT} THEN {start} + 1 WHEN {kind} = {START} THEN CAST({INF} AS BIGINT) "
            f"WHEN {kind} IN ({CTI}, {HEARTBEAT}) THEN {start} ELSE {end_col} END"
        )
    # Without an order column the file order counts: a Parquet file's own row index, else
    # monotonically_increasing_id, which follows the partitions' order. (The row index is
    # read only then: it costs the scan a column.)
    by_index = source.order is None and single_parquet_file(source)
    file_order = "_metadata.row_index" if by_index else "monotonically_increasing_id()"
    order = (
        (ticks(source.order) if source.order in (source.arrival, source.start, source.end) else ticks(source.order, shift=False))
        if source.order
        else file_order
    )
    payload = []
    first_null = []  # NULLF: the index of the first field not declared optional that is null
    for i, f in enumerate(record_fields(node.payload_type)):
        # As the fields declare them: an integer column widened for a float field, a
        # timestamp without time zone read as UTC (as the in-memory executor reads them;
        # ``check_columns`` has checked the types).
        cast = "DOUBLE" if f.dtype is float else "TIMESTAMP" if f.dtype is datetime else None
        if f.name in longs and f.dtype is datetime:  # a nanosecond timestamp
            payload.append((f.name, f"timestamp_micros({micros(f.name, long_unit(f.name))})"))
        elif f.name in longs and f.dtype is timedelta:  # a duration, in its unit
            payload.append((f.name, f"({micros(f.name, long_unit(f.name))} * INTERVAL '0.000001' SECOND)"))
        else:
            payload.append((f.name, quoted(f.name) if cast is None else f"CAST({quoted(f.name)} AS {cast})"))
        if not f.nullable:
            first_null.append(f"WHEN {quoted(f.name)} IS NULL THEN {i}")
    # A value below a microsecond in a column the row uses comes first (SUB_MICROSECOND is
    # checked with the times, before the nulls of the payload): SUB_MICRO + j, j its place
    # among ``nanosecond_columns`` (as ``tempo.tables.read_columns`` checks them).
    below = []
    for j, (name, (what, _)) in enumerate(below_microsecond_columns(source, schema, arrow).items()):
        uses = (
            "TRUE"
            if what == "arrival"
            else f"{kind} <> {HEARTBEAT}"
            if what == "start"
            else f"{kind} IN ({INTERVAL}, {END})"
            if what == "end"
            else f"{kind} < {CTI}"
        )
        below.append(f"WHEN {uses} AND pmod(CAST({quoted(name)} AS BIGINT), 1000) <> 0 THEN {SUB_MICRO + j}")
    cases = below + first_null
    null_field = f"CASE {' '.join(cases)} ELSE CAST(NULL AS INT) END" if cases else "CAST(NULL AS INT)"
    return [(KIND, kind), (S, start), (E, end), (ARR, arrival), (ORDER, order), (FILE, file_order), *payload, (NULLF, null_field)]


def local_events(spark: SparkSession, frame: InputFrame, events: dict[int, list[Any]]) -> DataFrame:
    """The events admitted on the driver, as a relation (S, E, payload columns)."""
    rows = [(s, INF if e is None else e, *to_wire(p)) for s, e, p in events.values()]
    return driver_frame(
        spark, [st.StructField(S, st.LongType(), False), st.StructField(E, st.LongType(), False)], frame.node.payload_type, rows
    )
