"""The Python API: what `from feverous_es import ...` promises, and the README's example."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

import feverous_es
from feverous_es import FeverousError, Label, Pipeline, PluginError, StoreError, load_config
from feverous_es.plugins.registry import register
from tests.conftest import REPO, unregister


def readme_example() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## From Python", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README's Python section has an example"
    return match.group(1)


def test_the_readme_example_verifies_a_claim(sample_index: Path) -> None:
    code = readme_example().replace('"sample-index"', repr(str(sample_index)))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    match = re.fullmatch(r"(SUPPORTS|REFUTES|NOT ENOUGH INFO) (\[.*\])", printed.getvalue().strip())
    assert match, printed.getvalue()
    assert "Henri Schoeman_sentence_2" in match[2], "the claim's gold sentence is in the evidence"


def test_the_readme_first_command_prints_what_the_readme_shows(sample_index: Path) -> None:
    from click.testing import CliRunner

    from feverous_es.cli import main

    text = (REPO / "README.md").read_text(encoding="utf-8").split("## Install and run", 1)[1]
    command, shown = re.findall(r"```(?:bash)?\n(.*?)```", text, re.S)[:2]
    claim = re.search(r'feverous-es verify "([^"]+)"', command)
    assert claim, "the README's first command verifies a claim"
    result = CliRunner().invoke(main, ["verify", claim[1], "--index", str(sample_index)])
    assert result.exit_code == 0, result.output
    # The claim, the verdict with its probability and the first evidence line, as shown. The
    # probability within a few hundredths: int8 kernels differ between CPUs (AVX-512 VNNI or
    # AVX2 only), and the README shows what one of them printed.
    head = [line for line in shown.splitlines() if line.strip() != "…"][:3]
    printed = result.output.splitlines()[:3]
    assert [PROBABILITY.sub("", line) for line in printed] == [
        PROBABILITY.sub("", line) for line in head
    ]
    assert abs(probability(printed[1]) - probability(head[1])) <= 0.03, (printed[1], head[1])


PROBABILITY = re.compile(r"probability (\d\.\d+)")


def probability(line: str) -> float:
    found = PROBABILITY.search(line)
    assert found, line
    return float(found[1])


def test_every_public_name_imports_and_the_package_import_stays_light() -> None:
    for name in feverous_es.__all__:
        assert getattr(feverous_es, name) is not None
    assert issubclass(StoreError, FeverousError) and issubclass(PluginError, FeverousError)
    # The command line imports the package for --version: the heavy modules must wait.
    heavy = "{'numpy', 'onnxruntime', 'tantivy'}"
    code = f"import sys, feverous_es; print(sorted(m for m in sys.modules if m in {heavy}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    with pytest.raises(AttributeError, match="no attribute 'Pipelin'"):
        feverous_es.Pipelin  # noqa: B018


class _RefusingVerdict:
    def __init__(self, context: object) -> None:
        raise AssertionError("retrieval must not build the verdict model")


def test_retrieval_never_builds_the_verdict_model(sample_index: Path) -> None:
    register("verdict", "refusing", _RefusingVerdict)
    try:
        config = load_config(plugins={"reranker": "retrieval", "verdict": "refusing"}, environ={})
        with Pipeline.open(sample_index, config=config, device="cpu") as pipeline:
            [found] = pipeline.retrieve_many(["Henri Schoeman won bronze at Rio in 2016."])
            assert found.evidence and found.pages
            ranked = [c.element.id for c in found.ranked]
            first_hop = [c.element.id for c in found.evidence if c.hop == 1]
            assert set(first_hop) <= set(ranked), "the evidence comes from the reranked pool"
            with pytest.raises(AssertionError, match="must not build"):
                pipeline.verify("Henri Schoeman won bronze.")
    finally:
        unregister("verdict", "refusing")


def test_a_wrong_plugin_name_fails_when_the_pipeline_opens(sample_index: Path) -> None:
    config = load_config(plugins={"verdict": "no-such-model"}, environ={})
    with pytest.raises(PluginError, match="no verdict plugin named 'no-such-model'"):
        Pipeline.open(sample_index, config=config)


def test_label_values_are_the_official_strings() -> None:
    assert [label.value for label in Label] == ["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]
