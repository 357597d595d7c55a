"""The table feature verdict: a gradient-boosted classifier over what a claim shares with its
table.

It reads :func:`feverous_es.verdict.table_facts.claim_features` of the claim and the table the
evidence points at (:func:`evidence_table` decides whether it does): a scikit-learn
``GradientBoostingClassifier`` exported to ONNX (``model.onnx``, run by ONNX Runtime's
tree-ensemble kernels on the CPU: no scikit-learn at run time); ``feature_model.json`` names
its kind (``table``), labels and features, so a model built with another feature set is
refused instead of misread.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from feverous_es.errors import ModelError
from feverous_es.index.elements import ElementType
from feverous_es.plugins.interfaces import Candidate, Evidence, Label, evidence_tables
from feverous_es.runtime.files import FP32_FILE, PACKAGED_MODELS_DIR
from feverous_es.runtime.model import Execution, OnnxModel
from feverous_es.text import content_words, marked_words, tokens
from feverous_es.verdict import table_facts
from feverous_es.verdict.table_facts import Table

SPEC_FILE = "feature_model.json"  # kind, labels and feature names, from the training command
KIND = "table"
DEFAULT_MODEL = PACKAGED_MODELS_DIR / "table-verdict"
FEATURES: tuple[str, ...] = table_facts.FEATURE_NAMES


def _share(words: set[str], found: set[str]) -> float:
    return len(words & found) / max(1, len(words))


def first_table(evidence: Sequence[Candidate]) -> Table | None:
    """The evidence's first table (the pipeline's best), whole, as retrieval handed it on
    (:class:`~feverous_es.plugins.interfaces.Evidence`; a plain list hands on none)."""
    tables = evidence_tables(evidence)
    held = evidence.tables if isinstance(evidence, Evidence) else {}
    if not tables or tables[0] not in held:
        return None
    table = Table.from_elements(held[tables[0]], tables[0][1])
    return table if table is not None and table.rows else None


def evidence_table(claim: str, evidence: Sequence[Candidate]) -> Table | None:
    """The table a claim's verdict reads, or None when the evidence's sentences answer it.

    The evidence always holds sentences and cells side by side (the budget's two lists), so its
    type alone does not say which the claim is about. The table is read when its share of the
    claim's content words (cells, header, title, caption) exceeds the best evidence sentence's,
    or equals it when the table holds more of the claim's numbers than any sentence does. A
    TabFact claim's words are often as much in a sentence as in the table, its numbers only in
    the table: such ties went to the sentences, which answered those claims badly; a margin
    the table must win by lost TabFact claims through the pipeline (docs/decisions.md,
    Verdict).
    """
    table = first_table(evidence)
    if table is None:
        return None
    words = content_words(claim)
    numbers = marked_words(claim) - words  # the claim's numbers, in digits or words
    sentences = [set(tokens(text)) for text in sentence_texts(evidence)]
    lead = _share(words, table.all_tokens) - max((_share(words, s) for s in sentences), default=0)
    if lead == 0:  # a tie: the claim's numbers say which holds it
        held = max((len(numbers & s) for s in sentences), default=0)
        return table if len(numbers & table.all_tokens) > held else None
    return table if lead > 0 else None


def sentence_texts(evidence: Sequence[Candidate]) -> list[str]:
    """The plain text of the evidence's sentences, in evidence order."""
    return [c.element.text for c in evidence if c.element.type is ElementType.SENTENCE]


class FeatureClassifier:
    """The exported feature classifier of a model directory (``model.onnx``,
    ``feature_model.json``, ``manifest.json``)."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir
        try:
            spec = json.loads((model_dir / SPEC_FILE).read_text(encoding="utf-8"))
            self.labels = [Label(name) for name in spec["labels"]]
            model_kind, features = spec["kind"], tuple(spec["features"])
        except FileNotFoundError:
            raise ModelError(
                f"{model_dir} is not a feature verdict model (no {SPEC_FILE})"
            ) from None
        except (ValueError, KeyError, TypeError) as error:
            raise ModelError(f"{model_dir / SPEC_FILE} is malformed ({error})") from None
        if model_kind != KIND:
            raise ModelError(f"{model_dir} is a {model_kind} verdict model, not a {KIND} one")
        if features != FEATURES:
            raise ModelError(
                f"{model_dir} was trained on other table features than this version computes; "
                "retrain it with `feverous-es train table-verdict`"
            )
        # Tree ensembles have no CUDA kernels: the CPU provider runs them either way.
        self.model = OnnxModel(
            model_dir,
            Execution(device="cpu"),
            graph=FP32_FILE,
            require_manifest=True,
            remedy="reinstall feverous-es or retrain the model",
        )

    def probabilities(self, features: np.ndarray) -> np.ndarray:
        """One row of label probabilities (in :attr:`labels` order) per row of features."""
        if not len(features):
            return np.zeros((0, len(self.labels)), dtype=np.float32)
        _, probabilities = self.model.run({"X": features.astype(np.float32)})
        return np.asarray(probabilities, dtype=np.float32)
