"""Writing an embedded index chunk by chunk, crash-safe (see the package docstring)."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from dataclasses import replace
from pathlib import Path

import numpy as np
import orjson
import tantivy

from feverous_es.accents import fold_accents
from feverous_es.errors import IncompatibleIndex, StoreError
from feverous_es.index.elements import Element
from feverous_es.index.embedded.layout import (
    FINISH_FILES,
    FORMAT,
    FORMAT_VERSION,
    GROUP_OF_BITS,
    META,
    PAGE_WRITER_HEAP,
    PAGES,
    SCHEMA_SQL,
    SQLITE,
    SQLITE_CACHE_KIB,
    TABLE_WRITER_HEAP,
    TABLES,
    TEXT,
    TEXT_WRITER_HEAP,
    TYPE_BITS,
    VECTOR_FILES,
    VectorFiles,
    add_tables,
    element_schema,
    ensure_title_keys,
    json_list,
    later_docs,
    load_state,
    open_tables,
    open_tantivy,
    page_schema,
    pages_graphed,
    read_meta,
    save_vector_types,
    table_key,
    table_schema,
    title_key_rows,
    vector_files,
    vector_types,
)
from feverous_es.index.embedded.vectors import (
    HNSW_THRESHOLD,
    build_graphs,
    normalized,
    truncate_rows,
    write_rows,
)
from feverous_es.index.store import BuildState, Chunk


class EmbeddedWriter:
    """Write side of the embedded store; opening an existing directory resumes its build."""

    def __init__(self, path: Path, dim: int, hnsw_threshold: int = HNSW_THRESHOLD) -> None:
        self.path = Path(path)
        self.dim = dim
        self._hnsw_threshold = hnsw_threshold
        self.destination = str(self.path)
        self._files = self._init_meta()
        try:
            self._texts = open_tantivy(self.path / TEXT, element_schema())
            self._pages = open_tantivy(self.path / PAGES, page_schema())
            if not (self.path / SQLITE).exists():
                # A new build: the SQLite file must be the last part to appear.
                open_tantivy(self.path / TABLES, table_schema())
            self._db = self._init_db()
            ensure_title_keys(self.path, self._db)  # resuming a build begun before them
            # Built from the SQLite file when resuming a build begun before the table index.
            self._tables = open_tables(self.path, self._db)
            self._text_writer = self._texts.writer(heap_size=TEXT_WRITER_HEAP, num_threads=1)
            self._page_writer = self._pages.writer(heap_size=PAGE_WRITER_HEAP, num_threads=1)
            self._table_writer = self._tables.writer(heap_size=TABLE_WRITER_HEAP, num_threads=1)
        except (sqlite3.Error, ValueError, OSError) as error:
            raise StoreError(f"cannot open {self.path} for writing: {error}") from error
        self._closed = False
        self._state, self._vectors = load_state(self._db)
        if not self._state.complete:
            # Graphs saved by a finish that crashed before marking the build complete.
            for pattern in FINISH_FILES:
                for file in self.path.glob(pattern):
                    file.unlink()
            self._discard_partial()

    def _init_db(self) -> sqlite3.Connection:
        """Open the SQLite file, creating it under another name first: it appears complete with
        its schema, after everything else, so a reader can open the directory once it is
        there."""
        path = self.path / SQLITE
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.unlink(missing_ok=True)
            with closing(sqlite3.connect(tmp)) as db:
                db.executescript(SCHEMA_SQL)
            os.replace(tmp, path)
        # The build writes from its own thread; one thread at a time uses the connection.
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # A large page cache keeps the id and page indices' B-trees in memory while elements
        # arrive in wiki order rather than key order.
        db.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
        return db

    def _init_meta(self) -> VectorFiles:
        """The vector files of the build: a build begun in format 2 goes on in it."""
        meta_path = self.path / META
        if meta_path.exists():
            meta = read_meta(self.path)
            if meta.get("dim") != self.dim:
                raise IncompatibleIndex(
                    f"{self.path} holds {meta.get('dim')}-dimensional vectors, the embedder "
                    f"makes {self.dim}"
                )
            return vector_files(meta)
        if self.path.exists() and any(self.path.iterdir()):
            raise StoreError(f"{self.path} is not empty and not an embedded index")
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = meta_path.with_suffix(".tmp")
        tmp.write_bytes(
            orjson.dumps({"format": FORMAT, "version": FORMAT_VERSION, "dim": self.dim})
        )
        os.replace(tmp, meta_path)
        return VECTOR_FILES[FORMAT_VERSION]

    def state(self) -> BuildState:
        return self._state

    def write(self, chunk: Chunk) -> None:
        """Add one chunk, all or nothing: on any error the store is left as it was before."""
        state = self._state
        if state.complete:
            raise StoreError(f"{self.path} holds a complete build: build a new index to add to it")
        if chunk.seq != state.next_seq:
            raise StoreError(
                f"chunk {chunk.seq} is out of order: the store expects {state.next_seq}"
            )
        element_vecs, vector_rows = self._vector_rows(chunk)
        vectors = self._matrix(chunk.vectors, len(vector_rows), f"chunk {chunk.seq} vectors")
        page_vectors = self._matrix(chunk.page_vectors, len(chunk.pages), "page vectors")
        try:
            files, dtype = self._files, self._files.dtype
            write_rows(self.path / files.elements, self._vectors, vectors, self.dim, dtype)
            write_rows(self.path / files.pages, state.pages, page_vectors, self.dim, dtype)
            self._index_text(chunk)
            self._commit(chunk, element_vecs, vector_rows)
        except BaseException:
            self._discard_partial()
            raise
        self._state, self._vectors = load_state(self._db)

    def _vector_rows(self, chunk: Chunk) -> tuple[list[int], list[tuple[int, str, str, int]]]:
        """Each element's vector number, and the chunk's vector rows (number, key, embed text,
        bits of the element types using it) in the order their keys first appear, as
        ``Chunk.vectors`` holds them."""
        numbers: dict[str, int] = {}
        first: list[Element] = []
        types: list[int] = []
        element_vecs = []
        for element in chunk.elements:
            local = numbers.setdefault(element.vector_key, len(first))
            if local == len(first):
                first.append(element)
                types.append(0)
            types[local] |= TYPE_BITS[element.type]
            element_vecs.append(self._vectors + local)
        rows = [
            (self._vectors + local, element.vector_key, element.embed_text, types[local])
            for local, element in enumerate(first)
        ]
        return element_vecs, rows

    def _matrix(self, vectors: np.ndarray, rows: int, what: str) -> np.ndarray:
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.size == 0 and rows == 0:
            return matrix.reshape(0, self.dim)
        if matrix.shape != (rows, self.dim):
            raise StoreError(f"{what} have shape {matrix.shape}, expected ({rows}, {self.dim})")
        return normalized(matrix)

    def _index_text(self, chunk: Chunk) -> None:
        state = self._state
        schema = self._texts.schema
        for eid, element in enumerate(chunk.elements, start=state.elements):
            doc = {
                "text": fold_accents(element.linearized),
                "page": element.page,
                "type": element.type.value,
                "seq": chunk.seq,
                "eid": eid,
            }
            if element.table is not None:
                doc["table"] = table_key(element.page, element.table)
            self._text_writer.add_document(tantivy.Document.from_dict(doc, schema))
        schema = self._pages.schema
        for pid, page in enumerate(chunk.pages, start=state.pages):
            title, intro = fold_accents(page.title), fold_accents(page.intro)
            doc = {"title": title, "intro": intro, "seq": chunk.seq, "pid": pid}
            self._page_writer.add_document(tantivy.Document.from_dict(doc, schema))
        add_tables(self._table_writer, self._tables.schema, chunk.table_texts(), chunk.seq)
        self._text_writer.commit()
        self._page_writer.commit()
        self._table_writer.commit()

    def _commit(
        self, chunk: Chunk, element_vecs: list[int], vector_rows: list[tuple[int, str, str, int]]
    ) -> None:
        state = self._state
        db = self._db
        db.execute("BEGIN")
        try:
            db.executemany("INSERT INTO vectors VALUES (?, ?, ?, ?)", vector_rows)
            db.executemany(
                "INSERT INTO elements VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    (
                        eid, e.id, e.page, e.type.value, e.text, e.linearized, vec,
                        json_list(e.links), json_list(e.section_path), json_list(e.context),
                        e.table, e.row, e.column, e.list_index, e.level,
                    )
                    for (eid, e), vec in zip(
                        enumerate(chunk.elements, start=state.elements), element_vecs, strict=True
                    )
                ),
            )  # fmt: skip
            db.executemany(
                "INSERT INTO pages VALUES (?, ?, ?, ?)",
                (
                    (pid, page.title, page.intro, json_list(page.links))
                    for pid, page in enumerate(chunk.pages, start=state.pages)
                ),
            )
            titles = enumerate((page.title for page in chunk.pages), start=state.pages)
            db.executemany("INSERT INTO title_keys VALUES (?, ?)", title_key_rows(titles))
        except sqlite3.IntegrityError as error:
            raise StoreError(
                f"chunk {chunk.seq} repeats an element id or page title already stored: {error}"
            ) from error
        db.execute(
            "UPDATE state SET next_seq = ?, last_rowid = ?, elements = ?, pages = ?,"
            " malformed = ?, vectors = ?",
            (
                chunk.seq + 1,
                chunk.last_rowid,
                state.elements + len(chunk.elements),
                state.pages + len(chunk.pages),
                state.malformed + len(chunk.malformed),
                self._vectors + len(vector_rows),
            ),
        )
        db.execute("COMMIT")

    def _discard_partial(self) -> None:
        """Remove whatever a failed or crashed write left beyond the SQLite state."""
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")
        self._state, self._vectors = load_state(self._db)
        files, dtype = self._files, self._files.dtype
        truncate_rows(self.path / files.elements, self._vectors, self.dim, dtype)
        truncate_rows(self.path / files.pages, self._state.pages, self.dim, dtype)
        for index, writer in (
            (self._texts, self._text_writer),
            (self._pages, self._page_writer),
            (self._tables, self._table_writer),
        ):
            writer.rollback()
            later = later_docs(index, self._state.next_seq)
            index.reload()
            # count=True fills SearchResult.count, which tantivy's stubs do not declare
            if index.searcher().search(later, 1, count=True).count:  # type: ignore[attr-defined]
                writer.delete_documents_by_query(later)
                writer.commit()

    def finish(self) -> list[str]:
        """Mark the build complete, first building the HNSW graphs if the index is large (one
        writer builds an embedded index: no part is ever missing)."""
        if self._state.complete:
            return []
        types = vector_types(self._db, self._vectors)
        save_vector_types(self.path, types)
        if self._vectors > self._hnsw_threshold:
            # Groups under a tenth of the threshold take ~2 ms or less to scan exactly.
            groups = GROUP_OF_BITS[types]
            build_graphs(
                self.path / self._files.elements, self.dim, self._files.dtype, groups,
                self._hnsw_threshold // 10,
            )  # fmt: skip
        if pages_graphed(self._state.pages, self.dim, self._hnsw_threshold):
            # One group: every page answers every query.
            one_group = np.zeros(self._state.pages, dtype=np.int64)
            build_graphs(self.path / self._files.pages, self.dim, self._files.dtype, one_group, 0)
        self._db.execute("UPDATE state SET complete = 1")
        self._state = replace(self._state, complete=True)
        return []

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Waiting for tantivy's merges leaves fewer segments, so searches are faster.
        self._text_writer.wait_merging_threads()
        self._page_writer.wait_merging_threads()
        self._table_writer.wait_merging_threads()
        # Each tantivy index holds a reader whose watcher reloads it (taking a lock file in its
        # directory) up to 0.5 s after the last commit: dropped here, a caller may delete the
        # directory at once.
        del self._texts, self._pages, self._tables
        self._db.close()
