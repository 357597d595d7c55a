"""The exported entailment model's held-out accuracy, read as the verdict plugin reads it (int8
ONNX on the CPU)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from feverous_es.eval.claims import LABELS
from feverous_es.training.verdict import entailment_data as data
from feverous_es.training.verdict.fit import held_out_accuracy
from feverous_es.training.verdict.options import TrainSettings


def probabilities(model_dir: Path, pairs: Sequence[data.Pair], settings: TrainSettings) -> Any:
    """Label probabilities of ``pairs`` from the exported model, as the verdict plugin reads
    them (int8 ONNX on the CPU)."""
    from feverous_es.export.parity import onnx_logits
    from feverous_es.verdict.model_files import softmax

    if not pairs:
        return []
    return softmax(
        onnx_logits(model_dir, [(p.claim, p.premise) for p in pairs], settings.max_length)
    )


def accuracy(
    pairs: Sequence[data.Pair], scores: dict[str, list[float]]
) -> dict[str, dict[str, float]]:
    """Held-out accuracy of the exported model (its ``scores``): per source, and per route
    over all sources."""
    import numpy as np

    if not pairs:
        return {}
    rows = np.array([scores[p.key] for p in pairs])
    result = held_out_accuracy(rows, pairs)
    for route in (data.SENTENCE, data.TABLE):
        chosen = [i for i, p in enumerate(pairs) if p.route == route and p.train]
        if chosen:
            right = [LABELS[int(rows[i].argmax())] == pairs[i].label for i in chosen]
            result[f"route:{route}"] = {
                "pairs": len(right), "accuracy": round(sum(right) / len(right), 4)
            }  # fmt: skip
    return result
