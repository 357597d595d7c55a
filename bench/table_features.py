"""What the table verdict's features are worth: held-out TabFact accuracy on the gold table with
all features, without the computed arithmetic (the math hints of Papelo's §5, made features),
and with the claim alone.

    run = "bench.table_features:table_features"   # on the mini index (--index); options:
    # holdout, seed, entailment

The split is `feverous-es train table-verdict`'s (the same seeded share of tabfact_dev held out;
tabfact_train always trains), each claim is read against its gold table from the index, and
each variant is fitted with the training command's settings. Prints accuracy per variant next to
the majority class. With `entailment` (a `train verdict` output: its scores.jsonl), also the
entailment model alone, and its probabilities stacked on the features: trained on the claims
it scored (those it did not train on), beside the features alone on those same claims.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bench.context import Context
from bench.data import MINI
from bench.errors import BenchError

# The features that compute something on the table (a comparison, a count, an extreme, a sum).
MATH_PREFIXES = ("number_is", "named_row_is", "comparison", "count_", "ordinal")


def table_features(
    context: Context,
    *,
    holdout: float = 0.3,
    seed: int = 13,
    entailment: str | None = None,
) -> dict:
    """Held-out TabFact accuracy of each feature set (split as ``train table-verdict`` splits with
    ``seed`` and ``holdout``); with ``entailment`` (a ``train verdict`` output directory), its
    scores alone and stacked too."""

    from feverous_es.errors import TrainError
    from feverous_es.index.backends import open_store
    from feverous_es.training.datasets import is_holdout
    from feverous_es.training.features import data as fv_data
    from feverous_es.training.features import fit as fv_fit
    from feverous_es.verdict.table_facts import FEATURE_NAMES

    try:  # before the features: a wrong directory fails at once
        scores = fv_data.read_entailment(Path(entailment)) if entailment else None
    except TrainError as error:
        raise BenchError(str(error)) from None

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
    if scores is not None:
        probabilities, scored = entailment_columns(scores, claims, held)
        features = np.hstack([features, probabilities])
        alone = probabilities[held, 0] < probabilities[held, 1]  # REFUTES likelier (label 1)
        accuracy = float((alone == labels[held]).mean())
        print(f"  {accuracy:6.1%}  the entailment model alone")
        figures["accuracy"]["the entailment model alone"] = {"features": 0, "accuracy": accuracy}
        stacked = [*every, *range(len(names), len(names) + probabilities.shape[1])]
        variants["all features, trained on the claims the entailment model scored"] = (
            every, ~held & scored
        )  # fmt: skip
        variants["all features + entailment probabilities (stacked)"] = (stacked, ~held & scored)
    for name, (columns, train) in variants.items():
        model = fv_fit.fit(features[train][:, columns], labels[train], fv_fit.Settings(seed=seed))
        accuracy = float((model.predict(features[held][:, columns]) == labels[held]).mean())
        print(f"  {accuracy:6.1%}  {name} ({len(columns)} features, {train.sum():,} claims)")
        figures["accuracy"][name] = {
            "features": len(columns), "training_claims": int(train.sum()), "accuracy": accuracy
        }  # fmt: skip
    return figures


def entailment_columns(
    scores: dict[str, list[float]], claims: list, held: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The entailment model's probabilities (its ``scores``) of each claim against its gold
    table (zeros where it did not score it: it trained on that claim), and which claims it
    scored."""
    from feverous_es.training.verdict.entailment_data import score_key

    keys = [score_key("table", c.source, c.id, "gold") for c in claims]
    scored = np.array([k in scores for k in keys])
    if not scored[held].all():
        raise BenchError(
            "the entailment model did not score every held-out claim: train it with this split "
            "(--holdout, --seed)"
        )
    rows = np.zeros((len(claims), 3), np.float32)
    rows[scored] = [scores[k] for k, s in zip(keys, scored, strict=True) if s]
    return rows, scored
