"""The claims the entailment verdict trains on, and the evidence the pipeline retrieves for them
(a verdict learns from the evidence it will be given: Malon 2021, §5)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from feverous_es.eval.claims import LABELS
from feverous_es.plugins.config import DEFAULT_PLUGINS
from feverous_es.training import datasets
from feverous_es.training.datasets import TrainingClaim
from feverous_es.training.retrieved import Retrieved, collect_retrieved


def read_labelled_claims(
    paths: Sequence[Path], *, limit: int | None = None, seed: int = 13
) -> list[TrainingClaim]:
    """Every labelled claim in the files; with ``limit``, a seeded sample of that many per file
    (the same claims on every run). ``gold``: every element of every gold set, as written."""

    def make(source: str, record: Any) -> TrainingClaim | None:
        if record.label not in LABELS:
            return None
        gold = tuple(dict.fromkeys(e for group in record.evidence for e in group))
        table = (record.gold_tables or ("",))[0]
        return TrainingClaim(source, str(record.id), record.claim, record.label, table, gold)

    return datasets.sampled_claims(
        paths, make, limit=limit, seed=seed, wanted="SUPPORTS / REFUTES / NEI claims"
    )


def collect_evidence(
    claims: Sequence[TrainingClaim],
    index: Path,
    cache: Path,
    *,
    store: str = "embedded",
    reranker: str = DEFAULT_PLUGINS["reranker"],
    hops: int | None = None,
    device: str = "cpu",
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Retrieved]:
    """Each claim's evidence as ``verify`` retrieves it (the pipeline's reranker and next hops by
    default: a verdict learns from the evidence it will be given), cached in ``cache``; in the
    order of ``claims``. Only the evidence is kept: the verdict reads nothing else."""
    return collect_retrieved(
        claims, index, cache, store=store, reranker=reranker, hops=hops, first_round=False,
        device=device, on_progress=on_progress,
    )  # fmt: skip
