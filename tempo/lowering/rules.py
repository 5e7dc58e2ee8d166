"""The plan nodes whose rule is written once in ``tempo.lowering``, by node class, and the
window kinds, by spec class. A rule module registers its rules where it defines them
(``@lowers(NodeClass)``, ``@lowers_window(SpecClass)``); importing ``tempo.lowering``
imports every rule module. Each DataFrame compiler registers them all in its own registry
(``register``) beside the rules it keeps, so a node written once needs no line in either
compiler, and each compiler's ``check_supported`` finds it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tempo.dispatch import Registry
from tempo.errors import UnsupportedError
from tempo.plan import nodes as p

F = TypeVar("F", bound=Callable[..., Any])

SHARED: dict[type, Callable[[Any, Any], Any]] = {}
"""The shared rule of each node class, by class."""
WINDOW_KINDS: dict[type, Callable[[Any, Any], Any]] = {}
"""Each window kind's rule, by spec class: one row per window its input's final CTI
completed, which ``tempo.lowering.windows.stamped`` stamps and projects."""


def _registering(table: dict[type, Callable[[Any, Any], Any]], key: type) -> Callable[[F], F]:
    def register(rule: F) -> F:
        table[key] = rule
        return rule

    return register


def lowers(node_type: type) -> Callable[[F], F]:
    """Register the shared rule of the nodes of exactly ``node_type``."""
    return _registering(SHARED, node_type)


def lowers_window(spec_type: type) -> Callable[[F], F]:
    """Register the rule of the window kind ``spec_type``."""
    return _registering(WINDOW_KINDS, spec_type)


def window_kind_rule(executor: str, node: p.WindowNode) -> Callable[[Any, Any], Any]:
    """The rule of ``node``'s window kind; ``UnsupportedError`` naming ``executor`` when it
    has none (each compiler's ``check_supported`` asks before any input is read)."""
    rule = WINDOW_KINDS.get(type(node.spec))
    if rule is None:
        raise UnsupportedError(executor, node.spec.describe(), "it has no rule for this window kind yet")
    return rule


def register(registry: Registry[Any, Any]) -> None:
    """Register every shared rule in a compiler's ``registry``."""
    for node_type, rule in SHARED.items():
        registry.rule(node_type)(rule)
