"""The route that reads best: a claim the router sends to a table, read by the reader on its
sentences instead where the table's feature model is unsure (the verdict's
``table_unsure_below``), chosen on the held-out dev claims of all three files.

Each SUPPORTS / REFUTES claim routed to a table is read twice through the whole pipeline: as
the default routes it (the feature model's SUPPORTS share, ``supports``) and with every such
claim handed to the reader (``table_unsure_below`` over 1: its sentences' reading, where its
evidence holds any). A threshold hands over the claims whose feature model's likelier label has
less than that share. Each threshold's accuracy per file and its paired difference from the
table always deciding, on all the claims read (sentence-routed ones unchanged); the threshold
chosen two-fold, and on all claims: the most accurate whose interval clears zero and that costs
TabFact nothing (:func:`adopted`); else 0, the table always deciding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from bench.paired import paired_difference

THRESHOLDS = (0.0, 0.55, 0.6, 0.65, 0.7, 0.8, 0.9, 1.1)
ALWAYS_THE_TABLE = 0.0
SEED = 29


def answers(read: Sequence[dict], handed: Sequence[dict | None], threshold: float) -> np.ndarray:
    """Each claim's label with the table-routed ones under ``threshold`` handed to their
    sentences' reading (``handed``: that reading, None where a claim was not on a table or its
    evidence holds no sentences)."""
    out = []
    for f, other in zip(read, handed, strict=True):
        top = max(f["supports"], 1.0 - f["supports"])
        out.append(other["label"] if other is not None and top < threshold else f["label"])
    return np.array(out)


def scored(
    read: Sequence[dict], handed: Sequence[dict | None], gold: np.ndarray, files: np.ndarray
) -> dict[str, Any]:
    """Each threshold's accuracy per file and on all, its paired difference from 0, and how
    many claims it hands over."""
    by_table = answers(read, handed, ALWAYS_THE_TABLE)
    base = by_table == gold
    figures: dict[str, Any] = {}
    for threshold in THRESHOLDS:
        said = answers(read, handed, threshold)
        right = said == gold
        by_file = {
            name: {"claims": int((files == name).sum()),
                   "accuracy": round(float(right[files == name].mean()), 4),
                   "paired": paired_difference(right[files == name], base[files == name])}
            for name in dict.fromkeys(files.tolist())
        }  # fmt: skip
        figures[f"{threshold:.2f}"] = {
            "threshold": threshold,
            "handed": int((said != by_table).sum()),
            "accuracy": round(float(right.mean()), 4),
            "paired": paired_difference(right, base),
            "by_file": by_file,
        }
    return figures


def adopted(figures: dict[str, Any]) -> float:
    """The most accurate threshold whose paired difference on all claims clears zero and that
    costs TabFact nothing; 0 (the table always decides) when none does."""

    def costs_tabfact(f: dict[str, Any]) -> bool:
        tabfact = f["by_file"].get("tabfact_dev")
        return tabfact is not None and tabfact["paired"]["difference"] < 0

    fine = [f for f in figures.values() if f["paired"]["low"] > 0 and not costs_tabfact(f)]
    return max(fine, key=lambda f: f["accuracy"])["threshold"] if fine else ALWAYS_THE_TABLE


def table_route(
    read: Sequence[dict], handed: Sequence[dict | None], gold: Sequence[str], files: Sequence[str]
) -> dict[str, Any]:
    """The thresholds scored on all these claims and two-fold (a seeded split), and the one
    that ships."""
    gold_, files_ = np.array(gold), np.array(files)
    half = np.random.default_rng(SEED).permutation(len(read)) % 2
    two_fold = []

    def on(part: np.ndarray) -> dict[str, Any]:
        ids = part.tolist()
        return scored([read[i] for i in ids], [handed[i] for i in ids], gold_[part], files_[part])

    for h in (0, 1):
        pick = adopted(on(np.flatnonzero(half == h)))
        there = on(np.flatnonzero(half != h))
        two_fold.append({"chosen_on_half": h, "threshold": pick,
                         "other_half": there[f"{pick:.2f}"]})  # fmt: skip
    every = scored(read, handed, gold_, files_)
    return {"thresholds": every, "two_fold": two_fold, "table_unsure_below": adopted(every)}
