"""Contrastive pairs from the dump's lead sentences: per page a true claim, the same with one
attribute taken from another page (REFUTES) and the changed claim against other subjects'
sentences (NOT ENOUGH INFO), held out by page, the same on every run."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from feverous_es.index.dump.wiki import WikiDB
from feverous_es.training.verdict import contrastive
from feverous_es.training.verdict.entailment_data import Split

SAMPLE_DB = Path(__file__).resolve().parents[2] / "sample" / "wiki.db"


def pairs_by_page(seed: int = 13) -> dict[str, list]:
    leads = contrastive.read_leads(WikiDB(SAMPLE_DB).rows())
    by_page = defaultdict(list)
    for pair in contrastive.contrastive_pairs(leads, 100, Split(seed, 0.3)):
        by_page[pair.id].append(pair)
    return by_page


def test_each_page_gives_a_true_a_changed_and_an_unanswerable_claim() -> None:
    by_page = pairs_by_page()
    assert len(by_page) >= 10
    kinds = set()
    for page, (true, changed, other) in by_page.items():
        assert (true.label, changed.label, other.label) == (
            "SUPPORTS", "REFUTES", "NOT ENOUGH INFO",
        )  # fmt: skip
        kinds.add(changed.source)
        assert changed.claim != true.claim and other.claim == changed.claim
        # The true and the changed claim read the same evidence: the page's own sentences and
        # a sentence of another page; the unanswerable one reads other pages only.
        assert changed.premise == true.premise and f"[{page}]" in true.premise
        assert f"[{page}]" not in other.premise and other.premise.count("[") == 2
        assert len({p.held_out for p in (true, changed, other)}) == 1
    assert kinds == {f"contrastive-{kind}" for kind in contrastive.KINDS}


def test_a_changed_nationality_is_stated_of_another_subject_in_the_evidence() -> None:
    # The trap a reader must not fall into: "X is an American swimmer" beside another
    # swimmer's sentence saying "American".
    for true, changed, _ in pairs_by_page().values():
        if changed.source == "contrastive-nationality":
            new = contrastive._DEMONYM.search(changed.claim.split(" ", 2)[-1])
            assert new is not None and new.group(1) not in true.claim
            assert new.group(1) in true.premise


def test_the_pairs_and_their_split_are_the_same_on_every_run() -> None:
    assert pairs_by_page(13) == pairs_by_page(13)
    held = {page for page, pairs in pairs_by_page(13).items() if pairs[0].held_out}
    assert 0 < len(held) < len(pairs_by_page(13))


def test_a_persons_attributes_are_claimed_true_and_changed() -> None:
    from feverous_es.training.verdict.attributes import CLASSES, attribute_pairs

    leads = contrastive.read_leads(WikiDB(SAMPLE_DB).rows())
    pairs = attribute_pairs(leads, Split(13, 0.3))
    assert {p.source for p in pairs} == set(CLASSES)
    by_page = defaultdict(dict)
    for pair in pairs:
        assert pair.label == CLASSES[pair.source] and f"[{pair.id}]" in pair.premise
        by_page[pair.id][pair.source] = pair
    held = dict(pairs_by_page_held())
    assert set(by_page) & set(held)
    for page, classes in by_page.items():
        true, changed = classes["attribute-true-nationality"], classes["attribute-nationality"]
        new = changed.claim.rsplit(" ", 1)[-1].rstrip(".")
        # the changed nationality is stated in the evidence, of another subject
        assert new not in true.claim and new in changed.premise
        # the profession changes, the nationality stays: two attributes, one changed
        nationality = true.claim.rsplit(" ", 1)[-1].rstrip(".")
        assert nationality in classes["attribute-profession"].claim
        year, shifted = classes["attribute-true-year"], classes["attribute-year"]
        assert year.claim != shifted.claim and year.claim.count("(") == year.claim.count(")")
        if page in held:  # held out with the page's contrastive pairs
            assert {p.held_out for p in classes.values()} == {held[page]}


def pairs_by_page_held() -> list[tuple[str, bool]]:
    return [(page, pairs[0].held_out) for page, pairs in pairs_by_page().items()]


def _lead(page: str, *sentences: str) -> contrastive.Lead:
    leads = contrastive.read_leads(
        iter([(0, page, json.dumps({f"sentence_{i}": s for i, s in enumerate(sentences)}))])
    )
    assert len(leads) == 1, f"the lead pattern does not read {sentences[0]!r}"
    return leads[0]


# Real lead sentences of the mini dump's pages (links stripped).
EIFFEL = _lead(
    "Eiffel Tower",
    "The Eiffel Tower is a lattice tower on the Champ de Mars in Paris, France.",
    "It is named after the engineer Gustave Eiffel, whose company designed and built the tower "
    "from 1887 to 1889.",
)
THULIUM = _lead("Thulium", "Thulium is a chemical element; it has symbol Tm and atomic number 69.")
ANTIMONY = _lead(
    "Antimony", "Antimony is a chemical element with the symbol Sb and atomic number 51."
)
PSYCHO = _lead(
    "Psycho (1960 film)",
    "Psycho is a 1960 American horror film produced and directed by Alfred Hitchcock.",
)
LAKE = _lead("Lake Urmia", "Lake Urmia is an endorheic salt lake in Iran.")


def test_simple_facts_of_a_lead_are_claimed_as_a_person_would_say_them() -> None:
    from feverous_es.training.verdict import relations

    said = {
        lead.page: {kind: relations.say(lead, fact) for kind, fact in relations.facts(lead).items()}
        for lead in (EIFFEL, THULIUM, ANTIMONY, PSYCHO, LAKE)
    }
    assert said == {
        "Eiffel Tower": {"named-after": "The Eiffel Tower was named after Gustave Eiffel."},
        "Thulium": {"symbol": "The chemical symbol of thulium is Tm."},
        "Antimony": {"symbol": "The chemical symbol of antimony is Sb."},
        "Psycho (1960 film)": {"made-by": "Psycho was directed by Alfred Hitchcock."},
        "Lake Urmia": {"located-in": "Lake Urmia is in Iran."},
    }
    # other wordings of the same fact: a true restatement not in the lead's words
    symbol = relations.facts(THULIUM)["symbol"]
    assert relations.say(THULIUM, symbol, 1) == "Thulium has the chemical symbol Tm."


def test_a_changed_fact_takes_the_object_of_another_page_that_states_it() -> None:
    import random

    from feverous_es.training.verdict import relations

    stated = relations.relation_leads([THULIUM, ANTIMONY, EIFFEL])
    claims = relations.relation_claims(THULIUM, stated, random.Random(0), 0)
    assert [(kind, claim, donor.page) for kind, claim, donor in claims] == [
        ("relation-true-symbol", "The chemical symbol of thulium is Tm.", "Antimony"),
        ("relation-symbol", "The chemical symbol of thulium is Sb.", "Antimony"),
    ]
    # nothing else states a namesake: no changed twin can be made, so no pair at all
    assert relations.relation_claims(EIFFEL, stated, random.Random(0), 0) == []


def test_relation_pairs_read_the_page_and_the_donor_held_out_by_page() -> None:
    from feverous_es.training.verdict import relations

    pairs = relations.relation_pairs([THULIUM, ANTIMONY], Split(13, 0.35), wordings=2)
    assert len(pairs) == 8  # 2 pages x 2 wordings x (true, changed)
    for pair in pairs:
        assert pair.label == relations.CLASSES[pair.source]
        assert "[Thulium]" in pair.premise and "[Antimony]" in pair.premise
        assert pair.held_out == Split(13, 0.35).held_out(contrastive.SOURCE, pair.id)
    assert len({p.key for p in pairs}) == len(pairs)  # each wording its own key


def test_a_changed_profession_is_never_one_the_lead_states() -> None:
    """ "Strindberg was a Swedish poet" is true (his lead says playwright, novelist, poet, …):
    a claim labelled REFUTES must not be drawn from it; a name is not a statement ("John Singer
    Sargent was an American singer" stays a changed claim)."""
    import random

    from feverous_es.training.verdict.attributes import attribute_claims

    strindberg = _lead("August Strindberg", "Johan August Strindberg was a Swedish playwright, "
                       "novelist, poet, essayist, and painter.")  # fmt: skip
    sargent = _lead("John Singer Sargent", "John Singer Sargent was an American painter.")
    poet = _lead("Sylvia Plath", "Sylvia Plath was an American poet.")
    composer = _lead("Ludwig van Beethoven", "Ludwig van Beethoven was a German composer.")
    singer = _lead("Edith Piaf", "Edith Piaf was a French singer.")
    for seed in range(12):
        made = dict((c, text) for c, text, _ in attribute_claims(
            strindberg, [poet, composer], random.Random(seed)))  # fmt: skip
        assert made["attribute-profession"] == "Johan August Strindberg was a Swedish composer."
        assert made["attribute-true-profession"] == "Johan August Strindberg was a playwright."
        made = dict((c, text) for c, text, _ in attribute_claims(
            sargent, [singer], random.Random(seed)))  # fmt: skip
        assert made["attribute-profession"] == "John Singer Sargent was an American singer."
    # only donors of a profession the lead states: no profession claim, the other classes kept
    only = {c for c, _, _ in attribute_claims(strindberg, [poet], random.Random(0))}
    assert "attribute-profession" not in only and "attribute-nationality" in only


def test_a_changed_place_is_never_one_the_lead_names_in_initials() -> None:
    """ "Detroit is in United States" is true of "the U.S. state of Michigan": a claim labelled
    REFUTES must not be drawn from it."""
    import random

    from feverous_es.training.verdict import relations

    detroit = _lead("Detroit", "Detroit is a large city in the U.S. state of Michigan.")
    usa = _lead("Chicago", "Chicago is a large city in United States.")
    initials = _lead("Boston", "Boston is a large city in the USA.")
    stated = relations.relation_leads([detroit, usa, initials, LAKE])
    for seed in range(12):
        made = dict((c, text) for c, text, _ in relations.relation_claims(
            detroit, stated, random.Random(seed), 0))  # fmt: skip
        assert made["relation-located-in"] == "Detroit is in Iran."
        assert made["relation-true-located-in"] == "Detroit is in U.S."
    # a lead that names none of them keeps every donor it could draw
    lakes = {
        dict((c, t) for c, t, _ in relations.relation_claims(
            LAKE, stated, random.Random(seed), 0))["relation-located-in"]
        for seed in range(40)
    }  # fmt: skip
    assert lakes == {"Lake Urmia is in U.S.", "Lake Urmia is in United States.",
                     "Lake Urmia is in USA."}  # fmt: skip
