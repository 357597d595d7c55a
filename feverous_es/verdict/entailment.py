"""The entailment model read alone: a claim against a premise, three label probabilities.

The ``classifier`` verdict reads it on the premise of a claim's route; :class:`EntailmentModel`
reads it on evidence a user gives (``feverous-es entail``, ``POST /v1/entail``): a generated
text checked against its source, or the model measured without retrieval. The premise is laid
out as the verdict lays out retrieved sentences (``[Title] sentence …``, the title left out
where none is given), so the model reads what it was trained on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import EmptyClaimError, ModelError
from feverous_es.plugins.interfaces import Label
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.verdict.math_hints import math_hints
from feverous_es.verdict.readers import reader_dir

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


def evidence_premise(evidence: Sequence[str], title: str = "") -> str:
    """Evidence a user gives, as the model reads evidence: ``[Title] text …``."""
    pieces = [" ".join(text.split()) for text in evidence]
    return " ".join(f"[{title}] {text}" if title else text for text in pieces if text)


@dataclass(frozen=True)
class Entailment:
    """What the model reads of a claim against a premise: the likeliest label and the three
    probabilities (they sum to 1; no threshold applied)."""

    claim: str
    premise: str
    label: Label
    probabilities: dict[Label, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "premise": self.premise,
            "label": self.label.value,
            "probabilities": {k.value: round(v, 4) for k, v in self.probabilities.items()},
        }


class EntailmentModel:
    """An entailment model: a reader's name (``"default"``, the package's verdict model, also
    when None; ``"large"``: :mod:`~feverous_es.verdict.readers`) or a model directory (ONNX +
    tokenizer.json + config.json). ``max_length`` and ``math_hints`` default to what the model was
    trained with (its ``training.json``), else 256 and no hints; ``device``: ``auto``, ``cpu``
    or ``cuda``. The ONNX session loads on first use."""

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "auto",
        max_length: int | None = None,
        math_hints: bool | None = None,
    ) -> None:
        model_dir = reader_dir(model or None)
        if not model_dir.exists():
            raise ModelError(
                f"no verdict model at {model_dir}: train one with `feverous-es train verdict` "
                "and give it as options.verdict.model in the pipeline configuration"
            )
        self.model_dir = model_dir
        directory = model_dir if model_dir.is_dir() else model_dir.parent
        self.labels = read_labels(directory)
        trained = trained_inputs(directory)
        self.max_length = max_length or trained.get("max_length", 256)
        self.hints = trained.get("math_hints", False) if math_hints is None else math_hints
        self.device = device

    @cached_property
    def model(self) -> CrossEncoder:
        return CrossEncoder(self.model_dir, device=self.device, max_length=self.max_length)

    def probabilities(self, claims: Sequence[str], premises: Sequence[str]) -> np.ndarray:
        """The label probabilities (in :attr:`labels` order) of each (claim, premise) pair."""
        if self.hints:
            premises = [
                f"{hints} {text}" if (hints := math_hints(claim, text)) else text
                for claim, text in zip(claims, premises, strict=True)
            ]
        probabilities = softmax(self.model.logits(list(zip(claims, premises, strict=True))))
        if probabilities.shape[1] != len(self.labels):
            raise ModelError(
                f"the verdict model has {probabilities.shape[1]} outputs but config.json names "
                f"{len(self.labels)} labels"
            )
        return probabilities

    def entail(self, claim: str, evidence: Sequence[str], *, title: str = "") -> Entailment:
        """``claim`` read against ``evidence`` (texts, of the page ``title`` if given)."""
        return self.entail_many([(claim, evidence)], title=title)[0]

    def entail_many(
        self, items: Sequence[tuple[str, Sequence[str]]], *, title: str = ""
    ) -> list[Entailment]:
        """Each (claim, evidence texts) read as :meth:`entail` reads one."""
        claims = [" ".join(claim.split()) for claim, _ in items]
        premises = [evidence_premise(evidence, title) for _, evidence in items]
        if not all(claims):
            raise EmptyClaimError("the claim is empty")
        if not all(premises):
            raise EmptyClaimError("no evidence given: entail reads a claim against evidence")
        rows = self.probabilities(claims, premises)
        return [
            Entailment(
                claim,
                premise,
                self.labels[int(row.argmax())],
                dict(zip(self.labels, map(float, row), strict=True)),
            )
            for claim, premise, row in zip(claims, premises, rows, strict=True)
        ]
