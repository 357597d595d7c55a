"""``python -m gpu_queue intake``: one student a queue job returned, as an installable model.

The student's weights are read back and checked (:func:`~.results.install_student`), exported
to int8 ONNX with parity against torch on the held-out pairs the job's report carries (so no
data is needed here), and carded with the job's own figures: the GPU, the seconds of each phase,
the epochs, held-out figures per source of the teacher and the student (torch, bf16, on the
GPU). ``feverous-es train install OUT --as ROLE`` then ships it where it beats today's model by
measurement (docs/gpu-training.md names each job's benchmark).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feverous_es.export import card
from feverous_es.export.exporter import export_int8_as_model
from feverous_es.runtime.tasks import TEXT_CLASSIFICATION
from feverous_es.training import common
from feverous_es.training.gpu_results import install_student

# The package role each job's students are installed as (`train install --as`).
ROLES = {"ranker": "sentence-ranker", "reader": "verdict"}


def intake(
    results: Path, out: Path, work: Path, tokenizer_from: Path, *, student: str = "student",
    command: str = "",
) -> dict[str, Any]:  # fmt: skip
    """Read ``student`` of the job results in ``results``, export it into ``out`` (int8 graph,
    tokenizer, config, card, training.json, manifest); returns the training report."""
    common.check_out(out)
    trained = work / "trained"
    report = install_student(results, tokenizer_from, trained, student)
    entry = report["students"][student]
    probe = [(p["claim"], p["premise"]) for p in report.get("probe", [])] or [("a", "b")]
    max_length = int(entry["settings"]["max_length"])
    exported = export_int8_as_model(trained, out, work, probe, max_length)
    job = report.get("job", "reader")
    recipe = report.get("options", {})  # how the job's pairs were made: the split
    training = {
        "seed": recipe.get("seed"),
        "job": job,
        "student": student,
        "role": ROLES.get(job),
        "base_name": entry["base"],
        "layers": entry.get("layers"),
        "max_length": max_length,  # what the runtime reads it at (and no number hints)
        "math_hints": False,
        "device": report["device"],
        "versions": report["versions"],
        "seconds": report["seconds"],
        "pairs": report.get("pairs"),
        "best_epoch": entry["best_epoch"],
        "curve": entry["curve"],
        "held": entry["held"],
        "valid": entry["valid"],
        "teacher": {k: report["teacher"][k] for k in ("base", "best_epoch", "held")},
    }
    result = {
        "command": command,
        "from": str(results),
        "claims": recipe.get("claims", []),
        "holdout": recipe.get("holdout"),
        "claims_per_file": recipe.get("limit"),
        "training": training,
        "export": exported,
    }
    _write_card(out, result, report.get("labels", []))
    return result


def _figures(held: dict[str, dict[str, Any]]) -> str:
    return ", ".join(f"{name} {r['accuracy']:.1%}" for name, r in held.items() if name != "all")


def _write_card(out: Path, report: dict[str, Any], labels: list[str]) -> None:
    training = report["training"]
    ranker = len(labels) == 1
    measure = "recall of the gold sentences among each claim's best" if ranker else "accuracy"
    layers = f", {training['layers']} layers kept" if training["layers"] else ""
    what = "relevance logit" if ranker else " / ".join(labels)
    about = f"""
The `{training["job"]}` job's student `{training["student"]}` ({what}), distilled on a GPU by
the queue of docs/gpu-training.md from a `{training["teacher"]["base"]}` teacher; fine-tuned
from `{training["base_name"]}`{layers}. Install it as the `{training["role"]}` model with
`feverous-es train install OUT --as {training["role"]}` where it beats the shipped one."""
    seconds = ", ".join(f"{k} {v:.0f} s" for k, v in training["seconds"].items())
    curve = ", ".join(f"epoch {e['epoch']} {e['score']:.3f}" for e in training["curve"])
    run = f"""
On {training["device"]} (torch {training["versions"]["torch"]}, transformers
{training["versions"]["transformers"]}): {seconds}. Pairs by role: {training["pairs"]}.
Validation ({measure}, mean over sources) {curve}; epoch {training["best_epoch"]} kept. The
teacher (epoch {training["teacher"]["best_epoch"]}) held out:
{_figures(training["teacher"]["held"])}."""
    metrics = card.Section(
        "Metrics",
        f"Torch bf16 on the GPU, held-out claims ({measure}):",
        card.Table(
            ("source", "claims" if ranker else "pairs", "recall" if ranker else "accuracy"),
            [
                (name, f"{r.get('pairs', r.get('claims', 0)):,}", f"{r['accuracy']:.1%}")
                for name, r in training["held"].items()
            ],
        ),
        card.classifier_parity(report["export"]["parity"]),
    )
    model_card = card.ModelCard(
        f"feverous-es {training['role']} ({training['job']} job, {training['student']})",
        about,
        command=report["command"],
        run=run,
        sections=[metrics],
        licences=card.fine_tuned_licences(training["base_name"], report["claims"]),
    )
    common.save_card(
        out, model_card, report, model=f"feverous-es {training['role']}",
        task=TEXT_CLASSIFICATION, base=training["base_name"], int8=report["export"]["int8"],
    )  # fmt: skip
