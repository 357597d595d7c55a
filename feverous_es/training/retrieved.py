"""What the retrieval pipeline finds for a training claim, collected once and cached: one record
and one element form for every trainer (the entailment verdict reads the evidence, the hop
generator the pages and the gold, the rankers the first-round candidates)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feverous_es.index.elements import Element, ElementType
from feverous_es.plugins.interfaces import Candidate
from feverous_es.training import datasets
from feverous_es.training.datasets import TrainingClaim


def element_record(element: Element, score: float | None = None, hop: int | None = None) -> dict:
    """An element as the caches keep it (``score`` and ``hop`` when it was a candidate)."""
    record: dict[str, Any] = {
        "id": element.id,
        "page": element.page,
        "type": str(element.type),
        "text": element.text,
        "linearized": element.linearized,
    }
    if score is not None:
        record["score"] = round(float(score), 5)
    if hop is not None:
        record["hop"] = hop
    return record


def record_candidate(record: dict[str, Any]) -> Candidate:
    """A cached element as the evidence a stage reads (a gold element: score 1, first hop)."""
    element = Element(
        record["id"], record["page"], ElementType(record["type"]), record["text"],
        record["linearized"], "", "",
    )  # fmt: skip
    return Candidate(element, float(record.get("score", 1.0)), int(record.get("hop", 1)))


@dataclass
class Retrieved:
    """One claim's retrieval: its pages best first, its gold elements the index holds (gold
    order) and the gold ids it lacks, the first-round candidates best first, and the evidence
    the pipeline ended with."""

    source: str  # the claim file's stem
    id: str
    claim: str
    label: str = ""
    pages: list[str] = field(default_factory=list)
    gold: list[dict[str, Any]] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    ranked: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def gold_ids(self) -> set[str]:
        return {e["id"] for e in self.gold} | set(self.absent)

    def others(self) -> list[dict[str, Any]]:
        """The first-round candidates that are not gold, best first."""
        gold = self.gold_ids()
        return [c for c in self.ranked if c["id"] not in gold]

    def evidence_candidates(self) -> list[Candidate]:
        return [record_candidate(e) for e in self.evidence]


def read_retrieved(path: Path) -> dict[tuple[str, str], Retrieved]:
    """The cached retrievals by (source, id); a torn last line (a killed run) is ignored."""
    return datasets.read_records(path, Retrieved)


def collect_retrieved(
    claims: Sequence[TrainingClaim],
    index: Path,
    cache: Path,
    *,
    store: str = "embedded",
    reranker: str = "retrieval",
    hops: int | None = 0,
    first_round: bool = True,
    device: str = "cpu",
    batch_size: int = 16,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Retrieved]:
    """Each claim's retrieval, from ``cache`` when it holds it, else from the pipeline (its page
    and candidate stages, ``reranker``, ``hops`` next-hop rounds: None, the pipeline's) and
    appended to ``cache``; in the order of ``claims``. ``claim.gold`` names the gold ids.
    ``first_round`` False keeps only the evidence the pipeline ended with: no gold lookups, no
    first-round candidates (the entailment verdict reads nothing else)."""

    def make(pipeline: Any, chunk: Sequence[TrainingClaim]) -> list[Retrieved]:
        found = datasets.gold_in_index(pipeline, chunk) if first_round else {}
        results = pipeline.retrieve_many([c.claim for c in chunk])
        return [
            Retrieved(
                claim.source, claim.id, claim.claim, claim.label,
                evidence=[element_record(c.element, c.score, c.hop) for c in result.evidence],
                **(_first_round(claim, result, found) if first_round else {}),
            )
            for claim, result in zip(chunk, results, strict=True)
        ]  # fmt: skip

    def pipeline() -> Any:
        return datasets.retrieval_pipeline(
            index, store=store, reranker=reranker, hops=hops, device=device
        )

    return datasets.collect_cached(
        claims, cache, Retrieved, pipeline, make, batch_size=batch_size, on_progress=on_progress
    )


def _first_round(claim: TrainingClaim, result: Any, found: dict[str, Element]) -> dict[str, Any]:
    """A retrieval's pages, the claim's gold elements the index holds and the ids it lacks, and
    the first-round candidates, as :class:`Retrieved` fields."""
    return {
        "pages": list(dict.fromkeys(hit.page.title for hit in result.pages)),
        "gold": [element_record(found[i]) for i in claim.gold if i in found],
        "absent": [i for i in claim.gold if i not in found],
        "ranked": [element_record(c.element, c.score) for c in result.ranked],
    }
