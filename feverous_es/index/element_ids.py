"""The FEVEROUS element-id grammar: ``Page_cell_1_19_0`` ↔ the official evidence triple
``("Page", "cell", "1_19_0")``."""

from __future__ import annotations

import re
import unicodedata

from feverous_es.errors import FormatError

Triple = tuple[str, str, str]
"""An official evidence triple ``(page, type, position)``: ``("Korean Air", "cell", "1_19_0")``."""

# The type marker and the position's arity anchor the split at the id's end, so a page that
# itself contains ``_cell_`` or underscores still parses (the regex backtracks to the last marker
# whose tail is a well-formed position). ``header_cell`` / ``table_caption`` are tried before
# ``cell`` / ``table``.
_ELEMENT_ID = re.compile(
    r"(?P<page>.+?)_(?:"
    r"(?P<t3>header_cell|cell)_(?P<p3>\d+_\d+_\d+)"
    r"|(?P<t2>item)_(?P<p2>\d+_\d+)"
    r"|(?P<t1>sentence|table_caption|section|table|list)_(?P<p1>\d+)"
    r"|(?P<t0>title)"
    r")",
    re.DOTALL,
)
_POSITION = {
    "header_cell": re.compile(r"\d+_\d+_\d+"),
    "cell": re.compile(r"\d+_\d+_\d+"),
    "item": re.compile(r"\d+_\d+"),
    "sentence": re.compile(r"\d+"),
    "table_caption": re.compile(r"\d+"),
    "section": re.compile(r"\d+"),
    "table": re.compile(r"\d+"),
    "list": re.compile(r"\d+"),
    "title": re.compile(r""),
}


def element_to_triple(element_id: str) -> Triple:
    """``"Korean Air_cell_1_19_0"`` → ``("Korean Air", "cell", "1_19_0")``.

    Types: ``sentence_i``, ``cell_t_r_c``, ``header_cell_t_r_c``, ``table_caption_t``,
    ``item_l_k``, ``section_i``, ``table_t``, ``list_l`` and ``title`` (position ``""``).
    Raises ``FormatError`` (a ``ValueError``) for an id that is none of these.
    """
    match = _ELEMENT_ID.fullmatch(element_id) if isinstance(element_id, str) else None
    if match is None:
        raise FormatError(f"not a FEVEROUS element id: {element_id!r}")
    for n in "3210":
        kind = match.group(f"t{n}")
        if kind:
            return match["page"], kind, match.group(f"p{n}") if n != "0" else ""
    raise AssertionError("unreachable")  # pragma: no cover


def triple_to_element(page: str, kind: str, position: str) -> str:
    """``("Korean Air", "cell", "1_19_0")`` → ``"Korean Air_cell_1_19_0"`` (inverse of
    :func:`element_to_triple`). Raises ``FormatError`` for an unknown type or a position that does
    not fit it."""
    pattern = _POSITION.get(kind)
    if not page or pattern is None or not pattern.fullmatch(position):
        raise FormatError(f"not a FEVEROUS evidence triple: {[page, kind, position]!r}")
    return f"{page}_{kind}_{position}" if position else f"{page}_{kind}"


def table_key(table_id: str) -> tuple[str, int] | None:
    """``"Page_table_3"`` → ``("Page", 3)``, the page NFD as the index spells it; None for an id
    that names no table."""
    try:
        page, kind, position = element_to_triple(unicodedata.normalize("NFD", table_id))
    except FormatError:
        return None
    return (page, int(position)) if kind == "table" else None
