"""docs/spark.md's "Known differences" stay true.

Each bullet of that list has a test here that shows the difference (so that the day it goes
away the test fails and the list is mended), or a stated reason why it cannot be shown on
this machine; differences that once were listed and are gone have a test that both
executors now agree. A test compares the list in the document with ``LISTED``.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

from tempo import Cti, EdgeEnd, EdgeStart, EventShape, InMemoryExecutor, InputError, Interval, Point, Stream
from tests.conformance.compare import event_multiset

pytestmark = pytest.mark.spark

SPARK_MD = Path(__file__).resolve().parents[2] / "docs" / "spark.md"

LISTED = {
    "Float sums and averages": "test_float_sums_agree_to_a_tolerance",
    "Order of `events`": "cannot fail: an order left unspecified (semantics.md 5.7)",
    "`raw`": "test_raw_shows_an_edge_pair_as_one_interval",
    "`tempo.udf` datetime arguments": "needs Python workers in a time zone other than UTC, which the shared session is not",
}
"""Each bold bullet title of the list, and the test that shows it (or why none can)."""

T0 = datetime(2024, 1, 1)


def T(s: float) -> datetime:
    return T0 + timedelta(seconds=s)


def A(step: int) -> datetime:
    """Arrival time: the step of semantics.md 5.8's table."""
    return datetime(2024, 6, 1) + timedelta(seconds=step)


@attrs.frozen
class V:
    k: str
    x: int


@attrs.frozen
class F:
    x: float


@attrs.frozen
class Q:
    q: int


def _known_differences() -> list[str]:
    text = SPARK_MD.read_text()
    section = text.split("Known differences (", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^- \*\*(.+?)\*\*(?!\w)", section, re.M)


def test_the_list_in_the_document_is_the_list_tested_here() -> None:
    assert _known_differences() == list(LISTED)
    for title, test in LISTED.items():
        assert not test.startswith("test_") or test in globals(), (title, test)


def test_float_sums_agree_to_a_tolerance(spark_executor: Any) -> None:
    """Thirds do not add exactly: the sums agree to 1e-9, whatever the order of addition."""
    items = [Point(T(i), F(1 / 3 + i / 7)) for i in range(200)] + [Cti(datetime.max)]
    query = lambda: (
        Stream.create("f", items, EventShape.POINT)
        .tumbling(timedelta(seconds=50))
        .aggregate(  # noqa: E731
            lambda w: F(w.sum(lambda r: r.x))
        )
    )
    got = [e.payload.x for e in spark_executor.run(query()).events]
    want = [e.payload.x for e in InMemoryExecutor().run(query()).events]
    assert len(got) == len(want) == 4
    assert got == pytest.approx(want, rel=1e-12, abs=0)


def test_raw_shows_an_edge_pair_as_one_interval(spark_executor: Any) -> None:
    """semantics.md 5.8's open edge: in memory a start edge then an end edge, on Spark one interval."""
    a = V("a", 0)
    left = lambda: Stream.create(  # noqa: E731
        "left",
        [EdgeStart(T(0), a, arrival=A(1)), Cti(T(4), arrival=A(3)), EdgeEnd(T(0), T(7), a, arrival=A(5)), Cti(T(9), arrival=A(6))],
        EventShape.EDGE,
    )
    right = lambda: Stream.create(  # noqa: E731
        "right",
        [Interval(T(2), T(12), V("a", 1), arrival=A(2)), Cti(T(5), arrival=A(4)), Cti(T(12), arrival=A(7))],
        EventShape.INTERVAL,
    )
    query = lambda: left().join(right(), on=lambda l, r: l.k == r.k, select=lambda l, r: V(l.k, r.x))  # noqa: E731
    memory, spark = InMemoryExecutor().run(query()), spark_executor.run(query())
    out = V("a", 1)
    assert memory.raw == [EdgeStart(T(2), out), Cti(T(4)), EdgeEnd(T(2), T(7), out), Cti(T(5)), Cti(T(9))]
    assert spark.raw == [Interval(T(2), T(7), out), Cti(T(4)), Cti(T(5)), Cti(T(9))]
    assert event_multiset(memory) == event_multiset(spark)


# Differences once listed, now gone: both executors agree.


def test_floor_division_of_integers_is_exact_beyond_2_53(spark_executor: Any) -> None:
    """Once through a double on Spark ((2**60 + 1) // 1 gave 2**60); now Spark's ``div``,
    floored: exact (-(2**60 + 1) // 2 = -(2**59) - 1 as in Python)."""
    items = [Point(T(0), V("a", 2**60 + 1)), Point(T(1), V("b", -(2**60 + 1))), Cti(datetime.max)]
    query = lambda: Stream.create("big", items, EventShape.POINT).select(lambda r: Q(r.x // 2 + r.x // 1))  # noqa: E731
    want = [Q((2**60 + 1) // 2 + 2**60 + 1), Q(-(2**60 + 1) // 2 - 2**60 - 1)]
    assert InMemoryExecutor().run(query()).payloads() == want
    assert spark_executor.run(query()).payloads() == want


def test_remainder_with_a_negative_divisor_follows_python(spark_executor: Any) -> None:
    items = [Point(T(0), V("a", 7)), Point(T(1), V("b", -7)), Cti(datetime.max)]
    query = lambda: Stream.create("r", items, EventShape.POINT).select(lambda r: Q(r.x % -3))  # noqa: E731
    assert InMemoryExecutor().run(query()).payloads() == [Q(7 % -3), Q(-7 % -3)] == [Q(-2), Q(-1)]
    assert spark_executor.run(query()).payloads() == [Q(-2), Q(-1)]


def test_an_end_edge_before_its_start_edge_in_a_table_is_an_error(spark_executor: Any, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from tempo.sources import ParquetSource

    path = tmp_path / "edges.parquet"
    pq.write_table(
        pa.table(
            {
                "seq": [0, 1, 2],
                "kind": ["end", "start", "cti"],
                "k": ["a", "a", "a"],
                "x": [0, 0, 0],
                "s": [T(0), T(0), T(9)],
                "e": [T(5), None, None],
            }
        ),
        path,
    )
    query = lambda: Stream.create(  # noqa: E731
        "edges", ParquetSource(str(path), V, start="s", end="e", kind="kind", order="seq"), EventShape.EDGE
    )
    for executor in (InMemoryExecutor(), spark_executor):
        with pytest.raises(InputError, match="start edge"):
            executor.run(query())
