"""What the table verdict's features are worth: held-out TabFact accuracy on the gold table with
all features, without the computed arithmetic (the math hints of Papelo's §5, made features),
and with the claim alone.

    python bench/table_features.py INDEX [--holdout 0.3] [--seed 13]

The split is `feverous-es train table-verdict`'s (the same seeded share of tabfact_dev held out;
tabfact_train always trains), each claim is read against its gold table from the index, and
each variant is fitted with the training command's settings. Prints accuracy per variant next to
the majority class.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from results import add_record_option, record_if_asked  # bench/results.py

REPO = Path(__file__).resolve().parents[1]
MINI = REPO.parent / "shared" / "data" / "minifeverous"
# The features that compute something on the table (a comparison, a count, an extreme, a sum).
MATH_PREFIXES = ("number_is", "named_row_is", "comparison", "count_", "ordinal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path, help="embedded index of the mini-FEVEROUS wiki.db")
    parser.add_argument("--holdout", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=13)
    add_record_option(parser)
    args = parser.parse_args()

    from feverous_es.index.backends import open_store
    from feverous_es.training import feature_verdict as fv
    from feverous_es.training.datasets import is_holdout
    from feverous_es.verdict.table_facts import FEATURE_NAMES

    dev = fv.read_claims([MINI / "tabfact_dev.jsonl"], tables=True, seed=args.seed)
    train = fv.read_claims([MINI / "tabfact_train.jsonl"], tables=True, seed=args.seed)
    store = open_store("embedded", args.index)
    started = time.perf_counter()
    try:
        features, claims = fv.gold_features([*dev, *train], store)
    finally:
        store.close()
    print(f"features of {len(claims):,} claims in {time.perf_counter() - started:.0f} s")
    held = np.array([
        c.source == "tabfact_dev" and is_holdout(args.seed, c.source, c.id, args.holdout)
        for c in claims
    ])  # fmt: skip
    labels = np.array([fv.LABELS.index(c.label) for c in claims])
    share = labels[held].mean()
    majority = float(max(share, 1 - share))
    print(f"{held.sum():,} held-out tabfact_dev claims, majority class {majority:.1%}")
    names = list(FEATURE_NAMES)
    math = [i for i, n in enumerate(names) if n.startswith(MATH_PREFIXES)]
    claim_only = [i for i, n in enumerate(names) if n.startswith("cue_") or n.startswith("claim_")]
    variants = {
        "all features": list(range(len(names))),
        "without the computed arithmetic": [i for i in range(len(names)) if i not in math],
        "the claim alone (cue words, lengths)": claim_only,
    }
    figures: dict = {"held_out_claims": int(held.sum()), "majority": majority, "accuracy": {}}
    for name, columns in variants.items():
        model = fv.fit(features[~held][:, columns], labels[~held], fv.Settings(seed=args.seed))
        accuracy = float((model.predict(features[held][:, columns]) == labels[held]).mean())
        print(f"  {accuracy:6.1%}  {name} ({len(columns)} features)")
        figures["accuracy"][name] = {"features": len(columns), "accuracy": accuracy}
    record_if_asked(args, figures)


if __name__ == "__main__":
    main()
