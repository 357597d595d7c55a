"""The row ranker's model card."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feverous_es.export import card
from feverous_es.export.card import Section, Table
from feverous_es.training.rerank.card import save_ranker_card


def _metric_row(name: str, metrics: dict[str, Any]) -> tuple[str, ...]:
    if not metrics.get("groups"):
        return (name, "0", "", "", "")
    return (
        name, str(metrics["groups"]), f"{metrics['mrr']:.3f}", f"{metrics['hits_at_1']:.1%}",
        f"{metrics['chance_hits_at_1']:.1%}",
    )  # fmt: skip


def write_card(out: Path, report: dict[str, Any]) -> None:
    """``README.md`` and ``training.json`` beside the model."""
    training = report["training"]
    held, hard = report["holdout_groups"], report["holdout_hard_groups"]
    rows = [_metric_row("its whole group", held)]
    if training["others"]:  # without other claims' rows a group is its hard negatives
        rows.append(_metric_row("the hard negatives only", hard))
    files = ", ".join(f"`{s}`" for s in report["claims"])
    limit = report["claims_per_file"]
    sampled = f"a sample of {limit} claims a file" if limit else "every claim naming its table"
    about = f"""
The cross-encoder of the `papelo` candidate stage's table ranking: it scores (claim, a
table's best row as plain text) for the first `row_tables` tables, and the stage adds
`row_weight` x its logit to each table's score. One output logit; dynamic int8 ONNX,
`model.int8.onnx` ({report["export"]["bytes"] / 1e6:.1f} MB). Use it with"""
    usage = f"""
[options.candidates]
row_model = "{out}\""""
    data = f"""
Claims naming their table (`gold_tables`): {files}, {sampled} (seed {training["seed"]}); a
seeded {report["holdout"]:.0%} of them, split by claim id, is held out of training. Of
{report["table_claims"]} claims, the candidate stage's pool holds the gold table for
{report["gold_table_in_pool"]} (first for {report["gold_table_first"]}, before the row step).

Groups: the gold table's best row, the best rows of the {training["negatives"]} best-ranked
other tables (hard negatives), {training["others"]} gold rows of other claims; the loss is the
cross entropy over the group's scores with the gold row as the right class.
{training["groups"]} training groups, {training["hard_negatives"]:.2f} hard negatives each on
average."""
    metrics = Section(
        "Metrics (held-out claims, this int8 model)",
        table=Table(("the gold row among", "groups", "MRR", "Hits@1", "Hits@1 at random"), rows),
        after=f"""In the pipeline the logit is one part of a table's score: `python -m bench run
row-step --option 'models=["{out}"]'` gives gold-table Hits@1/5/10 with it beside the default.

{card.classifier_parity(report["export"]["parity"])}""",
    )
    name = "feverous-es row ranker"
    save_ranker_card(out, report, name, about=about, usage=usage, data=data, metrics=metrics)
