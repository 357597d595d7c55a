"""The Elasticsearch store: :class:`ElasticWriter` builds, :class:`ElasticStore` reads.

A build writes into versioned indices ``<prefix>-elements-v<N>``, ``<prefix>-pages-v<N>`` and
``<prefix>-tables-v<N>``, created with ``refresh_interval: -1`` and no replicas. The build state
(next chunk, last dump rowid, counts, complete) lives in the elements index's mappings ``_meta``
and advances only after every document of a chunk is acknowledged; documents carry the chunk
``seq`` that wrote them, so a failed or killed chunk is deleted (``seq >= next_seq``) before the
build goes on. ``finish`` refreshes, checks that the indices hold exactly the documents the state
counts, restores refresh and replicas, marks the build complete and moves the three aliases to the
new indices in one atomic request. Readers only ever use the aliases, so they see the previous
build until then.

Opening a writer continues the newest version when it is unfinished (or finished but not yet
behind the aliases); a finished, published build is left alone (``feverous-es es new-build``
starts version N+1).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

import numpy as np
from elasticsearch import AuthorizationException, Elasticsearch, NotFoundError
from elasticsearch.helpers import scan

from feverous_es.errors import IncompatibleIndex, StoreError
from feverous_es.index.elastic import queries
from feverous_es.index.elastic.analysis import ENGLISH_FOLDING, probe_analysis
from feverous_es.index.elastic.client import connect
from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elastic.documents import (
    BUILD_DOCUMENTS,
    FORMAT,
    FORMAT_VERSION,
    META_KEY,
    ElementDoc,
    doc_id,
    element_from_source,
    expected_properties,
    index_body,
    mapping_conflicts,
    page_from_source,
)
from feverous_es.index.elastic.errors import describe, elastic_errors
from feverous_es.index.elastic.loader import (
    BuildIndices,
    alias_holders,
    bulk_load,
    chunk_actions,
    swap_aliases,
    version_of,
)
from feverous_es.index.elements import Element, ElementType, PageRecord
from feverous_es.index.store import (
    BuildState,
    Chunk,
    Filters,
    Hit,
    HybridWeights,
    PageHit,
    TableKey,
    fuse_hybrid,
)

_log = logging.getLogger(__name__)
# Elements that share their vector with others: the cells of one table row.
_ROW_TYPES = (ElementType.CELL, ElementType.HEADER_CELL)
_EQUAL_WEIGHTS = HybridWeights()
_MGET_BATCH = 1000
_MSEARCH_BATCH = 100
_PAGE_BATCH = 5000
_MAX_TITLE_HITS = 10_000
# Deleting a failed chunk's documents may take longer than one search.
_DELETE_TIMEOUT = 600.0


# The kinds of index in a build, in the order of ElasticConfig.aliases and BuildIndices.
KINDS = BuildIndices._fields


def state_meta(
    state: BuildState, dim: int, version: int, tables: int, analysis: str
) -> dict[str, Any]:
    """The ``_meta`` entry that records a build: its format, vector size, text analysis, state
    and the number of whole-table documents it wrote."""
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "dim": dim, "version": version,
            "analysis": analysis, **asdict(state), "tables": tables}  # fmt: skip


def state_from_meta(meta: Mapping[str, Any]) -> BuildState:
    return BuildState(
        next_seq=int(meta.get("next_seq", 0)),
        last_rowid=int(meta.get("last_rowid", 0)),
        elements=int(meta.get("elements", 0)),
        pages=int(meta.get("pages", 0)),
        malformed=int(meta.get("malformed", 0)),
        complete=bool(meta.get("complete", False)),
    )


def analysis_from_meta(meta: Mapping[str, Any]) -> str:
    """The text analysis of the build (builds before format 3 used ``english``, which is
    ``english_folding`` without the folding)."""
    return str(meta.get("analysis", ENGLISH_FOLDING))


def tables_from_meta(meta: Mapping[str, Any]) -> int:
    """The number of whole-table documents the build wrote."""
    return int(meta.get("tables", 0))


def build_meta(mappings: Mapping[str, Any]) -> dict[str, Any] | None:
    """The feverous-es ``_meta`` of an index's mappings; None when it has none."""
    meta = (mappings.get("_meta") or {}).get(META_KEY)
    return dict(meta) if isinstance(meta, Mapping) and meta.get("format") == FORMAT else None


def _mappings(client: Elasticsearch, pattern: str) -> dict[str, dict[str, Any]]:
    """Index name -> mappings, for the indices matching ``pattern`` (none is not an error)."""
    body = client.indices.get_mapping(index=pattern, allow_no_indices=True).body
    return {name: value.get("mappings", {}) for name, value in body.items()}


def list_builds(client: Elasticsearch, config: ElasticConfig) -> dict[int, dict[str, Any]]:
    """Version -> what is known of it: its indices by kind (``elements``, ``pages``,
    ``tables``; None where missing), and the build ``_meta`` of its elements index (None when
    the index was not made by feverous-es)."""
    builds: dict[int, dict[str, Any]] = {}
    for kind, alias in zip(KINDS, config.aliases, strict=True):
        for name, mappings in _mappings(client, f"{alias}-v*").items():
            version = version_of(alias, name)
            if version is None:
                continue
            entry = builds.setdefault(version, {**dict.fromkeys(KINDS), "meta": None})
            entry[kind] = name
            if kind == "elements":
                entry["meta"] = build_meta(mappings)
                entry["mappings"] = mappings
    return builds


def check_aliases_free(client: Elasticsearch, config: ElasticConfig) -> None:
    """Fail when an alias name is taken by a concrete index (the swap could never succeed)."""
    for alias in config.aliases:
        if client.indices.exists(index=alias) and not alias_holders(client, alias):
            raise StoreError(
                f"{alias} is an index, not an alias: feverous-es publishes builds through an "
                f"alias of that name; delete or rename that index, or set FEVEROUS_ES_PREFIX"
            )


def create_build(
    client: Elasticsearch,
    config: ElasticConfig,
    version: int,
    dim: int,
    analysis: str | None = None,
) -> BuildIndices:
    """Create the versioned indices of a new, empty build (elements first: it holds the state,
    so a build exists exactly when its elements index does), with ``analysis``, by default the
    best text analysis the cluster runs."""
    indices = BuildIndices.of(config, version)
    analysis = analysis or probe_analysis(client)
    meta = state_meta(BuildState(), dim, version, tables=0, analysis=analysis)
    for document, name in zip(BUILD_DOCUMENTS, indices, strict=True):
        body = index_body(
            document, name, config, dim, meta if document is ElementDoc else None, analysis
        )
        client.indices.create(index=name, **body)
    return indices


def next_version(builds: Mapping[int, Any]) -> int:
    return max(builds, default=0) + 1


class ElasticWriter:
    """Write side of the Elasticsearch store (see the module docstring)."""

    def __init__(
        self, config: ElasticConfig, dim: int, client: Elasticsearch | None = None
    ) -> None:
        self.config = config
        self.dim = dim
        self._own_client = client is None
        self._client = client if client is not None else connect(config)
        try:
            with elastic_errors(config, "cannot open the Elasticsearch build"):
                self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        client, config = self._client, self.config
        check_aliases_free(client, config)
        builds = list_builds(client, config)
        latest = max(builds, default=None)
        if latest is None:
            self.version = 1
            self._analysis = probe_analysis(client)
            self.indices = create_build(client, config, 1, self.dim, self._analysis)
            self._state, self._tables = BuildState(), 0
        else:
            self._resume(latest, builds[latest])
        if not self._state.complete:
            self._set_load_settings()
            self._discard_partial()

    def _resume(self, version: int, build: Mapping[str, Any]) -> None:
        client, config = self._client, self.config
        self.version = version
        self.indices = BuildIndices.of(config, version)
        meta = build["meta"]
        if build["elements"] is None or meta is None:
            raise IncompatibleIndex(
                f"index {build['elements'] or build['pages']} exists but was not made by "
                "feverous-es (its mapping has no feverous_es _meta): delete it or set "
                "FEVEROUS_ES_PREFIX"
            )
        if meta.get("format_version") != FORMAT_VERSION:
            raise IncompatibleIndex(
                f"{self.indices.elements} has index format version {meta.get('format_version')}, "
                f"this program writes {FORMAT_VERSION}: start a new build with "
                "`feverous-es es new-build`"
            )
        if meta.get("dim") != self.dim:
            raise IncompatibleIndex(
                f"{self.indices.elements} holds {meta.get('dim')}-dimensional vectors, the "
                f"embedder makes {self.dim}: start a new build with `feverous-es es new-build`"
            )
        conflicts = mapping_conflicts(
            build["mappings"].get("properties", {}),
            expected_properties(ElementDoc, config, self.dim),
        )
        if conflicts:
            raise IncompatibleIndex(
                f"{self.indices.elements} has a conflicting mapping ({'; '.join(conflicts[:3])}): "
                "delete it or start a new build with `feverous-es es new-build`"
            )
        self._state, self._tables = state_from_meta(meta), tables_from_meta(meta)
        self._analysis = analysis_from_meta(meta)
        # The elements index exists (it holds the state); create a missing one of the others.
        for kind, name, document in zip(KINDS, self.indices, BUILD_DOCUMENTS, strict=True):
            if build[kind] is not None:
                continue
            if self._state.next_seq:
                raise StoreError(
                    f"{name} is missing though the build wrote chunks: start a new build with "
                    "`feverous-es es new-build`"
                )
            body = index_body(document, name, config, self.dim, analysis=self._analysis)
            client.indices.create(index=name, **body)

    def _indices(self) -> list[str]:
        return list(self.indices)

    def _set_load_settings(self) -> None:
        self._client.indices.put_settings(
            index=self._indices(),
            settings={"index": {"refresh_interval": "-1", "number_of_replicas": 0}},
        )

    def _discard_partial(self, quick: bool = False) -> None:
        """Delete what a failed or killed chunk left (documents from ``next_seq`` on): their ids
        by a scroll, then bulk deletes. Not ``_delete_by_query``: it lives in the ``reindex``
        module, which a cluster may lack (Elastic's integ-test distribution does). ``quick``
        (after a failed write, when the cluster may be struggling) gives up sooner: the next
        open of the build does it again anyway."""
        if quick:
            client = self._client.options(
                request_timeout=self.config.request_timeout, max_retries=0
            )
        else:
            timeout = max(_DELETE_TIMEOUT, self.config.request_timeout)
            client = self._client.options(request_timeout=timeout)
        indices = self._indices()
        client.indices.refresh(index=indices)
        stale = scan(
            client,
            index=indices,
            query={"query": queries.stale_docs(self._state.next_seq)},
            _source=False,
            size=_PAGE_BATCH,
        )
        deletes = (
            {"_op_type": "delete", "_index": hit["_index"], "_id": hit["_id"]} for hit in stale
        )
        report = bulk_load(client, deletes, self.config)
        if not report.ok:
            raise StoreError(
                f"cannot delete what chunk {self._state.next_seq} left: "
                + report.summary(lambda error: describe(error, self.config))
            )
        client.indices.refresh(index=indices)

    def _save_state(self, state: BuildState, tables: int) -> None:
        meta = state_meta(state, self.dim, self.version, tables, self._analysis)
        self._client.indices.put_mapping(index=self.indices.elements, meta={META_KEY: meta})
        self._state, self._tables = state, tables

    @property
    def destination(self) -> str:
        return f"{self.indices.elements} (and -pages, -tables) at {self.config.display_url}"

    def state(self) -> BuildState:
        return self._state

    def _stored_meta(self) -> dict[str, Any]:
        """The build ``_meta`` as the cluster holds it (quickly, or an error)."""
        client = self._client.options(request_timeout=self.config.request_timeout, max_retries=0)
        body = client.indices.get_mapping(index=self.indices.elements).body
        meta = build_meta(body[self.indices.elements]["mappings"])
        if meta is None:
            raise StoreError(f"{self.indices.elements} lost its build state")
        return meta

    def _check_chunk(self, chunk: Chunk) -> None:
        state = self._state
        if state.complete:
            raise StoreError(
                f"{self.indices.elements} holds a complete build: start a new one with "
                "`feverous-es es new-build` to index again"
            )
        if chunk.seq != state.next_seq:
            raise StoreError(
                f"chunk {chunk.seq} is out of order: the store expects {state.next_seq}"
            )
        keys = len(dict.fromkeys(element.vector_key for element in chunk.elements))
        for name, matrix, rows in (
            ("vectors", chunk.vectors, keys),
            ("page vectors", chunk.page_vectors, len(chunk.pages)),
        ):
            shape = np.shape(matrix)
            if rows and (len(shape) != 2 or shape[0] != rows or shape[1] != self.dim):
                raise StoreError(
                    f"chunk {chunk.seq} {name} have shape {shape}, the store expects "
                    f"({rows}, {self.dim})"
                )

    def write(self, chunk: Chunk) -> None:
        """Add one chunk; on any failure its documents are deleted again and the state is kept,
        so the same command resumes the build."""
        self._check_chunk(chunk)
        state, tables = self._state, self._tables
        with elastic_errors(self.config, f"chunk {chunk.seq}"):
            try:
                actions = chunk_actions(chunk, self.indices, state)
                report = bulk_load(self._client, actions, self.config)
                if not report.ok:
                    raise StoreError(
                        f"chunk {chunk.seq} was not stored: "
                        + report.summary(lambda error: describe(error, self.config))
                        + "; the aliases are unchanged: run the same command to resume"
                    )
                self._save_state(
                    BuildState(
                        next_seq=chunk.seq + 1,
                        last_rowid=chunk.last_rowid,
                        elements=state.elements + len(chunk.elements),
                        pages=state.pages + len(chunk.pages),
                        malformed=state.malformed + len(chunk.malformed),
                    ),
                    tables + len(chunk.table_texts()),
                )
            except BaseException:
                self._state, self._tables = state, tables
                # If this fails too, the next open discards the partial chunk.
                with contextlib.suppress(Exception):
                    stored = self._stored_meta()
                    if state_from_meta(stored) == state:
                        self._discard_partial(quick=True)
                    else:  # the state was saved after all (its answer was lost)
                        self._state, self._tables = (
                            state_from_meta(stored),
                            tables_from_meta(stored),
                        )
                raise

    def finish(self) -> None:
        """Publish the build: refresh, check every document is there, restore refresh and
        replicas, mark it complete, then swap the three aliases in one request. Safe to
        repeat."""
        client, config, state = self._client, self.config, self._state
        with elastic_errors(config, "cannot publish the build"):
            client.indices.refresh(index=self._indices())
            expected_counts = (state.elements, state.pages, self._tables)
            for index, expected in zip(self.indices, expected_counts, strict=True):
                found = int(client.count(index=index)["count"])
                if found != expected:
                    raise StoreError(
                        f"{index} holds {found:,} documents but the build wrote {expected:,} "
                        "(lost, or repeated ids): the aliases are unchanged; start a new build "
                        "with `feverous-es es new-build`"
                    )
            client.indices.put_settings(
                index=self._indices(),
                settings={
                    "index": {
                        "refresh_interval": config.refresh_interval,
                        "number_of_replicas": config.replicas,
                    }
                },
            )
            if not state.complete:
                self._save_state(replace(state, complete=True), self._tables)
            swap_aliases(client, dict(zip(config.aliases, self.indices, strict=True)))

    def close(self) -> None:
        if self._own_client and self._client is not None:
            self._client.close()
            self._client = None  # type: ignore[assignment]


def _vector(vector: np.ndarray, dim: int) -> np.ndarray | None:
    """The query vector as sent; None for an all-zero one: it has no direction, so nothing is
    near it (a real node refuses it for a cosine field with 400)."""
    query = np.asarray(vector, dtype=np.float32).ravel()
    if query.shape != (dim,):
        raise StoreError(
            f"the query vector has {query.shape[0]} dimensions, the index {dim}: "
            "the embedder does not match the index"
        )
    return query if np.any(query) else None


def whole(response: Mapping[str, Any]) -> Mapping[str, Any]:
    """``response`` when every shard answered in time; a partial answer (failed shards or a
    timeout) would pass as a whole one, so it is an error."""
    shards = response.get("_shards") or {}
    failed = int(shards.get("failed", 0) or 0)
    if failed or response.get("timed_out"):
        reasons = [
            str((failure.get("reason") or {}).get("reason", failure.get("reason", "")))
            for failure in shards.get("failures", [])
        ]
        what = f"{failed} of {shards.get('total', '?')} shards failed" if failed else "timed out"
        detail = f" ({reasons[0][:200]})" if reasons else ""
        raise StoreError(f"search failed: {what}{detail}; a partial answer is not used")
    return response


def _hits(response: Mapping[str, Any], cosine: bool = False) -> list[Hit]:
    out = []
    for hit in response["hits"]["hits"]:
        score = float(hit.get("_score") or 0.0)
        out.append(
            Hit(element_from_source(hit["_source"]), queries.cosine_from_score(score) if cosine
                else score)
        )  # fmt: skip
    return out


def _hybrid_parts(
    response: Mapping[str, Any], weights: HybridWeights
) -> tuple[list[Hit], list[Hit]]:
    """A ``knn_query`` hybrid answer split into its BM25 hits and its kNN hits (cosine, best
    first), from each hit's named part scores (boosts divided out)."""
    text: list[Hit] = []
    vector: list[Hit] = []
    for hit in response["hits"]["hits"]:
        element = element_from_source(hit["_source"])
        parts = hit.get("matched_queries") or {}
        if queries.TEXT_PART in parts and weights.text:
            text.append(Hit(element, float(parts[queries.TEXT_PART]) / weights.text))
        if queries.VECTOR_PART in parts and weights.vector:
            score = float(parts[queries.VECTOR_PART]) / weights.vector
            vector.append(Hit(element, queries.cosine_from_score(score)))
    vector.sort(key=lambda hit: -hit.score)
    return text, vector


def _page_hits(response: Mapping[str, Any], cosine: bool = False) -> list[PageHit]:
    out = []
    for hit in response["hits"]["hits"]:
        score = float(hit.get("_score") or 0.0)
        out.append(
            PageHit(page_from_source(hit["_source"]), queries.cosine_from_score(score) if cosine
                    else score)
        )  # fmt: skip
    return out


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class ElasticStore:
    """Read side of the Elasticsearch store: everything goes through the aliases, so a reader
    sees the last published build. Works with a key that may only read the aliases."""

    def __init__(self, config: ElasticConfig, client: Elasticsearch | None = None) -> None:
        self.config = config
        self._own_client = client is None
        self._client = client if client is not None else connect(config)
        self.elements = config.elements_alias
        self.pages = config.pages_alias
        self.tables = config.tables_alias
        self._has_tables = False
        try:
            self._meta = self._open()
        except BaseException:
            self.close()
            raise
        self.dim = int(self._meta.get("dim", config.dims)) if self._meta else config.dims

    def _open(self) -> dict[str, Any] | None:
        with elastic_errors(self.config, "cannot open the Elasticsearch store"):
            try:
                self._client.count(index=self.elements)
                self._client.count(index=self.pages)
            except NotFoundError:
                raise StoreError(
                    f"no index behind the aliases {self.elements} / {self.pages} at "
                    f"{self.config.display_url}: build one with "
                    "`feverous-es index WIKI_DB --store elasticsearch`"
                ) from None
            # A build published before the table index existed has none, and a reader key
            # made before then may not read it: table search then finds nothing.
            with contextlib.suppress(NotFoundError, AuthorizationException):
                self._client.count(index=self.tables)
                self._has_tables = True
            if not self._has_tables:
                _log.warning(
                    "%s is missing or not readable: tables rank without whole-table BM25 "
                    "(publish a new build, or make a new reader key)",
                    self.tables,
                )
            return self._read_meta()

    def _read_meta(self) -> dict[str, Any] | None:
        """The build ``_meta`` behind the elements alias; None for a key that may not read
        mappings (it lacks view_index_metadata)."""
        try:
            body = self._client.indices.get_mapping(index=self.elements).body
        except AuthorizationException:
            return None
        for mappings in body.values():
            meta = build_meta(mappings.get("mappings", {}))
            if meta is not None:
                return meta
        return None

    def state(self) -> BuildState:
        with elastic_errors(self.config):
            meta = self._read_meta()
            if meta is not None:
                return state_from_meta(meta)
            # Aliases point only at complete builds.
            return BuildState(
                elements=int(self._client.count(index=self.elements)["count"]),
                pages=int(self._client.count(index=self.pages)["count"]),
                complete=True,
            )

    def close(self) -> None:
        if self._own_client and self._client is not None:
            self._client.close()
            self._client = None  # type: ignore[assignment]

    # Requests.

    def _search(self, index: str, body: Mapping[str, Any]) -> Mapping[str, Any]:
        with elastic_errors(self.config, "search failed"):
            return whole(self._client.search(index=index, body=dict(body)).body)

    def _msearch(
        self, index: str, bodies: Sequence[Mapping[str, Any]], named_scores: bool = False
    ) -> list[Mapping[str, Any]]:
        """Responses to ``bodies``, sent as ``_msearch`` requests of up to 100 searches;
        ``named_scores``: each hit's named query parts with their scores."""
        out: list[Mapping[str, Any]] = []
        options = {"include_named_queries_score": True} if named_scores else {}
        with elastic_errors(self.config, "search failed"):
            for batch in _batches(bodies, _MSEARCH_BATCH):
                searches = queries.msearch_body(index, batch)
                response = self._client.msearch(searches=searches, **options)
                for item in response["responses"]:
                    if "error" in item:
                        error = item["error"]
                        reason = error.get("reason", error) if isinstance(error, dict) else error
                        raise StoreError(f"search failed: {reason}")
                    out.append(whole(item))
        return out

    def _mget(self, index: str, keys: Sequence[str]) -> list[dict[str, Any]]:
        sources = []
        with elastic_errors(self.config):
            for batch in _batches(list(keys), _MGET_BATCH):
                response = self._client.mget(index=index, ids=[doc_id(key) for key in batch])
                sources.extend(doc["_source"] for doc in response["docs"] if doc.get("found"))
        return sources

    # Elements and pages by key.

    def get_elements(self, ids: Sequence[str]) -> list[Element]:
        found = {e.id: e for e in map(element_from_source, self._mget(self.elements, ids))}
        return [found[element_id] for element_id in ids if element_id in found]

    def page_elements(self, page: str) -> list[Element]:
        elements: list[Element] = []
        after: int | None = None
        while True:
            body = queries.page_elements_search(page, _PAGE_BATCH, after)
            hits = self._search(self.elements, body)["hits"]["hits"]
            elements.extend(element_from_source(hit["_source"]) for hit in hits)
            if len(hits) < _PAGE_BATCH:
                return elements
            after = int(hits[-1]["sort"][0])

    def get_pages(self, titles: Sequence[str]) -> list[PageRecord]:
        found = {p.title: p for p in map(page_from_source, self._mget(self.pages, titles))}
        return [found[title] for title in titles if title in found]

    def match_titles(self, keys: Sequence[str]) -> dict[str, list[str]]:
        wanted = set(keys)
        if not wanted:
            return {}
        body = queries.title_keys_search(sorted(wanted), _MAX_TITLE_HITS)
        response = self._search(self.pages, body)
        out: dict[str, list[str]] = {}
        for hit in response["hits"]["hits"]:
            source = hit["_source"]
            hit_keys = source.get("title_keys", [])
            for key in [hit_keys] if isinstance(hit_keys, str) else hit_keys:
                if key in wanted:
                    out.setdefault(key, []).append(source["title"])
        return {key: out[key] for key in keys if key in out}

    # Element search.

    def search_text(self, query: str, k: int = 100, filters: Filters | None = None) -> list[Hit]:
        if k <= 0 or not query.strip():
            return []
        return _hits(self._search(self.elements, queries.text_search(query, k, filters)))

    def search_vector(
        self, vector: np.ndarray, k: int = 100, filters: Filters | None = None
    ) -> list[Hit]:
        """Top-``k`` elements by cosine: the best vectors, each table row's expanded to its
        elements (see :meth:`_expand_rows`)."""
        query = _vector(vector, self.dim)
        if k <= 0 or query is None:
            return []
        body = queries.vector_search(query, k, self.config, filters)
        hits = _hits(self._search(self.elements, body), cosine=True)
        return self._expand_rows([hits], k, filters)[0]

    def search_hybrid(
        self,
        query: str,
        vector: np.ndarray,
        k: int = 100,
        filters: Filters | None = None,
        weights: HybridWeights = _EQUAL_WEIGHTS,
    ) -> list[Hit]:
        return self.search_hybrid_batch([(query, vector)], k, filters, weights)[0]

    def search_text_batch(
        self, texts: Sequence[str], k: int = 100, filters: Filters | None = None
    ) -> list[list[Hit]]:
        """BM25 for many queries (claims) in ``_msearch`` requests."""
        if k <= 0:
            return [[] for _ in texts]
        bodies = [queries.text_search(text, k, filters) for text in texts]
        return [_hits(response) for response in self._msearch(self.elements, bodies)]

    def search_hybrid_batch(
        self,
        requests: Sequence[tuple[str, np.ndarray]],
        k: int = 100,
        filters: Filters | None = None,
        weights: HybridWeights = _EQUAL_WEIGHTS,
    ) -> list[list[Hit]]:
        """Hybrid retrieval for many (query, vector) pairs in ``_msearch`` requests, scored as
        Elasticsearch scores ``query`` + ``knn``: ``knn_query`` sends one search each and reads
        its text and vector parts apart, ``msearch`` a BM25 and a kNN search each; either way
        the vector part of a table row then reaches all its cells (:meth:`_expand_rows`) and
        the parts are fused client-side. ``rrf`` / ``linear`` (Enterprise) send their
        retriever and take its ranking as it is."""
        if k <= 0:
            return [[] for _ in requests]
        pairs = [(text, _vector(vector, self.dim)) for text, vector in requests]
        config = self.config
        if config.hybrid in ("rrf", "linear"):
            bodies = [
                queries.hybrid_search(text, vector, k, config, filters, weights)
                for text, vector in pairs
            ]
            return [_hits(response) for response in self._msearch(self.elements, bodies)]
        text_lists: list[list[Hit]] = []
        vector_lists: list[list[Hit]] = []
        if config.hybrid == "msearch":
            bodies = []
            for text, vector in pairs:
                bodies.append(queries.text_search(text, k, filters))
                if vector is not None:
                    bodies.append(queries.vector_search(vector, k, config, filters))
            responses = iter(self._msearch(self.elements, bodies))
            for _, vector in pairs:
                text_lists.append(_hits(next(responses)))
                vector_lists.append(
                    _hits(next(responses), cosine=True) if vector is not None else []
                )
        else:
            bodies = [
                queries.hybrid_search(text, vector, k, config, filters, weights)
                for text, vector in pairs
            ]
            for response in self._msearch(self.elements, bodies, named_scores=True):
                text_hits, vector_hits = _hybrid_parts(response, weights)
                text_lists.append(text_hits)
                vector_lists.append(vector_hits)
        expanded = self._expand_rows(vector_lists, k, filters)
        return [
            fuse_hybrid(text_hits, vector_hits, weights, k)
            for text_hits, vector_hits in zip(text_lists, expanded, strict=True)
        ]

    def _expand_rows(
        self, ranked: Sequence[Sequence[Hit]], k: int, filters: Filters | None
    ) -> list[list[Hit]]:
        """Each list of kNN hits with every table row's hit replaced by the row's elements that
        pass ``filters`` (in page order, with the row's score), the first hit of a vector key
        only, cut to ``k``: a row's vector is stored once (on its first element), and each
        row counts once however many of its cells carry the vector (builds before format 3),
        as the embedded store ranks. One ``_msearch`` fetches the rows of all lists."""
        rows = [
            sorted({hit.element.vector_key for hit in hits if hit.element.type in _ROW_TYPES})
            for hits in ranked
        ]
        bodies = [queries.row_elements_search(keys, filters) for keys in rows if keys]
        responses = iter(self._msearch(self.elements, bodies))
        out = []
        for hits, keys in zip(ranked, rows, strict=True):
            members: dict[str, list[Element]] = {}
            for hit in next(responses)["hits"]["hits"] if keys else ():
                element = element_from_source(hit["_source"])
                members.setdefault(element.vector_key, []).append(element)
            seen: set[str] = set()
            expanded: list[Hit] = []
            for hit in sorted(hits, key=lambda hit: -hit.score):
                key = hit.element.vector_key
                if key in seen:
                    continue
                seen.add(key)
                if hit.element.type in _ROW_TYPES:
                    expanded.extend(Hit(element, hit.score) for element in members.get(key, ()))
                else:
                    expanded.append(hit)
            out.append(expanded[:k])
        return out

    # Table search.

    def search_tables(
        self, query: str, k: int = 10, tables: Sequence[TableKey] = ()
    ) -> list[tuple[TableKey, float]]:
        """Whole tables (title, caption and every cell as one document) by BM25, best first:
        ``((page, table), score)``; ``tables`` restricts the search to those tables. Empty when
        the published build has no table index this client may read."""
        if k <= 0 or not query.strip() or not self._has_tables:
            return []
        response = self._search(self.tables, queries.table_search(query, k, tables))
        return [
            ((hit["_source"]["page"], int(hit["_source"]["table"])), float(hit["_score"] or 0.0))
            for hit in response["hits"]["hits"]
        ]

    # Page search.

    def search_pages_text(self, query: str, k: int = 10) -> list[PageHit]:
        if k <= 0 or not query.strip():
            return []
        return _page_hits(self._search(self.pages, queries.page_text_search(query, k)))

    def search_pages_vector(self, vector: np.ndarray, k: int = 10) -> list[PageHit]:
        query = _vector(vector, self.dim)
        if k <= 0 or query is None:
            return []
        body = queries.page_vector_search(query, k, self.config)
        return _page_hits(self._search(self.pages, body), cosine=True)
