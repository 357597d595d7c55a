"""Fine-tuning the evidence rankers (Malon 2021, §3), and their ONNX export.

``feverous-es train rerank`` trains the two cross-encoders the ``cross-encoder`` reranker runs:
one for cells and header cells (its ``cell_model``), one for every other element — sentences,
list items, table captions (its ``model``); the split is the reranker's own
(:data:`feverous_es.verify.candidates.TABLE_CELL_TYPES`). Papelo trained captions with the sentences
too. Three steps, each resumable:

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
3. **Export** to int8 ONNX (:func:`feverous_es.training.export.export`, parity against torch),
   ``manifest.json``, held-out metrics and a model card in ``<out>/<kind>``.

Output layout: ``<out>/cells`` and ``<out>/sentences`` (``--kind`` picks one or both), to be
named in the pipeline configuration as ``options.reranker.cell_model`` and ``model``.

torch, transformers and optimum are imported inside functions: the runtime never needs them.
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from feverous_es.errors import TrainError
from feverous_es.eval.claims import ClaimRecord, element_to_triple
from feverous_es.index.elements import TABLE_CELL_TYPES, ElementType
from feverous_es.onnx_session import MANIFEST_FILE, write_manifest
from feverous_es.training import common
from feverous_es.training.common import base_name, check_base, import_torch
from feverous_es.training.export import export
from feverous_es.verify.selection import CELL_BUDGET, SENTENCE_BUDGET

KINDS = ("cells", "sentences")
CANDIDATES_FILE = "candidates.jsonl"
LABELS = ("relevance",)  # one output logit; config.json's id2label
# The first K of a kind the evidence budget keeps (5 non-cells, 25 cell-type elements).
RECALL_AT = {"cells": CELL_BUDGET, "sentences": SENTENCE_BUDGET}
_EVIDENCE_TYPES = {str(t) for t in ElementType}


def kind_of(element_type: str | ElementType) -> str:
    """``cells`` for the elements the reranker scores with its ``cell_model``, else
    ``sentences``."""
    return "cells" if ElementType(element_type) in TABLE_CELL_TYPES else "sentences"


def index_id(element_id: str) -> str:
    """A claim file's element id as the index spells it (the page title NFD)."""
    return unicodedata.normalize("NFD", element_id)


# ----------------------------------------------------------------------------- claims


@dataclass(frozen=True)
class GoldClaim:
    source: str  # the claim file's stem
    id: str
    claim: str
    gold: tuple[str, ...]  # every element of every gold evidence set, first-seen order


def read_gold_claims(
    paths: Sequence[Path], *, limit: int | None = None, seed: int = 13
) -> list[GoldClaim]:
    """The claims with gold evidence (any label) in the files; with ``limit``, a seeded sample
    of that many per file. Gold ids of non-elements (titles, sections) are left out."""

    def make(source: str, record: ClaimRecord) -> GoldClaim | None:
        gold = dict.fromkeys(
            index_id(e)
            for group in record.evidence
            for e in group
            if element_to_triple(e)[1] in _EVIDENCE_TYPES
        )
        return GoldClaim(source, str(record.id), record.claim, tuple(gold)) if gold else None

    return common.sampled_claims(
        paths, make, limit=limit, seed=seed, wanted="claims with gold evidence"
    )


# ----------------------------------------------------------------------------- candidate pools


@dataclass
class Pool:
    """One claim's gold elements found in the index and its candidate pool, best first.
    Elements are ``{"id", "type", "linearized"}`` (candidates also ``"score"``)."""

    source: str
    id: str
    claim: str
    gold: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # gold ids the index does not hold
    candidates: list[dict[str, Any]] = field(default_factory=list)

    def gold_ids(self) -> set[str]:
        return {e["id"] for e in self.gold} | set(self.missing)


def _element(element: Any, score: float | None = None) -> dict[str, Any]:
    record = {"id": element.id, "type": str(element.type), "linearized": element.linearized}
    if score is not None:
        record["score"] = round(float(score), 5)
    return record


def read_pools(path: Path) -> dict[tuple[str, str], Pool]:
    return common.read_records(path, Pool)


def collect_pools(
    claims: Sequence[GoldClaim],
    index: Path,
    cache: Path,
    *,
    store: str = "embedded",
    device: str = "cpu",
    batch_size: int = 16,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Pool]:
    """Each claim's pool, from ``cache`` when it holds it, else from the pipeline's page and
    candidate stages (ordered by the ``retrieval`` reranker) and appended to ``cache``."""

    def make(pipeline: Any, chunk: Sequence[GoldClaim]) -> list[Pool]:
        wanted = [i for c in chunk for i in c.gold]
        found = {e.id: e for e in pipeline.context.store.get_elements(wanted)}
        ranked = pipeline.retrieve_many([c.claim for c in chunk])
        return [
            Pool(
                claim.source,
                claim.id,
                claim.claim,
                [_element(found[i]) for i in claim.gold if i in found],
                [i for i in claim.gold if i not in found],
                [_element(c.element, c.score) for c in candidates],
            )
            for claim, candidates in zip(chunk, (r.ranked for r in ranked), strict=True)
        ]

    def pipeline() -> Any:
        return common.retrieval_pipeline(index, store=store, hops=0, device=device)

    return common.collect_cached(
        claims, cache, Pool, pipeline, make, batch_size=batch_size, on_progress=on_progress
    )


# ----------------------------------------------------------------------------- groups


@dataclass(frozen=True)
class Group:
    """One training example: the gold element first, then its negatives."""

    source: str
    claim_id: str
    claim: str
    ids: tuple[str, ...]
    texts: tuple[str, ...]
    hard: int  # how many of the negatives are hard (from the candidate pool); the rest are
    # gold elements of other claims

    def pairs(self) -> list[tuple[str, str]]:
        return [(self.claim, text) for text in self.texts]


def build_groups(
    pools: Sequence[Pool], kind: str, *, negatives: int = 4, others: int = 2, seed: int = 13
) -> list[Group]:
    """A group per gold element of ``kind`` of each pool: the element, the ``negatives`` best
    non-gold candidates of that kind, and ``others`` gold elements of ``kind`` of other pools'
    claims (more when the candidates fall short), never an element that is gold for the claim.
    Deterministic in ``seed``; a gold element with no negative at all makes no group."""
    if kind not in KINDS:
        raise TrainError(f"--kind must be one of {', '.join(KINDS)}, not {kind!r}")
    shared: dict[str, dict[str, Any]] = {}  # every gold element of this kind, by id
    for pool in pools:
        for element in pool.gold:
            if kind_of(element["type"]) == kind:
                shared.setdefault(element["id"], element)
    other_ids = list(shared)
    groups = []
    for pool in pools:
        gold_ids = pool.gold_ids()
        hard = [
            c for c in pool.candidates if kind_of(c["type"]) == kind and c["id"] not in gold_ids
        ][:negatives]
        taken = gold_ids | {c["id"] for c in hard}
        for element in pool.gold:
            if kind_of(element["type"]) != kind:
                continue
            rng = random.Random(f"{seed}\0{kind}\0{pool.source}\0{pool.id}\0{element['id']}")
            wanted = others + negatives - len(hard)
            drawn = draw_distinct(rng, other_ids, taken, wanted)
            members = [element, *hard, *(shared[i] for i in drawn)]
            if len(members) < 2:
                continue
            groups.append(
                Group(
                    pool.source,
                    pool.id,
                    pool.claim,
                    tuple(m["id"] for m in members),
                    tuple(m["linearized"] for m in members),
                    len(hard),
                )
            )
    return groups


def draw_distinct(rng: random.Random, ids: Sequence[str], exclude: set[str], k: int) -> list[str]:
    """Up to ``k`` distinct ids of ``ids`` not in ``exclude``, at random."""
    chosen: list[str] = []
    if k <= 0:
        return chosen
    tries = 0
    while len(chosen) < k and tries < 8 * k:  # rejection sampling: the pool is large
        tries += 1
        pick = ids[rng.randrange(len(ids))] if ids else None
        if pick is not None and pick not in exclude and pick not in chosen:
            chosen.append(pick)
    if len(chosen) < k:  # a small pool: take what is left, in a seeded order
        rest = [i for i in ids if i not in exclude and i not in chosen]
        rng.shuffle(rest)
        chosen += rest[: k - len(chosen)]
    return chosen


# ----------------------------------------------------------------------------- training


@dataclass
class TrainSettings(common.TrainSettings):
    """``batch_size`` counts groups (7 pairs each)."""

    batch_size: int = 8
    learning_rate: float = 3e-5
    negatives: int = 4  # hard negatives a group
    others: int = 2  # other claims' gold elements a group

    FINGERPRINT: ClassVar[tuple[str, ...]] = (
        *common.TrainSettings.FINGERPRINT,
        "negatives",
        "others",
    )


def train(
    groups: Sequence[Group],
    settings: TrainSettings,
    work: Path,
    *,
    on_progress: Callable[[int, int, float], None] | None = None,
    stop_after: int | None = None,
) -> Path | None:
    """Fine-tune ``settings.base`` on the groups into ``<work>/trained`` and return it (None when
    ``stop_after`` stopped it first); resumable (:func:`~feverous_es.training.common.fit`)."""
    torch = import_torch()
    check_base(settings.base)
    if not groups:
        raise TrainError("no training groups (no gold element of this kind in the training claims)")
    tokenizer, model = common.load_model(torch, settings, LABELS)
    encoded = [common.encode_pairs(tokenizer, g.pairs(), settings.max_length) for g in groups]
    pad_id = tokenizer.pad_token_id or 0

    def batch_loss(ids: list[int]) -> tuple[Any, int]:
        rows = [pair for i in ids for pair in encoded[i]]
        batch = common.collate(torch, rows, pad_id)
        scores = model(**batch).logits[:, 0]
        width = max(len(encoded[i]) for i in ids)
        row_of = torch.tensor([r for r, i in enumerate(ids) for _ in encoded[i]])
        col_of = torch.tensor([c for i in ids for c in range(len(encoded[i]))])
        # A short group's empty places score -1e4: out of the softmax (eq. 1 over its members).
        grid = torch.full((len(ids), width), -1e4, dtype=scores.dtype)
        grid = grid.index_put((row_of, col_of), scores)
        target = torch.zeros(len(ids), dtype=torch.long)  # the gold element comes first
        loss = torch.nn.functional.cross_entropy(grid, target)
        return loss, int(batch["attention_mask"].sum())

    finished = common.fit(
        torch, model, settings, work, len(groups), batch_loss,
        on_progress=on_progress, stop_after=stop_after,
    )  # fmt: skip
    return common.save_trained(model, tokenizer, work) if finished else None


# ----------------------------------------------------------------------------- metrics


def pair_scorer(model_dir: Path, max_length: int) -> Callable[[list[tuple[str, str]]], np.ndarray]:
    """Scores as the ``cross-encoder`` reranker computes them with this model."""
    from feverous_es.rerank.cross_encoder import CrossEncoder

    encoder = CrossEncoder(model_dir, device="cpu", max_length=max_length)
    return lambda pairs: encoder.score(pairs) if pairs else np.zeros(0, dtype=np.float32)


def group_metrics(
    score: Callable[[list[tuple[str, str]]], np.ndarray], groups: Sequence[Group]
) -> dict[str, float]:
    """MRR and Hits@1 of the gold element among its group (ties count against it), and what
    random order would give."""
    if not groups:
        return {"groups": 0}
    scores = score([pair for g in groups for pair in g.pairs()])
    ranks, start = [], 0
    for g in groups:
        row = scores[start : start + len(g.texts)]
        start += len(g.texts)
        ranks.append(1 + int(np.sum(row[1:] >= row[0])))
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
    score: Callable[[list[tuple[str, str]]], np.ndarray], pools: Sequence[Pool], kind: str
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
        candidates = [c for c in pool.candidates if kind_of(c["type"]) == kind]
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


# ----------------------------------------------------------------------------- the card


def command_section(report: dict[str, Any]) -> str:
    """A ranker card's command and training run."""
    training = report["training"]
    return f"""## Command

```
{report["command"]}
```

Base model `{training["base_name"]}`; {training["epochs"]} epoch(s), max_length
{training["max_length"]}, batch {training["batch_size"]} groups, learning rate
{training["learning_rate"]}, {training["steps"]} steps in {training["seconds"]:.0f} s
({training["tokens_per_second"]:.0f} tokens/s)."""


def write_card(out: Path, report: dict[str, Any]) -> None:
    """``README.md`` and ``training.json`` beside the model."""
    kind = report["kind"]
    training = report["training"]
    held = report["holdout_groups"]
    recall = report["holdout_pool_recall"]
    parity = report["export"]["parity"]
    megabytes = report["export"]["bytes"] / 1e6
    files = ", ".join(f"`{s}`" for s in report["claims"])
    elements = (
        "table cells and header cells"
        if kind == "cells"
        else "sentences, list items and table captions"
    )
    option = "cell_model" if kind == "cells" else "model"
    if held.get("groups"):
        group_rows = (
            f"| this model | {held['mrr']:.3f} | {held['hits_at_1']:.1%} |\n"
            f"| random order | {held['chance_mrr']:.3f} | {held['chance_hits_at_1']:.1%} |"
        )
    else:
        group_rows = "| (no held-out groups) | | |"
    limit = report["claims_per_file"]
    sampled = f"a sample of {limit} claims a file" if limit else "every claim with gold evidence"
    size = 1 + training["negatives"] + training["others"]
    text = f"""# feverous-es evidence ranker: {kind}

A cross-encoder that scores (claim, element) pairs for the `cross-encoder` reranker's
`{option}` option: {elements}, each as its Papelo linearization (the index's
`linearized` field, the text the reranker passes). One output logit; dynamic int8 ONNX,
`model.onnx` ({megabytes:.1f} MB). Use it with

```toml
[plugins]
reranker = "cross-encoder"

[options.reranker]
{option} = "{out}"
max_length = {training["max_length"]}  # as trained (the reranker's default is 512)
```

## Data

Claims: {files}, {sampled} (seed {training["seed"]}); a seeded {report["holdout"]:.0%} of
them, split by claim id, is held out of training. Training claims with gold {kind}:
{report["claims_with_gold"]}; gold elements missing from the index (page not indexed):
{report["gold_missing"]}.

Seed 000 §3's groups of up to {size} pairs: each gold element, the {training["negatives"]}
best-ranked non-gold candidates of its kind from the pipeline's page and candidate stages
(retrieval order), and {training["others"]} gold elements of other claims (which also fill a
group whose pool has too few hard negatives); the loss is the cross entropy over the group's
scores with the gold element as the right class. {training["groups"]} training groups,
{training["hard_negatives"]:.2f} hard negatives each on average.

{command_section(report)}

## Metrics (held-out claims, this int8 model, scored as the reranker scores)

The gold element among its group ({held.get("groups", 0)} groups, mean size
{held.get("mean_size", 0)}; ties count against the gold):

| ranking | MRR | Hits@1 |
|---|---|---|
{group_rows}

Candidate pools: of {recall["gold_elements"]} held-out gold {kind}, {recall["in_pool"]} are
among the candidates. The first {recall["k"]} candidates of the kind hold
{recall["recall_retrieval_order"]:.1%} of those in retrieval order and
{recall["recall_model"]:.1%} reranked by this model.

Parity against the torch model on {parity["pairs"]} held-out pairs: fp32 ONNX max |Δlogit|
{parity["fp32"]["max_abs_diff"]:.2e}; int8 max |Δlogit| {parity["int8"]["max_abs_diff"]:.3f}.

{common.attribution(training["base_name"])}"""
    common.save_card(out, text, report)


# ----------------------------------------------------------------------------- the command


@dataclass
class RunOptions(common.RunOptions):
    settings: TrainSettings
    kinds: tuple[str, ...] = KINDS


def run(
    options: RunOptions,
    *,
    on_pools: Callable[[int, int], None] | None = None,
    on_step: Callable[[str, int, int, float], None] | None = None,
    stop_after: int | None = None,
) -> dict[str, Any] | None:
    """Pools, groups, fine-tuning, export, held-out metrics and the card, for each kind;
    returns ``{kind: report}`` (None when ``stop_after`` interrupted a training).
    ``on_step(kind, step, total, tokens_per_second)``."""
    options.check()
    unknown = [k for k in options.kinds if k not in KINDS]
    if unknown or not options.kinds:
        raise TrainError(f"--kind must be one of {', '.join(KINDS)}, not {unknown}")
    settings = options.settings
    if not 8 <= settings.max_length <= 512:
        raise TrainError(f"--max-length must be between 8 and 512, not {settings.max_length}")
    check_base(settings.base)
    claims = read_gold_claims(options.claims, limit=options.limit, seed=settings.seed)
    pools = collect_pools(
        claims, options.index, options.work / CANDIDATES_FILE,
        store=options.store, device=options.device, on_progress=on_pools,
    )  # fmt: skip
    train_pools, held_pools = common.split(pools, settings.seed, options.holdout)
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

        fitted = fit_and_export(kind, groups, held, options, on_step, stop_after)
        if fitted is None:
            return None
        out, exported, timing, score = fitted
        report: dict[str, Any] = {
            "kind": kind,
            **options.report(),
            "claims_with_gold": sum(
                any(kind_of(e["type"]) == kind for e in p.gold) for p in train_pools
            ),
            "gold_missing": sum(len(p.missing) for p in pools),
            "training": training_section(settings, groups, timing),
            "export": exported,
            "holdout_groups": group_metrics(score, held),
            "holdout_pool_recall": pool_recall(score, held_pools, kind),
            "out": str(out),
        }
        write_card(out, report)
        write_ranker_manifest(out, f"feverous-es {kind} ranker", settings)
        reports[kind] = report
    return reports


def fit_and_export(
    kind: str,
    groups: Sequence[Group],
    held: Sequence[Group],
    options: RunOptions,
    on_step: Callable[[str, int, int, float], None] | None,
    stop_after: int | None,
) -> tuple[Path, dict, dict[str, float], Callable[[list[tuple[str, str]]], np.ndarray]] | None:
    """Fine-tune on ``groups`` in ``<work>/<kind>``, export to ``<out>/<kind>`` (parity on
    held-out pairs); returns ``(out, export report, timing, the exported model's scorer)``, or
    None when ``stop_after`` stopped the training first."""
    settings, work = options.settings, options.work / kind
    trained, timing = common.timed_training(
        partial(train, groups, settings, work, stop_after=stop_after),
        partial(on_step, kind) if on_step else None,
    )
    if trained is None:
        return None
    probe = [pair for g in (held or groups)[:16] for pair in g.pairs()][:64]
    out = options.out / kind
    exported = export(trained, out, work, probe, settings.max_length)
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
        "epochs": settings.epochs,
        "max_length": settings.max_length,
        "batch_size": settings.batch_size,
        "learning_rate": settings.learning_rate,
        "seed": settings.seed,
        "steps": settings.total_steps(len(groups)),
        **timing,
    }


def write_ranker_manifest(out: Path, model: str, settings: TrainSettings) -> None:
    """``manifest.json`` over every file the export and the card left in ``out``."""
    files = sorted(p.name for p in out.iterdir() if p.is_file() and p.name != MANIFEST_FILE)
    write_manifest(out, files, model=model, base=base_name(settings.base))
