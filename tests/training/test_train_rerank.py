"""`feverous-es train rerank` with a tiny BERT made here: Malon 2021, §3's groups (gold + hard
negatives from the candidate stage + other claims' gold), training resumed from a checkpoint,
the ONNX export loaded by the cross-encoder reranker, and the one-line errors."""

from __future__ import annotations

import json
import shutil
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import recorded_steps, write_lines

pytest.importorskip("torch")
pytest.importorskip("optimum.exporters.onnx")

from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.export.parity import torch_logits
from feverous_es.index.backends import open_store
from feverous_es.index.elements import Element, ElementType
from feverous_es.plugins.interfaces import Candidate, PluginContext, Query
from feverous_es.rerank.rankers import CrossEncoderReranker
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.training import common, retrieved
from feverous_es.training.rerank import data as rerank_data
from feverous_es.training.rerank import fit as tr

REPO = Path(__file__).resolve().parents[2]
# FEVEROUS-S claims of the sample (sentence gold) and TabFact claims of its tables, whose cell
# gold the fixture picks out of the gold table (their files name only the table).
SENTENCE_CLAIMS = (3385, 7966, 268, 6293, 493, 4329, 2116, 26836)
TABLE_CLAIMS = (900021, 900041, 900091, 900191, 900261, 900558)


def _words(text: str) -> set[str]:
    return {w.strip(".,()").lower() for w in text.split() if len(w) > 3}


@pytest.fixture(scope="module")
def claims_file(tmp_path_factory: pytest.TempPathFactory, sample_index: Path) -> Path:
    rows = {r["id"]: r for r in map(json.loads, (REPO / "sample" / "claims.jsonl").open())}
    lines = [json.dumps({"id": "", "claim": "", "label": "", "evidence": []})]
    lines += [json.dumps(rows[i]) for i in SENTENCE_CLAIMS]
    store = open_store("embedded", sample_index)
    try:
        for claim_id in TABLE_CLAIMS:
            row = rows[claim_id]
            page, _, table = row["gold_tables"][0].rpartition("_table_")
            cells = [
                e
                for e in store.page_elements(unicodedata.normalize("NFD", page))
                if e.type is ElementType.CELL and e.table == int(table)
            ]
            wanted = _words(row["claim"])
            gold = [e for e in cells if _words(e.text) & wanted][:2] or cells[:1]
            # The claim file spells titles NFC ("Ricardo Páez"), the index NFD.
            ids = [unicodedata.normalize("NFC", e.id) for e in gold]
            evidence = [{"content": ids, "context": {}}]
            lines.append(json.dumps({**row, "evidence": evidence}, ensure_ascii=False))
    finally:
        store.close()
    return write_lines(tmp_path_factory.mktemp("claims") / "mixed_dev.jsonl", lines)


@pytest.fixture(scope="module")
def pools_cache(tmp_path_factory: pytest.TempPathFactory, claims_file: Path, sample_index: Path):
    cache = tmp_path_factory.mktemp("pools") / rerank_data.CANDIDATES_FILE
    claims = rerank_data.read_gold_claims([claims_file])
    return retrieved.collect_retrieved(claims, sample_index, cache), cache


def _element(element_id: str, kind: str, text: str) -> dict:
    return {"id": element_id, "type": kind, "linearized": text}


def test_groups_are_gold_hard_negatives_and_other_claims_gold() -> None:
    def pool(name: str, gold: list[dict], candidates: list[dict]) -> retrieved.Retrieved:
        return retrieved.Retrieved("f", name, f"claim {name}", gold=gold, ranked=candidates)

    shared = _element("Shared_sentence_0", "sentence", "shared")
    a = pool(
        "a",
        [_element("A_sentence_0", "sentence", "a0"), shared, _element("A_cell_0_1_0", "cell", "c")],
        [_element("A_sentence_0", "sentence", "a0")]  # gold among the candidates
        + [_element(f"A_sentence_{i}", "sentence", f"a{i}") for i in range(1, 8)]
        + [_element("A_cell_0_2_0", "cell", "c2"), _element("A_item_0_0", "item", "i")],
    )
    b = pool("b", [_element("B_sentence_0", "sentence", "b0"), shared], [])
    c = pool("c", [_element(f"C_sentence_{i}", "sentence", f"c{i}") for i in range(4)], [])
    groups = rerank_data.build_groups([a, b, c], "sentences", seed=5)
    assert groups == rerank_data.build_groups([a, b, c], "sentences", seed=5)  # seeded
    by_gold = {(g.claim_id, g.ids[0]): g for g in groups}
    assert len(groups) == 2 + 2 + 4  # one per gold sentence; the cell gold is not one
    first = by_gold["a", "A_sentence_0"]
    # The 4 best non-gold candidates of the kind, in rank order (the item is a sentence-kind
    # element but ranked below them), then 2 gold elements of other claims.
    assert first.ids[1:5] == tuple(f"A_sentence_{i}" for i in range(1, 5)) and first.hard == 4
    assert len(first.ids) == 7 and first.texts[0] == "a0"
    assert set(first.ids[5:]) <= {"B_sentence_0", *(f"C_sentence_{i}" for i in range(4))}
    golds = {p.id: p.gold_ids() for p in (a, b, c)}
    for g in groups:
        assert not set(g.ids[1:]) & golds[g.claim_id], g  # no gold of its claim as a negative
        assert len(set(g.ids)) == len(g.ids)
    # No candidates: the group is filled with gold elements of other claims.
    lone = by_gold["b", "B_sentence_0"]
    assert lone.hard == 0  # the shared gold is B's too: 5 other gold sentences remain
    assert set(lone.ids[1:]) == {"A_sentence_0", *(f"C_sentence_{i}" for i in range(4))}
    cells = rerank_data.build_groups([a, b, c], "cells", seed=5)
    assert [g.ids for g in cells] == [("A_cell_0_1_0", "A_cell_0_2_0")]  # no other cell gold
    with pytest.raises(common.TrainError, match="--kind"):
        rerank_data.build_groups([a], "tables")


def test_pools_and_groups_from_the_index(pools_cache, claims_file: Path) -> None:
    pools, cache = pools_cache
    assert len(pools) == len(SENTENCE_CLAIMS) + len(TABLE_CLAIMS)
    assert len(cache.read_text().splitlines()) == len(pools)
    claims = {c.id: c for c in rerank_data.read_gold_claims([claims_file])}
    paez = next(p for p in pools if p.id == "900021")
    assert paez.gold and not paez.absent  # NFC ids of the claim file found as NFD in the index
    assert all(e["id"].startswith(unicodedata.normalize("NFD", "Ricardo Páez")) for e in paez.gold)
    for pool in pools:
        assert [e["id"] for e in pool.gold] + pool.absent == list(claims[pool.id].gold)
        assert pool.ranked and pool.gold
    gold_of = {p.id: p.gold_ids() for p in pools}
    pools_by_id = {p.id: p for p in pools}
    for kind in rerank_data.KINDS:
        groups = rerank_data.build_groups(pools, kind, seed=3)
        assert groups
        for g in groups:
            assert g.ids[0] in gold_of[g.claim_id]
            assert (
                rerank_data.kind_of(
                    next(e["type"] for e in pools_by_id[g.claim_id].gold if e["id"] == g.ids[0])
                )
                == kind
            )
            hard, others = g.ids[1 : 1 + g.hard], g.ids[1 + g.hard :]
            assert not set(g.ids[1:]) & gold_of[g.claim_id]
            best = [
                c["id"]
                for c in pools_by_id[g.claim_id].ranked
                if rerank_data.kind_of(c["type"]) == kind and c["id"] not in gold_of[g.claim_id]
            ]
            assert list(hard) == best[:4]  # the best-ranked non-gold candidates of the kind
            assert all(any(o in gold_of[p] for p in gold_of if p != g.claim_id) for o in others)
            assert len(g.ids) <= 7


def test_train_resume_export_and_load(
    pools_cache, claims_file: Path, sample_index: Path, tiny_base: Path, tmp_path: Path
) -> None:
    _, cache = pools_cache
    work, out = tmp_path / "work", tmp_path / "rankers"
    work.mkdir()
    shutil.copyfile(
        cache, work / rerank_data.CANDIDATES_FILE
    )  # collected above: read back, not redone
    settings = tr.TrainSettings(
        base=tiny_base, epochs=1, max_length=64, batch_size=2, checkpoint_every=1, seed=3
    )
    options = tr.RunOptions(
        claims=[claims_file], index=sample_index, out=out, work=work, settings=settings,
        holdout=0.3,
    )  # fmt: skip
    steps, progress = recorded_steps(stop_after=2)
    assert tr.run(options, progress) is None
    assert steps == [("training cells", 1), ("training cells", 2)]
    assert (work / "cells" / common.CHECKPOINT_FILE).is_file()

    args = ["train", "rerank", "--claims", str(claims_file), "--index", str(sample_index)]
    args += ["--out", str(out), "--work", str(work), "--base", str(tiny_base), "--seed", "3"]
    args += ["--max-length", "64", "--batch-size", "2", "--checkpoint-every", "1"]
    args += ["--holdout", "0.3"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert set(summary) == {"cells", "sentences"}
    assert (work / rerank_data.CANDIDATES_FILE).read_text() == cache.read_text()
    for kind in rerank_data.KINDS:
        logged = [json.loads(line)["step"] for line in (work / kind / common.LOSS_LOG).open()]
        assert logged == list(range(1, len(logged) + 1))  # resumed at 3, not restarted
        report = json.loads((out / kind / "training.json").read_text())
        assert logged[-1] == report["training"]["steps"]
        assert report["holdout_groups"]["groups"] > 0
        assert 0 < report["holdout_groups"]["mrr"] <= 1
        assert report["export"]["parity"]["fp32"]["max_abs_diff"] < 1e-4
        assert {
            "model.int8.onnx",
            "tokenizer.json",
            "config.json",
            "manifest.json",
            "README.md",
        } <= {p.name for p in (out / kind).iterdir()}
        assert "MRR" in (out / kind / "README.md").read_text()
        assert json.loads((out / kind / "config.json").read_text())["id2label"] == {
            "0": "relevance"
        }

    # The reranker plugin loads both (manifest-checked) and scores as torch does, within int8.
    reranker = CrossEncoderReranker(
        PluginContext(None, None, "cpu"),  # type: ignore[arg-type]
        model=str(out / "sentences"),
        cell_model=str(out / "cells"),
        max_length=64,
    )
    pools = retrieved.read_retrieved(work / rerank_data.CANDIDATES_FILE)
    pool = next(iter(pools.values()))
    candidates = [
        Candidate(Element(c["id"], "", ElementType(c["type"]), "", c["linearized"], "", ""), 0.0, 1)
        for c in pool.ranked
    ]
    ranked = reranker.rerank([(Query(pool.claim, np.zeros(384, np.float32)), candidates)])[0]
    assert sorted(c.element.id for c in ranked) == sorted(c.element.id for c in candidates)
    for kind, encoder in (("cells", reranker.cell), ("sentences", reranker.non_cell)):
        assert encoder.model_path.parent == out / kind
        mine = [c for c in ranked if rerank_data.kind_of(c.element.type) == kind]
        if not mine:
            continue
        pairs = [(pool.claim, c.element.linearized) for c in mine]
        expected = torch_logits(work / kind / common.TRAINED_DIR, pairs, 64)[:, 0]
        np.testing.assert_allclose([c.score for c in mine], expected, atol=0.1)
    assert isinstance(reranker.cell, CrossEncoder)


def test_bad_inputs_are_one_line_errors(
    claims_file: Path, sample_index: Path, tiny_base: Path, tmp_path: Path
) -> None:
    def invoke(*extra: str) -> list[str]:
        args = ["train", "rerank", "--index", str(sample_index), "--out", str(tmp_path / "m")]
        result = CliRunner().invoke(main, [*args, *extra])
        assert result.exit_code == 1, result.output
        lines = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert len(lines) == 1, result.output
        return lines

    missing = tmp_path / "nope.jsonl"
    [line] = invoke("--claims", str(missing), "--base", str(tiny_base))
    assert "nope.jsonl does not exist" in line
    [line] = invoke("--claims", str(claims_file), "--base", str(tmp_path))
    assert "not a Hugging Face model directory" in line
    [line] = invoke("--claims", str(claims_file), "--base", str(tiny_base), "--holdout", "1")
    assert "--holdout" in line


def test_a_student_starts_from_its_teacher_and_learns_its_scores(
    pools_cache, claims_file: Path, sample_index: Path, tmp_path: Path
) -> None:
    from feverous_es.rerank.rankers import PACKAGED_SENTENCE_RANKER

    _, cache = pools_cache
    work, out = tmp_path / "work", tmp_path / "student"
    work.mkdir()
    shutil.copyfile(cache, work / rerank_data.CANDIDATES_FILE)
    settings = tr.TrainSettings(
        epochs=1, max_length=64, batch_size=4,
        seed=3, teacher=PACKAGED_SENTENCE_RANKER, layers=2,
    )  # fmt: skip
    options = tr.RunOptions(
        claims=[claims_file], index=sample_index, out=out, work=work, settings=settings,
        kind="sentences", holdout=0.3,
    )  # fmt: skip
    reports = tr.run(options)
    assert reports is not None
    report = reports["sentences"]
    assert report["training"]["layers"] == 2
    assert report["training"]["teacher"] == str(PACKAGED_SENTENCE_RANKER)
    config = json.loads((out / "sentences" / "config.json").read_text())
    assert config["num_hidden_layers"] == 2
    # The targets are the teacher's scores as the reranker computes them (its int8 graph).
    targets = json.loads((work / "sentences" / tr.TEACHER_SCORES_FILE).read_text())
    claims = rerank_data.read_gold_claims([claims_file], seed=3)
    pools = retrieved.collect_retrieved(claims, sample_index, work / rerank_data.CANDIDATES_FILE)
    train_pools, _ = tr.datasets.split(pools, 3, 0.3)  # the run's own groups, read back
    groups = rerank_data.build_groups(train_pools, "sentences", negatives=4, others=2, seed=3)
    teacher = CrossEncoder(PACKAGED_SENTENCE_RANKER, max_length=64, device="cpu")
    expected = teacher.score([pair for g in groups for pair in g.pairs()])
    np.testing.assert_allclose([x for row in targets for x in row], expected, rtol=1e-6)
