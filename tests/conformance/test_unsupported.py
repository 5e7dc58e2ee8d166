"""What an executor cannot run raises one error on every executor: ``UnsupportedError``,
naming the node or expression, the executor and the reason, before any output is computed.

The node and the expression below are defined here, so no executor has a rule for them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, ClassVar

import attrs
import pytest

import tempo
from tempo import CompileError, EventShape, Interval, Stream, UnsupportedError
from tempo.expr import nodes as x
from tempo.plan import nodes as p
from tests.conftest import ExecutorKind

BASE = datetime(2024, 1, 1)


@attrs.frozen
class M:
    k: str
    v: int


@attrs.frozen(eq=False)
class Reverse(p.Node):
    """A plan node no executor knows."""

    SEMANTICS: ClassVar[str] = "Reverses time (a test's node: no executor has a rule for it)."
    CTI_RULE: ClassVar[str] = "None."

    input: p.Node

    @property
    def payload_type(self) -> type:
        return self.input.payload_type

    def inputs(self) -> tuple[p.Node, ...]:
        return (self.input,)

    def longest_lifetime(self, lifetimes: tuple[int | None, ...]) -> int | None:
        # A well-formed plan node (it states its plan-level rules); only the executors lack it.
        return lifetimes[0]


@attrs.frozen
class IsPrime(x.Expr):
    """An expression no executor knows."""

    operand: x.Expr

    @property
    def dtype(self) -> type:
        return bool

    def children(self) -> tuple[x.Expr, ...]:
        return (self.operand,)


def source() -> Stream[M]:
    items = [Interval(BASE, BASE + timedelta(seconds=1), M("a", 7))]
    return Stream.create("in", items, EventShape.INTERVAL)


def check(error: UnsupportedError, kind: ExecutorKind, what: str, reason: str) -> None:
    assert isinstance(error, CompileError)  # `except CompileError` still catches it
    assert (error.executor, error.what, error.reason) == (kind.name, what, reason)
    assert str(error) == f"the {kind.name} executor cannot run {what}: {reason}"


def test_an_unknown_plan_node_raises_unsupported_error(executor: Any, executor_kind: ExecutorKind) -> None:
    with pytest.raises(UnsupportedError) as raised:
        executor.run(Stream(Reverse(source().node)))
    check(raised.value, executor_kind, "Reverse", "it has no rule for the plan node Reverse")


def test_an_unknown_expression_raises_unsupported_error(executor: Any, executor_kind: ExecutorKind) -> None:
    where = source().where(lambda e: e.v > 1).node
    assert isinstance(where, p.WhereNode) and isinstance(where.predicate, x.Binary)
    predicate = IsPrime(where.predicate.left)
    with pytest.raises(UnsupportedError) as raised:
        executor.run(Stream(attrs.evolve(where, predicate=predicate)))
    check(raised.value, executor_kind, f"the expression {x.render(predicate)}", "it has no rule for the expression IsPrime")


def test_unsupported_error_is_exported_and_pickles() -> None:
    import pickle

    error = UnsupportedError("Spark", "Reverse", "it has no rule for the plan node Reverse")
    assert tempo.UnsupportedError is UnsupportedError
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.executor, copy.what, copy.reason, str(copy)) == (error.executor, error.what, error.reason, str(error))
