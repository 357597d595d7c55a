"""Element search in one of three modes, shared by ``feverous-es search`` and the HTTP service."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from feverous_es.errors import EmptyClaimError
from feverous_es.index.store import Filters, Hit, Store
from feverous_es.input_text import clean_text

MODES = ("hybrid", "bm25", "knn")


def search(
    store: Store,
    embed: Callable[[Sequence[str]], np.ndarray],
    query: str,
    k: int = 10,
    mode: str = "hybrid",
    filters: Filters | None = None,
) -> list[Hit]:
    """The ``k`` best elements for ``query``: BM25 (``bm25``), the embedding's nearest
    neighbours (``knn``) or both fused (``hybrid``); ``embed`` runs only when a mode needs it."""
    query = clean_text(query, "the query")
    if not query.strip():
        raise EmptyClaimError("the query is empty")
    if filters is not None and filters.pages:
        pages = tuple(clean_text(page, "a page filter") for page in filters.pages)
        filters = dataclasses.replace(filters, pages=pages)
    if mode == "bm25":
        return store.search_text(query, k, filters)
    vector = embed([query])[0]
    if mode == "knn":
        return store.search_vector(vector, k, filters)
    return store.search_hybrid(query, vector, k, filters)


def hit_to_dict(hit: Hit) -> dict[str, Any]:
    """A hit as ``search --json`` prints it: its score and every field of its element."""
    return {"score": hit.score, **dataclasses.asdict(hit.element)}
