"""Candidate evidence for the rerankers (Malon 2021, §3), chosen so reranking stays affordable.

Non-cells (sentences, list items, captions) come from the retrieved pages and, a few, from the
whole index; each is scored by its BM25 (relative to the claim's best), its cosine to the claim
and the score of its page, so the page retriever's confidence carries into the ranking.

Cells come from the best tables, ranked over the whole index rather than only the retrieved
pages (TabFact page titles are rarely named by a claim), by the table score of
:mod:`feverous_es.retrieve.table_scores`, read off light hits (:class:`CellHit`: thousands a
claim); only the cells kept are fetched whole. An optional row step re-ranks the best tables by
adding a small multiple of a cross-encoder's logit for (claim, the table's best row as plain
text). It is off by default: it bought under a point of gold-table Hits@k for more time a
claim than the rest of the pipeline together (the `row-step` benchmark; docs/decisions.md,
Retrieval). The tables then give cells best row first: the best table more, the next ones a
few each, so the 25-cell budget holds several tables (Hits@5 needs them) and the best table's
likely rows. `bench/retrieval.py` measures the whole stage.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from feverous_es.errors import PluginError
from feverous_es.index.elements import TABLE_CELL_TYPES, TABLE_TYPES, TEXT_TYPES, Element
from feverous_es.index.store import CellHit, Filters, Hit, PageHit, TableKey, TableSearch
from feverous_es.plugins.interfaces import Candidate, PluginContext, Query
from feverous_es.retrieve.table_scores import (
    TableWeights,
    best_cells,
    rerank_by_rows,
    row_texts,
    score_tables,
    table_cells,
)
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.text import Terms

# The first-round pool the sentence ranker chooses from: on held-out FM2 / FEVEROUS-S claims, 25
# non-cells hold the gold sentences of more claims than 15, and the ranker finds them
# (docs/decisions.md, Retrieval; bench/sentence_ranker.py).
NON_CELLS = 25


@dataclass(frozen=True)
class CandidateOptions:
    """The ``papelo`` stage's options: ``[options.candidates]`` in the pipeline's TOML, where the
    table score's weights (:class:`TableWeights`' fields, e.g. ``table_bm25 = 0.0``) sit beside
    the others.

    Non-cells: ``non_cells`` best of the pages' elements (``non_cell_depth`` BM25 and vector
    hits each) and of ``global_hits`` BM25 hits from anywhere; score = BM25 / best BM25 +
    ``vector_weight`` * cosine + ``page_weight`` * page score / best page score.

    Cells: tables ranked by :func:`score_tables` with ``weights`` over a pool of ``table_pool``
    tables (the best by row BM25 among ``cell_depth`` cell hits in the whole index; their
    whole-table BM25 where the store has a table index, see
    :class:`~feverous_es.index.store.TableSearch`), read off at most ``fetch_limit`` hits of
    their elements; the first ``row_tables`` of them re-ranked by :func:`rerank_by_rows` with
    ``row_weight`` and a cross-encoder (``row_model``: a model directory or ONNX file, default
    ms-marco-MiniLM-L-12-v2; int8 on CPU, loaded on first use; ``row_tables=0``, the default,
    needs no model; 15 was the measured choice when on); the best table gives ``cells`` cells,
    the next ``tables`` - 1 tables ``cells_per_table`` each.
    """

    non_cells: int = NON_CELLS
    non_cell_depth: int = 50
    global_hits: int = 10
    vector_weight: float = 1.0
    page_weight: float = 0.5
    tables: int = 8
    cells: int = 12
    cells_per_table: int = 2
    cell_depth: int = 2000
    table_pool: int = 50
    fetch_limit: int = 6000
    row_tables: int = 0
    row_weight: float = 0.04
    row_model: str | None = None
    weights: TableWeights = field(default_factory=TableWeights)

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> CandidateOptions:
        """The options from the TOML's keys (the weights' among them); an unknown key is a
        :class:`PluginError` that lists the known ones."""
        own = {f.name for f in fields(cls)} - {"weights"}
        weight_names = {f.name for f in fields(TableWeights)}
        unknown = set(values) - own - weight_names
        if unknown:
            raise PluginError(
                f"candidates plugin 'papelo': unknown option(s) {sorted(unknown)} (options: "
                f"{', '.join(sorted(own | weight_names))})"
            )
        weights = TableWeights(**{k: v for k, v in values.items() if k in weight_names})
        return cls(**{k: v for k, v in values.items() if k in own}, weights=weights)


class PapeloCandidates:
    """The ``papelo`` candidate retriever, with the options of :class:`CandidateOptions` (as
    keywords, the way the pipeline's TOML gives them)."""

    def __init__(self, context: PluginContext, **options: Any) -> None:
        self.store = context.store
        self.device = context.device
        self.options = CandidateOptions.from_mapping(options)
        self._row_encoder: CrossEncoder | None = None
        self._row_encoder_lock = threading.Lock()  # the pipeline may rank claims in threads
        self.terms = Terms()

    def candidates(self, query: Query, pages: Sequence[PageHit]) -> list[Candidate]:
        *_, pool = self.staged_candidates(query, pages)
        return pool

    def staged_candidates(
        self, query: Query, pages: Sequence[PageHit]
    ) -> Iterator[list[Candidate]]:
        """The pages' elements (a reranker may score them while the tables are ranked), then
        the pool."""
        non_cells = self.non_cell_candidates(query, pages)
        yield non_cells
        cells = self.cell_candidates(query)
        if cells:
            # Items and captions share the cells' budget; placed after the table cells, they
            # neither put another table first nor crowd the best tables out of the budget.
            floor = min(c.score for c in cells)
            best = max((c.score for c in non_cells if c.element.type.in_cell_budget), default=0.0)
            non_cells = [
                Candidate(c.element, 0.5 * floor * c.score / best, c.hop, c.source)
                if c.element.type.in_cell_budget and best > 0
                else c
                for c in non_cells
            ]
        yield non_cells + cells

    def non_cell_candidates(self, query: Query, pages: Sequence[PageHit]) -> list[Candidate]:
        page_score = {hit.page.title: hit.score for hit in pages}
        best_page = max(page_score.values(), default=0.0) or 1.0
        text: list[Hit] = []
        vector: list[Hit] = []
        if page_score:
            within = Filters(pages=tuple(page_score), types=TEXT_TYPES)
            text += self.store.search_text(query.text, self.options.non_cell_depth, within)
            vector += self.store.search_vector(query.vector, self.options.non_cell_depth, within)
        if self.options.global_hits:
            anywhere = Filters(types=TEXT_TYPES)
            text += self.store.search_text(query.text, self.options.global_hits, anywhere)
            vector += self.store.search_vector(query.vector, self.options.global_hits, anywhere)
        best_text = max((hit.score for hit in text), default=0.0) or 1.0
        scores: dict[str, float] = {}
        elements: dict[str, Element] = {}
        for hits, weight, scale in (
            (text, 1.0, best_text),
            (vector, self.options.vector_weight, 1.0),
        ):
            parts: dict[str, float] = {}
            for hit in hits:
                parts[hit.element.id] = max(parts.get(hit.element.id, 0.0), hit.score)
                elements[hit.element.id] = hit.element
            for element_id, score in parts.items():
                scores[element_id] = scores.get(element_id, 0.0) + weight * score / scale
        for element_id, element in elements.items():
            prior = page_score.get(element.page, 0.0) / best_page
            scores[element_id] += self.options.page_weight * prior
        ranked = sorted(scores, key=lambda i: scores[i], reverse=True)[: self.options.non_cells]
        # On the scale of BM25 (the best text hit scores about its BM25), as a next hop's
        # hybrid-scored proposals are, so the selector's push compares like with like.
        return [Candidate(elements[i], best_text * scores[i], 1, "pages") for i in ranked]

    def rank_tables(self, query: Query) -> tuple[list[TableKey], list[CellHit]]:
        """Tables best first, and the BM25 hits of the claim among their elements."""
        if self.options.tables <= 0:
            return [], []
        scores, hits = self.table_scores(query)
        ranked = sorted(scores, key=lambda key: scores[key], reverse=True)
        if self.options.row_tables > 0:
            head = ranked[: self.options.row_tables]
            rows = row_texts(self.store, best_cells(hits), head)
            ranked = (
                rerank_by_rows(
                    query.text, head, scores, rows, self.row_encoder(), self.options.row_weight
                )
                + ranked[self.options.row_tables :]
            )
        return ranked, hits

    def table_scores(self, query: Query) -> tuple[dict[TableKey, float], list[CellHit]]:
        """The pool's tables with their :func:`score_tables` scores (before the row step), and
        the BM25 hits of the claim among their elements."""
        cells = Filters(types=TABLE_CELL_TYPES)
        pool = self.store.search_cell_tables(query.text, self.options.cell_depth, cells)[
            : self.options.table_pool
        ]
        if not pool:
            return {}, []
        hits = self.store.search_cells(
            query.text, self.options.fetch_limit, Filters(types=TABLE_TYPES, tables=tuple(pool))
        )
        whole = None
        if isinstance(self.store, TableSearch) and self.options.weights.table_bm25:
            whole = dict(self.store.search_tables(query.text, len(pool), pool))
        return score_tables(query.text, hits, self.options.weights, self.terms, whole), hits

    def row_encoder(self) -> CrossEncoder:
        with self._row_encoder_lock:
            if self._row_encoder is None:
                # int8 on CPU (measured with it, ~1.6x fp32's speed); a claim's rows form their
                # own batch, so a claim gets the same tables in verify and in predict.
                model = Path(self.options.row_model) if self.options.row_model else None
                self._row_encoder = CrossEncoder(model, quantized=True, device=self.device)
            return self._row_encoder

    def cell_candidates(self, query: Query) -> list[Candidate]:
        ranked, hits = self.rank_tables(query)
        ranked = ranked[: self.options.tables]
        quotas = [self.options.cells] + [self.options.cells_per_table] * (len(ranked) - 1)
        chosen = table_cells(query.text, hits, ranked, quotas, self.terms)
        # The whole elements of the few cells kept, fetched once.
        elements = {e.id: e for e in self.store.get_elements([hit.id for hit, _ in chosen])}
        return [
            Candidate(elements[hit.id], score, 1, "tables")
            for hit, score in chosen
            if hit.id in elements
        ]
