"""Every ```python block of the README and docs/*.md is a program a reader can run: each page's
blocks, in order, form one module that passes ``mypy --strict`` as a user's script would, and
runs, in a fresh folder holding the few files the pages read (``FILES``); blocks that need
Spark run only where Spark is. A block marked ``<!-- fragment -->`` just before the fence (an
HTML comment, which a reader of the rendered page does not see) shows a signature or a part of
a query and is neither; one marked ``<!-- typecheck -->`` is checked but not run (only the
``spark-submit`` script of docs/spark.md, which stops its session and makes a million rows).
docs/recipes.md has its own test (tests/conformance/test_recipes.py)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

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


def test_every_python_block_is_found_and_most_run() -> None:
    """No python block escapes the test (an indented fence, ```py, a marker not just before
    its fence), and fragments stay few: most blocks run."""
    for page in PAGES:
        text = page.read_text()
        fences = re.findall(r"^[ \t]*```(?:python|py|python3)[ \t]*$", text, re.M)
        assert len(fences) == len(blocks(page)), f"{page.name}: a python block the test does not see (indented, or ```py)"
        markers = len(re.findall(r"<!-- (?:fragment|typecheck) -->", text))
        assert markers == sum(m is not None for _, m, _ in blocks(page)), f"{page.name}: a marker not just before its fence"
    found = [m for page in PAGES for _, m, _ in blocks(page)]
    assert found.count(None) >= 7 and found.count("typecheck") <= 1 and found.count("fragment") <= 9


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
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    report = checked.stdout.replace(str(tmp_path) + os.sep, "")
    assert checked.returncode == 0, report


def _readme_events(folder: Path) -> None:
    """README's "Running on Spark" reads ``events.parquet`` (as Spark writes it, a folder):
    readings like those of its first block."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n, t0 = 60, datetime(2024, 1, 1, tzinfo=timezone.utc)
    (folder / "events.parquet").mkdir()
    pq.write_table(
        pa.table(
            {
                "seq": list(range(n)),
                "event_time": pa.array([t0 + timedelta(seconds=i) for i in range(n)], pa.timestamp("us", tz="UTC")),
                "sensor": ["ab"[i % 2] for i in range(n)],
                "celsius": [20.0 + i % 10 for i in range(n)],
            }
        ),
        folder / "events.parquet" / "part-0.parquet",
    )


def _streaming_landing(folder: Path) -> None:
    """docs/streaming.md's first block reads the folder ``landing/`` that files land in."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n, t0 = 300, datetime(2024, 1, 1, tzinfo=timezone.utc)
    (folder / "landing").mkdir()
    pq.write_table(
        pa.table(
            {
                "seq": list(range(n)),
                "ts": pa.array([t0 + timedelta(seconds=i) for i in range(n)], pa.timestamp("us", tz="UTC")),
                "device": ["d1", "d2", "d3"] * (n // 3),
                "value": [float(i % 7) for i in range(n)],
            }
        ),
        folder / "landing" / "part-0.parquet",
    )


FILES: dict[str, Callable[[Path], None]] = {"README.md": _readme_events, "streaming.md": _streaming_landing}
"""What a page's blocks read, made before they run (each page in a folder of its own)."""


def needs_spark(code: str) -> bool:
    return "spark" in code


@contextlib.contextmanager
def spark_in(folder: Path) -> Iterator[None]:
    """Spark resolves a relative path against its JVM's working directory (where the JVM
    started, not Python's): the local file system's is the page's folder while it runs, as
    the JVM's would be for a reader's script run there."""
    from tempo.spark import spark_session

    spark = spark_session()
    jvm: Any = getattr(spark.sparkContext, "_jvm")
    local: Any = jvm.org.apache.hadoop.fs.FileSystem.getLocal(getattr(spark.sparkContext, "_jsc").hadoopConfiguration())
    before = local.getWorkingDirectory()
    local.setWorkingDirectory(jvm.org.apache.hadoop.fs.Path(str(folder)))
    try:
        yield
    finally:
        local.setWorkingDirectory(before)


@pytest.mark.parametrize("page", [p for p in PAGES if any(m is None for _, m, _ in blocks(p))], ids=lambda p: p.name)
def test_the_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runnable = [(line, code) for line, marker, code in blocks(page) if marker is None]
    spark = any(needs_spark(code) for _, code in runnable)
    reason = spark_unavailable() if spark else None
    if spark and reason is None:
        monkeypatch.setenv("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", sys.executable))
    (tmp_path / "examples").symlink_to(REPO / "examples")  # docs/spark.md imports the main example
    if page.name in FILES:
        FILES[page.name](tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [page.name])
    # A module of its own, importable by name as a script's __main__ is (a live query saves
    # its payloads by their classes' names).
    module = types.ModuleType(page.stem + "_md")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        if spark and reason is None:
            stack.enter_context(spark_in(tmp_path))
        try:
            for line, code in runnable:
                if reason is not None and needs_spark(code):
                    pytest.skip(f"{page.name} line {line} on: {reason}")  # the blocks before it ran
                exec(compile("\n" * (line - 1) + code, str(page), "exec", dont_inherit=True), namespace)
        finally:
            for value in list(namespace.values()):  # a live query a page started stops with the page
                if type(value).__name__ == "LiveQuery":
                    value.stop()
