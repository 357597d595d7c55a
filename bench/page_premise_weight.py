"""How much the reading of the claim's own page counts beside the whole evidence's (the
verdict's ``page_premise_weight``), chosen through the whole pipeline on the validation claims
(:mod:`bench.validation`), every one of them (FM2 64, FEVEROUS-S 89, TabFact 665).

    run = "bench.page_premise_weight:page_premise_weight"   # the mini index (--index);
    # options: weights (the first: the shipped one), per_file, within

Of the held-out "changed place" claims the pipeline still gets wrong, the claim's own page read
alone answers five of six right, where the mean of that reading and the whole evidence's does
not (the whole evidence joins two pages' leads into the claim). Each weight of the page's
reading (the whole evidence's is 1) is read on the validation claims. Chosen: among the weights
that hold every file within ``within`` of the first (weight 1), the most accurate over the
files' mean; among equals the first. What it chooses ships only if it holds the held-out claims
through ``python -m bench run verdict`` too: 3/2 did not (docs/verdict.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from bench.context import Context
from bench.validation import chosen_by_mean


def page_premise_weight(
    context: Context,
    *,
    weights: Sequence[float] = (1.0, 1.5, 2.0, 3.0),
    per_file: int = 1000,
    within: float = 0.005,
) -> dict[str, Any]:
    """Each weight's validation accuracy per file, mean and verdict time, and the chosen one."""
    # named as fractions: a key of the record holds no dot
    variants = {
        f"weight {Fraction(w).limit_denominator(10)}": {"page_premise_weight": w} for w in weights
    }
    return chosen_by_mean(context, variants, per_file, within)
