"""Reading an embedded index: element, page and table search, and fetches by id."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import quote

import numpy as np
import tantivy
from tantivy import Occur, Query

from feverous_es.errors import StoreError
from feverous_es.index.elements import TYPES_BY_NAME, Element, ElementType, PageRecord
from feverous_es.index.embedded.analysis import BM25Analyzer
from feverous_es.index.embedded.layout import (
    GROUP_OF_BITS,
    PAGES,
    SQLITE,
    TEXT,
    TYPE_BITS,
    ensure_title_keys,
    json_list,
    load_state,
    load_vector_types,
    open_tables,
    open_tantivy,
    parse_table_key,
    read_meta,
    table_key,
    tuple_of,
    vector_files,
    vector_types,
)
from feverous_es.index.embedded.vectors import MappedFiles, VectorMatrix
from feverous_es.index.store import (
    BuildState,
    CellHit,
    Filters,
    Hit,
    HybridParts,
    HybridWeights,
    PageHit,
    Store,
    TableKey,
)

# Claim terms in more than this share of the elements (in mini-FEVEROUS: game, 2, score, team,
# win, season, ...): their postings are most of a claim disjunction's cost. See
# _common_terms_query.
COMMON_TERM_SHARE = 0.05


# Elements share their vector's key and embed text, stored once per vector.
_ELEMENT_SELECT = """
SELECT e.eid, e.id, e.page, e.type, e.text, e.linearized, v.key, v.embed_text, e.links,
       e.section_path, e.context, e.tbl, e.row, e.col, e.list_index, e.level
FROM elements e JOIN vectors v ON v.vec = e.vec
"""


_IN_JSON = "IN (SELECT value FROM json_each(?))"


# What a table ranking reads of its thousands of hits (CellHit): no join, no JSON fields.
_CELL_SELECT = f"""
SELECT eid, id, page, type, text, tbl, row, col FROM elements
WHERE tbl IS NOT NULL AND eid {_IN_JSON}
"""
_CELL_TABLE_SELECT = f"""
SELECT eid, page, tbl FROM elements WHERE tbl IS NOT NULL AND eid {_IN_JSON}
"""


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


def _element(row: tuple) -> Element:
    # _ELEMENT_SELECT's columns after eid are Element's fields, in their order.
    _, id_, page, type_, text, linearized, key, embed_text, links, sections, context, *place = row
    return Element(
        id_, page, TYPES_BY_NAME[type_], text, linearized, key, embed_text,
        tuple_of(links), tuple_of(sections), tuple_of(context), *place,
    )  # fmt: skip


def _element_where(filters: Filters) -> tuple[str, list[str | None]]:
    """SQL conditions (each starting with AND) on ``elements e`` for the filters."""
    sql: list[str] = []
    params: list[str | None] = []
    if filters.pages:
        sql.append(f"AND e.page {_IN_JSON}")
        params.append(json_list(filters.pages))
    if filters.types:
        sql.append(f"AND e.type {_IN_JSON}")
        params.append(json_list([ElementType(t).value for t in filters.types]))
    if filters.tables:
        # The page condition lets SQLite use the page index before testing the table.
        sql.append(f"AND e.page {_IN_JSON} AND e.page || char(31) || e.tbl {_IN_JSON}")
        params.append(json_list([page for page, _ in filters.tables]))
        params.append(json_list([table_key(page, table) for page, table in filters.tables]))
    return " ".join(sql), params


class EmbeddedStore(Store):
    """Read side of the embedded store. Vector search sees the vectors that were stored when
    it was opened: reopen it to see later chunks of a build in progress."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        meta = read_meta(self.path)
        self.dim = int(str(meta["dim"]))
        self.concurrent_claims = 1
        files = vector_files(meta)
        try:
            # Not mode=ro: a read-write connection rolls back the journal a killed build left
            # (SQLite opens a write-protected file read-only by itself). SQLite is built
            # serialized here, so threads may share the connection.
            uri = f"file:{quote(str(self.path / SQLITE))}?mode=rw"
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self._files = MappedFiles()
            self._files.add(self.path / SQLITE)
            ensure_title_keys(self.path, self._db)
            self._db.execute("PRAGMA query_only = ON")
            state, vectors = load_state(self._db)
            self._texts = open_tantivy(self.path / TEXT, None)
            self._pages = open_tantivy(self.path / PAGES, None)
            self._tables = open_tables(self.path, self._db)
            # Which element types use each vector: type filters test it per vector.
            self._vector_types = (
                load_vector_types(self.path, self._db, vectors)
                if state.complete
                else vector_types(self._db, vectors)
            )
            self._vectors = VectorMatrix(
                self.path / files.elements,
                self.dim,
                vectors,
                files.dtype,
                groups=GROUP_OF_BITS[self._vector_types] if state.complete else None,
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

    @property
    def vectors(self) -> VectorMatrix:
        """The element vectors, for diagnostics such as HNSW recall against exact search."""
        return self._vectors

    @property
    def page_vectors(self) -> VectorMatrix:
        """The page vectors (title and intro), for the same diagnostics."""
        return self._page_vectors

    def state(self) -> BuildState:
        return load_state(self._db)[0]

    def ping(self, timeout: float) -> None:
        # A local file answers or fails at once: the timeout has nothing to bound.
        try:
            load_state(self._db)
        except sqlite3.Error as error:
            raise StoreError(f"{self.path} does not answer: {error}") from error
        self._files.check()  # the database replaced or removed: its open handle still answers
        self._vectors.check()
        self._page_vectors.check()

    def close(self) -> None:
        self._db.close()

    # Elements and pages by key.

    def get_elements(self, ids: Sequence[str]) -> list[Element]:
        rows = self._db.execute(f"{_ELEMENT_SELECT} WHERE e.id {_IN_JSON}", (json_list(list(ids)),))
        found = {element.id: element for element in map(_element, rows)}
        return [found[element_id] for element_id in ids if element_id in found]

    def page_elements(self, page: str, table: int | None = None) -> list[Element]:
        if table is None:
            rows = self._db.execute(f"{_ELEMENT_SELECT} WHERE e.page = ? ORDER BY e.eid", (page,))
        else:
            where = "WHERE e.page = ? AND e.tbl = ? ORDER BY e.eid"
            rows = self._db.execute(f"{_ELEMENT_SELECT} {where}", (page, table))
        return [_element(row) for row in rows]

    def get_pages(self, titles: Sequence[str]) -> list[PageRecord]:
        rows = self._db.execute(
            f"SELECT title, intro, links FROM pages WHERE title {_IN_JSON}",
            (json_list(list(titles)),),
        )
        found = {title: PageRecord(title, intro, tuple_of(links)) for title, intro, links in rows}
        return [found[title] for title in titles if title in found]

    def match_titles(self, keys: Sequence[str]) -> dict[str, list[str]]:
        rows = self._db.execute(
            "SELECT k.key, p.title FROM title_keys k JOIN pages p ON p.pid = k.pid"
            f" WHERE k.key {_IN_JSON} ORDER BY p.pid",
            (json_list(list(keys)),),
        )
        found: dict[str, list[str]] = {}
        for key, title in rows:
            found.setdefault(key, []).append(title)
        return {key: found[key] for key in keys if key in found}

    def _elements(self, eids: Iterable[int]) -> dict[int, Element]:
        rows = self._db.execute(
            f"{_ELEMENT_SELECT} WHERE e.eid {_IN_JSON}", (json_list(list(eids)),)
        )
        return {row[0]: _element(row) for row in rows}

    def _hits(self, scored: list[tuple[int, float]]) -> list[Hit]:
        elements = self._elements(eid for eid, _ in scored)
        return [Hit(elements[eid], score) for eid, score in scored if eid in elements]

    # Element search.

    def search_text(self, query: str, k: int = 100, filters: Filters | None = None) -> list[Hit]:
        return self._hits(self._text_scores(query, k, filters))

    def search_cells(
        self, query: str, k: int = 100, filters: Filters | None = None
    ) -> list[CellHit]:
        scored = self._text_scores(query, k, filters)
        rows = self._db.execute(_CELL_SELECT, (json_list([eid for eid, _ in scored]),))
        found = {row[0]: row for row in rows}
        hits = []
        for eid, score in scored:
            if (cell := found.get(eid)) is not None:
                _, id_, page, type_, text, table, row, column = cell
                hits.append(
                    CellHit(id_, page, TYPES_BY_NAME[type_], table, row, column, text, score)
                )
        return hits

    def search_cell_tables(
        self, query: str, k: int = 100, filters: Filters | None = None
    ) -> list[TableKey]:
        scored = self._text_scores(query, k, filters)
        rows = self._db.execute(_CELL_TABLE_SELECT, (json_list([eid for eid, _ in scored]),))
        table_of = {eid: (page, table) for eid, page, table in rows}
        # Hits come best first, so a table's first hit is its best.
        return list(dict.fromkeys(table_of[eid] for eid, _ in scored if eid in table_of))

    def search_vector(
        self, vector: np.ndarray, k: int = 100, filters: Filters | None = None
    ) -> list[Hit]:
        return self._hits(self._vector_scores(vector, k, filters))

    def _hybrid_parts(
        self, text: str, vector: np.ndarray, k: int, filters: Filters | None, weights: HybridWeights
    ) -> HybridParts:
        text_scores = self._text_scores(text, k, filters)
        vector_scores = self._vector_scores(vector, k, filters)
        elements = self._elements({eid for eid, _ in text_scores + vector_scores})
        text_hits = [Hit(elements[eid], score) for eid, score in text_scores if eid in elements]
        vector_hits = [Hit(elements[eid], score) for eid, score in vector_scores if eid in elements]
        return text_hits, vector_hits

    def _terms(self, text: str) -> list[str]:
        """The query's analyzed terms, each once. Terms, not the query parser: claims hold
        quotes, colons and parentheses."""
        return list(dict.fromkeys(self._analyzer.analyze(text)))

    def _match(self, index: tantivy.Index, fields: Sequence[str], text: str) -> Query | None:
        """A disjunction of the query's terms over ``fields``; None if no term is left."""
        terms = self._terms(text)
        return _disjunction(index.schema, fields, terms) if terms else None

    def _text_scores(self, text: str, k: int, filters: Filters | None) -> list[tuple[int, float]]:
        terms = self._terms(text)
        if not terms or k <= 0:
            return []
        searcher = self._texts.searcher()
        if filters and (filters.pages or filters.tables):
            # A page's or table's elements are few: every term may score them.
            query = _restricted(
                _disjunction(self._texts.schema, ("text",), terms), self._filter(filters)
            )
        else:
            query = _common_terms_query(searcher, self._texts.schema, terms)
            if filters:
                query = _restricted(query, self._filter(filters))
        hits = searcher.search(query, k, count=False).hits
        eids = searcher.fast_field_values("eid", [address for _, address in hits])
        # eid is set on every document: the stubs' None never comes
        return [(int(eid), score) for (score, _), eid in zip(hits, eids, strict=True)]  # type: ignore[arg-type]

    def _filter(self, filters: Filters) -> Query:
        schema = self._texts.schema
        parts = []
        if filters.pages:
            parts.append(Query.term_set_query(schema, "page", list(filters.pages)))
        if filters.types:
            types = [ElementType(t).value for t in filters.types]
            parts.append(Query.term_set_query(schema, "type", types))
        if filters.tables:
            tables = [table_key(page, table) for page, table in filters.tables]
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
            bits = sum(TYPE_BITS[ElementType(t)] for t in set(filters.types))
            vecs, scores = self._vectors.search(query, k, allowed=(self._vector_types & bits) != 0)
        else:
            vecs, scores = self._vectors.search(query, k)
        rank = {int(vec): i for i, vec in enumerate(vecs)}
        members = self._db.execute(
            f"SELECT e.eid, e.vec FROM elements e WHERE e.vec {_IN_JSON} {where}",
            (json_list(list(rank)), *params),
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
            keys = [table_key(page, table) for page, table in tables]
            match = _restricted(match, Query.term_set_query(self._tables.schema, "table", keys))
        searcher = self._tables.searcher()
        return [
            (parse_table_key(searcher.doc(address)["table"][0]), score)
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
        pairs = zip(hits, pids, strict=True)  # pid is set on every document, never None
        return self._page_hits([(int(pid), score) for (score, _), pid in pairs])  # type: ignore[arg-type]

    def search_pages_vector(self, vector: np.ndarray, k: int = 10) -> list[PageHit]:
        query = self._query_vector(vector, self._page_vectors)
        pids, scores = self._page_vectors.search(query, k)
        return self._page_hits(
            [(int(pid), float(score)) for pid, score in zip(pids, scores, strict=True)]
        )

    def _page_hits(self, scored: list[tuple[int, float]]) -> list[PageHit]:
        rows = self._db.execute(
            f"SELECT pid, title, intro, links FROM pages WHERE pid {_IN_JSON}",
            (json_list([pid for pid, _ in scored]),),
        )
        pages = {
            pid: PageRecord(title, intro, tuple_of(links)) for pid, title, intro, links in rows
        }
        return [PageHit(pages[pid], score) for pid, score in scored if pid in pages]
