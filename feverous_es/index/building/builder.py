"""The index build: dump rows -> parsed elements -> embeddings -> store, as a 3-stage pipeline.

Reading and writing run in their own threads so the embedder (the physical limit) is never kept
waiting; queues between stages are short, so memory stays bounded. The store writes each chunk
atomically and records the last dump rowid in it, which is what makes a killed build resumable.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from feverous_es.errors import MalformedPage
from feverous_es.index.dump.page import parse_page
from feverous_es.index.dump.wiki import WHOLE, Part, WikiDB
from feverous_es.index.elements import Element, PageRecord
from feverous_es.index.store import BuildState, Chunk, StoreWriter


class Encoder(Protocol):
    """What the build needs of an embedder (see feverous_es.runtime.embedder.Embedder)."""

    dim: int

    @property
    def tokens(self) -> int: ...

    def embed(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class StageTime:
    seconds: float = 0.0
    items: int = 0
    tokens: int = 0

    def rate(self, value: int) -> float:
        return value / self.seconds if self.seconds else 0.0


@dataclass
class BuildReport:
    pages: int = 0
    elements: int = 0
    vectors: int = 0
    malformed: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0
    read: StageTime = field(default_factory=StageTime)
    embed: StageTime = field(default_factory=StageTime)
    write: StageTime = field(default_factory=StageTime)
    state: BuildState = field(default_factory=BuildState)
    already_complete: bool = False
    waiting_for: list[str] = field(default_factory=list)  # parts not complete: not published


@dataclass
class _Parsed:
    seq: int
    last_rowid: int
    rows: int
    elements: list[Element]
    pages: list[PageRecord]
    malformed: list[str]


_DONE = object()


def _chunks(
    db: WikiDB,
    state: BuildState,
    until: int | None,
    part: Part,
    chunk_elements: int,
    stage: StageTime,
) -> Iterator[_Parsed]:
    seq = state.next_seq
    current = _Parsed(seq, state.last_rowid, 0, [], [], [])
    started = time.perf_counter()
    for rowid, page_id, data in db.rows(state.last_rowid, until=until, part=part):
        try:
            parsed = parse_page(page_id, data)
            current.elements.extend(parsed.elements)
            current.pages.append(parsed.record)
        except MalformedPage as exc:
            current.malformed.append(f"{page_id}: {exc}")
        current.last_rowid = rowid
        current.rows += 1
        if len(current.elements) >= chunk_elements:
            stage.seconds += time.perf_counter() - started
            stage.items += len(current.elements)
            yield current
            started = time.perf_counter()
            seq += 1
            current = _Parsed(seq, rowid, 0, [], [], [])
    stage.seconds += time.perf_counter() - started
    if current.rows:
        stage.items += len(current.elements)
        yield current


def _embed_chunk(parsed: _Parsed, encoder: Encoder) -> Chunk:
    texts: dict[str, str] = {}
    for element in parsed.elements:
        texts.setdefault(element.vector_key, element.embed_text)
    vectors = encoder.embed(list(texts.values()))
    page_vectors = encoder.embed([page.embed_text for page in parsed.pages])
    return Chunk(
        seq=parsed.seq,
        last_rowid=parsed.last_rowid,
        elements=parsed.elements,
        vectors=vectors,
        pages=parsed.pages,
        page_vectors=page_vectors,
        malformed=parsed.malformed,
    )


class _Worker(threading.Thread):
    """A pipeline stage in a thread; an error in it is re-raised in the main thread."""

    def __init__(self, target: Callable[[], None]) -> None:
        super().__init__(daemon=True)
        self._target_fn = target
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._target_fn()
        except BaseException as exc:
            self.error = exc


def build(
    db: WikiDB,
    writer: StoreWriter,
    encoder: Encoder,
    *,
    limit: int | None = None,
    part: Part = WHOLE,
    chunk_elements: int = 20_000,
    on_progress: Callable[[int, int], None] | None = None,
    on_publish: Callable[[], None] | None = None,
) -> BuildReport:
    """Index ``part``'s rows of the dump (all of them by default) after the writer's resume
    point, among the dump's first ``limit`` rows. ``on_progress(rows, elements)`` is called
    after each written chunk, ``on_publish()`` before the writer publishes the build (a segment
    merge or a vector graph may take minutes); the writer of one part of several publishes
    only when every part is complete (``report.waiting_for``: the parts it still waits for)."""
    report = BuildReport()
    state = writer.state()
    until = db.rowid_at(limit)
    if db.count(state.last_rowid, until=until, part=part) == 0:
        if on_publish:
            on_publish()
        report.waiting_for = writer.finish()
        report.state = writer.state()
        report.already_complete = True
        return report

    started = time.perf_counter()
    parsed_queue: queue.Queue[object] = queue.Queue(maxsize=2)
    chunk_queue: queue.Queue[object] = queue.Queue(maxsize=2)
    stop = threading.Event()

    def put(target: queue.Queue[object], item: object, consumer: threading.Thread) -> bool:
        """Blocks while the queue is full; gives up when the consumer has stopped."""
        while not stop.is_set() and consumer.is_alive():
            try:
                target.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        # SQLite connections belong to the thread that made them: the reader opens its own.
        with db.reopened() as own_db:
            for parsed in _chunks(own_db, state, until, part, chunk_elements, report.read):
                if not put(parsed_queue, parsed, main):
                    return
        put(parsed_queue, _DONE, main)

    def write() -> None:
        while True:
            item = chunk_queue.get()
            if item is _DONE:
                return
            assert isinstance(item, tuple)
            chunk, rows = item
            t0 = time.perf_counter()
            writer.write(chunk)
            report.write.seconds += time.perf_counter() - t0
            report.write.items += len(chunk.elements)
            report.pages += rows
            report.elements += len(chunk.elements)
            report.vectors += len(chunk.vectors)
            report.malformed.extend(chunk.malformed)
            if on_progress:
                on_progress(rows, len(chunk.elements))

    main = threading.current_thread()
    reader, writer_thread = _Worker(read), _Worker(write)
    reader.start()
    writer_thread.start()
    try:
        while True:
            item = _get(parsed_queue, reader)
            if item is _DONE:
                break
            assert isinstance(item, _Parsed)
            tokens_before = encoder.tokens
            t0 = time.perf_counter()
            chunk = _embed_chunk(item, encoder)
            report.embed.seconds += time.perf_counter() - t0
            report.embed.items += len(chunk.vectors) + len(chunk.page_vectors)
            report.embed.tokens += encoder.tokens - tokens_before
            if not put(chunk_queue, (chunk, item.rows), writer_thread):
                break
        put(chunk_queue, _DONE, writer_thread)
        writer_thread.join()
        _raise_from(writer_thread)
        if on_publish:
            on_publish()
        report.waiting_for = writer.finish()
    finally:
        stop.set()
        reader.join()
    _raise_from(reader)
    report.wall_seconds = time.perf_counter() - started
    report.state = writer.state()
    return report


def _get(source: queue.Queue[object], producer: _Worker) -> object:
    while True:
        try:
            return source.get(timeout=0.2)
        except queue.Empty:
            if not producer.is_alive():
                _raise_from(producer)
                return source.get_nowait() if not source.empty() else _DONE


def _raise_from(worker: _Worker) -> None:
    if worker.error is not None:
        raise worker.error
