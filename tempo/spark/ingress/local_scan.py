"""Step 4 on the driver, for a table it can read: the scan over the narrow columns (order,
start, end) with numpy, one record batch at a time, in place of the block figures and the
scan job.

It applies where the Spark scan's window is all there is to compute: a Parquet file or an
Arrow table with an integer order column (or one Parquet file in file order, which Spark
numbers by ``_metadata.row_index``), no ``kind`` or ``arrival`` column (so every row is
an event and every event counts), CTIs generated from its own rows (no import, no ordering
settings) and at most ``LOCAL_SCAN_ROWS`` rows. Reading two or three columns on the driver
costs little next to the Spark scan, which sorts every row within its block (measured in
bench/README.md, "Latest figures", W1 on Spark). The heavy work, the query itself, stays in Spark.

It proves or gives up: it collects exactly the rows the Spark scan collects (CTI candidates
and rows at risk, with their positions) only when the order column strictly increases in
file order (so a row's position is its index, and the order value alone names it: the
rows' file-order column becomes 0), and no row breaks a rule. Anything else (a null, an end
not after its start, a row out of order, a file pyarrow cannot read) returns False, and the
Spark path runs and names the row as it always does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


from tempo.events import EventShape
from tempo.expr.schema import record_fields
from tempo.runtime.ingress import INTERVAL, POINT
from tempo.runtime.verdicts import GenerationState, generation, may_be_late
from tempo.sources import ArrowSource, ParquetSource, TableSource
from tempo.tables import TIME_UNITS, Span, nanosecond_columns, parquet_proves_no_nulls, points_proved_by_statistics
from tempo.spark.columns import END as E
from tempo.spark.columns import START as S
from tempo.spark.ingress.blocks import Blocks
from tempo.spark.ingress.rows import ARR, FILE, KIND, ORDER, POS, InputFrame, imports_ctis, has_ordering, single_parquet_file
from tempo.ticks import INF, NEG_INF

LOCAL_SCAN_ROWS = 20_000_000
"""Tables up to this many rows are scanned on the driver (see the module)."""

_BATCH_ROWS = 1 << 20


class _Spanning:
    """A ``Span`` taken batch by batch."""

    def __init__(self) -> None:
        self.rows, self.first, self.last, self.finite_rows, self.finite_length = 0, INF, NEG_INF, 0, 0.0

    def add(self, start: Any, end: Any | None, past_starts: int | None = None) -> None:
        """A batch's starts and ends (None for points); ``past_starts``: one past its
        latest start, when known."""
        import numpy as np

        if not len(start):
            return
        self.rows += len(start)
        self.first = min(self.first, int(start.min()))
        self.last = max(self.last, int(start.max()) + 1 if past_starts is None else past_starts)
        if end is None:  # points
            self.finite_rows += len(start)
            self.finite_length += len(start)
            return
        finite = end < INF
        if not bool(finite.all()):
            start, end = start[finite], end[finite]
        if len(end):
            self.last = max(self.last, int(end.max()))
            self.finite_rows += len(end)
            self.finite_length += float(np.sum(end - start, dtype=np.float64))

    def span(self) -> Span | None:
        return Span(self.rows, self.first, self.last, self.finite_rows, self.finite_length) if self.rows else None


def scan_locally(frame: InputFrame) -> bool:
    """Scan ``frame``'s table on the driver (up to ``frame.scan_limit`` rows), setting its
    blocks (one) and collected rows; False (nothing set) when the table is not one this scan
    applies to."""
    node, policy, limit = frame.node, frame.policy, frame.scan_limit
    source = node.source
    if (
        limit <= 0
        or not frame.in_spark
        or frame.kinds_vary
        or imports_ctis(frame)
        or has_ordering(frame)
        or not policy.generates
        or node.shape not in (EventShape.POINT, EventShape.INTERVAL)
        or not isinstance(source, (ParquetSource, ArrowSource))
        or (source.order is None and not single_parquet_file(source))  # else file order is Spark's partitions'
    ):
        return False
    try:
        batches = _narrow_batches(source, limit, _utc_session(frame), arrival=frame.has_arrival)
        if batches is None:
            return False
        found = _scan(frame, batches)
    except (ImportError, OSError, ValueError, TypeError, KeyError):  # pyarrow cannot read it as Spark does: the Spark path will
        return False
    if found is None:
        return False
    rows, lo, collected, frame.span = found
    blocks = Blocks(lo, 1 << 62)
    blocks.rows[0] = blocks.counted[0] = blocks.events[0] = rows
    frame.blocks, frame.collected, frame.scanned = blocks, collected, True
    # The order column names a row alone (it strictly increases): the verdicts and the
    # rejected items find rows by (order, 0).
    frame.replace_column(FILE, "CAST(0 AS BIGINT)")
    return True


def count_if_clean(frame: InputFrame) -> int | None:
    """The row count of a table input where nothing can be late, when the driver proves that
    no row breaks a rule (``validate``'s check), else None (the Spark job checks); its
    ``span`` is then set too. For points
    with an integer start column, a Parquet file's statistics are enough: no null in the
    start and order columns or in a payload field not declared optional, and no start at
    infinity. Otherwise the narrow columns are read as ``scan_locally`` reads them."""
    node, source, limit = frame.node, frame.node.source, frame.scan_limit
    if (
        limit <= 0
        or not frame.in_spark
        or frame.kinds_vary
        or frame.has_arrival
        or node.shape not in (EventShape.POINT, EventShape.INTERVAL)
        or not isinstance(source, (ParquetSource, ArrowSource))
    ):
        return None
    try:
        if node.shape is EventShape.POINT and isinstance(source, ParquetSource):
            counted = points_proved_by_statistics(_parquet_files(source), source)
            if counted is not None:
                frame.span = counted[1]
                return counted[0]
        batches = _narrow_batches(source, limit, _utc_session(frame))
        if batches is None:
            return None
        import numpy as np

        spanning = _Spanning()
        for _, start, end, _ in batches:
            if bool(np.any(start >= INF)) or (end is not None and bool(np.any(end <= start))):
                return None
            spanning.add(start, end)
        frame.span = spanning.span()
        return spanning.rows
    except (ImportError, OSError, ValueError, TypeError, KeyError):
        return None


def _utc_session(frame: InputFrame) -> bool:
    """Whether the session's time zone is UTC, in which Spark reads a timestamp without zone
    as the driver does."""
    rows = frame.projection.raw if frame.projection is not None else frame.df
    assert rows is not None
    zone = rows.sparkSession.conf.get("spark.sql.session.timeZone") or ""
    return zone.upper() in ("UTC", "ETC/UTC", "GMT", "Z", "+00:00")


def _parquet_files(source: ParquetSource[Any]) -> list[Any]:
    """The files of a Parquet source (a file, or a directory's in name order) as
    ``pyarrow.parquet.ParquetFile``s: their footers, and their batches in file order."""
    import pyarrow.parquet as pq

    dataset = pq.ParquetDataset(source.path)
    return [pq.ParquetFile(f, filesystem=dataset.filesystem) for f in sorted(dataset.files)]


def _narrow_batches(
    source: TableSource[Any], limit: int, utc_session: bool, arrival: bool = False
) -> Iterator[tuple[Any, Any, Any, Any]] | None:
    """(order, start, end, arrival) of each record batch in file order, as int64 ticks (end
    None for points, arrival None unless asked for), or None when the table has more rows
    than ``limit``, a column of a type this scan does not convert exactly as Spark does, or
    a null in a payload field not declared optional."""
    import pyarrow as pa

    arrivals = source.arrival if arrival else None
    names = [
        *([source.order] if source.order else []),
        source.start,
        *([source.end] if source.end else []),
        *([arrivals] if arrivals else []),
    ]
    columns = list(dict.fromkeys(names))  # the order column may be a time column too
    required = [f.name for f in record_fields(source.payload_type) if not f.nullable]
    if isinstance(source, ArrowSource):
        table = source.table
        if table.num_rows > limit or any(table.column(n).null_count for n in required):
            return None
        schema, batches = table.schema, table.select(columns).to_batches(_BATCH_ROWS)
    else:
        assert isinstance(source, ParquetSource)
        files = _parquet_files(source)
        if sum(f.metadata.num_rows for f in files) > limit or not all(parquet_proves_no_nulls(f, required) for f in files):
            return None
        schema = files[0].schema_arrow
        batches = (b for f in files for b in f.iter_batches(batch_size=_BATCH_ROWS, columns=columns))
    if nanosecond_columns(source, {f.name: f.type for f in schema}):
        return None  # values that may lie below a microsecond: the Spark scan names the row
    origin = source.origin_ticks()
    multiply = TIME_UNITS[source.time_unit or "us"][0]
    shifts: list[int | None] = []
    for name in names:
        t = schema.field(name).type
        if pa.types.is_integer(t):
            # A time column as the order column is scaled and shifted to ticks, as ``table_columns`` does.
            shifts.append(origin if name in (source.start, source.end, source.arrival) else 0)
        elif pa.types.is_timestamp(t) and t.unit != "ns" and (t.tz is not None or utc_session):
            shifts.append(None)  # Spark reads a timestamp without zone in the session's zone
        else:
            return None
    if source.order is not None and pa.types.is_timestamp(schema.field(source.order).type):
        return None  # Spark orders by the ticks; keep to integer order columns

    scaled = {n: multiply for n in (source.start, source.end, source.arrival) if n and multiply != 1}

    def ticks(column: Any, shift: int | None, scale: int = 1) -> Any:
        if shift is None:
            return column.cast(pa.timestamp("us", tz=column.type.tz)).cast(pa.int64()).to_numpy()
        values = column.cast(pa.int64()).to_numpy()
        values = values * scale if scale != 1 else values
        return values + shift if shift else values

    def narrow() -> Iterator[tuple[Any, Any, Any, Any]]:
        import numpy as np

        index = 0
        for batch in batches:
            read = [batch.column(columns.index(name)) for name in names]
            if any(c.null_count for c in read):
                raise ValueError("a null time or order")
            arrays = [ticks(c, s, scaled.get(name, 1)) for c, s, name in zip(read, shifts, names)]
            if source.order is None:  # file order: the row's index in the one file
                arrays.insert(0, np.arange(index, index + batch.num_rows, dtype=np.int64))
                index += batch.num_rows
            yield arrays[0], arrays[1], arrays[2] if source.end else None, arrays[-1] if arrivals else None

    return narrow()


def _scan(frame: InputFrame, batches: Iterator[tuple[Any, Any, Any, Any]]) -> tuple[int, int, list[dict[str, Any]], Span | None] | None:
    """The Spark scan's collected rows (as dicts of the same columns), or None when a row
    breaks a rule, the order column does not strictly increase, or the arrivals (when the
    table has them) go back. Every row is a counted event: a CTI candidate is every N-th
    row's start (or a start entering a later period) less the delay, and a row is at risk
    when it starts before the latest start before it less the delay (``may_be_late``)."""
    import numpy as np

    policy = frame.policy
    delay = policy.delay
    point = frame.node.shape is EventShape.POINT
    kind = POINT if point else INTERVAL
    rows = 0
    lo: int | None = None
    last_order = NEG_INF
    latest = NEG_INF  # the largest start before the batch
    state = GenerationState()  # what generation carries to the next batch
    collected: list[dict[str, Any]] = []
    spanning = _Spanning()
    last_arrival = NEG_INF
    for order, start, end, arrivals in batches:
        n = len(order)
        if not n:
            continue
        if lo is None:
            lo = int(order[0])
        if order[0] <= last_order or (n > 1 and not bool(np.all(order[1:] > order[:-1]))):
            return None
        if end is not None and bool(np.any(end <= start)):
            return None
        if bool(np.any(start >= INF)):
            return None
        if arrivals is not None:  # arrivals never go back (the Spark path names the row)
            if arrivals[0] < last_arrival or (n > 1 and not bool(np.all(arrivals[1:] >= arrivals[:-1]))):
                return None
            last_arrival = int(arrivals[-1])
        last_order = int(order[-1])
        risk = may_be_late(start, latest, delay)
        generated = generation(policy, start, before=state)
        candidates, state = np.flatnonzero(generated.generates), generated.state
        picked = np.union1d(np.flatnonzero(risk), candidates)
        is_candidate = np.isin(picked, candidates, assume_unique=True).tolist()
        starts = start[picked].tolist()
        ends = [t + 1 for t in starts] if end is None else end[picked].tolist()
        arrived = arrivals[picked].tolist() if arrivals is not None else [NEG_INF] * len(starts)
        for i, o, s, e, a, risky, c in zip(
            picked.tolist(), order[picked].tolist(), starts, ends, arrived, risk[picked].tolist(), is_candidate
        ):
            collected.append(
                {
                    POS: rows + i,
                    ORDER: o,
                    FILE: 0,
                    KIND: kind,
                    S: s,
                    E: e,
                    ARR: a,
                    "__g": s - delay if c else None,
                    "__x": None,
                    "__risk": risky,
                    "__bad": 0,
                }
            )
        latest = max(latest, int(start.max()))
        spanning.add(start, end, latest + 1)
        rows += n
    return rows, lo if lo is not None else 0, collected, spanning.span()
