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
    read_entailment,
    stack,
)
from feverous_es.training.features.fit import LABELS, accuracy, export, fit
from feverous_es.training.progress import QUIET, Progress
from feverous_es.verdict.feature_model import ENTAILMENT_FEATURES, FEATURES, KIND


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
    names = FEATURES
    unscored = 0
    if options.entailment is not None:
        from feverous_es.training.verdict.entailment_data import score_key

        scores = read_entailment(options.entailment)
        keys = [score_key(KIND, c.source, c.id, "gold") for c in claims]
        missing = [k for k, c in zip(keys, claims, strict=True) if held_out(c) and k not in scores]
        if missing:
            raise TrainError(
                f"{options.entailment} lacks the entailment scores of {len(missing)} held-out "
                f"claims (e.g. {missing[0]}): train the verdict with the same claim files, "
                "--retrieved / --limit, --holdout and --seed"
            )
        features, scored = stack(features, keys, scores)
        unscored = int((~scored).sum())
        claims = [c for c, s in zip(claims, scored, strict=True) if s]
        extra_keys = [score_key(KIND, c.source, c.id) for c in extra_claims]
        extra_rows, extra_scored = stack(extra_rows, extra_keys, scores)
        extra_claims = [c for c, s in zip(extra_claims, extra_scored, strict=True) if s]
        if not any(not held_out(c) for c in claims) and not extra_claims:
            raise TrainError(
                f"{options.entailment} scored none of the training claims: train the verdict "
                "with --stack-share or --folds"
            )
        names = names + ENTAILMENT_FEATURES
    held = np.array([held_out(c) for c in claims])
    labels = np.array([LABELS.index(c.label) for c in [*claims, *extra_claims]])
    train_x = np.vstack([features[~held], extra_rows])
    train_y = np.concatenate([labels[: len(claims)][~held], labels[len(claims) :]])
    started = time.perf_counter()
    model = fit(train_x, train_y, options.settings)
    seconds = time.perf_counter() - started
    probe = features[held] if held.any() else features[:64]
    exported = export(model, options.out, probe, names)
    held_claims = [c for c, h in zip(claims, held, strict=True) if h]
    report: dict[str, Any] = {
        "command": options.command,
        "kind": KIND,
        "claims": [Path(p).name for p in options.claims],
        "train_claims": [Path(p).name for p in options.train_claims],
        "entailment": str(options.entailment) if options.entailment else None,
        "claims_per_file": options.limit,
        "holdout": options.holdout,
        "training": {
            "seed": seed,
            "examples": int((~held).sum()),
            "retrieved_examples": len(extra_claims),
            "left_out_unscored": unscored,
            "settings": vars(options.settings),
            "seconds": round(seconds, 1),
            "features": list(names),
        },
        "export": exported,
        # Read against the gold table.
        "holdout_accuracy": accuracy(model.predict_proba(features[held]), held_claims)
        if held.any()
        else {},
        "feature_importance": dict(
            sorted(
                zip(names, np.round(model.feature_importances_, 4).tolist(), strict=True),
                key=lambda kv: -kv[1],
            )
        ),
    }
    write_card(options.out, report)
    return report
