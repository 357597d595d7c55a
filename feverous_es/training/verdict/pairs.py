"""The entailment verdict's training pairs
(:mod:`~feverous_es.training.verdict.entailment_data`) for a run, and which of them train the
model."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feverous_es.index.dump.wiki import WikiDB
from feverous_es.training import datasets
from feverous_es.training.verdict import contrastive
from feverous_es.training.verdict import entailment_data as data
from feverous_es.training.verdict.attributes import attribute_pairs
from feverous_es.training.verdict.class_evidence import class_claims, class_evidence_pairs
from feverous_es.training.verdict.evidence import collect_evidence, read_labelled_claims
from feverous_es.training.verdict.options import (
    CLASS_EVIDENCE_FILE,
    EVIDENCE_FILE,
    PAIRS_FILE,
    PAIRS_RECIPE_FILE,
    RunOptions,
)
from feverous_es.training.verdict.relations import relation_pairs
from feverous_es.verdict.windows import WINDOW_WORDS

WINDOW = "-window"  # a claim file's window pairs are its stem and this (entailment_data)
# Of the training claims, by claim id: the GPU queue's readers chose their epochs on these, so a
# model distilled from them leaves them out (and they can choose the cascade's threshold).
VALID_SHARE = 0.08
# A relation claim is said in this many wordings: true restatements not in the lead's words.
RELATION_WORDINGS = 3


def build_pairs(
    options: RunOptions, on_evidence: Callable[[int, int], None] | None = None
) -> list[data.Pair]:
    """Every pair of the run (:mod:`~feverous_es.training.verdict.entailment_data`), from
    ``<work>/pairs.jsonl.gz`` when an earlier run wrote it from the same recipe (a run with
    other pair options rebuilds them; the evidence cache stays)."""
    from feverous_es.index.backends import open_store

    cache = options.work / PAIRS_FILE
    recipe_file = options.work / PAIRS_RECIPE_FILE
    recipe = pair_recipe(options)
    if cache.is_file() and recipe_file.is_file():
        if json.loads(recipe_file.read_text(encoding="utf-8")) == recipe:
            return data.read_pairs(cache)
        recipe_file.unlink()  # stale: an interrupted rebuild must not pass for the old recipe
    seed = options.settings.seed
    folds = options.folds()
    split = FoldSplit(seed, options.holdout, *folds) if folds else data.Split(seed, options.holdout)
    never_held = data.Split(seed, 0.0)
    claims = read_labelled_claims(options.claims, limit=options.limit, seed=seed)
    extra = (
        read_labelled_claims(options.mix.train_claims, limit=options.limit, seed=seed)
        if options.mix.train_claims
        else []
    )
    tables = [c for c in [*claims, *extra] if c.table]
    # Table files: a seeded sample of claims read against retrieved evidence; others: all.
    retrieve = [c for c in claims if not c.table]
    for source in dict.fromkeys(c.source for c in claims if c.table):
        rows = [c for c in claims if c.source == source]
        sampled = datasets.sample(rows, options.mix.retrieved, seed, key=lambda c: (c.source, c.id))
        retrieve += sampled
    examples = collect_evidence(
        retrieve, options.index, options.work / EVIDENCE_FILE, store=options.store,
        reranker=options.retrieval.reranker, hops=options.retrieval.hops, device=options.device,
        on_progress=on_evidence,
    )  # fmt: skip
    split_sources = {Path(p).stem for p in options.claims}
    pairs: list[data.Pair] = []
    store = open_store(options.store, options.index)
    try:
        for claim, example in zip(retrieve, examples, strict=True):
            pairs += data.retrieved_pairs(
                claim, example.evidence_candidates(), claim.gold, store, split
            )
        table_cache: dict[str, Any] = {}
        for claim in tables:
            chosen = split if claim.source in split_sources else never_held
            if (pair := data.gold_table_pair(claim, store, chosen, table_cache)) is not None:
                pairs.append(pair)
    finally:
        store.close()
    for path in options.mix.pairs:
        pairs += data.nli_pairs(path)
    if options.mix.contrastive is not None:
        leads = contrastive.read_leads(WikiDB(options.mix.contrastive).rows())
        made = contrastive.contrastive_pairs(leads, options.mix.contrastive_pages, split)
        if options.mix.attributes:
            made += attribute_pairs(leads, split)
        if options.mix.relations:
            made += relation_pairs(leads, split, wordings=RELATION_WORDINGS)
        pairs += made
        if options.mix.windows:
            pairs += data.window_pairs(claims, options.mix.contrastive, split, WINDOW_WORDS)
        if options.mix.class_evidence:
            pairs += _retrieved_class_pairs(made, options, split, on_evidence)
    data.write_pairs(cache, pairs)
    recipe_file.write_text(json.dumps(recipe, indent=1), encoding="utf-8")
    return pairs


def _retrieved_class_pairs(
    made: Sequence[data.Pair],
    options: RunOptions,
    split: data.Split,
    on_evidence: Callable[[int, int], None] | None,
) -> list[data.Pair]:
    """The failure classes' training claims against the evidence the pipeline retrieves for
    them (:mod:`~feverous_es.training.verdict.class_evidence`; cached as the claim files'
    evidence is)."""
    from feverous_es.index.backends import open_store

    chosen = class_claims(made, options.mix.class_evidence, options.settings.seed)
    retrieved = collect_evidence(
        [claim for _, claim in chosen], options.index, options.work / CLASS_EVIDENCE_FILE,
        store=options.store, reranker=options.retrieval.reranker, hops=options.retrieval.hops,
        device=options.device, on_progress=on_evidence,
    )  # fmt: skip
    store = open_store(options.store, options.index)
    try:
        return class_evidence_pairs(chosen, retrieved, store, split)
    finally:
        store.close()


def pair_recipe(options: RunOptions) -> dict[str, Any]:
    """What the pairs are made from: the claims, their split and the pair mix (not the cap a
    source, applied when the pool is drawn)."""
    mix = options.mix
    return {
        "claims": [str(p) for p in options.claims], "holdout": options.holdout,
        "fold": options.fold,
        "limit": options.limit, "seed": options.settings.seed,
        "train_claims": [str(p) for p in mix.train_claims], "pairs": [str(p) for p in mix.pairs],
        "retrieved": mix.retrieved, "contrastive": str(mix.contrastive or ""),
        "contrastive_pages": mix.contrastive_pages, "attributes": mix.attributes,
        "windows": mix.windows, "relations": mix.relations,
        "class_evidence": mix.class_evidence,
    }  # fmt: skip


def training_pool(
    pairs: Sequence[data.Pair], options: RunOptions, *, validation: bool = False
) -> list[data.Pair]:
    """The pairs the model trains on: not held out, meant for training, capped per source.
    The claims the GPU queue's readers keep for validation (their window pairs too) are left
    out, since the cascade's threshold is chosen on them, unless ``validation``: the GPU job's
    pool, whose readers validate on them."""
    seed = options.settings.seed
    pool = [
        p for p in pairs
        if p.train and not p.held_out
        and (validation or not is_valid(seed, p.source.removesuffix(WINDOW), p.id))
    ]  # fmt: skip
    return data.capped(pool, options.mix.per_source, seed)


def fold_of(seed: int, source: str, claim_id: str, holdout: float, folds: int) -> int | None:
    """The cross-fitting fold (of ``folds``) a claim falls in: its place in the held-out share
    ``holdout`` cut in equal parts; None for a claim outside the held-out share."""
    position = datasets.hash_unit(seed, source, claim_id)
    return int(position / holdout * folds) if position < holdout else None


@dataclass(frozen=True)
class FoldSplit(data.Split):
    """``--fold F/K``: only fold ``fold`` of the held-out share is held out; the claims of the
    other folds train with the rest."""

    fold: int
    folds: int

    def held_out(self, source: str, claim_id: str) -> bool:
        return fold_of(self.seed, source, claim_id, self.holdout, self.folds) == self.fold


def is_valid(seed: int, source: str, claim_id: str) -> bool:
    """Whether a training claim is one the GPU queue's readers kept for validation."""
    return datasets.hash_unit(seed, source, claim_id, "valid") < VALID_SHARE
