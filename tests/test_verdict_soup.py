"""`train verdict-soup`: students of one claims split averaged into one reader whose weights are
their mean, exported as any reader; students that disagree on what they held out are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("optimum.exporters.onnx")

from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.errors import TrainError
from feverous_es.export.dequantize import int8_weights
from feverous_es.export.exporter import export_int8_as_model
from feverous_es.runtime.files import INT8_FILE
from feverous_es.training.verdict.soup import PROBE, shared_split

LABELS = {0: "SUPPORTS", 1: "REFUTES", 2: "NOT ENOUGH INFO"}
SPLIT = {
    "claims": ["fm2_dev.jsonl"], "claims_per_file": None, "holdout": 0.35, "train_claims": [],
    "training": {"seed": 13, "max_length": 64, "math_hints": False, "base_name": "tiny"},
}  # fmt: skip


def _student(root: Path, seed: int, tokenizer_from: Path) -> Path:
    """A tiny random 3-way BERT classifier exported as `train verdict` writes a reader."""
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, id2label=LABELS, label2id={v: k for k, v in LABELS.items()},
    )  # fmt: skip
    trained = root / f"torch-{seed}"
    model = transformers.BertForSequenceClassification(config)
    with torch.no_grad():  # as trained: no bias left at 0, no two LayerNorms alike (the
        for parameter in model.parameters():  # export folds the one, merges the other)
            parameter.add_(torch.randn_like(parameter) * 0.02)
    model.save_pretrained(trained)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(tokenizer_from / name, trained / name)
    out = root / f"student-{seed}"
    export_int8_as_model(trained, out, root / f"work-{seed}", PROBE, 64)
    (out / "training.json").write_text(json.dumps({**SPLIT, "command": f"train {seed}"}))
    return out


@pytest.fixture(scope="module")
def students(tmp_path_factory: pytest.TempPathFactory, tiny_base: Path) -> list[Path]:
    root = tmp_path_factory.mktemp("students")
    return [_student(root, seed, tiny_base) for seed in (1, 2)]


def test_a_soup_holds_the_mean_of_its_students_weights(
    students: list[Path], tmp_path: Path
) -> None:
    out = tmp_path / "soup"
    result = CliRunner().invoke(
        main, ["train", "verdict-soup", *map(str, students), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    graphs = [int8_weights(s / INT8_FILE) for s in students]
    soup = int8_weights(out / INT8_FILE)
    name = "bert.encoder.layer.0.attention.self.query.weight"
    mean = (graphs[0][name] + graphs[1][name]) / 2
    # Quantized again: within one int8 step of the mean, and far from either student.
    step = np.abs(mean).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(soup[name] - mean) <= step * 1.01)
    assert np.abs(soup[name] - graphs[0][name]).max() > 2 * step.max()
    training = json.loads((out / "training.json").read_text())
    assert {k: training[k] for k in ("claims", "holdout", "train_claims")} == {
        "claims": ["fm2_dev.jsonl"], "holdout": 0.35, "train_claims": [],
    }  # fmt: skip
    assert training["training"]["seed"] == 13
    assert [s["command"] for s in training["soup"]] == ["train 1", "train 2"]
    # The card's command runs again as given: the students are in it.
    assert training["command"].startswith(f"feverous-es train verdict-soup {students[0]} ")
    assert (out / "manifest.json").is_file() and (out / "README.md").is_file()


def test_students_of_other_splits_are_refused() -> None:
    other = {**SPLIT, "holdout": 0.3}
    with pytest.raises(TrainError, match=r"differ in their claims split \(holdout\)"):
        shared_split([SPLIT, other], ["a", "b"])
    seeded = {**SPLIT, "training": {**SPLIT["training"], "seed": 7}}
    with pytest.raises(TrainError, match=r"training\.seed"):
        shared_split([SPLIT, seeded], ["a", "b"])


def test_one_student_is_not_a_soup(students: list[Path], tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["train", "verdict-soup", str(students[0]), "--out", str(tmp_path / "soup")]
    )
    assert result.exit_code != 0
    assert "two students or more" in result.output


def test_a_directory_that_is_not_a_student_is_named(students: list[Path], tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["train", "verdict-soup", str(students[0]), str(tmp_path), "--out",
               str(tmp_path / "soup")],
    )  # fmt: skip
    assert result.exit_code != 0
    assert f"{tmp_path} holds no training.json: not a model of `train verdict`" in result.output
