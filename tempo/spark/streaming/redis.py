"""Redis Streams as a live input: a streaming Spark source over one stream key, and the
producer helper that writes entries the way the source reads them.

Each entry of the stream is one row: its fields hold the payload's fields, the start (and
end, kind) times the user names, by the encoding ``add_event`` writes (see ``encode_value``).
Two columns come from the entry ID ``<ms>-<seq>``: ``ORDER_COLUMN`` (the input order) and
``ARRIVAL_COLUMN`` (the broker's enqueue time). docs/streaming.md, "Redis Streams source",
says what the columns mean and why replays are exact (while entries are not trimmed).

The source is a PySpark Python data source (``DataSource`` named ``SOURCE_NAME``): Spark runs
its offset planning in a Python process of the driver and its ``read`` in Python workers,
which connect to the broker themselves (the URL travels in the options). ``redis`` (the
``streaming`` extra) is imported only where a connection is made, so importing this module
needs only pyspark.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark.sql import SparkSession
from pyspark.sql import types as st
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from tempo.errors import InputError, InputRule, QueryBuildError, UnsupportedError
from tempo.expr.schema import is_record_type, record_fields
from tempo.settings import AdvanceTimeSettings
from tempo.expr.nodes import marked_fields
from tempo.spark.columns import worker_errors
from tempo.spark.sources import DataFrameSource
from tempo.spark.types import spark_type
from tempo.tables import KINDS
from tempo.ticks import duration_ticks, from_ticks, to_ticks

if TYPE_CHECKING:
    from redis import Redis

T = TypeVar("T")

SOURCE_NAME = "tempo_redis"
"""The name the source is registered under (``spark.readStream.format(SOURCE_NAME)``)."""

ORDER_COLUMN = "redis_order"
"""The input order of a row: its entry ID ``<ms>-<seq>`` as the long ``ms * 2**22 + 2 * seq + 1``,
which orders rows exactly as Redis orders the entries; a heartbeat row at the broker's clock
``ms`` has ``ms * 2**22``: after every entry of an earlier millisecond, before every entry of
its own (see ``heartbeat_order``)."""

KIND_COLUMN = "redis_kind"
"""The kind column of a source created without ``kind=``: ``point`` (or ``interval`` when
``end=`` is given) for each entry, ``heartbeat`` for the source's heartbeat rows."""

ARRIVAL_COLUMN = "redis_arrival"
"""The arrival time of a row: the milliseconds of its entry ID, as a timestamp. For IDs the
broker generates (``XADD key * ...``) that is the broker's clock when it enqueued the entry."""

SEQ_BITS = 22
"""Bits of ``ORDER_COLUMN`` below the milliseconds: an ID's sequence number and one bit that
puts entries after the heartbeat of their millisecond. Up to 2,097,151 entries per
millisecond, and milliseconds up to 2**41 (September 2039) fit a long."""

INITIAL_ID = "0-0"
"""The position before every entry: a new query reads the stream from its first entry."""

PAGE_ENTRIES = 1000
"""Entries fetched per XRANGE call when a worker reads a micro-batch."""

_ID = re.compile(r"([0-9]+)-([0-9]+)")
_INTEGER = re.compile(r"-?[0-9]+")
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_TRUE, _FALSE = "true", "false"
_DATETIME = "datetime"
_SCALAR_NAMES: dict[type, str] = {bool: "bool", int: "int", float: "float", str: "str", datetime: _DATETIME}
_ERROR_MARKER = "[tempo redis entry]"


class RedisEntryError(InputError):
    """An entry of a Redis stream that the source cannot read as a row of its input: a field
    that does not parse as its declared type, a missing required field, an entry ID outside
    what ``ORDER_COLUMN`` holds. Names the stream, the entry ID, the field and the rule
    (``rule``: ``STREAM_ENTRY``, or ``NULL_FIELD``, ``NULL_START``, ``UNKNOWN_KIND`` for a
    missing payload field, start or kind, and an unknown kind), its words in ``message``.

    Raised in a Spark worker; ``raising_redis_errors`` raises it again on the driver."""

    def __init__(self, stream_key: str, entry_id: str, field: str, message: str, rule: InputRule = InputRule.STREAM_ENTRY) -> None:
        super().__init__(f"redis stream {stream_key!r}", -1, entry_id, message, rule)
        self._rule = rule
        self.stream_key = stream_key
        self.entry_id = entry_id
        self.field = field
        self.args = (str(self),)

    def __str__(self) -> str:
        where = f", field {self.field!r}" if self.field else ""
        return f"redis stream {self.stream_key!r}, entry {self.entry_id}{where}: {self.message}"

    def __reduce__(self) -> tuple[type[RedisEntryError], tuple[str, str, str, str, InputRule]]:  # type: ignore[override]
        return (RedisEntryError, (self.stream_key, self.entry_id, self.field, self.message, self._rule))

    def for_driver(self) -> ValueError:
        """The error as a worker raises it: its message, then its fields as JSON between two
        markers, which ``redis_entry_error`` finds in the text of the Spark failure."""
        fields = json.dumps([self.stream_key, self.entry_id, self.field, self.message, int(self._rule)])
        return ValueError(f"{self} {_ERROR_MARKER}{fields}{_ERROR_MARKER}")


class RedisEventError(InputError):
    """An event ``add_event`` refuses to write: a payload field value not of its declared
    type, None in a field not declared Optional. Names the stream, the event and the rule
    (``rule``: ``PAYLOAD_TYPE``, ``NULL_FIELD`` or ``FIELD_TYPE``)."""

    def __init__(self, stream_key: str, event: object, message: str, rule: InputRule) -> None:
        super().__init__(f"redis stream {stream_key!r}", -1, event, message, rule)
        self._rule = rule
        self.stream_key = stream_key
        self.args = (str(self),)

    def __str__(self) -> str:
        return f"redis stream {self.stream_key!r}, event {self.item!r}: {self.message}"

    def __reduce__(self) -> tuple[type[RedisEventError], tuple[str, object, str, InputRule]]:  # type: ignore[override]
        return (RedisEventError, (self.stream_key, self.item, self.message, self._rule))


def redis_entry_error(exc: BaseException) -> RedisEntryError | None:
    """The ``RedisEntryError`` a worker raised, if ``exc`` (a Spark failure: a job's error or
    a ``StreamingQueryException``) carries one."""
    fields = marked_fields(exc, _ERROR_MARKER, 5)
    if fields is None:
        return None
    stream_key, entry_id, field, words, rule = fields
    return RedisEntryError(stream_key, entry_id, field, words, InputRule(int(rule)))


def raising_redis_errors() -> contextlib.AbstractContextManager[None]:
    """Raise a bad entry met by a Spark job or streaming query inside as the
    ``RedisEntryError`` it is (rather than as Spark's error wrapping the worker's traceback)."""
    return worker_errors(redis_entry_error)


# --- the encoding of entries -------------------------------------------------------------


def _value_type(dtype: type, field: str, owner: str) -> str:
    """The name of a field's scalar type, as the layout carries it to the workers."""
    if dtype in _SCALAR_NAMES:
        return _SCALAR_NAMES[dtype]
    what = f"the field {field!r} of {owner} (a {getattr(dtype, '__qualname__', dtype)})"
    raise UnsupportedError("Spark", what, "the Redis Streams source reads only bool, int, float, str and datetime fields")


def encode_value(value: Any, value_type: str) -> str | None:
    """A field value as the text of an entry field (None: the field is left out).

    ``int`` as a decimal integer; ``float`` as Python's shortest round-tripping ``repr``
    (``nan``, ``inf`` included); ``bool`` as ``true`` / ``false``; ``str`` as it is (UTF-8);
    ``datetime`` as the decimal count of microseconds since 1970-01-01 UTC (tempo's ticks; a
    naive datetime is UTC). Returns the reason as a ``ValueError`` when ``value`` is not of
    the type (the caller names the field)."""
    if value is None:
        return None
    if value_type == "bool" and isinstance(value, bool):
        return _TRUE if value else _FALSE
    if value_type == "int" and isinstance(value, int) and not isinstance(value, bool):
        if not _LONG_MIN <= value <= _LONG_MAX:
            raise ValueError(f"{value} does not fit a 64-bit integer")
        return str(value)
    if value_type == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    if value_type == "str" and isinstance(value, str):
        return value
    if value_type == _DATETIME and isinstance(value, datetime):
        return str(to_ticks(value))
    raise ValueError(f"{value!r} (a {type(value).__name__}) is not a {value_type}")


def decode_value(text: bytes, value_type: str) -> Any:
    """The value of an entry field's bytes, the inverse of ``encode_value`` (a timestamp
    comes back as an aware UTC datetime). Raises ``ValueError`` saying the rule broken."""
    try:
        s = text.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{text!r} is not UTF-8 text") from None
    if value_type == "str":
        return s
    if value_type == "bool":
        if s in (_TRUE, _FALSE):
            return s == _TRUE
        raise ValueError(f"{s!r} is not a bool: write true or false")
    if value_type in ("int", _DATETIME):
        if not _INTEGER.fullmatch(s) or len(s) > 20 or not _LONG_MIN <= int(s) <= _LONG_MAX:
            unit = (
                "a 64-bit decimal integer"
                if value_type == "int"
                else "a datetime: write the decimal count of microseconds since 1970-01-01 UTC"
            )
            raise ValueError(f"{s!r} is not {unit}")
        if value_type == "int":
            return int(s)
        try:
            return from_ticks(int(s))
        except OverflowError:
            raise ValueError(f"{s!r} microseconds since 1970-01-01 UTC is outside the datetimes Python has") from None
    if value_type == "float":
        try:
            if s != s.strip() or "_" in s:
                raise ValueError
            return float(s)
        except ValueError:
            raise ValueError(f"{s!r} is not a float: write a decimal number (Python's repr of the float)") from None
    raise ValueError(f"the field type {value_type!r} is not one the source reads")


def order_of(entry_id: str) -> tuple[int, int]:
    """An entry ID's ``(ORDER_COLUMN value, milliseconds)``. Raises ``ValueError`` with the
    rule when the ID is not ``<ms>-<seq>`` or does not fit the order column."""
    match = _ID.fullmatch(entry_id)
    if match is None:
        raise ValueError(f"the entry ID {entry_id!r} is not <milliseconds>-<sequence>")
    ms, seq = int(match.group(1)), int(match.group(2))
    if seq >= 2 ** (SEQ_BITS - 1):
        raise ValueError(
            f"the sequence number {seq} of the ID needs more than {SEQ_BITS - 1} bits, which {ORDER_COLUMN} gives it (ms * 2**{SEQ_BITS} + 2 * seq + 1)"
        )
    if ms >= 2 ** (63 - SEQ_BITS):
        raise ValueError(f"the milliseconds {ms} of the ID are 2**{63 - SEQ_BITS} or more, beyond what {ORDER_COLUMN} holds in a long")
    return ms * 2**SEQ_BITS + 2 * seq + 1, ms


def heartbeat_order(clock_ms: int) -> int:
    """The ``ORDER_COLUMN`` value of a heartbeat row at the broker's clock ``clock_ms``: above
    every entry ID of an earlier millisecond, below every ID of ``clock_ms`` itself, which
    the broker may still give an entry appended after the clock was read."""
    return clock_ms << SEQ_BITS


class Layout:
    """Which entry fields make a row, with their types: what the driver sends the workers
    (as JSON in the source's options) so that they decode entries without the payload class.

    ``fields``: (name, type name, nullable) per payload field; ``start``, ``end``, ``kind``:
    the names of the time and kind fields (``end`` and ``kind`` may be None)."""

    def __init__(self, fields: Sequence[tuple[str, str, bool]], start: str, end: str | None, kind: str | None) -> None:
        self.fields = [(str(n), str(t), bool(nullable)) for n, t, nullable in fields]
        self.start, self.end, self.kind = start, end, kind

    @classmethod
    def of(cls, payload_type: type, start: str, end: str | None, kind: str | None) -> Layout:
        """The layout of a payload class with the user's start/end/kind field names, refusing
        names that collide (``QueryBuildError``) and field types the source cannot read."""
        if not is_record_type(payload_type):
            raise QueryBuildError(f"payload type {payload_type!r} is not a record: payloads must be attrs classes or dataclasses")
        owner = payload_type.__qualname__
        fields = [(f.name, _value_type(f.dtype, f.name, owner), f.nullable) for f in record_fields(payload_type)]
        names = [n for n, _, _ in fields]
        for arg, name in (("start", start), ("end", end), ("kind", kind)):
            if name is None:
                continue
            if not isinstance(name, str) or not name:
                raise QueryBuildError(f"{arg}= names the entry field holding the {arg}: a non-empty str, got {name!r}")
            if name in names:
                raise QueryBuildError(
                    f"{arg}={name!r} names an entry field that is already taken (by a field of {owner} or another argument): give each its own name"
                )
            names.append(name)
        for reserved in (ORDER_COLUMN, ARRIVAL_COLUMN, KIND_COLUMN):
            if reserved in names:
                raise QueryBuildError(
                    f"{reserved!r} is a column the Redis Streams source fills itself (from the entry ID, or the kind of its rows): rename the field or argument that takes it"
                )
        return cls(fields, start, end, kind)

    @property
    def kind_column(self) -> str:
        """The rows' kind column: the kind field's name, else ``KIND_COLUMN``."""
        return KIND_COLUMN if self.kind is None else self.kind

    def to_json(self) -> str:
        return json.dumps({"fields": self.fields, "start": self.start, "end": self.end, "kind": self.kind})

    @classmethod
    def from_json(cls, text: str) -> Layout:
        d = json.loads(text)
        return cls([tuple(f) for f in d["fields"]], d["start"], d["end"], d["kind"])

    def schema(self) -> st.StructType:
        """The rows' Spark schema: payload fields, start, end, kind (always: heartbeat rows
        need it), order, arrival."""
        types = {n: t for t, n in _SCALAR_NAMES.items()}
        columns = [st.StructField(n, spark_type(types[t]), True) for n, t, _ in self.fields]
        columns.append(st.StructField(self.start, st.TimestampType(), True))
        if self.end is not None:
            columns.append(st.StructField(self.end, st.TimestampType(), True))
        columns.append(st.StructField(self.kind_column, st.StringType(), True))
        columns.append(st.StructField(ORDER_COLUMN, st.LongType(), False))
        columns.append(st.StructField(ARRIVAL_COLUMN, st.TimestampType(), False))
        return st.StructType(columns)

    def decode(self, stream_key: str, entry_id: str, entry: Mapping[bytes, bytes]) -> tuple[Any, ...]:
        """One entry as a row of ``schema()``; a ``RedisEntryError`` when it breaks a rule.
        Fields the layout does not name are ignored (producers may add their own)."""

        def value(name: str, value_type: str, missing: str | None, rule: InputRule = InputRule.STREAM_ENTRY) -> Any:
            """The field's value; ``missing``: why an entry without it breaks ``rule`` (None:
            it may be left out, and reads as null)."""
            text = entry.get(name.encode("utf-8"))
            if text is None:
                if missing is not None:
                    raise RedisEntryError(stream_key, entry_id, name, f"the field is missing: {missing}", rule)
                return None
            try:
                return decode_value(text, value_type)
            except ValueError as exc:
                raise RedisEntryError(stream_key, entry_id, name, str(exc)) from None

        if self.kind is None:
            kind = "point" if self.end is None else "interval"
        else:
            kind = value(self.kind, "str", "the source reads each entry's kind from it", InputRule.UNKNOWN_KIND)
            if kind.lower() not in KINDS:
                raise RedisEntryError(
                    stream_key,
                    entry_id,
                    self.kind,
                    f"{kind!r} is no kind: write point, interval, start, end, cti or heartbeat",
                    InputRule.UNKNOWN_KIND,
                )
        no_payload = kind.lower() in ("cti", "heartbeat")  # a heartbeat is its entry's arrival alone
        required = "the payload field is not Optional"
        row = [value(n, t, None if nullable or no_payload else required, InputRule.NULL_FIELD) for n, t, nullable in self.fields]
        row.append(
            value(self.start, _DATETIME, None if kind.lower() == "heartbeat" else "every entry needs its start time", InputRule.NULL_START)
        )
        if self.end is not None:
            row.append(value(self.end, _DATETIME, None))
        row.append(kind)
        try:
            order, ms = order_of(entry_id)
        except ValueError as exc:
            raise RedisEntryError(stream_key, entry_id, "", str(exc)) from None
        row.append(order)
        row.append(from_ticks(ms * 1000))
        return tuple(row)

    def heartbeat_row(self, clock_ms: int) -> tuple[Any, ...]:
        """The heartbeat row of a batch whose end offset read the broker's clock at
        ``clock_ms``: kind ``heartbeat``, arrival (and start) the clock, no payload."""
        at = from_ticks(clock_ms * 1000)
        row: list[Any] = [None] * len(self.fields) + [at]
        if self.end is not None:
            row.append(None)
        return (*row, "heartbeat", heartbeat_order(clock_ms), at)


def add_event(
    client: Redis,
    stream_key: str,
    payload: Any,
    *,
    start: datetime,
    end: datetime | None = None,
    kind: str | None = None,
    start_field: str = "start",
    end_field: str = "end",
    kind_field: str = "kind",
) -> str:
    """Append one event (or, with ``kind="cti"`` and ``payload=None``, a CTI) to a Redis
    stream as an entry the source reads back exactly, and return the entry ID the broker
    gave it (``XADD stream_key * ...``: its milliseconds are the broker's clock).

    The payload's fields, ``start`` and ``end`` are written by ``encode_value``; a None field is left out (read back as null); ``end`` and ``kind``
    are left out when None. The field names of start, end and kind must be those the source
    is created with (``redis_source(start=..., end=..., kind=...)``). A value that is not of
    its field's type, or None in a field not declared Optional, is a ``RedisEventError``
    (and nothing is written)."""
    if payload is not None and not is_record_type(type(payload)):
        raise RedisEventError(
            stream_key,
            payload,
            f"a payload must be an attrs class or dataclass instance, got a {type(payload).__qualname__}",
            InputRule.PAYLOAD_TYPE,
        )
    if payload is None:
        layout = Layout([], start_field, end_field, kind_field)
    else:
        layout = Layout.of(type(payload), start_field, end_field, kind_field)
    values = [(n, getattr(payload, n), t, nullable or kind == "cti") for n, t, nullable in layout.fields]
    values += [(start_field, start, _DATETIME, False), (end_field, end, _DATETIME, True), (kind_field, kind, "str", True)]
    fields: dict[str, str] = {}
    for name, v, value_type, nullable in values:
        if v is None and not nullable:
            raise RedisEventError(stream_key, payload, f"field {name!r} is None, and it is not Optional", InputRule.NULL_FIELD)
        try:
            text = encode_value(v, value_type)
        except ValueError as exc:
            raise RedisEventError(stream_key, payload, f"field {name!r}: {exc}", InputRule.FIELD_TYPE) from None
        if text is not None:
            fields[name] = text
    entry_id = client.xadd(stream_key, dict[Any, Any](fields))  # redis-py types its dict invariantly
    return entry_id.decode("ascii") if isinstance(entry_id, bytes) else str(entry_id)


# --- the Spark data source ---------------------------------------------------------------


def _connect(url: str) -> Any:
    try:
        import redis
    except ImportError as exc:
        raise UnsupportedError(
            "Spark", "the Redis Streams source", f"the `redis` package is not installed (the `streaming` extra): {exc}"
        ) from None
    return redis.Redis.from_url(url)


def _id_text(entry_id: Any) -> str:
    return entry_id.decode("ascii") if isinstance(entry_id, bytes) else str(entry_id)


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class RedisRange(InputPartition):
    """The entries of one micro-batch: IDs after ``after`` up to ``last``, both included
    in no other batch, then a heartbeat row at ``heartbeat_ms`` when not None. One partition
    per batch, so that the rows stay in ID order."""

    def __init__(self, after: str, last: str, heartbeat_ms: int | None) -> None:
        self.after = after
        self.last = last
        self.heartbeat_ms = heartbeat_ms


def batch_heartbeat(start: Mapping[str, Any], end: Mapping[str, Any]) -> int | None:
    """The broker clock of the heartbeat row a batch from offset ``start`` to ``end`` ends
    with, or None: when ``end`` read the clock with the stream read to its last entry
    (``at_end``), and the clock is past that entry's millisecond and past the previous
    offset's clock. Every entry appended later then gets an ID at or after the clock, so
    the row's arrival and order (``heartbeat_order``) come before every later entry's;
    and both grow from batch to batch."""
    clock = int(end["clock_ms"])
    if end.get("at_end") and clock > _id_key(end["id"])[0] and clock > int(start["clock_ms"]):
        return clock
    return None


try:  # PySpark 4.2 and later: a source may bound an available-now run itself
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNowBase  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - PySpark 4.0 and 4.1
    _AvailableNowBase = object  # type: ignore[assignment,misc,unused-ignore]


class RedisStreamReader(DataSourceStreamReader, _AvailableNowBase):  # type: ignore[misc,valid-type,unused-ignore]
    """Offsets are ``{"id": <the last entry ID of the batch>, "clock_ms": <the broker's
    clock (TIME) when the offset was planned>, "at_end": <id was the stream's last entry
    then>}``; a batch reads ``XRANGE (start.id end.id``, then gives the heartbeat row of
    ``batch_heartbeat``, if any.

    Spark logs each batch's end offset before running it, and a replay reads the same IDs
    again: the rows are the same as long as no entry in the range was trimmed or deleted."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.url = options["url"]
        self.stream_key = options["stream_key"]
        self.layout = Layout.from_json(options["layout"])
        cap = options.get("max_entries_per_batch")
        self.max_entries = int(cap) if cap else None
        heartbeat = options.get("heartbeat_ms")
        self.heartbeat_ms = int(heartbeat) if heartbeat else None
        self._client: Any = None
        # The last offset planned or committed: where the next batch starts (PySpark before
        # 4.2 gives latestOffset no start) and the clock an idle stream's next heartbeat counts from.
        self._last: dict[str, Any] = self.initialOffset()
        self._target: str | None = None
        """In a ``trigger(availableNow=True)`` run on PySpark 4.2+: the stream's last entry
        when the run started, past which no batch reads."""

    def prepareForTriggerAvailableNow(self) -> None:
        """Called by PySpark 4.2+ when an available-now run starts: its batches read the
        entries there now, capped batch by batch, and then the run ends."""
        newest = self._broker().xrevrange(self.stream_key, "+", "-", count=1)
        self._target = _id_text(newest[0][0]) if newest else INITIAL_ID

    def _broker(self) -> Any:
        if self._client is None:
            self._client = _connect(self.url)
        return self._client

    def initialOffset(self) -> dict[str, Any]:
        # A fixed clock: the start of batch 0 must be the same when it is replayed.
        return {"id": INITIAL_ID, "clock_ms": 0}

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        """The end of the next batch: the stream's last entry, or the ``max_entries_per_batch``-th
        after the start. Without new entries the offset stays as it was (no empty batch),
        unless a heartbeat interval has passed on the broker's clock. (PySpark 4.2 and later pass the
        batch's ``start`` and a read ``limit``, always ``ReadAllAvailable`` here: the cap is
        this source's own; 4.0 and 4.1 pass neither.)"""
        broker = self._broker()
        after = (start or self._last)["id"]
        # The clock and the entries in one transaction: no entry is appended between them,
        # so every later entry gets an ID at or after the clock's millisecond.
        # An available-now run reads up to its target only, and is at the end of the stream
        # only when nothing was appended after the target.
        bound = "+" if self._target is None else self._target
        transaction = broker.pipeline(transaction=True)
        transaction.time()
        if self.max_entries is None:
            transaction.xrevrange(self.stream_key, bound, "-", count=1)
        else:
            transaction.xrange(self.stream_key, f"({after}", bound, count=self.max_entries + 1)
        transaction.xrevrange(self.stream_key, "+", "-", count=1)
        (seconds, micros), entries, newest = transaction.execute()
        clock_ms = int(seconds) * 1000 + int(micros) // 1000
        entries = entries[: self.max_entries][-1:]
        last = _id_text(entries[-1][0]) if entries else after
        at_end = not newest or _id_key(_id_text(newest[0][0])) <= _id_key(last)
        if _id_key(last) <= _id_key(after):
            idle_ms = clock_ms - int(self._last["clock_ms"])
            if self.heartbeat_ms is None or idle_ms < self.heartbeat_ms or self._target is not None:
                return self._last  # (an available-now run ends when nothing is left: no heartbeats)
            last = after
        self._last = {"id": last, "clock_ms": clock_ms, "at_end": at_end}
        return self._last

    def _seen(self, offset: dict[str, Any]) -> None:
        """Move the next batch's start (and heartbeat clock) to ``offset`` when it is later:
        Spark tells where the query stands only through ``partitions`` and ``commit``."""
        if (_id_key(offset["id"]), offset["clock_ms"]) > (_id_key(self._last["id"]), self._last["clock_ms"]):
            self._last = dict(offset)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        # A restarted query calls this with (last logged offset, same) before latestOffset.
        self._seen(end)
        heartbeat = batch_heartbeat(start, end)
        if _id_key(end["id"]) <= _id_key(start["id"]) and heartbeat is None:
            return []
        return [RedisRange(start["id"], end["id"], heartbeat)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, RedisRange)
        broker = _connect(self.url)
        try:
            after = partition.after
            while _id_key(after) < _id_key(partition.last):
                page = broker.xrange(self.stream_key, f"({after}", partition.last, count=PAGE_ENTRIES)
                for raw_id, entry in page:
                    try:
                        row = self.layout.decode(self.stream_key, _id_text(raw_id), entry)
                    except RedisEntryError as exc:
                        raise exc.for_driver() from None
                    yield row
                if len(page) < PAGE_ENTRIES:
                    break
                after = _id_text(page[-1][0])
        finally:
            broker.close()
        if partition.heartbeat_ms is not None:
            yield self.layout.heartbeat_row(partition.heartbeat_ms)

    def commit(self, end: dict[str, Any]) -> None:
        # Nothing is trimmed: other queries and consumers may read the same stream, and how
        # long entries are kept is the producer's policy (XADD MAXLEN, XTRIM).
        self._seen(end)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class RedisSource(DataFrameSource[T]):
    """The live input ``redis_source`` makes: a ``DataFrameSource`` over the stream whose
    heartbeat rows (``batch_heartbeat``) are the source's own, not entries of the stream. Its
    positions (of rejections and errors) count the stream's entries read, from 0, as a file
    input's count its rows: the heartbeat rows take none, so an entry's position is the same
    whatever the batches and the heartbeats between them."""

    @staticmethod
    def added_heartbeat(order: int) -> bool:
        """Whether a heartbeat row of this ``ORDER_COLUMN`` value is one the source added (even:
        ``heartbeat_order``) rather than a heartbeat entry a producer wrote (odd, as every entry)."""
        return order % 2 == 0


class RedisStreamDataSource(DataSource):
    """The ``tempo_redis`` streaming source; its options are written by ``redis_source``:
    ``url``, ``stream_key``, ``layout`` (``Layout`` as JSON), optionally
    ``max_entries_per_batch`` and ``heartbeat_ms``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> st.StructType:
        return Layout.from_json(self.options["layout"]).schema()

    def streamReader(self, schema: st.StructType) -> DataSourceStreamReader:
        return RedisStreamReader(self.options)


def redis_source(
    spark: SparkSession,
    stream_key: str,
    payload_type: type[T],
    *,
    start: str = "start",
    end: str | None = None,
    kind: str | None = None,
    url: str = "redis://127.0.0.1:6379/0",
    max_entries_per_batch: int | None = None,
    heartbeat: timedelta | None = None,
    settings: AdvanceTimeSettings | None = None,
) -> DataFrameSource[T]:
    """A live input reading the Redis stream ``stream_key`` at ``url`` from its first entry.

    Each entry is a row: the fields of ``payload_type`` and the entry fields ``start`` (and
    ``end``, ``kind``: as ``TableSource`` takes them) decoded as ``add_event`` encodes them,
    ``ORDER_COLUMN`` (the order) and ``ARRIVAL_COLUMN`` (the arrival time) from the entry ID.
    Without ``kind``, the kind column is ``KIND_COLUMN``: entries are points, or intervals
    when ``end`` is given. A batch that read the stream to its end at a broker clock past its
    last entry ends with a heartbeat row at that clock (``batch_heartbeat``): the input has
    reached that arrival, which lets the other inputs of a live query through its frontier.
    ``max_entries_per_batch`` caps the entries of one micro-batch (None: all there are); a
    ``trigger(availableNow=True)`` run reads what is there when it starts, batch by batch, on
    PySpark 4.2+; on 4.0 and 4.1 Spark asks for the latest offset only once in such a run, so
    with a cap it stops after one batch: use ``processAllAvailable()`` there.
    ``heartbeat``: when set, an idle stream still gets a new offset carrying the broker's
    clock once that much broker time has passed (for the executor to advance its frontier);
    None: a batch only when entries arrive. Registers the source on ``spark`` (once)."""
    if not isinstance(stream_key, str) or not stream_key:
        raise QueryBuildError(f"stream_key names a Redis stream: a non-empty str, got {stream_key!r}")
    if max_entries_per_batch is not None and (
        isinstance(max_entries_per_batch, bool) or not isinstance(max_entries_per_batch, int) or max_entries_per_batch < 1
    ):
        raise QueryBuildError(f"max_entries_per_batch must be a positive int or None, got {max_entries_per_batch!r}")
    if heartbeat is not None and (not isinstance(heartbeat, timedelta) or heartbeat < timedelta(milliseconds=1)):
        raise QueryBuildError(f"heartbeat must be a timedelta of at least 1 ms or None, got {heartbeat!r}")
    layout = Layout.of(payload_type, start, end, kind)
    spark.dataSource.register(RedisStreamDataSource)  # registering again replaces it with itself
    reader = spark.readStream.format(SOURCE_NAME).option("url", url).option("stream_key", stream_key).option("layout", layout.to_json())
    if max_entries_per_batch is not None:
        reader = reader.option("max_entries_per_batch", str(max_entries_per_batch))
    if heartbeat is not None:
        reader = reader.option("heartbeat_ms", str(duration_ticks(heartbeat) // 1000))
    df = reader.load()
    return RedisSource(
        df, payload_type, start=start, end=end, kind=layout.kind_column, order=ORDER_COLUMN, arrival=ARRIVAL_COLUMN, settings=settings
    )
