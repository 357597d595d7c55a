"""Contrastive claims made from the dump itself, for a reader that binds the claim's subject
and notices a changed attribute (VitaminC's idea: Schuster et al. 2021).

A page's lead sentence ``X is a D …`` (read without link markup) gives three pairs, all read
against evidence laid out as the verdict reads retrieved sentences (``[Title] sentence …``):

* ``contrastive-lead`` (SUPPORTS): ``X is a D.`` (or, where the change is a number, the whole
  lead) against the page's first two sentences and a *donor* page's lead, shuffled;
* ``contrastive-<kind>`` (REFUTES): the same claim with one attribute taken from the donor, a
  page of the same kind: its nationality (``nationality``), its whole description
  (``description``), or a number of the lead changed (``number``), against the same evidence.
  The donor's sentence states the new attribute about *another* subject, as retrieved evidence
  does (``Henri Schoeman is an American swimmer`` beside Johnny Weissmuller's lead);
* ``contrastive-other-subject`` (NOT ENOUGH INFO): the changed claim against evidence about
  other subjects only: the donor's lead and a third page's.

Pages are split like claims (held out by page title, the same seed), so a held-out page's
pairs measure the failure classes on claims the model never saw.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from feverous_es.eval.claims import LABELS, NOT_ENOUGH_INFO
from feverous_es.index.dump.linearize import sentence, strip_links
from feverous_es.training.verdict.entailment_data import SENTENCE, Pair, Split

SOURCE = "contrastive"  # the split's source name: a page is held out for all its pairs
SUPPORTS, REFUTES = LABELS[0], LABELS[1]
KINDS = ("nationality", "number", "description")
# The pairs' sources: one label each (SUPPORTS, NOT ENOUGH INFO, then REFUTES per kind).
SOURCES = (f"{SOURCE}-lead", f"{SOURCE}-other-subject", *(f"{SOURCE}-{k}" for k in KINDS))
# Demonyms, longest first so that "South African" is read before "African".
DEMONYMS = tuple(sorted((
    "American", "British", "English", "Scottish", "Welsh", "Irish", "Canadian", "Australian",
    "French", "German", "Italian", "Spanish", "Portuguese", "Dutch", "Belgian", "Swiss",
    "Austrian", "Swedish", "Norwegian", "Danish", "Finnish", "Icelandic", "Polish", "Czech",
    "Slovak", "Hungarian", "Romanian", "Bulgarian", "Greek", "Turkish", "Russian", "Ukrainian",
    "Serbian", "Croatian", "Slovenian", "Bosnian", "Albanian", "Estonian", "Latvian",
    "Lithuanian", "Georgian", "Armenian", "Israeli", "Iranian", "Iraqi", "Syrian", "Lebanese",
    "Egyptian", "Moroccan", "Algerian", "Tunisian", "Nigerian", "Ghanaian", "Kenyan", "Ethiopian",
    "Ugandan", "Zimbabwean", "Indian", "Pakistani", "Bangladeshi", "Chinese", "Japanese",
    "Korean", "Vietnamese", "Thai", "Indonesian", "Malaysian", "Filipino", "Singaporean",
    "Mexican", "Brazilian", "Argentine", "Chilean", "Colombian", "Peruvian", "Venezuelan",
    "Cuban", "Jamaican", "Roman", "Soviet", "Byzantine", "Persian", "Ottoman", "African", "Asian",
    "European", "South African", "New Zealand", "Sri Lankan", "Northern Irish", "Puerto Rican",
    "Costa Rican", "Saudi Arabian", "Hong Kong",
), key=lambda d: -len(d)))  # fmt: skip
_DEMONYM = re.compile(r"\b(" + "|".join(map(re.escape, DEMONYMS)) + r")\b")
# "X (…) is/was a/an/the D" up to the description's end: a comma, a clause or a preposition.
_LEAD = re.compile(
    r"^(?P<subject>[A-Z][^,()]{1,80}?)(?: \([^)]*\))?(?:, [^,]{1,60},)? "
    r"(?P<verb>is|was|are|were) (?P<article>an?|the) "
    r"(?P<description>[^,.;:()]{3,80}?)(?=[,.;:(]| who | which | that | and | from | in "
    r"| born | known | best | for | with | based | whose | where | between )"
)
_NUMBER = re.compile(r"\b(1[0-9]{3}|20[0-9]{2}|[1-9][0-9]{0,2})\b")


@dataclass(frozen=True)
class Lead:
    """A page whose lead sentence reads ``subject verb article description …``."""

    page: str
    subject: str
    verb: str
    article: str
    description: str
    sentences: tuple[str, ...]  # the page's first sentences, links stripped

    @property
    def demonym(self) -> str:
        found = _DEMONYM.search(self.description)
        return found.group(1) if found else ""

    def clause(self, description: str) -> str:
        article = self.article
        if article != "the":
            article = "an" if description[:1].lower() in "aeiou" else "a"
        return f"{self.subject} {self.verb} {article} {description}."

    def evidence(self, count: int = 2) -> list[str]:
        return [sentence(self.page, s) for s in self.sentences[:count]]


def read_leads(rows: Iterator[tuple[int, str, str]]) -> list[Lead]:
    """The pages of a dump (``WikiDB.rows()``) whose lead sentence fits the pattern."""
    leads = []
    for _, page, text in rows:
        try:
            data = json.loads(text)
        except ValueError:
            continue
        first = [data.get(f"sentence_{i}") for i in range(2)]
        if not isinstance(first[0], str):
            continue
        texts = tuple(strip_links(s)[0].strip() for s in first if isinstance(s, str))
        match = _LEAD.match(texts[0])
        # A description of one word ("a species" of "… a species of fly") says too little; a
        # subject that shares no word with the title is a pronoun or another thing.
        if (
            match
            and len(match["subject"].split()) <= 8
            and len(match["description"].split()) > 1
            and _words(match["subject"]) & _words(page)
        ):
            leads.append(Lead(page, match["subject"], match["verb"], match["article"],
                              match["description"].strip(), texts))  # fmt: skip
    return leads


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) > 2}


def _changed_number(text: str, rng: random.Random) -> str | None:
    """``text`` with one of its numbers changed (a year by 1-30, a count by a factor), or None."""
    found = list(_NUMBER.finditer(text))
    if not found:
        return None
    match = rng.choice(found)
    value = int(match.group(1))
    if value >= 1000:
        new = value + rng.choice([-1, 1]) * rng.randint(1, 30)
    else:
        new = value * rng.randint(2, 5) + rng.randint(0, 3)
    return text[: match.start()] + str(new) + text[match.end() :]


def _swap(
    lead: Lead, donors: Sequence[Lead], kind: str, rng: random.Random
) -> tuple[str, str, Lead] | None:
    """(true claim, changed claim, donor) for one kind of change, or None where the page has
    no such attribute or no donor fits."""
    if kind == "number":
        changed = _changed_number(lead.sentences[0], rng)
        return (lead.sentences[0], changed, rng.choice(donors)) if changed else None
    if kind == "nationality":
        if not lead.demonym:
            return None
        fitting = [d for d in donors if d.demonym and d.demonym != lead.demonym]
        if not fitting:
            return None
        donor = rng.choice(fitting)
        changed = _DEMONYM.sub(donor.demonym, lead.description, count=1)
        return lead.clause(lead.description), lead.clause(changed), donor
    if lead.article == "the":  # "X is the second-longest river": no other page's description fits
        return None
    head = lead.description.split()[-1].lower()
    fitting = [
        d for d in donors
        # the same kind of page: a person (a demonym) of another nation for a person, else a
        # thing for a thing
        if d.verb == lead.verb and d.article != "the"
        and (d.demonym != lead.demonym if lead.demonym else not d.demonym)
        and d.description.split()[-1].lower() != head
    ]  # fmt: skip
    if not fitting:
        return None
    donor = rng.choice(fitting)
    return lead.clause(lead.description), lead.clause(donor.description), donor


def contrastive_pairs(leads: Sequence[Lead], pages: int, split: Split) -> list[Pair]:
    """Three pairs (SUPPORTS, REFUTES, NOT ENOUGH INFO) for each of a seeded sample of
    ``pages`` leads, each with one kind of change: the first of KINDS the page has (a
    description fits almost every page, so it comes last)."""
    rng = random.Random(split.seed)
    leads = list(leads)
    chosen = rng.sample(leads, min(pages, len(leads)))
    pairs: list[Pair] = []
    for lead in chosen:
        donors = rng.sample(leads, min(200, len(leads)))
        donors = [d for d in donors if d.page != lead.page]
        for kind in KINDS:
            if (made := _swap(lead, donors, kind, rng)) is not None:
                break
        else:
            continue
        true_claim, changed, donor = made
        third = rng.choice([d for d in donors if d.page != donor.page])
        evidence = [*lead.evidence(), *donor.evidence(1)]
        rng.shuffle(evidence)
        premise = " ".join(evidence)
        other = " ".join(rng.sample([*donor.evidence(1), *third.evidence(1)], 2))
        held = split.held_out(SOURCE, lead.page)
        for source, claim, text, label in (
            (f"{SOURCE}-lead", true_claim, premise, SUPPORTS),
            (f"{SOURCE}-{kind}", changed, premise, REFUTES),
            (f"{SOURCE}-other-subject", changed, other, NOT_ENOUGH_INFO),
        ):
            pairs.append(Pair(source, lead.page, claim, text, label, SENTENCE, held_out=held))
    return pairs
