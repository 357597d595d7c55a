"""The NOT ENOUGH INFO condition's claims (bench/nei.py): a claim verified with its pages hidden
sees nothing of them through the whole pipeline; an invented subject names no page."""

from __future__ import annotations

from pathlib import Path

from feverous_es.index.backends import open_store
from feverous_es.plugins.config import load_config
from feverous_es.plugins.interfaces import PluginContext
from feverous_es.training.hidden_pages import Hidden, HiddenPages
from feverous_es.training.invented import invented_names, with_subject
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


def test_an_invented_subject_names_no_page_of_the_dump(sample_index: Path) -> None:
    store = open_store("embedded", sample_index)
    names = invented_names(store, seed=0)
    name = next(names)
    assert name != next(names)
    changed = with_subject("Henri Schoeman's bronze at Rio was a first.", "Henri Schoeman", name)
    assert changed == f"{name}'s bronze at Rio was a first."
    assert with_subject("A claim about nobody.", "Henri Schoeman", name) is None
    assert not store.match_titles([name.casefold(), *(w.casefold() for w in name.split())])


def test_feverous_s_balanced_subset_is_a_view_the_chosen_rule_may_not_cost() -> None:
    """FEVEROUS-S's labels leak through evidence counts: its balanced subset is scored as a
    view of its own, and a rule that costs it over a point is not chosen, however it reads the
    rest."""
    from bench.nei import BALANCED, NEI, Claim, chosen_rule, rule_name, scored

    def reading(label: str, nei: float) -> dict:
        return {"label": label, "nei": nei, "named": True, "covered": 0.5}

    claims = [Claim("as is", "feverous_s_dev", str(i), "c", "SUPPORTS", balanced=i < 4)
              for i in range(200)]  # fmt: skip
    claims += [Claim("invented", "feverous_s_dev", str(i), "c", NEI) for i in range(200, 240)]
    # two balanced claims look unsure: calling them NEI wins 40 invented claims and costs the
    # as-is claims one point (allowed), the balanced subset half of its four (not allowed)
    read = [reading("SUPPORTS", 0.99 if i < 2 else 0.1) for i in range(200)]
    read += [reading("REFUTES", 0.99) for _ in range(40)]
    figures = scored(claims, read, range(len(claims)))
    default = figures[rule_name(1.1, 1.1, 1.1, 1.1)]
    assert default["by_kind"][BALANCED] == {"claims": 4, "accuracy": 1.0, "nei_rate": 0.0}
    costly = figures[rule_name(0.9, 1.1, 1.1, 1.1)]
    assert costly["by_kind"]["as is / feverous_s_dev"]["accuracy"] == 0.99
    assert costly["by_kind"][BALANCED]["accuracy"] == 0.5
    assert figures[chosen_rule(figures)]["by_kind"][BALANCED]["accuracy"] == 1.0
