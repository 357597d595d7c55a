"""What the table verdict's features are worth: held-out TabFact accuracy on the gold table with
all features, without the computed arithmetic (the math hints of Papelo's §5, made features),
and with the claim alone.

    run = "bench.table_features:table_features"   # on the mini index (--index); options:
    # holdout, seed

The split is `feverous-es train table-verdict`'s (the same seeded share of tabfact_dev held out;
tabfact_train always trains), each claim is read against its gold table from the index, and
each variant is fitted with the training command's settings. Prints accuracy per variant next to
the majority class. (The entailment model's probabilities stacked on the features were measured
until 2026-12-05: the `table-features-entailment` record, in git at fd0e639.)
"""

from __future__ import annotations

import time

import numpy as np

from bench.context import Context
from bench.data import MINI

# The features that compute something on the table (a comparison, a count, an extreme, a sum).
MATH_PREFIXES = ("number_is", "named_row_is", "comparison", "count_", "ordinal")


def table_features(
    context: Context,
    *,
    holdout: float = 0.3,
    seed: int = 13,
) -> dict:
    """Held-out TabFact accuracy of each feature set (split as ``train table-verdict`` splits with
    ``seed`` and ``holdout``)."""
    from feverous_es.index.backends import open_store
    from feverous_es.training.datasets import is_holdout
    from feverous_es.training.features import data as fv_data
    from feverous_es.training.features import fit as fv_fit
    from feverous_es.verdict.table_facts import FEATURE_NAMES

    dev = fv_data.read_claims([MINI / "tabfact_dev.jsonl"], tables=True, seed=seed)
    train = fv_data.read_claims([MINI / "tabfact_train.jsonl"], tables=True, seed=seed)
    store = open_store("embedded", str(context.place("index")))
    started = time.perf_counter()
    try:
        features, claims = fv_data.gold_features([*dev, *train], store)
    finally:
        store.close()
    print(f"features of {len(claims):,} claims in {time.perf_counter() - started:.0f} s")
    held = np.array([
        c.source == "tabfact_dev" and is_holdout(seed, c.source, c.id, holdout)
        for c in claims
    ])  # fmt: skip
    labels = np.array([fv_fit.LABELS.index(c.label) for c in claims])
    share = labels[held].mean()
    majority = float(max(share, 1 - share))
    print(f"{held.sum():,} held-out tabfact_dev claims, majority class {majority:.1%}")
    names = list(FEATURE_NAMES)
    math = [i for i, n in enumerate(names) if n.startswith(MATH_PREFIXES)]
    claim_only = [i for i, n in enumerate(names) if n.startswith("cue_") or n.startswith("claim_")]
    every = list(range(len(names)))
    variants = {  # name: (feature columns, training claims)
        "all features": (every, ~held),
        "without the computed arithmetic": ([i for i in every if i not in math], ~held),
        "the claim alone (cue words, lengths)": (claim_only, ~held),
    }
    figures: dict = {"held_out_claims": int(held.sum()), "majority": majority, "accuracy": {}}
    for name, (columns, train) in variants.items():
        model = fv_fit.fit(features[train][:, columns], labels[train], fv_fit.Settings(seed=seed))
        accuracy = float((model.predict(features[held][:, columns]) == labels[held]).mean())
        print(f"  {accuracy:6.1%}  {name} ({len(columns)} features, {train.sum():,} claims)")
        figures["accuracy"][name] = {
            "features": len(columns), "training_claims": int(train.sum()), "accuracy": accuracy
        }  # fmt: skip
    return figures
