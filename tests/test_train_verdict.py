"""`feverous-es train verdict` end to end with a tiny BERT made here (not the shipped model):
evidence from the sample index, training with a resumed checkpoint, ONNX export with parity, the
exported model in the verdict plugin, and the one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("optimum.exporters.onnx")

from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.export.parity import torch_logits
from feverous_es.plugins.interfaces import Label, PluginContext, Query
from feverous_es.rerank.cross_encoder import CrossEncoder
from feverous_es.training import verdict as tv

CLAIMS = [
    ("The Glenn Thompson Plantation is also known as Cedar Heights Plantation.", "SUPPORTS"),
    ("Bill Persky was born on September 9, 1931.", "SUPPORTS"),
    ("Bill Persky was born in 1975 in France.", "REFUTES"),
    ("Harriet Shing is a Labor member of the Victorian Legislative Council.", "SUPPORTS"),
    ("Lucena is the least populous city of Quezon.", "REFUTES"),
    ("Tiaong is officially the Municipality of Tiaong.", "SUPPORTS"),
    ("Rex Jory has never written for The Advertiser.", "REFUTES"),
    ("The Cape Fear and Yadkin Valley Railway operated only in Texas.", "REFUTES"),
]


def write_claims(path: Path, claims: list[tuple[str, str]], start: int) -> Path:
    lines = [json.dumps({"id": "", "claim": "", "label": "", "evidence": []})]
    lines += [
        json.dumps({"id": start + i, "claim": c, "label": label, "evidence": []})
        for i, (c, label) in enumerate(claims)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def options(tmp_path: Path, tiny_base: Path, sample_index: Path) -> tv.RunOptions:
    a = write_claims(tmp_path / "first_dev.jsonl", CLAIMS[:4], 100)
    b = write_claims(tmp_path / "second_dev.jsonl", CLAIMS[4:], 200)
    settings = tv.TrainSettings(
        base=tiny_base, epochs=2, max_length=64, batch_size=2, checkpoint_every=1, seed=3
    )
    return tv.RunOptions(
        claims=[a, b], index=sample_index, out=tmp_path / "model", work=tmp_path / "work",
        settings=settings, holdout=0.3, hops=1, command="feverous-es train verdict …",
    )  # fmt: skip


def test_train_resume_export_and_load(options: tv.RunOptions) -> None:
    steps: list[int] = []
    assert tv.run(options, on_step=lambda s, n, r: steps.append(s), stop_after=2) is None
    assert steps == [1, 2]
    assert (options.work / tv.CHECKPOINT_FILE).is_file()
    cached = (options.work / tv.EVIDENCE_FILE).read_text().splitlines()
    assert len(cached) == len(CLAIMS)
    assert all(json.loads(line)["evidence"] for line in cached)  # retrieved, not gold (empty)

    steps.clear()
    report = tv.run(options, on_step=lambda s, n, r: steps.append(s))
    assert report is not None
    assert steps[0] == 3 and steps[-1] == report["training"]["steps"]  # resumed, not restarted
    assert (options.work / tv.EVIDENCE_FILE).read_text().splitlines() == cached  # not redone

    out = options.out
    assert {"model.onnx", "tokenizer.json", "config.json", "README.md"} <= {
        p.name for p in out.iterdir()
    }
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {"0": "SUPPORTS", "1": "REFUTES"}
    parity = report["export"]["parity"]
    assert parity["fp32"]["max_abs_diff"] < 1e-4
    assert parity["int8"]["max_abs_diff"] < 0.1
    assert set(report["holdout_accuracy"]) <= {"first_dev", "second_dev"}
    assert "all-MiniLM-L6-v2" in (out / "README.md").read_text()


def test_exported_model_in_the_verdict_plugin_matches_torch(options: tv.RunOptions) -> None:
    from feverous_es.verify.verdict import ClassifierVerdict, softmax

    options.holdout = 0.0
    tv.run(options)
    examples = list(tv.read_cache(options.work / tv.EVIDENCE_FILE).values())
    # The text model alone: the feature models off.
    verdict = ClassifierVerdict(
        PluginContext(None, None, "cpu"),  # type: ignore[arg-type]
        model=str(options.out), table_model="", sentence_model="",
    )  # fmt: skip
    verdict.model = CrossEncoder(options.out, device="cpu", max_length=64)
    batch = [(Query(e.claim, np.zeros(384, np.float32)), e.candidates()) for e in examples]
    got = verdict.predict(batch)
    pairs = [(e.claim, e.premise(False)) for e in examples]
    expected = softmax(torch_logits(options.work / tv.TRAINED_DIR, pairs, 64))
    for result, row in zip(got, expected, strict=True):
        assert result.label is (Label.SUPPORTS if row.argmax() == 0 else Label.REFUTES)
        assert result.probabilities[Label.SUPPORTS] == pytest.approx(row[0], abs=0.05)


def test_bad_inputs_are_one_line_errors(options: tv.RunOptions, tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(tv.TrainError, match=r"nope\.jsonl does not exist"):
        tv.run(tv.RunOptions(**{**vars(options), "claims": [missing]}))
    with pytest.raises(tv.TrainError, match=r"index .* does not exist"):
        tv.run(tv.RunOptions(**{**vars(options), "index": tmp_path / "no-index"}))
    bad_base = tv.TrainSettings(**{**vars(options.settings), "base": tmp_path})
    with pytest.raises(tv.TrainError, match="not a Hugging Face model directory"):
        tv.run(tv.RunOptions(**{**vars(options), "settings": bad_base}))

    options.work.mkdir(parents=True)
    (options.work / tv.CHECKPOINT_FILE).write_bytes(b"not a checkpoint")
    runner = CliRunner()
    args = ["train", "verdict", "--index", str(options.index), "--base", str(options.settings.base)]
    args += [
        "--claims",
        str(options.claims[0]),
        "--out",
        str(options.out),
        "--work",
        str(options.work),
    ]
    args += ["--hops", "1", "--max-length", "64"]
    result = runner.invoke(main, args)
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "is unreadable" in lines[0] and "delete it" in lines[0], (
        result.output
    )
