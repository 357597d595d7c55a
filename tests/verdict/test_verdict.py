"""The verdict stage with a tiny classifier made here (not the shipped model)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from feverous_es.errors import ModelError
from feverous_es.index.elements import Element, ElementType
from feverous_es.plugins.evidence_text import seq2seq_input
from feverous_es.plugins.interfaces import Candidate, Label, PluginContext, Query
from feverous_es.verdict.classifier import ClassifierVerdict
from feverous_es.verdict.inputs import premise, sentence_premise
from feverous_es.verdict.premises import page_premises
from tests.conftest import CLASSIFIER_LABELS as LABELS
from tests.index.test_page import ARABINOSE, by_id


def evidence(*texts: str) -> list[Candidate]:
    return [
        Candidate(Element(f"P_sentence_{i}", "P", ElementType.SENTENCE, t, f"[P] {t}", "k", t), 1)
        for i, t in enumerate(texts)
    ]


def test_classifier_matches_torch_and_reads_labels_from_config(tiny_classifier) -> None:
    model_dir, torch_model = tiny_classifier
    from transformers import AutoTokenizer

    # The text model alone, its answer as read: the feature models and the recalibration off.
    verdict = ClassifierVerdict(
        PluginContext(None, None, "cpu"),  # type: ignore[arg-type]
        model=str(model_dir), table_model="", nei_model="", reader_scale=1.0,
    )  # fmt: skip
    claim = "Paris is the capital of France with 2 million people."
    chains = [evidence("Paris is the capital of France."), evidence("Lyon is big.", "Nice.")]
    query = Query(claim, np.zeros(384, dtype=np.float32))
    verdicts = verdict.predict([(query, chain) for chain in chains])

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    import torch

    for chain, result in zip(chains, verdicts, strict=True):
        inputs = tokenizer(claim, sentence_premise(chain), return_tensors="pt")
        with torch.no_grad():
            expected = torch.softmax(torch_model(**inputs).logits, -1)[0].numpy()
        got = np.array([result.probabilities[Label(LABELS[i])] for i in range(3)])
        np.testing.assert_allclose(got, expected, atol=1e-4)
        # SUPPORTS or REFUTES, whichever is likelier; NEI is the nei_above threshold's. The
        # probability shown is the label's own entry among the three.
        decided = expected[:2]
        if expected[2] < verdict.options.nei_above:
            assert result.label is Label(LABELS[int(decided.argmax())])
            assert result.probability == pytest.approx(decided.max(), abs=1e-4)
        else:
            assert result.label is Label.NOT_ENOUGH_INFO
        assert result.probability == result.probabilities[result.label]


def test_an_option_the_classifier_lacks_is_one_error_naming_those_it_has(tiny_classifier) -> None:
    from feverous_es.errors import PluginError
    from feverous_es.plugins.registry import load

    context = PluginContext(None, None, "cpu")  # type: ignore[arg-type]
    model_dir, _ = tiny_classifier
    with pytest.raises(PluginError, match=r"nei_abov.*options: model, .*nei_above"):
        load("verdict", "classifier", context, {"model": str(model_dir), "nei_abov": 0.9})


def test_missing_or_unlabelled_model_is_a_clear_error(tmp_path: Path, tiny_classifier) -> None:
    context = PluginContext(None, None, "cpu")  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="no verdict model at"):
        ClassifierVerdict(context, model=str(tmp_path / "nope"))
    model_dir, _ = tiny_classifier
    broken = tmp_path / "broken"
    shutil.copytree(model_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    config["id2label"] = {"0": "yes", "1": "no", "2": "maybe"}
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match="id2label must name"):
        ClassifierVerdict(context, model=str(broken))


def test_model_inputs_follow_papelo() -> None:
    chain = evidence("Four of 30 teams won.")
    text = premise("Four teams won in 2017.", chain, hints=True)
    assert text.startswith("four equals 4 LEAST 4 less than 30 less than 2017 GREATEST [P] ")
    assert premise("x", chain) == "[P] Four of 30 teams won."
    assert seq2seq_input("Claim.", chain) == "missing: P [HYP] Claim. [P] Four of 30 teams won."


def test_premise_gives_each_table_row_once_under_its_table_head() -> None:
    """25 selected cells of one table must not become 25 copies of a few rows."""
    elements = by_id("L-arabinose operon", ARABINOSE)
    cells = [elements[f"L-arabinose operon_cell_0_1_{c}"] for c in range(5)]
    header = elements["L-arabinose operon_header_cell_0_0_2"]
    chain = [
        *evidence("Arabinose is a sugar."),
        *(Candidate(e, 1.0) for e in [cells[0], header, *cells[1:]]),
    ]
    row = "Substrate: L-arabinose; Enzyme(s): AraA; Function: Isomerase; Reversible: Yes; "
    assert premise("x", chain) == (
        "[P] Arabinose is a sugar. L-arabinose operon, Catabolism of arabinose in E. coli. "
        f"{row}Product: L-ribulose | Substrate; Enzyme(s); Function; Reversible; Product"
    )


def test_classifier_reads_its_input_settings_from_training_json(
    tmp_path: Path, tiny_classifier
) -> None:
    model_dir, _ = tiny_classifier
    trained = tmp_path / "trained"
    shutil.copytree(model_dir, trained)
    (trained / "training.json").write_text(
        json.dumps({"training": {"max_length": 384, "math_hints": True}})
    )
    context = PluginContext(None, None, "cpu")  # type: ignore[arg-type]
    verdict = ClassifierVerdict(context, model=str(trained))
    assert (verdict.reader.models[0].max_length, verdict.reader.hints) == (384, True)
    given = ClassifierVerdict(context, model=str(trained), math_hints=False, max_length=128)
    assert (given.reader.models[0].max_length, given.reader.hints) == (128, False)
    plain = ClassifierVerdict(context, model=str(model_dir))  # no training.json
    assert (plain.reader.models[0].max_length, plain.reader.hints) == (256, False)


def test_a_claims_first_page_is_also_read_alone(tiny_classifier) -> None:
    """Evidence of several pages: the reading is the mean of the whole evidence's and of the
    first page's sentences alone (other subjects' sentences beside the claim's own page must
    not decide it); `page_premises=0` reads the whole evidence only."""
    model_dir, _ = tiny_classifier
    context = PluginContext(None, None, "cpu")  # type: ignore[arg-type]
    own = [
        Candidate(
            Element(
                f"Jeanne Moreau_sentence_{i}",
                "Jeanne Moreau",
                ElementType.SENTENCE,
                t,
                f"[Jeanne Moreau] {t}",
                "k",
                t,
            ),
            1,
        )
        for i, t in enumerate(["Jeanne Moreau was a French actress.", "She won awards."])
    ]
    other = [
        Candidate(
            Element(
                "Jeanne Rongier_sentence_0",
                "Jeanne Rongier",
                ElementType.SENTENCE,
                "Jeanne Rongier was a painter.",
                "[Jeanne Rongier] Jeanne Rongier was a painter.",
                "k",
                "",
            ),
            1,
        )
    ]
    evidence = [own[0], other[0], own[1]]
    claim = Query("Jeanne Moreau was French.", np.zeros(384, dtype=np.float32))
    as_read = {"table_model": "", "nei_model": "", "reader_scale": 1.0}  # no recalibration
    verdict = ClassifierVerdict(context, model=str(model_dir), **as_read)
    whole = ClassifierVerdict(context, model=str(model_dir), **as_read, page_premises=0)
    reader = whole.reader
    # the page read alone keeps its title before each sentence
    premises = [sentence_premise(evidence), sentence_premise(own, one_title=False)]
    rows = reader.probabilities([claim.text] * 2, premises)
    [mean] = verdict.predict([(claim, evidence)])
    [alone] = whole.predict([(claim, evidence)])
    labels = [Label(LABELS[i]) for i in range(3)]
    got = [mean.probabilities[x] for x in labels]
    np.testing.assert_allclose(got, rows.mean(axis=0), atol=1e-5)
    np.testing.assert_allclose([alone.probabilities[x] for x in labels], rows[0], atol=1e-5)
    # one page: nothing more to read
    [single] = verdict.predict([(claim, own)])
    [single_whole] = whole.predict([(claim, own)])
    assert single.probabilities == single_whole.probabilities


def test_one_pages_sentences_are_one_passage_under_its_title(tiny_classifier) -> None:
    """Evidence all of one page is read as ``[Title] s1 s2`` (as the readers learned a page's
    lead); sentences of several pages each keep their page's title; a page read alone beside
    others (``one_title=False``) has the title before each sentence."""
    one = evidence("Strontium is a chemical element.", "It has symbol Sr.")
    assert sentence_premise(one) == "[P] Strontium is a chemical element. It has symbol Sr."
    each = "[P] Strontium is a chemical element. [P] It has symbol Sr."
    assert sentence_premise(one, one_title=False) == each
    other = Candidate(Element("Q_sentence_0", "Q", ElementType.SENTENCE, "Q is a page.",
                              "[Q] Q is a page.", "k", ""), 1)  # fmt: skip
    assert sentence_premise([one[0], other, one[1]]) == (
        "[P] Strontium is a chemical element. [Q] Q is a page. [P] It has symbol Sr."
    )
    model_dir, _ = tiny_classifier
    context = PluginContext(None, None, "cpu")  # type: ignore[arg-type]
    claim = Query("The symbol of strontium is Sr.", np.zeros(384, dtype=np.float32))
    labels = [Label(LABELS[i]) for i in range(3)]
    verdict = ClassifierVerdict(context, model=str(model_dir), table_model="", nei_model="",
                                reader_scale=1.0)  # fmt: skip
    [read] = verdict.predict([(claim, one)])
    row = verdict.reader.probabilities([claim.text], [sentence_premise(one)])[0]
    np.testing.assert_allclose([read.probabilities[x] for x in labels], row, atol=1e-5)


def test_the_page_read_alone_is_the_one_the_claim_names_first() -> None:
    """ "Vancouver is in Cameroon." with Cameroon's sentences retrieved first: Vancouver's page
    is read alone (the claim's subject), then Cameroon's; a claim that names no evidence page
    reads them in evidence order."""

    def sentence(page: str, text: str) -> Candidate:
        return Candidate(Element(f"{page}_sentence_0", page, ElementType.SENTENCE, text,
                                 f"[{page}] {text}", "k", text), 1)  # fmt: skip

    cameroon = sentence("Cameroon", "Cameroon is a country in Central Africa.")
    vancouver = sentence("Vancouver", "Vancouver is a city in Canada.")
    evidence = [cameroon, vancouver]
    assert page_premises("Vancouver is in Cameroon.", evidence, 2) == [
        sentence_premise([vancouver]), sentence_premise([cameroon]),
    ]  # fmt: skip
    assert page_premises("A city is in a country.", evidence, 1) == [sentence_premise([cameroon])]
    assert page_premises("Vancouver is in Cameroon.", [vancouver], 1) == []
