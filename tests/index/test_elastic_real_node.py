"""What a real Elasticsearch 8.19 node refuses and the first stand-in accepted, each found by the
live-node suite (tests/index/test_elastic_integration.py); the stand-in now refuses it too."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from feverous_es.errors import StoreError
from feverous_es.index.elastic.client import check_cluster
from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elastic.errors import elastic_errors
from feverous_es.index.elastic.loader import swap_aliases
from feverous_es.index.elastic.store import ElasticStore
from feverous_es.index.elastic.writer import ElasticWriter
from feverous_es.index.elements import ElementType
from feverous_es.index.store import Filters
from tests.elastic_fake import MINIMAL, FakeCluster, Index, Request
from tests.index.test_elastic_build import DIM, make_chunk

CONFIG = ElasticConfig(url="http://fake:9200", dims=DIM)


def published(fake: FakeCluster, pages: list[str]) -> ElasticStore:
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    writer.write(make_chunk(0, pages))
    writer.finish()
    return ElasticStore(CONFIG, client=fake.client())


def test_a_cluster_without_optional_modules_builds_and_searches() -> None:
    """Elastic's integ-test distribution: no rest-root (``GET /`` is 405), no reindex (no
    ``_delete_by_query``), no analysis-common (no ``english`` analyzer, stemmer or folding)."""
    fake = FakeCluster(modules=MINIMAL)
    assert check_cluster(fake.client(), CONFIG) == FakeCluster.version
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    meta = fake.indices["feverous-elements-v1"].mappings["_meta"]["feverous_es"]
    assert meta["analysis"] == "standard_stop"
    analysis = fake.indices["feverous-elements-v1"].settings["analysis"]
    assert analysis["analyzer"]["feverous_text"]["filter"] == ["lowercase", "feverous_stop"]
    writer.write(make_chunk(0, ["A"]))

    def refuse_page_b(request: Request) -> tuple[int, object] | None:
        """Store the chunk's documents but refuse page B's record (as a mapping error would)."""
        if request.path != "/_bulk" or "delete" in request.body[0]:
            return None
        answer = fake._bulk(request.body)
        for item in answer["items"]:
            meta = item["index"]
            if meta["_id"] == "B" and meta["_index"] == "feverous-pages-v1":
                del fake.indices[meta["_index"]].docs["B"]
                meta.update(status=400, error={"type": "mapper_parsing_exception"})
                answer["errors"] = True
        return 200, answer

    fake.handlers.append(refuse_page_b)
    with pytest.raises(StoreError):
        writer.write(make_chunk(1, ["B"]))
    fake.handlers.clear()
    # The failed chunk's documents were found by a scroll and bulk-deleted.
    assert not fake.requests_to("POST", ".*/_delete_by_query")
    assert sorted(fake.indices["feverous-elements-v1"].docs) == [
        "A_cell_0_0_0", "A_cell_0_0_1", "A_sentence_0", "A_sentence_1"
    ]  # fmt: skip
    writer.write(make_chunk(1, ["B"]))
    writer.finish()
    store = ElasticStore(CONFIG, client=fake.client())
    assert [hit.element.page for hit in store.search_text("B", 3)] == ["B"] * 3


def test_a_full_cluster_gets_english_with_folding() -> None:
    fake = FakeCluster()
    ElasticWriter(CONFIG, DIM, client=fake.client())
    meta = fake.indices["feverous-elements-v1"].mappings["_meta"]["feverous_es"]
    assert meta["analysis"] == "english_folding"
    chain = fake.indices["feverous-tables-v1"].settings["analysis"]["analyzer"]["feverous_text"]
    assert "asciifolding" in chain["filter"] and "feverous_stemmer" in chain["filter"]


def test_an_all_zero_query_vector_is_never_sent() -> None:
    # A cosine field refuses it with 400: nothing is near a vector with no direction.
    for mode in ("knn_query", "msearch"):
        fake = FakeCluster()
        store = published(fake, ["A", "B"])
        store.config = ElasticConfig(url="http://fake:9200", dims=DIM, hybrid=mode)
        zero = np.zeros(DIM, dtype=np.float32)
        assert store.search_vector(zero, 5) == []
        assert store.search_pages_vector(zero, 5) == []
        text_only = store.search_hybrid("B", zero, 3)
        assert [hit.element.page for hit in text_only] == ["B"] * 3
        batch = store.search_hybrid_batch([("B", zero), ("A", np.ones(DIM))], 3)
        assert [hit.element.page for hit in batch[0]] == ["B"] * 3 and batch[1]


def test_k_beyond_the_result_window_is_capped() -> None:
    store = published(FakeCluster(), ["A"])
    # index.max_result_window: a size over 10,000 is a 400 on a real node.
    assert store.search_text("A", 50_000)
    assert store.search_vector(np.ones(DIM), 20_000)
    assert store.search_pages_text("A", 20_000)


@pytest.mark.parametrize(
    "answer",
    [
        {"_shards": {"total": 2, "successful": 1, "failed": 1,
                     "failures": [{"reason": {"reason": "shard lost"}}]}},
        {"_shards": {"total": 1, "successful": 1, "failed": 0}, "timed_out": True},
    ],
)  # fmt: skip
def test_a_partial_answer_is_an_error(answer: dict) -> None:
    fake = FakeCluster()
    store = published(fake, ["A"])

    def partial(request: Request) -> tuple[int, object] | None:
        if request.path.endswith("_search"):
            return 200, {"took": 1, "timed_out": False, "hits": {"hits": []}, **answer}
        if request.path.endswith("_msearch"):
            return 200, {"responses": [{"hits": {"hits": []}, "timed_out": False, **answer}]}
        return None

    fake.handlers.append(partial)
    for search in (lambda: store.search_text("A", 3), lambda: store.search_text_batch(["A"], 3)):
        with pytest.raises(StoreError, match="a partial answer is not used"):
            search()


def test_the_alias_swap_fails_whole_when_an_alias_moved_meanwhile() -> None:
    fake = FakeCluster()
    published(fake, ["A"])
    # What the swap read a moment ago: the alias on v1; another process has moved it since.
    fake.handlers.append(
        lambda r: (
            (200, {"feverous-elements-v1": {"aliases": {"feverous-elements": {}}}})
            if r.path == "/_alias/feverous-elements"
            else None
        )
    )
    fake.indices["feverous-elements-v1"].aliases.clear()
    fake.indices["feverous-elements-v2"] = Index(mappings={}, settings={})
    with pytest.raises(StoreError, match="aliases_not_found"), elastic_errors(CONFIG):
        swap_aliases(fake.client(), {"feverous-elements": "feverous-elements-v2"})
    # must_exist made the whole request fail: the new index did not get the alias either.
    assert not fake.indices["feverous-elements-v2"].aliases


def test_a_partly_applied_alias_swap_is_an_error() -> None:
    fake = FakeCluster()
    published(fake, ["A"])
    fake.handlers.append(
        lambda r: (200, {"acknowledged": True, "errors": True, "action_results": [
            {"action": {"type": "remove"}, "status": 404}]})
        if r.path == "/_aliases"
        else None
    )  # fmt: skip
    with pytest.raises(StoreError, match="not applied whole"):
        swap_aliases(fake.client(), {"feverous-elements": "feverous-pages-v1"})


def test_a_row_vector_is_stored_once_and_a_row_hit_brings_all_its_cells() -> None:
    fake = FakeCluster()
    chunk = make_chunk(0, ["A", "B"])
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    writer.write(chunk)
    writer.finish()
    docs = fake.indices["feverous-elements-v1"].docs
    # 8 elements, 6 vectors: each page's two cells of row 0 share one.
    assert len(docs) == 8 and sum("vector" in doc for doc in docs.values()) == 6
    row = chunk.vectors[2]  # page A's row 0
    for mode in ("knn_query", "msearch"):
        store = ElasticStore(replace(CONFIG, hybrid=mode), client=fake.client())
        hits = store.search_vector(row, 2)
        assert [hit.element.id for hit in hits] == ["A_cell_0_0_0", "A_cell_0_0_1"]
        assert hits[0].score == pytest.approx(1.0) and hits[1].score == hits[0].score
        # k counts elements: the row's cells fill it; the type filter reaches the row too.
        assert len(store.search_vector(row, 1)) == 1
        cells = store.search_vector(row, 3, Filters(types=(ElementType.CELL,)))
        assert {hit.element.type for hit in cells} == {ElementType.CELL} and len(cells) == 3
        sentences = store.search_vector(row, 3, Filters(types=(ElementType.SENTENCE,)))
        assert {hit.element.type for hit in sentences} == {ElementType.SENTENCE}
        # Hybrid: both cells get the row's vector part, the one the text names also BM25.
        hybrid = store.search_hybrid("v1", row, 2, Filters(pages=("A",)))
        assert [hit.element.id for hit in hybrid] == ["A_cell_0_0_1", "A_cell_0_0_0"], mode
        assert hybrid[0].score == pytest.approx(2.0) and hybrid[1].score == pytest.approx(1.0)
