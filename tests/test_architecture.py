"""The import graph of tempo/ is the one docs/architecture.md writes down.

Every ``import`` in tempo/, at module level or inside a function, is checked against the
table "What may import what" of that page: a unit (a top-level module, or a package with
everything below it) may import only the units its row names. In particular no executor
package imports another, and the runtime imports no executor.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tempo"
EXECUTORS = ("tempo.memory", "tempo.spark", "tempo.vectorised")


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
                as_path = ROOT.joinpath(*candidate.split("."))
                found.add(candidate if as_path.with_suffix(".py").exists() or as_path.is_dir() else node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            raise AssertionError(f"{path}: relative import; tempo uses absolute imports only")
    return found


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
