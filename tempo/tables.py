"""Reading table sources (Parquet, CSV, DataFrames) outside Spark, through pyarrow, and
the checks of a table's columns that both executors share.

The in-memory executor reads a ``TableSource`` column by column: times become ticks
without building a datetime per row, and payloads are built with one constructor call
per row. Rows are taken in the source's ``order`` (a stable sort), else as stored.

Before any row is read, ``check_columns`` holds the table's columns (name and type) against
the source's column arguments and the payload's annotations, so that a missing or mistyped
column is one ``InputSchemaError`` with the same words on both executors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

import attrs

from tempo.errors import InputError, InputSchemaError, RuleText
from tempo.events import Cti, EdgeEnd, EdgeStart, EventShape, Heartbeat, InputItem, Interval, Point
from tempo.expr.schema import is_record_type, record_fields
from tempo.rules import InputRule, message
from tempo.ticks import INF, NEG_INF, from_ticks

KINDS = {"point": 0, "interval": 1, "start": 2, "end": 3, "cti": 4, "heartbeat": 5}
"""Values of a ``kind`` column (case-insensitive) and the item kinds they stand for. A
``heartbeat`` row is a ``Heartbeat`` at the row's arrival: its other columns are ignored."""

KIND_NAMES = {code: name for name, code in KINDS.items()}

_SHAPE_KIND = {EventShape.POINT: 0, EventShape.INTERVAL: 1}

TIME_UNITS: dict[str, tuple[int, int]] = {"s": (1_000_000, 1), "ms": (1_000, 1), "us": (1, 1), "ns": (1, 1_000)}
"""What an integer time column may count (``TableSource(time_unit=...)``), each as
``(multiply, divide)``: a count in it is ``count * multiply / divide`` ticks (microseconds).
A nanosecond count that is not a multiple of 1000 is no whole tick (``SUB_MICROSECOND``)."""


@attrs.frozen
class Span:
    """Where a table input's rows lie in time, as an executor read them before its query. What
    the input admits is a subset of its rows, or a row moved up to a CTI: within its own
    lifetime, or, for a point, to ``[cti, cti + 1)``, which may lie past the rows (a negative
    generation delay, a late arrival): ``admitting`` widens the span for those. The compilers
    size a join's time buckets by it (``tempo.lowering.physical.cut_buckets``)."""

    rows: int
    first: int  # the least start
    last: int  # one tick past the latest start or finite end
    finite_rows: int  # rows whose lifetime ends (the others' end at infinity)
    finite_length: float  # their lengths summed (in floats: an estimate, and int64 may overflow)

    def admitting(self, latest_cti: int) -> Span:
        """The span of what the input admits, when its latest finite CTI is ``latest_cti``:
        ADJUST moves a point at most to ``[latest_cti, latest_cti + 1)``."""
        return attrs.evolve(self, last=max(self.last, latest_cti + 1)) if NEG_INF < latest_cti < INF else self

    def mean_length(self) -> float | None:
        """The mean length of the lifetimes that end, None when none does."""
        return self.finite_length / self.finite_rows if self.finite_rows else None

    def listed(self, width: int, first: int, last: int) -> float:
        """At most how many (row, bucket) pairs the rows give when each is cut to
        ``[first, last)`` and listed in every bucket of ``width`` ticks it overlaps (a
        lifetime of length L overlaps at most (L - 1) / width + 2 buckets)."""
        open_rows = self.rows - self.finite_rows
        return 2 * self.finite_rows + self.finite_length / width + open_rows * ((last - first) / width + 2)


# ---- column checks (both executors) ---------------------------------------------------------
#
# Each executor describes a column's type by one of these words (``arrow_column_type``
# here, ``tempo.spark.types.column_type`` on Spark), so the checks and their messages are
# the same on both.

TIMESTAMP, INTEGER, FLOAT, DECIMAL, BOOLEAN, STRING, DATE, DURATION, STRUCT, LIST, NULL = (
    "timestamp",
    "integer",
    "float",
    "decimal",
    "boolean",
    "string",
    "date",
    "duration",
    "struct",
    "list",
    "null",
)

FIELD_COLUMN_TYPES: dict[type, tuple[str, ...]] = {
    bool: (BOOLEAN,),
    int: (INTEGER,),
    float: (FLOAT, INTEGER),
    str: (STRING,),
    datetime: (TIMESTAMP,),
    timedelta: (DURATION,),
}
"""The column types that may fill a payload field of each type. An integer column fills a
``float`` field (widened); a column whose every value is null (type ``null``, as a CSV reader
infers for an empty column) fills any field. A record field takes a struct column (payload
fields of other types are refused when the query is built: ``tempo.expr.schema``)."""

TIME_COLUMN_TYPES = (TIMESTAMP, INTEGER)
"""A time column (``start``, ``end``, ``arrival``): a timestamp (of any unit), or an integer
count of the source's ``time_unit`` (which it must give) since ``time_origin``."""

ORDER_COLUMN_TYPES = (INTEGER, TIMESTAMP)

KIND_COLUMN_TYPES = (STRING,)


def arrow_column_type(dtype: Any) -> str:
    """The word for a pyarrow type (see ``FIELD_COLUMN_TYPES``)."""
    import pyarrow as pa

    t = pa.types
    if t.is_dictionary(dtype):
        return arrow_column_type(dtype.value_type)
    for test, word in (
        (t.is_timestamp, TIMESTAMP),
        (t.is_integer, INTEGER),
        (t.is_floating, FLOAT),
        (t.is_decimal, DECIMAL),
        (t.is_boolean, BOOLEAN),
        (t.is_string, STRING),
        (t.is_large_string, STRING),
        (t.is_date, DATE),
        (t.is_duration, DURATION),
        (t.is_struct, STRUCT),
        (t.is_null, NULL),
    ):
        if test(dtype):
            return word
    if t.is_list(dtype) or t.is_large_list(dtype):
        return list_of(arrow_column_type(dtype.value_type))
    return str(dtype)


def list_of(word: str) -> str:
    """The word for a list column whose elements are ``word`` columns."""
    return f"{LIST}<{word}>"


def _field_column_types(dtype: type, element: type | None) -> tuple[str, ...] | None:
    """The column types a field takes (None: any)."""
    if element is not None:
        inner = _field_column_types(element, None)
        return None if inner is None else tuple(list_of(w) for w in (*inner, NULL))
    if is_record_type(dtype):
        return (STRUCT,)
    return FIELD_COLUMN_TYPES.get(dtype)


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def _listing(columns: Mapping[str, str]) -> str:
    return ", ".join(f"{n} ({tp})" for n, tp in columns.items()) or "none"


def column_arguments(source: Any) -> list[tuple[str, str, tuple[str, ...]]]:
    """(argument, column, the column types it takes) of each column a source names."""
    start_arg = "start" if getattr(source, "start_given", True) else "arrival"
    out: list[tuple[str, str, tuple[str, ...]]] = [(start_arg, source.start, TIME_COLUMN_TYPES)]
    if source.end:
        out.append(("end", source.end, TIME_COLUMN_TYPES))
    if source.kind:
        out.append(("kind", source.kind, KIND_COLUMN_TYPES))
    if source.arrival and source.arrival != source.start:
        out.append(("arrival", source.arrival, TIME_COLUMN_TYPES))
    if source.order and source.order not in (source.start, source.end, source.arrival):
        out.append(("order", source.order, ORDER_COLUMN_TYPES))
    return out


def check_columns(name: str, source: Any, columns: Mapping[str, str]) -> None:
    """Hold a table's ``columns`` (name -> type word) against the column arguments of
    ``source`` (a ``TableSource``) and the fields of its payload type, before any row is
    read; the first mismatch raises ``InputSchemaError`` naming the input, the argument or
    field, the column, and the columns the table has."""
    for arg, column, accepted in column_arguments(source):
        if column not in columns:
            raise InputSchemaError(name, f"{arg}={column!r} names no column of {source!r}; its columns are {_listing(columns)}")
        found = columns[column]
        if found not in accepted and found != NULL:
            want = {
                TIME_COLUMN_TYPES: "a time column must be a timestamp, or an integer count of time_unit since time_origin",
                ORDER_COLUMN_TYPES: "an order column must be an integer or a timestamp",
                KIND_COLUMN_TYPES: "a kind column must be a string column (point, interval, start, end or cti)",
            }[accepted]
            raise InputSchemaError(name, f"{arg}={column!r} is {_a(found)} column of {source!r}: {want}")
        if accepted is TIME_COLUMN_TYPES and found == INTEGER and getattr(source, "time_unit", None) is None:
            raise InputSchemaError(
                name,
                f"{arg}={column!r} is an integer column of {source!r}, but the source has no time_unit: an integer "
                'time counts seconds, milliseconds, microseconds or nanoseconds, so say which, as in time_unit="s" '
                '(or "ms", "us", "ns"), counted from time_origin (the Unix epoch unless given)',
            )
    for given, what in ((source.origin_ticks() != 0, "time_origin"), (getattr(source, "time_unit", None) is not None, "time_unit")):
        time_columns = [c for arg, c, accepted in column_arguments(source) if accepted is TIME_COLUMN_TYPES]
        if given and not any(columns.get(c) == INTEGER for c in time_columns):
            raise InputSchemaError(
                name,
                f"{what} is set, but no time column of {source!r} is an integer column "
                f"({', '.join(f'{c} is {_a(columns[c])}' for c in time_columns)}): {what} says what integer "
                "time columns count; leave it out for timestamp columns",
            )
    cls = source.payload_type
    fields = record_fields(cls)
    missing = [f for f in fields if f.name not in columns]
    if missing:
        what = ", ".join(f"{f.name} ({f.dtype.__name__})" for f in missing)
        raise InputSchemaError(
            name,
            f"no column for payload field{'s' if len(missing) > 1 else ''} {what} of {cls.__qualname__} "
            f"in {source!r}; its columns are {_listing(columns)}",
        )
    for f in fields:
        accepted_types = _field_column_types(f.dtype, f.element)
        found = columns[f.name]
        if accepted_types is None or found in accepted_types or found == NULL:
            continue
        optional = " | None" if f.nullable else ""
        declared = f.dtype.__name__ if f.element is None else f"{f.dtype.__name__}[{f.element.__name__}]"
        raise InputSchemaError(
            name,
            f"payload field {cls.__qualname__}.{f.name} is declared {declared}{optional}, but its column "
            f"{f.name!r} in {source!r} is {_a(found)} column (a {declared} field takes "
            f"{' or '.join(accepted_types)} columns): declare the field with the column's type or convert the column",
        )


def null_field_rule(cls: type, field: str, column: str) -> RuleText:
    """The rule a null value breaks in a column that fills a field not declared ``X | None``."""
    return message(InputRule.NULL_FIELD, column=column, cls=cls.__qualname__, field=field)


def null_time_rule(arg: str, column: str) -> RuleText:
    """The rule a null time breaks."""
    return message(InputRule.NULL_END if arg == "end" else InputRule.NULL_START, arg=arg, column=column)


def null_order_rule(source: Any, count: int) -> RuleText:
    """The rule rows with a null in the column that orders the input break."""
    column = source.order
    arg = "arrival" if column == source.arrival else "start" if column == source.start else "end" if column == source.end else "order"
    return message(InputRule.NULL_ORDER, arg=arg, column=column, count=count, plural="s" if count > 1 else "")


def kind_rule(shape: EventShape, kind: int) -> RuleText:
    """The rule a row of a kind its input's shape does not take breaks."""
    takes = {EventShape.POINT: "point", EventShape.INTERVAL: "interval", EventShape.EDGE: "start, end"}[shape] + ", cti, heartbeat"
    return message(InputRule.ROW_KIND, shape=shape.name, takes=takes, kind=KIND_NAMES.get(kind, kind))


def parquet_proves_no_nulls(file: Any, columns: list[str]) -> bool:
    """True when a ``pyarrow.parquet.ParquetFile``'s statistics show no null in any of
    ``columns`` (False when a row group has no null count for one of them): a bulk reader
    may then skip reading them just to look for nulls."""
    meta = file.metadata
    index = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    if any(name not in index for name in columns):
        return False
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        if not group.num_rows:
            continue
        for name in columns:
            stats = group.column(index[name]).statistics
            if stats is None or not stats.has_null_count or stats.null_count:
                return False
    return True


def points_proved_by_statistics(files: list[Any], source: Any) -> tuple[int, Span | None] | None:
    """The row count and span of a table source of points read from ``files``
    (``pyarrow.parquet.ParquetFile``s), when their statistics prove every row good: an
    integer start column (not in nanoseconds), no null in it, in the order column or in a
    payload field not declared optional, no start at infinity, and no column whose values may
    hold a part below a microsecond. Else None: the rows must be read."""
    import pyarrow.types as pt

    if not files or not pt.is_integer(files[0].schema_arrow.field(source.start).type):
        return None
    if nanosecond_columns(source, {f.name: f.type for f in files[0].schema_arrow}):
        return None
    required = [f.name for f in record_fields(source.payload_type) if not f.nullable]
    checked = list(dict.fromkeys([source.start, *([source.order] if source.order else []), *required]))
    rows, first, last = 0, INF, NEG_INF
    for file in files:
        if not parquet_proves_no_nulls(file, checked):
            return None
        meta = file.metadata
        column = meta.schema.names.index(source.start)
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            if not group.num_rows:
                continue
            stats = group.column(column).statistics
            if stats is None or not stats.has_min_max or source.integer_ticks(stats.max) >= INF:
                return None
            rows += group.num_rows
            first, last = min(first, source.integer_ticks(stats.min)), max(last, source.integer_ticks(stats.max) + 1)
    return rows, (Span(rows, first, last, rows, float(rows)) if rows else None)


def table_columns(table: Any) -> dict[str, str]:
    """A pyarrow table's columns as name -> type word."""
    return {f.name: arrow_column_type(f.type) for f in table.schema}


def _require_pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("reading table sources outside Spark needs pyarrow: pip install pyarrow") from exc
    return pyarrow


def _as_field(column: Any, dtype: type) -> Any:
    """A payload column as its field declares it: integers widened for a float field,
    timestamps of any unit as UTC microseconds (aware datetimes, as the Spark executor gives
    them back), durations of any unit as microseconds (``timedelta``). A nanosecond value
    with a part below a microsecond is cut here; ``sub_microsecond_rows`` finds it first."""
    import pyarrow as pa

    if dtype is float and pa.types.is_integer(column.type):
        return column.cast(pa.float64())
    if dtype is datetime and pa.types.is_timestamp(column.type):
        return column.cast(pa.timestamp("us", tz="UTC"), safe=False)
    if dtype is timedelta and pa.types.is_duration(column.type):
        return column.cast(pa.duration("us"), safe=False)
    return column


def _ticks(table: Any, column: str, source: Any) -> list[int | None]:
    """A time column as ticks: a timestamp of any unit (cut to the microsecond: see
    ``sub_microsecond_rows``), or an integer count of the source's ``time_unit`` since its
    ``time_origin``."""
    pa = _require_pyarrow()
    import pyarrow.compute as pc

    col = table.column(column)
    if pa.types.is_timestamp(col.type):
        col = pc.cast(pc.cast(col, pa.timestamp("us", tz="UTC"), safe=False), pa.int64())
        return col.to_pylist()  # type: ignore[no-any-return]
    if pa.types.is_null(col.type):
        return [None] * len(col)
    values: list[int | None] = col.to_pylist()  # an integer column (check_columns has seen to it)
    multiply, divide = TIME_UNITS[getattr(source, "time_unit", None) or "us"]
    origin = source.origin_ticks()
    if (multiply, divide, origin) == (1, 1, 0):
        return values
    return [None if v is None else v * multiply // divide + origin for v in values]


def nanosecond_columns(source: Any, types: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """The columns ``source`` reads whose values may hold a part below a microsecond, by the
    Arrow types of the table's columns (``types``: name -> ``pyarrow.DataType``): a time
    column or a payload ``datetime`` or ``timedelta`` field of a nanosecond timestamp or
    duration, or an integer time column with ``time_unit="ns"``. Each as column -> (what it
    fills: ``start``, ``end``, ``arrival`` or ``payload field C.f``, its type as the
    ``SUB_MICROSECOND`` rule names it)."""
    import pyarrow as pa

    def nanos(t: Any) -> str | None:
        if (pa.types.is_timestamp(t) or pa.types.is_duration(t)) and t.unit == "ns":
            return f"{'timestamp' if pa.types.is_timestamp(t) else 'duration'}[ns]"
        return None

    out: dict[str, tuple[str, str]] = {}
    start_arg = "start" if getattr(source, "start_given", True) else "arrival"
    for arg, column in ((start_arg, source.start), ("end", source.end), ("arrival", source.arrival)):
        t = types.get(column) if column else None
        if t is None or column in out:
            continue
        if pa.types.is_integer(t) and getattr(source, "time_unit", None) == "ns":
            out[column] = (arg, 'integer, time_unit="ns"')
        elif nanos(t) is not None:
            out[column] = (arg, nanos(t) or "")
    cls = source.payload_type
    for f in record_fields(cls):
        t = types.get(f.name)
        if f.dtype in (datetime, timedelta) and t is not None and nanos(t) is not None and f.name not in out:
            out[f.name] = (f"payload field {cls.__qualname__}.{f.name}", nanos(t) or "")
    return out


def sub_microsecond_rule(what: str, column: str, type_text: str) -> RuleText:
    """The rule a value with a part below a microsecond breaks."""
    return message(
        InputRule.SUB_MICROSECOND, what=what if what.startswith("payload") else f"the {what} time", column=column, type=type_text
    )


def sub_microsecond_rows(table: Any, columns: Mapping[str, tuple[str, str]]) -> dict[str, list[int]]:
    """The rows of a pyarrow ``table`` (in its order) whose value in each of ``columns``
    (``nanosecond_columns``) has a part below a microsecond."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out: dict[str, list[int]] = {}
    for name in columns:
        values = pc.cast(table.column(name), pa.int64())
        below = pc.not_equal(pc.subtract(values, pc.multiply(pc.divide(values, 1000), 1000)), 0)
        rows = pc.indices_nonzero(pc.fill_null(below, False)).to_pylist()
        if rows:
            out[name] = rows
    return out


class Payloads:
    """The payloads of a table's rows in input order, built as the rows are read.

    Payloads that a query drops then die young; built all at once, millions of them would
    stay alive together, and every full garbage collection traverses all live objects. A
    constructor that may fail (validators, converters, hooks, a hand-written ``__init__``)
    still runs for every row at once, so that its errors come before any row is used.
    """

    def __init__(self, cls: type, columns: list[list[Any]], n: int) -> None:
        self.cls, self.columns, self.n = cls, columns, n
        self.built = None if stores_only(cls) else list(self._build())

    def _build(self) -> Iterator[Any]:
        if self.columns:
            return map(self.cls, *self.columns)
        return (self.cls() for _ in range(self.n))

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[Any]:
        return self._build() if self.built is None else iter(self.built)

    def __getitem__(self, i: int) -> Any:
        return self.cls(*[c[i] for c in self.columns]) if self.built is None else self.built[i]


def stores_only(cls: type) -> bool:
    """True when ``cls(*fields)`` only stores its arguments, so it cannot fail: an attrs class
    with the ``__init__`` attrs generated, taking every field, without validators,
    converters or init hooks."""
    code = getattr(cls.__dict__.get("__init__"), "__code__", None)
    return (
        attrs.has(cls)
        and code is not None
        and code.co_filename.startswith("<attrs generated")
        and not hasattr(cls, "__attrs_pre_init__")
        and not hasattr(cls, "__attrs_post_init__")
        and all(f.init and not f.kw_only and f.validator is None and f.converter is None for f in attrs.fields(cls))
    )


Columns = tuple[list[int], list[int], list[int], "list[int] | None", Payloads, "RowError | None"]
"""A table's (kinds, starts, ends, arrivals, payloads, first bad row) in input order."""


class RowError(InputError):
    """The first row whose columns break a rule (unknown kind, null time, null in a field not
    declared optional), held until the row checks reach it so that errors come in row
    order on both executors. ``before_rules``: raised before the row's other checks (kind
    and times) or after its lifetime checks (a null payload value)."""

    def __init__(self, input_name: str, position: int, item: object, message: RuleText, before_rules: bool) -> None:
        super().__init__(input_name, position, item, message)
        self.before_rules = before_rules

    def plain(self) -> InputError:
        """The error as raised: a plain ``InputError``."""
        return InputError(self.input_name, self.position, self.item, self.message, self.rule)


def read_columns(source: Any, table: Any, shape: EventShape, name: str = "table") -> Columns:
    """(kinds, starts, ends, arrivals, payloads, first bad row) of the rows in input order;
    the columns are checked against the source first (``check_columns``), and errors name
    the input ``name``. A row whose kind, time or payload column is bad is not raised here
    but returned (a ``RowError``), for the row checks to raise in row order."""
    check_columns(name, source, table_columns(table))
    if source.order is not None:
        import pyarrow.compute as pc

        nulls = table.column(source.order).null_count
        if nulls:  # such rows would sort last: the first of them is where the order breaks
            raise InputError(name, table.num_rows - nulls, None, null_order_rule(source, nulls))
        table = table.take(pc.sort_indices(table, sort_keys=[(source.order, "ascending")]))
    n = table.num_rows
    starts = _ticks(table, source.start, source)
    ends = _ticks(table, source.end, source) if source.end else [None] * n
    arrivals = _ticks(table, source.arrival, source) if source.arrival else None
    # Values below a microsecond, by row: the first column (start, end, arrival, then the
    # payload fields) where the row uses it (a heartbeat no start, only an interval or an end
    # edge its end, only an event its payload).
    nanos = nanosecond_columns(source, {f.name: f.type for f in table.schema})
    below: dict[int, list[str]] = {}
    for column, rows in sub_microsecond_rows(table, nanos).items():
        for i in rows:
            below.setdefault(i, []).append(column)
    fields = record_fields(source.payload_type)
    cls = source.payload_type
    payload_columns = [_as_field(table.column(f.name), f.dtype) for f in fields]
    values = [c.to_pylist() for c in payload_columns]
    for j, f in enumerate(fields):
        if f.dtype is tuple and f.element is not None:  # Arrow gives lists; the field says tuples
            values[j] = [None if v is None else tuple(v) for v in values[j]]

    def row(i: int) -> Any:  # what an error shows of row i: its payload, else its values
        try:
            return cls(*[c[i] for c in values])
        except Exception:
            return {f.name: c[i] for f, c in zip(fields, values)}

    bad: RowError | None = None
    if source.kind is not None:
        kinds = []
        for i, k in enumerate(table.column(source.kind).to_pylist()):
            code = KINDS.get(k.lower()) if isinstance(k, str) else None
            if code is None:
                bad = bad or RowError(name, i, row(i), message(InputRule.UNKNOWN_KIND, column=source.kind), True)
                code = 4
            kinds.append(code)
    elif shape in _SHAPE_KIND:
        kinds = [_SHAPE_KIND[shape]] * n
    else:
        raise InputSchemaError(name, message(InputRule.EDGE_KIND_COLUMN, source=repr(source)))
    # Rows with a null value in a field not declared optional (CTI and heartbeat rows have
    # no payload).
    null_rows: dict[int, str] = {}
    for f, c, v in zip(fields, payload_columns, values):
        if not f.nullable and c.null_count:
            for i, value in enumerate(v):
                if value is None:
                    null_rows.setdefault(i, f.name)
    try:
        payloads = Payloads(cls, values, n)
    except Exception as exc:  # a validator or __init__ of the payload class refused a row
        i = next((i for i in range(n) if isinstance(row(i), dict)), -1)
        if i not in null_rows:
            raise  # the class's own error, as the Spark executor raises it when it builds the row
        raise InputError(name, i, row(i), null_field_rule(cls, null_rows[i], null_rows[i])) from exc
    # Rows of one shape without nulls all at once; otherwise row by row, to find the null.
    if (
        bad is None
        and not null_rows
        and not below
        and source.kind is None
        and None not in starts
        and (shape is EventShape.POINT or None not in ends)
    ):
        same_shape = [s + 1 for s in starts] if shape is EventShape.POINT else ends  # type: ignore[operator]
        return kinds, starts, same_shape, arrivals, payloads, None  # type: ignore[return-value]
    start_arg = "start" if getattr(source, "start_given", True) else "arrival"
    ends_out: list[int] = []
    for i in range(n):
        if bad is not None and bad.position <= i:
            break
        s, e, k = starts[i], ends[i], kinds[i]
        if s is None and k != 5:  # a heartbeat's time is its arrival
            bad = RowError(name, i, row(i), null_time_rule(start_arg, source.start), True)
        elif k in (1, 3) and e is None:
            rule = null_time_rule("end", source.end) if source.end else message(InputRule.NO_END_COLUMN, kind=KIND_NAMES[k])
            bad = RowError(name, i, row(i), rule, True)
        elif i in below and (cut := _used_below(below[i], nanos, k)) is not None:
            bad = RowError(name, i, row(i), sub_microsecond_rule(nanos[cut][0], cut, nanos[cut][1]), True)
        elif k < 4 and i in null_rows:
            bad = RowError(name, i, row(i), null_field_rule(source.payload_type, null_rows[i], null_rows[i]), False)
        ends_out.append(s + 1 if k == 0 and s is not None else INF if k == 2 else s if k >= 4 else e)  # type: ignore[arg-type]
    ends_out.extend(ends[len(ends_out) :])  # type: ignore[arg-type]
    return kinds, starts, ends_out, arrivals, payloads, bad  # type: ignore[return-value]


def _used_below(columns: list[str], nanos: Mapping[str, tuple[str, str]], kind: int) -> str | None:
    """The first of a row's ``columns`` holding a value below a microsecond that a row of
    ``kind`` uses (a heartbeat no start, only an interval or an end edge its end, only an
    event its payload: as null values count), in ``nanos`` order."""
    for column in nanos:
        if column in columns:
            what = nanos[column][0]
            if (
                what == "arrival"
                or (what == "start" and kind != 5)
                or (what == "end" and kind in (1, 3))
                or (what.startswith("payload") and kind < 4)
            ):
                return column
    return None


def items_from_arrow(source: Any, table: Any) -> Iterator[InputItem[Any]]:
    """The rows as input items (aware UTC datetimes)."""
    shape = EventShape.EDGE if source.kind is not None else EventShape.INTERVAL if source.end else EventShape.POINT
    kinds, starts, ends, arrivals, payloads, bad = read_columns(source, table, shape, repr(source))
    if bad is not None:
        raise bad.plain()
    for i, (k, payload) in enumerate(zip(kinds, payloads)):
        arrival = None if arrivals is None or arrivals[i] is None else from_ticks(arrivals[i])
        if k == 5:  # a heartbeat: only its arrival counts
            if arrival is None:
                raise InputError(repr(source), i, None, message(InputRule.HEARTBEAT_ARRIVAL))
            yield Heartbeat(arrival)
            continue
        s = from_ticks(starts[i])
        if k == 0:
            yield Point(s, payload, arrival)
        elif k == 1:
            yield Interval(s, from_ticks(ends[i]), payload, arrival)
        elif k == 2:
            yield EdgeStart(s, payload, arrival)
        elif k == 3:
            yield EdgeEnd(s, from_ticks(ends[i]), payload, arrival)
        else:
            yield Cti(s, arrival)
