"""The Elasticsearch store's generated mappings, documents and connection settings (no server)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from feverous_es.errors import StoreError
from feverous_es.index.elastic.analysis import ANALYSES, ENGLISH_FOLDING
from feverous_es.index.elastic.config import ElasticConfig, load_config, redact
from feverous_es.index.elastic.documents import (
    META_KEY,
    ElementDoc,
    PageDoc,
    TableDoc,
    doc_id,
    element_from_source,
    element_source,
    expected_properties,
    index_body,
    mapping_conflicts,
    page_from_source,
    page_source,
)
from feverous_es.index.elements import Element, ElementType, PageRecord

CONFIG = ElasticConfig(url="https://es.example:9200")


def test_elements_mapping() -> None:
    body = index_body(ElementDoc, "feverous-elements-v3", CONFIG, 384, {"next_seq": 0})
    mappings = body["mappings"]
    props = mappings["properties"]
    assert mappings["dynamic"] == "strict"
    # Vectors are kept out of _source: hits never carry 384 floats unless asked.
    assert mappings["_source"] == {"excludes": ["vector"]}
    assert mappings["_meta"] == {META_KEY: {"next_seq": 0}}
    for name in ("id", "page", "type", "section_path", "links", "vector_key", "vector_types"):
        assert props[name] == {"type": "keyword"}, name
    for name in ("table", "row", "column", "list_index", "level", "seq"):
        assert props[name] == {"type": "integer"}, name
    assert props["ord"] == {"type": "long"}
    assert props["linearized"] == {"type": "text", "analyzer": "feverous_text"}
    assert props["text"] == {"type": "text"}
    assert props["embed_text"] == {"type": "text", "index": False}
    assert props["vector"] == {
        "type": "dense_vector",
        "dims": 384,
        "index": True,
        "similarity": "cosine",
        "index_options": {"type": "int8_hnsw", "m": 16, "ef_construction": 100},
    }


def test_pages_mapping() -> None:
    props = index_body(PageDoc, "feverous-pages-v3", CONFIG, 384)["mappings"]["properties"]
    assert props["title"] == {
        "type": "text",
        "fields": {
            "exact": {"type": "keyword"},
            "analyzed": {"type": "text", "analyzer": "feverous_text"},
        },
    }
    assert props["title_keys"] == {"type": "keyword"}
    assert props["intro"] == {"type": "text", "analyzer": "feverous_text"}
    assert props["links"] == {"type": "keyword"}
    assert props["vector"]["type"] == "dense_vector"
    assert props["vector"]["dims"] == 384


def test_tables_mapping() -> None:
    mappings = index_body(TableDoc, "feverous-tables-v3", CONFIG, 384)["mappings"]
    assert mappings["dynamic"] == "strict" and "_source" not in mappings
    assert mappings["properties"] == {
        "id": {"type": "keyword"},
        "page": {"type": "keyword"},
        "table": {"type": "integer"},
        "text": {"type": "text", "analyzer": "feverous_text"},
        "seq": {"type": "integer"},
    }


def test_load_settings_and_configurable_vectors() -> None:
    config = ElasticConfig(
        url="http://h:9200", shards=3, similarity="dot_product", index_options={"type": "hnsw"}
    )
    body = index_body(ElementDoc, "x-v1", config, 768)
    # A build loads with no refresh and no replicas; finish() restores both.
    assert body["settings"] == {"number_of_shards": 3, "number_of_replicas": 0,
                                "refresh_interval": "-1",
                                "analysis": ANALYSES[ENGLISH_FOLDING]}  # fmt: skip
    vector = body["mappings"]["properties"]["vector"]
    assert (vector["dims"], vector["similarity"], vector["index_options"]) == (
        768, "dot_product", {"type": "hnsw"},
    )  # fmt: skip


def test_documents_target_the_aliases() -> None:
    # Teams using the DSL documents search the aliases, never a versioned index.
    assert ElementDoc._index._name == "feverous-elements"
    assert PageDoc._index._name == "feverous-pages"
    assert TableDoc._index._name == "feverous-tables"


def test_mapping_conflicts() -> None:
    expected = expected_properties(ElementDoc, CONFIG, 384)
    assert mapping_conflicts(expected, expected) == []
    other = {**expected, "linearized": {"type": "text"}, "page": {"type": "text"}}
    other["vector"] = {**expected["vector"], "dims": 768}
    del other["ord"]
    problems = mapping_conflicts(other, expected)
    assert "ord is missing" in problems
    assert "page.type is 'text', not 'keyword'" in problems
    assert "linearized.analyzer is 'standard', not 'feverous_text'" in problems
    assert "vector.dims is 768, not 384" in problems


def test_element_source_round_trip() -> None:
    element = Element(
        id="Lake_cell_0_2_1", page="Lake", type=ElementType.CELL, text="12 km",
        linearized="[Lake] KEY Length VALUE {{ 12 km }}", vector_key="Lake_row_0_2",
        embed_text="[Lake] KEY Length VALUE 12 km", links=("Kilometre",),
        section_path=("Geography",), context=("Lake", "Geography", "Length"), table=0, row=2,
        column=1,
    )  # fmt: skip
    vector = np.arange(4, dtype=np.float32) + 1
    source = element_source(element, 17, 3, vector)
    assert source["ord"] == 17 and source["seq"] == 3 and source["type"] == "cell"
    assert "list_index" not in source and "level" not in source  # None is not sent
    np.testing.assert_array_equal(source["vector"], vector)
    assert element_from_source({k: v for k, v in source.items() if k != "vector"}) == element
    # An all-zero vector (cosine cannot score it) is left out rather than refused.
    assert "vector" not in element_source(element, 0, 0, np.zeros(4, dtype=np.float32))


def test_page_source_round_trip() -> None:
    page = PageRecord("Mercury (planet)", "Mercury is the smallest planet.", ("Sun",))
    source = page_source(page, 5, 1, np.ones(4, dtype=np.float32))
    assert source["title_keys"] == ["mercury (planet)", "mercury"]
    assert page_from_source(source) == page


def test_doc_id_bounds_length() -> None:
    assert doc_id("Page_sentence_0") == "Page_sentence_0"
    long_id = "é" * 300 + "_sentence_0"  # over Elasticsearch's 512-byte _id limit
    assert doc_id(long_id).startswith("sha256:") and len(doc_id(long_id)) < 512
    assert doc_id(long_id) == doc_id(long_id)


# Connection settings and credentials.


def test_config_from_environment() -> None:
    env = {
        "FEVEROUS_ES_URL": "https://es.example:9243",
        "FEVEROUS_ES_API_KEY": "id:s3cr3t-key",
        "FEVEROUS_ES_CA_CERTS": __file__,
        "FEVEROUS_ES_REPLICAS": "2",
        "FEVEROUS_ES_HYBRID": "msearch",
        "FEVEROUS_ES_SEARCH_WORKERS": "2",
    }
    config = load_config("feverous-index", env=env)  # a directory name: ignored
    assert config.url == "https://es.example:9243"
    assert config.api_key == "id:s3cr3t-key"
    assert config.replicas == 2 and config.hybrid == "msearch"
    assert config.search_workers == 2
    assert config.verify_certs is True  # TLS verification is on unless turned off
    assert "s3cr3t" not in repr(config)
    assert config.display_url == "https://es.example:9243"
    assert redact("key id:s3cr3t-key failed", config) == "key *** failed"
    assert redact("secret s3cr3t-key", config) == "secret ***"


def test_config_file_and_location(tmp_path: Path) -> None:
    file = tmp_path / "es.toml"
    file.write_text(
        '[elasticsearch]\nurl = "https://file:9200"\nusername = "builder"\npassword = "pw-1"\n'
        'verify_certs = false\nprefix = "team"\n'
    )
    config = load_config(None, env={"FEVEROUS_ES_ELASTIC_CONFIG": str(file)})
    assert (config.url, config.username, config.password) == ("https://file:9200", "builder",
                                                              "pw-1")  # fmt: skip
    assert config.verify_certs is False
    assert (config.elements_alias, config.pages_alias) == ("team-elements", "team-pages")
    # The environment overrides the file; a URL as location overrides both.
    config = load_config(
        "https://loc:9200",
        env={"FEVEROUS_ES_ELASTIC_CONFIG": str(file), "FEVEROUS_ES_PASSWORD": "pw-2"},
    )
    assert (config.url, config.password) == ("https://loc:9200", "pw-2")
    # A URL passed through click's Path options (one slash lost) still counts as a URL.
    assert load_config(Path("https://loc:9200"), env={}).url == "https://loc:9200"
    # A config file as location.
    assert load_config(str(file), env={}).url == "https://file:9200"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "no Elasticsearch URL"),
        ({"FEVEROUS_ES_URL": "https://elastic:hunter2@h:9200"}, "holds credentials"),
        ({"FEVEROUS_ES_URL": "ftp://h"}, "must look like"),
        ({"FEVEROUS_ES_URL": "https://h", "FEVEROUS_ES_USER": "u"}, "FEVEROUS_ES_PASSWORD"),
        ({"FEVEROUS_ES_URL": "https://h", "FEVEROUS_ES_HYBRID": "magic"}, "hybrid mode"),
        ({"FEVEROUS_ES_URL": "https://h", "FEVEROUS_ES_SEARCH_WORKERS": "0"}, "at least 1"),
        ({"FEVEROUS_ES_URL": "https://h", "FEVEROUS_ES_CA_CERTS": "/nope.pem"}, "CA file"),
        ({"FEVEROUS_ES_URL": "https://h", "FEVEROUS_ES_VERIFY_CERTS": "maybe"}, "true or false"),
    ],
)
def test_config_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(StoreError, match=message) as caught:
        load_config(None, env=env)
    assert "hunter2" not in str(caught.value)


def test_config_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('password = "pw"\nurl = \n')
    with pytest.raises(StoreError, match="cannot be read") as caught:
        load_config(str(bad), env={})
    assert "pw" not in str(caught.value).replace(str(tmp_path), "")
    unknown = tmp_path / "unknown.toml"
    unknown.write_text('url = "https://h"\npasword = "x"\n')
    with pytest.raises(StoreError, match="unknown Elasticsearch setting"):
        load_config(str(unknown), env={})
    # A similarity Elasticsearch does not know is refused here, not by the mapping request.
    cosign = tmp_path / "cosign.toml"
    cosign.write_text('url = "https://h"\nsimilarity = "cosign"\n')
    with pytest.raises(StoreError, match="vector similarity 'cosign' is unknown"):
        load_config(str(cosign), env={})
