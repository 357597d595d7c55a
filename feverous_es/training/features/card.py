"""The table feature verdict's model card."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feverous_es.export import card
from feverous_es.export.card import Section, Table
from feverous_es.training import common


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
    reading = (
        "Each claim is read against its gold table (`gold_tables`) as the index holds it, and "
        f"{training['retrieved_examples']} of the training claims a second time against the "
        "first table of the evidence the pipeline retrieved for them. At run time the verdict "
        "reads that retrieved table; `bench/verdict.py` measures it there."
    )
    measured = "gold table"
    about = f"""
The verdict of claims whose evidence is a table: a gradient-boosted classifier (scikit-learn
`GradientBoostingClassifier`, {settings["trees"]} trees of depth {settings["depth"]}, exported
to ONNX: `model.onnx`, {report["export"]["bytes"] / 1e6:.2f} MB) over
{len(training["features"])} features of the claim read against the table
(`feverous_es.verdict.table_facts`: which claim words and numbers the table holds and in which
row, counts of rows holding a named value, whether the named rows hold a column's maximum or
minimum, comparisons of two named rows, sums, means and differences, next to the claim's cue
words). SUPPORTS /
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
