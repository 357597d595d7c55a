"""Index benchmark: build an index of a FEVEROUS dump and time every stage, then time search.

    run = "bench.index:index_build"   # the driver's --wiki (default: the mini-FEVEROUS dump,
    # ~30 min here); options: limit (the first N pages), standalone_texts, claims, keep (the
    # index built at the driver's --index, which must not exist; default: a scratch directory)

Prints, per stage (read+linearize, embed, write): elements/s and tokens/s; the embed stage's
tokens/s against the model's standalone tokens/s measured in the same run on real texts; the
share of wall time that is not embedding; peak RSS; and hybrid top-100 search latency over real
dev claims (p50/p95, the query embedding timed separately).
"""

from __future__ import annotations

import random
import resource
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from bench.context import Context
from bench.data import MINI
from bench.errors import BenchError
from feverous_es.eval.samples import claim_texts
from feverous_es.index.building.builder import BuildReport, build
from feverous_es.index.dump.page import parse_page
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.index.embedded import EmbeddedStore, EmbeddedWriter
from feverous_es.runtime.embedder import Embedder


def standalone_tokens_per_second(db: WikiDB, embedder: Embedder, n_texts: int) -> float:
    """The model alone, on the texts the build embeds (rows and sentences), same settings."""
    rng = random.Random(0)
    texts: dict[str, str] = {}
    for _, page_id, data in db.rows(limit=3000):
        for element in parse_page(page_id, data).elements:
            texts.setdefault(element.vector_key, element.embed_text)
    sample = rng.sample(list(texts.values()), min(n_texts, len(texts)))
    embedder.embed(sample[:64])  # warm-up
    before, started = embedder.tokens, time.perf_counter()
    embedder.embed(sample)
    return (embedder.tokens - before) / (time.perf_counter() - started)


def search_latency(index: Path, claims_files: list[Path], n_claims: int) -> dict[str, float]:
    claims = claim_texts(claims_files)
    rng = random.Random(0)
    claims = rng.sample(claims, min(n_claims, len(claims)))
    embedder = Embedder()
    store = EmbeddedStore(index)
    embed_ms, search_ms = [], []
    for claim in claims:
        t0 = time.perf_counter()
        vector = embedder.embed([claim])[0]
        t1 = time.perf_counter()
        store.search_hybrid(claim, vector, k=100)
        t2 = time.perf_counter()
        embed_ms.append((t1 - t0) * 1000)
        search_ms.append((t2 - t1) * 1000)
    store.close()
    search_ms.sort()
    return {
        "claims": len(claims),
        "hybrid_p50_ms": statistics.median(search_ms),
        "hybrid_p95_ms": search_ms[int(0.95 * (len(search_ms) - 1))],
        "query_embed_p50_ms": statistics.median(embed_ms),
    }


def print_report(report: BuildReport, standalone: float, rss_gb: float, latency: dict) -> None:
    tokens = report.embed.tokens
    print(f"pages {report.pages:,}  elements {report.elements:,}  vectors {report.vectors:,}")
    print(f"wall {report.wall_seconds:,.1f} s   peak RSS {rss_gb:.2f} GB")
    for name, stage in (("read+linearize", report.read), ("embed", report.embed),
                        ("write", report.write)):  # fmt: skip
        print(
            f"  {name:15s} {stage.seconds:8.1f} s  {stage.rate(report.elements):>10,.0f} el/s"
            f"  {stage.rate(tokens):>10,.0f} tokens/s"
        )
    embed_rate = report.embed.rate(tokens)
    not_embedding = 1 - report.embed.seconds / report.wall_seconds
    print(f"  total           {report.wall_seconds:8.1f} s  "
          f"{report.elements / report.wall_seconds:>10,.0f} el/s  "
          f"{tokens / report.wall_seconds:>10,.0f} tokens/s")  # fmt: skip
    print(f"model standalone {standalone:,.0f} tokens/s; embed stage reaches "
          f"{embed_rate / standalone:.1%} of it (target >= 85%)")  # fmt: skip
    print(f"not embedding: {not_embedding:.1%} of wall time (target <= 10%)")
    if latency:
        print(f"hybrid top-100 over {latency['claims']} claims: p50 {latency['hybrid_p50_ms']:.1f} "
              f"ms, p95 {latency['hybrid_p95_ms']:.1f} ms (targets 50 / 150); query embedding p50 "
              f"{latency['query_embed_p50_ms']:.1f} ms")  # fmt: skip


def index_build(
    context: Context,
    *,
    limit: int | None = None,
    standalone_texts: int = 2000,
    claims: int = 300,
    keep: bool = False,
) -> dict:
    """A fresh build of the dump (its first ``limit`` pages), timed by stage, then ``claims``
    claims' search latency."""
    work = Path(tempfile.mkdtemp(prefix="feverous-bench-"))
    wiki = context.dump(work)
    out = work / "index"
    if keep:
        if context.index is None or context.index.exists():
            raise BenchError(f"keep: --index {context.index} must name a directory not there yet")
        out = context.index
    db = WikiDB(wiki)
    standalone = standalone_tokens_per_second(db, Embedder(), standalone_texts)
    embedder = Embedder()  # its token count starts at the build (sessions are shared)
    writer = EmbeddedWriter(out, embedder.dim)
    report = build(db, writer, embedder, limit=limit)
    writer.close()
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    claim_files = [MINI / "feverous_s_dev.jsonl", MINI / "tabfact_dev.jsonl"]
    latency = search_latency(out, claim_files, claims) if claims else {}
    print_report(report, standalone, rss_gb, latency)
    figures = {
        "pages": report.pages, "elements": report.elements, "vectors": report.vectors,
        "wall_s": report.wall_seconds, "peak_rss_gb": rss_gb,
        "stages_s": {"read": report.read.seconds, "embed": report.embed.seconds,
                     "write": report.write.seconds},
        "embed_tokens": report.embed.tokens, "standalone_tokens_per_s": standalone,
        **latency,
    }  # fmt: skip
    shutil.rmtree(work)
    return figures
