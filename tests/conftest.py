"""Shared fixtures: the executors tests run on, and one Spark session.

``KINDS`` lists the executors tests run on, each an ``ExecutorKind`` with the name its errors
use and the ``Capability`` set it promises; a third executor is one more entry. Every test
taking the ``executor`` fixture runs on ``EXECUTORS``: ``"memory"`` (``InMemoryExecutor``) and
``"spark"`` (``tempo.spark.SparkExecutor``). ``on_executors`` picks other kinds for one test or module, and
``@pytest.mark.needs(Capability...)`` skips a test on kinds that lack a capability. The Spark
kinds carry the ``spark`` marker and are skipped, with the reason, when pyspark, a Java
runtime or ``tempo.spark.SparkExecutor`` is missing. ``tempo.spark`` (and pyspark) are
imported only when a Spark test runs, and a whole test run shares one local Spark session.
"""

from __future__ import annotations

import enum
import functools
from pathlib import Path
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from tempo import InMemoryExecutor


REPO = Path(__file__).resolve().parents[1]


def with_repo_on_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the repository first on ``PYTHONPATH``, for a process (a worker, a Spark
    daemon) that must import the tests' modules as this one does."""
    return {**env, "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])}


@functools.cache
def spark_unavailable() -> str | None:
    """Why the Spark executor cannot run here, or None when it can."""
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        return f"pyspark is not installed (install the `spark` extra): {e}"
    try:
        from tempo.spark import SparkExecutor  # noqa: F401
    except ImportError as e:
        return f"tempo.spark.SparkExecutor cannot be imported: {e}"
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and os.path.exists(os.path.join(java_home, "bin", "java"))):
        return "no Java runtime: `java` is not on PATH and JAVA_HOME is not set"
    return None


def skip_without_spark() -> None:
    reason = spark_unavailable()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """One local Spark session for the whole test run, stopped at its end."""
    skip_without_spark()
    os.environ["PYSPARK_PYTHON"] = sys.executable  # workers run this interpreter (and see tempo)
    import tempo.spark

    factory = getattr(tempo.spark, "spark_session", None)
    if factory is not None:
        # Tiny inputs: one shuffle partition and no progress bars keep each query cheap.
        spark = factory(spark_sql_shuffle_partitions="1", spark_ui_showConsoleProgress="false")
    else:
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("tempo-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.default.parallelism", "2")
            .getOrCreate()
        )
    yield spark
    spark.stop()


@pytest.fixture
def spark_executor(spark_session: Any) -> Any:
    from tempo.spark import SparkExecutor

    return SparkExecutor(spark_session)


class Capability(enum.Enum):
    """What an executor promises beyond the results, events and CTIs every executor gives.

    A test that checks such a detail is marked ``@pytest.mark.needs(Capability.X)`` and is
    skipped, with the reason, on executors that do not promise it."""

    RAW_ITEMS = "raw_items"
    """``Result.raw`` is the item-by-item output the hand-written timelines describe: edges
    as edges, interleaved with CTIs, and events released by one CTI in the engine's order."""

    IN_PROCESS_UDFS = "in_process_udfs"
    """udfs run in the test's process, so a test can observe their calls."""


@attrs.frozen
class ExecutorKind:
    """One way to run a query that tests run on: the only place an executor is added."""

    id: str  # the test id's parameter
    name: str  # as its errors name it: "the <name> executor"
    executor_class: str  # the class of the executors it makes, for ``promises``
    capabilities: frozenset[Capability]
    make: Callable[[pytest.FixtureRequest], Any]
    marks: tuple[pytest.MarkDecorator, ...] = ()
    everywhere: bool = True  # in EXECUTORS; False: only where a test asks for it (on_executors)

    def param(self) -> Any:
        return pytest.param(self, id=self.id, marks=self.marks)


def _spark(request: pytest.FixtureRequest) -> Any:
    skip_without_spark()
    return request.getfixturevalue("spark_executor")


def _spark_ingress(request: pytest.FixtureRequest) -> Any:
    """Spark with every input read as DataFrames in blocks of 3 rows (its ingress path for
    large inputs), rather than collected on the driver."""
    spark = _spark(request)
    from tempo.spark import SparkExecutor, ingress

    request.getfixturevalue("monkeypatch").setattr(ingress, "BLOCK_ROWS", 3)
    return SparkExecutor(spark.spark, local_items=0)


def _vectorised(request: pytest.FixtureRequest) -> Any:
    pytest.importorskip("polars", reason="the vectorised executor needs polars (the `vectorised` extra)")
    from tempo.vectorised import VectorisedExecutor

    return VectorisedExecutor()


MEMORY = ExecutorKind("memory", "in-memory", "InMemoryExecutor", frozenset(Capability), lambda request: InMemoryExecutor())
SPARK = ExecutorKind("spark", "Spark", "SparkExecutor", frozenset(), _spark, (pytest.mark.spark,))
SPARK_INGRESS = ExecutorKind("spark-ingress", "Spark", "SparkExecutor", frozenset(), _spark_ingress, (pytest.mark.spark,), everywhere=False)
VECTORISED = ExecutorKind("vectorised", "vectorised", "VectorisedExecutor", frozenset(), _vectorised)
"""Being built up (issue 15): a test whose query it has no rule for yet is reported skipped,
with the node it lacks (``pytest_runtest_makereport``), rather than failed."""
KINDS = (MEMORY, SPARK, SPARK_INGRESS, VECTORISED)
"""Every executor kind: a new executor is one more entry here."""
EXECUTORS = tuple(k for k in KINDS if k.everywhere)
"""The executors every executor-parametrised test runs on."""


def promises(executor: object, capability: Capability) -> bool:
    """Whether ``executor`` promises ``capability``: for shared checks (``same_items``...) that
    compare what every executor promises and, where promised, the reference's detail."""
    kinds = [k for k in KINDS if k.executor_class == type(executor).__name__]
    assert kinds, f"{type(executor).__name__} is no executor kind of tests/conftest.py"
    return all(capability in k.capabilities for k in kinds)


def on_executors(*kinds: ExecutorKind) -> pytest.MarkDecorator:
    """Run a test's (or a module's, as ``pytestmark``) ``executor`` on ``kinds`` rather than
    on ``EXECUTORS``."""
    return pytest.mark.executors(*kinds)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "executor_kind" in metafunc.fixturenames:
        mark = metafunc.definition.get_closest_marker("executors")
        kinds = EXECUTORS if mark is None else mark.args
        metafunc.parametrize("executor_kind", [k.param() for k in kinds], indirect=True)


@pytest.fixture
def executor_kind(request: pytest.FixtureRequest) -> ExecutorKind:
    """The executor kind a test runs on; skips a test marked ``needs`` what it lacks."""
    kind: ExecutorKind = request.param
    for mark in request.node.iter_markers("needs"):
        missing = set(mark.args) - kind.capabilities
        if missing:
            pytest.skip(f"the {kind.name} executor does not promise {', '.join(sorted(c.value for c in missing))}")
    return kind


@pytest.fixture
def executor(executor_kind: ExecutorKind, request: pytest.FixtureRequest) -> Any:
    """The executor a conformance test runs its queries on (one per ``EXECUTORS`` entry)."""
    return executor_kind.make(request)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    params = getattr(getattr(item, "callspec", None), "params", {})
    if report.when == "call" and call.excinfo is not None and params.get("executor_kind") is VECTORISED:
        from tempo.errors import UnsupportedError

        if call.excinfo.errisinstance(UnsupportedError):
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: not yet on the vectorised executor: {call.excinfo.value}")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-slow",
        action="store_true",
        default=False,
        help="also run the tests marked slow (soak and kill loops; `nox -s slow` runs them)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """``--run-slow`` also draws every example of the property tests (``tests/budget.py``)."""
    if config.getoption("--run-slow"):
        from tests.budget import THOROUGH

        os.environ[THOROUGH] = "1"


FIRST = (
    "tests/distributed/",
    "tests/streaming/test_hadoop_checkpoint.py",
    "tests/streaming/test_kill.py",
    "tests/test_spark_stderr.py",
    "tests/test_examples.py",
)
"""The tests that start processes of their own (a JVM each, a minute or more a test) run
first: the README's command splits the suite over two processes (pytest-xdist), and one that
drew them last would run them alone while the other had nothing left."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``slow`` (long soak and kill loops, each with a short version that always
    runs) are skipped unless ``--run-slow`` is given: CI and the README's command run the
    short versions. The tests in ``FIRST`` go first."""
    items.sort(key=lambda item: not item.nodeid.startswith(FIRST))  # stable: the rest keep their order
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow (nox -s slow)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
