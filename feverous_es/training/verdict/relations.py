"""Simple factual claims about a page's lead, true and changed: what a person types first
("The Eiffel Tower was named after Gustave Eiffel.", "The chemical symbol of thulium is Tm."),
each with a twin whose object is another page's.

From the first two sentences of a page whose lead :mod:`~feverous_es.training.verdict.contrastive`
reads (links stripped), one claim of each relation the page states, both ways:

* ``relation-true-named-after`` (SUPPORTS) ``X was named after Y.`` and ``relation-named-after``
  (REFUTES) with another page's namesake;
* ``relation-true-made-by`` / ``relation-made-by``: ``X was written by Y.`` (directed, composed,
  designed, founded … by), the maker changed;
* ``relation-true-symbol`` / ``relation-symbol``: ``The chemical symbol of X is Y.``, another
  element's symbol;
* ``relation-true-located-in`` / ``relation-located-in``: ``X is in Y.`` from ``X is a D in Y``,
  another page's place.

A claim is worded one of several ways (:data:`WORDINGS`; ``wording`` picks one, seeded by the
page): training reads true restatements in words the lead does not use. Each is read, as the
attribute claims are, against the page's first two sentences and the donor's lead, shuffled
(the donor states the changed object about another subject). Pages are held out as the
contrastive pairs hold them out (the same source name and seed).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from feverous_es.training.verdict.contrastive import REFUTES, SOURCE, SUPPORTS, Lead
from feverous_es.training.verdict.entailment_data import SENTENCE, Pair, Split

PREFIX = "relation"
KINDS = ("named-after", "made-by", "symbol", "located-in")
CLASSES = {
    **{f"{PREFIX}-true-{kind}": SUPPORTS for kind in KINDS},
    **{f"{PREFIX}-{kind}": REFUTES for kind in KINDS},
}
_END = r"(?=,|\.|;|\(| who | whose | which | because | and | in | for | from | with | on |$)"
_NAME = r"[A-Z][\w'\-.]*(?: (?:[A-Z][\w'\-.]*|de|von|van|der|of|the|da|la|le))*"
_LOWER = r"(?:the )?(?:[a-z\-]+ ){0,3}?"  # "the engineer " before a name
_NAMED = re.compile(r"\bnamed (?:after|for) " + _LOWER + "(?P<object>" + _NAME + ")" + _END)
# The participle and its active form: "written by Plato" / "Plato wrote …".
MAKERS = {
    "written": "wrote", "directed": "directed", "composed": "composed", "designed": "designed",
    "founded": "founded", "created": "created", "developed": "developed", "painted": "painted",
    "built": "built", "produced": "produced", "published": "published", "invented": "invented",
}  # fmt: skip
_MADE = re.compile(
    r"\b(?P<verb>" + "|".join(MAKERS) + r") by " + _LOWER + "(?P<object>" + _NAME + ")" + _END
)  # fmt: skip
_SYMBOL = re.compile(r"\belement(?:;| with)(?: it has)? (?:the )?symbol\s(?P<object>[A-Z][a-z]?)\b")
# The description's last word, where "X is a D in Y" places X (a thing of a place, not "a unit
# of length in the imperial system").
PLACES = frozenset((
    "city", "town", "village", "capital", "municipality", "commune", "river", "lake", "mountain",
    "island", "peninsula", "volcano", "desert", "sea", "bay", "strait", "valley", "region",
    "province", "district", "county", "state", "port", "building", "skyscraper", "tower",
    "palace", "castle", "fortress", "temple", "church", "cathedral", "mosque", "monastery",
    "museum", "gallery", "library", "university", "college", "school", "stadium", "arena",
    "park", "bridge", "canal", "dam", "airport", "station", "square", "street", "monument",
    "memorial", "cemetery", "zoo", "garden", "site", "complex", "gurdwara", "suburb", "area",
    "metropolis", "settlement", "landmark", "waterfall", "reef", "glacier", "basin", "plateau",
))  # fmt: skip
_INITIAL = re.compile(r"\b[A-Z]\.$")  # a name cut at an initial ("D. W."): not read
_IN = re.compile(r"^(?:located |situated |based )?in (?:the )?(?P<object>" + _NAME + ")" + _END)
# How each relation is said, true or changed alike: {s} subject, {o} object, {v} the lead's
# verb (is / was), {p} a maker's participle, {a} its active form.
WORDINGS = {
    "named-after": ("{s} was named after {o}.", "{s} is named for {o}.",
                    "{s} takes its name from {o}."),
    "made-by": ("{s} was {p} by {o}.", "{o} {a} {s}.", "{s} is a work {p} by {o}."),
    "symbol": ("The chemical symbol of {lower} is {o}.", "{s} has the chemical symbol {o}.",
               "The symbol for {lower} is {o}."),
    "located-in": ("{s} {v} in {o}.", "{s} {v} located in {o}.", "{s} can be found in {o}."),
}  # fmt: skip


@dataclass(frozen=True)
class Fact:
    """One relation a page's lead states: its kind, object and (for ``made-by``) participle."""

    kind: str
    object: str
    verb: str = ""


def facts(lead: Lead) -> dict[str, Fact]:
    """The relations ``lead``'s first two sentences state, by kind."""
    found: dict[str, Fact] = {}
    text = " ".join(lead.sentences[:2])
    if (match := _NAMED.search(text)) is not None:
        found["named-after"] = Fact("named-after", match["object"].rstrip("."))
    head = lead.description.split()[-1].lower()
    # the maker in the lead sentence itself: a later sentence's "built by" is often of a part
    if (match := _MADE.search(lead.sentences[0])) is not None and not _INITIAL.search(match[0]):
        found["made-by"] = Fact("made-by", match["object"].rstrip("."), match["verb"])
    if (match := _SYMBOL.search(text)) is not None:
        found["symbol"] = Fact("symbol", match["object"])
    # "X is a D in Y": the place right after the description the lead pattern read
    after = lead.sentences[0].split(f" {lead.description}", 1)
    if head in PLACES and len(after) == 2 and (match := _IN.match(after[1].lstrip())) is not None:
        found["located-in"] = Fact("located-in", match["object"].rstrip("."))
    return {kind: fact for kind, fact in found.items() if not _names(lead, fact)}


def _names(lead: Lead, fact: Fact) -> bool:
    """Whether the object is (part of) the subject itself: "X is named after X" says nothing."""
    subject, named = lead.subject.lower(), fact.object.lower()
    return named in subject or subject in named


# Places a lead writes as initials and a donor may spell out, or the other way ("the U.S.
# state of Michigan" places Detroit in the United States); longest first, a last dot optional.
INITIALS = {
    "U.S.A": "United States", "U.S": "United States", "USA": "United States",
    "U.K": "United Kingdom", "UK": "United Kingdom", "U.A.E": "United Arab Emirates",
    "UAE": "United Arab Emirates",
}  # fmt: skip
_INITIALS = re.compile("|".join(rf"(?<!\w){re.escape(short)}\.?(?!\w)" for short in INITIALS))


def _content(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if len(w) > 2 and w != "the"}


def _spelled(text: str) -> set[str]:
    """:func:`_content` with places written as initials spelled out."""
    return _content(_INITIALS.sub(lambda found: INITIALS[found[0].rstrip(".")], text))


def _says(spelled: set[str], fact: Fact) -> bool:
    """Whether a lead's words (``spelled``: :func:`_spelled` of its first two sentences) hold
    ``fact``'s object, initials spelled out (a changed object the lead states is no change:
    "Detroit is in United States" of "the U.S. state of Michigan")."""
    return bool(_spelled(fact.object) & spelled)


def say(lead: Lead, fact: Fact, wording: int = 0) -> str:
    """The claim that ``lead``'s subject stands in ``fact``'s relation, in one of its wordings."""
    template = WORDINGS[fact.kind][wording % len(WORDINGS[fact.kind])]
    participle = fact.verb or "made"
    return template.format(
        s=lead.subject.strip(), o=fact.object, v=lead.verb, p=participle,
        a=MAKERS.get(participle, participle), lower=lead.subject.strip().lower(),
    )  # fmt: skip


def relation_claims(
    lead: Lead, donors: Sequence[tuple[Lead, dict[str, Fact]]], rng: random.Random, wording: int
) -> list[tuple[str, str, Lead]]:
    """(class, claim, donor) for each relation ``lead`` states: true, and with the object of a
    donor that states the same relation of something else (a maker of the same participle
    where one exists)."""
    claims: list[tuple[str, str, Lead]] = []
    text = " ".join(lead.sentences[:2])
    said, spelled = _content(text), _spelled(text)
    for kind, fact in facts(lead).items():
        # another object the lead does not name ("Guangdong is in China" is no change of "a
        # province in South China")
        fitting = [
            (donor, theirs[kind]) for donor, theirs in donors
            if kind in theirs and not _content(theirs[kind].object) & said
            and theirs[kind].object.lower() != fact.object.lower() and donor.page != lead.page
        ]  # fmt: skip
        same = [(d, f) for d, f in fitting if f.verb == fact.verb]
        if not (fitting := same or fitting):
            continue
        donor, theirs = rng.choice(fitting)
        if _says(spelled, theirs):  # named only as initials ("U.S."): drawn again, from a draw
            # of its own, so that every other claim keeps the donor it had
            free = [(d, f) for d, f in fitting if not _says(spelled, f)]
            if not free:
                continue
            donor, theirs = random.Random(f"{kind}\0{lead.page}").choice(free)
        changed = Fact(kind, theirs.object, fact.verb)
        claims += [
            (f"{PREFIX}-true-{kind}", say(lead, fact, wording), donor),
            (f"{PREFIX}-{kind}", say(lead, changed, wording), donor),
        ]
    return claims


def relation_leads(leads: Sequence[Lead]) -> list[tuple[Lead, dict[str, Fact]]]:
    """The leads that state at least one relation, with their facts."""
    return [(lead, found) for lead in leads if (found := facts(lead))]


def relation_pairs(leads: Sequence[Lead], split: Split, wordings: int = 1) -> list[Pair]:
    """Every class of :func:`relation_claims` for every lead that states a relation, in
    ``wordings`` wordings each (the first ``wordings`` of :data:`WORDINGS`), against the page's
    first two sentences and the donor's lead, shuffled."""
    stated = relation_leads(leads)
    pairs: list[Pair] = []
    for lead, _ in stated:
        held = split.held_out(SOURCE, lead.page)
        for wording in range(wordings):
            rng = random.Random(f"{split.seed}\0{lead.page}\0{wording}")
            for source, claim, donor in relation_claims(lead, stated, rng, wording):
                evidence = [*lead.evidence(), *donor.evidence(1)]
                rng.shuffle(evidence)
                pairs.append(Pair(source, lead.page, claim, " ".join(evidence), CLASSES[source],
                                  SENTENCE, variant=f"w{wording}" if wording else "",
                                  held_out=held))  # fmt: skip
    return pairs
