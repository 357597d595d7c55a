"""Whole claim files through the pipeline, written as official FEVEROUS submission lines.

Resumable: the output is appended one flushed batch at a time, and a rerun skips the claims
whose ids are already in it (a line cut short by a kill is dropped and redone).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import orjson

from feverous_es.errors import FormatError
from feverous_es.eval.claims import (
    ClaimRecord,
    MalformedLine,
    dumps_submission_line,
    read_claims,
    submission_line,
)
from feverous_es.verify.pipeline import ClaimResult, Pipeline


@dataclass
class PredictReport:
    claims: int = 0
    predicted: int = 0
    already_done: int = 0
    malformed: list[MalformedLine] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)


def done_ids(out: Path) -> set[str]:
    """Ids already predicted in ``out``; a trailing partial line (a kill mid-write) is cut off
    the file. A file that is not predictions — a line that is no submission line, or a last
    line that is no start of one — is left untouched: FormatError."""
    if not out.exists():
        return set()
    data = out.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    ids = set()
    for number, line in enumerate(complete.splitlines(), start=1):
        try:
            record = orjson.loads(line)
            ids.add(str(record["id"]))
            submission = "predicted_label" in record
        except (orjson.JSONDecodeError, KeyError, TypeError):
            submission = False
        if not submission:
            raise _not_predictions(out, f"line {number} is not a submission line")
    partial = data[len(complete) :]
    if partial:
        if not partial.startswith(b"{"):
            raise _not_predictions(out, "its last line is not the start of a submission line")
        with out.open("r+b") as f:
            f.truncate(len(complete))
    return ids


def _not_predictions(out: Path, why: str) -> FormatError:
    return FormatError(
        f"{out} is not a predictions file to resume ({why}): give --out a new file or one "
        "`predict` wrote"
    )


def _batches(records: Iterable[ClaimRecord], size: int) -> Iterator[list[ClaimRecord]]:
    iterator = iter(records)
    while batch := list(islice(iterator, size)):
        yield batch


def to_submission(record: ClaimRecord, result: ClaimResult) -> dict:
    return submission_line(
        record.id,
        record.claim,
        result.verdict.label.value,
        [candidate.element.id for candidate in result.evidence],
    )


def predict_file(
    pipeline: Pipeline,
    claims: Path,
    out: Path,
    *,
    batch_size: int = 16,
    on_start: Callable[[int], None] | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> PredictReport:
    """Predict every claim of ``claims`` not yet in ``out``. ``on_start(total to do)`` then
    ``on_batch(claims done)`` report progress."""
    report = PredictReport()
    todo: list[ClaimRecord] = []
    finished = done_ids(out)
    for item in read_claims(claims):
        if isinstance(item, MalformedLine):
            report.malformed.append(item)
            continue
        report.claims += 1
        if item.key in finished:
            report.already_done += 1
        else:
            todo.append(item)
    if on_start:
        on_start(len(todo))
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("ab") as sink:
        batches = list(_batches(todo, batch_size))
        verified = pipeline.verify_batches([record.claim for record in b] for b in batches)
        for batch, results in zip(batches, verified, strict=True):
            lines = []
            for record, result in zip(batch, results, strict=True):
                lines.append(dumps_submission_line(to_submission(record, result)))
                label = result.verdict.label.value
                report.labels[label] = report.labels.get(label, 0) + 1
            sink.write(b"".join(lines))
            sink.flush()
            os.fsync(sink.fileno())
            report.predicted += len(batch)
            if on_batch:
                on_batch(len(batch))
    return report
