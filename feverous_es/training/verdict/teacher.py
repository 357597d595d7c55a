"""The GPU job's teacher as the large reader (``feverous-es train verdict-large``).

The job fine-tunes all-mpnet-base-v2 (110 M) on the verdict's pairs and distils the default
reader from it; its weights come back in a transfer format (:func:`~feverous_es.training.
gpu.results.read_teacher`). This step reads them back, exports them (fp32 for the parity check,
the int8 graph the package carries, by a recipe of :mod:`feverous_es.export.int8`) and writes the
card: the GPU, the job's seconds and the teacher's held-out accuracy from the job's report.
``feverous-es train install OUT --as verdict-large`` then ships it in parts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feverous_es.export.exporter import export_model, install_subset
from feverous_es.runtime.files import INT8_FILE
from feverous_es.runtime.tasks import TEXT_CLASSIFICATION
from feverous_es.training import gpu_results
from feverous_es.training.common import read_training_report
from feverous_es.training.verdict.card import held_out_section, save_reader_card

SIDE_FILES = ("tokenizer.json", "tokenizer_config.json", "config.json")


def take_teacher(
    weights: Path,
    job: Path,
    student: Path,
    out: Path,
    work: Path,
    *,
    int8_recipe: str = "weight-only",
    command: str = "",
) -> dict[str, Any]:
    """``weights``: the fetched teacher (its parts and SHA256SUMS); ``job``: the same job's
    results (``report.json``); ``student``: the student that job distilled, taken in by
    ``train verdict --from-gpu`` (its ``training.json`` names the claims split, which the
    teacher shares). Writes ``out`` (int8 graph, tokenizer, config, card, training.json,
    manifest); returns the report."""
    report = gpu_results.read_report(job)
    like = read_training_report(student, "a model of `train verdict`")
    hf = work / "hf"
    read = gpu_results.read_teacher(weights, hf)
    max_length = int(like["training"]["max_length"])
    manifest = export_model(
        hf, work / "onnx", task=TEXT_CLASSIFICATION, precisions=("fp32", "int8"),
        max_length=max_length, int8_max_bytes=None, int8_recipe=int8_recipe,
    )  # fmt: skip
    install_subset(work / "onnx", out, {name: name for name in (INT8_FILE, *SIDE_FILES)})
    teacher = report["teacher"]
    training = {
        **{k: like["training"][k] for k in ("max_length", "math_hints", "seed")},
        "base_name": report["teacher"]["base"],
        "best_epoch": teacher["best_epoch"],
        "curve": teacher["curve"],
        "seconds": report["seconds"]["teacher"],
        "device": f"cuda ({report['device']})",
        "versions": report["versions"],
        "held": teacher["held"],
        "valid": teacher["valid"],
    }
    result = {
        **{k: v for k, v in like.items() if k not in ("training", "export", "holdout_accuracy")},
        "command": command,
        "read_back": read,
        "training": training,
        "export": {
            "int8": manifest["int8"],
            "parity": manifest["parity"],
            "bytes": (out / INT8_FILE).stat().st_size,
        },
    }
    _write_card(out, result)
    return result


def _write_card(out: Path, report: dict[str, Any]) -> None:
    training = report["training"]
    curve = ", ".join(f"epoch {e['epoch']} {e['score']:.3f}" for e in training["curve"])
    int8 = report["export"]["int8"]
    about = f"""
The large tier of the verdict's reader (`--reader large`; docs/verdict.md says what it costs and
wins): a 3-way (SUPPORTS / REFUTES / NOT ENOUGH INFO) cross-encoder fine-tuned from
`{training["base_name"]}` (110 M) on a GPU, the teacher the default reader was distilled from.
It reads what the default reader reads (max_length {training["max_length"]}). int8 graph
`model.int8.onnx` ({report["export"]["bytes"] / 1e6:.1f} MB, recipe `{int8["method"]}`), shipped
in parts that the runtime joins and checks on first use."""
    run = f"""
Fine-tuned by the GPU job of docs/gpu-training.md on {training["device"]} in
{training["seconds"]:.0f} s (bf16, batch 64, {len(training["curve"])} epochs; validation score
{curve}; epoch {training["best_epoch"]} kept), weights fetched as int8 rows with an fp16 scale
a row (byte slices of one safetensors file) and read back here."""
    metrics = held_out_section(
        "Metrics", training["held"], report["export"]["parity"],
        "Torch bf16 on the GPU, the job's held-out pairs (claims held out of every model):",
    )  # fmt: skip
    save_reader_card(
        out, report, "feverous-es verdict-large", title="feverous-es large verdict reader",
        about=about, run=run, sections=[metrics],
    )  # fmt: skip
