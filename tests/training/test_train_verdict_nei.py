"""`feverous-es train verdict-nei` end to end with a tiny BERT made here (not the shipped model):
each claim retrieved from the sample index as it is, with its gold page hidden, with its gold
sentence hidden and with an invented subject, the fine-tuning, the int8 export, and the model
read by the verdict's NOT ENOUGH INFO call."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from tests.conftest import write_lines

pytest.importorskip("torch")
pytest.importorskip("optimum.exporters.onnx")

from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.index.backends import open_store
from feverous_es.plugins.config import load_config
from feverous_es.training.install import install_packaged
from feverous_es.training.verdict.nei import PREMISES_FILE
from feverous_es.verify.pipeline import Pipeline

CLAIMS = [
    ("Bill Persky was born on September 9, 1931.", "SUPPORTS", "Bill Persky"),
    ("Bill Persky was born in 1975 in France.", "REFUTES", "Bill Persky"),
    ("Harriet Shing is a Labor member of the Victorian Legislative Council.", "SUPPORTS",
     "Harriet Shing"),
    ("Rex Jory has never written for The Advertiser.", "REFUTES", "Rex Jory"),
]  # fmt: skip


def test_train_verdict_nei_reads_hidden_and_invented_claims_and_ships_a_model(
    tmp_path: Path, tiny_base: Path, sample_index: Path
) -> None:
    claims = write_lines(tmp_path / "fm2_dev.jsonl", [
        json.dumps({"id": i, "claim": claim, "label": label,
                    "evidence": [{"content": [f"{page}_sentence_0"]}]})
        for i, (claim, label, page) in enumerate(CLAIMS)
    ])  # fmt: skip
    pairs = tmp_path / "nli.jsonl.gz"
    pair = {"source": "nli-text", "id": "t1", "claim": "A man rides.", "label": "SUPPORTS",
            "evidence": [{"title": "", "text": "A man rides a bike."}]}  # fmt: skip
    with gzip.open(pairs, "wt", encoding="utf-8") as out:
        out.write(json.dumps(pair) + "\n")
    out = tmp_path / "nei"
    args = ["train", "verdict-nei", "--claims", str(claims), "--index", str(sample_index),
            "--out", str(out), "--base", str(tiny_base), "--holdout", "0", "--per-file", "3",
            "--pairs", str(pairs), "--replay", "1", "--batch-size", "4",
            "--facts-hidden"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    found = [json.loads(line) for line in (tmp_path / "nei.work" / PREMISES_FILE).open()]
    kinds = sorted(row["kind"] for row in found)
    assert kinds == ["as is"] * 3 + ["facts hidden"] * 2 + ["invented"] + ["pages hidden"] * 3
    store = open_store("embedded", sample_index)
    for row in found:
        claim = (
            next(c for c in CLAIMS if c[0] == row["claim"]) if row["kind"] != "invented" else None
        )
        if row["kind"] == "pages hidden":  # nothing of the hidden page reaches the premises
            assert all(f"[{claim[2]}]" not in premise for premise in row["premises"])
            assert row["label"] == "NOT ENOUGH INFO"
        if row["kind"] == "facts hidden":  # the page without its gold sentence
            (gold,) = store.get_elements([f"{claim[2]}_sentence_0"])
            assert all(gold.text not in premise for premise in row["premises"])
            assert row["label"] == "NOT ENOUGH INFO"
        if row["kind"] == "as is" and row["premises"]:
            assert any(f"[{claim[2]}]" in premise for premise in row["premises"])
    report = json.loads((out / "training.json").read_text())
    assert report["training"]["replayed"] == 1 and sum(report["kinds"].values()) == 9
    installed = install_packaged(out, "verdict-nei", into=tmp_path / "models")
    config = load_config(None).with_stage_options(
        "verdict", nei_model=str(installed), nei_above=0.0, nei_covered_below=1.1, model="default"
    )
    with Pipeline.open(sample_index, config=config) as pipeline:
        verdict = pipeline.verify(CLAIMS[0][0]).verdict
    assert verdict.label.value == "NOT ENOUGH INFO" and verdict.why  # every claim, at 0.0
