"""A user's own script, outside this checkout, type-checks against the installed tempo.

The check runs ``python -m mypy --strict`` the way a user would: in a fresh directory that
has no mypy configuration, with no ``MYPYPATH``, so mypy finds tempo only through the
installation (an editable install must put a plain path entry in site-packages, not an
import hook, which type checkers cannot follow).
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tempo

pytest.importorskip("mypy")

REPO = Path(__file__).resolve().parents[1]

USER_SCRIPT = """\
from datetime import datetime, timedelta

import attrs

from tempo import AdvanceTimeSettings, EventShape, InMemoryExecutor, Point, Stream


@attrs.frozen
class Reading:
    sensor: str
    celsius: float


@attrs.frozen
class Hot:
    sensor: str
    celsius: float


t0 = datetime(2024, 1, 1)
items = [Point(t0 + timedelta(seconds=i), Reading("a", 20.0 + i)) for i in range(10)]
hot = (
    Stream.create("readings", items, EventShape.POINT, AdvanceTimeSettings.replay())
    .where(lambda r: r.celsius > 25)
    .select(lambda r: Hot(sensor=r.sensor, celsius=r.celsius))
)
result: list[Hot] = InMemoryExecutor().run(hot).payloads()
print(len(result))
"""


def _installed() -> bool:
    try:
        importlib.metadata.distribution("tempo-streams")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _mypy_outside(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    work = tmp_path / "user-project"
    work.mkdir()
    assert REPO not in work.resolve().parents
    (work / "job.py").write_text(script)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "job.py"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def installed() -> None:
    if not _installed():
        pytest.skip("tempo is not installed in this environment (pip install -e .), only importable from the checkout")
    assert Path(tempo.__file__).resolve().is_relative_to(REPO) or "site-packages" in tempo.__file__


def test_user_script_outside_the_checkout_type_checks(installed: None, tmp_path: Path) -> None:
    run = _mypy_outside(tmp_path, USER_SCRIPT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("Success"), run.stdout


def test_mypy_outside_the_checkout_sees_tempo_types(installed: None, tmp_path: Path) -> None:
    """Not just 'no error': a misspelled payload field is caught, so mypy did read tempo's types."""
    run = _mypy_outside(tmp_path, USER_SCRIPT.replace("r.celsius > 25", "r.celcius > 25"))
    assert run.returncode == 1, run.stdout + run.stderr
    line = 1 + USER_SCRIPT.splitlines().index("    .where(lambda r: r.celsius > 25)")
    assert f'job.py:{line}: error: "Reading" has no attribute "celcius"' in run.stdout, run.stdout
    assert "import-not-found" not in run.stdout
