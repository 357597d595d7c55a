"""Page JSON -> elements: ids, text, context and Papelo linearization."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from feverous_es.errors import MalformedPage
from feverous_es.index.dump.linearize import readable_row
from feverous_es.index.dump.page import parse_page
from feverous_es.index.elements import ElementType
from tests.conftest import raw_element_ids


def cell(cid: str, value: str, header: bool = False, rows: int | str = 1, cols: int | str = 1):
    return {"id": cid, "value": value, "is_header": header, "row_span": rows, "column_span": cols}


TEMPLE_TOWER = {
    "title": "Temple Tower",
    "order": ["sentence_0", "table_0", "section_0", "list_0"],
    "sentence_0": "Temple Tower is a 1930 American [[Pre-Code_Hollywood|pre-Code]] film.",
    "table_0": {
        "type": "infobox",
        "table": [
            [cell("header_cell_0_0_0", "Temple Tower", True, cols="2")],
            [cell("header_cell_0_1_0", "Directed by", True), cell("cell_0_1_1", "Donald Gallaher")],
            [cell("header_cell_0_2_0", "Release date", True), cell("cell_0_2_1", "April 13, 1930")],
        ],
    },
    "section_0": {"value": "Cast", "level": 1},
    "list_0": {
        "type": "unordered_list",
        "list": [
            {
                "id": "item_0_0",
                "value": "[[Kenneth_MacKenna|Kenneth MacKenna]] as Bulldog Drummond",
                "level": 0,
            },
            {"id": "item_0_1", "value": "Marceline Day as Patricia Verney", "level": 0},
        ],
    },
}

ARABINOSE = {
    "title": "L-arabinose operon",
    "order": ["table_0"],
    "table_0": {
        "type": "general",
        "caption": "Catabolism of arabinose in E. coli",
        "table": [
            [
                cell("header_cell_0_0_0", "Substrate", True),
                cell("header_cell_0_0_1", "Enzyme(s)", True),
                cell("header_cell_0_0_2", "Function", True),
                cell("header_cell_0_0_3", "Reversible", True),
                cell("header_cell_0_0_4", "Product", True),
            ],
            [
                cell("cell_0_1_0", "L-arabinose"),
                cell("cell_0_1_1", "AraA"),
                cell("cell_0_1_2", "Isomerase"),
                cell("cell_0_1_3", "Yes"),
                cell("cell_0_1_4", "L-ribulose"),
            ],
        ],
    },
}


def by_id(page_id: str, data: dict) -> dict:
    return {e.id: e for e in parse_page(page_id, json.dumps(data)).elements}


def test_papelo_table1_sentence() -> None:
    page = {"title": "Mississippi River", "order": ["sentence_0"], "sentence_0": (
        "When measured from its traditional source at Lake Itasca, the Mississippi has a length "
        "of 2,320 miles (3,730 km).")}  # fmt: skip
    element = by_id("Mississippi River", page)["Mississippi River_sentence_0"]
    assert element.linearized == (
        "[Mississippi River] When measured from its traditional source at Lake Itasca, the "
        "Mississippi has a length of 2,320 miles (3,730 km)."
    )


def test_papelo_table1_infobox_cell() -> None:
    element = by_id("Temple Tower", TEMPLE_TOWER)["Temple Tower_cell_0_2_1"]
    assert element.linearized == (
        "[Temple Tower] VALUE Release date {{ KEY Temple Tower VALUE April 13, 1930 }}"
    )
    assert element.type is ElementType.CELL
    assert (element.table, element.row, element.column) == (0, 2, 1)


def test_papelo_table1_captioned_cell() -> None:
    element = by_id("L-arabinose operon", ARABINOSE)["L-arabinose operon_cell_0_1_0"]
    assert element.linearized == (
        "[L-arabinose operon] CAPTION Catabolism of arabinose in E. coli "
        "{{ KEY Substrate VALUE L-arabinose }} KEY Enzyme(s) VALUE AraA KEY Function VALUE "
        "Isomerase KEY Reversible VALUE Yes KEY Product VALUE L-ribulose"
    )


def test_papelo_table1_list_item() -> None:
    # Table 1 prints "LIST CONTEXT"; the paper's text and docs/design.md's contract say "CONTEXT".
    element = by_id("Temple Tower", TEMPLE_TOWER)["Temple Tower_item_0_1"]
    assert (
        element.linearized == "[Temple Tower] CONTEXT Cast VALUE Marceline Day as Patricia Verney"
    )
    assert element.type is ElementType.ITEM
    assert element.context == ("Temple Tower_title", "Temple Tower_section_0")
    assert element.section_path == ("Cast",)


def test_readable_row_is_the_row_as_plain_text() -> None:
    captioned = by_id("L-arabinose operon", ARABINOSE)["L-arabinose operon_cell_0_1_0"]
    assert readable_row(captioned.linearized) == (
        "L-arabinose operon, Catabolism of arabinose in E. coli. Substrate: L-arabinose; "
        "Enzyme(s): AraA; Function: Isomerase; Reversible: Yes; Product: L-ribulose"
    )
    infobox = by_id("Temple Tower", TEMPLE_TOWER)["Temple Tower_cell_0_2_1"]
    assert readable_row(infobox.linearized) == (
        "Temple Tower. Release date; Temple Tower: April 13, 1930"
    )
    assert readable_row("[Temple Tower] A film.") == "[Temple Tower] A film."


def test_row_cells_share_one_vector_and_differ_only_in_marker() -> None:
    elements = by_id("L-arabinose operon", ARABINOSE)
    row = [e for e in elements.values() if e.row == 1]
    assert len({e.vector_key for e in row}) == 1
    assert len({e.embed_text for e in row}) == 1
    assert "{{" not in row[0].embed_text
    assert len({e.linearized for e in row}) == len(row)


def test_caption_and_header_cells() -> None:
    elements = by_id("L-arabinose operon", ARABINOSE)
    caption = elements["L-arabinose operon_table_caption_0"]
    assert caption.type is ElementType.TABLE_CAPTION
    assert caption.linearized == "[L-arabinose operon] CAPTION Catabolism of arabinose in E. coli"
    header = elements["L-arabinose operon_header_cell_0_0_1"]
    assert header.type is ElementType.HEADER_CELL
    assert header.text == "Enzyme(s)"


def test_wiki_links_become_anchor_text_and_targets() -> None:
    elements = by_id("Temple Tower", TEMPLE_TOWER)
    sentence = elements["Temple Tower_sentence_0"]
    assert sentence.text == "Temple Tower is a 1930 American pre-Code film."
    assert sentence.links == ("Pre-Code Hollywood",)
    item = elements["Temple Tower_item_0_0"]
    assert item.text == "Kenneth MacKenna as Bulldog Drummond"
    assert item.links == ("Kenneth MacKenna",)


def test_cell_context_has_row_and_column_headers_across_spans() -> None:
    elements = by_id("Temple Tower", TEMPLE_TOWER)
    # left: the row's header "Release date"; above: the spanning title header.
    assert elements["Temple Tower_cell_0_2_1"].context == (
        "Temple Tower_title",
        "Temple Tower_header_cell_0_2_0",
        "Temple Tower_header_cell_0_0_0",
    )


def test_section_context_follows_feverous() -> None:
    page = {
        "title": "P",
        "order": ["section_0", "section_1", "section_2", "sentence_0", "section_3", "sentence_1"],
        "section_0": {"value": "A", "level": 1},
        "section_1": {"value": "B", "level": 2},
        "section_2": {"value": "C", "level": 3},
        "sentence_0": "one",
        "section_3": {"value": "D", "level": 2},
        "sentence_1": "two",
    }
    elements = by_id("P", page)
    assert elements["P_sentence_0"].context == (
        "P_title",
        "P_section_2",
        "P_section_1",
        "P_section_0",
    )
    assert elements["P_sentence_0"].section_path == ("A", "B", "C")
    # Walking back from sentence_1: D, then C is deeper, which ends FEVEROUS's walk.
    assert elements["P_sentence_1"].context == ("P_title", "P_section_3")


def test_title_is_nfd() -> None:
    page = {"title": "Zürich", "order": ["sentence_0"], "sentence_0": "A city."}
    (element,) = by_id("Zu\u0308rich".replace("u\u0308", "ü"), page).values()
    assert element.id == "Zu\u0308rich_sentence_0"


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "not an object"),
        ('{"title": "P"}', "no 'order'"),
        ('{"title": "P", "order": ["sentence_0"]}', "lacks"),
        ('{"title": "P", "order": ["table_0"], "table_0": {"type": "x"}}', "no 'table'"),
        (
            '{"title": "P", "order": ["table_0"], "table_0": {"table": [[{"id": "cell_0_0_0"}]]}}',
            "layout",
        ),
    ],
)
def test_malformed_pages_say_why(data: str, reason: str) -> None:
    with pytest.raises(MalformedPage, match=reason):
        parse_page("P", data)


def _elements_checked(dump: Path, where: str) -> int:
    """Parses the dump's pages that ``where`` selects and checks that each yields exactly the
    element ids its raw JSON holds; returns how many elements were checked."""
    conn = sqlite3.connect(dump)
    checked = 0
    for page_id, data in conn.execute(f"SELECT id, data FROM wiki WHERE {where}"):
        parsed = [e.id for e in parse_page(page_id, data).elements]
        expected = raw_element_ids(page_id, json.loads(data))
        assert len(parsed) == len(set(parsed))
        assert sorted(parsed) == sorted(expected)
        checked += len(parsed)
    conn.close()
    return checked


def test_real_pages_yield_exactly_their_ids(mini_slice: Path) -> None:
    assert _elements_checked(mini_slice, "1") > 10_000


def test_whole_dump_pages_yield_exactly_their_ids(mini_wiki: Path) -> None:
    assert _elements_checked(mini_wiki, "rowid % 5 = 0") > 100_000
