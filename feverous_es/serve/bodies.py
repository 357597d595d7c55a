"""What the service's API accepts: each route's request body, with the limits it enforces
(a field out of them is a 422; a body or source over its size a 413)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from feverous_es.index.elements import ElementType

MAX_CLAIM_CHARS = 1000  # a FEVEROUS claim is 10-60 words; 1,000 characters is far beyond
MAX_BATCH_CLAIMS = 64
# A request's work: claims times retrieval rounds at most (the first and each hop); 64 claims at
# the default 7 hops fit, 64 at 10 hops do not.
MAX_CLAIM_ROUNDS = 512
MAX_HOPS = 10
MAX_K = 100
MAX_EVIDENCE_PIECES = 256
# A source is read in windows, ~8 ms a window and a claim on 2 cores: 100,000 characters (a
# long web page; WiCE's longest is ~17,000 words) and 5,000 of text (~40 sentences) keep the
# longest request within the request deadline.
MAX_SOURCE_CHARS = 100_000
MAX_TEXT_CHARS = 5_000
MAX_BODY_BYTES = 256 * 1024  # a full batch of the longest claims is 64 kB; the longest source

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("String should have at least 1 character besides whitespace")
    return text


# A text kept as sent, whitespace and all: entail's answers give offsets into it.
SentText = Annotated[str, AfterValidator(_not_blank)]
Claim = Annotated[Text, StringConstraints(max_length=MAX_CLAIM_CHARS)]
Hops = Annotated[int | None, Field(ge=0, le=MAX_HOPS, description="Next-hop rounds.")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VerifyRequest(_Strict):
    claim: Claim = Field(description=f"The claim, 1-{MAX_CLAIM_CHARS} characters.")
    hops: Hops = None
    evidence_scores: bool = Field(
        False,
        description="Also score each sentence the verdict read on its own with the entailment "
        "model (decided.scores: label probabilities by element id).",
    )


class BatchRequest(_Strict):
    claims: list[Claim] = Field(min_length=1, max_length=MAX_BATCH_CLAIMS)
    hops: Hops = None


class EntailRequest(_Strict):
    claim: Claim | None = Field(
        None, description=f"One claim, 1-{MAX_CLAIM_CHARS} characters (or give `text`)."
    )
    text: SentText | None = Field(
        None, description=f"A text of several claims, checked sentence by sentence, at most "
        f"{MAX_TEXT_CHARS} characters (413 beyond; or give `claim`).",
    )  # fmt: skip
    evidence: list[SentText] = Field(
        min_length=1, max_length=MAX_EVIDENCE_PIECES,
        description=f"The source, in pieces read in order as one text of at most "
        f"{MAX_SOURCE_CHARS} characters (413 beyond): a sentence, a page, a document.",
    )  # fmt: skip
    title: str = Field("", max_length=200, description="The page the evidence is from.")
    documents: bool = Field(
        False, description="Each evidence item is a document of its own (an answer's sources, "
        "a RAG answer's passages): no window crosses two, and the answer names the one that "
        "decided (`document`).",
    )  # fmt: skip

    @model_validator(mode="after")
    def _one_of_claim_and_text(self) -> EntailRequest:
        if (self.claim is None) == (self.text is None):
            raise ValueError("give either claim or text")
        return self


class SearchRequest(_Strict):
    query: Claim
    k: int = Field(10, ge=1, le=MAX_K)
    mode: Literal["hybrid", "bm25", "knn"] = "hybrid"
    pages: list[Text] = Field(default_factory=list, max_length=50)
    types: list[ElementType] = Field(default_factory=list)
