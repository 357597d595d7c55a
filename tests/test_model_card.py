"""Model cards name the licences of the data a model was trained on."""

from __future__ import annotations

from feverous_es.export import card


def test_a_card_names_fm2_only_when_the_training_read_it() -> None:
    base = "sentence-transformers/all-MiniLM-L6-v2"
    with_fm2 = card.fine_tuned_licences(base, ["fm2_dev.jsonl", "feverous_s_dev.jsonl"])
    without = card.fine_tuned_licences(base, ["feverous_s_dev.jsonl"])
    assert card.FM2_DATA in with_fm2 and card.FEVEROUS_DATA in with_fm2
    assert card.FM2_DATA not in without and card.FEVEROUS_DATA in without
