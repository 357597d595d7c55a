"""The training commands' shared parts: their options built from a trainer's run options, the
error and interrupt lines, and the command line a model card records."""

from __future__ import annotations

import contextlib
import functools
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from feverous_es.console import progress_bars, user_errors
from feverous_es.params import FOLDER, F, dataclass_options, from_params
from feverous_es.training.progress import Progress


def training_options(cls: type) -> Callable[[F], F]:
    """The command's options are ``cls``'s fields (a trainer's run options, each field an
    :func:`~feverous_es.params.option`), and it gets ``options``: ``cls`` built from them, its
    ``work`` directory resolved and its ``command`` the command line as given; the command's
    own other parameters are passed on by name. Put it right above the function, under the
    command's own options."""
    declare = dataclass_options(cls)

    def apply(command: F) -> F:
        @functools.wraps(command)
        def grouped(**params: Any) -> Any:
            params["work"] = work_dir(params["out"], params.get("work"))
            params["command"] = command_line(click.get_current_context())
            used: set[str] = {"command", "work"}
            options = from_params(cls, params, used)
            rest = {key: value for key, value in params.items() if key not in used}
            return command(options=options, **rest)

        return declare(grouped)  # type: ignore[return-value]

    return apply


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
