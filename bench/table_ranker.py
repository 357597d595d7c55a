"""A learned table ranking against the hand-weighted table score: gold-table Hits@1/5/10.

    python bench/table_ranker.py INDEX [--train 2000] [--test 1000] [--seed 303] [--json OUT]

The first step of learning the ranking itself (issue 33): every pool table of a claim gets the
features the candidate stage already computes (``table_parts``' eight parts, the hand-weighted
score, its rank and gap to the best, the table's raw best-row and whole-table BM25, how many of
its elements and rows the claim's terms hit), and a gradient-boosted classifier (scikit-learn,
pointwise: is this the claim's table?) is fitted on ``--train`` claims of ``tabfact_train`` and
ranks the pool of ``--test`` claims of ``tabfact_dev`` (drawn with ``--seed``: 303 is the draw
`bench/row_ranker.py` reports, used for no tuning). Printed side by side: the stage's order and
the learned one, and the share of claims whose gold table is in the pool at all (the ceiling of
any re-ranking). Nothing here changes the pipeline.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from results import add_record_option, save_figures  # bench/results.py
from row_ranker import HITS_AT, MINI, gold_table, print_hits, read_claims  # bench/row_ranker.py

from feverous_es.index.backends import open_store
from feverous_es.index.store import CellHit, TableKey
from feverous_es.plugins.interfaces import PluginContext, Query
from feverous_es.retrieve.candidates import PapeloCandidates
from feverous_es.retrieve.table_scores import table_parts


def pool_features(stage: PapeloCandidates, claim: str) -> tuple[list[TableKey], np.ndarray]:
    """The pool's tables in the stage's own order, one feature row each."""
    no_vector = np.zeros(stage.store.dim, dtype=np.float32)
    scores, hits = stage.table_scores(Query(claim, no_vector), [])
    whole = dict(stage.store.search_tables(claim, len(scores), list(scores))) if scores else {}
    parts = table_parts(claim, hits, stage.terms, whole)
    by_table: dict[TableKey, list[CellHit]] = defaultdict(list)
    for hit in hits:
        by_table[hit.key].append(hit)
    ranked = sorted(scores, key=lambda key: scores[key], reverse=True)
    best = scores[ranked[0]] if ranked else 0.0
    rows = []
    for rank, key in enumerate(ranked):
        table_hits = by_table[key]
        rows.append(
            [
                *parts[key].values(),
                scores[key],
                float(rank),
                best - scores[key],
                max((h.score for h in table_hits), default=0.0),
                whole.get(key, 0.0),
                float(len(table_hits)),
                float(len({h.row for h in table_hits})),
                float(len(claim.split())),
            ]
        )
    features = np.asarray(rows, dtype=np.float32).reshape(len(ranked), -1)
    return ranked, features


def collect(stage: PapeloCandidates, records: list[dict[str, Any]], what: str) -> list[tuple]:
    out = []
    started = time.perf_counter()
    for done, record in enumerate(records, 1):
        tables, features = pool_features(stage, record["claim"])
        out.append((gold_table(record), tables, features))
        if done % 250 == 0:
            each = (time.perf_counter() - started) / done
            print(f"{what}: {done}/{len(records)} claims, {each:.2f} s each", file=sys.stderr)
    return out


def hits_at(orders: list[list[TableKey]], golds: list[TableKey | None]) -> dict[str, float]:
    found = {at: sum(g in o[:at] for o, g in zip(orders, golds, strict=True)) for at in HITS_AT}
    return {str(at): round(100 * n / len(golds), 1) for at, n in found.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", help="embedded index of the mini-FEVEROUS wiki.db")
    parser.add_argument("--train", type=int, default=2000, help="tabfact_train claims fitted on")
    parser.add_argument("--test", type=int, default=1000, help="tabfact_dev claims measured")
    parser.add_argument("--seed", type=int, default=303, help="the draw of the test claims")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    add_record_option(parser)
    args = parser.parse_args()
    from sklearn.ensemble import HistGradientBoostingClassifier

    store = open_store("embedded", args.index)
    stage = PapeloCandidates(PluginContext(store, lambda texts: np.zeros((len(texts), 384)), "cpu"))
    train = collect(stage, read_claims(MINI / "tabfact_train.jsonl", args.train, 1, set()), "train")
    test = collect(
        stage, read_claims(MINI / "tabfact_dev.jsonl", args.test, args.seed, set()), "test"
    )
    x = np.concatenate([f for _, _, f in train])
    y = np.concatenate([[t == gold for t in tables] for gold, tables, _ in train])
    model = HistGradientBoostingClassifier(max_iter=300, learning_rate=0.05, max_depth=4)
    model.fit(x, y)
    learned = []
    for _, tables, features in test:
        if not tables:
            learned.append([])
            continue
        p = model.predict_proba(features)[:, 1]
        learned.append([tables[i] for i in np.argsort(-p, kind="stable")])
    golds = [gold for gold, _, _ in test]
    report = {
        "train_claims": len(train),
        "test_claims": len(test),
        "seed": args.seed,
        "gold_in_pool": round(100 * sum(g in t for g, t, _ in test) / len(test), 1),
        "hits": {
            "stage order (no row step)": hits_at([t for _, t, _ in test], golds),
            "learned (pointwise gradient boosting)": hits_at(learned, golds),
        },
    }
    print_hits(
        f"gold-table Hits@1 / 5 / 10, {len(test)} tabfact_dev claims (seed {args.seed}):",
        report["hits"],
    )
    print(f"  gold table in the pool: {report['gold_in_pool']:.1f} %")
    save_figures(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
