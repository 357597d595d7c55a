"""The entailment model's card: data, the command that trained it, the held-out accuracy after
each epoch and of the exported model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feverous_es.export import card
from feverous_es.export.card import Section, Table
from feverous_es.runtime.tasks import TEXT_CLASSIFICATION
from feverous_es.training import common

NLI_PAIRS_LICENCES = (
    "NLI pairs: CAD-SNLI (Kaushik et al. 2020; Apache-2.0, SNLI CC BY-SA 4.0), "
    "Climate-FEVER (Diggelmann et al. 2020), FEVER-Symmetric (Schuster et al. 2019), "
    "SufficientFacts (Atanasova et al. 2022; FEVER, HoVer, VitaminC claims): CC BY-SA; "
    "InfoTabS (Gupta et al. 2020) and SciTab (Lu et al. 2023): MIT."
)


def write_card(out: Path, report: dict[str, Any]) -> None:
    """The model card, ``README.md`` beside the model."""
    training = report["training"]
    pool = ", ".join(f"{source} {n:,}" for source, n in training["pool"].items())
    about = f"""
A 3-way (SUPPORTS / REFUTES / NOT ENOUGH INFO) cross-encoder over (claim, premise): the
`classifier` verdict plugin's `model`. The premise is what the verdict reads for the claim's
route: its evidence sentences as `[Title] sentence …` (`feverous_es.verdict.inputs.
sentence_premise`), or one table as `Title, caption. header. row ; row …` with the rows that
share most words with the claim (`table_premise`). It answers the claims of a route without a
feature model (by default the sentence route), and may decide NOT ENOUGH INFO
(`nei_model`). Dynamic int8 ONNX, `model.int8.onnx` ({report["export"]["bytes"] / 1e6:.1f} MB);
labels in `config.json` (`id2label`)."""
    contrastive_text = ""
    if report.get("contrastive_pages"):
        contrastive_text = f"""
Contrastive pairs from {report["contrastive_pages"]:,} pages of the dump
(`feverous_es.training.verdict.contrastive`): a lead sentence as SUPPORTS, with one attribute taken
from another page as REFUTES (`contrastive-<kind>`), and against other subjects' sentences as
NOT ENOUGH INFO (`contrastive-other-subject`); held out by page."""
    held = (
        f"a seeded {report['holdout']:.0%} of their claims, by claim id, cut in folds: fold "
        f"{report['fold']} held out and measured below, the others trained on (cross-fitting)"
        if report.get("fold")
        else f"a seeded {report['holdout']:.0%} of their claims, by claim id, held out of every "
        "model and measured below"
    )
    data = f"""
Claim files {", ".join(f"`{c}`" for c in report["claims"])} ({held}), training-only files
{", ".join(f"`{c}`" for c in report["train_claims"]) or "none"}, and the pair files
{", ".join(f"`{c}`" for c in report["pairs"]) or "none"}. FM2 and FEVEROUS-S claims are read
against the evidence the pipeline *retrieved* for them (reranker `{report["reranker"]}`), and
again with every gold element removed, labelled NOT ENOUGH INFO; TabFact claims against their
gold table ({report["retrieved"]} of each table file also against retrieved evidence). At most
{report["per_source"]:,} training pairs a source. Training pairs: {pool}.{contrastive_text}"""
    run = f"""
Base model `{training["base_name"]}`; {training["examples"]:,} training pairs,
{training["epochs_trained"]} epoch(s), max_length {training["max_length"]}, batch
{training["batch_size"]}, learning rate {training["learning_rate"]};
{training["seconds"]:.0f} s on {training["device"]}."""
    if teacher := training.get("teacher"):
        held_rows = ", ".join(
            f"{name} {r['accuracy']:.1%}" for name, r in teacher["held"].items() if name != "all"
        )
        run += f"""
Trained on the GPU job's bundle (docs/gpu-training.md): distilled from a `{teacher["base"]}`
teacher (epoch {teacher["best_epoch"]}; torch bf16 held-out accuracy {held_rows}) on its soft
labels and the gold labels; the epochs were chosen on validation claims, never on held-out
ones."""
    epochs = training["epochs"]
    curve = Table(
        ("epoch", *(epochs[0]["held_out"] if epochs else ())),
        [(e["epoch"], *(f"{r['accuracy']:.1%}" for r in e["held_out"].values())) for e in epochs],
    )
    save_reader_card(
        out, report, "feverous-es verdict", title="feverous-es entailment verdict model",
        about=about, data=data, run=run, sections=[
            Section("Held-out accuracy after each epoch (torch, pairs the verdict reads)",
                    table=curve),
            held_out_section("Metrics (held-out claims, this int8 model)",
                             report["holdout_accuracy"], report["export"]["parity"]),
        ],
    )  # fmt: skip


def held_out_section(
    heading: str, held: dict[str, dict[str, Any]], parity: dict[str, Any], text: str = ""
) -> Section:
    """A reader's held-out accuracy per pair source, and its export's parity with torch."""
    return Section(
        heading,
        text,
        Table(
            ("source (`/no-gold`: gold removed, NEI expected)", "pairs", "label accuracy"),
            [(name, f"{r['pairs']:,}", f"{r['accuracy']:.1%}") for name, r in held.items()],
        ),
        card.classifier_parity(parity),
    )


def save_reader_card(
    out: Path, report: dict[str, Any], model: str, *, title: str, about: str, run: str,
    sections: list[Section], data: str = "",
) -> None:  # fmt: skip
    """A reader's card (its ``report``'s command, ``run`` under it, then ``sections``; the
    licences of its base, its claims and the NLI pairs), its training report and its manifest
    (with the int8 recipe)."""
    training = report["training"]
    model_card = card.ModelCard(
        title=title,
        about=about,
        data=data,
        command=report["command"],
        run=run,
        sections=sections,
        licences=[
            *card.fine_tuned_licences(training["base_name"], report["claims"]),
            NLI_PAIRS_LICENCES,
        ],
    )
    common.save_card(
        out, model_card, report, model=model, task=TEXT_CLASSIFICATION,
        base=training["base_name"], int8=report["export"]["int8"],
    )  # fmt: skip
