"""The click parameter types and options several commands share, named once: a path is always
a :class:`pathlib.Path`, a folder or file the command reads must exist, a count starts at 1."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])  # a command, as an option decorator takes and gives it

PATH = click.Path(path_type=Path)
FOLDER = click.Path(path_type=Path, file_okay=False)
FILE = click.Path(path_type=Path, dir_okay=False)
EXISTING = click.Path(path_type=Path, exists=True)
EXISTING_FOLDER = click.Path(path_type=Path, exists=True, file_okay=False)
EXISTING_FILE = click.Path(path_type=Path, exists=True, dir_okay=False)
COUNT = click.IntRange(min=1)
# Tokens a model reads per text or pair: 8 leaves room for the special tokens, 512 is the
# position limit of every encoder the project ships or trains.
TOKENS = click.IntRange(min=8, max=512)
DEVICE = click.Choice(["auto", "cpu", "cuda"])
DEVICE_OPTION = click.option(
    "--device", type=DEVICE, default="auto",
    help="Where the models run: cuda needs onnxruntime-gpu and a GPU; auto takes one when both "
    "are there.",
)  # fmt: skip


def max_length_option(default: int, help: str) -> Callable[[F], F]:
    """``--max-length``: the tokens a model reads per text or pair."""
    return click.option("--max-length", type=TOKENS, default=default, help=help)


def json_option(what: str) -> Callable[[F], F]:
    """``--json``: the result as one JSON document on stdout (``as_json``)."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print {what} as JSON.")
