"""The claim pipeline: pages → candidates → rerank → evidence → next hops → verdict.

Every stage is the plugin the configuration names. A batch of claims moves through each stage
together, so the model stages (reranking, verdict) batch their inference across claims.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from feverous_es.errors import EmptyClaimError, WorkAbandoned
from feverous_es.index.backends import open_store
from feverous_es.index.store import PageHit
from feverous_es.input_text import clean_text
from feverous_es.plugins.config import PipelineConfig, load_config
from feverous_es.plugins.interfaces import (
    Candidate,
    CandidateRetriever,
    Evidence,
    EvidenceSelector,
    NextHop,
    PageRetriever,
    PluginContext,
    Prefetching,
    Query,
    Reranker,
    StagedCandidates,
    Verdict,
    VerdictModel,
)
from feverous_es.plugins.registry import factory, load
from feverous_es.retrieve.evidence_tables import with_tables
from feverous_es.runtime.costs import METER, CountedStore

if TYPE_CHECKING:
    from feverous_es.runtime.embedder import Embedder

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class HopRecord:
    """What one round of next-hop pursuit did: proposed, kept (pushed on top), pushed out."""

    hop: int
    proposed: tuple[str, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]


@dataclass
class Retrieval:
    """A claim's evidence without a verdict: what the verdict reads (``evidence``: its
    candidates and the table it points at first, whole). ``ranked``: every first-round
    candidate in the reranker's order, before the evidence budget took ``evidence`` from it."""

    claim: str
    evidence: Evidence
    pages: list[PageHit]
    hops: list[HopRecord] = field(default_factory=list)
    ranked: list[Candidate] = field(default_factory=list)


@dataclass(frozen=True)
class _Gathered:
    """A batch after the stages before the models."""

    claims: list[str]
    queries: list[Query]
    pages: list[list[PageHit]]
    pools: list[list[Candidate]]


@dataclass
class ClaimResult:
    """A claim's verdict and the evidence that decided it."""

    claim: str
    verdict: Verdict
    evidence: Evidence
    pages: list[PageHit]
    hops: list[HopRecord] = field(default_factory=list)


class Pipeline:
    """Runs claims through the configured plugins; ``seconds`` sums the time per stage and
    ``costs`` what each stage counted (model runs, rows and tokens, store calls and hits:
    :mod:`feverous_es.runtime.costs`).

    The retrieval stages (pages, candidates, hops) take a batch's claims one at a time, or as
    many at once as the store's ``concurrent_claims`` says (threads: an Elasticsearch cluster
    answers one claim's searches while this process reads another's), so those plugins must
    be safe to call from several threads; the model stages batch the claims instead.

    Open one over an index with :meth:`open` and close it (or use it as a context manager)::

        with Pipeline.open("feverous-index") as pipeline:
            result = pipeline.verify("Some claim.")
    """

    def __init__(self, config: PipelineConfig, context: PluginContext) -> None:
        self.config = config
        self.context = context

        def plugin(stage: str) -> Any:
            return load(stage, config.plugins[stage], context, config.stage_options(stage))

        self._plugin = plugin
        self.pages: PageRetriever = plugin("pages")
        self.candidates: CandidateRetriever = plugin("candidates")
        self.reranker: Reranker = plugin("reranker")
        self.selector: EvidenceSelector = plugin("selector")
        self.hop: NextHop = plugin("hop")
        factory("verdict", config.plugins["verdict"])  # a wrong name fails here, not later
        self._verdict: VerdictModel | None = None
        self.seconds: dict[str, float] = defaultdict(float)
        self.costs: dict[str, Counter[str]] = defaultdict(Counter)
        # Asked before each stage (each hop round too): True stops the work with WorkAbandoned
        # (the service sets it while nobody waits for a batch's answer any more).
        self.stop_when: Callable[[], bool] | None = None
        self._tallying = threading.Lock()
        workers = context.store.concurrent_claims
        self._claim_threads = ThreadPoolExecutor(workers) if workers > 1 else None
        # Where the candidate stage tells a claim's pages' elements early and the reranker can
        # score them ahead, they are scored while the tables are ranked: the ranker's runs
        # (outside the interpreter lock) beside the candidate stage's Python.
        self._staged: tuple[StagedCandidates, Prefetching] | None = None
        staged, reranker = self.candidates, self.reranker
        if isinstance(staged, StagedCandidates) and isinstance(reranker, Prefetching):
            self._staged = (staged, reranker)
        # Starts no thread until a prefetch is submitted.
        self._prefetch = ThreadPoolExecutor(workers, thread_name_prefix="feverous-es-prefetch")

    @classmethod
    def open(
        cls,
        index: str | Path,
        *,
        store: str = "embedded",
        config: PipelineConfig | str | Path | None = None,
        device: str = "auto",
        reader: str | None = None,
    ) -> Pipeline:
        """A pipeline over ``index``: an embedded index directory, or for
        ``store="elasticsearch"`` the cluster's URL or config file (``""``: the environment's).
        ``config``: a :class:`PipelineConfig`, a TOML file, or None for the defaults and
        ``$FEVEROUS_ES_CONFIG``. ``device``: ``"auto"``, ``"cpu"`` or ``"cuda"``. ``reader``:
        the verdict's reader over the configuration's: ``"default"``, ``"large"`` (the 110 M
        tier: slower, better on FM2) or a model directory."""
        if not isinstance(config, PipelineConfig):
            config = load_config(Path(config) if config is not None else None)
        if reader is not None:
            config = config.with_reader(reader)
        opened = CountedStore(open_store(store, index))
        try:
            return cls(config, PluginContext(opened, LazyEmbedder(device), device))
        except BaseException:
            opened.close()
            raise

    def close(self) -> None:
        """Close the store (the models need no closing)."""
        if self._claim_threads is not None:
            self._claim_threads.shutdown()
        self._prefetch.shutdown()
        self.context.store.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def verdict(self) -> VerdictModel:
        """The verdict plugin, loaded on first use: retrieval alone never loads its model."""
        if self._verdict is None:
            self._verdict = self._plugin("verdict")
        return self._verdict

    def _each(self, work: Callable[..., T], *columns: Sequence[Any]) -> list[T]:
        """``work(*row)`` for each claim's row of ``columns``, in order (concurrently where
        the store allows it)."""
        rows = list(zip(*columns, strict=True))
        if self._claim_threads is None or len(rows) < 2:
            return [work(*row) for row in rows]
        return list(self._claim_threads.map(lambda row: work(*row), rows))

    @contextmanager
    def _timed(self, stage: str) -> Iterator[None]:
        """Time the block into ``seconds`` and what this thread counts in it into ``costs``;
        first, stop if :attr:`stop_when` says so."""
        if self.stop_when is not None and self.stop_when():
            raise WorkAbandoned(f"stopped before the {stage} stage: nobody waits for the answer")
        started = time.perf_counter()
        with METER.tally() as counted:
            try:
                yield
            finally:
                with self._tallying:  # stages may end on several threads at once
                    self.seconds[stage] += time.perf_counter() - started
                    self.costs[stage].update(counted)

    def verify(self, claim: str) -> ClaimResult:
        return self.verify_many([claim])[0]

    def verify_many(self, claims: Sequence[str]) -> list[ClaimResult]:
        """Verdicts for claims, batched through every stage together."""
        return self._judge(self._rank(self._gather(claims)))

    def verify_batches(self, batches: Iterable[Sequence[str]]) -> Iterator[list[ClaimResult]]:
        """:meth:`verify_many` of each batch, in order, with the next batch's first stages
        (embedding, pages, candidates: store reads and Python, mostly one core) running on a
        second thread while this batch's models run. The results are those of
        :meth:`verify_many`: no stage reads another claim's results, and a model scores a pair
        alike in any batch. Each stage's ``costs`` stay its own (tallied per thread); its
        ``seconds`` overlap the other thread's."""
        iterator = iter(batches)
        with ThreadPoolExecutor(1, thread_name_prefix="feverous-es-gather") as ahead:
            first = next(iterator, None)
            pending = ahead.submit(self._gather, first) if first is not None else None
            while pending is not None:
                gathered = pending.result()
                following = next(iterator, None)
                pending = ahead.submit(self._gather, following) if following is not None else None
                # A consumer that stops early waits here for the batch already gathering.
                yield self._judge(self._rank(gathered))

    def retrieve(self, claim: str) -> Retrieval:
        return self.retrieve_many([claim])[0]

    def retrieve_many(self, claims: Sequence[str]) -> list[Retrieval]:
        """Each claim's evidence: every stage but the verdict."""
        return self._rank(self._gather(claims))[1]

    def _gather(self, claims: Sequence[str]) -> _Gathered:
        """The stages before the models: each claim's query, pages and candidate pool."""
        claims = [clean_text(claim) for claim in claims]
        if any(not claim.strip() for claim in claims):
            raise EmptyClaimError("the claim is empty")
        with self._timed("embed"):
            vectors = self.context.embed(list(claims))
        queries = [Query(claim, vector) for claim, vector in zip(claims, vectors, strict=True)]
        with self._timed("pages"):
            pages = self._each(self.pages.retrieve, queries)
        with self._timed("candidates"):
            pools = self._each(self._pool, queries, pages)
        return _Gathered(list(claims), queries, pages, pools)

    def _timed_call(self, stage: str, work: Callable[..., T], *args: Any) -> T:
        with self._timed(stage):
            return work(*args)

    def _pool(self, query: Query, pages: Sequence[PageHit]) -> list[Candidate]:
        """A claim's candidate pool, its early part scored by the reranker meanwhile when both
        stages can (timed and counted as the rerank stage's, over this stage's time)."""
        if self._staged is None:
            return self.candidates.candidates(query, pages)
        candidates, reranker = self._staged
        steps = candidates.staged_candidates(query, pages)
        early = [(query, next(steps))]
        scoring = self._prefetch.submit(self._timed_call, "rerank", reranker.prefetch, early)
        try:
            *_, pool = steps
        finally:
            scoring.result()
        return pool

    def _rank(self, gathered: _Gathered) -> tuple[list[Query], list[Retrieval]]:
        """Rerank, select and pursue the next hops: each claim's evidence."""
        queries, pools = gathered.queries, gathered.pools
        with self._timed("rerank"):
            ranked = self.reranker.rerank(list(zip(queries, pools, strict=True)))
        with self._timed("select"):
            evidence = [self.selector.select(r) for r in ranked]
        hops = self._pursue(queries, evidence, pools)
        with self._timed("select"):  # the evidence handed on: its first table read whole
            handed = self._each(with_tables, evidence, [self.context.store] * len(evidence))
        fields = zip(gathered.claims, handed, gathered.pages, hops, ranked, strict=True)
        return queries, [Retrieval(*row) for row in fields]

    def _judge(self, found: tuple[list[Query], list[Retrieval]]) -> list[ClaimResult]:
        queries, retrievals = found
        verdict = self.verdict
        with self._timed("verdict"):
            verdicts = verdict.predict(
                [(q, r.evidence) for q, r in zip(queries, retrievals, strict=True)]
            )
        return [
            ClaimResult(r.claim, v, r.evidence, r.pages, r.hops)
            for r, v in zip(retrievals, verdicts, strict=True)
        ]

    def _pursue(
        self,
        queries: Sequence[Query],
        evidence: list[list[Candidate]],
        pools: Sequence[Sequence[Candidate]],
    ) -> list[list[HopRecord]]:
        """Up to ``config.hops`` rounds; a claim stops when its hop proposes nothing new.

        A hop's proposals are reranked together with everything the claim was scored against
        before (its first-round pool and earlier proposals, as retrieved), and the evidence
        takes its new scores from the same call: a reranker that standardizes scores per claim
        (``retrieval_weight``) then puts proposals on the evidence's scale, instead of making
        the best of two proposals look as strong as the best first-round sentence."""
        records: list[list[HopRecord]] = [[] for _ in queries]
        seen = [{c.element.id for c in chain} for chain in evidence]
        scored = [{c.element.id: c for c in pool} for pool in pools]
        active = list(range(len(queries)))
        for hop in range(2, self.config.hops + 2):
            proposals: dict[int, list[Candidate]] = {}
            with self._timed("hop"):
                proposed = self._each(
                    self.hop.propose,
                    [queries[i] for i in active],
                    [evidence[i] for i in active],
                    [hop] * len(active),
                )
                for i, candidates in zip(active, proposed, strict=True):
                    fresh = [c for c in candidates if c.element.id not in seen[i]]
                    seen[i].update(c.element.id for c in fresh)
                    if fresh:
                        proposals[i] = fresh
                        scored[i].update((c.element.id, c) for c in fresh)
            active = list(proposals)
            if not active:
                break
            with self._timed("rerank"):
                rescored = self.reranker.rerank(
                    [(queries[i], [*scored[i].values()]) for i in active]
                )
            with self._timed("select"):
                for i, ranked in zip(active, rescored, strict=True):
                    score = {c.element.id: c.score for c in ranked}
                    mine = {c.element.id for c in proposals[i]}
                    new = [
                        Candidate(c.element, c.score, hop, c.source)
                        for c in ranked
                        if c.element.id in mine
                    ]
                    before = [
                        replace(c, score=score.get(c.element.id, c.score)) for c in evidence[i]
                    ]
                    evidence[i] = self.selector.push(before, new)
                    held = {c.element.id for c in before}
                    after = {c.element.id for c in evidence[i]}
                    records[i].append(
                        HopRecord(
                            hop,
                            tuple(c.element.id for c in new),
                            tuple(c.element.id for c in evidence[i] if c.element.id not in held),
                            tuple(sorted(held - after)),
                        )
                    )
        return records


class LazyEmbedder:
    """The sentence embedder, loaded on first use (a ``retrieval``-only run that never embeds
    does not pay for the model)."""

    def __init__(self, device: str = "auto") -> None:
        self.device = device
        self._embedder: Embedder | None = None
        self._loading = threading.Lock()  # verify_batches embeds on two threads

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        with self._loading:
            if self._embedder is None:
                from feverous_es.runtime.embedder import Embedder

                # A claim is one text: one run on every core (threads=0, ONNX Runtime's count)
                # reads it faster than the side-by-side batches an index build wants.
                self._embedder = Embedder(device=self.device, threads=0)
        return self._embedder.embed(texts)
