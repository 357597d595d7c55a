"""The reader's failure classes, measured on held-out contrastive claims made from the dump
(``feverous_es.training.contrastive``: the split ``train verdict --contrastive`` uses with the
same seed, holdout and pages): a page's lead as a claim (SUPPORTS), the same with one attribute
taken from another page (REFUTES, per kind: nationality, number, description), and the changed
claim against other subjects' sentences (NOT ENOUGH INFO); and the harder classes of
``feverous_es.training.attributes``, both ways: a person's nationality, profession (the
nationality kept) and a year, each true (SUPPORTS) and changed (REFUTES). Each verdict model
reads every pair alone (``EntailmentModel``, no retrieval); the figures are each class's recall
and where its misses went. With ``--held-out-pairs WORK/pairs.jsonl.gz`` (a ``train verdict``
run's pairs), the models also read that run's held-out pairs (the claims with their retrieved
evidence, as is and gold removed, the gold tables), so models are compared on the same
premises.

    python bench/contrastive.py wiki.db [--model NAME|DIR …] [--commit REV …]
                                        [--held-out-pairs PAIRS] --record NAME
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from pathlib import Path
from typing import Any

from data import models_at  # bench/data.py
from results import bench_parser, record_if_asked  # bench/results.py

from feverous_es.index.dump.wiki import WikiDB
from feverous_es.training.attributes import CLASSES, attribute_pairs
from feverous_es.training.contrastive import SOURCES, contrastive_pairs, read_leads
from feverous_es.training.entailment_data import Split, read_pairs
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


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("wiki_db", type=Path)
    parser.add_argument(
        "--model", action="append", default=[],
        help="a verdict model to compare: a reader's name (large) or a directory (repeat)",
    )  # fmt: skip
    parser.add_argument(
        "--commit", action="append", default=[],
        help="the package's verdict model at this git commit, to compare (repeat)",
    )  # fmt: skip
    parser.add_argument("--pages", type=int, default=4000, help="as --contrastive-pages")
    parser.add_argument("--holdout", type=float, default=0.35, help="as train verdict's")
    parser.add_argument("--seed", type=int, default=13, help="as train verdict's")
    parser.add_argument("--held-out-pairs", type=Path, help="a train verdict run's pairs.jsonl.gz")
    args = parser.parse_args()
    split = Split(args.seed, args.holdout, 0)
    leads = read_leads(WikiDB(args.wiki_db).rows())
    pairs = [*contrastive_pairs(leads, args.pages, split), *attribute_pairs(leads, split)]
    held = [p for p in pairs if p.held_out]
    if args.held_out_pairs:  # the run's own contrastive pairs are the ones made above
        run_pairs = read_pairs(args.held_out_pairs)
        held += [p for p in run_pairs if p.held_out and p.train and p.source not in SOURCES]
    figures: dict[str, Any] = {"held_out_pairs": dict(Counter(p.source for p in held))}
    with contextlib.ExitStack() as stack:
        models: dict[str, str | Path | None] = {"shipped": None, **{m: m for m in args.model}}
        for commit in args.commit:
            models[commit] = stack.enter_context(models_at(commit)) / "verdict"
        for name, model in models.items():  # the shipped model first
            figures[name] = report(name, measure(model, held))
    record_if_asked(args, figures)


def report(name: str, figures: dict[str, Any]) -> dict[str, Any]:
    print(name)
    for source, row in figures.items():
        if isinstance(row, dict) and "recall" in row:
            print(f"  {source:<32} recall {row['recall']:.3f}  answered {row['answered']}")
        elif isinstance(row, dict):
            print(f"  {source:<32} accuracy {row['accuracy']:.3f}  ({row['pairs']} pairs)")
    return figures


if __name__ == "__main__":
    main()
