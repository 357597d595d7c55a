"""When a claim routed to sentences is read through its evidence's table instead (the verdict's
``unrelated_above`` and ``table_clearer_by``), chosen through the whole pipeline on the
validation claims (:mod:`bench.validation`), every one of them (FM2 64, FEVEROUS-S 89, TabFact
665): the 150 TabFact claims the cascade reads hold ~16 that the rule could move.

    run = "bench.unrelated_sentences:unrelated_sentences"   # on the mini index (--index);
    # options: unrelated, clearer, aim, per_file, within

Held-out TabFact claims whose words a sentence held as well as their table went to the sentence
route, where the reader read them against unrelated sentences and answered right 25 % of the
time. Each pair of settings (the reader's NOT ENOUGH INFO probability on the sentences from which
the table is read too, from 0.5: where NEI is the likeliest reading; how much lower the table's
must be) is read beside the rule off. Chosen: the most accurate on ``aim``'s claims (the ones
the rule is for) among the settings that hold every other file within ``within`` of the rule
off; among equals the strictest (fewest claims moved: the highest of both first); the rule off
when none is more accurate than it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from bench.context import Context
from bench.validation import holding, read_variants, with_chosen

OFF = "off"


def unrelated_sentences(
    context: Context,
    *,
    unrelated: Sequence[float] = (0.8, 0.7, 0.6, 0.5),
    clearer: Sequence[float] = (0.4, 0.2),
    aim: str = "tabfact_dev",
    per_file: int = 1000,
    within: float = 0.005,
) -> dict[str, Any]:
    """The rule off and at each pair of settings: validation accuracy and verdict time."""
    descending = (sorted(unrelated, reverse=True), sorted(clearer, reverse=True))
    settings = {
        f"above {round(u * 100)} by {round(c * 100)}": {"unrelated_above": u, "table_clearer_by": c}
        for u, c in itertools.product(*descending)
    }
    variants = {OFF: {"unrelated_above": 1.1}, **settings}
    figures = read_variants(context, variants, per_file)
    kept = holding(figures, list(variants), OFF, within, aside=aim)
    best = max(figures[name]["files"][aim] for name in kept)
    name = next(n for n in kept if figures[n]["files"][aim] == best)  # off first: strictest
    return with_chosen(figures, variants, name)
