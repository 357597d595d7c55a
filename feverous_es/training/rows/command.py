"""The row ranker's training run: pools, groups, fine-tuning and export (as the evidence rankers'),
held-out metrics, the card."""

from __future__ import annotations

from typing import Any

from feverous_es.training import datasets
from feverous_es.training.common import check_base
from feverous_es.training.progress import QUIET, Progress
from feverous_es.training.rerank.fit import (
    fit_and_export,
    group_metrics,
    training_section,
)
from feverous_es.training.rerank.options import RunOptions
from feverous_es.training.rows.card import write_card
from feverous_es.training.rows.data import (
    GROUPS_FILE,
    KIND,
    build_row_groups,
    collect_row_pools,
    hard_group_metrics,
    read_table_claims,
)


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
