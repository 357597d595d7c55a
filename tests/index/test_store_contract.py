"""The Store contract, one suite run against every store: the embedded store, Elasticsearch on
the stricter in-memory stand-in (tests/elastic_fake.py), and Elasticsearch on a live node (when
``scripts/es_test_node.py run -- pytest`` gives one; skipped otherwise).

Each gets the same build: the sample dump's first 75 pages (prose pages, then the first with
tables), with the deterministic stand-in encoder. The assertions are what the pipeline relies
on from any store, not one engine's scores.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from feverous_es.index.building.builder import build
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.index.elements import ElementType, title_keys
from feverous_es.index.store import Filters, Store, StoreWriter, TableSearch
from tests.conftest import SAMPLE_DB
from tests.elastic_fake import FakeCluster, HashEncoder

DIM = 16
PAGES = 75


def _build(writer: StoreWriter) -> None:
    db = WikiDB(SAMPLE_DB)
    try:
        report = build(db, writer, HashEncoder(DIM), limit=PAGES, chunk_elements=500)
    finally:
        writer.close()
        db.close()
    assert report.state.complete


def _embedded(tmp: Path) -> Iterator[Store]:
    from feverous_es.index.embedded import EmbeddedStore, EmbeddedWriter

    _build(EmbeddedWriter(tmp / "index", DIM))
    store = EmbeddedStore(tmp / "index")
    yield store
    store.close()


def _elastic_fake(tmp: Path) -> Iterator[Store]:
    from feverous_es.index.elastic.config import ElasticConfig
    from feverous_es.index.elastic.store import ElasticStore
    from feverous_es.index.elastic.writer import ElasticWriter

    fake, config = FakeCluster(), ElasticConfig(url="http://fake:9200", dims=DIM)
    _build(ElasticWriter(config, DIM, client=fake.client()))
    store = ElasticStore(config, client=fake.client())
    yield store
    store.close()


def _elastic_node(tmp: Path) -> Iterator[Store]:
    from feverous_es.index.elastic.builds import delete_prefix
    from feverous_es.index.elastic.store import ElasticStore
    from feverous_es.index.elastic.writer import ElasticWriter
    from tests.index.test_elastic_integration import NODE_URL, node_config

    if not NODE_URL:
        pytest.skip("no Elasticsearch node: run `python scripts/es_test_node.py run -- pytest`")
    config = node_config(f"feverous-contract-{uuid.uuid4().hex[:8]}")
    try:
        _build(ElasticWriter(config, DIM))
        store = ElasticStore(config)
        yield store
        store.close()
    finally:
        delete_prefix(config)


STORES = {
    "embedded": _embedded,
    "elasticsearch-fake": _elastic_fake,
    "elasticsearch-node": _elastic_node,
}


@pytest.fixture(scope="module", params=list(STORES))
def store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    yield from STORES[request.param](tmp_path_factory.mktemp(request.param))


def vector_of(text: str) -> np.ndarray:
    return HashEncoder(DIM).embed([text])[0]


def test_state_says_what_was_built(store: Store) -> None:
    state = store.state()
    assert state.complete and state.pages == PAGES and state.elements > 1_000
    assert store.dim == DIM


def test_text_search_ranks_matching_elements_best_first(store: Store) -> None:
    hits = store.search_text("fourth planet from the Sun", 10)
    assert "Mars_sentence_0" in [hit.element.id for hit in hits]
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert store.search_text("planet", 50_000)  # beyond any result window: capped, not an error


def test_filters_restrict_every_search(store: Store) -> None:
    on_mars = Filters(pages=("Mars",))
    assert {h.element.page for h in store.search_text("planet", 20, on_mars)} == {"Mars"}
    sentences = Filters(types=(ElementType.SENTENCE,))
    vector = vector_of("planet")
    for hits in (
        store.search_text("cup final", 20, sentences),
        store.search_vector(vector, 20, sentences),
        store.search_hybrid("cup final", vector, 20, sentences),
    ):
        assert hits and {h.element.type for h in hits} == {ElementType.SENTENCE}


def test_vector_and_hybrid_search_find_an_element_by_its_vector(store: Store) -> None:
    [target] = store.get_elements(["Mars_sentence_0"])
    vector = vector_of(target.embed_text)
    assert store.search_vector(vector, 5)[0].element.vector_key == target.vector_key
    hybrid = store.search_hybrid("fourth planet from the Sun", vector, 5)
    assert target.id in [hit.element.id for hit in hybrid]


def test_elements_and_pages_are_fetched_as_stored(store: Store) -> None:
    elements = store.page_elements("Mars")
    assert elements and {e.page for e in elements} == {"Mars"}
    ids = [e.id for e in elements[:3]]
    assert store.get_elements([*ids, "No such page_sentence_0"]) == elements[:3]
    [page] = store.get_pages(["Mars", "No such page"])
    assert page.title == "Mars"
    assert store.search_pages_text("Mars", 1)[0].page.title == "Mars"
    [key] = title_keys("Mars")[:1]
    assert "Mars" in store.match_titles([key])[key]
    assert store.search_pages_vector(vector_of("Mars"), 3)


def test_tables_are_searched_whole_and_restricted(store: Store) -> None:
    assert isinstance(store, TableSearch)
    page = store.page_elements("Turkish Cup")
    cell = next(e for e in page if e.type is ElementType.CELL)
    # One table's elements, in page order, as the page holds them.
    assert store.page_elements("Turkish Cup", cell.table) == [
        e for e in page if e.table == cell.table
    ]
    key = (cell.page, cell.table)
    query = f"{cell.page} {cell.text}"
    assert key in [found for found, _ in store.search_tables(query, 10)]
    assert [found for found, _ in store.search_tables(query, 10, [key])] == [key]


def test_cell_search_gives_the_text_search_hits_of_tables(store: Store) -> None:
    in_tables = Filters(
        types=(ElementType.CELL, ElementType.HEADER_CELL, ElementType.TABLE_CAPTION)
    )
    hits = store.search_text("Turkish Cup final", 30, in_tables)
    cells = store.search_cells("Turkish Cup final", 30, in_tables)
    assert hits and [(c.id, c.score) for c in cells] == [(h.element.id, h.score) for h in hits]
    element = hits[0].element
    assert (cells[0].key, cells[0].row, cells[0].column, cells[0].text) == (
        (element.page, element.table),
        element.row,
        element.column,
        element.text,
    )
    # The tables of those hits, each once, best hit first, read without the texts.
    tables = store.search_cell_tables("Turkish Cup final", 30, in_tables)
    assert tables == list(dict.fromkeys(c.key for c in cells))
    # A claim no table matches finds nothing (Elasticsearch then sends no hit list at all).
    assert store.search_cells("zqxjv", 30, in_tables) == []
    assert store.search_cell_tables("zqxjv", 30, in_tables) == []
