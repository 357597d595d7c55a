"""The claim pipeline: pages → candidates → rerank → evidence → next hops → verdict.

Every stage is the plugin the configuration names. A batch of claims moves through each stage
together, so the model stages (reranking, verdict) batch their inference across claims.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from feverous_es.index.backends import open_store
from feverous_es.index.store import PageHit
from feverous_es.plugins.config import PipelineConfig
from feverous_es.plugins.interfaces import (
    Candidate,
    CandidateRetriever,
    EvidenceSelector,
    NextHop,
    PageRetriever,
    PluginContext,
    Query,
    Reranker,
    Verdict,
    VerdictModel,
)
from feverous_es.plugins.registry import load


class EmptyClaimError(ValueError):
    """A claim with no text."""


@dataclass(frozen=True, slots=True)
class HopRecord:
    """What one round of next-hop pursuit did: proposed, kept (pushed on top), pushed out."""

    hop: int
    proposed: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]


@dataclass
class ClaimResult:
    claim: str
    verdict: Verdict
    evidence: list[Candidate]
    pages: list[PageHit]
    hops: list[HopRecord] = field(default_factory=list)


class Pipeline:
    """Runs claims through the configured plugins; ``seconds`` sums the time per stage."""

    def __init__(self, config: PipelineConfig, context: PluginContext) -> None:
        self.config = config
        self.context = context

        def plugin(stage: str):
            return load(stage, config.plugins[stage], context, config.stage_options(stage))

        self.pages: PageRetriever = plugin("pages")
        self.candidates: CandidateRetriever = plugin("candidates")
        self.reranker: Reranker = plugin("reranker")
        self.selector: EvidenceSelector = plugin("selector")
        self.hop: NextHop = plugin("hop")
        self.verdict: VerdictModel = plugin("verdict")
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def _timed(self, stage: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - started

    def verify(self, claim: str) -> ClaimResult:
        return self.verify_many([claim])[0]

    def verify_many(self, claims: Sequence[str]) -> list[ClaimResult]:
        if any(not claim.strip() for claim in claims):
            raise EmptyClaimError("the claim is empty")
        with self._timed("embed"):
            vectors = self.context.embed(list(claims))
        queries = [Query(claim, vector) for claim, vector in zip(claims, vectors, strict=True)]
        with self._timed("pages"):
            pages = [self.pages.retrieve(query) for query in queries]
        with self._timed("candidates"):
            pools = [self.candidates.candidates(q, p) for q, p in zip(queries, pages, strict=True)]
        with self._timed("rerank"):
            ranked = self.reranker.rerank(list(zip(queries, pools, strict=True)))
        with self._timed("select"):
            evidence = [self.selector.select(r) for r in ranked]
        hops = self._pursue(queries, evidence)
        with self._timed("verdict"):
            verdicts = self.verdict.predict(list(zip(queries, evidence, strict=True)))
        return [
            ClaimResult(*fields)
            for fields in zip(claims, verdicts, evidence, pages, hops, strict=True)
        ]

    def _pursue(
        self, queries: Sequence[Query], evidence: list[list[Candidate]]
    ) -> list[list[HopRecord]]:
        """Up to ``config.hops`` rounds; a claim stops when its hop proposes nothing new."""
        records: list[list[HopRecord]] = [[] for _ in queries]
        seen = [{c.element.id for c in chain} for chain in evidence]
        active = list(range(len(queries)))
        for hop in range(2, self.config.hops + 2):
            proposals: dict[int, list[Candidate]] = {}
            with self._timed("hop"):
                for i in active:
                    fresh = [
                        c for c in self.hop.propose(queries[i], evidence[i], hop)
                        if c.element.id not in seen[i]
                    ]  # fmt: skip
                    seen[i].update(c.element.id for c in fresh)
                    if fresh:
                        proposals[i] = fresh
            active = list(proposals)
            if not active:
                break
            with self._timed("rerank"):
                rescored = self.reranker.rerank([(queries[i], proposals[i]) for i in active])
            with self._timed("select"):
                for i, new in zip(active, rescored, strict=True):
                    new = [Candidate(c.element, c.score, hop, c.source) for c in new]
                    before = {c.element.id for c in evidence[i]}
                    evidence[i] = self.selector.push(evidence[i], new)
                    after = {c.element.id for c in evidence[i]}
                    records[i].append(
                        HopRecord(
                            hop,
                            tuple(c.element.id for c in new),
                            tuple(c.element.id for c in evidence[i] if c.element.id not in before),
                            tuple(sorted(before - after)),
                        )
                    )
        return records


class LazyEmbedder:
    """The sentence embedder, loaded on first use (a ``retrieval``-only run that never embeds
    does not pay for the model)."""

    def __init__(self, device: str = "auto") -> None:
        self.device = device
        self._embedder = None

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if self._embedder is None:
            from feverous_es.index.embedder import Embedder

            self._embedder = Embedder(device=self.device)
        return self._embedder.embed(texts)


def open_pipeline(
    store_kind: str, location: str | Path, config: PipelineConfig, device: str = "auto"
) -> Pipeline:
    """A pipeline over the named store; close it with ``pipeline.context.store.close()``."""
    store = open_store(store_kind, location)
    try:
        return Pipeline(config, PluginContext(store, LazyEmbedder(device), device))
    except BaseException:
        store.close()
        raise
