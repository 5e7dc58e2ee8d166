"""Shared fixtures: the executors tests run on, and one Spark session.

``KINDS`` lists the executors tests run on, each an ``ExecutorKind`` with the name its errors
use and the ``Capability`` set it promises; a third executor is one more entry. Every test
taking the ``executor`` fixture runs on ``EXECUTORS``: ``"memory"`` (``InMemoryExecutor``) and
``"spark"`` (``tempo.spark.SparkExecutor``). ``on_executors`` picks other kinds for one test or module. The Spark
kinds carry the ``spark`` marker and are skipped, with the reason, when pyspark, a Java
runtime or ``tempo.spark.SparkExecutor`` is missing. ``tempo.spark`` (and pyspark) are
imported only when a Spark test runs, and a whole test run shares one local Spark session.

A test an executor kind does not pass is declared, in one of two ways, and nothing else is
excused (an ``UnsupportedError`` elsewhere is a failure):

- **Not promised** (a skip): ``@pytest.mark.needs(Capability.X)``. A ``Capability`` is a detail
  beyond results, events and CTIs that an executor's design does not give, stated in its docs
  (docs/spark.md, docs/vectorised.md): both capabilities are such choices, so a kind lacking
  one skips the test, with the reason. A kind that comes to promise one says so in its
  ``capabilities``, and the tests then run on it.
- **Not implemented** (a strict xfail): ``@pytest.mark.not_implemented(KIND, ..., lacks="...")``
  for a query the kind is meant to run but has no rule for yet. It becomes
  ``xfail(strict=True, raises=UnsupportedError)`` on those kinds, and the error must name
  ``lacks``: when the kind gains the rule the test passes and so fails (strict), and any
  other error, or an ``UnsupportedError`` for something else, fails too.
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
        # With Spark's Kafka connector and Delta when java/fetch has fetched them (CI does):
        # the Kafka and Delta tests share this session, as there is one per process.
        from tempo.spark.session import connector_jars

        try:
            connectors = bool(connector_jars())
        except Exception:
            connectors = False
        spark = factory(spark_sql_shuffle_partitions="1", spark_ui_showConsoleProgress="false", connectors=connectors)
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
    skipped, with the reason, on executors that do not promise it: each is a design choice of
    the executors lacking it, not a missing feature (those are ``not_implemented``)."""

    RAW_ITEMS = "raw_items"
    """``Result.raw`` is the item-by-item output the hand-written timelines describe: edges
    as edges, interleaved with CTIs, and events released by one CTI in the engine's order.
    The compiled executors compute events in bulk and replay the CTIs on the driver: their raw
    items are the events and CTIs, not the reference's item order."""

    IN_PROCESS_UDFS = "in_process_udfs"
    """udfs run in the test's process, so a test can observe their calls (on Spark they run in
    Python workers, where a test sees none of them). The vectorised executor runs them here
    today (polars' ``map_elements``) without promising it (docs/vectorised.md)."""


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
"""Being built up (issue 15): the tests whose query it has no rule for yet are marked
``not_implemented(VECTORISED, lacks=...)``."""
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
    """The executor kind a test runs on; skips a test marked ``needs`` what it does not promise."""
    kind: ExecutorKind = request.param
    for mark in request.node.iter_markers("needs"):
        missing = set(mark.args) - kind.capabilities
        if missing:
            pytest.skip(f"not promised: the {kind.name} executor does not promise {', '.join(sorted(c.value for c in missing))}")
    return kind


@pytest.fixture
def executor(executor_kind: ExecutorKind, request: pytest.FixtureRequest) -> Any:
    """The executor a conformance test runs its queries on (one per ``EXECUTORS`` entry)."""
    return executor_kind.make(request)


def item_kind(item: pytest.Item) -> ExecutorKind | None:
    """The executor kind ``item`` runs on, if it takes the ``executor`` fixture."""
    kind: ExecutorKind | None = getattr(getattr(item, "callspec", None), "params", {}).get("executor_kind")
    return kind


def lacking(item: pytest.Item) -> list[str]:
    """What the ``not_implemented`` marks of ``item`` say the kind it runs on lacks.

    A mark must name kinds (a typo would excuse nothing) and what they lack."""
    lacks = []
    for mark in item.iter_markers("not_implemented"):
        if not mark.args or not all(isinstance(k, ExecutorKind) for k in mark.args) or not mark.kwargs.get("lacks"):
            raise pytest.UsageError(f"{item.nodeid}: not_implemented takes ExecutorKind values and lacks=..., got {mark}")
        if item_kind(item) in mark.args:
            lacks.append(mark.kwargs["lacks"])
    return lacks


def not_implemented_xfail(item: pytest.Item) -> pytest.MarkDecorator | None:
    """The strict xfail of ``item`` when it is a ``not_implemented`` pair, else None."""
    lacks, kind = lacking(item), item_kind(item)
    if not lacks or kind is None:
        return None
    from tempo.errors import UnsupportedError

    return pytest.mark.xfail(
        strict=True, raises=UnsupportedError, reason=f"not implemented on the {kind.name} executor: {'; '.join(lacks)}"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """An expected failure of a ``not_implemented`` pair whose ``UnsupportedError`` does not
    name what the mark says the kind lacks is a failure: the query lacks other rules than
    declared."""
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not hasattr(report, "wasxfail") or call.excinfo is None:
        return
    lacks = lacking(item)
    if lacks and not any(what in str(call.excinfo.value) for what in lacks):
        del report.wasxfail
        report.outcome = "failed"
        report.longrepr = f"declared not_implemented, lacking {' or '.join(map(repr, lacks))}, but raised {call.excinfo.value!r}"


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
    short versions. The tests in ``FIRST`` go first. The ``not_implemented`` pairs become strict
    xfails."""
    items.sort(key=lambda item: not item.nodeid.startswith(FIRST))  # stable: the rest keep their order
    for item in items:
        xfail = not_implemented_xfail(item)
        if xfail is not None:
            item.add_marker(xfail)
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow (nox -s slow)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
