"""Every ```python block of the README and docs/*.md is a program a reader can run: each page's
blocks, in order, form one module that passes ``mypy --strict`` as a user's script would, and
runs (blocks that need Spark only where Spark is, and blocks marked ``<!-- typecheck -->``
just before the fence, which read files or a cluster the test does not have, are only
checked). A block marked ``<!-- fragment -->`` shows a signature or a part of a query and is
neither; docs/recipes.md has its own test (tests/conformance/test_recipes.py)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import spark_unavailable

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != "recipes.md")]
BLOCK = re.compile(r"(<!-- (fragment|typecheck) -->\n)?^```python\n(.*?)^```$", re.S | re.M)


def blocks(page: Path) -> list[tuple[int, str | None, str]]:
    """(line of the code's first line, marker or None, code) of each python block of ``page``."""
    text = page.read_text()
    return [(text.count("\n", 0, m.start(3)) + 1, m.group(2), m.group(3)) for m in BLOCK.finditer(text)]


CONTINUES = "# (continues the block above)"
"""A block's first line when it goes on from the page's block before it (its names in scope)."""


def modules(page: Path) -> list[str]:
    """The page's checked blocks as modules: each block its own, unless it continues the one
    before; each block at its own lines of the page (mypy's and Python's line numbers are
    the page's)."""
    out: list[str] = []
    for line, marker, code in blocks(page):
        if marker == "fragment":
            continue
        if not code.startswith(CONTINUES) or not out:
            out.append("")
        out[-1] += "\n" * (line - 1 - out[-1].count("\n")) + code
    return out


def test_every_page_has_its_blocks_marked_or_whole() -> None:
    assert sum(len(modules(page)) for page in PAGES) >= 6


def test_the_blocks_pass_mypy_strict(tmp_path: Path) -> None:
    files = []
    for page in PAGES:
        for i, code in enumerate(modules(page)):
            path = tmp_path / f"{page.stem.lower()}_md_{i}.py"
            path.write_text(code)
            files.append(str(path))
    env = dict(os.environ, MYPYPATH=os.pathsep.join([str(REPO / "typings"), str(REPO / "examples")]))
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent", *files],
        capture_output=True, text=True, cwd=tmp_path, env=env,
    )
    report = checked.stdout.replace(str(tmp_path) + os.sep, "")
    assert checked.returncode == 0, report


@pytest.mark.parametrize("page", [p for p in PAGES if any(m is None for _, m, _ in blocks(p))], ids=lambda p: p.name)
def test_the_blocks_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runnable = [(line, code) for line, marker, code in blocks(page) if marker is None]
    if any("spark" in code for _, code in runnable):
        reason = spark_unavailable()
        if reason is not None:
            pytest.skip(reason)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "argv", [page.name])
    namespace: dict[str, object] = {"__name__": page.stem + "_md"}
    with contextlib.redirect_stdout(io.StringIO()):
        for line, code in runnable:
            exec(compile("\n" * (line - 1) + code, str(page), "exec", dont_inherit=True), namespace)
