"""Next-hop evidence pursuit (Malon 2021, §4).

``links`` (the default) needs no generator: it follows the evidence's links.

Evidence chains often run through an entity that only the evidence names ("… directed by
[[Jane Campion]]"); the claim alone cannot find its page. Each hop follows the links of the
current evidence, best evidence first, to pages not yet used, and proposes, like Papelo, one
sentence and two cells from them: those best matching the claim together with the evidence
that links there. The pipeline reranks the proposals; the selector keeps those that earn a place.

``seq2seq`` is Papelo's module for users who trained one: a T5-style model imagines the missing
evidence as "[Title] text"; the page with that title (else the pages already in the evidence)
gives the sentence and the two cells with the best word overlap with it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from feverous_es.index.elements import TABLE_CELL_TYPES, TEXT_TYPES, title_keys
from feverous_es.index.store import Filters
from feverous_es.plugins.evidence_text import seq2seq_input
from feverous_es.plugins.interfaces import Candidate, PluginContext, Query
from feverous_es.runtime.seq2seq import Seq2SeqModel

_WORDS = re.compile(r"\w+")
_LABEL_WORD = re.compile(r"^\s*(?:supports|refutes|neutral)\b", re.IGNORECASE)
_TITLED = re.compile(r"^\[([^\]]+)\]\s*(.*)$", re.DOTALL)


class LinksHop:
    """The ``links`` hop. ``pages``: linked pages followed per hop; ``sentences`` / ``cells``:
    how many of each it proposes per hop (Papelo: one sentence and two cells)."""

    def __init__(
        self, context: PluginContext, pages: int = 2, sentences: int = 1, cells: int = 2
    ) -> None:
        self.context = context
        self.pages = pages
        self.quota = {False: sentences, True: cells}

    def _linked_pages(self, evidence: Sequence[Candidate]) -> list[tuple[str, Candidate]]:
        """(page, the evidence linking to it) for linked pages no evidence comes from yet."""
        used = {candidate.element.page for candidate in evidence}
        links: dict[str, Candidate] = {}
        for candidate in evidence:
            for link in candidate.element.links:
                links.setdefault(title_keys(link)[0], candidate)
        resolved = self.context.store.match_titles(list(links))
        found: dict[str, Candidate] = {}
        for key, candidate in links.items():
            for title in resolved.get(key, [])[:1]:
                if title not in used:
                    found.setdefault(title, candidate)
        return list(found.items())[: self.pages]

    def propose(self, query: Query, evidence: Sequence[Candidate], hop: int) -> list[Candidate]:
        held = {candidate.element.id for candidate in evidence}
        proposals: list[Candidate] = []
        for page, via in self._linked_pages(evidence):
            text = f"{query.text} {via.element.text}"
            vector = self.context.embed([text])[0]
            for is_cell, types in ((False, TEXT_TYPES), (True, TABLE_CELL_TYPES)):
                hits = self.context.store.search_hybrid(
                    text, vector, self.quota[is_cell] + len(held), Filters((page,), types)
                )
                fresh = [hit for hit in hits if hit.element.id not in held]
                proposals.extend(
                    Candidate(hit.element, hit.score, hop, f"link from {via.element.id}")
                    for hit in fresh[: self.quota[is_cell]]
                )
        return proposals


def parse_imagined(output: str) -> tuple[str | None, str] | None:
    """The generator's output "supports [Title] text" as (title, text); None for "none"."""
    rest = _LABEL_WORD.sub("", output).strip()
    if not rest or rest.lower() == "none":
        return None
    titled = _TITLED.match(rest)
    return (titled.group(1).strip(), titled.group(2)) if titled else (None, rest)


class Seq2SeqHop:
    """The ``seq2seq`` hop. ``model``: the exported generator's directory."""

    def __init__(
        self,
        context: PluginContext,
        model: str,
        sentences: int = 1,
        cells: int = 2,
        max_length: int = 512,
    ) -> None:
        self.store = context.store
        self.model = Seq2SeqModel(Path(model), device=context.device, max_length=max_length)
        self.quota = {False: sentences, True: cells}

    def propose(self, query: Query, evidence: Sequence[Candidate], hop: int) -> list[Candidate]:
        imagined = parse_imagined(self.model.generate([seq2seq_input(query.text, evidence)])[0])
        if imagined is None:
            return []
        title, text = imagined
        key = title_keys(title)[0] if title else None
        pages = self.store.match_titles([key]).get(key, [])[:1] if key else []
        if not pages:
            pages = list(dict.fromkeys(c.element.page for c in evidence))
        held = {c.element.id for c in evidence}
        wanted = set(_WORDS.findall(text.lower()))
        scored = [
            (len(wanted & set(_WORDS.findall(element.linearized.lower()))), element)
            for page in pages
            for element in self.store.page_elements(page)
            if element.id not in held
        ]
        scored.sort(key=lambda item: item[0], reverse=True)
        proposals: list[Candidate] = []
        taken = {False: 0, True: 0}
        for overlap, element in scored:
            kind = element.type in TABLE_CELL_TYPES
            if overlap and taken[kind] < self.quota[kind]:
                taken[kind] += 1
                proposals.append(Candidate(element, float(overlap), hop, f"imagined: {text}"))
        return proposals
