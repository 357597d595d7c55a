"""A reader's grounding settings chosen on several kinds of source at once.

A claim is read against its source in windows (:mod:`feverous_es.verdict.windows`); three
settings decide its answer: the window's size (``window_words``), how many windows are read
(``max_windows``: the closest by shared words; ``None``: all) and the threshold on the best
window's P(SUPPORTS). Settings chosen on one set fit its sources (WiCE's web pages: two
windows of a thousand words; LFQA's answers need all of a few documents), so every setting is
scored on every set and the one with the highest *mean* balanced accuracy over the sets wins:
no one set decides.

Each pair's windows are read once per window size (:func:`score_windows`): every other setting
is arithmetic on those scores. The figures are two-fold: the threshold is chosen on one half of
every set's claims (jointly, by the mean over sets) and measured on the other half, both ways.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from feverous_es.plugins.interfaces import Label
from feverous_es.training.grounding import GroundingPair, balanced_accuracy
from feverous_es.verdict.entailment import EntailmentModel, evidence_premise
from feverous_es.verdict.windows import Source, by_overlap

WINDOW_SIZES = (80, 120, 200)  # words a window holds
KEEPS: tuple[int | None, ...] = (1, 2, 3, 4, None)  # windows read: the closest k, or all
CHUNK = 256  # premises read per call: a progress step
THRESHOLDS = np.round(np.arange(0.01, 1.0, 0.0025), 4)  # the thresholds tried
# The service's target: one call checking five claims against a 1,000-word source within 1 s
# on 2 cores. A setting whose reads would take longer is not chosen, however accurate.
BUDGET_SECONDS = 1.0
BUDGET_CLAIMS, BUDGET_WORDS = 5, 1000


@dataclass(frozen=True)
class ScoredWindows:
    """Every window's P(SUPPORTS) of each pair (source order), the windows in order of the
    words they share with the claim (most first; the earlier on a tie), and the seconds reading
    them took (None: not timed)."""

    scores: list[np.ndarray]
    by_overlap: list[np.ndarray]
    supported: np.ndarray
    seconds: float | None = None

    @property
    def single(self) -> np.ndarray:
        """Whether each pair's source is one window."""
        return np.array([len(s) == 1 for s in self.scores], dtype=bool)

    def best(self, keep: int | None) -> np.ndarray:
        """Each pair's best P(SUPPORTS) among its ``keep`` closest windows (None: all)."""
        return np.array([s[o[:keep]].max() for s, o in zip(self.scores, self.by_overlap,
                                                              strict=True)])  # fmt: skip


def score_windows(
    model: EntailmentModel,
    pairs: Sequence[GroundingPair],
    window_words: int,
    on_chunk: Callable[[int, int], None] = lambda done, total: None,
) -> ScoredWindows:
    """Read every window of every pair's source once (``on_chunk(done, total)``: premises
    read)."""
    started = time.perf_counter()
    claims, premises, counts, orders = [], [], [], []
    for pair in pairs:
        windows = Source.of([pair.source]).windows(window_words)
        orders.append(np.array(by_overlap(pair.claim, windows)))
        counts.append(len(windows))
        claims += [pair.claim] * len(windows)
        premises += [evidence_premise(w.texts()) for w in windows]
    supports = model.labels.index(Label.SUPPORTS)
    read = []
    for start in range(0, len(premises), CHUNK):
        rows = model.probabilities(claims[start : start + CHUNK], premises[start : start + CHUNK])
        read.append(rows[:, supports])
        on_chunk(min(start + CHUNK, len(premises)), len(premises))
    flat = np.concatenate(read) if read else np.zeros(0)
    scores = np.split(flat, np.cumsum(counts)[:-1]) if counts else []
    supported = np.array([p.supported for p in pairs])
    return ScoredWindows(list(scores), orders, supported, time.perf_counter() - started)


def seconds_per_window(by_set: Mapping[str, ScoredWindows]) -> float | None:
    """The reader's seconds a window over the sets read at one size (None: one was not
    timed)."""
    timed = [w.seconds for w in by_set.values()]
    if any(t is None for t in timed):
        return None
    windows = sum(len(x) for w in by_set.values() for x in w.scores)
    return sum(t for t in timed if t is not None) / max(windows, 1)


Sets = Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]]  # scores, supported, one window


def predicted(
    scores: np.ndarray, single: np.ndarray, thresholds: tuple[float, float]
) -> np.ndarray:
    """Supported or not at ``thresholds`` (sources of several windows, sources of one)."""
    return scores >= np.where(single, thresholds[1], thresholds[0])


def joint_threshold(
    sets: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]], split: bool = False
) -> tuple[tuple[float, float], float]:
    """The thresholds with the highest mean balanced accuracy over ``sets`` ((scores,
    supported, one-window source) each), and that mean: one for every source, or (``split``)
    one for sources of several windows and one for a source one window holds (its score is one
    reading, not the best of several), chosen in turn, twice."""

    def mean(thresholds: tuple[float, float]) -> float:
        return float(
            np.mean([balanced_accuracy(s, predicted(x, o, thresholds)) for x, s, o in sets])
        )

    means = [mean((t, t)) for t in THRESHOLDS]
    best = float(THRESHOLDS[int(np.argmax(means))])
    chosen = (best, best)
    for _ in range(2 if split else 0):
        single = [mean((chosen[0], t)) for t in THRESHOLDS]
        chosen = (chosen[0], float(THRESHOLDS[int(np.argmax(single))]))
        multi = [mean((t, chosen[1])) for t in THRESHOLDS]
        chosen = (float(THRESHOLDS[int(np.argmax(multi))]), chosen[1])
    return chosen, mean(chosen)


def two_fold(
    sets: Sets, per_claim: Mapping[str, int] | None = None, split: bool = False
) -> dict[str, float]:
    """Each set's balanced accuracy with the thresholds chosen jointly on the other half of
    every set (claims alternate between halves; ``per_claim``: a set's consecutive pairs of one
    claim, 1 unless given), averaged over both ways."""
    figures: dict[str, list[float]] = {name: [] for name in sets}
    each = per_claim or {}
    half = {n: (np.arange(len(x)) // each.get(n, 1)) % 2 for n, (x, _, _) in sets.items()}
    for chosen, measured in ((0, 1), (1, 0)):
        thresholds, _ = joint_threshold(
            [tuple(a[half[n] == chosen] for a in arrays) for n, arrays in sets.items()], split
        )
        for name, (x, s, o) in sets.items():
            on = half[name] == measured
            figures[name].append(balanced_accuracy(s[on], predicted(x[on], o[on], thresholds)))
    return {name: float(np.mean(values)) for name, values in figures.items()}


def budget_reads(window_words: int, keep: int | None) -> int:
    """The windows one claim reads in a BUDGET_WORDS-word source of 20-word sentences."""
    sentences = ["word " * 19 + "end." for _ in range(BUDGET_WORDS // 20)]
    windows = len(Source.of([" ".join(sentences)]).windows(window_words))
    return windows if keep is None else min(keep, windows)


def compare_settings(
    scored: Mapping[int, Mapping[str, ScoredWindows]],
    per_claim: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Every setting's figures (``scored``: by window size, each set's windows read;
    ``per_claim`` as :func:`two_fold` takes it): each set's two-fold balanced accuracy and
    their mean, the threshold chosen on all of every set (in-sample) and its mean; where the
    windows were timed, the seconds five claims against a 1,000-word source would take at the
    reader's seconds a window (``budget_seconds``). Best first: the settings within
    BUDGET_SECONDS by their mean, then the others."""
    rows = []
    for words, by_set in scored.items():
        per_window = seconds_per_window(by_set)
        for keep, split in itertools.product(KEEPS, (False, True)):
            sets = {name: (w.best(keep), w.supported, w.single) for name, w in by_set.items()}
            folds = two_fold(sets, per_claim, split)
            thresholds, in_sample = joint_threshold(list(sets.values()), split)
            cost = None
            if per_window is not None:
                cost = round(BUDGET_CLAIMS * budget_reads(words, keep) * per_window, 3)
            rows.append({
                "window_words": words, "max_windows": keep, "threshold": thresholds[0],
                "threshold_single": thresholds[1] if split else None,
                "two_fold": folds, "mean": float(np.mean(list(folds.values()))),
                "in_sample_mean": in_sample, "budget_seconds": cost,
            })  # fmt: skip

    # A set too small to hold both labels in each half has no two-fold figure (NaN): last.
    def rank(row: dict[str, Any]) -> tuple[bool, float]:
        over = row["budget_seconds"] is not None and row["budget_seconds"] > BUDGET_SECONDS
        return over, -np.nan_to_num(row["mean"], nan=-1.0)

    return sorted(rows, key=rank)


def stored_settings(chosen: Mapping[str, Any], data: Mapping[str, int]) -> dict[str, Any]:
    """The ``grounding.json`` of a chosen row of :func:`compare_settings` (the threshold chosen
    on every pair of ``data``: set name -> pairs)."""
    single = chosen.get("threshold_single")
    return {
        "threshold": round(chosen["threshold"], 4),
        **({"threshold_single": round(single, 4)} if single is not None else {}),
        "window_words": chosen["window_words"],
        "max_windows": chosen["max_windows"],
        "chosen_on": {
            "data": dict(data),
            "two_fold_balanced_accuracy": {k: round(v, 4) for k, v in chosen["two_fold"].items()},
            "mean": round(chosen["mean"], 4),
        },
    }


# A second reading of the sources one window holds (verdict.entailment.SecondReading): the
# second model's weight, and the range of the first reading's P(SUPPORTS) it reads again.
