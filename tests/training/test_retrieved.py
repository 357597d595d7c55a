"""The retrieval cache every trainer reads (feverous_es/training/retrieved.py): an element comes
back as the candidate it was, and a record tells gold from the other candidates."""

from __future__ import annotations

import json

from feverous_es.index.elements import Element, ElementType
from feverous_es.training.retrieved import Retrieved, element_record, record_candidate


def _element(element_id: str) -> Element:
    page = element_id.split("_", 1)[0]
    return Element(element_id, page, ElementType.SENTENCE, "text", f"[{page}] text", "", "")


def test_a_cached_element_reads_back_as_the_candidate_it_was() -> None:
    cached = json.loads(json.dumps(element_record(_element("Page_sentence_3"), 0.1234567, 2)))
    candidate = record_candidate(cached)
    assert candidate.element.id == "Page_sentence_3" and candidate.element.page == "Page"
    assert candidate.element.type is ElementType.SENTENCE
    assert candidate.element.linearized == "[Page] text"
    assert (candidate.score, candidate.hop) == (0.12346, 2)
    gold = record_candidate(element_record(_element("Page_sentence_0")))
    assert (gold.score, gold.hop) == (1.0, 1)  # a gold element was no candidate


def test_the_other_candidates_leave_out_gold_found_and_gold_absent() -> None:
    ranked = [element_record(_element(f"Page_sentence_{i}"), 1.0 - i / 10) for i in range(5)]
    item = Retrieved(
        "dev", "1", "claim", gold=[ranked[1]], absent=["Page_sentence_3"], ranked=ranked
    )
    assert item.gold_ids() == {"Page_sentence_1", "Page_sentence_3"}
    assert [c["id"] for c in item.others()] == [
        "Page_sentence_0",
        "Page_sentence_2",
        "Page_sentence_4",
    ]
