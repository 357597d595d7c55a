"""``python -m gpu_queue …``: the GPU queue's bundle, and each job's results taken in."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

import click

from feverous_es.console import console, print_json, user_errors
from feverous_es.params import EXISTING_FOLDER, dataclass_options, from_params
from feverous_es.training.options import export_options, training_run, work_dir
from gpu_queue.command import QueueOptions


@click.group("gpu_queue")
def gpu_group() -> None:
    """Prepare the GPU queue's bundle, and take in what a lend returned (docs/gpu-training.md).

    Needs the `export` extra (torch, transformers, optimum)."""


@gpu_group.command("bundle")
@dataclass_options(QueueOptions)
@click.option(
    "--data", "data_dir", default=Path("../shared/data"), type=EXISTING_FOLDER, show_default=True,
    help="The data folder (minifeverous/ claim files, nli/ pairs).",
)  # fmt: skip
def bundle_command(data_dir: Path, **params: Any) -> None:
    """Write the GPU queue: every job's pairs, the bases once, the runner and the plan.

    The jobs, in order: ranker (a cross-encoder teacher and students of 6 and 3 layers),
    reader (the verdict's reader, second version), rates (the shipped embedder and ranker
    through ONNX Runtime's CUDA provider: a rates file for `plan --rates`). Prints the plan:
    the calls of a lend in order, what each carries and runs, the expected seconds.
    """
    from gpu_queue.command import write_queue
    from gpu_queue.jobs import claim_files

    files = claim_files(data_dir)
    data = {"claims": [files["fm2"], files["feverous_s"], files["tabfact"]],
            "train_claims": [files["tabfact_train"]],
            "pairs": [files["text_pairs"], files["table_pairs"]]}  # fmt: skip
    options = from_params(QueueOptions, {**params, **data}, set())
    with training_run(options.work) as progress:
        plan = write_queue(options, progress)
    print_json(plan)
    if not plan["fits_lend"]:
        console.print(
            f"[yellow]the plan takes {plan['seconds']} s, over a lend's {plan['lend_seconds']} s: "
            "the last jobs wait for the next lend[/yellow]"
        )


@gpu_group.command("intake")
@click.argument("results", type=EXISTING_FOLDER)
@click.option(
    "--student", default="student",
    help="Which of the job's students (the ranker's: student, student-3).",
)  # fmt: skip
@export_options
@click.option(
    "--tokenizer-from", default="minilm",
    help="The student's base, whose tokenizer it reads (as --base takes it).",
)  # fmt: skip
def intake_command(
    results: Path, student: str, out: Path, work: Path | None, tokenizer_from: str
) -> None:
    """Take one student of a job's RESULTS folder (OUT/<job>/ of the lend's calls) as a model:
    weights checked, int8 export with parity, a card naming the GPU; then
    `feverous-es train install OUT --as ROLE`."""
    from feverous_es.training.bases import resolve_base
    from gpu_queue.intake import intake

    with user_errors(), console.status(f"reading back and exporting {results}"):
        report = intake(
            results, out, work_dir(out, work), resolve_base(tokenizer_from), student=student,
            command=shlex.join(["feverous-es", *sys.argv[1:]]),
        )  # fmt: skip
    training = report["training"]
    print_json({"out": str(out), "role": training["role"], "device": training["device"],
                "held": training["held"], "export": report["export"]})  # fmt: skip


if __name__ == "__main__":
    gpu_group()
