"""The import graph of tempo/ is the one docs/architecture.md writes down.

Every ``import`` in tempo/, at module level or inside a function, is checked against the
table "What may import what" of that page: a unit (a top-level module, or a package with
everything below it) may import only the units its row names. In particular no executor
package imports another, and the runtime imports no executor.

No module of tempo/ uses another module's private name (one with a leading underscore), by
``from m import _name`` or as ``m._name``: a name two modules share is public, with a
docstring, or lives where it is used. ``PRIVATE_NAMES_LEFT`` holds the sites still waiting.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tempo"
EXECUTORS = ("tempo.memory", "tempo.spark", "tempo.vectorised")

PRIVATE_NAMES_LEFT: dict[tuple[str, str], tuple[set[str], str]] = {}
"""The private names still used across modules: (importer, defining module) -> (names, why
each is left). A site fixed leaves this table, which the test keeps exact."""


def allowed_imports() -> dict[str, set[str]]:
    """The table of docs/architecture.md: unit -> the units it may import."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## What may import what", 1)[1].split("\n## ", 1)[0]
    table: dict[str, set[str]] = {}
    for line in section.splitlines():
        row = re.match(r"^\| `([\w.]+)` \|(.*)\|\s*$", line)
        if row:
            table[row.group(1)] = set(re.findall(r"`(tempo[\w.]*)`", row.group(2)))
    return table


def unit_of(module: str) -> str:
    """``tempo.spark.ingress.scan`` -> ``tempo.spark``; ``tempo.result`` -> ``tempo.result``."""
    parts = module.split(".")
    return ".".join(parts[:2])


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    """Whether ``name`` (``tempo.a.b``) is a module or package of tempo/."""
    as_path = ROOT.joinpath(*name.split("."))
    return as_path.with_suffix(".py").exists() or as_path.is_dir()


def imports_of(path: Path) -> set[str]:
    """The tempo modules ``path`` imports (``from tempo import x`` counts as ``tempo.x`` when x is
    a module or package, else as ``tempo``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "tempo")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "tempo":
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if is_module(candidate) else node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            raise AssertionError(f"{path}: relative import; tempo uses absolute imports only")
    return found


def private_names_used(path: Path, module: str) -> set[tuple[str, str]]:
    """The private names of other tempo modules ``path`` (module ``module``) uses: (defining
    module, name) for each ``from m import _name`` and each ``m._name``, ``m`` a module bound
    by an import (``import tempo.a.b as m``, ``from tempo.a import b``, or ``tempo.a.b`` itself)."""
    tree = ast.parse(path.read_text())
    modules: dict[str, str] = {}  # a name bound to a tempo module -> that module
    found: set[tuple[str, str]] = set()

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "tempo":  # ``import tempo.a.b`` binds ``tempo``
                    modules[alias.asname or "tempo"] = alias.name if alias.asname else "tempo"
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "tempo":
            for alias in node.names:
                if is_module(f"{node.module}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                elif private(alias.name) and node.module != module:
                    found.add((node.module, alias.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and private(node.attr):
            dotted = dotted_name(node.value)
            if dotted is None:
                continue
            head, _, rest = dotted.partition(".")
            if head not in modules:
                continue
            defining = f"{modules[head]}.{rest}" if rest else modules[head]
            if is_module(defining) and defining != module:
                found.add((defining, node.attr))
    return found


def dotted_name(node: ast.expr) -> str | None:
    """``a.b.c`` for the expression ``a.b.c`` made of names and attributes only, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def private_names_across_modules() -> dict[tuple[str, str], set[str]]:
    """(importer, defining module) -> the private names it uses, over every module of tempo/."""
    used: dict[tuple[str, str], set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        for defining, name in private_names_used(path, module):
            used.setdefault((module, defining), set()).add(name)
    return used


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = unit_of(module_name(path))
        targets = {unit_of(m) for m in imports_of(path)} - {source}
        graph.setdefault(source, set()).update(targets)
    return graph


def test_every_unit_of_tempo_has_a_row() -> None:
    assert set(import_graph()) <= set(allowed_imports()), "a unit of tempo/ is missing from docs/architecture.md"


def test_imports_follow_the_architecture_page() -> None:
    allowed = allowed_imports()
    wrong = []
    for source, targets in import_graph().items():
        if source == "tempo":  # the package's public names come from everywhere
            continue
        for target in sorted(targets - allowed[source]):
            wrong.append(f"{source} imports {target}")
    assert wrong == [], "imports the architecture page does not allow:\n  " + "\n  ".join(wrong)


def test_no_executor_imports_another_and_the_runtime_imports_none() -> None:
    graph = import_graph()
    for executor in EXECUTORS:
        assert not graph.get(executor, set()) & (set(EXECUTORS) - {executor}), executor
    assert not graph["tempo.runtime"] & {*EXECUTORS, "tempo.api", "tempo.viz", "tempo.executors"}
    assert not graph["tempo.plan"] & {"tempo.api", "tempo.runtime", *EXECUTORS}


def test_the_checker_sees_lazy_and_from_imports(tmp_path: Path) -> None:
    """Guard: imports inside functions and ``from tempo import module`` are both counted."""
    module = tmp_path / "m.py"
    module.write_text(
        "from tempo import tables\n\ndef f():\n    from tempo.memory import InMemoryExecutor\n    import tempo.spark.ingress\n"
    )
    assert imports_of(module) == {"tempo.tables", "tempo.memory", "tempo.spark.ingress"}


def test_no_module_uses_another_modules_private_names() -> None:
    used = private_names_across_modules()
    left = {site: names for site, (names, _) in PRIVATE_NAMES_LEFT.items()}
    new = [
        f"{importer} uses {defining}.{name}"
        for (importer, defining), names in sorted(used.items())
        for name in sorted(names - left.get((importer, defining), set()))
    ]
    assert new == [], "private names used across modules (make them public, or move them where they are used):\n  " + "\n  ".join(new)
    fixed = [
        f"{importer}: {defining}.{name}"
        for (importer, defining), names in sorted(left.items())
        for name in sorted(names - used.get((importer, defining), set()))
    ]
    assert fixed == [], "PRIVATE_NAMES_LEFT lists sites that no longer use the name: take them out\n  " + "\n  ".join(fixed)


def test_the_private_name_checker_sees_every_form(tmp_path: Path) -> None:
    """Guard: ``from m import _x`` (also in a function), ``m._x`` for a module bound by any form
    of import, and a module's own private names left alone."""
    module = tmp_path / "m.py"
    module.write_text(
        "import tempo.runtime.engine\n"
        "import tempo.runtime.live as live\n"
        "from tempo.runtime import keyed\n"
        "from tempo.runtime.windows import Window, _own\n"
        "\n"
        "def f():\n"
        "    from tempo.tables import _stores_only\n"
        "    return tempo.runtime.engine._a, live._b, keyed._c, keyed.__name__, Window._close\n"
    )
    assert private_names_used(module, "tempo.runtime.windows") == {
        ("tempo.tables", "_stores_only"),
        ("tempo.runtime.engine", "_a"),
        ("tempo.runtime.live", "_b"),
        ("tempo.runtime.keyed", "_c"),
    }
