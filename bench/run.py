"""The benchmark driver: every condition is declared once in bench/conditions.toml (what it
measures, the function that measures it with its options, its headline figures and what they must
reproduce); this runs, checks and records them, and generates the pages people read from the
records.

    python -m bench list                    # the conditions and their records
    python -m bench run verdict [--record]  # rerun a condition, check its figures
    python -m bench run grounding --option limit=50   # a quick look: an option changed
    python -m bench check                   # every kept record against its condition, and
                                            # against the code it measured (no older)
    python -m bench page [--check]          # docs/benchmarks.md, docs/experiments.md, the tables
                                            # of README.md and docs/*.md

A condition's function (``run = "bench.MODULE:FUNCTION"``) takes a :class:`bench.context.Context`
(the places given here: ``--index``, ``--wiki``, ``--pairs``) and the condition's ``options`` as
keyword arguments, and returns its figures. A rerun writes its record to a scratch directory;
``--record`` keeps it in bench/results/ when every figure holds. ``page`` writes
docs/benchmarks.md, docs/experiments.md and every block of README.md and docs/*.md between
``<!-- bench:NAME[/TABLE] -->`` and ``<!-- /bench -->``, so no page copies a figure by hand.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import math
import os
import re
import shlex
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.context import PLACES, Context
from bench.errors import BenchError
from bench.results import RESULTS, changed_since, data_changed, data_missing, record

REPO = Path(__file__).resolve().parents[1]
CONDITIONS = REPO / "bench" / "conditions.toml"
PAGE = REPO / "docs" / "benchmarks.md"
EXPERIMENTS_PAGE = REPO / "docs" / "experiments.md"
README = REPO / "README.md"
AREAS = ("Verdict", "Retrieval", "Speed", "Build")
_BLOCK = re.compile(r"(<!-- bench:([\w./-]+) -->\n).*?(<!-- /bench -->)", re.DOTALL)


@dataclass(frozen=True)
class Figure:
    """One headline figure: where it is in the record, where it goes in its table, and what a
    rerun must give (``expect`` ± ``tolerance``, or at most ``maximum``; neither: reported, not
    checked)."""

    row: str
    key: str
    column: str = "value"
    table: str = ""
    expect: float | None = None
    maximum: float | None = None  # a bound, not a value to reproduce (a memory slope)
    tolerance: float = 0.0
    scale: float = 1.0
    format: str = ""
    unit: str = ""

    def value(self, figures: Any) -> Any:
        """The figure in a record's figures; KeyError naming the path when it is not there. A
        name in the path may hold dots (a rule ``cascade below 0.8``): the longest that is a key
        is taken."""
        value, parts, at = figures, self.key.split("."), 0
        while at < len(parts):
            try:
                if isinstance(value, list):
                    value, at = value[int(parts[at])], at + 1
                    continue
                end = next(end for end in range(len(parts), at, -1)
                           if ".".join(parts[at:end]) in value)  # fmt: skip
                value, at = value[".".join(parts[at:end])], end
            except (StopIteration, IndexError, ValueError, TypeError):
                raise KeyError(f"no {self.key!r} in the record") from None
        return value

    def holds(self, value: Any) -> bool:
        if self.expect is None and self.maximum is None:
            return True
        if not isinstance(value, int | float):
            return False
        if self.maximum is not None and value > self.maximum:
            return False
        return self.expect is None or abs(value - self.expect) <= self.tolerance + 1e-9

    def wanted(self) -> str:
        """What a rerun must give, in words ("" when nothing)."""
        if self.expect is not None:
            return f"expected {self.expect} ± {self.tolerance}"
        return "" if self.maximum is None else f"at most {self.maximum}"

    def shown(self, value: Any) -> str:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return str(value)
        scaled = value * self.scale
        if self.format.endswith("d"):
            scaled = round(scaled)
        text = format(scaled, self.format) if math.isfinite(scaled) else str(scaled)
        text = text.replace("%", " %")  # the project writes 63.0 %
        return f"{text} {self.unit}" if self.unit else text


@dataclass(frozen=True)
class Condition:
    name: str
    area: str
    about: str
    run: str  # "bench.MODULE:FUNCTION"
    options: dict[str, Any] = field(default_factory=dict)
    figures: tuple[Figure, ...] = field(default_factory=tuple)
    covers: tuple[str, ...] = ()  # paths its figures depend on: its area's, its module, these
    extra_covers: tuple[str, ...] = ()  # the condition's own `covers` (data the code reads)

    def function(self) -> Callable[..., Any]:
        module, _, name = self.run.partition(":")
        return getattr(importlib.import_module(module), name)

    def call(self, context: Context, options: dict[str, Any]) -> Any:
        """The figures of the function run with ``options``; BenchError naming an option the
        function does not take."""
        function = self.function()
        try:
            inspect.signature(function).bind(context, **options)
        except TypeError as error:
            raise BenchError(f"{self.name}: {self.run} {error}") from None
        return function(context, **options)

    def command(self, overrides: dict[str, Any]) -> str:
        """The driver's command line that reruns it, with the options changed from the
        condition's."""
        changed = [word for key, value in overrides.items()
                   for word in ("--option", f"{key}={json.dumps(value)}")]  # fmt: skip
        return shlex.join(["python", "-m", "bench", "run", self.name, *changed])

    def tables(self) -> dict[str, list[Figure]]:
        grouped: dict[str, list[Figure]] = {}
        for figure in self.figures:
            grouped.setdefault(figure.table, []).append(figure)
        return grouped


def load(path: Path = CONDITIONS) -> tuple[dict[str, Condition], dict[str, str]]:
    """The conditions by name (each covering its area's paths, its bench module and its own
    ``covers``), and the experiments' lines by record name."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    conditions = {}
    for entry in data.get("condition", []):
        figures = tuple(Figure(**figure) for figure in entry.pop("figures", []))
        if entry["area"] not in AREAS:
            raise BenchError(f"{entry['name']}: area {entry['area']!r} is not one of {AREAS}")
        module = entry["run"].partition(":")[0].replace(".", "/") + ".py"
        extra = tuple(entry.pop("covers", []))
        covers = (*data["covers"][entry["area"]], module, *extra)
        conditions[entry["name"]] = Condition(
            **entry, figures=figures, covers=covers, extra_covers=extra
        )
    experiments = {entry["name"]: entry["about"] for entry in data.get("experiment", [])}
    return conditions, experiments


def read_record(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def problems(condition: Condition, record: dict[str, Any]) -> list[str]:
    """What in ``record`` does not hold ``condition``'s figures: a missing figure, or one
    outside its tolerance."""
    found = []
    for figure in condition.figures:
        try:
            value = figure.value(record["figures"])
        except KeyError as error:
            found.append(f"{condition.name}: {error.args[0]}")
            continue
        if not figure.holds(value):
            found.append(f"{condition.name}: {figure.key} = {value}, {figure.wanted()}")
    return found


# A table of one column and at most this many rows is written as one row (a glance reads it
# as well, in fewer of the page's lines).
ONE_ROW_AT_MOST = 6


def grid(figures: Sequence[Figure], record: dict[str, Any]) -> str:
    """A markdown table: a row per ``row``, a column per ``column`` (one column of a few rows:
    a column per row); several figures in one cell are joined with " / "."""
    rows = list(dict.fromkeys(f.row for f in figures))
    columns = list(dict.fromkeys(f.column for f in figures))
    cells: dict[tuple[str, str], list[str]] = {}
    turned = len(columns) == 1 and 1 < len(rows) <= ONE_ROW_AT_MOST
    for figure in figures:
        place = (figure.column, figure.row) if turned else (figure.row, figure.column)
        cells.setdefault(place, []).append(figure.shown(figure.value(record["figures"])))
    if turned:
        rows, columns = columns, rows
    corner = "| figure | " if columns == ["value"] else "| | "
    head = corner + " | ".join(columns) + " |"
    lines = [head, "|---" * (len(columns) + 1) + "|"]
    for row in rows:
        shown = [" / ".join(cells.get((row, column), ["—"])) for column in columns]
        label = "" if row == "value" else row  # a lone "value" column says nothing as a row
        lines.append(f"| {label} | " + " | ".join(shown) + " |")
    return "\n".join(lines)


# Said after a record made before a later change to what its condition covers: the page then
# shows figures that are not the code's, and says so where they are read.
OLDER_THAN_THE_CODE = (
    " **Older than the code it measures**: a later commit changed what it covers "
    "(`python -m bench check` names it)."
)


def provenance(condition: Condition, record: dict[str, Any], link: str) -> str:
    """Where ``record`` comes from (command, commit, date, machine, a link to it), and whether
    the code it measured has changed since."""
    made = (
        f"`{record['command']}` — commit {record['commit']}, {record['date']}, "
        f"{record['machine']} ([full record]({link}{condition.name}.json))"
    )
    stale = changed_since(record["commit"], covered(condition, record))
    return made + (OLDER_THAN_THE_CODE if stale else "")


def page(conditions: dict[str, Condition]) -> str:
    """The benchmarks page: a condition's heading, what it measures with the record it comes
    from in one paragraph, then its tables (a figure is found at a glance)."""
    parts = [
        "# Benchmarks\n",
        "Generated by `python -m bench page` from `bench/conditions.toml` and the records in "
        "`bench/results/`; do not edit by hand. Each condition's headline figures come from its "
        "latest record (linked, with every figure it holds); `python -m bench run NAME` "
        "reruns it and checks the figures that carry a tolerance. The decisions each record "
        "serves: [decisions.md](decisions.md); the one-off comparisons kept as evidence: "
        "[experiments.md](experiments.md).\n",
    ]
    for area in AREAS:
        parts.append(f"## {area}\n")
        for condition in (c for c in conditions.values() if c.area == area):
            path = RESULTS / f"{condition.name}.json"
            if not path.is_file():
                parts.append(f"### {condition.name}\n{condition.about} Not recorded yet: "
                             f"`{condition.command({})}`.\n")  # fmt: skip
                continue
            record = read_record(path)
            made = provenance(condition, record, "../bench/results/")
            parts.append(f"### {condition.name}\n{condition.about} {made}\n")
            parts += [grid(figures, record) + "\n" for figures in condition.tables().values()]
    return "\n".join(parts)


def experiments_page(experiments: dict[str, str]) -> str:
    """The records of one-off comparisons, a line each."""
    lines = [
        "# Experiments\n",
        "Generated by `python -m bench page` from `bench/conditions.toml`; do not edit by hand. "
        "Records of one-off comparisons, kept as the evidence of the decisions "
        "(docs/decisions.md):\n",
    ]
    for name, about in experiments.items():
        record = read_record(RESULTS / f"{name}.json")
        lines.append(
            f"* [{name}](../bench/results/{name}.json) ({record['date']}, {record['commit']}): "
            f"{about}"
        )
    return "\n".join(lines) + "\n"


def generated_blocks(text: str, conditions: dict[str, Condition], link: str) -> str:
    """``text`` with every ``<!-- bench:NAME[/TABLE] -->`` block regenerated from NAME's record
    (``link``: the records' folder as the page links it)."""

    def block(match: re.Match[str]) -> str:
        name, _, table = match.group(2).partition("/")
        if name not in conditions:
            raise SystemExit(f"error: a page names no condition {name!r} ({match.group(1)!r})")
        tables = conditions[name].tables()
        if table not in tables:
            raise SystemExit(f"error: condition {name} has no table {table!r} ({match.group(1)!r})")
        record = read_record(RESULTS / f"{name}.json")
        body = grid(tables[table], record)
        source = provenance(conditions[name], record, link)
        return f"{match.group(1)}{body}\n\n{source}\n{match.group(3)}"

    return _BLOCK.sub(block, text)


def unrecorded(conditions: dict[str, Condition], experiments: dict[str, str]) -> Iterator[str]:
    """Records that no condition or experiment declares, and declarations with no record."""
    kept = {path.stem for path in RESULTS.glob("*.json")}
    declared = set(conditions) | set(experiments)
    for name in sorted(kept - declared):
        yield f"bench/results/{name}.json: declared in no [[condition]] or [[experiment]]"
    for name in sorted(set(experiments) - kept):
        yield f"experiment {name}: no bench/results/{name}.json"


def figure_problems(conditions: dict[str, Condition], experiments: dict[str, str]) -> list[str]:
    """Records no declaration names (and declarations without one), and kept records that do
    not hold their condition's figures."""
    found = list(unrecorded(conditions, experiments))
    for condition, kept in kept_records(conditions):
        found += problems(condition, kept)
    return found


# The driver's own modules: they load conditions and write records, and no figure reads them.
DRIVER = frozenset(f"bench/{name}.py" for name in ("__init__", "__main__", "run", "results"))


def covered(condition: Condition, record: dict[str, Any]) -> tuple[str, ...]:
    """What a record's figures depend on: the files of the code it ran (``depends``, written
    since 2026-12-05; the driver's own aside) and the condition's own ``covers``; for an older
    record, its area's paths as [covers] lists them."""
    files = record.get("depends", {}).get("files")
    if files is None:
        return condition.covers
    return (*(f for f in files if f not in DRIVER), *condition.extra_covers)


def stale_records(conditions: dict[str, Condition]) -> Iterator[str]:
    """Each kept record made before a commit that changed what its condition covers, or on a
    data file that has changed since."""
    for condition, kept in kept_records(conditions):
        why = changed_since(kept["commit"], covered(condition, kept))
        why = why or data_changed(kept.get("depends", {}).get("data", {}))
        if why:
            yield f"{condition.name}: {why}"


def records_without_data(conditions: dict[str, Condition]) -> Iterator[str]:
    """Each kept record with a data file this machine does not hold (it cannot be made again
    here; its figures stand)."""
    for condition, kept in kept_records(conditions):
        if missing := data_missing(kept.get("depends", {}).get("data", {})):
            yield f"{condition.name}: {', '.join(missing)}"


def kept_records(conditions: dict[str, Condition]) -> Iterator[tuple[Condition, dict[str, Any]]]:
    """Each condition that has a kept record, with the record."""
    for condition in conditions.values():
        path = RESULTS / f"{condition.name}.json"
        if path.is_file():
            yield condition, read_record(path)


def option(text: str) -> tuple[str, Any]:
    """``--option KEY=VALUE``: VALUE read as a TOML value (``50``, ``[1, 2]``, ``true``), else as
    a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    try:
        return key, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value


def run(
    condition: Condition, context: Context, keep: bool, overrides: dict[str, Any] | None = None
) -> int:
    """Run ``condition``'s function, print its figures beside what they must reproduce, and with
    ``keep`` put its record in bench/results/ when every figure holds; 1 when one does not."""
    overrides = overrides or {}
    options = {**condition.options, **overrides}
    command = condition.command(overrides)
    print(f"$ {command}", flush=True)
    # Checked as the record will hold them: JSON makes a dict's keys strings (Hits@k by k).
    figures = json.loads(json.dumps(condition.call(context, options)))
    entry = {"figures": figures}
    for figure in condition.figures:
        try:
            value = figure.value(figures)
        except KeyError:
            print(f"  {figure.key:<58} {'missing':>12}")
            continue
        wanted = figure.wanted()
        verdict = "" if not wanted else ("ok" if figure.holds(value) else "DIFFERS")
        print(f"  {figure.key:<58} {figure.shown(value):>12}  {wanted} {verdict}")
    found = problems(condition, entry)
    kept = keep and not found  # a record that does not hold is not kept
    folder = RESULTS if kept else Path(tempfile.mkdtemp(prefix=f"bench-{condition.name}-"))
    places = {place: getattr(context, place) for place in PLACES}
    path = record(folder, condition.name, figures, command, options, places)
    if found:
        print("\n".join(found), f"the record stays in {path}", sep="\n", file=sys.stderr)
        return 1
    if keep:
        print(f"recorded in bench/results/{path.name}; run `python -m bench page`")
    else:
        print(f"the record is in {path}; `--record` keeps it")
    return 0


def parser() -> argparse.ArgumentParser:
    """The driver's command line (the docs' commands are checked against it too)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the conditions and their latest records")
    rerun = commands.add_parser("run", help="rerun conditions and check their figures")
    rerun.add_argument("names", nargs="+", metavar="NAME")
    rerun.add_argument("--record", action="store_true", help="keep the records that hold")
    rerun.add_argument(
        "--option",
        type=option,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change one of the conditions' options (a TOML value), e.g. limit=50",
    )
    rerun.add_argument(
        "--index", default="indexes/mini", help="the mini index (default: %(default)s)"
    )
    for name in ("wiki", "pairs"):
        rerun.add_argument(f"--{name}", help=f"{PLACES[name]}, for the conditions that read it")
    commands.add_parser("check", help="every kept record against its condition; no run")
    generate = commands.add_parser(
        "page",
        help="write docs/benchmarks.md, docs/experiments.md and the tables of README.md "
        "and docs/*.md",
    )
    generate.add_argument("--check", action="store_true", help="exit 1 if any of them is stale")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = (driver := parser()).parse_args(argv)
    conditions, experiments = load()

    if args.command == "list":
        for condition in conditions.values():
            path = RESULTS / f"{condition.name}.json"
            when = read_record(path)["date"] if path.is_file() else "not recorded"
            print(f"{condition.area:<10} {condition.name:<28} {when:<12} {condition.run}")
        return 0
    if args.command == "run":
        unknown = [name for name in args.names if name not in conditions]
        if unknown:
            driver.error(f"no condition {', '.join(unknown)} (see `python -m bench list`)")
        overrides = dict(args.option)
        places = {place: Path(given) if (given := getattr(args, place)) else None
                  for place in PLACES}  # fmt: skip
        failed = []
        for name in args.names:
            context = Context(name, **places)
            try:
                status = run(conditions[name], context, args.record, overrides)
            except BenchError as error:
                print(f"error: {error}", file=sys.stderr)
                status = 1
            if status:
                failed.append(name)
        return 1 if failed else 0
    if args.command == "check":
        found = figure_problems(conditions, experiments)
        print("\n".join(found) or f"{len(conditions)} conditions hold their records")
        # For information: a record older than its code still holds the figures it printed.
        if stale := list(stale_records(conditions)):
            print(f"{len(stale)} record(s) older than what they measure (make one again when a "
                  "decision reads it: run --record):", *stale, sep="\n  ")  # fmt: skip
        if missing := list(records_without_data(conditions)):
            print(f"{len(missing)} record(s) read data this machine does not hold:", *missing,
                  sep="\n  ")  # fmt: skip
        return 1 if found else 0

    stale = []
    written = ((PAGE, page(conditions)), (EXPERIMENTS_PAGE, experiments_page(experiments)))
    with_blocks = [README, *sorted(set(PAGE.parent.glob("*.md")) - {PAGE, EXPERIMENTS_PAGE})]
    pages = [*written, *((path, None) for path in with_blocks)]
    for path, text in pages:
        current = path.read_text(encoding="utf-8") if path.is_file() else ""
        if text is None:
            link = Path(os.path.relpath(RESULTS, path.parent)).as_posix() + "/"
            text = generated_blocks(current, conditions, link)
        if current == text:
            continue
        if args.check:
            stale.append(f"{path.relative_to(REPO)} is stale: run python -m bench page")
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(REPO)}")
    if stale:
        print("\n".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
