"""The benches' claim-file readers (feverous_es/eval/samples.py): two benches given the same file,
size and seed measure the same claims."""

from __future__ import annotations

import json
import random
import unicodedata
from pathlib import Path

import pytest

from bench.ranking import hits_at
from feverous_es.eval.samples import (
    claim_texts,
    gold_sets,
    gold_table,
    read_records,
    seeded_sample,
    table_claims,
)


@pytest.fixture
def claim_file(tmp_path: Path) -> Path:
    records = [{"id": "", "claim": "", "label": "", "evidence": []}]  # the dummy first line
    records += [
        {"id": i, "claim": f"claim {i}", "label": "SUPPORTS",
         "evidence": [{"content": [f"P\u00e1ge {i}_sentence_0"]}, {"content": []}],
         **({"gold_tables": [f"Page {i}_table_{i % 3}"]} if i % 2 else {})}
        for i in range(1, 11)
    ]  # fmt: skip
    path = tmp_path / "claims.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n\n", encoding="utf-8")
    return path


def test_records_skip_the_dummy_line_and_keep_file_order(claim_file: Path) -> None:
    assert [r["id"] for r in read_records(claim_file)] == list(range(1, 11))
    assert claim_texts([claim_file, claim_file])[:2] == ["claim 1", "claim 2"]
    assert len(claim_texts([claim_file, claim_file])) == 20


def test_a_seeded_sample_is_the_same_for_a_seed_or_a_shared_generator(claim_file: Path) -> None:
    records = read_records(claim_file)
    first = seeded_sample(records, 4, 7)
    assert first == seeded_sample(records, 4, 7) == seeded_sample(records, 4, random.Random(7))
    assert len(first) == 4 and first != seeded_sample(records, 4, 8)
    # A generator shared by several files draws on: the second file's sample depends on the first.
    rng = random.Random(7)
    assert seeded_sample(records, 4, rng) == first
    assert seeded_sample(records, 4, rng) != first
    assert seeded_sample(records, 0, 7) == records == seeded_sample(records, 99, 7)
    assert seeded_sample(records, -1, 7) == []


def test_gold_tables_and_sets_as_the_index_spells_them(claim_file: Path) -> None:
    tables = table_claims(claim_file, 0, 1)
    assert [r["id"] for r in tables] == [1, 3, 5, 7, 9]
    assert gold_table(tables[1]) == ("Page 3", 0)
    assert gold_sets(tables[0]) == [{unicodedata.normalize("NFD", "P\u00e1ge 1_sentence_0")}]
    with pytest.raises(ValueError, match="not a table id"):
        gold_table({"gold_tables": ["Page 3_sentence_0"]})


def test_hits_at_each_cut_off() -> None:
    ranked = [("A", 0), ("B", 1), ("C", 2), ("D", 0), ("E", 0), ("F", 0)]
    assert hits_at(ranked, ("A", 0)) == {1: True, 5: True, 10: True}
    assert hits_at(ranked, ("F", 0)) == {1: False, 5: False, 10: True}
    assert hits_at(ranked, ("Z", 9)) == {1: False, 5: False, 10: False}
