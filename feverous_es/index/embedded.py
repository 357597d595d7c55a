"""The embedded store: one directory on local disk, no server.

Layout of the directory:

* ``meta.json``: format name, version and vector size.
* ``elements.sqlite``: elements (ordinal ``eid`` in insertion order), one row per distinct vector
  (its key, embed text and the element types using it), pages, and the build state.
* ``vectors.f16`` / ``page_vectors.f16``: raw float16 rows, unit length, memory-mapped to read
  (``.f32`` files of float32 rows in format 2, which is still read).
* ``text/`` and ``pages/``: tantivy indices (BM25) over element linearizations and over page
  title + intro; they store only the SQLite ordinal of each document.
* ``tables/``: a tantivy index (BM25) of whole tables, one document per table (page title,
  caption and every cell's text), keyed by page and table number. An index made before it
  existed gets it built from the SQLite file the first time it is opened.
* ``vectors.<group>.<shard>.usearch``: HNSW graphs, built by ``finish`` when exact search would
  be slow: for sentence vectors, for table rows, and so on (see ``_type_group``), each group cut
  into shards of bounded size (format 2: ``vectors.<group>.usearch``, one per group).

A chunk is written in the order vectors (fsync), tantivy (commit), SQLite (one transaction that
also advances the state). The SQLite state is the truth: whatever a crash left beyond it (vector
rows past its counts, tantivy documents of later chunks, tagged with their chunk ``seq``) is
removed when a writer opens the directory again.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

import numpy as np
import orjson
import tantivy
from tantivy import Occur, Query

from feverous_es.errors import IncompatibleIndex, StoreError
from feverous_es.index.elements import (
    Element,
    ElementType,
    PageRecord,
    fold_accents,
    title_keys,
)
from feverous_es.index.store import (
    BuildState,
    Chunk,
    Filters,
    Hit,
    HybridWeights,
    PageHit,
    TableKey,
    fuse_hybrid,
    table_texts,
)
from feverous_es.index.vectors import (
    HNSW_THRESHOLD,
    VectorMatrix,
    build_graphs,
    in_memory_rows,
    normalized,
    truncate_rows,
    write_rows,
)

FORMAT = "feverous-es-embedded"
# 2: BM25 fields hold accent-folded text; 3: float16 vectors, graphs in shards.
FORMAT_VERSION = 3


@dataclass(frozen=True)
class VectorFiles:
    """Where an index keeps its element and page vectors, and as what."""

    elements: str
    pages: str
    dtype: type[np.floating]


# What each readable format version keeps its vectors in.
_VECTOR_FILES = {
    2: VectorFiles("vectors.f32", "page_vectors.f32", np.float32),
    3: VectorFiles("vectors.f16", "page_vectors.f16", np.float16),
}
NEW_VECTOR_FILES = _VECTOR_FILES[FORMAT_VERSION]  # what a new build writes

_META = "meta.json"
_SQLITE = "elements.sqlite"
_TEXT = "text"
_PAGES = "pages"
_TABLES = "tables"
_GRAPHS = ("vectors.*.usearch", "vectors.*.tmp", "page_vectors.*.usearch", "page_vectors.*.tmp")

_ANALYZER = "en_stem"
# One writer thread per index: the build embeds on all cores at the same time.
_TEXT_WRITER_HEAP = 256_000_000
# Claim terms in more than this share of the elements (film, born, year, ...): their postings
# are most of a claim disjunction's cost. See _common_terms_query.
COMMON_TERM_SHARE = 0.05
_PAGE_WRITER_HEAP = 32_000_000
_TABLE_WRITER_HEAP = 64_000_000
_SQLITE_CACHE_KIB = 131_072
# The most a writer's buffers hold, filled by a long build (not by a short one).
WRITER_BUFFER_BYTES = (
    _TEXT_WRITER_HEAP + _PAGE_WRITER_HEAP + _TABLE_WRITER_HEAP + _SQLITE_CACHE_KIB * 1024
)
_TYPE_BITS = {element_type: 1 << i for i, element_type in enumerate(ElementType)}


def _type_group(bits: int) -> int:
    """The HNSW group of a vector used by these element types: the first type's bit, header
    cells counting as cells (the vector of a table row serves both)."""
    for element_type in ElementType:
        if bits & _TYPE_BITS[element_type]:
            if element_type is ElementType.HEADER_CELL:
                return _TYPE_BITS[ElementType.CELL]
            return _TYPE_BITS[element_type]
    return 0


_GROUP_OF_BITS = np.array([_type_group(bits) for bits in range(256)], dtype=np.uint8)

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS elements (
    eid INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    page TEXT NOT NULL,
    type TEXT NOT NULL,
    text TEXT NOT NULL,
    linearized TEXT NOT NULL,
    vec INTEGER NOT NULL,
    links TEXT,
    section_path TEXT,
    context TEXT,
    tbl INTEGER,
    row INTEGER,
    col INTEGER,
    list_index INTEGER,
    level INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS elements_id ON elements (id);
CREATE INDEX IF NOT EXISTS elements_page ON elements (page);
CREATE INDEX IF NOT EXISTS elements_vec ON elements (vec);
CREATE TABLE IF NOT EXISTS vectors (
    vec INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    embed_text TEXT NOT NULL,
    types INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS pages (
    pid INTEGER PRIMARY KEY,
    title TEXT NOT NULL UNIQUE,
    intro TEXT NOT NULL,
    links TEXT
);
CREATE TABLE IF NOT EXISTS state (
    one INTEGER PRIMARY KEY CHECK (one = 0),
    next_seq INTEGER NOT NULL,
    last_rowid INTEGER NOT NULL,
    elements INTEGER NOT NULL,
    pages INTEGER NOT NULL,
    malformed INTEGER NOT NULL,
    complete INTEGER NOT NULL,
    vectors INTEGER NOT NULL
);
INSERT OR IGNORE INTO state VALUES (0, 0, 0, 0, 0, 0, 0, 0);
"""

# Elements share their vector's key and embed text, stored once per vector.
_ELEMENT_SELECT = """
SELECT e.eid, e.id, e.page, e.type, e.text, e.linearized, v.key, v.embed_text, e.links,
       e.section_path, e.context, e.tbl, e.row, e.col, e.list_index, e.level
FROM elements e JOIN vectors v ON v.vec = e.vec
"""
_IN_JSON = "IN (SELECT value FROM json_each(?))"
_EQUAL_WEIGHTS = HybridWeights()


def english_analyzer() -> tantivy.TextAnalyzer:
    """The analyzer of the BM25 fields, applied to documents and queries alike."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stopword("english"))
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


class BM25Analyzer:
    """What the BM25 fields hold of a text: accents folded (see
    :func:`~feverous_es.index.elements.fold_accents`: tantivy's tokenizer would split a
    decomposed "Mocăniță" into "moca" and "nit"), then :func:`english_analyzer`'s terms."""

    def __init__(self) -> None:
        self._analyzer = english_analyzer()

    def analyze(self, text: str) -> list[str]:
        return self._analyzer.analyze(fold_accents(text))


def _element_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    # Frequencies without positions: BM25 needs no more, and positions would double the index.
    builder.add_text_field("text", tokenizer_name=_ANALYZER, index_option="freq")
    for name in ("page", "type", "table"):
        builder.add_text_field(name, tokenizer_name="raw", index_option="basic")
    builder.add_unsigned_field("seq", indexed=True)
    builder.add_unsigned_field("eid", stored=True, fast=True)
    return builder.build()


def _page_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    for name in ("title", "intro"):
        builder.add_text_field(name, tokenizer_name=_ANALYZER, index_option="freq")
    builder.add_unsigned_field("seq", indexed=True)
    builder.add_unsigned_field("pid", stored=True, fast=True)
    return builder.build()


def _table_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", tokenizer_name=_ANALYZER, index_option="freq")
    builder.add_text_field("table", tokenizer_name="raw", index_option="basic", stored=True)
    builder.add_unsigned_field("seq", indexed=True)
    return builder.build()


def _table_key(page: str, table: int) -> str:
    return f"{page}\x1f{table}"


def _parse_table_key(key: str) -> TableKey:
    page, _, table = key.rpartition("\x1f")
    return page, int(table)


def _add_tables(
    writer: tantivy.IndexWriter, schema: tantivy.Schema, texts: dict[TableKey, str], seq: int
) -> None:
    for (page, table), text in texts.items():
        doc = {"text": fold_accents(text), "table": _table_key(page, table), "seq": seq}
        writer.add_document(tantivy.Document.from_dict(doc, schema))


def _backfill_tables(index: tantivy.Index, db: sqlite3.Connection) -> None:
    """Index the tables of every element the SQLite file holds (an index built before the
    table index existed)."""
    writer = index.writer(heap_size=_TABLE_WRITER_HEAP, num_threads=1)
    rows = db.execute("SELECT page, tbl, text FROM elements WHERE tbl IS NOT NULL ORDER BY eid")
    _add_tables(writer, index.schema, table_texts(rows), 0)
    writer.commit()
    writer.wait_merging_threads()


def _open_tables(path: Path, db: sqlite3.Connection) -> tantivy.Index:
    """The table index, built from the SQLite file first when the directory has none (built
    beside it and moved in place, so a reader never sees half of it)."""
    target = path / _TABLES
    if not target.exists():
        tmp = path / f"{_TABLES}.tmp"
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            _backfill_tables(_open_tantivy(tmp, _table_schema()), db)
            os.replace(tmp, target)
        except (OSError, ValueError) as error:
            raise StoreError(
                f"{path} was built before the table index and it cannot be added here "
                f"({error}): open it once where the directory is writable, or rebuild it"
            ) from error
    return _open_tantivy(target, None)


def _json(values: Sequence[object]) -> str | None:
    return orjson.dumps(values).decode() if values else None


def _tuple(value: str | None) -> tuple[str, ...]:
    return tuple(orjson.loads(value)) if value else ()


def _read_meta(path: Path) -> dict[str, object]:
    try:
        meta = orjson.loads((path / _META).read_bytes())
    except FileNotFoundError:
        raise StoreError(f"{path} is not an embedded index (it has no {_META})") from None
    except (OSError, orjson.JSONDecodeError) as error:
        raise StoreError(f"{path / _META} cannot be read: {error}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise IncompatibleIndex(f"{path} is not an embedded index ({_META} names another format)")
    if meta.get("version") not in _VECTOR_FILES:
        raise IncompatibleIndex(
            f"{path} has index format version {meta.get('version')}, this program reads "
            f"versions {', '.join(map(str, _VECTOR_FILES))}: rebuild the index"
        )
    return meta


def pages_graphed(pages: int, dim: int, threshold: int = HNSW_THRESHOLD) -> bool:
    """Whether a finished build gives its page vectors an HNSW graph: past the element
    threshold, or past what is scanned fast exactly (:func:`in_memory_rows`)."""
    return pages > min(threshold, in_memory_rows(dim))


def _vector_files(meta: dict[str, object]) -> VectorFiles:
    """The vector files of an index, by its format version (checked by :func:`_read_meta`)."""
    return _VECTOR_FILES[int(str(meta["version"]))]


def _load_state(db: sqlite3.Connection) -> tuple[BuildState, int]:
    """The build state and the number of element vectors it accounts for."""
    row = db.execute(
        "SELECT next_seq, last_rowid, elements, pages, malformed, complete, vectors FROM state"
    ).fetchone()
    if row is None:
        raise StoreError("the index has no build state: rebuild it")
    *counts, complete, vectors = row
    return BuildState(*counts, complete=bool(complete)), vectors


def _open_tantivy(path: Path, schema: tantivy.Schema | None) -> tantivy.Index:
    """Open a tantivy index, creating it when a schema is given and it does not exist yet."""
    if schema is None:
        index = tantivy.Index.open(str(path))
    else:
        path.mkdir(exist_ok=True)
        index = tantivy.Index(schema, path=str(path), reuse=True)
    index.register_tokenizer(_ANALYZER, english_analyzer())
    return index


def _vector_types(db: sqlite3.Connection, rows: int) -> np.ndarray:
    """The element-type bits of the first ``rows`` vectors."""
    return np.fromiter(
        (
            types
            for (types,) in db.execute(
                "SELECT types FROM vectors WHERE vec < ? ORDER BY vec", (rows,)
            )
        ),
        dtype=np.uint8,
        count=rows,
    )


def _disjunction(schema: tantivy.Schema, fields: Sequence[str], terms: Sequence[str]) -> Query:
    return Query.boolean_query(
        [
            (Occur.Should, Query.term_query(schema, field, term, index_option="freq"))
            for term in terms
            for field in fields
        ]
    )


def _common_terms_query(
    searcher: tantivy.Searcher, schema: tantivy.Schema, terms: Sequence[str]
) -> Query:
    """The terms' disjunction over the element text, where a term found in more than
    ``COMMON_TERM_SHARE`` of the elements only adds its score to elements that match one of the
    rarer terms (Lucene's CommonTermsQuery). An element's score is the plain disjunction's;
    only elements matching common terms alone, which rank low, are not collected."""
    limit = COMMON_TERM_SHARE * searcher.num_docs
    common = [term for term in terms if searcher.doc_freq("text", term) > limit]
    rare = [term for term in terms if term not in common]
    if not common or not rare:
        return _disjunction(schema, ("text",), terms)
    return Query.boolean_query(
        [
            (Occur.Must, _disjunction(schema, ("text",), rare)),
            (Occur.Should, _disjunction(schema, ("text",), common)),
        ]
    )


def _restricted(query: Query, only: Query) -> Query:
    """``query``'s documents that ``only`` matches, scored by ``query`` alone (as a bool
    query's filter clause restricts without scoring)."""
    return Query.boolean_query(
        [(Occur.Must, query), (Occur.Must, Query.const_score_query(only, 0.0))]
    )


def _later_docs(index: tantivy.Index, seq: int) -> Query:
    return Query.range_query(index.schema, "seq", tantivy.FieldType.Unsigned, lower_bound=seq)


class EmbeddedWriter:
    """Write side of the embedded store; opening an existing directory resumes its build."""

    def __init__(self, path: Path, dim: int, hnsw_threshold: int = HNSW_THRESHOLD) -> None:
        self.path = Path(path)
        self.dim = dim
        self._hnsw_threshold = hnsw_threshold
        self.destination = str(self.path)
        self._files = self._init_meta()
        try:
            self._texts = _open_tantivy(self.path / _TEXT, _element_schema())
            self._pages = _open_tantivy(self.path / _PAGES, _page_schema())
            if not (self.path / _SQLITE).exists():
                # A new build: the SQLite file must be the last part to appear.
                _open_tantivy(self.path / _TABLES, _table_schema())
            self._db = self._init_db()
            # Built from the SQLite file when resuming a build begun before the table index.
            self._tables = _open_tables(self.path, self._db)
            self._text_writer = self._texts.writer(heap_size=_TEXT_WRITER_HEAP, num_threads=1)
            self._page_writer = self._pages.writer(heap_size=_PAGE_WRITER_HEAP, num_threads=1)
            self._table_writer = self._tables.writer(heap_size=_TABLE_WRITER_HEAP, num_threads=1)
        except (sqlite3.Error, ValueError, OSError) as error:
            raise StoreError(f"cannot open {self.path} for writing: {error}") from error
        self._closed = False
        self._state, self._vectors = _load_state(self._db)
        if not self._state.complete:
            # Graphs saved by a finish that crashed before marking the build complete.
            for pattern in _GRAPHS:
                for file in self.path.glob(pattern):
                    file.unlink()
            self._discard_partial()

    def _init_db(self) -> sqlite3.Connection:
        """Open the SQLite file, creating it under another name first: it appears complete with
        its schema, after everything else, so a reader can open the directory once it is
        there."""
        path = self.path / _SQLITE
        if not path.exists():
            tmp = path.with_suffix(".tmp")
            tmp.unlink(missing_ok=True)
            with closing(sqlite3.connect(tmp)) as db:
                db.executescript(_SCHEMA_SQL)
            os.replace(tmp, path)
        # The build writes from its own thread; one thread at a time uses the connection.
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        # A large page cache keeps the id and page indices' B-trees in memory while elements
        # arrive in wiki order rather than key order.
        db.execute(f"PRAGMA cache_size = -{_SQLITE_CACHE_KIB}")
        return db

    def _init_meta(self) -> VectorFiles:
        """The vector files of the build: a build begun in format 2 goes on in it."""
        meta_path = self.path / _META
        if meta_path.exists():
            meta = _read_meta(self.path)
            if meta.get("dim") != self.dim:
                raise IncompatibleIndex(
                    f"{self.path} holds {meta.get('dim')}-dimensional vectors, the embedder "
                    f"makes {self.dim}"
                )
            return _vector_files(meta)
        if self.path.exists() and any(self.path.iterdir()):
            raise StoreError(f"{self.path} is not empty and not an embedded index")
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = meta_path.with_suffix(".tmp")
        tmp.write_bytes(
            orjson.dumps({"format": FORMAT, "version": FORMAT_VERSION, "dim": self.dim})
        )
        os.replace(tmp, meta_path)
        return _VECTOR_FILES[FORMAT_VERSION]

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
        self._state, self._vectors = _load_state(self._db)

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
            types[local] |= _TYPE_BITS[element.type]
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
                doc["table"] = _table_key(element.page, element.table)
            self._text_writer.add_document(tantivy.Document.from_dict(doc, schema))
        schema = self._pages.schema
        for pid, page in enumerate(chunk.pages, start=state.pages):
            title, intro = fold_accents(page.title), fold_accents(page.intro)
            doc = {"title": title, "intro": intro, "seq": chunk.seq, "pid": pid}
            self._page_writer.add_document(tantivy.Document.from_dict(doc, schema))
        _add_tables(self._table_writer, self._tables.schema, chunk.table_texts(), chunk.seq)
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
                        _json(e.links), _json(e.section_path), _json(e.context),
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
                    (pid, page.title, page.intro, _json(page.links))
                    for pid, page in enumerate(chunk.pages, start=state.pages)
                ),
            )
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
        self._state, self._vectors = _load_state(self._db)
        files, dtype = self._files, self._files.dtype
        truncate_rows(self.path / files.elements, self._vectors, self.dim, dtype)
        truncate_rows(self.path / files.pages, self._state.pages, self.dim, dtype)
        for index, writer in (
            (self._texts, self._text_writer),
            (self._pages, self._page_writer),
            (self._tables, self._table_writer),
        ):
            writer.rollback()
            later = _later_docs(index, self._state.next_seq)
            index.reload()
            if index.searcher().search(later, 1, count=True).count:
                writer.delete_documents_by_query(later)
                writer.commit()

    def finish(self) -> None:
        """Mark the build complete, first building the HNSW graphs if the index is large."""
        if self._state.complete:
            return
        if self._vectors > self._hnsw_threshold:
            # Groups under a tenth of the threshold take ~2 ms or less to scan exactly.
            groups = _GROUP_OF_BITS[_vector_types(self._db, self._vectors)]
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

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Waiting for tantivy's merges leaves fewer segments, so searches are faster.
        self._text_writer.wait_merging_threads()
        self._page_writer.wait_merging_threads()
        self._table_writer.wait_merging_threads()
        self._db.close()


def _element(row: tuple) -> Element:
    (_, id_, page, type_, text, linearized, key, embed_text, links, section_path, context,
     table, row_, column, list_index, level) = row  # fmt: skip
    return Element(
        id=id_,
        page=page,
        type=ElementType(type_),
        text=text,
        linearized=linearized,
        vector_key=key,
        embed_text=embed_text,
        links=_tuple(links),
        section_path=_tuple(section_path),
        context=_tuple(context),
        table=table,
        row=row_,
        column=column,
        list_index=list_index,
        level=level,
    )


def _element_where(filters: Filters) -> tuple[str, list[str | None]]:
    """SQL conditions (each starting with AND) on ``elements e`` for the filters."""
    sql: list[str] = []
    params: list[str | None] = []
    if filters.pages:
        sql.append(f"AND e.page {_IN_JSON}")
        params.append(_json(filters.pages))
    if filters.types:
        sql.append(f"AND e.type {_IN_JSON}")
        params.append(_json([ElementType(t).value for t in filters.types]))
    if filters.tables:
        # The page condition lets SQLite use the page index before testing the table.
        sql.append(f"AND e.page {_IN_JSON} AND e.page || char(31) || e.tbl {_IN_JSON}")
        params.append(_json([page for page, _ in filters.tables]))
        params.append(_json([_table_key(page, table) for page, table in filters.tables]))
    return " ".join(sql), params


class EmbeddedStore:
    """Read side of the embedded store. Vector search sees the vectors that were stored when
    it was opened: reopen it to see later chunks of a build in progress."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        meta = _read_meta(self.path)
        self.dim = int(str(meta["dim"]))
        files = _vector_files(meta)
        try:
            # Not mode=ro: a read-write connection rolls back the journal a killed build left
            # (SQLite opens a write-protected file read-only by itself). SQLite is built
            # serialized here, so threads may share the connection.
            uri = f"file:{quote(str(self.path / _SQLITE))}?mode=rw"
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self._db.execute("PRAGMA query_only = ON")
            state, vectors = _load_state(self._db)
            self._texts = _open_tantivy(self.path / _TEXT, None)
            self._pages = _open_tantivy(self.path / _PAGES, None)
            self._tables = _open_tables(self.path, self._db)
            # Which element types use each vector: type filters test it per vector.
            self._vector_types = _vector_types(self._db, vectors)
            self._vectors = VectorMatrix(
                self.path / files.elements,
                self.dim,
                vectors,
                files.dtype,
                groups=_GROUP_OF_BITS[self._vector_types] if state.complete else None,
            )
            self._page_vectors = VectorMatrix(
                self.path / files.pages,
                self.dim,
                state.pages,
                files.dtype,
                groups=np.zeros(state.pages, dtype=np.int64) if state.complete else None,
            )
        except (sqlite3.Error, ValueError, OSError) as error:
            raise StoreError(f"{self.path} is not a readable embedded index: {error}") from error
        self._analyzer = BM25Analyzer()
        self._titles: dict[str, list[str]] | None = None

    @property
    def vectors(self) -> VectorMatrix:
        """The element vectors, for diagnostics such as HNSW recall against exact search."""
        return self._vectors

    @property
    def page_vectors(self) -> VectorMatrix:
        """The page vectors (title and intro), for the same diagnostics."""
        return self._page_vectors

    def state(self) -> BuildState:
        return _load_state(self._db)[0]

    def close(self) -> None:
        self._db.close()

    # Elements and pages by key.

    def get_elements(self, ids: Sequence[str]) -> list[Element]:
        rows = self._db.execute(f"{_ELEMENT_SELECT} WHERE e.id {_IN_JSON}", (_json(list(ids)),))
        found = {element.id: element for element in map(_element, rows)}
        return [found[element_id] for element_id in ids if element_id in found]

    def page_elements(self, page: str) -> list[Element]:
        rows = self._db.execute(f"{_ELEMENT_SELECT} WHERE e.page = ? ORDER BY e.eid", (page,))
        return [_element(row) for row in rows]

    def get_pages(self, titles: Sequence[str]) -> list[PageRecord]:
        rows = self._db.execute(
            f"SELECT title, intro, links FROM pages WHERE title {_IN_JSON}", (_json(list(titles)),)
        )
        found = {title: PageRecord(title, intro, _tuple(links)) for title, intro, links in rows}
        return [found[title] for title in titles if title in found]

    def match_titles(self, keys: Sequence[str]) -> dict[str, list[str]]:
        if self._titles is None:
            # Built on first use: one pass over the titles (~1 s per million pages).
            self._titles = {}
            for (title,) in self._db.execute("SELECT title FROM pages"):
                for key in title_keys(title):
                    self._titles.setdefault(key, []).append(title)
        return {key: self._titles[key] for key in keys if key in self._titles}

    def _elements(self, eids: Iterable[int]) -> dict[int, Element]:
        rows = self._db.execute(f"{_ELEMENT_SELECT} WHERE e.eid {_IN_JSON}", (_json(list(eids)),))
        return {row[0]: _element(row) for row in rows}

    def _hits(self, scored: list[tuple[int, float]]) -> list[Hit]:
        elements = self._elements(eid for eid, _ in scored)
        return [Hit(elements[eid], score) for eid, score in scored if eid in elements]

    # Element search.

    def search_text(self, query: str, k: int = 100, filters: Filters | None = None) -> list[Hit]:
        return self._hits(self._text_scores(query, k, filters))

    def search_vector(
        self, vector: np.ndarray, k: int = 100, filters: Filters | None = None
    ) -> list[Hit]:
        return self._hits(self._vector_scores(vector, k, filters))

    def search_hybrid(
        self,
        query: str,
        vector: np.ndarray,
        k: int = 100,
        filters: Filters | None = None,
        weights: HybridWeights = _EQUAL_WEIGHTS,
    ) -> list[Hit]:
        text = self._text_scores(query, k, filters)
        vector_scores = self._vector_scores(vector, k, filters)
        elements = self._elements({eid for eid, _ in text + vector_scores})
        text_hits = [Hit(elements[eid], score) for eid, score in text if eid in elements]
        vector_hits = [Hit(elements[eid], score) for eid, score in vector_scores if eid in elements]
        return fuse_hybrid(text_hits, vector_hits, weights, k)

    def _match(self, index: tantivy.Index, fields: Sequence[str], text: str) -> Query | None:
        """A disjunction of the analyzed query terms over ``fields``; None if no term is left.
        Terms, not the query parser: claims hold quotes, colons and parentheses."""
        terms = list(dict.fromkeys(self._analyzer.analyze(text)))
        return _disjunction(index.schema, fields, terms) if terms else None

    def _text_scores(self, text: str, k: int, filters: Filters | None) -> list[tuple[int, float]]:
        terms = list(dict.fromkeys(self._analyzer.analyze(text)))
        if not terms or k <= 0:
            return []
        searcher = self._texts.searcher()
        if filters and (filters.pages or filters.tables):
            # A page's or table's elements are few: every term may score them.
            query = _restricted(
                _disjunction(self._texts.schema, (_TEXT,), terms), self._filter(filters)
            )
        else:
            query = _common_terms_query(searcher, self._texts.schema, terms)
            if filters:
                query = _restricted(query, self._filter(filters))
        hits = searcher.search(query, k, count=False).hits
        eids = searcher.fast_field_values("eid", [address for _, address in hits])
        return [(int(eid), score) for (score, _), eid in zip(hits, eids, strict=True)]

    def _filter(self, filters: Filters) -> Query:
        schema = self._texts.schema
        parts = []
        if filters.pages:
            parts.append(Query.term_set_query(schema, "page", list(filters.pages)))
        if filters.types:
            types = [ElementType(t).value for t in filters.types]
            parts.append(Query.term_set_query(schema, "type", types))
        if filters.tables:
            tables = [_table_key(page, table) for page, table in filters.tables]
            parts.append(Query.term_set_query(schema, "table", tables))
        return Query.boolean_query([(Occur.Must, part) for part in parts])

    def _query_vector(self, vector: np.ndarray, matrix: VectorMatrix) -> np.ndarray:
        try:
            return matrix.query(vector)
        except ValueError as error:
            raise StoreError(f"{error}: the embedder does not match the index") from error

    def _vector_scores(
        self, vector: np.ndarray, k: int, filters: Filters | None
    ) -> list[tuple[int, float]]:
        """Top-``k`` elements by cosine: the best vectors, each expanded to the elements that
        share it (a table row's cells), in score then document order."""
        query = self._query_vector(vector, self._vectors)
        if k <= 0 or not self._vectors.rows:
            return []
        filters = filters or Filters()
        where, params = _element_where(filters)
        if filters.pages or filters.tables:
            # Few vectors: search exactly over just those.
            rows = np.fromiter(
                (vec for (vec,) in self._db.execute(
                    f"SELECT DISTINCT e.vec FROM elements e WHERE e.vec < ? {where}",
                    (self._vectors.rows, *params),
                )),
                dtype=np.int64,
            )  # fmt: skip
            vecs, scores = self._vectors.search(query, k, rows=rows)
        elif filters.types:
            bits = sum(_TYPE_BITS[ElementType(t)] for t in set(filters.types))
            vecs, scores = self._vectors.search(query, k, allowed=(self._vector_types & bits) != 0)
        else:
            vecs, scores = self._vectors.search(query, k)
        rank = {int(vec): i for i, vec in enumerate(vecs)}
        members = self._db.execute(
            f"SELECT e.eid, e.vec FROM elements e WHERE e.vec {_IN_JSON} {where}",
            (_json(list(rank)), *params),
        ).fetchall()
        members.sort(key=lambda member: (rank[member[1]], member[0]))
        return [(eid, float(scores[rank[vec]])) for eid, vec in members[:k]]

    # Table search.

    def search_tables(
        self, query: str, k: int = 10, tables: Sequence[TableKey] = ()
    ) -> list[tuple[TableKey, float]]:
        """Whole tables (title, caption and every cell as one document) by BM25, best first:
        ``((page, table), score)``; ``tables`` restricts the search to those tables (the
        scores stay those of a search over all of them)."""
        match = self._match(self._tables, ("text",), query)
        if match is None or k <= 0:
            return []
        if tables:
            keys = [_table_key(page, table) for page, table in tables]
            match = _restricted(match, Query.term_set_query(self._tables.schema, "table", keys))
        searcher = self._tables.searcher()
        return [
            (_parse_table_key(searcher.doc(address)["table"][0]), score)
            for score, address in searcher.search(match, k, count=False).hits
        ]

    # Page search.

    def search_pages_text(self, query: str, k: int = 10) -> list[PageHit]:
        match = self._match(self._pages, ("title", "intro"), query)
        if match is None or k <= 0:
            return []
        searcher = self._pages.searcher()
        hits = searcher.search(match, k, count=False).hits
        pids = searcher.fast_field_values("pid", [address for _, address in hits])
        return self._page_hits(
            [(int(pid), score) for (score, _), pid in zip(hits, pids, strict=True)]
        )

    def search_pages_vector(self, vector: np.ndarray, k: int = 10) -> list[PageHit]:
        query = self._query_vector(vector, self._page_vectors)
        pids, scores = self._page_vectors.search(query, k)
        return self._page_hits(
            [(int(pid), float(score)) for pid, score in zip(pids, scores, strict=True)]
        )

    def _page_hits(self, scored: list[tuple[int, float]]) -> list[PageHit]:
        rows = self._db.execute(
            f"SELECT pid, title, intro, links FROM pages WHERE pid {_IN_JSON}",
            (_json([pid for pid, _ in scored]),),
        )
        pages = {pid: PageRecord(title, intro, _tuple(links)) for pid, title, intro, links in rows}
        return [PageHit(pages[pid], score) for pid, score in scored if pid in pages]
