"""Where an input's items come from.

A ``Source`` yields input items and may declare default ``AdvanceTimeSettings`` for the
shape it is bound with, as a StreamInsight adapter factory can; settings given to
``Stream.create`` override them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any, Generic, Literal, TypeVar, cast

from tempo.errors import InputRule, InputSchemaError, QueryBuildError, UnsupportedError
from tempo.events import EdgeEnd, EdgeStart, EventShape, InputItem, Interval, Point
from tempo.settings import AdvanceTimeSettings
from tempo.tables import TIME_UNITS

T = TypeVar("T")

TimeUnit = Literal["s", "ms", "us", "ns"]
"""What an integer time column counts (``TableSource(time_unit=...)``): seconds,
milliseconds, microseconds or nanoseconds since ``time_origin``."""


class Source(Generic[T]):
    """Base class of input sources. Subclasses implement ``items`` and set ``payload_type``."""

    payload_type: type[T]

    def items(self) -> Iterable[InputItem[T]]:
        """The input's items in arrival order. May be called once per run."""
        raise NotImplementedError

    def advance_time_settings(self, shape: EventShape) -> AdvanceTimeSettings | None:
        """The settings this source declares for ``shape`` (None: explicit CTIs only)."""
        return None


class ItemSource(Source[T]):
    """A source over a fixed sequence of items (or a function that yields them on each run)."""

    def __init__(
        self,
        items: Iterable[InputItem[T]] | Callable[[], Iterable[InputItem[T]]],
        payload_type: type[T] | None = None,
        settings: AdvanceTimeSettings | None = None,
    ) -> None:
        self._factory: Callable[[], Iterable[InputItem[T]]] | None
        self._items: Sequence[InputItem[T]] | None
        if callable(items):
            self._factory, self._items = items, None
        else:
            self._factory, self._items = None, tuple(items)
        self._settings = settings
        inferred = payload_type or self._infer_payload_type()
        if inferred is None:
            raise QueryBuildError("cannot tell the payload type of an input with no events: pass payload_type=")
        self.payload_type = inferred

    def _infer_payload_type(self) -> type[T] | None:
        """The payload type of the first event; else that of the first bare record, so
        that the input's checks can say to wrap it in ``Point(...)``."""
        from tempo.expr.schema import is_record

        bare: type[T] | None = None
        for item in self._items or ():
            if isinstance(item, (Point, Interval, EdgeStart, EdgeEnd)):
                return type(item.payload)
            if bare is None and is_record(item):
                bare = cast("type[T]", type(item))
        return bare

    @property
    def materialized(self) -> Sequence[InputItem[T]] | None:
        """The items, when they are a fixed sequence (lets executors validate them up front)."""
        return self._items

    def items(self) -> Iterator[InputItem[T]]:
        if self._items is not None:
            return iter(self._items)
        assert self._factory is not None
        return iter(self._factory())

    def advance_time_settings(self, shape: EventShape) -> AdvanceTimeSettings | None:
        return self._settings

    def __repr__(self) -> str:
        size = f"{len(self._items)} items" if self._items is not None else "generated items"
        return f"ItemSource({self.payload_type.__name__}, {size})"


class TableSource(Source[T]):
    """A source whose items are the rows of a table, mapped onto items by column names.

    Payload fields are read from the columns of the same names. ``start`` (and ``end``,
    ``arrival``) hold times: a timestamp column (of any unit, read exactly), or an integer
    count of ``time_unit`` (``"s"``, ``"ms"``, ``"us"`` or ``"ns"``, required for an integer
    time column) since ``time_origin``. ``kind`` names a column saying what each row is (``"point"``,
    ``"interval"``, ``"start"``, ``"end"`` or ``"cti"``); without it every row is an event of
    the input's shape. ``order`` names the column that gives the input order (default: the
    arrival column if given, else the table's row order). ``dense_order_from``: the order
    column counts the rows from this integer without gaps (0, 1, 2, ...); a live query then
    holds back rows that follow a gap until the missing ones arrive, since a file source may
    deliver files out of order (docs/streaming.md); bounded runs read the rows as they are.

    When a query runs, the table's columns are checked against these arguments and the
    payload's field annotations before any row is read (``tempo.tables.check_columns``:
    an ``InputSchemaError`` naming the input, the argument or field and the columns there
    are); then each row is checked (null times, kinds, nulls in fields not declared
    optional: an ``InputError`` naming the row). docs/semantics.md 2.5 lists the column
    types each argument and field takes.
    """

    def __init__(
        self,
        payload_type: type[T],
        start: str | None,
        end: str | None = None,
        kind: str | None = None,
        arrival: str | None = None,
        order: str | None = None,
        time_origin: datetime = datetime(1970, 1, 1, tzinfo=timezone.utc),
        settings: AdvanceTimeSettings | None = None,
        dense_order_from: int | None = None,
        time_unit: TimeUnit | None = None,
    ) -> None:
        self.payload_type = payload_type
        if time_unit is not None and time_unit not in TIME_UNITS:
            raise QueryBuildError(f'time_unit= is what integer time columns count: "s", "ms", "us" or "ns", got {time_unit!r}')
        self.time_unit: TimeUnit | None = time_unit
        time_column = start if start is not None else arrival
        if time_column is None:
            raise QueryBuildError("a table source needs a start column, or an arrival column to take the time from")
        if not isinstance(time_origin, datetime):
            raise QueryBuildError(f"time_origin must be a datetime (naive means UTC), got {type(time_origin).__name__} {time_origin!r}")
        for arg, value in (("start", start), ("end", end), ("kind", kind), ("arrival", arrival), ("order", order)):
            if value is not None and not isinstance(value, str):
                raise QueryBuildError(f"{arg}= names a column: a str, got {type(value).__name__} {value!r}")
        self.start: str = time_column
        self.start_given = start is not None
        """False when ``start`` was not given and the start is read from the arrival column."""
        self.end, self.kind, self.arrival = end, kind, arrival
        self.order = order if order is not None else arrival
        if dense_order_from is not None and (
            isinstance(dense_order_from, bool) or not isinstance(dense_order_from, int) or self.order is None
        ):
            raise QueryBuildError(
                f"dense_order_from= is the integer the order column counts from, and needs order=; got {dense_order_from!r}"
                + ("" if self.order is not None else " without an order column")
            )
        self.dense_order_from = dense_order_from
        self.time_origin = time_origin
        self._settings = settings

    def advance_time_settings(self, shape: EventShape) -> AdvanceTimeSettings | None:
        return self._settings

    def origin_ticks(self) -> int:
        """``time_origin`` in ticks since the Unix epoch (integer time columns are offsets from it)."""
        from tempo.ticks import to_ticks

        return to_ticks(self.time_origin)

    def integer_ticks(self, value: int) -> int:
        """An integer time column's ``value`` in ticks: scaled by ``time_unit`` (floored, for a
        nanosecond count that is not a whole tick) and counted from ``time_origin``."""
        multiply, divide = TIME_UNITS[self.time_unit or "us"]
        return value * multiply // divide + self.origin_ticks()

    def arrow_table(self) -> Any:
        """The rows as a pyarrow Table (used by the in-memory executor)."""
        raise UnsupportedError("in-memory", repr(self), "it reads a source only through its arrow_table(), which this one does not have")

    def check_readable(self, name: str) -> None:
        """Raise ``InputSchemaError`` for input ``name`` when the source cannot be there to
        read (a local file that does not exist); both executors call it first."""
        path = getattr(self, "path", None)
        if isinstance(path, str) and "://" not in path and not os.path.exists(path):
            raise InputSchemaError(name, f"{self!r} reads {path!r}, which does not exist", InputRule.SOURCE_MISSING)

    def items(self) -> Iterator[InputItem[T]]:
        """The rows as input items, in input order (the in-memory executor reads them so)."""
        from tempo.tables import items_from_arrow

        return items_from_arrow(self, self.arrow_table())


class ParquetSource(TableSource[T]):
    """Rows of a Parquet file or directory."""

    def __init__(self, path: str, payload_type: type[T], start: str | None, **columns: Any) -> None:
        super().__init__(payload_type, start, **columns)
        self.path = path

    def arrow_table(self) -> Any:
        import pyarrow.parquet as pq

        return pq.read_table(self.path)

    def __repr__(self) -> str:
        return f"ParquetSource({self.path!r}, {self.payload_type.__name__})"


def is_uri(path: str) -> bool:
    """Whether ``path`` is a URI (``file:``, ``hdfs://``, ``s3a://``: a scheme before its first
    slash) rather than a path of the local file system."""
    return ":" in path.split("/", 1)[0]


def local_path(path: str) -> str | None:
    """``path`` on the local file system, absolute (a plain path, or a ``file:`` URI), or None
    for a URI of another file system (``s3a://``, ``hdfs://``)."""
    if not is_uri(path):
        return os.path.abspath(path)
    if path.startswith("file:"):
        return os.path.abspath(path.removeprefix("file:").removeprefix("//"))
    return None


def delta_table(path: str, version: int | None = None) -> Any:
    """A Delta table's rows (its latest version, or ``version``) as one pyarrow Table, read
    with delta-rs (``deltalake``). The files of a local table are read through pyarrow's own
    file system: through delta-rs' (its default), a process that read a table aborts at exit
    about one time in two ("terminate called without an active exception", delta-rs 1.6)."""
    from deltalake import DeltaTable

    table = DeltaTable(path, version=version)
    root = local_path(path)
    if root is None:
        return table.to_pyarrow_table()
    import pyarrow.fs as pafs

    return table.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(root, pafs.LocalFileSystem())).to_table()


class DeltaSource(TableSource[T]):
    """Rows of a Delta Lake table: its latest version, or ``version=`` (a number of the
    table's log). The Spark executor reads it with Delta's own reader
    (``spark.read.format("delta")``, which needs Delta's jars: ``bash java/fetch``); the
    in-memory and vectorised executors with delta-rs (``deltalake``, the ``delta`` extra), so
    no JVM is needed there. Both read the same files of the same version. A table's rows have
    no order of their own (its files are read in no set order): give ``order=`` (the start
    column, or a sequence number) where the input order matters, as it does for CTIs
    generated from the events."""

    def __init__(self, path: str, payload_type: type[T], start: str | None, *, version: int | None = None, **columns: Any) -> None:
        super().__init__(payload_type, start, **columns)
        if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
            raise QueryBuildError(f"version= is a version of the Delta table (an int from 0) or None for the latest, got {version!r}")
        self.path = path
        self.version = version

    def check_readable(self, name: str) -> None:
        super().check_readable(name)
        if "://" not in self.path and not os.path.isdir(os.path.join(self.path, "_delta_log")):
            raise InputSchemaError(
                name, f"{self!r} reads {self.path!r}, which is no Delta table (it has no _delta_log)", InputRule.SOURCE_MISSING
            )

    def arrow_table(self) -> Any:
        try:
            import deltalake  # noqa: F401
        except ImportError as exc:
            raise UnsupportedError(
                "in-memory", repr(self), "reading a Delta table without Spark needs deltalake: pip install 'tempo[delta]'"
            ) from exc
        return delta_table(self.path, self.version)

    def __repr__(self) -> str:
        at = "" if self.version is None else f", version={self.version}"
        return f"DeltaSource({self.path!r}, {self.payload_type.__name__}{at})"


class CsvSource(TableSource[T]):
    """Rows of a CSV file with a header row."""

    def __init__(self, path: str, payload_type: type[T], start: str | None, **columns: Any) -> None:
        super().__init__(payload_type, start, **columns)
        self.path = path

    def arrow_table(self) -> Any:
        import pyarrow.csv as pcsv

        return pcsv.read_csv(self.path)

    def __repr__(self) -> str:
        return f"CsvSource({self.path!r}, {self.payload_type.__name__})"


class JsonSource(TableSource[T]):
    """Rows of JSON Lines: a file, or every file of a directory (in name order), one JSON
    object a line. Only the columns the source names are read, with the types they are
    declared with (extra fields are ignored, missing ones are null): payload fields as
    annotated (bool, int, float, str, datetime), the ``start``, ``end`` and ``arrival``
    columns as timestamps written as ISO-8601 text (``"2026-03-01T10:00:05.25Z"``; without
    an offset, UTC), the ``order`` column as an integer (unless it is one of the times), the
    ``kind`` column as text. Both executors read them with this schema (``json_schema``), so
    they agree on every value."""

    def __init__(self, path: str, payload_type: type[T], start: str | None, **columns: Any) -> None:
        super().__init__(payload_type, start, **columns)
        self.path = path

    def json_schema(self) -> Any:
        """The pyarrow schema the rows are read with."""
        import pyarrow as pa

        from tempo.expr.schema import record_fields

        stamp = pa.timestamp("us", tz="UTC")
        scalars = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string(), datetime: stamp}
        columns: dict[str, Any] = {}
        for f in record_fields(self.payload_type):
            if f.dtype not in scalars:
                raise QueryBuildError(
                    f"{self!r}: payload field {f.name} is a {getattr(f.dtype, '__name__', f.dtype)}; JSON rows hold bool, int, float, str and datetime fields"
                )
            columns[f.name] = scalars[f.dtype]
        times = [c for c in (self.start, self.end, self.arrival) if c is not None]
        if self.order is not None and self.order not in times:
            columns[self.order] = pa.int64()
        if self.kind is not None:
            columns[self.kind] = pa.string()
        columns.update((c, stamp) for c in times)
        return pa.schema(list(columns.items()))

    def files(self) -> list[str]:
        """The files read: the path itself, or a directory's files in name order (hidden
        ones, starting with ``.`` or ``_``, left out, as Spark leaves them out)."""
        if not os.path.isdir(self.path):
            return [self.path]
        names = sorted(n for n in os.listdir(self.path) if not n.startswith((".", "_")))
        return [os.path.join(self.path, n) for n in names if os.path.isfile(os.path.join(self.path, n))]

    def arrow_table(self) -> Any:
        import pyarrow as pa
        import pyarrow.json as pj

        schema = self.json_schema()
        options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        parts = [pj.read_json(f, parse_options=options).select(schema.names) for f in self.files()]
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def __repr__(self) -> str:
        return f"JsonSource({self.path!r}, {self.payload_type.__name__})"


class ArrowSource(TableSource[T]):
    """Rows of an in-memory table: a ``pyarrow.Table``, or a pandas ``DataFrame`` (converted
    with ``pyarrow.Table.from_pandas``, without its index). The Spark executor makes a
    DataFrame of it (``SparkSession.createDataFrame``)."""

    def __init__(self, table: Any, payload_type: type[T], start: str | None, **columns: Any) -> None:
        super().__init__(payload_type, start, **columns)
        import pyarrow as pa

        if not isinstance(table, pa.Table):
            if _is_pandas(table):
                table = pa.Table.from_pandas(table, preserve_index=False)
            else:
                raise QueryBuildError(f"ArrowSource reads a pyarrow.Table or a pandas DataFrame, got {type(table).__qualname__}")
        self.table = table

    def arrow_table(self) -> Any:
        return self.table

    def __repr__(self) -> str:
        return f"ArrowSource({self.table.num_rows} rows, {self.payload_type.__name__})"


def _is_pandas(value: object) -> bool:
    return any(c.__module__.startswith("pandas") and c.__name__ == "DataFrame" for c in type(value).__mro__)


def _table_hint(source: object) -> str | None:
    """What to write instead, for a table passed where items are expected."""
    mro = {f"{c.__module__.split('.')[0]}.{c.__name__}" for c in type(source).__mro__}
    columns = 'start="<time column>"'
    if "pyarrow.Table" in mro:
        return f"wrap it in tempo.sources.ArrowSource(table, PayloadClass, {columns})"
    if _is_pandas(source):
        return f"wrap it in tempo.sources.ArrowSource(frame, PayloadClass, {columns})"
    if "pyspark.DataFrame" in mro:
        return f"wrap it in tempo.spark.sources.DataFrameSource(df, PayloadClass, {columns})"
    if isinstance(source, (str, bytes)) or "pathlib.PurePath" in mro:
        return f"for a file, use tempo.sources.ParquetSource(path, PayloadClass, {columns}) or CsvSource(...)"
    return None


def as_source(name: str, source: object, payload_type: type[Any] | None) -> Source[Any]:
    """``Stream.create``'s ``source`` as a ``Source``: a ``Source`` as it is, an iterable of
    items as an ``ItemSource``; a table or a path (which would iterate as columns or
    characters) is a ``QueryBuildError`` saying which source to wrap it in."""
    if isinstance(source, Source):
        return source
    hint = _table_hint(source)
    if hint is not None:
        raise QueryBuildError(f"input {name!r}: the source is a {type(source).__qualname__}, not a list of items: {hint}")
    if not callable(source) and not isinstance(source, Iterable):
        raise QueryBuildError(
            f"input {name!r}: the source must be a tempo.sources.Source or a list of items "
            f"(Point, Interval, EdgeStart, EdgeEnd, Cti), got {type(source).__qualname__}"
        )
    try:
        return ItemSource(source, payload_type)
    except QueryBuildError as exc:
        raise QueryBuildError(f"input {name!r}: {exc}") from None
