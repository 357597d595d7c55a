"""The reader's failure classes, measured on held-out contrastive claims made from the dump
(``feverous_es.training.verdict.contrastive``: the split ``train verdict --contrastive`` uses with
the same seed, holdout and pages): a page's lead as a claim (SUPPORTS), the same with one attribute
taken from another page (REFUTES, per kind: nationality, number, description), and the changed claim
against other subjects' sentences (NOT ENOUGH INFO); and the harder classes of
``feverous_es.training.verdict.attributes``, both ways: a person's nationality, profession (the
nationality kept) and a year, each true (SUPPORTS) and changed (REFUTES). Each verdict model reads
every pair alone (``EntailmentModel``, no retrieval); the figures are each class's recall and where
its misses went. With ``held_out_pairs = true``, the models also read the held-out pairs of the
``train verdict`` run the driver's ``--pairs`` names (the claims with their retrieved evidence, as
is and gold removed, the gold tables), so models are compared on the same premises.

    run = "bench.contrastive:failure_classes"   # on the mini dump (--wiki); options: models,
    # commits, pages, holdout, seed, held_out_pairs
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.context import Context
from bench.data import models_at
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.training.verdict.attributes import CLASSES, attribute_pairs
from feverous_es.training.verdict.contrastive import SOURCES, contrastive_pairs, read_leads
from feverous_es.training.verdict.entailment_data import Split, read_pairs
from feverous_es.verdict.entailment import EntailmentModel


def measure(reader: str | Path | None, pairs: list[Any]) -> dict[str, Any]:
    model = EntailmentModel(reader, device="cpu")
    started = time.perf_counter()
    rows = model.probabilities([p.claim for p in pairs], [p.premise for p in pairs])
    seconds = time.perf_counter() - started
    by_source: dict[str, Counter[str]] = {}
    right: Counter[str] = Counter()
    for pair, row in zip(pairs, rows, strict=True):
        name = pair.measured_as
        answer = model.labels[int(row.argmax())].value
        by_source.setdefault(name, Counter())[answer] += 1
        right[name] += answer == pair.label
    result: dict[str, Any] = {"ms_per_pair": round(1000 * seconds / len(pairs), 1)}
    for source, answers in sorted(by_source.items()):
        total = sum(answers.values())
        if source in SOURCES or source in CLASSES:  # one label: its recall, where misses went
            label = next(p.label for p in pairs if p.source == source)
            result[source] = {"pairs": total, "expected": label,
                              "recall": round(answers[label] / total, 3),
                              "answered": dict(answers.most_common())}  # fmt: skip
        else:
            result[source] = {"pairs": total, "accuracy": round(right[source] / total, 3)}
    return result


def failure_classes(
    context: Context,
    *,
    models: Sequence[str] = (),
    commits: Sequence[str] = (),
    pages: int = 4000,
    holdout: float = 0.35,
    seed: int = 13,
    held_out_pairs: bool = False,
) -> dict[str, Any]:
    """Each class's recall for the shipped reader and each of ``models`` (a reader's name, e.g.
    large, or a directory) and the package's reader at each of ``commits``; ``pages``,
    ``holdout`` and ``seed`` as ``train verdict --contrastive`` takes them."""
    split = Split(seed, holdout)
    leads = read_leads(WikiDB(context.place("wiki")).rows())
    pairs = [*contrastive_pairs(leads, pages, split), *attribute_pairs(leads, split)]
    held = [p for p in pairs if p.held_out]
    if held_out_pairs:  # the run's own contrastive pairs are the ones made above
        run_pairs = read_pairs(context.place("pairs"))
        held += [p for p in run_pairs if p.held_out and p.train and p.source not in SOURCES]
    figures: dict[str, Any] = {"held_out_pairs": dict(Counter(p.source for p in held))}
    with contextlib.ExitStack() as stack:
        readers: dict[str, str | Path | None] = {"shipped": None, **{m: m for m in models}}
        for commit in commits:
            readers[commit] = stack.enter_context(models_at(commit)) / "verdict"
        for name, model in readers.items():  # the shipped model first
            figures[name] = report(name, measure(model, held))
    return figures


def report(name: str, figures: dict[str, Any]) -> dict[str, Any]:
    print(name)
    for source, row in figures.items():
        if isinstance(row, dict) and "recall" in row:
            print(f"  {source:<32} recall {row['recall']:.3f}  answered {row['answered']}")
        elif isinstance(row, dict):
            print(f"  {source:<32} accuracy {row['accuracy']:.3f}  ({row['pairs']} pairs)")
    return figures
