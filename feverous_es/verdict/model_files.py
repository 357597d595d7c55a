"""What a reader's model directory says besides its graph: its labels (``config.json``), the
inputs it was trained with (``training.json``) and its grounding settings (``grounding.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import ModelError
from feverous_es.plugins.interfaces import Label

GROUNDING_FILE = "grounding.json"  # the threshold and window size chosen for the reader

_LABEL_NAMES = {
    "supports": Label.SUPPORTS,
    "supported": Label.SUPPORTS,
    "entailment": Label.SUPPORTS,
    "refutes": Label.REFUTES,
    "refuted": Label.REFUTES,
    "contradiction": Label.REFUTES,
    "not enough info": Label.NOT_ENOUGH_INFO,
    "nei": Label.NOT_ENOUGH_INFO,
    "neutral": Label.NOT_ENOUGH_INFO,
}


def read_labels(model_dir: Path) -> list[Label]:
    """The model's output labels, in logit order, from ``config.json``'s ``id2label``."""
    path = model_dir / "config.json"
    try:
        id2label = json.loads(path.read_text(encoding="utf-8"))["id2label"]
        names = [id2label[str(i)] for i in range(len(id2label))]
        return [_LABEL_NAMES[name.strip().lower().replace("_", " ")] for name in names]
    except FileNotFoundError:
        raise ModelError(f"verdict model {model_dir} has no config.json with its labels") from None
    except (KeyError, ValueError, AttributeError) as error:
        raise ModelError(
            f"{path}: id2label must name SUPPORTS / REFUTES [/ NOT ENOUGH INFO] ({error})"
        ) from None


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)


def trained_inputs(model_dir: Path) -> dict[str, Any]:
    """The input settings a model of ``feverous-es train verdict`` was trained with
    (``max_length``, ``math_hints``, from its ``training.json``); empty for other models."""
    try:
        training = json.loads((model_dir / "training.json").read_text(encoding="utf-8"))
        return {k: training["training"][k] for k in ("max_length", "math_hints")}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def grounding_settings(model_dir: Path) -> dict[str, Any]:
    """The reader's grounding settings (``threshold``, ``window_words``, and how they were
    chosen) from its ``grounding.json``; empty for a reader without one."""
    try:
        settings = json.loads((model_dir / GROUNDING_FILE).read_text(encoding="utf-8"))
        return settings if isinstance(settings, dict) else {}
    except (OSError, ValueError):
        return {}
