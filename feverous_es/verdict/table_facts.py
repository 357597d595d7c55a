"""What a claim says about one table, as numbers a classifier reads.

A small text model reads a table as a bag of words and cannot count, compare or find a column's
maximum (fine-tuned MiniLM never left the majority class on 17.5 k TabFact claims). This module
computes those operations for it: which of the claim's words and numbers the table holds and in
which row, whether the rows the claim names hold a column's maximum or minimum, how many rows
hold a value the claim names, whether two named rows compare the way the claim says, whether a
number of the claim is a column's sum, mean or a difference — each next to the claim words that
ask for it (superlatives, comparatives, counts, negation). The table-claim verdict
(:mod:`feverous_es.verdict.feature_model`) feeds them to a gradient-boosted classifier; training
and inference call the same :func:`claim_features`, so the two cannot drift.

Tables come from the store's elements (:meth:`Table.from_elements`), so the feature code sees
a table exactly as the index holds it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from feverous_es.index.elements import Element, ElementType
from feverous_es.text import (
    STOPWORDS,
    cell_number,
    content_words,
    number_value,
    tokens,
    word_set,
)

# Claim words that ask for an operation on the table (TabFact's claims are lower-cased and
# lemmatised: "there be", "win", "score").
CUES: dict[str, frozenset[str]] = {
    "negation": word_set("not never no none nobody nothing neither nor without"),
    "maximum": word_set(
        "most highest largest biggest greatest best top maximum longest latest oldest "
        "heaviest tallest fastest max"
    ),
    "minimum": word_set(
        "least lowest smallest fewest worst minimum shortest earliest youngest bottom slowest min"
    ),
    "more": word_set("more higher greater larger bigger longer later after above over"),
    "less": word_set("less lower fewer smaller shorter earlier before below under"),
    "than": word_set("than"),
    "count": word_set("there time times total number count amount"),
    "sum": word_set("total sum combined altogether overall"),
    "average": word_set("average mean"),
    "all": word_set("all every each always"),
    "only": word_set("only just sole solely"),
    "same": word_set("same equal tie tied both"),
    "first": word_set("first 1st opening"),
    "last": word_set("last final"),
    "different": word_set("different difference differ"),
}

FEATURE_NAMES: tuple[str, ...] = (
    *(f"cue_{name}" for name in CUES),
    "claim_tokens",
    "claim_numbers",
    "table_rows",
    "table_columns",
    "words_in_table",
    "words_in_cells",
    "words_in_head",
    "numbers_in_table",
    "numbers_missing",
    "best_row_share",
    "best_row_numbers",
    "second_row_share",
    "rows_tied_best",
    "named_values",
    "named_rows",
    "named_rows_of_table",
    "count_matches",
    "count_matches_rows",
    "count_matches_words",
    "count_matches_filter",
    "count_of_named_row_cells",
    "named_row_is_max",
    "named_row_is_min",
    "named_row_is_first",
    "named_row_is_last",
    "number_is_column_max",
    "number_is_column_min",
    "number_is_sum",
    "number_is_mean",
    "number_is_difference",
    "comparison_sign",
    "comparison_agrees",
    "named_value_unique",
    "named_values_same_row",
    "number_in_named_row",
    "number_in_named_column",
    "number_in_named_cell",
    "ordinal_rank_matches",
    "named_value_in_all_rows",
)
ORDINALS = {
    word: rank
    for rank, words in enumerate(
        ("first 1st", "second 2nd", "third 3rd", "fourth 4th", "fifth 5th", "sixth 6th"), 1
    )
    for word in words.split()
}


def _numbers(words: Iterable[str]) -> set[float]:
    return {n for w in words if (n := number_value(w)) is not None}


@dataclass(frozen=True)
class Table:
    """A table as plain strings: its header row and its data rows, in the page's order."""

    title: str
    caption: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    @classmethod
    def from_elements(cls, elements: Iterable[Element], table: int) -> Table | None:
        """Table ``table`` of a page's elements (None when the page has no such table). The
        header is the first row made only of header cells; other rows are data."""
        title, caption = "", ""
        grid: dict[int, dict[int, Element]] = {}
        for element in elements:
            if element.table != table:
                continue
            title = element.page
            if element.type is ElementType.TABLE_CAPTION:
                caption = element.text
            elif element.row is not None and element.column is not None:
                grid.setdefault(element.row, {})[element.column] = element
        if not grid:
            return None
        header: tuple[str, ...] = ()
        rows: list[tuple[str, ...]] = []
        for r in sorted(grid):
            cells = [grid[r][c] for c in sorted(grid[r])]
            values = tuple(cell.text for cell in cells)
            if not header and not rows and all(c.type is ElementType.HEADER_CELL for c in cells):
                header = values
            else:
                rows.append(values)
        return cls(title, caption, header, tuple(rows))

    @cached_property
    def row_tokens(self) -> list[set[str]]:
        return [{t for cell in row for t in tokens(cell)} for row in self.rows]

    @cached_property
    def cell_tokens(self) -> set[str]:
        return set().union(*self.row_tokens)

    @cached_property
    def head_tokens(self) -> set[str]:
        return set(tokens(" ".join((self.title, self.caption, *self.header))))

    @cached_property
    def all_tokens(self) -> set[str]:
        """The tokens of the title, caption, header and every cell."""
        return self.cell_tokens | self.head_tokens

    @cached_property
    def columns(self) -> list[list[str]]:
        width = max((len(row) for row in self.rows), default=0)
        return [[row[c] if c < len(row) else "" for row in self.rows] for c in range(width)]

    @cached_property
    def numeric_columns(self) -> dict[int, np.ndarray]:
        """Columns whose cells are mostly numbers, as float arrays (NaN where a cell is not)."""
        numeric: dict[int, np.ndarray] = {}
        for c, column in enumerate(self.columns):
            values = np.array([_nan(cell_number(cell)) for cell in column], dtype=float)
            if len(values) and np.isfinite(values).mean() >= 0.6:
                numeric[c] = values
        return numeric

    @cached_property
    def cell_keys(self) -> list[list[str]]:
        """Each cell as its token string, the form claim spans are matched in."""
        return [[" ".join(tokens(cell)) for cell in row] for row in self.rows]


def _nan(value: float | None) -> float:
    return np.nan if value is None else value


@dataclass(frozen=True)
class _Claim:
    words: list[str]
    text: str  # the tokens joined by spaces, padded, for span matching
    content: set[str]
    numbers: list[float]

    @classmethod
    def read(cls, claim: str) -> _Claim:
        words = tokens(claim)
        content = content_words(claim)
        numbers = [n for w in words if (n := number_value(w)) is not None]
        return cls(words, f" {' '.join(words)} ", content, numbers)

    def names(self, key: str) -> int:
        """Where the cell ``key`` occurs in the claim as whole words (-1: it does not)."""
        return self.text.find(f" {key} ") if key else -1


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def _any_close(values: Iterable[float], targets: Sequence[float]) -> bool:
    return any(_close(v, t) for v in values for t in targets)


def claim_features(claim: str, table: Table) -> np.ndarray:
    """The claim-against-table features, in :data:`FEATURE_NAMES` order (float32)."""
    c = _Claim.read(claim)
    words = set(c.words)
    values = {f"cue_{name}": float(bool(words & cue)) for name, cue in CUES.items()}
    values["cue_negation"] += float("n't" in claim)
    n_rows = len(table.rows)
    values.update(
        claim_tokens=len(c.words),
        claim_numbers=len(c.numbers),
        table_rows=n_rows,
        table_columns=len(table.columns),
    )
    content = c.content or {""}
    values["words_in_table"] = len(c.content & table.all_tokens) / len(content)
    values["words_in_cells"] = len(c.content & table.cell_tokens) / len(content)
    values["words_in_head"] = len(c.content & table.head_tokens) / len(content)
    table_numbers = _numbers(t for row in table.row_tokens for t in row)
    found = [n for n in c.numbers if n in table_numbers]
    values["numbers_in_table"] = len(found) / len(c.numbers) if c.numbers else -1.0
    values["numbers_missing"] = len(c.numbers) - len(found)

    # The rows the claim is about: most of its words (not counting the head's) in one row.
    asked = {w for w in c.words if w not in STOPWORDS} - table.head_tokens
    overlap = np.array([len(asked & row) for row in table.row_tokens] or [0])
    order = np.sort(overlap)[::-1]
    best = int(order[0])
    values["best_row_share"] = best / max(1, len(asked))
    values["second_row_share"] = (int(order[1]) if len(order) > 1 else 0) / max(1, len(asked))
    values["rows_tied_best"] = int((overlap == best).sum()) if best else 0
    best_rows = [r for r in range(n_rows) if best and overlap[r] == best]
    best_numbers = _numbers(t for r in best_rows for t in table.row_tokens[r])
    values["best_row_numbers"] = (
        sum(n in best_numbers for n in c.numbers) / len(c.numbers) if c.numbers else -1.0
    )

    # Cells the claim names as a whole (non-numeric values: entities, dates, categories).
    named: dict[tuple[int, str], list[int]] = {}  # (column, value) -> rows holding it
    first_seen: dict[int, int] = {}  # row -> where in the claim its first named value occurs
    for r, row in enumerate(table.cell_keys):
        for col, key in enumerate(row):
            if not key or number_value(key) is not None or key in STOPWORDS:
                continue
            at = c.names(key)
            if at >= 0:
                named.setdefault((col, key), []).append(r)
                first_seen[r] = min(first_seen.get(r, at), at)
    named_rows = sorted(first_seen, key=first_seen.__getitem__)
    values["named_values"] = len(named)
    values["named_rows"] = len(named_rows)
    values["named_rows_of_table"] = len(named_rows) / max(1, n_rows)
    counts = [len(rows) for rows in named.values()]
    values["count_matches"] = float(_any_close(counts, c.numbers))
    values["count_matches_rows"] = float(_any_close([n_rows], c.numbers))
    # Rows holding a claim word ("in may"), or all of its table words at once (the claim's filter).
    in_table = [w for w in asked if w in table.cell_tokens and number_value(w) is None]
    word_counts = [sum(w in row for row in table.row_tokens) for w in in_table]
    values["count_matches_words"] = float(_any_close(word_counts, c.numbers))
    matching = sum(all(w in row for w in in_table) for row in table.row_tokens) if in_table else 0
    values["count_matches_filter"] = float(_any_close([matching], c.numbers)) if in_table else -1.0
    values["named_value_unique"] = float(any(n == 1 for n in counts)) if counts else -1.0
    values["named_value_in_all_rows"] = float(n_rows in counts) if counts else -1.0
    row_hits = Counter(r for rows in named.values() for r in set(rows))
    values["named_values_same_row"] = float(max(row_hits.values(), default=0) >= 2)
    values["count_of_named_row_cells"] = (
        float(_any_close([sum(1 for v in row_hits.values() if v >= 2)], c.numbers))
        if row_hits
        else -1.0
    )

    # Numeric columns the claim mentions by a header word; all of them if it mentions none.
    numeric = table.numeric_columns
    mentioned = [
        col for col in numeric
        if col < len(table.header) and set(tokens(table.header[col])) & words
    ] or list(numeric)  # fmt: skip
    focus = named_rows or best_rows
    is_max = is_min = False
    for col in mentioned:
        column = numeric[col]
        if not np.isfinite(column).any():
            continue
        top, bottom = np.nanmax(column), np.nanmin(column)
        for r in focus:
            if np.isfinite(column[r]):
                is_max |= bool(column[r] == top)
                is_min |= bool(column[r] == bottom)
    values["named_row_is_max"] = float(is_max) if focus and mentioned else -1.0
    values["named_row_is_min"] = float(is_min) if focus and mentioned else -1.0
    values["named_row_is_first"] = float(0 in focus) if focus else -1.0
    values["named_row_is_last"] = float(n_rows - 1 in focus) if focus else -1.0

    columns = [numeric[col] for col in mentioned if np.isfinite(numeric[col]).any()]
    values["number_is_column_max"] = float(_any_close([np.nanmax(v) for v in columns], c.numbers))
    values["number_is_column_min"] = float(_any_close([np.nanmin(v) for v in columns], c.numbers))
    sums = [np.nansum(v) for v in columns] + [
        np.nansum(v[focus]) for v in columns if len(focus) > 1
    ]
    values["number_is_sum"] = float(_any_close(sums, c.numbers))
    means = [round(float(np.nanmean(v)), d) for v in columns for d in (0, 1, 2)]
    values["number_is_mean"] = float(_any_close(means, c.numbers))

    # Two named rows compared: the sign of first-named minus second-named, in a mentioned column.
    sign, differences = 0.0, []
    if len(named_rows) >= 2:
        a, b = named_rows[0], named_rows[1]
        for v in columns:
            if np.isfinite(v[a]) and np.isfinite(v[b]):
                differences.append(abs(v[a] - v[b]))
                if not sign:
                    sign = float(np.sign(v[a] - v[b]))
    values["number_is_difference"] = float(_any_close(differences, c.numbers))
    direction = values["cue_more"] - values["cue_less"]
    values["comparison_sign"] = sign
    values["comparison_agrees"] = sign * direction

    focus_numbers = _numbers(t for r in focus for t in table.row_tokens[r])
    values["number_in_named_row"] = (
        sum(n in focus_numbers for n in c.numbers) / len(c.numbers) if c.numbers else -1.0
    )
    values["number_in_named_cell"] = (
        float(any(_any_close([v[r]], c.numbers) for v in columns for r in focus))
        if c.numbers and focus
        else -1.0
    )
    # "the second highest": the named row's rank in a mentioned column, from either end.
    ordinals = [ORDINALS[w] for w in c.words if w in ORDINALS]
    ranks = []
    for v in columns:
        finite = np.isfinite(v)
        for r in focus:
            if finite[r]:
                ranks += [int((v[finite] > v[r]).sum()) + 1, int((v[finite] < v[r]).sum()) + 1]
    values["ordinal_rank_matches"] = (
        float(bool(set(ordinals) & set(ranks))) if ordinals and ranks else -1.0
    )
    column_numbers = {n for v in columns for n in v[np.isfinite(v)]}
    values["number_in_named_column"] = (
        sum(n in column_numbers for n in c.numbers) / len(c.numbers) if c.numbers else -1.0
    )
    return np.array([values[name] for name in FEATURE_NAMES], dtype=np.float32)
