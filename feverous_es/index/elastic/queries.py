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
from feverous_es.index.store import Filters, HybridWeights, TableKey

MAX_CANDIDATES = 10_000
MIN_CANDIDATES = 100
# index.max_result_window: a search asking for more hits is refused (400).
MAX_RESULT_WINDOW = 10_000
ELEMENT_TEXT_FIELD = "linearized"
TABLE_TEXT_FIELD = "text"
PAGE_TEXT_FIELDS = ("title.analyzed", "intro")

Body = dict[str, Any]
_EQUAL_WEIGHTS = HybridWeights()


def filter_clauses(filters: Filters | None) -> list[Body]:
    """Non-scoring clauses for ``filters``: fields combine with AND, values with OR."""
    if not filters:
        return []
    clauses: list[Body] = []
    if filters.pages:
        clauses.append({"terms": {"page": list(filters.pages)}})
    if filters.types:
        clauses.append({"terms": {"type": [ElementType(t).value for t in filters.types]}})
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
) -> Body:
    k = min(k, MAX_CANDIDATES)
    clause: Body = {
        "field": VECTOR,
        "query_vector": _vector_list(vector),
        "k": k,
        "num_candidates": num_candidates(k, config),
    }
    clauses = filter_clauses(filters)
    if clauses:
        clause["filter"] = clauses
    if boost is not None:
        clause["boost"] = boost
    return clause


def _match(query: str, boost: float | None = None) -> Body:
    match: Body = {"query": query}
    if boost is not None:
        match["boost"] = boost
    return {"match": {ELEMENT_TEXT_FIELD: match}}


def text_query(query: str, filters: Filters | None = None, boost: float | None = None) -> Body:
    clauses = filter_clauses(filters)
    if not clauses:
        return _match(query, boost)
    return {"bool": {"must": [_match(query, boost)], "filter": clauses}}


def text_search(query: str, k: int, filters: Filters | None = None) -> Body:
    """BM25 over the linearizations."""
    return {"size": result_size(k), "query": text_query(query, filters), "track_total_hits": False}


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
    weights: HybridWeights = _EQUAL_WEIGHTS,
) -> Body:
    """One request with ``query`` and ``knn`` (``knn_query``), or a retriever (``rrf`` /
    ``linear``, Enterprise licence only). ``msearch`` mode uses :func:`text_search` and
    :func:`vector_search` instead. With no ``vector`` (an all-zero one has no direction) the
    text part alone."""
    if vector is None:
        return {
            "size": result_size(k),
            "query": text_query(query, filters, boost=weights.text),
            "track_total_hits": False,
        }
    if config.hybrid == "rrf":
        return {
            "size": result_size(k),
            "retriever": {
                "rrf": {
                    "retrievers": [
                        {"standard": {"query": text_query(query, filters)}},
                        {"knn": knn_clause(vector, k, config, filters)},
                    ],
                    "rank_window_size": max(k, MIN_CANDIDATES),
                }
            },
        }
    if config.hybrid == "linear":
        return {
            "size": result_size(k),
            "retriever": {
                "linear": {
                    "retrievers": [
                        {
                            "retriever": {"standard": {"query": text_query(query, filters)}},
                            "weight": weights.text,
                        },
                        {
                            "retriever": {"knn": knn_clause(vector, k, config, filters)},
                            "weight": weights.vector,
                        },
                    ],
                    "rank_window_size": max(k, MIN_CANDIDATES),
                }
            },
        }
    return {
        "size": result_size(k),
        "query": text_query(query, filters, boost=weights.text),
        "knn": knn_clause(vector, k, config, filters, boost=weights.vector),
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


def page_elements_search(page: str, size: int, after: int | None = None) -> Body:
    """One page of a page's elements in insertion order (``search_after`` on ``ord``)."""
    body: Body = {
        "size": size,
        "query": {"bool": {"filter": [{"term": {"page": page}}]}},
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


def stale_docs(seq: int) -> Body:
    """Documents a build wrote from chunk ``seq`` on (what a failed or killed write left)."""
    return {"range": {"seq": {"gte": seq}}}


def cosine_from_score(score: float) -> float:
    """Elasticsearch scores a cosine kNN hit ``(1 + cos) / 2``; the stores report ``cos``."""
    return 2.0 * score - 1.0
