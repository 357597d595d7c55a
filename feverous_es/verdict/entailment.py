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
from feverous_es.verdict.readers import reader_dirs

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
    tokenizer.json + config.json). A reader of several models averages their probabilities.
    ``max_length`` and ``math_hints`` default to what the (first) model was trained with (its
    ``training.json``), else 256 and no hints; ``device``: ``auto``, ``cpu`` or ``cuda``. The
    ONNX sessions load on first use."""

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "auto",
        max_length: int | None = None,
        math_hints: bool | None = None,
    ) -> None:
        self.model_dirs = reader_dirs(model or None)
        missing = [d for d in self.model_dirs if not d.exists()]
        if missing:
            raise ModelError(
                f"no verdict model at {missing[0]}: train one with `feverous-es train verdict` "
                "and give it as options.verdict.model in the pipeline configuration"
            )
        self.model_dir = self.model_dirs[0]
        directories = [d if d.is_dir() else d.parent for d in self.model_dirs]
        self.labels = read_labels(directories[0])
        if any(read_labels(d) != self.labels for d in directories[1:]):
            raise ModelError(f"the models of reader {model} name different labels: not averaged")
        trained = [trained_inputs(d) for d in directories]
        self.max_lengths = [max_length or t.get("max_length", 256) for t in trained]
        self.max_length = self.max_lengths[0]
        self.hints = trained[0].get("math_hints", False) if math_hints is None else math_hints
        self.device = device

    @cached_property
    def models(self) -> list[CrossEncoder]:
        return [
            CrossEncoder(directory, device=self.device, max_length=length)
            for directory, length in zip(self.model_dirs, self.max_lengths, strict=True)
        ]

    def probabilities(self, claims: Sequence[str], premises: Sequence[str]) -> np.ndarray:
        """The label probabilities (in :attr:`labels` order) of each (claim, premise) pair."""
        if self.hints:
            premises = [
                f"{hints} {text}" if (hints := math_hints(claim, text)) else text
                for claim, text in zip(claims, premises, strict=True)
            ]
        pairs = list(zip(claims, premises, strict=True))
        probabilities = np.mean([softmax(model.logits(pairs)) for model in self.models], axis=0)
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
