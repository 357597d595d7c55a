"""Claims about subjects no page holds: a real claim with the words that name its page replaced
by an invented name, checked against the index's titles. Nothing in the index decides such a
claim: NOT ENOUGH INFO is its right answer (the ``nei`` benchmark condition measures the verdict
on them; ``train verdict-nei`` trains on them)."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

from feverous_es.index.elements import title_keys
from feverous_es.text import claim_spans

# Syllables of the invented names: pronounceable, and checked against the dump's titles.
FIRST = ("Var", "Kel", "Osk", "Mir", "Tal", "Bren", "Dov", "Sel", "Quor", "Lun", "Zar", "Hev")
SECOND = ("nath", "ivo", "andre", "ette", "ovic", "imbe", "ara", "ostin", "ulme", "ida")
LAST = ("Olmidge", "Varkstrom", "Quenby", "Tressilov", "Maunder-Fisk", "Orrible", "Kestanova",
        "Pellweather", "Drobnick", "Ashcombe-Vry", "Yselmont", "Halvarsen-Oduya")  # fmt: skip


def invented_names(store: Any, seed: int) -> Iterator[str]:
    """Names of no page: each name, and each of its words, matches no title of ``store``."""
    rng = random.Random(seed)
    while True:
        name = f"{rng.choice(FIRST)}{rng.choice(SECOND)} {rng.choice(LAST)}"
        keys = [k for part in (name, *name.split()) for k in title_keys(part)]
        if not store.match_titles(keys):
            yield name


def with_subject(claim: str, page: str, name: str) -> str | None:
    """``claim`` with the words that name ``page`` replaced by ``name`` (None: the claim does
    not name the page)."""
    spans = claim_spans(claim)
    found = [spans[k] for k in title_keys(page) if k in spans]
    if not found:
        return None
    start, end = found[0]
    words = claim.split()
    # the name keeps the last word's possessive and punctuation ("Schoeman's," -> "Olmidge's,")
    tail = re.search("(['\u2019]s)?[.,;:!?]*$", words[end - 1]).group(0)  # type: ignore[union-attr]
    return " ".join([*words[:start], name + tail, *words[end:]])
