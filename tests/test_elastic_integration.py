"""The whole Elasticsearch path against a real cluster: build -> alias swap -> search -> reader key.

Runs only when ``FEVEROUS_ES_URL`` names a cluster (with ``FEVEROUS_ES_USER`` /
``FEVEROUS_ES_PASSWORD`` of a user that may create indices and API keys, and
``FEVEROUS_ES_CA_CERTS`` for a self-signed certificate), e.g. the one in docker/compose.yaml.
Every run uses its own index prefix and deletes what it made.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pytest

from feverous_es.index.build import build
from feverous_es.index.elastic.cli import create_reader_key
from feverous_es.index.elastic.client import check_cluster, connect
from feverous_es.index.elastic.config import ElasticConfig, load_config
from feverous_es.index.elastic.errors import elastic_errors
from feverous_es.index.elastic.store import ElasticStore, ElasticWriter, create_build
from feverous_es.index.elements import ElementType
from feverous_es.index.store import Filters, StoreError
from feverous_es.index.wiki import WikiDB
from tests.conftest import SAMPLE_DB
from tests.elastic_fake import HashEncoder

pytestmark = pytest.mark.skipif(
    not os.environ.get("FEVEROUS_ES_URL"),
    reason="no Elasticsearch cluster: set FEVEROUS_ES_URL (and credentials) to run these",
)

DIM = 16


@pytest.fixture(scope="module")
def config() -> Iterator[ElasticConfig]:
    base = load_config()
    config = replace(base, prefix=f"feverous-it-{uuid.uuid4().hex[:8]}", replicas=0, dims=DIM)
    yield config
    client = connect(config)
    try:
        client.options(ignore_status=404).indices.delete(index=f"{config.prefix}-*")
    finally:
        client.close()


@pytest.fixture(scope="module")
def built(config: ElasticConfig) -> ElasticConfig:
    db = WikiDB(SAMPLE_DB)
    writer = ElasticWriter(config, DIM)
    try:
        report = build(db, writer, HashEncoder(DIM), limit=30, chunk_elements=500)
    finally:
        writer.close()
        db.close()
    assert report.state.complete and report.state.pages == 30
    return config


def test_cluster_is_supported(config: ElasticConfig) -> None:
    client = connect(config)
    try:
        assert check_cluster(client, config) is not None
    finally:
        client.close()


def test_build_publishes_through_the_aliases(built: ElasticConfig) -> None:
    client = connect(built)
    try:
        for alias in built.aliases:
            assert list(client.indices.get_alias(name=alias).body) == [f"{alias}-v1"]
        settings = client.indices.get_settings(index=f"{built.elements_alias}-v1").body
        index = next(iter(settings.values()))["settings"]["index"]
        assert index["refresh_interval"] == built.refresh_interval
        assert index["number_of_replicas"] == "0"
        mapping = client.indices.get_mapping(index=built.elements_alias).body
        props = next(iter(mapping.values()))["mappings"]["properties"]
        assert props["vector"]["index_options"]["type"] == "int8_hnsw"
    finally:
        client.close()


def test_search_paths(built: ElasticConfig) -> None:
    store = ElasticStore(built)
    try:
        state = store.state()
        assert state.complete and state.pages == 30 and store.dim == DIM
        hits = store.search_text("the", 10)
        assert hits and all(hit.score > 0 for hit in hits)
        page = hits[0].element.page
        filtered = store.search_text("the", 10, Filters(pages=(page,)))
        assert filtered and {hit.element.page for hit in filtered} == {page}
        vector = HashEncoder(DIM).embed([hits[0].element.embed_text])[0]
        knn = store.search_vector(vector, 5)
        assert knn[0].element.vector_key == hits[0].element.vector_key
        assert knn[0].score == pytest.approx(1.0, abs=0.05)  # int8 quantized cosine
        sentences = store.search_vector(vector, 5, Filters(types=(ElementType.SENTENCE,)))
        assert all(hit.element.type is ElementType.SENTENCE for hit in sentences)
        hybrid = store.search_hybrid("the", vector, 5)
        assert hybrid and hybrid[0].score >= hybrid[-1].score
        batch = store.search_hybrid_batch([("the", vector), ("a", vector)], 5)
        assert len(batch) == 2 and all(batch)
        elements = store.page_elements(page)
        assert elements and store.get_elements([elements[0].id]) == [elements[0]]
        assert store.get_pages([page])[0].title == page
        assert page in store.match_titles([page.casefold()]).get(page.casefold(), [])
        assert store.search_pages_text(page, 3)
        cells = store.search_text("the", 50, Filters(types=(ElementType.CELL,)))
        cell = cells[0].element
        key = (cell.page, cell.table)
        assert key in [found for found, _ in store.search_tables(f"{cell.page} {cell.text}", 10)]
        only = store.search_tables(f"{cell.page} {cell.text}", 10, [key])
        assert [found for found, _ in only] == [key]
    finally:
        store.close()


def test_msearch_fusion_and_basic_licence(built: ElasticConfig) -> None:
    store = ElasticStore(replace(built, hybrid="msearch"))
    try:
        vector = np.ones(DIM, dtype=np.float32)
        assert store.search_hybrid("the", vector, 5)
    finally:
        store.close()


def test_reader_key_reads_aliases_only(built: ElasticConfig) -> None:
    if built.auth_kind() != "basic":
        pytest.skip("creating a key with privileges needs user/password authentication")
    client = connect(built)
    try:
        answer = create_reader_key(client, built, f"{built.prefix}-reader", "1d")
    finally:
        client.close()
    reader = replace(built, api_key=answer["encoded"], username=None, password=None)
    store = ElasticStore(reader)
    try:
        assert store.search_text("the", 3)
        assert store.search_tables("the", 3)  # the key reads the tables alias too
        assert store.state().complete
    finally:
        store.close()
    reader_client = connect(reader)
    try:
        with pytest.raises(StoreError, match="lack a permission"), elastic_errors(reader):
            reader_client.index(index=built.elements_alias, document={"id": "x"})
        # The versioned indices are not readable by name, only through the aliases.
        with pytest.raises(StoreError, match="lack a permission"), elastic_errors(reader):
            reader_client.search(index=f"{built.elements_alias}-v1")
    finally:
        reader_client.close()
        admin = connect(built)
        admin.security.invalidate_api_key(ids=[answer["id"]])
        admin.close()


def test_second_build_swaps_atomically(built: ElasticConfig) -> None:
    client = connect(built)
    try:
        create_build(client, built, 2, DIM)
    finally:
        client.close()
    db = WikiDB(SAMPLE_DB)
    writer = ElasticWriter(built, DIM)
    try:
        assert writer.version == 2
        build(db, writer, HashEncoder(DIM), limit=5)
    finally:
        writer.close()
        db.close()
    store = ElasticStore(built)
    try:
        assert store.state().pages == 5
    finally:
        store.close()


def test_bad_password_is_one_line(config: ElasticConfig) -> None:
    if config.auth_kind() != "basic":
        pytest.skip("needs user/password authentication")
    with pytest.raises(StoreError, match="refused the credentials") as caught:
        connect(replace(config, password="definitely-wrong"))
    assert "definitely-wrong" not in str(caught.value)
