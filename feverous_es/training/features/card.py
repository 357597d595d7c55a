"""The feature verdicts' model card."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feverous_es.export import card
from feverous_es.export.card import Section, Table
from feverous_es.training import common

_WHAT = {
    "table": (
        "claims whose evidence is a table",
        "the table (`feverous_es.verdict.table_facts`: which claim words and numbers the table "
        "holds and in which row, counts of rows holding a named value, whether the named rows "
        "hold a column's maximum or minimum, comparisons of two named rows, sums, means and "
        "differences, next to the claim's cue words)",
    ),
    "sentence": (
        "claims whose evidence is sentences",
        "the evidence sentences (`feverous_es.verdict.sentence_facts`: the claim's content "
        "words, word pairs, numbers, years and names that the evidence, or its best sentences, "
        "do not hold; negation)",
    ),
}


def write_card(out: Path, report: dict[str, Any]) -> None:
    kind = report["kind"]
    rows = [
        (source, r["claims"], f"{r['accuracy']:.1%}", f"{r['majority_baseline']:.1%}")
        for source, r in report["holdout_accuracy"].items()
    ]
    training = report["training"]
    settings = training["settings"]
    parity = report["export"]["parity"]
    top = ", ".join(f"`{k}`" for k in list(report["feature_importance"])[:8])
    split_files = ", ".join(f"`{s}`" for s in report["claims"])
    train_files = ", ".join(f"`{s}`" for s in report["train_claims"]) or "none"
    claims_of, read_against = _WHAT[kind]
    if kind == "table":
        reading = (
            "Each claim is read against its gold table (`gold_tables`) as the index holds it, and "
            f"{training['retrieved_examples']} of the training claims a second time against the "
            "first table of the evidence the pipeline retrieved for them. At run time the verdict "
            "reads that retrieved table; `bench/verdict.py` measures it there."
        )
        measured = "gold table"
    else:
        reading = (
            "Each claim is read against the sentences of the evidence the pipeline retrieved for "
            "it (default plugins, cached in the work directory), as at run time."
        )
        measured = "retrieved evidence"
    about = f"""
The verdict of {claims_of}: a gradient-boosted classifier (scikit-learn
`GradientBoostingClassifier`, {settings["trees"]} trees of depth {settings["depth"]}, exported
to ONNX: `model.onnx`, {report["export"]["bytes"] / 1e6:.2f} MB) over
{len(training["features"])} features of the claim read against {read_against}. SUPPORTS /
REFUTES only; NOT ENOUGH INFO is the `classifier` verdict plugin's reader's call (its
`nei_above`). Most used features: {top}."""
    data = f"""
Split claim files: {split_files} (a seeded {report["holdout"]:.0%} of their claims, by claim id,
held out of training and measured below); training-only files: {train_files}. {reading}
{training["examples"]} training claims, fitted in {training["seconds"]:.0f} s on a 2-core CPU."""
    metrics = Section(
        f"Metrics (held-out claims, {measured}, this ONNX model)",
        table=Table(("claims file", "held-out claims", "label accuracy", "majority class"), rows),
        after=f"""Parity against scikit-learn on {parity["rows"]} held-out rows: max |Δp|
{parity["max_abs_diff"]:.1e}, same label on {parity["argmax_agreement"]:.1%}.""",
    )
    model_card = card.ModelCard(
        title=f"feverous-es {kind} verdict model",
        about=about,
        data=data,
        command=report["command"],
        sections=[metrics],
        licences=[card.FEVEROUS_DATA],
    )
    common.save_card(out, model_card, report)
