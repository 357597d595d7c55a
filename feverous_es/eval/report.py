"""A :class:`~feverous_es.eval.scoring.ScoreReport` for people: rich tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from feverous_es.eval.claims import LABELS
from feverous_es.eval.scoring import Metrics, ScoreReport

_SHOWN_MALFORMED = 5


def _pct(value: float) -> str:
    return f"{100 * value:.2f}"


def _metrics_row(name: str, m: Metrics) -> list[str]:
    return [
        name,
        f"{m.claims:,}",
        _pct(m.feverous_score),
        _pct(m.label_accuracy),
        _pct(m.evidence_precision),
        _pct(m.evidence_recall),
        _pct(m.evidence_f1),
    ]


def print_score_report(console: Console, report: ScoreReport) -> None:
    """The official numbers, the per-challenge breakdown, the confusion matrix, table Hits@k
    (when the gold names tables), and what did not match."""
    columns = ("", "claims", "FEVEROUS", "label acc", "evid P", "evid R", "evid F1")
    table = Table(*columns, title="FEVEROUS score (official metric, %)", title_justify="left")
    for column in table.columns[1:]:
        column.justify = "right"
    table.add_row(*_metrics_row("all", report.overall), style="bold")
    if len(report.by_challenge) > 1 or "(none)" not in report.by_challenge:
        table.add_section()
        for name, metrics in report.by_challenge.items():
            table.add_row(*_metrics_row(name, metrics))
    console.print(table)

    others = {p for row in report.confusion.values() for p in row} - set(LABELS)
    predicted = [*LABELS, *sorted(others)] if report.confusion else []
    if predicted:
        matrix = Table(
            "gold \\ predicted", *predicted, title="Labels (claims)", title_justify="left"
        )
        for column in matrix.columns[1:]:
            column.justify = "right"
        for gold in sorted(report.confusion, key=lambda g: LABELS.index(g)):
            row = report.confusion[gold]
            matrix.add_row(gold, *(f"{row.get(p, 0):,}" for p in predicted))
        console.print(matrix)

    if report.tables is not None:
        hits = ", ".join(f"Hits@{k} {_pct(v)}" for k, v in report.tables.hits.items())
        console.print(f"Gold tables ({report.tables.claims:,} claims): {hits}")

    notes = [
        f"{report.gold_claims:,} gold claims, {report.predictions:,} predictions",
        f"{report.missing:,} gold claims without a prediction "
        + ("(scored as wrong, no evidence)" if report.count_missing else "(not scored)"),
        f"{report.extra:,} predictions for claims not in the gold file (ignored)",
    ]
    if report.duplicate_predictions:
        notes.append(f"{report.duplicate_predictions:,} repeated predictions (the first counts)")
    if report.claims_without_evidence:
        notes.append(
            f"{report.claims_without_evidence:,} scored claims have no gold evidence set "
            "(FEVEROUS score 0 for them by definition; see label accuracy and Hits@k)"
        )
    for note in notes:
        console.print(note, highlight=False)
    for what, bad in (
        ("gold", report.malformed_gold),
        ("prediction", report.malformed_predictions),
    ):
        for line in bad[:_SHOWN_MALFORMED]:
            console.print(
                f"[yellow]skipped {what} line {line.line_no}:[/yellow] {line.reason}",
                highlight=False,
            )
        if len(bad) > _SHOWN_MALFORMED:
            console.print(f"… and {len(bad) - _SHOWN_MALFORMED} more malformed {what} lines")
