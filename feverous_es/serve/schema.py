"""The answers' JSON schemas, for the OpenAPI description (``/openapi.json``).

The routes answer what the CLI's ``--json`` prints (:func:`feverous_es.output.report.
result_to_dict`, :func:`feverous_es.index.search.hit_to_dict`, ``Entailment.to_dict``) as it
is; these models document those shapes field by field and are checked against real answers in
the tests (``extra="forbid"``: a field added to an answer must be named here). Every error is
:class:`ErrorAnswer`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

LabelName = Literal["SUPPORTS", "REFUTES", "NOT ENOUGH INFO"]


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EvidenceItem(_Answer):
    id: str = Field(description="FEVEROUS element id, e.g. 'Paris_sentence_0'.")
    type: Literal["sentence", "cell", "header_cell", "table_caption", "item"]
    page: str
    text: str
    score: float = Field(description="The reranker's score (higher is better).")
    hop: int = Field(description="1: the first retrieval; 2 and on: the next-hop round.")
    source: str = Field(description="What proposed it: pages, tables, or a link from an element.")


class Decided(_Answer):
    evidence: list[str] = Field(description="Ids of the evidence the verdict read.")
    table: dict[str, Any] | None = Field(
        description="The table the verdict read (page, rows, matched cells), if it read one."
    )
    words: list[str] = Field(description="The claim's words the evidence is highlighted by.")
    scores: dict[str, dict[LabelName, float]] | None = Field(
        None,
        description="With evidence_scores: each sentence read, scored on its own by the "
        "entailment model.",
    )


class PageItem(_Answer):
    title: str
    score: float


class HopItem(_Answer):
    hop: int
    proposed: list[str]
    added: list[str]
    removed: list[str]


class VerifyAnswer(_Answer):
    claim: str
    label: LabelName
    probability: float = Field(
        description="The label's probability: its entry in `probabilities`, the one figure to show."
    )
    probabilities: dict[LabelName, float] = Field(
        description="Each label's probability as the verdict's models give it: SUPPORTS and "
        "REFUTES from the model that decided (the entailment model on the sentence route, the "
        "table verdict on the table route), NOT ENOUGH INFO from the entailment model (the "
        "label is NOT ENOUGH INFO where the verdict's NEI rule says so: `why`). On the table "
        "route they need not sum to 1."
    )
    why: str = Field(
        description="For NOT ENOUGH INFO, why the evidence does not decide the claim (no "
        "evidence from a page the claim names; the reader found nothing that decides it); "
        "empty for SUPPORTS and REFUTES."
    )
    evidence: list[EvidenceItem] = Field(description="The evidence budget, best first per kind.")
    decided: Decided
    pages: list[PageItem] = Field(description="The pages retrieved for the claim.")
    hops: list[HopItem] = Field(description="What each next-hop round proposed and changed.")


class BatchAnswer(_Answer):
    results: list[VerifyAnswer] = Field(description="One answer a claim, in request order.")


class ErrorAnswer(_Answer):
    error: str = Field(description="What went wrong, in one line.")


class SearchHit(_Answer):
    score: float = Field(description="The search's score (BM25, cosine or their fusion).")
    id: str = Field(description="FEVEROUS element id.")
    page: str
    type: Literal["sentence", "cell", "header_cell", "table_caption", "item"]
    text: str
    linearized: str = Field(description="What BM25 reads: a cell with its row and headers.")
    vector_key: str = Field(description="The key of the element's vector (a table row's cells "
                            "share one).")  # fmt: skip
    embed_text: str = Field(description="The text the vector was computed from.")
    links: list[str] = Field(description="Pages the element links to.")
    section_path: list[str] = Field(description="The section headings above the element.")
    context: list[str] = Field(description="Context the element is read with (e.g. the "
                               "section's title).")  # fmt: skip
    table: int | None
    row: int | None
    column: int | None
    list_index: int | None
    level: int | None


CODE_POINTS = (
    "Offsets count Unicode code points, as Python does (a UTF-16 string, as in "
    "JavaScript, counts a character outside the BMP, such as an emoji, as two)."
)


class SpanItem(_Answer):
    start: int = Field(
        description="Where the window starts in the source as sent: the evidence pieces joined "
        "a line each, or with `documents` the deciding document (characters the text rule "
        "removed before reading, docs/operations.md, still counted). " + CODE_POINTS
    )
    end: int = Field(description="Where it ends (exclusive): `text` is `source[start:end]`.")
    text: str


class EntailAnswer(_Answer):
    claim: str
    premise: str = Field(description="The deciding window as the model read it.")
    label: LabelName = Field(
        description="SUPPORTS when a window's P(SUPPORTS) reaches `threshold`; else REFUTES "
        "when a window reads REFUTES; else NOT ENOUGH INFO."
    )
    probabilities: dict[LabelName, float] = Field(description="The deciding window's.")
    supported: bool
    threshold: float = Field(description="The reader's grounding threshold (chosen on WiCE dev).")
    window: SpanItem = Field(description="The window of the source that decided the label.")
    windows: int = Field(description="Windows of the source read.")
    document: int | None = Field(
        description="With `documents`: the index of the evidence item (document) that decided; "
        "`window`'s offsets are in it. Else null."
    )


class SentenceAnswer(EntailAnswer):
    start: int = Field(description="The sentence's offsets in the text as sent. " + CODE_POINTS)
    end: int


class TextSummary(_Answer):
    sentences: int
    supported: int
    not_supported: list[int] = Field(description="Indices of the sentences not supported.")


class TextCheckAnswer(_Answer):
    text: str
    sentences: list[SentenceAnswer]
    summary: TextSummary
