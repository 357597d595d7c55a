"""``feverous-es score``: predictions against a gold claim file, with the official metric."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from feverous_es.console import print_json, user_errors
from feverous_es.params import FILE, json_option


@click.command("score")
@click.argument("predictions", type=FILE)
@click.option(
    "--gold", "-g", required=True, type=FILE,
    help="Gold claim file (official FEVEROUS jsonl; a dummy first line is skipped).",
)  # fmt: skip
@click.option(
    "--count-missing", is_flag=True,
    help="Score gold claims with no prediction as wrong (default: leave them out, say how many).",
)  # fmt: skip
@json_option("the report")
@user_errors()
def score_command(predictions: Path, gold: Path, count_missing: bool, as_json: bool) -> None:
    """Score PREDICTIONS (submission jsonl, as `predict` writes it) against --gold with the
    official FEVEROUS metric: FEVEROUS score, label accuracy, evidence precision / recall / F1,
    per challenge, a label confusion matrix, and table Hits@1/5/10 for gold files with
    `gold_tables`. Predictions are matched to gold claims by id."""
    from feverous_es.eval.report import print_score_report
    from feverous_es.eval.scoring import score_files

    report = score_files(predictions, gold, count_missing=count_missing)
    if as_json:
        print_json(report.to_dict())
    else:
        print_score_report(Console(), report)
