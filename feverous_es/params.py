"""The click parameter types and options several commands share, named once: a path is always
a :class:`pathlib.Path`, a folder or file the command reads must exist, a count starts at 1.
And options declared as dataclass fields (:func:`option`): the field is the option, so a
command's options and the object it builds from them are listed once."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator
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


def out_option(help: str, *, type: click.ParamType = PATH, **settings: Any) -> Callable[[F], F]:
    """``--out`` / ``-o``: where a command writes (``required=True`` or a ``default``)."""
    return click.option("--out", "-o", type=type, help=help, **settings)


def batch_size_option(default: int | None, help: str) -> Callable[[F], F]:
    """``--batch-size``: how many texts, pairs or claims one model call takes."""
    return click.option("--batch-size", type=COUNT, default=default, help=help)


def json_option(what: str) -> Callable[[F], F]:
    """``--json``: the result as one JSON document on stdout (``as_json``)."""
    return click.option("--json", "as_json", is_flag=True, help=f"Print {what} as JSON.")


# The field metadata key under which a dataclass field keeps its click option.
_OPTION = "click_option"


def option(
    default: Any = dataclasses.MISSING, *, flags: tuple[str, ...] = (), help: str, **settings: Any
) -> Any:
    """A dataclass field that is also a command's click option (see :func:`dataclass_options`):
    its ``flags`` (default ``--field-name``, and ``--field-name/--no-field-name`` for a bool),
    ``help`` and click's other ``settings``. The field's ``default`` is the option's (``list``:
    an empty list, the default of ``multiple`` values); a field without one is a required
    option."""
    metadata = {_OPTION: (flags, {"help": help, **settings})}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata)
    if default is list:
        return dataclasses.field(default_factory=list, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def option_like(parent: type, name: str, default: Any = dataclasses.MISSING, **changes: Any) -> Any:
    """``parent``'s field ``name`` (an :func:`option`) again in a subclass, with another
    ``default`` and the option's ``changes`` (a trainer's own help, say)."""
    inherited = {field.name: field for field in dataclasses.fields(parent)}[name]
    flags, settings = inherited.metadata[_OPTION]
    if default is dataclasses.MISSING:
        factory = inherited.default_factory
        default = inherited.default if factory is dataclasses.MISSING else factory
    return option(default, flags=flags, **{**settings, **changes})


def _option_fields(cls: type) -> Iterator[tuple[dataclasses.Field, Any]]:
    """``cls``'s fields that carry an option and their types, in field order, a nested
    dataclass's fields at its place."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind):
            yield from _option_fields(kind)  # type: ignore[arg-type]
        elif _OPTION in field.metadata:
            yield field, kind


def dataclass_options(cls: type) -> Callable[[F], F]:
    """The click options of ``cls``'s fields (:func:`option`), in field order: each named as
    its field, so that the command's parameters build ``cls`` by name (:func:`from_params`); a
    name that comes again (one option filling two fields) is declared once."""
    declared: list[Callable[[F], F]] = []
    seen: set[str] = set()
    for field, kind in _option_fields(cls):
        if field.name in seen:
            continue
        seen.add(field.name)
        flags, settings = field.metadata[_OPTION]
        settings = dict(settings)
        flag = "--" + field.name.replace("_", "-")
        flags = flags or ((f"{flag}/--no-{flag[2:]}",) if kind is bool else (flag,))
        # None is click's own default; given, click 8.5 takes it as a required option's value.
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            settings.setdefault("required", True)
        elif field.default is not None and field.default is not dataclasses.MISSING:
            settings.setdefault("default", field.default)
            settings.setdefault("show_default", True)
        declared.append(click.option(*flags, field.name, **settings))

    def apply(command: F) -> F:
        for declare in reversed(declared):
            command = declare(command)
        return command

    return apply


def from_params(cls: type, params: dict[str, Any], used: set[str]) -> Any:
    """``cls`` from click ``params`` named as its fields (a nested dataclass field built the same
    way; multiple values as a list where the field is one); the names taken are added to
    ``used``."""
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        kind = hints[field.name]
        if dataclasses.is_dataclass(kind):
            values[field.name] = from_params(kind, params, used)  # type: ignore[arg-type]
        elif field.name in params:
            value = params[field.name]  # click gives multiple values as a tuple
            is_list = isinstance(value, tuple) and typing.get_origin(kind) is list
            values[field.name] = list(value) if is_list else value
            used.add(field.name)
    return cls(**values)
