"""A choice between two versions as a paired difference over the same claims, with its 95 %
interval (docs/design.md: a change to what the pipeline decides is adopted on one that clears zero).

Each claim is right or wrong under each version; the difference of the two accuracies is
bootstrapped over claims (both versions resampled together, so what the claims share cancels),
and the claims only one version gets right are counted (McNemar's discordant pairs).
"""

from __future__ import annotations

import numpy as np

ROUNDS = 10_000
SEED = 0


def paired_difference(right: np.ndarray, baseline: np.ndarray, rounds: int = ROUNDS) -> dict:
    """``right`` minus ``baseline`` (one bool a claim each, same claims in the same order) in
    label accuracy: the difference, its 95 % percentile-bootstrap interval, and the claims only
    one of them gets right. ``clears_zero`` says whether the interval excludes no difference."""
    right, baseline = np.asarray(right, dtype=bool), np.asarray(baseline, dtype=bool)
    if right.shape != baseline.shape or right.ndim != 1 or not len(right):
        raise ValueError(f"paired claims needed, not shapes {right.shape} and {baseline.shape}")
    change = right.astype(np.int8) - baseline.astype(np.int8)  # +1, 0 or -1 a claim
    n = len(change)
    # Resampling n claims only draws how many of each kind (+1, 0, -1) come back: a multinomial.
    shares = [(change > 0).mean(), (change == 0).mean(), (change < 0).mean()]
    counts = np.random.default_rng(SEED).multinomial(n, shares, size=rounds)
    means = (counts[:, 0] - counts[:, 2]) / n
    low, high = np.percentile(means, [2.5, 97.5])
    return {
        "claims": n,
        "difference": round(float(change.mean()), 4),
        "low": round(float(low), 4),
        "high": round(float(high), 4),
        "only_this": int((change > 0).sum()),
        "only_baseline": int((change < 0).sum()),
        "clears_zero": bool(low > 0 or high < 0),
    }
