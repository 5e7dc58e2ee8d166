"""Regenerates every picture in docs/pictures/ from the worked timelines of docs/semantics.md.

Run from the repository root (needs the ``plot`` extra, matplotlib):

    python docs/pictures/make_pictures.py

Each picture is drawn by ``tempo.viz.plot`` from a real run of the example, so the pictures
stay true to what tempo computes. The ASA illustration reuses the data of
tests/conformance/test_ordering.py.
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from tempo import (  # noqa: E402
    TICK,
    AdvanceTimeGenerationSettings,
    AdvanceTimeImportSettings,
    AdvanceTimePolicy,
    AdvanceTimeSettings,
    Cti,
    EdgeEnd,
    EdgeStart,
    EventShape,
    INFINITY,
    InputItem,
    Point,
    Stream,
)
from tempo.viz import plot  # noqa: E402
from tests.conformance.test_ordering import EVENTS, Reading, illustration  # noqa: E402

HERE = Path(__file__).resolve().parent


def T(m: float) -> datetime:
    """Minute ``m`` after 10:00 on 2024-01-01 (docs/semantics.md's convention)."""
    return datetime(2024, 1, 1, 10, 0) + timedelta(minutes=m)


def asa_label(r: Reading) -> str:
    """``#n device``: the event's number in the illustration's table."""
    for n, (device, minute, _) in enumerate(EVENTS, 1):
        if r.device == device and r.event_time == datetime(2024, 1, 1, 12, minute):
            return f"#{n} {device}"
    return r.device


def asa(out: Path) -> None:
    """3.10.1: the ASA illustration in its settings (ADJUST, DROP, no early-arrival rule);
    3.10.4: the same over the device."""
    plot(
        illustration(AdvanceTimePolicy.ADJUST, early=True),
        label=asa_label,
        path=out / "asa_adjust.png",
        title="ASA illustration: O = 2 min, L = 5 min, W = 5 min, policy ADJUST",
    )
    plot(
        illustration(AdvanceTimePolicy.DROP, early=True),
        label=asa_label,
        path=out / "asa_drop.png",
        title="ASA illustration: O = 2 min, L = 5 min, W = 5 min, policy DROP",
    )
    plot(
        illustration(AdvanceTimePolicy.ADJUST, early=False),
        label=asa_label,
        path=out / "asa_no_early.png",
        title="ASA illustration without the early-arrival rule: O = 2 min, L = 5 min, policy ADJUST",
    )
    plot(
        illustration(AdvanceTimePolicy.ADJUST, early=True, substreams=True),
        label=asa_label,
        by_key=True,
        path=out / "asa_substreams.png",
        title="ASA illustration over the device (substreams), ADJUST: one lane per device",
    )


@attrs.frozen
class Count:
    n: int


def hopping(out: Path) -> None:
    """5.6: the worked pull-back example, hopping(10 min, 5 min) counting points at 1, 6
    and 12 with explicit CTIs at 13, 17 and infinity."""
    items: list[InputItem[Reading]] = [
        Point(T(1), Reading("d1", T(1))),
        Point(T(6), Reading("d1", T(6))),
        Point(T(12), Reading("d1", T(12))),
        Cti(T(13)),
        Cti(T(17)),
        Cti(INFINITY),
    ]
    counts = (
        Stream.create("points", items, EventShape.POINT)
        .hopping(timedelta(minutes=10), timedelta(minutes=5))
        .aggregate(lambda w: Count(n=w.count()))
    )
    plot(
        counts,
        label=lambda p: f"n={p.n}" if isinstance(p, Count) else "",
        path=out / "hopping_pull_back.png",
        title="hopping(10 min, 5 min).aggregate(count): window CTIs pulled back to the open window's start",
    )


@attrs.frozen
class Measure:
    device: str
    value: float


@attrs.frozen
class Limit:
    device: str
    max: float


@attrs.frozen
class Check:
    device: str
    value: float
    max: float


def slow_fast(out: Path) -> None:
    """3.6: a fast point input joined with a slow edge input that imports its CTIs."""

    def at(n: int) -> datetime:
        return datetime(2024, 1, 1, 12, 0, n)

    fast = [Point(T(2), Measure("d1", 40), at(2)), Point(T(5), Measure("d1", 60), at(3)), Point(T(9), Measure("d1", 58), at(6))]
    slow: list[InputItem[Limit]] = [
        EdgeStart(T(0), Limit("d1", 50), at(1)),
        EdgeEnd(T(0), T(6), Limit("d1", 50), at(4)),
        EdgeStart(T(6), Limit("d1", 55), at(5)),
    ]
    readings = Stream.create(
        "readings",
        fast,
        EventShape.POINT,
        AdvanceTimeSettings(AdvanceTimeGenerationSettings(1, -TICK, advance_to_infinity_on_shutdown=True)),
    )
    limits = Stream.create(
        "limits", slow, EventShape.EDGE, AdvanceTimeSettings(import_=AdvanceTimeImportSettings("readings"), policy=AdvanceTimePolicy.ADJUST)
    )
    checks = readings.join(limits, on=lambda r, lim: r.device == lim.device, select=lambda r, lim: Check(r.device, r.value, lim.max))

    def label(p: object) -> str:
        if isinstance(p, Measure):
            return f"{p.value:g}"
        if isinstance(p, Limit):
            return f"max {p.max:g}"
        assert isinstance(p, Check)
        return f"{p.value:g} vs {p.max:g}"

    plot(
        checks,
        label=label,
        path=out / "import_join.png",
        title="readings generate CTIs (frequency 1, delay -1 tick); limits import them; the join releases at once",
    )


def main(out: Path = HERE) -> list[Path]:
    """Draw every picture into ``out``; returns their paths."""
    asa(out)
    hopping(out)
    slow_fast(out)
    return sorted(out.glob("*.png"))


if __name__ == "__main__":
    for picture in main():
        print(f"{picture.relative_to(ROOT)}: {picture.stat().st_size // 1024} KB")
