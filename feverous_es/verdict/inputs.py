"""The texts the models read, shared by inference and training so the two cannot drift.

* premise (:func:`premise`): the evidence in evidence order, optionally after math hints
  (Malon 2021, §5);
* the entailment verdict's premises, one per route: :func:`sentence_premise` (the evidence's
  sentences and list items) and :func:`table_premise` (one table: title, caption, header and the
  rows that share most words with the claim);
* the evidence as one text, and the seq2seq hop's input (Malon 2021, §4), are
  :mod:`feverous_es.plugins.evidence_text`'s: the hop stage reads them below the verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from feverous_es.index.dump.linearize import untitled
from feverous_es.index.elements import ElementType
from feverous_es.plugins.evidence_text import evidence_text
from feverous_es.plugins.interfaces import Candidate, ReadTable
from feverous_es.text import marked_words, tokens
from feverous_es.verdict.math_hints import math_hints
from feverous_es.verdict.table_facts import Table

# The element types a sentence premise reads.
TEXT_TYPES = (ElementType.SENTENCE, ElementType.ITEM)
# Rows a table premise keeps: with the header, 8 rows of a TabFact table fill about 200 of the
# 256 tokens the entailment model reads.
TABLE_ROWS = 8


def premise(claim: str, evidence: Sequence[Candidate], *, hints: bool = False) -> str:
    text = evidence_text(evidence)
    prefix = math_hints(claim, text) if hints else ""
    return f"{prefix} {text}" if prefix else text


def sentence_premise(evidence: Sequence[Candidate], *, one_title: bool = True) -> str:
    """The evidence's sentences and list items in evidence order, as their linearizations
    (``[Title] …``): what the entailment verdict reads for a claim about sentences. With
    ``one_title``, the sentences of one page (all of the evidence's) are one passage under its
    title once (``[Title] s1 s2 …``), as the readers learned a page's lead: with the title before
    each, two of the three students read "The chemical symbol of strontium is Sr." against
    Strontium's own five sentences as REFUTES (docs/decisions.md, Verdict)."""
    texts = [c.element for c in evidence if c.element.type in TEXT_TYPES]
    if one_title and len({e.page for e in texts}) == 1:
        return " ".join([texts[0].linearized, *(untitled(e.page, e.linearized) for e in texts[1:])])
    return " ".join(e.linearized for e in texts)


def premise_rows(claim: str, table: Table, rows: int = TABLE_ROWS) -> list[int]:
    """The ``rows`` data rows of ``table`` that hold most of the claim's tokens, in the table's
    order: the rows a table premise reads (a whole TabFact table is 10-30 rows: far over the
    model's input)."""
    wanted = set(tokens(claim))
    overlap = [len(wanted & row) for row in table.row_tokens]
    return sorted(sorted(range(len(table.rows)), key=lambda i: (-overlap[i], i))[:rows])


def table_premise(claim: str, table: Table, *, rows: int = TABLE_ROWS) -> str:
    """One table as the entailment verdict reads it: ``Title, caption. h1 | h2. v1 | v2 ; …``
    with its :func:`premise_rows`."""
    head = table.title
    if table.caption and table.caption.casefold() != head.casefold():
        head = f"{head}, {table.caption}"
    parts = [head]
    if any(table.header):
        parts.append(" | ".join(table.header))
    body = " ; ".join(" | ".join(table.rows[i]) for i in premise_rows(claim, table, rows))
    return ". ".join(parts) + ". " + body


def read_evidence(
    claim: str, evidence: Sequence[Candidate], table: Table | None, number: int | None
) -> tuple[tuple[str, ...], ReadTable | None]:
    """What a verdict that reads :func:`table_premise` (table ``number`` of the evidence) or
    :func:`sentence_premise` (``table`` None) read: the evidence elements' ids and the table's
    premise rows with the cells that hold a claim word."""
    if table is None or number is None:
        return tuple(c.element.id for c in evidence if c.element.type in TEXT_TYPES), None
    ids = tuple(
        c.element.id for c in evidence
        if c.element.page == table.title and c.element.table == number
    )  # fmt: skip
    chosen = premise_rows(claim, table)
    words = marked_words(claim)
    matched = tuple(
        (i, c)
        for i, r in enumerate(chosen)
        for c, cell in enumerate(table.rows[r])
        if words & set(tokens(cell))
    )
    rows = tuple(table.rows[r] for r in chosen)
    read = ReadTable(table.title, number, table.caption, table.header, rows, tuple(chosen), matched)
    return ids, read
