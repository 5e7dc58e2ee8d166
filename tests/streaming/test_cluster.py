"""The cluster engine (``engine="cluster"``, tempo/spark/streaming/cluster.py): the driver
decides time, the window runs per key in ``transformWithState`` on Spark's executors, against
the in-memory executor.

test_bulk.py's queries and rows, cut into random files: after every file the committed
output must be the in-memory executor's release for the rows so far, item for item and in
release order, but for the order of one window's groups among themselves, which the
semantics leave open (docs/semantics.md 5.7): both sides' results of one window and one
releasing CTI are compared as a set. After the flush, the whole run's, with the rejections
and the input's metrics.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pytest

import tempo
from tempo import InMemoryExecutor
from tempo.events import Cti, EdgeEnd, SubstreamCti
from tempo.plan.nodes import JoinNode
from tempo.sources import ParquetSource
from tempo import (
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    ArrivalClock,
    EventOrderingSettings,
    EventShape,
    IngestionTime,
    ProcessingTime,
    Stream,
    WindowTimestamp,
)
from tests.budget import thorough
from tests.streaming.test_bulk import CASES, Case, Overall, Reading, _by_device, _join_of_two, in_lockstep

pytestmark = pytest.mark.spark


def _skip_without_tws() -> None:
    from pyspark.sql import GroupedData

    if not hasattr(GroupedData, "transformWithState"):
        pytest.skip("the cluster engine needs transformWithState over rows: pyspark 4.1 or later")


def groups_as_sets(items: list[Any]) -> list[Any]:
    """``items`` with each run of events of one start between two CTIs (or substream CTIs),
    and each run of end edges, in a fixed order (by repr): the order of a window's groups is
    not specified (docs/semantics.md 5.7)."""
    out: list[Any] = []
    run: list[Any] = []

    def flush() -> None:
        out.extend(sorted(run, key=repr))
        run.clear()

    def place(item: Any) -> tuple[Any, ...]:
        return ("end",) if isinstance(item, EdgeEnd) else ("start", item.start)

    for item in items:
        if run and (isinstance(item, (Cti, SubstreamCti)) or place(item) != place(run[0])):
            flush()
        if isinstance(item, (Cti, SubstreamCti)):
            out.append(item)
        else:
            run.append(item)
    flush()
    return out


@attrs.frozen
class Session:
    device: int
    n: int
    total: float | None
    high: float | None


def _per_device(k: int, w: tempo.Window[Reading]) -> Session:
    """What every window of these cases computes per device."""
    return Session(device=k, n=w.count(), total=w.sum(lambda r: r.value), high=w.max(lambda r: r.value))


def _sessions(s: Stream[Reading]) -> Stream[Session]:
    return (
        s.where(lambda r: r.site != "b")
        .group_by(lambda r: r.device)
        .session(timedelta(seconds=7), max_duration=timedelta(seconds=30))
        .aggregate(_per_device)
    )


def _uncut_sessions(s: Stream[Reading]) -> Stream[Session]:
    """Sessions without a max_duration: a planned batch's events reach the executors as runs."""
    return s.group_by(lambda r: r.device).session(timedelta(seconds=4)).aggregate(_per_device)


def _sessions_then_count(s: Stream[Reading]) -> Stream[Any]:
    """Sessions without a cut, then a count of them per 20 s (the sessions' next hop)."""
    return (
        s.shift_event_time(timedelta(seconds=2))
        .group_by(lambda r: r.device)
        .session(timedelta(seconds=5))
        .aggregate(_per_device)
        .tumbling(timedelta(seconds=20))
        .aggregate(lambda w: Overall(n=w.count(), high=w.max(lambda r: r.total)))
    )


def _count_windows(s: Stream[Reading]) -> Stream[Session]:
    return s.group_by(lambda r: r.device).count_window(3, slide=2).aggregate(_per_device)


def _fine_windows(s: Stream[Reading]) -> Stream[Session]:
    """Tumbling 450 ms windows over intervals of 1, 5 and 30 s: the events of 30 s span 67
    windows, more than a window adds up front (``Window.EAGER_WINDOWS``), and reach the
    executors as events, the others as each window's partial aggregates."""
    return s.group_by(lambda r: r.device).tumbling(timedelta(milliseconds=450)).aggregate(_per_device)


def _hopping_at_starts(s: Stream[Reading]) -> Stream[Session]:
    """Hopping windows per device stamped at their start: the keys compute with the windows'
    lifetimes, the driver stamps each result."""
    return (
        s.group_by(lambda r: r.device)
        .hopping(timedelta(seconds=12), timedelta(seconds=4))
        .aggregate(_per_device, timestamp=WindowTimestamp.START)
    )


def _hopping_at_latest_events(s: Stream[Reading]) -> Stream[Session]:
    """Hopping windows per device stamped at their latest event: each result carries its
    window's end beside the stamp, from which the driver finds the CTI that released it."""
    return (
        s.group_by(lambda r: r.device)
        .hopping(timedelta(seconds=12), timedelta(seconds=4))
        .aggregate(_per_device, timestamp=WindowTimestamp.LATEST)
    )


def _sessions_at_ctis(s: Stream[Reading]) -> Stream[Session]:
    """Sessions stamped at the CTI releasing them, which a key without rows does not hear:
    the driver stamps each result with the first CTI at or after its session's end."""
    return (
        s.group_by(lambda r: r.device)
        .session(timedelta(seconds=4), max_duration=timedelta(seconds=20))
        .aggregate(_per_device, timestamp=WindowTimestamp.CTI)
    )


def _count_windows_at_ctis(s: Stream[Reading]) -> Stream[Session]:
    return s.group_by(lambda r: r.device).count_window(2).aggregate(_per_device, timestamp=WindowTimestamp.CTI)


def _snapshots(s: Stream[Reading]) -> Stream[Session]:
    """Snapshot windows per device: start edges, each ended by a key once a CTI passes its
    window's end, which the driver matches to the edge it gave out."""
    return s.where(lambda r: r.site != "a").group_by(lambda r: r.device).snapshot().aggregate(_per_device)


def _snapshots_at_ends(s: Stream[Reading]) -> Stream[Session]:
    """Snapshot windows per device stamped at their last tick, then a count of them per 20 s,
    their next hop (the snapshot window's output CTI is a tick behind its input's)."""
    return (
        s.group_by(lambda r: r.device)
        .snapshot()
        .aggregate(_per_device, timestamp=WindowTimestamp.END)
        .tumbling(timedelta(seconds=20))
        .aggregate(lambda w: Overall(n=w.count(), high=w.max(lambda r: r.total)))
    )


def _clipped(s: Stream[Reading]) -> Stream[Reading]:
    """Each device's readings clipped at its next reading: start edges ended by their keys once
    a CTI passes the clipped end, or intervals when a key knew the end when it gave them out
    but the CTIs between did not (the driver splits them)."""
    return s.where(lambda r: r.site != "b").group_by(lambda r: r.device).clip_event_duration()


def _clipped_then_window(s: Stream[Reading]) -> Stream[Overall]:
    """All readings clipped at the next (one key), then hopping windows over them (the clip's next hop)."""
    return (
        s.clip_event_duration()
        .hopping(timedelta(seconds=12), timedelta(seconds=4))
        .aggregate(lambda w: Overall(n=w.count(), high=w.max(lambda r: r.value)))
    )


@attrs.frozen
class Trend:
    site: str | None
    device: int
    value: float | None
    previous: float | None
    total: float | None
    n: int


def _trend(k: str | None, r: Reading, a: tempo.Analytics[Reading]) -> Trend:
    return Trend(k, r.device, r.value, a.previous(lambda r: r.value, timedelta(seconds=9)), a.sum(lambda r: r.value), a.count())


def _analytic(s: Stream[Reading]) -> Stream[Trend]:
    """Per site, the previous value within 9 s and running aggregates: each site's history
    in its key's state on the executors, each event out once a CTI passes its start. Events
    of one start go out by payload (the device first), not by site: the driver orders the
    keys' results so."""
    return s.group_by(lambda r: r.site).analytic(_trend)


def _analytic_then_window(s: Stream[Reading]) -> Stream[Overall]:
    """Analytics of edges (outputs open until their event's end), then (its next hop) a
    window over them."""
    return (
        s.where(lambda r: r.device != 2)
        .group_by(lambda r: r.site)
        .analytic(_trend)
        .tumbling(timedelta(seconds=15))
        .aggregate(lambda w: Overall(n=w.count(), high=w.max(lambda t: t.total)))
    )


def _in_time_order(s: Stream[Reading]) -> Stream[Reading]:
    """All events in order of start and payload (one key), passed on unchanged."""
    return s.order_by_time().where(lambda r: r.device != 1)


def _stateless(s: Stream[Reading]) -> Stream[Reading]:
    """No stateful operator: the cluster engine holds the output's waiting events by key
    (``ReleaseNode``), spread by event id."""
    return (
        s.where(lambda r: r.device != 2)
        .select(lambda r: Reading(device=r.device * 10, value=r.value, site=r.site))
        .shift_event_time(timedelta(seconds=1))
    )


def _self_join(s: Stream[Reading]) -> Stream[Reading]:
    """A stream joined with itself, no stateful operator above: the driver runs the inputs item
    by item (a stream two operators read), the join runs by device on the executors."""
    return s.join(
        s.alter_event_duration(timedelta(seconds=5)),
        lambda a, b: a.device == b.device,
        lambda a, b: Reading(device=a.device, value=b.value, site=a.site),
    )


def _union_with_itself(s: Stream[Reading]) -> Stream[Session]:
    """A stream and a shifted copy of it into sessions per device."""
    return _sessions(s.union(s.where(lambda r: r.device == 1).shift_event_time(timedelta(seconds=1))))


def _uncovered(s: Stream[Reading]) -> Stream[Reading]:
    """The stretches of each reading during which no reading of device 1 of its site, moved
    2 s later and made 4 s long, is alive: the anti-join runs keyed by site on the executors,
    the driver ending its open fragments where the right input's CTI does."""
    return s.anti_join(
        s.where(lambda r: r.device == 1).shift_event_time(timedelta(seconds=2)).alter_event_duration(timedelta(seconds=4)),
        lambda a, b: a.site == b.site,
    )


def _uncovered_sessions(s: Stream[Reading]) -> Stream[Session]:
    """Sessions per device over ``_uncovered``'s fragments: the anti-join runs keyed by site,
    the sessions are its next hop; an end the driver's timeline decides (the right input's
    CTI) reaches the session's key by its fragment's id, through the anti-join's work query."""
    return _sessions(_uncovered(s))


def _window_beside(s: Stream[Reading]) -> Stream[Reading]:
    """Each reading with a count of its device's readings in its 10 s window: the stream goes
    around the window into the join, the window's next hop (``_around_chain``): both keyed on
    the executors, what reaches the join around the window recorded by the time query."""
    return _by_device(s).join(s, lambda a, b: a.device == b.device, lambda a, b: Reading(device=b.device, value=a.mean, site=b.site))


def _followed(s: Stream[Reading]) -> Stream[Reading]:
    """A reading of device 0 followed within 6 s by one of device 1 of its site: a point at
    the second, its value the first's (the pattern keyed by site on the executors)."""
    return s.where(lambda r: r.device == 0).followed_by(
        s.where(lambda r: r.device == 1),
        lambda a, b: a.site == b.site,
        timedelta(seconds=6),
        lambda a, b: Reading(device=b.device, value=a.value, site=a.site),
    )


OWN_CASES = [  # sessions, count windows, and windows whose events reach the executors both ways
    Case("sessions, count, drop, cut", 4, 5, AdvanceTimePolicy.DROP, EventShape.POINT, True, _sessions),
    Case(
        "sessions, period, adjust, intervals, then a window",
        timedelta(seconds=8),
        1,
        AdvanceTimePolicy.ADJUST,
        EventShape.INTERVAL,
        False,
        _sessions_then_count,
    ),
    Case("count windows, count, adjust", 3, 4, AdvanceTimePolicy.ADJUST, EventShape.INTERVAL, True, _count_windows),
    Case(
        "ordering settings, adjust: item by item on the driver",
        4,
        1,
        AdvanceTimePolicy.ADJUST,
        EventShape.POINT,
        False,
        _sessions,
        EventOrderingSettings(timedelta(seconds=3), timedelta(seconds=20)),
    ),
    Case("sessions without a cut, count, drop, intervals: runs", 3, 2, AdvanceTimePolicy.DROP, EventShape.INTERVAL, True, _uncut_sessions),
    Case(
        "tumbling 450 ms over intervals, the long ones as events",
        timedelta(seconds=8),
        1,
        AdvanceTimePolicy.DROP,
        EventShape.INTERVAL,
        False,
        _fine_windows,
    ),
    Case(
        "hopping stamped at window starts, period, adjust, intervals",
        timedelta(seconds=6),
        2,
        AdvanceTimePolicy.ADJUST,
        EventShape.INTERVAL,
        True,
        _hopping_at_starts,
    ),
    Case(
        "hopping stamped at latest events, count, drop, intervals",
        4,
        2,
        AdvanceTimePolicy.DROP,
        EventShape.INTERVAL,
        True,
        _hopping_at_latest_events,
    ),
    Case("sessions stamped at releasing CTIs, count, drop", 3, 1, AdvanceTimePolicy.DROP, EventShape.POINT, True, _sessions_at_ctis),
    Case(
        "count windows stamped at releasing CTIs, period, drop",
        timedelta(seconds=5),
        0,
        AdvanceTimePolicy.DROP,
        EventShape.POINT,
        False,
        _count_windows_at_ctis,
    ),
    # Edges: each end goes to the key its start went to, through a where that passes ends by id.
    Case("edges, count, drop: tumbling", 4, 5, AdvanceTimePolicy.DROP, EventShape.EDGE, True, _by_device),
    Case("edges, period, adjust: sessions", timedelta(seconds=8), 1, AdvanceTimePolicy.ADJUST, EventShape.EDGE, False, _sessions),
    # Stamped as read: the driver stamps each item with its arrival (or the arrival clock's
    # reading) as it runs the batch item by item, and the stage holds the stamped events.
    Case(
        "ingestion time, a CTI every 5 s, intervals: sessions",
        0,
        0,
        AdvanceTimePolicy.DROP,
        EventShape.INTERVAL,
        False,
        _sessions,
        time=IngestionTime(cti_every=timedelta(seconds=5)),
    ),
    Case(
        "processing time on an arrival clock, edges: tumbling",
        0,
        0,
        AdvanceTimePolicy.DROP,
        EventShape.EDGE,
        False,
        _by_device,
        time=ProcessingTime(ArrivalClock(timedelta(seconds=3))),
    ),
    # Analytics: the same shapes, the analytic in the window's place; results in its exact order.
    Case("analytic per site, count, drop", 4, 5, AdvanceTimePolicy.DROP, EventShape.POINT, True, _analytic),
    Case(
        "analytic of edges, period, adjust, then a window",
        timedelta(seconds=6),
        1,
        AdvanceTimePolicy.ADJUST,
        EventShape.EDGE,
        False,
        _analytic_then_window,
    ),
    Case("order by time, count, adjust, intervals", 3, 2, AdvanceTimePolicy.ADJUST, EventShape.INTERVAL, True, _in_time_order),
    Case("analytic of edges, count, drop", 5, 3, AdvanceTimePolicy.DROP, EventShape.EDGE, True, _analytic),
    # Snapshots: start edges ended later by their keys; points at the windows' last ticks.
    Case("snapshots of edges, count, drop", 4, 2, AdvanceTimePolicy.DROP, EventShape.EDGE, True, _snapshots),
    Case(
        "snapshots at ends, period, adjust, intervals, then a window",
        timedelta(seconds=6),
        1,
        AdvanceTimePolicy.ADJUST,
        EventShape.INTERVAL,
        False,
        _snapshots_at_ends,
    ),
    # Clip: start edges ended later by their keys, or split by the driver.
    Case("clip per device, count, drop, intervals", 4, 3, AdvanceTimePolicy.DROP, EventShape.INTERVAL, True, _clipped),
    Case(
        "clip of edges, period, adjust, then a window",
        timedelta(seconds=5),
        1,
        AdvanceTimePolicy.ADJUST,
        EventShape.EDGE,
        False,
        _clipped_then_window,
    ),
    # No stateful operator: the output's release, by event id over the buckets.
    Case("no window, count, drop, intervals", 4, 3, AdvanceTimePolicy.DROP, EventShape.INTERVAL, True, _stateless),
    Case("no window, edges, period, adjust", timedelta(seconds=5), 1, AdvanceTimePolicy.ADJUST, EventShape.EDGE, False, _stateless),
    # A stream two operators read: item by item on the driver below the keyed node.
    Case("a self-join, no window, count, drop", 3, 2, AdvanceTimePolicy.DROP, EventShape.POINT, True, _self_join),
    Case(
        "a union of a stream with itself, period, adjust: sessions",
        timedelta(seconds=6),
        1,
        AdvanceTimePolicy.ADJUST,
        EventShape.POINT,
        False,
        _union_with_itself,
    ),
    # Anti-joins and patterns: keyed by their join key, or item by item on the driver below a window.
    Case("an anti-join, no window, count, drop, intervals", 4, 2, AdvanceTimePolicy.DROP, EventShape.INTERVAL, True, _uncovered),
    Case(
        "an anti-join of edges, period, adjust: sessions",
        timedelta(seconds=6),
        1,
        AdvanceTimePolicy.ADJUST,
        EventShape.EDGE,
        False,
        _uncovered_sessions,
    ),
    Case("a pattern, no window, count, adjust", 3, 1, AdvanceTimePolicy.ADJUST, EventShape.POINT, True, _followed),
    # No node with a keyed form that every input reaches: the whole plan on the driver, below the release.
    Case("a window beside its own input, count, drop, intervals", 4, 2, AdvanceTimePolicy.DROP, EventShape.INTERVAL, True, _window_beside),
]
EXACT_ORDER = {
    c.name
    for c in OWN_CASES
    if c.query in (_analytic, _analytic_then_window, _in_time_order, _stateless, _self_join, _uncovered, _followed)
}
"""Cases whose output order is specified whole (an analytic's: by start, payload and arrival
over all groups; the output's: by start and arrival), compared item for item. (Not a join
of a keyed window's results, ``_window_beside``: the pairs of one start follow the order of
the window's groups at their CTI, which the semantics leave open.)"""
SLOW_CASES = {
    "count, drop",
    "sessions stamped at releasing CTIs, count, drop",
    "count, adjust, cti rows",
    "period, drop, intervals",
    "period, adjust, intervals, cti rows",
    "count, drop, windows in sequence",
    "sessions, period, adjust, intervals, then a window",
    "ordering settings, adjust: item by item on the driver",
    "count windows stamped at releasing CTIs, period, drop",
    "edges, period, adjust: sessions",
    "processing time on an arrival clock, edges: tumbling",
    "sessions, count, drop, cut",
    "order by time, count, adjust, intervals",
    "analytic of edges, period, adjust, then a window",
    "snapshots at ends, period, adjust, intervals, then a window",
    "clip of edges, period, adjust, then a window",
    "edges, count, drop: tumbling",
    "analytic of edges, count, drop",
    "count windows, count, adjust",
    "tumbling 450 ms over intervals, the long ones as events",
    "no window, count, drop, intervals",
    "a union of a stream with itself, period, adjust: sessions",
    "hopping stamped at latest events, count, drop, intervals",
    "an anti-join, no window, count, drop, intervals",
    "a pattern, no window, count, adjust",
    "a self-join, no window, count, drop",
}
"""Run with ``--run-slow`` (which also cuts each case's rows into more files): the default
suite runs one case of hopping windows (stamped at window starts), one of sessions
without a cut (runs), one of an input in ingestion time into sessions with a cut, one of an
analytic, one of snapshots of edges through a where (the path of an end to its event's key),
one of clip, one of a query without a stateful operator (edges, item by item: the
release's keys), one of sessions over an anti-join of edges (its fragments' ends reaching
their keys), one of a window beside its own input (all on the driver below the release;
``test_cluster_random.py`` draws the other shapes); count windows, edges into windows and events spanning many windows are slow: the keyed operators' property
tests cover count windows, and the hand timelines below an end reaching its event's key and
an analytic's ends across a restart; ``test_two_inputs_reach_the_window_item_by_item_on_the_driver`` runs
batches item by item)."""


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=pytest.mark.slow) if c.name in SLOW_CASES else c for c in CASES + OWN_CASES],
    ids=[c.name for c in CASES + OWN_CASES],
)
def test_the_cluster_engine_gives_the_in_memory_release_after_every_file(spark_session: Any, tmp_path: Path, case: Case) -> None:
    from tempo.spark.streaming import StreamingExecutor

    _skip_without_tws()
    executor = StreamingExecutor(spark_session, str(tmp_path / "ck"), engine="cluster")
    files = 4 if thorough() else 2  # each file costs a time batch and two work micro-batches
    live = in_lockstep(
        tmp_path, case, (CASES + OWN_CASES).index(case), files, executor.start, list if case.name in EXACT_ORDER else groups_as_sets
    )
    assert {p.engine for p in live.progress} == {"cluster"}
    # What was released is dropped: every side file, and all stage files but the last output batch's.
    staged = tmp_path / "ck" / "cluster"
    time_batches = len(list((tmp_path / "ck" / "tempo" / "commits").glob("*.json")))
    assert list((staged / "batches").iterdir()) == []
    left = sorted(p.name for p in (staged / "stage").glob("*.parquet"))
    assert time_batches >= files + 1 and len(left) <= 2, left


FILES = 4
"""Files written before the kill runs: time batches 0 to 3, then the flush is time batch 4."""


def _assert_whole_run_as_sets(out: Path, rows: list[dict[str, Any]], *options: str) -> None:
    """The committed output is the whole run's in memory (of the query live_worker's
    ``options`` choose: ``--chain``, ``--outer``, ``--around`` or the counts)."""
    from tempo.spark.streaming import read_committed
    from tests.streaming.test_live_spark import Count, _counts, _counts_beside, _counts_per_half_minute, _outer_counts
    from tests.streaming.test_live_spark import Reading as Plain
    from tests.streaming.test_live_spark import _items as items

    query = (
        _counts_per_half_minute
        if "--chain" in options
        else _outer_counts
        if "--outer" in options
        else _counts_beside
        if "--around" in options
        else _counts
    )
    whole = InMemoryExecutor().run(query(tempo.sources.ArrowSource(pa.Table.from_pylist(rows), Plain, start="ts", order="seq"), flush=True))
    assert groups_as_sets(items(read_committed(str(out)), Count)) == groups_as_sets(whole.raw)
    rejected = read_committed(str(out), rejections=True).drop_columns(["tempo_batch"])
    assert len(whole.rejected) > 0 and rejected.equals(whole.rejections_table())


def _kill_then_restart(tmp_path: Path, phase: str, batch: int, *options: str) -> None:
    """A worker on the cluster engine killed with kill -9 at ``phase`` of ``batch``: of the
    time query (``time-...``: its batch ``batch`` is the input's file ``batch``; FILES is the
    flush) or of the work query (its micro-batch ``batch``; ``work1-...``: of the second
    keyed node's, with ``--chain``)."""
    from tests.streaming.test_kill import Worker

    crashed = Worker(tmp_path, "--flush", "--engine", "cluster", *options, crash_at=f"{phase}:{batch}")
    assert crashed.wait() == -9, crashed.output()


def _finish(tmp_path: Path, rows: list[dict[str, Any]], *options: str, refused: bool = True) -> None:
    """A restart finishes the run: the whole run once, as in memory; a start after that is
    refused as flushed (checked when ``refused``)."""
    from tests.streaming.live_worker import FLUSHED
    from tests.streaming.test_kill import Worker

    restarted = Worker(tmp_path, "--flush", "--engine", "cluster", *options)
    assert restarted.wait() == 0, restarted.output()
    _assert_whole_run_as_sets(tmp_path / "out", rows, *options)
    if refused:
        again = Worker(tmp_path, "--flush", "--engine", "cluster", *options)
        assert again.wait() == FLUSHED, again.output()


def _input(tmp_path: Path, seed: int) -> list[dict[str, Any]]:
    from tests.streaming.test_kill import _write_files
    from tests.streaming.test_live_spark import _rows as plain_rows

    _skip_without_tws()
    rows = plain_rows(10 * FILES, seed=seed)
    _write_files(tmp_path / "in", rows, [10] * FILES)
    return rows


@pytest.mark.slow
def test_kills_of_the_cluster_engine_at_two_phases_then_a_restart_commits_the_whole_run_once(tmp_path: Path) -> None:
    """Two kills in a row, the second run going on from what the first left: a work batch
    killed after its commit record (Spark runs it again: its state stores commit it again,
    its output is only published); the flush killed after its commit record (the restart
    starts the work query alone, which releases the flush). The other slow tests kill each
    phase once, and check that a start after the end is refused. (The default suite kills
    the cluster engine's driver on a standalone cluster: tests/distributed/test_standalone_live.py.)"""
    from tests.streaming.test_kill import Worker

    rows = _input(tmp_path, seed=13)
    for phase, batch in [("commit", 2), ("time-commit", FILES)]:
        _kill_then_restart(tmp_path, phase, batch)
    restarted = Worker(tmp_path, "--flush", "--engine", "cluster")
    assert restarted.wait() == 0, restarted.output()
    _assert_whole_run_as_sets(tmp_path / "out", rows)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("phase", "batch"),
    [
        *[
            (phase, 2)
            for phase in ("time-read", "time-stage", "time-state", "time-commit", "read", "engine", "sink", "state", "commit", "publish")
        ],
        *[(phase, FILES) for phase in ("time-stage", "time-state", "time-commit")],
    ],
)
def test_a_kill_of_the_cluster_engine_at_a_phase_then_a_restart_commits_the_whole_run_once(tmp_path: Path, phase: str, batch: int) -> None:
    """One kill at ``phase`` of ``batch`` (``_kill_then_restart``), then a restart."""
    rows = _input(tmp_path, seed=13)
    _kill_then_restart(tmp_path, phase, batch)
    _finish(tmp_path, rows)


CHAIN_KILLS = [
    *[(phase, 2) for phase in ("read", "engine", "stage", "state", "commit")],  # the first window's work query, staging the second's
    *[(f"work1-{phase}", 2) for phase in ("read", "engine", "sink", "state", "commit", "publish")],
]
"""The phases of a chain's two work queries (``--chain``: two windows in sequence) a kill hits."""


@pytest.mark.slow  # (the default suite kills a cluster engine's driver on the standalone cluster: tests/distributed/test_standalone_live.py)
@pytest.mark.parametrize(("phase", "batch"), CHAIN_KILLS)
def test_a_kill_of_a_chain_of_two_windows_at_a_phase_then_a_restart_commits_the_whole_run_once(
    tmp_path: Path, phase: str, batch: int
) -> None:
    """Counts per device in 10 s windows, then their sums per 30 s (``--chain``): the second
    window is the first's next hop, staged by the first's work query, once per work batch
    id. One kill at ``phase`` of ``batch`` of either work query, then a restart: the whole
    run once, as in memory, and a start after it refused as flushed (the kill at ``stage``,
    after the second window's stage batch is written and before the first's commit record:
    the run again finds it there)."""
    rows = _input(tmp_path, seed=19)
    _kill_then_restart(tmp_path, phase, batch, "--chain")
    _finish(tmp_path, rows, "--chain", refused=thorough())
    staged = tmp_path / "ck" / "cluster"
    assert (staged / "stage1").is_dir() and list((staged / "batches1").iterdir()) == []  # every side file released


OUTER_KILLS = [(phase, 2) for phase in ("read", "engine", "stage", "state", "commit", "work1-sink", "work1-commit")]
"""The phases a kill of ``--outer``'s query hits: of the work query of its join and anti-join
(one keyed operator, their timelines in its records), staging the window's, and of the window's."""


@pytest.mark.slow
@pytest.mark.parametrize(("phase", "batch"), OUTER_KILLS)
def test_a_kill_of_a_left_outer_join_at_a_phase_then_a_restart_commits_the_whole_run_once(tmp_path: Path, phase: str, batch: int) -> None:
    """The readings left outer joined with their device's recent high ones, then counted
    per 10 s (``--outer``: a join and its anti-join in one keyed operator, the window its
    next hop). One kill at ``phase`` of ``batch``, then a restart: the whole run once, as in
    memory."""
    from tempo.plan.query import Query
    from tempo.spark.streaming.cluster import cluster_chain
    from tests.streaming.test_live_spark import _outer_counts

    chain = cluster_chain(Query.build(_outer_counts([], flush=True).node))
    assert (
        not isinstance(chain, str)
        and [type(shape.window).__name__ for shape in chain] == ["JoinNode", "WindowNode"]
        and chain[0].partner is not None
    )
    rows = _input(tmp_path, seed=23)
    _kill_then_restart(tmp_path, phase, batch, "--outer")
    _finish(tmp_path, rows, "--outer", refused=False)


AROUND_KILLS = [
    ("time-stage", 2),
    ("time-commit", 2),
    *[(phase, 2) for phase in ("read", "engine", "stage", "state", "commit")],
    *[(f"work1-{phase}", 2) for phase in ("sink", "commit")],
]
"""The phases a kill of ``--around``'s query hits: of the time query (which writes what goes
around the window into its side files), of the window's work query (which gives it to the
join's feed at its places and stages the join's), and of the join's."""


@pytest.mark.slow
@pytest.mark.parametrize(("phase", "batch"), AROUND_KILLS)
def test_a_kill_of_a_window_joined_with_its_own_input_at_a_phase_then_a_restart_commits_the_whole_run_once(
    tmp_path: Path, phase: str, batch: int
) -> None:
    """Each reading with its device's count in its 10 s window (``--around``: the window
    keyed, the join its next hop, the readings reaching the join around the window). One
    kill at ``phase`` of ``batch``, then a restart: the whole run once, as in memory."""
    from tempo.plan.query import Query
    from tempo.spark.streaming.cluster import cluster_chain
    from tests.streaming.test_live_spark import _counts_beside

    chain = cluster_chain(Query.build(_counts_beside([], flush=True).node))
    assert not isinstance(chain, str) and [type(shape.window).__name__ for shape in chain] == ["WindowNode", "JoinNode"]
    rows = _input(tmp_path, seed=29)
    _kill_then_restart(tmp_path, phase, batch, "--around")
    _finish(tmp_path, rows, "--around", refused=False)


def test_the_shapes_the_cluster_engine_takes() -> None:
    """Which node the engine runs by key (``cluster_shape``; no Spark job): a query without a
    stateful operator gets the release on top, a plan of joins and unions below it runs on the
    driver; a join that every input reaches without a window runs by its join key, end edges
    reaching it too (of edges, or above a join of intervals); a query whose stateful
    node cannot run by key (a stream would go around it) runs under the release, all of it
    below on the driver; an output keeping a substream key gets a release by that key (of
    the types a join key takes). A keyed node that reads another's results alone through
    stateless operators runs keyed too, its next hop (``cluster_chain``): of two ways to
    start a chain, the one that leaves less state on the driver."""
    from tempo.plan.query import Query
    from tempo.plan.nodes import ReleaseNode
    from tempo.spark.streaming.cluster import cluster_chain, cluster_query, cluster_shape

    readings = Stream.create("r", [], EventShape.POINT, payload_type=Reading)
    other = Stream.create("o", [], EventShape.POINT, payload_type=Reading)

    def keyed(stream: Stream[Any]) -> Any:
        shape = cluster_shape(Query.build(stream.node))
        return shape if isinstance(shape, str) else type(shape.window).__name__

    def chained(stream: Stream[Any]) -> str:
        chain = cluster_chain(Query.build(stream.node))
        return chain if isinstance(chain, str) else " > ".join(type(shape.window).__name__ for shape in chain)

    def overall(s: Stream[Any]) -> Stream[Overall]:
        return s.tumbling(timedelta(seconds=60)).aggregate(lambda w: Overall(n=w.count(), high=None))

    assert chained(_sessions(readings)) == "WindowNode"
    assert chained(_sessions_then_count(readings)) == "WindowNode > WindowNode"
    assert chained(overall(_sessions_then_count(readings).where(lambda o: o.n > 1))) == "WindowNode > WindowNode > WindowNode"
    assert chained(_analytic_then_window(readings)) == "AnalyticNode > WindowNode"
    assert chained(_clipped_then_window(readings)) == "ClipNode > WindowNode"
    assert chained(_uncovered_sessions(readings)) == "AntiJoinNode > WindowNode"  # rather than the anti-join on the driver below the window
    assert chained(_sessions(_self_join(readings))) == "JoinNode > WindowNode"
    assert chained(_sessions(_self_join(readings).union(other))) == "WindowNode"  # the other input goes around the join
    outer = readings.left_outer_join(other, lambda a, b: a.device == b.device, lambda a, b: b, unmatched=lambda a: a)
    assert chained(outer) == "JoinNode" == chained(outer.where(lambda r: r.value > 0))  # with its anti-join (``BulkShape.partner``)
    assert chained(overall(outer.select(lambda r: r))) == "JoinNode > WindowNode"  # the union of both halves is the hop's input
    partnered = cluster_chain(Query.build(outer.node))
    assert not isinstance(partnered, str) and type(partnered[0].partner).__name__ == "AntiJoinNode"
    assert (
        chained(overall(outer.union(other))) == "WindowNode"
    )  # another input meets the halves' results: the window, both halves below it on the driver
    sessions = _sessions(readings)
    assert (
        chained(overall(sessions).union(sessions.select(lambda s: Overall(n=s.n, high=s.high)))) == "WindowNode"
    )  # read twice: the window above on the driver

    assert keyed(_stateless(readings)) == "ReleaseNode"
    assert keyed(_self_join(readings)) == "JoinNode"
    assert (
        keyed(_self_join(readings).where(lambda r: r.value > 0).join(other, lambda a, b: a.device == b.device, lambda a, b: b))
        == "JoinNode"
    )
    edges = Stream.create("e", [], EventShape.EDGE, payload_type=Reading)
    assert keyed(_self_join(edges)) == "JoinNode"  # its inputs' end edges reach its keys
    intervals = Stream.create("i", [], EventShape.INTERVAL, payload_type=Reading)
    assert keyed(_self_join(intervals)) == "JoinNode"  # lifetimes of any length, ending at infinity too
    assert (
        keyed(_self_join(intervals).join(other, lambda a, b: a.device == b.device, lambda a, b: b)) == "JoinNode"
    )  # the ends of open pairs below too
    assert keyed(_self_join(edges.alter_event_duration(timedelta(seconds=2)))) == "JoinNode"  # edges given a duration are closed
    by_site = readings.join(other, lambda a, b: a.site == b.site, lambda a, b: b)
    assert keyed(by_site) == "JoinNode"
    assert keyed(_union_with_itself(readings)) == "WindowNode"
    assert keyed(_sessions(_self_join(readings).union(other))) == "WindowNode"  # joins and unions in sequence below it
    beside = _sessions(readings).join(other, lambda a, b: a.device == b.device, lambda a, b: b)
    assert chained(beside) == "WindowNode > JoinNode"  # the other input goes around the window into the join, its next hop
    assert chained(overall(beside)) == "WindowNode > JoinNode > WindowNode"
    assert chained(_window_beside(readings)) == "WindowNode > JoinNode"  # the readings reach both
    assert keyed(readings.anti_join(other, lambda a, b: a.device == b.device)) == "AntiJoinNode"
    assert keyed(edges.anti_join(edges, lambda a, b: a.device == b.device)) == "AntiJoinNode"  # end edges reach its keys
    assert (
        keyed(_self_join(intervals).anti_join(other, lambda a, b: a.device == b.device)) == "AntiJoinNode"
    )  # the ends of a join's open pairs too
    assert (
        keyed(edges.followed_by(edges, lambda a, b: a.device == b.device, timedelta(seconds=5), lambda a, b: b)) == "FollowedByNode"
    )  # it reads starts only
    assert keyed(_self_join(readings).anti_join(other, lambda a, b: a.device == b.device)) == "AntiJoinNode"  # a join below it
    assert keyed(_uncovered_sessions(readings)) == "AntiJoinNode"  # then the window, its next hop
    assert keyed(_followed(readings)) == "FollowedByNode"
    around_twice = _window_beside(readings).union(readings)  # the readings reach the output around the join too
    assert keyed(around_twice) == "ReleaseNode"
    released = cluster_query(Query.build(around_twice.node))
    assert isinstance(released.root, ReleaseNode) and cluster_query(released) is released  # the engine asks again: one release
    late = EventOrderingSettings(timedelta(seconds=3), timedelta(seconds=20))
    over = Stream.create("s", [], EventShape.POINT, AdvanceTimeSettings(ordering=late), payload_type=Reading, over=lambda r: r.device)
    assert keyed(over.where(lambda r: r.device > 0)) == "ReleaseNode"  # released by the device's own CTIs too
    assert keyed(_by_device(over)) == "WindowNode"  # the window keeps it: keyed by it, fed each device's own CTIs
    by_device_value = Stream.create(
        "w", [], EventShape.POINT, AdvanceTimeSettings(ordering=late), payload_type=Reading, over=lambda r: r.value
    )
    assert (
        keyed(
            by_device_value.group_by(lambda r: r.value)
            .tumbling(timedelta(seconds=60))
            .aggregate(lambda k, w: Reading(device=0, value=k, site="s"))
        )
        == "its output's substream key is of type float"
    )  # the window's too
    # An anti-join merges keys, so its inputs' key CTIs stop there, as in memory: keyed by its join key.
    assert keyed(over.anti_join(readings, lambda a, b: a.device == b.device)) == "AntiJoinNode"
    assert keyed(over.join(readings, lambda a, b: a.device == b.device, lambda a, b: b)) == "JoinNode"  # its record does not copy the key
    other_over = Stream.create("t", [], EventShape.POINT, AdvanceTimeSettings(ordering=late), payload_type=Reading, over=lambda r: r.device)
    kept = over.join(other_over, lambda a, b: a.device == b.device, lambda a, b: a)  # equates both keys and copies one: keeps it
    assert keyed(kept) == "JoinNode"  # keyed by that key, released by its own CTIs too (by_substream)
    by_value = Stream.create("v", [], EventShape.POINT, AdvanceTimeSettings(ordering=late), payload_type=Reading, over=lambda r: r.value)
    assert keyed(by_value) == "its output's substream key is of type float"


@pytest.mark.parametrize("kind", ["as is", "counted", "counted twice", "self-joined"])
def test_an_output_keeping_a_substream_key_is_released_by_that_keys_own_ctis(spark_session: Any, tmp_path: Path, kind: str) -> None:
    """ASA's substreams (docs/semantics.md 3.10.4, setting 3 of the illustration): readings
    ``over`` their device, cut into three files (restarted between them with ``--run-slow``),
    no flush. The output keeps the device, so the release on the executors is keyed by it:
    a device's own CTIs reach its key at their place among the arrivals, release its events
    there, and come back to the driver, which puts them between the input's CTIs. By hand
    (minutes after 12:00; tests/conformance/test_ordering.py states each step):

        e7 (d2 12:17) goes out by d2's CTI 12:18 (step 8), e8 (d2 12:20) by d2's 12:21
        (step 10), right after e9 (d3 12:16) by the input's 12:17; e5 (d1 12:19) by the
        input's 12:22; e10, e11 and e12 never.

    ``counted``: counts per device in 5-minute windows. The window keeps the device, so it
    runs keyed by the device on the executors (``by_substream``), each device's CTIs reaching
    its key at their places: d2's [12:15, 12:20) goes out by d2's CTI 12:21 pulled back to
    12:20, ahead of the input's CTI. The committed output is the in-memory executor's item
    for item.

    ``self-joined``: the readings joined with themselves by device, each pair the left
    reading: the join keeps the device, so it runs keyed by it on the executors. Each
    device's output CTI is the least of its CTIs at the two inputs, which the driver works
    out (``operator.KeyCtis``) and stages at its place: the same steps as the readings as
    they are, each pair released by its device's CTI where the reading was.

    ``counted twice``: those counts counted again per device in 10-minute windows, the
    second window keeping the device too: the first window's next hop, keyed by the device
    as well, the device CTIs the first passes on staged for it by the first's work query.
    By hand: [12:00, 12:10) of each device (one 5-minute count each) by the input's CTI
    12:10; d2's [12:10, 12:20) by d2's CTI 12:20, which the first window passed on; d1's and
    d3's (d3 two counts) by the input's CTI 12:20. The other device CTIs the first window
    passes on (d1 and d2 at 12:05 and 12:15) are pulled back to 12:00 and 12:10 by the second,
    where its CTI already is, and go no further.

    A checkpoint of the counted query whose work records claim no keyed node (as an earlier
    tempo wrote it, the window on the driver below the release by key) is refused."""
    import types

    import pyarrow.parquet as pq

    from tempo.plan.query import Query
    from tempo.spark.streaming import CheckpointMismatchError, ParquetSink, StreamingExecutor, read_committed
    from tempo.spark.streaming.cluster import cluster_chain, cluster_shape
    from tests.conformance.compare import release_steps
    from tests.conformance.test_ordering import (
        EVENTS,
        SETTING_3_RELEASES,
        SETTING_3_WINDOW_RELEASES,
        DeviceCount,
        Reading as Device,
        count_per_device,
        illustration,
    )
    from tests.streaming.test_live_spark import _items, land

    _skip_without_tws()
    base = datetime(2024, 1, 1, 12, 0, tzinfo=timezone.utc)
    utc = pa.timestamp("us", tz="UTC")
    schema = pa.schema([("seq", pa.int64()), ("device", pa.string()), ("event_time", utc), ("arrival", utc)])
    rows = [
        {"seq": i, "device": d, "event_time": base + timedelta(minutes=e), "arrival": base + timedelta(minutes=a)}
        for i, (d, e, a) in enumerate(EVENTS)
    ]
    source = ParquetSource(str(tmp_path / "in"), Device, start="event_time", arrival="arrival", order="seq")

    def query(over: Stream[Device]) -> Stream[Any]:
        if kind == "counted":
            return count_per_device(over)
        if kind == "counted twice":
            return (
                count_per_device(over)
                .group_by(lambda c: c.device)
                .tumbling(timedelta(minutes=10))
                .aggregate(lambda k, w: DeviceCount(k, w.count()))
            )
        return over.join(over, lambda a, b: a.device == b.device, lambda a, b: a) if kind == "self-joined" else over

    ordering = illustration(AdvanceTimePolicy.ADJUST, early=True, substreams=True, flush=False).node
    live_query = query(Stream(attrs.evolve(ordering, source=source)))
    shape = cluster_shape(Query.build(live_query.node))
    expected_node = {
        "as is": "Release by substream key r.device",
        "counted": "Tumbling 5 min by r.device",
        "counted twice": "Tumbling 5 min by r.device",
        "self-joined": "Join",
    }[kind]
    assert not isinstance(shape, str) and shape.window.describe().startswith(expected_node), shape
    assert len(cluster_chain(Query.build(live_query.node))) == (2 if kind == "counted twice" else 1)

    def start(checkpoint: str = "ck") -> Any:
        return StreamingExecutor(spark_session, str(tmp_path / checkpoint), engine="cluster").start(
            live_query, ParquetSink(str(tmp_path / f"{checkpoint}-out"))
        )

    for index, (low, high) in enumerate([(0, 4), (4, 9), (9, 12)]):
        land(
            tmp_path / "in", index, lambda tmp, low=low, high=high: pq.write_table(pa.Table.from_pylist(rows[low:high], schema=schema), tmp)
        )
        if (
            kind == "counted" and index == 0
        ):  # a checkpoint an earlier tempo wrote (the window on the driver below the release by key) is refused, not misread
            start("old").stop()
            records = tmp_path / "old" / "tempo" / "query.json"
            (tmp_path / "old" / "cluster" / "work" / "tempo" / "query.json").write_bytes(
                records.read_bytes()
            )  # the same query, no layout line
            with pytest.raises(CheckpointMismatchError, match="belongs to another query"):
                start("old")
        if index == 2 or thorough():
            live = start()
            try:
                live.process_all_available()
            finally:
                live.stop()
    windowed = kind.startswith("counted")
    committed = _items(read_committed(str(tmp_path / "ck-out")), DeviceCount if windowed else Device)
    whole = InMemoryExecutor().run(query(illustration(AdvanceTimePolicy.ADJUST, early=True, substreams=True, flush=False)))

    def minute(t: datetime) -> float:
        return (t.replace(tzinfo=timezone.utc) - base) / timedelta(minutes=1)

    def steps(raw: list[Any], key: Callable[[Any], Any]) -> list[Any]:
        label = (lambda p: (p.device, p.n)) if windowed else (lambda p: p.device)
        out = release_steps(types.SimpleNamespace(raw=raw), lambda item: (label(item.payload), minute(item.start)), minute)  # type: ignore[arg-type]
        return [(events, (cti[0], key(cti[1]), cti[2]) if cti[0] == "key" else cti) for events, cti in out]

    seen = steps(committed, lambda k: k)
    assert seen == steps(whole.raw, repr), seen  # the sink writes a substream CTI's key as its repr
    twice: list[Any] = [
        ([], ("cti", 0)),
        ([(("d1", 1), 0), (("d2", 1), 0), (("d3", 1), 0)], ("cti", 10)),
        ([(("d2", 1), 10)], ("key", "d2", 20)),
        ([(("d1", 1), 10), (("d3", 2), 10)], ("cti", 20)),
    ]
    by_hand = {"counted": SETTING_3_WINDOW_RELEASES, "counted twice": twice}.get(kind, SETTING_3_RELEASES)
    assert seen == [(events, (cti[0], repr(cti[1]), cti[2]) if cti[0] == "key" else cti) for events, cti in by_hand], seen


@attrs.frozen
class Stamped:
    key: int
    at: datetime


@attrs.frozen
class Earliest:
    key: int
    at: datetime
    rank: int


def test_a_top_k_of_records_with_datetimes_comes_back_whole(spark_session: Any, tmp_path: Path) -> None:
    """``top_k`` per key in tumbling windows of 3 s on the executors: its results are records
    holding records (``Top`` of ``Ranked`` events), which come back to the driver through
    Arrow as dicts, their datetimes as datetimes. Readings at 0..5 s, key s % 2, each
    stamped 2020-01-01 00:00:s; the earliest stamp of each key and window, by hand:
    [0, 3): key 0 at 0 s, key 1 at 1 s; [3, 6): key 0 at 4 s, key 1 at 3 s."""
    import pyarrow.parquet as pq

    from tempo import AdvanceTimeGenerationSettings
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed
    from tests.streaming.test_live_spark import _items

    _skip_without_tws()
    utc = timezone.utc
    rows = [
        {"seq": s, "ts": datetime(2024, 1, 1, 0, 0, s, tzinfo=utc), "key": s % 2, "at": datetime(2020, 1, 1, 0, 0, s, tzinfo=utc)}
        for s in range(6)
    ]
    table = pa.Table.from_pylist(rows)
    (tmp_path / "in").mkdir()
    pq.write_table(table, tmp_path / "in" / "part-0.parquet")

    def query(source: Any) -> Stream[Earliest]:
        settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, timedelta(0), True), policy=AdvanceTimePolicy.DROP)
        stamped = Stream.create("stamped", source, EventShape.POINT, settings, payload_type=Stamped)
        return (
            stamped.group_by(lambda e: e.key)
            .tumbling(timedelta(seconds=3))
            .top_k(1, by=lambda e: e.at, select=lambda e, rank: Earliest(e.key, e.at, rank))
        )

    source = ParquetSource(str(tmp_path / "in"), Stamped, start="ts", order="seq")
    live = StreamingExecutor(spark_session, str(tmp_path / "ck"), engine="cluster").start(query(source), ParquetSink(str(tmp_path / "out")))
    try:
        live.flush()
    finally:
        live.stop()
    committed = _items(read_committed(str(tmp_path / "out")), Earliest)
    whole = InMemoryExecutor().run(query(tempo.sources.ArrowSource(table, Stamped, start="ts", order="seq")))
    assert groups_as_sets(committed) == groups_as_sets(whole.raw)
    seen = sorted((r.start.second, r.payload.key, r.payload.at.second, r.payload.rank) for r in committed if not isinstance(r, Cti))
    assert seen == [(0, 0, 0, 1), (0, 1, 1, 1), (3, 0, 4, 1), (3, 1, 3, 1)], seen


def _bare_join(a: Any, b: Any, flush: bool) -> Stream[Reading]:
    """test_bulk's join with no window above it: it runs by its join key on the executors."""
    joined = _join_of_two(a, b, flush).node.input.input  # the join, below the where and the window
    assert isinstance(joined, JoinNode)
    return Stream(joined)


@pytest.mark.parametrize(
    "combine", [pytest.param("union", marks=pytest.mark.slow), pytest.param("join", marks=pytest.mark.slow), "join without a window"]
)
def test_two_inputs_reach_the_window_item_by_item_on_the_driver(spark_session: Any, tmp_path: Path, combine: str) -> None:
    """Two inputs with arrival times merged by a union (or joined) below the window: the time
    query runs each batch item by item up to the window on the driver (the arrival frontier,
    the join's state), the window per key on the executors (without a window, the join runs
    by its join key on the executors, its pairs in their exact order). After every pair of files the
    committed output is what item by item releases for the rows so far (a ``LiveEngine`` fed
    them), after the flush the in-memory executor's whole run, with its rejections."""
    from tempo.plan.query import Query
    from tempo.runtime.ingress import TimestampMode
    from tempo.runtime.live import LiveEngine
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed
    from tests.streaming.test_bulk import SCHEMA, Stat, _items, _join_of_two, _rows, _union_of_two, _write

    _skip_without_tws()
    build: Callable[..., Stream[Any]] = {"union": _union_of_two, "join": _join_of_two, "join without a window": _bare_join}[combine]
    payload: type = Reading if combine == "join without a window" else Stat
    compared = list if combine == "join without a window" else groups_as_sets
    rnd = random.Random(21)
    rows = _rows(100, 21, ctis=True, intervals=False)
    steps: list[list[list[dict[str, Any]]]] = [[[], []] for _ in range(5)]
    for i, row in enumerate(rows):
        steps[i * len(steps) // len(rows)][rnd.randrange(2)].append(row)
    folders, out = (tmp_path / "a", tmp_path / "b"), tmp_path / "out"

    def parquet(folder: Path) -> ParquetSource[Reading]:
        return ParquetSource(str(folder), Reading, start="ts", kind="kind", order="seq", arrival="arrived")

    def arrow(part: list[dict[str, Any]]) -> Any:
        return tempo.sources.ArrowSource(
            pa.Table.from_pylist(part, schema=SCHEMA), Reading, start="ts", kind="kind", order="seq", arrival="arrived"
        )

    for index, folder in enumerate(folders):
        _write(folder, 0, steps[0][index])
    if combine == "join without a window":
        from tempo.spark.streaming.cluster import cluster_shape

        shape = cluster_shape(Query.build(build(*map(parquet, folders), True).node))
        assert not isinstance(shape, str) and isinstance(shape.window, JoinNode)
    live = StreamingExecutor(spark_session, str(tmp_path / "ck"), engine="cluster").start(
        build(*map(parquet, folders), True), ParquetSink(str(out))
    )
    try:
        for step in range(len(steps)):
            if step:
                for index, folder in enumerate(folders):
                    _write(folder, step, steps[step][index])
            live.process_all_available()
            so_far = [[r for s in steps[: step + 1] for r in s[index]] for index in range(2)]
            mode = TimestampMode()
            mode.saw(aware=True)
            reference = LiveEngine(Query.build(build(arrow(so_far[0]), arrow(so_far[1]), False).node), mode)
            for index, part in enumerate(so_far):
                if part:
                    reference.push_rows(index, pa.Table.from_pylist(part, schema=SCHEMA))
            reference.run()
            assert compared(_items(read_committed(str(out)), payload)) == compared(reference.take().items), f"after step {step}"
        live.flush()
    finally:
        live.stop()
    whole = InMemoryExecutor().run(build(*(arrow([r for s in steps for r in s[index]]) for index in range(2)), True))
    assert compared(_items(read_committed(str(out)), payload)) == compared(whole.raw)
    rejected = read_committed(str(out), rejections=True).drop_columns(["tempo_batch"])
    assert len(whole.rejected) > 0 and rejected.equals(whole.rejections_table())


def _flushed_on_the_cluster(
    spark_session: Any,
    tmp_path: Path,
    files: list[list[dict[str, Any]]],
    schema: pa.Schema,
    shape: EventShape,
    window: str | Callable[[Any], Stream[Any]],
    payload_type: type,
    result_type: type,
    restarts: bool = False,
    layout: bool = False,
    **columns: str,
) -> tuple[list[Any], list[Any]]:
    """Each of ``files`` (rows) landed as a Parquet file of the input, whose events carry a CTI
    at each start (adjusted), grouped by their ``key`` into tumbling windows of 10 s or
    sessions with a gap of 5 s (``window``) counted and summed into ``result_type`` (or
    ``window`` applied to the grouped stream), run on the
    cluster engine to its flush (with ``restarts``, started and stopped after each file but
    the last, so that each start goes on from what the one before saved): what it committed,
    and the in-memory run over all the rows. With ``layout``, a checkpoint whose work records
    claim no keyed nodes (as an earlier tempo wrote them, with another layout) is refused
    after the first file."""
    import pyarrow.parquet as pq

    from tempo import AdvanceTimeGenerationSettings, AdvanceTimeSettings
    from tempo.spark.streaming import CheckpointMismatchError, ParquetSink, StreamingExecutor, read_committed
    from tests.streaming.test_live_spark import _items, land

    _skip_without_tws()

    def query(source: Any) -> Stream[Any]:
        settings = AdvanceTimeSettings(
            AdvanceTimeGenerationSettings(frequency=1, delay=timedelta(0), advance_to_infinity_on_shutdown=True),
            policy=AdvanceTimePolicy.ADJUST,
        )
        grouped = Stream.create("readings", source, shape, settings, payload_type=payload_type).group_by(lambda r: r.key)
        if callable(window):
            return window(grouped)
        windows = grouped.tumbling(timedelta(seconds=10)) if window == "tumbling" else grouped.session(timedelta(seconds=5))
        return windows.aggregate(lambda k, w: result_type(key=k, n=w.count(), total=w.sum(lambda r: r.value)))

    source = ParquetSource(str(tmp_path / "in"), payload_type, start="ts", order="seq", **columns)

    def start(checkpoint: str = "ck") -> Any:
        return StreamingExecutor(spark_session, str(tmp_path / checkpoint), engine="cluster").start(
            query(source), ParquetSink(str(tmp_path / f"{checkpoint}-out"))
        )

    for index, part in enumerate(files):
        land(tmp_path / "in", index, lambda tmp: pq.write_table(pa.Table.from_pylist(part, schema=schema), tmp))
        if layout and index == 0:
            start("old").stop()
            records = tmp_path / "old" / "tempo" / "query.json"
            (tmp_path / "old" / "cluster" / "work" / "tempo" / "query.json").write_bytes(
                records.read_bytes()
            )  # the same query, no layout line
            with pytest.raises(CheckpointMismatchError, match="belongs to another query"):
                start("old")
        if restarts and index < len(files) - 1:
            live = start()
            try:
                live.process_all_available()
            finally:
                live.stop()
    live = start()
    try:
        live.flush()
    finally:
        live.stop()
    rows = [row for part in files for row in part]
    whole = InMemoryExecutor().run(
        query(tempo.sources.ArrowSource(pa.Table.from_pylist(rows, schema=schema), payload_type, start="ts", order="seq", **columns))
    )
    return _items(read_committed(str(tmp_path / "ck-out")), result_type), whole.raw


@attrs.frozen
class FloatReading:
    key: float
    value: float


@attrs.frozen
class FloatCount:
    key: float
    n: int
    total: float


@pytest.mark.parametrize("window", ["tumbling", "sessions"])
def test_a_float_group_key_is_one_key_however_it_is_written(spark_session: Any, tmp_path: Path, window: str) -> None:
    """-0.0 and 0.0 are one group key, and so is every NaN, as in memory, though the rows are
    bucketed by a hash of their key on the way to the executors: tumbling windows of 10 s
    (each window and key's partial aggregates, grouped by Spark) and sessions with a gap of
    5 s (the events themselves, their keys as written). A CTI at each event; seconds:

        file 0:  1 key 0.0 (1)   2 key -0.0 (2)   3 key NaN (3)
        file 1:  4 key NaN (4)   5 key 1.5 (5)    12 key -0.0 (6)

    Either window: key 0.0 twice (n 2, total 3: [0, 10) or the session from 1; then n 1,
    total 6: [10, 20) or the session from 12), NaN once (n 2, total 7), 1.5 once (n 1, total 5)."""
    from datetime import datetime, timezone

    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    nan = float("nan")
    files = [[(1, 0.0, 1.0), (2, -0.0, 2.0), (3, nan, 3.0)], [(4, nan, 4.0), (5, 1.5, 5.0), (12, -0.0, 6.0)]]
    schema = pa.schema([("seq", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("key", pa.float64()), ("value", pa.float64())])
    rows = [
        {"seq": 3 * f + i, "ts": base + timedelta(seconds=s), "key": k, "value": v}
        for f, part in enumerate(files)
        for i, (s, k, v) in enumerate(part)
    ]

    committed, whole = _flushed_on_the_cluster(
        spark_session, tmp_path, [rows[:3], rows[3:]], schema, EventShape.POINT, window, FloatReading, FloatCount
    )
    got = [item for item in committed if not isinstance(item, Cti)]
    assert sorted((repr(r.payload.key), r.payload.n, r.payload.total) for r in got) == [
        ("0.0", 1, 6.0),
        ("0.0", 2, 3.0),
        ("1.5", 1, 5.0),
        ("nan", 2, 7.0),
    ]
    assert repr(groups_as_sets(committed)) == repr(groups_as_sets(whole))


@attrs.frozen
class Keyed:
    key: str
    value: float


@attrs.frozen
class KeyedCount:
    key: str
    n: int
    total: float


def _clipped_then_tumbling(grouped: Any) -> Stream[KeyedCount]:
    """Each key's events clipped at its next one, then tumbling 10 s per key: the window is
    the clip's next hop, its input's lifetimes may reach infinity."""
    return (
        grouped.clip_event_duration()
        .group_by(lambda r: r.key)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda k, w: KeyedCount(key=k, n=w.count(), total=w.sum(lambda r: r.value)))
    )


def _passed_on_then_tumbling(grouped: Any) -> Stream[KeyedCount]:
    """Each key's events passed on by an analytic (lifetimes kept), then tumbling 10 s per
    key: the window is the analytic's next hop."""
    return (
        grouped.analytic(lambda k, r, a: Keyed(key=r.key, value=r.value))
        .group_by(lambda r: r.key)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda k, w: KeyedCount(key=k, n=w.count(), total=w.sum(lambda r: r.value)))
    )


@pytest.mark.parametrize("window", ["tumbling", "sessions", "clipped, then tumbling", "passed on, then tumbling"])
def test_open_lifetimes_end_at_the_flush_after_the_latest_time_of_every_key(spark_session: Any, tmp_path: Path, window: str) -> None:
    """When the input ends, the window ends open lifetimes after the later of its last finite
    CTI and the latest finite time of its events, over every group: on the cluster engine
    each key's operator sees only its own events and the CTIs that reach it, so the flush
    brings every bucket both. Intervals (seconds), a CTI at each start, then the flush:

        file 0:  a [1, infinity) 1.0     b [2, 3) 2.0
        file 1:  b [35, 36) 3.0          b [40, 41) 4.0

    The last finite CTI is 40 and the latest finite time 41 (b's), though a's own is 1 and
    the last CTI a's timer brings it is 40 (the end of its window [30, 40)). So a's open
    event ends at 41 + 1 tick. Tumbling 10 s: a has [0, 10) to [40, 50) (n 1, total 1.0:
    five windows, the last released by the flush), b [0, 10) (2.0), [30, 40) (3.0) and
    [40, 50) (4.0). Sessions with a gap of 5 s, stamped at their last tick: b's first
    session ends at 3 - 1 tick + 5 s (n 1, 2.0), its second at 41 - 1 tick + 5 s (n 2, 7.0:
    40 starts before 36 - 1 tick + 5 s), a's at 41 + 5 s (n 1, 1.0). Clipped at each key's
    next event first (no event of these ends after its key's next start: the clip changes
    none), then tumbling: as tumbling, the window a hop above the clip, the flush's times
    brought to its buckets by the clip's work query, which staged every event it saw.
    Passed on by an analytic first, b's first event made [2, 50): the latest finite time is
    50, staged (with the CTI 35 that releases it from the analytic) a batch before the flush,
    whose stage batch holds only b's [40, 41): a's open event ends at 50 + 1 tick, in six
    windows [0, 10) to [50, 60); b has [0, 10) to [20, 30) (n 1, 2.0), [30, 40) (n 2, 5.0)
    and [40, 50) (n 2, 6.0)."""
    from datetime import datetime, timezone

    from tempo.ticks import INFINITY

    base = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def at(seconds: float) -> datetime:
        return base + timedelta(seconds=seconds)

    passed_on = window.startswith("passed on")
    files = [[(1, None, "a", 1.0), (2, 50 if passed_on else 3, "b", 2.0)], [(35, 36, "b", 3.0), (40, 41, "b", 4.0)]]
    utc = pa.timestamp("us", tz="UTC")
    schema = pa.schema([("seq", pa.int64()), ("ts", utc), ("until", utc), ("key", pa.string()), ("value", pa.float64())])
    rows = [
        {"seq": 2 * f + i, "ts": at(s), "until": INFINITY if e is None else at(e), "key": k, "value": v}
        for f, part in enumerate(files)
        for i, (s, e, k, v) in enumerate(part)
    ]

    query = _clipped_then_tumbling if window.startswith("clipped") else _passed_on_then_tumbling if passed_on else window
    committed, whole = _flushed_on_the_cluster(
        spark_session, tmp_path, [rows[:2], rows[2:]], schema, EventShape.INTERVAL, query, Keyed, KeyedCount, end="until"
    )
    got = [item for item in committed if not isinstance(item, Cti)]
    tick = timedelta(microseconds=1)
    if passed_on:
        expected = [(at(s), at(s + 10), "a", 1, 1.0) for s in (0, 10, 20, 30, 40, 50)]
        expected += [(at(s), at(s + 10), "b", 1, 2.0) for s in (0, 10, 20)] + [(at(30), at(40), "b", 2, 5.0), (at(40), at(50), "b", 2, 6.0)]
        assert sorted((r.start, r.end, r.payload.key, r.payload.n, r.payload.total) for r in got) == sorted(expected)
    elif window.endswith("tumbling"):
        expected = [(at(s), at(s + 10), "a", 1, 1.0) for s in (0, 10, 20, 30, 40)]
        expected += [(at(0), at(10), "b", 1, 2.0), (at(30), at(40), "b", 1, 3.0), (at(40), at(50), "b", 1, 4.0)]
        assert sorted((r.start, r.end, r.payload.key, r.payload.n, r.payload.total) for r in got) == sorted(expected)
    else:
        last_ticks = [(at(8) - 2 * tick, "b", 1, 2.0), (at(46) - 2 * tick, "b", 2, 7.0), (at(46) - tick, "a", 1, 1.0)]
        assert sorted((r.start, r.payload.key, r.payload.n, r.payload.total) for r in got) == sorted(last_ticks)
    assert repr(groups_as_sets(committed)) == repr(groups_as_sets(whole))


def test_an_end_edge_reaches_its_events_key_after_a_restart(spark_session: Any, tmp_path: Path) -> None:
    """An end edge carries no payload: the driver keeps each open event's payload (with its
    engine's state) until its end, which it stages with it, so that the end goes to its
    event's key, and the key's operator knows it by its event's id. The query stops after
    file 0 and starts again, so the end in file 1 must come from what the first run saved.
    Edges (seconds), a CTI at each start, tumbling 10 s windows per key, counted and summed:

        file 0:  a starts at 1 (1.0)    b starts at 2 (2.0)
        file 1:  a ends at 12           c starts at 25 (3.0)

    The flush's last finite CTI is 25, the latest finite time 25 (c's start): the open b and
    c end just after it. So a has [0, 10) and [10, 20), b [0, 10) to [20, 30), c [20, 30)
    (each n 1). Had a's end gone astray, a would stay open and have [20, 30) too."""
    from datetime import datetime, timezone

    base = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def at(seconds: float) -> datetime:
        return base + timedelta(seconds=seconds)

    utc = pa.timestamp("us", tz="UTC")
    schema = pa.schema(
        [("seq", pa.int64()), ("kind", pa.string()), ("ts", utc), ("until", utc), ("key", pa.string()), ("value", pa.float64())]
    )
    items = [[("start", 1, None, "a", 1.0), ("start", 2, None, "b", 2.0)], [("end", 1, 12, "a", 1.0), ("start", 25, None, "c", 3.0)]]
    files = [
        [{"kind": kind, "ts": at(s), "until": None if e is None else at(e), "key": k, "value": v} for kind, s, e, k, v in part]
        for part in items
    ]
    for seq, row in enumerate(row for part in files for row in part):
        row["seq"] = seq

    committed, whole = _flushed_on_the_cluster(
        spark_session,
        tmp_path,
        files,
        schema,
        EventShape.EDGE,
        "tumbling",
        Keyed,
        KeyedCount,
        restarts=True,
        end="until",
        kind="kind",
    )
    got = [item for item in committed if not isinstance(item, Cti)]
    expected = [(at(0), at(10), "a", 1.0), (at(10), at(20), "a", 1.0), (at(20), at(30), "c", 3.0)]
    expected += [(at(s), at(s + 10), "b", 2.0) for s in (0, 10, 20)]
    assert sorted((r.start, r.end, r.payload.key, r.payload.total) for r in got) == sorted(expected)
    assert all(r.payload.n == 1 for r in got)
    assert repr(groups_as_sets(committed)) == repr(groups_as_sets(whole))


@attrs.frozen
class KeyedPair:
    key: str
    left: float
    right: float


def _keyed_intervals() -> tuple[datetime, Callable[[float], datetime], pa.Schema, list[list[dict[str, Any]]]]:
    """The join's and the anti-join's hand timeline on intervals (seconds; ``inf``: ending at
    infinity): the base time, seconds to times, the schema and the two files' rows,

        file 0:  a [1, inf) 1.0    b [2, 9) 2.0
        file 1:  a [3, 6) 3.0      c [4, 5) 1.0    b [7, 8) 5.0    c [10, 12) 4.0"""
    from tempo import INFINITY

    base = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def at(seconds: float) -> datetime:
        return INFINITY if seconds == float("inf") else base + timedelta(seconds=seconds)

    utc = pa.timestamp("us", tz="UTC")
    schema = pa.schema([("seq", pa.int64()), ("ts", utc), ("until", utc), ("key", pa.string()), ("value", pa.float64())])
    items = [[(1, float("inf"), "a", 1.0), (2, 9, "b", 2.0)], [(3, 6, "a", 3.0), (4, 5, "c", 1.0), (7, 8, "b", 5.0), (10, 12, "c", 4.0)]]
    files = [[{"ts": at(s), "until": at(e), "key": k, "value": v} for s, e, k, v in part] for part in items]
    for seq, row in enumerate(row for part in files for row in part):
        row["seq"] = seq
    return base, at, schema, files


def _keyed_shape_of(query: Callable[[Any], Stream[Any]], shape: EventShape) -> str:
    """The kind of node the cluster engine runs keyed in ``query`` over readings of ``shape``
    grouped by key, or why it takes none."""
    from tempo.plan.query import Query
    from tempo.spark.streaming.cluster import cluster_shape

    readings = Stream.create("readings", [], shape, payload_type=Keyed)
    found = cluster_shape(Query.build(query(readings.group_by(lambda r: r.key)).node))
    return found if isinstance(found, str) else type(found.window).__name__


def _paired(grouped: Any) -> Stream[KeyedPair]:
    """The readings joined with those above 1.5 of their key: no window above the join."""
    readings: Stream[Keyed] = grouped._stream
    above = readings.where(lambda r: r.value > 1.5)
    return readings.join(above, lambda a, b: a.key == b.key, lambda a, b: KeyedPair(a.key, a.value, b.value))


def test_a_join_keyed_by_its_join_key_gives_its_pairs_and_their_ends_in_order(spark_session: Any, tmp_path: Path) -> None:
    """A join with no window above it runs keyed by its join key on the executors, both
    sides' events in the state store (with ``--run-slow``, across restarts: the query stops
    after each file but the last). Intervals (seconds), a CTI at each start, the flush at
    infinity; the right side is the readings above 1.5; a's first reading lasts for ever:

        file 0:  a [1, inf) 1.0    b [2, 9) 2.0
        file 1:  a [3, 6) 3.0      c [4, 5) 1.0    b [7, 8) 5.0    c [10, 12) 4.0

    Pairs: b [2, 9) (2.0, 2.0); a [3, 6) (1.0, 3.0), released by the CTI at 4, when the left
    input's CTI has not reached 6, the end of a's second reading: a start edge at 3, ended at 6
    when the CTI at 7 moves it past; a [3, 6) (3.0, 3.0), whole; b [7, 8) (2.0, 5.0), (5.0,
    2.0) and (5.0, 5.0); c [10, 12) (4.0, 4.0). The keys give every pair whole, with the input
    whose CTI decides its end; the driver splits it where the join over all keys did. The
    committed output is the in-memory executor's item for item (a join's output goes by start,
    then as the join pushed its pairs, the ends where its inputs' CTIs settle them)."""
    from tempo.events import EdgeEnd, EdgeStart

    base, at, schema, files = _keyed_intervals()
    assert _keyed_shape_of(_paired, EventShape.INTERVAL) == "JoinNode"
    committed, whole = _flushed_on_the_cluster(
        spark_session,
        tmp_path,
        files,
        schema,
        EventShape.INTERVAL,
        _paired,
        Keyed,
        KeyedPair,
        restarts=thorough(),
        end="until",
    )
    assert repr(committed) == repr(whole)
    events = [r for r in committed if not isinstance(r, Cti)]
    split = [r for r in events if r.payload == KeyedPair("a", 1.0, 3.0)]
    assert [type(r) for r in split] == [EdgeStart, EdgeEnd] and split[0].start == at(3) and split[1].end == at(6), split
    whole_pairs = sorted(
        (((r.start - base).seconds, (r.end - base).seconds, r.payload) for r in events if not isinstance(r, (EdgeStart, EdgeEnd))), key=repr
    )
    assert whole_pairs == sorted(
        [
            (2, 9, KeyedPair("b", 2.0, 2.0)),
            (3, 6, KeyedPair("a", 3.0, 3.0)),
            (7, 8, KeyedPair("b", 2.0, 5.0)),
            (7, 8, KeyedPair("b", 5.0, 2.0)),
            (7, 8, KeyedPair("b", 5.0, 5.0)),
            (10, 12, KeyedPair("c", 4.0, 4.0)),
        ],
        key=repr,
    ), whole_pairs


def _keyed_edges() -> tuple[datetime, Callable[[float], datetime], pa.Schema, list[list[dict[str, Any]]]]:
    """The join's and the anti-join's hand timeline on edges (seconds): the base time, seconds
    to times, the schema and the two files' rows (a start edge, or an end edge),

        file 0:  a1 from 1    b2 from 2
        file 1:  a3 from 3   a1 ends 6   c1 from 4   d1 from 5   e1 from 6   d1 ends 8
                 b2 ends 9   a3 ends 7   c4 from 10  e1 ends 12

    (a1 is key a, value 1.0)."""
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def at(seconds: float) -> datetime:
        return base + timedelta(seconds=seconds)

    utc = pa.timestamp("us", tz="UTC")
    schema = pa.schema(
        [("seq", pa.int64()), ("kind", pa.string()), ("ts", utc), ("until", utc), ("key", pa.string()), ("value", pa.float64())]
    )
    items = [
        [("start", 1, None, "a", 1.0), ("start", 2, None, "b", 2.0)],
        [
            ("start", 3, None, "a", 3.0),
            ("end", 1, 6, "a", 1.0),
            ("start", 4, None, "c", 1.0),
            ("start", 5, None, "d", 1.0),
            ("start", 6, None, "e", 1.0),
            ("end", 5, 8, "d", 1.0),
            ("end", 2, 9, "b", 2.0),
            ("end", 3, 7, "a", 3.0),
            ("start", 10, None, "c", 4.0),
            ("end", 6, 12, "e", 1.0),
        ],
    ]
    files = [
        [{"kind": kind, "ts": at(s), "until": None if e is None else at(e), "key": k, "value": v} for kind, s, e, k, v in part]
        for part in items
    ]
    for seq, row in enumerate(row for part in files for row in part):
        row["seq"] = seq
    return base, at, schema, files


def _timeline(committed: list[Any], base: datetime, label: Callable[[Any], Any]) -> list[tuple[Any, ...]]:
    """``committed`` as (kind, label of its payload, start and end in seconds; None: open) and
    ("cti", time), the CTIs at infinity left out."""
    from tempo.events import EdgeStart

    return [
        ("cti", r.timestamp)
        if isinstance(r, Cti)
        else (type(r).__name__, label(r.payload), (r.start - base).seconds, None if isinstance(r, EdgeStart) else (r.end - base).seconds)
        for r in committed
        if not (isinstance(r, Cti) and r.timestamp.year == 9999)
    ]


def test_a_join_of_edges_keyed_by_its_join_key_ends_its_pairs_where_memory_does(spark_session: Any, tmp_path: Path) -> None:
    """A join of edges on the executors: the ends of both inputs' events reach their keys; the
    end an end edge gives a pair already out goes out at its arrival if it is final (both
    ends known, or the input still open has its CTI past it), else at the move of that input's
    CTI that reaches it. ``_keyed_edges``'s readings joined with those above 1.5 of their key
    (``_paired``), a CTI at each start:

        b2 x b2 from 2: out at the CTI at 3, both open; b2's end (9) reaches the right
                        input first (the left's CTI at 6: the end waits), then the left: ended at 9
        a1 x a3 from 3: out at the CTI at 4, a1 ended at 6 already, a3 open: a start edge
                        ended at 6 when the right CTI reaches 6
        a3 x a3 from 3: out at the CTI at 4, both open, ended at 7 at the arrival of a3's end
        c1 x c4, c4 x c4 from 10: out at the flush, never ended

    The committed output is the in-memory executor's item for item."""
    base, at, schema, files = _keyed_edges()
    assert _keyed_shape_of(_paired, EventShape.EDGE) == "JoinNode"
    committed, whole = _flushed_on_the_cluster(
        spark_session,
        tmp_path,
        files,
        schema,
        EventShape.EDGE,
        _paired,
        Keyed,
        KeyedPair,
        restarts=thorough(),
        end="until",
        kind="kind",
    )
    assert repr(committed) == repr(whole)
    seen = _timeline(committed, base, lambda pair: (pair.key, pair.left, pair.right))
    assert seen == [
        ("cti", at(1)),
        ("cti", at(2)),
        ("EdgeStart", ("b", 2.0, 2.0), 2, None),
        ("cti", at(3)),
        ("EdgeStart", ("a", 1.0, 3.0), 3, None),
        ("EdgeStart", ("a", 3.0, 3.0), 3, None),
        ("cti", at(4)),
        ("cti", at(5)),
        ("EdgeEnd", ("a", 1.0, 3.0), 3, 6),
        ("cti", at(6)),
        ("EdgeEnd", ("b", 2.0, 2.0), 2, 9),
        ("EdgeEnd", ("a", 3.0, 3.0), 3, 7),
        ("cti", at(10)),
        ("EdgeStart", ("c", 1.0, 4.0), 10, None),
        ("EdgeStart", ("c", 4.0, 4.0), 10, None),
    ], seen


def _uncovered_by_key(grouped: Any) -> Stream[Keyed]:
    """The stretches of each reading during which no reading of its key above 1.5, moved 2 s
    later, is alive: no window above the anti-join."""
    readings: Stream[Keyed] = grouped._stream
    return readings.anti_join(readings.where(lambda r: r.value > 1.5).shift_event_time(timedelta(seconds=2)), lambda a, b: a.key == b.key)


@pytest.mark.slow  # its twin of edges below runs by default: the same mechanisms and more
def test_an_anti_join_keyed_by_its_join_key_ends_its_fragments_where_the_right_inputs_cti_does(spark_session: Any, tmp_path: Path) -> None:
    """An anti-join with no window above it runs keyed by its join key on the executors, both
    inputs' events in the state store (with ``--run-slow``, across restarts). Intervals
    (seconds), a CTI at each start (the right input's 2 s later), the flush at infinity:

        file 0:  a [1, inf) 1.0    b [2, 9) 2.0
        file 1:  a [3, 6) 3.0      c [4, 5) 1.0    b [7, 8) 5.0    c [10, 12) 4.0

    The right input: b [4, 11), a [5, 8), b [9, 10), c [12, 14). Fragments: a [1, 5) and
    [8, inf) of the first reading, b [2, 4), a [3, 5), c [4, 5), c [10, 12); b [7, 8) is
    covered whole. a [1, 5) goes out open at the CTI at 1; a [5, 8) arriving (right CTI 4)
    brings its end to 5, which the right input's CTI makes final when it reaches 5, but the
    first reading, ending at infinity, counts as open (docs/semantics.md 5.9: a batch executor
    cannot tell it from an edge never ended), so its end waits for the left input's CTI at 5
    past 5: the sweep to the output CTI at 7 (the left's next) ends it. a [8, inf) goes out open at the CTI at 10
    and is never ended. The committed output is the in-memory executor's item for item."""
    from tempo.events import EdgeEnd, EdgeStart

    base, at, schema, files = _keyed_intervals()
    assert _keyed_shape_of(_uncovered_by_key, EventShape.INTERVAL) == "AntiJoinNode" == _keyed_shape_of(_uncovered_by_key, EventShape.EDGE)
    committed, whole = _flushed_on_the_cluster(
        spark_session,
        tmp_path,
        files,
        schema,
        EventShape.INTERVAL,
        _uncovered_by_key,
        Keyed,
        Keyed,
        restarts=thorough(),
        end="until",
    )
    assert repr(committed) == repr(whole)
    first = [
        (type(r).__name__, r.start, getattr(r, "end", None)) for r in committed if not isinstance(r, Cti) and r.payload == Keyed("a", 1.0)
    ]
    assert first == [("EdgeStart", at(1), None), ("EdgeEnd", at(1), at(5)), ("EdgeStart", at(8), None)], first
    ctis = [r.timestamp for r in committed if isinstance(r, Cti)]
    end_at = next(i for i, r in enumerate(committed) if isinstance(r, EdgeEnd))
    assert [r.timestamp for r in committed[:end_at] if isinstance(r, Cti)] == [at(1), at(2), at(3), at(4)] and ctis[4] == at(
        7
    )  # in the sweep to 7
    spans = sorted(
        ((r.start - base).seconds, (r.end - base).seconds, r.payload.key) for r in committed if not isinstance(r, (Cti, EdgeStart, EdgeEnd))
    )
    assert spans == [(2, 4, "b"), (3, 5, "a"), (4, 5, "c"), (10, 12, "c")], spans
    assert not any(isinstance(r, EdgeStart) and r.payload.key != "a" for r in committed)


def test_an_anti_join_of_edges_keyed_by_its_join_key_ends_its_fragments_where_memory_does(spark_session: Any, tmp_path: Path) -> None:
    """An anti-join of edges on the executors: the ends of both inputs' events reach their
    keys; a left event's own end, and a right event's start, bring an open fragment's end
    at their arrival, which the driver ends at once if it is final (the right input's CTI past
    it, and the left event's end known or the left input's CTI past it too), else at the move
    of a CTI that makes it so. The readings of ``_uncovered_by_key``, as
    edges (seconds), a CTI at each start (the right input's 2 s later):

        file 0:  a1 from 1    b2 from 2
        file 1:  a3 from 3   a1 ends 6   c1 from 4   d1 from 5   e1 from 6   d1 ends 8
                 b2 ends 9   a3 ends 7   c4 from 10  e1 ends 12

    (a1 is key a, value 1.0; values above 1.5 make the right input: b from 4 to 11, a from 5
    to 9, c from 12; the right input's CTI moves before the left's.) Out: a1's fragment from 1
    (open at the CTI at 2) ends at 5 when its own end (6) arrives, the right CTI at 5 already;
    b2's from 2 (open at 3) at 4 and a3's from 3 (open at 4) at 5 when the left CTI reaches
    their cuts (4, 5: they may end before until then); c1's from 4 (open at 5) waits at the
    right CTI 12 (c1 may end before 12) and ends at 12 at the flush, beside c [10, 12); d1's
    from 5 (open at 6) ends at 8 at the arrival of its own end (the right CTI at 8 already);
    e1's from 6 (open at 10) at 12 at its end's arrival. The committed output is the in-memory
    executor's item for item."""
    base, at, schema, files = _keyed_edges()
    committed, whole = _flushed_on_the_cluster(
        spark_session,
        tmp_path,
        files,
        schema,
        EventShape.EDGE,
        _uncovered_by_key,
        Keyed,
        Keyed,
        restarts=thorough(),
        end="until",
        kind="kind",
    )
    assert repr(committed) == repr(whole)
    seen = _timeline(committed, base, lambda payload: payload.key)
    assert seen == [
        ("cti", at(1)),
        ("EdgeStart", "a", 1, None),
        ("cti", at(2)),
        ("EdgeStart", "b", 2, None),
        ("cti", at(3)),
        ("EdgeEnd", "a", 1, 5),
        ("EdgeEnd", "b", 2, 4),
        ("EdgeStart", "a", 3, None),
        ("cti", at(4)),
        ("EdgeEnd", "a", 3, 5),
        ("EdgeStart", "c", 4, None),
        ("cti", at(5)),
        ("EdgeStart", "d", 5, None),
        ("cti", at(6)),
        ("EdgeEnd", "d", 5, 8),
        ("EdgeStart", "e", 6, None),
        ("cti", at(10)),
        ("EdgeEnd", "e", 6, 12),
        ("EdgeEnd", "c", 4, 12),
        ("Interval", "c", 10, 12),
    ], seen


def _outer_by_key(grouped: Any) -> Stream[KeyedPair]:
    """The readings left outer joined with those above 1.5 of their key (-1.0 for no match)."""
    readings: Stream[Keyed] = grouped._stream
    above = readings.where(lambda r: r.value > 1.5)
    return readings.left_outer_join(
        above,
        lambda a, b: a.key == b.key,
        lambda a, b: KeyedPair(a.key, a.value, b.value),
        unmatched=lambda a: KeyedPair(a.key, a.value, -1.0),
    )


def test_a_left_outer_join_of_edges_runs_its_join_and_anti_join_in_one_keyed_operator(spark_session: Any, tmp_path: Path) -> None:
    """A left outer join (a join and an anti-join of the same inputs on the same predicate,
    their results meeting at a union) runs on the executors as one keyed operator holding
    both halves (``BulkShape.partner``); the driver gives out each half's results through its
    own timeline, in the order the two read their inputs. ``_keyed_edges``'s readings and
    f1 from 2 (after b2, never ended), the right input those above 1.5 (b2, a3, c4), a CTI
    at each start (seconds):

        CTI 2:  a1's fragment from 1 out open (no a on the right yet)
        CTI 3:  a3 on the right (from 3) ends it at 3, final now (the right CTI at 3: no
                right event can start before); b2 x b2 from 2 out open, then f1's fragment
                from 2 (of one start, the pair went out first: at b2's arrival, the
                fragment in the sweep to 3)
        CTI 4:  a1 x a3 and a3 x a3 from 3 out open (a3 open)
        CTI 5:  c1's fragment from 4 out open
        CTI 6:  a1 x a3 ends at 6 (a1's end, arrived at 4, final once the right CTI passes
                6); d1's fragment from 5 out open
        CTI 10: b2 x b2 and a3 x a3 end at 9 and 7 (both ends known at their arrivals, in
                that order); d1's fragment ends at 8 in the sweep to 10 (d1 ended at 8), then
                c1's at 10 (c4 from 10 brought it, final at the right CTI 10); e1's fragment
                from 6 out open
        flush:  e1's fragment ends at 12; c1 x c4 and c4 x c4 from 10 out open, never
                ended (f1's fragment neither)

    A release puts ends first, in the order they went out, then events by start. The
    committed output is the in-memory executor's item for item. A checkpoint of the query
    whose work records claim no keyed nodes (as an earlier tempo wrote it, both halves on the
    driver below the release) is refused."""
    from tempo.plan.query import Query
    from tempo.spark.streaming.cluster import cluster_chain

    base, at, schema, files = _keyed_edges()
    files[0].insert(2, {"kind": "start", "ts": at(2), "until": None, "key": "f", "value": 1.0})
    for seq, row in enumerate(row for part in files for row in part):
        row["seq"] = seq
    chain = cluster_chain(
        Query.build(_outer_by_key(Stream.create("r", [], EventShape.EDGE, payload_type=Keyed).group_by(lambda r: r.key)).node)
    )
    assert not isinstance(chain, str) and len(chain) == 1 and chain[0].partner is not None
    committed, whole = _flushed_on_the_cluster(
        spark_session,
        tmp_path,
        files,
        schema,
        EventShape.EDGE,
        _outer_by_key,
        Keyed,
        KeyedPair,
        restarts=thorough(),
        layout=True,
        end="until",
        kind="kind",
    )
    assert repr(committed) == repr(whole)
    seen = _timeline(committed, base, lambda pair: (pair.key, pair.left, pair.right))
    assert seen == [
        ("cti", at(1)),
        ("EdgeStart", ("a", 1.0, -1.0), 1, None),
        ("cti", at(2)),
        ("EdgeEnd", ("a", 1.0, -1.0), 1, 3),
        ("EdgeStart", ("b", 2.0, 2.0), 2, None),
        ("EdgeStart", ("f", 1.0, -1.0), 2, None),
        ("cti", at(3)),
        ("EdgeStart", ("a", 1.0, 3.0), 3, None),
        ("EdgeStart", ("a", 3.0, 3.0), 3, None),
        ("cti", at(4)),
        ("EdgeStart", ("c", 1.0, -1.0), 4, None),
        ("cti", at(5)),
        ("EdgeEnd", ("a", 1.0, 3.0), 3, 6),
        ("EdgeStart", ("d", 1.0, -1.0), 5, None),
        ("cti", at(6)),
        ("EdgeEnd", ("b", 2.0, 2.0), 2, 9),
        ("EdgeEnd", ("a", 3.0, 3.0), 3, 7),
        ("EdgeEnd", ("d", 1.0, -1.0), 5, 8),
        ("EdgeEnd", ("c", 1.0, -1.0), 4, 10),
        ("EdgeStart", ("e", 1.0, -1.0), 6, None),
        ("cti", at(10)),
        ("EdgeEnd", ("e", 1.0, -1.0), 6, 12),
        ("EdgeStart", ("c", 1.0, 4.0), 10, None),
        ("EdgeStart", ("c", 4.0, 4.0), 10, None),
    ], seen


@attrs.frozen
class Tagged:
    tag: int
    key: str
    value: float


@attrs.frozen
class TaggedTrend:
    key: str
    tag: int
    value: float
    previous: float | None
    n: int


def _tagged_trend(grouped: Any) -> Stream[TaggedTrend]:
    return grouped.analytic(lambda k, r, a: TaggedTrend(k, r.tag, r.value, a.previous(lambda r: r.value, timedelta(seconds=9)), a.count()))


def test_an_analytic_s_keys_give_its_order_and_its_ends_across_a_restart(spark_session: Any, tmp_path: Path) -> None:
    """An analytic per key on the executors: the driver puts the keys' outputs in the
    analytic's order (by start, then payload: here the tag, not the key nor the arrival), the
    ends of released open outputs where they arrived, and ends an open output it released in
    an earlier run (the query stops after file 0 and starts again). Edges (seconds), a CTI at
    each start, per key the previous value within 9 s and a count:

        file 0:  b@5 tag 1 (10)   a@5 tag 3 (20)   c@5 tag 2 (30)   a@8 tag 0 (40)
        file 1:  b@5 ends at 9    a@8 ends at 12   c@10 tag 5 (50)  c@5 ends at 11

    The CTI at 8 releases the three events at 5, open, in tag order b, c, a; b's end comes
    next, before the CTI at 10, which releases a@8, whose end came first, as an interval
    (previous 20, n 2); c@5's end follows; the flush releases c@10, open (previous 30)."""
    from datetime import datetime, timezone

    from tempo.events import EdgeEnd, EdgeStart, Interval

    base = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def at(seconds: float) -> datetime:
        return base + timedelta(seconds=seconds)

    utc = pa.timestamp("us", tz="UTC")
    schema = pa.schema(
        [
            ("seq", pa.int64()),
            ("kind", pa.string()),
            ("ts", utc),
            ("until", utc),
            ("tag", pa.int64()),
            ("key", pa.string()),
            ("value", pa.float64()),
        ]
    )
    items = [
        [
            ("start", 5, None, 1, "b", 10.0),
            ("start", 5, None, 3, "a", 20.0),
            ("start", 5, None, 2, "c", 30.0),
            ("start", 8, None, 0, "a", 40.0),
        ],
        [("end", 5, 9, 1, "b", 10.0), ("end", 8, 12, 0, "a", 40.0), ("start", 10, None, 5, "c", 50.0), ("end", 5, 11, 2, "c", 30.0)],
    ]
    files = [
        [{"kind": kind, "ts": at(s), "until": None if e is None else at(e), "tag": t, "key": k, "value": v} for kind, s, e, t, k, v in part]
        for part in items
    ]
    for seq, row in enumerate(row for part in files for row in part):
        row["seq"] = seq

    committed, whole = _flushed_on_the_cluster(
        spark_session,
        tmp_path,
        files,
        schema,
        EventShape.EDGE,
        _tagged_trend,
        Tagged,
        TaggedTrend,
        restarts=True,
        end="until",
        kind="kind",
    )
    b, a5, c5 = TaggedTrend("b", 1, 10.0, None, 1), TaggedTrend("a", 3, 20.0, None, 1), TaggedTrend("c", 2, 30.0, None, 1)
    expected = [
        EdgeStart(at(5), b),
        EdgeStart(at(5), c5),
        EdgeStart(at(5), a5),
        EdgeEnd(at(5), at(9), b),
        Interval(at(8), at(12), TaggedTrend("a", 0, 40.0, 20.0, 2)),
        EdgeEnd(at(5), at(11), c5),
        EdgeStart(at(10), TaggedTrend("c", 5, 50.0, 30.0, 2)),
    ]
    assert [item for item in committed if not isinstance(item, Cti)] == expected
    assert committed == whole


@attrs.frozen
class Limit:
    key: str
    limit: float


@attrs.frozen
class KeyCount:
    key: str
    n: int


@attrs.frozen
class Checked:
    key: str
    n: int
    limit: float


def _counts_checked(readings: Any, limits: Any) -> Stream[Checked]:
    """Each key's count of readings per 10 s, joined with the limits of its key: a window
    whose results a join reads, the join's other input going around the window."""

    def settings() -> AdvanceTimeSettings:
        from tempo import AdvanceTimeGenerationSettings

        return AdvanceTimeSettings(
            AdvanceTimeGenerationSettings(frequency=1, delay=timedelta(0), advance_to_infinity_on_shutdown=True),
            policy=AdvanceTimePolicy.ADJUST,
        )

    counts = (
        Stream.create("readings", readings, EventShape.POINT, settings(), payload_type=Keyed)
        .group_by(lambda r: r.key)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda k, w: KeyCount(k, w.count()))
    )
    limited = Stream.create("limits", limits, EventShape.INTERVAL, settings(), payload_type=Limit)
    return counts.join(limited, lambda c, m: c.key == m.key, lambda c, m: Checked(c.key, c.n, m.limit))


def test_a_window_joined_with_an_input_going_around_it_runs_both_keyed_where_memory_places_them(spark_session: Any, tmp_path: Path) -> None:
    """Counts per key and 10 s of readings (points) joined with limits (intervals) of their key:
    the window keyed on the executors, the join its next hop, keyed by the key too; what
    reaches the join from the limits, recorded by the time query with the number of the
    window's CTI rows before it, goes to the join's feed at that place among them (seconds;
    a CTI at each start in both inputs; the arrival, ``@``, orders the two):

        file 0:  readings a 1 @1, a 4 @4, b 6 @6, a 12 @12     limits a [0, 30) 1.0 @2, b [5, 15) 0.0 @7
        file 1:  readings b 14 @15, b 25 @25                  limits a [11, 40) 5.0 @13, b [14, 22) 2.0 @16, c [26, 35) 9.0 @27

    The window's output CTI is its open window's start, the join's the lesser of it and the
    limits' CTI. At 12 the window gives a [0, 10) n 2 and b [0, 10) n 1 (its CTI 10); the
    limits' CTI is 5: the join releases a [0, 10) 1.0, then CTI 5. The limits' CTI at 11
    (@13) moves the join's to 10: b [5, 10) 0.0, CTI 10. At 25 the window gives a [10, 20)
    and b [10, 20) n 1 (CTI 20), paired with a's limits 1.0 and 5.0 and b's 0.0 and 2.0; the
    limits' CTI is 14: a [10, 20) 1.0, b [10, 15) 0.0, a [11, 20) 5.0, CTI 14. c's limit
    (@27, its CTI 26) moves the join's to 20: b [14, 20) 2.0, CTI 20. The flush: b [20, 30)
    n 1 pairs with 2.0, [20, 22), released as the join's CTI reaches 26, then infinity. File
    1 is one time batch (the query restarts after file 0, both files landed): were the
    limits' items given to the join after the window's CTI rows rather than among them, the
    join's CTI would jump from 5 to 11, and CTI 10 would not be there. The committed output
    is the in-memory executor's item for item."""
    import pyarrow.parquet as pq

    from tempo.plan.query import Query
    from tempo.spark.streaming import ParquetSink, StreamingExecutor, read_committed
    from tempo.spark.streaming.cluster import cluster_chain
    from tests.streaming.test_live_spark import _items, land

    _skip_without_tws()
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def at(seconds: float) -> datetime:
        return base + timedelta(seconds=seconds)

    utc = pa.timestamp("us", tz="UTC")
    reading_schema = pa.schema([("seq", pa.int64()), ("ts", utc), ("arrived", utc), ("key", pa.string()), ("value", pa.float64())])
    limit_schema = pa.schema(
        [("seq", pa.int64()), ("ts", utc), ("until", utc), ("arrived", utc), ("key", pa.string()), ("limit", pa.float64())]
    )
    reading_files = [[(1, "a", 1), (4, "a", 4), (6, "b", 6), (12, "a", 12)], [(14, "b", 15), (25, "b", 25)]]
    limit_files = [[(0, 30, "a", 1.0, 2), (5, 15, "b", 0.0, 7)], [(11, 40, "a", 5.0, 13), (14, 22, "b", 2.0, 16), (26, 35, "c", 9.0, 27)]]
    readings = [[{"ts": at(s), "arrived": at(a), "key": k, "value": 1.0} for s, k, a in part] for part in reading_files]
    limits = [[{"ts": at(s), "until": at(e), "arrived": at(a), "key": k, "limit": v} for s, e, k, v, a in part] for part in limit_files]
    for rows in (readings, limits):
        for seq, row in enumerate(row for part in rows for row in part):
            row["seq"] = seq
    folders = (tmp_path / "readings", tmp_path / "limits")

    def sources(tables: tuple[Any, Any] | None = None) -> tuple[Any, Any]:
        if tables is not None:
            return (
                tempo.sources.ArrowSource(tables[0], Keyed, start="ts", order="seq", arrival="arrived"),
                tempo.sources.ArrowSource(tables[1], Limit, start="ts", end="until", order="seq", arrival="arrived"),
            )
        return (
            ParquetSource(str(folders[0]), Keyed, start="ts", order="seq", arrival="arrived"),
            ParquetSource(str(folders[1]), Limit, start="ts", end="until", order="seq", arrival="arrived"),
        )

    query = _counts_checked(*sources())
    chain = cluster_chain(Query.build(query.node))
    assert not isinstance(chain, str) and [type(shape.window).__name__ for shape in chain] == ["WindowNode", "JoinNode"], chain

    def start() -> Any:
        return StreamingExecutor(spark_session, str(tmp_path / "ck"), engine="cluster").start(query, ParquetSink(str(tmp_path / "out")))

    for index in range(2):
        for folder, rows, schema in zip(folders, (readings, limits), (reading_schema, limit_schema)):
            land(folder, index, lambda tmp, part=rows[index], schema=schema: pq.write_table(pa.Table.from_pylist(part, schema=schema), tmp))
        live = start()
        try:
            if index == 0:
                live.process_all_available()
            else:
                live.flush()
        finally:
            live.stop()
    whole = InMemoryExecutor().run(
        _counts_checked(
            *sources(
                (
                    pa.Table.from_pylist([r for part in readings for r in part], schema=reading_schema),
                    pa.Table.from_pylist([r for part in limits for r in part], schema=limit_schema),
                )
            )
        )
    )
    committed = _items(read_committed(str(tmp_path / "out")), Checked)
    assert repr(committed) == repr(whole.raw)
    seen = _timeline(committed, base, lambda c: (c.key, c.n, c.limit))
    assert seen == [
        ("cti", at(0)),
        ("Interval", ("a", 2, 1.0), 0, 10),
        ("cti", at(5)),
        ("Interval", ("b", 1, 0.0), 5, 10),
        ("cti", at(10)),
        ("Interval", ("a", 1, 1.0), 10, 20),
        ("Interval", ("b", 1, 0.0), 10, 15),
        ("Interval", ("a", 1, 5.0), 11, 20),
        ("cti", at(14)),
        ("Interval", ("b", 1, 2.0), 14, 20),
        ("cti", at(20)),
        ("Interval", ("b", 1, 2.0), 20, 22),
        ("cti", at(26)),
    ], seen
