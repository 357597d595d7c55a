"""The reader's failure classes through the whole pipeline: held-out claims made from the dump's
leads, each verified as a user's claim is (retrieval, reranking, hops, the verdict's route,
premise and NOT ENOUGH INFO rules), beside the same reader on the claim's prepared pair.

    run = "bench.pipeline_contrast:pipeline_classes"   # on the mini index (--index) and dump
    # (--wiki); options: models, rules, per_class, pages, holdout, seed, batch_size

The classes, on pages held out as ``train verdict --contrastive`` holds them out (seed, share):

* ``contrastive-lead`` (a page's lead restated: ``X was a German politician.``) and its changed
  twins ``contrastive-nationality`` / ``-description`` / ``-number``
  (:mod:`feverous_es.training.verdict.contrastive`);
* a person's nationality, profession, a year and the country, true and changed
  (:mod:`feverous_es.training.verdict.attributes`);
* simple facts of a lead: named after, made by, a chemical symbol, located in, true and changed
  (:mod:`feverous_es.training.verdict.relations`).

Per class and reader: the share answered right through the pipeline, and the prepared pair's
(the claim against the page's first two sentences and a donor's lead, read alone). Where the
pipeline loses what the pair gets right, each miss of the default reader is put down to what it
read: routed to a table, called NOT ENOUGH INFO, the page's lead sentence not among the
evidence, or read wrong with the lead in hand; and the same reader on the evidence of the
claim's own page alone shows what the other pages' sentences cost.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.calibration import CUTS, REFUTES, SUPPORTS, as_read, cut_name
from bench.context import Context
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.training.verdict.attributes import CLASSES as ATTRIBUTE_CLASSES
from feverous_es.training.verdict.attributes import attribute_pairs
from feverous_es.training.verdict.contrastive import contrastive_pairs, read_leads
from feverous_es.training.verdict.entailment_data import Pair, Split
from feverous_es.training.verdict.relations import CLASSES as RELATION_CLASSES
from feverous_es.training.verdict.relations import relation_pairs

# The contrastive classes a user's claim can be (the NOT ENOUGH INFO one reads made-up evidence).
CONTRASTIVE_CLASSES = (
    "contrastive-lead", "contrastive-nationality", "contrastive-description", "contrastive-number",
)  # fmt: skip
CLASSES = (*CONTRASTIVE_CLASSES, *ATTRIBUTE_CLASSES, *RELATION_CLASSES)
GUARD = 0.85  # every class of more than two claims at this share or more: a verdict change keeps it


def held_out_claims(
    wiki: Path, *, per_class: int, pages: int, holdout: float, seed: int
) -> list[Pair]:
    """At most ``per_class`` held-out claims of each class (a seeded sample), as pairs."""
    split = Split(seed, holdout)
    leads = read_leads(WikiDB(wiki).rows())
    made = [
        *contrastive_pairs(leads, pages, split),
        *attribute_pairs(leads, split),
        *relation_pairs(leads, split),
    ]
    chosen: list[Pair] = []
    for name in CLASSES:
        pairs = [p for p in made if p.held_out and p.source == name]
        chosen += random.Random(f"{seed}\0{name}").sample(pairs, min(per_class, len(pairs)))
    return chosen


def pipeline_classes(
    context: Context,
    *,
    models: Sequence[str] = (),
    rules: Mapping[str, Mapping[str, Any]] | None = None,
    per_class: int = 80,
    pages: int = 4000,
    holdout: float = 0.35,
    seed: int = 13,
    batch_size: int = 16,
) -> dict[str, Any]:
    """Each class's share answered right through the pipeline with the shipped verdict, each of
    ``models`` (a reader's name or a directory) and the shipped reader with each of ``rules``
    (a name: the verdict options it reads with, e.g. ``{ "previous rules" = { nei_above = 0.9
    } }``), all on the evidence the shipped pipeline retrieved; beside each reader, the same
    reader on the prepared pairs. An earlier version is judged by its own commit's run, not here
    with flags that emulate it."""
    from bench.verdict_variants import verdict_plugin
    from feverous_es.plugins.registry import load
    from feverous_es.verdict.entailment import EntailmentModel
    from feverous_es.verdict.options import ClassifierOptions
    from feverous_es.verify.pipeline import Pipeline

    claims = held_out_claims(
        context.dump(Path("/tmp/feverous-es-bench")), per_class=per_class, pages=pages,
        holdout=holdout, seed=seed,
    )  # fmt: skip
    figures: dict[str, Any] = {"claims": dict(Counter(p.source for p in claims))}
    shipped = ClassifierOptions().model
    readers: dict[str, str | None] = {"shipped": shipped, **{m: m for m in models}}
    options = {name: {"model": reader} for name, reader in readers.items()}
    options.update({name: {"model": shipped, **rule} for name, rule in (rules or {}).items()})
    with Pipeline.open(context.place("index")) as pipeline:
        verdicts = {
            name: load("verdict", verdict_plugin(option), pipeline.context, option)
            for name, option in options.items()
        }
        started = time.perf_counter()
        answers, diagnosis = _verify(pipeline, verdicts, claims, batch_size)
        figures["seconds"] = round(time.perf_counter() - started, 1)
    pair_answers: dict[str | None, list[str]] = {}
    for reader in {option["model"] for option in options.values()}:
        model = EntailmentModel(reader, device="cpu")
        rows = model.probabilities([p.claim for p in claims], [p.premise for p in claims])
        pair_answers[reader] = [model.labels[int(r.argmax())].value for r in rows]
    for name, option in options.items():  # a rule reads with its reader's pairs
        figures[name] = _by_class(claims, answers[name], pair_answers[option["model"]])
    figures["misses"] = _misses(claims, answers["shipped"], diagnosis)
    figures["lean_cuts"] = _lean_cuts(claims, answers["shipped"], diagnosis)
    _print(figures, list(options))
    return figures


def _verify(
    pipeline: Any, verdicts: dict[str, Any], claims: Sequence[Pair], batch_size: int
) -> tuple[dict[str, list[str]], list[dict[str, Any]]]:
    """Every claim's evidence retrieved once; each verdict's label on it; for the first
    (shipped) one, what it read and the label on the claim's own page's evidence alone."""
    from feverous_es.plugins.interfaces import Query
    from feverous_es.retrieve.evidence_tables import with_tables

    answers: dict[str, list[str]] = {name: [] for name in verdicts}
    diagnosis: list[dict[str, Any]] = []
    shipped = verdicts["shipped"]
    store = pipeline.context.store
    for start in range(0, len(claims), batch_size):
        chunk = claims[start : start + batch_size]
        retrieved = pipeline.retrieve_many([p.claim for p in chunk])
        batch = [(Query(r.claim, np.zeros(0)), r.evidence) for r in retrieved]
        read = {name: verdict.predict(batch) for name, verdict in verdicts.items()}
        for name, said in read.items():
            answers[name] += [v.label.value for v in said]
        own = [
            (query, with_tables([c for c in evidence if c.element.page == pair.id], store))
            for (query, evidence), pair in zip(batch, chunk, strict=True)
        ]
        alone = shipped.predict([item for item in own if item[1]])
        alone_labels = iter(v.label.value for v in alone)
        for (_, evidence), (_, mine), pair, verdict in zip(
            batch, own, chunk, read["shipped"], strict=True
        ):
            diagnosis.append({
                "route": "table" if verdict.table is not None else "sentence",  # as it read
                "supports": _reader_share(shipped, verdict),
                "lead": any(c.element.id == f"{pair.id}_sentence_0" for c in evidence),
                "page": bool(mine),
                "own_page_label": next(alone_labels) if mine else None,
                "evidence": [c.element.id for c in evidence],
            })  # fmt: skip
    return answers, diagnosis


def _reader_share(verdict: Any, said: Any) -> float | None:
    """The reader's SUPPORTS share of SUPPORTS + REFUTES as read (its recalibration undone),
    where the reader decided the claim (routed to sentences, not NOT ENOUGH INFO); else None."""
    from bench.verdict_variants import shift_of
    from feverous_es.plugins.interfaces import Label

    if said.table is not None or said.label is Label.NOT_ENOUGH_INFO:
        return None
    s, r = (said.probabilities[label] for label in (Label.SUPPORTS, Label.REFUTES))
    scale = verdict.options.reader_scale
    share = as_read(np.array([s / (s + r)]), scale, shift_of(verdict))[0]
    return round(float(share), 4)


def _lean_cuts(
    claims: Sequence[Pair], answers: Sequence[str], diagnosis: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The guard under each of :data:`~bench.calibration.CUTS`: each class's share right with the
    claims the reader decided answered SUPPORTS only over that as-read share (the others as
    answered), the lowest class of more than two claims, and the highest cut that keeps every
    such class at :data:`GUARD` or more."""
    sizes = Counter(p.source for p in claims)
    table: dict[str, Any] = {}
    kept = []
    for cut in CUTS:
        said = [
            a if d["supports"] is None else (SUPPORTS if d["supports"] >= cut else REFUTES)
            for a, d in zip(answers, diagnosis, strict=True)
        ]
        right = Counter(p.source for p, a in zip(claims, said, strict=True) if a == p.label)
        shares = {name: round(right[name] / sizes[name], 3) for name in CLASSES if sizes[name]}
        lowest = min((n for n in shares if sizes[n] > 2), key=shares.__getitem__)
        table[cut_name(cut)] = {"classes": shares, "lowest": lowest, "lowest_share": shares[lowest]}
        if shares[lowest] >= GUARD:
            kept.append(cut)
    table["highest_kept"] = max(kept, default=None)
    return table


def _by_class(
    claims: Sequence[Pair], pipeline: Sequence[str], pairs: Sequence[str]
) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = {}
    for name in CLASSES:
        chosen = [i for i, p in enumerate(claims) if p.source == name]
        if not chosen:
            continue
        expected = claims[chosen[0]].label
        result[name] = {
            "claims": len(chosen),
            "expected": expected,
            "pipeline": round(sum(pipeline[i] == expected for i in chosen) / len(chosen), 3),
            "pair": round(sum(pairs[i] == expected for i in chosen) / len(chosen), 3),
            "answered": dict(Counter(pipeline[i] for i in chosen).most_common()),
        }
    return result


def _misses(
    claims: Sequence[Pair], answers: Sequence[str], diagnosis: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The shipped reader's misses by cause, per class, and the share its own page's evidence
    alone would have answered right; a few examples."""
    result: dict[str, Any] = {}
    for name in CLASSES:
        missed = [i for i, p in enumerate(claims) if p.source == name and answers[i] != p.label]
        if not missed:
            continue
        causes: Counter[str] = Counter()
        for i in missed:
            d = diagnosis[i]
            causes[
                "table route" if d["route"] == "table"
                else "NOT ENOUGH INFO" if answers[i] == "NOT ENOUGH INFO"
                else "lead not retrieved" if not d["lead"]
                else "read wrong, lead in hand"
            ] += 1  # fmt: skip
        own = [diagnosis[i]["own_page_label"] == claims[i].label for i in missed]
        result[name] = {
            "misses": len(missed),
            "causes": dict(causes.most_common()),
            "own_page_alone_right": round(sum(own) / len(missed), 3),
            "examples": [
                {"claim": claims[i].claim, "answer": answers[i], **diagnosis[i]} for i in missed[:3]
            ],
        }
    return result


def _print(figures: dict[str, Any], readers: Sequence[str]) -> None:
    print(f"{'class':<34} " + " ".join(f"{r[:14]:>16}" for r in readers) + "   (pipeline / pair)")
    for name in CLASSES:
        if name not in figures["shipped"]:
            continue
        cells = [figures[r][name] for r in readers]
        print(f"{name:<34} " + " ".join(f"{c['pipeline']:>7.3f} / {c['pair']:.3f}" for c in cells)
              + f"   n={cells[0]['claims']}")  # fmt: skip
    for name, miss in figures["misses"].items():
        print(f"  {name}: {miss['misses']} missed {miss['causes']}, own page alone right "
              f"{miss['own_page_alone_right']:.2f}")  # fmt: skip
    cuts = figures["lean_cuts"]
    print(f"SUPPORTS over an as-read share of (highest the guard keeps: {cuts['highest_kept']}):")
    for cut in map(cut_name, CUTS):
        print(f"  {cut:>4}: lowest {cuts[cut]['lowest']} {cuts[cut]['lowest_share']:.3f}")
