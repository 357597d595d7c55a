"""What a claim shares with its evidence sentences, as numbers a classifier reads.

A refuted FEVEROUS claim is most often a true sentence with one thing changed: a number, a
date, a name, a negation. These features measure what of the claim the evidence does not hold:
its content words, numbers, years, capitalised names and word pairs, over all evidence sentences
and in the sentence that holds most of them. The sentence-claim verdict
(:mod:`feverous_es.verdict.feature_model`) feeds them to a gradient-boosted classifier;
training and inference call the same :func:`claim_features`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from feverous_es.text import capitalised_names, content_words, number_value, tokens
from feverous_es.verdict.table_facts import CUES

FEATURE_NAMES: tuple[str, ...] = (
    "words_in_evidence",
    "words_in_best_sentence",
    "words_missing",
    "words_missing_from_best_two",
    "pairs_in_evidence",
    "pairs_in_best_sentence",
    "claim_numbers",
    "numbers_missing",
    "years_missing",
    "names",
    "names_missing_share",
    "negation",
    "negation_not_in_evidence",
    "claim_tokens",
    "sentences",
    "best_sentence_words",
    "second_sentence_words",
)


def _pairs(words: Sequence[str]) -> set[tuple[str, str]]:
    return set(itertools.pairwise(words))


def claim_features(claim: str, sentences: Sequence[str]) -> np.ndarray:
    """The claim-against-sentences features, in :data:`FEATURE_NAMES` order (float32)."""
    words = tokens(claim)
    content = content_words(claim)
    per_sentence = [tokens(s) for s in sentences]
    sets = [set(s) for s in per_sentence]
    everything = set().union(*sets) if sets else set()
    shared = [*sorted((len(content & s) for s in sets), reverse=True), 0, 0]
    best = max(range(len(sets)), key=lambda i: len(content & sets[i]), default=None)
    ranked = sorted(sets, key=lambda s: -len(content & s))
    best_two = set().union(*ranked[:2]) if ranked else set()
    claim_pairs = _pairs(words)
    sentence_pairs = [_pairs(s) for s in per_sentence]
    all_pairs = set().union(*sentence_pairs) if sentence_pairs else set()
    numbers = {w for w in words if number_value(w) is not None}
    years = {w for w in numbers if len(w) == 4 and w.isdigit()}
    names = capitalised_names(claim)
    negation = set(words) & CUES["negation"]
    n_content = max(1, len(content))
    values = {
        "words_in_evidence": len(content & everything) / n_content,
        "words_in_best_sentence": shared[0] / n_content,
        "words_missing": len(content - everything),
        "words_missing_from_best_two": len(content - best_two),
        "pairs_in_evidence": len(claim_pairs & all_pairs) / max(1, len(claim_pairs)),
        "pairs_in_best_sentence": (
            len(claim_pairs & sentence_pairs[best]) / max(1, len(claim_pairs))
            if best is not None
            else 0.0
        ),
        "claim_numbers": len(numbers),
        "numbers_missing": len(numbers - everything),
        "years_missing": len(years - everything),
        "names": len(names),
        "names_missing_share": len(names - everything) / max(1, len(names)),
        "negation": float(bool(negation)),
        "negation_not_in_evidence": len(negation - everything),
        "claim_tokens": len(words),
        "sentences": len(sentences),
        "best_sentence_words": shared[0],
        "second_sentence_words": shared[1],
    }
    return np.array([values[name] for name in FEATURE_NAMES], dtype=np.float32)
