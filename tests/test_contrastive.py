"""Contrastive pairs from the dump's lead sentences: per page a true claim, the same with one
attribute taken from another page (REFUTES) and the changed claim against other subjects'
sentences (NOT ENOUGH INFO), held out by page, the same on every run."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from feverous_es.index.dump.wiki import WikiDB
from feverous_es.training import contrastive
from feverous_es.training.entailment_data import Split

SAMPLE_DB = Path(__file__).resolve().parents[1] / "sample" / "wiki.db"


def pairs_by_page(seed: int = 13) -> dict[str, list]:
    leads = contrastive.read_leads(WikiDB(SAMPLE_DB).rows())
    by_page = defaultdict(list)
    for pair in contrastive.contrastive_pairs(leads, 100, Split(seed, 0.3, 0)):
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
    from feverous_es.training.attributes import CLASSES, attribute_pairs

    leads = contrastive.read_leads(WikiDB(SAMPLE_DB).rows())
    pairs = attribute_pairs(leads, Split(13, 0.3, 0))
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
