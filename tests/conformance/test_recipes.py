"""The recipes of docs/recipes.md, run against their timelines on every executor.

The page's ```python blocks are executed in order as one module (``R`` below), so the queries
tested here are the page's own, character for character; each test builds the inputs of a
recipe's timeline and checks, by hand from docs/semantics.md, every released event, every
output CTI and which CTI released what (``check``), and on the in-memory executor the raw
items where the recipe's text describes them (``check_raw_steps``). The blocks are also
checked by ``mypy --strict``, as a user's program would be.

Conventions as on the page: ``M(m)`` is minute m after 10:00 on 2024-01-01 (naive, so results
are naive), ``INF`` naive ``datetime.max``; inputs carry explicit CTIs and no arrivals, so they
are read one after another in declaration order.
"""

from __future__ import annotations

import re
import sysconfig
import types
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import tempo
from tempo import TICK, Cti, EventShape, Point, Stream, WindowTimestamp
from tests.conformance.test_operators import INF, run
from tests.conformance.test_window_kinds import at, check, check_raw_steps, span

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "recipes.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def doc_blocks() -> list[tuple[int, str]]:
    """Each ```python block of the page with the 1-based line of its first line."""
    text = DOC.read_text()
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def doc_module() -> types.ModuleType:
    """The page's blocks run in order in one module; each keeps its line numbers in the page,
    so a traceback points at the page's line. A class or function may be defined only once."""
    module = types.ModuleType("recipes_md")
    module.__file__ = str(DOC)
    defined: dict[str, int] = {}
    for line, code in doc_blocks():
        before = dict(vars(module))
        exec(compile("\n" * (line - 1) + code, str(DOC), "exec", dont_inherit=True), vars(module))
        for name, value in vars(module).items():
            if isinstance(value, type | types.FunctionType) and getattr(value, "__module__", None) == "recipes_md":
                if name in before and before[name] is not value:
                    raise AssertionError(f"docs/recipes.md line {line}: {name} is defined again (first at line {defined[name]})")
                defined.setdefault(name, line)
    return module


R: Any = doc_module()


def M(m: float) -> datetime:
    return datetime(2024, 1, 1, 10, 0) + timedelta(minutes=m)


MIN = timedelta(minutes=1)


# --------------------------------------------------------------------------------------
# 1. A join within a time range
# --------------------------------------------------------------------------------------


def toll_booths() -> tuple[Stream[Any], Stream[Any]]:
    """Entries A@1 (booth 1), B@3, C@4, A@8 (booth 2), CTIs 10, 20; then exits B@2 (before B's
    entry), A@6, |7, A@9, B@13 (exactly 10 after), |14, C@15 (11 after), |20."""
    entries = Stream.create(
        "entries",
        [
            Point(M(1), R.Entry("A", 1)),
            Point(M(3), R.Entry("B", 1)),
            Point(M(4), R.Entry("C", 2)),
            Point(M(8), R.Entry("A", 2)),
            Cti(M(10)),
            Cti(M(20)),
        ],
        EventShape.POINT,
    )
    exits = Stream.create(
        "exits",
        [
            Point(M(2), R.Exit("B", 7)),
            Point(M(6), R.Exit("A", 8)),
            Cti(M(7)),
            Point(M(9), R.Exit("A", 9)),
            Point(M(13), R.Exit("B", 9)),
            Cti(M(14)),
            Point(M(15), R.Exit("C", 9)),
            Cti(M(20)),
        ],
        EventShape.POINT,
    )
    return entries, exits


def test_datediff_join_between_0_and_10_includes_both_bounds(executor: Any) -> None:
    """Reaches [1, 11], [8, 18] (A), [3, 13] (B), [4, 14] (C); each trip at its exit, released
    at the first output CTI (the exits', as the entries' arrive first) past it. B's exit at 13
    is exactly 10 after its entry: in, as BETWEEN includes its bounds."""
    entries, exits = toll_booths()
    r = run(executor, R.trips(entries, exits, timedelta(0), 10 * MIN))
    check(
        r,
        [
            (M(7), [at(M(6), R.Trip("A", 1, 8))]),
            (M(14), [at(M(9), R.Trip("A", 1, 9)), at(M(9), R.Trip("A", 2, 9)), at(M(13), R.Trip("B", 1, 9))]),
            (M(20), []),
        ],
    )
    assert r.withheld is None


def test_datediff_join_less_than_10_minutes(executor: Any) -> None:
    """high = 10 min - TICK: the reach of B is [3, 13), so B's exit at 13 no longer pairs."""
    entries, exits = toll_booths()
    r = run(executor, R.trips(entries, exits, timedelta(0), 10 * MIN - TICK))
    check(
        r,
        [
            (M(7), [at(M(6), R.Trip("A", 1, 8))]),
            (M(14), [at(M(9), R.Trip("A", 1, 9)), at(M(9), R.Trip("A", 2, 9))]),
            (M(20), []),
        ],
    )


def test_datediff_join_either_order(executor: Any) -> None:
    """BETWEEN -5 AND 5: reaches [-4, 6], [3, 13] (A), [-2, 8] (B), [-1, 9] (C). Pairs: B exit 2
    with entry 3; A exit 6 with entries 1 (exactly 5 before) and 8; A exit 9 with entry 8. The
    entries' CTIs move back 5 (to 5, 15), so the output CTIs are 7, 14 and min(15, 20) = 15."""
    entries, exits = toll_booths()
    r = run(executor, R.trips(entries, exits, -5 * MIN, 5 * MIN))
    check(
        r,
        [
            (M(7), [at(M(2), R.Trip("B", 1, 7)), at(M(6), R.Trip("A", 1, 8)), at(M(6), R.Trip("A", 2, 8))]),
            (M(14), [at(M(9), R.Trip("A", 2, 9))]),
            (M(15), []),
        ],
    )


def test_datediff_join_stamped_at_the_entry(executor: Any) -> None:
    """The page's variant: the exits get the reach ([x - 10, x]), the entries stay points, so
    trips are stamped at their entry: A@1 (exits 6 and 9), B@3 (exit 13), A@8 (exit 9). The
    exits' CTIs move back 10 (-3, 4, 10): the trips at 1 and 3 go out at 4, the one at 8 at 10."""
    entries, exits = toll_booths()
    low, high = timedelta(0), 10 * MIN
    r = run(
        executor,
        entries.join(
            exits.alter_event_lifetime(-high, high - low + TICK),
            on=lambda n, x: n.plate == x.plate,
            select=lambda n, x: R.Trip(plate=n.plate, entered_at=n.booth, left_at=x.booth),
        ),
    )
    check(
        r,
        [
            (M(-3), []),
            (M(4), [at(M(1), R.Trip("A", 1, 8)), at(M(1), R.Trip("A", 1, 9)), at(M(3), R.Trip("B", 1, 9))]),
            (M(10), [at(M(8), R.Trip("A", 2, 9))]),
        ],
    )


def test_datediff_join_half_open_is_the_plain_duration(executor: Any) -> None:
    """`entries.alter_event_duration(10 min)` joined as in `trips` gives trips(0, 10 min - TICK)."""
    entries, exits = toll_booths()
    r = run(
        executor,
        entries.alter_event_duration(10 * MIN).join(
            exits, on=lambda n, x: n.plate == x.plate, select=lambda n, x: R.Trip(plate=n.plate, entered_at=n.booth, left_at=x.booth)
        ),
    )
    check(
        r,
        [
            (M(7), [at(M(6), R.Trip("A", 1, 8))]),
            (M(14), [at(M(9), R.Trip("A", 1, 9)), at(M(9), R.Trip("A", 2, 9))]),
            (M(20), []),
        ],
    )


# --------------------------------------------------------------------------------------
# 2. Impressions without a click
# --------------------------------------------------------------------------------------


def ads() -> tuple[Stream[Any], Stream[Any]]:
    """Impressions u1/ad1 @11, u2/ad1 @12, u1/ad2 @14, u3/ad1 @15, CTIs 16, 40; then clicks
    u1/ad1 @13, u3/ad1 @14 (before its impression), |18, u2/ad1 @22 (exactly 10 after), |23,
    |26, |40."""
    impressions = Stream.create(
        "impressions",
        [
            Point(M(11), R.Impression("u1", "ad1")),
            Point(M(12), R.Impression("u2", "ad1")),
            Point(M(14), R.Impression("u1", "ad2")),
            Point(M(15), R.Impression("u3", "ad1")),
            Cti(M(16)),
            Cti(M(40)),
        ],
        EventShape.POINT,
    )
    clicks = Stream.create(
        "clicks",
        [
            Point(M(13), R.Click("u1", "ad1")),
            Point(M(14), R.Click("u3", "ad1")),
            Cti(M(18)),
            Point(M(22), R.Click("u2", "ad1")),
            Cti(M(23)),
            Cti(M(26)),
            Cti(M(40)),
        ],
        EventShape.POINT,
    )
    return impressions, clicks


def test_impressions_without_a_click_within_10_minutes(executor: Any) -> None:
    """Answers [3, 13], [4, 14], [12, 22]: @11 and @12 are answered (the click at 22 exactly 10
    after counts), @14 (another ad) and @15 (clicked before) are not. Output CTIs are the
    clicks' moved back 10 (8, 13, 16, 30; the impressions' 40 is ahead): @14 and @15 wait for
    the clicks' CTI past 24 and 25, i.e. 26, which is output CTI 16."""
    impressions, clicks = ads()
    r = run(executor, R.unclicked(impressions, clicks, 10 * MIN))
    check(
        r,
        [
            (M(8), []),
            (M(13), []),
            (M(16), [at(M(14), R.Impression("u1", "ad2")), at(M(15), R.Impression("u3", "ad1"))]),
            (M(30), []),
        ],
    )
    assert r.withheld is None


def test_impressions_without_a_click_less_than_10_minutes(executor: Any) -> None:
    """within - TICK: answers [c - 10 + 1 tick, c], CTIs moved back by 10 minutes less a tick. The
    click at 22 no longer answers @12, which goes out at 13+ (the clicks' CTI 23)."""
    impressions, clicks = ads()
    r = run(executor, R.unclicked(impressions, clicks, 10 * MIN - TICK))
    check(
        r,
        [
            (M(8) + TICK, []),
            (M(13) + TICK, [at(M(12), R.Impression("u2", "ad1"))]),
            (M(16) + TICK, [at(M(14), R.Impression("u1", "ad2")), at(M(15), R.Impression("u3", "ad1"))]),
            (M(30) + TICK, []),
        ],
    )


def test_impressions_without_a_click_stamped_at_the_verdict(executor: Any) -> None:
    """`.shift_event_time(within)`: the results at 24 and 25, where the verdict is known; the
    output CTIs move by 10 too (18, 23, 26, 40), so they go out at 26, the clicks' CTI past 25."""
    impressions, clicks = ads()
    r = run(executor, R.unclicked(impressions, clicks, 10 * MIN).shift_event_time(10 * MIN))
    check(
        r,
        [
            (M(18), []),
            (M(23), []),
            (M(26), [at(M(24), R.Impression("u1", "ad2")), at(M(25), R.Impression("u3", "ad1"))]),
            (M(40), []),
        ],
    )


def test_impressions_extended_instead_give_stretches(executor: Any) -> None:
    """The page's counter-example: [11, 21) cut by the click at 13 into [11, 13) and [13+, 21);
    [12, 22), [14, 24), [15, 25) whole. Output CTIs are the clicks' (the impressions' are
    ahead); every stretch starts before 18."""
    impressions, clicks = ads()
    r = run(executor, R.unclicked_stretches(impressions, clicks, 10 * MIN))
    check(
        r,
        [
            (
                M(18),
                [
                    span(M(11), M(13), R.Impression("u1", "ad1")),
                    span(M(13) + TICK, M(21), R.Impression("u1", "ad1")),
                    span(M(12), M(22), R.Impression("u2", "ad1")),
                    span(M(14), M(24), R.Impression("u1", "ad2")),
                    span(M(15), M(25), R.Impression("u3", "ad1")),
                ],
            ),
            (M(23), []),
            (M(26), []),
            (M(40), []),
        ],
    )


# --------------------------------------------------------------------------------------
# 3. Deduplication
# --------------------------------------------------------------------------------------


def message_items(flush: bool = False) -> list[Any]:
    """m1 @1 @4 @7 @12, m2 @2 @7, m3 @9 twice (identical), m4 @10 with bodies y then x;
    CTIs 5, 10, 15 (and the flush)."""
    m = R.Message
    items: list[Any] = [
        Point(M(1), m("m1", "a")),
        Point(M(2), m("m2", "b")),
        Point(M(4), m("m1", "a")),
        Cti(M(5)),
        Point(M(7), m("m1", "a")),
        Point(M(7), m("m2", "b")),
        Point(M(9), m("m3", "c")),
        Point(M(9), m("m3", "c")),
        Cti(M(10)),
        Point(M(10), m("m4", "y")),
        Point(M(10), m("m4", "x")),
        Point(M(12), m("m1", "a")),
        Cti(M(15)),
    ]
    return items + [Cti(INF)] if flush else items


def messages(flush: bool = False) -> Stream[Any]:
    return Stream.create("messages", message_items(flush), EventShape.POINT)


def D(id: str, body: str, copies: int = 1) -> Any:
    return R.Delivered(id, body, copies)


def test_one_per_instant_counts_exact_copies(executor: Any) -> None:
    """One-tick windows per (id, body), stamped at their start: one point per distinct message
    and instant, at the first CTI past it; the output CTI is the input's (no pull-back)."""
    r = run(executor, R.one_per_instant(messages()))
    check(
        r,
        [
            (M(5), [at(M(1), D("m1", "a")), at(M(2), D("m2", "b")), at(M(4), D("m1", "a"))]),
            (M(10), [at(M(7), D("m1", "a")), at(M(7), D("m2", "b")), at(M(9), D("m3", "c", 2))]),
            (M(15), [at(M(10), D("m4", "x")), at(M(10), D("m4", "y")), at(M(12), D("m1", "a"))]),
        ],
    )


def test_deduplication_within_5_minutes(executor: Any) -> None:
    """previous within 5 minutes: m1 @4 (3 after @1) and @7 (3 after @4, a dropped one) go;
    m1 @12 and m2 @7 (exactly 5 after) stay; m3's copies are one event; m4 x (first by payload)
    stays and y (0 after x) goes. Each released at the first CTI past it."""
    r = run(executor, R.drop_repeats(R.one_per_instant(messages()), 5 * MIN))
    check(
        r,
        [
            (M(5), [at(M(1), D("m1", "a")), at(M(2), D("m2", "b"))]),
            (M(10), [at(M(7), D("m2", "b")), at(M(9), D("m3", "c", 2))]),
            (M(15), [at(M(10), D("m4", "x")), at(M(12), D("m1", "a"))]),
        ],
    )


def test_analytic_alone_keeps_exact_copies(executor: Any) -> None:
    """Without one_per_instant the two copies of m3 at 9 are peers: both see no previous, both
    stay."""
    delivered = Stream.create(
        "delivered",
        [Point(item.start, D(item.payload.id, item.payload.body)) if isinstance(item, Point) else item for item in message_items()],
        EventShape.POINT,
    )
    r = run(executor, R.drop_repeats(delivered, 5 * MIN))
    check(
        r,
        [
            (M(5), [at(M(1), D("m1", "a")), at(M(2), D("m2", "b"))]),
            (M(10), [at(M(7), D("m2", "b")), at(M(9), D("m3", "c")), at(M(9), D("m3", "c"))]),
            (M(15), [at(M(10), D("m4", "x")), at(M(12), D("m1", "a"))]),
        ],
    )


def test_deduplication_at_the_boundary_with_a_tick_more(executor: Any) -> None:
    """within + TICK: m2 @7 and m1 @12, exactly 5 minutes after the previous, are dropped too."""
    r = run(executor, R.drop_repeats(R.one_per_instant(messages()), 5 * MIN + TICK))
    check(
        r,
        [
            (M(5), [at(M(1), D("m1", "a")), at(M(2), D("m2", "b"))]),
            (M(10), [at(M(9), D("m3", "c", 2))]),
            (M(15), [at(M(10), D("m4", "x"))]),
        ],
    )


def test_first_per_tumbling_window(executor: Any) -> None:
    """Windows [0,5), [5,10), [10,15): the first of each id in each, at the window's earliest
    start, joined back; m4's x and y are both at the earliest start of m4 in [10,15). Released
    when the window completes (the window's output CTI is the input's here: each CTI is a
    window boundary)."""
    r = run(executor, R.first_per_window(R.one_per_instant(messages()), 5 * MIN))
    check(
        r,
        [
            (M(5), [at(M(1), D("m1", "a")), at(M(2), D("m2", "b"))]),
            (M(10), [at(M(7), D("m1", "a")), at(M(7), D("m2", "b")), at(M(9), D("m3", "c", 2))]),
            (M(15), [at(M(10), D("m4", "x")), at(M(10), D("m4", "y")), at(M(12), D("m1", "a"))]),
        ],
    )


def test_first_per_tumbling_window_one_per_instant(executor: Any) -> None:
    """drop_repeats(..., TICK) after it keeps the first by payload at one instant: m4 x."""
    r = run(executor, R.drop_repeats(R.first_per_window(R.one_per_instant(messages()), 5 * MIN), TICK))
    check(
        r,
        [
            (M(5), [at(M(1), D("m1", "a")), at(M(2), D("m2", "b"))]),
            (M(10), [at(M(7), D("m1", "a")), at(M(7), D("m2", "b")), at(M(9), D("m3", "c", 2))]),
            (M(15), [at(M(10), D("m4", "x")), at(M(12), D("m1", "a"))]),
        ],
    )


def test_first_per_tumbling_window_with_asa_edges(executor: Any) -> None:
    """offset=TICK: windows [0+,5+), [5+,10+), [10+,15+), so m4 @10 falls in [5+,10+). A window
    completes at the first CTI past its end, and its output CTI is pulled back to the earliest
    incomplete window's start: 0+ at the input CTI 5, 5+ at 10, 10+ at 15, then the flush.

    The join meets the messages twice (through the window and directly), and which of its sides
    an input CTI reaches first is not specified (test_operators.py, the join with its own
    shifted copy), so the join may also forward an input CTI (5, 10, 15) before the window's
    5+, 10+ reach it. Checked: the output CTIs include 0+, 5+, 10+ and ∞ and nothing else but
    those; each event is released by the first of these at or after the CTI that released it,
    i.e. with the input CTI that completed its window.
    """
    r = run(executor, R.first_per_window(R.one_per_instant(messages(flush=True)), 5 * MIN, offset=TICK))
    steps = [M(0) + TICK, M(5) + TICK, M(10) + TICK, INF]
    assert set(steps) <= set(r.ctis) <= set(steps) | {M(5), M(10), M(15)}, r.ctis
    released: dict[datetime, list[tuple[datetime, str]]] = {c: [] for c in steps}
    for e in r.events:
        by = next(c for c in r.ctis if c > e.start)
        released[next(c for c in steps if c >= by)].append((e.start, repr(e.payload)))
    expected = {
        steps[0]: [],
        steps[1]: [(M(1), D("m1", "a")), (M(2), D("m2", "b"))],
        steps[2]: [(M(7), D("m1", "a")), (M(7), D("m2", "b")), (M(9), D("m3", "c", 2)), (M(10), D("m4", "x")), (M(10), D("m4", "y"))],
        steps[3]: [(M(12), D("m1", "a"))],
    }
    assert {c: sorted(v) for c, v in released.items()} == {c: sorted((t, repr(p)) for t, p in v) for c, v in expected.items()}
    assert all(e.end == e.start + TICK for e in r.events)


# --------------------------------------------------------------------------------------
# 4. A sliding window that outputs at every change
# --------------------------------------------------------------------------------------


def readings() -> Stream[Any]:
    """d1 @1 v5, d2 @3 v7, d1 @4 v3, |5, d1 @8 v1, d1 @11 v4, |12, d1 @20 v2, |25, |∞."""
    rd = R.Reading
    return Stream.create(
        "readings",
        [
            Point(M(1), rd("d1", 5)),
            Point(M(3), rd("d2", 7)),
            Point(M(4), rd("d1", 3)),
            Cti(M(5)),
            Point(M(8), rd("d1", 1)),
            Point(M(11), rd("d1", 4)),
            Cti(M(12)),
            Point(M(20), rd("d1", 2)),
            Cti(M(25)),
            Cti(INF),
        ],
        EventShape.POINT,
    )


D1_CHANGES = [  # (p, q, n, total): d1's readings extended to [1,11), [4,14), [8,18), [11,21), [20,30)
    (1, 4, 1, 5),
    (4, 8, 2, 8),
    (8, 11, 3, 9),
    (11, 14, 3, 8),
    (14, 18, 2, 5),
    (18, 20, 1, 4),
    (20, 21, 2, 6),
    (21, 30, 1, 2),
]


def test_sliding_window_lifetimes(executor: Any) -> None:
    """Snapshots of the extended readings: one result per change, living until the next one;
    each goes out as a start edge at the first CTI past its start and is ended at the first
    CTI past its end (an interval when both hold at once). CTIs pass unchanged."""
    r = run(executor, R.sliding(readings(), 10 * MIN))
    d1 = {p: span(M(p), M(q), R.Recent("d1", n, t)) for p, q, n, t in D1_CHANGES}
    d2 = span(M(3), M(13), R.Recent("d2", 1, 7))
    check(
        r,
        [
            (M(5), [d1[1], d1[4], d2]),
            (M(12), [d1[8], d1[11]]),
            (M(25), [d1[14], d1[18], d1[20], d1[21]]),
            (INF, []),
        ],
    )

    def rec(n: int, t: int, device: str = "d1") -> Any:
        return R.Recent(device, n, t)

    check_raw_steps(
        executor,
        r,
        [
            ([("interval", M(1), M(4), rec(1, 5)), ("start", M(4), rec(2, 8)), ("start", M(3), rec(1, 7, "d2"))], M(5)),
            ([("end", M(4), M(8), rec(2, 8)), ("interval", M(8), M(11), rec(3, 9)), ("start", M(11), rec(3, 8))], M(12)),
            (
                [
                    ("end", M(11), M(14), rec(3, 8)),
                    ("interval", M(14), M(18), rec(2, 5)),
                    ("interval", M(18), M(20), rec(1, 4)),
                    ("interval", M(20), M(21), rec(2, 6)),
                    ("end", M(3), M(13), rec(1, 7, "d2")),
                    ("start", M(21), rec(1, 2)),
                ],
                M(25),
            ),
            ([("end", M(21), M(30), rec(1, 2))], INF),
        ],
    )


def test_sliding_window_points_at_each_change(executor: Any) -> None:
    """timestamp=START: ASA's output, a point at each change, out at the first CTI past it."""
    r = run(executor, R.sliding(readings(), 10 * MIN, timestamp=WindowTimestamp.START))
    d1 = {p: at(M(p), R.Recent("d1", n, t)) for p, _, n, t in D1_CHANGES}
    check(
        r,
        [
            (M(5), [d1[1], at(M(3), R.Recent("d2", 1, 7)), d1[4]]),
            (M(12), [d1[8], d1[11]]),
            (M(25), [d1[14], d1[18], d1[20], d1[21]]),
            (INF, []),
        ],
    )


# --------------------------------------------------------------------------------------
# 5. The last known value, and a left outer join
# --------------------------------------------------------------------------------------


def limits_and_samples() -> tuple[Stream[Any], Stream[Any]]:
    """Limits d1 50 @0, d2 30 @2, d1 55 @6, CTIs 7, 20 (declared first); samples d1 40 @2,
    d2 35 @3, d3 10 @4, |5, d1 52 @6, |10, d2 31 @14, d1 60 @15, |20."""
    limits = Stream.create(
        "limits",
        [
            Point(M(0), R.Limit("d1", 50.0)),
            Point(M(2), R.Limit("d2", 30.0)),
            Point(M(6), R.Limit("d1", 55.0)),
            Cti(M(7)),
            Cti(M(20)),
        ],
        EventShape.POINT,
    )
    samples = Stream.create(
        "samples",
        [
            Point(M(2), R.Sample("d1", 40.0)),
            Point(M(3), R.Sample("d2", 35.0)),
            Point(M(4), R.Sample("d3", 10.0)),
            Cti(M(5)),
            Point(M(6), R.Sample("d1", 52.0)),
            Cti(M(10)),
            Point(M(14), R.Sample("d2", 31.0)),
            Point(M(15), R.Sample("d1", 60.0)),
            Cti(M(20)),
        ],
        EventShape.POINT,
    )
    return limits, samples


def test_current_limits_are_clipped_signals(executor: Any) -> None:
    """[0, 6) d1 50 (clipped by 55 at 6), [2, 12) d2 30, [6, 16) d1 55 (its 10 minutes); each out
    at the first CTI past its start. With FOREVER the last limit of each device never ends."""
    limits, _ = limits_and_samples()
    r = run(executor, R.current_limits(limits, 10 * MIN))
    check(
        r,
        [
            (M(7), [span(M(0), M(6), R.Limit("d1", 50.0)), span(M(2), M(12), R.Limit("d2", 30.0)), span(M(6), M(16), R.Limit("d1", 55.0))]),
            (M(20), []),
        ],
    )
    limits, _ = limits_and_samples()
    r = run(executor, R.current_limits(limits, R.FOREVER))
    check(
        r,
        [
            (M(7), [span(M(0), M(6), R.Limit("d1", 50.0)), span(M(2), INF, R.Limit("d2", 30.0)), span(M(6), INF, R.Limit("d1", 55.0))]),
            (M(20), []),
        ],
    )


def test_samples_with_the_current_limit_or_none(executor: Any) -> None:
    """Every sample once: with the limit alive at it, or None (d3 never had one; d2's expired at
    12). The limits' CTIs are ahead, so the samples' release: at 5, 10, 20."""
    limits, samples = limits_and_samples()
    r = run(executor, R.checked(samples, limits, 10 * MIN))
    c = R.Checked
    check(
        r,
        [
            (M(5), [at(M(2), c("d1", 40.0, 50.0)), at(M(3), c("d2", 35.0, 30.0)), at(M(4), c("d3", 10.0, None))]),
            (M(10), [at(M(6), c("d1", 52.0, 55.0))]),
            (M(20), [at(M(14), c("d2", 31.0, None)), at(M(15), c("d1", 60.0, 55.0))]),
        ],
    )


def test_samples_with_the_last_limit_ever(executor: Any) -> None:
    """max_age=FOREVER: d2's 30 still holds at 14."""
    limits, samples = limits_and_samples()
    r = run(executor, R.checked(samples, limits, R.FOREVER))
    c = R.Checked
    check(
        r,
        [
            (M(5), [at(M(2), c("d1", 40.0, 50.0)), at(M(3), c("d2", 35.0, 30.0)), at(M(4), c("d3", 10.0, None))]),
            (M(10), [at(M(6), c("d1", 52.0, 55.0))]),
            (M(20), [at(M(14), c("d2", 31.0, 30.0)), at(M(15), c("d1", 60.0, 55.0))]),
        ],
    )


# --------------------------------------------------------------------------------------
# 6. Time since the previous event; 7. A key that goes quiet
# --------------------------------------------------------------------------------------


def unix(t: datetime) -> int:
    return int(t.replace(tzinfo=timezone.utc).timestamp())


def pings() -> Stream[Any]:
    """d1 @1 @2, d2 @3 @4 @4 (two copies), |5, d1 @6 @12, |13, |20; `at` is each start in
    Unix seconds."""

    def ping(device: str, m: int) -> Point[Any]:
        return Point(M(m), R.Ping(device, unix(M(m))))

    return Stream.create(
        "pings",
        [
            ping("d1", 1),
            ping("d1", 2),
            ping("d2", 3),
            ping("d2", 4),
            ping("d2", 4),
            Cti(M(5)),
            ping("d1", 6),
            ping("d1", 12),
            Cti(M(13)),
            Cti(M(20)),
        ],
        EventShape.POINT,
    )


def test_time_since_the_previous_ping(executor: Any) -> None:
    """Gaps within 5 minutes: d1 None, 60, 240, then None (6 minutes back); d2 None, and 60 for
    both copies at 4 (peers see the ping before them). Each out at the first CTI past it."""
    r = run(executor, R.since_previous(pings(), 5 * MIN))

    def since(device: str, m: int, gap: int | None) -> Any:
        return at(M(m), R.Since(device, unix(M(m)), gap))

    check(
        r,
        [
            (M(5), [since("d1", 1, None), since("d1", 2, 60), since("d2", 3, None), since("d2", 4, 60), since("d2", 4, 60)]),
            (M(13), [since("d1", 6, 240), since("d1", 12, None)]),
            (M(20), []),
        ],
    )


def test_time_since_the_last_ping_of_one_device(executor: Any) -> None:
    """``when``: the seconds since d1's last ping, for every ping. In (start, payload) order:
    d1@1 None (first), d1@2 60, d2@3 60, d2@4 both 120 (peers: d1@2 is the last before them),
    d1@6 240, d1@12 None (d1@6 is 6 minutes back)."""
    r = run(executor, R.since_last_of(pings(), "d1", 5 * MIN))

    def since(device: str, m: int, gap: int | None) -> Any:
        return at(M(m), R.Since(device, unix(M(m)), gap))

    check(
        r,
        [
            (M(5), [since("d1", 1, None), since("d1", 2, 60), since("d2", 3, 60), since("d2", 4, 120), since("d2", 4, 120)]),
            (M(13), [since("d1", 6, 240), since("d1", 12, None)]),
            (M(20), []),
        ],
    )


def test_silences_longer_than_a_minute(executor: Any) -> None:
    """The page's filter on the gaps: only d1 @6 (240 s)."""
    r = run(executor, R.since_previous(pings(), 5 * MIN).where(lambda s: tempo.coalesce(s.gap, 0) > 60))
    check(r, [(M(5), []), (M(13), [at(M(6), R.Since("d1", unix(M(6)), 240))]), (M(20), [])])


def test_a_device_that_goes_quiet(executor: Any) -> None:
    """Sessions with a 5-minute gap: d1 [1, 11) (1, 2, 6) and [12, 17); d2 [3, 9) (3, 4, 4). Each
    a point at its last tick, out at the first CTI at or past its end: 9 and 11 at 13, 17 at
    20."""
    r = run(executor, R.gone_quiet(pings(), 5 * MIN))
    q = R.Quiet
    check(
        r,
        [
            (M(5), []),
            (M(13), [at(M(9) - TICK, q("d2", 3, M(3), M(9))), at(M(11) - TICK, q("d1", 3, M(1), M(11)))]),
            (M(20), [at(M(17) - TICK, q("d1", 1, M(12), M(17)))]),
        ],
    )


# --------------------------------------------------------------------------------------
# the page itself
# --------------------------------------------------------------------------------------


def test_every_recipe_block_is_tested() -> None:
    """Every function the page defines is called by a test above (so none goes untested)."""
    source = Path(__file__).read_text()
    functions = [name for name, value in vars(R).items() if isinstance(value, types.FunctionType) and value.__module__ == "recipes_md"]
    assert functions
    untested = [name for name in functions if f"R.{name}(" not in source]
    assert not untested, untested


def test_the_page_links_and_is_linked() -> None:
    """docs/README.md lists the page."""
    assert "(recipes.md)" in (REPO / "docs" / "README.md").read_text()


def test_recipe_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    """The page's blocks, as one module, pass ``mypy --strict`` (as tests/test_typing.py checks
    user programs: tempo followed silently, the repository's stubs on the path)."""
    mypy_api = pytest.importorskip("mypy.api")
    search = [REPO / "typings"]
    tempo_root = Path(tempo.__file__).resolve().parents[1]
    site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    if tempo_root not in site:
        search.append(tempo_root)
    config = tmp_path / "mypy.ini"
    config.write_text(
        "[mypy]\n"
        "strict = True\n"
        f"mypy_path = {','.join(str(p) for p in search)}\n"
        f"cache_dir = {tmp_path / '.mypy_cache'}\n"
        "[mypy-tempo.*]\n"
        "follow_imports = silent\n"
    )
    module = tmp_path / "recipes_md.py"
    module.write_text("\n".join(code for _, code in doc_blocks()))
    stdout, stderr, status = mypy_api.run(["--config-file", str(config), str(module)])
    assert stderr == "", stderr
    assert status == 0, stdout
