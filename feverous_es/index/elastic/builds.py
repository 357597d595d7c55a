"""The versioned builds behind the aliases: their indices, the build state kept in the
elements index's mapping ``_meta``, listing, creating and checking them."""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from elasticsearch import Elasticsearch
from elasticsearch.exceptions import GeneralAvailabilityWarning

from feverous_es.errors import StoreError
from feverous_es.index.elastic.analysis import ENGLISH_FOLDING, probe_analysis
from feverous_es.index.elastic.client import connect
from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elastic.documents import (
    BUILD_DOCUMENTS,
    FORMAT,
    FORMAT_VERSION,
    META_KEY,
    ElementDoc,
    index_body,
)
from feverous_es.index.elastic.errors import item_reason
from feverous_es.index.elastic.loader import (
    BuildIndices,
    alias_holders,
    swap_aliases,
    version_of,
)
from feverous_es.index.store import BuildState

# The kinds of index in a build, in the order of ElasticConfig.aliases and BuildIndices.
KINDS = BuildIndices._fields
# From 8.19 a node schedules no merge while its free disk is under 5 % of it (at most 100 GB:
# indices.merge.disk.watermark.high and its max_headroom), and a force-merge waits for good,
# saying nothing; after this many seconds the build looks at the nodes' disks once.
MERGE_DISK_CHECK_AFTER = 30.0
MERGE_FREE_SHARE, MERGE_FREE_HEADROOM = 0.05, 100e9

_log = logging.getLogger(__name__)


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
    racing: bool = False,
) -> BuildIndices:
    """Create the versioned indices of a new, empty build (elements first: it holds the state,
    so a build exists exactly when its elements index does), with ``analysis``, by default the
    best text analysis the cluster runs. ``racing``: parts starting together may create it at
    once; an index another made first is taken as it is."""
    indices = BuildIndices.of(config, version)
    analysis = analysis or probe_analysis(client)
    meta = state_meta(BuildState(), dim, version, tables=0, analysis=analysis)
    for document, name in zip(BUILD_DOCUMENTS, indices, strict=True):
        body = index_body(
            document, name, config, dim, meta if document is ElementDoc else None, analysis
        )
        create_index(client, name, body, racing)
    return indices


def create_index(
    client: Elasticsearch, name: str, body: Mapping[str, Any], racing: bool = False
) -> None:
    """Create index ``name``; ``racing``: one that another writer created meanwhile is no
    error."""
    if not racing:
        client.indices.create(index=name, **body)
        return
    answer = client.options(ignore_status=400).indices.create(index=name, **body)
    if answer.meta.status == 400:
        error = answer.body.get("error", {}) if isinstance(answer.body, dict) else {}
        if error.get("type") != "resource_already_exists_exception":
            raise StoreError(f"cannot create {name}: {item_reason(error)}")


def next_version(builds: Mapping[int, Any]) -> int:
    return max(builds, default=0) + 1


def publish_build(
    client: Elasticsearch,
    config: ElasticConfig,
    indices: BuildIndices,
    state: BuildState,
    tables: int,
    meta: Mapping[str, Any],
) -> None:
    """Publish a written build: block writes, refresh, check it holds every document
    ``state`` and ``tables`` count, merge, restore refresh and replicas, record it complete in
    ``meta`` (its ``_meta`` entry), then swap the three aliases in one request. Writes are
    blocked before the count, so no late request of a stale worker can change what was counted;
    a build found short is opened to writes again (as it was). Safe to repeat."""
    names = list(indices)
    client.indices.put_settings(index=names, settings={"index": {"blocks.write": True}})
    client.indices.refresh(index=names)
    for index, expected in zip(indices, (state.elements, state.pages, tables), strict=True):
        found = int(client.count(index=index)["count"])
        if found != expected:
            client.indices.put_settings(index=names, settings={"index": {"blocks.write": False}})
            raise StoreError(
                f"{index} holds {found:,} documents but the build wrote {expected:,} "
                "(lost, or repeated ids): the aliases are unchanged; start a new build "
                "with `feverous-es es new-build`"
            )
    if config.merge_segments:
        merge_segments(client, names, config.merge_segments)
    client.indices.put_settings(
        index=names,
        settings={"index": {"refresh_interval": config.refresh_interval,
                            "number_of_replicas": config.replicas}},
    )  # fmt: skip
    wait_for_replicas(client, names, config.replicas, limit=config.publish_wait)
    if not meta.get("complete") or meta.get("elements") != state.elements:
        done = state_meta(replace(state, complete=True), int(meta["dim"]), int(meta["version"]),
                          tables, analysis_from_meta(meta))  # fmt: skip
        client.indices.put_mapping(index=indices.elements, meta={META_KEY: done})
    swap_aliases(client, dict(zip(config.aliases, indices, strict=True)))


def wait_for_replicas(
    client: Elasticsearch, indices: Sequence[str], replicas: int, *, limit: float
) -> None:
    """Wait until the build's replicas are restored (green) before its aliases move to it, so
    the searches it takes at once are spread as they will be; on a cluster with too few data
    nodes to place them, until its primaries are (yellow), saying so once. StoreError after
    ``limit`` seconds (the aliases unchanged: publishing again resumes the wait)."""
    nodes = int(client.cluster.health()["number_of_data_nodes"])
    status = "green" if replicas < nodes else "yellow"
    if status == "yellow" and replicas:
        _log.warning(
            "%d data node(s) cannot hold %d replica(s) of each shard: the build is published "
            "with its primaries only (cluster health yellow)", nodes, replicas,
        )  # fmt: skip
    told, started = False, time.monotonic()
    while True:
        health = client.options(ignore_status=408).cluster.health(
            index=",".join(indices), wait_for_status=status, timeout="30s"
        )
        if not health.get("timed_out"):
            return
        waited = time.monotonic() - started
        if waited >= limit:
            raise StoreError(
                f"the build's shards were not {status} after {waited:.0f} s (cluster health "
                f"{health.get('status')}, {health.get('unassigned_shards')} unassigned): the "
                "aliases are unchanged; run `feverous-es es publish` once the cluster has room"
            )
        if not told:
            _log.warning("waiting up to %.0f s for the build's shards to be %s before "
                         "publishing it", limit, status)  # fmt: skip
            told = True


def nodes_too_full_to_merge(client: Elasticsearch) -> list[tuple[str, str]]:
    """The nodes (name, "N GB free of M GB") whose free disk is under what Elasticsearch's
    default ``indices.merge.disk.watermark.high`` (95 %, ``max_headroom`` 100 GB) leaves for
    merges."""
    full = []
    for node in client.nodes.stats(metric="fs")["nodes"].values():
        disk = node["fs"]["total"]
        free, total = int(disk["available_in_bytes"]), int(disk["total_in_bytes"])
        if free < min(MERGE_FREE_SHARE * total, MERGE_FREE_HEADROOM):
            space = f"{free / 1e9:.1f} GB free of {total / 1e9:.0f} GB"
            full.append((node.get("name", "?"), space))
    return full


def delete_prefix(config: ElasticConfig) -> list[str]:
    """Delete every index of ``config.prefix`` (a bench's or a test's own builds), by name: a
    node may refuse wildcard deletes (``action.destructive_requires_name``)."""
    with connect(config) as client:
        names = list(client.indices.get(index=f"{config.prefix}-*", allow_no_indices=True))
        if names:
            client.indices.delete(index=",".join(names))
    return names


def merge_segments(
    client: Elasticsearch,
    indices: Sequence[str],
    segments: int,
    *,
    poll: float = 1.0,
    disk_check_after: float = MERGE_DISK_CHECK_AFTER,
) -> None:
    """Force-merge ``indices`` to at most ``segments`` segments a shard, as a task polled until
    it ends: merging a large build takes longer than one request may wait. A merge still
    running after ``disk_check_after`` seconds on a node whose disk is too full for merges says
    so once (a warning on stderr) and goes on waiting: freeing space lets it finish."""
    task = client.indices.forcemerge(
        index=",".join(indices), max_num_segments=segments, wait_for_completion=False
    )["task"]
    started, told = time.monotonic(), False
    while True:
        # The client marks the task API "technical preview"; its GET has been stable since 5.x.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GeneralAvailabilityWarning)
            status = client.tasks.get(task_id=task)
        if status.get("completed"):
            break
        if not told and time.monotonic() - started >= disk_check_after:
            told = True
            for node in nodes_too_full_to_merge(client):
                _log.warning(
                    "the build's segment merge is waiting: node %s has %s, and Elasticsearch "
                    "starts no merge while less than 5 %% of a node's disk (at most 100 GB) is "
                    "free (indices.merge.disk.watermark.high); free disk space, or publish "
                    "without merging (merge_segments = 0)", *node,
                )  # fmt: skip
        time.sleep(poll)
    if "error" in status:
        raise StoreError(f"merging the build's segments failed: {item_reason(status['error'])}")
