"""The ``nei`` condition's made claims, built apart from the training's: no syllable, name
list, template or claim of ``feverous_es.training.invented`` (what trains ``verdict-nei``).

* :func:`unseen_names`: names no page of the index holds, from this module's own vocabulary,
  of several kinds (a person, an organisation, a place, a river, an event); each name, and
  each of its words, matches no title;
* :func:`invented_forms`: a real claim with its subject replaced by such a name, as written,
  lowercased, or with role words before the name: NOT ENOUGH INFO is its right answer;
* :func:`controls`: real claims whose subject is misspelled, or lowercased whole: their
  evidence is in the index and their label stands, so a rule that calls them NOT ENOUGH INFO
  decides by the claim's form, not by the evidence.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from feverous_es.index.elements import title_keys
from feverous_es.text import claim_spans

# Pieces of the names: onset, vowel, coda; none of them a piece of the training's names.
ONSETS = ("Bry", "Cwen", "Dhru", "Ghre", "Ixt", "Jho", "Kvy", "Mbu", "Nyx", "Phr", "Tsv", "Wyg")
VOWELS = ("ae", "ou", "ya", "ei", "io", "ua", "y")
CODAS = ("lk", "mpt", "rsk", "thm", "vn", "zd", "nq", "gh", "x")
# What a name of each kind looks like, a word or two of the pieces in it.
KINDS = {
    "person": "{0} {1}",
    "organisation": "{0} {1} Holdings",
    "place": "{0}holm",
    "river": "the {0} River",
    "event": "the {0} Accord",
}
# Words a claim may put before a person's name.
ROLES = ("retired diplomat", "the sculptor", "former senator", "the marine biologist")
FORMS = ("as written", "lowercase", "role words")


def unseen_word(rng: random.Random) -> str:
    return rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS)


def unseen_names(store: Any, seed: int) -> Iterator[tuple[str, str]]:
    """(kind, name) of no page of ``store``, the kinds in turn: the name and each of its made
    words match no title (its kind's words, "River" or "Holdings", may)."""
    rng = random.Random(f"nei claims {seed}")
    kinds = list(KINDS)
    n = 0
    while True:
        kind = kinds[n % len(kinds)]
        words = (unseen_word(rng), unseen_word(rng))
        name = KINDS[kind].format(*words)
        keys = [k for part in (name, *words) for k in title_keys(part)]
        if not store.match_titles(keys):
            n += 1
            yield kind, name


def subject_span(claim: str, page: str) -> tuple[int, int] | None:
    """The word range of ``claim`` that names ``page`` (None: it does not name it)."""
    spans = claim_spans(claim)
    found = [spans[k] for k in title_keys(page) if k in spans]
    return found[0] if found else None


def replaced(claim: str, span: tuple[int, int], text: str) -> str:
    """``claim`` with the words of ``span`` replaced by ``text``; the last word's possessive and
    trailing punctuation stay."""
    words = claim.split()
    last = words[span[1] - 1]
    core = last.rstrip(".,;:!?")
    tail = last[len(core) :]
    if core.endswith(("'s", "\u2019s")):
        tail = core[-2:] + tail
    return " ".join([*words[: span[0]], text + tail, *words[span[1] :]])


def invented_forms(claim: str, page: str, kind: str, name: str, form: str) -> str | None:
    """``claim`` about ``name`` (of ``kind``) instead of ``page`` (every mention of it), in
    ``form`` (one of :data:`FORMS`; role words only before a person); None where the claim
    does not name the page."""
    span = subject_span(claim, page)
    if span is None:
        return None
    if form == "role words" and kind == "person":
        name = f"{ROLES[len(claim) % len(ROLES)]} {name}"
    text = replaced(claim, span, name)
    for _ in range(len(claim.split())):  # every mention of the page (a name never is one)
        if (again := subject_span(text, page)) is None:
            break
        text = replaced(text, again, name)
    text = text[0].upper() + text[1:]
    return text.lower() if form == "lowercase" else text


def misspelled(word: str) -> str:
    """``word`` with two letters after its first swapped (the first two that differ)."""
    for i in range(1, len(word) - 2):
        if word[i].isalpha() and word[i + 1].isalpha() and word[i] != word[i + 1]:
            return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return word


def controls(claim: str, page: str) -> dict[str, str]:
    """The decidable controls of a claim about ``page``: its subject's longest word misspelled
    (where the claim names the page by a word of five letters or more), and the claim
    lowercased whole."""
    made = {"lowercase": claim.lower()}
    span = subject_span(claim, page)
    if span is not None:
        words = claim.split()
        longest = max(range(*span), key=lambda i: len(words[i]))
        if len(words[longest].strip(".,;:!?'\u2019")) >= 5:
            changed = misspelled(words[longest])
            if changed != words[longest]:
                made["misspelled"] = " ".join([*words[:longest], changed, *words[longest + 1 :]])
    return made
