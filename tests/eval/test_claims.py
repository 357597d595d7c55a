"""Claim and submission files: the official jsonl layout, element ids ↔ evidence triples."""

from __future__ import annotations

import json

import orjson
import pytest

from feverous_es.eval.claims import (
    ClaimRecord,
    MalformedLine,
    PredictionRecord,
    dumps_submission_line,
    element_to_triple,
    parse_claims,
    parse_predictions,
    read_claims,
    read_predictions,
    submission_line,
    triple_to_element,
)
from tests.conftest import DATA, DEV_SAMPLE, MINI

DUMMY = json.dumps(
    {
        "id": "",
        "claim": "",
        "label": "",
        "evidence": [],
        "annotator_operations": [],
        "challenge": "",
    }
)


def _claim(claim_id: int, **extra: object) -> str:
    record = {
        "id": claim_id,
        "claim": f"claim {claim_id}",
        "label": "SUPPORTS",
        "evidence": [{"content": [f"Page {claim_id}_sentence_0"], "context": {}}],
        "challenge": "Other",
    }
    record.update(extra)
    return json.dumps(record)


def _official_split(element_id: str) -> list[str]:
    """How the official evaluate.py turns an id into a triple (page = text before the first
    underscore): right for every page without an underscore, which is what we compare on."""
    parts = element_id.split("_")
    two_word = "table_caption" in element_id or "header_cell" in element_id
    kind = "_".join(parts[1:3]) if two_word else parts[1]
    return [parts[0], kind, "_".join(parts[3:] if two_word else parts[2:])]


ELEMENT_TRIPLES = {
    "Korean Air_cell_1_19_0": ("Korean Air", "cell", "1_19_0"),
    "Wolfgang Niedecken_sentence_1": ("Wolfgang Niedecken", "sentence", "1"),
    "Masaki Suda_header_cell_6_4_0": ("Masaki Suda", "header_cell", "6_4_0"),
    "Masaki Suda_table_caption_6": ("Masaki Suda", "table_caption", "6"),
    "Chestnut-bellied seed finch_item_0_1": ("Chestnut-bellied seed finch", "item", "0_1"),
    "Turkish Cup_table_1": ("Turkish Cup", "table", "1"),
    "Anarchism_section_3": ("Anarchism", "section", "3"),
    "Anarchism_title": ("Anarchism", "title", ""),
}
# Pages with underscores and even type markers in their titles split at the last marker.
TITLES_WITH_MARKERS = {
    "C_Sharp_sentence_2": ("C_Sharp", "sentence", "2"),
    "Odd_cell_1_page_header_cell_0_0_1": ("Odd_cell_1_page", "header_cell", "0_0_1"),
    "X_cell_1_sentence_0": ("X_cell_1", "sentence", "0"),
    "Ünïcödé_item_2_10": ("Ünïcödé", "item", "2_10"),
}


@pytest.mark.parametrize(
    ("element_id", "triple"), [*ELEMENT_TRIPLES.items(), *TITLES_WITH_MARKERS.items()]
)
def test_element_triple_round_trip(element_id: str, triple: tuple[str, str, str]) -> None:
    assert element_to_triple(element_id) == triple
    assert triple_to_element(*triple) == element_id


@pytest.mark.parametrize(("element_id", "triple"), ELEMENT_TRIPLES.items())
def test_triples_agree_with_the_official_scorer(
    element_id: str, triple: tuple[str, str, str]
) -> None:
    """Where the title has no underscore, the official evaluate.py reads the same triple."""
    assert list(triple) == _official_split(element_id)


@pytest.mark.parametrize(
    "bad",
    ["Page", "Page_sentence", "Page_cell_1_2", "Page_item_3", "Page_sentence_x", "_sentence_1",
     "Page_paragraph_1", ""],
)  # fmt: skip
def test_element_to_triple_rejects(bad: str) -> None:
    with pytest.raises(ValueError, match="not a FEVEROUS element id"):
        element_to_triple(bad)


def test_triple_to_element_rejects() -> None:
    for triple in [
        ("P", "cell", "1"),
        ("P", "nope", "1"),
        ("", "sentence", "1"),
        ("P", "item", ""),
    ]:
        with pytest.raises(ValueError, match="not a FEVEROUS evidence triple"):
            triple_to_element(*triple)


def test_dev_sample_every_id_parses_and_round_trips() -> None:
    raw = [json.loads(line) for line in DEV_SAMPLE.read_text().splitlines()]
    records = list(read_claims(DEV_SAMPLE))
    assert all(isinstance(r, ClaimRecord) for r in records)
    assert [r.id for r in records] == [r["id"] for r in raw]  # no dummy line: first claim kept
    assert records[0].line_no == 1
    seen_types: set[str] = set()
    count = 0
    for record, source in zip(records, raw, strict=True):
        assert record.evidence == tuple(tuple(g["content"]) for g in source["evidence"])
        assert record.challenge == source["challenge"]
        ids = [e for g in source["evidence"] for e in g["content"]]
        ids += [c for g in source["evidence"] for ctx in g["context"].values() for c in ctx]
        for element_id in ids:
            triple = element_to_triple(element_id)
            assert triple_to_element(*triple) == element_id
            if "_" not in triple[0]:
                assert list(triple) == _official_split(element_id)
            seen_types.add(triple[1])
            count += 1
    assert count > 300
    assert {"sentence", "cell", "header_cell", "table_caption", "item", "title"} <= seen_types


def test_minifeverous_claim_files_read() -> None:
    feverous = list(read_claims(DATA / "feverous_s_dev_head.jsonl"))
    assert len(feverous) == 20  # 21 lines, the dummy skipped
    assert all(isinstance(r, ClaimRecord) and r.evidence for r in feverous)
    assert feverous[0].line_no == 2 and feverous[0].id == 3385
    tabfact = list(read_claims(DATA / "tabfact_dev_head.jsonl"))
    assert len(tabfact) == 20
    assert all(isinstance(r, ClaimRecord) and r.gold_tables and not r.evidence for r in tabfact)
    assert tabfact[0].gold_tables == ("Turkish Cup_table_1",)
    assert tabfact[0].challenge == "TabFact"


@pytest.mark.skipif(not MINI.exists(), reason=f"{MINI} is not here: a whole-file check")
def test_minifeverous_files_read_whole() -> None:
    feverous = list(read_claims(MINI / "feverous_s_dev.jsonl"))
    assert len(feverous) == 1497  # 1,498 lines, the dummy skipped
    assert all(isinstance(r, ClaimRecord) for r in feverous)
    tabfact = list(read_claims(MINI / "tabfact_dev.jsonl"))
    assert len(tabfact) == 12389
    assert all(isinstance(r, ClaimRecord) and r.gold_tables and not r.evidence for r in tabfact)


def test_dummy_line_detected_only_first() -> None:
    with_dummy = list(parse_claims([DUMMY, _claim(1), _claim(2)]))
    assert [r.id for r in with_dummy] == [1, 2]  # type: ignore[union-attr]
    assert [r.line_no for r in with_dummy] == [2, 3]  # type: ignore[union-attr]
    without = list(parse_claims([_claim(1), _claim(2)]))
    assert [r.id for r in without] == [1, 2]  # type: ignore[union-attr]
    # A blank line before the dummy does not hide it; a dummy later is a malformed line.
    later = list(parse_claims(["", DUMMY, _claim(1), DUMMY]))
    assert isinstance(later[0], ClaimRecord) and later[0].line_no == 3
    assert later[1] == MalformedLine(4, "no id")


def test_malformed_lines_reported_with_line_numbers() -> None:
    lines = [
        DUMMY,  # 1
        _claim(1),  # 2
        "{not json",  # 3
        "[1, 2]",  # 4
        "",  # 5 blank: skipped, still counted
        _claim(2, claim=""),  # 6
        _claim(3, label="MAYBE"),  # 7
        _claim(4, evidence=[{"content": ["Page_cell_1_2"]}]),  # 8
        _claim(5, evidence="Page_sentence_1"),  # 9
        _claim(6, gold_tables=["Page_cell_0_1_1"]),  # 10
        _claim(7, label="supports"),  # 11
        json.dumps({"id": 8, "claim": "blind claim"}),  # 12
    ]
    items = list(parse_claims(lines))
    bad = [i for i in items if isinstance(i, MalformedLine)]
    good = [i for i in items if isinstance(i, ClaimRecord)]
    assert [b.line_no for b in bad] == [3, 4, 6, 7, 8, 9, 10]
    reasons = [b.reason for b in bad]
    assert reasons[0].startswith("not JSON")
    assert reasons[1] == "not a JSON object but list"
    assert "no claim text" in reasons[2]
    assert "unknown label 'MAYBE'" in reasons[3]
    assert "'Page_cell_1_2'" in reasons[4]
    assert "evidence must be a list" in reasons[5]
    assert "not a Page_table_t id" in reasons[6]
    assert str(bad[0]).startswith("line 3: not JSON")
    assert [(g.id, g.label, g.line_no) for g in good] == [
        (1, "SUPPORTS", 2),
        (7, "SUPPORTS", 11),  # labels are upper-cased
        (8, None, 12),  # blind: no label, no evidence
    ]
    assert good[2].evidence == () and good[2].challenge is None


def test_submission_line_format() -> None:
    line = submission_line(
        3385,
        "a claim",
        "supports",
        ["Korean Air_cell_1_19_0", ("Wolfgang Niedecken", "sentence", "1"), "A_b_item_0_1"],
    )
    assert line == {
        "id": 3385,
        "claim": "a claim",
        "predicted_label": "SUPPORTS",
        "predicted_evidence": [
            ["Korean Air", "cell", "1_19_0"],
            ["Wolfgang Niedecken", "sentence", "1"],
            ["A_b", "item", "0_1"],
        ],
    }
    assert orjson.loads(dumps_submission_line(line)) == line
    assert dumps_submission_line(line).endswith(b"\n")
    with pytest.raises(ValueError, match="predicted label"):
        submission_line(1, "c", "TRUE", [])
    with pytest.raises(ValueError, match="element id"):
        submission_line(1, "c", "REFUTES", ["no type here"])


def test_predictions_read_back(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "out.jsonl"
    written = [
        submission_line(1, "one", "SUPPORTS", ["P_sentence_0", "P_cell_0_1_2"]),
        submission_line("x2", "two", "NOT ENOUGH INFO", []),
    ]
    path.write_bytes(b"".join(dumps_submission_line(w) for w in written))
    records = list(read_predictions(path))
    assert records == [
        PredictionRecord(1, "SUPPORTS", (("P", "sentence", "0"), ("P", "cell", "0_1_2")), "one", 1),
        PredictionRecord("x2", "NOT ENOUGH INFO", (), "two", 2),
    ]
    assert records[0].key == "1"  # type: ignore[union-attr]


def test_prediction_lines_lenient_and_malformed() -> None:
    lines = [
        # evaluate.py-style element ids, integer position, no id, gold fields alongside
        json.dumps({"predicted_label": "REFUTES", "predicted_evidence": ["P_item_0_1"],
                    "label": "SUPPORTS", "evidence": []}),
        json.dumps({"id": 2, "predicted_label": "SUPPORTS",
                    "predicted_evidence": [["P", "sentence", 4]]}),
        json.dumps({"id": 3, "predicted_evidence": []}),
        json.dumps({"id": 4, "predicted_label": "SUPPORTS"}),
        json.dumps({"id": 5, "predicted_label": "SUPPORTS", "predicted_evidence": [["P", "x"]]}),
        json.dumps({"id": 6, "predicted_label": "SUPPORTS",
                    "predicted_evidence": [["P", "cell", "1"]]}),
    ]  # fmt: skip
    items = list(parse_predictions(lines))
    assert items[0] == PredictionRecord(None, "REFUTES", (("P", "item", "0_1"),), None, 1)
    assert items[1] == PredictionRecord(2, "SUPPORTS", (("P", "sentence", "4"),), None, 2)
    assert items[2] == MalformedLine(3, "prediction 3: no predicted_label")
    assert items[3] == MalformedLine(4, "prediction 4: no predicted_evidence")
    assert isinstance(items[4], MalformedLine) and "[page, type, position]" in items[4].reason
    assert (
        isinstance(items[5], MalformedLine) and "not a FEVEROUS evidence triple" in items[5].reason
    )
