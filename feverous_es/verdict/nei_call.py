"""The NOT ENOUGH INFO call: what retrieval found of a claim, and the rule that reads it.

The call is made only where the evidence holds less than ``covered_below`` of the claim's words
(where it holds them, it speaks of what the claim says and the reader's SUPPORTS or REFUTES
stands); there a claim is NOT ENOUGH INFO when its NEI probability (the ``verdict-nei`` model's,
read on the premises the reader reads) reaches a threshold, or where no one evidence sentence
decides it: each read alone by the reader leaves NOT ENOUGH INFO likely, the NEI probability at a
floor (a sufficiency reading: the verdict's evidence holds nothing that entails or contradicts
the claim).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from feverous_es.index.elements import title_keys
from feverous_es.plugins.interfaces import Candidate
from feverous_es.runtime.files import PACKAGED_MODELS_DIR
from feverous_es.text import claim_spans, marked_words, tokens
from feverous_es.verdict.entailment import EntailmentModel
from feverous_es.verdict.premises import ClaimPremises

NEI_MODEL = "verdict-nei"  # the package's model of the NOT ENOUGH INFO call, when installed


@dataclass(frozen=True)
class NeiRule:
    """When a claim is NOT ENOUGH INFO (:class:`~feverous_es.verdict.options.ClassifierOptions`'
    ``nei_above``, ``nei_covered_below``, ``nei_sentences_above``, ``nei_sentences_floor``):
    decided by the evidence, never by the claim's form."""

    above: float
    covered_below: float
    sentences_above: float
    sentences_floor: float

    @property
    def on(self) -> bool:
        """Whether any claim can be NOT ENOUGH INFO (a threshold of 1 or under)."""
        return min(self.above, self.sentences_above) <= 1.0

    def gates(self, found: Found) -> bool:
        """Whether the call may be made for a claim of which retrieval ``found`` this: its
        evidence holds less than ``covered_below`` of the claim's words."""
        return found.covered < self.covered_below

    def reads_sentences(self, unsure: float) -> bool:
        """Whether a gated claim of NEI probability ``unsure`` needs its evidence sentences
        read alone: the probability alone does not call it, and it is at the floor."""
        return self.sentences_above <= 1.0 and self.sentences_floor <= unsure < self.above

    def says_nei(self, found: Found, unsure: float, alone: float | None = None) -> bool:
        """Whether a claim of which retrieval ``found`` this is NOT ENOUGH INFO: the call
        :meth:`gates` it, and its NEI probability ``unsure`` (the NEI model's reading of the
        premises the verdict read) reaches ``above``, or ``alone`` (the lowest NEI probability
        of its evidence sentences each read alone: no one sentence decides it) reaches
        ``sentences_above`` with ``unsure`` at ``sentences_floor``."""
        if not self.gates(found):
            return False
        undecided = alone is not None and alone >= self.sentences_above
        return unsure >= self.above or (undecided and unsure >= self.sentences_floor)


def nei_probability(premises: ClaimPremises, read: Sequence[float]) -> float:
    """A claim's NOT ENOUGH INFO probability from the NEI model's readings of its premises: the
    mean over a sentence claim's (the whole evidence, the named page alone), the lower of a table
    claim's table and sentences (such a claim is NEI only when neither holds the answer)."""
    return min(read) if premises.on_table else sum(read) / len(read)


def nei_reader(option: str | None, device: str) -> EntailmentModel | None:
    """The NEI call's model an option names; by default the package's ``verdict-nei`` when one
    is installed; none (the reader's own probability) for ``""``."""
    if option:
        return EntailmentModel(option, device=device)
    if option is None and (PACKAGED_MODELS_DIR / NEI_MODEL).is_dir():
        return EntailmentModel(PACKAGED_MODELS_DIR / NEI_MODEL, device=device)
    return None


@dataclass(frozen=True)
class Found:
    """What retrieval found of a claim, as the NOT ENOUGH INFO call reads it: whether a piece
    of evidence comes from a page the claim names, and the share of the claim's words the
    evidence holds."""

    named: bool
    covered: float

    @classmethod
    def of(cls, claim: str, evidence: Sequence[Candidate]) -> Found:
        return cls(names_a_page(claim, evidence), coverage(claim, evidence_words(evidence)))

    def reason(self, unsure: float, alone: float | None = None) -> str:
        """Why a claim is NOT ENOUGH INFO, for the person who reads the verdict: what
        retrieval missed, and (``unsure``: the NEI probability; ``alone``: its evidence
        sentences' each read alone, where they decided) what the models read in it."""
        said = [f"the evidence holds {self.covered:.0%} of the claim's words",
                f"nothing in it bears on the claim (NOT ENOUGH INFO {unsure:.2f})"]  # fmt: skip
        if alone is not None:
            said[1] = (f"no evidence sentence read alone decides the claim (NOT ENOUGH INFO "
                       f"{alone:.2f} at least; {unsure:.2f} on the whole evidence)")  # fmt: skip
        if not self.named:
            said.insert(0, "no evidence comes from a page the claim names")
        return "; ".join(said)


def names_a_page(claim: str, evidence: Sequence[Candidate]) -> bool:
    """Whether a piece of ``evidence`` comes from a page the claim names (a span of it is the
    page's title, as page retrieval matches titles)."""
    spans = claim_spans(claim)
    pages = {candidate.element.page for candidate in evidence}
    return any(key in spans for page in pages for key in title_keys(page))


def evidence_words(evidence: Sequence[Candidate]) -> set[str]:
    """The tokens of the evidence's texts and page titles."""
    return {w for c in evidence for w in tokens(f"{c.element.page} {c.element.text}")}


def coverage(claim: str, held: set[str]) -> float:
    """The share of the claim's words (its tokens but stop words, numbers included) among
    ``held`` (:func:`evidence_words`); 1 for a claim of stop words only."""
    words = marked_words(claim)
    if not words:
        return 1.0
    return len(words & held) / len(words)
