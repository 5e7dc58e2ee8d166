"""Random values at the edges, and queries that compute with them, for the value fuzz
(tests/conformance/test_value_fuzz.py): the differential tests draw random time structure over
tame values; these draw tame time structure over the values that break engines: NaN, ±0.0,
±inf, the largest and smallest floats and 64-bit integers, nulls in every nullable field, long
and unicode strings, many events at one time, and times at the limits of the calendar."""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import attrs
from hypothesis import strategies as st

import tempo
from tempo import AdvanceTimeGenerationSettings, AdvanceTimeSettings, EventShape, Point, Stream

NAN, INF = math.nan, math.inf

FLOATS = [NAN, 0.0, -0.0, INF, -INF, 1.7976931348623157e308, -1.7976931348623157e308, 5e-324, 1.5, -2.5, 2.0**53, 0.1, 3.0]
INTS = [0, 1, -1, 2**63 - 1, -(2**63), 2**62, -(2**62), 2**53 + 1, 7, -7, 3]
STRINGS = ["", "a", "b", "ß", "日本語", "😀", "a" * 300, "A", "a\x00b", "é", "e\u0301"]
BASES = [
    datetime(2024, 1, 1),
    datetime(1970, 1, 1),
    datetime(1969, 12, 31, 23, 59),
    datetime(1, 1, 1, 0, 30),
    datetime(9999, 12, 31, 23, 0),
]
"""Where the events' times start: ordinary, the epoch and just before it (negative ticks), and
half an hour from either end of Python's calendar (windows of a few minutes stay inside it)."""


@attrs.frozen
class Val:
    k: int
    f: float | None
    i: int | None
    s: str | None
    b: bool | None


@attrs.frozen
class FloatOut:
    k: int
    x: float | None


@attrs.frozen
class IntOut:
    k: int
    x: int | None


@attrs.frozen
class StrOut:
    k: int
    x: str | None


@attrs.frozen
class FloatStats:
    key: float | None
    n: int
    low: float | None
    high: float | None
    distinct: int
    first: float | None
    last: float | None


@attrs.frozen
class IntStats:
    key: str | None
    n: int
    total: int | None
    low: int | None
    high: int | None
    distinct: int


@attrs.frozen
class Matched:
    left: int
    right: int
    f: float | None


def _maybe(values: list[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.sampled_from(values))


@st.composite
def values(draw: st.DrawFn) -> Val:
    return Val(
        k=draw(st.integers(0, 2)),
        f=draw(_maybe(FLOATS)),
        i=draw(_maybe(INTS)),
        s=draw(_maybe(STRINGS) | st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)),
        b=draw(st.one_of(st.none(), st.booleans())),
    )


Query = Callable[[Stream[Val]], Stream[Any]]

QUERIES: dict[str, Query] = {
    # comparisons: the total order of floats, ints against floats, strings by code point
    "float_gt": lambda s: s.where(lambda r: r.f > 1.0),
    "float_eq_self": lambda s: s.where(lambda r: r.f == r.f),
    "float_le_inf": lambda s: s.where(lambda r: r.f <= tempo.lit(INF)),
    "float_ne_nan": lambda s: s.where(lambda r: r.f != tempo.lit(NAN)),
    "int_vs_float": lambda s: s.where(lambda r: r.i > r.f),
    "str_lt": lambda s: s.where(lambda r: (r.s < "b") | tempo.is_null(r.b) | (r.b == True)),  # noqa: E712
    # arithmetic: 64-bit integers, division by zero, float floor division and remainder
    "int_arith": lambda s: s.select(lambda r: IntOut(r.k, r.i * 2 - r.k)),
    "int_neg_abs": lambda s: s.select(lambda r: IntOut(r.k, abs(-r.i) + 0)),
    "int_floordiv_mod": lambda s: s.select(lambda r: IntOut(r.k, r.i // 3 + r.i % 3)),
    "int_div_by_value": lambda s: s.select(lambda r: FloatOut(r.k, r.k / r.i)),
    "float_arith": lambda s: s.select(lambda r: FloatOut(r.k, r.f * 2.0 - r.f / 3.0)),
    "float_floordiv_mod": lambda s: s.select(lambda r: FloatOut(r.k, (r.f // 0.5) + (r.f % 0.7))),
    "try_divide": lambda s: s.select(lambda r: FloatOut(r.k, tempo.try_divide(r.f, r.f))),
    "guarded_divide": lambda s: s.select(lambda r: FloatOut(r.k, tempo.when(r.i != 0, r.k / r.i, tempo.coalesce(r.f, -1.0)))),
    "str_concat": lambda s: s.select(lambda r: StrOut(r.k, r.s + "|" + r.s)),
    # keys: one NaN group, -0.0 with 0.0; aggregates over NaN, inf and 64-bit integers
    "float_key_window": lambda s: (
        s.group_by(lambda r: r.f)
        .tumbling(timedelta(minutes=1))
        .aggregate(
            lambda key, w: FloatStats(
                key=key,
                n=w.count(),
                low=w.min(lambda r: r.f),
                high=w.max(lambda r: r.f),
                distinct=w.count_distinct(lambda r: r.f),
                first=w.first(lambda r: r.f),
                last=w.last(lambda r: r.f),
            )
        )
    ),
    "str_key_sums": lambda s: (
        s.group_by(lambda r: r.s)
        .hopping(timedelta(minutes=2), timedelta(minutes=1))
        .aggregate(
            lambda key, w: IntStats(
                key=key,
                n=w.count(),
                total=w.sum(lambda r: r.i),
                low=w.min(lambda r: r.i),
                high=w.max(lambda r: r.i),
                distinct=w.count_distinct(lambda r: r.i),
            )
        )
    ),
    "float_key_join": lambda s: s.join(
        s.alter_event_duration(timedelta(seconds=30)), lambda a, b: a.f == b.f, lambda a, b: Matched(a.k, b.k, a.f)
    ),
    "running_sum": lambda s: s.group_by(lambda r: r.k).analytic(lambda k, r, a: IntOut(k, a.sum(lambda e: e.i))),
}


@st.composite
def value_queries(draw: st.DrawFn) -> tuple[str, Callable[[], Stream[Any]]]:
    """A query of ``QUERIES`` over 1-12 points of edge values at a few distinct times (many
    at one time) from one of ``BASES``, flushed at the end."""
    name = draw(st.sampled_from(sorted(QUERIES)))
    base = draw(st.sampled_from(BASES))
    rows = draw(st.lists(st.tuples(st.integers(0, 180), values()), min_size=1, max_size=12))
    rows.sort(key=lambda row: row[0])
    items: list[Any] = [Point(base + timedelta(seconds=t), v) for t, v in rows]
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(4, advance_to_infinity_on_shutdown=True))
    desc = f"{name} from {base} over {rows}"

    def build() -> Stream[Any]:
        return QUERIES[name](Stream.create("values", [*items], EventShape.POINT, settings, payload_type=Val))

    return desc, build


def canonical(text: str) -> str:
    """A result's repr with the sign of zero dropped: -0.0 equals 0.0 (docs/semantics.md 7.4),
    and which of two equal zeros an aggregate keeps is the engine's."""
    return text.replace("-0.0", "0.0")


@attrs.frozen
class TableStats:
    n: int
    total: int | None
    low: float | None
    high: float | None
    mean: float | None


@attrs.frozen
class FloatKeyed(TableStats):
    key: float | None


@attrs.frozen
class StrKeyed(TableStats):
    key: str | None


@attrs.frozen
class BoolKeyed(TableStats):
    key: bool | None


@attrs.frozen
class IntKeyed(TableStats):
    key: int


def _float_key(s: Stream[Val]) -> Stream[FloatKeyed]:
    return (
        s.group_by(lambda r: r.f)
        .tumbling(timedelta(minutes=1))
        .aggregate(
            lambda key, w: FloatKeyed(
                key=key,
                n=w.count(),
                total=w.sum(lambda r: r.i),
                low=w.min(lambda r: r.f),
                high=w.max(lambda r: r.f),
                mean=w.avg(lambda r: r.i),
            )
        )
    )


def _str_key(s: Stream[Val]) -> Stream[StrKeyed]:
    return (
        s.where(lambda r: r.f > -1.0)
        .group_by(lambda r: r.s)
        .hopping(timedelta(minutes=2), timedelta(minutes=1))
        .aggregate(
            lambda key, w: StrKeyed(
                key=key,
                n=w.count(),
                total=w.sum(lambda r: r.i),
                low=w.min(lambda r: r.i),
                high=w.max(lambda r: r.f),
                mean=w.avg(lambda r: r.i),
            )
        )
    )


def _bool_key(s: Stream[Val]) -> Stream[BoolKeyed]:
    return (
        s.select(lambda r: Val(r.k, r.f * 2.0, r.i // 3 - r.k, r.s, r.b))
        .group_by(lambda r: r.b)
        .tumbling(timedelta(seconds=40))
        .aggregate(
            lambda key, w: BoolKeyed(
                key=key,
                n=w.count(),
                total=w.sum(lambda r: r.i),
                low=w.min(lambda r: r.f),
                high=w.max(lambda r: r.i),
                mean=w.avg(lambda r: r.f),
            )
        )
    )


def _union(a: Stream[Val], b: Stream[Val]) -> Stream[IntKeyed]:
    return (
        a.union(b.where(lambda r: r.s != "a"))
        .group_by(lambda r: r.k)
        .hopping(timedelta(minutes=1), timedelta(seconds=30))
        .aggregate(
            lambda key, w: IntKeyed(
                key=key,
                n=w.count(),
                total=w.sum(lambda r: r.i * 2),
                low=w.min(lambda r: r.f),
                high=w.max(lambda r: r.f),
                mean=w.avg(lambda r: r.i),
            )
        )
    )


def _join(a: Stream[Val], b: Stream[Val]) -> Stream[IntKeyed]:
    return (
        a.join(
            b.alter_event_duration(timedelta(seconds=30)),
            lambda x, y: (x.k == y.k) & (x.f <= y.f),
            lambda x, y: Val(x.k, y.f, x.i, y.s, x.b),
        )
        .group_by(lambda r: r.k)
        .tumbling(timedelta(minutes=1))
        .aggregate(
            lambda key, w: IntKeyed(
                key=key,
                n=w.count(),
                total=w.sum(lambda r: r.i),
                low=w.min(lambda r: r.f),
                high=w.max(lambda r: r.f),
                mean=w.avg(lambda r: r.i),
            )
        )
    )


TABLE_QUERIES: dict[str, Callable[..., Stream[Any]]] = {
    "float_key": _float_key,
    "str_key": _str_key,
    "bool_key": _bool_key,
    "union": _union,
    "join": _join,
}
"""Window aggregates a live query computes in bulk (``tempo.runtime.bulk.bulk_shape``), over
the fields of ``Val``: sums and averages of integers only (float sums of partials in another
order may differ in the last bits, or overflow to inf or not: 7.4), minima and maxima of any."""


@st.composite
def value_tables(draw: st.DrawFn) -> tuple[str, Callable[..., Stream[Any]], list[Any]]:
    """A query of ``TABLE_QUERIES`` over one or two Arrow tables of edge values, as a live
    source reads them: rows numbered by ``seq`` in one arrival order across the inputs (a
    second apart), points a little out of order (some late), CTI and heartbeat rows, times
    from one of ``BASES``; CTIs generated by count or by time span, DROP or ADJUST, flushed
    at the end."""
    import pyarrow as pa

    from tempo import AdvanceTimePolicy
    from tempo.sources import ArrowSource

    name = draw(st.sampled_from(sorted(TABLE_QUERIES)))
    inputs = 2 if name in ("union", "join") else 1
    base = draw(st.sampled_from(BASES))
    n = draw(st.integers(1, 24))
    columns: list[dict[str, list[Any]]] = [{c: [] for c in ("seq", "kind", "ts", "arr", "k", "f", "i", "s", "b")} for _ in range(inputs)]
    for seq in range(n):
        v = draw(values())
        kind = draw(st.sampled_from(["point"] * 8 + ["cti", "heartbeat"]))
        start = base + timedelta(seconds=seq * 5 + draw(st.sampled_from([0, 0, 0, 1, -7, -30])))
        for column, x in zip(
            columns[draw(st.integers(0, inputs - 1))].values(), (seq, kind, start, base + timedelta(seconds=seq), v.k, v.f, v.i, v.s, v.b)
        ):
            column.append(x)
    stamp = pa.timestamp("us", tz="UTC")
    schema = pa.schema(
        [
            ("seq", pa.int64()),
            ("kind", pa.string()),
            ("ts", stamp),
            ("arr", stamp),
            ("k", pa.int64()),
            ("f", pa.float64()),
            ("i", pa.int64()),
            ("s", pa.string()),
            ("b", pa.bool_()),
        ]
    )
    tables = [pa.Table.from_pydict(c, schema=schema) for c in columns]
    frequency = draw(st.sampled_from([1, 3, timedelta(seconds=20)]))
    delay = timedelta(seconds=draw(st.sampled_from([0, 5])))
    policy = draw(st.sampled_from([AdvanceTimePolicy.DROP, AdvanceTimePolicy.ADJUST]))
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(frequency, delay, advance_to_infinity_on_shutdown=True), policy=policy)

    def build(read: Callable[..., Any] | None = None) -> Stream[Any]:
        """The query over the tables, or over ``read(i, **columns)``, the sources of a live run."""
        columns = {"start": "ts", "kind": "kind", "arrival": "arr", "order": "seq"}
        streams = [
            Stream.create(f"in{i}", ArrowSource(t, Val, **columns) if read is None else read(i, **columns), EventShape.POINT, settings)
            for i, t in enumerate(tables)
        ]
        return TABLE_QUERIES[name](*streams)

    desc = f"{name} from {base}, {settings}, over {[t.to_pylist() for t in tables]}"
    return desc, build, tables
