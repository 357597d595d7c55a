"""Where a benchmark's figures are kept: ``bench/results/<name>.json``, with the command that
gave them, the commit, the date and the machine, so that the README and docs quote a file, not
a number copied by hand.

    from results import bench_parser, record_if_asked, save_figures
    parser = bench_parser(__doc__)     # every bench's --record NAME
    record_if_asked(args, figures)     # at its end
    save_figures(args, figures)        # instead, at the end of a bench with --json PATH too
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

# bench/run.py points a rerun at a scratch directory and keeps the record only when it checks out.
RESULTS = Path(
    os.environ.get("FEVEROUS_ES_BENCH_RESULTS") or Path(__file__).resolve().parent / "results"
)


def _commit() -> str:
    """HEAD, marked ``+changes`` when tracked files differ from it (records in bench/results/
    aside: a driver running several conditions has just written one)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()  # fmt: skip
        code = [":(top)", ":(top,exclude)bench/results"]
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", *code],
            capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parent,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}+changes" if dirty else head


# The code a bench measures is the code it started with: the commit is taken on import.
_COMMIT_AT_START = _commit()


def record(name: str, figures: Any, command: str | None = None) -> Path:
    """Write ``figures`` to ``bench/results/<name>.json`` with their provenance (``command``:
    the command line that gave them; by default the driver's condition, placeholders kept,
    else this process's); returns the path."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    entry = {
        "command": command
        or os.environ.get("FEVEROUS_ES_BENCH_COMMAND")
        or shlex.join(["python", *sys.argv]),
        "commit": _COMMIT_AT_START,
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "figures": figures,
    }
    path.write_text(json.dumps(entry, indent=2) + "\n", encoding="utf-8")
    return path


def bench_parser(doc: str | None, *, record: bool = True) -> argparse.ArgumentParser:
    """A bench's command line: its docstring's first paragraph as the description and, for a
    bench that keeps figures, ``--record``."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    if record:
        parser.add_argument(
            "--record",
            metavar="NAME",
            help="keep the figures, with the command, commit, date and machine, in "
            "bench/results/NAME.json",
        )
    return parser


def record_if_asked(args: argparse.Namespace, figures: Any) -> None:
    """:func:`record` the figures under ``--record``'s name, when it was given."""
    if args.record:
        print(f"recorded in {record(args.record, figures)}")


def save_figures(args: argparse.Namespace, figures: Any) -> None:
    """The end of a bench with ``--json PATH``: the figures written there, and recorded under
    ``--record``'s name, each when it was given."""
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    record_if_asked(args, figures)
