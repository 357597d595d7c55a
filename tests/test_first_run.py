"""CI's newcomer step (scripts/first_run.py) reads the README's first block and its shown
output from the README itself, and fails on an output that is not the README's."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def first_run() -> ModuleType:
    path = REPO / "scripts" / "first_run.py"
    spec = importlib.util.spec_from_file_location("first_run", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_first_block_is_the_readmes_install_index_and_verify(first_run: ModuleType) -> None:
    block, shown = first_run.readme_blocks()
    assert block.startswith("python3 -m venv .venv") and "pip install -e . &&" in block
    assert "feverous-es verify" in block and "[" not in block.split("pip install", 1)[1]
    assert shown[0].startswith("claim: ")


def test_the_readmes_own_output_passes_and_another_fails(first_run: ModuleType) -> None:
    _, shown = first_run.readme_blocks()
    printed = "\n".join(shown)
    assert first_run.check_shown_output(shown, printed) == shown[1].strip()
    label = shown[1].split("  ")[0]
    other = "REFUTES" if label != "REFUTES" else "SUPPORTS"
    with pytest.raises(first_run.StepFailed, match=f"the README shows {label}"):
        first_run.check_shown_output(shown, printed.replace(label, other, 1))
    with pytest.raises(first_run.StepFailed, match="no line"):
        first_run.check_shown_output(shown, "\n".join(shown[1:]))
    traceback = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'uvicorn'"
    with pytest.raises(first_run.StepFailed):
        first_run.check_shown_output(shown, traceback)
