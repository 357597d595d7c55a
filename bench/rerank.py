"""Throughput of the ONNX cross-encoder (ms-marco-MiniLM-L-12-v2) on real FEVEROUS pairs.

    python bench/rerank.py                      # sample/ claims and pages, fp32 and int8, CPU
    python bench/rerank.py --claims ../shared/data/minifeverous/feverous_s_dev.jsonl \\
        --db /path/to/mini/wiki.db --pairs 4000 --batch-size 16 32 64 --max-length 256 512
    python bench/rerank.py --device cuda --pairs 20000 --batch-size 64 256

Pairs are (claim, Papelo linearization) for the elements of each claim's gold pages (FEVEROUS
evidence pages, TabFact gold tables): sentences, list items, captions, header cells and cells,
up to ``--per-claim`` per claim, shuffled, so one ``score`` call mixes claims and lengths as the
reranker plugin's calls do. Prints pairs/s and tokens/s (non-padding tokens, median of
``--repeat`` runs) per model, max_length and batch size, and tokens per CPU-second of this process
(all its threads), which other load on the machine disturbs less than wall-clock rates.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
from results import bench_parser  # bench/results.py
from tokenizers import Tokenizer

from feverous_es.eval.samples import gold_page_pairs
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.runtime.fetch import ensure_reranker
from feverous_es.runtime.files import TOKENIZER_FILE

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = bench_parser(__doc__, record=False)
    parser.add_argument("--db", type=Path, default=REPO / "sample" / "wiki.db")
    parser.add_argument("--claims", type=Path, default=REPO / "sample" / "claims.jsonl")
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--per-claim", type=int, default=50)
    parser.add_argument("--max-length", type=int, nargs="+", default=[512])
    parser.add_argument("--batch-size", type=int, nargs="+", default=[32])
    parser.add_argument(
        "--model", choices=["fp32", "int8", "both"], default="both", help="CPU graph(s) to time"
    )
    parser.add_argument("--device", choices=["auto", "cuda", "cpu"], default="cpu")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    pairs = gold_page_pairs(args.db, args.claims, args.pairs, args.per_claim)
    if not pairs:
        raise SystemExit(f"no pairs: no claim of {args.claims} has its pages in {args.db}")
    tokenizer = Tokenizer.from_file(str(ensure_reranker() / TOKENIZER_FILE))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    lengths = np.array([len(e.ids) for e in tokenizer.encode_batch(pairs)])
    claims = len({query for query, _ in pairs})
    print(
        f"{len(pairs)} pairs from {claims} claims ({args.claims.name}, {args.db.name}); "
        f"tokens per pair untruncated: mean {lengths.mean():.0f}, p50 {np.median(lengths):.0f}, "
        f"p99 {np.percentile(lengths, 99):.0f}, max {lengths.max()}"
    )
    for max_length in args.max_length:
        print(f"  max_length {max_length}: {(lengths > max_length).mean():.2%} pairs truncated")

    models = {"fp32": False, "int8": True}
    if args.model != "both":
        models = {args.model: models[args.model]}
    for max_length in args.max_length:
        for quantized in models.values():
            encoder = CrossEncoder(
                quantized=quantized, max_length=max_length, device=args.device, threads=args.threads
            )
            if encoder.provider != "CPUExecutionProvider" and quantized:
                continue  # on CUDA the fp32 graph always runs
            for batch_size in args.batch_size:
                encoder.batch_size = batch_size
                encoder.score(pairs[: 2 * batch_size])  # warm-up: first runs allocate
                rates, pair_rates, cpu_rates = [], [], []
                for _ in range(args.repeat):
                    encoder.tokens = 0
                    started, cpu_started = time.perf_counter(), time.process_time()
                    encoder.score(pairs)
                    elapsed = time.perf_counter() - started
                    cpu = time.process_time() - cpu_started
                    rates.append(encoder.tokens / elapsed)
                    pair_rates.append(len(pairs) / elapsed)
                    cpu_rates.append(encoder.tokens / cpu)
                print(
                    f"{encoder.model_path.name:<16} {encoder.provider:<22} max_length "
                    f"{max_length:>3}  batch {batch_size:>3}: "
                    f"{statistics.median(pair_rates):7.1f} pairs/s "
                    f"{statistics.median(rates):6.0f} tokens/s (best run {max(rates):.0f}; "
                    f"{statistics.median(cpu_rates):.0f} tokens per CPU-second)",
                    flush=True,
                )


if __name__ == "__main__":
    main()
