"""The verdict stage: claim + evidence → SUPPORTS / REFUTES / NOT ENOUGH INFO.

The model reads the claim and a premise: the evidence's Papelo linearizations concatenated
(:func:`feverous_es.verify.inputs.premise`), each starting with its ``[Title]``, optionally
preceded by math hints (Malon 2021, §5). The built-in ``classifier`` runs an ONNX sequence
classifier over (claim, premise) pairs, its labels from the model's ``config.json``
(``id2label``); ``seq2seq`` a T5-style model answering "supports" / "refutes" / "neutral"
(Papelo's choice). A model trained without an NEI class never predicts it (Papelo's submitted
choice); ``nei_below`` turns low-confidence verdicts into NOT ENOUGH INFO.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import ModelError
from feverous_es.plugins.interfaces import Candidate, Label, PluginContext, Query, Verdict
from feverous_es.rerank.cross_encoder import CrossEncoder
from feverous_es.verify.feature_verdict import (
    DEFAULT_MODELS,
    FeatureClassifier,
    evidence_table,
    sentence_texts,
)
from feverous_es.verify.inputs import premise, seq2seq_input
from feverous_es.verify.sentence_facts import claim_features as sentence_claim_features
from feverous_es.verify.seq2seq import Seq2SeqModel
from feverous_es.verify.table_facts import claim_features as table_claim_features

# The verdict model shipped with the package; any model directory replaces it.
DEFAULT_MODEL = Path(__file__).resolve().parents[1] / "models" / "verdict"

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


class ClassifierVerdict:
    """The ``classifier`` verdict. ``model``: a model directory (ONNX + tokenizer.json +
    config.json); ``math_hints``: prefix the premise with hints; ``max_length``: tokens of
    (claim, premise) read. Both default to what the model was trained with (its
    ``training.json``), else no hints and 256 tokens. ``nei_below``: probability under which
    the verdict is NEI.

    ``table_model`` and ``sentence_model``: the feature classifiers
    (:mod:`feverous_es.verify.feature_verdict`) that answer claims whose evidence is about a table
    (:func:`evidence_table`) and the other claims; default the shipped ones, ``""`` to let the text
    model answer instead. On held-out dev claims they beat the fine-tuned MiniLM text model
    (which reads a table as a bag of words and stays near chance on table claims).
    """

    def __init__(
        self,
        context: PluginContext,
        model: str | None = None,
        math_hints: bool | None = None,
        nei_below: float = 0.0,
        max_length: int | None = None,
        table_model: str | None = None,
        sentence_model: str | None = None,
    ) -> None:
        model_dir = Path(model) if model else DEFAULT_MODEL
        if not model_dir.exists():
            raise ModelError(
                f"no verdict model at {model_dir}: train one with `feverous-es train verdict` "
                "and give it as options.verdict.model in the pipeline configuration"
            )
        directory = model_dir if model_dir.is_dir() else model_dir.parent
        self.labels = read_labels(directory)
        trained = trained_inputs(directory)
        max_length = max_length or trained.get("max_length", 256)
        self.model = CrossEncoder(model_dir, device=context.device, max_length=max_length)
        self.hints = trained.get("math_hints", False) if math_hints is None else math_hints
        self.nei_below = nei_below
        self.store = context.store
        self.tables = _feature_model(table_model, "table")
        self.sentences = _feature_model(sentence_model, "sentence")

    def predict(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> list[Verdict]:
        if not batch:
            return []
        tables = [
            evidence_table(query.text, ev, self.store) if self.tables else None
            for query, ev in batch
        ]
        verdicts: list[Verdict | None] = [None] * len(batch)
        table_rows = [i for i, table in enumerate(tables) if table is not None]
        if self.tables is not None and table_rows:
            features = np.stack(
                [table_claim_features(batch[i][0].text, tables[i]) for i in table_rows]  # type: ignore[arg-type]
            )
            for i, row in zip(table_rows, self.tables.probabilities(features), strict=True):
                verdicts[i] = _verdict(self.tables.labels, row, self.nei_below)
        rest = [i for i, table in enumerate(tables) if table is None]
        if self.sentences is not None and rest:
            features = np.stack([
                sentence_claim_features(batch[i][0].text, sentence_texts(batch[i][1]))
                for i in rest
            ])  # fmt: skip
            for i, row in zip(rest, self.sentences.probabilities(features), strict=True):
                verdicts[i] = _verdict(self.sentences.labels, row, self.nei_below)
        elif rest:
            texts = self._text_probabilities([batch[i] for i in rest])
            for i, row in zip(rest, texts, strict=True):
                verdicts[i] = _verdict(self.labels, row, self.nei_below)
        return [v for v in verdicts if v is not None]

    def _text_probabilities(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> np.ndarray:
        pairs = [(query.text, premise(query.text, ev, hints=self.hints)) for query, ev in batch]
        probabilities = softmax(self.model.logits(pairs))
        if probabilities.shape[1] != len(self.labels):
            raise ModelError(
                f"the verdict model has {probabilities.shape[1]} outputs but config.json names "
                f"{len(self.labels)} labels"
            )
        return probabilities


def _feature_model(option: str | None, kind: str) -> FeatureClassifier | None:
    """The feature classifier an option names: the shipped one by default, none for ``""``."""
    if option == "":
        return None
    return FeatureClassifier(Path(option) if option else DEFAULT_MODELS[kind], kind)


def _verdict(labels: Sequence[Label], row: np.ndarray, nei_below: float) -> Verdict:
    best = int(row.argmax())
    label, p = labels[best], float(row[best])
    if p < nei_below:
        label = Label.NOT_ENOUGH_INFO
    return Verdict(label, p, dict(zip(labels, map(float, row), strict=True)))


class Seq2SeqVerdict:
    """The ``seq2seq`` verdict (Malon 2021, §5). ``model``: an exported T5-style directory; its
    first output token is read as supports / refutes / neutral."""

    OPTIONS = ("supports", "refutes", "neutral")
    LABELS = (Label.SUPPORTS, Label.REFUTES, Label.NOT_ENOUGH_INFO)

    def __init__(
        self,
        context: PluginContext,
        model: str,
        math_hints: bool = False,
        nei_below: float = 0.0,
        max_length: int = 512,
    ) -> None:
        self.model = Seq2SeqModel(Path(model), device=context.device, max_length=max_length)
        self.hints = math_hints
        self.nei_below = nei_below

    def predict(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> list[Verdict]:
        if not batch:
            return []
        texts = [seq2seq_input(q.text, ev, prefix="", hints=self.hints) for q, ev in batch]
        rows = self.model.choose(texts, self.OPTIONS)
        return [_verdict(self.LABELS, row, self.nei_below) for row in rows]
