"""Learned table rankings against the hand-weighted table score: gold-table Hits@1/5/10.

    run = "bench.table_ranker:table_rankers"   # on the mini index (--index); options: train,
    # test, seed, union

Learning the ranking itself (issue 33). Each claim's pool is the candidate stage's (the tables of
the best 2,000 cell hits, first 50) plus the best ``union`` tables by whole-table BM25 over all
tables that it lacks; every pool table gets a feature row:

* base: what the stage already computes (``table_parts``' parts, the hand-weighted score, its
  rank and gap to the best, the raw best-row and whole-table BM25, how many of the table's
  elements and rows the claim's terms hit, the claim's length);
* extended: the table's place on its page, its rank among the cell hits' tables and among all
  tables by whole-table BM25, the cosine of the claim to its page's vector, its page's BM25
  (title and lead), the share of the claim's terms among its header cells.

Fitted on ``train`` claims of ``tabfact_train``: a pointwise gradient-boosted classifier
(scikit-learn) on the base features, and LambdaMART (LightGBM's ``lambdarank``) on the base and
on all features. Measured on two sets: ``tabfact_train`` claims of tables that no fitted claim
has (a sixth of the drawn claims' tables, held out whole: claims of one table share its
features, so a claim-level split lets a ranker learn the tables), and ``test`` claims of
``tabfact_dev`` drawn with ``seed`` (303: the draw docs/log/table-retrieval-2026-11.md
reports, used for no tuning). The share of claims whose gold table is in the pool bounds any
re-ranking. Nothing here changes the pipeline. Needs ``pip install lightgbm``.
"""

from __future__ import annotations

import random
import sys
import time
from collections import defaultdict
from typing import Any

import numpy as np

from bench.context import Context
from bench.data import MINI
from bench.ranking import HITS_AT, hits_at, print_hits
from feverous_es.eval.samples import gold_table, table_claims
from feverous_es.index.backends import open_store
from feverous_es.index.elements import TABLE_CELL_TYPES, TABLE_TYPES, ElementType
from feverous_es.index.store import CellHit, Filters, TableKey
from feverous_es.plugins.interfaces import PluginContext
from feverous_es.retrieve.candidates import PapeloCandidates
from feverous_es.retrieve.table_scores import table_parts
from feverous_es.runtime.embedder import Embedder

BASE = [
    "row",
    "terms",
    "idf_terms",
    "bigrams",
    "numbers",
    "title",
    "cell_spans",
    "row_spans",
    "table_bm25",
    "score",
    "rank",
    "gap",
    "best_row_bm25",
    "whole_bm25",
    "element_hits",
    "row_hits",
    "claim_words",
]
EXTENDED = [
    "table_index",
    "cell_pool_rank",
    "whole_rank",
    "page_cosine",
    "page_bm25",
    "header_terms",
]
_UNRANKED = 200.0  # the rank given a table beyond the searched depth


def pool_features(
    stage: PapeloCandidates, embedder: Embedder, claim: str, union: int
) -> tuple[list[TableKey], np.ndarray]:
    """The claim's pool in the hand-weighted order, one row of ``BASE + EXTENDED`` each."""
    store = stage.store
    cell_pool = store.search_cell_tables(
        claim, stage.options.cell_depth, Filters(types=TABLE_CELL_TYPES)
    )[: stage.options.table_pool]
    whole_ranked = store.search_tables(claim, int(_UNRANKED))
    pool = cell_pool + [key for key, _ in whole_ranked[:union] if key not in cell_pool]
    if not pool:
        return [], np.zeros((0, len(BASE) + len(EXTENDED)), dtype=np.float32)
    hits = store.search_cells(
        claim, stage.options.fetch_limit + 2000, Filters(types=TABLE_TYPES, tables=tuple(pool))
    )
    whole = dict(store.search_tables(claim, len(pool), pool))
    parts = table_parts(claim, hits, stage.terms, whole)
    scores = {key: stage.options.weights.score(table) for key, table in parts.items()}
    ranked = sorted(scores, key=lambda key: scores[key], reverse=True)
    vector = embedder.embed([claim])[0]
    page_cosine = {hit.page.title: hit.score for hit in store.search_pages_vector(vector, 3000)}
    page_bm25 = {hit.page.title: hit.score for hit in store.search_pages_text(claim, 300)}
    cell_rank = {key: float(i) for i, key in enumerate(cell_pool)}
    whole_rank = {key: float(i) for i, (key, _) in enumerate(whole_ranked)}
    claim_terms = set(stage.terms(claim))
    by_table: dict[TableKey, list[CellHit]] = defaultdict(list)
    for hit in hits:
        by_table[hit.key].append(hit)
    best = scores[ranked[0]]
    rows = []
    for rank, key in enumerate(ranked):
        table_hits = by_table[key]
        header = set()
        for hit in table_hits:
            if hit.type is ElementType.HEADER_CELL:
                header |= claim_terms.intersection(stage.terms(hit.text))
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
                float(key[1]),
                cell_rank.get(key, _UNRANKED),
                whole_rank.get(key, _UNRANKED),
                page_cosine.get(key[0], 0.0),
                page_bm25.get(key[0], 0.0),
                len(header) / max(1, len(claim_terms)),
            ]
        )
    return ranked, np.asarray(rows, dtype=np.float32)


Pools = list[tuple[TableKey, list[TableKey], np.ndarray]]


def collect(
    stage: PapeloCandidates, embedder: Embedder, records: list[dict[str, Any]], union: int,
    what: str,
) -> Pools:  # fmt: skip
    out = []
    started = time.perf_counter()
    for done, record in enumerate(records, 1):
        tables, features = pool_features(stage, embedder, record["claim"], union)
        out.append((gold_table(record), tables, features))
        if done % 250 == 0:
            each = (time.perf_counter() - started) / done
            print(f"{what}: {done}/{len(records)} claims, {each:.2f} s each", file=sys.stderr)
    return out


def fit_arrays(pools: Pools, columns: list[int]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Features, labels and group sizes of the claims whose gold table is in their pool."""
    kept = [(gold, tables, f) for gold, tables, f in pools if gold in tables]
    x = np.concatenate([f[:, columns] for _, _, f in kept])
    y = np.concatenate([[int(t == gold) for t in tables] for gold, tables, _ in kept])
    return x, y, [len(tables) for _, tables, _ in kept]


def pool_hits(pools: Pools, score: Any, columns: list[int]) -> dict[str, float]:
    """Hits@k of the gold table when each pool is sorted by ``score(features)``, best first."""
    found = dict.fromkeys(HITS_AT, 0)
    for gold, tables, features in pools:
        if not tables:
            continue
        order = np.argsort(-score(features[:, columns]), kind="stable")
        for at, hit in hits_at([tables[i] for i in order], gold).items():
            found[at] += hit
    return {str(at): round(100 * n / len(pools), 1) for at, n in found.items()}


def table_rankers(
    context: Context,
    *,
    train: int = 5000,
    test: int = 1000,
    seed: int = 303,
    union: int = 50,
) -> dict[str, Any]:
    """Each ranker's gold-table Hits@1/5/10 on held-out train tables and ``test`` dev claims
    drawn with ``seed``, fitted on ``train`` claims; ``union`` whole-table BM25 tables added."""
    import lightgbm
    from sklearn.ensemble import HistGradientBoostingClassifier

    store = open_store("embedded", str(context.place("index")))
    stage = PapeloCandidates(PluginContext(store, None, "cpu"))
    embedder = Embedder()
    drawn = collect(
        stage, embedder, table_claims(MINI / "tabfact_train.jsonl", train, 1),
        union, "train",
    )  # fmt: skip
    tables = sorted({gold for gold, _, _ in drawn})
    random.Random(0).shuffle(tables)
    held_tables = set(tables[: len(tables) // 6])
    fitted = [p for p in drawn if p[0] not in held_tables]
    held = [p for p in drawn if p[0] in held_tables]
    dev_pools = collect(
        stage, embedder, table_claims(MINI / "tabfact_dev.jsonl", test, seed),
        union, "test",
    )  # fmt: skip
    names = BASE + EXTENDED
    base = [names.index(n) for n in BASE]
    every = list(range(len(names)))
    rankers: dict[str, tuple[Any, list[int]]] = {"hand-weighted score": (None, every)}
    x, y, _ = fit_arrays(fitted, base)
    pointwise = HistGradientBoostingClassifier(max_iter=300, learning_rate=0.05, max_depth=4)
    rankers["pointwise, base features"] = (pointwise.fit(x, y), base)
    for label, columns in (("base", base), ("all", every)):
        x, y, groups = fit_arrays(fitted, columns)
        model = lightgbm.LGBMRanker(
            objective="lambdarank", n_estimators=200, learning_rate=0.03, num_leaves=7,
            min_child_samples=50, verbose=-1,
        )  # fmt: skip
        rankers[f"LambdaMART, {label} features"] = (model.fit(x, y, group=groups), columns)

    def scorer(model: Any) -> Any:
        if model is None:
            return lambda f: -f[:, names.index("rank")]
        if hasattr(model, "predict_proba"):
            return lambda f: model.predict_proba(f)[:, 1]
        return model.predict

    report: dict[str, Any] = {
        "train_claims": len(fitted),
        "union": union,
        "seed": seed,
        "features": {"base": BASE, "extended": EXTENDED},
    }
    for what, pools in (("held-out train tables", held), ("tabfact_dev", dev_pools)):
        hits = {name: pool_hits(pools, scorer(m), cols) for name, (m, cols) in rankers.items()}
        in_pool = round(100 * sum(gold in tables for gold, tables, _ in pools) / len(pools), 1)
        report[what] = {"claims": len(pools), "gold_in_pool": in_pool, "hits": hits}
        print_hits(f"gold-table Hits@1 / 5 / 10, {len(pools)} claims, {what}:", hits)
        print(f"  gold table in the pool: {in_pool:.1f} %")
    return report
