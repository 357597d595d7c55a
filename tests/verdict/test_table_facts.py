"""The claim-against-table features: each family on a table built the way the store hands it
over, with TabFact-style claims (lower-cased, lemmatised) that hinge on a number, a count, a
superlative or a comparison, and the table a verdict reads out of retrieved evidence."""

from __future__ import annotations

import json

import numpy as np
import pytest

from feverous_es.index.dump.page import parse_page
from feverous_es.plugins.interfaces import Candidate, evidence_tables, table_number
from feverous_es.retrieve.evidence_tables import with_tables
from feverous_es.text import cell_number
from feverous_es.verdict.feature_model import evidence_table
from feverous_es.verdict.table_facts import FEATURE_NAMES, Table, claim_features

HEADER = ["team", "date", "venue", "points", "attendance"]
ROWS = [
    ["bradford bulls", "may 4 , 2008", "home", "98", "12,100"],
    ["leeds rhinos", "may 11 , 2008", "away", "40", "15,000"],
    ["wigan warriors", "june 1 , 2008", "home", "12", "9,500"],
    ["st helens", "june 8 , 2008", "home", "40", "11,200"],
]


def page_json(header: list[str], rows: list[list[str]], caption: str | None = None) -> dict:
    def cell(r: int, c: int, value: str, header_cell: bool) -> dict:
        kind = "header_cell" if header_cell else "cell"
        return {"id": f"{kind}_0_{r}_{c}", "value": value, "is_header": header_cell}

    table: dict = {"table": [[cell(0, c, v, True) for c, v in enumerate(header)]]}
    table["table"] += [
        [cell(r, c, v, False) for c, v in enumerate(row)] for r, row in enumerate(rows, 1)
    ]
    if caption:
        table["caption"] = caption
    return {"title": "2008 Season", "order": ["sentence_0", "table_0"],
            "sentence_0": "The 2008 season was the club's tenth.", "table_0": table}  # fmt: skip


@pytest.fixture
def elements() -> list:
    return parse_page("2008 Season", json.dumps(page_json(HEADER, ROWS, "results"))).elements


@pytest.fixture
def table(elements: list) -> Table:
    built = Table.from_elements(elements, 0)
    assert built is not None
    return built


def feature(claim: str, table: Table, name: str) -> float:
    return float(claim_features(claim, table)[FEATURE_NAMES.index(name)])


def test_a_table_is_rebuilt_from_the_page_elements_in_row_order(table: Table) -> None:
    assert table.title == "2008 Season"
    assert table.caption == "results"
    assert table.header == tuple(HEADER)
    assert table.rows == tuple(tuple(row) for row in ROWS)
    # points and attendance; a date starts with its month, so it is not a number
    assert set(table.numeric_columns) == {3, 4}


def test_a_page_without_the_table_gives_none(elements: list) -> None:
    assert Table.from_elements(elements, 3) is None


def test_cell_numbers_read_thousands_and_the_first_number_of_a_cell() -> None:
    assert cell_number("12,100") == 12100
    assert cell_number("3 - 1") == 3
    assert cell_number("$ 1.5 million") == 1.5
    assert cell_number("may 4 , 2008") is None
    assert cell_number("n / a") is None


def test_the_feature_vector_has_one_value_per_name(table: Table) -> None:
    values = claim_features("bradford bulls score 98 points", table)
    assert values.shape == (len(FEATURE_NAMES),)
    assert values.dtype == np.float32


def test_a_number_in_the_named_row_and_one_swapped_into_another_row(table: Table) -> None:
    assert feature("bradford bulls score 98 points", table, "number_in_named_row") == 1.0
    assert feature("wigan warriors score 98 points", table, "number_in_named_row") == 0.0
    assert feature("wigan warriors score 97 points", table, "numbers_missing") == 1.0


def test_a_superlative_checks_the_named_row_against_the_column(table: Table) -> None:
    supported = "bradford bulls score the most points"
    refuted = "leeds rhinos score the most points"
    assert feature(supported, table, "cue_maximum") == 1.0
    assert feature(supported, table, "named_row_is_max") == 1.0
    assert feature(refuted, table, "named_row_is_max") == 0.0
    assert feature("wigan warriors have the lowest attendance", table, "named_row_is_min") == 1.0


def test_a_number_that_is_a_column_maximum(table: Table) -> None:
    assert feature("the highest attendance be 15000", table, "number_is_column_max") == 1.0
    assert feature("the highest attendance be 14000", table, "number_is_column_max") == 0.0


def test_a_count_of_rows_holding_a_claim_word(table: Table) -> None:
    assert feature("there be 2 game in may", table, "count_matches_words") == 1.0
    assert feature("there be 3 game in may", table, "count_matches_words") == 0.0
    assert feature("there be 4 game", table, "count_matches_rows") == 1.0


def test_a_count_of_rows_holding_a_named_value(table: Table) -> None:
    assert feature("3 game be play at home", table, "count_matches") == 1.0
    assert feature("2 game be play at home", table, "count_matches") == 0.0


def test_a_comparison_of_two_named_rows(table: Table) -> None:
    assert feature("leeds rhinos score more points than wigan warriors", table,
                   "comparison_agrees") == 1.0  # fmt: skip
    assert feature("leeds rhinos score fewer points than wigan warriors", table,
                   "comparison_agrees") == -1.0  # fmt: skip
    assert feature("bradford bulls score 58 more points than leeds rhinos", table,
                   "number_is_difference") == 1.0  # fmt: skip


def test_a_sum_and_a_mean_of_a_column(table: Table) -> None:
    assert feature("the team score 190 points in total", table, "number_is_sum") == 1.0
    assert feature("the average points be 47.5", table, "number_is_mean") == 1.0


def test_evidence_tables_come_in_order_of_first_appearance(elements: list) -> None:
    cells = [e for e in elements if e.type.in_cell_budget]
    evidence = [Candidate(e, 1.0) for e in (cells[6], cells[1])]
    assert evidence_tables(evidence) == [("2008 Season", 0)]
    assert table_number(cells[0]) == 0
    sentence = next(e for e in elements if not e.type.in_cell_budget)
    assert table_number(sentence) is None


class _Store:
    def __init__(self, elements: list) -> None:
        self.elements = elements

    def page_elements(self, page: str, table: int | None = None) -> list:
        return [e for e in self.elements if e.page == page and table in (None, e.table)]


def test_the_verdict_reads_the_table_a_claim_is_about(elements: list) -> None:
    evidence = with_tables([Candidate(e, 1.0) for e in elements], _Store(elements))  # type: ignore[arg-type]
    chosen = evidence_table("bradford bulls score 98 points in may", evidence)
    assert chosen is not None and chosen.rows[0][0] == "bradford bulls"
    # The sentence answers this one better than the table does.
    assert evidence_table("the 2008 season was the club's tenth", evidence) is None
    sentences = [c for c in evidence if not c.element.type.in_cell_budget]
    assert evidence_table("bradford bulls score 98 points", sentences) is None
    # Evidence that is not what retrieval hands on holds no table to read.
    assert evidence_table("bradford bulls score 98 points in may", list(evidence)) is None


def test_a_claims_numbers_decide_a_tie(elements: list) -> None:
    """Its words as much in the sentence as in the table ("season" in both; "drew", "first",
    "game" in neither): 12,100, which only the table holds, sends the claim to it; with no
    number only the table holds, the tie stays with the sentences."""
    evidence = with_tables([Candidate(e, 1.0) for e in elements], _Store(elements))  # type: ignore[arg-type]
    assert evidence_table("the 2008 season drew 12,100 to its first game", evidence) is not None
    assert evidence_table("the 2008 season drew crowds to its first game", evidence) is None


def test_an_ordinal_checks_the_named_row_rank(table: Table) -> None:
    claim = "{} have the second highest attendance"
    assert feature(claim.format("bradford bulls"), table, "ordinal_rank_matches") == 1.0
    assert feature(claim.format("wigan warriors"), table, "ordinal_rank_matches") == 0.0
    assert feature("bradford bulls have a big crowd", table, "ordinal_rank_matches") == -1.0
