"""A fine-tuned sentence ranker against the retrieval order, on the claims its training held out.

    run = "bench.sentence_ranker:sentence_ranker"   # options: model, against, pools, weights,
    # max_length, pipeline (over the driver's --index), hops, per_file, non_cells

``model`` is a ``feverous-es train rerank --kind sentences`` output (``OUT/sentences``); its
``training.json`` names the split, and the candidate pools are the ones that training cached
(``WORK/candidates.jsonl``: every claim's first-round candidates, in retrieval order, from the
pipeline's page and candidate stages). For each held-out claim with gold sentences, printed side
by side per claim file: complete-evidence recall at 5 (every gold sentence among the first 5
sentences) in retrieval order, by the model alone, and fused as the ``cross-encoder`` reranker
fuses them with ``retrieval_weight`` w (z(logit) + w * z(retrieval score)), and the model's
milliseconds per claim. Each of ``against`` fused is paired with MODEL fused at the same weight:
the difference in complete-evidence recall per claim file, with its 95 % bootstrap interval.

With ``pipeline`` (over the driver's ``--index``, the index the pools came from), the same
held-out claims (the first ``per_file`` of each file) also go through the whole retrieval
pipeline, ``hops`` rounds of next-hop pursuit included, for each candidate pool size
``non_cells`` (the first-round
sentences the ranker can choose from): once with the ``retrieval`` reranker and once per weight
with the ``cross-encoder`` reranker running MODEL on sentences (``sentences_only``):
complete-evidence recall at 5 of the evidence it ends with, and the seconds a claim its rerank
stage took. ``against`` runs other rankers (e.g. a student of MODEL) on the same claims, side
by side.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.context import Context
from bench.errors import BenchError
from bench.paired import paired_difference
from feverous_es.index.backends import open_store
from feverous_es.index.elements import ElementType
from feverous_es.plugins.config import PipelineConfig
from feverous_es.plugins.interfaces import PluginContext
from feverous_es.rerank.rankers import fused_scores
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.training import datasets
from feverous_es.training.options import work_dir
from feverous_es.training.retrieved import read_retrieved
from feverous_es.verify.pipeline import LazyEmbedder, Pipeline

K = 5


HeldOut = tuple[str, str, set[str], list[dict]]  # claim file, claim, gold ids, sentences


def held_out_lists(pools_file: Path, seed: int, holdout: float) -> list[HeldOut]:
    """(claim file, claim, gold sentence ids, sentence candidates) of each held-out claim with
    gold sentences."""
    _, held = datasets.split(list(read_retrieved(pools_file).values()), seed, holdout)
    lists = []
    for pool in held:
        gold = {e["id"] for e in pool.gold if e["type"] == "sentence"}
        gold |= {i for i in pool.absent if "_sentence_" in i}
        if gold:
            sentences = [c for c in pool.ranked if c["type"] == "sentence"]
            lists.append((pool.source, pool.claim, gold, sentences))
    return lists


def hits_at_k(lists: list[HeldOut], scores: list[np.ndarray]) -> dict[str, list[bool]]:
    """Per claim file, whether each claim's gold sentences are all among the first ``K``."""
    found: dict[str, list[bool]] = {}
    for (source, _, gold, sentences), score in zip(lists, scores, strict=True):
        top = {sentences[i]["id"] for i in np.argsort(-score, kind="stable")[:K]}
        found.setdefault(source, []).append(gold <= top)
    return found


def recall_at_k(hits: dict[str, list[bool]]) -> dict[str, float]:
    """Per claim file, the share of :func:`hits_at_k`'s claims complete at ``K``."""
    return {source: round(float(np.mean(found)), 4) for source, found in hits.items()}


def paired_against(
    hits: dict[str, dict[str, list[bool]]],
    names: dict[Path, str],
    others: Sequence[Path],
    weights: Sequence[float],
) -> dict[str, dict[str, dict]]:
    """Each of ``others`` fused against MODEL fused, at each weight: the paired difference in
    complete-evidence recall at ``K`` per claim file (the claims both held out); ``hits``:
    each order's :func:`hits_at_k`, by its name."""
    paired: dict[str, dict[str, dict]] = {}
    for other, w in itertools.product(others, weights):
        fused = f"fused, retrieval_weight {w:g}"
        mine, theirs = hits[f"{names[other]}{fused}"], hits[fused]
        paired[f"{names[other]}{fused} - MODEL {fused}"] = {
            source: paired_difference(np.array(mine[source]), np.array(theirs[source]))
            for source in mine
        }
    return paired


def first_per_file(lists: list[HeldOut], n: int | None) -> list[HeldOut]:
    taken: Counter[str] = Counter()
    kept = []
    for item in lists:
        if n is None or taken[item[0]] < n:
            taken[item[0]] += 1
            kept.append(item)
    return kept


def pipeline_recall(
    index: Path, lists: list[HeldOut], plugins: dict, options: dict, hops: int
) -> dict:
    """Complete-evidence recall at 5 of the evidence the whole pipeline ends with, per claim
    file, and its rerank stage's seconds a claim."""
    config = PipelineConfig(options=options, hops=hops).with_plugins(**plugins)
    with Pipeline(
        config, PluginContext(open_store("embedded", index), LazyEmbedder("cpu"), "cpu")
    ) as pipeline:
        found = []
        for start in range(0, len(lists), 16):
            chunk = lists[start : start + 16]
            found += pipeline.retrieve_many([claim for _, claim, _, _ in chunk])
        seconds = dict(pipeline.seconds)
    hits: dict[str, list[bool]] = {}
    for (source, _, gold, _), retrieval in zip(lists, found, strict=True):
        top = [c.element.id for c in retrieval.evidence if c.element.type is ElementType.SENTENCE]
        hits.setdefault(source, []).append(gold <= set(top[:K]))
    return {
        "recall_at_5": {source: round(float(np.mean(h)), 4) for source, h in hits.items()},
        "rerank_s_per_claim": round(seconds.get("rerank", 0.0) / len(lists), 4),
        "total_s_per_claim": round(sum(seconds.values()) / len(lists), 3),
    }


def sentence_ranker(
    context: Context,
    *,
    model: str = "feverous_es/models/sentence-ranker",
    against: Sequence[str] = (),
    pools: str | None = None,
    weights: Sequence[float] = (0.5, 1.0, 2.0),
    max_length: int = 128,
    pipeline: bool = False,
    hops: int = 7,
    per_file: int | None = None,
    non_cells: Sequence[int] = (15, 25),
) -> dict[str, Any]:
    """``model`` (and each of ``against``) on its training's held-out claims, alone and fused
    at each of ``weights``; with ``pipeline``, through the whole retrieval pipeline too.
    ``pools``: the candidate pools (default: the training's ``WORK/candidates.jsonl``)."""
    ranker = Path(model)
    others = [Path(m) for m in against]
    training = json.loads((ranker / "training.json").read_text(encoding="utf-8"))
    command = training["command"].split()
    given = Path(command[command.index("--work") + 1]) if "--work" in command else None
    pools_file = Path(pools) if pools else work_dir(ranker.parent, given) / "candidates.jsonl"
    if not pools_file.is_file():
        raise BenchError(
            f"{pools_file} is missing: the candidate pools of {ranker}'s training (its "
            "WORK/candidates.jsonl, written by `feverous-es train rerank`); give "
            "--option pools=FILE"
        )
    lists = held_out_lists(pools_file, training["training"]["seed"], training["holdout"])
    if not lists:
        raise BenchError(f"{pools_file} holds no held-out claim with gold sentences")
    models = [ranker, *others]
    # MODEL unprefixed (its figures keep their keys), each of `against` by its directory and
    # its parent's.
    names = {ranker: "", **{m: f"{m.parent.name}/{m.name}: " for m in others}}
    retrieval = [np.array([s["score"] for s in sentences]) for *_, sentences in lists]
    orders: dict[str, list[np.ndarray]] = {"retrieval order": retrieval}
    model_ms: dict[str, float] = {}
    for model_dir in models:
        encoder = CrossEncoder(model_dir, device="cpu", max_length=max_length)
        started = time.perf_counter()
        logits = [
            encoder.score([(claim, s["linearized"]) for s in sentences])
            for _, claim, _, sentences in lists
        ]
        model_ms[names[model_dir]] = round(1000 * (time.perf_counter() - started) / len(lists), 1)
        orders[f"{names[model_dir]}model alone"] = logits
        for w in weights:
            orders[f"{names[model_dir]}fused, retrieval_weight {w:g}"] = [
                fused_scores(m, r, [0] * len(m), w) for m, r in zip(logits, retrieval, strict=True)
            ]
    hits = {name: hits_at_k(lists, scores) for name, scores in orders.items()}
    figures: dict[str, Any] = {
        "claims": dict(Counter(source for source, *_ in lists)),
        "paired": paired_against(hits, names, others, weights),
        "sentences_per_claim": round(float(np.mean([len(x[3]) for x in lists])), 1),
        "model_ms_per_claim": model_ms.pop(""),
        "against_ms_per_claim": model_ms,
        "recall_at_5": {name: recall_at_k(found) for name, found in hits.items()},
    }
    print(
        f"{sum(figures['claims'].values())} held-out claims {figures['claims']}, "
        f"{figures['sentences_per_claim']} sentences a claim, model ms a claim "
        f"{figures['model_ms_per_claim']}"
        + (f" (against: {model_ms})" if model_ms else "")
        + f"; complete-evidence recall at {K}:"
    )
    for name, recall in figures["recall_at_5"].items():
        print(f"  {name:32s} " + "  ".join(f"{s} {v:.3f}" for s, v in recall.items()))
    for name, by_file in figures["paired"].items():
        print(f"  {name} (95 % interval):")
        for source, d in by_file.items():
            print(
                f"    {source:16s} {d['difference']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
                f"  only it {d['only_this']}, only MODEL {d['only_baseline']}"
            )
    if pipeline:
        index = context.place("index")
        claims = first_per_file(lists, per_file)
        # A run's name: its plugins and their options.
        runs: dict[str, tuple[dict[str, str], dict[str, Any]]] = {
            f"retrieval order, {pool} non-cells": (
                {"reranker": "retrieval"},
                {"candidates": {"non_cells": pool}},
            )
            for pool in non_cells
        }
        for model_dir, w, pool in itertools.product(models, weights, non_cells):
            reranker = {"model": str(model_dir), "sentences_only": True, "max_length": max_length}
            runs[f"{names[model_dir]}fused, retrieval_weight {w:g}, {pool} non-cells"] = (
                {"reranker": "cross-encoder"},
                {
                    "reranker": {**reranker, "retrieval_weight": w},
                    "candidates": {"non_cells": pool},
                },
            )
        figures["pipeline"] = {"hops": hops, "claims": dict(Counter(c[0] for c in claims))}
        print(f"whole pipeline, {hops} hops, {figures['pipeline']['claims']}:")
        for name, (plugins, options) in runs.items():
            run = pipeline_recall(index, claims, plugins, options, hops)
            figures["pipeline"][name] = run
            recall = "  ".join(f"{s} {v:.3f}" for s, v in run["recall_at_5"].items())
            print(
                f"  {name:32s} {recall}  rerank {1000 * run['rerank_s_per_claim']:.0f} ms a claim"
            )
    return figures
