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
recall that the two together keep, bench/sentence_ranker.py).
``retrieval`` keeps the retrieval scores: no model, for speed or for testing other stages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.index.elements import TABLE_CELL_TYPES, ElementType
from feverous_es.plugins.interfaces import Candidate, PluginContext, Query
from feverous_es.runtime.cross_encoder import CrossEncoder


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

    def rerank(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> list[list[Candidate]]:
        groups: dict[int, tuple[CrossEncoder, list[tuple[int, int]]]] = {}
        for i, (_, candidates) in enumerate(batch):
            for j, candidate in enumerate(candidates):
                if (model := self._model(candidate)) is not None:
                    groups.setdefault(id(model), (model, []))[1].append((i, j))
        scores: dict[tuple[int, int], float] = {}
        for model, keys in groups.values():
            pairs = [(batch[i][0].text, batch[i][1][j].element.linearized) for i, j in keys]
            logits = model.score(pairs)
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
