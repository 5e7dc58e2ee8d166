"""The vectorised executor beyond the conformance suite (which runs every executor-
parametrised test on it, and skips, with the reason, what it has no rule for yet): what it
must already run, its column-by-column ingress of tables and what makes a table fall back to
the reference ingress, and ``to_polars`` against ``Result.to_arrow``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    EventShape,
    InMemoryExecutor,
    InputError,
    Stream,
    UnsupportedError,
)
from tempo.plan.query import Query
from tempo.sources import ArrowSource, ParquetSource
from tests.conformance.compare import assert_executors_agree
from tests.strategies import BINARY, UNARY, Ev, Ref
from tests.budget import examples

pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")

from tempo.vectorised import VectorisedExecutor  # noqa: E402
from tempo.vectorised.compiler import check_supported  # noqa: E402

NOT_YET: set[str] = set()
"""The differential strategies' operators the vectorised executor has no rule for yet (none
now): every other one must run, so a rule lost fails here rather than thinning the
differential's draws."""


def test_it_runs_every_strategy_operator_but_those_not_yet_built() -> None:
    left = Stream.create("left", [], EventShape.POINT, payload_type=Ev)
    right = Stream.create("right", [], EventShape.POINT, payload_type=Ref)
    missing = set()
    for name, unary in UNARY.items():
        try:
            check_supported(Query.build(unary(left).node))
        except UnsupportedError:
            missing.add(name)
    for name, binary in BINARY.items():
        try:
            check_supported(Query.build(binary(left, right).node))
        except UnsupportedError:
            missing.add(name)
    assert missing == NOT_YET


@attrs.frozen
class Reading:
    key: int
    value: float


@attrs.frozen
class Total:
    key: int
    n: int
    total: float


FLUSH = AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency=None, advance_to_infinity_on_shutdown=True))
T0 = datetime(2024, 1, 1, tzinfo=timezone.utc)


def _table(starts: list[Any], keys: list[Any], values: list[Any]) -> Any:
    return pa.table(
        {"t": pa.array(starts, pa.timestamp("us", tz="UTC")), "key": pa.array(keys, pa.int64()), "value": pa.array(values, pa.float64())}
    )


def _per_key(table: Any, settings: AdvanceTimeSettings = FLUSH) -> Stream[Total]:
    return _per_key_of(ArrowSource(table, Reading, start="t"), settings)


def _per_key_of(source: Any, settings: AdvanceTimeSettings = FLUSH) -> Stream[Total]:
    s = Stream.create("in", source, EventShape.POINT, settings)
    return s.group_by(lambda e: e.key).tumbling(timedelta(seconds=10)).aggregate(lambda k, w: Total(k, w.count(), w.sum(lambda e: e.value)))


def test_a_table_read_column_by_column_agrees_with_the_reference() -> None:
    """Nothing can be late (a flush only): the column path; its metrics count every row."""
    starts = [T0 + timedelta(seconds=s) for s in (1, 3, 12, 2, 25, 11)]
    table = _table(starts, [1, 2, 1, 1, 2, 2], [0.5, 1.5, 2.0, 4.0, 8.0, 16.0])
    assert_executors_agree(InMemoryExecutor(), VectorisedExecutor(), "columns", lambda: _per_key(table))
    r = VectorisedExecutor().run(_per_key(table))
    assert r.metrics["in"].received == r.metrics["in"].admitted == 6
    assert sorted(((e.start, e.payload) for e in r.events), key=repr) == sorted(
        [
            (T0, Total(1, 2, 4.5)),
            (T0, Total(2, 1, 1.5)),
            (T0 + timedelta(seconds=10), Total(1, 1, 2.0)),
            (T0 + timedelta(seconds=10), Total(2, 1, 16.0)),
            (T0 + timedelta(seconds=20), Total(2, 1, 8.0)),
        ],
        key=repr,
    )


def test_a_table_breaking_a_rule_raises_the_reference_error() -> None:
    """A null in a field that takes none: the column check sees it and the reference ingress
    raises its own error, naming the row."""
    table = _table([T0, T0 + timedelta(seconds=1)], [1, None], [1.0, 2.0])
    errors = []
    for executor in (InMemoryExecutor(), VectorisedExecutor()):
        with pytest.raises(InputError) as info:
            executor.run(_per_key(table))
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "#1" in errors[0]


def test_generated_ctis_drop_a_late_row_column_by_column() -> None:
    """CTIs after every 2 rows, 5 s behind their start: 10 11 | CTI 6 | 12 1 (its candidate,
    -4, is ignored: CTIs never go back) | 13: the row at 1 starts before the CTI 6 in force
    and is dropped alike, on record."""
    starts = [T0 + timedelta(seconds=s) for s in (10, 11, 12, 1, 13)]
    table = _table(starts, [1, 1, 1, 1, 1], [1.0, 2.0, 3.0, 4.0, 5.0])
    settings = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(frequency=2, delay=timedelta(seconds=5), advance_to_infinity_on_shutdown=True)
    )
    assert_executors_agree(InMemoryExecutor(), VectorisedExecutor(), "generated", lambda: _per_key(table, settings))
    r = VectorisedExecutor().run(_per_key(table, settings))
    m = r.metrics["in"]
    assert (m.dropped, m.ctis_generated, m.ctis_ignored) == (1, 2, 1)  # CTI 6 and the flush; -4 ignored
    assert [(x.position, x.cti) for x in r.rejected] == [(3, T0 + timedelta(seconds=6))]


@attrs.frozen
class Span:
    key: int
    value: float


@settings(
    max_examples=examples(300),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    starts=st.lists(st.integers(0, 60), min_size=1, max_size=30),
    lengths=st.data(),
    shape=st.sampled_from([EventShape.POINT, EventShape.INTERVAL]),
    every=st.one_of(st.integers(1, 5), st.sampled_from([timedelta(seconds=3), timedelta(seconds=10)])),
    delay=st.integers(0, 8),
    policy=st.sampled_from(list(AdvanceTimePolicy)),
    flush=st.booleans(),
    order=st.sampled_from(["file", "increasing", "unsorted"]),
    parquet=st.booleans(),
)
def test_a_table_with_generated_ctis_agrees_with_the_reference(
    starts: list[int],
    lengths: st.DataObject,
    shape: EventShape,
    every: Any,
    delay: int,
    policy: AdvanceTimePolicy,
    flush: bool,
    order: str,
    parquet: bool,
    tmp_path_factory: Any,
) -> None:
    """Tables whose CTIs their rows generate (by count or period, with a delay), any disorder,
    either policy: the column-by-column verdicts give the reference's events, CTIs, metrics
    and rejections. In file order or by an order column (increasing with gaps, or unsorted
    with ties: a stable sort), from an Arrow table or a Parquet file (scanned lazily)."""
    begin = [T0 + timedelta(seconds=s) for s in starts]
    ends = [b + timedelta(seconds=lengths.draw(st.integers(1, 20))) for b in begin]
    table = pa.table(
        {
            "t": pa.array(begin, pa.timestamp("us", tz="UTC")),
            "u": pa.array(ends, pa.timestamp("us", tz="UTC")),
            "key": pa.array([s % 3 for s in starts], pa.int64()),
            "value": pa.array([float(s) for s in starts], pa.float64()),
        }
    )
    columns: dict[str, Any] = {"end": "u" if shape is EventShape.INTERVAL else None}
    if order != "file":
        seq = (
            [2 * i for i in range(len(starts))]
            if order == "increasing"
            else lengths.draw(st.lists(st.integers(0, 5), min_size=len(starts), max_size=len(starts)))
        )
        table = table.append_column("seq", pa.array(seq, pa.int64()))
        columns["order"] = "seq"
    path = None
    if parquet:
        import pyarrow.parquet as pq

        path = str(tmp_path_factory.mktemp("t") / "in.parquet")
        pq.write_table(table, path, row_group_size=4)
    gen = AdvanceTimeGenerationSettings(frequency=every, delay=timedelta(seconds=delay), advance_to_infinity_on_shutdown=flush)
    settings = AdvanceTimeSettings(gen, policy=policy)

    def build() -> Stream[Any]:
        source: Any = ParquetSource(path, Span, start="t", **columns) if path else ArrowSource(table, Span, start="t", **columns)
        s = Stream.create("in", source, shape, settings)
        return (
            s.group_by(lambda e: e.key)
            .tumbling(timedelta(seconds=10))
            .aggregate(lambda k, w: Total(k, w.count(), w.sum(lambda e: e.value)))
        )

    assert_executors_agree(InMemoryExecutor(), VectorisedExecutor(), f"{shape} {settings}", build)
    # metrics() alone counts the verdicts without making the rejections or the rows.
    assert VectorisedExecutor().metrics(build()) == InMemoryExecutor().run(build()).metrics


def test_to_polars_has_the_columns_of_result_to_arrow() -> None:
    starts = [T0 + timedelta(seconds=s) for s in (1, 3, 12)]
    table = _table(starts, [1, 2, 1], [0.5, 1.5, 2.0])
    expected = pl.from_arrow(InMemoryExecutor().run(_per_key(table)).to_arrow())
    got = VectorisedExecutor().to_polars(_per_key(table))
    assert got.columns == expected.columns
    assert got.schema == expected.schema
    assert got.sort("tempo_start", "key").equals(expected.sort("tempo_start", "key"))


def test_the_embedded_default_runs_tables_on_polars_and_the_rest_in_memory(tmp_path: Any) -> None:
    """``EmbeddedExecutor`` (``get_executor("embedded")``, the examples' default) takes the
    vectorised executor for a query whose inputs it reads column by column (tables with a
    kind column too), and the in-memory reference for anything else (an item list, ordering
    settings over a kind column); the results are the reference's either way."""
    import pyarrow.parquet as pq

    from tempo import Point, get_executor
    from tempo.executors import EmbeddedExecutor
    from tests.conformance.compare import assert_same_results

    embedded = get_executor("embedded")
    assert isinstance(embedded, EmbeddedExecutor)
    starts = [T0 + timedelta(seconds=s) for s in (10, 11, 12, 1, 13)]
    table = _table(starts, [1, 2, 1, 1, 2], [1.0, 2.0, 3.0, 4.0, 5.0])
    path = str(tmp_path / "in.parquet")
    pq.write_table(table, path)
    every_2 = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(frequency=2, delay=timedelta(seconds=5), advance_to_infinity_on_shutdown=True)
    )
    items = [Point(t, Reading(k, v)) for t, k, v in zip(starts, [1, 2, 1, 1, 2], [1.0, 2.0, 3.0, 4.0, 5.0])]
    kinds = table.append_column("kind", pa.array(["point"] * len(starts)))
    arrived = table.append_column("arr", table["t"])
    from tempo import EventOrderingSettings

    ordered = AdvanceTimeSettings(FLUSH.generation, ordering=EventOrderingSettings())
    cases = {
        "ordering settings": (_per_key_of(ArrowSource(arrived, Reading, start="t", arrival="arr"), ordered), VectorisedExecutor),
        "arrow table": (_per_key(table, every_2), VectorisedExecutor),
        "parquet file": (_per_key_of(ParquetSource(path, Reading, start="t"), every_2), VectorisedExecutor),
        "item list": (_per_key_of(items, every_2), InMemoryExecutor),
        "kind column": (_per_key_of(ArrowSource(kinds, Reading, start="t", kind="kind"), every_2), VectorisedExecutor),
        "ordering settings, kind column": (
            _per_key_of(ArrowSource(kinds.append_column("arr", table["t"]), Reading, start="t", kind="kind", arrival="arr"), ordered),
            InMemoryExecutor,
        ),
    }
    for name, (query, chosen) in cases.items():
        assert type(embedded.choose(query)) is chosen, name
        assert_same_results(embedded.run(query), InMemoryExecutor().run(query))


@settings(
    max_examples=examples(300),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    gaps=st.lists(st.integers(0, 4), min_size=1, max_size=25),
    data=st.data(),
    shape=st.sampled_from([EventShape.POINT, EventShape.INTERVAL]),
    out_of_order=st.sampled_from([0, 3, 10]),
    late=st.sampled_from([None, 5, 15]),
    early=st.sampled_from([None, 5, 60]),
    policy=st.sampled_from(list(AdvanceTimePolicy)),
    flush=st.booleans(),
    shuffled=st.booleans(),
    substreams=st.booleans(),
)
def test_a_table_with_ordering_settings_agrees_with_the_reference(
    gaps: list[int],
    data: st.DataObject,
    shape: EventShape,
    out_of_order: int,
    late: int | None,
    early: int | None,
    policy: AdvanceTimePolicy,
    flush: bool,
    shuffled: bool,
    substreams: bool,
    monkeypatch: Any,
) -> None:
    """ASA's ordering settings (out-of-order tolerance, late-arrival tolerance, early-arrival
    window; substreams by key or none) on a table with an arrival column: the verdicts as
    columns give the reference's events, CTIs (the clock's and the keys' included), metrics
    (per substream too), watermark delays and rejections. With an order column, the rows may
    be stored out of order."""
    import random

    from tempo import EventOrderingSettings
    from tempo.vectorised import ingress as vx

    taken: list[str] = []
    real = vx._ordered_verdicts

    def spy(*args: Any) -> Any:
        taken.append(args[0].name)
        return real(*args)

    monkeypatch.setattr(vx, "_ordered_verdicts", spy)
    arrivals = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    starts = [a + data.draw(st.integers(-20, 10)) for a in arrivals]
    ends = [s + data.draw(st.integers(1, 10)) for s in starts]
    rows = list(range(len(gaps)))
    if shuffled:
        random.Random(len(gaps)).shuffle(rows)
    at = lambda xs: pa.array([T0 + timedelta(seconds=xs[i]) for i in rows], pa.timestamp("us", tz="UTC"))  # noqa: E731
    table = pa.table(
        {
            "t": at(starts),
            "u": at(ends),
            "arr": at(arrivals),
            "seq": pa.array(rows, pa.int64()),
            "key": pa.array([starts[i] % 3 for i in rows], pa.int64()),
            "value": pa.array([float(starts[i]) for i in rows], pa.float64()),
        }
    )
    seconds = lambda x: None if x is None else timedelta(seconds=x)  # noqa: E731
    if substreams and late is None:
        late = 5  # substreams need a late-arrival tolerance
    ordering = EventOrderingSettings(timedelta(seconds=out_of_order), seconds(late), seconds(early))
    settings = AdvanceTimeSettings(FLUSH.generation if flush else None, policy=policy, ordering=ordering)

    def build() -> Stream[Any]:
        source = ArrowSource(table, Span, start="t", end="u" if shape is EventShape.INTERVAL else None, arrival="arr", order="seq")
        s = Stream.create("in", source, shape, settings, over=(lambda e: e.key) if substreams else None)
        return (
            s.group_by(lambda e: e.key)
            .tumbling(timedelta(seconds=10))
            .aggregate(lambda k, w: Total(k, w.count(), w.sum(lambda e: e.value)))
        )

    assert_executors_agree(
        InMemoryExecutor(), VectorisedExecutor(), f"{shape} {settings} shuffled={shuffled} substreams={substreams}", build
    )
    assert taken == ["in"]
    assert VectorisedExecutor().metrics(build()) == InMemoryExecutor().run(build()).metrics


@attrs.frozen
class Maybe:
    key: int
    value: float | None


@attrs.frozen
class Merged:
    key: int
    n: int
    total: float | None
    mean: float | None
    low: float | None
    high: float | None


@settings(
    max_examples=examples(120), deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(-20, 40), st.integers(0, 2), st.one_of(st.none(), st.just(float("nan")), st.integers(-8, 8).map(lambda v: v / 2))
        ),
        min_size=1,
        max_size=30,
    ),
    hop=st.integers(1, 6),
    extra=st.integers(1, 12),
    offset=st.integers(0, 9),
    cti=st.one_of(st.none(), st.integers(-10, 50)),
    stamp=st.sampled_from(["lifetime", "latest", "earliest"]),
)
def test_overlapping_windows_over_points_by_panes_agree_with_the_reference(
    monkeypatch: pytest.MonkeyPatch,
    rows: list[tuple[int, int, float | None]],
    hop: int,
    extra: int,
    offset: int,
    cti: int | None,
    stamp: str,
) -> None:
    """Hopping windows over points (size = hop + 1..12 s: a multiple of the hop or not), any
    offset, a CTI or the flush at the end, values with nulls and NaN: built by panes
    (``tempo.lowering.windows.by_panes``, checked with a spy), the reference's results, to
    the bit."""
    from tempo import Cti, Point, WindowTimestamp
    from tempo.lowering import windows

    built: list[int] = []
    real = windows.by_panes

    def spy(*args: Any) -> Any:
        built.append(1)
        return real(*args)

    monkeypatch.setattr(windows, "by_panes", spy)

    def query() -> Stream[Merged]:
        items: list[Any] = [Point(T0 + timedelta(seconds=t), Maybe(k, v)) for t, k, v in sorted(rows, key=lambda r: r[0])]
        if cti is not None:
            items.append(Cti(T0 + timedelta(seconds=cti)))
        window = (
            Stream.create("in", items, EventShape.POINT, FLUSH if cti is None else None)
            .group_by(lambda e: e.key)
            .hopping(timedelta(seconds=hop + extra), timedelta(seconds=hop), offset=timedelta(seconds=offset))
        )
        return window.aggregate(
            lambda k, w: Merged(
                k, w.count(), w.sum(lambda e: e.value), w.avg(lambda e: e.value), w.min(lambda e: e.value), w.max(lambda e: e.value)
            ),
            timestamp={"lifetime": None, "latest": WindowTimestamp.LATEST, "earliest": WindowTimestamp.EARLIEST}[stamp],
        )

    assert_executors_agree(InMemoryExecutor(), VectorisedExecutor(), f"hop {hop} size {hop + extra}", query)
    assert built, "the windows were not built by panes"


def _bucket_spy(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One entry per join compiled: whether it joined on time buckets (the plan
    ``tempo.lowering.physical.join_buckets`` chose)."""
    from tempo.lowering import physical

    used: list[bool] = []
    real = physical.join_buckets

    def spy(*args: Any) -> Any:
        out = real(*args)
        used.append(out is not None)
        return out

    monkeypatch.setattr(physical, "join_buckets", spy)
    return used


def test_points_join_open_intervals_on_cut_buckets(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The timeline of ``tests/test_spark_native_plans.py``'s test of the same name, whose
    first and last readings sit one tick inside the cut's first and last 12.5 s buckets."""
    from tests.test_spark_native_plans import EVERY_2, FLUSHED, Match, _events, _reference, at

    used = _bucket_spy(monkeypatch)
    ref = _reference([(0, 10, 1, 1.0), (10, None, 1, 2.0), (5, 20, 2, 3.0)])
    readings = [(12.499999, 1, 1.0), (13, 2, 8.0), (21, 2, 4.0), (25, 1, 16.0)]
    for advance, parquet in ((FLUSHED, None), (FLUSHED, str(tmp_path / "readings.parquet")), (EVERY_2, None)):
        query = _events(readings, advance, parquet).join(ref, on=lambda e, r: e.key == r.key, select=lambda e, r: Match(e.value * r.r))
        result = VectorisedExecutor().run(query)
        assert used and used[-1], "the join was not on time buckets"
        assert sorted((e.start, e.payload.product) for e in result.events) == [(at(12.499999), 2.0), (at(13), 24.0), (at(25), 32.0)]


def test_a_reading_moved_past_the_rows_meets_the_reference_of_its_new_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timeline of ``tests.test_spark_native_plans.moved_past_the_rows``."""
    from tests.test_spark_native_plans import MOVED_PAST_THE_ROWS_RESULT, moved_past_the_rows

    used = _bucket_spy(monkeypatch)
    result = VectorisedExecutor().run(moved_past_the_rows())
    assert used == [True], "the join was not on time buckets"
    assert sorted((e.start, e.end, e.payload.product) for e in result.events) == MOVED_PAST_THE_ROWS_RESULT


def _joins() -> Any:
    from tests.test_spark_native_plans import JOINS

    return JOINS


@settings(max_examples=examples(150), deadline=None, derandomize=True, database=None)
@given(drawn=_joins())
def test_cut_buckets_agree_with_the_reference(drawn: dict[str, Any]) -> None:
    """Any join ``tests.test_spark_native_plans.JOINS`` draws: the reference's results (on
    buckets whenever the rows they list stay within bounds)."""
    from tests.test_spark_native_plans import join_query

    assert_executors_agree(InMemoryExecutor(), VectorisedExecutor(), repr(drawn), lambda: join_query(**drawn))


@attrs.frozen
class Level:
    device: str
    value: float


@attrs.frozen
class Pair:
    device: str
    reading: float
    level: float


def _item_rows(draw: Any, shape: EventShape, arrivals: bool, all_arrive: bool) -> dict[str, list[Any]]:
    """Rows of items of every kind the shape takes, CTI rows and heartbeats among them (kind
    words in any case), in seconds; edges closed mostly in any order, equal payloads
    included; arrivals not decreasing, some left to inherit unless ``all_arrive``."""
    kinds: list[str] = []
    starts: list[int | None] = []
    ends: list[int | None] = []
    devices: list[str | None] = []
    values: list[float | None] = []
    opened: list[tuple[int, str, float]] = []
    for _ in range(draw(st.integers(0, 14))):
        word = draw(
            st.sampled_from(
                {
                    EventShape.POINT: ["point", "point", "point", "cti", "heartbeat"],
                    EventShape.INTERVAL: ["interval", "interval", "interval", "cti", "heartbeat"],
                    EventShape.EDGE: ["start", "start", "end", "end", "cti", "heartbeat"],
                }[shape]
            )
        )
        if word == "heartbeat" and not arrivals:
            word = "cti"
        if word == "end" and not opened:
            word = "start"
        device, value = draw(st.sampled_from(["a", "b"])), float(draw(st.integers(0, 2)))
        start = draw(st.integers(0, 30))
        end: int | None = start + draw(st.integers(1, 10))
        if word == "end":
            start, device, value = opened.pop(draw(st.integers(0, len(opened) - 1)))
            end = start + draw(st.integers(1, 12))
        elif word == "start":
            opened.append((start, device, value))
            end = None
        elif word in ("cti", "heartbeat"):
            end, device, value = None, None, None
        kinds.append(draw(st.sampled_from([word, word.upper(), word.capitalize()])))
        starts.append(start)
        ends.append(end)
        devices.append(device)
        values.append(value)
    arrival: list[int | None] = []
    now = 0
    for kind in kinds:
        now += draw(st.integers(0, 3))
        inherit = not all_arrive and kind.lower() != "heartbeat" and draw(st.integers(0, 4)) == 0
        arrival.append(None if inherit else now)
    return {"kind": kinds, "t": starts, "u": ends, "arr": arrival, "device": devices, "value": values}


def _items_table(rows: dict[str, list[Any]], arrivals: bool) -> Any:
    def times(values: list[int | None]) -> Any:
        return pa.array([None if v is None else T0 + timedelta(seconds=v) for v in values], pa.timestamp("us", tz="UTC"))

    columns = {
        "kind": pa.array(rows["kind"], pa.string()),
        "t": times(rows["t"]),
        "u": times(rows["u"]),
        "device": pa.array(rows["device"], pa.string()),
        "value": pa.array(rows["value"], pa.float64()),
    }
    if arrivals:
        columns["arr"] = times(rows["arr"])
    return pa.table(columns)


@settings(
    max_examples=examples(300),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    data=st.data(),
    shape=st.sampled_from(list(EventShape)),
    arrivals=st.booleans(),
    ctis=st.sampled_from(["none", "explicit", "count", "period"]),
    delay=st.integers(-1, 4),
    policy=st.sampled_from(list(AdvanceTimePolicy)),
    imports=st.sampled_from([None, "before", "after"]),
    flush=st.booleans(),
)
def test_a_table_of_items_of_every_kind_agrees_with_the_reference(
    data: st.DataObject,
    shape: EventShape,
    arrivals: bool,
    ctis: str,
    delay: int,
    policy: AdvanceTimePolicy,
    imports: str | None,
    flush: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A table of items (a kind column: points, intervals or edges as the shape takes, CTI
    rows, heartbeats; an arrival column or none), CTIs from its CTI rows, generation by
    count or period, and imported from a table of readings declared before or after it,
    either policy, or no settings (CTI rows only): read column by column, the reference's events, CTIs, metrics,
    rejections, or its error."""
    from tempo import AdvanceTimeImportSettings
    from tempo.vectorised import ingress

    imports = imports if arrivals else None
    taken: list[str] = []
    real = ingress._item_verdicts

    def spy(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        if out is not None:
            taken.append(args[0].name)
        return out

    monkeypatch.setattr(ingress, "_item_verdicts", spy)
    rows = _item_rows(data.draw, shape, arrivals, all_arrive=imports is not None)
    table = _items_table(rows, arrivals)
    n = data.draw(st.integers(1, 6))
    readings = pa.table(
        {
            "t": pa.array([T0 + timedelta(seconds=data.draw(st.integers(0, 30))) for _ in range(n)], pa.timestamp("us", tz="UTC")),
            "arr": pa.array(sorted(T0 + timedelta(seconds=data.draw(st.integers(0, 40))) for _ in range(n)), pa.timestamp("us", tz="UTC")),
            "device": pa.array([data.draw(st.sampled_from(["a", "b"])) for _ in range(n)]),
            "value": pa.array([float(i) for i in range(n)]),
        }
    )
    gen = None
    if ctis in ("count", "period"):
        every: Any = data.draw(st.integers(1, 3)) if ctis == "count" else timedelta(seconds=5)
        gen = AdvanceTimeGenerationSettings(frequency=every, delay=timedelta(seconds=delay), advance_to_infinity_on_shutdown=flush)
    elif flush:
        gen = AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True)
    imported = AdvanceTimeImportSettings("readings") if imports else None
    levels_settings = None if gen is None and imported is None else AdvanceTimeSettings(gen, imported, policy)
    readings_settings = AdvanceTimeSettings(
        AdvanceTimeGenerationSettings(frequency=1, delay=timedelta(seconds=delay), advance_to_infinity_on_shutdown=True)
    )
    columns: dict[str, Any] = {"end": "u", "kind": "kind", **({"arrival": "arr"} if arrivals else {})}

    def build() -> Stream[Any]:
        levels = Stream.create("levels", ArrowSource(table, Level, start="t", **columns), shape, levels_settings)
        if imports is None:
            return levels
        reading = Stream.create("readings", ArrowSource(readings, Level, start="t", arrival="arr"), EventShape.POINT, readings_settings)
        first, second = (reading, levels) if imports == "before" else (levels, reading)
        joined = first.join(second, on=lambda a, b: a.device == b.device, select=lambda a, b: Pair(a.device, a.value, b.value))
        return joined

    desc = f"{shape} {levels_settings} {imports} {rows}"
    expected = InMemoryExecutor().run(build()) if _runs(build) else None
    assert_executors_agree(InMemoryExecutor(), VectorisedExecutor(), desc, build)
    if expected is not None:  # without an error to raise, every table was read as items
        assert "levels" in taken, desc


def _runs(build: Any) -> bool:
    try:
        InMemoryExecutor().run(build())
    except Exception:
        return False
    return True


EDGE_ROWS = [  # (kind, start s, end s, device, value), in input order
    ("cti", 10, None, None, None),  # 0
    ("start", 5, None, "a", 1.0),  # 1 late: ADJUST opens it at 10; DROP drops it
    ("end", 5, 10, "a", 1.0),  # 2 ends at the CTI, not before: ADJUST ends it one tick past its moved start
    ("start", 12, None, "b", 2.0),  # 3
    ("cti", 20, None, None, None),  # 4
    ("end", 12, 15, "b", 2.0),  # 5 ends before the CTI: ADJUST ends it at 20; DROP leaves it open
    ("start", 3, None, "a", 2.0),  # 6 late: ADJUST opens it at 20
    ("start", 25, None, "a", 1.0),  # 7
    ("start", 25, None, "a", 1.0),  # 8 equal to 7
    ("end", 25, 30, "a", 1.0),  # 9 closes 7 (equal edges close in the order they opened)
    ("end", 25, 40, "a", 1.0),  # 10 closes 8
]


@pytest.mark.parametrize("policy", list(AdvanceTimePolicy))
@pytest.mark.parametrize("executor", [InMemoryExecutor, VectorisedExecutor])
def test_edges_and_cti_rows_of_a_table_by_hand(policy: AdvanceTimePolicy, executor: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``EDGE_ROWS`` with explicit CTI rows and the flush, under each policy; the vectorised
    executor reads them column by column."""
    from tempo import INFINITY, TICK, Rule
    from tempo.result import Action
    from tempo.vectorised import ingress

    taken: list[str] = []
    real = ingress._item_verdicts
    monkeypatch.setattr(ingress, "_item_verdicts", lambda *a, **k: taken.append(a[0].name) or real(*a, **k))
    rows = {
        "kind": [r[0] for r in EDGE_ROWS],
        "t": [r[1] for r in EDGE_ROWS],
        "u": [r[2] for r in EDGE_ROWS],
        "arr": [None] * len(EDGE_ROWS),
        "device": [r[3] for r in EDGE_ROWS],
        "value": [r[4] for r in EDGE_ROWS],
    }
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(advance_to_infinity_on_shutdown=True), policy=policy)
    stream = Stream.create(
        "levels", ArrowSource(_items_table(rows, False), Level, start="t", end="u", kind="kind"), EventShape.EDGE, settings
    )
    result = executor().run(stream)
    assert taken == (["levels"] if executor is VectorisedExecutor else [])

    def t(s: float) -> datetime:
        return T0 + timedelta(seconds=s)

    events = sorted((e.start, e.end, e.payload.device, e.payload.value) for e in result.events)
    rejections = sorted((j.position, j.rule, j.action, j.cti) for j in result.rejected)
    m = result.metrics["levels"]
    if policy is AdvanceTimePolicy.ADJUST:
        assert events == [
            (t(10), t(10) + TICK, "a", 1.0),
            (t(12), t(20), "b", 2.0),
            (t(20), INFINITY, "a", 2.0),
            (t(25), t(30), "a", 1.0),
            (t(25), t(40), "a", 1.0),
        ]
        assert rejections == [
            (1, Rule.START_BEFORE_CTI, Action.ADJUSTED, t(10)),
            (5, Rule.END_BEFORE_CTI, Action.ADJUSTED, t(20)),
            (6, Rule.START_BEFORE_CTI, Action.ADJUSTED, t(20)),
        ]
        assert (m.received, m.admitted, m.adjusted, m.dropped) == (9, 9, 3, 0)
    else:
        assert events == [(t(12), INFINITY, "b", 2.0), (t(25), t(30), "a", 1.0), (t(25), t(40), "a", 1.0)]
        assert rejections == [
            (1, Rule.START_BEFORE_CTI, Action.DROPPED, t(10)),
            (2, Rule.START_EDGE_DROPPED, Action.DROPPED, t(10)),
            (5, Rule.END_BEFORE_CTI, Action.DROPPED, t(20)),
            (6, Rule.START_BEFORE_CTI, Action.DROPPED, t(20)),
        ]
        assert (m.received, m.admitted, m.adjusted, m.dropped) == (9, 5, 0, 4)
    assert (m.ctis_explicit, m.ctis_generated) == (2, 1)


@attrs.frozen
class Ranked:
    key: int
    value: float
    rank: int


@attrs.frozen
class Gathered:
    key: int
    n: int
    first: float | None
    values: list[float]


def test_which_queries_follow_the_input_order() -> None:
    """``Query.follows_input_order``: windows of ordinary aggregates (first and collect order
    their values by start and payload), joins and the stateless operators do not look at
    the order in which events starting together arrive; top_k's ties, analytic functions and
    followed_by may."""
    from tempo import Point

    a = Stream.create("a", [Point(T0, Span(1, 1.0))], EventShape.POINT)
    b = Stream.create("b", [Point(T0, Span(1, 2.0))], EventShape.POINT)
    free = [
        a.where(lambda e: e.value > 0).select(lambda e: Span(e.key, e.value * 2)),
        a.group_by(lambda e: e.key)
        .tumbling(timedelta(seconds=10))
        .aggregate(lambda k, w: Gathered(k, w.count(), w.first(lambda e: e.value), w.collect(lambda e: e.value))),
        a.join(b, on=lambda l, r: l.key == r.key, select=lambda l, r: Span(l.key, r.value)),
    ]
    following = [
        a.tumbling(timedelta(seconds=10)).top_k(1, by=lambda e: e.key, select=lambda e, rank: Ranked(e.key, e.value, rank)),
        a.analytic(lambda e, w: Span(e.key, w.sum(lambda x: x.value))),
        a.followed_by(b, within=timedelta(seconds=5), on=lambda l, r: l.key == r.key, select=lambda l, r: Span(l.key, r.value)),
    ]
    assert [Query.build(q.node).follows_input_order for q in free] == [False] * len(free)
    assert [Query.build(q.node).follows_input_order for q in following] == [True] * len(following)


@settings(
    max_examples=examples(200),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    starts=st.lists(st.integers(0, 12), min_size=1, max_size=25),
    data=st.data(),
    parquet=st.booleans(),
    ranked=st.booleans(),
    settings_=st.sampled_from(["flush", "none"]),
)
def test_a_table_without_ctis_in_any_order_agrees_with_the_reference(
    starts: list[int],
    data: st.DataObject,
    parquet: bool,
    ranked: bool,
    settings_: str,
    tmp_path_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A table where nothing can be late, its rows stored out of order (by an order column
    with ties, sometimes a null), many starting together: windows of first and collect read
    it in any order (the order column only checked, Parquet statistics proving the rows good
    where they can), a top_k with ties in the input's order; the reference's results or its
    error either way."""
    from tempo.vectorised import ingress

    seq = data.draw(
        st.lists(
            st.one_of(st.integers(0, 6), st.none() if data.draw(st.integers(0, 9)) == 0 else st.integers(0, 6)),
            min_size=len(starts),
            max_size=len(starts),
        )
    )
    table = pa.table(
        {
            "t": pa.array([s * 1_000_000 for s in starts], pa.int64()),
            "seq": pa.array(seq, pa.int64()),
            "key": pa.array([s % 2 for s in starts], pa.int64()),
            "value": pa.array([float(i % 3) for i in range(len(starts))], pa.float64()),
        }
    )
    path = None
    if parquet:
        import pyarrow.parquet as pq

        path = str(tmp_path_factory.mktemp("t") / "in.parquet")
        pq.write_table(table, path, row_group_size=7)
    proved: list[bool] = []
    real = ingress._proved_by_statistics
    monkeypatch.setattr(ingress, "_proved_by_statistics", lambda *a: proved.append((out := real(*a)) is not None) or out)
    ordered: list[bool] = []
    real_read = ingress._read_columns
    monkeypatch.setattr(ingress, "_read_columns", lambda node, follows=True: ordered.append(follows) or real_read(node, follows))
    settings_value = FLUSH if settings_ == "flush" else None

    def build() -> Stream[Any]:
        source: Any = (
            ParquetSource(path, Span, start="t", order="seq", time_origin=T0, time_unit="us")
            if path
            else ArrowSource(table, Span, start="t", order="seq", time_origin=T0, time_unit="us")
        )
        s = Stream.create("in", source, EventShape.POINT, settings_value)
        window = s.group_by(lambda e: e.key).tumbling(timedelta(seconds=5))
        if ranked:
            return window.top_k(2, by=lambda e: e.value, select=lambda e, rank: Ranked(e.key, e.value, rank))
        return window.aggregate(lambda k, w: Gathered(k, w.count(), w.first(lambda e: e.value), w.collect(lambda e: e.value)))

    assert_executors_agree(InMemoryExecutor(), VectorisedExecutor(), f"{starts} {seq} {ranked}", build)
    assert ordered and ordered[-1] is ranked, "the order column was read when no operator looks at it, or skipped when one does"
    if parquet and not ranked and None not in seq:
        assert proved and proved[-1], "the Parquet statistics did not prove the rows good"
