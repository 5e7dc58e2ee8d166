"""What running a query returns, the same type from every executor."""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, Union

import attrs

from tempo.errors import QueryBuildError
from tempo.errors import Action as Action  # tempo.result.Action and Rule, defined beside InputRule (an InputError may carry a Rule)
from tempo.errors import Rule as Rule
from tempo.events import Cti, EdgeEnd, EdgeStart, Interval, Point, SubstreamCti
from tempo.expr.schema import FieldInfo, is_record_type, record_fields
from tempo.ticks import INFINITY as _INFINITY
from tempo.ticks import format_time

if TYPE_CHECKING:
    from tempo.api.stream import Stream
    from tempo.viz import Timeline

T = TypeVar("T")

START_COLUMN: Final = "tempo_start"
"""The column of an event's start in tempo's tables (``Result.to_arrow``,
``SparkExecutor.to_dataframe``, ``Result.rejections_table``)."""
END_COLUMN: Final = "tempo_end"
"""The column of an event's end (``tempo.INFINITY`` for a lifetime that never closed)."""
REJECTION_COLUMNS: Final = (
    "tempo_input",
    "tempo_position",
    "tempo_kind",
    "tempo_rule",
    "tempo_action",
    START_COLUMN,
    END_COLUMN,
    "tempo_arrival",
    "tempo_cti",
    "tempo_admitted_start",
    "tempo_admitted_end",
)
"""The columns ``Result.rejections_table`` puts before the payload's own."""
RESERVED_COLUMNS: Final = frozenset(REJECTION_COLUMNS)
"""Column names tempo's tables use for lifetimes and rejection details: no payload class
of a query may have a field of one of these names (a ``QueryBuildError`` when the query is
built), so a payload field never clashes with them."""


class UnreleasedResultsWarning(UserWarning):
    """A run ended with output events that no output CTI released (``Result.withheld``)."""


@attrs.frozen
class Withheld:
    """The output events a run admitted the inputs for but did not release: those the
    query would still release if every input's time advanced to infinity. No output CTI
    passed their start (nor, when the output keeps a substream key, their key's CTI)."""

    events: int
    """How many output events are withheld (at least one)."""
    waiting_for: datetime
    """The earliest start among them: an output CTI later than this time would release
    that event; a CTI at infinity releases them all."""

    def message(self, last_cti: datetime | None) -> str:
        """What ``UnreleasedResultsWarning`` says: how many, from when, and how to release
        them."""
        last = "no output CTI came" if last_cti is None else f"the last output CTI is {format_time(last_cti)}"
        if self.events == 1:
            what = f"1 output event was not released: no output CTI came after its start ({format_time(self.waiting_for)}"
        else:
            what = (
                f"{self.events} output events were not released: no output CTI came after their start (the "
                f"earliest starts at {format_time(self.waiting_for)}"
            )
        return (
            f"{what}; {last}). To release everything when the inputs end, "
            f"set advance_to_infinity_on_shutdown=True in the inputs' AdvanceTimeGenerationSettings, "
            f"or replay a bounded history with AdvanceTimeSettings.replay(). result.withheld counts them."
        )


def warn_withheld(result: Result[Any]) -> None:
    """Emit ``UnreleasedResultsWarning`` when ``result`` withheld output events; executors
    call this at the end of ``run``. The warning points at the first caller outside tempo."""
    if result.withheld is None:
        return
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    last = result.ctis[-1] if result.ctis else None
    warnings.warn(UnreleasedResultsWarning(result.withheld.message(last)), stacklevel=level)


@attrs.frozen(order=False)
class OutputEvent(Generic[T]):
    """One output event with its whole lifetime (output edges are coalesced)."""

    start: datetime
    end: datetime
    """``tempo.INFINITY`` (or naive ``datetime.max``) when the lifetime never closed."""
    payload: T


@attrs.frozen
class Rejection:
    """An input event that a violation policy dropped or adjusted."""

    input: str
    position: int
    """Index of the item within its input (CTIs count)."""
    item: Any
    """The item as it was received."""
    rule: Rule
    action: Action
    cti: datetime
    """The time the event was held against: the input's (or its substream's) CTI when the
    item arrived, or for the ordering rules arrival + early window / arrival − late
    tolerance."""
    admitted_as: Any = None
    """For an adjusted event, the item as admitted; None when dropped."""


@attrs.define
class EventCounts:
    """What happened to the events of one input, or of one substream of it.
    ``received == admitted + dropped``; each rejection is also counted under its rule."""

    received: int = 0
    """Event items read (points, intervals, start and end edges; not CTIs or heartbeats)."""
    admitted: int = 0
    """Event items that entered the query, adjusted or not."""
    adjusted: int = 0
    """Admitted after the ADJUST policy changed their lifetime."""
    dropped: int = 0
    """Not admitted (DROP policy, ADJUST of a lifetime wholly before the CTI, an early
    arrival, or an end edge whose start edge was dropped)."""
    early_dropped: int = 0
    """Events dropped for starting more than the early-arrival window after their arrival."""
    late_adjusted: int = 0
    """Events moved up to their arrival minus the late-arrival tolerance."""
    late_dropped: int = 0
    """Events dropped for starting more than the late-arrival tolerance before their arrival."""
    out_of_order_adjusted: int = 0
    """Events of an input with ordering settings moved up to the CTI (ASA's out-of-order
    adjustment). An event both late and out of order counts here and as late."""
    out_of_order_dropped: int = 0
    """Events of an input with ordering settings dropped for starting before the CTI."""


@attrs.define
class SubstreamMetrics(EventCounts):
    """What happened to the events of one substream (one key of ``over=``), and how its own
    time moved."""

    ctis_generated: int = 0
    """Times the key's CTI moved ahead of the input's, by the key's own events (its largest
    start less the out-of-order tolerance)."""
    watermark_delays: list[tuple[datetime, timedelta]] = attrs.Factory(list)
    """``(arrival clock, arrival clock - the key's CTI)`` each time the key's own events
    move its CTI ahead of the input's. Between those moves (and for a key without any) the
    key runs at the input's CTI, whose delays are ``InputMetrics.watermark_delays``."""


@attrs.define
class InputMetrics(EventCounts):
    """What happened at one input: its events' fate, its CTIs, and for inputs with
    ordering settings the watermark delay and the per-substream counts."""

    ctis_generated: int = 0
    """Generated CTIs that advanced the input's time (ordering settings generate too)."""
    ctis_imported: int = 0
    """Imported CTIs that advanced the input's time."""
    ctis_explicit: int = 0
    """Explicit ``Cti`` items that advanced the input's time."""
    ctis_ignored: int = 0
    """CTIs at or before the input's current CTI (CTIs never go back). Ordering settings
    move the CTI continuously and count only the moves, never an ignored CTI."""
    watermark_delays: list[tuple[datetime, timedelta]] = attrs.Factory(list)
    """Inputs with ordering settings: ``(arrival clock, arrival clock - CTI)`` each time
    either changes, before the flush at the end."""
    substreams: dict[Any, SubstreamMetrics] = attrs.Factory(dict)
    """Inputs with substreams (``over=``): each key's counts and its own CTI moves."""


RawItem = Union[Point[T], Interval[T], EdgeStart[T], EdgeEnd[T], Cti, SubstreamCti]


@attrs.frozen
class Result(Generic[T]):
    """The output of one run."""

    events: list[OutputEvent[T]]
    """Released output events in release order. An executor's ``run`` gives a list whose
    events are made when first read (``tempo.runtime.release.BuiltOnRead``)."""
    ctis: list[datetime]
    """The query's output CTIs in order."""
    metrics: dict[str, InputMetrics]
    """Per input name."""
    rejected: list[Rejection]
    """Every dropped or adjusted input event, with the rule that caught it."""
    raw: list[RawItem[T]]
    """Inserts, end edges and CTIs (and ``SubstreamCti``) interleaved as the query
    released them."""
    substream_ctis: dict[Any, list[datetime]] = attrs.Factory(dict)
    """When the output keeps a substream key (docs/semantics.md 3.10.4): each key's own
    output CTIs, those that moved it ahead of ``ctis``, in order."""
    withheld: Withheld | None = None
    """The output events admitted but not released, because no CTI passed their start:
    how many, and the earliest start among them. None when the run released everything
    (always so when the inputs end with a CTI at infinity, docs/semantics.md 3.5)."""
    payload_type: type | None = None
    """The output's payload class: the columns of ``to_arrow``."""
    input_types: dict[str, type] = attrs.Factory(dict)
    """Each input's payload class, by input name in declaration order: the payload columns
    of ``rejections_table``."""

    if not TYPE_CHECKING:  # at run time only: mypy keeps refusing attributes a Result lacks

        def __getattr__(self, name: str) -> Any:
            """A name a reader may guess from the docs' words ("rejections") is an
            ``AttributeError`` naming the attribute that holds them."""
            if name == "rejections":
                raise AttributeError(
                    "'Result' object has no attribute 'rejections': the dropped and adjusted input events are "
                    "result.rejected (a list of Rejection), or result.rejections_table() as a pyarrow table",
                    name=name,
                    obj=self,
                )
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}", name=name, obj=self)

    def payloads(self) -> list[T]:
        """The payloads of ``events``, in order."""
        return [e.payload for e in self.events]

    def to_arrow(self) -> Any:
        """``events`` as a pyarrow Table, one row per event in release order: ``tempo_start``
        and ``tempo_end`` (``timestamp[us, UTC]``; an end that never came is
        9999-12-31 23:59:59.999999), then one typed column per field of the payload class:
        ``bool``, ``int``, ``float``, ``str``, ``datetime``, ``timedelta`` and nested records
        become ``bool``, ``int64``, ``float64``, ``string``, ``timestamp[us, UTC]``,
        ``duration[us]`` and ``struct`` columns, nullable when annotated ``X | None`` (or
        when a value is None all the same). The schema comes from the annotations, so an
        empty result has it too; a field of another type gets the Arrow type of its values.
        Needs pyarrow."""
        import pyarrow as pa

        cls = self.payload_type
        if cls is None and self.events:
            cls = type(self.events[0].payload)
        fields = list(record_fields(cls)) if cls is not None and is_record_type(cls) else []
        payloads = [e.payload for e in self.events]
        columns: dict[str, Any] = {
            START_COLUMN: pa.array([e.start for e in self.events], _timestamp()),
            END_COLUMN: pa.array([e.end for e in self.events], _timestamp()),
        }
        schema = [pa.field(START_COLUMN, _timestamp(), nullable=False), pa.field(END_COLUMN, _timestamp(), nullable=False)]
        for f in fields:
            values = [getattr(pl, f.name) for pl in payloads]
            array = _column(cls, f, values)
            columns[f.name] = array
            schema.append(pa.field(f.name, array.type, nullable=f.nullable or array.null_count > 0))
        return pa.Table.from_arrays(list(columns.values()), schema=pa.schema(schema))

    def to_pandas(self) -> Any:
        """``to_arrow()`` as a pandas DataFrame: times as ``datetime64[us, UTC]``, durations
        as ``timedelta64[us]``, and an ``int`` or ``bool`` field annotated ``X | None`` as
        pandas' nullable ``Int64`` or ``boolean`` (so no integer turns into a float).
        Needs pandas."""
        return _to_pandas(self.to_arrow(), self._nullable_exact())

    def _nullable_exact(self) -> list[str]:
        cls = self.payload_type or (type(self.events[0].payload) if self.events else None)
        if cls is None or not is_record_type(cls):
            return []
        return [f.name for f in record_fields(cls) if f.nullable and f.dtype in (int, bool)]

    def rejections_table(self, input: str | None = None) -> Any:
        """``rejected`` as a pyarrow Table, one row per rejection, to keep wherever tables go
        (``pyarrow.parquet.write_table``, ``spark.createDataFrame``).

        Columns: ``tempo_input``, ``tempo_position`` (int64), ``tempo_kind`` (the item's
        class: ``Point``, ``Interval``, ``EdgeStart``, ``EdgeEnd``), ``tempo_rule`` and
        ``tempo_action`` (``Rule`` and ``Action`` values), the received ``tempo_start``,
        ``tempo_end`` (null for points and start edges) and ``tempo_arrival``, ``tempo_cti``
        (the time the event was held against), ``tempo_admitted_start`` and
        ``tempo_admitted_end`` (the adjusted item's; null when dropped), all times
        ``timestamp[us, UTC]``; then the payload's own fields, typed as in ``to_arrow``.
        ``input`` keeps one input's rejections; without it the payload columns are the
        fields of every input's payload class, by name (nullable where a class lacks one),
        and two inputs with a field of one name but different types must be asked for one
        at a time. The schema is the same when nothing was rejected. Needs pyarrow."""
        import pyarrow as pa

        types = dict(self.input_types)
        for j in self.rejected:  # a Result built by hand: the classes of its items
            types.setdefault(j.input, type(getattr(j.item, "payload", None)))
        if input is not None:
            if input not in types and input not in self.metrics:
                known = ", ".join(repr(n) for n in (types or self.metrics))
                raise QueryBuildError(f"rejections_table: the query has no input {input!r} (inputs: {known or 'none'})")
            types = {input: types[input]} if input in types else {}
        rejected = [j for j in self.rejected if input is None or j.input == input]
        fields, owner = _union_fields(types)
        ts, string = _timestamp(), pa.string()
        meta: list[tuple[str, Any, bool, list[Any]]] = [
            ("tempo_input", string, False, [j.input for j in rejected]),
            ("tempo_position", pa.int64(), False, [j.position for j in rejected]),
            ("tempo_kind", string, False, [type(j.item).__name__ for j in rejected]),
            ("tempo_rule", string, False, [_value(j.rule) for j in rejected]),
            ("tempo_action", string, False, [_value(j.action) for j in rejected]),
            (START_COLUMN, ts, False, [j.item.start for j in rejected]),
            (END_COLUMN, ts, True, [getattr(j.item, "end", None) for j in rejected]),
            ("tempo_arrival", ts, True, [j.item.arrival for j in rejected]),
            ("tempo_cti", ts, False, [j.cti for j in rejected]),
            ("tempo_admitted_start", ts, True, [getattr(j.admitted_as, "start", None) for j in rejected]),
            ("tempo_admitted_end", ts, True, [getattr(j.admitted_as, "end", None) for j in rejected]),
        ]
        arrays = [pa.array(values, tp) for _, tp, _, values in meta]
        schema = [pa.field(name, tp, nullable=nullable) for name, tp, nullable, _ in meta]
        for f in fields:
            values = [getattr(j.item.payload, f.name) if f.name in _field_names(type(j.item.payload)) else None for j in rejected]
            array = _column(owner[f.name], f, values)
            arrays.append(array)
            schema.append(pa.field(f.name, array.type, nullable=f.nullable or array.null_count > 0))
        return pa.Table.from_arrays(arrays, schema=pa.schema(schema))

    def plot(
        self,
        stream: Stream[T] | None = None,
        *,
        by_key: bool | Callable[[Any], object] = False,
        label: Callable[[Any], object] | None = None,
        inputs: bool = True,
        time_range: tuple[datetime, datetime] | None = None,
        limit: int = 1000,
        title: str | None = None,
        width: float = 11.0,
        path: str | os.PathLike[str] | None = None,
    ) -> Timeline:
        """A timeline picture of this run (``tempo.viz.plot``): with ``stream``, the query's
        output ``Stream``, each input's events, CTIs and rejections (replayed in memory) and
        this output; without it, this output and the rejected input events. Returns a
        ``tempo.viz.Timeline`` (shown inline in Jupyter; ``path=`` saves a .png or .svg).
        Needs matplotlib: ``pip install 'tempo-streams[plot]'``."""
        from tempo.viz import plot

        return plot(
            self if stream is None else stream,
            None if stream is None else self,
            by_key=by_key,
            label=label,
            inputs=inputs,
            time_range=time_range,
            limit=limit,
            title=title,
            width=width,
            path=path,
        )


# ---- tables -------------------------------------------------------------------------------


RELEASED_KINDS: Final = ("point", "interval", "start", "end", "cti", "substream_cti")
"""The values of ``tempo_kind`` in ``released_table``: which output item a row is."""
KEY_COLUMN: Final = "tempo_key"
"""The substream key of a ``substream_cti`` row of ``released_table`` (its ``repr``)."""


def released_table(items: Sequence[RawItem[Any]], payload_type: type) -> Any:
    """Output items in release order as a pyarrow Table (what a live query's sink writes):
    ``tempo_kind`` (``RELEASED_KINDS``), ``tempo_start`` and ``tempo_end`` (an end edge's
    end; 9999-12-31 23:59:59.999999 for a start edge, whose end is not known yet; null on
    CTI rows, whose time is ``tempo_start``), ``tempo_key`` (a substream CTI's key, as its
    repr), then the payload's fields typed as in ``Result.to_arrow``, all nullable (null on
    CTI rows)."""
    import pyarrow as pa

    kinds: list[str] = []
    starts: list[datetime] = []
    ends: list[datetime | None] = []
    keys: list[str | None] = []
    payloads: list[Any] = []
    for item in items:
        key = None
        if isinstance(item, Cti):
            kind, start, end, payload = "cti", item.timestamp, None, None
        elif isinstance(item, SubstreamCti):
            kind, start, end, payload, key = "substream_cti", item.timestamp, None, None, repr(item.key)
        elif isinstance(item, Point):
            kind, start, end, payload = "point", item.start, item.start + timedelta(microseconds=1), item.payload
        elif isinstance(item, Interval):
            kind, start, end, payload = "interval", item.start, item.end, item.payload
        elif isinstance(item, EdgeStart):
            kind, start, end, payload = "start", item.start, _INFINITY, item.payload
        else:
            assert isinstance(item, EdgeEnd)
            kind, start, end, payload = "end", item.start, item.end, item.payload
        kinds.append(kind)
        starts.append(start)
        ends.append(end)
        keys.append(key)
        payloads.append(payload)
    columns = [pa.array(kinds, pa.string()), pa.array(starts, _timestamp()), pa.array(ends, _timestamp()), pa.array(keys, pa.string())]
    schema = [
        pa.field("tempo_kind", pa.string(), nullable=False),
        pa.field(START_COLUMN, _timestamp(), nullable=False),
        pa.field(END_COLUMN, _timestamp()),
        pa.field(KEY_COLUMN, pa.string()),
    ]
    for f in record_fields(payload_type) if is_record_type(payload_type) else []:
        array = _column(payload_type, f, [None if pl is None else getattr(pl, f.name) for pl in payloads])
        if arrow_type(f.dtype, f.element) is None and array.type == pa.null():
            array = pa.array([None] * len(payloads), pa.string())
        columns.append(array)
        schema.append(pa.field(f.name, array.type))
    return pa.Table.from_arrays(columns, schema=pa.schema(schema))


def _timestamp() -> Any:
    import pyarrow as pa

    return pa.timestamp("us", tz="UTC")


def _value(member: Any) -> str:
    return str(getattr(member, "value", member))


def _field_names(cls: type) -> set[str]:
    return {f.name for f in record_fields(cls)} if is_record_type(cls) else set()


def arrow_type(tp: type, element: type | None = None) -> Any:
    """The Arrow type of a payload field type (``element``: a list field's element type,
    ``FieldInfo.element``), or None when it has none of its own (the values' type is used
    then)."""
    import pyarrow as pa

    scalars = {
        bool: pa.bool_(),
        int: pa.int64(),
        float: pa.float64(),
        str: pa.string(),
        datetime: _timestamp(),
        timedelta: pa.duration("us"),
    }
    if tp in scalars:
        return scalars[tp]
    if tp in (list, tuple) and element is not None:
        # A list field's type must not depend on its values: a batch of a live query with no
        # event, or only empty lists, writes the same column type as the others.
        inner = arrow_type(element)
        return None if inner is None else pa.list_(inner)
    if is_record_type(tp):
        nested = []
        for f in record_fields(tp):
            inner = arrow_type(f.dtype, f.element)
            if inner is None:
                return None
            nested.append(pa.field(f.name, inner))
        return pa.struct(nested)
    return None


def _plain(value: Any) -> Any:
    """A field value as pyarrow takes it: records as dicts of their fields."""
    if is_record_type(type(value)):
        return {f.name: _plain(getattr(value, f.name)) for f in record_fields(type(value))}
    return value


def _column(cls: type | None, f: FieldInfo, values: list[Any]) -> Any:
    """One payload field's values as an Arrow array of the field's type; a value that does
    not fit the annotation is a ``QueryBuildError`` naming the class, field and row."""
    import pyarrow as pa

    tp = arrow_type(f.dtype, f.element)
    plain = [_plain(v) for v in values]
    owner = cls.__qualname__ if cls is not None else "the payload"
    try:
        return pa.array(plain, tp) if tp is not None else pa.array(plain)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        declared = getattr(f.dtype, "__qualname__", repr(f.dtype))
        for row, value in enumerate(plain):
            try:
                pa.array([value], tp) if tp is not None else pa.array([value])
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                raise QueryBuildError(
                    f"{owner}.{f.name} is annotated {declared}, but row {row} holds {values[row]!r} "
                    f"({type(values[row]).__name__}), which has no place in a {tp or 'column'} column"
                ) from exc
        raise QueryBuildError(f"{owner}.{f.name} (annotated {declared}) has no Arrow column type: {exc}") from exc


def _union_fields(types: dict[str, type]) -> tuple[list[FieldInfo], dict[str, type]]:
    """The payload fields of several inputs' classes, by name in declaration order: nullable
    where annotated so or missing from one of the classes; with the class that first
    declares each. Fields of one name and different types are a ``QueryBuildError``."""
    fields: dict[str, FieldInfo] = {}
    owner: dict[str, type] = {}
    named: dict[str, str] = {}
    classes = [(name, cls) for name, cls in types.items() if is_record_type(cls)]
    for name, cls in classes:
        for f in record_fields(cls):
            seen = fields.get(f.name)
            if seen is None:
                fields[f.name], owner[f.name], named[f.name] = f, cls, name
            elif seen.dtype is not f.dtype and arrow_type(seen.dtype, seen.element) != arrow_type(f.dtype, f.element):
                raise QueryBuildError(
                    f"rejections_table: inputs {named[f.name]!r} and {name!r} both have a payload field "
                    f"{f.name!r}, of types {seen.dtype.__qualname__} and {f.dtype.__qualname__}: ask for "
                    f"one input's table at a time (rejections_table(input=...))"
                )
            elif f.nullable and not seen.nullable:
                fields[f.name] = FieldInfo(f.name, seen.dtype, True)
    for fname, f in list(fields.items()):
        if not f.nullable and any(fname not in _field_names(cls) for _, cls in classes):
            fields[fname] = FieldInfo(fname, f.dtype, True)
    return list(fields.values()), owner


def _to_pandas(table: Any, exact: Iterable[str]) -> Any:
    """A pyarrow table as a pandas DataFrame, the columns ``exact`` (int or bool with
    nulls) as pandas' nullable types."""
    import importlib

    try:
        pd: Any = importlib.import_module("pandas")  # untyped without pandas-stubs
    except ImportError as exc:
        raise ImportError("Result.to_pandas needs pandas: pip install pandas (or use to_arrow())") from exc
    import pyarrow as pa

    frame = table.to_pandas()
    nullable = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
    for name in exact:
        frame[name] = table.column(name).to_pandas(types_mapper=nullable.get)
    return frame
