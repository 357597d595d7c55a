"""`feverous-es train hop` with a tiny T5 made here (no T5 weights exist offline): Malon 2021, §4's
pairs from the sample's multi-page gold chains, training resumed from a checkpoint, the ONNX
export loaded by Seq2SeqModel and run by the seq2seq hop plugin, and the one-line errors."""

from __future__ import annotations

import json
import unicodedata
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import recorded_steps, write_lines

pytest.importorskip("torch")
pytest.importorskip("optimum.exporters.onnx")

from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.index.backends import open_store
from feverous_es.plugins.evidence_text import seq2seq_input
from feverous_es.plugins.interfaces import Candidate, PluginContext, Query
from feverous_es.retrieve.hops import Seq2SeqHop, parse_imagined
from feverous_es.runtime.seq2seq import Seq2SeqModel
from feverous_es.training.hop import data as hop_data
from feverous_es.training.hop import fit as th
from feverous_es.training.retrieved import (
    Retrieved,
    collect_retrieved,
    read_retrieved,
    record_candidate,
)

REPO = Path(__file__).resolve().parents[2]
# Sample claims whose gold spans two or three pages, and one-page ones.
MULTI_PAGE = (24089, 1490, 27681, 36620, 3387, 1916, 14702, 1426, 3850)
ONE_PAGE = (3385, 7966, 268, 6293, 493, 2116)


@pytest.fixture(scope="module")
def claims_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = {r["id"]: r for r in map(json.loads, (REPO / "sample" / "claims.jsonl").open())}
    lines = [json.dumps({"id": "", "claim": "", "label": "", "evidence": []})]
    lines += [json.dumps(rows[i], ensure_ascii=False) for i in MULTI_PAGE + ONE_PAGE]
    return write_lines(tmp_path_factory.mktemp("claims") / "sample_dev.jsonl", lines)


@pytest.fixture(scope="module")
def retrieved(
    claims_file: Path, sample_index: Path, tmp_path_factory: pytest.TempPathFactory
) -> list[Retrieved]:
    cache = tmp_path_factory.mktemp("retrieved") / hop_data.RETRIEVED_FILE
    return collect_retrieved(hop_data.read_hop_claims([claims_file]), sample_index, cache)


@pytest.fixture(scope="module")
def tiny_t5(tmp_path_factory: pytest.TempPathFactory, retrieved: list[Retrieved]) -> Path:
    """A 2-layer T5 with d_model 32 and random weights, with a Unigram tokenizer trained here on
    the claims and their pages' text (pad 0 = decoder start, eos 1, unk 2, as T5's)."""
    import torch
    import transformers
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from tokenizers.processors import TemplateProcessing

    texts = [r.claim for r in retrieved]
    texts += [
        e["linearized"] for r in retrieved for e in r.gold + r.others()[: hop_data.KEPT_CANDIDATES]
    ]
    texts += ["missing: [HYP] supports refutes none"]
    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    special = ["<pad>", "</s>", "<unk>"]
    trainer = trainers.UnigramTrainer(vocab_size=1000, special_tokens=special, unk_token="<unk>")
    tokenizer.train_from_iterator(texts, trainer)
    # The trainer's scores differ between runs in their last bits (it sums in hash-map order) and
    # the characters it adds last get made-up scores in hash-set order, so ids and segmentations
    # differ and the tiny model memorises differently: rounded scores, those characters at the
    # lowest learned score, and a fixed order make the vocabulary the same every run.
    pieces = json.loads(tokenizer.to_str())["model"]["vocab"][len(special) :]
    floor = round(min(score for p, score in pieces if len(p) > 1), 6)
    rounded = ((p, max(round(score, 6), floor)) for p, score in pieces)
    scored = sorted(rounded, key=lambda p: (-p[1], p[0]))
    tokenizer.model = models.Unigram([(s, 0.0) for s in special] + scored, unk_id=2)
    tokenizer.post_processor = TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
        model_input_names=["input_ids", "attention_mask"],
    )  # fmt: skip
    root = tmp_path_factory.mktemp("tiny-t5")
    fast.save_pretrained(root)
    config = transformers.T5Config(
        vocab_size=len(fast), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2,
        num_heads=4, dropout_rate=0.0, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    transformers.T5ForConditionalGeneration(config).save_pretrained(root)
    return root


def _pages_listed(text: str) -> str:
    return text.split(" [HYP] ")[0]


def test_pairs_of_multi_page_gold_target_the_missing_page(
    retrieved: list[Retrieved],
) -> None:
    by_id = {int(r.id): r for r in retrieved}
    assert set(by_id) == set(MULTI_PAGE + ONE_PAGE)
    for claim_id in MULTI_PAGE:
        item = by_id[claim_id]
        assert not item.absent  # every gold element is in the sample index
        gold_pages = list(dict.fromkeys(e["page"] for e in item.gold))
        assert len(gold_pages) >= 2
        pairs = hop_data.build_pairs(item, seed=13)
        page_pair = pairs[0]
        # The sample index is small: retrieval finds every gold page, so the lowest-ranked one
        # is hidden, and its first gold element is the target.
        assert page_pair.kind == "hidden-page"
        hidden = max(gold_pages, key=item.pages.index)
        assert page_pair.hidden == (hidden,)
        first = next(e for e in item.gold if e["page"] == hidden)
        assert page_pair.wanted == first["id"]
        assert page_pair.target == f"{hop_data.label_word(item.label)} {first['linearized']}"
        assert parse_imagined(page_pair.target) == (hidden, first["linearized"][len(hidden) + 3 :])
        # The evidence is the other pages' gold, read exactly as the plugin builds its input.
        given = [e for e in item.gold if e["page"] != hidden]
        assert page_pair.given == tuple(e["id"] for e in given)
        assert page_pair.input == seq2seq_input(item.claim, [record_candidate(e) for e in given])
        assert f"[{hidden}]" not in page_pair.input
        assert hidden not in _pages_listed(page_pair.input).split(" ", 1)[1]
        for pair in pairs[1:]:  # a seeded half also learns to stop on the whole chain
            assert pair.kind == "complete" and pair.target.endswith(" none")
            assert set(pair.given) == {e["id"] for e in item.gold}
    kinds = [p.kind for i in MULTI_PAGE for p in hop_data.build_pairs(by_id[i], 13)]
    assert "complete" in kinds


def test_no_pair_targets_evidence_it_already_gives(
    retrieved: list[Retrieved],
) -> None:
    pairs = hop_data.all_pairs(retrieved, seed=13, distractors=3)
    assert {p.kind for p in pairs} >= {"hidden-page", "complete", "left-out"}
    for pair in pairs:
        assert pair.wanted not in pair.given
        item = next(r for r in retrieved if r.id == pair.id)
        given_text = {e["linearized"] for e in item.gold + item.others() if e["id"] in pair.given}
        if pair.wanted is not None:
            assert pair.target.split(" ", 1)[1] not in given_text
            assert not any(g.startswith(f"[{h}]") for g in given_text for h in pair.hidden)
        if pair.kind == "left-out":
            gold = [e["id"] for e in item.gold]
            assert len({p for p in gold if p in pair.given}) == len(gold) - 1
        distractors = [i for i in pair.given if i not in {e["id"] for e in item.gold}]
        assert len(distractors) <= 3
        assert pair.given[len(pair.given) - len(distractors) :] == tuple(distractors)


def test_a_page_retrieval_missed_is_the_target(retrieved: list[Retrieved]) -> None:
    """Papelo's case: the gold on the retrieved pages is the evidence, the first gold element
    of the page retrieval missed the target, even when it is not the lowest-ranked."""
    item = next(r for r in retrieved if int(r.id) == 24089)  # Lake Tikub, Tiaong, Quezon
    tiaong = unicodedata.normalize("NFD", "Tiaong")
    missed = replace(item, pages=[p for p in item.pages if p != tiaong])
    missed.ranked = [dict(e, page=tiaong) for e in item.others()[:1]] + item.ranked
    (pair,) = hop_data.build_pairs(missed, seed=13, distractors=2)
    assert pair.kind == "missing-page" and pair.hidden == (tiaong,)
    assert pair.wanted == f"{tiaong}_sentence_0"
    assert all(not g.startswith(f"{tiaong}_") for g in pair.given)
    gold_given = [e["id"] for e in item.gold if e["page"] != tiaong]
    assert list(pair.given[: len(gold_given)]) == gold_given
    assert pair.given[len(gold_given) :] == tuple(e["id"] for e in item.others()[:2])


def test_train_resume_via_the_cli_export_and_generate(
    claims_file: Path, sample_index: Path, tiny_t5: Path, tmp_path: Path
) -> None:
    settings = th.TrainSettings(
        base=tiny_t5, epochs=12, max_length=192, target_length=48, batch_size=4,
        learning_rate=3e-3, checkpoint_every=3, seed=13, threads=1,
    )  # fmt: skip
    options = th.RunOptions(
        claims=[claims_file], index=sample_index, out=tmp_path / "hop", work=tmp_path / "work",
        settings=settings, holdout=0.2,
    )  # fmt: skip
    steps, progress = recorded_steps(stop_after=2)
    assert th.run(options, progress) is None
    assert (
        steps == [("training", 1), ("training", 2)]
        and (options.work / th.CHECKPOINT_FILE).is_file()
    )

    args = ["train", "hop", "--claims", str(claims_file), "--index", str(sample_index)]
    args += ["--out", str(options.out), "--work", str(options.work), "--base", str(tiny_t5)]
    args += ["--epochs", "12", "--max-length", "192", "--target-length", "48"]
    args += ["--batch-size", "4", "--lr", "0.003", "--checkpoint-every", "3", "--threads", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{") :])
    assert summary["pairs"]["hidden-page"] == len(MULTI_PAGE)
    report = json.loads((options.out / "training.json").read_text())
    logged = [json.loads(line)["step"] for line in (options.work / "loss.jsonl").open()]
    assert logged == list(range(1, report["training"]["steps"] + 1))  # resumed, not restarted
    assert report["export"]["parity"]["fp32"]["max_abs_diff"] < 1e-3
    assert report["torch_agreement"] == 1.0  # ONNX generates what torch generates
    held = report["holdout_metrics"]
    assert held["all"]["pairs"] >= 1 and 0.0 <= held["all"]["exact_match"] <= 1.0

    out = options.out
    names = {p.name for p in out.iterdir()}
    assert {"encoder_model.onnx", "tokenizer.json", "config.json", "README.md"} <= names
    assert {"manifest.json", "training.json"} <= names
    card = (out / "README.md").read_text()
    assert "feverous-es train hop --claims" in card and "title recall" in card
    assert "hidden-page" in card and claims_file.name in card

    model = Seq2SeqModel(out, device="cpu", max_length=192)
    pairs = hop_data.all_pairs(
        read_retrieved(options.work / hop_data.RETRIEVED_FILE).values(), 13, 0
    )
    outputs = model.generate([p.input for p in pairs[:3]], max_new_tokens=48)
    assert len(outputs) == 3 and all(isinstance(o, str) for o in outputs)


def test_hop_plugin_searches_the_page_the_model_names(
    retrieved: list[Retrieved], sample_index: Path, tiny_t5: Path, tmp_path: Path
) -> None:
    """Trained (to memorization) on one claim's two pairs, the exported model names the missing
    page when it is missing, and the plugin proposes that page's elements; given the whole chain
    it says none, and the plugin stops."""
    item = next(r for r in retrieved if int(r.id) == 1916)  # Jovan Oliver → Stefan Dušan
    pairs = hop_data.build_pairs(item, seed=13)
    assert [p.kind for p in pairs] == ["hidden-page", "complete"]
    settings = th.TrainSettings(
        base=tiny_t5, epochs=100, max_length=192, target_length=16, batch_size=2,
        learning_rate=1e-2, warmup=0.0, checkpoint_every=1000, seed=13, threads=1,
    )  # fmt: skip
    trained = th.train(pairs, settings, tmp_path / "work")
    assert trained is not None
    th.export(trained, tmp_path / "hop", tmp_path / "work", [p.input for p in pairs], 192, "")
    store = open_store("embedded", sample_index)
    try:
        hop = Seq2SeqHop(PluginContext(store, None, "cpu"), model=str(tmp_path / "hop"))  # type: ignore[arg-type]
        query = Query(item.claim, np.zeros(384, np.float32))
        chain = [Candidate(e, 1.0) for e in store.get_elements(list(pairs[0].given))]
        proposals = hop.propose(query, chain, hop=2)
        whole = [Candidate(e, 1.0) for e in store.get_elements(list(pairs[1].given))]
        stopped = hop.propose(query, whole, hop=3)
    finally:
        store.close()
    dusan = unicodedata.normalize("NFD", "Stefan Dušan")
    assert proposals and {c.element.page for c in proposals} == {dusan}
    assert all(c.source.startswith("imagined: Stefan") for c in proposals)
    assert stopped == []


def test_bad_base_is_one_line(
    claims_file: Path, sample_index: Path, tiny_base: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    args = ["train", "hop", "--claims", str(claims_file), "--index", str(sample_index)]
    args += ["--out", str(tmp_path / "hop")]
    for base, message in (
        (tmp_path, "is not a Hugging Face model directory"),
        (tiny_base, "is not a seq2seq (T5-style) model: its config.json has model_type 'bert'"),
    ):
        result = runner.invoke(main, [*args, "--base", str(base)])
        assert result.exit_code == 1, result.output
        lines = [line for line in result.output.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    result = runner.invoke(main, args)
    assert result.exit_code == 2 and "--base" in result.output  # required
    assert not (tmp_path / "hop.work" / hop_data.RETRIEVED_FILE).exists()  # failed before retrieval
