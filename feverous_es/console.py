"""What every command prints besides its result: error lines, JSON and progress bars, one way.

Results go to stdout (a table, or JSON with ``--json``); errors, progress and notes to stderr,
so that ``feverous-es ... --json | jq`` sees only the JSON.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, Protocol

import orjson
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from feverous_es.errors import FeverousError

console = Console(stderr=True)

INTERRUPTED = "interrupted; what was written is kept: run the same command to resume"


def fail(message: str, code: int = 1) -> NoReturn:
    """End the command with one ``error:`` line on stderr and exit status ``code``. The message
    is plain text: square brackets in it (``pip install 'feverous-es[serve]'``) are printed,
    never read as markup."""
    console.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    sys.exit(code)


@contextmanager
def user_errors(interrupted: str = INTERRUPTED) -> Iterator[None]:
    """A :class:`FeverousError` inside ends the command with its one line and exit status 1,
    Ctrl-C with ``interrupted`` and 130; other exceptions are bugs and keep their traceback.
    Also a decorator: ``@user_errors()``."""
    try:
        yield
    except FeverousError as error:
        fail(str(error))
    except KeyboardInterrupt:
        fail(interrupted, 130)


def print_json(value: Any) -> None:
    """``value`` as indented JSON on stdout (dataclasses and numpy values included)."""
    option = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY
    sys.stdout.write(orjson.dumps(value, option=option).decode() + "\n")


class ProgressUpdate(Protocol):
    def __call__(
        self, name: str, done: int, total: int | None = None, detail: str = ""
    ) -> None: ...


@contextmanager
def progress_bars(*, disable: bool = False) -> Iterator[ProgressUpdate]:
    """A live display of named bars on stderr; yields ``update(name, done, total, detail)``,
    which adds the bar ``name`` on first use (``total`` None: not known yet). ``disable``
    (e.g. with ``--json``) keeps stderr quiet."""
    columns = (
        TextColumn("[bold]{task.description}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    # Started on the first bar: a command that fails before any (a missing extra) prints its
    # error line alone, not after an empty display.
    progress = Progress(*columns, console=console, disable=disable)
    tasks: dict[str, TaskID] = {}

    def update(name: str, done: int, total: int | None = None, detail: str = "") -> None:
        if not tasks:
            progress.start()
        if name not in tasks:
            tasks[name] = progress.add_task(name, total=total, detail="")
        progress.update(tasks[name], completed=done, total=total, detail=detail)

    try:
        yield update
    finally:
        if tasks:
            progress.stop()
