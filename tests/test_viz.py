"""Timeline pictures (``tempo.viz``): the lanes, bars, ticks, CTI lines, moves and drops that
the semantics say, read back from the matplotlib artists; files; Jupyter; the error
without matplotlib; and the output lane of a Spark result.

Expected values are the worked examples of docs/semantics.md (3.10.1 and 3.10.4, the ASA
illustration; 5.6, the hopping pull-back; 4.1, the policies on edges), by hand.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest

pytest.importorskip("matplotlib")

import matplotlib  # noqa: E402

matplotlib.use("Agg")
from matplotlib.dates import date2num as _date2num  # noqa: E402

from tempo import (  # noqa: E402
    INFINITY,
    AdvanceTimeGenerationSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Cti,
    EdgeEnd,
    EdgeStart,
    EventShape,
    InMemoryExecutor,
    InputItem,
    Point,
    Rule,
    Stream,
)
from tempo.viz import INSTALL_HINT, Lane, PlotError, Timeline, plot  # noqa: E402
from tests.conformance.test_ordering import M, Reading, illustration  # noqa: E402

ADJUST, DROP = AdvanceTimePolicy.ADJUST, AdvanceTimePolicy.DROP


def x(t: datetime) -> float:
    return float(_date2num(t))  # type: ignore[no-untyped-call]


def xs(artists: list[Any]) -> list[float]:
    """The x of each artist: a tick's or CTI line's x, a bar's left edge."""
    out = []
    for a in artists:
        out.append(float(a.get_xdata()[0]) if hasattr(a, "get_xdata") else float(a.get_x()))
    return out


def infinity_x(t: Timeline) -> float:
    """The x of the ``∞`` column: the last tick of the time axis, labelled ∞."""
    ax = t.figure.axes[0]
    assert ax.xaxis.get_major_formatter()(ax.get_xticks()[-1], len(ax.get_xticks()) - 1) == "∞"
    return float(ax.get_xticks()[-1])


def lane(t: Timeline, title: str) -> tuple[Lane, dict[str, list[Any]]]:
    for i, candidate in enumerate(t.lanes):
        if candidate.title == title:
            return candidate, t.artists[i]
    raise AssertionError(f"no lane {title!r} in {[c.title for c in t.lanes]}")


# ---- the ASA illustration (docs/semantics.md 3.10.1) -----------------------------------------

ASA_CTIS = [M(5), M(6), M(8), M(17), M(18), M(21), M(22)]  # then the flush, at infinity


def test_asa_illustration_lanes(executor: Any) -> None:
    """Input lane: 12 events; #3 (position 2) dropped, drawn at 12:17 with an x; #6, #9,
    #12 moved 12:12 -> 12:17, 12:16 -> 12:18, 12:21 -> 12:22, each an arrow from the
    received time to the admitted one; CTIs 12:05 ... 12:22 and infinity. Output lane:
    the 11 admitted events at their admitted starts and the same CTIs. The output lane
    comes from the executor's result (Spark or memory)."""
    stream = illustration(ADJUST, early=True)
    t = plot(stream, executor.run(stream))
    assert [c.title for c in t.lanes] == ["input readings", "output"]
    inf = infinity_x(t)

    inputs, drawn = lane(t, "input readings")
    assert len(inputs.marks) == len(drawn["events"]) == 12
    status = {m.position: m.status for m in inputs.marks}
    assert [p for p, s in status.items() if s == "dropped"] == [2]
    assert [p for p, s in status.items() if s == "adjusted"] == [5, 8, 11]
    moved = {m.position: (m.received_start, m.start) for m in inputs.marks if m.status == "adjusted"}
    assert moved == {5: (M(12), M(17)), 8: (M(16), M(18)), 11: (M(21), M(22))}
    assert [m.rejections[0].rule for m in inputs.marks if m.rejections] == [
        Rule.EARLY_ARRIVAL,
        Rule.START_BEFORE_CTI,
        Rule.START_BEFORE_CTI,
        Rule.LATE_ARRIVAL,
    ]
    # Every event is a tick at its admitted start (a dropped one, faded, where it was received).
    assert sorted(xs(drawn["events"])) == sorted(x(M(m)) for m in (7, 8, 17, 8, 19, 17, 17, 20, 18, 23, 22, 22))
    assert xs(drawn["dropped"]) == [x(M(17))]
    arrows = sorted((a.xyann[0], a.xy[0]) for a in drawn["moves"])
    assert arrows == [(x(M(12)), x(M(17))), (x(M(16)), x(M(18))), (x(M(21)), x(M(22)))]
    assert xs(drawn["ctis"]) == [x(c) for c in ASA_CTIS] + [inf]

    output, drawn = lane(t, "output")
    assert len(output.marks) == len(drawn["events"]) == 11
    assert sorted(xs(drawn["events"])) == [x(M(m)) for m in (7, 8, 8, 17, 17, 18, 19, 20, 22, 22, 23)]
    assert xs(drawn["ctis"]) == [x(c) for c in ASA_CTIS] + [inf]
    assert drawn["moves"] == drawn["dropped"] == []


def test_asa_drop_policy_marks_every_rejection_dropped() -> None:
    """DROP: #3, #6, #9 and #12 are drawn faded at their received starts, each with an x."""
    t = plot(illustration(DROP, early=True))
    inputs, drawn = lane(t, "input readings")
    assert sorted(xs(drawn["dropped"])) == [x(M(12)), x(M(16)), x(M(17)), x(M(21))]
    assert drawn["moves"] == []
    assert len(lane(t, "output")[1]["events"]) == 8


def test_substream_lanes_by_key(executor: Any) -> None:
    """over=device, by_key=True: one lane per device for the input and for the output (which
    keeps the device). Every lane has the input's CTIs (the clock less 5 min); each device's
    lane adds its own key CTIs (3.10.4): d1 12:05, 12:17; d2 12:06, 12:15, 12:18, 12:21;
    d3 none (its largest start less 2 min is never ahead of the input's CTI)."""
    stream = illustration(ADJUST, early=True, substreams=True)
    t = plot(stream, executor.run(stream), by_key=True)
    titles = [c.title for c in t.lanes]
    assert titles == [f"input readings · d{i}" for i in (1, 2, 3)] + [f"output · d{i}" for i in (1, 2, 3)]
    input_ctis = [M(m) for m in (2, 3, 6, 8, 11, 12, 13, 14, 16, 17, 19, 22)]
    own = {"d1": [M(5), M(17)], "d2": [M(6), M(15), M(18), M(21)], "d3": []}
    for device, key_ctis in own.items():
        for side in ("input readings", "output"):
            this, drawn = lane(t, f"{side} · {device}")
            assert {m.payload.device for m in this.marks} == {device}
            assert list(this.key_ctis) == key_ctis
            assert xs(drawn["key_ctis"]) == [x(c) for c in key_ctis]
            if side == "input readings":
                assert xs(drawn["ctis"]) == [x(c) for c in input_ctis] + [infinity_x(t)]
    # Only #3 (early, d1) and #12 (late, d3) are rejected with substreams.
    assert [m.position for m in lane(t, "input readings · d1")[0].marks if m.status == "dropped"] == [2]
    assert [m.position for m in lane(t, "input readings · d3")[0].marks if m.status == "adjusted"] == [11]
    assert sum(len(lane(t, f"output · d{i}")[0].marks) for i in (1, 2, 3)) == 11


def test_by_key_function_splits_every_lane() -> None:
    t = plot(illustration(ADJUST, early=True), by_key=lambda r: r.device)
    assert [c.title for c in t.lanes] == [f"input readings · d{i}" for i in (1, 2, 3)] + [f"output · d{i}" for i in (1, 2, 3)]
    assert [len(c.marks) for c in t.lanes] == [3, 5, 4, 2, 5, 4]


def test_by_key_errors() -> None:
    with pytest.raises(
        PlotError,
        match=r"^by_key=True draws one lane per substream key, the key an input is given with over=.*"
        r"no input of this query has one; .*by_key=lambda p: p\.device",
    ):
        plot(illustration(ADJUST, early=True), by_key=True)


def test_by_key_true_on_a_result_alone_says_why_and_what_to_write() -> None:
    """``result.plot(by_key=True)`` has no plan to take substream keys from: the error says so,
    that they come from over=, and both ways on (the query too, or a function of the payload)."""
    stream = illustration(ADJUST, early=True)
    result = InMemoryExecutor().run(stream)
    with pytest.raises(
        PlotError,
        match=r"^by_key=True draws one lane per substream key, the key an input is given with over=.*"
        r"not a Result: pass the query too, result\.plot\(stream, by_key=True\).*by_key=lambda p: p\.device",
    ):
        result.plot(by_key=True)
    assert [lane.title for lane in result.plot(by_key=lambda r: r.device).lanes][-1] == "output · d3"
    with pytest.raises(PlotError, match=r"by_key could not take the key of input 'readings'.*AttributeError"):
        plot(illustration(ADJUST, early=True), by_key=lambda r: r.sensor)
    with pytest.raises(PlotError, match="by_key must be True, False or a function"):
        plot(illustration(ADJUST, early=True), by_key="device")  # type: ignore[arg-type]


# ---- windows: the pull-back of docs/semantics.md 5.6 -----------------------------------------


@attrs.frozen
class Count:
    n: int


def T(m: float) -> datetime:
    return datetime(2024, 1, 1, 10, 0) + timedelta(minutes=m)


def test_hopping_window_bars_and_pulled_back_ctis(executor: Any) -> None:
    """Points at 1, 6, 12, CTIs 13, 17, infinity; hopping(10, 5): four windows, bars from
    -5, 0, 5 and 10 of 10 minutes each; the output CTIs are pulled back to 5 and 10."""
    items: list[InputItem[Count]] = [
        Point(T(1), Count(1)),
        Point(T(6), Count(1)),
        Point(T(12), Count(1)),
        Cti(T(13)),
        Cti(T(17)),
        Cti(INFINITY),
    ]
    counts = (
        Stream.create("points", items, EventShape.POINT)
        .hopping(timedelta(minutes=10), timedelta(minutes=5))
        .aggregate(lambda w: Count(n=w.count()))
    )
    t = plot(counts, executor.run(counts))
    inf = infinity_x(t)
    _, drawn = lane(t, "input points")
    assert xs(drawn["events"]) == [x(T(1)), x(T(6)), x(T(12))]
    assert xs(drawn["ctis"]) == [x(T(13)), x(T(17)), inf]
    output, drawn = lane(t, "output")
    bars = sorted((b.get_x(), b.get_x() + b.get_width()) for b in drawn["events"])
    assert [v for bar in bars for v in bar] == pytest.approx([x(T(m)) for s in (-5, 0, 5, 10) for m in (s, s + 10)])
    assert sorted(m.payload.n for m in output.marks) == [1, 1, 2, 2]
    assert xs(drawn["ctis"]) == [x(T(5)), x(T(10)), inf]


# ---- edges and the policies of 4.1 ------------------------------------------------------------


def edges(policy: AdvanceTimePolicy) -> Stream[Count]:
    """Explicit CTI 3, then a start edge at 1 (before it) closed at 4, an end edge at 2 for
    the edge opened at 0, and an edge at 5 never closed; the flush at the end."""
    items: list[InputItem[Count]] = [
        EdgeStart(T(0), Count(1)),
        Cti(T(3)),
        EdgeStart(T(1), Count(2)),
        EdgeEnd(T(1), T(4), Count(2)),
        EdgeEnd(T(0), T(2), Count(1)),
        EdgeStart(T(5), Count(3)),
    ]
    flush = AdvanceTimeGenerationSettings(None, advance_to_infinity_on_shutdown=True)
    return Stream.create("edges", items, EventShape.EDGE, AdvanceTimeSettings(flush, policy=policy))


def test_edges_adjusted_open_and_closed() -> None:
    """ADJUST, CTI 3: edge 1 [0, 2) ends at the CTI, [0, 3) (an arrow 2 -> 3); edge 2 starts
    at the CTI, [3, 4) (an arrow 1 -> 3); edge 3 at 5 is never closed: a bar into the ∞
    column with an arrowhead, in the input and in the output."""
    t = plot(edges(ADJUST))
    inf = infinity_x(t)
    inputs, drawn = lane(t, "input edges")
    got = {m.payload.n: (m.status, m.start, m.end, m.received_start, m.received_end) for m in inputs.marks}
    assert got == {
        1: ("adjusted", T(0), T(3), T(0), T(2)),
        2: ("adjusted", T(3), T(4), T(1), T(4)),
        3: ("admitted", T(5), datetime.max, None, None),
    }
    bars = {m.payload.n: b for m, b in zip(inputs.marks, drawn["events"])}
    assert (bars[1].get_x(), bars[1].get_x() + bars[1].get_width()) == pytest.approx((x(T(0)), x(T(3))))
    assert (bars[2].get_x(), bars[2].get_x() + bars[2].get_width()) == pytest.approx((x(T(3)), x(T(4))))
    assert bars[3].get_x() == pytest.approx(x(T(5))) and bars[3].get_x() + bars[3].get_width() < inf
    assert len(drawn["heads"]) == 1 and x(T(5)) < xs(drawn["heads"])[0] <= inf
    assert sorted((a.xyann[0], a.xy[0]) for a in drawn["moves"]) == [(x(T(1)), x(T(3))), (x(T(2)), x(T(3)))]
    assert xs(drawn["ctis"]) == [x(T(3)), inf]
    output, drawn = lane(t, "output")
    assert sorted((m.start, m.end) for m in output.marks) == [(T(0), T(3)), (T(3), T(4)), (T(5), datetime.max)]
    assert len(drawn["heads"]) == 1


def test_edges_dropped() -> None:
    """DROP, CTI 3: edge 2 (start 1) is dropped, faded over [1, 4) as received with an x at
    1 (its end edge is dropped with it); edge 1's end edge at 2 is dropped, so edge 1 stays
    open: drawn open, with an x at 2 where its end was received."""
    t = plot(edges(DROP))
    inputs, drawn = lane(t, "input edges")
    got = {m.payload.n: (m.status, m.start, m.end, m.received_end) for m in inputs.marks}
    assert got == {
        1: ("adjusted", T(0), datetime.max, T(2)),
        2: ("dropped", T(1), T(4), T(4)),
        3: ("admitted", T(5), datetime.max, None),
    }
    assert sorted(xs(drawn["dropped"])) == [x(T(1)), x(T(2))]
    assert [j.rule for m in inputs.marks for j in m.rejections] == [Rule.END_BEFORE_CTI, Rule.START_BEFORE_CTI]
    assert len(drawn["heads"]) == 2


# ---- a Result alone, files, Jupyter, limits ---------------------------------------------------


def test_result_alone_draws_output_and_rejections() -> None:
    result = InMemoryExecutor().run(illustration(ADJUST, early=True))
    t = result.plot()
    assert [c.title for c in t.lanes] == ["input readings\n(rejected only)", "output"]
    rejected, drawn = lane(t, "input readings\n(rejected only)")
    assert sorted((m.position, m.status) for m in rejected.marks) == [(2, "dropped"), (5, "adjusted"), (8, "adjusted"), (11, "adjusted")]
    assert rejected.ctis == () and drawn["ctis"] == []
    assert len(lane(t, "output")[1]["events"]) == 11
    assert any("plot(stream, result)" in text.get_text() for text in t.figure.texts)
    # With the stream, Result.plot draws the inputs too.
    assert [c.title for c in result.plot(illustration(ADJUST, early=True)).lanes] == ["input readings", "output"]


def test_files_and_jupyter(tmp_path: Path) -> None:
    stream = illustration(ADJUST, early=True)
    plot(stream, path=tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    t = plot(stream, path=tmp_path / "a.svg")
    svg = (tmp_path / "a.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert t._repr_png_()[:4] == b"\x89PNG"
    assert "<svg" in t._repr_svg_()
    with pytest.raises(PlotError, match=r"\.png or \.svg"):
        t.save(tmp_path / "a.pdf")


def test_labels_are_drawn_next_to_their_events() -> None:
    t = plot(illustration(ADJUST, early=True), label=lambda r: r.device)
    _, drawn = lane(t, "output")
    assert sorted(text.get_text() for text in drawn["labels"]) == sorted("d1 d2 d3 d1 d3 d2 d2 d3 d2 d2 d3".split())
    with pytest.raises(PlotError, match="label could not label"):
        plot(illustration(ADJUST, early=True), label=lambda r: r.sensor)


def test_too_many_events_is_refused_and_time_range_narrows() -> None:
    stream = illustration(ADJUST, early=True)
    with pytest.raises(PlotError, match=r"23 events to draw .* more than limit=20.*time_range=\(start, end\)"):
        plot(stream, limit=20)
    t = plot(stream, limit=20, time_range=(M(15), M(20)))
    inputs, drawn = lane(t, "input readings")
    assert sorted(m.position or 0 for m in inputs.marks) == [2, 4, 5, 6, 8]  # overlapping [12:15, 12:20): not #8 at 12:20
    assert xs(drawn["ctis"])[:2] == [x(M(17)), x(M(18))]


def test_bad_arguments() -> None:
    stream = illustration(ADJUST, early=True)
    other = InMemoryExecutor().run(edges(ADJUST))
    with pytest.raises(PlotError, match="not a run of this query"):
        plot(stream, other)
    with pytest.raises(PlotError, match="takes the query's output Stream"):
        plot([1, 2])  # type: ignore[arg-type]
    with pytest.raises(PlotError, match="time_range must be"):
        plot(stream, time_range=(M(5), M(1)))


def test_without_matplotlib_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    stream = illustration(ADJUST, early=True)
    with pytest.raises(PlotError, match=r"needs matplotlib.*pip install 'tempo-streams\[plot\]'") as caught:
        plot(stream)
    assert INSTALL_HINT in str(caught.value)
    with pytest.raises(PlotError, match="needs matplotlib"):
        InMemoryExecutor().run(stream).plot(stream)


def test_importing_tempo_does_not_import_matplotlib() -> None:
    code = "import sys, tempo, tempo.viz; assert 'matplotlib' not in sys.modules, 'matplotlib imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[1])


# ---- the pictures in docs/ --------------------------------------------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_docs_pictures_are_generated_by_the_script(tmp_path: Path) -> None:
    """Every picture docs/semantics.md shows is one the script draws (so it can be redrawn
    from a real run whenever the semantics change), exists, and is small."""
    import importlib.util
    import re

    linked = set(re.findall(r"\]\(pictures/([\w.-]+)\)", (DOCS / "semantics.md").read_text()))
    assert {"asa_adjust.png", "asa_substreams.png", "hopping_pull_back.png"} <= linked
    spec = importlib.util.spec_from_file_location("make_pictures", DOCS / "pictures" / "make_pictures.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    drawn = {p.name for p in script.main(tmp_path)}
    assert linked <= drawn
    for name in drawn:
        committed = DOCS / "pictures" / name
        assert committed.exists(), f"{name}: run python docs/pictures/make_pictures.py"
        assert committed.stat().st_size < 150_000
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"


def test_result_alone_of_edges_and_a_table_source(tmp_path: Path) -> None:
    """A Result alone: one mark per rejection (the end edge of a dropped start edge goes with
    it). A Parquet input replays like an item list."""
    result = InMemoryExecutor().run(edges(DROP))
    rejected, _ = lane(result.plot(), "input edges\n(rejected only)")
    assert sorted((m.status, m.start, m.end) for m in rejected.marks) == [("adjusted", T(0), datetime.max), ("dropped", T(1), datetime.max)]

    import pyarrow as pa
    import pyarrow.parquet as pq

    from tempo.sources import ParquetSource

    minutes = [0, 5, 2, 6]  # CTIs every 2 events: 5 - 0 after the second; the point at 2 is late
    pq.write_table(pa.table({"start": [T(m) for m in minutes], "n": minutes}), tmp_path / "t.parquet")
    settings = AdvanceTimeSettings(AdvanceTimeGenerationSettings(2, advance_to_infinity_on_shutdown=True), policy=DROP)
    stream = Stream.create("table", ParquetSource(str(tmp_path / "t.parquet"), Count, start="start"), EventShape.POINT, settings)
    t = plot(stream)
    inputs, drawn = lane(t, "input table")
    assert [(m.position, m.status) for m in inputs.marks] == [(0, "admitted"), (1, "admitted"), (2, "dropped"), (3, "admitted")]
    assert xs(drawn["dropped"]) == [x(T(2))]
    assert xs(drawn["ctis"]) == [x(T(5)), x(T(6)), infinity_x(t)]
    assert [m.start for m in lane(t, "output")[0].marks] == [T(m).replace(tzinfo=timezone.utc) for m in (0, 5, 6)]  # tables are UTC


def test_an_input_only_spark_reads_points_to_inputs_false() -> None:
    """A catalog table cannot be replayed in this process: a PlotError saying so and what to
    draw instead (the output alone), not the executor's error."""
    pytest.importorskip("pyspark")
    from tempo import AdvanceTimeSettings, EventShape, Stream
    from tempo.spark.sources import SparkTableSource

    stream = Stream.create("catalog", SparkTableSource("readings", Reading, start="t"), EventShape.POINT, AdvanceTimeSettings.replay())
    with pytest.raises(PlotError, match=r"table of the Spark catalog.*inputs=False"):
        plot(stream)
