"""The FEVEROUS score, computed as the official scorer computes it, plus breakdowns.

Semantics of the official ``feverous_scorer.py`` (FEVEROUS repository, ``src/feverous/
evaluation``), reproduced here claim by claim:

* Truncation, in prediction order: an element of type ``cell``, ``header_cell``,
  ``table_caption`` or ``item`` uses one of 25 cell slots; an element of *any other* type
  (``sentence``, and also ``section``, ``table``, ``title`` …) uses one of 5 sentence slots.
  Elements past their budget are dropped; duplicates are not merged, each takes a slot.
* Strictly correct (the FEVEROUS score): label right (case-insensitive) and every element of at
  least one gold evidence set among the truncated predictions. This holds for NOT ENOUGH INFO
  claims too (they have gold evidence in FEVEROUS); a claim with no gold set at all can never be
  strictly correct.
* Evidence precision, per claim: the share of truncated predictions (duplicates counted each
  time) that are in the union of the gold sets; 1.0 when nothing is predicted. Recall, per claim:
  1.0 if a gold set is complete among the truncated predictions or the claim has no gold set,
  else 0.0. Both are averaged over all claims (every label, the label's correctness ignored);
  F1 is the harmonic mean of the two averages (0.0 where the official code divides by zero).
* Label accuracy: the share of claims whose predicted label equals the gold one.

Beyond the official numbers: the same metrics per ``challenge``, a gold-by-predicted label
confusion matrix, and for claims with ``gold_tables`` (TabFact-style) table Hits@k: tables are
ranked by where their first cell, header cell, caption (or the table itself) appears in the
*untruncated* predicted evidence.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from feverous_es.errors import ScoreError
from feverous_es.eval.claims import (
    ClaimRecord,
    MalformedLine,
    PredictionRecord,
    Triple,
    read_claims,
    read_predictions,
)

MAX_SENTENCES = 5
MAX_CELLS = 25
CELL_BUDGET_TYPES = frozenset({"cell", "item", "table_caption", "header_cell"})
"""Types the official scorer counts against the cell budget; every other type counts as a
sentence."""
TABLE_TYPES = frozenset({"cell", "header_cell", "table_caption", "table"})
HITS_AT = (1, 5, 10)


def truncate(
    predicted: Sequence[Triple],
    max_sentences: int | None = MAX_SENTENCES,
    max_cells: int | None = MAX_CELLS,
) -> list[Triple]:
    """The predictions the official scorer keeps: in order, the first ``max_cells`` of cell type
    and the first ``max_sentences`` of every other type (``None``: no limit)."""
    kept: list[Triple] = []
    cells = sentences = 0
    for triple in predicted:
        if triple[1] in CELL_BUDGET_TYPES:
            if max_cells is not None:
                if cells >= max_cells:
                    continue
                cells += 1
        elif max_sentences is not None:
            if sentences >= max_sentences:
                continue
            sentences += 1
        kept.append(tuple(triple))  # type: ignore[arg-type]
    return kept


def label_correct(gold_label: str, predicted_label: str) -> bool:
    return gold_label.upper() == predicted_label.upper()


def has_complete_set(gold_sets: Sequence[Sequence[Triple]], predicted: Sequence[Triple]) -> bool:
    """True when every element of some gold set is among ``predicted``."""
    found = {tuple(t) for t in predicted}
    return any(all(tuple(t) in found for t in group) for group in gold_sets)


def strictly_correct(
    gold_label: str,
    gold_sets: Sequence[Sequence[Triple]],
    predicted_label: str,
    predicted: Sequence[Triple],
) -> bool:
    """The official per-claim FEVEROUS score on *already truncated* predictions."""
    return label_correct(gold_label, predicted_label) and has_complete_set(gold_sets, predicted)


def evidence_precision(gold_sets: Sequence[Sequence[Triple]], predicted: Sequence[Triple]) -> float:
    """Official per-claim precision on truncated predictions (1.0 for none predicted)."""
    if not predicted:
        return 1.0
    gold = {tuple(t) for group in gold_sets for t in group}
    return sum(tuple(t) in gold for t in predicted) / len(predicted)


def evidence_recall(gold_sets: Sequence[Sequence[Triple]], predicted: Sequence[Triple]) -> float:
    """Official per-claim recall on truncated predictions: 1.0 for a complete gold set or no
    gold set at all, else 0.0."""
    if not gold_sets:
        return 1.0
    return 1.0 if has_complete_set(gold_sets, predicted) else 0.0


@dataclass(frozen=True, slots=True)
class ClaimScore:
    """One claim's official numbers (on truncated predictions)."""

    label_correct: bool
    strict: bool
    precision: float
    recall: float


def score_claim(
    gold_label: str,
    gold_sets: Sequence[Sequence[Triple]],
    predicted_label: str,
    predicted_evidence: Sequence[Triple],
    max_sentences: int | None = MAX_SENTENCES,
    max_cells: int | None = MAX_CELLS,
) -> ClaimScore:
    """Truncate the predictions, then score one claim as the official scorer does."""
    kept = truncate(predicted_evidence, max_sentences, max_cells)
    return ClaimScore(
        label_correct=label_correct(gold_label, predicted_label),
        strict=strictly_correct(gold_label, gold_sets, predicted_label, kept),
        precision=evidence_precision(gold_sets, kept),
        recall=evidence_recall(gold_sets, kept),
    )


@dataclass(slots=True)
class Metrics:
    """Official aggregate numbers over ``claims`` claims."""

    claims: int
    feverous_score: float
    label_accuracy: float
    evidence_precision: float
    evidence_recall: float
    evidence_f1: float

    @classmethod
    def of(cls, scores: Sequence[ClaimScore]) -> Metrics:
        n = len(scores)

        def mean(values: Iterable[float]) -> float:
            return sum(values) / n if n else 0.0

        # No claims: the official scorer divides by zero; precision's own default is 1.0.
        precision = mean(s.precision for s in scores) if n else 1.0
        recall = mean(s.recall for s in scores)
        f1 = 2.0 * precision * recall / (precision + recall) if precision + recall else 0.0
        return cls(
            claims=n,
            feverous_score=mean(s.strict for s in scores),
            label_accuracy=mean(s.label_correct for s in scores),
            evidence_precision=precision,
            evidence_recall=recall,
            evidence_f1=f1,
        )


@dataclass(slots=True)
class TableHits:
    """Hits@k of the gold table (any gold table) among the tables ranked by first appearance
    in the predicted evidence, over the ``claims`` claims that name gold tables."""

    claims: int = 0
    hits: dict[int, float] = field(default_factory=dict)


@dataclass(slots=True)
class ScoreReport:
    """Everything ``feverous-es score`` reports. ``overall`` holds the official numbers over the
    scored claims (the gold claims with a prediction, or all of them with ``count_missing``)."""

    overall: Metrics
    by_challenge: dict[str, Metrics]
    confusion: dict[str, dict[str, int]]
    tables: TableHits | None
    gold_claims: int
    predictions: int
    missing: int
    extra: int
    duplicate_predictions: int = 0
    count_missing: bool = False
    claims_without_evidence: int = 0
    malformed_gold: list[MalformedLine] = field(default_factory=list)
    malformed_predictions: list[MalformedLine] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (Hits@k keys as strings)."""
        data = asdict(self)
        if self.tables is not None:
            data["tables"]["hits"] = {str(k): v for k, v in self.tables.hits.items()}
        return data


def table_of(triple: Triple) -> str | None:
    """``"Page_table_t"`` for a cell, header cell, caption or table triple, else ``None``."""
    page, kind, position = triple
    if kind not in TABLE_TYPES:
        return None
    return f"{page}_table_{position.split('_', 1)[0]}"


def ranked_tables(predicted: Iterable[Triple]) -> list[str]:
    """Tables in the order their first element appears in ``predicted``."""
    seen: dict[str, None] = {}
    for triple in predicted:
        table = table_of(triple)
        if table is not None:
            seen.setdefault(table, None)
    return list(seen)


def score(
    gold: Iterable[ClaimRecord],
    predictions: Iterable[PredictionRecord],
    *,
    count_missing: bool = False,
    hits_at: Sequence[int] = HITS_AT,
) -> ScoreReport:
    """Score ``predictions`` against ``gold`` claims, matched by id.

    Prediction lines without ids are matched by position instead (the official EvalAI
    submission has no ids), which needs exactly one prediction per gold claim. A gold claim with
    no prediction is left out of the numbers and counted as ``missing``; with ``count_missing``
    it is scored as the official scorer scores an empty prediction (label wrong, no evidence).
    Raises :class:`ScoreError` if a gold claim has no label or ids are mixed.
    """
    claims = list(gold)
    preds = list(predictions)
    for claim in claims:
        if claim.label is None:
            raise ScoreError(
                f"gold claim {claim.id} (line {claim.line_no}) has no label: a blind file "
                "cannot be scored"
            )
    matched, missing, extra, duplicates = _match(claims, preds)

    scored: list[tuple[ClaimRecord, str, tuple[Triple, ...]]] = []
    for claim in claims:
        prediction = matched.get(claim.key)
        if prediction is not None:
            scored.append((claim, prediction.predicted_label, prediction.predicted_evidence))
        elif count_missing:
            scored.append((claim, "", ()))

    per_claim: list[ClaimScore] = []
    by_challenge: dict[str, list[ClaimScore]] = {}
    confusion: dict[str, dict[str, int]] = {}
    table_claims = 0
    table_hits = dict.fromkeys(hits_at, 0)
    without_evidence = 0
    for claim, label, evidence in scored:
        assert claim.label is not None
        result = score_claim(claim.label, claim.evidence_triples(), label, evidence)
        per_claim.append(result)
        by_challenge.setdefault(claim.challenge or "(none)", []).append(result)
        row = confusion.setdefault(claim.label, {})
        shown = label.upper() or "(missing)"
        row[shown] = row.get(shown, 0) + 1
        without_evidence += not claim.evidence
        if claim.gold_tables:
            table_claims += 1
            ranking = ranked_tables(evidence)
            gold_tables = set(claim.gold_tables)
            first = next((i for i, t in enumerate(ranking) if t in gold_tables), None)
            for k in hits_at:
                table_hits[k] += first is not None and first < k

    return ScoreReport(
        overall=Metrics.of(per_claim),
        by_challenge={name: Metrics.of(s) for name, s in sorted(by_challenge.items())},
        confusion=confusion,
        tables=(
            TableHits(table_claims, {k: table_hits[k] / table_claims for k in hits_at})
            if table_claims
            else None
        ),
        gold_claims=len(claims),
        predictions=len(preds),
        missing=missing,
        extra=extra,
        duplicate_predictions=duplicates,
        count_missing=count_missing,
        claims_without_evidence=without_evidence,
    )


def _match(
    claims: Sequence[ClaimRecord], preds: Sequence[PredictionRecord]
) -> tuple[dict[str, PredictionRecord], int, int, int]:
    """Predictions by claim key, and the missing, extra and duplicate counts."""
    with_ids = sum(p.key is not None for p in preds)
    if preds and with_ids == 0:
        if len(preds) != len(claims):
            raise ScoreError(
                f"the predictions have no ids, so they are matched by position, which needs one "
                f"line per gold claim: {len(preds)} predictions, {len(claims)} gold claims"
            )
        return {c.key: p for c, p in zip(claims, preds, strict=True)}, 0, 0, 0
    if with_ids != len(preds):
        bad = next(p for p in preds if p.key is None)
        raise ScoreError(f"prediction line {bad.line_no} has no id while others have one")
    gold_keys = {c.key for c in claims}
    matched: dict[str, PredictionRecord] = {}
    duplicates = extra = 0
    for prediction in preds:
        key = prediction.key
        assert key is not None
        if key in matched:
            duplicates += 1  # the first prediction of a claim counts
        elif key in gold_keys:
            matched[key] = prediction
        else:
            extra += 1
    return matched, len(gold_keys - matched.keys()), extra, duplicates


def score_files(
    predictions: str | os.PathLike[str],
    gold: str | os.PathLike[str],
    *,
    count_missing: bool = False,
) -> ScoreReport:
    """Read and score a submission file against a gold claim file. Malformed lines are skipped
    and listed in the report; :class:`ScoreError` for an unreadable file, one with no valid
    line, a blind gold file, or predictions that match no gold claim."""
    claims, bad_gold = _read(gold, read_claims, "gold file")
    preds, bad_preds = _read(predictions, read_predictions, "prediction file")
    report = score(claims, preds, count_missing=count_missing)
    if preds and report.missing == len(claims) and report.extra == len(preds):
        raise ScoreError(
            f"none of the {len(preds):,} predictions' ids is in the gold file {gold} "
            "(wrong gold file?)"
        )
    report.malformed_gold = bad_gold
    report.malformed_predictions = bad_preds
    return report


def _read(path: str | os.PathLike[str], reader: Any, what: str) -> tuple[list[Any], list[Any]]:
    records: list[Any] = []
    bad: list[MalformedLine] = []
    try:
        for item in reader(path):
            (bad if isinstance(item, MalformedLine) else records).append(item)
    except FileNotFoundError:
        raise ScoreError(f"{what} {path} does not exist") from None
    except IsADirectoryError:
        raise ScoreError(f"{what} {path} is a directory, not a jsonl file") from None
    except OSError as exc:
        raise ScoreError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    if not records:
        detail = f"; line {bad[0].line_no}: {bad[0].reason}" if bad else " (it is empty)"
        raise ScoreError(f"{what} {path} holds no valid record{detail}")
    return records, bad
