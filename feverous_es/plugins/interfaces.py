"""The stages of the claim pipeline as small typed interfaces, and the values they exchange.

A plugin implements one stage. Its factory is called as ``factory(context, **options)`` with
the :class:`PluginContext` of the run and the options the configuration gives that stage.
Retrieval stages work one claim at a time (their cost is store queries); the model stages
(reranking, verdict) take a batch of claims so inference can batch across them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

import numpy as np

from feverous_es.index.element_ids import element_to_triple
from feverous_es.index.elements import TABLE_TYPES, Element
from feverous_es.index.store import PageHit, Store


class Label(StrEnum):
    SUPPORTS = "SUPPORTS"
    REFUTES = "REFUTES"
    NOT_ENOUGH_INFO = "NOT ENOUGH INFO"


@dataclass(frozen=True, slots=True)
class Query:
    """A claim and its sentence embedding, computed once and shared by every stage."""

    text: str
    vector: np.ndarray


@dataclass(frozen=True, slots=True)
class Candidate:
    """A possible piece of evidence. ``score``: higher is better, comparable only within the
    stage that set it. ``hop``: 1 for the initial retrieval, n for the hop that found it."""

    element: Element
    score: float
    hop: int = 1
    source: str = ""


class Evidence(list[Candidate]):
    """A claim's evidence as retrieval hands it to the verdict: its candidates, best first (a
    list, as a selector returns them), and ``tables``: the whole of each table the verdict may
    read, by ``(page, table number)``, its elements as the store holds them (the pipeline
    hands on the first table the evidence points at: :func:`feverous_es.retrieve.
    evidence_tables.with_tables`). The verdict reads no store: evidence given as a plain list
    holds no table to read."""

    def __init__(
        self,
        candidates: Iterable[Candidate] = (),
        tables: Mapping[tuple[str, int], Sequence[Element]] | None = None,
    ) -> None:
        super().__init__(candidates)
        self.tables: dict[tuple[str, int], Sequence[Element]] = dict(tables or {})


def table_number(element: Element) -> int | None:
    """The table a cell, header cell or caption belongs to (from its id when the element does
    not carry it, as evidence read back from a training cache does); None for other types."""
    if element.type not in TABLE_TYPES:
        return None
    if element.table is not None:
        return element.table
    # positions cell / header_cell "t_r_c", table_caption "t"
    return int(element_to_triple(element.id)[2].split("_", 1)[0])


def evidence_tables(evidence: Sequence[Candidate]) -> list[tuple[str, int]]:
    """The ``(page, table)`` of each table the evidence holds elements of, by first appearance."""
    seen = ((c.element.page, table_number(c.element)) for c in evidence)
    return list(dict.fromkeys((page, t) for page, t in seen if t is not None))


@dataclass(frozen=True, slots=True)
class ReadTable:
    """One table as a verdict read it: the ``rows`` it read, in the table's order
    (``row_numbers``: their positions among the table's data rows), and the cells that hold a
    claim word (``matched``: ``(index into rows, column)`` pairs)."""

    page: str
    table: int
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    row_numbers: tuple[int, ...]
    matched: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Verdict:
    """A claim's label and its probabilities; ``read`` (ids of the evidence elements) and
    ``table`` say what the verdict read, for people (a plugin may leave them empty).

    ``probabilities``: each label's probability as the verdict's models give it (the built-in
    verdict: SUPPORTS and REFUTES from the model that decided, NOT ENOUGH INFO from the
    entailment model, so on the table route they need not sum to 1); ``probability``: the
    label's own entry there, the one number to show. ``why``: for NOT ENOUGH INFO, why the
    evidence does not decide the claim, in a sentence a person reads (empty otherwise)."""

    label: Label
    probability: float
    probabilities: Mapping[Label, float] = field(default_factory=dict)
    read: tuple[str, ...] = ()
    table: ReadTable | None = None
    why: str = ""


class Embed(Protocol):
    def __call__(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class PluginContext:
    """What a plugin may use: the store, the sentence embedder, the device to run models on."""

    store: Store
    embed: Embed
    device: str = "auto"


class PageRetriever(Protocol):
    def retrieve(self, query: Query) -> list[PageHit]: ...


class CandidateRetriever(Protocol):
    def candidates(self, query: Query, pages: Sequence[PageHit]) -> list[Candidate]: ...


class Reranker(Protocol):
    def rerank(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> list[list[Candidate]]:
        """Rescore each claim's candidates; each list comes back best first."""
        ...


@runtime_checkable
class StagedCandidates(Protocol):
    """A candidate retriever that knows part of a claim's pool before the rest (the papelo
    retriever: the pages' elements before the tables are ranked)."""

    def staged_candidates(
        self, query: Query, pages: Sequence[PageHit]
    ) -> Iterator[list[Candidate]]:
        """Yields the candidates known early (their scores may still change), then the whole
        pool, which is what :meth:`CandidateRetriever.candidates` returns."""
        ...


@runtime_checkable
class Prefetching(Protocol):
    """A reranker that can score candidates ahead of :meth:`Reranker.rerank`."""

    def prefetch(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> None:
        """Score what a later ``rerank`` of these candidates needs, and keep it for that call
        (may run on another thread while the candidate stage goes on)."""
        ...


class EvidenceSelector(Protocol):
    def select(self, ranked: Sequence[Candidate]) -> list[Candidate]:
        """The evidence set from candidates ranked best first."""
        ...

    def push(self, evidence: Sequence[Candidate], new: Sequence[Candidate]) -> list[Candidate]:
        """Put ``new`` on top of ``evidence``; what no longer fits the budget falls out."""
        ...


class NextHop(Protocol):
    def propose(self, query: Query, evidence: Sequence[Candidate], hop: int) -> list[Candidate]:
        """Elements still missing from ``evidence`` (none: the chain is complete)."""
        ...


class VerdictModel(Protocol):
    def predict(self, batch: Sequence[tuple[Query, Sequence[Candidate]]]) -> list[Verdict]: ...


PluginFactory = Callable[..., Any]
