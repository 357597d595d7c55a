"""Writing a build chunk by chunk into new indices, then publishing it by swapping the aliases
(see the package docstring)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from elasticsearch import Elasticsearch
from elasticsearch.helpers import scan

from feverous_es.errors import IncompatibleIndex, StoreError
from feverous_es.index.dump.wiki import WHOLE, Part
from feverous_es.index.elastic import parts, queries
from feverous_es.index.elastic.analysis import probe_analysis
from feverous_es.index.elastic.builds import (
    KINDS,
    analysis_from_meta,
    build_meta,
    check_aliases_free,
    create_build,
    create_index,
    list_builds,
    publish_build,
    state_from_meta,
    state_meta,
    tables_from_meta,
)
from feverous_es.index.elastic.client import connect
from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elastic.documents import (
    BUILD_DOCUMENTS,
    FORMAT_VERSION,
    META_KEY,
    ElementDoc,
    expected_properties,
    index_body,
    mapping_conflicts,
)
from feverous_es.index.elastic.errors import describe, elastic_errors
from feverous_es.index.elastic.leases import Lease
from feverous_es.index.elastic.loader import BuildIndices, bulk_load, chunk_actions
from feverous_es.index.store import BuildState, Chunk

# Deleting a failed chunk's documents may take longer than one search.
_DELETE_TIMEOUT = 600.0


class ElasticWriter:
    """Write side of the Elasticsearch store (see the module docstring); ``part`` one of several
    workers writing one build (:mod:`~feverous_es.index.elastic.parts`), covering ``rows`` of
    the ``dump_rows`` pages the build covers, of the dump ``fingerprint`` names
    (:class:`~feverous_es.index.dump.wiki.DumpSurvey`)."""

    def __init__(
        self,
        config: ElasticConfig,
        dim: int,
        client: Elasticsearch | None = None,
        part: Part = WHOLE,
        rows: tuple[int, int] = (0, 0),
        fingerprint: str = "",
    ) -> None:
        self.config = config
        self.dim = dim
        self.part = part
        self.fingerprint = fingerprint
        self._progress = parts.PartProgress(part, rows=rows[0], dump_rows=rows[1])
        self._lease: Lease | None = None  # a part's: taken when the part has work left
        self._held = contextlib.ExitStack()  # keeps the lease renewed until close()
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
            self.indices = create_build(client, config, 1, self.dim, self._analysis,
                                        racing=not self.part.whole)  # fmt: skip
            self._state, self._tables = BuildState(), 0
        else:
            self._resume(latest, builds[latest])
        self._open_part()
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
            create_index(client, name, body, racing=not self.part.whole)

    def _open_part(self) -> None:
        """Take this part's state from its progress document; refuse to mix one writer and
        parts, or parts of different counts, in one build."""
        client, progress = self._client, parts.read_progress(self._client, self.indices)
        if self.part.whole:
            if progress:
                count = next(iter(progress.values())).part.count
                raise IncompatibleIndex(
                    f"v{self.version} is being built in {count} parts: run each with --part "
                    f"I/{count}, or start a new build with `feverous-es es new-build`"
                )
            return
        parts.check_parts(self.version, progress, self.part)
        if self._state.complete:  # published already: nothing left to write
            return
        if self._state.next_seq and not progress:
            raise IncompatibleIndex(
                f"v{self.version} was begun by one process, not in parts: finish it without "
                "--part, or start a new build with `feverous-es es new-build`"
            )
        parts.ensure_progress_index(client, self.indices)
        parts.check_dump(client, self.indices, self.fingerprint, self.part)
        mine = progress.get(self.part.number)
        if mine is None or not mine.state.complete:
            mine = self._take_part()
        if mine is not None:
            mine.rows, mine.dump_rows = self._progress.rows, self._progress.dump_rows
            self._progress = mine
        self._state, self._tables = self._progress.state, self._progress.tables

    def _take_part(self) -> parts.PartProgress | None:
        """Take this part's lease (one writer a part), waiting while another worker holds it:
        until that one completes the part (then there is nothing left to take) or its hold runs
        out (it was killed: this one resumes where it stopped). The part's progress as found."""
        what = f"part {self.part} of v{self.version}"
        lease = Lease(self._client, parts.progress_index(self.indices), str(self.part.number),
                      what, self.config.lease_seconds)  # fmt: skip
        taken, found = lease.take_when_free(parts.stamped(self._progress), done=_is_complete)
        if found is None:
            mine = None
        else:
            mine = parts.PartProgress.of(found)
            if mine.state.complete:  # done by another worker (or just before this one took it)
                if taken:
                    lease.release(found)
                return mine
        self._lease = lease
        self._held.enter_context(lease.kept())
        return mine

    @property
    def _fence(self) -> Callable[[], None] | None:
        """What a part's bulk requests check first: that its lease still holds (a whole build
        has no lease)."""
        return self._lease.fence if self._lease is not None else None

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
        open of the build does it again anyway.

        Fenced twice: a part's lease is checked before the scroll and before every bulk
        request, and each delete is conditioned on the sequence number the scroll read
        (``if_seq_no`` / ``if_primary_term``). Document ids are fixed by the dump, so a worker
        that was stopped mid-discard and lost its part would otherwise delete what the new
        owner rewrote under the same ids; a rewritten document answers 409 and is left."""
        if self._lease is not None:
            self._lease.fence()
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
            query={"query": queries.stale_docs(*parts.seq_range(self.part, self._state.next_seq))},
            _source=False,
            seq_no_primary_term=True,
            size=queries.PAGE_SIZE,
        )
        deletes = (
            {"_op_type": "delete", "_index": hit["_index"], "_id": hit["_id"],
             "if_seq_no": hit["_seq_no"], "if_primary_term": hit["_primary_term"]}
            for hit in stale
        )  # fmt: skip
        report = bulk_load(client, deletes, self.config, fence=self._fence, ignore_status=(409,))
        if not report.ok:
            raise StoreError(
                f"cannot delete what chunk {self._state.next_seq} left: "
                + report.summary(lambda error: describe(error, self.config))
            )
        client.indices.refresh(index=indices)

    def _save_state(self, state: BuildState, tables: int, seconds: float = 0.0) -> None:
        if self.part.whole:
            meta = state_meta(state, self.dim, self.version, tables, self._analysis)
            self._client.indices.put_mapping(index=self.indices.elements, meta={META_KEY: meta})
        else:
            progress = replace(self._progress, state=state, tables=tables,
                               seconds=self._progress.seconds + seconds)  # fmt: skip
            assert self._lease is not None, "a part writes only under its lease"
            if state.complete:  # the part's last write: another may take the lease at once
                self._lease.release(parts.stamped(progress))
            else:
                self._lease.write(parts.stamped(progress))
            self._progress = progress
        self._state, self._tables = state, tables

    @property
    def destination(self) -> str:
        return f"{self.indices.elements} (and -pages, -tables) at {self.config.display_url}"

    def state(self) -> BuildState:
        return self._state

    def _stored_state(self) -> tuple[BuildState, int]:
        """This writer's state and whole tables as the cluster holds them (quickly, or an
        error)."""
        client = self._client.options(request_timeout=self.config.request_timeout, max_retries=0)
        if not self.part.whole:
            stored = parts.read_progress(client, self.indices)[self.part.number]
            return stored.state, stored.tables
        meta = self._stored_meta(client)
        return state_from_meta(meta), tables_from_meta(meta)

    def _stored_meta(self, client: Elasticsearch) -> dict[str, Any]:
        """The build ``_meta`` as the cluster holds it."""
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
        if self._lease is not None:
            self._lease.fence()  # held, and renewed recently enough that nobody took it over
        state, tables = self._state, self._tables
        started = time.perf_counter()
        with elastic_errors(self.config, f"chunk {chunk.seq}"):
            try:
                actions = chunk_actions(
                    chunk, self.indices, state, parts.seq_of(self.part, chunk.seq),
                    lambda ordinal: parts.ord_of(self.part, ordinal),
                )  # fmt: skip
                report = bulk_load(self._client, actions, self.config, fence=self._fence)
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
                    time.perf_counter() - started,
                )
            except BaseException:
                self._state, self._tables = state, tables
                if self._lease is not None and not self._lease.fenced_in():
                    raise  # the part may be another worker's now: what is in the cluster is its
                # If this fails too, the next open discards the partial chunk.
                with contextlib.suppress(Exception):
                    stored_state, stored_tables = self._stored_state()
                    if stored_state == state:
                        self._discard_partial(quick=True)
                    else:  # the state was saved after all (its answer was lost)
                        self._state, self._tables = stored_state, stored_tables
                raise

    def finish(self) -> list[str]:
        """Publish the build (refresh, check every document is there, restore refresh and
        replicas, mark it complete, swap the three aliases in one request); a part marks itself
        complete and publishes only when every part is. Safe to repeat. Returns the parts still
        missing (none once published)."""
        client, config, state = self._client, self.config, self._state
        with elastic_errors(config, "cannot publish the build"):
            if self.part.whole:
                meta = self._stored_meta(client)
                publish_build(client, config, self.indices, state, self._tables, meta)
                self._state = replace(state, complete=True)
                return []
            if not state.complete:
                self._save_state(replace(state, complete=True), self._tables)
            self._held.close()
            return publish_parts(client, config, self.version)

    def close(self) -> None:
        self._held.close()
        if self._own_client and self._client is not None:
            self._client.close()
            self._client = None  # type: ignore[assignment]


def publish_parts(client: Elasticsearch, config: ElasticConfig, version: int) -> list[str]:
    """Publish build ``version`` if it was written in parts and every part is complete; the
    parts still missing otherwise (published: none). One worker publishes, under the build's
    ``publish`` lease: another that gets here meanwhile waits until it has (and returns as it
    does), or takes over when the publisher's hold ran out (it died mid-merge)."""
    indices = BuildIndices.of(config, version)
    progress = parts.read_progress(client, indices)
    missing = parts.missing_parts(progress)
    if not progress or missing:
        return missing
    claim = Lease(client, parts.progress_index(indices), parts.PUBLISH_ID,
                  f"publishing v{version}", config.lease_seconds)  # fmt: skip
    taken, found = claim.take_when_free({"published": False}, done=_is_published)
    if not taken:
        return []
    with claim.kept():
        if found is None or not _is_published(found):
            state, tables = parts.whole_build(progress)
            meta = list_builds(client, config)[version]["meta"]
            publish_build(client, config, indices, state, tables, meta)
        claim.release({"published": True})
    return []


def _is_complete(part: Mapping[str, Any]) -> bool:
    """Whether a part's progress document says the part is written."""
    return bool(part.get("complete"))


def _is_published(claim: Mapping[str, Any]) -> bool:
    """Whether the build's ``publish`` document says it is published."""
    return bool(claim.get("published"))
