"""Accent folding, the one rule both sides of a match read text by: the index (titles, BM25
fields) and the claim (its words, its title spans)."""

from __future__ import annotations

import unicodedata


def fold_accents(text: str) -> str:
    """``text`` without diacritics: decomposed (NFKD) with the combining marks dropped.

    The dump stores many titles and texts decomposed (NFD), and claims often leave accents out
    ("Vuelta a Andalucia"); folding makes both forms one.
    """
    if text.isascii():
        return text
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
