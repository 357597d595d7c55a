"""The evidence-loss condition's stages (bench/evidence_loss.py): a gold set is placed at the
furthest stage retrieval carried it, a claim at the best of its sets."""

from __future__ import annotations

from types import SimpleNamespace

from bench.evidence_loss import Reached, claim_stage, sentence_claims, table_claims


def _retrieval(pages: list[str], ranked: list[str], evidence: list[str]) -> SimpleNamespace:
    def candidate(element_id: str) -> SimpleNamespace:
        page, _, rest = element_id.partition("_")
        table = int(rest.split("_")[1]) if rest.startswith("cell") else None
        return SimpleNamespace(element=SimpleNamespace(id=element_id, page=page, table=table))

    return SimpleNamespace(
        pages=[SimpleNamespace(page=SimpleNamespace(title=p)) for p in pages],
        ranked=[candidate(i) for i in ranked],
        evidence=[candidate(i) for i in evidence],
    )


SENTENCES = [f"Ada_sentence_{n}" for n in range(7)]
REACHED = Reached.of(_retrieval(["Ada", "Bo"], ["Ada_sentence_9", "Bo_cell_0_1_1"], SENTENCES))


def test_each_stage_is_where_the_set_was_last_seen() -> None:
    assert REACHED.stage({"Ada_sentence_0", "Ada_sentence_4"}) == "complete"
    # the sixth sentence is in the evidence but past the five the official scorer reads
    assert REACHED.stage({"Ada_sentence_0", "Ada_sentence_5"}) == "past the scored budget"
    assert REACHED.stage({"Ada_sentence_9"}) == "reranked out"
    assert REACHED.stage({"Bo_sentence_3"}) == "not a candidate"
    assert REACHED.stage({"Ada_sentence_1", "Cy_sentence_0"}) == "second hop not taken"
    assert REACHED.stage({"Cy_sentence_0"}) == "page not retrieved"


def test_a_claim_counts_at_its_best_set_and_the_shares_add_up() -> None:
    sets = [[{"Cy_sentence_0"}, {"Ada_sentence_9"}], [{"Ada_sentence_2"}], [{"Cy_sentence_1"}]]
    assert claim_stage(REACHED, sets[0]) == "reranked out"
    records = [{"evidence": [{"content": sorted(s)} for s in claim]} for claim in sets]
    figures = sentence_claims([REACHED] * 3, records)
    assert figures["counts"]["complete"] == 1 and figures["counts"]["page not retrieved"] == 1
    assert sum(figures["counts"].values()) == figures["claims"] == 3
    assert figures["partial"] == 0.0  # neither lost claim has a gold element in the evidence
    assert figures["page_recall"] == round(2 / 3, 4)


def test_a_gold_table_reaches_the_stage_of_its_furthest_element() -> None:
    reached = Reached.of(
        _retrieval(["Ada", "Bo"], ["Bo_cell_0_1_1", "Bo_cell_2_0_0"], ["Ada_cell_1_0_0"])
    )
    assert reached.table_stage(("Ada", 1)) == "complete"
    assert reached.table_stage(("Bo", 0)) == "reranked out"
    assert reached.table_stage(("Bo", 5)) == "not a candidate"
    assert reached.table_stage(("Cy", 0)) == "page not retrieved"
    records = [{"gold_tables": [f"{page}_table_{n}"]} for page, n in (("Ada", 1), ("Bo", 0))]
    figures = table_claims([reached] * 2, records)
    assert figures["stages"]["complete"] == 0.5 and figures["table_first"] == 0.5
