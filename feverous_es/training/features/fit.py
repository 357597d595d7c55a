"""Fitting a feature verdict (scikit-learn gradient boosting) and its ONNX export with a parity
check."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import TrainError
from feverous_es.eval.claims import REFUTES, SUPPORTS
from feverous_es.runtime.files import FP32_FILE, write_manifest
from feverous_es.training import datasets
from feverous_es.training.datasets import TrainingClaim
from feverous_es.training.features.options import Settings
from feverous_es.verdict.feature_model import (
    KIND,
    SPEC_FILE,
    FeatureClassifier,
)

LABELS = (SUPPORTS, REFUTES)  # the classifier's class order: 0 SUPPORTS, 1 REFUTES


INSTALL_HINT = "pip install 'feverous-es[export]' (scikit-learn, skl2onnx)"


def fit(features: np.ndarray, labels: np.ndarray, settings: Settings) -> Any:
    try:
        from sklearn.ensemble import GradientBoostingClassifier
    except ImportError as error:
        raise TrainError(f"{error}; training needs {INSTALL_HINT}") from None
    if len(set(labels.tolist())) < 2:
        raise TrainError("the training claims hold one label only: SUPPORTS and REFUTES needed")
    # GradientBoostingClassifier, not HistGradientBoosting: skl2onnx 1.20 cannot convert the
    # latter's missing-value tracks (onnx 1.23 refuses its boolean attribute), and the features
    # have no missing values (-1 marks "does not apply").
    model = GradientBoostingClassifier(
        n_estimators=settings.trees,
        learning_rate=settings.learning_rate,
        max_depth=settings.depth,
        subsample=settings.subsample,
        random_state=settings.seed,
    )
    return model.fit(features, labels)


def export(model: Any, out: Path, probe: np.ndarray, names: Sequence[str]) -> dict[str, Any]:
    """``model.onnx``, ``feature_model.json`` and the manifest in ``out``; parity on ``probe``."""
    try:
        from skl2onnx import to_onnx
    except ImportError as error:
        raise TrainError(f"{error}; export needs {INSTALL_HINT}") from None
    out.mkdir(parents=True, exist_ok=True)
    graph = to_onnx(
        model,
        probe[:1].astype(np.float32),
        options={id(model): {"zipmap": False}},
        target_opset={"": 17, "ai.onnx.ml": 3},
    )
    (out / FP32_FILE).write_bytes(graph.SerializeToString())
    spec = {"kind": KIND, "labels": list(LABELS), "features": list(names)}
    (out / SPEC_FILE).write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    write_manifest(out, [FP32_FILE, SPEC_FILE])
    onnx_p = FeatureClassifier(out).probabilities(probe)
    sk_p = model.predict_proba(probe)
    return {
        "bytes": (out / FP32_FILE).stat().st_size,
        "parity": {
            "rows": len(probe),
            "max_abs_diff": float(np.abs(onnx_p - sk_p).max()),
            "argmax_agreement": float((onnx_p.argmax(1) == sk_p.argmax(1)).mean()),
        },
    }


def accuracy(
    probabilities: np.ndarray, claims: Sequence[TrainingClaim]
) -> dict[str, dict[str, float]]:
    """Label accuracy per claim file, next to its majority class."""
    return datasets.label_accuracy([LABELS[i] for i in probabilities.argmax(1)], claims)
