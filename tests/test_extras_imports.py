"""The base install runs the command line: no module the command line imports when it starts
imports, at module level, a package that only an extra brings (``serve``, ``export``, ``dev``).
Such an import broke every command of a fresh `pip install -e .` (uvicorn, in the connection
cap's module, 3ba4176 to 8e3c812) while CI, which installs every extra, stayed green.

What an extra brings is read from the installed metadata: the distributions its requirements
pull in (transitively) that the base requirements do not, and the import names they provide.
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.test_import_map import PACKAGE, module_name

DISTRIBUTION = "feverous-es"
ENTRY_POINTS = ("feverous_es.cli", "feverous_es.__main__")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(distribution: str, extra: str = "") -> set[str]:
    """The distributions ``distribution`` requires, with ``extra`` (none: the base ones)."""
    found = set()
    for line in metadata.requires(distribution) or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
            found.add(canonical(requirement.name))
    return found - ({canonical(distribution)} if extra else set())


def with_their_requirements(names: set[str]) -> set[str]:
    """``names`` and everything their installed distributions require (base, transitively)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        # not installed here: its own requirements are unknown
        with contextlib.suppress(metadata.PackageNotFoundError):
            todo.extend(requirements(name) - seen)
    return seen


def extra_only_imports() -> dict[str, str]:
    """Each import name that only an extra's distributions provide, with the extra."""
    base = with_their_requirements(requirements(DISTRIBUTION))
    providers: dict[str, set[str]] = {}
    for module, distributions in metadata.packages_distributions().items():
        for distribution in distributions:
            providers.setdefault(canonical(distribution), set()).add(module)
    extras = metadata.metadata(DISTRIBUTION).get_all("Provides-Extra") or []
    found: dict[str, str] = {}
    for extra in extras:
        for distribution in with_their_requirements(requirements(DISTRIBUTION, extra)) - base:
            # a distribution not installed here: its import name is most often its own
            for module in providers.get(distribution, {distribution.replace("-", "_")}):
                found.setdefault(module, extra)
    base_modules = {m for d in base for m in providers.get(d, set())}
    return {module: extra for module, extra in found.items() if module not in base_modules}


def module_level_imports(path: Path) -> Iterator[tuple[str, int]]:
    """The modules ``path`` imports when it is imported (function bodies, ``TYPE_CHECKING``
    blocks and imports guarded by ``except ImportError`` are not), with their lines."""

    def walk(body: list[ast.stmt]) -> Iterator[tuple[str, int]]:
        for node in body:
            if isinstance(node, ast.Import):
                yield from ((alias.name, node.lineno) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield node.module, node.lineno
                yield from ((f"{node.module}.{a.name}", node.lineno) for a in node.names)
            elif isinstance(node, ast.ClassDef):
                yield from walk(node.body)
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                yield from walk(node.body)
                yield from walk(node.orelse)
            elif isinstance(node, ast.Try):
                guarded = any("ImportError" in ast.unparse(h.type or ast.Name("")) or
                              "ModuleNotFoundError" in ast.unparse(h.type or ast.Name(""))
                              for h in node.handlers)  # fmt: skip
                if not guarded:
                    yield from walk(node.body)
                yield from walk(node.finalbody)
            elif isinstance(node, ast.With):
                yield from walk(node.body)

    yield from walk(ast.parse(path.read_text(encoding="utf-8")).body)


def reached_at_start() -> dict[str, list[tuple[str, str, int]]]:
    """Each outside module imported at module level by a module the command line's start
    reaches, with (importing module, line) pairs."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    outside: dict[str, list[tuple[str, str, int]]] = {}
    todo, seen = list(ENTRY_POINTS), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in modules:
            continue
        seen.add(name)
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # its packages' __init__
        for target, line in module_level_imports(modules[name]):
            if target.split(".")[0] == "feverous_es":
                todo.append(target)
            else:
                outside.setdefault(target.split(".")[0], []).append((target, name, line))
    return outside


def test_the_command_line_imports_no_extra_at_start() -> None:
    try:
        extra_only = extra_only_imports()
    except metadata.PackageNotFoundError:
        pytest.skip("feverous-es is not installed (pip install -e .): its extras are unknown")
    assert {"uvicorn", "fastapi", "torch"} <= set(extra_only), extra_only  # the check can see
    found = [
        f"{module}:{line} imports {target} (the {extra_only[top]} extra's)"
        for top, sites in reached_at_start().items() if top in extra_only
        for target, module, line in sites
    ]  # fmt: skip
    assert not found, "imported at module level on the command line's start:\n" + "\n".join(found)


def test_the_check_sees_an_extra_imported_at_module_level(tmp_path: Path) -> None:
    """The walk finds what a module imports at start, and only that."""
    source = tmp_path / "module.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import uvicorn\n"
        "if TYPE_CHECKING:\n    import torch\n"
        "try:\n    import fastapi\nexcept ImportError:\n    fastapi = None\n"
        "def later():\n    import prometheus_client\n",
        encoding="utf-8",
    )
    tops = {target.split(".")[0] for target, _ in module_level_imports(source)}
    assert tops == {"typing", "uvicorn"}
