"""The NOT ENOUGH INFO condition's claims (bench/nei.py): a claim verified with its pages hidden
sees nothing of them through the whole pipeline; an invented subject names no page."""

from __future__ import annotations

from pathlib import Path

from feverous_es.index.backends import open_store
from feverous_es.plugins.config import load_config
from feverous_es.plugins.interfaces import PluginContext
from feverous_es.training.hidden_pages import Hidden, HiddenPages
from feverous_es.verify.pipeline import LazyEmbedder, Pipeline

CLAIM = "Gold medalist Henri Schoeman won bronze at Rio in 2016."


def test_a_hidden_page_is_never_retrieved_and_others_still_are(sample_index: Path) -> None:
    view = HiddenPages(open_store("embedded", sample_index))
    pipeline = Pipeline(load_config(None), PluginContext(view, LazyEmbedder("cpu"), "cpu"))
    try:
        seen = {c.element.page for c in pipeline.verify(CLAIM).evidence}
        assert "Henri Schoeman" in seen
        view.hidden = Hidden(pages=frozenset({"Henri Schoeman"}))
        result = pipeline.verify(CLAIM)
        assert view.match_titles(["henri schoeman"]) == {}
        assert view.page_elements("Henri Schoeman") == []
    finally:
        pipeline.close()
    pages = {c.element.page for c in result.evidence} | {h.page.title for h in result.pages}
    assert "Henri Schoeman" not in pages and result.evidence  # other pages still answer


def test_the_conditions_invented_subjects_name_no_page_and_share_nothing_with_training(
    sample_index: Path,
) -> None:
    """The condition's invented names match no title of the index, word by word, and use no
    piece of the names the NEI model was trained on; a claim about one names it wherever it
    named the page, in each form."""
    from bench import nei_claims
    from feverous_es.training import invented

    store = open_store("embedded", sample_index)
    names = nei_claims.unseen_names(store, seed=0)
    made = [next(names) for _ in range(10)]
    assert {kind for kind, _ in made} == set(nei_claims.KINDS)
    for _, name in made:
        assert not store.match_titles([name.casefold(), *(w.casefold() for w in name.split())])
        trained_pieces = (*invented.FIRST, *invented.SECOND, *invented.LAST)
        assert not any(piece.lower() in name.lower() for piece in trained_pieces)
    claim = "Henri Schoeman's bronze at Rio was a first for Henri Schoeman."
    said = {form: nei_claims.invented_forms(claim, "Henri Schoeman", "person", "Wyg Dhru", form)
            for form in nei_claims.FORMS}  # fmt: skip
    assert said["as written"] == "Wyg Dhru's bronze at Rio was a first for Wyg Dhru."
    assert said["lowercase"] == "wyg dhru's bronze at rio was a first for wyg dhru."
    assert said["role words"].endswith(
        "Wyg Dhru's bronze at Rio was a first for "
        f"{said['role words'].split(' Wyg')[0].lower()} Wyg Dhru."
    )
    assert nei_claims.invented_forms("A claim about nobody.", "Henri Schoeman", "person",
                                     "Wyg Dhru", "as written") is None  # fmt: skip


def test_a_control_keeps_the_claims_facts_and_changes_its_form() -> None:
    from bench.nei_claims import controls

    made = controls("Gold medalist Henri Schoeman won bronze at Rio in 2016.", "Henri Schoeman")
    assert made == {
        "lowercase": "gold medalist henri schoeman won bronze at rio in 2016.",
        "misspelled": "Gold medalist Henri Shcoeman won bronze at Rio in 2016.",
    }
    assert controls("Nothing here names it.", "Henri Schoeman") == {
        "lowercase": "nothing here names it."
    }


def test_feverous_s_balanced_subset_is_a_view_the_chosen_rule_may_not_cost() -> None:
    """FEVEROUS-S's labels leak through evidence counts: its balanced subset is scored as a
    view of its own, and a rule that costs its claims with their evidence found over a point is
    not chosen, however it reads the rest."""
    from bench.nei import BALANCED, NEI, Claim, chosen_rule, rule_name, scored

    def reading(label: str, nei: float) -> dict:
        return {"label": label, "nei": nei, "sentences_nei": 0.0, "covered": 0.5,
                "complete": True}  # fmt: skip

    claims = [Claim("as is", "feverous_s_dev", str(i), "c", "SUPPORTS", balanced=i < 4)
              for i in range(200)]  # fmt: skip
    claims += [Claim("invented", "feverous_s_dev", str(i), "c", NEI) for i in range(200, 240)]
    # two balanced claims look unsure: calling them NEI wins 40 invented claims and costs the
    # as-is claims one point (allowed), the balanced subset half of its four (not allowed)
    read = [reading("SUPPORTS", 0.99 if i < 2 else 0.1) for i in range(200)]
    read += [reading("REFUTES", 0.99) for _ in range(40)]
    figures = scored(claims, read, range(len(claims)))
    default = figures[rule_name(1.1, 1.1)]
    assert default["by_kind"][BALANCED]["accuracy"] == 1.0
    assert default["by_kind"][BALANCED]["nei_rate"] == 0.0
    costly = figures[rule_name(0.9, 1.1)]
    assert costly["by_kind"]["as is / feverous_s_dev"]["complete_accuracy"] == 0.99
    assert costly["by_kind"][BALANCED]["accuracy"] == 0.5
    assert figures[chosen_rule(figures)]["by_kind"][BALANCED]["accuracy"] == 1.0


def test_nei_where_the_evidence_is_incomplete_costs_nothing_the_official_score_counts() -> None:
    """The official score gives a claim whose whole gold evidence was not retrieved nothing
    whatever its label: a rule that says NOT ENOUGH INFO on such claims keeps the FEVEROUS
    score and the accuracy on the claims with their evidence found, and is chosen for the NEI
    it gets right, though it costs the as-is claims' label accuracy over a point."""
    from bench.nei import NEI, Claim, chosen_rule, rule_name, scored

    claims = [Claim("as is", "fm2_dev", str(i), "c", "SUPPORTS") for i in range(100)]
    claims += [Claim("pages hidden", "fm2_dev", str(i), "c", NEI) for i in range(100, 120)]
    # 10 claims with incomplete evidence, read right by guessing and unsure (NEI 0.95)
    read = [{"label": "SUPPORTS", "nei": 0.95 if i < 10 else 0.1, "sentences_nei": 0.0,
             "covered": 0.5, "complete": i >= 10} for i in range(100)]  # fmt: skip
    read += [{"label": "REFUTES", "nei": 0.95, "sentences_nei": 0.0, "covered": 0.5}
             for _ in range(20)]  # fmt: skip
    figures = scored(claims, read, range(len(claims)))
    default, calling = figures[rule_name(1.1, 1.1)], figures[rule_name(0.9, 1.1)]
    as_is = "as is / fm2_dev"
    assert default["by_kind"][as_is]["feverous_score"] == 0.9  # right and evidence complete
    assert calling["by_kind"][as_is]["feverous_score"] == 0.9
    assert calling["by_kind"][as_is]["accuracy"] == 0.9  # ten guesses now NEI
    assert calling["by_kind"][as_is]["complete_accuracy"] == 1.0
    assert calling["by_kind"][as_is]["answered"] == 0.9
    assert calling["by_kind"]["pages hidden / fm2_dev"]["nei_rate"] == 1.0
    assert figures[chosen_rule(figures)]["accuracy"] > default["accuracy"]


def test_the_sentences_alone_signal_calls_nei_at_its_floor() -> None:
    """A claim whose evidence sentences each read alone leave NOT ENOUGH INFO is NEI under a
    rule that reads that signal, when the NEI model's probability is at the rule's floor; the
    gate on the claim's words covered holds for it too."""
    from bench.nei import NEI, Readings, rule_name, rules

    read = [{"label": "SUPPORTS", "nei": 0.6, "sentences_nei": 0.99, "covered": c}
            for c in (0.5, 0.95)]  # fmt: skip
    readings = Readings.of(read)
    every = rules()
    assert list(readings.answers(every[rule_name(0.9, 1.1)])) == ["SUPPORTS", "SUPPORTS"]
    assert list(readings.answers(every[rule_name(1.1, 1.1, 0.98, 0.5)])) == [NEI, NEI]
    assert list(readings.answers(every[rule_name(1.1, 1.1, 0.98, 0.7)])) == ["SUPPORTS"] * 2
    assert list(readings.answers(every[rule_name(1.1, 0.9, 0.98, 0.5)])) == [NEI, "SUPPORTS"]
