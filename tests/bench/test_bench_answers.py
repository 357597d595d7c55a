"""Stored per-claim answers of a version run as it was (bench/verdict.py): read in the order of
the claims compared, and refused when a claim is missing."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from bench import verdict
from bench.errors import BenchError


def submission(claim_id: int, label: str) -> bytes:
    line = {"id": claim_id, "claim": "c", "predicted_label": label, "predicted_evidence": []}
    return json.dumps(line).encode() + b"\n"


def test_stored_answers_pair_with_the_claims_by_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verdict, "ANSWERS", tmp_path)
    monkeypatch.setattr(verdict, "REPO", tmp_path)
    (tmp_path / "abc1234").mkdir()
    with gzip.open(tmp_path / "abc1234" / "fm2_dev.jsonl.gz", "wb") as file:
        file.write(submission(7, "REFUTES") + submission(3, "SUPPORTS"))
    lines = [json.dumps({"id": 3, "claim": "x"}), json.dumps({"id": 7, "claim": "y"})]
    answered = verdict.stored_answers("abc1234", "fm2_dev", lines)
    assert verdict.answer_letters(answered) == "SR"  # the claims' order, not the file's
    with pytest.raises(BenchError, match=r"lacks 1 claims, e\.g\. 9"):
        verdict.stored_answers("abc1234", "fm2_dev", [*lines, json.dumps({"id": 9})])
    with pytest.raises(BenchError, match="no stored answers"):
        verdict.stored_answers("abc1234", "tabfact_dev", lines)


def test_a_file_limit_is_one_number_or_a_table_by_file() -> None:
    assert verdict.file_limit(400, "fm2_dev") == 400
    assert verdict.file_limit({"tabfact_dev": 2000}, "tabfact_dev") == 2000
    assert verdict.file_limit({"tabfact_dev": 2000}, "fm2_dev") is None  # all of them
    assert verdict.file_limit(None, "fm2_dev") is None


def test_remembered_readings_read_each_pair_once_and_answer_in_order() -> None:
    calls: list[list[tuple[str, str]]] = []

    def read(claims, premises):
        calls.append(list(zip(claims, premises, strict=True)))
        return np.array([[len(c), len(p)] for c, p in zip(claims, premises, strict=True)], float)

    remembered = verdict.RememberedReadings(read)
    first = remembered(["a", "bb", "a"], ["x", "yy", "x"])
    again = remembered(["bb", "ccc"], ["yy", "z"])
    assert first.tolist() == [[1, 1], [2, 2], [1, 1]]
    assert again.tolist() == [[2, 2], [3, 1]]
    assert calls == [[("a", "x"), ("bb", "yy")], [("ccc", "z")]]  # each pair read once
    assert len(remembered([], [])) == 0 and len(calls) == 3  # the reader's own empty answer
