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

F = TypeVar("F", bound=Callable[..., Any])

SHARED: dict[type, Callable[[Any, Any], Any]] = {}
"""The shared rule of each node class, by class."""
WINDOW_KINDS: dict[type, Callable[[Any, Any], Any]] = {}
"""Each window kind's rule, by spec class: one row per window its input's final CTI
completed, which ``tempo.lowering.windows.stamped`` stamps and projects."""


def lowers(node_type: type) -> Callable[[F], F]:
    """Register the shared rule of the nodes of exactly ``node_type``."""

    def register(rule: F) -> F:
        SHARED[node_type] = rule
        return rule

    return register


def lowers_window(spec_type: type) -> Callable[[F], F]:
    """Register the rule of the window kind ``spec_type``."""

    def register(rule: F) -> F:
        WINDOW_KINDS[spec_type] = rule
        return rule

    return register


def register(registry: Registry[Any, Any]) -> None:
    """Register every shared rule in a compiler's ``registry``."""
    for node_type, rule in SHARED.items():
        registry.rule(node_type)(rule)
