"""Store benchmark: build cost without the embedder, then search latency at full size.

    run = "bench.store_search:store_search"   # the driver's --wiki (default: the mini dump);
    # options: store, limit (the first N dump rows), chunk_elements, claims, k, keep

``store = "elasticsearch"`` builds into the cluster of ``FEVEROUS_ES_URL`` (and credentials)
under a fresh prefix ``feverous-bench-<random>``, deleted afterwards unless ``keep``; it reports
the bulk rate, the indices' size on disk, the same search latencies, and kNN recall@k of the
cluster's HNSW against exact search over the build's vectors, counted in distinct vectors (rows).

The build reads, parses and linearizes the dump with the project's own code and writes chunks
of 20k elements as the real build does, with the ONNX embedder replaced by a cheap stand-in:
each text's vector is the normalized sum of fixed random vectors of its hashed words, so texts
sharing words (the rows of one table, a claim and its evidence) get similar vectors, as real
embeddings do. The report gives each stage's time, peak RSS, then p50/p95 latency of top-k
text, vector and hybrid search (hits fetched as elements) over real dev claims, and HNSW
recall@k against exact search.
"""

from __future__ import annotations

import random
import re
import resource
import statistics
import tempfile
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench.context import Context
from bench.data import MINI, unpacked_mini
from bench.errors import BenchError
from feverous_es.errors import MalformedPage
from feverous_es.eval.samples import claim_texts
from feverous_es.index.building.plan import file_bytes
from feverous_es.index.dump.page import parse_page
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.index.elastic.builds import delete_prefix
from feverous_es.index.elastic.client import connect
from feverous_es.index.elastic.config import ElasticConfig, load_config
from feverous_es.index.elastic.queries import num_candidates
from feverous_es.index.elastic.store import ElasticStore
from feverous_es.index.elastic.writer import ElasticWriter
from feverous_es.index.elements import Element, ElementType, PageRecord
from feverous_es.index.embedded import EmbeddedStore, EmbeddedWriter
from feverous_es.index.store import BuildState, Chunk, Filters, Store, StoreWriter

DIM = 384
_WORD = re.compile(r"\w+")


class HashedWordEncoder:
    """A stand-in embedder: the sum of per-word random unit vectors, normalized."""

    def __init__(self, dim: int = DIM, buckets: int = 1 << 16) -> None:
        self.dim = dim
        self.tokens = 0
        table = np.random.default_rng(0).standard_normal((buckets, dim), dtype=np.float32)
        self._table = table / np.linalg.norm(table, axis=1, keepdims=True)
        self._buckets = buckets

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            self.tokens += len(words)
            if words:
                buckets = [zlib.crc32(word.encode()) % self._buckets for word in words]
                out[i] = self._table[buckets].sum(axis=0)
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def build_index(
    writer: StoreWriter,
    limit: int | None,
    work: Path,
    chunk_elements: int,
    vectors_by_key: dict[str, np.ndarray] | None = None,
    wiki_path: Path | None = None,
) -> dict[str, float]:
    """The build's stages one after another (the real build overlaps them in threads), each
    timed: dump read + parse + linearize, stand-in embedding, store write, finish. The vectors
    go into ``vectors_by_key`` too when it is given."""
    wiki = WikiDB(wiki_path or unpacked_mini(work))
    encoder = HashedWordEncoder()
    state = writer.state()
    seconds = dict.fromkeys(("read+parse", "stand-in embed", "write", "finish"), 0.0)
    elements: list[Element] = []
    pages: list[PageRecord] = []
    malformed: list[str] = []
    seq, last_rowid = state.next_seq, state.last_rowid

    def flush() -> None:
        nonlocal seq, elements, pages, malformed
        started = time.perf_counter()
        texts = {element.vector_key: element.embed_text for element in reversed(elements)}
        keys = list(dict.fromkeys(element.vector_key for element in elements))
        vectors = encoder.embed([texts[key] for key in keys])
        if vectors_by_key is not None:
            vectors_by_key.update(zip(keys, vectors, strict=True))
        page_vectors = encoder.embed([page.embed_text for page in pages])
        chunk = Chunk(seq, last_rowid, elements, vectors, pages, page_vectors, malformed)
        seconds["stand-in embed"] += time.perf_counter() - started
        started = time.perf_counter()
        writer.write(chunk)
        seconds["write"] += time.perf_counter() - started
        seq, elements, pages, malformed = seq + 1, [], [], []

    started = time.perf_counter()
    for rowid, page_id, data in wiki.rows(state.last_rowid, limit):
        try:
            parsed = parse_page(page_id, data)
            elements += parsed.elements
            pages.append(parsed.record)
        except MalformedPage as error:
            malformed.append(f"{page_id}: {error}")
        last_rowid = rowid
        if len(elements) >= chunk_elements:
            seconds["read+parse"] += time.perf_counter() - started
            flush()
            started = time.perf_counter()
    seconds["read+parse"] += time.perf_counter() - started
    if elements or pages or malformed:
        flush()
    started = time.perf_counter()
    writer.finish()
    seconds["finish"] = time.perf_counter() - started
    wiki.close()
    return seconds


def print_build(state: BuildState, vectors: int, seconds: dict[str, float]) -> None:
    print(f"built {state.pages:,} pages, {state.elements:,} elements, {vectors:,} vectors")
    for stage, spent in seconds.items():
        print(f"  {stage:15s} {spent:7.1f} s  {state.elements / spent:>10,.0f} elements/s")
    print(f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB")


def build_embedded(
    path: Path, limit: int | None, work: Path, chunk_elements: int, wiki: Path | None = None
) -> dict[str, float]:
    """Build the embedded index; returns each stage's seconds."""
    writer = EmbeddedWriter(path, DIM)
    try:
        seconds = build_index(writer, limit, work, chunk_elements, wiki_path=wiki)
    finally:
        writer.close()
    final = EmbeddedStore(path)
    state = final.state()
    print_build(state, final.vectors.rows, seconds)
    final.close()
    return seconds


def is_complete(path: Path) -> bool:
    if not (path / "meta.json").exists():
        return False
    store = EmbeddedStore(path)
    complete = store.state().complete
    store.close()
    return complete


def load_claims(n: int) -> list[str]:
    claims = claim_texts(MINI / name for name in ("feverous_s_dev.jsonl", "tabfact_dev.jsonl"))
    return random.Random(0).sample(claims, min(n, len(claims)))


def timed(name: str, calls: list[Callable[[], object]]) -> dict[str, float]:
    calls[0]()  # warm-up: first touch of the memory maps
    ms = []
    for call in calls:
        started = time.perf_counter()
        call()
        ms.append((time.perf_counter() - started) * 1000)
    ms.sort()
    p95 = ms[int(0.95 * (len(ms) - 1))]
    print(f"  {name:28s} p50 {statistics.median(ms):6.1f} ms   p95 {p95:6.1f} ms")
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(p95, 2)}


def search_report(
    store: Store, n_claims: int, k: int, onnx: bool
) -> tuple[np.ndarray, dict[str, dict[str, float]]]:
    """Search latencies over ``n_claims`` claims; returns the claims' vectors and the
    latencies by search kind."""
    claims = load_claims(n_claims)
    if onnx:
        from feverous_es.runtime.embedder import Embedder  # only for indices of real embeddings

        vectors = Embedder().embed(claims)
    else:
        vectors = HashedWordEncoder(store.dim).embed(claims)
    pairs = list(zip(claims, vectors, strict=True))
    pages = [hit.element.page for hit in store.search_text(claims[0], k=5)]
    print(f"search over {store.state().elements:,} elements, {len(claims)} claims, top {k}:")
    latency = {
        "text": timed("text", [lambda c=c: store.search_text(c, k) for c in claims]),
        "vector": timed("vector", [lambda v=v: store.search_vector(v, k) for v in vectors]),
        "hybrid": timed(
            "hybrid", [lambda c=c, v=v: store.search_hybrid(c, v, k) for c, v in pairs]
        ),
    }
    cells = Filters(types=(ElementType.CELL,))
    latency["hybrid_cells"] = timed(
        "hybrid, types=cell",
        [lambda c=c, v=v: store.search_hybrid(c, v, k, cells) for c, v in pairs],
    )
    one_page = Filters(pages=tuple(pages[:1]))
    latency["hybrid_one_page"] = timed(
        "hybrid, one page",
        [lambda c=c, v=v: store.search_hybrid(c, v, k, one_page) for c, v in pairs],
    )
    latency["pages_text"] = timed(
        "pages text top-10", [lambda c=c: store.search_pages_text(c) for c in claims]
    )
    latency["pages_vector"] = timed(
        "pages vector top-10", [lambda v=v: store.search_pages_vector(v) for v in vectors]
    )
    return vectors, latency


def recall(path: Path, queries: np.ndarray, k: int) -> dict[str, float]:
    """HNSW recall@k against exact search, over claim vectors and over stored vectors (mean
    per query set), and of the page vectors' graph over the claims (when there is one)."""
    store = EmbeddedStore(path)
    matrix = store.vectors
    result: dict[str, float] = {}
    if not matrix.has_hnsw:
        print("  exact vector search only (below the HNSW threshold)")
        return result
    picks = np.random.default_rng(0).integers(0, matrix.rows, len(queries))
    sets = [("claims", matrix, queries), ("stored vectors", matrix, matrix.get(picks))]
    if store.page_vectors.has_hnsw:
        sets.append(("pages, claims", store.page_vectors, queries))
    for name, matrix, batch in sets:
        hits = []
        for query in map(matrix.query, batch):
            approx = set(matrix.search(query, k)[0].tolist())
            exact = set(matrix.search(query, k, exact=True)[0].tolist())
            hits.append(len(approx & exact) / k)
        print(
            f"  HNSW recall@{k} vs exact ({name}): mean {np.mean(hits):.3f},"
            f" 5th percentile {np.percentile(hits, 5):.2f}"
        )
        result[name] = round(float(np.mean(hits)), 4)
    store.close()
    return result


def elastic_recall(
    config: ElasticConfig, vectors_by_key: dict[str, np.ndarray], queries: np.ndarray, k: int
) -> dict[str, dict[str, float]]:
    """Recall@k of the cluster's kNN against exact search over the build's vectors, counting
    distinct vectors: a kNN top-k that holds several cells of one row finds fewer rows. Returns
    mean and 5th percentile recall and distinct vectors per query set."""
    figures = {}
    keys = np.array(list(vectors_by_key))
    matrix = np.stack(list(vectors_by_key.values()))
    picks = np.random.default_rng(0).integers(0, len(keys), len(queries))
    client = connect(config)
    try:
        for name, batch in (("claims", queries), ("stored vectors", matrix[picks])):
            recalls, distinct = [], []
            for query in batch:
                exact = set(keys[np.argsort(-(matrix @ query))[:k]].tolist())
                answer = client.search(
                    index=config.elements_alias,
                    knn={"field": "vector", "query_vector": query.tolist(), "k": k,
                         "num_candidates": num_candidates(k, config)},
                    size=k,
                    source_includes=["vector_key"],
                )  # fmt: skip
                found = {hit["_source"]["vector_key"] for hit in answer["hits"]["hits"]}
                recalls.append(len(found & exact) / k)
                distinct.append(len(found))
            figures[name] = {
                "mean": float(np.mean(recalls)),
                "p5": float(np.percentile(recalls, 5)),
                "distinct": float(np.mean(distinct)),
            }
            print(
                f"  kNN recall@{k} vs exact ({name}): mean {figures[name]['mean']:.3f}, 5th "
                f"percentile {figures[name]['p5']:.2f}; distinct vectors in the top "
                f"{k}: {figures[name]['distinct']:.1f}"
            )
    finally:
        client.close()
    return figures


def elastic_size(config: ElasticConfig) -> tuple[int, int]:
    """Bytes on disk of the build's indices (primaries), and the documents holding a vector."""
    client = connect(config)
    try:
        stats = client.indices.stats(index=",".join(config.aliases), metric="store")
        size = sum(v["primaries"]["store"]["size_in_bytes"] for v in stats["indices"].values())
        with_vector = client.count(index=config.elements_alias,
                                   query={"exists": {"field": "vector"}})["count"]  # fmt: skip
        return size, int(with_vector)
    finally:
        client.close()


@dataclass(frozen=True)
class Build:
    """What to build and how to search it: the dump (None: mini-FEVEROUS) or its first
    ``limit`` rows, in chunks of ``chunk_elements``; ``claims`` dev claims' top-``k`` searches,
    their vectors from the real embedder when ``onnx`` (an index `feverous-es index` built)."""

    wiki: Path | None = None
    limit: int | None = None
    chunk_elements: int = 20_000
    claims: int = 300
    k: int = 100
    onnx: bool = False


def run_elastic(build: Build, keep: bool) -> dict:
    config = replace(load_config(), prefix=f"feverous-bench-{uuid.uuid4().hex[:6]}", replicas=0)
    vectors_by_key: dict[str, np.ndarray] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            writer = ElasticWriter(config, DIM)
            try:
                seconds = build_index(
                    writer, build.limit, Path(tmp), build.chunk_elements, vectors_by_key, build.wiki
                )
            finally:
                writer.close()
        store = ElasticStore(config)
        size, with_vector = elastic_size(config)
        print_build(store.state(), with_vector, seconds)
        print(f"  size on disk {size / 2**20:,.0f} MiB (primaries, after the build's refresh)")
        state = store.state()
        queries, latency = search_report(store, build.claims, build.k, build.onnx)
        store.close()
        figures = {
            "elements": state.elements, "pages": state.pages, "vectors": with_vector,
            "build_stages_s": seconds, "disk_bytes": size, "latency": latency,
            "recall": elastic_recall(config, vectors_by_key, queries, build.k),
        }  # fmt: skip
        return figures
    finally:
        if not keep:
            delete_prefix(config)


def store_search(
    context: Context,
    *,
    store: str = "embedded",
    limit: int | None = None,
    chunk_elements: int = 20_000,
    claims: int = 300,
    k: int = 100,
    keep: bool = False,
) -> dict:
    """The build (without the embedder) of the driver's --wiki into a scratch index or the
    cluster, then its search latency and recall."""
    build = Build(context.place("wiki") if context.wiki else None, limit, chunk_elements, claims, k)
    if store == "elasticsearch":
        return run_elastic(build, keep)
    if store != "embedded":
        raise BenchError(f"store {store!r} is not embedded or elasticsearch")
    with tempfile.TemporaryDirectory() as tmp:
        return embedded_figures(Path(tmp) / "index", build)


def embedded_figures(path: Path, build: Build) -> dict:
    """Build the embedded index at ``path`` (resuming a build left incomplete; an index there
    is reused), then measure its search."""
    seconds: dict[str, float] = {}
    if not is_complete(path):
        seconds = build_embedded(path, build.limit, path.parent, build.chunk_elements, build.wiki)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    disk = sum(file_bytes(path).values())
    print(f"  size on disk {disk / 2**20:,.0f} MiB")
    opened = EmbeddedStore(path)
    state = opened.state()
    queries, latency = search_report(opened, build.claims, build.k, build.onnx)
    opened.close()
    return {
        "elements": state.elements, "pages": state.pages,
        "vectors": opened.vectors.rows,
        "build_stages_s": seconds, "build_s": sum(seconds.values()),
        "build_peak_rss_bytes": peak_rss,
        "disk_bytes": disk,
        "latency": latency, "recall": recall(path, queries, build.k),
    }  # fmt: skip
