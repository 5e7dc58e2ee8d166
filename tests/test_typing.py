"""Static typing of the fluent API: user pipelines are checked by ``mypy --strict``.

Each snippet is a small user program written to a temp dir and checked with
``mypy.api.run`` (one run per snippet, sharing one cache dir, so only the first run is
cold). tempo itself is followed silently: its own strictness is the ``mypy`` CI step's job,
here only what a user's code sees matters.
"""

from __future__ import annotations

import re
import runpy
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

import tempo
from tempo import QueryBuildError

mypy_api = pytest.importorskip("mypy.api")

REPO = Path(__file__).resolve().parents[1]

GOOD = """\
from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from tempo import EventShape, Interval, Point, Stream


@attrs.frozen
class Reading:
    device: str
    temperature: float


@attrs.frozen
class Device:
    device: str
    room: str


@attrs.frozen
class Alert:
    device: str
    t: float


@attrs.frozen
class Stats:
    device: str
    n: int
    avg: float


@attrs.frozen
class Located:
    device: str
    room: str
    t: float


@attrs.frozen
class Busiest:
    most: int


@attrs.frozen
class DeviceBusiest:
    device: str
    most: int


t0 = datetime(2024, 1, 1)
readings = Stream.create(
    "readings",
    [Point(t0, Reading("a", 31.5)), Point(t0 + timedelta(seconds=1), Reading("b", 20.0))],
    EventShape.POINT,
    payload_type=Reading,
)
devices = Stream.create(
    "devices",
    [Interval(t0, t0 + timedelta(hours=1), Device("a", "lab"))],
    EventShape.INTERVAL,
    payload_type=Device,
)

alerts = readings.where(lambda e: e.temperature > 30).select(lambda e: Alert(device=e.device, t=e.temperature))
stats = (
    readings.group_by(lambda e: e.device)
    .tumbling(timedelta(minutes=1))
    .aggregate(lambda key, w: Stats(device=key, n=w.count(), avg=w.avg(lambda e: e.temperature)))
)
located = readings.join(
    devices,
    on=lambda r, d: r.device == d.device,
    select=lambda r, d: Located(device=r.device, room=d.room, t=r.temperature),
)

busiest = readings.group_by(lambda e: e.device).apply(
    lambda s: s.tumbling(timedelta(minutes=1)).aggregate(lambda w: Busiest(most=w.count())),
    lambda device, r: DeviceBusiest(device=device, most=r.most),
)

reveal_alerts: Stream[Alert] = alerts
reveal_stats: Stream[Stats] = stats
reveal_located: Stream[Located] = located
reveal_busiest: Stream[DeviceBusiest] = busiest
"""


def _variant(old: str, new: str) -> str:
    assert GOOD.count(old) == 1, old
    return GOOD.replace(old, new)


SNIPPETS = {
    "good": GOOD,
    "misspelled": _variant("lambda e: e.temperature > 30", "lambda e: e.temperture > 30"),
    "wrong_type": _variant("Alert(device=e.device,", "Alert(device=e.temperature,"),
    # apply()'s select sees the sub-query's result type
    "apply_misspelled": _variant("most=r.most)", "most=r.mots)"),
}


def line_of(snippet: str, needle: str) -> int:
    """The 1-based line of the only line of ``snippet`` containing ``needle``."""
    lines = [i for i, text in enumerate(snippet.splitlines(), 1) if needle in text]
    assert len(lines) == 1, (needle, lines)
    return lines[0]


MypyRun = tuple[str, int]  # (stdout, exit status)


@pytest.fixture(scope="module")
def run_mypy(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], MypyRun]:
    """``run_mypy(name)``: mypy --strict on snippet ``name``, each snippet checked once."""
    tmp = tmp_path_factory.mktemp("typing")
    search = [REPO / "typings"]
    tempo_root = Path(tempo.__file__).resolve().parents[1]
    site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    if tempo_root not in site:  # a source checkout or editable install; site-packages is found anyway
        search.append(tempo_root)
    config = tmp / "mypy.ini"
    config.write_text(
        "[mypy]\n"
        "strict = True\n"
        f"mypy_path = {','.join(str(p) for p in search)}\n"
        f"cache_dir = {tmp / '.mypy_cache'}\n"
        "[mypy-tempo.*]\n"
        "follow_imports = silent\n"
    )
    done: dict[str, MypyRun] = {}

    def run(name: str) -> MypyRun:
        if name not in done:
            path = tmp / f"{name}.py"
            path.write_text(SNIPPETS[name])
            stdout, stderr, status = mypy_api.run(["--config-file", str(config), str(path)])
            assert stderr == "", stderr
            done[name] = (stdout, status)
        return done[name]

    return run


def errors(stdout: str, name: str) -> list[tuple[int, str]]:
    """``(line, message)`` of each error mypy reported in snippet ``name``."""
    pattern = re.compile(rf"^.*{re.escape(name)}\.py:(\d+): error: (.*)$", re.MULTILINE)
    return [(int(m.group(1)), m.group(2)) for m in pattern.finditer(stdout)]


def test_correct_pipeline_is_clean(run_mypy: Callable[[str], MypyRun]) -> None:
    stdout, status = run_mypy("good")
    assert status == 0, stdout
    assert stdout.startswith("Success"), stdout


@pytest.mark.parametrize(
    ("name", "needle", "record"),
    [("misspelled", "temperture", "Reading"), ("apply_misspelled", "mots", "Busiest")],  # apply(): the sub-query's result type
)
def test_misspelled_field_is_an_error_on_its_line(run_mypy: Callable[[str], MypyRun], name: str, needle: str, record: str) -> None:
    snippet = SNIPPETS[name]
    stdout, status = run_mypy(name)
    assert status == 1, stdout
    found = errors(stdout, name)
    assert len(found) == 1, stdout
    line, message = found[0]
    assert line == line_of(snippet, needle)
    assert f'"{needle}"' in message and record in message and "[attr-defined]" in message, message


def test_select_with_wrong_field_type_is_an_error(run_mypy: Callable[[str], MypyRun]) -> None:
    snippet = SNIPPETS["wrong_type"]
    stdout, status = run_mypy("wrong_type")
    assert status == 1, stdout
    found = errors(stdout, "wrong_type")
    assert len(found) == 1, stdout
    line, message = found[0]
    assert line == line_of(snippet, "Alert(device=e.temperature,")
    assert '"device"' in message and '"float"' in message and '"str"' in message, message


def test_snippets_agree_at_run_time(tmp_path: Path) -> None:
    """The mypy-clean snippet also builds; the two bad ones fail when the query is built."""
    paths = {}
    for name, text in SNIPPETS.items():
        paths[name] = tmp_path / f"{name}.py"
        paths[name].write_text(text)
    ns = runpy.run_path(str(paths["good"]))
    assert [ns[s].payload_type.__name__ for s in ("alerts", "stats", "located", "busiest")] == [
        "Alert",
        "Stats",
        "Located",
        "DeviceBusiest",
    ]
    with pytest.raises(QueryBuildError, match="temperture"):
        runpy.run_path(str(paths["misspelled"]))
    with pytest.raises(QueryBuildError, match="device"):
        runpy.run_path(str(paths["wrong_type"]))
    with pytest.raises(QueryBuildError, match="mots"):
        runpy.run_path(str(paths["apply_misspelled"]))
