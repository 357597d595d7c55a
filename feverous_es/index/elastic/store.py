"""The Elasticsearch store: :class:`ElasticStore` reads; builds are written by
:class:`~feverous_es.index.elastic.writer.ElasticWriter` (versions in :mod:`.builds`).

A build writes into versioned indices ``<prefix>-elements-v<N>``, ``<prefix>-pages-v<N>`` and
``<prefix>-tables-v<N>``, created with ``refresh_interval: -1`` and no replicas. The build state
(next chunk, last dump rowid, counts, complete) lives in the elements index's mappings ``_meta``
and advances only after every document of a chunk is acknowledged; documents carry the chunk
``seq`` that wrote them, so a failed or killed chunk is deleted (``seq >= next_seq``) before the
build goes on. ``finish`` refreshes, checks that the indices hold exactly the documents the state
counts, merges each shard to ``merge_segments`` segments, restores refresh and replicas, marks
the build complete and moves the three aliases to the new indices in one atomic request. Readers
only ever use the aliases, so they see the previous build until then.

Opening a writer continues the newest version when it is unfinished (or finished but not yet
behind the aliases); a finished, published build is left alone (``feverous-es es new-build``
starts version N+1).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
from elasticsearch import AuthorizationException, Elasticsearch, NotFoundError

from feverous_es.errors import StoreError
from feverous_es.index.elastic import queries
from feverous_es.index.elastic.builds import build_meta, state_from_meta
from feverous_es.index.elastic.client import connect
from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elastic.documents import (
    CELL_FIELDS,
    cell_hit_from_source,
    doc_id,
    element_from_source,
    page_from_source,
)
from feverous_es.index.elastic.errors import elastic_errors, item_reason
from feverous_es.index.elements import Element, ElementType, PageRecord
from feverous_es.index.store import (
    EQUAL_WEIGHTS,
    BuildState,
    CellHit,
    Filters,
    Hit,
    HybridParts,
    HybridWeights,
    PageHit,
    Store,
    TableKey,
    fuse_hybrid,
)

_log = logging.getLogger(__name__)
# Elements that share their vector with others: the cells of one table row.
_ROW_TYPES = (ElementType.CELL, ElementType.HEADER_CELL)
_MGET_BATCH = 1000
_MSEARCH_BATCH = 100
_MAX_TITLE_HITS = 10_000


def _vector(vector: np.ndarray, dim: int) -> np.ndarray | None:
    """The query vector as sent; None for an all-zero one: it has no direction, so nothing is
    near it (a real node refuses it for a cosine field with 400)."""
    query = np.asarray(vector, dtype=np.float32).ravel()
    if query.shape != (dim,):
        raise StoreError(
            f"the query vector has {query.shape[0]} dimensions, the index {dim}: "
            "the embedder does not match the index"
        )
    return query if np.any(query) else None


def whole(response: Mapping[str, Any]) -> Mapping[str, Any]:
    """``response`` when every shard answered in time; a partial answer (failed shards or a
    timeout) would pass as a whole one, so it is an error."""
    shards = response.get("_shards") or {}
    failed = int(shards.get("failed", 0) or 0)
    if failed or response.get("timed_out"):
        reasons = [
            str((failure.get("reason") or {}).get("reason", failure.get("reason", "")))
            for failure in shards.get("failures", [])
        ]
        what = f"{failed} of {shards.get('total', '?')} shards failed" if failed else "timed out"
        detail = f" ({reasons[0][:200]})" if reasons else ""
        raise StoreError(f"search failed: {what}{detail}; a partial answer is not used")
    return response


def _scores(response: Mapping[str, Any], cosine: bool) -> Iterator[tuple[dict, float]]:
    """Each hit's source and score (kNN scores as cosine similarity)."""
    for hit in response["hits"]["hits"]:
        score = float(hit.get("_score") or 0.0)
        yield hit["_source"], queries.cosine_from_score(score) if cosine else score


def _hits(response: Mapping[str, Any], cosine: bool = False) -> list[Hit]:
    return [Hit(element_from_source(source), score) for source, score in _scores(response, cosine)]


def _named_parts(
    response: Mapping[str, Any], weights: HybridWeights
) -> tuple[list[Hit], list[Hit]]:
    """A ``knn_query`` hybrid answer split into its BM25 hits and its kNN hits (cosine, best
    first), from each hit's named part scores (boosts divided out)."""
    text: list[Hit] = []
    vector: list[Hit] = []
    for hit in response["hits"]["hits"]:
        element = element_from_source(hit["_source"])
        parts = hit.get("matched_queries") or {}
        if queries.TEXT_PART in parts and weights.text:
            text.append(Hit(element, float(parts[queries.TEXT_PART]) / weights.text))
        if queries.VECTOR_PART in parts and weights.vector:
            score = float(parts[queries.VECTOR_PART]) / weights.vector
            vector.append(Hit(element, queries.cosine_from_score(score)))
    vector.sort(key=lambda hit: -hit.score)
    return text, vector


def _page_hits(response: Mapping[str, Any], cosine: bool = False) -> list[PageHit]:
    return [PageHit(page_from_source(src), score) for src, score in _scores(response, cosine)]


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class ElasticStore(Store):
    """Read side of the Elasticsearch store: everything goes through the aliases, so a reader
    sees the last published build. Works with a key that may only read the aliases."""

    def __init__(self, config: ElasticConfig, client: Elasticsearch | None = None) -> None:
        self.config = config
        self._own_client = client is None
        self._client = client if client is not None else connect(config)
        self.elements = config.elements_alias
        self.pages = config.pages_alias
        self.tables = config.tables_alias
        self._has_tables = False
        try:
            self._meta = self._open()
        except BaseException:
            self.close()
            raise
        self.dim = int(self._meta.get("dim", config.dims)) if self._meta else config.dims
        self.concurrent_claims = config.search_workers

    def _open(self) -> dict[str, Any] | None:
        with elastic_errors(self.config, "cannot open the Elasticsearch store"):
            try:
                self._client.count(index=self.elements)
                self._client.count(index=self.pages)
            except NotFoundError:
                raise StoreError(
                    f"no index behind the aliases {self.elements} / {self.pages} at "
                    f"{self.config.display_url}: build one with "
                    "`feverous-es index WIKI_DB --store elasticsearch`"
                ) from None
            # A build published before the table index existed has none, and a reader key
            # made before then may not read it: table search then finds nothing.
            with contextlib.suppress(NotFoundError, AuthorizationException):
                self._client.count(index=self.tables)
                self._has_tables = True
            if not self._has_tables:
                _log.warning(
                    "%s is missing or not readable: tables rank without whole-table BM25 "
                    "(publish a new build, or make a new reader key)",
                    self.tables,
                )
            return self._read_meta()

    def _read_meta(self) -> dict[str, Any] | None:
        """The build ``_meta`` behind the elements alias; None for a key that may not read
        mappings (it lacks view_index_metadata)."""
        try:
            body = self._client.indices.get_mapping(index=self.elements).body
        except AuthorizationException:
            return None
        for mappings in body.values():
            meta = build_meta(mappings.get("mappings", {}))
            if meta is not None:
                return meta
        return None

    def state(self) -> BuildState:
        with elastic_errors(self.config):
            meta = self._read_meta()
            if meta is not None:
                return state_from_meta(meta)
            # Aliases point only at complete builds.
            return BuildState(
                elements=int(self._client.count(index=self.elements)["count"]),
                pages=int(self._client.count(index=self.pages)["count"]),
                complete=True,
            )

    def ping(self, timeout: float) -> None:
        # One count on the elements alias: what a reader key may do, and it proves the alias
        # still points at an index. No retries: a probe reports, the next probe tries again.
        with elastic_errors(self.config):
            self._client.options(request_timeout=timeout, max_retries=0).count(index=self.elements)

    def close(self) -> None:
        if self._own_client and self._client is not None:
            self._client.close()
            self._client = None  # type: ignore[assignment]

    # Requests.

    def _search(
        self, index: str, body: Mapping[str, Any], hit_keys: Sequence[str] = ()
    ) -> Mapping[str, Any]:
        """The response to ``body``; with ``hit_keys``, each hit holds only those keys (a
        thousands-hit answer then costs less to send and to parse)."""
        keep = ["timed_out", "_shards", *(f"hits.hits.{key}" for key in hit_keys)]
        with elastic_errors(self.config, "search failed"):
            response = self._client.search(
                index=index, body=dict(body), filter_path=keep if hit_keys else None
            )
            answer = whole(response.body)
        if hit_keys:  # the filter drops an empty hit list along with "hits"
            return {**answer, "hits": {"hits": answer.get("hits", {}).get("hits", [])}}
        return answer

    def _msearch(
        self, index: str, bodies: Sequence[Mapping[str, Any]], named_scores: bool = False
    ) -> list[Mapping[str, Any]]:
        """Responses to ``bodies``, sent as ``_msearch`` requests of up to 100 searches;
        ``named_scores``: each hit's named query parts with their scores."""
        out: list[Mapping[str, Any]] = []
        with elastic_errors(self.config, "search failed"):
            for batch in _batches(bodies, _MSEARCH_BATCH):
                searches = queries.msearch_body(index, batch)
                # None: the parameter is not sent
                response = self._client.msearch(
                    searches=searches, include_named_queries_score=named_scores or None
                )
                for item in response["responses"]:
                    if "error" in item:
                        raise StoreError(f"search failed: {item_reason(item['error'])}")
                    out.append(whole(item))
        return out

    def _mget(self, index: str, keys: Sequence[str]) -> list[dict[str, Any]]:
        sources: list[dict[str, Any]] = []
        with elastic_errors(self.config):
            for batch in _batches(list(keys), _MGET_BATCH):
                response = self._client.mget(index=index, ids=[doc_id(key) for key in batch])
                sources.extend(doc["_source"] for doc in response["docs"] if doc.get("found"))
        return sources

    # Elements and pages by key.

    def get_elements(self, ids: Sequence[str]) -> list[Element]:
        found = {e.id: e for e in map(element_from_source, self._mget(self.elements, ids))}
        return [found[element_id] for element_id in ids if element_id in found]

    def page_elements(self, page: str, table: int | None = None) -> list[Element]:
        elements: list[Element] = []
        after: int | None = None
        while True:
            body = queries.page_elements_search(page, queries.PAGE_SIZE, after, table)
            hits = self._search(self.elements, body)["hits"]["hits"]
            elements.extend(element_from_source(hit["_source"]) for hit in hits)
            if len(hits) < queries.PAGE_SIZE:
                return elements
            after = int(hits[-1]["sort"][0])

    def get_pages(self, titles: Sequence[str]) -> list[PageRecord]:
        found = {p.title: p for p in map(page_from_source, self._mget(self.pages, titles))}
        return [found[title] for title in titles if title in found]

    def match_titles(self, keys: Sequence[str]) -> dict[str, list[str]]:
        wanted = set(keys)
        if not wanted:
            return {}
        body = queries.title_keys_search(sorted(wanted), _MAX_TITLE_HITS)
        response = self._search(self.pages, body)
        out: dict[str, list[str]] = {}
        for hit in response["hits"]["hits"]:
            source = hit["_source"]
            hit_keys = source.get("title_keys", [])
            for key in [hit_keys] if isinstance(hit_keys, str) else hit_keys:
                if key in wanted:
                    out.setdefault(key, []).append(source["title"])
        return {key: out[key] for key in keys if key in out}

    # Element search.

    def search_text(self, query: str, k: int = 100, filters: Filters | None = None) -> list[Hit]:
        if k <= 0 or not query.strip():
            return []
        return _hits(self._search(self.elements, queries.text_search(query, k, filters)))

    def search_cells(
        self, query: str, k: int = 100, filters: Filters | None = None
    ) -> list[CellHit]:
        if k <= 0 or not query.strip():
            return []
        body = {**queries.text_search(query, k, filters), "_source": list(CELL_FIELDS)}
        response = self._search(self.elements, body, ("_score", "_source"))
        return [
            cell_hit_from_source(hit["_source"], float(hit.get("_score") or 0.0))
            for hit in response["hits"]["hits"]
            if hit["_source"].get("table") is not None
        ]

    def search_cell_tables(
        self, query: str, k: int = 100, filters: Filters | None = None
    ) -> list[TableKey]:
        if k <= 0 or not query.strip():
            return []
        body = queries.cell_tables_search(query, k, filters)
        response = self._search(self.elements, body, ("fields",))
        tables: dict[TableKey, None] = {}  # hits come best first: a table's first is its best
        for hit in response["hits"]["hits"]:
            fields = hit["fields"]
            if "table" in fields:
                tables[(fields["page"][0], int(fields["table"][0]))] = None
        return list(tables)

    def search_vector(
        self, vector: np.ndarray, k: int = 100, filters: Filters | None = None
    ) -> list[Hit]:
        """Top-``k`` elements by cosine: the best vectors, each table row's expanded to its
        elements (see :meth:`_expand_rows`)."""
        query = _vector(vector, self.dim)
        if k <= 0 or query is None:
            return []
        body = queries.vector_search(query, k, self.config, filters)
        hits = _hits(self._search(self.elements, body), cosine=True)
        return self._expand_rows([hits], k, filters)[0]

    def _hybrid_parts(
        self, text: str, vector: np.ndarray, k: int, filters: Filters | None, weights: HybridWeights
    ) -> HybridParts | list[Hit]:
        return self._hybrid_batch_parts([(text, vector)], k, filters, weights)[0]

    def search_text_batch(
        self, texts: Sequence[str], k: int = 100, filters: Filters | None = None
    ) -> list[list[Hit]]:
        """BM25 for many queries (claims) in ``_msearch`` requests."""
        if k <= 0:
            return [[] for _ in texts]
        bodies = [queries.text_search(text, k, filters) for text in texts]
        return [_hits(response) for response in self._msearch(self.elements, bodies)]

    def search_hybrid_batch(
        self,
        requests: Sequence[tuple[str, np.ndarray]],
        k: int = 100,
        filters: Filters | None = None,
        weights: HybridWeights = EQUAL_WEIGHTS,
    ) -> list[list[Hit]]:
        """:meth:`search_hybrid` for many (query, vector) pairs, in ``_msearch`` requests."""
        if k <= 0:
            return [[] for _ in requests]
        return [
            parts if isinstance(parts, list) else fuse_hybrid(*parts, weights, k)
            for parts in self._hybrid_batch_parts(requests, k, filters, weights)
        ]

    def _hybrid_batch_parts(
        self,
        requests: Sequence[tuple[str, np.ndarray]],
        k: int,
        filters: Filters | None,
        weights: HybridWeights,
    ) -> list[HybridParts | list[Hit]]:
        """Each request's parts, scored as Elasticsearch scores ``query`` + ``knn``:
        ``knn_query`` sends one search each and reads its text and vector parts apart,
        ``msearch`` a BM25 and a kNN search each; either way the vector part of a table row then
        reaches all its cells (:meth:`_expand_rows`) before the parts are fused. ``rrf`` /
        ``linear`` (Enterprise) send their retriever and take its ranking as it is."""
        pairs = [(text, _vector(vector, self.dim)) for text, vector in requests]
        config = self.config
        if config.hybrid in ("rrf", "linear"):
            bodies = [
                queries.hybrid_search(text, vector, k, config, filters, weights)
                for text, vector in pairs
            ]
            return [_hits(response) for response in self._msearch(self.elements, bodies)]
        text_lists: list[list[Hit]] = []
        vector_lists: list[list[Hit]] = []
        if config.hybrid == "msearch":
            bodies = []
            for text, vector in pairs:
                bodies.append(queries.text_search(text, k, filters))
                if vector is not None:
                    bodies.append(queries.vector_search(vector, k, config, filters))
            responses = iter(self._msearch(self.elements, bodies))
            for _, vector in pairs:
                text_lists.append(_hits(next(responses)))
                vector_lists.append(
                    _hits(next(responses), cosine=True) if vector is not None else []
                )
        else:
            bodies = [
                queries.hybrid_search(text, vector, k, config, filters, weights)
                for text, vector in pairs
            ]
            for response in self._msearch(self.elements, bodies, named_scores=True):
                text_hits, vector_hits = _named_parts(response, weights)
                text_lists.append(text_hits)
                vector_lists.append(vector_hits)
        expanded = self._expand_rows(vector_lists, k, filters)
        return list(zip(text_lists, expanded, strict=True))

    def _expand_rows(
        self, ranked: Sequence[Sequence[Hit]], k: int, filters: Filters | None
    ) -> list[list[Hit]]:
        """Each list of kNN hits with every table row's hit replaced by the row's elements that
        pass ``filters`` (in page order, with the row's score), the first hit of a vector key
        only, cut to ``k``: a row's vector is stored once (on its first element), and each
        row counts once however many of its cells carry the vector (builds before format 3),
        as the embedded store ranks. One ``_msearch`` fetches the rows of all lists."""
        rows = [
            sorted({hit.element.vector_key for hit in hits if hit.element.type in _ROW_TYPES})
            for hits in ranked
        ]
        bodies = [queries.row_elements_search(keys, filters) for keys in rows if keys]
        responses = iter(self._msearch(self.elements, bodies))
        out = []
        for hits, keys in zip(ranked, rows, strict=True):
            members: dict[str, list[Element]] = {}
            for hit in next(responses)["hits"]["hits"] if keys else ():
                element = element_from_source(hit["_source"])
                members.setdefault(element.vector_key, []).append(element)
            seen: set[str] = set()
            expanded: list[Hit] = []
            for hit in sorted(hits, key=lambda hit: -hit.score):
                key = hit.element.vector_key
                if key in seen:
                    continue
                seen.add(key)
                if hit.element.type in _ROW_TYPES:
                    expanded.extend(Hit(element, hit.score) for element in members.get(key, ()))
                else:
                    expanded.append(hit)
            out.append(expanded[:k])
        return out

    # Table search.

    def search_tables(
        self, query: str, k: int = 10, tables: Sequence[TableKey] = ()
    ) -> list[tuple[TableKey, float]]:
        """Whole tables (title, caption and every cell as one document) by BM25, best first:
        ``((page, table), score)``; ``tables`` restricts the search to those tables. Empty when
        the published build has no table index this client may read."""
        if k <= 0 or not query.strip() or not self._has_tables:
            return []
        response = self._search(self.tables, queries.table_search(query, k, tables))
        return [
            ((hit["_source"]["page"], int(hit["_source"]["table"])), float(hit["_score"] or 0.0))
            for hit in response["hits"]["hits"]
        ]

    # Page search.

    def search_pages_text(self, query: str, k: int = 10) -> list[PageHit]:
        if k <= 0 or not query.strip():
            return []
        return _page_hits(self._search(self.pages, queries.page_text_search(query, k)))

    def search_pages_vector(self, vector: np.ndarray, k: int = 10) -> list[PageHit]:
        query = _vector(vector, self.dim)
        if k <= 0 or query is None:
            return []
        body = queries.page_vector_search(query, k, self.config)
        return _page_hits(self._search(self.pages, body), cosine=True)
