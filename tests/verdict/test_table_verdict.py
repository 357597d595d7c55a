"""`feverous-es train table-verdict` on the sample's TabFact claims and index, the exported
model in the classifier verdict (table claims routed to it, sentence claims to the sentence
model), the shipped feature models, and the one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("skl2onnx")

from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.errors import ModelError
from feverous_es.index.backends import open_store
from feverous_es.plugins.interfaces import Candidate, Label, PluginContext, Query
from feverous_es.retrieve.evidence_tables import with_tables
from feverous_es.training.datasets import TrainingClaim
from feverous_es.training.features import command, data, fit
from feverous_es.verdict import classifier as classifier_module
from feverous_es.verdict.classifier import ClassifierVerdict
from feverous_es.verdict.feature_model import (
    DEFAULT_MODEL,
    SPEC_FILE,
    FeatureClassifier,
    evidence_table,
    first_table,
)
from feverous_es.verdict.inputs import sentence_premise
from feverous_es.verdict.table_facts import FEATURE_NAMES, claim_features
from tests.conftest import REPO, write_lines

SAMPLE_CLAIMS = REPO / "sample" / "claims.jsonl"


@pytest.fixture(scope="module")
def tabfact_claims(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample's 60 TabFact claims in a file of their own. The sample holds SUPPORTS claims
    only; every other one is relabelled REFUTES so that both classes exist (these tests check
    the machinery, not accuracy)."""
    lines = [
        line.replace('"SUPPORTS"', '"REFUTES"') if i % 2 else line
        for i, line in enumerate(
            line
            for line in SAMPLE_CLAIMS.read_text(encoding="utf-8").splitlines()
            if '"TabFact"' in line
        )
    ]
    return write_lines(tmp_path_factory.mktemp("claims") / "tabfact_sample.jsonl", lines)


@pytest.fixture(scope="module")
def trained(
    tabfact_claims: Path, sample_index: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("table-model") / "model"
    options = data.RunOptions(
        claims=[tabfact_claims], index=sample_index, out=out,
        work=out.with_name("model.work"), holdout=0.3,
        settings=fit.Settings(trees=20, depth=3), command="feverous-es train table-verdict …",
    )  # fmt: skip
    return out, command.run(options)


def test_training_exports_a_model_that_matches_scikit_learn(trained: tuple[Path, dict]) -> None:
    out, report = trained
    assert {p.name for p in out.iterdir()} >= {
        "model.onnx",
        SPEC_FILE,
        "manifest.json",
        "README.md",
        "training.json",
    }
    assert report["export"]["parity"]["max_abs_diff"] < 1e-5
    assert report["export"]["parity"]["argmax_agreement"] == 1.0
    held = report["holdout_accuracy"]["tabfact_sample"]
    assert 0 < held["claims"] < 60 and 0.0 <= held["accuracy"] <= 1.0
    assert report["training"]["examples"] + held["claims"] == 60
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "feverous-es train table-verdict" in card and "CC BY-SA" in card


def test_the_classifier_gives_probabilities_per_claim(trained, sample_index) -> None:
    out, _ = trained
    classifier = FeatureClassifier(out)
    assert classifier.labels == [Label.SUPPORTS, Label.REFUTES]
    store = open_store("embedded", sample_index)
    try:
        claims = [
            data.read_claims([REPO / "sample" / "claims.jsonl"], tables=True)[i] for i in (0, 1)
        ]
        features, kept = data.gold_features(claims, store)
    finally:
        store.close()
    assert features.shape == (2, len(FEATURE_NAMES)) and len(kept) == 2
    p = classifier.probabilities(features)
    assert p.shape == (2, 2) and np.allclose(p.sum(1), 1.0, atol=1e-5)
    assert classifier.probabilities(features[:0]).shape == (0, 2)


def test_a_model_built_on_other_features_is_refused(trained, tmp_path: Path) -> None:
    out, _ = trained
    spec = json.loads((out / SPEC_FILE).read_text())
    copy = tmp_path / "model"
    copy.mkdir()
    for file in out.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    spec["features"] = spec["features"][:-1]
    (copy / SPEC_FILE).write_text(json.dumps(spec))
    with pytest.raises(ModelError, match="other table features"):
        FeatureClassifier(copy)
    with pytest.raises(ModelError, match="not a feature verdict model"):
        FeatureClassifier(tmp_path)


def test_the_shipped_table_model_loads_and_names_its_held_out_claims() -> None:
    classifier = FeatureClassifier(DEFAULT_MODEL)
    assert classifier.labels == [Label.SUPPORTS, Label.REFUTES]
    training = json.loads((DEFAULT_MODEL / "training.json").read_text())
    assert "tabfact_dev.jsonl" in training["claims"] and training["holdout"] > 0


def test_the_verdict_routes_table_claims_to_the_table_model(trained, sample_index) -> None:
    """A TabFact claim whose evidence is its table gets the table model's probabilities; a
    claim whose evidence is sentences gets the entailment model's, as with the table model off.
    The verdict reads the table retrieval hands on, never the store (it has none here); the
    same cells as a plain list hand on no table: the sentence route."""
    out, _ = trained
    store = open_store("embedded", sample_index)
    try:
        context = PluginContext(None, None, "cpu")  # type: ignore[arg-type]
        # the reader's answers as read (no recalibration), to compare with its probabilities
        verdict = ClassifierVerdict(context, table_model=str(out), reader_scale=1.0)
        text_only = ClassifierVerdict(context, table_model="", reader_scale=1.0)
        table_claim, cells = _table_claim_and_cells(store)
        sentence = next(e for e in store.page_elements("Bill Persky") if not e.type.in_cell_budget)
        claim = "Bill Persky was born on September 9, 1931."
        batch = [
            (Query(table_claim.claim, np.zeros(0)), with_tables(cells, store)),
            (Query(claim, np.zeros(0)), [Candidate(sentence, 1.0)]),
        ]
        routed, text = verdict.predict(batch), text_only.predict(batch)
        [untabled] = verdict.predict([(batch[0][0], list(cells))])
        table_features, _ = data.gold_features([table_claim], store)
    finally:
        store.close()
    expected = FeatureClassifier(out).probabilities(table_features)[0]
    assert routed[0].probabilities[Label.SUPPORTS] == pytest.approx(expected[0], abs=1e-5)
    assert routed[0].table is not None and untabled.table is None
    # The entailment model answers the sentence claim.
    entailed = verdict.entailment([claim], [sentence_premise([Candidate(sentence, 1.0)])])[0]
    # The same in a batch of two as alone: the int8 model reads one pair a run.
    assert routed[1].probabilities[Label.SUPPORTS] == pytest.approx(entailed[0], abs=1e-6)
    assert text[1].probabilities == routed[1].probabilities


def _table_claim_and_cells(store) -> tuple[TrainingClaim, list[Candidate]]:
    """The sample's first TabFact claim and its table's cells as evidence."""
    table_claim = data.read_claims([REPO / "sample" / "claims.jsonl"], tables=True)[0]
    page = table_claim.table.rpartition("_table_")[0]
    return table_claim, [Candidate(e, 1.0) for e in store.page_elements(page)
                         if e.type.in_cell_budget]  # fmt: skip


def test_a_table_claim_is_not_enough_info_only_when_its_sentences_lack_the_answer_too(
    trained, sample_index
) -> None:
    """A claim routed to its table, with a sentence beside the cells, and the NOT ENOUGH INFO
    call on (``nei_above``, the reader's own probability): the table premise alone reading NOT
    ENOUGH INFO does not make the verdict NEI while the sentences answer it; with the call off,
    no claim is NEI."""
    out, _ = trained
    store = open_store("embedded", sample_index)
    try:
        context = PluginContext(store, None, "cpu")  # type: ignore[arg-type]
        reader_nei = {"table_model": str(out), "nei_model": "", "nei_covered_below": 1.1}
        verdict = ClassifierVerdict(context, **reader_nei, nei_above=0.9)
        default = ClassifierVerdict(context, **reader_nei, nei_above=1.1)
        table_claim, cells = _table_claim_and_cells(store)
        sentence = next(e for e in store.page_elements("Bill Persky") if not e.type.in_cell_budget)
        evidence = with_tables([*cells, Candidate(sentence, 1.0)], store)
        batch = [(Query(table_claim.claim, np.zeros(0)), evidence)]
        sentences_answer = sentence_premise([Candidate(sentence, 1.0)])

        def entailment(claims, premises):  # NEI on the table; the sentences: as the case says
            nei = {sentences_answer: sentence_nei}
            return np.array([[0.03, 0.02, nei.get(p, 0.95)] for p in premises])

        verdict.entailment = entailment  # type: ignore[method-assign]
        default.entailment = entailment  # type: ignore[method-assign]
        sentence_nei = 0.05
        [answered] = verdict.predict(batch)
        sentence_nei = 0.92
        [unanswered] = verdict.predict(batch)
        [by_default] = default.predict(batch)
    finally:
        store.close()
    assert answered.label in (Label.SUPPORTS, Label.REFUTES)
    assert answered.probabilities[Label.NOT_ENOUGH_INFO] == pytest.approx(0.05)
    assert unanswered.label is Label.NOT_ENOUGH_INFO
    assert unanswered.probability == pytest.approx(0.92)
    assert by_default.label in (Label.SUPPORTS, Label.REFUTES)


def _table_claim_beside_a_sentence(store) -> tuple[list[tuple[Query, list[Candidate]]], str]:
    """A batch of one: the sample's first TabFact claim, its table's cells and a sentence as
    evidence; and that sentence's premise."""
    table_claim, cells = _table_claim_and_cells(store)
    sentence = next(e for e in store.page_elements("Bill Persky") if not e.type.in_cell_budget)
    evidence = with_tables([*cells, Candidate(sentence, 1.0)], store)
    return [(Query(table_claim.claim, np.zeros(0)), evidence)], sentence_premise(
        [Candidate(sentence, 1.0)]
    )


def _read_as_told(verdicts, sentences: str, nei_on: dict[str, float]) -> None:
    """Each verdict's reader reads the premise ``sentences`` as refuting
    (:func:`_sentences_refute`), and its NEI model reads NOT ENOUGH INFO by premise as
    ``nei_on`` says when called (``sentences``, else ``table``): a case changes ``nei_on``
    between predictions."""
    for verdict in verdicts:
        nei = verdict.nei_reader.labels.index(Label.NOT_ENOUGH_INFO)

        def nei_read(claims, premises, nei=nei):
            rows = np.full((len(premises), 3), 0.0)
            rows[:, nei] = [nei_on["sentences" if p == sentences else "table"] for p in premises]
            return rows

        verdict.entailment = _sentences_refute(sentences)
        verdict.nei_reader.probabilities = nei_read


def _weighed_off_weighed(weighing, off, batch, sentences: str, nei_on: dict[str, float],
                         then_table: float):  # fmt: skip
    """The verdicts of ``weighing`` and ``off`` on ``batch`` read as :func:`_read_as_told`
    says, then of ``weighing`` again with the NEI model's reading of the table ``then_table``."""
    _read_as_told((weighing, off), sentences, nei_on)
    [weighed] = weighing.predict(batch)
    [option_off] = off.predict(batch)
    nei_on["table"] = then_table
    [weighed_again] = weighing.predict(batch)
    return weighed, option_off, weighed_again


def _sentences_refute(sentences: str):
    """An entailment model's reading: the premise ``sentences`` refutes; any other supports."""

    def entailment(claims, premises):
        return np.array([[0.2, 0.7, 0.1] if p == sentences else [0.8, 0.1, 0.1]
                         for p in premises])  # fmt: skip

    return entailment


# The NOT ENOUGH INFO call off and the reader's answer as read: what routes the claim is left.
NEI_OFF = {"nei_above": 1.1, "reader_scale": 1.0}


def test_a_table_claim_about_its_sentences_is_read_on_them(trained, sample_index) -> None:
    """``table_sentences_margin``: a table-routed claim whose sentences the NEI model reads as
    bearing on it more than the table (their NOT ENOUGH INFO probability below the table's by
    more than the margin) is decided by the reader on those sentences and shows no table; where
    they bear on it less than that, or with the option over 1, the table decides."""
    out, _ = trained
    store = open_store("embedded", sample_index)
    try:
        context = PluginContext(store, None, "cpu")  # type: ignore[arg-type]
        weighing = ClassifierVerdict(
            context, **NEI_OFF, table_model=str(out), table_sentences_margin=0.1
        )
        off = ClassifierVerdict(
            context, **NEI_OFF, table_model=str(out), table_sentences_margin=1.1
        )
        batch, sentences = _table_claim_beside_a_sentence(store)
        nei_on = {"table": 0.9, "sentences": 0.2}
        # then the sentences bear on it by less than the margin
        about_sentences, option_off, about_table = _weighed_off_weighed(
            weighing, off, batch, sentences, nei_on, then_table=0.25
        )
    finally:
        store.close()
    assert about_sentences.table is None and about_sentences.label is Label.REFUTES
    assert option_off.table is not None and about_table.table is not None


def test_a_sentence_claim_about_its_table_is_decided_by_it(
    trained, sample_index, monkeypatch
) -> None:
    """``sentences_table_margin``: a claim routed to its sentences, its NOT ENOUGH INFO call
    made, whose evidence's table the NEI model reads as bearing on it more than the sentences
    (the table's NOT ENOUGH INFO probability below theirs by more than the margin) is decided by
    the table's feature model and shows that table; where the table bears on it less than that,
    or with the option over 1, the reader decides on the sentences."""
    out, _ = trained
    store = open_store("embedded", sample_index)
    try:
        context = PluginContext(store, None, "cpu")  # type: ignore[arg-type]
        # every claim's NEI call made and its table weighed, never NEI: what routes the
        # claim is left
        monkeypatch.setattr(classifier_module, "TABLE_HANDOVER_BELOW", 1.1)
        options = {"table_model": str(out), "nei_covered_below": 1.1,
                   "nei_sentences_above": 1.1, "reader_scale": 1.0}  # fmt: skip
        weighing = ClassifierVerdict(context, **options, sentences_table_margin=0.5)
        off = ClassifierVerdict(context, **options, sentences_table_margin=1.1)
        _, cells = _table_claim_and_cells(store)
        sentence = next(e for e in store.page_elements("Bill Persky") if not e.type.in_cell_budget)
        evidence = with_tables([*cells, Candidate(sentence, 1.0)], store)
        claim = sentence.text  # a sentence holds all its words: routed to the sentences
        assert evidence_table(claim, evidence) is None and first_table(evidence) is not None
        batch = [(Query(claim, np.zeros(0)), evidence)]
        sentences = sentence_premise([Candidate(sentence, 1.0)])
        nei_on = {"table": 0.1, "sentences": 0.85}
        # then the table bears on it by less than the margin
        about_table, option_off, about_sentences = _weighed_off_weighed(
            weighing, off, batch, sentences, nei_on, then_table=0.5
        )
        features = claim_features(claim, first_table(evidence))[None, :]
        table_row = weighing.tables.probabilities(features)[0]
    finally:
        store.close()
    assert about_table.table is not None
    assert about_table.probabilities[Label.SUPPORTS] == pytest.approx(float(table_row[0]))
    for by_sentences in (option_off, about_sentences):
        assert by_sentences.table is None and by_sentences.label is Label.REFUTES


def test_cli_trains_and_prints_held_out_accuracy(tabfact_claims, sample_index, tmp_path) -> None:
    out = tmp_path / "model"
    result = CliRunner().invoke(
        main,
        ["train", "table-verdict", "--claims", str(tabfact_claims), "--index",
         str(sample_index), "--out", str(out), "--trees", "10"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout[result.stdout.index("{") :])
    assert summary["holdout_accuracy"]["tabfact_sample"]["claims"] > 0
    assert (out / "model.onnx").is_file()


def test_claims_without_gold_tables_are_one_error_line(sample_index, tmp_path) -> None:
    claims = tmp_path / "sentences.jsonl"
    claims.write_text(json.dumps({"id": 1, "claim": "x", "label": "SUPPORTS", "evidence": []}))
    result = CliRunner().invoke(
        main,
        ["train", "table-verdict", "--claims", str(claims), "--index", str(sample_index),
         "--out", str(tmp_path / "m")],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "has no SUPPORTS / REFUTES claims that name gold_tables" in result.output
