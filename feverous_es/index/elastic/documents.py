"""The three Elasticsearch indices, declared once as documents of the client's DSL
(``elasticsearch.dsl``).

Their mappings, the index bodies the build creates, the ``_source`` of each document and the
conversion back to :class:`Element` / :class:`PageRecord` all come from here. The layout is a
public contract (other teams query these indices directly; see docs/elasticsearch.md): change it
only together with :data:`FORMAT_VERSION`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
from elasticsearch.dsl import (
    DenseVector,
    Document,
    Index,
    Integer,
    Keyword,
    Long,
    MetaField,
    Text,
)

from feverous_es.index.elastic.analysis import ANALYSES, ENGLISH_FOLDING, TEXT_ANALYZER
from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elements import TYPES_BY_NAME, Element, PageRecord, title_keys
from feverous_es.index.store import CellHit

FORMAT = "feverous-es-elasticsearch"
# 2: the tables index joined the build (the elements and pages fields are those of 1).
# 3: the BM25 fields use the analyzer TEXT_ANALYZER (english + folding, or a declared fallback;
#    see analysis.py) instead of the built-in ``english``; a table row's vector is stored once,
#    on its first element, which also lists the row's element types in ``vector_types``.
FORMAT_VERSION = 3
# The key under the elements index's mappings ``_meta`` that holds the build state.
META_KEY = "feverous_es"
VECTOR = "vector"
# Elasticsearch refuses document ids over 512 bytes.
_MAX_ID_BYTES = 512


class _VectorDoc(Document):
    """The fields the elements and pages indices share; their ``_source`` leaves the vector out
    (index_body replaces this placeholder vector with the configured one)."""

    ord = Long()  # order of insertion: an element's position in its page
    seq = Integer()  # build chunk that wrote it
    vector = DenseVector(dims=384, similarity="cosine", index_options={"type": "int8_hnsw"})

    class Meta:
        dynamic = MetaField("strict")
        source = MetaField(excludes=[VECTOR])


class ElementDoc(_VectorDoc):
    """One sentence, list item, table cell, header cell or table caption."""

    id = Keyword()  # the FEVEROUS element id, e.g. "Page_cell_0_1_2"
    page = Keyword()  # NFD page title
    type = Keyword()  # sentence | cell | header_cell | table_caption | item
    table = Integer()
    row = Integer()
    column = Integer()
    list_index = Integer()
    level = Integer()
    section_path = Keyword(multi=True)
    context = Text(multi=True)
    links = Keyword(multi=True)
    text = Text()  # the raw text, wiki links reduced to their anchors
    linearized = Text(analyzer=TEXT_ANALYZER)  # Papelo's linearization, what BM25 searches
    vector_key = Keyword()  # the cells of one table row share one vector (and key)
    # On the element that carries its key's vector (the first): the types of every element
    # sharing it, so a kNN type filter finds a row by any of its cells' types.
    vector_types = Keyword(multi=True)
    embed_text = Text(index=False)  # the text the vector was computed from

    class Index:
        name = "feverous-elements"


class PageDoc(_VectorDoc):
    """One Wikipedia page: title and intro, for page retrieval."""

    title = Text(
        fields={"exact": Keyword(), "analyzed": Text(analyzer=TEXT_ANALYZER)},
    )
    title_keys = Keyword(multi=True)  # accents and case folded, with and without "(…)"
    intro = Text(analyzer=TEXT_ANALYZER)
    links = Keyword(multi=True)

    class Index:
        name = "feverous-pages"


class TableDoc(Document):
    """One whole table: the page title, the caption and every cell, for table retrieval."""

    id = Keyword()  # "Page_table_t"
    page = Keyword()
    table = Integer()
    text = Text(analyzer=TEXT_ANALYZER)  # title, caption and cells' raw text, in page order
    seq = Integer()

    class Index:
        name = "feverous-tables"

    class Meta:
        dynamic = MetaField("strict")


# The documents of a build's indices, in the order of ElasticConfig.aliases.
BUILD_DOCUMENTS: tuple[type[Document], ...] = (ElementDoc, PageDoc, TableDoc)


def _vector_mapping(config: ElasticConfig, dim: int) -> dict[str, Any]:
    field = DenseVector(
        dims=dim,
        similarity=config.similarity,
        index=True,
        index_options=dict(config.index_options),
    )
    return field.to_dict()


def index_body(
    document: type[Document],
    name: str,
    config: ElasticConfig,
    dim: int,
    meta: Mapping[str, Any] | None = None,
    analysis: str = ENGLISH_FOLDING,
) -> dict[str, Any]:
    """The create-index body of a versioned index: the document's mappings with the configured
    vector field, the text ``analysis`` (a key of :data:`~.analysis.ANALYSES`), and the load
    settings (no refresh, no replicas) the build starts with."""
    index = Index(name)
    index.settings(
        number_of_shards=config.shards,
        number_of_replicas=0,
        refresh_interval="-1",
        analysis=ANALYSES[analysis],
    )
    index.document(document)
    body = index.to_dict()
    if VECTOR in body["mappings"]["properties"]:
        body["mappings"]["properties"][VECTOR] = _vector_mapping(config, dim)
    if meta is not None:
        body["mappings"]["_meta"] = {META_KEY: dict(meta)}
    return body


def expected_properties(
    document: type[Document], config: ElasticConfig, dim: int
) -> dict[str, Any]:
    return index_body(document, "x", config, dim)["mappings"]["properties"]


def mapping_conflicts(actual: Mapping[str, Any], expected: Mapping[str, Any]) -> list[str]:
    """Fields of ``expected`` that ``actual`` (an index's mappings ``properties``) lacks or maps
    with another type, analyzer or vector size; empty when the index can hold our documents."""
    problems = []
    for name, want in expected.items():
        have = actual.get(name)
        if have is None:
            problems.append(f"{name} is missing")
            continue
        for key in ("type", "analyzer", "dims", "similarity"):
            found, wanted = _setting(have, key), _setting(want, key)
            if found != wanted:
                problems.append(f"{name}.{key} is {found!r}, not {wanted!r}")
    return problems


def _setting(field: Mapping[str, Any], key: str) -> Any:
    value = field.get(key)
    if value is None and key == "analyzer" and field.get("type") == "text":
        return "standard"
    return value


def doc_id(key: str) -> str:
    """The ``_id`` of the document whose element id or page title is ``key``."""
    if len(key.encode("utf-8")) <= _MAX_ID_BYTES:
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def _vector(vector: np.ndarray | None) -> np.ndarray | None:
    """A vector as it is sent (orjson writes float32 arrays compactly); None for an all-zero one,
    which cosine similarity refuses."""
    if vector is None or not np.any(vector):
        return None
    return np.ascontiguousarray(vector, dtype=np.float32)


def _drop_empty(source: dict[str, Any]) -> dict[str, Any]:
    return {
        key: value
        for key, value in source.items()
        if value is not None and not (isinstance(value, list) and not value)
    }


def element_source(
    element: Element,
    ord_: int,
    seq: int,
    vector: np.ndarray | None,
    vector_types: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The document of ``element``; ``vector`` and ``vector_types`` only on the element that
    carries its key's vector."""
    return _drop_empty(
        {
            "id": element.id,
            "page": element.page,
            "type": element.type.value,
            "table": element.table,
            "row": element.row,
            "column": element.column,
            "list_index": element.list_index,
            "level": element.level,
            "section_path": list(element.section_path),
            "context": list(element.context),
            "links": list(element.links),
            "text": element.text,
            "linearized": element.linearized,
            "vector_key": element.vector_key,
            "vector_types": list(vector_types),
            "embed_text": element.embed_text,
            "ord": ord_,
            "seq": seq,
            VECTOR: _vector(vector),
        }
    )


def page_source(page: PageRecord, ord_: int, seq: int, vector: np.ndarray | None) -> dict[str, Any]:
    return _drop_empty(
        {
            "title": page.title,
            "title_keys": list(title_keys(page.title)),
            "intro": page.intro,
            "links": list(page.links),
            "ord": ord_,
            "seq": seq,
            VECTOR: _vector(vector),
        }
    )


def table_id(page: str, table: int) -> str:
    """The ``id`` of a whole-table document, in the style of the FEVEROUS element ids."""
    return f"{page}_table_{table}"


def table_source(page: str, table: int, text: str, seq: int) -> dict[str, Any]:
    return {"id": table_id(page, table), "page": page, "table": table, "text": text, "seq": seq}


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


def element_from_source(source: Mapping[str, Any]) -> Element:
    return Element(
        id=source["id"],
        page=source["page"],
        type=TYPES_BY_NAME[source["type"]],
        text=source.get("text", ""),
        linearized=source.get("linearized", ""),
        vector_key=source.get("vector_key", source["id"]),
        embed_text=source.get("embed_text", ""),
        links=_strings(source.get("links")),
        section_path=_strings(source.get("section_path")),
        context=_strings(source.get("context")),
        table=source.get("table"),
        row=source.get("row"),
        column=source.get("column"),
        list_index=source.get("list_index"),
        level=source.get("level"),
    )


# What a table ranking reads of a hit (CellHit): a fraction of the document.
CELL_FIELDS = ("id", "page", "type", "text", "table", "row", "column")


def cell_hit_from_source(source: Mapping[str, Any], score: float) -> CellHit:
    get = source.get
    return CellHit(source["id"], source["page"], TYPES_BY_NAME[source["type"]], source["table"],
                   get("row"), get("column"), get("text", ""), score)  # fmt: skip


def page_from_source(source: Mapping[str, Any]) -> PageRecord:
    return PageRecord(
        title=source["title"], intro=source.get("intro", ""), links=_strings(source.get("links"))
    )
