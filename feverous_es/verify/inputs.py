"""The texts the models read, shared by inference and training so the two cannot drift.

* premise (:func:`premise`): the evidence in evidence order, optionally after math hints
  (Malon 2021, §5);
* seq2seq input (Malon 2021, §4): ``missing: <pages> [HYP] <claim> <premise>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from feverous_es.index.elements import ElementType
from feverous_es.index.linearize import readable_row_parts
from feverous_es.plugins.interfaces import Candidate
from feverous_es.verify.math_hints import math_hints

_ROW_TYPES = (ElementType.CELL, ElementType.HEADER_CELL)


def evidence_text(evidence: Sequence[Candidate]) -> str:
    """The evidence as one text: sentences, list items and captions as their Papelo
    linearization (``[Title] …``); table cells as their rows in plain text, each row once
    however many of its cells were selected, grouped by table under one ``Title, caption.``
    head (``Title, caption. header: value; value | header: value; value``).

    Each cell's linearization is its whole row: joining them as they are repeats a row once per
    selected cell, and 25 cells of one table filled a 256-token input with two or three rows.
    """
    parts: list[str | list[str]] = []  # texts, and each table's list of rows where it began
    tables: dict[str, list[str]] = {}  # table head -> [head, its rows…]
    for candidate in evidence:
        element = candidate.element
        row = readable_row_parts(element.linearized) if element.type in _ROW_TYPES else None
        if row is None:
            parts.append(element.linearized)
            continue
        head, body = row
        if head not in tables:
            tables[head] = [head]
            parts.append(tables[head])
        if body not in tables[head][1:]:
            tables[head].append(body)
    return " ".join(
        part if isinstance(part, str) else f"{part[0]}. {' | '.join(part[1:])}" for part in parts
    )


def premise(claim: str, evidence: Sequence[Candidate], *, hints: bool = False) -> str:
    text = evidence_text(evidence)
    prefix = math_hints(claim, text) if hints else ""
    return f"{prefix} {text}" if prefix else text


def seq2seq_input(
    claim: str, evidence: Sequence[Candidate], *, prefix: str = "missing:", hints: bool = False
) -> str:
    pages = " ".join(dict.fromkeys(c.element.page for c in evidence))
    return f"{prefix} {pages} [HYP] {claim} {premise(claim, evidence, hints=hints)}".strip()
