"""The store interface: what the index build writes and what the claim pipeline reads.

Two stores implement it: the embedded one (tantivy + vectors on local disk, no server) and the
Elasticsearch one. Everything above this interface is shared by both.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from feverous_es.index.elements import Element, ElementType, PageRecord


@dataclass(frozen=True, slots=True)
class Filters:
    """Restricts a search; empty fields do not filter. Fields combine with AND, values with OR."""

    pages: tuple[str, ...] = ()
    types: tuple[ElementType, ...] = ()
    tables: tuple[tuple[str, int], ...] = ()  # (page, table index)

    def __bool__(self) -> bool:
        return bool(self.pages or self.types or self.tables)


@dataclass(frozen=True, slots=True, kw_only=True)
class HybridWeights:
    """Hybrid score = text * BM25 + vector * (1 + cos) / 2, as Elasticsearch scores a request
    with both ``query`` and ``knn``; an element found by one side only gets that side's part."""

    text: float = 1.0
    vector: float = 1.0


EQUAL_WEIGHTS = HybridWeights()  # every search's default (one frozen instance, shared)


@dataclass(frozen=True, slots=True)
class Hit:
    element: Element
    score: float


@dataclass(frozen=True, slots=True)
class PageHit:
    page: PageRecord
    score: float


TableKey = tuple[str, int]  # (page, table index)


@dataclass(frozen=True, slots=True)
class CellHit:
    """A BM25 hit among a table's elements with what ranking tables reads of it. A claim's
    table ranking reads thousands of hits: the rest of each :class:`Element` (links, context,
    linearization, vector key) is fetched only for the few cells it keeps."""

    id: str
    page: str
    type: ElementType
    table: int
    row: int | None
    column: int | None
    text: str
    score: float

    @property
    def key(self) -> TableKey:
        return (self.page, self.table)


@dataclass(slots=True)
class Chunk:
    """One atomic write: the elements and pages read from a run of consecutive wiki rows.

    ``vectors`` holds one row per distinct ``vector_key`` of ``elements``, in the order the keys
    first appear; ``page_vectors`` one row per page record.
    """

    seq: int
    last_rowid: int
    elements: list[Element]
    vectors: np.ndarray
    pages: list[PageRecord]
    page_vectors: np.ndarray
    malformed: list[str] = field(default_factory=list)

    def table_texts(self) -> dict[TableKey, str]:
        """The whole-table documents of the chunk's tables (a page never spans two chunks)."""
        return table_texts((e.page, e.table, e.text) for e in self.elements)


@dataclass(frozen=True, slots=True)
class BuildState:
    """Where a build stands: the next chunk to write and the wiki rowid to read after."""

    next_seq: int = 0
    last_rowid: int = 0
    elements: int = 0
    pages: int = 0
    malformed: int = 0
    complete: bool = False


# A hybrid search's two parts before fusion: the BM25 hits, then the kNN hits.
HybridParts = tuple[list["Hit"], list["Hit"]]


class Store(Protocol):
    """Read side. Both stores subclass it, and inherit :meth:`search_hybrid`."""

    dim: int
    # How many claims the pipeline may retrieve at once through this store (threads sharing
    # it): more than 1 only where searches run outside this process's interpreter lock.
    concurrent_claims: int

    def search_text(
        self, query: str, k: int = 100, filters: Filters | None = None
    ) -> list[Hit]: ...

    def search_vector(
        self, vector: np.ndarray, k: int = 100, filters: Filters | None = None
    ) -> list[Hit]: ...

    def search_hybrid(
        self,
        query: str,
        vector: np.ndarray,
        k: int = 100,
        filters: Filters | None = None,
        weights: HybridWeights = EQUAL_WEIGHTS,
    ) -> list[Hit]:
        """BM25 and the vector's nearest neighbours fused as Elasticsearch scores ``query`` +
        ``knn`` (:func:`fuse_hybrid`), or as the store ranked them itself (an Elasticsearch
        retriever). Both stores inherit this; each finds the parts (:meth:`_hybrid_parts`)."""
        if k <= 0:
            return []
        parts = self._hybrid_parts(query, vector, k, filters, weights)
        return parts if isinstance(parts, list) else fuse_hybrid(*parts, weights, k)

    def _hybrid_parts(
        self, text: str, vector: np.ndarray, k: int, filters: Filters | None, weights: HybridWeights
    ) -> HybridParts | list[Hit]:
        """A hybrid search's BM25 hits and kNN hits (cosine as the score), best first; or the
        whole ranking where the store fuses them itself."""
        ...

    def search_cells(
        self, query: str, k: int = 100, filters: Filters | None = None
    ) -> list[CellHit]:
        """:meth:`search_text`'s hits that belong to a table (cells, header cells, captions;
        let ``filters`` name those types), in its order and with its scores."""
        ...

    def search_cell_tables(
        self, query: str, k: int = 100, filters: Filters | None = None
    ) -> list[TableKey]:
        """The tables of :meth:`search_cells`' hits, each once, in the order of its best hit:
        what picks a pool of tables, read without the hits' texts."""
        ...

    def get_elements(self, ids: Sequence[str]) -> list[Element]: ...

    def page_elements(self, page: str, table: int | None = None) -> list[Element]:
        """A page's elements in page order; with ``table``, only that table's (its caption,
        header cells and cells)."""
        ...

    def get_pages(self, titles: Sequence[str]) -> list[PageRecord]: ...

    def match_titles(self, keys: Sequence[str]) -> dict[str, list[str]]:
        """For each key (as :func:`~feverous_es.index.elements.title_keys` makes them) that
        names pages, those pages' titles."""
        ...

    def search_pages_text(self, query: str, k: int = 10) -> list[PageHit]: ...

    def search_pages_vector(self, vector: np.ndarray, k: int = 10) -> list[PageHit]: ...

    def state(self) -> BuildState: ...

    def ping(self, timeout: float) -> None:
        """Return once the store answers a cheap query within ``timeout`` seconds; raise
        :class:`~feverous_es.errors.StoreError` otherwise. Safe to call from another thread
        while the pipeline searches (a readiness probe does)."""
        ...

    def close(self) -> None: ...


def table_texts(parts: Iterable[tuple[str, int | None, str]]) -> dict[TableKey, str]:
    """The text of each table's whole-table document, from its elements' ``(page, table, raw
    text)`` in page order: the page title, then the caption and the cells as they come. Both
    stores index this text; elements outside tables (``table`` None) are passed over."""
    texts: dict[TableKey, list[str]] = {}
    for page, table, text in parts:
        if table is not None:
            texts.setdefault((page, table), [page]).append(text)
    return {key: " ".join(words) for key, words in texts.items()}


@runtime_checkable
class TableSearch(Protocol):
    """Whole-table BM25 (title, caption and every cell as one document, see
    :func:`table_texts`). Both stores have it; an Elasticsearch build published before the
    table index existed answers no tables."""

    def search_tables(
        self, query: str, k: int = 10, tables: Sequence[TableKey] = ()
    ) -> list[tuple[TableKey, float]]: ...


class StoreWriter(Protocol):
    """Write side. ``write`` is all-or-nothing: after a crash, ``state()`` names the last chunk
    that is wholly in the store, and nothing of a later chunk is visible."""

    @property
    def destination(self) -> str:
        """Where the build goes, as a user reads it (a directory, or a cluster and build)."""
        ...

    def state(self) -> BuildState: ...

    def write(self, chunk: Chunk) -> None: ...

    def finish(self) -> list[str]:
        """Publish the build, or (one part of a build written in parts) mark this part complete
        and publish when it was the last; the parts still missing (none once published)."""
        ...

    def close(self) -> None: ...


def fuse_hybrid(
    text_hits: Sequence[Hit], vector_hits: Sequence[Hit], weights: HybridWeights, k: int
) -> list[Hit]:
    """Elasticsearch's ``query`` + ``knn`` scoring, done client-side. ``vector_hits`` carry cosine
    similarity as their score."""
    scores: dict[str, float] = {}
    elements: dict[str, Element] = {}
    for hit in text_hits:
        scores[hit.element.id] = weights.text * hit.score
        elements[hit.element.id] = hit.element
    for hit in vector_hits:
        part = weights.vector * (1.0 + hit.score) / 2.0
        scores[hit.element.id] = scores.get(hit.element.id, 0.0) + part
        elements.setdefault(hit.element.id, hit.element)
    ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)[:k]
    return [Hit(elements[element_id], score) for element_id, score in ranked]
