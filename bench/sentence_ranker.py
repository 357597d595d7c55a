"""A fine-tuned sentence ranker against the retrieval order, on the claims its training held out.

    python bench/sentence_ranker.py MODEL [--pools WORK/candidates.jsonl] [--weights 0.5 1 2]
                                    [--record NAME]

MODEL is a ``feverous-es train rerank --kind sentences`` output (``OUT/sentences``); its
``training.json`` names the split, and the candidate pools are the ones that training cached
(``WORK/candidates.jsonl``: every claim's first-round candidates, in retrieval order, from the
pipeline's page and candidate stages). For each held-out claim with gold sentences, printed side
by side per claim file: complete-evidence recall at 5 (every gold sentence among the first 5
sentences) in retrieval order, by the model alone, and fused as the ``cross-encoder`` reranker
fuses them with ``retrieval_weight`` w (z(logit) + w * z(retrieval score)), and the model's
milliseconds per claim.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from results import add_record_option, record_if_asked  # bench/results.py

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from feverous_es.rerank.rankers import fused_scores  # noqa: E402
from feverous_es.runtime.cross_encoder import CrossEncoder  # noqa: E402
from feverous_es.training import datasets  # noqa: E402
from feverous_es.training.rerank_data import read_pools  # noqa: E402

K = 5


HeldOut = tuple[str, str, set[str], list[dict]]  # claim file, claim, gold ids, sentences


def held_out_lists(pools_file: Path, seed: int, holdout: float) -> list[HeldOut]:
    """(claim file, claim, gold sentence ids, sentence candidates) of each held-out claim with
    gold sentences."""
    _, held = datasets.split(list(read_pools(pools_file).values()), seed, holdout)
    lists = []
    for pool in held:
        gold = {e["id"] for e in pool.gold if e["type"] == "sentence"}
        gold |= {i for i in pool.missing if "_sentence_" in i}
        if gold:
            sentences = [c for c in pool.candidates if c["type"] == "sentence"]
            lists.append((pool.source, pool.claim, gold, sentences))
    return lists


def recall_at_k(lists: list[HeldOut], scores: list[np.ndarray]) -> dict[str, float]:
    found: dict[str, list[bool]] = {}
    for (source, _, gold, sentences), score in zip(lists, scores, strict=True):
        top = {sentences[i]["id"] for i in np.argsort(-score, kind="stable")[:K]}
        found.setdefault(source, []).append(gold <= top)
    return {source: round(float(np.mean(hits)), 4) for source, hits in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path, help="the trained sentence ranker (OUT/sentences)")
    parser.add_argument("--pools", type=Path, help="default: the training's WORK/candidates.jsonl")
    parser.add_argument("--weights", type=float, nargs="*", default=[0.5, 1.0, 2.0])
    parser.add_argument("--max-length", type=int, default=128)
    add_record_option(parser)
    args = parser.parse_args()

    training = json.loads((args.model / "training.json").read_text(encoding="utf-8"))
    command = training["command"].split()
    pools = args.pools or Path(command[command.index("--work") + 1]) / "candidates.jsonl"
    lists = held_out_lists(pools, training["training"]["seed"], training["holdout"])
    encoder = CrossEncoder(args.model, device="cpu", max_length=args.max_length)
    started = time.perf_counter()
    logits = [
        encoder.score([(claim, s["linearized"]) for s in sentences])
        for _, claim, _, sentences in lists
    ]
    seconds = time.perf_counter() - started
    retrieval = [np.array([s["score"] for s in sentences]) for *_, sentences in lists]
    orders = {
        "retrieval order": retrieval,
        "model alone": logits,
        **{
            f"fused, retrieval_weight {w:g}": [
                fused_scores(m, r, [0] * len(m), w) for m, r in zip(logits, retrieval, strict=True)
            ]
            for w in args.weights
        },
    }
    figures = {
        "model": str(args.model),
        "pools": str(pools),
        "claims": dict(Counter(source for source, *_ in lists)),
        "sentences_per_claim": round(float(np.mean([len(x[3]) for x in lists])), 1),
        "model_ms_per_claim": round(1000 * seconds / len(lists), 1),
        "recall_at_5": {name: recall_at_k(lists, scores) for name, scores in orders.items()},
    }
    print(
        f"{sum(figures['claims'].values())} held-out claims {figures['claims']}, "
        f"{figures['sentences_per_claim']} sentences a claim, model "
        f"{figures['model_ms_per_claim']} ms a claim; complete-evidence recall at {K}:"
    )
    for name, recall in figures["recall_at_5"].items():
        print(f"  {name:32s} " + "  ".join(f"{s} {v:.3f}" for s, v in recall.items()))
    record_if_asked(args, figures)


if __name__ == "__main__":
    main()
