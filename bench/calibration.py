"""The reader's lean, corrected where it is measured: Platt scaling of its SUPPORTS share on the
claims it decides (those routed to sentences), chosen two-fold on held-out dev claims.

A claim's reading (:func:`bench.nei.features`) holds ``supports``, the route's SUPPORTS share of
SUPPORTS + REFUTES as read (the verdict's ``reader_scale`` 1, ``reader_shift`` 0). On the
SUPPORTS / REFUTES claims routed to sentences, a logistic regression of the gold label on
``logit(supports)`` gives the verdict's ``reader_scale`` and ``reader_shift``. Fitted on one
half of the claims and applied to the other, both ways, every claim gets an out-of-fold label:
its paired difference from the label as read (per file, with the 95 % interval), each class's
recall, and the calibration error (ECE, ten equal bins) before and after, are what the choice
is judged by. A scale alone (``reader_shift`` 0) moves no decision, only the probabilities a
user reads; the shift moves the decision: it ships when, out of fold, it reads all these claims
better with an interval that clears zero, costs no file over a point, and TabFact nothing
(:func:`adopted`, as docs/design.md adopts a change to what the pipeline decides); else the
scale alone ships. Either is fitted on all the claims.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.paired import paired_difference

SUPPORTS, REFUTES = "SUPPORTS", "REFUTES"
AS_READ = {"reader_scale": 1.0, "reader_shift": 0.0}
BINS = 10
SEED = 13
# SUPPORTS needing an as-read share over each cut (0.5: as read; 0.69 is the fitted shift's, which
# the guard refused): what each buys and costs, in sample, beside the guard's figures for the same
# cuts (bench/pipeline_contrast.py, ``lean_cuts``): a regular grid, set before either was read.
CUTS = tuple(round(0.5 + 0.02 * i, 2) for i in range(11))


def _logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def recalibrated(supports: np.ndarray, options: dict[str, float]) -> np.ndarray:
    """The SUPPORTS shares as the verdict recalibrates them under ``options``
    (:func:`feverous_es.verdict.calibration.platt`)."""
    from feverous_es.verdict.calibration import platt

    return platt(supports, options["reader_scale"], options["reader_shift"])


def as_read(shares: np.ndarray, scale: float, shift: float) -> np.ndarray:
    """The SUPPORTS shares as read, from shares a verdict recalibrated with ``scale`` and
    ``shift`` (the inverse of :func:`recalibrated`)."""
    return 1.0 / (1.0 + np.exp(-(_logit(np.asarray(shares, dtype=np.float64)) - shift) / scale))


def cut_name(cut: float) -> str:
    """A cut's key in a record (``57%``: a key holds no dot)."""
    return f"{cut:.0%}"


def fitted(supports: np.ndarray, gold: np.ndarray, *, shift: bool = True) -> dict[str, float]:
    """``reader_scale`` and (with ``shift``, else 0) ``reader_shift`` fitted on these claims
    (gold SUPPORTS or REFUTES)."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=1e6, fit_intercept=shift)
    model.fit(_logit(supports)[:, None], gold == SUPPORTS)
    intercept = float(model.intercept_[0]) if shift else 0.0
    return {"reader_scale": round(float(model.coef_[0, 0]), 4),
            "reader_shift": round(intercept, 4)}  # fmt: skip


def recall(said: np.ndarray, right: np.ndarray, label: str) -> float | None:
    """The share of the ``label`` claims answered ``label``; None without one."""
    inside = right == label
    return round(float((said[inside] == label).mean()), 4) if inside.any() else None


def answered(said: np.ndarray, right: np.ndarray) -> dict[str, Any]:
    """The accuracy of the labels ``said`` against the gold ``right``, and each class's recall."""
    return {
        "accuracy": round(float((said == right).mean()), 4),
        "supports_recall": recall(said, right, SUPPORTS),
        "refutes_recall": recall(said, right, REFUTES),
    }


def each_file(files: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """Each file's claims as a mask over ``files`` (in first-seen order), then ``all``."""
    names = dict.fromkeys(files.tolist())
    return [(name, files == name) for name in names] + [("all", np.ones(len(files), dtype=bool))]


def calibration_error(p: np.ndarray, supports_gold: np.ndarray) -> float:
    """Expected calibration error of P(SUPPORTS) ``p``: the claim-weighted mean, over ten
    equal bins, of |mean p - share of SUPPORTS claims|."""
    bins = np.minimum((p * BINS).astype(int), BINS - 1)
    error = 0.0
    for b in range(BINS):
        inside = bins == b
        if inside.any():
            error += inside.mean() * abs(p[inside].mean() - supports_gold[inside].mean())
    return round(float(error), 4)


def lean(
    read: Sequence[dict[str, Any]], gold: Sequence[str], sources: Sequence[str]
) -> dict[str, Any]:
    """The recalibration of the reader's SUPPORTS share on the claims ``read`` (their gold labels
    and files alongside): chosen on the SUPPORTS / REFUTES claims routed to sentences, two-fold
    (a seeded split), and on all of them (``options``: what ships)."""
    decided = (SUPPORTS, REFUTES)
    at = [i for i, f in enumerate(read) if f["route"] == "sentence" and gold[i] in decided]
    supports = np.array([read[i]["supports"] for i in at], dtype=float)
    truth = np.array([gold[i] for i in at])
    files = np.array([sources[i] for i in at])
    out_of_fold, rescaled = np.zeros(len(at)), np.zeros(len(at))
    half = np.random.default_rng(SEED).permutation(len(at)) % 2  # a seeded split in two
    halves = [half == h for h in (0, 1)]
    two_fold = []
    for h in (0, 1):
        options = fitted(supports[halves[h]], truth[halves[h]])
        scale = fitted(supports[halves[h]], truth[halves[h]], shift=False)
        out_of_fold[halves[1 - h]] = recalibrated(supports[halves[1 - h]], options)
        rescaled[halves[1 - h]] = recalibrated(supports[halves[1 - h]], scale)
        two_fold.append({"fitted_on_half": h, **options, "scale_alone": scale["reader_scale"]})
    before = np.where(supports >= 0.5, SUPPORTS, REFUTES) == truth
    after = np.where(out_of_fold >= 0.5, SUPPORTS, REFUTES) == truth
    by_file: dict[str, Any] = {}
    for name, inside in each_file(files):
        figures: dict[str, Any] = {"claims": int(inside.sum())}
        readings = (("as read", supports), ("rescaled", rescaled), ("recalibrated", out_of_fold))
        for label, p in readings:
            said, right = np.where(p[inside] >= 0.5, SUPPORTS, REFUTES), truth[inside]
            figures[label] = {
                **answered(said, right),
                "calibration_error": calibration_error(p[inside], right == SUPPORTS),
            }
        figures["paired"] = paired_difference(after[inside], before[inside])
        by_file[name] = figures
    shifted, scaled = fitted(supports, truth), fitted(supports, truth, shift=False)
    chosen = shifted if adopted(by_file) else scaled
    return {"fitted": shifted, "two_fold": two_fold, "out_of_fold": by_file,
            "shift_adopted": chosen is shifted, "options": chosen,
            "cuts": cut_table(supports, truth, files)}  # fmt: skip


def cut_table(supports: np.ndarray, truth: np.ndarray, files: np.ndarray) -> dict[str, Any]:
    """For each of :data:`CUTS` (SUPPORTS where the as-read share is over it) and file: the
    accuracy, each class's recall and the paired difference from the claims as read."""
    before = np.where(supports >= 0.5, SUPPORTS, REFUTES) == truth
    table: dict[str, Any] = {}
    for cut in CUTS:
        said = np.where(supports >= cut, SUPPORTS, REFUTES)
        table[cut_name(cut)] = {
            name: {
                **answered(said[inside], truth[inside]),
                "paired": paired_difference(said[inside] == truth[inside], before[inside]),
            }
            for name, inside in each_file(files)
        }
    return table


def adopted(by_file: dict[str, Any]) -> bool:
    """Whether the out-of-fold figures let the shift ship: all claims read better, the interval
    clearing zero; no file more than a point worse, TabFact not at all."""
    if not (by_file["all"]["paired"]["low"] > 0):
        return False
    for name, figures in by_file.items():
        allowed = 0.0 if name == "tabfact_dev" else 0.01
        if figures["recalibrated"]["accuracy"] < figures["as read"]["accuracy"] - allowed:
            return False
    return True


def relabelled(read: list[dict[str, Any]], options: dict[str, float]) -> list[dict[str, Any]]:
    """The readings with the labels of the sentence-routed claims as ``options`` recalibrate
    them (a table route's label is its feature model's)."""
    out = []
    for f in read:
        if f["route"] == "sentence":
            p = recalibrated(np.array([f["supports"]]), options)[0]
            f = {**f, "label": SUPPORTS if p >= 0.5 else REFUTES}
        out.append(f)
    return out
