"""The paired difference a choice between two versions is adopted on (bench/paired.py)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.paired import paired_difference


def test_a_few_claims_either_way_do_not_clear_zero() -> None:
    # 400 claims, 8 only the new version gets right and 4 only the old: +1 point, noise.
    old = np.zeros(400, dtype=bool)
    old[:200] = True
    new = old.copy()
    new[200:208] = True
    new[:4] = False
    result = paired_difference(new, old)
    assert result["difference"] == pytest.approx(0.01)
    assert (result["only_this"], result["only_baseline"]) == (8, 4)
    assert result["low"] < 0 < result["high"] and not result["clears_zero"]


def test_a_consistent_gain_clears_zero_and_the_interval_holds_it() -> None:
    rng = np.random.default_rng(1)
    old = rng.random(1000) < 0.6
    new = old | (rng.random(1000) < 0.15)  # right wherever old is, and on ~6 % more
    result = paired_difference(new, old)
    assert result["clears_zero"] and result["low"] > 0
    assert result["low"] <= result["difference"] <= result["high"]
    assert paired_difference(old, new)["high"] < 0  # the other way round: a loss


def test_unpaired_claims_are_refused() -> None:
    with pytest.raises(ValueError, match="paired claims"):
        paired_difference(np.ones(3, dtype=bool), np.ones(4, dtype=bool))
