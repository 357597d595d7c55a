"""Page retrieval: claim spans that name page titles, BM25 over page text, dense kNN, fused.

Papelo (Malon 2021, §3) kept the FEVEROUS baseline: pages whose titles match entities of the
claim, plus the best TF-IDF pages. With no entity tagger here, every span of the claim is
looked up as a title (NFD, case-folded, exact before fuzzy); a span inside a longer matching
span is dropped, so "Russell County, Alabama" wins over "Alabama". BM25 on title + intro is
the fuzzy side, the page vector the semantic one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from feverous_es.index.store import PageHit, Store
from feverous_es.plugins.interfaces import PluginContext, Query
from feverous_es.text import SPAN_STOPWORDS, claim_spans


class Casing(StrEnum):
    """How a claim writes a span: as a name (every word but stopwords starts with a capital or
    a digit), in lower case, or neither, as the claim is all lower case (TabFact's style)."""

    NAME = "name"
    LOWER = "lower"
    UNCASED = "uncased"


@dataclass(frozen=True, slots=True)
class TitleMatch:
    title: str
    span: str
    tokens: int  # length of the matching span, in words
    casing: Casing


def match_titles(store: Store, claim: str, max_words: int = 10) -> list[TitleMatch]:
    """Pages whose title a span of the claim names, longest span first; spans inside a longer
    matching span are dropped."""
    spans = claim_spans(claim, max_words)
    words = claim.split()
    cased = claim != claim.lower()
    found = store.match_titles(list(spans))
    ranges = sorted(((spans[key], key) for key in found), key=lambda item: item[0][0] - item[0][1])
    kept: list[tuple[int, int]] = []
    matches: list[TitleMatch] = []
    for (start, end), key in ranges:
        if any(s <= start and end <= e and (s, e) != (start, end) for s, e in kept):
            continue
        kept.append((start, end))
        if not cased:
            casing = Casing.UNCASED
        elif any(w[:1].islower() for w in words[start:end] if w.lower() not in SPAN_STOPWORDS):
            casing = Casing.LOWER
        else:
            casing = Casing.NAME
        matches.extend(TitleMatch(title, key, end - start, casing) for title in found[key])
    return matches


class HybridPageRetriever:
    """The ``hybrid`` page retriever: title matches, BM25 and kNN pages, fused by score.

    score = title weight * span words / longest span words
          + text_weight * BM25 / best BM25 + vector_weight * cosine

    The title weight depends on how the claim writes the span (:class:`Casing`): ``name_weight``
    for a name, ``lower_weight`` for lower-case words, ``title_weight`` when the claim has no
    case at all (TabFact's lower-cased claims).

    A span naming a title weighs less than a name in full because claims name many side pages
    ("Alabama") whose sentences are rarely the evidence, and lower-case words ("village")
    less than names. How the defaults were measured: docs/decisions.md, Retrieval.
    """

    def __init__(
        self,
        context: PluginContext,
        k: int = 8,
        depth: int = 20,
        title_weight: float = 0.5,
        text_weight: float = 1.0,
        vector_weight: float = 0.5,
        max_span_words: int = 10,
        name_weight: float = 1.0,
        lower_weight: float = 0.25,
    ) -> None:
        self.store = context.store
        self.k = k
        self.depth = depth
        self.text_weight = text_weight
        self.vector_weight = vector_weight
        self.max_span_words = max_span_words
        self.title_weights = {
            Casing.NAME: name_weight,
            Casing.LOWER: lower_weight,
            Casing.UNCASED: title_weight,
        }

    def retrieve(self, query: Query) -> list[PageHit]:
        scores: dict[str, float] = {}
        records = {}
        matches = match_titles(self.store, query.text, self.max_span_words)
        if matches:
            longest = max(m.tokens for m in matches)
            for match in matches:
                part = self.title_weights[match.casing] * match.tokens / longest
                scores[match.title] = max(scores.get(match.title, 0.0), part)
        text_hits = self.store.search_pages_text(query.text, self.depth)
        best = max((hit.score for hit in text_hits), default=0.0) or 1.0
        for hit in text_hits:
            title = hit.page.title
            scores[title] = scores.get(title, 0.0) + self.text_weight * hit.score / best
            records[title] = hit.page
        for hit in self.store.search_pages_vector(query.vector, self.depth):
            title = hit.page.title
            scores[title] = scores.get(title, 0.0) + self.vector_weight * hit.score
            records[title] = hit.page
        ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)[: self.k]
        missing = [title for title, _ in ranked if title not in records]
        records.update((page.title, page) for page in self.store.get_pages(missing))
        return [PageHit(records[title], score) for title, score in ranked if title in records]
