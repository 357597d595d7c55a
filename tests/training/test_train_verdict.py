"""`feverous-es train verdict` end to end with a tiny BERT made here (not the shipped model):
evidence from the sample index, the mixed pairs (retrieved, gold-removed NEI, gold table, nli),
cross-fitting scores, training with a resumed checkpoint, ONNX export with parity, the exported
model in the verdict plugin, and the one-line errors."""

from __future__ import annotations

import dataclasses
import gzip
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
from feverous_es.errors import TrainError
from feverous_es.export.parity import torch_logits
from feverous_es.plugins.interfaces import Label, PluginContext, Query
from feverous_es.training.bases import base_name
from feverous_es.training.common import CHECKPOINT_FILE, TRAINED_DIR
from feverous_es.training.retrieved import read_retrieved
from feverous_es.training.verdict import entailment_data as data
from feverous_es.training.verdict.command import run as run_training
from feverous_es.training.verdict.evidence import collect_evidence, read_labelled_claims
from feverous_es.training.verdict.options import (
    EVIDENCE_FILE,
    FULL_MODEL,
    PAIRS_FILE,
    PairMix,
    Retrieval,
    RunOptions,
    TrainSettings,
)
from feverous_es.training.verdict.pairs import (
    WINDOW,
    build_pairs,
    is_valid,
    training_pool,
)
from feverous_es.verdict.inputs import sentence_premise

CLAIMS = [
    ("The Glenn Thompson Plantation is also known as Cedar Heights Plantation.", "SUPPORTS"),
    ("Bill Persky was born on September 9, 1931.", "SUPPORTS"),
    ("Bill Persky was born in 1975 in France.", "REFUTES"),
    ("Harriet Shing is a Labor member of the Victorian Legislative Council.", "SUPPORTS"),
    ("Lucena is the least populous city of Quezon.", "REFUTES"),
    ("Tiaong is officially the Municipality of Tiaong.", "SUPPORTS"),
    ("Rex Jory has never written for The Advertiser.", "REFUTES"),
    ("The Cape Fear and Yadkin Valley Railway operated only in Texas.", "REFUTES"),
]
TABLE_CLAIMS = [
    ("ricardo páez play for venezuela", "SUPPORTS", "Ricardo Páez_table_0"),
    ("kjlt - fm broadcast in texas", "REFUTES", "KJLT-FM_table_0"),
]


def write_claims(path: Path, records: list[dict]) -> Path:
    lines = [json.dumps({"id": "", "claim": "", "label": "", "evidence": []})]
    return write_lines(path, [*lines, *map(json.dumps, records)])


def write_pairs(path: Path) -> Path:
    rows = [
        {"source": "nli-text", "id": "t1", "claim": "A man rides.", "label": "SUPPORTS",
         "evidence": [{"title": "", "text": "A man is riding a bike."}]},
        {"source": "nli-text", "id": "t2", "claim": "A man sleeps.", "label": "NOT ENOUGH INFO",
         "evidence": [{"title": "Men", "text": "A man is riding a bike."}]},
        {"source": "nli-table", "id": "b1", "claim": "It was released in 2007.",
         "label": "REFUTES", "table": {"title": "In Rainbows", "caption": "", "header": ["", ""],
                                       "rows": [["Released", "10 October 2008"]]}},
    ]  # fmt: skip
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(r) + "\n" for r in rows)
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, sample_index: Path) -> Path:
    """The claim and pair files, and the evidence the pipeline retrieves for the claims, made
    once for the module (retrieval is the slow part; each test trains on its own copy)."""
    root = tmp_path_factory.mktemp("verdict-inputs")
    write_claims(
        root / "first_dev.jsonl",
        [{"id": 100 + i, "claim": c, "label": label, "evidence": []}
         for i, (c, label) in enumerate(CLAIMS[:4])],
    )  # fmt: skip
    write_claims(
        root / "second_dev.jsonl",
        [{"id": 200 + i, "claim": c, "label": label, "evidence": []}
         for i, (c, label) in enumerate(CLAIMS[4:])],
    )  # fmt: skip
    write_claims(
        root / "tables_train.jsonl",
        [{"id": 300 + i, "claim": c, "label": label, "evidence": [], "gold_tables": [t]}
         for i, (c, label, t) in enumerate(TABLE_CLAIMS)],
    )  # fmt: skip
    write_pairs(root / "nli.jsonl.gz")
    claims = read_labelled_claims([root / "first_dev.jsonl", root / "second_dev.jsonl"])
    collect_evidence(claims, sample_index, root / EVIDENCE_FILE, hops=1)
    return root


@pytest.fixture
def options(tmp_path: Path, tiny_base: Path, sample_index: Path, inputs: Path) -> RunOptions:
    work = tmp_path / "work"
    work.mkdir()
    shutil.copyfile(inputs / EVIDENCE_FILE, work / EVIDENCE_FILE)
    settings = TrainSettings(
        base=tiny_base, epochs=2, max_length=64, batch_size=4, checkpoint_every=1, seed=3
    )
    return RunOptions(
        claims=[inputs / "first_dev.jsonl", inputs / "second_dev.jsonl"],
        mix=PairMix(train_claims=[inputs / "tables_train.jsonl"], pairs=[inputs / "nli.jsonl.gz"]),
        index=sample_index, out=tmp_path / "model", work=work, settings=settings,
        holdout=0.3, retrieval=Retrieval(hops=1),
        command="feverous-es train verdict …",
    )  # fmt: skip


def test_training_evidence_is_what_the_default_pipeline_retrieves(
    inputs: Path, sample_index: Path
) -> None:
    # The model must learn from the evidence verify will give it (Malon (2021) §5): the same
    # reranker and selection, in the same order. One batch of the same claims, as the fixture
    # retrieved them: the int8 ranker's scores move slightly with a batch's padding.
    from feverous_es.plugins.config import load_config
    from feverous_es.verify.pipeline import Pipeline

    cached = read_retrieved(inputs / EVIDENCE_FILE)
    with Pipeline.open(sample_index, config=load_config(hops=1, environ={})) as pipeline:
        results = pipeline.retrieve_many([claim for claim, _ in CLAIMS])
    for i, result in enumerate(results):
        source = "first_dev" if i < 4 else "second_dev"
        evidence = cached[(source, str(100 + i if i < 4 else 200 + i - 4))].evidence
        assert [e["id"] for e in evidence] == [c.element.id for c in result.evidence]


def test_pairs_are_rebuilt_when_the_pair_options_change(options: RunOptions) -> None:
    # A rerun reads its pairs back; one with another pair mix (here, no NLI file) must not
    # train on the pairs of the first.
    first = build_pairs(options)
    assert any(p.source.startswith("nli") for p in first)
    options.mix.pairs = []
    rebuilt = build_pairs(options)
    assert rebuilt and not any(p.source.startswith("nli") for p in rebuilt)
    assert [p.key for p in build_pairs(options)] == [p.key for p in rebuilt]  # read back


def test_the_folds_hold_out_each_held_out_claim_once_and_train_on_the_rest(
    options: RunOptions,
) -> None:
    """Cross-fitting (`--fold F/K`): fold F's claims are the only ones held out; every claim
    the plain split holds out is in exactly one fold, and the claims it trains on still train."""
    options.holdout, options.mix.pairs, options.mix.train_claims = 0.7, [], []
    plain = {p.key: p.held_out for p in build_pairs(options) if p.train}
    held_by_fold = []
    for fold in range(3):
        options.fold = f"{fold}/3"
        held_by_fold.append({p.key for p in build_pairs(options) if p.held_out})
    assert all(held_by_fold) and sum(map(len, held_by_fold)) == len(set().union(*held_by_fold))
    assert set().union(*held_by_fold) >= {k for k, held in plain.items() if held}
    assert not set().union(*held_by_fold) & {k for k, held in plain.items() if not held}
    for bad in ("3/3", "a/3", "1"):
        options.fold = bad
        with pytest.raises(TrainError, match="--fold"):
            options.check()


def test_train_resume_export_and_load(options: RunOptions) -> None:
    steps, progress = recorded_steps(stop_after=2)
    assert run_training(options, progress) is None
    assert steps == [("training", 1), ("training", 2)]
    assert (options.work / FULL_MODEL / CHECKPOINT_FILE).is_file()
    cached = (options.work / EVIDENCE_FILE).read_text().splitlines()
    assert len(cached) == len(CLAIMS)  # the table file is read against its gold tables only
    assert all(json.loads(line)["evidence"] for line in cached)  # retrieved, not gold (empty)
    pairs = data.read_pairs(options.work / PAIRS_FILE)
    by_source = {p.source for p in pairs}
    assert {"first_dev", "second_dev", "tables_train", "nli-text", "nli-table"} <= by_source
    gold_tables = [p for p in pairs if p.source == "tables_train"]
    assert len(gold_tables) == 2 and all(p.route == "table" for p in gold_tables)
    assert "venezuela" in gold_tables[0].premise.lower()
    assert not any(p.held_out for p in gold_tables)  # a training-only file is never held out

    steps, progress = recorded_steps()
    report = run_training(options, progress)
    assert report is not None
    assert steps[0] == ("training", 3)  # resumed, not restarted
    assert (options.work / EVIDENCE_FILE).read_text().splitlines() == cached  # not redone

    out = options.out
    names = {p.name for p in out.iterdir()}
    shipped = {"model.int8.onnx", "tokenizer.json", "config.json", "README.md"}
    assert shipped <= names
    assert "manifest.json" in names
    config = json.loads((out / "config.json").read_text())
    assert config["id2label"] == {"0": "SUPPORTS", "1": "REFUTES", "2": "NOT ENOUGH INFO"}
    # Every held-out pair is scored by the exported model, as the verdict reads it.
    scores = data.read_scores(options.work / "scores.jsonl")
    held = [p for p in pairs if p.held_out]
    assert held and all(len(scores[p.key]) == 3 for p in held)
    assert report["holdout_accuracy"]
    parity = report["export"]["parity"]
    assert parity["fp32"]["max_abs_diff"] < 1e-4
    assert parity["int8"]["max_abs_diff"] < 0.1
    # The card names the base it was fine-tuned from (a licence only for a base it knows).
    assert (
        f"fine-tuned from `{base_name(options.settings.base)}`" in (out / "README.md").read_text()
    )


def test_exported_model_in_the_verdict_plugin_matches_torch(options: RunOptions) -> None:
    from feverous_es.index.backends import open_store
    from feverous_es.retrieve.evidence_tables import with_tables
    from feverous_es.verdict.classifier import ClassifierVerdict
    from feverous_es.verdict.feature_model import evidence_table
    from feverous_es.verdict.inputs import table_premise
    from feverous_es.verdict.model_files import softmax

    options.holdout = 0.0
    run_training(options)
    examples = list(read_retrieved(options.work / EVIDENCE_FILE).values())
    store = open_store("embedded", options.index)
    # The entailment model alone (the feature models off), NEI never forced.
    verdict = ClassifierVerdict(
        PluginContext(store, None, "cpu"),  # type: ignore[arg-type]
        model=str(options.out), table_model="", nei_above=1.1,
    )  # fmt: skip
    handed = [with_tables(e.evidence_candidates(), store) for e in examples]
    vector = np.zeros(384, np.float32)
    batch = [(Query(e.claim, vector), ev) for e, ev in zip(examples, handed, strict=True)]
    got = verdict.predict(batch)
    tables = [evidence_table(query.text, ev) for query, ev in batch]
    store.close()
    # Each claim is read against its route's premise: its table, or its sentences.
    pairs = [
        (e.claim, table_premise(e.claim, t) if t else sentence_premise(e.evidence_candidates()))
        for e, t in zip(examples, tables, strict=True)
    ]
    expected = softmax(torch_logits(options.work / FULL_MODEL / TRAINED_DIR, pairs, 64))
    for result, row in zip(got, expected, strict=True):
        assert result.label is (Label.SUPPORTS if row[0] >= row[1] else Label.REFUTES)
        assert result.probabilities[Label.SUPPORTS] == pytest.approx(row[0], abs=0.05)


def test_bad_inputs_are_one_line_errors(options: RunOptions, tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(TrainError, match=r"nope\.jsonl does not exist"):
        run_training(dataclasses.replace(options, claims=[missing]))
    with pytest.raises(TrainError, match=r"index .* does not exist"):
        run_training(dataclasses.replace(options, index=tmp_path / "no-index"))
    bad_base = TrainSettings(**{**vars(options.settings), "base": tmp_path})
    with pytest.raises(TrainError, match="not a Hugging Face model directory"):
        run_training(dataclasses.replace(options, settings=bad_base))
    bad_pairs = tmp_path / "bad.jsonl"
    bad_pairs.write_text('{"source": "x", "claim": "c"}\n')
    with pytest.raises(TrainError, match=r"bad\.jsonl:1: not a claim/evidence pair"):
        list(data.nli_pairs(bad_pairs))

    (options.work / FULL_MODEL).mkdir(parents=True)
    (options.work / FULL_MODEL / CHECKPOINT_FILE).write_bytes(b"not a checkpoint")
    runner = CliRunner()
    args = ["train", "verdict", "--index", str(options.index), "--base", str(options.settings.base)]
    args += ["--claims", str(options.claims[0]), "--out", str(options.out)]
    args += ["--work", str(options.work), "--hops", "1", "--max-length", "64"]
    result = runner.invoke(main, args)
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "is unreadable" in lines[0] and "delete it" in lines[0], (
        result.output
    )


def test_no_reader_trains_here_on_the_claims_the_cascade_is_chosen_on(options: RunOptions) -> None:
    """The GPU job's validation claims (the cascade's threshold is chosen on them) stay in its
    pool, to validate on, and out of the pool a reader trains on here, distilled or not."""
    pairs = [
        data.Pair(source, str(n), f"claim {n}", "premise", "SUPPORTS", "sentence")
        for n in range(100) for source in ("fm2_dev", "fm2_dev" + WINDOW)
    ]  # fmt: skip
    seed = options.settings.seed

    def validating(pair: data.Pair) -> bool:
        return is_valid(seed, pair.source.removesuffix(WINDOW), pair.id)

    assert any(map(validating, training_pool(pairs, options, validation=True)))
    assert not any(map(validating, training_pool(pairs, options)))


def test_the_gpu_reader_job_trains_elsewhere_and_ships_through_the_same_command(
    options: RunOptions, tiny_base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU queue's reader job made of the command's own pairs; its student, read back with
    --from-gpu, is exported, measured and carded as a CPU-trained model is."""
    import subprocess
    import sys

    from gpu_queue import bundle as gpu_bundle
    from gpu_queue.jobs import reader_job

    monkeypatch.chdir(tmp_path)
    pairs = build_pairs(options)
    job = reader_job(pairs, training_pool(pairs, options, validation=True), seed=3, max_length=64,
                     from_teacher=False, options={})  # fmt: skip
    assert {"train", "held"} <= {p["role"] for p in job.pairs}
    assert sum(p["role"] == "held" for p in job.pairs) == len(
        [p for p in pairs if p.held_out and p.train]
    )
    gpu_bundle.write_bundle(Path("bundle"), [job], {"mpnet": {"dir": tiny_base},
                            "minilm": {"dir": tiny_base}}, wheels=False)  # fmt: skip
    run = subprocess.run(
        [sys.executable, "bundle/job.py", "bundle", "results", "--device", "cpu", "--work",
         "machine"], capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]

    options.from_gpu = tmp_path / "results" / "reader"
    report = run_training(options)
    assert report is not None
    assert report["training"]["device"] == "cpu"  # the job's device (a GPU's name there)
    assert report["training"]["teacher"]["best_epoch"] >= 1
    assert report["export"]["parity"]["fp32"]["max_abs_diff"] < 1e-4
    card = (options.out / "README.md").read_text()
    assert "distilled from a" in card and "chosen on validation claims" in card
    with pytest.raises(TrainError, match="without --from-gpu"):
        options.distill.teacher = tiny_base
        run_training(options)


def test_a_table_claim_without_its_gold_table_is_not_enough_info(
    options: RunOptions, inputs: Path
) -> None:
    """A TabFact claim read against its retrieved evidence with the gold table's cells taken
    out trains NOT ENOUGH INFO: the table route had no such pair (0 % NEI, gold removed)."""
    options.claims = [inputs / "tables_train.jsonl"]
    options.mix = PairMix(retrieved=2)
    pairs = build_pairs(options)
    no_gold = [p for p in pairs if p.variant == data.NO_GOLD]
    assert no_gold and all(p.label == "NOT ENOUGH INFO" for p in no_gold)
    for pair in no_gold:
        title = {"300": "Ricardo Páez", "301": "KJLT-FM"}[pair.id]
        gold_premise = next(p.premise for p in pairs if p.id == pair.id and p.variant == "gold")
        assert unicodedata.normalize("NFC", gold_premise).startswith(title)
        assert not unicodedata.normalize("NFC", pair.premise).startswith(title)
    assert data.in_table("KJLT-FM_cell_0_2_1", ("KJLT-FM", 0))
    assert not data.in_table("KJLT-FM_cell_1_2_1", ("KJLT-FM", 0))
    assert not data.in_table("KJLT-FM_sentence_0", ("KJLT-FM", 0))


def test_distilling_on_this_machine_replays_the_pairs_with_the_teachers_probabilities(
    options: RunOptions, tiny_base: Path, tmp_path: Path
) -> None:
    """`--teacher`: every replayed pair of the pool is scored by the teacher once (cached in
    WORK, read back on a rerun); the failure classes' pairs (here the sample dump's
    contrastive and relation pairs) learn their gold label alone and are never scored."""
    from feverous_es.training.verdict.distill import replayed
    from feverous_es.training.verdict.options import TEACHER_FILE, Distillation

    with pytest.raises(TrainError, match="not a verdict reader"):  # a base is no teacher
        options.distill = Distillation(teacher=tiny_base)
        run_training(options)
    options.distill = Distillation()
    run_training(options)  # a 3-way model to teach the next one
    teacher = shutil.copytree(options.work / FULL_MODEL / TRAINED_DIR, tmp_path / "teacher")
    shutil.rmtree(options.work / FULL_MODEL)
    options.mix.contrastive = Path(__file__).resolve().parents[2] / "sample" / "wiki.db"
    options.mix.relations = True
    options.distill = Distillation(teacher=teacher, alpha=0.7, temperature=2.0)
    report = run_training(options)
    assert report is not None and report["distill"]["alpha"] == 0.7
    pool = training_pool(build_pairs(options), options)
    assert any(p.source.startswith("contrastive-") for p in pool)
    scored = [json.loads(line) for line in (options.work / TEACHER_FILE).read_text().splitlines()]
    assert sorted(r["key"] for r in scored) == sorted(p.key for p in pool if replayed(p))
    assert all(sum(r["probabilities"]) == pytest.approx(1, abs=1e-3) for r in scored)

    # a rerun that trains again scores nothing again
    before = (options.work / TEACHER_FILE).read_text()
    shutil.rmtree(options.work / FULL_MODEL)
    assert run_training(options) is not None
    assert (options.work / TEACHER_FILE).read_text() == before


def test_the_packaged_students_teach_as_the_verdict_reads_them(tmp_path: Path) -> None:
    """`--teacher feverous_es/models`: the default reader a models directory holds (the
    students averaged) scores the replayed pairs through the runtime, as the verdict reads
    them, without torch; a rerun reads them back from WORK."""
    from feverous_es.runtime.files import PACKAGED_MODELS_DIR
    from feverous_es.training.verdict.distill import teacher_probabilities
    from feverous_es.verdict.entailment import EntailmentModel

    premise = "[Eiffel Tower] It is named after the engineer Gustave Eiffel."
    claims = ["The Eiffel Tower was named after Gustave Eiffel.", "The Eiffel Tower is in Rome."]
    pairs = [data.Pair("fm2_dev", str(n), c, premise, "SUPPORTS", "sentence")
             for n, c in enumerate(claims)]  # fmt: skip

    def no_torch(*_: object) -> np.ndarray:
        raise AssertionError("an ONNX teacher is read by the runtime, not by torch")

    found = teacher_probabilities(PACKAGED_MODELS_DIR, pairs, TrainSettings(), tmp_path, no_torch)
    expected = EntailmentModel().probabilities(claims, [premise] * 2)
    np.testing.assert_allclose([found[p.key] for p in pairs], expected, atol=1e-5)
    again = teacher_probabilities(PACKAGED_MODELS_DIR, pairs, TrainSettings(), tmp_path, no_torch)
    np.testing.assert_allclose([again[p.key] for p in pairs], expected, atol=1e-5)


def test_failure_class_claims_are_also_read_against_the_pipelines_evidence(
    options: RunOptions,
) -> None:
    """`--class-evidence N`: N training claims of each failure class retrieved as `verify`
    retrieves them and read as the verdict reads them (the routed premise; without the page's
    lead sentences, NOT ENOUGH INFO), held out with their page as the prepared pair is."""
    from feverous_es.training.verdict.class_evidence import RETRIEVED
    from feverous_es.training.verdict.options import CLASS_EVIDENCE_FILE

    options.mix.contrastive = Path(__file__).resolve().parents[2] / "sample" / "wiki.db"
    options.mix.class_evidence = 2
    pairs = build_pairs(options)
    read = [p for p in pairs if p.source.endswith(RETRIEVED)]
    prepared = {(p.source, p.id): p for p in pairs if p.source.startswith("contrastive-")}
    classes = {p.source for p in read}
    assert classes and all(c.removesuffix(RETRIEVED) in {s for s, _ in prepared} for c in classes)
    for pair in read:
        page = pair.id.split("#")[0]
        twin = prepared[(pair.source.removesuffix(RETRIEVED), page)]
        assert pair.held_out == twin.held_out
        assert pair.premise != twin.premise  # the pipeline's evidence, not the prepared pair's
    assert {p.label for p in read if p.variant == data.NO_GOLD} <= {"NOT ENOUGH INFO"}
    assert (options.work / CLASS_EVIDENCE_FILE).is_file()  # cached: a rerun retrieves nothing
