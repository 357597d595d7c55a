"""The failure classes' claims read as the pipeline reads them.

A failure class's prepared pair (:mod:`~feverous_es.training.verdict.contrastive`, ``attributes``,
``relations``) reads its claim against the page's first two sentences and one donor's lead. The
pipeline reads the same claim against what it *retrieves*: the page's sentences among other
subjects' (a CPU retrain on the prepared pairs alone learned every class on its pairs and not
through the pipeline). Here a sample of each class's
training claims is retrieved as ``verify`` retrieves it and read as the verdict reads it
(:func:`~feverous_es.training.verdict.entailment_data.retrieved_pairs`: the routed premise, and the
evidence without the page's lead sentences as NOT ENOUGH INFO), reported as
``<class>-retrieved``, held out with the page as the prepared pair is.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from feverous_es.eval.claims import NOT_ENOUGH_INFO
from feverous_es.training.datasets import TrainingClaim
from feverous_es.training.retrieved import Retrieved
from feverous_es.training.verdict import entailment_data as data

RETRIEVED = "-retrieved"  # a class's pairs read against the pipeline's evidence: SOURCE + this
LEAD_SENTENCES = 2  # the page's sentences a prepared pair reads: its gold


def class_claims(
    pairs: Sequence[data.Pair], per_class: int, seed: int
) -> list[tuple[data.Pair, TrainingClaim]]:
    """At most ``per_class`` training pairs of each failure class (a seeded sample; none held
    out, none whose premise is another subject's: it has no page to retrieve), each with the
    claim to retrieve for (its gold: the page's lead sentences)."""
    by_class: dict[str, list[data.Pair]] = {}
    for pair in pairs:
        if not pair.held_out and pair.label != NOT_ENOUGH_INFO:
            by_class.setdefault(pair.source, []).append(pair)
    chosen = []
    for source, members in sorted(by_class.items()):
        rng = random.Random(f"{seed}\0{source}")
        for pair in rng.sample(members, min(per_class, len(members))):
            # A page has several claims of one class (a relation in three wordings): the id
            # names the claim too, so each is retrieved and cached on its own.
            digest = hashlib.sha256(pair.claim.encode()).hexdigest()[:10]
            gold = tuple(f"{pair.id}_sentence_{n}" for n in range(LEAD_SENTENCES))
            claim = TrainingClaim(pair.source, f"{pair.id}#{digest}", pair.claim, pair.label,
                                  gold=gold)  # fmt: skip
            chosen.append((pair, claim))
    return chosen


def class_evidence_pairs(
    chosen: Sequence[tuple[data.Pair, TrainingClaim]],
    retrieved: Sequence[Retrieved],
    store: Any,
    split: data.Split,
) -> list[data.Pair]:
    """Each chosen claim's pairs against the evidence the pipeline ``retrieved`` for it, with
    the prepared pair's held-out status."""
    pairs = []
    for (pair, claim), example in zip(chosen, retrieved, strict=True):
        for made in data.retrieved_pairs(claim, example.evidence_candidates(), claim.gold, store,
                                         split):  # fmt: skip
            pairs.append(replace(made, source=pair.source + RETRIEVED, id=claim.id,
                                 held_out=pair.held_out))  # fmt: skip
    return pairs
