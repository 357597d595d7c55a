"""The next-hop generator's training data: claims with gold evidence, what the pipeline
retrieved for them (cached), and the (input, target) pairs made from both."""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feverous_es.eval.claims import NOT_ENOUGH_INFO, REFUTES, ClaimRecord
from feverous_es.index.element_ids import element_to_triple
from feverous_es.index.elements import ElementType
from feverous_es.plugins.evidence_text import seq2seq_input
from feverous_es.training import datasets
from feverous_es.training.datasets import TrainingClaim, hash_unit
from feverous_es.training.retrieved import Retrieved, record_candidate

RETRIEVED_FILE = "retrieved.jsonl"


PAIRS_FILE = "pairs.jsonl"


NONE = "none"


KINDS = ("missing-page", "hidden-page", "left-out", "complete")


PAGE_KINDS = ("missing-page", "hidden-page")


KEPT_CANDIDATES = 30  # the non-gold candidates a claim's distractors are drawn from


_EVIDENCE_TYPES = {str(t) for t in ElementType}


SPACES = re.compile(r"\s+")


def label_word(label: str | None) -> str:
    """The target's first word: ``refutes`` for REFUTES, else ``supports`` (NOT ENOUGH INFO
    too: the chain so far contradicts nothing)."""
    return "refutes" if label == REFUTES else "supports"


def read_hop_claims(
    paths: Sequence[Path], *, limit: int | None = None, seed: int = 13
) -> list[TrainingClaim]:
    """The claims with element-level gold evidence (any label) in the files; with ``limit``, a
    seeded sample of that many per file. ``gold``: the first gold set's elements, NFD, in gold
    order; ids of non-elements (titles, sections) are left out."""

    def make(source: str, record: ClaimRecord) -> TrainingClaim | None:
        group = record.evidence[0] if record.evidence else ()
        gold = dict.fromkeys(
            unicodedata.normalize("NFD", e)
            for e in group
            if element_to_triple(e)[1] in _EVIDENCE_TYPES
        )
        if not gold:
            return None
        label = record.label or NOT_ENOUGH_INFO
        return TrainingClaim(source, str(record.id), record.claim, label, gold=tuple(gold))

    return datasets.sampled_claims(
        paths, make, limit=limit, seed=seed, wanted="claims with element-level gold evidence"
    )


@dataclass(frozen=True)
class Pair:
    """One training pair. ``given``: the ids of the evidence in ``input``; ``wanted``: the id of
    the target element (None for ``none``); ``hidden``: the pages the target comes from."""

    source: str
    id: str
    kind: str  # one of KINDS
    input: str
    target: str
    given: tuple[str, ...]
    wanted: str | None = None
    hidden: tuple[str, ...] = ()


def build_pairs(item: Retrieved, seed: int, distractors: int = 0) -> list[Pair]:
    """The training pairs of one claim (see the module's docstring); [] without gold."""
    gold = item.gold
    if not gold:
        return []
    label = label_word(item.label)
    gold_pages = list(dict.fromkeys(e["page"] for e in gold))
    rank = {page: i for i, page in enumerate(item.pages)}
    draw = hash_unit(seed, item.source, item.id, "hop-pairs")
    others = item.others()[:KEPT_CANDIDATES]

    def pair(kind: str, given: list[dict[str, Any]], wanted: dict[str, Any] | None) -> Pair:
        shown = {e["page"] for e in given}
        hidden = {e["page"] for e in gold if e["page"] not in shown} if kind in PAGE_KINDS else ()
        # Distractors: the best non-gold candidates of pages not hidden, after the gold.
        extra = [e for e in others if e["page"] not in hidden][:distractors]
        evidence = [*given, *extra]
        text = seq2seq_input(item.claim, [record_candidate(e) for e in evidence])
        target = f"{label} {wanted['linearized'] if wanted else NONE}"
        return Pair(
            item.source,
            item.id,
            kind,
            text,
            target,
            tuple(e["id"] for e in evidence),
            wanted["id"] if wanted else None,
            tuple(sorted(hidden)),
        )

    missing = [page for page in gold_pages if page not in rank]
    if missing or len(gold_pages) > 1:
        kind = "missing-page" if missing else "hidden-page"
        hidden = set(missing) or {max(gold_pages, key=rank.__getitem__)}
        given = [e for e in gold if e["page"] not in hidden]
        wanted = next(e for e in gold if e["page"] in hidden)
        pairs = [pair(kind, given, wanted)]
        if not missing and draw >= 0.5:
            pairs.append(pair("complete", gold, None))
        return pairs
    if len(gold) > 1 and (draw < 0.5 or item.label == NOT_ENOUGH_INFO):
        left = random.Random(f"{seed}\0{item.source}\0{item.id}").randrange(len(gold))
        return [pair("left-out", [e for i, e in enumerate(gold) if i != left], gold[left])]
    return [pair("complete", gold, None)]


def all_pairs(items: Sequence[Retrieved], seed: int, distractors: int) -> list[Pair]:
    return [p for item in items for p in build_pairs(item, seed, distractors)]
