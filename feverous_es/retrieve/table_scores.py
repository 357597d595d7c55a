"""How a claim scores a table: the parts of the score and their weights.

The candidate stage ranks tables over the whole index rather than only the retrieved pages
(TabFact page titles are rarely named by a claim). A table's score (:class:`TableWeights`)
combines:

* its best row's BM25 (a cell's indexed text is its whole row with the page title and caption,
  so this is row-level BM25), relative to the claim's best row;
* the share of the claim's terms found anywhere in the table, plain and weighted by an IDF taken
  over the candidate tables (terms every candidate shares do not tell them apart);
* the share of the claim's adjacent term pairs (bigrams) found inside one cell or the title: the
  entity-level n-gram matching of Schlichtkrull et al. 2021 without an entity tagger;
* the share of the claim's numbers that are cell values, and of the title's terms in the claim;
* the share of the claim's content words covered by cells whose *whole* value the claim names
  ("süper lig", "punt road oval"): Schlichtkrull et al.'s entity-to-cell matching, from the
  table's side; and the same share within the table's best row alone, since a claim mostly
  names one row's key and some of its values;
* the table's BM25 as one document (title, caption and every cell; the store's table index),
  relative to the best of the candidate tables: term frequency over the whole table and IDF
  over all tables, which no row and no candidate-pool statistic gives.

What each part was measured to add: docs/decisions.md, Retrieval.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from feverous_es.index.dump.linearize import readable_row
from feverous_es.index.elements import TABLE_CELL_TYPES
from feverous_es.index.store import CellHit, Store, TableKey
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.text import Terms, number_strings, words

_MAX_CELL_WORDS = 8  # a longer cell value is prose, not a name a claim repeats whole


def best_cells(hits: Sequence[CellHit]) -> dict[TableKey, CellHit]:
    """Per table, its best-scoring cell or header cell hit (the cell of its best row)."""
    best: dict[TableKey, CellHit] = {}
    for hit in hits:
        if hit.type not in TABLE_CELL_TYPES:
            continue
        key = hit.key
        if key not in best or hit.score > best[key].score:
            best[key] = hit
    return best


def bigrams(terms: Sequence[str]) -> set[tuple[str, str]]:
    return set(itertools.pairwise(terms))


class ClaimSpans:
    """The claim's word n-grams, to find cells whose whole value the claim names: the entity
    linking of Schlichtkrull et al. 2021 (a claim entity matched to a table cell) without an
    entity tagger, from the table's side."""

    def __init__(self, claim: str, terms: Terms) -> None:
        self.words = words(claim)
        self.at: dict[tuple[str, ...], list[int]] = defaultdict(list)
        for n in range(1, _MAX_CELL_WORDS + 1):
            for start in range(len(self.words) - n + 1):
                self.at[self.words[start : start + n]].append(start)
        # Positions that count: words with a BM25 term (not stop words or lone punctuation).
        self.content = {i for i, word in enumerate(self.words) if terms(word)}

    def covered(self, cell: str) -> set[int]:
        """Content positions of the claim that ``cell``'s whole value covers."""
        key = words(cell)
        starts = self.at.get(key)
        if not starts:  # most cells: a table read thousands a claim
            return set()
        covered: set[int] = set()
        for start in starts:
            covered.update(range(start, start + len(key)))
        return covered & self.content


@dataclass(frozen=True, slots=True, kw_only=True)
class TableWeights:
    """Weights of the table score's parts (:func:`table_parts`, see the module docstring), as
    tuned on TabFact dev claims (docs/decisions.md, Retrieval)."""

    row: float = 1.0
    terms: float = 1.0
    idf_terms: float = 0.5
    bigrams: float = 1.5
    numbers: float = 0.25
    title: float = 0.25
    cell_spans: float = 0.25
    row_spans: float = 1.0
    table_bm25: float = 1.0

    def score(self, parts: dict[str, float]) -> float:
        """The weighted sum of a table's parts (:func:`table_parts`' values for one table)."""
        return sum(getattr(self, name) * value for name, value in parts.items())


@dataclass
class _Table:
    """What a table's hits hold of the claim: only what the parts compare with it is kept."""

    terms: set[str] = field(default_factory=set)
    pairs: set[tuple[str, str]] = field(default_factory=set)
    numbers: set[str] = field(default_factory=set)
    covered: set[int] = field(default_factory=set)
    row_covered: dict[int, set[int]] = field(default_factory=dict)
    rows: dict[int, float] = field(default_factory=dict)


def table_parts(
    claim: str,
    hits: Sequence[CellHit],
    terms: Terms | None = None,
    table_bm25: dict[TableKey, float] | None = None,
) -> dict[TableKey, dict[str, float]]:
    """The parts of the score (:class:`TableWeights`' fields, each in [0, 1]) of every table
    that ``hits`` (BM25 hits of the claim among table elements, ideally every element of those
    tables that matches a claim term) touch; ``table_bm25`` holds the whole-table BM25 of
    those tables (none: that part is 0)."""
    analyze = terms or Terms()
    claim_terms = analyze(claim)
    wanted = set(claim_terms)
    pairs = bigrams(claim_terms)
    claim_numbers = number_strings(claim)
    spans = ClaimSpans(claim, analyze)
    tables: dict[TableKey, _Table] = defaultdict(_Table)
    # A claim reads thousands of hits here: each test skips work that cannot change a part.
    for hit in hits:
        table = tables[hit.key]
        text, row = hit.text, hit.row
        element_terms = analyze(text)
        found = wanted.intersection(element_terms)
        if found:
            table.terms |= found
            if len(found) > 1:  # a claim bigram needs two claim terms
                table.pairs |= pairs & bigrams(element_terms)
        if claim_numbers:
            table.numbers |= claim_numbers.intersection(text.split())
            if text.strip() in claim_numbers:
                table.numbers.add(text.strip())
        covered = spans.covered(text)
        if covered:
            table.covered |= covered
            if row is not None:
                table.row_covered.setdefault(row, set()).update(covered)
        if row is not None and hit.score > table.rows.get(row, 0.0):
            table.rows[row] = hit.score
    best_row = max((max(t.rows.values(), default=0.0) for t in tables.values()), default=0.0)
    df_of = {term: sum(term in t.terms for t in tables.values()) for term in wanted}
    idf = {term: math.log((len(tables) + 1) / (df + 0.5)) for term, df in df_of.items()}
    idf_total = sum(idf.values()) or 1.0
    whole = table_bm25 or {}
    best_whole = max((whole.get(key, 0.0) for key in tables), default=0.0) or 1.0
    parts: dict[TableKey, dict[str, float]] = {}
    for key, table in tables.items():
        title = analyze(key[0])
        found = wanted & (table.terms | set(title))
        title_pairs = table.pairs | (pairs & bigrams(title))
        parts[key] = {
            "row": max(table.rows.values(), default=0.0) / (best_row or 1.0),
            "terms": len(found) / max(1, len(wanted)),
            "idf_terms": sum(idf[term] for term in found) / idf_total,
            "bigrams": len(title_pairs) / max(1, len(pairs)),
            "numbers": len(table.numbers) / max(1, len(claim_numbers)),
            "title": len(wanted & set(title)) / max(1, len(set(title))),
            "cell_spans": len(table.covered) / max(1, len(spans.content)),
            "row_spans": max(map(len, table.row_covered.values()), default=0)
            / max(1, len(spans.content)),
            "table_bm25": whole.get(key, 0.0) / best_whole,
        }
    return parts


def score_tables(
    claim: str,
    hits: Sequence[CellHit],
    weights: TableWeights = TableWeights(),
    terms: Terms | None = None,
    table_bm25: dict[TableKey, float] | None = None,
) -> dict[TableKey, float]:
    """Every table :func:`table_parts` scores, by the weighted sum of its parts."""
    return {
        key: weights.score(parts)
        for key, parts in table_parts(claim, hits, terms, table_bm25).items()
    }


def rerank_by_rows(
    claim: str,
    ranked: Sequence[TableKey],
    scores: dict[TableKey, float],
    rows: dict[TableKey, str],
    encoder: CrossEncoder,
    weight: float,
) -> list[TableKey]:
    """``ranked`` re-sorted by table score + ``weight`` * the cross-encoder's logit for (claim,
    best row as plain text); ``rows`` holds each table's best row (:func:`row_texts`), and a
    table without one keeps its score."""
    keyed = [key for key in ranked if key in rows]
    logits = encoder.score([(claim, rows[key]) for key in keyed])
    return fuse_row_logits(ranked, scores, dict(zip(keyed, logits, strict=True)), weight)


def row_texts(
    store: Store, best: dict[TableKey, CellHit], tables: Sequence[TableKey]
) -> dict[TableKey, str]:
    """What the row step's cross-encoder reads of each of ``tables``: its best row (the row of
    its best cell, :func:`best_cells`) as plain text; tables without a cell hit are left out."""
    keys = [key for key in tables if key in best]
    elements = {e.id: e for e in store.get_elements([best[key].id for key in keys])}
    return {
        key: readable_row(elements[best[key].id].linearized)
        for key in keys
        if best[key].id in elements
    }


def fuse_row_logits(
    ranked: Sequence[TableKey],
    scores: dict[TableKey, float],
    logits: dict[TableKey, float],
    weight: float,
) -> list[TableKey]:
    """``ranked`` re-sorted by table score + ``weight`` * logit (tables without one keep their
    score)."""
    fused = {key: scores[key] + weight * float(logits.get(key, 0.0)) for key in ranked}
    return sorted(ranked, key=lambda key: fused[key], reverse=True)


def table_cells(
    claim: str,
    hits: Sequence[CellHit],
    ranked: Sequence[TableKey],
    quotas: Sequence[int],
    terms: Terms | None = None,
) -> list[tuple[CellHit, float]]:
    """Cells of the ranked tables with their candidate scores, ``quotas[i]`` from the i-th:
    best row first, and in a row the cells whose own text shares a term with the claim first.
    Scores keep the table order: table rank first, row order within a table; they are scaled so
    the first is about the best row's BM25, the scale of the hybrid scores a next hop's
    proposals carry."""
    analyze = terms or Terms()
    wanted = set(analyze(claim))
    by_table: dict[TableKey, list[CellHit]] = defaultdict(list)
    for hit in hits:
        if hit.type in TABLE_CELL_TYPES:
            by_table[hit.key].append(hit)
    scale = max((hit.score for hit in hits), default=1.0) / max(1, len(ranked))
    out: list[tuple[CellHit, float]] = []
    for rank, (key, quota) in enumerate(zip(ranked, quotas, strict=False)):
        cells = by_table.get(key, [])
        if not cells or quota <= 0:
            continue
        row_score: dict[int | None, float] = {}
        for hit in cells:
            row_score[hit.row] = max(row_score.get(hit.row, 0.0), hit.score)
        order = sorted(
            cells,
            key=lambda hit: (
                -row_score[hit.row],
                hit.row or 0,
                not wanted.intersection(analyze(hit.text)),
                hit.column or 0,
            ),
        )[:quota]
        base = float(len(ranked) - rank)
        out.extend(
            (hit, scale * (base + 0.9 * (1.0 - i / len(order)))) for i, hit in enumerate(order)
        )
    return out
