"""The route that reads best, chosen on every held-out dev claim of the three files (TabFact's
3,796 too: its first claims are harder than the rest), both ways: a claim the router sends to a
table, read by the reader on its sentences instead where the table's feature model is unsure
(``table_unsure_below``: a rule measured here, not in the product, which every share of it
cost TabFact) or where the NEI model reads the sentences as bearing on
the claim more than the table (``table_sentences_margin``); a claim the router sends to its
sentences, decided by its evidence's table where the NEI model reads that table as bearing on
it more than the sentences (``sentences_table_margin``; only where the NEI call is made).

    run = "bench.route:route_choice"   # on the mini index (--index); options: per_file, batch_size

Each held-out claim goes once through the whole pipeline with each route deciding the claims it
is given (every option off). Each SUPPORTS / REFUTES claim is then read again on the same
evidence by the verdict with every claim handed over (``table_sentences_margin`` under -1: a
table-routed claim's sentences' reading, where its evidence holds any; ``sentences_table_margin``
under -1: a sentence-routed claim's table's, where its NEI call is made and its evidence holds a
table), and the NEI model reads its table and its sentences, as the verdict's NEI call does. A
rule hands over the claims it names: a share (the feature model's likelier label under it) or a
margin (one route's NOT ENOUGH INFO probability below the other's by more than it). Each rule's
accuracy per file and its paired difference from every claim read as routed, on all the claims;
each way's rule chosen two-fold, and on all claims: the most accurate whose interval clears zero
and that costs nothing where the other route is the right one (a table-routed claim handed to
its sentences: TabFact, whose claims are about a table; a sentence-routed one handed to its
table: FM2 and FEVEROUS-S: :func:`adopted`); else none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from bench.context import Context
from bench.data import MINI
from bench.paired import paired_difference
from bench.verdict import file_limit, held_out_lines, shipped_trainings

FILES = ("fm2_dev", "feverous_s_dev", "tabfact_dev")
SHARES = (0.55, 0.6, 0.65, 0.7, 0.8, 0.9)
MARGINS = (-0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.3, 0.5)
TABLE_MARGINS = (0.3, 0.5, 0.6, 0.7, 0.8, 0.9)
# Every option off: each route decides the claims it is given (the verdict's options).
AS_ROUTED = {
    "table_sentences_margin": 1.1,
    "sentences_table_margin": 1.1,
}
# A rule: the verdict's options, and the share of the table feature model's likelier label
# under which a table-routed claim goes to its sentences (measured here only).
NO_RULE = {**AS_ROUTED, "table_unsure_below": 0.0}
# Each way a rule hands claims over, and the files it must cost nothing: those whose claims the
# route it takes them from reads right by design.
WAYS = {
    "to sentences": ("table_unsure_below", "table_sentences_margin"),
    "to the table": ("sentences_table_margin",),
}
GUARDED = {"to sentences": ("tabfact_dev",), "to the table": ("fm2_dev", "feverous_s_dev")}
SEED = 29


def rules() -> dict[str, dict[str, float]]:
    """Every rule scored, by name: the verdict options it sets."""
    named = {"as routed": NO_RULE}
    named |= {f"unsure below {s:.2f}": {**NO_RULE, "table_unsure_below": s} for s in SHARES}
    named |= {f"sentences by {m:+.2f}": {**NO_RULE, "table_sentences_margin": m} for m in MARGINS}
    named["every table-routed claim"] = {**NO_RULE, "table_unsure_below": 1.1}
    named |= {f"table by {m:.2f}": {**NO_RULE, "sentences_table_margin": m} for m in TABLE_MARGINS}
    named["every sentence claim with a table"] = {**NO_RULE, "sentences_table_margin": -1.1}
    return named


def way(options: Mapping[str, float]) -> str | None:
    """Which way a rule hands claims over (None: it hands none)."""
    return next(
        (w for w, names in WAYS.items() if any(options[n] != NO_RULE[n] for n in names)), None
    )


def answer(read: dict, options: Mapping[str, float]) -> str:
    """A claim's label under ``options`` (as the verdict's hand-overs decide, and the share
    rule measured here)."""
    from feverous_es.verdict.routes import about_sentences, about_table

    if "share" in read:  # routed to a table
        if read["handed"] is None:  # no sentence in its evidence
            return read["label"]
        # a margin over 1 never hands a claim over (NEI probabilities lie in [0, 1])
        weighed = about_sentences(read["nei"], options["table_sentences_margin"])
        unsure = read["share"] < options["table_unsure_below"]
        return read["handed"] if unsure or weighed else read["label"]
    if "table_nei" in read and about_table(read["table_nei"], options["sentences_table_margin"]):
        return read["to_table"]
    return read["label"]


def likelier_share(row: np.ndarray) -> float:
    """The share of a table feature model's likelier label in its SUPPORTS + REFUTES."""
    return float(np.max(row) / max(row.sum(), 1e-9))


def answers(read: Sequence[dict], options: Mapping[str, float]) -> np.ndarray:
    """Each claim's label under ``options``."""
    return np.array([answer(r, options) for r in read])


def scored(read: Sequence[dict]) -> dict[str, Any]:
    """Each rule's accuracy per file and on all, its paired difference from every claim read as
    routed, and how many claims it answers otherwise."""
    gold = np.array([r["gold"] for r in read])
    files = np.array([r["source"] for r in read])
    as_routed = answers(read, NO_RULE)
    base = as_routed == gold
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
            "handed": int((said != as_routed).sum()),
            "accuracy": round(float(right.mean()), 4),
            "paired": paired_difference(right, base),
            "by_file": by_file,
        }
    return figures


def adopted(figures: dict[str, Any], handing: str) -> str:
    """Of the rules that hand claims over ``handing`` (a way of :data:`WAYS`), the most accurate
    whose paired difference on all claims clears zero and that costs its guarded files
    (:data:`GUARDED`) nothing; "as routed" when none does."""

    def costs_guarded(f: dict[str, Any]) -> bool:
        return any(
            source in f["by_file"] and f["by_file"][source]["paired"]["difference"] < 0
            for source in GUARDED[handing]
        )

    fine = [
        n for n, f in figures.items()
        if way(f["options"]) == handing and f["paired"]["low"] > 0 and not costs_guarded(f)
    ]  # fmt: skip
    return max(fine, key=lambda n: figures[n]["accuracy"]) if fine else "as routed"


def chosen(read: Sequence[dict]) -> dict[str, Any]:
    """The rules scored on all these claims and, each way, two-fold (a seeded split), and the
    options that ship: each way's rule chosen on all claims."""
    half = np.random.default_rng(SEED).permutation(len(read)) % 2
    halves = [[r for r, part in zip(read, half, strict=True) if part == h] for h in (0, 1)]
    every = scored(read)
    picks, two_fold = {}, {}
    for handing in WAYS:
        folds = []
        for h in (0, 1):
            pick = adopted(scored(halves[h]), handing)
            folds.append(
                {"chosen_on_half": h, "rule": pick, "other_half": scored(halves[1 - h])[pick]}
            )
        two_fold[handing] = folds
        picks[handing] = adopted(every, handing)
    options = dict(NO_RULE)
    for handing, pick in picks.items():
        options |= {n: every[pick]["options"][n] for n in WAYS[handing]}
    return {"rules": every, "two_fold": two_fold, "chosen": picks, "options": options}


def route_choice(
    context: Context, *, per_file: int | Mapping[str, int] | None = None, batch_size: int = 16
) -> dict[str, Any]:
    """The held-out claims of :data:`FILES` read as routed, each SUPPORTS / REFUTES one read
    again handed over, every rule of :func:`rules` scored on them (the module)."""
    from rich.progress import track

    from feverous_es.plugins.config import load_config
    from feverous_es.plugins.registry import load
    from feverous_es.verify.pipeline import Pipeline

    trainings = shipped_trainings()
    config = load_config(None).with_stage_options("verdict", **AS_ROUTED)
    pipeline = Pipeline.open(context.place("index"), config=config)
    # margins under -1: every table-routed claim with sentences read on them, every gated
    # sentence-routed one on its table
    every_one = {
        **config.stage_options("verdict"), "table_sentences_margin": -1.1,
        "sentences_table_margin": -1.1,
    }  # fmt: skip
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
            source: sum(r["source"] == source and "share" in r for r in read) for source in FILES
        },
        "sentences_weighed": {
            source: sum(r["source"] == source and "table_nei" in r for r in read)
            for source in FILES
        },
        **chosen(read),
    }
    report(figures)
    return figures


def read_routes(
    source: str, records: Sequence[dict], results: Sequence[Any], handing: Any
) -> list[dict]:
    """Each claim's label as verified (``results``); for a SUPPORTS / REFUTES claim routed to
    a table, its feature model's likelier label's share, the NEI model's NOT ENOUGH INFO
    probabilities on its table and sentences, and its label under ``handing`` (the verdict
    handing it to its sentences; None where its evidence holds none); for one routed to its
    sentences that ``handing`` decides by its evidence's table, the NEI model's probabilities
    on that table and its sentences, and that label."""
    from feverous_es.plugins.interfaces import Label, Query
    from feverous_es.verdict.feature_model import first_table
    from feverous_es.verdict.premises import ClaimPremises

    read = [
        {"source": source, "id": str(r["id"]), "gold": r["label"], "label": res.verdict.label.value}
        for r, res in zip(records, results, strict=True)
    ]
    decided = [i for i, r in enumerate(records) if r["label"] != Label.NOT_ENOUGH_INFO.value]
    batch = [(Query(results[i].claim, np.zeros(0)), results[i].evidence) for i in decided]
    nei_reader = handing.nei_reader
    nei = nei_reader.labels.index(Label.NOT_ENOUGH_INFO)
    for i, other in zip(decided, handing.predict(batch) if batch else [], strict=True):
        claim, evidence, verdict = results[i].claim, results[i].evidence, results[i].verdict
        on_table = verdict.table is not None
        if not on_table and other.table is None:  # its sentences decide either way
            continue
        # the table the verdict reads, and the sentences: the NEI model reads both
        premises = ClaimPremises.of(claim, evidence, first_table(evidence), 0)
        said = nei_reader.probabilities([claim] * 2, [premises.route, premises.sentences])[:, nei]
        weighed = [round(float(x), 4) for x in said]
        if on_table:
            p = verdict.probabilities
            row = np.array([p.get(Label.SUPPORTS, 0.0), p.get(Label.REFUTES, 0.0)])
            read[i] |= {
                "share": round(likelier_share(row), 4),
                "nei": weighed,
                "handed": other.label.value if other.table is None else None,
            }
        else:
            read[i] |= {"table_nei": weighed, "to_table": other.label.value}
    return read


def report(figures: dict[str, Any]) -> None:
    """Every rule's figures, and the choice."""
    print("claims: " + ", ".join(
        f"{k} {n} ({figures['table_routed'][k]} routed to a table, "
        f"{figures['sentences_weighed'][k]} to sentences weighed against a table)"
        for k, n in figures["claims"].items()))  # fmt: skip
    for name, f in figures["rules"].items():
        paired = f["paired"]
        print(f"  {name:34} {f['accuracy']:.2%} ({paired['difference']:+.2%} "
              f"[{paired['low']:+.2%}, {paired['high']:+.2%}]), {f['handed']} claims answered "
              "otherwise; " + ", ".join(
                  f"{source} {v['accuracy']:.1%} ({v['paired']['difference']:+.1%})"
                  for source, v in f["by_file"].items()))  # fmt: skip
    print(f"chosen: {figures['chosen']} ({figures['options']})")
    for handing, folds in figures["two_fold"].items():
        for fold in folds:
            print(f"  {handing}, chosen on half {fold['chosen_on_half']}: {fold['rule']}, the "
                  f"other half {fold['other_half']['paired']['difference']:+.2%}")  # fmt: skip
