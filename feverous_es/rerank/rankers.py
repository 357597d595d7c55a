"""The built-in reranker plugins.

``cross-encoder`` scores (claim, Papelo linearization) pairs with two ONNX cross-encoders, one
for cells and header cells and one for everything else (Malon 2021, §3 trains one per kind); both
default to ms-marco-MiniLM-L-12-v2 (one session when both name the same model). Every pair of
a batch of claims goes through one call per model, so inference batches across claims.
With ``sentences_only``, only sentences (the 5-sentence budget) are scored by ``model``; every
other element keeps its retrieval score, so the 25-element budget keeps the retrieval order.
With ``retrieval_weight`` w > 0, a scored element's score is z(logit) + w * z(retrieval score),
each standardized over the claim's elements that model scored: the ranker corrects the
retrieval order instead of replacing it (a fine-tuned sentence ranker alone lost FEVEROUS-S
recall that the two together keep, bench/sentence_ranker.py). The pipeline reranks a hop's
proposals together with the claim's earlier candidates, so they share that standardization; a
pair's logit is computed once.
``retrieval`` keeps the retrieval scores: no model, for speed or for testing other stages.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.index.elements import TABLE_CELL_TYPES, ElementType
from feverous_es.plugins.interfaces import Candidate, PluginContext, Query
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.runtime.files import PACKAGED_MODELS_DIR

# Logits of the pairs scored last, first in first out: enough for the pools of a few batches of
# claims, which each hop reranks again (pipeline._pursue). A claim adds ~22 pairs on average
# (mini-FEVEROUS dev), so 50,000 took a server ~2,300 claims to fill: memory that kept growing
# for the first 20 minutes of a soak, for pairs no later claim reads (docs/operations.md).
LOGIT_CACHE_SIZE = 10_000

PACKAGED_SENTENCE_RANKER = PACKAGED_MODELS_DIR / "sentence-ranker"
# Chosen on held-out FM2 and FEVEROUS-S claims through the whole pipeline (docs/decisions.md,
# Retrieval); the ranker was trained on 128-token pairs.
SENTENCE_RANKER_WEIGHT = 1.0
SENTENCE_RANKER_MAX_LENGTH = 128


def _best_first(candidates: Iterable[Candidate]) -> list[Candidate]:
    return sorted(candidates, key=lambda c: c.score, reverse=True)


def fused_scores(
    logits: np.ndarray, retrieval: np.ndarray, claims: Sequence[int], weight: float
) -> np.ndarray:
    """z(logit) + ``weight`` * z(retrieval score), standardized within each claim
    (``claims[k]``: the claim of the k-th element); a claim with one element scores 0."""
    claim_of = np.asarray(claims)
    fused = np.zeros(len(logits), dtype=np.float64)
    for claim in np.unique(claim_of):
        mine = claim_of == claim
        fused[mine] = _standardized(logits[mine]) + weight * _standardized(retrieval[mine])
    return fused


def _standardized(values: np.ndarray) -> np.ndarray:
    spread = values.std()
    return (values - values.mean()) / spread if spread > 0 else np.zeros(len(values))


class RetrievalOrder:
    """The ``retrieval`` reranker."""

    def __init__(self, context: PluginContext | None = None) -> None:
        pass

    def rerank(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> list[list[Candidate]]:
        return [_best_first(candidates) for _, candidates in batch]


class CrossEncoderReranker:
    """The ``cross-encoder`` reranker. ``model`` / ``cell_model``: a model directory or ONNX
    file replacing the default for non-cells / cells. ``sentences_only``: score sentences only
    (``cell_model`` is then never loaded)."""

    def __init__(
        self,
        context: PluginContext,
        model: str | None = None,
        cell_model: str | None = None,
        max_length: int | None = None,
        sentences_only: bool = False,
        retrieval_weight: float = 0.0,
    ) -> None:
        options: dict[str, Any] = {"device": context.device}
        if max_length is not None:
            options["max_length"] = max_length
        self.retrieval_weight = retrieval_weight
        self._scored: OrderedDict[tuple[int, str, str], float] = OrderedDict()
        self._cache_lock = threading.Lock()  # a prefetch may fill it from another thread
        self.non_cell = CrossEncoder(Path(model) if model else None, **options)
        self.cell: CrossEncoder | None = None
        if not sentences_only:
            self.cell = (
                self.non_cell
                if cell_model == model
                else CrossEncoder(Path(cell_model) if cell_model else None, **options)
            )

    def _model(self, candidate: Candidate) -> CrossEncoder | None:
        """The model that scores ``candidate``; None: it keeps its retrieval score."""
        kind = candidate.element.type
        if self.cell is None:
            return self.non_cell if kind is ElementType.SENTENCE else None
        return self.cell if kind in TABLE_CELL_TYPES else self.non_cell

    def _logits(self, model: CrossEncoder, pairs: Sequence[tuple[str, Candidate]]) -> np.ndarray:
        """``model``'s logit of each (claim, candidate), scoring only pairs it has not scored
        lately: the pipeline reranks a claim's first-round pool again with each hop's proposals,
        and may have prefetched its pages' elements."""
        keys = [(id(model), claim, candidate.element.id) for claim, candidate in pairs]
        with self._cache_lock:
            fresh = {
                key: pair for key, pair in zip(keys, pairs, strict=True) if key not in self._scored
            }
        new = model.score([(claim, c.element.linearized) for claim, c in fresh.values()])
        with self._cache_lock:
            self._scored.update(zip(fresh, map(float, new), strict=True))  # fresh may be empty
            logits = np.array([self._scored[key] for key in keys], dtype=np.float64)
            while len(self._scored) > LOGIT_CACHE_SIZE:
                self._scored.popitem(last=False)
        return logits

    def _groups(
        self, batch: Sequence[tuple[Query, Sequence[Candidate]]]
    ) -> list[tuple[CrossEncoder, list[tuple[int, int]]]]:
        """(model, the (claim, candidate) positions it scores) for each model the batch needs."""
        groups: dict[int, tuple[CrossEncoder, list[tuple[int, int]]]] = {}
        for i, (_, candidates) in enumerate(batch):
            for j, candidate in enumerate(candidates):
                if (model := self._model(candidate)) is not None:
                    groups.setdefault(id(model), (model, []))[1].append((i, j))
        return list(groups.values())

    def prefetch(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> None:
        """Score the batch's pairs into the logit cache, for the ``rerank`` that follows."""
        for model, keys in self._groups(batch):
            self._logits(model, [(batch[i][0].text, batch[i][1][j]) for i, j in keys])

    def rerank(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> list[list[Candidate]]:
        scores: dict[tuple[int, int], float] = {}
        for model, keys in self._groups(batch):
            logits = self._logits(model, [(batch[i][0].text, batch[i][1][j]) for i, j in keys])
            if self.retrieval_weight > 0:
                retrieval = np.array([batch[i][1][j].score for i, j in keys])
                logits = fused_scores(
                    logits, retrieval, [i for i, _ in keys], self.retrieval_weight
                )
            scores.update(zip(keys, map(float, logits), strict=True))
        return [
            _best_first(
                Candidate(c.element, scores.get((i, j), c.score), c.hop, c.source)
                for j, c in enumerate(cands)
            )
            for i, (_, cands) in enumerate(batch)
        ]


class SentenceRanker(CrossEncoderReranker):
    """The ``sentence-ranker`` reranker, the default: the packaged ranker, fine-tuned on FM2 and
    FEVEROUS-S evidence (its model card), scores sentences, fused with their retrieval scores
    (``retrieval_weight``); every other element keeps the retrieval order. ``model``: another
    sentence ranker's directory."""

    def __init__(
        self,
        context: PluginContext,
        model: str | None = None,
        retrieval_weight: float = SENTENCE_RANKER_WEIGHT,
        max_length: int = SENTENCE_RANKER_MAX_LENGTH,
    ) -> None:
        super().__init__(
            context,
            model=model or str(PACKAGED_SENTENCE_RANKER),
            sentences_only=True,
            retrieval_weight=retrieval_weight,
            max_length=max_length,
        )
