"""Throughput of the ONNX all-MiniLM-L6-v2 embedder, fp32 and int8, in tokens per second.

    python bench/embed_model.py [--db wiki.db] [--texts 512] [--batch-size 32] [--threads N]

Texts are ~128-token passages (a page's sentences joined, truncated at 128 tokens) from a
FEVEROUS dump, or synthetic sentences when no dump is given. Only CPU numbers are meaningful
for int8: on a GPU the embedder always runs fp32.
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import time
from contextlib import closing
from pathlib import Path

from results import bench_parser  # bench/results.py

from feverous_es.runtime.embedder import Embedder, ensure_model, export_dir


def passages(db: Path | None, n: int) -> list[str]:
    """``n`` texts of at least ~128 tokens (700 characters of English is ~150 tokens)."""
    if db is None:
        return [
            " ".join(
                f"Sentence {i}.{j} says that item {j} of list {i} is {i * j} metres long."
                for j in range(12)
            )
            for i in range(n)
        ]
    texts = []
    with closing(sqlite3.connect(db)) as con:
        for (data,) in con.execute("SELECT data FROM wiki"):
            page = json.loads(data)
            text = " ".join(v for k, v in page.items() if k.startswith("sentence_"))
            if len(text) >= 700:
                texts.append(text)
                if len(texts) == n:
                    break
    return texts


def main() -> None:
    parser = bench_parser(__doc__, record=False)
    parser.add_argument("--db", type=Path, help="FEVEROUS wiki.db (default: synthetic text)")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    model_dir = ensure_model(export_dir())  # fp32 beside int8: a full export (needs torch)
    texts = passages(args.db, args.texts)
    embedders = {
        name: Embedder(
            model_dir,
            quantized=quantized,
            batch_size=args.batch_size,
            device="cpu",
            threads=args.threads,
        )
        for name, quantized in (("fp32", False), ("int8", True))
    }
    rates: dict[str, list[float]] = {name: [] for name in embedders}
    text_tokens: dict[str, int] = {}
    for embedder in embedders.values():
        embedder.embed(texts[: args.batch_size])  # warm-up: first runs allocate
    # Rounds alternate between the models so that a noisy neighbour hurts both alike.
    for _ in range(args.repeat):
        for name, embedder in embedders.items():
            before, start = embedder.tokens, time.perf_counter()
            embedder.embed(texts)
            text_tokens[name] = embedder.tokens - before
            rates[name].append(text_tokens[name] / (time.perf_counter() - start))
    for name, embedder in embedders.items():
        print(
            f"{name}: {max(rates[name]):,.0f} tokens/s best, "
            f"{statistics.median(rates[name]):,.0f} median of {args.repeat} "
            f"({len(texts)} texts x {text_tokens[name] / len(texts):.0f} tokens, "
            f"batch {args.batch_size}, {embedder.provider})"
        )


if __name__ == "__main__":
    main()
