"""Claims about one attribute of a person's lead, true and changed: the failure classes a
distilled reader showed on held-out pages (a true restatement called false, a shifted year let
through), measured both ways.

From a lead ``X is a D`` whose description names a nationality and a profession
(``Immanuel Kant was a German philosopher.``), each class a claim of one kind, read against the
page's first two sentences and a donor page's lead, shuffled (as the verdict reads retrieved
sentences; the donor states the changed attribute about another subject):

* ``attribute-true-nationality`` (SUPPORTS) ``X was German.`` and ``attribute-nationality``
  (REFUTES) ``X was Italian.``;
* ``attribute-true-profession`` (SUPPORTS) ``X was a philosopher.`` and
  ``attribute-profession`` (REFUTES) ``X was a German composer.``: two attributes, one changed;
* ``attribute-true-year`` (SUPPORTS) a lead sentence cut after a year it states, and
  ``attribute-year`` (REFUTES) the same with the year shifted by 1 to 30;
* ``attribute-true-country`` (SUPPORTS) ``X was from Germany.`` and ``attribute-country``
  (REFUTES) ``X was from Italy.``: the nationality paraphrased, not in the lead's words.

Pages are held out as :mod:`~feverous_es.training.verdict.contrastive` holds them out (the
same source name and seed), so a page held out there is held out here.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from feverous_es.training.verdict.contrastive import REFUTES, SOURCE, SUPPORTS, Lead
from feverous_es.training.verdict.entailment_data import SENTENCE, Pair, Split

PREFIX = "attribute"
CLASSES = {
    f"{PREFIX}-true-nationality": SUPPORTS,
    f"{PREFIX}-nationality": REFUTES,
    f"{PREFIX}-true-profession": SUPPORTS,
    f"{PREFIX}-profession": REFUTES,
    f"{PREFIX}-true-year": SUPPORTS,
    f"{PREFIX}-year": REFUTES,
    f"{PREFIX}-true-country": SUPPORTS,
    f"{PREFIX}-country": REFUTES,
}
# The nationality said another way (a paraphrase, not the lead's words): "X was from France."
COUNTRIES = {
    "American": "the United States", "French": "France", "German": "Germany",
    "English": "England", "Italian": "Italy", "Russian": "Russia", "British": "Britain",
    "Indian": "India", "Greek": "Greece", "Chinese": "China", "Japanese": "Japan",
    "Irish": "Ireland", "Scottish": "Scotland", "Canadian": "Canada", "Austrian": "Austria",
    "Dutch": "the Netherlands", "Spanish": "Spain", "Swiss": "Switzerland", "Polish": "Poland",
    "Swedish": "Sweden", "Argentine": "Argentina", "Australian": "Australia",
    "Mexican": "Mexico", "Nigerian": "Nigeria", "Danish": "Denmark", "Norwegian": "Norway",
    "Portuguese": "Portugal", "Romanian": "Romania", "Hungarian": "Hungary",
    "Belgian": "Belgium", "South African": "South Africa", "Welsh": "Wales",
    "Brazilian": "Brazil", "Turkish": "Turkey", "Iranian": "Iran", "Korean": "Korea",
}  # fmt: skip
# The description's last word, where it is one of these, is the person's profession.
PROFESSIONS = frozenset((
    "philosopher", "politician", "poet", "writer", "composer", "mathematician", "painter",
    "physicist", "actor", "novelist", "player", "singer", "statesman", "actress", "general",
    "filmmaker", "chemist", "polymath", "footballer", "officer", "artist", "engineer",
    "author", "director", "revolutionary", "playwright", "architect", "inventor",
    "psychologist", "economist", "astronomer", "biologist", "historian", "theologian",
    "sculptor", "pianist", "violinist", "conductor", "journalist", "lawyer", "diplomat",
    "explorer", "businessman", "entrepreneur", "scientist", "physician", "surgeon",
    "sociologist", "linguist", "botanist", "geologist", "photographer", "cyclist", "swimmer",
    "athlete", "boxer", "wrestler", "cricketer", "rapper", "songwriter", "musician",
    "guitarist", "drummer", "dancer", "comedian", "model", "soldier", "admiral", "bishop",
    "monk", "priest", "king", "queen", "emperor", "prince", "princess", "activist", "critic",
    "essayist", "illustrator", "cartoonist", "designer", "producer", "screenwriter",
    "broadcaster", "presenter", "mystic", "scholar",
))  # fmt: skip
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-2][0-9])\b")


def profession(lead: Lead) -> str:
    last = lead.description.split()[-1]
    return last if last.lower() in PROFESSIONS else ""


def _states(lead: Lead, word: str) -> bool:
    """Whether the lead's sentences say ``word`` or a word of its stem (its first six letters:
    "politician" in "political advocate"), the subject's name aside (John Singer Sargent was a
    painter)."""
    stem, name = word.lower()[:6], lead.subject.lower()
    return any(stem in text.lower().replace(name, "") for text in lead.sentences)


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _year_claims(lead: Lead, rng: random.Random) -> tuple[str, str] | None:
    """(true, shifted) claims: a lead sentence cut after a year it states; None without one."""
    for text in lead.sentences[:2]:
        found = list(_YEAR.finditer(text))
        if found and lead.subject in text:
            year = found[0]  # the first: the claim stops early, no copy of the sentence
            shifted = int(year.group(1)) + rng.choice([-1, 1]) * rng.randint(1, 30)
            true, changed = text[: year.end()], text[: year.start()] + str(shifted)
            # a year inside "(born …": the parenthesis closes after it
            close = ")" if true.count("(") > true.count(")") else ""
            return f"{true}{close}.", f"{changed}{close}."
    return None


def attribute_claims(
    lead: Lead, donors: Sequence[Lead], rng: random.Random
) -> list[tuple[str, str, Lead]]:
    """(class, claim, donor) for every class ``lead`` gives: the donor's lead goes into the
    evidence (for a changed attribute, the donor states it)."""
    claims: list[tuple[str, str, Lead]] = []
    job = profession(lead)
    if not (lead.demonym and job):
        return claims
    subject = f"{lead.subject} {lead.verb}"
    others = [d for d in donors if d.demonym and d.demonym != lead.demonym]
    if others:
        donor = rng.choice(others)
        claims += [
            (f"{PREFIX}-true-nationality", f"{subject} {lead.demonym}.", donor),
            (f"{PREFIX}-nationality", f"{subject} {donor.demonym}.", donor),
        ]  # fmt: skip
    jobs = [d for d in donors if profession(d) and profession(d).lower() != job.lower()]
    job_donor = rng.choice(jobs) if jobs else None
    if job_donor is not None and _states(lead, profession(job_donor)):
        # not a change ("Strindberg was a Swedish poet": his lead says poet too): drawn again,
        # from a draw of its own, so that the classes after keep the pairs they had
        free = [d for d in jobs if not _states(lead, profession(d))]
        job_donor = random.Random(f"profession\0{lead.page}").choice(free) if free else None
    if job_donor is not None:
        other = profession(job_donor)
        claims += [
            (f"{PREFIX}-true-profession", f"{subject} {_article(job)} {job}.", job_donor),
            (f"{PREFIX}-profession",
             f"{subject} {_article(lead.demonym)} {lead.demonym} {other}.", job_donor),
        ]  # fmt: skip
    if (years := _year_claims(lead, rng)) is not None:
        donor = rng.choice(donors)
        claims += [(f"{PREFIX}-true-year", years[0], donor), (f"{PREFIX}-year", years[1], donor)]
    # its own draw, seeded by the page: the classes above keep the pairs they had before it
    abroad = [d for d in others if d.demonym in COUNTRIES]
    if lead.demonym in COUNTRIES and abroad:
        donor = random.Random(f"country\0{lead.page}").choice(abroad)
        claims += [
            (f"{PREFIX}-true-country", f"{subject} from {COUNTRIES[lead.demonym]}.", donor),
            (f"{PREFIX}-country", f"{subject} from {COUNTRIES[donor.demonym]}.", donor),
        ]  # fmt: skip
    return claims


def attribute_pairs(leads: Sequence[Lead], split: Split) -> list[Pair]:
    """Every class of :func:`attribute_claims` for every person's lead of ``leads``, against
    the page's first two sentences and the donor's lead, shuffled."""
    rng = random.Random(split.seed)
    pairs: list[Pair] = []
    for lead in leads:
        donors = [d for d in rng.sample(leads, min(200, len(leads))) if d.page != lead.page]
        held = split.held_out(SOURCE, lead.page)
        for source, claim, donor in attribute_claims(lead, donors, rng):
            evidence = [*lead.evidence(), *donor.evidence(1)]
            # each pair's own order, seeded by its page and class: adding a class moves no other
            random.Random(f"{split.seed}\0{lead.page}\0{source}").shuffle(evidence)
            pairs.append(Pair(source, lead.page, claim, " ".join(evidence), CLASSES[source],
                              SENTENCE, held_out=held))  # fmt: skip
    return pairs
