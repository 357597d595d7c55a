"""The row ranker's training data: claims naming their table, the candidate stage's table pools,
and the row groups (the gold table's best row, hard negatives, other claims' gold rows)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import TrainError
from feverous_es.eval.claims import ClaimRecord
from feverous_es.index.element_ids import table_key
from feverous_es.training import datasets
from feverous_es.training.datasets import TrainingClaim
from feverous_es.training.rerank.data import Group, draw_distinct
from feverous_es.training.rerank.fit import (
    group_metrics,
)

KIND = "rows"


GROUPS_FILE = "row-groups.jsonl"


def read_table_claims(
    paths: Sequence[Path], *, limit: int | None = None, seed: int = 13
) -> list[TrainingClaim]:
    """The claims that name a gold table (``table``), any label; with ``limit``, a seeded sample
    of that many per file."""

    def make(source: str, record: ClaimRecord) -> TrainingClaim | None:
        if not record.gold_tables or table_key(record.gold_tables[0]) is None:
            return None
        return TrainingClaim(
            source, str(record.id), record.claim, record.label or "", record.gold_tables[0]
        )

    return datasets.sampled_claims(
        paths, make, limit=limit, seed=seed, wanted="claims that name gold_tables"
    )


@dataclass
class RowPool:
    """One claim's rows as the row step reads them: the gold table's best row (None when the
    gold table is not in the pool), the best rows of the other tables in ranking order, and
    where the gold table ranked before the row step."""

    source: str
    id: str
    claim: str
    gold_rank: int | None
    gold_row: str | None
    rows: list[str]


def collect_row_pools(
    claims: Sequence[TrainingClaim],
    index: Path,
    cache: Path,
    *,
    depth: int,
    store: str = "embedded",
    device: str = "cpu",
    on_progress: Callable[[int, int], None] | None = None,
) -> list[RowPool]:
    """Each claim's :class:`RowPool` (``depth`` negative rows at most), from ``cache`` when it
    holds it, else from the candidate stage over ``index`` and appended to ``cache``."""
    from feverous_es.plugins.interfaces import Query
    from feverous_es.retrieve.candidates import PapeloCandidates
    from feverous_es.retrieve.table_scores import best_cells, row_texts

    def make(pipeline: Any, chunk: Sequence[TrainingClaim]) -> list[RowPool]:
        stage = pipeline.candidates
        if not isinstance(stage, PapeloCandidates):
            raise TrainError("the row model trains on the papelo candidate stage's tables")
        # Tables are ranked by their text alone: the claim's vector is not needed.
        no_vector = np.zeros(pipeline.context.store.dim, dtype=np.float32)
        pools = []
        for claim in chunk:
            scores, hits = stage.table_scores(Query(claim.claim, no_vector))
            ranked = sorted(scores, key=lambda key: scores[key], reverse=True)
            best = best_cells(hits)
            ranked = [table for table in ranked if table in best]
            key = table_key(claim.table)
            gold = ranked.index(key) if key in ranked else None
            negatives = [other for other in ranked if other != key][:depth]
            read = negatives + ([key] if gold is not None and key is not None else [])
            rows = row_texts(pipeline.context.store, best, read)
            others = [rows[other] for other in negatives if other in rows]
            gold_row = rows.get(key) if gold is not None and key is not None else None
            pools.append(RowPool(claim.source, claim.id, claim.claim, gold, gold_row, others))
        return pools

    def pipeline() -> Any:
        return datasets.retrieval_pipeline(index, store=store, hops=0, device=device)

    return datasets.collect_cached(claims, cache, RowPool, pipeline, make, on_progress=on_progress)


def build_row_groups(
    pools: Sequence[RowPool], *, negatives: int = 4, others: int = 2, seed: int = 13
) -> list[Group]:
    """A group per pool that found its gold table: its gold row, the ``negatives`` best rows of
    other tables, ``others`` gold rows of other claims (never the claim's own)."""
    golds = [p.gold_row for p in pools if p.gold_row is not None]
    groups = []
    for pool in pools:
        if pool.gold_row is None:
            continue
        hard = [row for row in pool.rows if row != pool.gold_row][:negatives]
        rng = random.Random(f"{seed}\0{KIND}\0{pool.source}\0{pool.id}")
        drawn = draw_distinct(rng, golds, {pool.gold_row, *hard}, others)
        texts = (pool.gold_row, *hard, *drawn)
        if len(texts) < 2:
            continue
        ids = tuple(str(i) for i in range(len(texts)))
        groups.append(Group(pool.source, pool.id, pool.claim, ids, texts, len(hard)))
    return groups


def hard_group_metrics(
    score: Callable[[list[tuple[str, str]]], np.ndarray], groups: Sequence[Group]
) -> dict[str, float]:
    """Hits@1 of the gold row among its group's hard negatives only (the tables that outrank
    or follow it in the pool), by this model alone."""
    hard = [Group(g.source, g.claim_id, g.claim, g.ids[: g.hard + 1], g.texts[: g.hard + 1], g.hard)
            for g in groups if g.hard]  # fmt: skip
    return group_metrics(score, hard)
