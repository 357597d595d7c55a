"""A claim's result for people (a rich table) and for programs (a JSON-ready dict)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from feverous_es.plugins.interfaces import Label
from feverous_es.verify.pipeline import ClaimResult

_STYLE = {Label.SUPPORTS: "green", Label.REFUTES: "red", Label.NOT_ENOUGH_INFO: "yellow"}


def result_to_dict(result: ClaimResult) -> dict[str, Any]:
    verdict = result.verdict
    return {
        "claim": result.claim,
        "label": verdict.label.value,
        "probability": verdict.probability,
        "probabilities": {label.value: p for label, p in verdict.probabilities.items()},
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
        "pages": [{"title": hit.page.title, "score": hit.score} for hit in result.pages],
        "hops": [
            {"hop": h.hop, "proposed": h.proposed, "added": h.added, "removed": h.removed}
            for h in result.hops
        ],
    }


def print_result(console: Console, result: ClaimResult, *, explain: bool = False) -> None:
    verdict = result.verdict
    style = _STYLE[verdict.label]
    console.print(f"[bold]claim:[/bold] {result.claim}", highlight=False)
    label = f"[bold {style}]{verdict.label.value}[/bold {style}]"
    console.print(f"{label}  (confidence {verdict.probability:.2f})")
    table = Table("#", "id", "type", "page", "text", "hop", title="evidence")
    for rank, candidate in enumerate(result.evidence, start=1):
        element = candidate.element
        table.add_row(
            str(rank), element.local_id, element.type.value, element.page, element.text,
            str(candidate.hop),
        )  # fmt: skip
    console.print(table)
    if not explain:
        return
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
