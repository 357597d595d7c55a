"""NOT ENOUGH INFO for a claim the index cannot decide, with the reason a person reads, in
`verify`'s text and JSON and the HTTP answer; a true claim about a page the index holds keeps
its verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from feverous_es import Pipeline
from feverous_es.cli import main
from feverous_es.plugins.config import load_config
from feverous_es.plugins.interfaces import Label
from feverous_es.verdict.nei_call import coverage, evidence_words, names_a_page

# A subject no page of the sample holds, in a claim the sample's pages otherwise touch.
INVENTED = "Varnath Olmidge won bronze at Rio in 2016."
TRUE = "Gold medalist Henri Schoeman won bronze at Rio in 2016."


def test_coverage_and_naming_read_the_evidence_as_a_person_would(sample_index: Path) -> None:
    with Pipeline.open(sample_index) as pipeline:
        found = pipeline.retrieve(TRUE).evidence
        invented = pipeline.retrieve(INVENTED).evidence
    held, held_invented = evidence_words(found), evidence_words(invented)
    assert names_a_page(TRUE, found) and coverage(TRUE, held) == 7 / 8  # all but "medalist"
    assert not names_a_page(INVENTED, invented)
    assert coverage(INVENTED, held_invented) < coverage(TRUE, held)
    assert coverage("the and of", set()) == 1.0  # no word to find


def test_a_claim_no_evidence_decides_is_nei_and_says_why(sample_index: Path, tmp_path: Path):
    config = tmp_path / "nei.toml"
    config.write_text("[options.verdict]\nnei_above = 0.3\nnei_covered_below = 0.95\n")

    def verify(claim: str, *more: str) -> str:
        args = ["verify", claim, "--index", str(sample_index), "--config", str(config), *more]
        printed = CliRunner().invoke(main, args)
        assert printed.exit_code == 0, printed.output
        return printed.output

    shown = verify(INVENTED)
    assert "NOT ENOUGH INFO" in shown
    assert "why: no evidence comes from a page the claim names" in shown
    answer = json.loads(verify(INVENTED, "--json"))
    assert answer["label"] == "NOT ENOUGH INFO" and "of the claim's words" in answer["why"]
    assert answer["evidence"], "the evidence retrieval did find is still given"
    true = json.loads(verify(TRUE, "--json"))
    assert true["label"] == "SUPPORTS" and true["why"] == ""


def test_the_options_decide_nei_as_documented(sample_index: Path) -> None:
    """The call is made where the evidence holds fewer of the claim's words than the gate;
    the claim's evidence holds 7 of its 8 (88 %)."""
    said = {}
    for gate in (1.01, 0.8):
        config = load_config(None).with_stage_options(
            "verdict", nei_above=0.0, nei_covered_below=gate
        )
        with Pipeline.open(sample_index, config=config) as pipeline:
            said[gate] = pipeline.verify(TRUE).verdict
    assert (
        said[1.01].label is Label.NOT_ENOUGH_INFO and "88% of the claim's words" in said[1.01].why
    )
    assert "no evidence comes from a page" not in said[1.01].why  # the claim's page was found
    assert said[0.8].label is Label.SUPPORTS and said[0.8].why == ""


def test_a_claim_no_evidence_sentence_decides_is_nei_at_the_floor(sample_index: Path) -> None:
    """Read alone, the true claim's gold sentence decides it; no sentence decides a fact the
    subject's page does not state, nor a claim about a subject no page holds. The NEI model's
    probability on the whole evidence must reach the floor too."""
    unstated = "Henri Schoeman was born in a lighthouse in 1950."
    said: dict[float, dict[str, Any]] = {}
    for floor in (0.0, 0.5):
        config = load_config(None).with_stage_options(
            "verdict", nei_above=1.1, nei_covered_below=1.01, nei_sentences_above=0.5,
            nei_sentences_floor=floor,
        )  # fmt: skip
        with Pipeline.open(sample_index, config=config) as pipeline:
            said[floor] = {c: pipeline.verify(c).verdict for c in (TRUE, INVENTED, unstated)}
    assert said[0.0][TRUE].label is Label.SUPPORTS
    assert said[0.0][INVENTED].label is Label.NOT_ENOUGH_INFO
    assert said[0.0][unstated].label is Label.NOT_ENOUGH_INFO
    assert "no evidence sentence read alone decides the claim" in said[0.0][unstated].why
    # the NEI model reads the whole evidence as deciding the unstated fact: under the floor
    assert said[0.5][unstated].label is not Label.NOT_ENOUGH_INFO
    assert said[0.5][INVENTED].label is Label.NOT_ENOUGH_INFO
