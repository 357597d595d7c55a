"""Evidence selection under the official submission budget.

The FEVEROUS scorer reads the first 5 sentences and the first 25 cell-type elements (cell,
header cell, table caption, list item) of a prediction, in order; anything after is ignored, so
the evidence set is exactly that: two ranked lists filled in rank order.
"""

from __future__ import annotations

from collections.abc import Sequence

from feverous_es.plugins.interfaces import Candidate, PluginContext

SENTENCE_BUDGET = 5
CELL_BUDGET = 25


class BudgetSelector:
    """The ``budget`` selector. ``push`` implements Malon 2021, §4: elements a hop found go on top
    of their list and the lowest fall out. A pushed element must beat the weakest element of a
    full list, so a hop cannot replace strong initial evidence with weak guesses."""

    def __init__(
        self, context: PluginContext | None = None, sentences: int = SENTENCE_BUDGET,
        cells: int = CELL_BUDGET,
    ) -> None:  # fmt: skip
        self.budget = {False: sentences, True: cells}

    def select(self, ranked: Sequence[Candidate]) -> list[Candidate]:
        lists: dict[bool, list[Candidate]] = {False: [], True: []}
        seen: set[str] = set()
        for candidate in ranked:
            kind = candidate.element.type.in_cell_budget
            if candidate.element.id not in seen and len(lists[kind]) < self.budget[kind]:
                seen.add(candidate.element.id)
                lists[kind].append(candidate)
        return lists[False] + lists[True]

    def push(self, evidence: Sequence[Candidate], new: Sequence[Candidate]) -> list[Candidate]:
        held = {candidate.element.id for candidate in evidence}
        accepted = []
        for candidate in new:
            kind = candidate.element.type.in_cell_budget
            same_kind = [c for c in evidence if c.element.type.in_cell_budget == kind]
            full = len(same_kind) >= self.budget[kind]
            if candidate.element.id in held:
                continue
            if full and candidate.score <= min(c.score for c in same_kind):
                continue
            accepted.append(candidate)
        return self.select([*accepted, *evidence])
