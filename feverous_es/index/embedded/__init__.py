"""The embedded store: one directory on local disk, no server.

Layout of the directory:

* ``meta.json``: format name, version and vector size.
* ``elements.sqlite``: elements (ordinal ``eid`` in insertion order), one row per distinct vector
  (its key, embed text and the element types using it), pages, the keys a claim span names each
  page by (``title_keys``, indexed: looked up, never loaded whole; an index made before it gets
  it the first time it is opened), and the build state.
* ``vectors.f16`` / ``page_vectors.f16``: raw float16 rows, unit length, memory-mapped to read
  (``.f32`` files of float32 rows in format 2, which is still read).
* ``text/`` and ``pages/``: tantivy indices (BM25) over element linearizations and over page
  title + intro; they store only the SQLite ordinal of each document.
* ``tables/``: a tantivy index (BM25) of whole tables, one document per table (page title,
  caption and every cell's text), keyed by page and table number. An index made before it
  existed gets it built from the SQLite file the first time it is opened.
* ``vectors.<group>.<shard>.usearch``: HNSW graphs, built by ``finish`` when exact search would
  be slow: for sentence vectors, for table rows, and so on (see ``layout._type_group``), each
  group cut into shards of bounded size (format 2: ``vectors.<group>.usearch``, one per group).
* ``vector_types.u8``: the element-type bits of each vector (one byte each), written by
  ``finish``; a complete index made before it gets it the first time it is opened.

A chunk is written in the order vectors (fsync), tantivy (commit), SQLite (one transaction that
also advances the state). The SQLite state is the truth: whatever a crash left beyond it (vector
rows past its counts, tantivy documents of later chunks, tagged with their chunk ``seq``) is
removed when a writer opens the directory again.
"""

from feverous_es.index.embedded.layout import (
    FORMAT,
    FORMAT_VERSION,
    NEW_VECTOR_FILES,
    WRITER_BUFFER_BYTES,
    pages_graphed,
)
from feverous_es.index.embedded.reader import COMMON_TERM_SHARE, EmbeddedStore
from feverous_es.index.embedded.writer import EmbeddedWriter

__all__ = [
    "COMMON_TERM_SHARE",
    "FORMAT",
    "FORMAT_VERSION",
    "NEW_VECTOR_FILES",
    "WRITER_BUFFER_BYTES",
    "EmbeddedStore",
    "EmbeddedWriter",
    "pages_graphed",
]
