"""`feverous-es train rerank --kind rows`: the table ranking's row model from claims that name
their table, with a tiny BERT made here, loaded by the candidate stage as its row model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("optimum.exporters.onnx")

from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.errors import TrainError
from feverous_es.index.backends import open_store
from feverous_es.plugins.interfaces import PluginContext, Query
from feverous_es.retrieve.candidates import PapeloCandidates
from feverous_es.training.rows import data as rr

REPO = Path(__file__).resolve().parents[1]
SAMPLE_CLAIMS = REPO / "sample" / "claims.jsonl"


def _pool(claim_id: str, gold_row: str | None, rows: list[str]) -> rr.RowPool:
    return rr.RowPool("tabfact", claim_id, f"claim {claim_id}", 0 if gold_row else None,
                      gold_row, rows)  # fmt: skip


def test_groups_are_gold_row_hard_rows_and_other_claims_gold_rows() -> None:
    pools = [
        _pool("1", "gold 1", ["hard 1a", "hard 1b", "hard 1c"]),
        _pool("2", "gold 2", ["hard 2a"]),
        _pool("3", None, ["hard 3a", "hard 3b"]),  # its table is not in the pool
        _pool("4", "gold 4", []),
    ]
    groups = rr.build_row_groups(pools, negatives=2, others=1, seed=5)
    assert [g.claim_id for g in groups] == ["1", "2", "4"]
    first = groups[0]
    assert first.texts[:3] == ("gold 1", "hard 1a", "hard 1b") and first.hard == 2
    assert len(first.texts) == 4 and first.texts[3] in {"gold 2", "gold 4"}
    assert groups[2].hard == 0 and groups[2].texts[1] in {"gold 1", "gold 2"}
    assert rr.build_row_groups(pools, negatives=2, others=1, seed=5) == groups  # seeded


def test_claims_naming_no_table_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "sentences.jsonl"
    path.write_text(json.dumps({"id": 1, "claim": "x", "label": "SUPPORTS", "evidence": []}))
    with pytest.raises(TrainError, match="no claims that name gold_tables"):
        rr.read_table_claims([path])


def test_train_export_and_use_as_the_row_model(
    sample_index: Path, tiny_base: Path, tmp_path: Path
) -> None:
    work, out = tmp_path / "work", tmp_path / "rankers"
    args = ["train", "rerank", "--kind", "rows", "--claims", str(SAMPLE_CLAIMS)]
    args += ["--index", str(sample_index), "--out", str(out), "--work", str(work)]
    args += ["--base", str(tiny_base), "--max-length", "64", "--batch-size", "4"]
    args += ["--negatives", "3", "--others", "1", "--holdout", "0.3", "--seed", "3"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["out"] == str(out / "rows")
    report = json.loads((out / "rows" / "training.json").read_text())
    # The sample's 60 TabFact claims name tables of its pages: most are found in the pool.
    assert report["table_claims"] == 60 and report["gold_table_in_pool"] >= 40
    assert report["training"]["groups"] > 0 and report["holdout_groups"]["groups"] > 0
    assert report["export"]["parity"]["fp32"]["max_abs_diff"] < 1e-4
    assert "row ranker" in (out / "rows" / "README.md").read_text()
    assert len((work / rr.GROUPS_FILE).read_text().splitlines()) == 60

    store = open_store("embedded", sample_index)
    try:
        claim = "the most points scored by the 2008 bradford bulls was 98 on april 19th"
        query = Query(claim, np.zeros(store.dim, np.float32))
        context = PluginContext(store, None, "cpu")  # type: ignore[arg-type]
        plain = PapeloCandidates(context, row_tables=0).rank_tables(query)[0]
        stage = PapeloCandidates(
            context, row_tables=15, row_model=str(out / "rows"), row_weight=1.0
        )
        reranked = stage.rank_tables(query)[0]
        assert stage.row_encoder().model_path.parent == out / "rows"
        # The row step re-orders the first row_tables tables and keeps the rest in place.
        assert sorted(reranked[:15]) == sorted(plain[:15]) and reranked[15:] == plain[15:]
    finally:
        store.close()
