"""W1-W7 as tempo queries, shared by the tempo-spark and tempo-memory engines.

Written against the table-source contract (``tempo.sources.ParquetSource``; until it exists,
importing this module raises ImportError and run.py reports both engines "not available").
The bench data times are int64 microseconds since 2024-01-01T00:00:00Z, so every source gets
``time_origin=ORIGIN``; events are in arrival order ``seq``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import attrs

from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventShape,
    Stream,
)
from tempo.sources import ParquetSource  # ImportError until the table sources land: run.py reports it

ORIGIN = datetime(2024, 1, 1, tzinfo=timezone.utc)
ORIGIN_US = 1_704_067_200 * 1_000_000
"""ORIGIN in microseconds since the Unix epoch (tempo's ticks)."""


@attrs.frozen
class Event:
    key: int
    value: float


@attrs.frozen
class Ref:
    key: int
    ref_value: float


@attrs.frozen
class Tumble:
    key: int
    n: int
    total: float


@attrs.frozen
class Hop:
    key: int
    total: float


@attrs.frozen
class Match:
    product: float


@attrs.frozen
class Enriched:
    value: float
    product: float


@attrs.frozen
class Session:
    key: int
    n: int
    total: float
    start: datetime
    end: datetime


@attrs.frozen
class Chunk:
    key: int
    n: int
    total: float
    start: datetime
    end: datetime


W1_SETTINGS = AdvanceTimeSettings(
    AdvanceTimeGenerationSettings(frequency=1000, delay=timedelta(seconds=5)),
    policy=AdvanceTimePolicy.DROP,
)
"""W1: a CTI after every 1000th event at its start - 5 s; late events dropped."""

FLUSHED = AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True))
"""W2-W7 ("all events, flush at the end"): a bounded replay, no CTI before the input ends,
then one at infinity that releases everything. Nothing can be late, so every event is
admitted and tempo has no ingress work to do."""

EVERY_1000 = AdvanceTimeSettings(
    AdvanceTimeGenerationSettings(frequency=1000, delay=timedelta(seconds=120), advance_to_infinity_on_shutdown=True),
    policy=AdvanceTimePolicy.DROP,
)
"""W2-W7 with ``--ctis every-1000``: a CTI after every 1000th event, 120 s behind it. No
event is later than that, so nothing is dropped and the results are the same, but tempo
must prove it: one pass in input order per input (see docs/spark.md)."""

REF_EVERY_1000 = AdvanceTimeSettings(
    AdvanceTimeGenerationSettings(frequency=1000, delay=timedelta(0), advance_to_infinity_on_shutdown=True),
    policy=AdvanceTimePolicy.DROP,
)
"""W4 and W7 reference with ``--ctis every-1000``: 1000 rows (one per key) per 600 s batch, in
valid_from order, so a CTI at the batch's valid_from never drops anything."""


REF_IMPORTED = AdvanceTimeSettings(import_=AdvanceTimeImportSettings("events"), policy=AdvanceTimePolicy.DROP)
"""W4 reference with ``--ctis import``: the events' CTIs, imported (WORKLOADS.md: "its CTIs
imported from the events stream"). A reference row arrives at its valid_from, at least 120 s
after every imported CTI, so it is never late."""


CTIS = "end"
"""How W2-W7's inputs advance time: "end" (``FLUSHED``), "every-1000" (``EVERY_1000``), or
"import" (``EVERY_1000`` over events that carry their arrival column, and W4's reference
importing their CTIs: ``REF_IMPORTED``); set by ``run.py --ctis``."""


def _settings(reference: bool = False) -> AdvanceTimeSettings:
    if CTIS == "import":
        return REF_IMPORTED if reference else EVERY_1000
    if CTIS == "every-1000":
        return REF_EVERY_1000 if reference else EVERY_1000
    return FLUSHED


def _events_source(path: str) -> ParquetSource[Event]:
    arrival = {"arrival": "arrival_time"} if CTIS == "import" else {}
    return ParquetSource(path, payload_type=Event, start="event_time", order="seq", time_origin=ORIGIN, time_unit="us", **arrival)


def _reference_source(path: str) -> ParquetSource[Ref]:
    # The file's row order is the arrival order (valid_from, key); valid_to = 2**62 marks the
    # last row of each key, valid for ever.
    arrival = {"arrival": "arrival_time"} if CTIS == "import" else {}
    return ParquetSource(path, payload_type=Ref, start="valid_from", end="valid_to", time_origin=ORIGIN, time_unit="us", **arrival)


def w1(events: str) -> Stream[Event]:
    """W1: the events input alone; the result is its metrics (admitted, dropped)."""
    return Stream.create("events", _events_source(events), EventShape.POINT, W1_SETTINGS)


def events_input(events: str) -> Stream[Event]:
    """The events input of W2-W7 over the Parquet file or directory ``events``."""
    return Stream.create("events", _events_source(events), EventShape.POINT, _settings())


def tumbling_counts(events: Stream[Event]) -> Stream[Tumble]:
    """W2's work over any stream of events: count and sum(value) per key and tumbling 60 s
    window (``bench/streaming.py`` gives it a Kafka topic's events too)."""
    return (
        events.group_by(lambda e: e.key)
        .tumbling(timedelta(seconds=60))
        .aggregate(lambda key, w: Tumble(key=key, n=w.count(), total=w.sum(lambda e: e.value)))
    )


def w2(events: str) -> Stream[Tumble]:
    """W2: count and sum(value) per key and tumbling 60 s window."""
    return tumbling_counts(events_input(events))


def w3(events: str) -> Stream[Hop]:
    """W3: sum(value) per key and hopping window of 300 s every 60 s."""
    return (
        Stream.create("events", _events_source(events), EventShape.POINT, _settings())
        .group_by(lambda e: e.key)
        .hopping(timedelta(seconds=300), timedelta(seconds=60))
        .aggregate(lambda key, w: Hop(key=key, total=w.sum(lambda e: e.value)))
    )


def w4(events: str, reference: str) -> Stream[Match]:
    """W4: events joined on key with the reference intervals [valid_from, valid_to)."""
    ev = Stream.create("events", _events_source(events), EventShape.POINT, _settings())
    ref = Stream.create("reference", _reference_source(reference), EventShape.INTERVAL, _settings(reference=True))
    return ev.join(ref, on=lambda e, r: e.key == r.key, select=lambda e, r: Match(product=e.value * r.ref_value))


SESSION_GAP = timedelta(seconds=5)
COUNT_WINDOW = 100


def tumbling_counts_again(windows: Stream[Tumble]) -> Stream[Tumble]:
    """W2's windows through a second tumbling 60 s window per key adding up their counts and
    sums: the same windows again, released at the same CTIs."""
    return (
        windows.group_by(lambda t: t.key)
        .tumbling(timedelta(seconds=60))
        .aggregate(lambda key, w: Tumble(key=key, n=w.sum(lambda t: t.n), total=w.sum(lambda t: t.total)))
    )


def w2_hop(events: str) -> Stream[Tumble]:
    """W2, then each window through a second tumbling 60 s window per key adding up its count
    and sum: W2's windows again, released at the same CTIs, computed by two windows in
    sequence (on the live cluster engine two keyed nodes, the second the first's next hop:
    docs/streaming.md, "Keyed nodes in sequence")."""
    return tumbling_counts_again(w2(events))


def w5(events: str) -> Stream[Session]:
    """W5: per key, sessions with a 5 s gap (no max duration): count, sum(value), the
    session's bounds [first event, last event + gap). Results are points at the session's
    last tick (the default)."""
    return sessions(events_input(events))


def sessions(events: Stream[Event]) -> Stream[Session]:
    """W5's work over any stream of events: per key, sessions with a 5 s gap."""
    return (
        events.group_by(lambda e: e.key)
        .session(SESSION_GAP)
        .aggregate(lambda key, w: Session(key=key, n=w.count(), total=w.sum(lambda e: e.value), start=w.start, end=w.end))
    )


def w6(events: str) -> Stream[Chunk]:
    """W6: per key, tumbling count windows of 100 events in order of (event_time, key, value)
    (the Event fields), full windows only: count, sum(value), the window's bounds
    [first start, last start + 1 µs). Results are points at the latest start (the default)."""
    return (
        Stream.create("events", _events_source(events), EventShape.POINT, _settings())
        .group_by(lambda e: e.key)
        .count_window(COUNT_WINDOW)
        .aggregate(lambda key, w: Chunk(key=key, n=w.count(), total=w.sum(lambda e: e.value), start=w.start, end=w.end))
    )


HOLD = timedelta(hours=1)
"""W7: how long a reading holds at most (when no later reading of its key clips it). Longer
than any gap between a key's readings in the shared data (108 s at most), so only each key's
last reading keeps it."""


def w7(events: str, reference: str) -> Stream[Enriched]:
    """W7, a signal enriched with the reference: each key's readings are a signal, a reading's
    value holding from its time until the key's next later reading (readings at the same time
    do not clip each other), for at most ``HOLD``; each piece of the signal joined on key with
    the reference rows its lifetime overlaps, the output lasting the overlap."""
    signal = (
        Stream.create("events", _events_source(events), EventShape.POINT, _settings())
        .alter_event_duration(HOLD)
        .group_by(lambda e: e.key)
        .clip_event_duration()
    )
    ref = Stream.create("reference", _reference_source(reference), EventShape.INTERVAL, _settings(reference=True))
    return signal.join(ref, on=lambda e, r: e.key == r.key, select=lambda e, r: Enriched(value=e.value, product=e.value * r.ref_value))
