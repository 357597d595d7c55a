"""The BM25 analysis of the embedded store, shared by documents and claims: the claim side
analyzes a claim as the index analyzed its elements."""

from __future__ import annotations

import tantivy

from feverous_es.accents import fold_accents


def english_analyzer() -> tantivy.TextAnalyzer:
    """The analyzer of the BM25 fields, applied to documents and queries alike."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


class BM25Analyzer:
    """What the BM25 fields hold of a text: accents folded (see
    :func:`~feverous_es.index.elements.fold_accents`: tantivy's tokenizer would split a
    decomposed "Mocăniță" into "moca" and "nit"), then :func:`english_analyzer`'s terms."""

    def __init__(self) -> None:
        self._analyzer = english_analyzer()

    def analyze(self, text: str) -> list[str]:
        return self._analyzer.analyze(fold_accents(text))
