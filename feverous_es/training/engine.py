"""What every trainer shares, on this machine and on a GPU's: a file's hash, the layers a
smaller student keeps, and the figures a trained model is chosen by (accuracy or recall per
source).

It imports only the standard library (and takes the torch model it is given), because the GPU
queue ships this file beside its runner (``job.py``): the bundle, not the package, is all a GPU
machine needs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ALL = "all"  # the figure over every pair, beside each source's


def sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def kept_layers(total: int, keep: int) -> list[int]:
    """``keep`` of ``total`` layers, evenly spaced from the first (3 of 6: 0, 2, 4)."""
    return [i * total // keep for i in range(keep)]


def prune_layers(model: Any, keep: int) -> None:
    """Keep ``keep`` evenly spaced encoder layers of a BERT-style torch ``model``, in place."""
    encoder = model.base_model.encoder
    chosen = kept_layers(len(encoder.layer), keep)
    encoder.layer = type(encoder.layer)([encoder.layer[i] for i in chosen])
    model.config.num_hidden_layers = keep


def accuracy_by_source(
    answers: Sequence[str], gold: Sequence[str], sources: Sequence[str], overall: bool = True
) -> dict[str, dict[str, float]]:
    """Label accuracy per source (``{"pairs", "accuracy"}``), and over all of them as ``all``
    when ``overall``."""
    rows: dict[str, list[bool]] = {}
    for answer, label, source in zip(answers, gold, sources, strict=True):
        rows.setdefault(source, []).append(answer == label)
        if overall:
            rows.setdefault(ALL, []).append(answer == label)
    return {
        name: {"pairs": len(right), "accuracy": round(sum(right) / len(right), 4)}
        for name, right in sorted(rows.items())
    }


def recall_by_source(
    scores: Sequence[float], pairs: Sequence[dict[str, Any]], k: int
) -> dict[str, dict[str, float]]:
    """A ranker's recall at ``k``, per source and over all (``all``): of the gold candidates
    (label 1) of the claims with one in their list (``group``), the share among the claim's
    ``k`` best-scored candidates."""
    groups: dict[str, list[tuple[float, float, str]]] = {}
    for score, pair in zip(scores, pairs, strict=True):
        groups.setdefault(pair["group"], []).append((-float(score), pair["label"], pair["source"]))
    found: dict[str, list[int]] = {}
    for rows in groups.values():
        gold = sum(label for _, label, _ in rows)
        if not gold:
            continue
        hits = sum(label for _, label, _ in sorted(rows, key=lambda r: r[0])[:k])
        for name in (rows[0][2], ALL):
            totals = found.setdefault(name, [0, 0, 0])
            totals[0] += int(hits)
            totals[1] += int(gold)
            totals[2] += 1
    return {
        name: {"claims": claims, "gold": gold, "accuracy": round(hits / gold, 4)}
        for name, (hits, gold, claims) in sorted(found.items())
    }


def mean_source_score(result: dict[str, dict[str, float]]) -> float:
    """What chooses an epoch: the mean over sources (so the largest does not decide alone)."""
    scores = [r["accuracy"] for name, r in result.items() if name != ALL]
    return sum(scores) / len(scores) if scores else 0.0
