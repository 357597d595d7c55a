"""The embedded index's on-disk format: file names, versions, schemas, metadata and the
build state, and what opening a directory checks or migrates."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
import tantivy
from tantivy import Query

from feverous_es.accents import fold_accents
from feverous_es.errors import IncompatibleIndex, StoreError
from feverous_es.index.elements import ElementType, title_keys
from feverous_es.index.embedded.analysis import english_analyzer
from feverous_es.index.embedded.vectors import HNSW_THRESHOLD, in_memory_rows
from feverous_es.index.store import BuildState, TableKey, table_texts

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
VECTOR_FILES = {
    2: VectorFiles("vectors.f32", "page_vectors.f32", np.float32),
    3: VectorFiles("vectors.f16", "page_vectors.f16", np.float16),
}


NEW_VECTOR_FILES = VECTOR_FILES[FORMAT_VERSION]  # what a new build writes


META = "meta.json"


SQLITE = "elements.sqlite"


TEXT = "text"


PAGES = "pages"


TABLES = "tables"


# The type bits of every vector (uint8 each), written when a build completes: read from SQLite,
# 290 k rows took ~0.2 s of every process start (the reader's type filters and HNSW groups).
VECTOR_TYPES = "vector_types.u8"

# What finishing a build writes; a resumed build removes what a crashed finish left.
FINISH_FILES = (
    "vectors.*.usearch", "vectors.*.tmp", "page_vectors.*.usearch", "page_vectors.*.tmp",
    VECTOR_TYPES,
)  # fmt: skip


_ANALYZER = "en_stem"


# One writer thread per index: the build embeds on all cores at the same time.
TEXT_WRITER_HEAP = 256_000_000


PAGE_WRITER_HEAP = 32_000_000


TABLE_WRITER_HEAP = 64_000_000


SQLITE_CACHE_KIB = 131_072


# The most a writer's buffers hold, filled by a long build (not by a short one).
WRITER_BUFFER_BYTES = (
    TEXT_WRITER_HEAP + PAGE_WRITER_HEAP + TABLE_WRITER_HEAP + SQLITE_CACHE_KIB * 1024
)


TYPE_BITS = {element_type: 1 << i for i, element_type in enumerate(ElementType)}


def _type_group(bits: int) -> int:
    """The HNSW group of a vector used by these element types: the first type's bit, header
    cells counting as cells (the vector of a table row serves both)."""
    for element_type in ElementType:
        if bits & TYPE_BITS[element_type]:
            if element_type is ElementType.HEADER_CELL:
                return TYPE_BITS[ElementType.CELL]
            return TYPE_BITS[element_type]
    return 0


GROUP_OF_BITS = np.array([_type_group(bits) for bits in range(256)], dtype=np.uint8)


# The keys a claim span names a page by (elements.title_keys), looked up by index at search time
# rather than loaded into memory by every process (millions of titles on a whole dump).
TITLE_KEYS_TABLE = "CREATE TABLE IF NOT EXISTS title_keys (key TEXT NOT NULL, pid INTEGER NOT NULL)"
TITLE_KEYS_INDEX = "CREATE INDEX IF NOT EXISTS title_keys_key ON title_keys (key)"

SCHEMA_SQL = f"""
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
{TITLE_KEYS_TABLE};
{TITLE_KEYS_INDEX};
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


def element_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    # Frequencies without positions: BM25 needs no more, and positions would double the index.
    builder.add_text_field("text", tokenizer_name=_ANALYZER, index_option="freq")
    for name in ("page", "type", "table"):
        builder.add_text_field(name, tokenizer_name="raw", index_option="basic")
    builder.add_unsigned_field("seq", indexed=True)
    builder.add_unsigned_field("eid", stored=True, fast=True)
    return builder.build()


def page_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    for name in ("title", "intro"):
        builder.add_text_field(name, tokenizer_name=_ANALYZER, index_option="freq")
    builder.add_unsigned_field("seq", indexed=True)
    builder.add_unsigned_field("pid", stored=True, fast=True)
    return builder.build()


def table_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("text", tokenizer_name=_ANALYZER, index_option="freq")
    builder.add_text_field("table", tokenizer_name="raw", index_option="basic", stored=True)
    builder.add_unsigned_field("seq", indexed=True)
    return builder.build()


def table_key(page: str, table: int) -> str:
    return f"{page}\x1f{table}"


def parse_table_key(key: str) -> TableKey:
    page, _, table = key.rpartition("\x1f")
    return page, int(table)


def add_tables(
    writer: tantivy.IndexWriter, schema: tantivy.Schema, texts: dict[TableKey, str], seq: int
) -> None:
    for (page, table), text in texts.items():
        doc = {"text": fold_accents(text), "table": table_key(page, table), "seq": seq}
        writer.add_document(tantivy.Document.from_dict(doc, schema))


def backfill_tables(index: tantivy.Index, db: sqlite3.Connection) -> None:
    """Index the tables of every element the SQLite file holds (an index built before the
    table index existed)."""
    writer = index.writer(heap_size=TABLE_WRITER_HEAP, num_threads=1)
    rows = db.execute("SELECT page, tbl, text FROM elements WHERE tbl IS NOT NULL ORDER BY eid")
    add_tables(writer, index.schema, table_texts(rows), 0)
    writer.commit()
    writer.wait_merging_threads()


def open_tables(path: Path, db: sqlite3.Connection) -> tantivy.Index:
    """The table index, built from the SQLite file first when the directory has none (built
    beside it and moved in place, so a reader never sees half of it)."""
    target = path / TABLES
    if not target.exists():
        tmp = path / f"{TABLES}.tmp"
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            backfill_tables(open_tantivy(tmp, table_schema()), db)
            os.replace(tmp, target)
        except (OSError, ValueError) as error:
            raise StoreError(
                f"{path} was built before the table index and it cannot be added here "
                f"({error}): open it once where the directory is writable, or rebuild it"
            ) from error
    return open_tantivy(target, None)


def title_key_rows(pages: Iterable[tuple[int, str]]) -> Iterator[tuple[str, int]]:
    """``(key, pid)`` rows of the ``title_keys`` table for ``(pid, title)`` pages."""
    for pid, title in pages:
        for key in title_keys(title):
            yield key, pid


def ensure_title_keys(path: Path, db: sqlite3.Connection) -> None:
    """Give an index built before the ``title_keys`` table one, filled from its pages (once,
    in one transaction: a reader never sees half of it)."""
    found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'title_keys'"
    if db.execute(found).fetchone():
        return
    try:
        db.execute("SAVEPOINT title_keys")
        db.execute(TITLE_KEYS_TABLE)
        pages = db.execute("SELECT pid, title FROM pages ORDER BY pid")
        db.executemany("INSERT INTO title_keys VALUES (?, ?)", title_key_rows(pages))
        db.execute(TITLE_KEYS_INDEX)
        db.execute("RELEASE title_keys")
    except sqlite3.Error as error:
        db.execute("ROLLBACK TO title_keys")
        db.execute("RELEASE title_keys")
        raise StoreError(
            f"{path} was built before its title keys and they cannot be added here ({error}): "
            "open it once where the directory is writable, or rebuild it"
        ) from error


def json_list(values: Sequence[object]) -> str | None:
    return orjson.dumps(values).decode() if values else None


def tuple_of(value: str | None) -> tuple[str, ...]:
    return tuple(orjson.loads(value)) if value else ()


def read_meta(path: Path) -> dict[str, object]:
    try:
        meta = orjson.loads((path / META).read_bytes())
    except FileNotFoundError:
        raise StoreError(f"{path} is not an embedded index (it has no {META})") from None
    except (OSError, orjson.JSONDecodeError) as error:
        raise StoreError(f"{path / META} cannot be read: {error}") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise IncompatibleIndex(f"{path} is not an embedded index ({META} names another format)")
    if meta.get("version") not in VECTOR_FILES:
        raise IncompatibleIndex(
            f"{path} has index format version {meta.get('version')}, this program reads "
            f"versions {', '.join(map(str, VECTOR_FILES))}: rebuild the index"
        )
    return meta


def pages_graphed(pages: int, dim: int, threshold: int = HNSW_THRESHOLD) -> bool:
    """Whether a finished build gives its page vectors an HNSW graph: past the element
    threshold, or past what is scanned fast exactly (:func:`in_memory_rows`)."""
    return pages > min(threshold, in_memory_rows(dim))


def vector_files(meta: dict[str, object]) -> VectorFiles:
    """The vector files of an index, by its format version (checked by :func:`read_meta`)."""
    return VECTOR_FILES[int(str(meta["version"]))]


def load_state(db: sqlite3.Connection) -> tuple[BuildState, int]:
    """The build state and the number of element vectors it accounts for."""
    row = db.execute(
        "SELECT next_seq, last_rowid, elements, pages, malformed, complete, vectors FROM state"
    ).fetchone()
    if row is None:
        raise StoreError("the index has no build state: rebuild it")
    next_seq, last_rowid, elements, pages, malformed, complete, vectors = row
    state = BuildState(next_seq, last_rowid, elements, pages, malformed, complete=bool(complete))
    return state, vectors


def open_tantivy(path: Path, schema: tantivy.Schema | None) -> tantivy.Index:
    """Open a tantivy index, creating it when a schema is given and it does not exist yet."""
    if schema is None:
        index = tantivy.Index.open(str(path))
    else:
        path.mkdir(exist_ok=True)
        index = tantivy.Index(schema, path=str(path), reuse=True)
    index.register_tokenizer(_ANALYZER, english_analyzer())
    return index


def vector_types(db: sqlite3.Connection, rows: int) -> np.ndarray:
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


def save_vector_types(path: Path, types: np.ndarray) -> None:
    """Write a complete build's vector type bits to ``path / VECTOR_TYPES`` (atomically)."""
    tmp = path / f".{VECTOR_TYPES}.tmp"
    types.astype(np.uint8).tofile(tmp)
    os.replace(tmp, path / VECTOR_TYPES)


def load_vector_types(path: Path, db: sqlite3.Connection, rows: int) -> np.ndarray:
    """The type bits of a complete build's ``rows`` vectors: from ``VECTOR_TYPES``, else from
    SQLite (a build finished before the file existed), written there for the next start when
    the directory is writable."""
    file = path / VECTOR_TYPES
    if file.is_file() and file.stat().st_size == rows:
        return np.fromfile(file, dtype=np.uint8)
    types = vector_types(db, rows)
    with contextlib.suppress(OSError):  # a read-only index: read SQLite at each start
        save_vector_types(path, types)
    return types


def later_docs(index: tantivy.Index, seq: int) -> Query:
    return Query.range_query(index.schema, "seq", tantivy.FieldType.Unsigned, lower_bound=seq)
