"""One reader made of several students: the mean of their weights (``train verdict-soup``).

Students fine-tuned from the same base (all-MiniLM-L6-v2) and continued from one another lie in
one basin of the loss, where the mean of their weights reads about as well as the mean of their
probabilities (a "model soup", Wortsman et al. 2022, uniform recipe) at the cost of one model
run a premise instead of one per student. The students are read back from their int8 graphs
(:func:`~feverous_es.export.dequantize.torch_from_int8`: the package keeps no fp32 checkpoint),
averaged, and exported as any reader. They must share their labels, their architecture and
the claims split their training held out, so the soup's held-out claims are theirs.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from feverous_es.errors import TrainError
from feverous_es.export.card import Section, classifier_parity
from feverous_es.export.dequantize import TOKENIZER_FILES, torch_from_int8
from feverous_es.export.exporter import export_int8_as_model
from feverous_es.training.common import read_training_report
from feverous_es.training.verdict.card import save_reader_card

# The training report's fields that say which claims a model held out (bench/verdict.py reads
# them): every student of a soup must agree on them.
SPLIT_FIELDS = ("claims", "claims_per_file", "holdout", "train_claims")
SPLIT_TRAINING = ("seed", "max_length", "math_hints")
PROBE = (
    ("The Eiffel Tower was named after Gustave Eiffel.",
     "[Eiffel Tower] It is named after the engineer Gustave Eiffel, whose company designed and "
     "built the tower."),
    ("Anthrax is caused by a virus.",
     "[Anthrax] Anthrax is an infection caused by the bacterium Bacillus anthracis."),
    ("Thulium's chemical symbol is Th.",
     "[Thulium] Thulium is a chemical element with the symbol Tm and atomic number 69."),
)  # fmt: skip


def shared_split(reports: Sequence[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """The claims split every report names (raises :class:`TrainError` naming the first field
    two students disagree on)."""
    first = reports[0]
    for name, report in zip(names[1:], reports[1:], strict=True):
        for key in SPLIT_FIELDS:
            if report.get(key) != first.get(key):
                raise TrainError(f"{name} and {names[0]} differ in their claims split ({key})")
        for key in SPLIT_TRAINING:
            if report["training"].get(key) != first["training"].get(key):
                raise TrainError(f"{name} and {names[0]} differ in training.{key}")
    return {
        **{key: first.get(key) for key in SPLIT_FIELDS},
        "training": {key: first["training"].get(key) for key in SPLIT_TRAINING},
    }


def mean_weights(torch_dirs: Sequence[Path], out: Path) -> Path:
    """The BERT classifier whose every float tensor is the mean of ``torch_dirs``' (same
    architecture and labels), saved with the first one's tokenizer into ``out``."""
    import torch
    from transformers import BertForSequenceClassification

    models = [BertForSequenceClassification.from_pretrained(d) for d in torch_dirs]
    first = models[0]
    for directory, model in zip(torch_dirs[1:], models[1:], strict=True):
        if model.config.to_diff_dict() != first.config.to_diff_dict():
            raise TrainError(f"{directory} is not the architecture of {torch_dirs[0]}")
    states = [m.state_dict() for m in models]
    mean = {
        key: torch.stack([s[key].float() for s in states]).mean(0) if value.is_floating_point()
        else value
        for key, value in states[0].items()
    }  # fmt: skip
    first.load_state_dict(mean)
    first.save_pretrained(out)
    for name in TOKENIZER_FILES:
        shutil.copy2(torch_dirs[0] / name, out / name)
    return out


def make_soup(students: Sequence[Path], out: Path, work: Path, *, command: str = "") -> dict:
    """Average ``students`` (model directories of ``train verdict``) into the reader ``out``
    (int8 graph, tokenizer, config, card, training.json, manifest); returns its report."""
    if len(students) < 2:
        raise TrainError("a soup needs two students or more")
    names = [str(s) for s in students]
    reports = [read_training_report(s, "a model of `train verdict`") for s in students]
    split = shared_split(reports, names)
    torch_dirs = [torch_from_int8(s, work / f"student-{i}") for i, s in enumerate(students)]
    trained = mean_weights(torch_dirs, work / "trained")
    max_length = int(split["training"]["max_length"])
    exported = export_int8_as_model(trained, out, work, PROBE, max_length)
    report = {
        **split,
        "command": command,
        "soup": [
            {"model": Path(n).name, "command": r["command"]}
            for n, r in zip(names, reports, strict=True)
        ],
        "training": {**split["training"], "base_name": reports[0]["training"]["base_name"]},
        "export": exported,
    }
    _write_card(out, report)
    return report


def _write_card(out: Path, report: dict[str, Any]) -> None:
    students = "\n".join(f"* `{s['model']}`: `{s['command']}`" for s in report["soup"])
    about = f"""
The verdict's reader as one model: the mean of the weights of {len(report["soup"])} students
(a uniform model soup, Wortsman et al. 2022), each an all-MiniLM-L6-v2 cross-encoder
(SUPPORTS / REFUTES / NOT ENOUGH INFO) trained by `feverous-es train verdict`. It reads what
they read (max_length {report["training"]["max_length"]}) at the cost of one of them. int8 graph
`model.int8.onnx` ({report["export"]["bytes"] / 1e6:.1f} MB)."""
    run = f"""
Read back from the students' int8 graphs, averaged tensor by tensor, exported again. Its claims
split is theirs (every student held out the same claims). The students:

{students}"""
    parity = classifier_parity(report["export"]["parity"], "hand-written pairs")
    save_reader_card(
        out, report, "feverous-es verdict", title="feverous-es verdict reader (soup)",
        about=about, run=run, sections=[Section("Export", parity)],
    )  # fmt: skip
