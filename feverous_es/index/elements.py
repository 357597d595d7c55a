"""The page elements the index holds: one record per sentence, list item, table cell and caption.

Element ids are the FEVEROUS dataset's, exactly: ``Page_sentence_i``, ``Page_cell_t_r_c``,
``Page_header_cell_t_r_c``, ``Page_table_caption_t``, ``Page_item_l_k`` (``Page`` the NFD title).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from feverous_es.accents import fold_accents

_DISAMBIGUATION = re.compile(r"\s*\([^()]*\)$")


class ElementType(StrEnum):
    SENTENCE = "sentence"
    CELL = "cell"
    HEADER_CELL = "header_cell"
    TABLE_CAPTION = "table_caption"
    ITEM = "item"

    @property
    def in_cell_budget(self) -> bool:
        """FEVEROUS scores these against the 25-element budget, sentences against the 5."""
        return self is not ElementType.SENTENCE


# The types by their stored names: a dict lookup, where thousands of hits a claim would each pay
# for an Enum call.
TYPES_BY_NAME = {element_type.value: element_type for element_type in ElementType}

# Table cells (ranked by the cell ranker, one vector per row) and the text elements (sentences,
# list items, captions: the other ranker). Not the evidence budget's split: see in_cell_budget.
TABLE_CELL_TYPES = (ElementType.CELL, ElementType.HEADER_CELL)
TEXT_TYPES = (ElementType.SENTENCE, ElementType.ITEM, ElementType.TABLE_CAPTION)
# Everything a table is made of.
TABLE_TYPES = (*TABLE_CELL_TYPES, ElementType.TABLE_CAPTION)


@dataclass(frozen=True, slots=True)
class Element:
    """One indexed page element.

    ``vector_key`` names the embedding the element uses: the cells of one table row share one
    vector (their linearizations differ only in the ``{{ }}`` marker), so they share a key.
    ``embed_text`` is the text that vector is computed from.
    """

    id: str
    page: str
    type: ElementType
    text: str
    linearized: str
    vector_key: str
    embed_text: str
    links: tuple[str, ...] = ()
    section_path: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    table: int | None = None
    row: int | None = None
    column: int | None = None
    list_index: int | None = None
    level: int | None = None

    @property
    def local_id(self) -> str:
        """The id without its page prefix (``cell_0_1_2``), as FEVEROUS predictions use it."""
        return self.id[len(self.page) + 1 :]


@dataclass(frozen=True, slots=True)
class PageRecord:
    """A page-level record for page retrieval: title and intro text, embedded together."""

    title: str
    intro: str
    links: tuple[str, ...] = field(default=())

    @property
    def embed_text(self) -> str:
        return f"{self.title}. {self.intro}" if self.intro else self.title


def title_keys(title: str) -> tuple[str, ...]:
    """The keys a claim span matches ``title`` by: accents folded, case-folded, with and without
    a trailing disambiguation (``"Mercury (planet)"`` is found by ``"mercury"`` too)."""
    key = fold_accents(title).casefold().replace("_", " ").strip()
    bare = _DISAMBIGUATION.sub("", key)
    return (key, bare) if bare and bare != key else (key,)
