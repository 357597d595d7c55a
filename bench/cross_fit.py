"""A student cross-fitted over the held-out claims, beside the shipped students, each claim read
by the fold model that never saw it (issue 101).

    run = "bench.cross_fit:cross_fitted"   # on the mini index (--index); options: folds, files

``folds`` are K models directories (repository-relative: `train verdict --fold F/K --out
out/folds/fold-F/verdict-3` writes fold F's student there, the other shipped models beside it),
fold F's model trained on every claim but fold F of the held-out share. The verdict condition
reads every held-out claim of ``files`` once through the pipeline, with each fold's students
and the shipped ones on the same evidence (:func:`bench.verdict.verdict_accuracy`); a claim's
cross-fitted answer is its own fold's model's (:func:`fold_of`, the split the trainer used).
Against the shipped students alone (no cascade: a models directory reads its students), per
file and pooled: label accuracy, the paired difference with its 95 % interval, REFUTES recall
and the two ways of being wrong (false claims read SUPPORTS, true ones REFUTES: the lean).
The shipped students are also read as a models directory, the way the folds are, and must
answer as the named reader does (``same_reading``): the folds' path adds no difference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.context import Context
from bench.data import MINI, REPO
from bench.errors import BenchError
from bench.paired import paired_difference
from bench.verdict import LETTERS, training_report, verdict_accuracy
from feverous_es.training.verdict.evidence import read_labelled_claims
from feverous_es.training.verdict.pairs import fold_of
from feverous_es.verdict.readers import reader_dirs

SHIPPED_STUDENTS = "reader default"  # the verdict condition's column of the students alone
SHIPPED_AS_FOLDER = "feverous_es/models"  # the same students, read as a fold's are


def fold_models(folds: Sequence[str]) -> tuple[int, float]:
    """The seed and held-out share the folds were split with; BenchError unless ``folds`` are
    the K folds of one split, in order."""
    trainings = []
    for n, folder in enumerate(folds):
        students = reader_dirs(REPO / folder)  # the default reader's roles the folder holds
        trained = [training_report(d) for d in students if (d / "training.json").is_file()]
        fold = [t for t in trained if t.get("fold")]
        if len(fold) != 1 or fold[0]["fold"] != f"{n}/{len(folds)}":
            raise BenchError(f"{folder}: no student trained with --fold {n}/{len(folds)}")
        trainings.append(fold[0])
    splits = {(t["training"]["seed"], t["holdout"]) for t in trainings}
    if len(splits) != 1:
        raise BenchError(f"the folds were split differently: {sorted(splits)}")
    return splits.pop()


def cross_fitted(
    context: Context,
    *,
    folds: Sequence[str],
    files: Sequence[str] = ("fm2_dev", "feverous_s_dev"),
    held_out_by: Sequence[str] = ("feverous_es/models/sentence-ranker",),
    per_file: int | None = None,
    batch_size: int = 16,
) -> dict:
    """The cross-fitted answers of every held-out claim of ``files`` (the first ``per_file``
    of each: a quick look) against the shipped students' (the module)."""
    seed, holdout = fold_models(folds)
    read = verdict_accuracy(
        context, baseline_readers=["default"], baseline_models=[SHIPPED_AS_FOLDER, *folds],
        held_out_by=held_out_by, files=files, per_file=per_file, batch_size=batch_size,
        keep_answers=True,
    )  # fmt: skip
    figures: dict[str, Any] = {}
    pooled: dict[str, list[np.ndarray]] = {"gold": [], "shipped": [], "cross": []}
    for source in files:
        answers = read[source]["answers"]
        labels = {c.id: LETTERS[c.label] for c in read_labelled_claims([MINI / f"{source}.jsonl"])}
        gold = np.array([labels[i] for i in answers["ids"]])
        own = [fold_of(seed, source, i, holdout, len(folds)) for i in answers["ids"]]
        if None in own:
            raise BenchError(f"{source}: a claim read is outside the folds' held-out share")
        cross = np.array([answers[f"baseline {folds[k]}"][n] for n, k in enumerate(own)])
        shipped = np.array(list(answers[SHIPPED_STUDENTS]))
        figures[source] = compare(gold, shipped, cross)
        same = answers[f"baseline {SHIPPED_AS_FOLDER}"] == answers[SHIPPED_STUDENTS]
        figures[source]["same_reading"] = same
        for name, rows in (("gold", gold), ("shipped", shipped), ("cross", cross)):
            pooled[name].append(rows)
    figures["all"] = compare(*(np.concatenate(pooled[n]) for n in ("gold", "shipped", "cross")))
    for source, f in figures.items():
        d = f["paired"]
        print(
            f"{source:15} {f['claims']:5} claims: shipped students {f['shipped']['accuracy']:.1%}"
            f" (REFUTES recall {f['shipped']['refutes_recall']:.2f}), cross-fitted "
            f"{f['cross_fitted']['accuracy']:.1%} ({f['cross_fitted']['refutes_recall']:.2f}): "
            f"{d['difference']:+.1%} [{d['low']:+.1%}, {d['high']:+.1%}]"
        )
    return figures


def compare(gold: np.ndarray, shipped: np.ndarray, cross: np.ndarray) -> dict:
    """The cross-fitted answers against the shipped ones (one letter a claim each)."""
    return {
        "claims": len(gold),
        "shipped": answer_figures(gold, shipped),
        "cross_fitted": answer_figures(gold, cross),
        "paired": paired_difference(cross == gold, shipped == gold),
    }


def answer_figures(gold: np.ndarray, said: np.ndarray) -> dict:
    """Label accuracy, REFUTES recall, and the false claims read SUPPORTS and the true ones read
    REFUTES (the lean, as counts)."""
    refutes = gold == "R"
    return {
        "accuracy": round(float((said == gold).mean()), 4),
        "refutes_recall": round(float((said[refutes] == "R").mean()), 4) if refutes.any() else None,
        "false_read_supports": int(((gold == "R") & (said == "S")).sum()),
        "true_read_refutes": int(((gold == "S") & (said == "R")).sum()),
    }
