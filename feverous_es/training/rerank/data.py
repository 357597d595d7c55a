"""The evidence rankers' training data: claims with gold evidence, the candidate pools the
pipeline retrieved for them (cached), and the groups (gold + hard negatives) drawn from both."""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feverous_es.errors import TrainError
from feverous_es.eval.claims import ClaimRecord
from feverous_es.index.element_ids import element_to_triple
from feverous_es.index.elements import TABLE_CELL_TYPES, ElementType
from feverous_es.training import datasets
from feverous_es.training.datasets import TrainingClaim
from feverous_es.training.retrieved import Retrieved

KINDS = ("cells", "sentences")


CANDIDATES_FILE = "candidates.jsonl"


_EVIDENCE_TYPES = {str(t) for t in ElementType}


def kind_of(element_type: str | ElementType) -> str:
    """``cells`` for the elements the reranker scores with its ``cell_model``, else
    ``sentences``."""
    return "cells" if ElementType(element_type) in TABLE_CELL_TYPES else "sentences"


def index_id(element_id: str) -> str:
    """A claim file's element id as the index spells it (the page title NFD)."""
    return unicodedata.normalize("NFD", element_id)


def read_gold_claims(
    paths: Sequence[Path], *, limit: int | None = None, seed: int = 13
) -> list[TrainingClaim]:
    """The claims with gold evidence (any label) in the files; with ``limit``, a seeded sample
    of that many per file. ``gold``: every element of every gold set, first-seen order, as the
    index spells it; ids of non-elements (titles, sections) are left out."""

    def make(source: str, record: ClaimRecord) -> TrainingClaim | None:
        gold = dict.fromkeys(
            index_id(e)
            for group in record.evidence
            for e in group
            if element_to_triple(e)[1] in _EVIDENCE_TYPES
        )
        if not gold:
            return None
        return TrainingClaim(
            source, str(record.id), record.claim, record.label or "", gold=tuple(gold)
        )

    return datasets.sampled_claims(
        paths, make, limit=limit, seed=seed, wanted="claims with gold evidence"
    )


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
    pools: Sequence[Retrieved], kind: str, *, negatives: int = 4, others: int = 2, seed: int = 13
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
        hard = [c for c in pool.others() if kind_of(c["type"]) == kind][:negatives]
        taken = pool.gold_ids() | {c["id"] for c in hard}
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
