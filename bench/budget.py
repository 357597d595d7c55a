"""The pipeline's cost budget: what each stage may count over a fixed sample of claims.

``tests/data/cost-budget.json`` holds the counts (:mod:`feverous_es.runtime.costs`) of the
default pipeline over the repo's sample index and the 50 official dev claims; the test
``tests/bench/test_cost_budget.py`` fails when a change counts more than the budget, so a model that
reads more pairs, a longer pair limit or a deeper store search cannot slow the pipeline down
unnoticed. A change that must cost more records the new budget in the same commit
(``python -m bench run cost-budget --option write=true``), where a reviewer sees it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from feverous_es.verify.pipeline import Pipeline

# Counts may grow this much before the test fails: the embedder's int8 arithmetic can differ
# in the last bits between CPUs (AVX2, AVX-512 VNNI), and a tie broken the other way moves a
# candidate in or out. A change that matters costs more than this.
SLACK = 0.02

Costs = dict[str, dict[str, int]]  # stage -> counter name -> count


def claim_costs(pipeline: Pipeline, claims: Sequence[str]) -> Costs:
    """What verifying ``claims`` one at a time counts in each stage (the models loaded first,
    so loading is not counted)."""
    pipeline.verify("Warm-up: the first claim loads the models it needs.")
    pipeline.costs.clear()
    for claim in claims:
        pipeline.verify(claim)
    return {stage: dict(sorted(counts.items())) for stage, counts in sorted(pipeline.costs.items())}


def over_budget(costs: Mapping[str, Mapping[str, int]], budget: Costs) -> list[str]:
    """One line for each count over its budget (by more than :data:`SLACK`), or a count the
    budget does not know (a new model or store call must be budgeted too)."""
    lines = []
    for stage, counts in costs.items():
        for name, count in counts.items():
            allowed = budget.get(stage, {}).get(name)
            if allowed is None:
                lines.append(f"{stage}: {name} = {count}, not in the budget")
            elif count > allowed * (1 + SLACK):
                lines.append(f"{stage}: {name} = {count}, over its budget of {allowed}")
    return lines
