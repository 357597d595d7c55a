"""A store view that hides given pages, or given elements, from retrieval: a claim whose gold
pages are hidden has no evidence in the index, and one whose gold sentences are hidden has its
subject's page without the fact: NOT ENOUGH INFO is their right answer, through the whole
pipeline.

:class:`HiddenPages` wraps a store (any :class:`~feverous_es.index.store.Store`): every search,
title match and fetch answers as if what :attr:`HiddenPages.hidden` names were not in the
index (:class:`Hidden`: whole pages, and elements not on their pages). Searches ask
the store for more than ``k`` (the hidden hits are dropped after) so that ``k`` of the others
come back as a smaller index would rank them, unless the hidden ones held more than
:data:`OVER_ASK` times ``k`` of the best hits. Set ``hidden`` before each claim and verify one
claim at a time (it is the view's, not a claim's). Tables are hidden with
their page only (a table search ranks whole tables).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from feverous_es.index.store import Filters, HybridParts, HybridWeights, Store

OVER_ASK = 4  # a search asks for this many times k, then drops the hidden pages' hits


@dataclass(frozen=True)
class Hidden:
    """What a claim's retrieval must not see: whole ``pages`` (NFD titles) and ``elements``
    (ids) on pages it may see."""

    pages: frozenset[str] = frozenset()
    elements: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.pages or self.elements)

    def hides(self, page: str, element: str | None = None) -> bool:
        """Whether ``page``, or the ``element`` (id) on it, is hidden."""
        return page in self.pages or (element is not None and element in self.elements)


NOTHING = Hidden()


class HiddenPages:
    """``store`` without what :attr:`hidden` names (see the module)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.hidden = NOTHING

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _seen(
        self,
        hits: list,
        k: int,
        page: Any = lambda hit: hit.element.page,
        element: Any = lambda hit: hit.element.id,
    ) -> list:
        hidden = self.hidden
        return [h for h in hits if not hidden.hides(page(h), element(h) if element else None)][:k]

    def search_text(self, query: str, k: int = 100, filters: Filters | None = None) -> list:
        return self._seen(self._store.search_text(query, k * OVER_ASK, filters), k)

    def search_vector(self, vector: np.ndarray, k: int = 100, filters: Filters | None = None):
        return self._seen(self._store.search_vector(vector, k * OVER_ASK, filters), k)

    # The stores' own hybrid search (fusing as Elasticsearch does) over this view's parts.
    search_hybrid = Store.search_hybrid

    def _hybrid_parts(
        self, text: str, vector: np.ndarray, k: int, filters: Filters | None, weights: HybridWeights
    ) -> HybridParts | list:
        parts = self._store._hybrid_parts(text, vector, k * OVER_ASK, filters, weights)
        if isinstance(parts, list):  # the store fused them itself
            return self._seen(parts, k)
        text_hits, vector_hits = (self._seen(part, len(part)) for part in parts)
        return text_hits, vector_hits

    def search_cells(self, query: str, k: int = 100, filters: Filters | None = None) -> list:
        hits = self._store.search_cells(query, k * OVER_ASK, filters)
        return self._seen(hits, k, lambda hit: hit.page, lambda hit: hit.id)

    def search_cell_tables(self, query: str, k: int = 100, filters: Filters | None = None):
        tables = self._store.search_cell_tables(query, k * OVER_ASK, filters)
        return self._seen(tables, k, lambda key: key[0], None)

    def search_tables(self, query: str, k: int = 10, tables: Sequence = ()) -> list:
        found = self._store.search_tables(query, k * OVER_ASK, tables)
        return self._seen(found, k, lambda item: item[0][0], None)

    def search_pages_text(self, query: str, k: int = 10) -> list:
        found = self._store.search_pages_text(query, k * OVER_ASK)
        return self._seen(found, k, lambda hit: hit.page.title, None)

    def search_pages_vector(self, vector: np.ndarray, k: int = 10) -> list:
        found = self._store.search_pages_vector(vector, k * OVER_ASK)
        return self._seen(found, k, lambda hit: hit.page.title, None)

    def get_elements(self, ids: Sequence[str]) -> list:
        return [e for e in self._store.get_elements(ids) if not self.hidden.hides(e.page, e.id)]

    def page_elements(self, page: str, table: int | None = None) -> list:
        found = self._store.page_elements(page, table) if not self.hidden.hides(page) else []
        return [e for e in found if not self.hidden.hides(page, e.id)]

    def get_pages(self, titles: Sequence[str]) -> list:
        return [p for p in self._store.get_pages(titles) if not self.hidden.hides(p.title)]

    def match_titles(self, keys: Sequence[str]) -> dict[str, list[str]]:
        found = {
            key: [title for title in titles if not self.hidden.hides(title)]
            for key, titles in self._store.match_titles(keys).items()
        }
        return {key: titles for key, titles in found.items() if titles}
