"""`feverous-es entail` and `EntailmentModel`: the verdict model read alone on evidence a user
gives, no index; the same answer from the command, the API and a batch; one-line errors."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from feverous_es import EntailmentModel, Label
from feverous_es.cli import main
from feverous_es.verdict.windows import Source, document_windows

CLAIM = "Henri Schoeman is a South African triathlete."
EVIDENCE = ["Henri Schoeman (born 3 December 1991) is a South African triathlete."]


def test_the_command_prints_the_three_probabilities_and_json() -> None:
    runner = CliRunner()
    shown = runner.invoke(main, ["entail", CLAIM, "-e", EVIDENCE[0], "--title", "Henri Schoeman"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.splitlines()[1].startswith("SUPPORTS")  # the model reads it as true
    assert all(label in shown.output for label in ("REFUTES", "NOT ENOUGH INFO"))
    printed = runner.invoke(main, ["entail", CLAIM, "-e", "-", "--json"], input=EVIDENCE[0])
    got = json.loads(printed.output)
    assert got["premise"] == EVIDENCE[0] and got["label"] == "SUPPORTS"
    expected = EntailmentModel().entail(CLAIM, EVIDENCE).to_dict()
    assert got == expected


def test_a_batch_reads_each_claim_as_alone() -> None:
    model = EntailmentModel()
    claims = [CLAIM, "Henri Schoeman is an American swimmer.", "Henri Schoeman was born in 1991."]
    batch = model.entail_many([(c, EVIDENCE) for c in claims])
    for claim, result in zip(claims, batch, strict=True):
        alone = model.entail(claim, EVIDENCE)
        assert result.probabilities == pytest.approx(alone.probabilities, abs=1e-6)
        assert sum(result.probabilities.values()) == pytest.approx(1.0, abs=1e-5)
        assert set(result.probabilities) == set(Label)


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    for args in (["entail", " ", "-e", "x"], ["entail", CLAIM, "-e", " "], ["entail", CLAIM]):
        result = runner.invoke(main, args)
        assert result.exit_code == 2, (args, result.output)
    result = runner.invoke(main, ["entail", CLAIM, "-e", "x", "--model", str(tmp_path / "no")])
    assert result.exit_code == 1
    assert result.output.count("\n") == 1 and "no verdict model at" in result.output


FILLER = [
    f"The market town of Aldbury{i} holds a fair every spring, and its mill dates from {1700 + i}."
    for i in range(60)
]  # ~900 words about something else
FACT = "Henri Schoeman won the bronze medal in the triathlon at the 2016 Summer Olympics."


def test_windows_cover_a_source_in_overlapping_sentence_runs() -> None:
    source = Source.of(["  First piece.  It has two sentences. ", "", "Second   piece here."])
    assert source.text == "  First piece.  It has two sentences. \n\nSecond   piece here."
    # Offsets point into the text as given.
    assert [s.text for s in source.sentences] == [
        "First piece.", "It has two sentences.", "Second   piece here."
    ]  # fmt: skip
    assert all(source.text[s.start : s.end] == s.text for s in source.sentences)
    long = Source.of([" ".join(FILLER)])
    windows = long.windows(120)
    assert all(len(w.span.text.split()) <= 120 for w in windows)
    assert all(long.text[w.span.start : w.span.end] == w.span.text for w in windows)
    covered = [s for w in windows for s in w.sentences]
    assert set(covered) == set(long.sentences)  # every sentence read ...
    for before, after in itertools.pairwise(w.sentences for w in windows):
        assert before[-1] in after and after[0] in before  # ... and each edge read whole twice


def test_a_fact_deep_in_a_long_source_is_found_and_pointed_at() -> None:
    model = EntailmentModel()
    document = " ".join([*FILLER[:45], FACT, *FILLER[45:]])
    answer = model.entail("Henri Schoeman won a bronze medal at the 2016 Olympics.", [document])
    assert len(Source.of([document]).windows()) > 5  # too long for one reading
    assert answer.windows == model.max_windows and answer.label is Label.SUPPORTS
    start = document.index(FACT)
    assert answer.window.start <= start and start + len(FACT) <= answer.window.end
    assert FACT in answer.premise
    missing = model.entail("Henri Schoeman won a gold medal at the 2012 Olympics.", [document])
    assert missing.label is not Label.SUPPORTS and not missing.supported


def test_a_text_is_checked_sentence_by_sentence(tmp_path: Path) -> None:
    text = "Henri Schoeman won a bronze medal at the 2016 Olympics. He won gold in 2012."
    document = tmp_path / "source.txt"
    document.write_text("\n".join([*FILLER[:20], FACT, *FILLER[20:40]]) + "\n", encoding="utf-8")
    runner = CliRunner()
    printed = runner.invoke(main, ["entail", text, "--evidence-file", str(document), "--json"])
    assert printed.exit_code == 0, printed.output
    check = json.loads(printed.output)
    assert [(s["start"], s["end"]) for s in check["sentences"]] == [(0, 55), (56, 76)]
    assert check["sentences"][0]["label"] == "SUPPORTS"
    assert check["summary"] == {"sentences": 2, "supported": 1, "not_supported": [1]}
    piped = runner.invoke(main, ["entail", text, "-e", "-", "--json"], input=document.read_text())
    assert json.loads(piped.output) == check  # standard input is one whole document
    shown = runner.invoke(main, ["entail", text, "--evidence-file", str(document)])
    assert "1 of 2 sentences supported" in shown.output and "not supported: 2" in shown.output
    assert FACT[:40] in shown.output  # the deciding span is shown


def test_a_sentences_span_points_into_the_text_as_sent() -> None:
    # Invisible characters the text rule removes, before and inside the second sentence.
    text = "Henri Schoeman won a bronze medal.\u200b\u202e He won gold\u200b in 2012."
    check = EntailmentModel().check_text(text, [FACT])
    spans = [span for span, _ in check.sentences]
    assert [text[s.start : s.end] for s in spans] == [s.text for s in spans]
    assert spans[1].text == "He won gold\u200b in 2012."  # the user's own characters
    assert check.sentences[1][1].claim == "He won gold in 2012."  # what the reader read
    titled = EntailmentModel().entail("He won gold.", [FACT], title="Henri\u200b Schoeman\x00")
    assert titled.premise.startswith("[Henri Schoeman ]")  # the title read by the same rule


def test_a_document_that_is_not_text_is_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    junk, empty = tmp_path / "junk.bin", tmp_path / "empty.txt"
    junk.write_bytes(bytes(range(256)) * 4)
    empty.write_text("  \n", encoding="utf-8")
    for path, message in ((junk, "is not UTF-8 text"), (empty, "the evidence is empty")):
        result = runner.invoke(main, ["entail", CLAIM, "--evidence-file", str(path)])
        assert result.exit_code == 2 and message in result.output
        assert result.output.count("\n") == 1


def test_several_documents_are_read_one_by_one_and_the_deciding_one_is_named(
    tmp_path: Path,
) -> None:
    first, second = " ".join(FILLER[:20]), " ".join([*FILLER[20:30], FACT, *FILLER[30:35]])
    windows = document_windows([first, second], 120)
    assert {w.document for w in windows} == {0, 1}
    for window in windows:  # each inside one document: offsets into it, none crossing
        text = (first, second)[window.document or 0]
        assert text[window.span.start : window.span.end] == window.span.text
    claim = "Henri Schoeman won a bronze medal at the 2016 Olympics."
    answer = EntailmentModel().entail(claim, [first, second], documents=True)
    assert answer.label is Label.SUPPORTS and answer.document == 1
    assert FACT in second[answer.window.start : answer.window.end]
    assert EntailmentModel().entail(claim, [first, second]).document is None  # one source
    paths = [tmp_path / "a.txt", tmp_path / "b.txt"]
    for path, text in zip(paths, (first, second), strict=True):
        path.write_text(text)
    result = CliRunner().invoke(
        main, ["entail", claim, "--json", *(f"--evidence-file={p}" for p in paths)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["document"] == 1
    shown = CliRunner().invoke(main, ["entail", claim, *(f"--evidence-file={p}" for p in paths)])
    assert "of document 2" in " ".join(shown.output.split())  # counted from 1 for a person


def test_a_source_one_window_holds_is_read_again_by_the_second_model() -> None:
    """The stored second reading (grounding.json's second_reading) mixes the second model's
    probabilities into a one-window source's where the first reading is unsure, and leaves a
    source of several windows, and a sure reading, as the first model read them."""
    from feverous_es.verdict.entailment import SecondReading
    from feverous_es.verdict.readers import packaged_model

    first = EntailmentModel()
    first.second_reading = None
    mixed = EntailmentModel()
    mixed.second_reading = SecondReading("verdict-large", 0.5, (0.0, 1.0))
    alone = EntailmentModel(packaged_model("verdict-large")).entail(CLAIM, EVIDENCE).probabilities
    own = first.entail(CLAIM, EVIDENCE).probabilities
    got = mixed.entail(CLAIM, EVIDENCE).probabilities
    for label in Label:
        assert got[label] == pytest.approx(0.5 * own[label] + 0.5 * alone[label], abs=1e-5)
    long_source = [" ".join(f"Sentence {n} says nothing of him." for n in range(60)), EVIDENCE[0]]
    assert mixed.entail(CLAIM, long_source).windows > 1
    assert mixed.entail(CLAIM, long_source).probabilities == pytest.approx(
        first.entail(CLAIM, long_source).probabilities, abs=1e-6
    )
    sure = EntailmentModel()
    sure.second_reading = SecondReading("verdict-large", 0.5, (0.0, own[Label.SUPPORTS] / 2))
    assert sure.entail(CLAIM, EVIDENCE).probabilities == pytest.approx(own, abs=1e-6)
