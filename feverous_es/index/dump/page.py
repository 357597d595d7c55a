"""One FEVEROUS page JSON -> its typed elements, with FEVEROUS context and Papelo text.

Page JSON: ``title``, ``order`` (element keys in document order) and per key ``sentence_i``
(string), ``section_i`` ({value, level}), ``list_i`` ({type, list: [{id, value, level, ...}]}),
``table_i`` ({type, table: [[{id, value, is_header, row_span, column_span}, ...], ...],
caption?}). Spans may be strings or ints.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

import orjson

from feverous_es.errors import MalformedPage
from feverous_es.index.dump import linearize
from feverous_es.index.elements import Element, ElementType, PageRecord

INTRO_MAX_CHARS = 1000


@dataclass(frozen=True, slots=True)
class ParsedPage:
    title: str
    elements: list[Element]
    record: PageRecord


@dataclass(frozen=True, slots=True)
class _Section:
    key: str
    text: str
    level: int


def _section_context(sections: list[_Section]) -> list[_Section]:
    """FEVEROUS's section context of an element, given the sections before it in page order:
    walking back, the nearest section, then each shallower one, stopping at a deeper one."""
    context: list[_Section] = []
    for section in reversed(sections):
        if not context or context[-1].level > section.level:
            context.append(section)
        elif context[-1].level < section.level:
            break
    return context


def _span(value: Any) -> int:
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return 1


class _PageParser:
    def __init__(self, page_id: str, data: dict[str, Any]) -> None:
        self.page = unicodedata.normalize("NFD", page_id)
        self.data = data
        self.title_id = f"{self.page}_title"
        self.elements: list[Element] = []
        self.sections: list[_Section] = []

    def parse(self) -> ParsedPage:
        order = self.data.get("order")
        if not isinstance(order, list):
            raise MalformedPage("no 'order' list")
        previous_text = ""  # the element before a list is its context
        intro: list[str] = []
        for key in order:
            value = self.data.get(key)
            if value is None:
                raise MalformedPage(f"'order' names {key!r}, which the page lacks")
            kind = key.rsplit("_", 1)[0]
            if kind == "section":
                text, _ = linearize.strip_links(str(value["value"]))
                self.sections.append(_Section(key, text, int(value.get("level", 1))))
                previous_text = text
                continue
            if kind == "sentence":
                previous_text = self._sentence(key, value)
            elif kind == "list":
                previous_text = self._list(key, value, previous_text)
            elif kind == "table":
                previous_text = self._table(key, value)
            else:
                continue  # unknown element kinds are not evidence
            if not self.sections and len(" ".join(intro)) < INTRO_MAX_CHARS:
                intro.append(previous_text)
        links = tuple(dict.fromkeys(link for element in self.elements for link in element.links))
        intro_text = " ".join(t for t in intro if t)[:INTRO_MAX_CHARS]
        return ParsedPage(self.page, self.elements, PageRecord(self.page, intro_text, links))

    def _context(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(context ids, section path outermost first) of an element at the current position."""
        sections = _section_context(self.sections)
        ids = (self.title_id, *(f"{self.page}_{s.key}" for s in sections))
        return ids, tuple(s.text for s in reversed(sections))

    def _embedded_alone(
        self, element_id: str, kind: ElementType, text: str, lin: str, links: Any, **place: Any
    ) -> None:
        """A sentence, list item or caption: embedded by its own linearization, at the current
        position (``place``: its list or table fields)."""
        context, path = self._context()
        self.elements.append(
            Element(
                id=element_id, page=self.page, type=kind, text=text, linearized=lin,
                vector_key=element_id, embed_text=lin, links=links, section_path=path,
                context=context, **place,
            )
        )  # fmt: skip

    def _sentence(self, key: str, raw: Any) -> str:
        if not isinstance(raw, str):
            raise MalformedPage(f"{key} is not a string")
        text, links = linearize.strip_links(raw)
        lin = linearize.sentence(self.page, text)
        self._embedded_alone(f"{self.page}_{key}", ElementType.SENTENCE, text, lin, links)
        return text

    def _list(self, key: str, raw: Any, list_context: str) -> str:
        items = raw.get("list") if isinstance(raw, dict) else None
        if not isinstance(items, list):
            raise MalformedPage(f"{key} has no 'list'")
        list_index = int(key.rsplit("_", 1)[1])
        texts = []
        for item in items:
            text, links = linearize.strip_links(str(item["value"]))
            lin = linearize.list_item(self.page, list_context, text)
            self._embedded_alone(
                f"{self.page}_{item['id']}", ElementType.ITEM, text, lin, links,
                list_index=list_index, level=int(item.get("level", 0)),
            )  # fmt: skip
            texts.append(text)
        return texts[-1] if texts else ""

    def _table(self, key: str, raw: Any) -> str:
        rows = raw.get("table") if isinstance(raw, dict) else None
        if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            raise MalformedPage(f"{key} has no 'table' rows")
        table = int(key.rsplit("_", 1)[1])
        context, path = self._context()
        caption, caption_links = linearize.strip_links(str(raw.get("caption") or ""))
        if "caption" in raw:
            self._embedded_alone(
                f"{self.page}_table_caption_{table}", ElementType.TABLE_CAPTION, caption,
                linearize.caption(self.page, caption), caption_links, table=table,
            )  # fmt: skip
        grid = _Grid(rows)
        header_texts: list[str] = []
        for r, cells in enumerate(rows):
            parsed = [linearize.strip_links(str(c["value"])) for c in cells]
            values = [text for text, _ in parsed]
            keys = [
                None if c["is_header"] else key for c, key in zip(cells, grid.keys[r], strict=True)
            ]
            pairs = linearize.row_pairs(values, keys)
            row_text = linearize.row(self.page, caption, pairs)
            vector_key = f"{self.page}_row_{table}_{r}"
            for c_idx, c in enumerate(cells):
                is_header = bool(c["is_header"])
                if is_header and r == 0:
                    header_texts.append(values[c_idx])
                self.elements.append(
                    Element(
                        id=f"{self.page}_{c['id']}", page=self.page,
                        type=ElementType.HEADER_CELL if is_header else ElementType.CELL,
                        text=values[c_idx],
                        linearized=linearize.cell(self.page, caption, pairs, c_idx),
                        vector_key=vector_key, embed_text=row_text, links=parsed[c_idx][1],
                        section_path=path,
                        context=context if is_header else context + tuple(
                            f"{self.page}_{h}" for h in grid.header_ids[r][c_idx]
                        ),
                        table=table, row=r, column=c_idx,
                    )
                )  # fmt: skip
        return caption or " ".join(header_texts)


class _Grid:
    """A table's cells placed on the grid their spans cover, and per cell its headers: the KEY
    of Papelo's linearization (the nearest header cell above it in its grid column) and the
    FEVEROUS header context (the run of header cells nearest to its left in its row, then the
    run nearest above it in its column). One pass top-down, so long tables stay linear."""

    def __init__(self, rows: list[list[dict[str, Any]]]) -> None:
        height = len(rows)
        grid: dict[tuple[int, int], dict[str, Any]] = {}
        origins: list[list[int]] = []
        for r, cells in enumerate(rows):
            col, row_origins = 0, []
            for entry in cells:
                while (r, col) in grid:
                    col += 1
                row_origins.append(col)
                width = _span(entry.get("column_span"))
                for dr in range(min(_span(entry.get("row_span")), height - r)):
                    for dc in range(width):
                        grid.setdefault((r + dr, col + dc), entry)
                col += width
            origins.append(row_origins)

        self.keys: list[list[str | None]] = []
        self.header_ids: list[list[tuple[str, ...]]] = []
        runs: dict[int, tuple[dict[str, Any], ...]] = {}  # column -> nearest header run above
        open_run: dict[int, bool] = {}  # column -> the row above was a header there
        width = 1 + max((col for _, col in grid), default=-1)
        for r, row_origins in enumerate(origins):
            keys, ids = [], []
            for col in row_origins:
                above = runs.get(col, ())
                keys.append(linearize.strip_links(str(above[0]["value"]))[0] if above else None)
                left: list[dict[str, Any]] = []
                for c in range(col - 1, -1, -1):
                    found = grid.get((r, c))
                    if found is not None and found["is_header"]:
                        if not left or left[-1] is not found:
                            left.append(found)
                    elif left:
                        break
                ids.append(tuple(dict.fromkeys(c["id"] for c in (*left, *above))))
            self.keys.append(keys)
            self.header_ids.append(ids)
            for col in range(width):
                cell = grid.get((r, col))
                if cell is not None and cell["is_header"]:
                    run = runs.get(col, ()) if open_run.get(col) else ()
                    runs[col] = run if run and run[0] is cell else (cell, *run)
                    open_run[col] = True
                else:
                    open_run[col] = False


def parse_page(page_id: str, data: str | bytes | dict[str, Any]) -> ParsedPage:
    """Parse one page; raises MalformedPage with the reason when its JSON is not FEVEROUS's."""
    if not isinstance(data, dict):
        try:
            data = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise MalformedPage(f"invalid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise MalformedPage("page JSON is not an object")
    try:
        return _PageParser(page_id, data).parse()
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        if isinstance(exc, MalformedPage):
            raise
        raise MalformedPage(f"unexpected layout ({type(exc).__name__}: {exc})") from exc
