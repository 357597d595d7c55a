"""The table feature verdict's training run: features, fitting, export, held-out accuracy and the
card."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import TrainError
from feverous_es.training.datasets import TrainingClaim, is_holdout
from feverous_es.training.features.card import write_card
from feverous_es.training.features.data import (
    RunOptions,
    evidence_features,
    gold_features,
    read_claims,
)
from feverous_es.training.features.fit import LABELS, accuracy, export, fit
from feverous_es.training.progress import QUIET, Progress
from feverous_es.verdict.feature_model import FEATURES, KIND


def run(options: RunOptions, progress: Progress = QUIET) -> dict[str, Any]:
    """Features, fitting, export, held-out accuracy and the model card; returns the report.
    Phases: ``gold-table features``, ``retrieved evidence``."""
    from feverous_es.index.backends import open_store

    options.check()
    if not options.claims:
        raise TrainError("no claim files given (--claims FILE.jsonl)")
    seed = options.settings.seed
    split_claims = read_claims(options.claims, tables=True, limit=options.limit, seed=seed)
    extra = read_claims(options.train_claims, tables=True, limit=options.limit, seed=seed)
    split_sources = {Path(p).stem for p in options.claims}

    def held_out(claim: TrainingClaim) -> bool:
        return claim.source in split_sources and is_holdout(
            seed, claim.source, claim.id, options.holdout
        )

    on_features = progress.counter("gold-table features")
    on_evidence = progress.counter("retrieved evidence")
    store = open_store(options.store, options.index)
    try:
        features, claims = gold_features([*split_claims, *extra], store, on_features)
        # The first N training claims of the split files, in file order.
        retrieve = [c for c in split_claims if not held_out(c)][: options.retrieved]
        extra_rows, extra_claims = (
            evidence_features(retrieve, options, store, on_evidence)
            if retrieve
            else (np.zeros((0, features.shape[1]), np.float32), [])
        )
    finally:
        store.close()
    held = np.array([held_out(c) for c in claims])
    labels = np.array([LABELS.index(c.label) for c in [*claims, *extra_claims]])
    train_x = np.vstack([features[~held], extra_rows])
    train_y = np.concatenate([labels[: len(claims)][~held], labels[len(claims) :]])
    started = time.perf_counter()
    model = fit(train_x, train_y, options.settings)
    seconds = time.perf_counter() - started
    probe = features[held] if held.any() else features[:64]
    exported = export(model, options.out, probe, FEATURES)
    held_claims = [c for c, h in zip(claims, held, strict=True) if h]
    report: dict[str, Any] = {
        "command": options.command,
        "kind": KIND,
        "claims": [Path(p).name for p in options.claims],
        "train_claims": [Path(p).name for p in options.train_claims],
        "claims_per_file": options.limit,
        "holdout": options.holdout,
        "training": {
            "seed": seed,
            "examples": int((~held).sum()),
            "retrieved_examples": len(extra_claims),
            "settings": vars(options.settings),
            "seconds": round(seconds, 1),
            "features": list(FEATURES),
        },
        "export": exported,
        # Read against the gold table.
        "holdout_accuracy": accuracy(model.predict_proba(features[held]), held_claims)
        if held.any()
        else {},
        "feature_importance": dict(
            sorted(
                zip(FEATURES, np.round(model.feature_importances_, 4).tolist(), strict=True),
                key=lambda kv: -kv[1],
            )
        ),
    }
    write_card(options.out, report)
    return report
