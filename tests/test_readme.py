"""The README's example runs and prints what a reader would work out by hand."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code is not None
    exec(compile(code.group(1), "README.md", "exec"), {"__name__": "readme"})
    lines = capsys.readouterr().out.strip().splitlines()
    # 120 readings, one a second, celsius 20 + i % 10: those above 25 have i % 10 in 6..9.
    # Even i are sensor a (i % 10 in {6, 8}: 26, 28), odd i sensor b ({7, 9}: 27, 29).
    # So each sensor keeps 2 readings per 10 s, 12 a minute, averaging 27 (a) and 28 (b).
    assert len(lines) == 4
    assert "Average(sensor='a', n=12, celsius=27.0)" in lines[0]
    assert "Average(sensor='b', n=12, celsius=28.0)" in lines[1]
    assert lines[2].startswith("2024-01-01 00:01:00 2024-01-01 00:02:00")
