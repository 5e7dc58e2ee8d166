"""One way for a compiler to pick the rule of a node: a registry keyed by the node's class.

Every compiler of the plan (``tempo.runtime.engine``, ``tempo.spark.compiler``) and of
expressions (``tempo.runtime.codegen``, ``tempo.spark.columns``) is a ``Registry``: its rules
are registered with ``@registry.rule(NodeClass)`` next to what they compile, and a node of a
class with no rule raises ``UnsupportedError`` naming the node, the executor and the reason,
whichever compiler meets it. The lookup is exact on the class (no subclass fallback), so a
subclass the executor has no rule for is never run as its base class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tempo.errors import UnsupportedError

C = TypeVar("C")  # what a rule is given besides the node: the compilation's state
R = TypeVar("R")  # what a rule builds
N = TypeVar("N")


class Registry(Generic[C, R]):
    """The rules of one compiler (``kind``: "plan node", "expression") of one executor."""

    def __init__(self, executor: str, kind: str, describe: Callable[[Any], str] = lambda item: type(item).__name__) -> None:
        self.executor = executor
        self.kind = kind
        self.describe = describe  # the node as the error names it
        self.rules: dict[type, Callable[[C, Any], R]] = {}

    def rule(self, node_type: type[N]) -> Callable[[Callable[[C, N], R]], Callable[[C, N], R]]:
        """Register the rule compiling nodes of exactly ``node_type``."""

        def register(fn: Callable[[C, N], R]) -> Callable[[C, N], R]:
            self.rules[node_type] = fn
            return fn

        return register

    def lookup(self, item: object) -> Callable[[C, Any], R]:
        """The rule of ``item``'s class; ``UnsupportedError`` when there is none."""
        fn = self.rules.get(type(item))
        if fn is None:
            raise UnsupportedError(self.executor, self.describe(item), f"it has no rule for the {self.kind} {type(item).__qualname__}")
        return fn

    def __call__(self, context: C, item: object) -> R:
        """Compile ``item`` by its rule."""
        return self.lookup(item)(context, item)
