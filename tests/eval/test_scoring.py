"""The FEVEROUS score against hand-computed numbers of the official scorer.

Expected values follow the official ``src/feverous/evaluation/feverous_scorer.py`` (FEVEROUS
repository): ``truncate_evidence`` keeps, in prediction order, the first 25 elements typed
cell / item / table_caption / header_cell and the first 5 of every other type (duplicates each
take a slot); ``is_strictly_correct`` needs the label (upper-cased) and one whole gold group in
the kept predictions, for every label including NOT ENOUGH INFO; ``evidence_macro_precision`` is
kept-and-in-any-gold-group / kept (1.0 when nothing is kept); ``evidence_macro_recall`` is 1.0 for
a complete group or no gold evidence, else 0.0; the totals average those per claim and F1 is
2PR/(P+R). Each case below states its arithmetic.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.errors import ScoreError
from feverous_es.eval.claims import ClaimRecord, PredictionRecord
from feverous_es.eval.scoring import ranked_tables, score, score_claim, score_files, truncate
from feverous_es.index.element_ids import Triple, triple_to_element
from tests.conftest import DEV_SAMPLE


def sent(i: int, page: str = "P") -> Triple:
    return (page, "sentence", str(i))


def cell(r: int, c: int = 0, table: int = 0, page: str = "P") -> Triple:
    return (page, "cell", f"{table}_{r}_{c}")


def item(k: int) -> Triple:
    return ("P", "item", f"0_{k}")


def claim(
    claim_id: int,
    label: str,
    sets: list[list[Triple]],
    challenge: str | None = None,
    gold_tables: tuple[str, ...] = (),
) -> ClaimRecord:
    evidence = tuple(tuple(triple_to_element(*t) for t in group) for group in sets)
    return ClaimRecord(claim_id, f"claim {claim_id}", label, evidence, challenge, gold_tables)


def pred(claim_id: int | None, label: str, evidence: list[Triple]) -> PredictionRecord:
    return PredictionRecord(claim_id, label, tuple(evidence))


S, R, N = "SUPPORTS", "REFUTES", "NOT ENOUGH INFO"


def test_sixth_sentence_is_cut() -> None:
    gold = [[sent(5)]]
    six = [sent(i) for i in range(6)]  # gold is 6th: dropped, kept = s0..s4
    result = score_claim(S, gold, S, six)
    assert (result.strict, result.precision, result.recall) == (False, 0.0, 0.0)
    five_first = [sent(5), *[sent(i) for i in range(5)]]  # gold first: kept, 1 of 5 right
    result = score_claim(S, gold, S, five_first)
    assert (result.strict, result.precision, result.recall) == (True, 0.2, 1.0)


def test_twenty_sixth_cell_is_cut_and_budgets_are_separate() -> None:
    gold = [[cell(25)]]
    cells = [cell(r) for r in range(26)]  # gold is the 26th cell-type element: dropped
    assert not score_claim(S, gold, S, cells).strict
    assert score_claim(S, gold, S, cells).precision == 0.0  # 0 of 25 kept
    # Sentences do not use the cell budget: 5 sentences first, then 25 cells, all kept.
    mixed = [*[sent(i) for i in range(5)], *cells[1:]]
    assert len(truncate(mixed)) == 30
    result = score_claim(S, gold, S, mixed)
    assert result.strict and result.precision == pytest.approx(1 / 30)
    # Items, captions and header cells share the 25: 24 items + 1 caption fill it.
    header = ("P", "header_cell", "0_0_0")
    filled = [*[item(k) for k in range(24)], ("P", "table_caption", "0"), header]
    assert not score_claim(S, [[header]], S, filled).strict
    assert score_claim(S, [[header]], S, filled[1:]).strict


def test_other_types_use_the_sentence_budget() -> None:
    """The official code counts every non-cell type (sections, tables, titles) as a sentence."""
    sections = [("P", "section", str(i)) for i in range(5)]
    assert not score_claim(S, [[sent(0)]], S, [*sections, sent(0)]).strict
    assert truncate([*sections, sent(0), cell(0)]) == [*sections, cell(0)]


def test_nei_needs_evidence_too() -> None:
    gold = [[sent(1)]]
    label_only = score_claim(N, gold, "not enough info", [])  # label compared upper-cased
    assert label_only.label_correct and not label_only.strict
    assert (label_only.precision, label_only.recall) == (1.0, 0.0)  # empty prediction: P = 1
    assert score_claim(N, gold, N, [sent(1)]).strict
    assert not score_claim(N, gold, S, [sent(1)]).strict  # evidence right, label wrong


def test_duplicates_take_slots_and_count_in_precision() -> None:
    gold = [[sent(0)]]
    # 5 copies of a wrong sentence use the budget; the gold 6th is dropped.
    result = score_claim(S, gold, S, [sent(9)] * 5 + [sent(0)])
    assert (result.strict, result.precision) == (False, 0.0)
    # [g, g, w]: precision counts the duplicate twice -> 2/3.
    result = score_claim(S, gold, S, [sent(0), sent(0), sent(9)])
    assert result.strict and result.precision == pytest.approx(2 / 3)


def test_multiple_and_mixed_gold_sets() -> None:
    gold = [[sent(1), cell(2)], [sent(3)]]
    # Any complete set counts.
    assert score_claim(R, gold, R, [sent(3)]).strict
    # Half of the mixed set is not enough: recall 0, yet precision 1 (in the union of sets).
    half = score_claim(R, gold, R, [sent(1)])
    assert (half.strict, half.precision, half.recall) == (False, 1.0, 0.0)
    both = score_claim(R, gold, R, [cell(2), sent(7), sent(1)])
    assert (both.strict, both.precision, both.recall) == (True, pytest.approx(2 / 3), 1.0)


def test_claim_without_gold_evidence() -> None:
    """TabFact-style: never strictly correct; recall 1; precision 0 (predictions) or 1 (none)."""
    none = score_claim(S, [], S, [])
    assert (none.strict, none.precision, none.recall) == (False, 1.0, 1.0)
    some = score_claim(S, [], S, [cell(1)])
    assert (some.strict, some.precision, some.recall) == (False, 0.0, 1.0)


def test_aggregate_numbers_breakdown_and_confusion() -> None:
    gold = [
        claim(1, S, [[sent(0)]], "Other"),
        claim(2, R, [[sent(0), cell(1)]], "Numerical Reasoning"),
        claim(3, N, [[sent(3)]], "Other"),
        claim(4, S, [[sent(0)], [sent(1)]], "Numerical Reasoning"),
    ]
    preds = [
        pred(1, S, [sent(0), sent(1)]),  # strict; acc; P 1/2; R 1
        pred(2, S, [sent(0), cell(1)]),  # label wrong; P 1; R 1
        pred(3, N, []),  # acc; P 1 (nothing kept); R 0
        pred(4, S, [sent(i) for i in (2, 3, 4, 5, 6, 1)]),  # s1 cut: acc; P 0; R 0
    ]
    report = score(gold, preds)
    o = report.overall
    assert o.claims == 4
    assert o.feverous_score == 0.25  # 1/4
    assert o.label_accuracy == 0.75  # 3/4
    assert o.evidence_precision == pytest.approx(0.625)  # (0.5 + 1 + 1 + 0) / 4
    assert o.evidence_recall == 0.5  # (1 + 1 + 0 + 0) / 4
    assert o.evidence_f1 == pytest.approx(2 * 0.625 * 0.5 / 1.125)  # 0.5556
    other = report.by_challenge["Other"]  # claims 1 and 3
    assert (other.claims, other.feverous_score, other.label_accuracy) == (2, 0.5, 1.0)
    assert (other.evidence_precision, other.evidence_recall) == (0.75, 0.5)
    numeric = report.by_challenge["Numerical Reasoning"]  # claims 2 and 4
    assert (numeric.feverous_score, numeric.label_accuracy, numeric.evidence_recall) == (
        0,
        0.5,
        0.5,
    )
    assert report.confusion == {S: {S: 2}, R: {S: 1}, N: {N: 1}}
    assert report.tables is None
    assert (report.missing, report.extra, report.duplicate_predictions) == (0, 0, 0)
    data = report.to_dict()
    json.dumps(data)
    assert data["overall"]["feverous_score"] == 0.25


def test_matching_missing_extra_duplicates() -> None:
    gold = [claim(1, S, [[sent(0)]]), claim(2, R, [[sent(0)]]), claim(3, N, [[sent(0)]])]
    preds = [
        pred(1, S, [sent(0)]),
        pred(1, R, []),  # a repeat: the first prediction of claim 1 counts
        pred(2, R, [sent(0)]),
        pred(99, S, []),  # not in gold
    ]
    report = score(gold, preds)
    assert (report.missing, report.extra, report.duplicate_predictions) == (1, 1, 1)
    assert report.overall.claims == 2 and report.overall.feverous_score == 1.0
    counted = score(gold, preds, count_missing=True)  # claim 3 as an empty, wrong prediction
    assert counted.overall.claims == 3
    assert counted.overall.feverous_score == pytest.approx(2 / 3)
    assert counted.overall.evidence_precision == 1.0  # the empty prediction has P = 1
    assert counted.overall.evidence_recall == pytest.approx(2 / 3)
    assert counted.confusion[N] == {"(missing)": 1}
    # String and integer ids match.
    assert score([claim(7, S, [[sent(0)]])], [pred("7", S, [sent(0)])]).overall.feverous_score == 1


def test_positional_matching_and_errors() -> None:
    gold = [claim(1, S, [[sent(0)]]), claim(2, R, [[sent(1)]])]
    report = score(gold, [pred(None, S, [sent(0)]), pred(None, S, [sent(1)])])
    assert report.overall.feverous_score == 0.5
    with pytest.raises(ScoreError, match="matched by position"):
        score(gold, [pred(None, S, [])])
    with pytest.raises(ScoreError, match="has no id while others"):
        score(gold, [pred(1, S, []), pred(None, S, [])])
    blind = ClaimRecord(5, "c", None, (), None, (), 3)
    with pytest.raises(ScoreError, match="line 3\\) has no label"):
        score([blind], [pred(5, S, [])])


def test_table_hits() -> None:
    gold = [
        claim(1, S, [], "TabFact", ("P_table_1",)),
        claim(2, R, [], "TabFact", ("Q_table_0",)),
        claim(3, S, [], "TabFact", ("Z_table_4",)),
    ]
    first = [cell(0), ("Q", "header_cell", "2_0_0"), sent(1), ("P", "header_cell", "1_0_0")]
    six_tables = [cell(0, table=t, page="X") for t in range(5)] + [("Q", "table_caption", "0")]
    preds = [
        # ranked: P_table_0, Q_table_2, P_table_1 (header cell) -> rank 3
        pred(1, S, first),
        pred(2, R, six_tables),  # rank 6 (a caption)
        pred(3, S, [sent(0)]),  # never
    ]  # fmt: skip
    assert ranked_tables(preds[0].predicted_evidence) == ["P_table_0", "Q_table_2", "P_table_1"]
    report = score(gold, preds)
    assert report.tables is not None
    assert report.tables.claims == 3
    assert report.tables.hits == {1: 0.0, 5: pytest.approx(1 / 3), 10: pytest.approx(2 / 3)}
    assert report.claims_without_evidence == 3
    assert report.overall.feverous_score == 0.0 and report.overall.label_accuracy == 1.0
    assert report.to_dict()["tables"]["hits"]["10"] == pytest.approx(2 / 3)


def _write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _perfect_predictions(tmp_path: Path) -> Path:
    """dev_sample50 predicted with its own first gold set and label."""
    rows = [json.loads(line) for line in DEV_SAMPLE.read_text().splitlines()]
    return _write(
        tmp_path / "perfect.jsonl",
        [
            {"id": r["id"], "claim": r["claim"], "predicted_label": r["label"],
             "predicted_evidence": r["evidence"][0]["content"]}
            for r in rows
        ],
    )  # fmt: skip


def test_score_files_on_dev_sample(tmp_path: Path) -> None:
    report = score_files(_perfect_predictions(tmp_path), DEV_SAMPLE)
    assert report.overall.claims == 50
    assert report.overall.feverous_score == 1.0 and report.overall.evidence_f1 == 1.0
    assert sum(m.claims for m in report.by_challenge.values()) == 50


def test_score_files_errors_and_malformed(tmp_path: Path) -> None:
    gold = _write(tmp_path / "gold.jsonl", [
        {"id": "", "claim": "", "label": "", "evidence": []},
        {"id": 1, "claim": "c", "label": "SUPPORTS", "evidence": [{"content": ["P_sentence_0"]}]},
    ])  # fmt: skip
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"id": 1, "predicted_label": "SUPPORTS", "predicted_evidence": []}\nnope\n')
    report = score_files(preds, gold)
    assert [m.line_no for m in report.malformed_predictions] == [2]
    assert report.overall.label_accuracy == 1.0
    with pytest.raises(ScoreError, match="does not exist"):
        score_files(tmp_path / "none.jsonl", gold)
    with pytest.raises(ScoreError, match="is a directory"):
        score_files(tmp_path, gold)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ScoreError, match="no valid record \\(it is empty\\)"):
        score_files(tmp_path / "empty.jsonl", gold)
    (tmp_path / "bin.jsonl").write_bytes(b"SQLite format 3\x00\xff\xfe")
    with pytest.raises(ScoreError, match="no valid record; line 1: not JSON"):
        score_files(preds, tmp_path / "bin.jsonl")
    other = _write(
        tmp_path / "other.jsonl", [{"id": 5, "predicted_label": "S", "predicted_evidence": []}]
    )
    with pytest.raises(ScoreError, match="wrong gold file"):
        score_files(other, gold)


def test_cli_score(tmp_path: Path) -> None:
    runner = CliRunner()
    perfect = _perfect_predictions(tmp_path)
    result = runner.invoke(main, ["score", str(perfect), "--gold", str(DEV_SAMPLE), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["overall"]["feverous_score"] == 1.0
    assert data["missing"] == 0 and data["gold_claims"] == 50
    result = runner.invoke(main, ["score", str(perfect), "--gold", str(DEV_SAMPLE)])
    assert result.exit_code == 0
    assert "FEVEROUS" in result.stdout and "Multi-hop" in result.stdout
    result = runner.invoke(main, ["score", str(tmp_path / "x.jsonl"), "--gold", str(DEV_SAMPLE)])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        f"error: prediction file {tmp_path / 'x.jsonl'} does not exist"
    ]
