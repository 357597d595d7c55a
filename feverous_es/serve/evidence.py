"""``evidence_scores`` of ``POST /v1/verify``: each sentence the verdict read, scored alone."""

from __future__ import annotations

from feverous_es.verdict.inputs import TEXT_TYPES
from feverous_es.verify.pipeline import ClaimResult, Pipeline


def evidence_scores(result: ClaimResult, pipeline: Pipeline) -> dict[str, dict[str, float]]:
    """Each sentence or list item the verdict read, scored on its own by the verdict's
    entailment model, by element id (empty for a verdict plugin that cannot)."""
    score = getattr(pipeline.verdict, "score_evidence", None)
    read = set(result.verdict.read)
    pieces = [c for c in result.evidence if c.element.id in read and c.element.type in TEXT_TYPES]
    if score is None or not pieces:
        return {}
    rows = score(result.claim, pieces)
    return {
        c.element.id: {label.value: p for label, p in row.items()}
        for c, row in zip(pieces, rows, strict=True)
    }
