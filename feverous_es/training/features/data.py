"""The table feature verdict's data: the claims, their features against the gold table or the
table of their retrieved evidence."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import TrainError
from feverous_es.index.element_ids import element_to_triple
from feverous_es.retrieve.evidence_tables import with_tables
from feverous_es.training import datasets
from feverous_es.training.datasets import TrainingClaim
from feverous_es.training.features.fit import LABELS
from feverous_es.training.features.options import RunOptions
from feverous_es.training.rerank.data import index_id
from feverous_es.verdict import table_facts
from feverous_es.verdict.feature_model import (
    FEATURES,
    first_table,
)
from feverous_es.verdict.table_facts import Table


def read_claims(
    paths: Sequence[Path], *, tables: bool, limit: int | None = None, seed: int = 13
) -> list[TrainingClaim]:
    """The SUPPORTS / REFUTES claims of the files (with ``tables``, those that name a gold
    table); with ``limit``, a seeded sample of that many per file."""
    chosen: list[TrainingClaim] = []
    for path in paths:
        source = Path(path).stem
        rows = [
            TrainingClaim(source, str(r.id), r.claim, r.label, (r.gold_tables or ("",))[0])
            for r in datasets.claim_records(Path(path))
            if r.label in LABELS and (r.gold_tables or not tables)
        ]
        if not rows:
            named = " that name gold_tables" if tables else ""
            raise TrainError(f"{path} has no SUPPORTS / REFUTES claims{named}")
        chosen += datasets.sample(rows, limit, seed, key=lambda r: (r.source, r.id))
    return chosen


def gold_features(
    claims: Sequence[TrainingClaim],
    store: Any,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, list[TrainingClaim]]:
    """The features of each claim against its gold table, and the claims they are for (a claim
    whose table the index lacks is left out)."""
    tables: dict[str, Table | None] = {}
    rows, kept = [], []
    for done, claim in enumerate(claims, 1):
        if claim.table not in tables:
            # The claim reader checked the id is Page_table_t; the index spells titles NFD.
            page, _, number = element_to_triple(index_id(claim.table))
            tables[claim.table] = Table.from_elements(
                store.page_elements(page, int(number)), int(number)
            )
        table = tables[claim.table]
        if table is not None:
            rows.append(table_facts.claim_features(claim.claim, table))
            kept.append(claim)
        if on_progress and (done % 500 == 0 or done == len(claims)):
            on_progress(done, len(claims))
    if not rows:
        raise TrainError("none of the claims' gold tables is in the index")
    return np.stack(rows), kept


def evidence_features(
    claims: Sequence[TrainingClaim],
    options: RunOptions,
    store: Any,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, list[TrainingClaim]]:
    """The features of ``claims`` against the first table of their retrieved evidence, as the
    verdict reads it (claims whose evidence holds no table are left out)."""
    from feverous_es.training.verdict.evidence import collect_evidence

    examples = collect_evidence(
        [TrainingClaim(c.source, c.id, c.claim, c.label) for c in claims],
        options.index,
        options.work / "evidence.jsonl",
        store=options.store,
        on_progress=on_progress,
    )
    rows, kept = [], []
    for claim, example in zip(claims, examples, strict=True):
        evidence = example.evidence_candidates()
        if (table := first_table(with_tables(evidence, store))) is not None:
            rows.append(table_facts.claim_features(claim.claim, table))
            kept.append(claim)
    width = len(FEATURES)
    return (np.stack(rows) if rows else np.zeros((0, width), np.float32)), kept
