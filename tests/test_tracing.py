"""Tracing traps: what a lambda cannot do is a ``TraceError`` that names it, never a wrong answer.

* A predicate, key or aggregate argument that comes out as a plain Python constant (``is``,
  ``in`` on a Python container, a lambda that ignores its event) is refused, saying why and
  what to write (``tempo.is_null``, ``tempo.is_in``, ``tempo.lit``).
* A call or operator that cannot be traced (``math.sqrt``, ``round``, ``**``, ``len``,
  ``.upper()``...) is named in the user's own spelling, with the supported form or the udf.
* Messages and ``explain()`` use the lambda's own parameter names; plan equality does not.
* ``explain()`` prints durations as people read them.
* mypy: ``w.avg`` of a nullable value is ``float | None``; a projection must build a record.

These fail at build time, before any executor runs, so they need no executor.
"""

from __future__ import annotations

import math
import re
import pickle
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest

import tempo
from tempo import (
    AdvanceTimeGenerationSettings,
    AdvanceTimeSettings,
    EventOrderingSettings,
    EventShape,
    Point,
    QueryBuildError,
    Stream,
    TraceError,
)
from tempo.expr import nodes as x

T0 = datetime(2024, 1, 1)


@attrs.frozen
class Reading:
    sensor: str
    celsius: float
    humidity: float | None


@attrs.frozen
class Out:
    sensor: str
    value: float


@attrs.frozen
class Flagged:
    sensor: str
    missing: bool


@attrs.frozen
class Avg:
    sensor: str
    celsius: float


def readings() -> Stream[Reading]:
    return Stream.create("readings", [Point(T0, Reading("a", 20.0, None))], EventShape.POINT)


# --------------------------------------------------------------------------------------
# constants where a traced value was expected
# --------------------------------------------------------------------------------------

CONSTANTS: list[tuple[str, Callable[[Stream[Reading]], Any], list[str]]] = [
    (
        "where-is-not-none",
        lambda s: s.where(lambda reading: reading.humidity is not None),
        ["`reading.humidity is not None`", "constant True", "keep every event", "`is not`", "tempo.is_not_null(reading.humidity)"],
    ),
    (
        "where-is-none",
        lambda s: s.where(lambda r: r.humidity is None),
        ["constant False", "keep no event", "tempo.is_null(r.humidity)", "tempo.lit(False)"],
    ),
    (
        "where-in-empty",
        lambda s: s.where(lambda r: r.sensor in ()),
        ["`in`", "tempo.is_in(r.sensor, ())"],
    ),
    (
        "where-not-in-empty",
        lambda s: s.where(lambda r: r.sensor not in ()),
        ["constant True", "tempo.not_(tempo.is_in(r.sensor, ()))"],
    ),
    ("where-true", lambda s: s.where(lambda r: True), ["constant True", "does not use its argument", "tempo.lit(True)"]),
    (
        "where-helper",
        lambda s: s.where(lambda r: callable(r)),
        ["callable()", "evaluated by Python"],
    ),
    (
        "join-on-is",
        lambda s: s.join(s, on=lambda left, right: left.humidity is None, select=lambda left, right: left),
        ["join on= predicate", "no pair would match", "tempo.is_null(left.humidity)"],
    ),
    (
        "anti-join-on-is-not",
        lambda s: s.anti_join(s, on=lambda left, right: right.humidity is not None),
        ["anti_join on= predicate", "every pair would match", "tempo.is_not_null(right.humidity)"],
    ),
    ("group-key", lambda s: s.group_by(lambda r: "all"), ["group_by() key", "same key", "tempo.lit('all')"]),
    (
        "group-key-tuple",
        lambda s: s.group_by(lambda r: (r.sensor, r.humidity is None)),
        ["group_by() key", "constant False", "tempo.is_null(r.humidity)"],
    ),
    (
        "aggregate-argument",
        lambda s: s.tumbling(timedelta(minutes=1)).aggregate(lambda w: Avg(sensor="x", celsius=w.sum(lambda r: 1.0))),
        ["argument of w.sum()", "constant 1.0", "tempo.lit(1.0)"],
    ),
    (
        "select-field-is",
        lambda s: s.select(lambda r: Flagged(sensor=r.sensor, missing=r.humidity is None)),
        ["select() projection (field 'missing')", "tempo.is_null(r.humidity)"],
    ),
    (
        "select-not-a-record",
        lambda s: s.select(lambda r: r.humidity is None),
        ["select() projection", "no record"],
    ),
    (
        "join-select-field-in",
        lambda s: s.join(s, on=lambda a, b: a.sensor == b.sensor, select=lambda a, b: Flagged(sensor=a.sensor, missing=a.sensor in ())),
        ["join select=", "field 'missing'", "tempo.is_in(a.sensor, ())"],
    ),
    (
        "aggregate-field-is",
        lambda s: (
            s.group_by(lambda r: r.sensor)
            .tumbling(timedelta(minutes=1))
            .aggregate(lambda sensor, w: Flagged(sensor=sensor, missing=w.avg(lambda r: r.humidity) is None))
        ),
        ["aggregate() projection (field 'missing')", "tempo.is_null(w.avg(lambda r: r.humidity))"],
    ),
]


@pytest.mark.parametrize(("build", "words"), [c[1:] for c in CONSTANTS], ids=[c[0] for c in CONSTANTS])
def test_a_constant_where_a_traced_value_is_expected_is_a_trace_error(build: Callable[[Stream[Reading]], Any], words: list[str]) -> None:
    with pytest.raises(TraceError) as info:
        build(readings())
    msg = str(info.value)
    for word in words:
        assert word in msg, (word, msg)


def test_a_projection_that_is_no_record_fails_at_build() -> None:
    with pytest.raises(QueryBuildError, match=r"select\(\) must return a payload record.*r\.celsius"):
        readings().select(lambda r: r.celsius)  # type: ignore[type-var]
    with pytest.raises(TraceError, match=r"tempo\.coalesce\(x, default\) instead of `x or default`"):
        readings().select(lambda r: Out(r.sensor, r.humidity or 0.0))


def test_over_key_constant_is_a_trace_error() -> None:
    settings = AdvanceTimeSettings(ordering=EventOrderingSettings())
    with pytest.raises(TraceError, match=r"over= key of input 'readings'.*tempo\.is_null\(r\.humidity\)"):
        Stream.create("readings", [Point(T0, Reading("a", 1.0, None))], EventShape.POINT, settings, over=lambda r: r.humidity is None)


def test_explicit_constants_and_constant_records_are_fine() -> None:
    s = readings()
    assert "Where True" in s.where(lambda r: tempo.lit(True)).explain()
    s.join(s, on=lambda a, b: tempo.lit(True), select=lambda a, b: a)
    s.group_by(lambda r: tempo.lit("all")).tumbling(timedelta(minutes=1)).aggregate(lambda k, w: Avg(k, 0.0))
    # a record of constants is a legitimate projection (a tag, a default)
    assert s.select(lambda r: Out(sensor="fixed", value=0.0)).payload_type is Out
    assert s.select(lambda r: Flagged(sensor=r.sensor, missing=tempo.lit(False))).payload_type is Flagged


# --------------------------------------------------------------------------------------
# calls and operators that cannot be traced, named in the user's own spelling
# --------------------------------------------------------------------------------------


def _f(x: float) -> float:
    return math.floor(x)


CALLS: list[tuple[str, Callable[[Stream[Reading]], Any], list[str]]] = [
    (
        "math.sqrt",
        lambda s: s.where(lambda reading: math.sqrt(reading.celsius) > 2),
        ["`math.sqrt(reading.celsius)`", "where() predicate", "tempo.udf(math.sqrt, float)(reading.celsius)"],
    ),
    ("round", lambda s: s.select(lambda r: Out(r.sensor, round(r.celsius))), ["`round(r.celsius)`", "tempo.udf(round, int)(r.celsius)"]),
    ("pow", lambda s: s.where(lambda r: r.celsius**2 > 4), ["`r.celsius**2`", "x * x", "tempo.udf(pow, float)"]),
    ("rpow", lambda s: s.where(lambda r: 2**r.celsius > 4), ["`2**r.celsius`", "tempo.udf(pow, float)"]),
    ("len", lambda s: s.where(lambda r: len(r.sensor) > 2), ["`len(r.sensor)`", "tempo.udf(len, int)(r.sensor)"]),
    ("upper", lambda s: s.where(lambda r: r.sensor.upper() == "A"), ["`r.sensor.upper`", "str method", "tempo.udf(str.upper"]),
    ("str", lambda s: s.select(lambda r: Flagged(str(r.celsius), False)), ["`str(r.celsius)`", "tempo.udf(str, str)(r.celsius)"]),
    ("int", lambda s: s.select(lambda r: Out(r.sensor, int(r.celsius))), ["`int(r.celsius)`", "r.celsius // 1"]),
    ("float", lambda s: s.select(lambda r: Out(r.sensor, float(r.celsius))), ["`float(r.celsius)`", "r.celsius * 1.0"]),
    ("max", lambda s: s.select(lambda r: Out(r.sensor, max(r.celsius, 0.0))), ["`max(r.celsius, 0.0)`", "tempo.when"]),
    ("in-set", lambda s: s.where(lambda r: r.sensor in {"a", "b"}), ['`r.sensor in {"a", "b"}`', "tempo.is_in"]),
    ("in-list", lambda s: s.where(lambda r: r.sensor in ["a", "b"]), ['`r.sensor in ["a", "b"]`', "tempo.is_in"]),
    ("substring", lambda s: s.where(lambda r: "a" in r.sensor), ['`"a" in r.sensor`', "tempo.udf"]),
    ("if", lambda s: s.where(lambda r: r.celsius if r.humidity else r.celsius), ["`r.celsius if r.humidity else r.celsius`", "tempo.when"]),
    ("bool", lambda s: s.where(lambda r: bool(r.celsius)), ["`bool(r.celsius)`", "x != 0"]),
    ("fstring", lambda s: s.select(lambda r: Flagged(f"{r.sensor}!", False)), ['`f"{r.sensor}!"`', "tempo.udf"]),
    ("index", lambda s: s.where(lambda r: r.sensor[0] == "a"), ["`r.sensor[0]`", "tempo.udf"]),
    ("user-function", lambda s: s.where(lambda r: _f(r.celsius) > 1), ["`_f(r.celsius)`", "_f is a Python function", "tempo.udf(_f,"]),
    (
        "aggregate-argument",
        lambda s: s.tumbling(timedelta(minutes=1)).aggregate(lambda w: Avg("x", w.avg(lambda reading: abs(round(reading.celsius))))),
        ["`round(reading.celsius)`", "argument of w.avg()"],
    ),
    (
        "and-is",
        lambda s: s.where(lambda r: (r.celsius > 1) & (r.humidity is not None)),
        ["`(r.celsius > 1) & (r.humidity is not None)`", "given to `&` is the Python constant True", "tempo.is_not_null"],
    ),
    (
        "or-in",
        lambda s: s.where(lambda r: (r.sensor in ()) | (r.celsius > 1)),
        ["given to `|` is the Python constant False", "tempo.is_in"],
    ),
    (
        "when-is",
        lambda s: s.select(lambda r: Out(r.sensor, tempo.when(r.humidity is None, 0.0, r.celsius))),
        ["`tempo.when(r.humidity is None, 0.0, r.celsius)`", "given to tempo.when is the Python constant False", "tempo.is_null"],
    ),
    ("not-is", lambda s: s.where(lambda r: tempo.not_(r.humidity is None)), ["given to tempo.not_", "tempo.is_null"]),
    ("eq-none", lambda s: s.where(lambda r: r.humidity == None), ["`r.humidity == None`", "tempo.is_null(r.humidity)"]),  # noqa: E711
    ("ne-none", lambda s: s.where(lambda r: r.humidity != None), ["tempo.is_not_null(r.humidity)"]),  # noqa: E711
]


@pytest.mark.parametrize(("build", "words"), [c[1:] for c in CALLS], ids=[c[0] for c in CALLS])
def test_untraceable_call_is_named_with_the_fix(build: Callable[[Stream[Reading]], Any], words: list[str]) -> None:
    with pytest.raises(TraceError) as info:
        build(readings())
    msg = str(info.value)
    for word in words:
        assert word in msg, (word, msg)
    assert "e." not in msg.replace("tempo.", "").replace("the ", ""), msg  # never the internal name `e`


def test_type_errors_name_the_spot_and_keep_their_class() -> None:
    with pytest.raises(QueryBuildError) as info:
        readings().where(lambda reading: reading.sensor + 1 > 0)
    assert not isinstance(info.value, TraceError)
    assert "`reading.sensor + 1`" in str(info.value) and "str + int" in str(info.value)
    with pytest.raises(QueryBuildError, match=r"`reading\.sensr`.*no field 'sensr'.*sensor, celsius, humidity"):
        readings().where(lambda reading: reading.sensr == "a")


def test_abs_and_supported_operators_trace() -> None:
    q = readings().where(lambda r: (abs(r.celsius - 20) > 1) & (-r.celsius < 0) & (r.celsius % 2 == 0))
    assert "abs" in q.explain()


# --------------------------------------------------------------------------------------
# the user's own names in explain(); plan equality ignores them
# --------------------------------------------------------------------------------------


def test_explain_uses_the_lambdas_parameter_names() -> None:
    s = readings()
    q = (
        s.where(lambda reading: tempo.is_not_null(reading.humidity))
        .group_by(lambda reading: reading.sensor)
        .tumbling(timedelta(minutes=1))
        .aggregate(lambda sensor, w: Avg(sensor=sensor, celsius=w.avg(lambda r: tempo.coalesce(r.humidity, r.celsius))))
    )
    text = q.explain()
    assert "Where is_not_null(reading.humidity)" in text
    assert "by reading.sensor" in text
    assert "avg(coalesce(r.humidity, r.celsius))" in text
    assert "Avg(sensor=sensor, celsius=agg0)" in text
    j = s.join(s, on=lambda left, right: left.sensor == right.sensor, select=lambda left, right: Out(left.sensor, right.celsius))
    assert "left.sensor == right.sensor" in j.explain() and "Out(sensor=left.sensor, value=right.celsius)" in j.explain()


def test_parameter_names_do_not_change_plan_equality() -> None:
    from tempo.plan import nodes as p

    s = readings()
    a = s.where(lambda r: r.celsius > 1).node
    b = s.where(lambda reading: reading.celsius > 1).node
    assert isinstance(a, p.WhereNode) and isinstance(b, p.WhereNode)
    assert a.predicate == b.predicate and hash(a.predicate) == hash(b.predicate)
    # the same aggregate spelled with two names is computed once
    q = s.tumbling(timedelta(minutes=1)).aggregate(
        lambda w: Avg(sensor="x", celsius=w.avg(lambda r: r.celsius) + w.avg(lambda reading: reading.celsius))
    )
    assert isinstance(q.node, p.WindowNode) and len(q.node.aggregates) == 1
    # a join keyed the same way whatever the names: an equi-join key pair
    j = s.join(s, on=lambda left, right: left.sensor == right.sensor, select=lambda l, r: l)
    assert isinstance(j.node, p.JoinNode) and len(j.node.keys) == 1


# --------------------------------------------------------------------------------------
# explain() prints times and durations as people read them
# --------------------------------------------------------------------------------------


def test_explain_prints_durations_readably() -> None:
    gen = AdvanceTimeSettings(AdvanceTimeGenerationSettings(10, delay=timedelta(seconds=5), advance_to_infinity_on_shutdown=True))
    span = AdvanceTimeSettings(AdvanceTimeGenerationSettings(timedelta(minutes=1), delay=timedelta(microseconds=-1)))
    a = Stream.create("a", [Point(T0, Reading("a", 1.0, None))], EventShape.POINT, gen)
    b = Stream.create("b", [Point(T0, Reading("a", 1.0, None))], EventShape.POINT, span)
    ordered = Stream.create(
        "c",
        [Point(T0, Reading("a", 1.0, None))],
        EventShape.POINT,
        AdvanceTimeSettings(ordering=EventOrderingSettings(timedelta(seconds=2), timedelta(seconds=5), None)),
    )
    q = (
        a.union(b)
        .union(ordered)
        .shift_event_time(timedelta(minutes=-1))
        .alter_event_lifetime(timedelta(seconds=1), timedelta(hours=1, minutes=30))
        .hopping(timedelta(minutes=10), timedelta(minutes=5), timedelta(seconds=30))
        .aggregate(lambda w: Avg(sensor="x", celsius=w.avg(lambda r: r.celsius)))
    )
    text = q.explain()
    for fragment in (
        "a CTI every 10 events, delay 5 s, flush at end",
        "a CTI every 1 min, delay -1 µs",
        "out-of-order tolerance 2 s, late-arrival tolerance 5 s, early-arrival window off",
        "ShiftEventTime: shift -1 min",
        "AlterEventLifetime: shift 1 s, duration 1 h 30 min",
        "Hopping 10 min hop 5 min offset 30 s",
    ):
        assert fragment in text, (fragment, text)
    assert not re.search(r"\d+ ?us\b|ticks|day", text), text
    tumbling = a.tumbling(timedelta(seconds=5)).aggregate(lambda w: Avg(sensor="x", celsius=0.0)).explain()
    assert "Tumbling 5 s:" in tumbling


def test_negative_durations_in_errors_are_readable() -> None:
    with pytest.raises(QueryBuildError, match="must be positive, got -1 min"):
        readings().alter_event_duration(timedelta(minutes=-1))


# --------------------------------------------------------------------------------------
# the udf check ships to Spark workers without tempo
# --------------------------------------------------------------------------------------


def _hot(v: float) -> Any:
    return "hot" if v > 1 else v


def test_checked_udf_runs_where_tempo_cannot_be_imported() -> None:
    """A Spark worker may lack tempo: the check refers to nothing of tempo's."""
    cloudpickle = pytest.importorskip("pyspark.cloudpickle")
    check = x.checked_udf(lambda v: "hot" if v > 1 else v * 2, float, "hot", local=False)
    data = cloudpickle.dumps(check)
    script = (
        "import pickle, sys\n"
        "sys.modules['tempo'] = None\n"  # any import of tempo fails
        "f = pickle.loads(sys.stdin.buffer.read())\n"
        "assert f(0.5) == 1.0 and f(None if False else 0) == 0.0 and type(f(0)) is float\n"
        "try:\n    f(2.0)\nexcept ValueError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], input=data, capture_output=True, check=True)
    text = out.stdout.decode()
    assert text.count(x.UDF_MARKER) == 2 and '"hot", "float", "str", "\'hot\'", "(2.0,)"' in text, text
    from tempo.spark.columns import udf_error

    error = udf_error(RuntimeError("Py4J ... " + text))
    assert isinstance(error, tempo.UdfResultError) and error.value == "'hot'"
    assert pickle.loads(pickle.dumps(error)).arguments == "(2.0,)"


def test_udf_declaration_is_checked_at_build() -> None:
    with pytest.raises(QueryBuildError, match="must be a type"):
        tempo.udf(_hot, "float")  # type: ignore[arg-type]
    with pytest.raises(QueryBuildError, match="positional"):
        readings().select(lambda r: Out(r.sensor, tempo.udf(_hot, float)(v=r.celsius)))  # type: ignore[call-arg]


# --------------------------------------------------------------------------------------
# mypy sees nullable aggregates and non-record projections
# --------------------------------------------------------------------------------------

TYPED = """\
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import attrs

import tempo
from tempo import EventShape, Point, Stream


@attrs.frozen
class Reading:
    sensor: str
    celsius: float
    humidity: float | None
    count: int | None


@dataclass(frozen=True)
class Stats:
    sensor: str
    celsius: float
    humidity: float | None
    total: int | None


t0 = datetime(2024, 1, 1)
s = Stream.create("r", [Point(t0, Reading("a", 1.0, None, None))], EventShape.POINT)
ok = s.group_by(lambda r: r.sensor).tumbling(timedelta(minutes=1)).aggregate(
    lambda k, w: Stats(k, w.avg(lambda r: r.celsius), w.avg(lambda r: r.humidity), w.sum(lambda r: r.count))
)
filled = s.select(lambda r: Stats(r.sensor, tempo.coalesce(r.humidity, 0.0), r.humidity, tempo.coalesce(r.count, 0)))
kept = s.where(lambda r: tempo.is_not_null(r.humidity) & tempo.is_null(r.count))
bad_avg = s.group_by(lambda r: r.sensor).tumbling(timedelta(minutes=1)).aggregate(
    lambda k, w: Stats(k, w.avg(lambda r: r.humidity), None, None)  # BAD-AVG
)
bad_select = s.select(lambda r: r.celsius)  # BAD-SELECT
bad_join = s.join(s, lambda a, b: a.sensor == b.sensor, lambda a, b: a.celsius)  # BAD-JOIN
bad_coalesce: float = tempo.coalesce(s.payload_type("a", 1.0, None, None).humidity, None)  # BAD-COALESCE
"""


def test_mypy_sees_nullable_aggregates_and_record_projections(tmp_path: Path) -> None:
    mypy_api = pytest.importorskip("mypy.api")
    repo = Path(__file__).resolve().parents[1]
    config = tmp_path / "mypy.ini"
    config.write_text(
        f"[mypy]\nstrict = True\nmypy_path = {repo / 'typings'},{repo}\ncache_dir = {tmp_path / 'cache'}\n"
        "[mypy-tempo.*]\nfollow_imports = silent\n"
    )
    path = tmp_path / "typed.py"
    path.write_text(TYPED)
    stdout, stderr, status = mypy_api.run(["--config-file", str(config), str(path)])
    assert status == 1, stdout + stderr
    lines = TYPED.splitlines()
    found = {}
    for line in stdout.splitlines():
        if "typed.py:" in line and ": error:" in line:
            number = int(line.split("typed.py:")[1].split(":")[0])
            found[number] = line
    marked = {i + 1: text.split("# ")[-1] for i, text in enumerate(lines) if "# BAD-" in text}
    # aggregate lambdas report on the line of the call they appear in
    assert set(found) == set(marked), stdout
    assert "float | None" in found[next(i for i, m in marked.items() if m == "BAD-AVG")]
    assert '"R"' in found[next(i for i, m in marked.items() if m == "BAD-SELECT")]
    assert '"R"' in found[next(i for i, m in marked.items() if m == "BAD-JOIN")]
