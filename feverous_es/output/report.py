"""A claim's result for people (a rich table) and for programs (a JSON-ready dict)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from feverous_es.plugins.interfaces import Label, ReadTable
from feverous_es.text import marked_words
from feverous_es.verify.pipeline import ClaimResult

LABEL_STYLE = {Label.SUPPORTS: "green", Label.REFUTES: "red", Label.NOT_ENOUGH_INFO: "yellow"}


def result_to_dict(result: ClaimResult) -> dict[str, Any]:
    verdict = result.verdict
    return {
        "claim": result.claim,
        "label": verdict.label.value,
        "probability": verdict.probability,
        "probabilities": {label.value: p for label, p in verdict.probabilities.items()},
        "why": verdict.why,
        "evidence": [
            {
                "id": c.element.id,
                "type": c.element.type.value,
                "page": c.element.page,
                "text": c.element.text,
                "score": c.score,
                "hop": c.hop,
                "source": c.source,
            }
            for c in result.evidence
        ],
        "decided": {
            "evidence": list(verdict.read),
            "table": dataclasses.asdict(verdict.table) if verdict.table else None,
            "words": claim_words(result.claim),
        },
        "pages": [{"title": hit.page.title, "score": hit.score} for hit in result.pages],
        "hops": [
            {"hop": h.hop, "proposed": h.proposed, "added": h.added, "removed": h.removed}
            for h in result.hops
        ],
    }


def claim_words(claim: str) -> list[str]:
    """The claim's words that evidence is highlighted by (sorted)."""
    return sorted(marked_words(claim))


def highlighted(text: str, words: list[str]) -> Text:
    """``text`` with the claim's words in bold (whole words, any case)."""
    out = Text(text)
    if words:
        pattern = r"\b(" + "|".join(map(re.escape, words)) + r")\b"
        out.highlight_regex(re.compile(pattern, re.IGNORECASE), "bold underline")
    return out


def print_result(console: Console, result: ClaimResult, *, explain: bool = False) -> None:
    """The verdict and the evidence that decided it (what the verdict read); with
    ``explain`` also the whole evidence budget, the pages retrieved and each hop."""
    verdict = result.verdict
    style = LABEL_STYLE[verdict.label]
    console.print(f"[bold]claim:[/bold] {result.claim}", highlight=False)
    label = f"[bold {style}]{verdict.label.value}[/bold {style}]"
    console.print(f"{label}  (probability {verdict.probability:.2f})")
    if verdict.why:
        console.print(f"why: {verdict.why}", highlight=False, markup=False)
    words = claim_words(result.claim)
    by_id = {c.element.id: c for c in result.evidence}
    read = [by_id[i] for i in verdict.read if i in by_id]
    if verdict.table is None and read:
        console.print("[bold]evidence the verdict read:[/bold]")
    for candidate in read if verdict.table is None else []:
        element = candidate.element
        line = Text(f"  [{element.page}] ", style="cyan")
        line.append_text(highlighted(element.text, words))
        line.append(f"  ({element.local_id}, hop {candidate.hop})", style="dim")
        console.print(line)
    if verdict.table is not None:
        console.print(_read_table(verdict.table, words))
    if not read and verdict.table is None:
        console.print("the verdict read no evidence (none was found)")
    if not explain:
        return
    table = Table("#", "id", "type", "page", "text", "hop", title="evidence")
    for rank, candidate in enumerate(result.evidence, start=1):
        element = candidate.element
        table.add_row(
            str(rank), element.local_id, element.type.value, element.page, element.text,
            str(candidate.hop),
        )  # fmt: skip
    console.print(table)
    console.print("[bold]pages retrieved:[/bold] " + ", ".join(
        f"{hit.page.title} ({hit.score:.2f})" for hit in result.pages
    ) or "none")  # fmt: skip
    if not result.hops:
        console.print("no next hop proposed anything")
    for hop in result.hops:
        console.print(
            f"[bold]hop {hop.hop}:[/bold] proposed {len(hop.proposed)}, "
            f"kept {', '.join(hop.added) or 'none'}; pushed out {', '.join(hop.removed) or 'none'}",
            highlight=False,
        )


def _read_table(read: ReadTable, words: list[str]) -> Table:
    """The rows of a table the verdict read, cells holding claim words highlighted."""
    title = f"{read.page}, table {read.table}" + (f": {read.caption}" if read.caption else "")
    width = max([len(read.header), *map(len, read.rows)])
    header = list(read.header) + [""] * (width - len(read.header))
    table = Table("row", *header, title=title)
    matched = set(read.matched)
    for i, (number, row) in enumerate(zip(read.row_numbers, read.rows, strict=True)):
        cells = [
            highlighted(cell, words) if (i, c) in matched else Text(cell)
            for c, cell in enumerate(row)
        ]
        table.add_row(str(number + 1), *cells)
    return table
