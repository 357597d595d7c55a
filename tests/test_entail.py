"""`feverous-es entail` and `EntailmentModel`: the verdict model read alone on evidence a user
gives, no index; the same answer from the command, the API and a batch; one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from feverous_es import EntailmentModel, Label
from feverous_es.cli import main

CLAIM = "Henri Schoeman is a South African triathlete."
EVIDENCE = ["Henri Schoeman (born 3 December 1991) is a South African triathlete."]


def test_the_command_prints_the_three_probabilities_and_json() -> None:
    runner = CliRunner()
    shown = runner.invoke(main, ["entail", CLAIM, "-e", EVIDENCE[0], "--title", "Henri Schoeman"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[1].startswith("SUPPORTS")  # the model reads it as true
    assert all(label in shown.output for label in ("REFUTES", "NOT ENOUGH INFO"))
    printed = runner.invoke(main, ["entail", CLAIM, "-e", "-", "--json"], input=EVIDENCE[0])
    got = json.loads(printed.output)
    assert got["premise"] == EVIDENCE[0] and got["label"] == "SUPPORTS"
    expected = EntailmentModel().entail(CLAIM, EVIDENCE).to_dict()
    assert got == expected


def test_a_batch_reads_each_claim_as_alone() -> None:
    model = EntailmentModel()
    claims = [CLAIM, "Henri Schoeman is an American swimmer.", "Henri Schoeman was born in 1991."]
    batch = model.entail_many([(c, EVIDENCE) for c in claims])
    for claim, result in zip(claims, batch, strict=True):
        alone = model.entail(claim, EVIDENCE)
        assert result.probabilities == pytest.approx(alone.probabilities, abs=1e-6)
        assert sum(result.probabilities.values()) == pytest.approx(1.0, abs=1e-5)
        assert set(result.probabilities) == set(Label)


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    for args in (["entail", " ", "-e", "x"], ["entail", CLAIM, "-e", " "], ["entail", CLAIM]):
        result = runner.invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
    result = runner.invoke(main, ["entail", CLAIM, "-e", "x", "--model", str(tmp_path / "no")])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "no verdict model at" in result.output
