"""Retrieval logic: table scoring, cells per table, the page prior of non-cells, and the
candidate retriever on the sample index."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from feverous_es.index.elements import Element, ElementType, PageRecord
from feverous_es.index.store import CellHit, Filters, Hit, PageHit
from feverous_es.plugins.interfaces import PluginContext, Query
from feverous_es.retrieve.candidates import PapeloCandidates
from feverous_es.retrieve.table_scores import (
    TableWeights,
    best_cells,
    bigrams,
    rerank_by_rows,
    row_texts,
    score_tables,
    table_cells,
    table_parts,
)
from feverous_es.text import Terms, number_strings
from tests.conftest import REPO


def cell(page: str, table: int, row: int, column: int, text: str, row_text: str = "") -> Element:
    kind = ElementType.HEADER_CELL if row == 0 else ElementType.CELL
    local = f"{'header_' if row == 0 else ''}cell_{table}_{row}_{column}"
    lin = f"[{page}] {row_text or text}"
    return Element(
        f"{page}_{local}", page, kind, text, lin, f"{page}_row_{table}_{row}", lin,
        table=table, row=row, column=column,
    )  # fmt: skip


def scored(element: Element, score: float) -> CellHit:
    """A table element as a store's search_cells returns it."""
    assert element.table is not None
    return CellHit(
        element.id, element.page, element.type, element.table, element.row, element.column,
        element.text, score,
    )  # fmt: skip


def row_cells(page: str, table: int, row: int, texts: Sequence[str], score: float) -> list[CellHit]:
    """The cells of one table row, from column 0 on, each hit with ``score``."""
    return [
        scored(cell(page, table, row, column, text), score) for column, text in enumerate(texts)
    ]


def sentence(page: str, i: int, text: str) -> Element:
    lin = f"[{page}] {text}"
    return Element(f"{page}_sentence_{i}", page, ElementType.SENTENCE, text, lin, lin, lin)


def test_claim_features_use_the_index_analysis() -> None:
    terms = Terms()
    assert terms("The Cavaliers' games") == terms("the cavalier game")
    assert bigrams(["third", "round", "turkish"]) == {("third", "round"), ("round", "turkish")}
    assert number_strings("a time of 7:46.95 in 2013 , 54 goal") == {"7:46.95", "2013", "54"}


def test_bigrams_and_numbers_outrank_a_slightly_better_single_row() -> None:
    claim = "during the third round of the turkish cup there be 54 winner"
    # Table A: one row matches many words, but no pair of them inside one cell.
    a = row_cells("Cup A", 0, 1, ["turkish third", "round cup"], 10.0)
    # Table B: its best row scores a little lower, but "third round" is a cell and 54 a value.
    b = [scored(cell("Cup B", 1, 3, 0, "third round"), 9.0),
         scored(cell("Cup B", 1, 3, 1, "54"), 9.0),
         scored(cell("Cup B", 1, 0, 1, "winners from previous round"), 4.0)]  # fmt: skip
    scores = score_tables(claim, a + b)
    assert set(scores) == {("Cup A", 0), ("Cup B", 1)}
    assert scores["Cup B", 1] > scores["Cup A", 0]
    # Row BM25 alone keeps the order of the best rows.
    only_rows = score_tables(
        claim,
        a + b,
        TableWeights(
            row=1, terms=0, idf_terms=0, bigrams=0, numbers=0, title=0, cell_spans=0, row_spans=0
        ),
    )
    assert only_rows["Cup A", 0] > only_rows["Cup B", 1]


def test_a_cell_the_claim_names_whole_counts_over_scattered_words() -> None:
    claim = "süper lig be the most common league to win a round in the turkish cup"
    # A: the claim's words, but split across cells; B: "Süper Lig" (accented, cased) is a cell.
    a = row_cells("Cup A", 0, 1, ["super turkish", "lig cup"], 10.0)
    b = row_cells("Cup B", 1, 2, ["Su\u0308per Lig", "be"], 9.0)
    parts = table_parts(claim, a + b)
    # Every part is a plugin option (a TableWeights field) and a share in [0, 1].
    for table in parts.values():
        assert set(table) == {f.name for f in dataclasses.fields(TableWeights)}
        assert all(0.0 <= value <= 1.0 for value in table.values())
    assert parts["Cup A", 0]["cell_spans"] == 0.0
    # "süper lig" covers 2 of the claim's 9 content words; a stop word as a cell covers none.
    assert parts["Cup B", 1]["cell_spans"] == pytest.approx(2 / 9)
    rows_and_spans = TableWeights(
        row=1, terms=0, idf_terms=0, bigrams=0, numbers=0, title=0, cell_spans=1, row_spans=0
    )
    scores = score_tables(claim, a + b, rows_and_spans)
    assert scores["Cup B", 1] > scores["Cup A", 0]


def test_cells_the_claim_names_in_one_row_count_over_the_same_cells_in_two() -> None:
    claim = "john smith scored 12 goals for arsenal"
    # A names the player and the club in one row; B has both names, in different rows.
    a = [scored(cell("League A", 0, 1, 0, "John Smith"), 8.0),
         scored(cell("League A", 0, 1, 2, "Arsenal"), 8.0)]  # fmt: skip
    b = [scored(cell("League B", 0, 1, 0, "John Smith"), 8.0),
         scored(cell("League B", 0, 2, 2, "Arsenal"), 8.0)]  # fmt: skip
    parts = table_parts(claim, a + b)
    assert parts["League A", 0]["cell_spans"] == parts["League B", 0]["cell_spans"]
    # 3 of the claim's 6 content words (john, smith, arsenal) in row 1 of A, 2 in one row of B.
    assert parts["League A", 0]["row_spans"] == pytest.approx(3 / 6)
    assert parts["League B", 0]["row_spans"] == pytest.approx(2 / 6)
    scores = score_tables(claim, a + b)
    assert scores["League A", 0] > scores["League B", 0]


def test_title_words_count_for_every_table_of_the_page() -> None:
    claim = "the cavalier win a total of 4 game in december"
    hits = [scored(cell("1970-71 Cleveland Cavaliers season", 0, 2, 0, "december 4"), 5.0),
            scored(cell("Some other season", 0, 2, 0, "december 4"), 5.0)]  # fmt: skip
    scores = score_tables(claim, hits)
    assert scores["1970-71 Cleveland Cavaliers season", 0] > scores["Some other season", 0]


def test_table_cells_keep_the_table_order_and_fill_quotas_best_row_first() -> None:
    claim = "smith score 20 point"
    hits = [scored(cell("P", 0, r, c, f"v{r}{c}" if c else ("smith" if r == 2 else "x")), 10.0 - r)
            for r in range(1, 4) for c in range(3)]  # fmt: skip
    hits += [scored(cell("Q", 1, r, c, f"w{r}{c}"), 20.0) for r in range(1, 3) for c in range(2)]
    out = table_cells(claim, hits, [("P", 0), ("Q", 1)], [4, 2])
    ids = [hit.id for hit, _ in out]
    # P first (its rank), best row (1) first; Q's two cells after, though its BM25 is higher.
    assert ids[:4] == ["P_cell_0_1_0", "P_cell_0_1_1", "P_cell_0_1_2", "P_cell_0_2_0"]
    assert [hit.page for hit, _ in out] == ["P"] * 4 + ["Q"] * 2
    assert all(x > y for (_, x), (_, y) in itertools.pairwise(out))
    # In a row, the cell whose own text matches the claim comes first.
    out = table_cells(claim, [h for h in hits if h.row == 2], [("P", 0)], [1])
    assert out[0][0].text == "smith"


class FakeStore:
    """Just the searches the candidate retriever makes, from fixed hit lists."""

    def __init__(self, text: Sequence[Hit], vector: Sequence[Hit]) -> None:
        self.text, self.vector = list(text), list(vector)

    def _filtered(self, hits: list[Hit], k: int, filters: Filters | None) -> list[Hit]:
        f = filters or Filters()
        keep = [h for h in hits
                if (not f.pages or h.element.page in f.pages)
                and (not f.types or h.element.type in f.types)
                and (not f.tables or (h.element.page, h.element.table) in f.tables)]  # fmt: skip
        return sorted(keep, key=lambda h: h.score, reverse=True)[:k]

    def search_text(self, query: str, k: int = 100, filters: Filters | None = None) -> list[Hit]:
        return self._filtered(self.text, k, filters)

    def search_cells(
        self, query: str, k: int = 100, filters: Filters | None = None
    ) -> list[CellHit]:
        hits = self._filtered(self.text, k, filters)
        return [scored(h.element, h.score) for h in hits if h.element.table is not None]

    def search_cell_tables(
        self, query: str, k: int = 100, filters: Filters | None = None
    ) -> list[tuple[str, int]]:
        return list(dict.fromkeys(hit.key for hit in self.search_cells(query, k, filters)))

    def get_elements(self, ids: Sequence[str]) -> list[Element]:
        known = {h.element.id: h.element for h in self.text + self.vector}
        return [known[i] for i in ids if i in known]

    def search_vector(
        self, vector: np.ndarray, k: int = 100, filters: Filters | None = None
    ) -> list[Hit]:
        return self._filtered(self.vector, k, filters)


def fake_context(store: FakeStore) -> PluginContext:
    return PluginContext(store, lambda texts: np.zeros((len(texts), 3)))  # type: ignore[arg-type]


def test_whole_table_bm25_is_a_part_relative_to_the_best_table() -> None:
    hits = [scored(cell("A", 0, 1, 0, "cup"), 5.0), scored(cell("B", 0, 1, 0, "cup"), 5.0)]
    parts = table_parts("the cup", hits, table_bm25={("A", 0): 3.0, ("B", 0): 6.0})
    assert (parts["A", 0]["table_bm25"], parts["B", 0]["table_bm25"]) == (0.5, 1.0)
    # A store without a table index gives no such scores: the part is 0 for every table.
    assert {p["table_bm25"] for p in table_parts("the cup", hits).values()} == {0.0}


class TableStore(FakeStore):
    """A fake store with a table index: fixed whole-table BM25 scores."""

    def __init__(self, text: Sequence[Hit], tables: dict[tuple[str, int], float]) -> None:
        super().__init__(text, [])
        self.tables = tables
        self.asked: list[tuple[tuple[str, int], ...]] = []

    def search_tables(
        self, query: str, k: int = 10, tables: Sequence[tuple[str, int]] = ()
    ) -> list[tuple[tuple[str, int], float]]:
        self.asked.append(tuple(tables))
        found = [(key, score) for key, score in self.tables.items() if key in tables]
        return sorted(found, key=lambda item: item[1], reverse=True)[:k]


def test_the_table_index_reorders_the_pool_when_the_store_has_one() -> None:
    hits = [Hit(cell("A", 0, 1, 0, "cup final"), 6.0), Hit(cell("B", 0, 1, 0, "cup final"), 5.0)]
    query = Query("the cup final", np.zeros(3, dtype=np.float32))
    plain = PapeloCandidates(fake_context(FakeStore(hits, [])), row_tables=0)
    assert plain.rank_tables(query)[0] == [("A", 0), ("B", 0)]
    store = TableStore(hits, {("A", 0): 1.0, ("B", 0): 9.0, ("Z", 0): 20.0})
    with_index = PapeloCandidates(fake_context(store), row_tables=0)  # type: ignore[arg-type]
    assert with_index.rank_tables(query)[0] == [("B", 0), ("A", 0)]
    # Only the pool's tables are scored (Z, outside it, does not set the scale).
    assert store.asked == [(("A", 0), ("B", 0))]
    off = PapeloCandidates(fake_context(store), row_tables=0, table_bm25=0.0)  # type: ignore[arg-type]
    assert off.rank_tables(query)[0] == [("A", 0), ("B", 0)]


def test_page_prior_lifts_the_sentences_of_the_best_page() -> None:
    gold = sentence("Vema Seamount", 2, "It lies in the South Atlantic")
    stray = sentence("Botulism", 4, "lies in the south")
    weak_page = sentence("Cape Town", 0, "South Atlantic city")
    store = FakeStore(
        text=[Hit(gold, 9.0), Hit(stray, 10.0), Hit(weak_page, 9.5)],
        vector=[Hit(gold, 0.6), Hit(stray, 0.55), Hit(weak_page, 0.5)],
    )
    context = fake_context(store)
    retriever = PapeloCandidates(context, tables=0)
    pages = [PageHit(PageRecord("Vema Seamount", ""), 2.9),
             PageHit(PageRecord("Cape Town", ""), 1.3)]  # fmt: skip
    query = Query("claim", np.zeros(3, dtype=np.float32))
    out = retriever.candidates(query, pages)
    assert [c.element.page for c in out] == ["Vema Seamount", "Cape Town", "Botulism"]
    # Without the prior, the highest BM25 (a page not retrieved) would come first.
    plain = PapeloCandidates(context, tables=0, page_weight=0.0)
    assert plain.candidates(query, pages)[0].element.page == "Botulism"


def test_candidates_find_the_gold_table_on_the_sample_index(sample_index: Path) -> None:
    from feverous_es.index.embedded import EmbeddedStore
    from feverous_es.runtime.embedder import Embedder

    claims = [json.loads(line) for line in (REPO / "sample" / "claims.jsonl").open()]
    tabfact = [c for c in claims if c.get("gold_tables")][:10]
    assert tabfact
    store = EmbeddedStore(sample_index)
    embedder = Embedder()
    try:
        retriever = PapeloCandidates(PluginContext(store, embedder.embed))
        found = 0
        for record in tabfact:
            query = Query(record["claim"], embedder.embed([record["claim"]])[0])
            ranked, _ = retriever.rank_tables(query)
            page, _, table = record["gold_tables"][0].rpartition("_table_")
            found += ranked[:1] == [(page, int(table))]
            cells = retriever.candidates(query, [])
            assert len([c for c in cells if c.source == "tables"]) <= 12 + 2 * 7
        assert found >= 7
    finally:
        store.close()


@pytest.mark.parametrize("option", ["row", "bigrams", "numbers"])
def test_table_weights_are_plugin_options(option: str) -> None:
    retriever = PapeloCandidates(fake_context(FakeStore([], [])), **{option: 0.0})
    assert getattr(retriever.options.weights, option) == 0.0


def test_an_unknown_candidate_option_names_the_known_ones(tmp_path, sample_index) -> None:
    config = tmp_path / "pipeline.toml"
    config.write_text("[options.candidates]\npage_tabels = 3\n")
    done = subprocess.run(
        [sys.executable, "-m", "feverous_es", "verify", "x", "--config", str(config),
         "--index", str(sample_index)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1
    line = done.stderr.strip()
    assert "\n" not in line and "page_tabels" in line and "table_bm25" in line, line


def test_items_and_captions_come_after_the_table_cells() -> None:
    lin = "[Q] CAPTION results of the cup"
    caption = Element("Q_table_caption_1", "Q", ElementType.TABLE_CAPTION, "results of the cup",
                      lin, "Q_table_caption_1", lin, table=1)  # fmt: skip
    cells = [Hit(cell("R", 0, r, c, f"cup {r}{c}"), 5.0 - r) for r in range(1, 3) for c in range(2)]
    store = FakeStore(text=[Hit(caption, 50.0), *cells], vector=[])
    retriever = PapeloCandidates(fake_context(store))
    out = retriever.candidates(Query("the cup result", np.zeros(3, dtype=np.float32)), [])
    ranked = sorted(out, key=lambda c: c.score, reverse=True)
    assert [c.element.page for c in ranked if c.element.type.in_cell_budget][:4] == ["R"] * 4
    assert ranked[-1].element.id == "Q_table_caption_1"


class LengthEncoder:
    """A stand-in cross-encoder: the longer the passage, the higher its logit."""

    def __init__(self) -> None:
        self.pairs: list[tuple[str, str]] = []

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        self.pairs += pairs
        return np.array([len(passage) / 10 for _, passage in pairs])


def test_rows_rerank_the_tables_by_their_best_row_in_plain_text() -> None:
    hits = [
        Hit(cell("A", 0, 1, 0, "x", "KEY team VALUE ajax"), 9.0),
        Hit(cell("A", 0, 2, 0, "y", "KEY team VALUE ajax amsterdam"), 2.0),
        Hit(cell("B", 0, 3, 0, "z", "KEY team VALUE feyenoord rotterdam"), 5.0),
    ]
    best = best_cells([scored(hit.element, hit.score) for hit in hits])
    assert {key: hit.row for key, hit in best.items()} == {("A", 0): 1, ("B", 0): 3}
    scores = {("A", 0): 2.0, ("B", 0): 1.0, ("C", 0): 1.5}
    ranked = sorted(scores, key=lambda key: scores[key], reverse=True)
    # The best row's whole element is fetched for its text; C has no cell hit, so no row.
    rows = row_texts(FakeStore(hits, []), best, ranked)  # type: ignore[arg-type]
    assert set(rows) == {("A", 0), ("B", 0)}
    encoder = LengthEncoder()
    # B's row is 1.5 logits ahead of A's: at weight 1 that outweighs A's one-point lead, and
    # C, with no cell row to score, keeps its score.
    fused = rerank_by_rows("claim", ranked, scores, rows, encoder, 1.0)  # type: ignore[arg-type]
    assert fused == [("B", 0), ("A", 0), ("C", 0)]
    assert encoder.pairs == [("claim", "A. team: ajax"), ("claim", "B. team: feyenoord rotterdam")]
    weak = rerank_by_rows("claim", ranked, scores, rows, encoder, 0.1)  # type: ignore[arg-type]
    assert weak == ranked
