"""The evidence rankers' model cards (README.md) and what the row ranker's shares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feverous_es.export import card
from feverous_es.export.card import Section, Table
from feverous_es.runtime.tasks import TEXT_CLASSIFICATION
from feverous_es.training import common


def save_ranker_card(
    out: Path, report: dict[str, Any], name: str, *, about: str, usage: str, data: str,
    metrics: Section,
) -> None:  # fmt: skip
    """A ranker's card (data, the command and its run, its held-out ``metrics``), training
    report and manifest, ``name`` the model's."""
    training = report["training"]
    base = training["base_name"]
    run = f"""Base model `{base}`; {training["epochs"]} epoch(s), max_length
{training["max_length"]}, batch {training["batch_size"]} groups, learning rate
{training["learning_rate"]}, {training["steps"]} steps in {training["seconds"]:.0f} s
({training["tokens_per_second"]:.0f} tokens/s)."""
    model_card = card.ModelCard(
        name, about, usage=usage, data=data, command=report["command"], run=run,
        sections=[metrics], licences=card.fine_tuned_licences(base, report["claims"]),
    )  # fmt: skip
    common.save_card(out, model_card, report, model=name, task=TEXT_CLASSIFICATION, base=base)


def write_card(out: Path, report: dict[str, Any]) -> None:
    """``README.md`` and ``training.json`` beside the model."""
    kind = report["kind"]
    training = report["training"]
    held = report["holdout_groups"]
    recall = report["holdout_pool_recall"]
    files = ", ".join(f"`{s}`" for s in report["claims"])
    elements = (
        "table cells and header cells"
        if kind == "cells"
        else "sentences, list items and table captions"
    )
    option = "cell_model" if kind == "cells" else "model"
    # A sentence ranker runs as the default pipeline runs the packaged one: on sentences, fused
    # with the retrieval order.
    plugin = "cross-encoder" if kind == "cells" else "sentence-ranker"
    if held.get("groups"):
        group_rows = [
            ("this model", f"{held['mrr']:.3f}", f"{held['hits_at_1']:.1%}"),
            ("random order", f"{held['chance_mrr']:.3f}", f"{held['chance_hits_at_1']:.1%}"),
        ]
    else:
        group_rows = [("(no held-out groups)", "", "")]
    limit = report["claims_per_file"]
    sampled = f"a sample of {limit} claims a file" if limit else "every claim with gold evidence"
    size = 1 + training["negatives"] + training["others"]
    about = f"""
A cross-encoder that scores (claim, element) pairs for the `{plugin}` reranker's
`{option}` option: {elements}, each as its Papelo linearization (the index's
`linearized` field, the text the reranker passes). One output logit; dynamic int8 ONNX,
`model.int8.onnx` ({report["export"]["bytes"] / 1e6:.1f} MB). Use it with"""
    usage = f"""
[plugins]
reranker = "{plugin}"

[options.reranker]
{option} = "{out}"  # this directory (the package's sentence ranker needs no option)
max_length = {training["max_length"]}  # as trained"""
    data = f"""
Claims: {files}, {sampled} (seed {training["seed"]}); a seeded {report["holdout"]:.0%} of
them, split by claim id, is held out of training. Training claims with gold {kind}:
{report["claims_with_gold"]}; gold elements missing from the index (page not indexed):
{report["gold_missing"]}.

Malon (2021) §3's groups of up to {size} pairs: each gold element, the {training["negatives"]}
best-ranked non-gold candidates of its kind from the pipeline's page and candidate stages
(retrieval order), and {training["others"]} gold elements of other claims (which also fill a
group whose pool has too few hard negatives); the loss is the cross entropy over the group's
scores with the gold element as the right class. {training["groups"]} training groups,
{training["hard_negatives"]:.2f} hard negatives each on average."""
    metrics = Section(
        "Metrics (held-out claims, this int8 model, scored as the reranker scores)",
        f"""The gold element among its group ({held.get("groups", 0)} groups, mean size
{held.get("mean_size", 0)}; ties count against the gold):""",
        Table(("ranking", "MRR", "Hits@1"), group_rows),
        f"""Candidate pools: of {recall["gold_elements"]} held-out gold {kind}, {recall["in_pool"]}
are among the candidates. The first {recall["k"]} candidates of the kind hold
{recall["recall_retrieval_order"]:.1%} of those in retrieval order and
{recall["recall_model"]:.1%} reranked by this model.

{card.classifier_parity(report["export"]["parity"])}""",
    )
    name = f"feverous-es evidence ranker: {kind}"
    save_ranker_card(out, report, name, about=about, usage=usage, data=data, metrics=metrics)
