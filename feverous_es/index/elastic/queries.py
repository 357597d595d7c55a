"""Search request bodies: BM25, kNN with filters and hybrid retrieval, all on the basic licence.

Hybrid retrieval is, by ``ElasticConfig.hybrid``:

* ``knn_query`` (default): one request with both ``query`` and ``knn``; Elasticsearch sums
  ``text * BM25 + vector * (1 + cos) / 2`` (the boosts are :class:`HybridWeights`);
* ``msearch``: a BM25 and a kNN search in one ``_msearch``, fused client-side by the same formula
  (:func:`~feverous_es.index.store.fuse_hybrid`);
* ``rrf`` / ``linear``: the retrievers of those names. They need an Enterprise licence (a basic
  cluster answers 403), so they are used only when configured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elastic.documents import VECTOR, table_id
from feverous_es.index.elements import ElementType
from feverous_es.index.store import EQUAL_WEIGHTS, Filters, HybridWeights, TableKey

MAX_CANDIDATES = 10_000
MIN_CANDIDATES = 100
# index.max_result_window: a search asking for more hits is refused (400).
MAX_RESULT_WINDOW = 10_000
# Hits per page of a scroll or a search_after walk.
PAGE_SIZE = 5000
ELEMENT_TEXT_FIELD = "linearized"
TABLE_TEXT_FIELD = "text"
PAGE_TEXT_FIELDS = ("title.analyzed", "intro")

# The names of a hybrid request's parts (see hybrid_search).
TEXT_PART = "text"
VECTOR_PART = "vector"
# A table row's elements fetched per kNN hit at most (rows rarely have more cells).
MAX_ROW_ELEMENTS = 64

Body = dict[str, Any]


def filter_clauses(filters: Filters | None, vectors: bool = False) -> list[Body]:
    """Non-scoring clauses for ``filters``: fields combine with AND, values with OR. For a kNN
    search (``vectors``) a type matches the element carrying a vector or any element sharing it
    (``vector_types``): a table row is found by the types of all its cells."""
    if not filters:
        return []
    clauses: list[Body] = []
    if filters.pages:
        clauses.append({"terms": {"page": list(filters.pages)}})
    if filters.types:
        types: Body = {"terms": {"type": [ElementType(t).value for t in filters.types]}}
        if vectors:
            # `type` too: builds before format 3 have a vector on every element and no
            # vector_types.
            shared = {"terms": {"vector_types": types["terms"]["type"]}}
            types = {"bool": {"should": [types, shared], "minimum_should_match": 1}}
        clauses.append(types)
    if filters.tables:
        clauses.append(
            {
                "bool": {
                    "should": [
                        {"bool": {"filter": [{"term": {"page": page}}, {"term": {"table": table}}]}}
                        for page, table in filters.tables
                    ],
                    "minimum_should_match": 1,
                }
            }
        )
    return clauses


def result_size(k: int) -> int:
    """``k`` as a search's ``size``: at most what the index lets one search return."""
    return min(k, MAX_RESULT_WINDOW)


def num_candidates(k: int, config: ElasticConfig) -> int:
    return max(k, min(MAX_CANDIDATES, max(MIN_CANDIDATES, config.num_candidates_factor * k)))


def _vector_list(vector: np.ndarray) -> list[float]:
    return np.asarray(vector, dtype=np.float32).ravel().tolist()


def knn_clause(
    vector: np.ndarray,
    k: int,
    config: ElasticConfig,
    filters: Filters | None = None,
    boost: float | None = None,
    name: str | None = None,
) -> Body:
    k = min(k, MAX_CANDIDATES)
    clause: Body = {
        "field": VECTOR,
        "query_vector": _vector_list(vector),
        "k": k,
        "num_candidates": num_candidates(k, config),
    }
    clauses = filter_clauses(filters, vectors=True)
    if clauses:
        clause["filter"] = clauses
    if boost is not None:
        clause["boost"] = boost
    if name is not None:
        clause["_name"] = name
    return clause


def _match(query: str, boost: float | None = None, name: str | None = None) -> Body:
    match: Body = {"query": query}
    if boost is not None:
        match["boost"] = boost
    if name is not None:
        match["_name"] = name
    return {"match": {ELEMENT_TEXT_FIELD: match}}


def text_query(
    query: str,
    filters: Filters | None = None,
    boost: float | None = None,
    name: str | None = None,
) -> Body:
    clauses = filter_clauses(filters)
    if not clauses:
        return _match(query, boost, name)
    return {"bool": {"must": [_match(query, boost, name)], "filter": clauses}}


def text_search(query: str, k: int, filters: Filters | None = None) -> Body:
    """BM25 over the linearizations."""
    return {"size": result_size(k), "query": text_query(query, filters), "track_total_hits": False}


def cell_tables_search(query: str, k: int, filters: Filters | None = None) -> Body:
    """:func:`text_search` answering each hit's page and table from doc values: no stored
    field is read (loading ``_id`` and ``_source`` cost two thirds of a 2,000-hit search)."""
    return {
        **text_search(query, k, filters),
        "_source": False,
        "stored_fields": "_none_",
        "docvalue_fields": ["page", "table"],
    }


def vector_search(
    vector: np.ndarray, k: int, config: ElasticConfig, filters: Filters | None = None
) -> Body:
    """Approximate kNN (HNSW) with the filters applied during the search, not after it."""
    return {
        "size": result_size(k),
        "knn": knn_clause(vector, k, config, filters),
        "track_total_hits": False,
    }


def hybrid_search(
    query: str,
    vector: np.ndarray | None,
    k: int,
    config: ElasticConfig,
    filters: Filters | None = None,
    weights: HybridWeights = EQUAL_WEIGHTS,
) -> Body:
    """One request with ``query`` and ``knn`` (``knn_query``), or a retriever (``rrf`` /
    ``linear``, Enterprise licence only). ``msearch`` mode uses :func:`text_search` and
    :func:`vector_search` instead. With no ``vector`` (an all-zero one has no direction) the
    text part alone."""
    if vector is None:
        return {
            "size": result_size(k),
            "query": text_query(query, filters, boost=weights.text, name=TEXT_PART),
            "track_total_hits": False,
        }
    if config.hybrid in ("rrf", "linear"):
        text: Body = {"standard": {"query": text_query(query, filters)}}
        knn: Body = {"knn": knn_clause(vector, k, config, filters)}
        if config.hybrid == "linear":
            text = {"retriever": text, "weight": weights.text}
            knn = {"retriever": knn, "weight": weights.vector}
        retriever = {"retrievers": [text, knn], "rank_window_size": max(k, MIN_CANDIDATES)}
        return {"size": result_size(k), "retriever": {config.hybrid: retriever}}
    # Named parts: each hit's text and vector scores come back apart
    # (include_named_queries_score), so a row's vector part can reach all its cells.
    return {
        "size": result_size(k),
        "query": text_query(query, filters, boost=weights.text, name=TEXT_PART),
        "knn": knn_clause(vector, k, config, filters, boost=weights.vector, name=VECTOR_PART),
        "track_total_hits": False,
    }


def msearch_body(index: str, bodies: Sequence[Body]) -> list[Body]:
    """The ``searches`` of one ``_msearch``: a header naming the index before each body."""
    searches: list[Body] = []
    for body in bodies:
        searches.append({"index": index})
        searches.append(body)
    return searches


def page_text_search(query: str, k: int) -> Body:
    """BM25 over page title (English-analyzed) and intro, scores summed as the embedded store
    sums them."""
    return {
        "size": result_size(k),
        "query": {
            "multi_match": {"query": query, "fields": list(PAGE_TEXT_FIELDS), "type": "most_fields"}
        },
        "track_total_hits": False,
    }


def page_vector_search(vector: np.ndarray, k: int, config: ElasticConfig) -> Body:
    return {"size": result_size(k), "knn": knn_clause(vector, k, config), "track_total_hits": False}


def table_search(query: str, k: int, tables: Sequence[TableKey] = ()) -> Body:
    """BM25 over whole tables; ``tables`` restricts it to those (a filter: the scores stay
    those of a search over all tables)."""
    match: Body = {"match": {TABLE_TEXT_FIELD: {"query": query}}}
    if tables:
        ids = [table_id(page, table) for page, table in tables]
        match = {"bool": {"must": [match], "filter": [{"terms": {"id": ids}}]}}
    return {
        "size": result_size(k),
        "query": match,
        "_source": ["page", "table"],
        "track_total_hits": False,
    }


def row_elements_search(keys: Sequence[str], filters: Filters | None = None) -> Body:
    """The elements sharing the vectors ``keys`` (the cells of table rows), in page order."""
    return {
        "size": result_size(MAX_ROW_ELEMENTS * len(keys)),
        "query": {"bool": {"filter": [{"terms": {"vector_key": list(keys)}},
                                      *filter_clauses(filters)]}},
        "sort": [{"ord": "asc"}],
        "track_total_hits": False,
    }  # fmt: skip


def page_elements_search(
    page: str, size: int, after: int | None = None, table: int | None = None
) -> Body:
    """One page of a page's elements (or of one of its tables) in insertion order
    (``search_after`` on ``ord``)."""
    clauses: list[Body] = [{"term": {"page": page}}]
    if table is not None:
        clauses.append({"term": {"table": table}})
    body: Body = {
        "size": size,
        "query": {"bool": {"filter": clauses}},
        "sort": [{"ord": "asc"}],
        "track_total_hits": False,
    }
    if after is not None:
        body["search_after"] = [after]
    return body


def title_keys_search(keys: Sequence[str], size: int) -> Body:
    return {
        "size": size,
        "query": {"bool": {"filter": [{"terms": {"title_keys": list(keys)}}]}},
        "_source": ["title", "title_keys"],
        "sort": [{"ord": "asc"}],
        "track_total_hits": False,
    }


def stale_docs(seq: int, below: int | None = None) -> Body:
    """Documents a build wrote from chunk ``seq`` on (what a failed or killed write left), below
    ``below`` (a build in parts: the part's own chunk numbers)."""
    bounds = {"gte": seq} if below is None else {"gte": seq, "lt": below}
    return {"range": {"seq": bounds}}


def cosine_from_score(score: float) -> float:
    """Elasticsearch scores a cosine kNN hit ``(1 + cos) / 2``; the stores report ``cos``."""
    return 2.0 * score - 1.0
