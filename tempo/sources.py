"""Where an input's items come from.

A ``Source`` yields input items and may declare default ``AdvanceTimeSettings`` for the
shape it is bound with, as a StreamInsight adapter factory can; settings given to
``Stream.create`` override them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar

from tempo.errors import QueryBuildError
from tempo.events import Cti, EventShape, Heartbeat, InputItem
from tempo.settings import AdvanceTimeSettings

T = TypeVar("T")


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
            raise QueryBuildError(
                "cannot tell the payload type of an input with no events: pass payload_type="
            )
        self.payload_type = inferred

    def _infer_payload_type(self) -> type[T] | None:
        for item in self._items or ():
            if not isinstance(item, (Cti, Heartbeat)):
                return type(item.payload)
        return None

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
    ``arrival``) hold times: a timestamp column, or an integer count of microseconds since
    ``time_origin``. ``kind`` names a column saying what each row is (``"point"``,
    ``"interval"``, ``"start"``, ``"end"`` or ``"cti"``); without it every row is an event of
    the input's shape. ``order`` names the column that gives the input order (default: the
    arrival column if given, else the table's row order).
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
    ) -> None:
        self.payload_type = payload_type
        time_column = start if start is not None else arrival
        if time_column is None:
            raise QueryBuildError("a table source needs a start column, or an arrival column to take the time from")
        self.start: str = time_column
        self.end, self.kind, self.arrival = end, kind, arrival
        self.order = order if order is not None else arrival
        self.time_origin = time_origin
        self._settings = settings

    def advance_time_settings(self, shape: EventShape) -> AdvanceTimeSettings | None:
        return self._settings

    def origin_ticks(self) -> int:
        """``time_origin`` in ticks since the Unix epoch (integer time columns are offsets from it)."""
        from tempo.ticks import to_ticks

        return to_ticks(self.time_origin)

    def arrow_table(self) -> Any:
        """The rows as a pyarrow Table (used by the in-memory executor)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be read outside Spark")

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


class DataFrameSource(TableSource[T]):
    """Rows of a Spark DataFrame (the in-memory executor collects it through Arrow)."""

    def __init__(self, df: Any, payload_type: type[T], start: str | None, **columns: Any) -> None:
        super().__init__(payload_type, start, **columns)
        self.df = df

    def arrow_table(self) -> Any:
        return self.df.toArrow()

    def __repr__(self) -> str:
        return f"DataFrameSource({self.payload_type.__name__})"


class SparkTableSource(TableSource[T]):
    """Rows of a table in the Spark catalog."""

    def __init__(self, name: str, payload_type: type[T], start: str | None, **columns: Any) -> None:
        super().__init__(payload_type, start, **columns)
        self.name = name

    def __repr__(self) -> str:
        return f"SparkTableSource({self.name!r}, {self.payload_type.__name__})"
