"""The evidence as one text, as every model that reads evidence gets it: the entailment verdict's
premise (:func:`feverous_es.verdict.inputs.premise`) and the seq2seq hop's input. Here, below
both stages, so that the hop stage reads the verdict's form without importing the verdict."""

from __future__ import annotations

from collections.abc import Sequence

from feverous_es.index.dump.linearize import readable_row_parts
from feverous_es.index.elements import ElementType
from feverous_es.plugins.interfaces import Candidate

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


def seq2seq_input(claim: str, evidence: Sequence[Candidate]) -> str:
    """What the seq2seq hop reads (Malon 2021, §4): ``missing: <pages> [HYP] <claim>
    <evidence text>``."""
    pages = " ".join(dict.fromkeys(c.element.page for c in evidence))
    return f"missing: {pages} [HYP] {claim} {evidence_text(evidence)}".strip()
