"""Bulk loading and the alias swap: how a build reaches the cluster without ever showing half an
index.

Documents go through the client's ``streaming_bulk`` in several worker threads fed by one bounded
queue, so memory stays bounded however large the build: each request is cut at
``ElasticConfig.bulk_docs`` documents or ``bulk_bytes`` bytes, whichever comes first, and 429 and
transient 5xx answers are retried with exponential backoff (whole requests and single
documents). Documents that still fail are collected, not dropped: the caller fails the build.

Readers see a build only through the aliases, which one ``_aliases`` request moves from the old
versioned indices to the new ones (atomic in Elasticsearch).
"""

from __future__ import annotations

import queue
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from elasticsearch import Elasticsearch
from elasticsearch.helpers import streaming_bulk

from feverous_es.errors import StoreError
from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elastic.documents import (
    doc_id,
    element_source,
    page_source,
    table_id,
    table_source,
)
from feverous_es.index.store import BuildState, Chunk

# 429: too many requests (a full write queue); 502-504: a node or proxy briefly unavailable.
RETRY_STATUS = (429, 502, 503, 504)
_END = object()
_KEPT_FAILURES = 20


@dataclass(frozen=True, slots=True)
class Failure:
    index: str
    id: str
    status: int
    reason: str

    def __str__(self) -> str:
        return f"{self.id} ({self.status}: {self.reason})"


@dataclass
class BulkReport:
    """What a load sent and what finally failed (the first few in detail)."""

    sent: int = 0
    failed: int = 0
    failures: list[Failure] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.errors

    def summary(self, describe: Callable[[BaseException], str] = str) -> str:
        """One line: how many documents failed, the first few, and the first request error."""
        parts = []
        if self.failed:
            shown = "; ".join(str(failure) for failure in self.failures[:3])
            parts.append(f"{self.failed} of {self.sent} documents failed, e.g. {shown}")
        if self.errors:
            parts.append(f"a bulk request failed: {describe(self.errors[0])}")
        return "; ".join(parts)


def failure_from_info(info: Mapping[str, Any]) -> Failure:
    """A :class:`Failure` from one failed item as ``streaming_bulk`` yields it."""
    (_, item), *_ = info.items()
    error = item.get("error", "")
    if isinstance(error, Mapping):
        reason = f"{error.get('type', '')}: {error.get('reason', '')}".strip(": ")
    else:
        reason = str(error)
    return Failure(
        index=str(item.get("_index", "")),
        id=str(item.get("_id", "")),
        status=int(item.get("status", 0) or 0),
        reason=" ".join(reason.split())[:200],
    )


def bulk_load(
    client: Elasticsearch,
    actions: Iterable[dict[str, Any]],
    config: ElasticConfig,
    *,
    fence: Callable[[], None] | None = None,
    ignore_status: Sequence[int] = (),
) -> BulkReport:
    """Send ``actions`` (``streaming_bulk`` actions) with ``config.bulk_workers`` threads and
    report every document that finally failed. Never raises for a failed document or request:
    the report says what went wrong. ``fence`` is called before every bulk request, a retry
    too: what it raises stops the load and is raised here (a writer that lost its lease sends
    nothing more). Documents answered with a status in ``ignore_status`` count as done."""
    refused: list[BaseException] = []  # what the fence raised, as it raised it
    if fence is not None:

        def checked() -> None:
            try:
                fence()
            except BaseException as error:
                refused.append(error)
                raise

        client = fenced(client, checked)
    report = BulkReport()
    lock = threading.Lock()
    stop = threading.Event()
    workers = max(1, config.bulk_workers)
    pending: queue.Queue[object] = queue.Queue(maxsize=workers * max(1, config.bulk_docs))

    def work() -> None:
        ended = False  # this worker has taken its end marker

        def consume() -> Iterator[dict[str, Any]]:
            nonlocal ended
            while (item := pending.get()) is not _END:
                yield item  # type: ignore[misc]
            ended = True

        try:
            for ok, info in streaming_bulk(
                client,
                consume(),
                chunk_size=config.bulk_docs,
                max_chunk_bytes=config.bulk_bytes,
                raise_on_error=False,
                raise_on_exception=False,
                max_retries=config.bulk_retries,
                initial_backoff=config.bulk_initial_backoff,
                max_backoff=config.bulk_max_backoff,
                retry_on_status=RETRY_STATUS,
                yield_ok=False,
            ):
                if not ok:
                    failure = failure_from_info(info)
                    if failure.status in ignore_status:
                        continue
                    with lock:
                        report.failed += 1
                        if len(report.failures) < _KEPT_FAILURES:
                            report.failures.append(failure)
        except BaseException as error:
            with lock:
                report.errors.append(error)
            stop.set()
            # Keep taking from the queue so the producer never blocks on a dead worker, up to
            # this worker's own end marker: a request that fails after it (the last one timing
            # out) must not take another worker's, which would then wait for ever.
            while not ended and pending.get() is not _END:
                pass

    threads = [
        threading.Thread(target=work, name=f"es-bulk-{i}", daemon=True) for i in range(workers)
    ]
    for thread in threads:
        thread.start()
    try:
        for action in actions:
            if stop.is_set():
                break
            pending.put(action)
            report.sent += 1
    finally:
        for _ in threads:
            pending.put(_END)
        for thread in threads:
            thread.join()
    if refused:
        raise refused[0]
    return report


def fenced(client: Elasticsearch, fence: Callable[[], None]) -> Elasticsearch:
    """``client`` (its options kept) whose every ``bulk`` request first calls ``fence``; the
    copies ``options()`` makes of it, as ``streaming_bulk`` does, are fenced too."""

    class Fenced(type(client)):  # type: ignore[misc, valid-type]
        def bulk(self, *args: Any, **kwargs: Any) -> Any:
            fence()
            return super().bulk(*args, **kwargs)

    copy = client.options()
    copy.__class__ = Fenced
    return copy


class BuildIndices(NamedTuple):
    """The versioned indices of one build, in the order of ``ElasticConfig.aliases``."""

    elements: str
    pages: str
    tables: str

    @classmethod
    def of(cls, config: ElasticConfig, version: int) -> BuildIndices:
        return cls(*(versioned_name(alias, version) for alias in config.aliases))


def chunk_actions(
    chunk: Chunk,
    indices: BuildIndices,
    state: BuildState,
    seq: int | None = None,
    ord_of: Callable[[int], int] = lambda ordinal: ordinal,
) -> Iterator[dict[str, Any]]:
    """The bulk actions of one chunk, made lazily: its elements, its pages, then one whole-table
    document per table. A vector goes on the first element of its key only (a table row's cells
    share one), with the types of all the key's elements; ``ord`` is ``ord_of`` the build's
    count, ``seq`` (by default the chunk's) the chunk number its documents carry (a build in
    parts gives each part its own: elastic.parts)."""
    seq = chunk.seq if seq is None else seq
    types: dict[str, dict[str, None]] = {}
    for element in chunk.elements:
        types.setdefault(element.vector_key, {})[element.type.value] = None
    rows: dict[str, int] = {}
    for i, element in enumerate(chunk.elements):
        carrier = element.vector_key not in rows
        row = rows.setdefault(element.vector_key, len(rows))
        source = (
            element_source(element, ord_of(state.elements + i), seq, chunk.vectors[row],
                           tuple(types[element.vector_key]))
            if carrier
            else element_source(element, ord_of(state.elements + i), seq, None)
        )  # fmt: skip
        yield {
            "_op_type": "index",
            "_index": indices.elements,
            "_id": doc_id(element.id),
            "_source": source,
        }
    for j, page in enumerate(chunk.pages):
        yield {
            "_op_type": "index",
            "_index": indices.pages,
            "_id": doc_id(page.title),
            "_source": page_source(page, ord_of(state.pages + j), seq, chunk.page_vectors[j]),
        }
    for (title, table), text in chunk.table_texts().items():
        yield {
            "_op_type": "index",
            "_index": indices.tables,
            "_id": doc_id(table_id(title, table)),
            "_source": table_source(title, table, text, seq),
        }


# Versions and aliases.


def versioned_name(alias: str, version: int) -> str:
    return f"{alias}-v{version}"


def version_of(alias: str, index: str) -> int | None:
    """N for ``<alias>-v<N>``; None for any other name."""
    match = re.fullmatch(re.escape(alias) + r"-v(\d+)", index)
    return int(match[1]) if match else None


def alias_holders(client: Elasticsearch, alias: str) -> list[str]:
    """The indices ``alias`` points at now (none when it does not exist)."""
    response = client.options(ignore_status=404).indices.get_alias(name=alias)
    body = response.body
    if not isinstance(body, dict) or "error" in body or "status" in body:
        return []
    return sorted(name for name, value in body.items() if alias in value.get("aliases", {}))


def swap_actions(
    targets: Mapping[str, str], holders: Mapping[str, Sequence[str]]
) -> list[dict[str, Any]]:
    """``_aliases`` actions that point each alias of ``targets`` at its new index and nowhere
    else; sent as one request they take effect together."""
    actions: list[dict[str, Any]] = []
    for alias, index in targets.items():
        for old in holders.get(alias, ()):
            if old != index:
                # must_exist: if the alias moved meanwhile the whole request fails, instead of
                # (since 8.14) succeeding in part and leaving the alias on two builds.
                actions.append({"remove": {"index": old, "alias": alias, "must_exist": True}})
        if index not in holders.get(alias, ()):
            actions.append({"add": {"index": index, "alias": alias}})
    return actions


def swap_aliases(client: Elasticsearch, targets: Mapping[str, str]) -> list[dict[str, Any]]:
    """Point every alias of ``targets`` at its index in one atomic request; returns the actions
    sent (none when the aliases already point there). StoreError, nothing moved, when an alias
    points at a later build than its target."""
    holders = {alias: alias_holders(client, alias) for alias in targets}
    for alias, index in targets.items():
        target = version_of(alias, index)
        versions = [(version_of(alias, old), old) for old in holders[alias]]
        newer = [old for version, old in versions if target and version and version > target]
        if newer:  # a publisher that stalled while a later build was published
            raise StoreError(
                f"{alias} points at {newer[0]}, a later build than {index}: it is not moved "
                "back (publish a new build to replace it)"
            )
    actions = swap_actions(targets, holders)
    if actions:
        answer = client.indices.update_aliases(actions=actions).body
        if answer.get("errors") or not answer.get("acknowledged", False):
            failed = [
                result for result in answer.get("action_results", [])
                if result.get("status", 200) >= 300
            ]  # fmt: skip
            raise StoreError(
                f"the alias swap was not applied whole ({failed[:2] or answer}): check "
                "`feverous-es es status` and publish again"
            )
    return actions
