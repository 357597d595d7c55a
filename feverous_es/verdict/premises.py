"""What the verdict's readers read of a claim's evidence: its route's premise, a table-routed
claim's sentences, and the pages the claim names read alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from feverous_es.index.elements import title_keys
from feverous_es.plugins.interfaces import Candidate
from feverous_es.text import claim_spans
from feverous_es.verdict.inputs import TEXT_TYPES, sentence_premise, table_premise
from feverous_es.verdict.table_facts import Table


def page_premises(claim: str, evidence: Sequence[Candidate], pages: int) -> list[str]:
    """The sentence premises of ``pages`` pages of ``evidence`` read alone: the pages the claim
    names first, in the order it names them (its subject before the place or person it relates
    it to: "Vancouver is in Cameroon." reads Vancouver's sentences, which retrieval may rank
    below Cameroon's), then the others in evidence order; none when the evidence's sentences are
    of one page (its premise is the whole evidence's)."""
    by_page: dict[str, list[Candidate]] = {}
    for candidate in evidence:
        if candidate.element.type in TEXT_TYPES:
            by_page.setdefault(candidate.element.page, []).append(candidate)
    if len(by_page) < 2:
        return []
    named = claim_spans(claim)
    unnamed = len(claim.split())

    def named_at(page: str) -> int:
        return min((named[key][0] for key in title_keys(page) if key in named), default=unnamed)

    ordered = sorted(by_page, key=named_at)  # stable: evidence order among equals
    # A page read alone keeps its title before each sentence: one title there answered held-out
    # changed professions and places worse (docs/decisions.md, Verdict).
    return [sentence_premise(by_page[page], one_title=False) for page in ordered[:pages]]


@dataclass(frozen=True)
class ClaimPremises:
    """What the verdict's readers read of one claim's evidence, built once for all of them."""

    route: str  # the routed table, else the evidence's sentences
    on_table: bool
    sentences: str = ""  # a table-routed claim's sentences (its NEI call reads both)
    pages: tuple[str, ...] = ()  # a sentence claim's pages read alone (:func:`page_premises`)

    @classmethod
    def of(
        cls, claim: str, evidence: Sequence[Candidate], table: Table | None, pages: int
    ) -> ClaimPremises:
        if table is not None:
            return cls(table_premise(claim, table), True, sentence_premise(evidence))
        read_alone = tuple(page_premises(claim, evidence, pages))
        return cls(sentence_premise(evidence), False, pages=read_alone)

    def all(self) -> list[str]:
        """Every premise of the claim, its route's first."""
        return [self.route, *([self.sentences] if self.sentences else []), *self.pages]
