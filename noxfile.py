"""Developer sessions: ``nox`` runs tests, mypy and the examples; ``nox -s spark_tests`` needs a JVM."""

from __future__ import annotations

from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

nox.options.sessions = ["lint", "tests", "mypy", "examples"]
nox.options.reuse_existing_virtualenvs = True


@nox.session
def tests(session: nox.Session) -> None:
    """The test suite without Spark."""
    session.install("-e", ".[dev]")
    session.run("pytest", "-m", "not spark", *session.posargs)


@nox.session
def spark_tests(session: nox.Session) -> None:
    """The Spark-marked tests (needs the ``spark`` extra and ``java`` on PATH)."""
    session.install("-e", ".[dev,spark]")
    session.run("pytest", "-m", "spark", *session.posargs)


OTHER_PYSPARK = "pyspark>=4.0,<4.1"
"""CI runs the newest PySpark the ``spark`` extra allows; this session the oldest line."""


@nox.session
def streaming_other_pyspark(session: nox.Session) -> None:
    """The streaming and conformance Spark tests on the other PySpark line (``OTHER_PYSPARK``)."""
    session.install("-e", ".[dev,spark]")
    session.install(OTHER_PYSPARK)
    session.run("python", "-c", "import pyspark; print('pyspark', pyspark.__version__)")
    session.run("pytest", "-m", "spark", "tests/streaming", "tests/conformance", *session.posargs)


@nox.session
def slow(session: nox.Session) -> None:
    """The long versions of the soak and kill tests (marked ``slow``; skipped elsewhere)."""
    session.install("-e", ".[dev,spark]")
    session.run("pytest", "-m", "slow", "--run-slow", *session.posargs)


@nox.session
def mypy(session: nox.Session) -> None:
    """``mypy --strict`` on the package and the examples (config in pyproject.toml)."""
    session.install("-e", ".[dev]")
    targets = ["tempo"] + (["examples"] if EXAMPLES else [])
    session.run("mypy", "--strict", *targets, *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """The one format (``ruff format .`` applies it) and pyflakes (``ruff check``), as
    .ci/run checks them."""
    session.install("ruff")
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")


@nox.session
def examples(session: nox.Session) -> None:
    """Run every ``examples/*.py`` script; any non-zero exit fails the session."""
    if not EXAMPLES:
        session.skip("no examples/*.py yet")
    session.install("-e", ".")
    for script in EXAMPLES:
        session.run("python", str(script.relative_to(ROOT)))
