"""Fine-tuning the evidence rankers (Malon 2021, §3), and their ONNX export.

``feverous-es train rerank`` trains the two cross-encoders the ``cross-encoder`` reranker runs:
one for cells and header cells (its ``cell_model``), one for every other element — sentences,
list items, table captions (its ``model``); the split is the reranker's own
(:data:`feverous_es.retrieve.candidates.TABLE_CELL_TYPES`). Papelo trained captions with the
sentences too. Three steps, each resumable:

1. **Candidate pools.** Every claim with gold evidence goes through the pipeline's page and
   candidate stages (the defaults, over the given index) in retrieval order; the pool and the
   claim's gold elements, looked up in the index by id (page titles NFD, as the index stores
   them; gold elements of pages the index lacks are dropped and counted), are cached in
   ``<work>/candidates.jsonl``, one line a claim, so a rerun reads them back.
2. **Groups and fine-tuning.** For each gold element of a training claim, a group of seven
   (claim, element) pairs: the gold element, the 4 best-ranked non-gold candidates of its kind
   (*hard negatives*) and 2 gold elements of other training claims, drawn with the seed; when
   the pool has fewer hard negatives, other claims' gold elements fill the group. The model, a
   sequence classifier with one output from any local Hugging Face encoder (default
   all-MiniLM-L6-v2), scores each pair; the loss is the cross entropy of the seven scores with
   the gold element as the right class (Malon 2021, eq. 1, as in DPR). A pair is
   ``(claim, element.linearized)``, the text the reranker feeds the model at run time. The
   checkpoint (``<work>/<kind>/checkpoint.pt``) makes a rerun resume.
3. **Export** to int8 ONNX (:func:`feverous_es.export.exporter.export_int8_as_model`, parity
   against torch), ``manifest.json``, held-out metrics and a model card in ``<out>/<kind>``.

**A student** (``--teacher DIR --layers N``): a smaller ranker made of an exported one (the
packaged sentence ranker ships as an int8 graph only). The teacher is rebuilt in torch from that
graph (:mod:`feverous_es.export.dequantize`), ``N`` of its layers are kept, evenly spaced, and
the student learns the teacher's scores of the same groups: the cross entropy of its seven
scores against the softmax of the teacher's (the order that the reranker's per-claim
standardization reads), not the gold element alone.

Output layout: ``<out>/cells`` and ``<out>/sentences`` (``--kind`` picks one or both), to be
named in the pipeline configuration as ``options.reranker.cell_model`` and ``model``.

torch, transformers and optimum are imported inside functions: the runtime never needs them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import TrainError
from feverous_es.export.exporter import export_int8_as_model
from feverous_es.retrieve.selection import CELL_BUDGET, SENTENCE_BUDGET
from feverous_es.training import common, datasets, engine
from feverous_es.training.bases import base_name
from feverous_es.training.common import check_base, import_torch
from feverous_es.training.progress import NO_STEPS, QUIET, Progress, Steps
from feverous_es.training.rerank.card import write_card
from feverous_es.training.rerank.data import (
    CANDIDATES_FILE,
    Group,
    build_groups,
    kind_of,
    read_gold_claims,
)
from feverous_es.training.rerank.options import RunOptions, TrainSettings
from feverous_es.training.retrieved import Retrieved, collect_retrieved

LABELS = ("relevance",)  # one output logit; config.json's id2label
TEACHER_SCORES_FILE = "teacher-scores.json"
TEACHER_TORCH_DIR = "teacher-torch"  # the teacher rebuilt from its int8 graph


# The first K of a kind the evidence budget keeps (5 non-cells, 25 cell-type elements).
RECALL_AT = {"cells": CELL_BUDGET, "sentences": SENTENCE_BUDGET}


def kept_layers(total: int, keep: int) -> list[int]:
    """``keep`` of ``total`` layers, evenly spaced from the first: 3 of 6 are 0, 2, 4 (the
    student initialisation of DistilBERT)."""
    if not 1 <= keep <= total:
        raise TrainError(f"--layers must be between 1 and {total}, not {keep}")
    return engine.kept_layers(total, keep)  # the GPU queue's ranker students keep the same


def prune_layers(model: Any, keep: int) -> None:
    """Keep ``keep`` evenly spaced encoder layers of a BERT-style ``model``, in place (as the
    GPU queue's ranker students do)."""
    kept_layers(len(model.base_model.encoder.layer), keep)  # the bounds, as a TrainError
    engine.prune_layers(model, keep)


def train(
    groups: Sequence[Group], settings: TrainSettings, work: Path, steps: Steps = NO_STEPS
) -> Path | None:
    """Fine-tune ``settings.base`` on the groups into ``<work>/trained`` and return it (None when
    ``steps.stop_after`` stopped it first); resumable (:func:`~feverous_es.training.common.fit`).
    """
    torch = import_torch()
    check_base(settings.base)
    if not groups:
        raise TrainError("no training groups (no gold element of this kind in the training claims)")
    tokenizer, model = common.load_model(torch, settings, LABELS)
    if settings.layers is not None:
        prune_layers(model, settings.layers)
    encoded = [engine.encode_pairs(tokenizer, g.pairs(), settings.max_length) for g in groups]
    pad_id = tokenizer.pad_token_id or 0
    targets = None
    if settings.teacher is not None:
        targets = teacher_scores(settings.teacher, groups, settings.max_length, work)

    def batch_loss(ids: list[int]) -> tuple[Any, int]:
        rows = [pair for i in ids for pair in encoded[i]]
        batch = engine.pad_batch(torch, rows, pad_id)
        scores = model(**batch).logits[:, 0]
        width = max(len(encoded[i]) for i in ids)
        row_of = torch.tensor([r for r, i in enumerate(ids) for _ in encoded[i]])
        col_of = torch.tensor([c for i in ids for c in range(len(encoded[i]))])
        # A short group's empty places score -1e4: out of the softmax (eq. 1 over its members).
        grid = torch.full((len(ids), width), -1e4, dtype=scores.dtype)
        grid = grid.index_put((row_of, col_of), scores)
        if targets is None:
            target = torch.zeros(len(ids), dtype=torch.long)  # the gold element comes first
        else:
            teacher = torch.full((len(ids), width), -1e4, dtype=scores.dtype)
            flat = torch.tensor([x for i in ids for x in targets[i]], dtype=scores.dtype)
            target = teacher.index_put((row_of, col_of), flat).softmax(dim=1)
        loss = torch.nn.functional.cross_entropy(grid, target)
        return loss, int(batch["attention_mask"].sum())

    finished = common.fit(torch, model, settings, work, len(groups), batch_loss, steps)
    return common.save_trained(model, tokenizer, work) if finished else None


def teacher_scores(
    teacher: Path, groups: Sequence[Group], max_length: int, work: Path
) -> list[list[float]]:
    """The teacher's score of every pair of every group, as the reranker computes them (its
    int8 graph), cached in ``<work>/teacher-scores.json`` for a resumed run."""
    cache = work / TEACHER_SCORES_FILE
    if cache.is_file():
        cached = json.loads(cache.read_text(encoding="utf-8"))
        if [len(row) for row in cached] == [len(g.texts) for g in groups]:
            return cached
    scores = group_scores(pair_scorer(teacher, max_length), groups)
    rows = [[float(x) for x in row] for row in scores]
    work.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(rows), encoding="utf-8")
    return rows


def group_scores(
    score: Callable[[list[tuple[str, str]]], np.ndarray], groups: Sequence[Group]
) -> list[np.ndarray]:
    """``score`` of every group's pairs, in one call, cut back into one row a group."""
    scores = score([pair for g in groups for pair in g.pairs()])
    bounds = np.cumsum([len(g.texts) for g in groups])[:-1]
    return np.split(scores, bounds)


def pair_scorer(model_dir: Path, max_length: int) -> Callable[[list[tuple[str, str]]], np.ndarray]:
    """Scores as the ``cross-encoder`` reranker computes them with this model."""
    from feverous_es.runtime.cross_encoder import CrossEncoder

    encoder = CrossEncoder(model_dir, device="cpu", max_length=max_length)
    return lambda pairs: encoder.score(pairs) if pairs else np.zeros(0, dtype=np.float32)


def group_metrics(
    score: Callable[[list[tuple[str, str]]], np.ndarray], groups: Sequence[Group]
) -> dict[str, float]:
    """MRR and Hits@1 of the gold element among its group (ties count against it), and what
    random order would give."""
    if not groups:
        return {"groups": 0}
    ranks = [1 + int(np.sum(row[1:] >= row[0])) for row in group_scores(score, groups)]
    sizes = [len(g.texts) for g in groups]
    return {
        "groups": len(groups),
        "mean_size": round(float(np.mean(sizes)), 2),
        "mrr": round(float(np.mean([1 / r for r in ranks])), 4),
        "hits_at_1": round(float(np.mean([r == 1 for r in ranks])), 4),
        "chance_mrr": round(
            float(np.mean([sum(1 / k for k in range(1, n + 1)) / n for n in sizes])), 4
        ),
        "chance_hits_at_1": round(float(np.mean([1 / n for n in sizes])), 4),
    }


def pool_recall(
    score: Callable[[list[tuple[str, str]]], np.ndarray], pools: Sequence[Retrieved], kind: str
) -> dict[str, float]:
    """Of the claims' gold elements of ``kind`` that the candidate stage found, the share that
    the first ``RECALL_AT[kind]`` candidates of that kind hold: in retrieval order and reranked
    by the model. (The rest of the gold never reaches a ranker.)"""
    k = RECALL_AT[kind]
    gold_total = found = by_retrieval = by_model = 0
    pairs: list[tuple[str, str]] = []
    lists = []
    for pool in pools:
        gold = {e["id"] for e in pool.gold if kind_of(e["type"]) == kind}
        gold_total += len(gold)
        candidates = [c for c in pool.ranked if kind_of(c["type"]) == kind]
        hit = gold & {c["id"] for c in candidates}
        if not hit:
            continue
        found += len(hit)
        by_retrieval += len(hit & {c["id"] for c in candidates[:k]})
        lists.append((hit, candidates, len(pairs)))
        pairs += [(pool.claim, c["linearized"]) for c in candidates]
    scores = score(pairs)
    for hit, candidates, start in lists:
        order = np.argsort(-scores[start : start + len(candidates)], kind="stable")[:k]
        by_model += len(hit & {candidates[i]["id"] for i in order})
    return {
        "k": k,
        "gold_elements": gold_total,
        "in_pool": found,
        "recall_retrieval_order": round(by_retrieval / found, 4) if found else 0.0,
        "recall_model": round(by_model / found, 4) if found else 0.0,
    }


def run(options: RunOptions, progress: Progress = QUIET) -> dict[str, Any] | None:
    """Pools, groups, fine-tuning, export, held-out metrics and the card, for each kind;
    returns ``{kind: report}`` (None when ``progress.stop_after`` interrupted a training).
    Phases: ``candidates``, then ``training <kind>`` for each kind."""
    options.check()
    settings = options.settings
    if settings.teacher is not None:
        from feverous_es.export.dequantize import torch_from_int8

        rebuilt = torch_from_int8(settings.teacher, options.work / TEACHER_TORCH_DIR)
        settings = options.settings = replace(settings, base=rebuilt)
    check_base(settings.base)
    claims = read_gold_claims(options.claims, limit=options.limit, seed=settings.seed)
    pools = collect_retrieved(
        claims, options.index, options.work / CANDIDATES_FILE,
        store=options.store, device=options.device, on_progress=progress.counter("candidates"),
    )  # fmt: skip
    train_pools, held_pools = datasets.split(pools, settings.seed, options.holdout)
    reports: dict[str, Any] = {}
    for kind in options.kinds:
        groups = build_groups(
            train_pools, kind, negatives=settings.negatives, others=settings.others,
            seed=settings.seed,
        )  # fmt: skip
        held = build_groups(
            held_pools, kind, negatives=settings.negatives, others=settings.others,
            seed=settings.seed,
        )  # fmt: skip

        fitted = fit_and_export(kind, groups, held, options, progress)
        if fitted is None:
            return None
        out, exported, timing, score = fitted
        report: dict[str, Any] = {
            "kind": kind,
            **options.report(),
            "claims_with_gold": sum(
                any(kind_of(e["type"]) == kind for e in p.gold) for p in train_pools
            ),
            "gold_missing": sum(len(p.absent) for p in pools),
            "training": training_section(settings, groups, timing),
            "export": exported,
            "holdout_groups": group_metrics(score, held),
            "holdout_pool_recall": pool_recall(score, held_pools, kind),
            "out": str(out),
        }
        write_card(out, report)
        reports[kind] = report
    return reports


def fit_and_export(
    kind: str,
    groups: Sequence[Group],
    held: Sequence[Group],
    options: RunOptions,
    progress: Progress,
) -> tuple[Path, dict, dict[str, float], Callable[[list[tuple[str, str]]], np.ndarray]] | None:
    """Fine-tune on ``groups`` in ``<work>/<kind>`` (phase ``training <kind>``), export to
    ``<out>/<kind>`` (parity on held-out pairs); returns ``(out, export report, timing, the
    exported model's scorer)``, or None when ``progress.stop_after`` stopped the training
    first."""
    settings, work = options.settings, options.work / kind
    trained, timing = common.timed_training(
        partial(train, groups, settings, work), progress.steps(f"training {kind}")
    )
    if trained is None:
        return None
    probe = [pair for g in (held or groups)[:16] for pair in g.pairs()][:64]
    out = options.out / kind
    exported = export_int8_as_model(trained, out, work, probe, settings.max_length)
    return out, exported, timing, pair_scorer(out, settings.max_length)


def training_section(
    settings: TrainSettings, groups: Sequence[Group], timing: dict[str, float]
) -> dict[str, Any]:
    """A ranker report's ``training`` part: data, settings, steps and time."""
    return {
        "base_name": base_name(settings.base),
        "groups": len(groups),
        "hard_negatives": round(sum(g.hard for g in groups) / max(1, len(groups)), 3),
        "negatives": settings.negatives,
        "others": settings.others,
        **(
            {"teacher": str(settings.teacher), "layers": settings.layers}
            if settings.teacher
            else {}
        ),
        "epochs": settings.epochs,
        "max_length": settings.max_length,
        "batch_size": settings.batch_size,
        "learning_rate": settings.learning_rate,
        "seed": settings.seed,
        "steps": settings.total_steps(len(groups)),
        **timing,
    }
