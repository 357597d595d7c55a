"""The embedded store: round trips, the three searches with filters, atomic chunks, resume."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import unicodedata
import zlib
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tantivy

from feverous_es.errors import IncompatibleIndex, StoreError
from feverous_es.index.elements import Element, ElementType, PageRecord
from feverous_es.index.embedded import (
    NEW_VECTOR_FILES,
    EmbeddedStore,
    EmbeddedWriter,
    vectors,
)
from feverous_es.index.embedded import layout as embedded_layout
from feverous_es.index.embedded import writer as embedded_writer
from feverous_es.index.embedded.vectors import normalized
from feverous_es.index.search import search
from feverous_es.index.store import Chunk, Filters, HybridWeights

DIM = 16
REPO = Path(__file__).resolve().parents[2]


def token(element_id: str) -> str:
    """A word found in that element's text only (digits survive stemming)."""
    return f"tok{zlib.crc32(element_id.encode())}"


def embedded_alone(
    title: str, key: str, kind: ElementType, text: str, head: str, embed_text: str, **fields: Any
) -> Element:
    """An element that is its own vector key, its linearization ``[Title] head <its token>``."""
    element_id = f"{title}_{key}"
    return Element(
        id=element_id, page=title, type=kind, text=text,
        linearized=f"[{title}] {head} {token(element_id)}", vector_key=element_id,
        embed_text=embed_text, **fields,
    )  # fmt: skip


def page_elements(title: str) -> list[Element]:
    """Two sentences, a table (caption, header row, two data rows) and a list item. The cells
    of one row share a vector key, as the linearizer makes them."""
    elements = [
        embedded_alone(
            title,
            f"sentence_{i}",
            ElementType.SENTENCE,
            f"sentence {i} of {title}",
            "sentence",
            f"[{title}] sentence {i}",
            links=("Other page",) if i == 0 else (),
            section_path=("History",),
        )
        for i in range(2)
    ]
    elements.append(
        embedded_alone(
            title,
            "table_caption_0",
            ElementType.TABLE_CAPTION,
            "caption",
            "CAPTION",
            "caption",
            table=0,
        )
    )
    for row in range(3):
        for column in range(2):
            kind = "header_cell" if row == 0 else "cell"
            element_id = f"{title}_{kind}_0_{row}_{column}"
            elements.append(
                Element(
                    id=element_id,
                    page=title,
                    type=ElementType.HEADER_CELL if row == 0 else ElementType.CELL,
                    text=f"value {row} {column}",
                    linearized=f"[{title}] KEY k VALUE {{{{ {token(element_id)} }}}}",
                    vector_key=f"{title}_row_0_{row}",
                    embed_text=f"[{title}] row {row}",
                    table=0,
                    row=row,
                    column=column,
                )
            )
    elements.append(
        embedded_alone(
            title,
            "item_0_0",
            ElementType.ITEM,
            "an item",
            "CONTEXT x VALUE",
            "an item",
            context=(f"{title}_sentence_1",),
            list_index=0,
            level=1,
        )
    )
    return elements


def key_vector(key: str) -> np.ndarray:
    """A fixed random unit vector per vector key."""
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    vector = rng.standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def make_chunk(seq: int, titles: list[str]) -> Chunk:
    elements = [element for title in titles for element in page_elements(title)]
    keys = list(dict.fromkeys(element.vector_key for element in elements))
    return Chunk(
        seq=seq,
        last_rowid=100 + seq,
        elements=elements,
        vectors=np.stack([key_vector(key) for key in keys]),
        pages=[
            PageRecord(title, f"intro about {token(title)}", ("Other page",)) for title in titles
        ],
        page_vectors=np.stack([key_vector(f"page:{title}") for title in titles]),
        malformed=[f"bad {seq}"],
    )


CHUNKS = [["Alpha", "Beta"], ["Gamma"], ["Delta", "Epsilon"]]
ELEMENTS_PER_PAGE = len(page_elements("x"))


def build(path: Path, chunks: list[list[str]] = CHUNKS, **kwargs: int) -> None:
    writer = EmbeddedWriter(path, DIM, **kwargs)
    for seq, titles in enumerate(chunks):
        writer.write(make_chunk(seq, titles))
    writer.finish()
    writer.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedStore:
    path = tmp_path_factory.mktemp("store")
    build(path)
    opened = EmbeddedStore(path)
    yield opened
    opened.close()


def ids(hits: list) -> list[str]:
    return [hit.element.id for hit in hits]


def test_state_counts(store: EmbeddedStore) -> None:
    state = store.state()
    assert state.next_seq == 3
    assert state.last_rowid == 102
    assert state.elements == 5 * ELEMENTS_PER_PAGE
    assert state.pages == 5
    assert state.malformed == 3
    assert state.complete


def test_get_elements_round_trip(store: EmbeddedStore) -> None:
    wanted = ["Gamma_cell_0_1_1", "missing", "Alpha_sentence_0", "Beta_item_0_0"]
    found = store.get_elements(wanted)
    by_id = {e.id: e for title in ("Alpha", "Beta", "Gamma") for e in page_elements(title)}
    assert found == [by_id["Gamma_cell_0_1_1"], by_id["Alpha_sentence_0"], by_id["Beta_item_0_0"]]


def test_page_elements_in_document_order(store: EmbeddedStore) -> None:
    assert store.page_elements("Delta") == page_elements("Delta")
    assert store.page_elements("Nope") == []


def test_get_pages(store: EmbeddedStore) -> None:
    pages = store.get_pages(["Epsilon", "Nope", "Alpha"])
    assert [page.title for page in pages] == ["Epsilon", "Alpha"]
    assert pages[0].links == ("Other page",)
    assert pages[0].intro == f"intro about {token('Epsilon')}"


def test_search_text(store: EmbeddedStore) -> None:
    target = "Gamma_cell_0_2_1"
    hits = store.search_text(f'Is "{token(target)}" (really): the [thing]?')
    assert ids(hits) == [target]
    assert hits[0].score > 0
    # Only stop words and punctuation: nothing to match.
    assert store.search_text('the "of" (and):') == []
    # Every linearization of Beta's elements starts with its title.
    assert {hit.element.page for hit in store.search_text("beta", k=100)} == {"Beta"}
    assert len(store.search_text("beta", k=100)) == ELEMENTS_PER_PAGE


def test_search_text_filters(store: EmbeddedStore) -> None:
    both = (
        f"{token('Alpha_sentence_0')} {token('Delta_cell_0_1_0')} {token('Delta_table_caption_0')}"
    )
    assert set(ids(store.search_text(both))) == {
        "Alpha_sentence_0",
        "Delta_cell_0_1_0",
        "Delta_table_caption_0",
    }
    assert ids(store.search_text(both, filters=Filters(pages=("Alpha",)))) == ["Alpha_sentence_0"]
    assert ids(store.search_text(both, filters=Filters(types=(ElementType.CELL,)))) == [
        "Delta_cell_0_1_0"
    ]
    in_table = store.search_text(both, filters=Filters(tables=(("Delta", 0),)))
    assert set(ids(in_table)) == {"Delta_cell_0_1_0", "Delta_table_caption_0"}
    assert store.search_text(both, filters=Filters(tables=(("Delta", 1),))) == []
    # A page filter is read by the text rule too: an invisible character in it changes nothing.
    invisible = Filters(pages=("Al\u200bpha",))
    found = search(
        store, lambda texts: np.zeros((len(texts), 1)), both, mode="bm25", filters=invisible
    )
    assert ids(found) == ["Alpha_sentence_0"]
    # Filters add no score.
    unfiltered = {hit.element.id: hit.score for hit in store.search_text(both)}
    for hit in in_table:
        assert hit.score == pytest.approx(unfiltered[hit.element.id])


def test_search_vector_expands_rows(store: EmbeddedStore) -> None:
    hits = store.search_vector(key_vector("Epsilon_row_0_1") * 3.0, k=5)
    assert ids(hits[:2]) == ["Epsilon_cell_0_1_0", "Epsilon_cell_0_1_1"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-3)  # float16 vectors
    assert hits[1].score == hits[0].score
    assert len(hits) == 5
    assert all(a.score >= b.score for a, b in pairwise(hits))
    # Truncated to k elements, even inside a row.
    assert ids(store.search_vector(key_vector("Epsilon_row_0_1"), k=1)) == ["Epsilon_cell_0_1_0"]


def test_search_vector_filters(store: EmbeddedStore) -> None:
    query = key_vector("Alpha_sentence_1")
    assert all(
        hit.element.page == "Beta" for hit in store.search_vector(query, filters=Filters(("Beta",)))
    )
    hits = store.search_vector(query, k=100, filters=Filters(pages=("Alpha", "Gamma")))
    assert hits[0].element.id == "Alpha_sentence_1"
    assert len(hits) == 2 * ELEMENTS_PER_PAGE
    header_only = store.search_vector(
        query, k=100, filters=Filters(types=(ElementType.HEADER_CELL,))
    )
    assert len(header_only) == 5 * 2
    assert {hit.element.type for hit in header_only} == {ElementType.HEADER_CELL}
    table = store.search_vector(
        key_vector("Gamma_row_0_2"), k=100, filters=Filters(tables=(("Gamma", 0),))
    )
    assert ids(table[:2]) == ["Gamma_cell_0_2_0", "Gamma_cell_0_2_1"]
    assert len(table) == 7  # caption and six cells
    combined = Filters(pages=("Gamma",), types=(ElementType.CELL, ElementType.ITEM))
    assert {hit.element.id for hit in store.search_vector(query, k=100, filters=combined)} == {
        "Gamma_cell_0_1_0",
        "Gamma_cell_0_1_1",
        "Gamma_cell_0_2_0",
        "Gamma_cell_0_2_1",
        "Gamma_item_0_0",
    }
    with pytest.raises(StoreError, match="dimensions"):
        store.search_vector(np.ones(DIM + 1, dtype=np.float32))


def test_search_hybrid(store: EmbeddedStore) -> None:
    # Text finds one element, the vector another; the one both find ranks first.
    text = f"{token('Beta_sentence_0')} {token('Delta_item_0_0')}"
    hits = store.search_hybrid(text, key_vector("Beta_sentence_0"), k=10)
    assert ids(hits)[0] == "Beta_sentence_0"
    assert "Delta_item_0_0" in ids(hits)
    assert len(hits) == 10
    vector_only = store.search_hybrid(
        text, key_vector("Beta_sentence_0"), k=3, weights=HybridWeights(text=0.0)
    )
    assert vector_only[0].score == pytest.approx(1.0, abs=1e-3)
    filtered = store.search_hybrid(
        text, key_vector("Beta_sentence_0"), filters=Filters(pages=("Delta",))
    )
    assert ids(filtered)[0] == "Delta_item_0_0"
    assert {hit.element.page for hit in filtered} == {"Delta"}


def test_text_search_ignores_accents_and_decomposed_letters(tmp_path: Path) -> None:
    # The dump stores titles such as "Mocăniță" decomposed (NFD); claims write them composed
    # or without accents.
    decomposed = unicodedata.normalize("NFD", "Mocăniță")
    build(tmp_path, [[decomposed, "Plain"]])
    store = EmbeddedStore(tmp_path)
    for query in ("mocăniță", "Mocanita", decomposed):
        assert store.search_pages_text(query, k=1)[0].page.title == decomposed
        assert {hit.element.page for hit in store.search_text(query, k=3)} == {decomposed}
    assert store.match_titles(["mocanita"]) == {"mocanita": [decomposed]}
    store.close()


def test_search_tables(store: EmbeddedStore) -> None:
    # A table is its page title, caption and cells: "value 1 0" is in every table, the title
    # in one; a restricted search keeps the scores of the whole index.
    found = store.search_tables("Gamma value", k=10)
    assert found[0][0] == ("Gamma", 0)
    assert {key for key, _ in found} == {(title, 0) for titles in CHUNKS for title in titles}
    only = store.search_tables("Gamma value", k=10, tables=[("Beta", 0), ("Gamma", 0)])
    assert only == [item for item in found if item[0] in {("Beta", 0), ("Gamma", 0)}]
    assert store.search_tables("the of", k=10) == []


def test_a_finished_build_keeps_its_vector_types_and_an_older_one_gets_them(
    tmp_path: Path,
) -> None:
    from feverous_es.index.embedded.layout import SQLITE, VECTOR_TYPES, vector_types

    build(tmp_path)
    with sqlite3.connect(tmp_path / SQLITE) as db:
        vectors = db.execute("SELECT vectors FROM state").fetchone()[0]
        expected = vector_types(db, vectors)
    assert (tmp_path / VECTOR_TYPES).read_bytes() == expected.tobytes()
    with_file = EmbeddedStore(tmp_path)
    filtered = ids(
        with_file.search_vector(key_vector("Gamma"), 5, Filters(types=(ElementType.CELL,)))
    )
    with_file.close()
    (tmp_path / VECTOR_TYPES).unlink()  # as a build finished before the file existed
    older = EmbeddedStore(tmp_path)
    try:
        assert ids(
            older.search_vector(key_vector("Gamma"), 5, Filters(types=(ElementType.CELL,)))
        ) == (filtered)
    finally:
        older.close()
    assert (tmp_path / VECTOR_TYPES).read_bytes() == expected.tobytes()  # for the next start


def test_an_index_without_a_table_index_gets_one_on_open(tmp_path: Path) -> None:
    build(tmp_path)
    with_index = EmbeddedStore(tmp_path)
    expected = with_index.search_tables("Delta value", k=10)
    with_index.close()
    shutil.rmtree(tmp_path / "tables")  # as an index built before the table index
    older = EmbeddedStore(tmp_path)
    try:
        rebuilt = older.search_tables("Delta value", k=10)
        assert rebuilt[0][0] == ("Delta", 0)
        assert dict(rebuilt) == pytest.approx(dict(expected))  # ties may come in another order
    finally:
        older.close()
    assert count_docs(tmp_path)[2] == 5


def test_an_older_index_that_cannot_get_a_table_index_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(tmp_path)
    shutil.rmtree(tmp_path / "tables")

    def read_only(*args: object) -> None:
        raise PermissionError("read-only file system")

    monkeypatch.setattr(embedded_layout, "backfill_tables", read_only)
    with pytest.raises(StoreError, match=r"built before the table index.*writable, or rebuild"):
        EmbeddedStore(tmp_path)
    assert not (tmp_path / "tables").exists()


def drop_title_keys(path: Path) -> None:
    """Make ``path`` an index built before the title_keys table."""
    with sqlite3.connect(path / "elements.sqlite") as db:
        db.execute("DROP TABLE title_keys")


def test_an_index_without_title_keys_gets_them_on_open(tmp_path: Path) -> None:
    build(tmp_path)
    drop_title_keys(tmp_path)
    older = EmbeddedStore(tmp_path)
    try:
        assert older.match_titles(["gamma", "delta", "nowhere"]) == {
            "gamma": ["Gamma"],
            "delta": ["Delta"],
        }
    finally:
        older.close()
    with sqlite3.connect(tmp_path / "elements.sqlite") as db:
        assert db.execute("SELECT count(*) FROM title_keys").fetchone()[0] == 5


def test_a_build_begun_before_title_keys_resumes_with_all_of_them(tmp_path: Path) -> None:
    writer = EmbeddedWriter(tmp_path, DIM)
    writer.write(make_chunk(0, CHUNKS[0]))
    writer.close()
    drop_title_keys(tmp_path)
    writer = EmbeddedWriter(tmp_path, DIM)  # the first chunk's pages get their keys here
    for seq, titles in enumerate(CHUNKS[1:], start=1):
        writer.write(make_chunk(seq, titles))
    writer.finish()
    writer.close()
    store = EmbeddedStore(tmp_path)
    try:
        assert store.match_titles(["alpha", "epsilon"]) == {
            "alpha": ["Alpha"],
            "epsilon": ["Epsilon"],
        }
    finally:
        store.close()


def test_an_older_index_that_cannot_get_title_keys_says_so_and_stays_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    build(tmp_path)
    drop_title_keys(tmp_path)

    def read_only(pages: object) -> object:
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(embedded_layout, "title_key_rows", read_only)
    with pytest.raises(StoreError, match=r"before its title keys.*writable, or rebuild"):
        EmbeddedStore(tmp_path)
    with sqlite3.connect(tmp_path / "elements.sqlite") as db:  # rolled back, not half made
        assert not db.execute("SELECT 1 FROM sqlite_master WHERE name = 'title_keys'").fetchone()


def test_search_pages(store: EmbeddedStore) -> None:
    assert [hit.page.title for hit in store.search_pages_text(f"{token('Gamma')} things")] == [
        "Gamma"
    ]
    assert store.search_pages_text("Delta", k=5)[0].page.title == "Delta"
    hits = store.search_pages_vector(key_vector("page:Beta"), k=3)
    assert hits[0].page.title == "Beta"
    assert hits[0].score == pytest.approx(1.0, abs=1e-3)
    assert len(hits) == 3


def test_chunks_must_come_in_order(tmp_path: Path) -> None:
    writer = EmbeddedWriter(tmp_path, DIM)
    with pytest.raises(StoreError, match="out of order"):
        writer.write(make_chunk(1, ["Alpha"]))
    writer.write(make_chunk(0, ["Alpha"]))
    with pytest.raises(StoreError, match="out of order"):
        writer.write(make_chunk(0, ["Beta"]))
    assert writer.state().next_seq == 1
    writer.close()


def test_repeated_element_id_is_refused(tmp_path: Path) -> None:
    writer = EmbeddedWriter(tmp_path, DIM)
    writer.write(make_chunk(0, ["Alpha"]))
    with pytest.raises(StoreError, match="repeats"):
        writer.write(make_chunk(1, ["Alpha"]))
    writer.write(make_chunk(1, ["Beta"]))
    writer.close()
    assert_exactly_once(tmp_path, ["Alpha", "Beta"])


def test_not_an_index(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not an embedded index"):
        EmbeddedStore(tmp_path)
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(StoreError, match="not empty and not an embedded index"):
        EmbeddedWriter(tmp_path, DIM)
    (tmp_path / "meta.json").write_text("{nope")
    with pytest.raises(StoreError, match="cannot be read"):
        EmbeddedStore(tmp_path)


def test_an_index_of_an_unknown_format_version_is_incompatible(tmp_path: Path) -> None:
    EmbeddedWriter(tmp_path, DIM).close()
    meta = json.loads((tmp_path / "meta.json").read_text())
    (tmp_path / "meta.json").write_text(json.dumps({**meta, "version": 99}))
    with pytest.raises(IncompatibleIndex, match=r"format version 99, .*rebuild the index"):
        EmbeddedStore(tmp_path)


def test_dimension_is_checked(tmp_path: Path) -> None:
    EmbeddedWriter(tmp_path, DIM).close()
    with pytest.raises(IncompatibleIndex, match="16-dimensional"):
        EmbeddedWriter(tmp_path, DIM * 2)
    writer = EmbeddedWriter(tmp_path, DIM)
    with pytest.raises(StoreError, match="shape"):
        chunk = make_chunk(0, ["Alpha"])
        chunk.vectors = chunk.vectors[:, :4]
        writer.write(chunk)
    writer.close()


def test_finish_is_final_and_idempotent(tmp_path: Path) -> None:
    build(tmp_path, CHUNKS[:1])
    writer = EmbeddedWriter(tmp_path, DIM)
    assert writer.state().complete
    writer.finish()
    with pytest.raises(StoreError, match="complete"):
        writer.write(make_chunk(1, ["Zeta"]))
    writer.close()


def count_docs(path: Path) -> tuple[int, int, int]:
    """Documents in the element, page and table indices."""
    return tuple(
        tantivy.Index.open(str(path / name)).searcher().num_docs
        for name in ("text", "pages", "tables")
    )


def assert_exactly_once(path: Path, titles: list[str]) -> None:
    """Every element of these pages is stored, indexed and found exactly once; nothing else."""
    expected = [element for title in titles for element in page_elements(title)]
    store = EmbeddedStore(path)
    try:
        state = store.state()
        assert (state.elements, state.pages) == (len(expected), len(titles))
        # One table per page.
        assert count_docs(path) == (len(expected), len(titles), len(titles))
        assert [e for title in titles for e in store.page_elements(title)] == expected
        for title in titles:
            assert [key for key, _ in store.search_tables(title.lower())] == [(title, 0)]
        for element in expected:
            assert ids(store.search_text(token(element.id), k=10)) == [element.id]
        keys = list(dict.fromkeys(element.vector_key for element in expected))
        files = NEW_VECTOR_FILES
        vectors = np.fromfile(path / files.elements, dtype=files.dtype).reshape(-1, DIM)
        # float16: a unit vector's components keep ~3 significant digits.
        np.testing.assert_allclose(vectors, np.stack([key_vector(k) for k in keys]), atol=1e-3)
        row_bytes = DIM * np.dtype(files.dtype).itemsize
        assert (path / files.pages).stat().st_size == len(titles) * row_bytes
    finally:
        store.close()


def test_failed_write_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = EmbeddedWriter(tmp_path, DIM)
    writer.write(make_chunk(0, CHUNKS[0]))
    before = writer.state()

    def fail(*args: object) -> None:
        raise OSError("disk full")

    # Fails after the vectors are written and the tantivy documents committed.
    monkeypatch.setattr(EmbeddedWriter, "_commit", fail)
    with pytest.raises(OSError, match="disk full"):
        writer.write(make_chunk(1, CHUNKS[1]))
    assert writer.state() == before
    monkeypatch.undo()
    writer.write(make_chunk(1, CHUNKS[1]))
    writer.close()
    assert_exactly_once(tmp_path, CHUNKS[0] + CHUNKS[1])


CRASH_SCRIPT = """
import os, sys
from pathlib import Path
sys.path[:0] = [{repo!r}, {tests!r}]
from feverous_es.index.embedded import EmbeddedWriter
from test_embedded_store import DIM, make_chunk, {chunks} as CHUNKS

writer = EmbeddedWriter(Path({path!r}), DIM)
if {crash_in!r}:
    # Dies the hard way inside this step of the next write: no cleanup runs.
    setattr(EmbeddedWriter, {crash_in!r}, lambda *args: os._exit(9))
for seq in range(writer.state().next_seq, len(CHUNKS)):
    writer.write(make_chunk(seq, CHUNKS[seq]))
    print(seq, flush=True)
writer.finish()
writer.close()
"""


def run_writer(path: Path, crash_in: str = "", chunks: str = "CHUNKS") -> subprocess.Popen[str]:
    script = CRASH_SCRIPT.format(
        repo=str(REPO),
        tests=str(Path(__file__).parent),
        path=str(path),
        crash_in=crash_in,
        chunks=chunks,
    )
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)


@pytest.mark.parametrize("crash_in", ["_index_text", "_commit"])
def test_resume_after_crash(tmp_path: Path, crash_in: str) -> None:
    writer = EmbeddedWriter(tmp_path, DIM)
    writer.write(make_chunk(0, CHUNKS[0]))
    writer.close()
    process = run_writer(tmp_path, crash_in)
    assert process.wait(timeout=60) == 9
    # The crash left vectors (and, in _commit, tantivy documents) of chunk 1 behind.
    row_bytes = DIM * np.dtype(NEW_VECTOR_FILES.dtype).itemsize
    assert (tmp_path / NEW_VECTOR_FILES.elements).stat().st_size > 7 * 2 * row_bytes
    writer = EmbeddedWriter(tmp_path, DIM)
    assert writer.state().next_seq == 1
    assert writer.state().elements == 2 * ELEMENTS_PER_PAGE
    writer.close()
    assert count_docs(tmp_path) == (2 * ELEMENTS_PER_PAGE, 2, 2)
    assert run_writer(tmp_path).wait(timeout=60) == 0
    assert_exactly_once(tmp_path, [title for titles in CHUNKS for title in titles])


KILL_CHUNKS = [[f"Page{i}"] for i in range(40)]


def test_resume_after_kill(tmp_path: Path) -> None:
    """kill -9 at arbitrary moments of a build, resume each time: every element ends up once."""
    rng = np.random.default_rng(0)
    resumed_at = []
    for _ in range(8):
        process = run_writer(tmp_path, chunks="KILL_CHUNKS")
        assert process.stdout is not None
        if process.stdout.readline():  # a chunk is written: the build is under way
            time.sleep(rng.uniform(0.0, 0.2))
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
        # A killed build can be read as it stands, before any writer cleans up.
        store = EmbeddedStore(tmp_path)
        state = store.state()
        assert state.elements == state.next_seq * ELEMENTS_PER_PAGE
        assert len(store.search_vector(key_vector("Page0_sentence_0"), k=5)) == min(
            5, state.elements
        )
        store.close()
        writer = EmbeddedWriter(tmp_path, DIM)
        resumed_at.append(writer.state().next_seq)
        writer.close()
    assert len(set(resumed_at)) >= 3, resumed_at
    assert run_writer(tmp_path, chunks="KILL_CHUNKS").wait(timeout=60) == 0
    assert_exactly_once(tmp_path, [title for titles in KILL_CHUNKS for title in titles])


def build_graphed(path: Path) -> list[str]:
    """60 pages in two chunks, over the HNSW threshold: graphs are built. Returns the titles."""
    titles = [f"Page{i}" for i in range(60)]
    build(path, [titles[:30], titles[30:]], hnsw_threshold=100)
    return titles


def test_hnsw_matches_exact(tmp_path: Path) -> None:
    titles = build_graphed(tmp_path)
    # One graph per group: sentences, table rows, captions, list items.
    assert len(list(tmp_path.glob("vectors.*.usearch"))) == 4
    store = EmbeddedStore(tmp_path)
    matrix = store.vectors
    assert matrix.has_hnsw
    rng = np.random.default_rng(1)
    for title in titles[:10]:
        query = matrix.query(key_vector(f"{title}_row_0_1") + 0.1 * rng.standard_normal(DIM))
        hnsw_rows, hnsw_scores = matrix.search(query, 20)
        exact_rows, exact_scores = matrix.search(query, 20, exact=True)
        assert hnsw_rows.tolist() == exact_rows.tolist()
        np.testing.assert_allclose(hnsw_scores, exact_scores, rtol=1e-6)
        cells = store.search_vector(query, k=10, filters=Filters(types=(ElementType.CELL,)))
        assert {hit.element.type for hit in cells} == {ElementType.CELL}
        assert cells[0].element.id == f"{title}_cell_0_1_0"
        # A rare type (a seventh of the vectors) is searched exactly over its own vectors.
        near_caption = matrix.query(key_vector(f"{title}_table_caption_0"))
        captions = store.search_vector(
            near_caption, k=70, filters=Filters(types=(ElementType.TABLE_CAPTION,))
        )
        assert len(captions) == 60
        assert captions[0].element.id == f"{title}_table_caption_0"
    store.close()


def test_page_vectors_past_the_threshold_are_searched_through_their_own_graph(
    tmp_path: Path,
) -> None:
    titles = [f"Page{i}" for i in range(60)]
    build(tmp_path, [titles[:30], titles[30:]], hnsw_threshold=50)  # 60 pages > 50
    assert [p.name for p in tmp_path.glob("page_vectors.*.usearch")] == ["page_vectors.0.0.usearch"]
    store = EmbeddedStore(tmp_path)
    rng = np.random.default_rng(2)
    for title in titles[:10]:
        query = key_vector(f"page:{title}") + 0.1 * rng.standard_normal(DIM)
        hits = store.search_pages_vector(query, k=5)
        assert hits[0].page.title == title
        pages = store.page_vectors
        graph_rows, _ = pages.search(pages.query(query), 5)
        exact_rows, _ = pages.search(pages.query(query), 5, exact=True)
        assert graph_rows.tolist() == exact_rows.tolist()
    assert store.page_vectors.has_hnsw
    store.close()


def test_graphs_in_shards_find_what_exact_search_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vectors, "GRAPH_SHARD_ROWS", 25)
    titles = build_graphed(tmp_path)
    shards = list(tmp_path.glob("vectors.*.*.usearch"))
    # (usearch through feverous_es.index.embedded.vectors, which loads onnxruntime before it)
    sizes = [len(vectors.Index.restore(str(shard), view=True)) for shard in shards]
    assert len(shards) > 4 and max(sizes) == 25  # four groups, each cut into shards
    store = EmbeddedStore(tmp_path)
    rng = np.random.default_rng(2)
    for title in titles[:10]:
        key = f"{title}_row_0_1"
        query = store.vectors.query(key_vector(key) + 0.1 * rng.standard_normal(DIM))
        hnsw_rows, _ = store.vectors.search(query, 20)
        exact_rows, exact_scores = store.vectors.search(query, 20, exact=True)
        assert hnsw_rows.tolist() == exact_rows.tolist()
        # float16 vectors score within 1e-3 of the float32 cosine.
        true = normalized(np.stack([key_vector(key)]))[0] @ query
        assert abs(exact_scores[0] - true) < 1e-3
    store.close()


def test_an_index_of_format_2_is_still_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Format 2 kept float32 vectors (vectors.f32) and one graph per group."""
    monkeypatch.setattr(embedded_writer, "FORMAT_VERSION", 2)
    build_graphed(tmp_path)
    for graph in tmp_path.glob("vectors.*.0.usearch"):
        graph.rename(graph.with_name(graph.name.replace(".0.usearch", ".usearch")))
    monkeypatch.undo()
    assert (tmp_path / "vectors.f32").exists() and not (tmp_path / "vectors.f16").exists()
    store = EmbeddedStore(tmp_path)
    assert store.vectors.has_hnsw
    query = store.vectors.query(key_vector("Page7_row_0_1"))
    assert store.search_vector(query, k=1)[0].element.id.startswith("Page7_cell_0_1_")
    store.close()


def test_a_mapped_vector_file_truncated_under_a_reader_is_an_error_not_a_crash(
    tmp_path: Path,
) -> None:
    # In a process of its own: without the check, the read past the file's new end is SIGBUS.
    script = f"""
import numpy as np
from pathlib import Path
from feverous_es.errors import IndexChanged
from feverous_es.index.embedded import vectors
vectors._IN_MEMORY_BYTES = 0  # mapped, as a large index's vectors are
path = Path({str(tmp_path / "vectors.f16")!r})
np.ones((4096, 64), dtype=np.float16).tofile(path)
matrix = vectors.VectorMatrix(path, 64, 4096, np.float16)
query = matrix.query(np.ones(64))
assert len(matrix.search(query, 3)[0]) == 3
with open(path, "r+b") as file:
    file.truncate(1024)
try:
    matrix.search(query, 3)
except IndexChanged as error:
    print("refused:", error)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused:") and "truncated" in done.stdout
