"""Which premise the sentence route's reader reads: the whole evidence joined (the rule until
2026-11-28), a page's evidence alone, or the mean of several readings; each rule with the same
reader on the same retrieved evidence, for held-out FM2 and FEVEROUS-S claims and for the
held-out claims of the contrast classes (:mod:`bench.pipeline_contrast`).

    run = "bench.premises:premise_rules"   # needs --pairs (its WORK/evidence.jsonl: the
    # claims' retrieved evidence), --index and --wiki; options: readers, per_class

Only the S/R decision is compared (the likelier of SUPPORTS and REFUTES under each rule), on
every claim whatever route the verdict would take: the rule is the sentence route's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.context import Context
from bench.pipeline_contrast import held_out_claims
from feverous_es.training.datasets import is_holdout
from feverous_es.training.retrieved import read_retrieved

FILES = ("fm2_dev", "feverous_s_dev")
Reading = dict[str, np.ndarray]  # a claim's readings: "whole", "page0", "page1", ...


def _mean(*names: str) -> Callable[[Reading], np.ndarray]:
    return lambda r: np.mean([r[n] for n in names if n in r], axis=0)


def _pages(r: Reading) -> list[np.ndarray]:
    return [v for k, v in r.items() if k.startswith("page")]


# name -> the row a rule decides on
RULES: dict[str, Callable[[Reading], np.ndarray]] = {
    "whole evidence (page_premises 0)": lambda r: r["whole"],
    "first page alone": lambda r: r.get("page0", r["whole"]),
    "mean of whole and first page (page_premises 1)": _mean("whole", "page0"),
    "mean of whole and two pages (page_premises 2)": _mean("whole", "page0", "page1"),
    "mean of whole and every page": lambda r: np.mean([r["whole"], *_pages(r)], axis=0),
}


def retrieved_items(context: Context, per_class: int) -> list[tuple[str, str, str, list[Any]]]:
    """(source, claim, label, evidence) of the held-out claims: the files' from the run's
    evidence cache, the contrast classes' retrieved here."""
    from feverous_es.verify.pipeline import Pipeline

    items = []
    for e in read_retrieved(context.place("pairs").parent / "evidence.jsonl").values():
        if e.source in FILES and is_holdout(13, e.source, str(e.id), 0.35):
            items.append((e.source, e.claim, e.label, e.evidence_candidates()))
    claims = held_out_claims(
        context.place("wiki"), per_class=per_class, pages=4000, holdout=0.35, seed=13
    )
    with Pipeline.open(context.place("index")) as pipeline:
        for start in range(0, len(claims), 16):
            chunk = claims[start : start + 16]
            found = pipeline.retrieve_many([p.claim for p in chunk])
            items += [(p.source, p.claim, p.label, list(r.evidence))
                      for p, r in zip(chunk, found, strict=True)]  # fmt: skip
    return items


def readings(reader: str | None, items: Sequence[tuple[str, str, str, list[Any]]]) -> list[Reading]:
    """Each claim read against its whole evidence and against each page's sentences alone."""
    from feverous_es.plugins.interfaces import Label
    from feverous_es.verdict.entailment import EntailmentModel
    from feverous_es.verdict.inputs import sentence_premise
    from feverous_es.verdict.premises import page_premises

    model = EntailmentModel(reader, device="cpu")
    pairs, keys = [], []
    for n, (_, claim, _, evidence) in enumerate(items):
        texts = {"whole": sentence_premise(evidence)}
        texts.update({f"page{k}": t for k, t in enumerate(page_premises(claim, evidence, 99))})
        for name, text in texts.items():
            pairs.append((claim, text))
            keys.append((n, name))
    rows = model.probabilities([c for c, _ in pairs], [t for _, t in pairs])
    # the rules compare SUPPORTS and REFUTES only: those two, in that order
    order = [model.labels.index(label) for label in (Label.SUPPORTS, Label.REFUTES)]
    read: list[Reading] = [{} for _ in items]
    for (n, name), row in zip(keys, rows, strict=True):
        read[n][name] = row[order]
    return read


def premise_rules(
    context: Context, *, readers: Sequence[str] = ("default",), per_class: int = 40
) -> dict[str, Any]:
    """Each rule's accuracy per source (files, contrast classes), for each reader."""
    items = retrieved_items(context, per_class)
    figures: dict[str, Any] = {}
    for reader in readers:
        read = readings(reader, items)
        table: dict[str, dict[str, float]] = defaultdict(dict)
        for rule, row_of in RULES.items():
            right: dict[str, list[bool]] = defaultdict(list)
            for (source, _, label, _), r in zip(items, read, strict=True):
                if label in ("SUPPORTS", "REFUTES"):
                    answer = "SUPPORTS" if row_of(r)[0] >= row_of(r)[1] else "REFUTES"
                    right[source].append(answer == label)
            for source, marks in right.items():
                table[source][rule] = round(float(np.mean(marks)), 4)
            classes = [s for s in right if s not in FILES and len(right[s]) >= 10]
            table["contrast classes, mean"][rule] = round(
                float(np.mean([table[s][rule] for s in classes])), 4
            )
            table["contrast classes, lowest"][rule] = min(table[s][rule] for s in classes)
        figures[reader] = dict(table)
        _print(reader, table)
    sources = dict.fromkeys(source for source, *_ in items)
    figures["claims"] = {s: sum(i[0] == s for i in items) for s in sources}
    return figures


def _print(reader: str, table: dict[str, dict[str, float]]) -> None:
    print(f"reader {reader}")
    names = list(RULES)
    for i, name in enumerate(names):
        print(f"  ({i + 1}) {name}")
    print(f"  {'source':<34}" + "".join(f"{f'({i + 1})':>8}" for i in range(len(names))))
    for source, row in table.items():
        print(f"  {source:<34}" + "".join(f"{row[n]:>8.3f}" for n in names))
