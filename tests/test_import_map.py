"""The package's import map, as CONTRIBUTING.md draws it, holds in the code: every import of a
module (those inside functions included) points to a row below its own, and no chain of
imports between the package's modules closes a circle."""

from __future__ import annotations

import ast
import graphlib
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "feverous_es"


def map_rows() -> dict[str, int]:
    """Each top-level module or package of the map's code block, with its row (0: the top)."""
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    block = text.split("## The map", 1)[1].split("```", 2)[1]
    rows: dict[str, int] = {}
    for row, line in enumerate(line for line in block.splitlines()[1:] if line.strip()):
        names = re.split(r"\s{2,}", line.strip())[0]
        for name in names.split(","):
            rows[name.strip().removesuffix("/").removesuffix(".py")] = row
    return rows


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[str]:
    """The package's modules ``path`` imports, wherever in it the import stands."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield from (f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """Each of the package's modules with the package's modules it imports."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        graph[name] = set()
        for target in imports(path):
            while target and target not in modules:  # `from pkg import name`: name or pkg
                target = target.rpartition(".")[0]
            if target and target != name:
                graph[name].add(target)
    return graph


def top(module: str) -> str:
    return module.split(".")[1] if "." in module else module


# The package's own __init__ is its façade: it re-exports the public API lazily (the map's top)
# and holds ``__version__`` (read from every row): outside the map, both ways.
FACADE = "feverous_es"


def test_the_map_names_every_top_level_module_and_package() -> None:
    found = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" or (p / "__init__.py").is_file())}  # fmt: skip
    missing = found - set(map_rows()) - {"__init__"}
    assert not missing, f"CONTRIBUTING.md's map lacks {sorted(missing)}"


def test_every_import_points_down_the_map() -> None:
    rows = map_rows()
    upward = [
        f"{a} imports {b}"
        for a, targets in import_graph().items()
        for b in targets
        if FACADE not in (a, b) and top(a) != top(b) and rows[top(b)] <= rows[top(a)]
    ]
    assert not upward, "\n".join(sorted(upward))


def test_no_import_closes_a_circle() -> None:
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as error:
        raise AssertionError(f"a circle of imports: {' -> '.join(error.args[1])}") from None
