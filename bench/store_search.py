"""Embedded store benchmark: build cost without the embedder, then search latency at full size.

    python bench/store_search.py                 # build the whole mini-FEVEROUS dump, then search
    python bench/store_search.py /tmp/idx        # build there (kept), or reuse an index there
    python bench/store_search.py --limit 2000    # the first 2,000 pages only
    python bench/store_search.py INDEX --onnx    # search an index of real embeddings

The build reads, parses and linearizes the dump with the project's own code and writes chunks
of 20k elements as the real build does, with the ONNX embedder replaced by a cheap stand-in:
each text's vector is the normalized sum of fixed random vectors of its hashed words, so texts
sharing words (the rows of one table, a claim and its evidence) get similar vectors, as real
embeddings do. The report gives each stage's time, peak RSS, then p50/p95 latency of top-k
text, vector and hybrid search (hits fetched as elements) over real dev claims, and HNSW
recall@k against exact search.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import resource
import shutil
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from feverous_es.index.elements import Element, ElementType, PageRecord
from feverous_es.index.embedded import EmbeddedStore, EmbeddedWriter
from feverous_es.index.page import MalformedPage, parse_page
from feverous_es.index.store import Chunk, Filters
from feverous_es.index.wiki import WikiDB

MINI = Path(__file__).resolve().parents[2] / "shared" / "data" / "minifeverous"
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


def unpack_mini(target_dir: Path) -> Path:
    target = target_dir / "wiki.db"
    with gzip.open(MINI / "wiki.db.gz") as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def build_index(path: Path, limit: int | None, work: Path, chunk_elements: int) -> None:
    """The build's stages one after another (the real build overlaps them in threads), each
    timed: dump read + parse + linearize, stand-in embedding, store write, finish."""
    wiki = WikiDB(unpack_mini(work))
    encoder = HashedWordEncoder()
    writer = EmbeddedWriter(path, DIM)
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
    writer.close()
    seconds["finish"] = time.perf_counter() - started
    wiki.close()
    final = EmbeddedStore(path)
    state = final.state()
    final.close()
    vectors = (path / "vectors.f32").stat().st_size // (DIM * 4)
    print(f"built {state.pages:,} pages, {state.elements:,} elements, {vectors:,} vectors")
    for stage, spent in seconds.items():
        print(f"  {stage:15s} {spent:7.1f} s  {state.elements / spent:>10,.0f} elements/s")
    print(f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GB")


def is_complete(path: Path) -> bool:
    if not (path / "meta.json").exists():
        return False
    store = EmbeddedStore(path)
    complete = store.state().complete
    store.close()
    return complete


def load_claims(n: int) -> list[str]:
    claims: list[str] = []
    for name in ("feverous_s_dev.jsonl", "tabfact_dev.jsonl"):
        with (MINI / name).open() as lines:
            claims += [c for c in (json.loads(line)["claim"] for line in lines) if c]
    return random.Random(0).sample(claims, min(n, len(claims)))


def timed(name: str, calls: list[Callable[[], object]]) -> None:
    calls[0]()  # warm-up: first touch of the memory maps
    ms = []
    for call in calls:
        started = time.perf_counter()
        call()
        ms.append((time.perf_counter() - started) * 1000)
    ms.sort()
    p95 = ms[int(0.95 * (len(ms) - 1))]
    print(f"  {name:28s} p50 {statistics.median(ms):6.1f} ms   p95 {p95:6.1f} ms")


def search_report(path: Path, n_claims: int, k: int, onnx: bool) -> None:
    store = EmbeddedStore(path)
    claims = load_claims(n_claims)
    if onnx:
        from feverous_es.index.embedder import Embedder  # only for indices of real embeddings

        vectors = Embedder().embed(claims)
    else:
        vectors = HashedWordEncoder(store.dim).embed(claims)
    pairs = list(zip(claims, vectors, strict=True))
    pages = [hit.element.page for hit in store.search_text(claims[0], k=5)]
    print(f"search over {store.state().elements:,} elements, {len(claims)} claims, top {k}:")
    timed("text", [lambda c=c: store.search_text(c, k) for c in claims])
    timed("vector", [lambda v=v: store.search_vector(v, k) for v in vectors])
    timed("hybrid", [lambda c=c, v=v: store.search_hybrid(c, v, k) for c, v in pairs])
    cells = Filters(types=(ElementType.CELL,))
    timed(
        "hybrid, types=cell",
        [lambda c=c, v=v: store.search_hybrid(c, v, k, cells) for c, v in pairs],
    )
    one_page = Filters(pages=tuple(pages[:1]))
    timed(
        "hybrid, one page",
        [lambda c=c, v=v: store.search_hybrid(c, v, k, one_page) for c, v in pairs],
    )
    timed("pages text top-10", [lambda c=c: store.search_pages_text(c) for c in claims])
    timed("pages vector top-10", [lambda v=v: store.search_pages_vector(v) for v in vectors])
    store.close()
    recall(path, vectors, k)


def recall(path: Path, queries: np.ndarray, k: int) -> None:
    """HNSW recall@k against exact search, over claim vectors and over stored vectors."""
    store = EmbeddedStore(path)
    matrix = store.vectors
    if not matrix.has_hnsw:
        print("  exact vector search only (below the HNSW threshold)")
        return
    picks = np.random.default_rng(0).integers(0, matrix.rows, len(queries))
    stored = np.memmap(path / "vectors.f32", dtype=np.float32, mode="r", shape=(matrix.rows, DIM))
    for name, batch in (("claims", queries), ("stored vectors", stored[picks])):
        hits = []
        for query in map(matrix.query, batch):
            approx = set(matrix.search(query, k)[0].tolist())
            exact = set(matrix.search(query, k, exact=True)[0].tolist())
            hits.append(len(approx & exact) / k)
        print(
            f"  HNSW recall@{k} vs exact ({name}): mean {np.mean(hits):.3f},"
            f" 5th percentile {np.percentile(hits, 5):.2f}"
        )
    store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", type=Path, help="index directory (built if absent)")
    parser.add_argument("--limit", type=int, help="build from the first N dump rows only")
    parser.add_argument("--chunk-elements", type=int, default=20_000)
    parser.add_argument("--claims", type=int, default=300)
    parser.add_argument("-k", type=int, default=100)
    parser.add_argument(
        "--onnx",
        action="store_true",
        help="embed the claims with the real embedder (for an index `feverous-es index` built)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.path or Path(tmp) / "index"
        if not is_complete(path):
            build_index(
                path, args.limit, Path(tmp), args.chunk_elements
            )  # resumes a build left incomplete
        search_report(path, args.claims, args.k, args.onnx)


if __name__ == "__main__":
    main()
