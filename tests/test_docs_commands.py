"""Every command the docs give is one the code accepts: a `feverous-es` command's subcommands
and options are in the click tree, a `python -m bench run NAME` names a condition and its
`--option key=` keys are the condition's parameters, a `python -m gpu_queue` command is in its
click tree, and no doc runs a bench module as a script (bench/ is one driver: `python -m bench`)."""

from __future__ import annotations

import inspect
import json
import re
import shlex
from pathlib import Path

import click
import pytest

from bench.run import load, parser
from feverous_es.cli import main
from gpu_queue.__main__ import gpu_group

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
SPAN = re.compile(r"`([^`]+)`")  # a span may wrap onto the next line
SCRIPT = re.compile(r"\bbench/\w+\.py\s+(-|[A-Z]|\w+\.|\w+/)")  # a bench module given arguments
STOP = {"|", "||", "&&", ";", ">", "2>&1", "#"}


def commands(text: str) -> list[str]:
    """The code of ``text``: each fenced block's lines (continuations joined) and inline span."""
    found = []
    for block in FENCE.findall(text):
        lines = block.replace("\\\n", " ").splitlines()
        found += [line for line in lines if not line.lstrip().startswith("#")]
    return found + [" ".join(span.split()) for span in SPAN.findall(FENCE.sub("", text))]


def words(code: str, start: str) -> list[str]:
    """The words of ``code`` from ``start`` up to a shell separator (quotes understood)."""
    try:
        tokens = shlex.split(code[code.index(start) :], comments=False)
    except ValueError:
        tokens = code[code.index(start) :].split()
    out = []
    for token in tokens[len(start.split()) :]:
        if token in STOP:
            break
        out.append(token)
    return out


def options_of(command: click.Command) -> set[str]:
    return {name for p in command.params for name in (*p.opts, *p.secondary_opts)} | {"--help"}


def subcommand(group: click.Group, name: str) -> click.Command | None:
    """``group``'s command ``name``, one it imports on first use included."""
    return group.get_command(click.Context(group), name)


def check_cli(code: str, root: click.Command = main, start: str = "feverous-es ") -> list[str]:
    """What in ``code``'s `feverous-es …` (or ``start`` …, ``root``'s) the click tree does not
    accept."""
    command = root
    problems = []
    for word in words(code, start):
        choices = word.split("|")  # `train verdict|rerank …`: each a command
        if isinstance(command, click.Group) and all(subcommand(command, c) for c in choices):
            command = subcommand(command, choices[0])
        elif word.startswith("--"):
            name = word.split("=", 1)[0]
            if name not in options_of(command):
                problems.append(f"{command.name}: no option {name}")
        elif isinstance(command, click.Group) and re.fullmatch(r"[a-z][a-z-]+", word):
            problems.append(f"{command.name}: no command {word}")
            break
    return problems


def check_bench(code: str) -> list[str]:
    """What in ``code``'s `python -m bench …` the driver or the conditions do not accept."""
    tokens = []
    for token in words(code, "python -m bench"):
        if token.startswith("("):  # prose after the command
            break
        tokens.append(token.strip("[]"))  # `[--option minutes=M]`: an optional part
    # An option's value may be a placeholder (`minutes=M`): the driver parses its key alone.
    if not tokens:
        return []
    before = ["", *tokens[:-1]]
    tokens = [
        f"{t.split('=', 1)[0]}=0" if p == "--option" else t
        for p, t in zip(before, tokens, strict=True)
    ]
    try:
        args = parser().parse_args(tokens)
    except SystemExit:
        return [f"the driver rejects {shlex.join(tokens)}"]
    if args.command != "run":
        return []
    known, _ = load()
    problems = []
    for name in args.names:
        if name.isupper():  # a placeholder: `python -m bench run NAME`
            continue
        if name not in known:
            problems.append(f"no condition {name}")
            continue
        accepted = inspect.signature(known[name].function()).parameters
        problems += [f"{name}: no option {key}" for key, _ in args.option if key not in accepted]
    return problems


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_documented_command_runs(doc: Path) -> None:
    problems = []
    for code in commands(doc.read_text(encoding="utf-8")):
        if SCRIPT.search(code):
            problems.append(f"{code!r}: a bench module run as a script (use `python -m bench run`)")
        if "feverous-es " in code:
            problems += [f"{code!r}: {p}" for p in check_cli(code)]
        if "python -m bench" in code:
            problems += [f"{code!r}: {p}" for p in check_bench(code)]
        if "python -m gpu_queue " in code:
            queue = check_cli(code, gpu_group, "python -m gpu_queue ")
            problems += [f"{code!r}: {p}" for p in queue]
    assert not problems, "\n".join(problems)


def test_the_check_finds_a_wrong_command() -> None:
    assert check_cli("feverous-es index wiki.db --no-such-flag") == [
        "index: no option --no-such-flag"
    ]
    assert check_cli("feverous-es es no-such-command") == ["es: no command no-such-command"]
    assert check_cli("python -m gpu_queue bundle --bogus", gpu_group, "python -m gpu_queue ") == [
        "bundle: no option --bogus"
    ]
    assert check_bench("python -m bench run verdict --option bogus=1") == [
        "verdict: no option bogus"
    ]
    assert SCRIPT.search("python bench/retrieval.py INDEX --n-feverous 0")


def test_every_record_names_the_driver_command_that_made_it() -> None:
    problems = []
    for path in sorted((REPO / "bench" / "results").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        command = record["command"]
        if "made_by" in record or not command.startswith("python -m bench run "):
            problems.append(f"{path.name}: {command!r} is not the driver's")
        problems += [f"{path.name}: {p}" for p in check_bench(command)]
    assert not problems, "\n".join(problems)
