"""What `pip install .` (the Docker image, a wheel) installs: every module of the package.

pyproject's `packages.find` only finds directories with an ``__init__.py``; a directory without
one is left out of a wheel while an editable install still imports it."""

from __future__ import annotations

from tests.conftest import REPO


def test_every_directory_of_modules_is_a_package_a_wheel_includes() -> None:
    package = REPO / "feverous_es"
    directories = {path.parent for path in package.rglob("*.py")}
    missing = sorted(
        str(d.relative_to(REPO)) for d in directories if not (d / "__init__.py").is_file()
    )
    assert missing == []
