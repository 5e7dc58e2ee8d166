"""Reading table sources (Parquet, CSV, DataFrames) outside Spark, through pyarrow.

The in-memory executor reads a ``TableSource`` column by column: times become ticks
without building a datetime per row, and payloads are built with one constructor call
per row. Rows are taken in the source's ``order`` (a stable sort), else as stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from tempo.errors import InputError
from tempo.events import Cti, EdgeEnd, EdgeStart, EventShape, InputItem, Interval, Point
from tempo.expr.schema import record_fields
from tempo.ticks import INF, from_ticks

KINDS = {"point": 0, "interval": 1, "start": 2, "end": 3, "cti": 4}
"""Values of a ``kind`` column (case-insensitive) and the item kinds they stand for."""

_SHAPE_KIND = {EventShape.POINT: 0, EventShape.INTERVAL: 1}


def _require_pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("reading table sources outside Spark needs pyarrow: pip install pyarrow") from exc
    return pyarrow


def _ticks(table: Any, column: str, origin: int) -> list[int | None]:
    pa = _require_pyarrow()
    import pyarrow.compute as pc

    col = table.column(column)
    if pa.types.is_timestamp(col.type):
        col = pc.cast(pc.cast(col, pa.timestamp("us", tz="UTC")), pa.int64())
        return col.to_pylist()  # type: ignore[no-any-return]
    if pa.types.is_integer(col.type):
        values: list[int | None] = col.to_pylist()
        return values if origin == 0 else [None if v is None else v + origin for v in values]
    raise TypeError(f"time column {column!r} must be a timestamp or an integer count of microseconds, got {col.type}")


class Payloads:
    """The payloads of a table's rows in input order, built as the rows are read.

    Payloads that a query drops then die young; built all at once, millions of them would
    stay alive together, and every full garbage collection traverses all live objects. A
    constructor that may fail (validators, converters, hooks, a hand-written ``__init__``)
    still runs for every row at once, so that its errors come before any row is used.
    """

    def __init__(self, cls: type, columns: list[list[Any]], n: int) -> None:
        self.cls, self.columns, self.n = cls, columns, n
        self.built = None if _stores_only(cls) else list(self._build())

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


def _stores_only(cls: type) -> bool:
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


def read_columns(source: Any, table: Any, shape: EventShape) -> tuple[list[int], list[int], list[int], list[int] | None, Payloads]:
    """(kinds, starts, ends, arrivals, payloads) of the rows in input order, checked row by row."""
    if source.order is not None:
        import pyarrow.compute as pc

        table = table.take(pc.sort_indices(table, sort_keys=[(source.order, "ascending")]))
    n = table.num_rows
    origin = source.origin_ticks()
    starts = _ticks(table, source.start, origin)
    ends = _ticks(table, source.end, origin) if source.end else [None] * n
    arrivals = _ticks(table, source.arrival, origin) if source.arrival else None
    if source.kind is not None:
        kinds = []
        for i, k in enumerate(table.column(source.kind).to_pylist()):
            code = KINDS.get(str(k).lower())
            if code is None:
                raise InputError("table", i, k, f"kind must be one of {', '.join(KINDS)}, got {k!r}")
            kinds.append(code)
    elif shape in _SHAPE_KIND:
        kinds = [_SHAPE_KIND[shape]] * n
    else:
        raise InputError("table", 0, None, "an EDGE input from a table needs a `kind` column (start/end/cti)")
    fields = record_fields(source.payload_type)
    names = set(table.column_names)
    missing = [f.name for f in fields if f.name not in names]
    if missing:
        raise InputError("table", 0, None, f"no column for payload field(s) {', '.join(missing)} of {source.payload_type.__name__}")
    payloads = Payloads(source.payload_type, [table.column(f.name).to_pylist() for f in fields], n)
    # Rows of one shape without nulls all at once; otherwise row by row, to find the null.
    if source.kind is None and None not in starts and (shape is EventShape.POINT or None not in ends):
        same_shape = [s + 1 for s in starts] if shape is EventShape.POINT else ends  # type: ignore[operator]
        return kinds, starts, same_shape, arrivals, payloads  # type: ignore[return-value]
    ends_out: list[int] = []
    for i in range(n):
        s, e, k = starts[i], ends[i], kinds[i]
        if s is None:
            raise InputError("table", i, payloads[i], f"the start column {source.start!r} is null")
        if k == 0:
            ends_out.append(s + 1)
        elif k in (1, 3):
            if e is None:
                raise InputError("table", i, payloads[i], f"the end column {source.end!r} is null")
            ends_out.append(e)
        elif k == 2:
            ends_out.append(INF)
        else:
            ends_out.append(s)
    return kinds, starts, ends_out, arrivals, payloads  # type: ignore[return-value]


def items_from_arrow(source: Any, table: Any) -> Iterator[InputItem[Any]]:
    """The rows as input items (aware UTC datetimes)."""
    shape = EventShape.EDGE if source.kind is not None else EventShape.INTERVAL if source.end else EventShape.POINT
    kinds, starts, ends, arrivals, payloads = read_columns(source, table, shape)
    for i, (k, payload) in enumerate(zip(kinds, payloads)):
        arrival = None if arrivals is None or arrivals[i] is None else from_ticks(arrivals[i])
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
