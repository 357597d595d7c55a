"""Every search body the Elasticsearch store sends, and how the store reads the answers (a fake
cluster stands in for the server; the real client builds the requests)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from feverous_es.errors import StoreError
from feverous_es.index.elastic import queries
from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elastic.store import ElasticStore
from feverous_es.index.elastic.writer import ElasticWriter
from feverous_es.index.elements import Element, ElementType, PageRecord
from feverous_es.index.store import Chunk, Filters, HybridWeights
from tests.elastic_fake import FakeCluster

CONFIG = ElasticConfig(url="http://fake:9200", dims=4)
VECTOR = np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32)


def test_filters() -> None:
    assert queries.filter_clauses(None) == []
    assert queries.filter_clauses(Filters()) == []
    clauses = queries.filter_clauses(
        Filters(pages=("A", "B"), types=(ElementType.CELL, ElementType.HEADER_CELL),
                tables=(("A", 0), ("B", 2)))
    )  # fmt: skip
    assert clauses == [
        {"terms": {"page": ["A", "B"]}},
        {"terms": {"type": ["cell", "header_cell"]}},
        {
            "bool": {
                "should": [
                    {"bool": {"filter": [{"term": {"page": "A"}}, {"term": {"table": 0}}]}},
                    {"bool": {"filter": [{"term": {"page": "B"}}, {"term": {"table": 2}}]}},
                ],
                "minimum_should_match": 1,
            }
        },
    ]


def test_text_search() -> None:
    assert queries.text_search("who won", 7) == {
        "size": 7,
        "query": {"match": {"linearized": {"query": "who won"}}},
        "track_total_hits": False,
    }
    body = queries.text_search("who won", 7, Filters(pages=("A",)))
    assert body["query"] == {
        "bool": {
            "must": [{"match": {"linearized": {"query": "who won"}}}],
            "filter": [{"terms": {"page": ["A"]}}],
        }
    }


def test_vector_search_filters_inside_knn() -> None:
    body = queries.vector_search(VECTOR, 10, CONFIG, Filters(types=(ElementType.SENTENCE,)))
    assert body == {
        "size": 10,
        "knn": {
            "field": "vector",
            "query_vector": [1.0, 0.0, 0.0, 0.0],
            "k": 10,
            "num_candidates": 100,
            # In the knn clause: filtered during the HNSW search, so k hits still come back.
            # A row's vector sits on one of its cells and lists all their types.
            "filter": [
                {
                    "bool": {
                        "should": [
                            {"terms": {"type": ["sentence"]}},
                            {"terms": {"vector_types": ["sentence"]}},
                        ],
                        "minimum_should_match": 1,
                    }
                }
            ],
        },
        "track_total_hits": False,
    }


def test_num_candidates() -> None:
    assert queries.num_candidates(5, CONFIG) == 100
    assert queries.num_candidates(100, CONFIG) == 400
    assert queries.num_candidates(5000, CONFIG) == 10_000
    assert queries.knn_clause(VECTOR, 50_000, CONFIG)["k"] == 10_000


def test_hybrid_default_is_one_request_without_retrievers() -> None:
    body = queries.hybrid_search(
        "claim", VECTOR, 20, CONFIG, Filters(pages=("A",)), HybridWeights(text=0.5, vector=3.0)
    )
    # knn + query in one request: score = 0.5 * BM25 + 3 * (1 + cos) / 2; no Enterprise feature.
    assert "retriever" not in body and "rank" not in body
    assert body["size"] == 20
    assert body["query"] == {
        "bool": {
            "must": [{"match": {"linearized": {"query": "claim", "boost": 0.5, "_name": "text"}}}],
            "filter": [{"terms": {"page": ["A"]}}],
        }
    }
    # Named: the answer gives each hit's text and vector parts apart.
    assert body["knn"]["_name"] == "vector"
    assert body["knn"]["boost"] == 3.0
    assert body["knn"]["filter"] == [{"terms": {"page": ["A"]}}]
    assert body["knn"]["k"] == 20


def test_retrievers_only_when_configured() -> None:
    rrf = queries.hybrid_search("c", VECTOR, 5, ElasticConfig(url="http://h", hybrid="rrf"))
    assert set(rrf["retriever"]) == {"rrf"}
    standard, knn = rrf["retriever"]["rrf"]["retrievers"]
    assert standard == {"standard": {"query": {"match": {"linearized": {"query": "c"}}}}}
    assert knn["knn"]["field"] == "vector"
    linear = queries.hybrid_search(
        "c",
        VECTOR,
        5,
        ElasticConfig(url="http://h", hybrid="linear"),
        weights=HybridWeights(text=2, vector=1),
    )
    weights = [r["weight"] for r in linear["retriever"]["linear"]["retrievers"]]
    assert weights == [2, 1]


def test_table_search_body() -> None:
    assert queries.table_search("who won", 10) == {
        "size": 10,
        "query": {"match": {"text": {"query": "who won"}}},
        "_source": ["page", "table"],
        "track_total_hits": False,
    }
    # Restricted to some tables by id: a filter, so the scores stay those of the whole index.
    restricted = queries.table_search("who won", 2, [("Tour de France", 0), ("Giro", 3)])
    assert restricted["query"] == {
        "bool": {
            "must": [{"match": {"text": {"query": "who won"}}}],
            "filter": [{"terms": {"id": ["Tour de France_table_0", "Giro_table_3"]}}],
        }
    }


def test_page_and_helper_bodies() -> None:
    assert queries.page_text_search("Mercury", 3)["query"] == {
        "multi_match": {
            "query": "Mercury",
            "fields": ["title.analyzed", "intro"],
            "type": "most_fields",
        }
    }
    assert queries.page_vector_search(VECTOR, 3, CONFIG)["knn"]["k"] == 3
    body = queries.page_elements_search("A", 500, after=41)
    assert body["sort"] == [{"ord": "asc"}] and body["search_after"] == [41]
    assert body["query"] == {"bool": {"filter": [{"term": {"page": "A"}}]}}
    assert queries.title_keys_search(["a"], 10)["query"] == {
        "bool": {"filter": [{"terms": {"title_keys": ["a"]}}]}
    }
    assert queries.stale_docs(4) == {"range": {"seq": {"gte": 4}}}
    assert queries.msearch_body("idx", [{"size": 1}, {"size": 2}]) == [
        {"index": "idx"}, {"size": 1}, {"index": "idx"}, {"size": 2},
    ]  # fmt: skip
    assert queries.cosine_from_score(1.0) == 1.0 and queries.cosine_from_score(0.5) == 0.0


# The store over a fake cluster.


def _element(page: str, i: int, text: str, vector_key: str | None = None) -> Element:
    element_id = f"{page}_sentence_{i}"
    return Element(
        id=element_id, page=page, type=ElementType.SENTENCE, text=text,
        linearized=f"[{page}] {text}", vector_key=vector_key or element_id, embed_text=text,
    )  # fmt: skip


@pytest.fixture
def cluster() -> Iterator[tuple[FakeCluster, ElasticStore]]:
    fake = FakeCluster()
    elements = [
        _element("Alpha", 0, "alpha is a letter"),
        _element("Alpha", 1, "the greek alphabet"),
        _element("Beta", 0, "beta is the second letter"),
    ]
    eye = np.eye(4, dtype=np.float32)
    writer = ElasticWriter(CONFIG, 4, client=fake.client())
    writer.write(
        Chunk(seq=0, last_rowid=2, elements=elements, vectors=eye[:3],
              pages=[PageRecord("Alpha", "first letter"), PageRecord("Beta", "second letter")],
              page_vectors=eye[:2])
    )  # fmt: skip
    writer.finish()
    store = ElasticStore(CONFIG, client=fake.client())
    fake.requests.clear()
    yield fake, store
    store.close()


def ids(hits: list) -> list[str]:
    return [hit.element.id for hit in hits]


def test_store_searches_through_aliases(cluster: tuple[FakeCluster, ElasticStore]) -> None:
    fake, store = cluster
    assert ids(store.search_text("letter", 5)) == ["Alpha_sentence_0", "Beta_sentence_0"]
    assert ids(store.search_text("letter", 5, Filters(pages=("Beta",)))) == ["Beta_sentence_0"]
    hits = store.search_vector(VECTOR, 1)
    assert ids(hits) == ["Alpha_sentence_0"] and hits[0].score == pytest.approx(1.0)  # cosine
    assert [p.page.title for p in store.search_pages_vector(VECTOR, 1)] == ["Alpha"]
    assert [p.page.title for p in store.search_pages_text("second", 5)] == ["Beta"]
    paths = {r.path for r in fake.requests}
    assert paths <= {"/feverous-elements/_search", "/feverous-pages/_search"}


def test_store_reads_by_key(cluster: tuple[FakeCluster, ElasticStore]) -> None:
    fake, store = cluster
    assert ids_of(store.get_elements(["Beta_sentence_0", "missing", "Alpha_sentence_1"])) == [
        "Beta_sentence_0", "Alpha_sentence_1",
    ]  # fmt: skip
    assert ids_of(store.page_elements("Alpha")) == ["Alpha_sentence_0", "Alpha_sentence_1"]
    assert store.get_pages(["Beta", "Gamma"]) == [PageRecord("Beta", "second letter")]
    assert store.match_titles(["alpha", "gamma"]) == {"alpha": ["Alpha"]}
    assert store.match_titles([]) == {}
    assert fake.requests_to("POST", "/feverous-elements/_mget")


def ids_of(elements: list[Element]) -> list[str]:
    return [element.id for element in elements]


def test_hybrid_is_one_search_with_query_and_knn(
    cluster: tuple[FakeCluster, ElasticStore],
) -> None:
    fake, store = cluster
    hits = store.search_hybrid("second letter", np.array([0, 0, 1, 0], dtype=np.float32), 3)
    assert ids(hits)[0] == "Beta_sentence_0"
    # Beta_sentence_0: text 2 (fake BM25: two shared words) + (1 + 1) / 2 from the vector side.
    assert hits[0].score == pytest.approx(3.0)
    (request,) = fake.requests_to("POST", "/_msearch")
    assert request.params["include_named_queries_score"] == "true"
    (body,) = request.body[1::2]
    assert "query" in body and "knn" in body and "retriever" not in body
    assert body["knn"]["boost"] == 1.0 and body["query"]["match"]["linearized"]["boost"] == 1.0


def test_batch_queries_use_one_msearch(cluster: tuple[FakeCluster, ElasticStore]) -> None:
    fake, store = cluster
    claims = [("alpha letter", VECTOR), ("beta", np.array([0, 0, 1, 0], dtype=np.float32))]
    results = store.search_hybrid_batch(claims, 2)
    assert [ids(r)[0] for r in results] == ["Alpha_sentence_0", "Beta_sentence_0"]
    texts = store.search_text_batch(["alphabet", "second"], 2)
    assert [ids(r) for r in texts] == [["Alpha_sentence_1"], ["Beta_sentence_0"]]
    msearches = fake.requests_to("POST", "/_msearch")
    assert [len(r.body) for r in msearches] == [4, 4]  # header + body per claim
    assert not fake.requests_to("POST", "/feverous-elements/_search")


def test_msearch_mode_fuses_client_side(cluster: tuple[FakeCluster, ElasticStore]) -> None:
    fake, _ = cluster
    store = ElasticStore(ElasticConfig(url="http://fake:9200", dims=4, hybrid="msearch"),
                         client=fake.client())  # fmt: skip
    fake.requests.clear()
    hits = store.search_hybrid("letter", VECTOR, 3, weights=HybridWeights(text=1, vector=2))
    (request,) = fake.requests_to("POST", "/_msearch")
    bodies = request.body[1::2]
    assert "query" in bodies[0] and "knn" not in bodies[0]
    assert "knn" in bodies[1] and "query" not in bodies[1]
    # Alpha_sentence_0: text 1 (fake BM25) + 2 * (1 + 1) / 2 from the vector side.
    assert hits[0].element.id == "Alpha_sentence_0" and hits[0].score == pytest.approx(3.0)


def test_query_vector_must_match(cluster: tuple[FakeCluster, ElasticStore]) -> None:
    _, store = cluster
    with pytest.raises(StoreError, match="embedder does not match"):
        store.search_vector(np.ones(8, dtype=np.float32))
    assert store.search_text("  ", 5) == [] and store.search_text("letter", 0) == []


def test_msearch_error_is_one_line(cluster: tuple[FakeCluster, ElasticStore]) -> None:
    fake, store = cluster

    def failing(request):
        if request.path == "/_msearch":
            return 200, {"responses": [{"error": {"type": "x", "reason": "shard failure"},
                                        "status": 500}]}  # fmt: skip
        return None

    fake.handlers.append(failing)
    with pytest.raises(StoreError, match="search failed: shard failure"):
        store.search_hybrid_batch([("letter", VECTOR)], 3)
