"""``feverous-es train verdict``: every step of a run in order (:func:`run`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feverous_es.training import datasets
from feverous_es.training.bases import base_name
from feverous_es.training.common import check_base
from feverous_es.training.progress import QUIET, Progress
from feverous_es.training.verdict import entailment_data as data
from feverous_es.training.verdict.card import write_card
from feverous_es.training.verdict.fit import train_models, write_scores
from feverous_es.training.verdict.options import FULL_MODEL, SCORES_FILE, RunOptions
from feverous_es.training.verdict.pairs import build_pairs, training_pool
from feverous_es.training.verdict.scoring import accuracy, probabilities


def run(options: RunOptions, progress: Progress = QUIET) -> dict[str, Any] | None:
    """Evidence, pairs, the model, export, held-out accuracy and the model card; returns the
    report (None when ``progress.stop_after`` interrupted a training). Phases: ``evidence``,
    ``training``."""
    from feverous_es.export.exporter import export_int8_as_model

    options.check()
    settings = options.settings
    check_base(settings.base)
    pairs = build_pairs(options, progress.counter("evidence"))
    trained, record = train_models(pairs, options, progress.steps(), progress.counter("teacher"))
    if trained is None:
        return None
    held = [p for p in pairs if p.held_out]
    pool = training_pool(pairs, options)
    probe = [(p.claim, p.premise) for p in (held or pool)[:64]]
    exported = export_int8_as_model(trained, options.out, options.work, probe, settings.max_length)
    # The exported model's own scores (int8, as the verdict computes them) of every held-out
    # pair; those an earlier run scored are kept.
    scores_path = options.work / SCORES_FILE
    scored = {r["key"] for r in datasets.read_jsonl(scores_path) if r["model"] == FULL_MODEL}
    wanted = [p for p in held if p.key not in scored]
    if wanted:
        write_scores(scores_path, wanted, probabilities(options.out, wanted, settings), FULL_MODEL)
    scores = data.read_scores(scores_path) if scores_path.is_file() else {}
    report: dict[str, Any] = {
        **options.report(),
        "fold": options.fold or None,
        "train_claims": [Path(p).name for p in options.mix.train_claims],
        "pairs": [Path(p).name for p in options.mix.pairs],
        "contrastive_pages": options.mix.contrastive_pages if options.mix.contrastive else 0,
        "attributes": bool(options.mix.contrastive and options.mix.attributes),
        "windows": bool(options.mix.contrastive and options.mix.windows),
        "relations": bool(options.mix.contrastive and options.mix.relations),
        "distill": {
            "teacher": str(options.distill.teacher),
            "alpha": options.distill.alpha,
            "temperature": options.distill.temperature,
        }
        if options.distill.teacher
        else None,
        "reranker": options.retrieval.reranker,
        "retrieved": options.mix.retrieved,
        "per_source": options.mix.per_source,
        "training": {
            "base_name": base_name(settings.base),
            "examples": len(pool),
            "epochs_trained": settings.epochs,
            "max_length": settings.max_length,
            "batch_size": settings.batch_size,
            "learning_rate": settings.learning_rate,
            "seed": settings.seed,
            "math_hints": settings.math_hints,
            "steps": settings.total_steps(len(pool)),
            **record,
        },
        "export": exported,
        "holdout_accuracy": accuracy(held, scores),
    }
    write_card(options.out, report)
    return report
