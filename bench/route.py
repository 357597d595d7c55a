"""The route that reads best: a claim the router sends to a table, read by the reader on its
sentences instead where the table's feature model is unsure (the verdict's
``table_unsure_below``) or where the NEI model reads the sentences as bearing on the claim more
than the table (``table_sentences_margin``), chosen on every held-out dev claim of the three
files (TabFact's 3,796 too: its first claims are harder than the rest).

    run = "bench.route:route_choice"   # on the mini index (--index); options: per_file, batch_size

Each held-out claim goes once through the whole pipeline with the table route always deciding
(both options off). Each SUPPORTS / REFUTES claim it routes to a table is then read again on the
same evidence by the verdict with every such claim handed to the reader (``table_unsure_below``
over 1: its sentences' reading, where its evidence holds any), and the NEI model reads its two
premises (:meth:`~feverous_es.verdict.classifier.ClaimPremises.all`: the table, the sentences),
as the verdict's NEI call does. A rule hands over the claims it names: a share (the feature
model's likelier label under it) or a margin (the sentences' NOT ENOUGH INFO probability below
the table's by more than it). Each rule's accuracy per file and its paired difference from the
table always deciding, on all the claims (sentence-routed ones unchanged); the rule chosen
two-fold, and on all claims: the most accurate whose interval clears zero and that costs TabFact
nothing (:func:`adopted`); else none, the table always deciding.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bench.context import Context
from bench.data import MINI, REPO
from bench.paired import paired_difference
from bench.verdict import file_limit, held_out_lines, model_dirs, read_dirs, training_report

FILES = ("fm2_dev", "feverous_s_dev", "tabfact_dev")
SHARES = (0.55, 0.6, 0.65, 0.7, 0.8, 0.9)
MARGINS = (-0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3, 0.5)
# Both options off: the table route decides every claim it is given.
TABLE_DECIDES = {"table_unsure_below": 0.0, "table_sentences_margin": 1.1}
SEED = 29


def rules() -> dict[str, dict[str, float]]:
    """Every rule scored, by name: the verdict options it sets."""
    named = {"the table decides": TABLE_DECIDES}
    named |= {f"unsure below {s:.2f}": {**TABLE_DECIDES, "table_unsure_below": s} for s in SHARES}
    named |= {
        f"sentences by {m:+.2f}": {**TABLE_DECIDES, "table_sentences_margin": m} for m in MARGINS
    }
    named["every table-routed claim"] = {**TABLE_DECIDES, "table_unsure_below": 1.1}
    return named


def hands(read: dict, options: Mapping[str, float]) -> bool:
    """Whether ``options`` hand a table-routed claim's reading ``read`` to its sentences (as the
    verdict's ``_unsure_tables`` and ``_about_sentences`` decide)."""
    from feverous_es.verdict.classifier import about_sentences

    if read.get("handed") is None:  # no sentence in its evidence
        return False
    # a margin over 1 never hands a claim over (NEI probabilities lie in [0, 1])
    weighed = about_sentences(read["nei"], options["table_sentences_margin"])
    return read["share"] < options["table_unsure_below"] or weighed


def answers(read: Sequence[dict], options: Mapping[str, float]) -> np.ndarray:
    """Each claim's label under ``options``."""
    return np.array([r["handed"] if hands(r, options) else r["label"] for r in read])


def scored(read: Sequence[dict]) -> dict[str, Any]:
    """Each rule's accuracy per file and on all, its paired difference from the table always
    deciding, and how many claims it answers otherwise."""
    gold = np.array([r["gold"] for r in read])
    files = np.array([r["source"] for r in read])
    by_table = answers(read, TABLE_DECIDES)
    base = by_table == gold
    figures: dict[str, Any] = {}
    for name, options in rules().items():
        said = answers(read, options)
        right = said == gold
        by_file = {
            source: {"claims": int((files == source).sum()),
                     "accuracy": round(float(right[files == source].mean()), 4),
                     "paired": paired_difference(right[files == source], base[files == source])}
            for source in dict.fromkeys(files.tolist())
        }  # fmt: skip
        figures[name] = {
            "options": options,
            "handed": int((said != by_table).sum()),
            "accuracy": round(float(right.mean()), 4),
            "paired": paired_difference(right, base),
            "by_file": by_file,
        }
    return figures


def adopted(figures: dict[str, Any]) -> str:
    """The most accurate rule whose paired difference on all claims clears zero and that costs
    TabFact nothing; the table deciding when none does."""

    def costs_tabfact(f: dict[str, Any]) -> bool:
        tabfact = f["by_file"].get("tabfact_dev")
        return tabfact is not None and tabfact["paired"]["difference"] < 0

    fine = [n for n, f in figures.items() if f["paired"]["low"] > 0 and not costs_tabfact(f)]
    return max(fine, key=lambda n: figures[n]["accuracy"]) if fine else "the table decides"


def chosen(read: Sequence[dict]) -> dict[str, Any]:
    """The rules scored on all these claims and two-fold (a seeded split), and the one that
    ships."""
    half = np.random.default_rng(SEED).permutation(len(read)) % 2
    two_fold = []
    for h in (0, 1):
        pick = adopted(scored([r for r, part in zip(read, half, strict=True) if part == h]))
        there = scored([r for r, part in zip(read, half, strict=True) if part != h])[pick]
        two_fold.append({"chosen_on_half": h, "rule": pick, "other_half": there})
    every = scored(read)
    pick = adopted(every)
    return {"rules": every, "two_fold": two_fold, "chosen": pick, "options": every[pick]["options"]}


def route_choice(
    context: Context, *, per_file: int | Mapping[str, int] | None = None, batch_size: int = 16
) -> dict[str, Any]:
    """The held-out claims of :data:`FILES` read with the table deciding, the table-routed ones
    read again handed over, every rule of :func:`rules` scored on them (the module)."""
    from rich.progress import track

    from feverous_es.plugins.config import load_config
    from feverous_es.plugins.registry import load
    from feverous_es.verify.pipeline import Pipeline

    models = REPO / "feverous_es" / "models"
    reader = load_config(None).stage_options("verdict").get("model") or "auto"
    trainings = [training_report(d) for d in [*read_dirs(reader), *model_dirs(models)[1:]]]
    config = load_config(None).with_stage_options("verdict", **TABLE_DECIDES)
    pipeline = Pipeline.open(context.place("index"), config=config)
    every_one = {**config.stage_options("verdict"), "table_unsure_below": 1.1}
    handing = load("verdict", "classifier", pipeline.context, every_one)
    read: list[dict] = []
    try:
        for source in FILES:
            limit = file_limit(per_file, source)
            records = [
                json.loads(x) for x in held_out_lines(trainings, MINI / f"{source}.jsonl", limit)
            ]
            batches = [records[s : s + batch_size] for s in range(0, len(records), batch_size)]
            for chunk in track(batches, description=source, transient=True):
                results = pipeline.verify_many([r["claim"] for r in chunk])
                read += read_routes(source, chunk, results, handing)
    finally:
        pipeline.close()
    figures: dict[str, Any] = {
        "claims": {source: sum(r["source"] == source for r in read) for source in FILES},
        "table_routed": {
            source: sum(r["source"] == source and "nei" in r for r in read) for source in FILES
        },
        **chosen(read),
        "readings": [r for r in read if "nei" in r],
    }
    report(figures)
    return figures


def read_routes(
    source: str, records: Sequence[dict], results: Sequence[Any], handing: Any
) -> list[dict]:
    """Each claim's label as verified (``results``); for a SUPPORTS / REFUTES claim routed to
    a table, its feature model's likelier label's share, the NEI model's NOT ENOUGH INFO
    probabilities on its table and sentences, and its label under ``handing`` (the verdict
    handing it to its sentences; None where its evidence holds none)."""
    from feverous_es.plugins.interfaces import Label, Query
    from feverous_es.verdict.classifier import ClaimPremises, likelier_share
    from feverous_es.verdict.feature_model import evidence_table

    read = [
        {"source": source, "id": str(r["id"]), "gold": r["label"], "label": res.verdict.label.value}
        for r, res in zip(records, results, strict=True)
    ]
    on_table = [
        i for i, (r, res) in enumerate(zip(records, results, strict=True))
        if res.verdict.table is not None and r["label"] != Label.NOT_ENOUGH_INFO.value
    ]  # fmt: skip
    batch = [(Query(results[i].claim, np.zeros(0)), results[i].evidence) for i in on_table]
    nei_reader = handing.nei_reader
    nei = nei_reader.labels.index(Label.NOT_ENOUGH_INFO)
    for i, other in zip(on_table, handing.predict(batch) if batch else [], strict=True):
        claim, evidence = results[i].claim, results[i].evidence
        premises = ClaimPremises.of(claim, evidence, evidence_table(claim, evidence), 0)
        said = nei_reader.probabilities([claim] * 2, [premises.route, premises.sentences])[:, nei]
        p = results[i].verdict.probabilities
        row = np.array([p.get(Label.SUPPORTS, 0.0), p.get(Label.REFUTES, 0.0)])
        read[i] |= {
            "share": round(likelier_share(row), 4),
            "nei": [round(float(x), 4) for x in said],
            "handed": other.label.value if other.table is None else None,
        }
    return read


def report(figures: dict[str, Any]) -> None:
    """Every rule's figures, and the choice."""
    print("claims: " + ", ".join(f"{k} {n} ({figures['table_routed'][k]} routed to a table)"
                                 for k, n in figures["claims"].items()))  # fmt: skip
    for name, f in figures["rules"].items():
        paired = f["paired"]
        print(f"  {name:26} {f['accuracy']:.2%} ({paired['difference']:+.2%} "
              f"[{paired['low']:+.2%}, {paired['high']:+.2%}]), {f['handed']} claims answered "
              "otherwise; " + ", ".join(
                  f"{source} {v['accuracy']:.1%} ({v['paired']['difference']:+.1%})"
                  for source, v in f["by_file"].items()))  # fmt: skip
    print(f"chosen: {figures['chosen']} ({figures['options']})")
    for fold in figures["two_fold"]:
        print(f"  chosen on half {fold['chosen_on_half']}: {fold['rule']}, the other half "
              f"{fold['other_half']['paired']['difference']:+.2%}")  # fmt: skip
