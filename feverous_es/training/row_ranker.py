"""Fine-tuning the row model of the candidate stage's table ranking, and its ONNX export.

The ``papelo`` candidate stage ranks the tables of the whole index, then re-ranks its first
``row_tables`` by adding ``row_weight`` x a cross-encoder's logit for (claim, the table's best
row as plain text) (:func:`feverous_es.retrieve.candidates.rerank_by_rows`). This module trains
that cross-encoder on claims that name their table (``gold_tables``, as TabFact's do):

1. **Row groups.** Each claim's tables are scored as the stage scores them, before the row step
   (``PapeloCandidates.table_scores``); the group is the gold table's best row, then the best
   rows of the first ``negatives`` other tables (*hard negatives*), then ``others`` gold rows
   of other claims, drawn with the seed. A claim whose gold table is not in the pool makes no
   group. Cached in ``<work>/row-groups.jsonl``, one line a claim.
2. **Fine-tuning and export** as for the evidence rankers
   (:func:`feverous_es.training.rerank.fit.train`: cross entropy over the group), into
   ``<out>/rows``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import TrainError
from feverous_es.eval.claims import ClaimRecord
from feverous_es.export import card
from feverous_es.index.element_ids import table_key
from feverous_es.training import datasets
from feverous_es.training.common import check_base
from feverous_es.training.datasets import TrainingClaim
from feverous_es.training.progress import QUIET, Progress
from feverous_es.training.rerank.card import save_ranker_card
from feverous_es.training.rerank.data import Group, draw_distinct
from feverous_es.training.rerank.fit import (
    RunOptions,
    fit_and_export,
    group_metrics,
    training_section,
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


def run(options: RunOptions, progress: Progress = QUIET) -> dict[str, Any] | None:
    """Row pools, groups, fine-tuning, export, held-out metrics and the card; returns the
    report (None when ``progress.stop_after`` interrupted the training). Phases: ``candidates``,
    ``training rows``."""
    options.check()
    settings = options.settings
    check_base(settings.base)
    claims = read_table_claims(options.claims, limit=options.limit, seed=settings.seed)
    pools = collect_row_pools(
        claims, options.index, options.work / GROUPS_FILE, depth=settings.negatives,
        store=options.store, device=options.device, on_progress=progress.counter("candidates"),
    )  # fmt: skip
    train_pools, held_pools = datasets.split(pools, settings.seed, options.holdout)
    sizes = {"negatives": settings.negatives, "others": settings.others, "seed": settings.seed}
    groups = build_row_groups(train_pools, **sizes)
    held = build_row_groups(held_pools, **sizes)
    fitted = fit_and_export(KIND, groups, held, options, progress)
    if fitted is None:
        return None
    out, exported, timing, score = fitted
    found = [p for p in pools if p.gold_rank is not None]
    report: dict[str, Any] = {
        "kind": KIND,
        **options.report(),
        "table_claims": len(pools),
        "gold_table_in_pool": len(found),
        "gold_table_first": sum(p.gold_rank == 0 for p in found),
        "training": training_section(settings, groups, timing),
        "export": exported,
        "holdout_groups": group_metrics(score, held),
        "holdout_hard_groups": hard_group_metrics(score, held),
        "out": str(out),
    }
    write_card(out, report)
    return report


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """What the command prints of the report."""
    return {
        "out": report["out"],
        "holdout_groups": report["holdout_groups"],
        "holdout_hard_groups": report["holdout_hard_groups"],
        "parity_int8_max_abs_diff": report["export"]["parity"]["int8"]["max_abs_diff"],
        "training_seconds": report["training"]["seconds"],
    }


def _metric_row(name: str, metrics: dict[str, Any]) -> str:
    if not metrics.get("groups"):
        return f"| {name} | 0 | | | |"
    return (
        f"| {name} | {metrics['groups']} | {metrics['mrr']:.3f} | {metrics['hits_at_1']:.1%} "
        f"| {metrics['chance_hits_at_1']:.1%} |"
    )


def write_card(out: Path, report: dict[str, Any]) -> None:
    """``README.md`` and ``training.json`` beside the model."""
    training = report["training"]
    held, hard = report["holdout_groups"], report["holdout_hard_groups"]
    # Without other claims' rows a group is its hard negatives: one row says it all.
    hard_row = f"\n{_metric_row('the hard negatives only', hard)}" if training["others"] else ""
    files = ", ".join(f"`{s}`" for s in report["claims"])
    limit = report["claims_per_file"]
    sampled = f"a sample of {limit} claims a file" if limit else "every claim naming its table"
    about = f"""
The cross-encoder of the `papelo` candidate stage's table ranking: it scores (claim, a
table's best row as plain text) for the first `row_tables` tables, and the stage adds
`row_weight` x its logit to each table's score. One output logit; dynamic int8 ONNX,
`model.int8.onnx` ({report["export"]["bytes"] / 1e6:.1f} MB). Use it with

```toml
[options.candidates]
row_model = "{out}"
```"""
    data = f"""
Claims naming their table (`gold_tables`): {files}, {sampled} (seed {training["seed"]}); a
seeded {report["holdout"]:.0%} of them, split by claim id, is held out of training. Of
{report["table_claims"]} claims, the candidate stage's pool holds the gold table for
{report["gold_table_in_pool"]} (first for {report["gold_table_first"]}, before the row step).

Groups: the gold table's best row, the best rows of the {training["negatives"]} best-ranked
other tables (hard negatives), {training["others"]} gold rows of other claims; the loss is the
cross entropy over the group's scores with the gold row as the right class.
{training["groups"]} training groups, {training["hard_negatives"]:.2f} hard negatives each on
average."""
    metrics = f"""| the gold row among | groups | MRR | Hits@1 | Hits@1 at random |
|---|---|---|---|---|
{_metric_row("its whole group", held)}{hard_row}

In the pipeline the logit is one part of a table's score: `python bench/row_ranker.py INDEX
--model {out}` gives gold-table Hits@1/5/10 with it beside the default.

{card.classifier_parity(report["export"]["parity"])}"""
    heading = "Metrics (held-out claims, this int8 model)"
    save_ranker_card(out, report, "feverous-es row ranker", about, data, (heading, metrics))
