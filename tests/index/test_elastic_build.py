"""Building the Elasticsearch indices: bulk actions, retries, failures, resume and the alias swap
(a fake cluster stands in for the server; the real client and its bulk helper send the requests).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from elastic_transport import ConnectionTimeout

from feverous_es.errors import StoreError
from feverous_es.index.building.builder import build
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.index.elastic.builds import create_build, list_builds
from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elastic.loader import (
    BuildIndices,
    BulkReport,
    bulk_load,
    chunk_actions,
    swap_actions,
    version_of,
    versioned_name,
)
from feverous_es.index.elastic.store import ElasticStore
from feverous_es.index.elastic.writer import ElasticWriter
from feverous_es.index.elements import Element, ElementType, PageRecord
from feverous_es.index.store import BuildState, Chunk
from tests.conftest import SAMPLE_DB
from tests.elastic_fake import FakeCluster, HashEncoder, Request

DIM = 4
V1 = BuildIndices("feverous-elements-v1", "feverous-pages-v1", "feverous-tables-v1")
CONFIG = ElasticConfig(
    url="http://fake:9200", dims=DIM, bulk_workers=3, bulk_docs=2, bulk_retries=3,
    bulk_initial_backoff=0.001, bulk_max_backoff=0.01, replicas=1,
)  # fmt: skip


def cell(page: str, row: int, column: int) -> Element:
    return Element(
        id=f"{page}_cell_0_{row}_{column}", page=page, type=ElementType.CELL, text=f"v{column}",
        linearized=f"[{page}] KEY h VALUE v{column}", vector_key=f"{page}_row_0_{row}",
        embed_text=f"row {row}", table=0, row=row, column=column,
    )  # fmt: skip


def sentence(page: str, i: int) -> Element:
    return Element(
        id=f"{page}_sentence_{i}", page=page, type=ElementType.SENTENCE, text=f"text {i}",
        linearized=f"[{page}] text {i}", vector_key=f"{page}_sentence_{i}", embed_text=f"t{i}",
    )  # fmt: skip


def make_chunk(seq: int, pages: list[str], last_rowid: int | None = None) -> Chunk:
    elements = []
    for page in pages:
        elements += [sentence(page, 0), sentence(page, 1), cell(page, 0, 0), cell(page, 0, 1)]
    keys = list(dict.fromkeys(e.vector_key for e in elements))
    rng = np.random.default_rng(seq)
    return Chunk(
        seq=seq,
        last_rowid=last_rowid if last_rowid is not None else seq + 1,
        elements=elements,
        vectors=rng.standard_normal((len(keys), DIM)).astype(np.float32),
        pages=[PageRecord(page, f"{page} intro") for page in pages],
        page_vectors=rng.standard_normal((len(pages), DIM)).astype(np.float32),
    )


def test_chunk_actions() -> None:
    chunk = make_chunk(2, ["P"])
    indices = BuildIndices("e-v1", "p-v1", "t-v1")
    actions = list(chunk_actions(chunk, indices, BuildState(elements=10, pages=3)))
    assert [a["_index"] for a in actions] == ["e-v1"] * 4 + ["p-v1", "t-v1"]
    assert all(a["_op_type"] == "index" for a in actions)  # idempotent if a request is retried
    assert [a["_id"] for a in actions] == [
        "P_sentence_0", "P_sentence_1", "P_cell_0_0_0", "P_cell_0_0_1", "P", "P_table_0",
    ]  # fmt: skip
    assert [a["_source"].get("ord") for a in actions] == [10, 11, 12, 13, 3, None]
    assert {a["_source"]["seq"] for a in actions} == {2}
    # One whole-table document per table: the page title, then its cells' raw text.
    assert actions[5]["_source"] == {"id": "P_table_0", "page": "P", "table": 0,
                                     "text": "P v0 v1", "seq": 2}  # fmt: skip
    # The two cells of row 0 share the row's vector (the third vector of the chunk): it is stored
    # once, on the first, which lists the row's element types.
    np.testing.assert_array_equal(actions[2]["_source"]["vector"], chunk.vectors[2])
    assert actions[2]["_source"]["vector_types"] == ["cell"]
    assert "vector" not in actions[3]["_source"] and "vector_types" not in actions[3]["_source"]
    assert actions[3]["_source"]["vector_key"] == actions[2]["_source"]["vector_key"]
    np.testing.assert_array_equal(actions[1]["_source"]["vector"], chunk.vectors[1])
    assert actions[1]["_source"]["vector_types"] == ["sentence"]
    np.testing.assert_array_equal(actions[4]["_source"]["vector"], chunk.page_vectors[0])


def test_versions_and_swap_actions() -> None:
    assert versioned_name("feverous-elements", 7) == "feverous-elements-v7"
    assert version_of("feverous-elements", "feverous-elements-v12") == 12
    assert version_of("feverous-elements", "feverous-elements-v1-old") is None
    assert version_of("feverous-elements", "feverous-pages-v1") is None
    actions = swap_actions({"e": "e-v2", "p": "p-v2"}, {"e": ["e-v1"], "p": ["p-v1", "p-v0"]})
    assert actions == [
        {"remove": {"index": "e-v1", "alias": "e", "must_exist": True}},
        {"add": {"index": "e-v2", "alias": "e"}},
        {"remove": {"index": "p-v1", "alias": "p", "must_exist": True}},
        {"remove": {"index": "p-v0", "alias": "p", "must_exist": True}},
        {"add": {"index": "p-v2", "alias": "p"}},
    ]
    assert swap_actions({"e": "e-v2"}, {}) == [{"add": {"index": "e-v2", "alias": "e"}}]
    assert swap_actions({"e": "e-v2"}, {"e": ["e-v2"]}) == []


def test_bulk_uses_workers_and_byte_sized_requests() -> None:
    fake = FakeCluster()
    create_build(fake.client(), CONFIG, 1, DIM)
    chunk = make_chunk(0, [f"P{i}" for i in range(10)])
    config = ElasticConfig(url="http://fake:9200", bulk_workers=3, bulk_docs=1000,
                           bulk_bytes=1500)  # fmt: skip
    report = bulk_load(fake.client(), chunk_actions(chunk, V1, BuildState()), config)
    assert report.ok and report.sent == 60
    bulks = fake.requests_to("PUT", "/_bulk")
    assert len(bulks) > 3  # cut by bytes, not by the 1000-document limit
    assert sum(len(r.body) // 2 for r in bulks) == 60
    assert sum(len(i.docs) for i in fake.indices.values()) == 60


def test_bulk_retries_429_per_document_and_per_request() -> None:
    fake = FakeCluster()
    create_build(fake.client(), CONFIG, 1, DIM)
    rejected: set[str] = set()
    calls = {"bulk": 0}

    def flaky(request: Request) -> tuple[int, object] | None:
        if request.path != "/_bulk":
            return None
        calls["bulk"] += 1
        if calls["bulk"] == 1:  # the whole request is refused once
            return 429, {"error": {"type": "es_rejected_execution_exception"}, "status": 429}
        items = []
        for header, _source in zip(request.body[0::2], request.body[1::2], strict=True):
            doc_id = header["index"]["_id"]
            if doc_id.endswith("sentence_1") and doc_id not in rejected:
                rejected.add(doc_id)  # each such document is refused once
                items.append(
                    {
                        "index": {
                            "_id": doc_id,
                            "status": 429,
                            "error": {"type": "es_rejected_execution_exception"},
                        }
                    }
                )
            else:
                fake.indices[header["index"]["_index"]].docs[doc_id] = _source
                items.append({"index": {"_id": doc_id, "status": 201}})
        return 200, {"errors": True, "items": items}

    fake.handlers.append(flaky)
    # The transport retries whole requests too; leave the retrying to the bulk helper here.
    client = fake.client(max_retries=0)
    actions = chunk_actions(make_chunk(0, ["A", "B", "C"]), V1, BuildState())
    report = bulk_load(client, actions, CONFIG)
    assert report.ok, report.summary()
    assert rejected == {"A_sentence_1", "B_sentence_1", "C_sentence_1"}
    assert len(fake.indices["feverous-elements-v1"].docs) == 12


def test_a_request_failing_after_the_last_action_ends_the_load() -> None:
    """A slow cluster times out a worker's last request after its actions ran out: the load
    reports the error and returns (the worker must not take another worker's end marker)."""
    fake = FakeCluster()
    create_build(fake.client(), CONFIG, 1, DIM)

    def timeout(request: Request) -> tuple[int, object] | None:
        if request.path == "/_bulk":
            raise ConnectionTimeout("read timed out")
        return None

    fake.handlers.append(timeout)
    actions = chunk_actions(make_chunk(0, ["A"]), V1, BuildState())
    config = replace(CONFIG, bulk_workers=2)
    reports: list[BulkReport] = []
    load = threading.Thread(
        target=lambda: reports.append(bulk_load(fake.client(max_retries=0), actions, config)),
        daemon=True,
    )
    load.start()
    load.join(timeout=30)
    assert not load.is_alive(), "bulk_load never returned"
    errors = reports[0].errors  # one a worker that sent a request
    assert errors and all(isinstance(error, ConnectionTimeout) for error in errors)
    assert reports[0].summary().startswith("a bulk request failed")


def test_failed_documents_fail_the_build_without_swapping() -> None:
    fake = FakeCluster()

    def mapping_error(request: Request) -> tuple[int, object] | None:
        if request.path != "/_bulk" or "delete" in request.body[0]:
            return None
        items = []
        for header, source in zip(request.body[0::2], request.body[1::2], strict=True):
            meta = header["index"]
            if meta["_id"] == "B_cell_0_0_1":
                error = {"type": "mapper_parsing_exception", "reason": "bad value"}
                item = {"_id": meta["_id"], "_index": meta["_index"], "status": 400, "error": error}
                items.append({"index": item})
            else:
                fake.indices[meta["_index"]].docs[meta["_id"]] = source
                items.append({"index": {"_id": meta["_id"], "status": 201}})
        return 200, {"errors": True, "items": items}

    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    writer.write(make_chunk(0, ["A"]))
    fake.handlers.append(mapping_error)
    with pytest.raises(StoreError) as caught:
        writer.write(make_chunk(1, ["B", "C"]))
    message = str(caught.value)
    assert "\n" not in message
    assert "1 of 12 documents failed" in message
    assert "B_cell_0_0_1 (400: mapper_parsing_exception: bad value)" in message
    assert "aliases are unchanged" in message
    # The state did not advance and the chunk's other documents were deleted again.
    assert writer.state().next_seq == 1
    elements = fake.indices["feverous-elements-v1"]
    assert sorted(elements.docs) == ["A_cell_0_0_0", "A_cell_0_0_1", "A_sentence_0",
                                     "A_sentence_1"]  # fmt: skip
    assert sorted(fake.indices["feverous-pages-v1"].docs) == ["A"]
    assert sorted(fake.indices["feverous-tables-v1"].docs) == ["A_table_0"]
    assert not any(index.aliases for index in fake.indices.values())
    assert not fake.requests_to("POST", "/_aliases")
    # Retrying the chunk (the same command again) succeeds and publishes.
    fake.handlers.clear()
    writer.write(make_chunk(1, ["B", "C"]))
    writer.finish()
    assert fake.indices["feverous-elements-v1"].aliases == {"feverous-elements"}


def test_request_errors_fail_the_write() -> None:
    fake = FakeCluster()
    writer = ElasticWriter(CONFIG, DIM, client=fake.client(max_retries=0))
    fake.handlers.append(
        lambda r: (503, {"error": {"type": "unavailable", "reason": "down"}, "status": 503})
        if r.path == "/_bulk" else None
    )  # fmt: skip
    with pytest.raises(StoreError, match="chunk 0 was not stored"):
        writer.write(make_chunk(0, ["A"]))
    assert writer.state() == BuildState()


def test_build_loads_hidden_then_swaps_atomically() -> None:
    fake = FakeCluster()
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    elements, pages, tables = (fake.indices[name] for name in V1)
    # While loading: no refresh, no replicas, no alias.
    for index in (elements, pages, tables):
        assert index.settings["refresh_interval"] == "-1"
        assert index.settings["number_of_replicas"] == 0
    writer.write(make_chunk(0, ["A", "B"]))
    writer.write(make_chunk(1, ["C"], last_rowid=9))
    assert not elements.aliases and not pages.aliases and not tables.aliases
    meta = elements.mappings["_meta"]["feverous_es"]
    counts = (meta["next_seq"], meta["last_rowid"], meta["elements"], meta["pages"], meta["tables"])
    assert counts == (2, 9, 12, 3, 3)
    assert meta["complete"] is False and meta["dim"] == DIM
    assert meta["analysis"] == "english_folding"
    writer.finish()
    # Merged to one segment a shard (the task polled to its end), then published.
    (merge,) = fake.requests_to("POST", "/feverous-elements-v1,.*/_forcemerge")
    assert merge.params["max_num_segments"] == "1"
    assert fake.requests.index(merge) < fake.requests.index(
        fake.requests_to("POST", "/_aliases")[0]
    )
    assert fake.requests_to("GET", "/_tasks/.*")
    for index in (elements, pages, tables):
        # null: the index default again, which keeps search-idle shards unrefreshed.
        assert index.settings["refresh_interval"] is None
        assert index.settings["number_of_replicas"] == 1
    assert elements.aliases == {"feverous-elements"} and pages.aliases == {"feverous-pages"}
    assert tables.aliases == {"feverous-tables"}
    assert elements.mappings["_meta"]["feverous_es"]["complete"] is True
    (swap,) = fake.requests_to("POST", "/_aliases")
    assert swap.body == {"actions": [
        {"add": {"index": "feverous-elements-v1", "alias": "feverous-elements"}},
        {"add": {"index": "feverous-pages-v1", "alias": "feverous-pages"}},
        {"add": {"index": "feverous-tables-v1", "alias": "feverous-tables"}},
    ]}  # fmt: skip
    writer.finish()  # repeating it changes nothing
    assert len(fake.requests_to("POST", "/_aliases")) == 1
    writer.close()

    # A finished build is left alone by a new writer; `es new-build` makes v2, which replaces
    # v1 behind the aliases in one request.
    again = ElasticWriter(CONFIG, DIM, client=fake.client())
    assert again.state().complete and again.version == 1
    with pytest.raises(StoreError, match="new-build"):
        again.write(make_chunk(2, ["D"]))
    create_build(fake.client(), CONFIG, 2, DIM)
    second = ElasticWriter(CONFIG, DIM, client=fake.client())
    assert second.version == 2 and second.state() == BuildState()
    second.write(make_chunk(0, ["Z"]))
    store = ElasticStore(CONFIG, client=fake.client())
    assert store.get_elements(["Z_sentence_0"]) == []  # v2 is not visible before the swap
    assert store.get_elements(["A_sentence_0"])
    second.finish()
    swap = fake.requests_to("POST", "/_aliases")[-1]
    assert swap.body == {"actions": [
        {"remove": {"index": "feverous-elements-v1", "alias": "feverous-elements",
                    "must_exist": True}},
        {"add": {"index": "feverous-elements-v2", "alias": "feverous-elements"}},
        {"remove": {"index": "feverous-pages-v1", "alias": "feverous-pages", "must_exist": True}},
        {"add": {"index": "feverous-pages-v2", "alias": "feverous-pages"}},
        {"remove": {"index": "feverous-tables-v1", "alias": "feverous-tables", "must_exist": True}},
        {"add": {"index": "feverous-tables-v2", "alias": "feverous-tables"}},
    ]}  # fmt: skip
    assert store.get_elements(["Z_sentence_0"]) and not store.get_elements(["A_sentence_0"])
    assert sorted(list_builds(fake.client(), CONFIG)) == [1, 2]


def test_a_failed_merge_blocks_the_swap_and_no_merge_is_asked_when_turned_off() -> None:
    fake = FakeCluster()
    failed = {"completed": True, "error": {"type": "io_exception", "reason": "disk full"}}
    fake.handlers.append(lambda r: (200, failed) if r.path.startswith("/_tasks/") else None)
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    writer.write(make_chunk(0, ["A"]))
    with pytest.raises(StoreError, match="merging the build's segments failed: disk full"):
        writer.finish()
    assert not fake.requests_to("POST", "/_aliases") and not writer.state().complete

    fake = FakeCluster()
    config = replace(CONFIG, merge_segments=0)
    writer = ElasticWriter(config, DIM, client=fake.client())
    writer.write(make_chunk(0, ["A"]))
    writer.finish()
    assert not fake.requests_to("POST", ".*/_forcemerge") and fake.requests_to("POST", "/_aliases")


@pytest.mark.parametrize(
    ("index", "doc", "wrote"),
    [("feverous-elements-v1", "A_sentence_0", 4), ("feverous-tables-v1", "A_table_0", 1)],
)
def test_lost_documents_block_the_swap(index: str, doc: str, wrote: int) -> None:
    fake = FakeCluster()
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    writer.write(make_chunk(0, ["A"]))
    del fake.indices[index].docs[doc]  # acknowledged, then lost
    with pytest.raises(
        StoreError, match=f"holds {wrote - 1} documents but the build wrote {wrote}"
    ):
        writer.finish()
    assert not fake.requests_to("POST", "/_aliases")
    assert not writer.state().complete


def test_resume_discards_a_partial_chunk() -> None:
    fake = FakeCluster()
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    writer.write(make_chunk(0, ["A"]))
    # A crash mid-chunk: some documents of chunk 1 are in, the state still says next_seq = 1.
    actions = list(chunk_actions(make_chunk(1, ["B"]), V1, writer.state()))
    partial = actions[:3] + actions[-1:]  # some elements and the table document
    for action in partial:
        fake.indices[action["_index"]].docs[action["_id"]] = action["_source"]
    resumed = ElasticWriter(CONFIG, DIM, client=fake.client())
    assert resumed.version == 1 and resumed.state().next_seq == 1
    for name in V1:
        assert all(not doc_id.startswith("B") for doc_id in fake.indices[name].docs)
    resumed.write(make_chunk(1, ["B"]))
    resumed.finish()
    assert ElasticStore(CONFIG, client=fake.client()).state().elements == 8


def test_resume_refuses_other_vectors_and_foreign_indices() -> None:
    fake = FakeCluster()
    ElasticWriter(CONFIG, DIM, client=fake.client())
    with pytest.raises(StoreError, match="holds 4-dimensional vectors, the embedder makes 8"):
        ElasticWriter(CONFIG, 8, client=fake.client())

    foreign = FakeCluster()
    foreign.client().indices.create(index="feverous-elements-v1", mappings={"properties": {}})
    with pytest.raises(StoreError, match="not made by feverous-es"):
        ElasticWriter(CONFIG, DIM, client=foreign.client())

    conflicting = FakeCluster()
    ElasticWriter(CONFIG, DIM, client=conflicting.client())
    conflicting.indices["feverous-elements-v1"].mappings["properties"]["page"] = {"type": "text"}
    with pytest.raises(StoreError, match=r"conflicting mapping \(page.type is 'text'"):
        ElasticWriter(CONFIG, DIM, client=conflicting.client())

    taken = FakeCluster()
    taken.client().indices.create(index="feverous-pages")
    with pytest.raises(StoreError, match="feverous-pages is an index, not an alias"):
        ElasticWriter(CONFIG, DIM, client=taken.client())


def test_store_searches_whole_tables(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeCluster()
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    writer.write(make_chunk(0, ["Alpha", "Beta"]))
    writer.finish()
    fake.requests.clear()
    store = ElasticStore(CONFIG, client=fake.client())
    found = store.search_tables("Beta v1", k=5)
    assert [key for key, _ in found] == [("Beta", 0), ("Alpha", 0)]
    assert found[0][1] > found[1][1]
    assert store.search_tables("Beta v1", k=5, tables=[("Alpha", 0)])[0][0] == ("Alpha", 0)
    assert store.search_tables("   ", k=5) == [] and store.search_tables("v1", k=0) == []
    assert {r.path for r in fake.requests_to("POST", ".*/_search")} == {"/feverous-tables/_search"}

    # A build published before the table index existed: no tables, and a warning saying why.
    fake.indices["feverous-tables-v1"].aliases.clear()
    with caplog.at_level("WARNING"):
        older = ElasticStore(CONFIG, client=fake.client())
    assert older.search_tables("Beta v1", k=5) == []
    assert "feverous-tables is missing or not readable" in caplog.text


def test_resume_refuses_a_build_of_an_older_format() -> None:
    fake = FakeCluster()
    ElasticWriter(CONFIG, DIM, client=fake.client())
    fake.indices["feverous-elements-v1"].mappings["_meta"]["feverous_es"]["format_version"] = 1
    with pytest.raises(StoreError, match="format version 1, this program writes 3"):
        ElasticWriter(CONFIG, DIM, client=fake.client())


def test_resume_creates_a_missing_index_only_before_the_first_chunk() -> None:
    fake = FakeCluster()
    ElasticWriter(CONFIG, DIM, client=fake.client())
    del fake.indices["feverous-tables-v1"]
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    assert "feverous-tables-v1" in fake.indices
    writer.write(make_chunk(0, ["A"]))
    del fake.indices["feverous-tables-v1"]
    with pytest.raises(StoreError, match="feverous-tables-v1 is missing though the build wrote"):
        ElasticWriter(CONFIG, DIM, client=fake.client())


def test_store_without_a_build() -> None:
    with pytest.raises(StoreError, match="no index behind the aliases feverous-elements"):
        ElasticStore(CONFIG, client=FakeCluster().client())


def test_index_pipeline_drives_the_elastic_writer(tmp_path: Path) -> None:
    """The same build code as the embedded store, above the store interface."""
    fake = FakeCluster()
    encoder = HashEncoder(DIM)
    db = WikiDB(SAMPLE_DB)
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    try:
        report = build(db, writer, encoder, limit=20, chunk_elements=300)
    finally:
        writer.close()
    assert report.state.complete and report.state.pages == 20
    store = ElasticStore(CONFIG, client=fake.client())
    assert store.state() == report.state
    elements = fake.indices["feverous-elements-v1"]
    assert elements.aliases == {"feverous-elements"}
    assert len(elements.docs) == report.state.elements
    first_page = next(iter(fake.indices["feverous-pages-v1"].docs))
    page_elements = store.page_elements(first_page)
    assert page_elements and all(e.page == first_page for e in page_elements)
    assert [e.id for e in store.get_elements([page_elements[0].id])] == [page_elements[0].id]
    # Running it again on the finished build does nothing.
    writer = ElasticWriter(CONFIG, DIM, client=fake.client())
    try:
        again = build(db, writer, encoder, limit=20)
    finally:
        writer.close()
        db.close()
    assert again.already_complete


def test_index_and_search_commands_on_elasticsearch(monkeypatch: pytest.MonkeyPatch) -> None:
    """`feverous-es index|search --store elasticsearch`: settings from the environment, the
    same command code as the embedded store."""
    import orjson
    from click.testing import CliRunner

    import feverous_es.index.elastic.store as elastic_store
    import feverous_es.index.elastic.writer as elastic_writer
    import feverous_es.runtime.embedder as embedder_module
    from feverous_es.cli import main

    fake = FakeCluster()
    for module in (elastic_store, elastic_writer):
        monkeypatch.setattr(module, "connect", lambda config: fake.client(config))
    monkeypatch.setattr(embedder_module, "Embedder", lambda **_: HashEncoder(DIM))
    monkeypatch.setenv("FEVEROUS_ES_URL", "http://fake:9200")
    monkeypatch.setenv("FEVEROUS_ES_PREFIX", "team")
    monkeypatch.setenv("FEVEROUS_ES_ELASTIC_CONFIG", "")
    runner = CliRunner()
    result = runner.invoke(
        main, ["index", str(SAMPLE_DB), "--store", "elasticsearch", "--limit", "5", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["state"]["complete"] and report["state"]["pages"] == 5
    assert fake.indices["team-elements-v1"].aliases == {"team-elements"}
    result = runner.invoke(
        main, ["search", "the", "--store", "elasticsearch", "--mode", "bm25", "--json", "-k", "3"]
    )
    assert result.exit_code == 0, result.output
    hits = orjson.loads(result.stdout)
    assert len(hits) == 3 and all(hit["id"].startswith(hit["page"]) for hit in hits)


def test_es_status_new_build_and_prune(monkeypatch: pytest.MonkeyPatch) -> None:
    import orjson
    from click.testing import CliRunner

    import feverous_es.index.elastic.cli as es_cli
    from feverous_es.cli import main

    fake = FakeCluster()
    monkeypatch.setattr(es_cli, "_connect", lambda: (CONFIG, fake.client()))
    runner = CliRunner()
    for version in (1, 2, 3):
        if version > 1:
            result = runner.invoke(main, ["es", "new-build", "--dim", str(DIM)])
            assert result.exit_code == 0, result.output
            assert f"created v{version}" in result.output
        writer = ElasticWriter(CONFIG, DIM, client=fake.client())
        assert writer.version == version
        writer.write(make_chunk(0, [f"P{version}"]))
        writer.finish()
    runner.invoke(main, ["es", "new-build", "--dim", str(DIM)])  # v4, left in progress
    result = runner.invoke(main, ["es", "new-build", "--dim", str(DIM)])
    assert result.exit_code == 1 and "v4 is still in progress" in result.output

    status = orjson.loads(runner.invoke(main, ["es", "status", "--json"]).stdout)
    assert status["version"] == FakeCluster.version
    assert status["aliases"] == {"feverous-elements": ["feverous-elements-v3"],
                                 "feverous-pages": ["feverous-pages-v3"],
                                 "feverous-tables": ["feverous-tables-v3"]}  # fmt: skip
    assert status["builds"][2]["tables_index"] == "feverous-tables-v3"
    assert status["builds"][2]["state"]["tables"] == 1
    assert [(b["version"], b["published"], b["state"]["complete"]) for b in status["builds"]] == [
        (1, False, True), (2, False, True), (3, True, True), (4, False, False),
    ]  # fmt: skip

    result = runner.invoke(main, ["es", "prune", "--keep", "1", "--yes"])
    assert result.exit_code == 0, result.output
    # v3 is published and v4 in progress: only v1 and v2 go.
    assert sorted(fake.indices) == ["feverous-elements-v3", "feverous-elements-v4",
                                    "feverous-pages-v3", "feverous-pages-v4",
                                    "feverous-tables-v3", "feverous-tables-v4"]  # fmt: skip


def test_a_lost_answer_to_the_state_update_keeps_the_chunk() -> None:
    fake = FakeCluster()
    writer = ElasticWriter(CONFIG, DIM, client=fake.client(max_retries=0))

    def applied_then_lost(request: Request) -> tuple[int, object] | None:
        if request.method == "PUT" and request.path == "/feverous-elements-v1/_mapping":
            fake.handlers.clear()
            fake._route(request)  # the cluster applies it, the answer never arrives
            return 504, {"error": {"type": "gateway_timeout", "reason": "lost"}, "status": 504}
        return None

    fake.handlers.append(applied_then_lost)
    with pytest.raises(StoreError, match="Elasticsearch error 504"):
        writer.write(make_chunk(0, ["A"]))
    assert writer.state().next_seq == 1
    assert len(fake.indices["feverous-elements-v1"].docs) == 4
    writer.finish()
    assert fake.indices["feverous-elements-v1"].aliases == {"feverous-elements"}


class _MergingCluster:
    """A cluster whose force-merge task ends on its third look, on one node with ``free`` of
    its 200 GB disk free."""

    def __init__(self, free: float) -> None:
        from types import SimpleNamespace

        looks = iter([{"completed": False}, {"completed": False}, {"completed": True}])
        disk = {"available_in_bytes": free, "total_in_bytes": 200e9}
        self.indices = SimpleNamespace(forcemerge=lambda **_: {"task": "n:1"})
        self.tasks = SimpleNamespace(get=lambda task_id: next(looks))
        self.nodes = SimpleNamespace(
            stats=lambda metric: {"nodes": {"n": {"name": "es-1", "fs": {"total": disk}}}}
        )


@pytest.mark.parametrize(("free", "told"), [(3e9, True), (50e9, False)])
def test_a_merge_held_back_by_a_nearly_full_disk_says_why_once(
    free: float, told: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Elasticsearch starts no merge on a node with under 5 % of its disk free: the build's
    force-merge, which would wait for it in silence, names the node and the way out once."""
    from feverous_es.index.elastic.builds import merge_segments

    merge_segments(_MergingCluster(free), ["b-1"], 1, poll=0, disk_check_after=0)  # type: ignore[arg-type]
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    if told:
        [line] = warnings
        assert "es-1 has 3.0 GB free of 200 GB" in line and "merge_segments = 0" in line
    else:
        assert warnings == []
