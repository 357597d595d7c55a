"""When a claim routed to a table is answered on its sentences instead (the verdict's
``sure_sentences_above``), chosen through the whole pipeline on the validation claims
(:mod:`bench.validation`), every one of them (FM2 64, FEVEROUS-S 89, TabFact 665).

    run = "bench.sure_sentences:sure_sentences"   # on the mini index (--index);
    # options: above, per_file, within

Held out, FEVEROUS-S and FM2 claims the router sent to a table (their words are in a table's
cells) were right 70 % and 55 % of the time, and the reader alone on every claim's sentences read
those files 2.5 and 1 points better than the routed verdict (``entailment model alone`` in
``python -m bench run verdict``). The reader already reads a table claim's sentences (for NOT
ENOUGH INFO); where it reads them as SUPPORTS or REFUTES with at least ``above``, the claim is
answered there. Chosen: among the rule off and each setting (strictest first) that hold every
file within ``within`` of the rule off, the most accurate over the files' mean; among equals the
first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.context import Context
from bench.validation import chosen_by_mean


def sure_sentences(
    context: Context,
    *,
    above: Sequence[float] = (0.99, 0.95, 0.9, 0.8, 0.7),
    per_file: int = 1000,
    within: float = 0.005,
) -> dict[str, Any]:
    """The rule off and at each setting: validation accuracy per file, mean and verdict time."""
    variants = {"off": {"sure_sentences_above": 1.1}} | {
        f"above {round(a * 100)}": {"sure_sentences_above": a} for a in sorted(above, reverse=True)
    }
    return chosen_by_mean(context, variants, per_file, within)
