"""Where a benchmark's figures are kept: ``bench/results/<name>.json``, with the command that
gave them, the options, the commit, the date, the machine and what they depended on, so that
the README and docs quote a file, not a number copied by hand. The driver (bench/run.py) writes
them."""

from __future__ import annotations

import ast
import datetime
import functools
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.data import DATA

RESULTS = Path(__file__).resolve().parent / "results"


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

# The data files this process opened (claim and pair files, grounding sets), whichever module
# opened them: an audit hook notes each path under the data directory as it is opened.
_DATA_ROOT = os.path.join(os.path.abspath(DATA), "")
_DATA_READ: set[str] = set()


def _note_data_read(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and args and isinstance(args[0], str | os.PathLike):
        path = os.path.abspath(os.fspath(args[0]))
        if isinstance(path, str) and path.startswith(_DATA_ROOT):
            _DATA_READ.add(path)


sys.addaudithook(_note_data_read)


def record(
    folder: Path,
    name: str,
    figures: Any,
    command: str,
    options: dict[str, Any],
    places: Mapping[str, Path | None] | None = None,
) -> Path:
    """Write ``figures`` to ``folder/<name>.json`` with their provenance (``command``: the
    driver's command line, placeholders kept; ``options``: the condition's, as run; ``places``:
    the driver's, fingerprinted in ``depends``); returns the path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    entry = {
        "command": command,
        "options": options,
        "commit": _COMMIT_AT_START,
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "depends": {**depends(), **inputs(places or {})},
        "figures": figures,
    }
    path.write_text(json.dumps(entry, indent=2) + "\n", encoding="utf-8")
    return path


def depends() -> dict[str, Any]:
    """What the figures just measured depended on: the repository's files of every module this
    process imported (the code that ran, not a hand list: a condition that runs another commit's
    server in a process of its own depends on none of this checkout's service code), the
    packaged models where a model ran, and the ONNX Runtime version."""
    root = RESULTS.parents[1]
    files = set()
    for module in list(sys.modules.values()):
        path = Path(getattr(module, "__file__", None) or "")
        if path.suffix == ".py" and path.resolve().is_relative_to(root):
            relative = path.resolve().relative_to(root).as_posix()
            if relative.startswith(("feverous_es/", "bench/")):
                files.add(relative)
    if "feverous_es.runtime.model" in sys.modules:  # a model ran: the models are data it read
        files.add("feverous_es/models")
    found: dict[str, Any] = {"files": sorted(files)}
    if (onnxruntime := sys.modules.get("onnxruntime")) is not None:
        found["onnxruntime"] = getattr(onnxruntime, "__version__", "")
    if read := data_files(_DATA_READ):
        found["data"] = read
    return found


def data_files(paths: Iterable[str]) -> dict[str, str]:
    """Each data file of ``paths`` that is still there, by its path in the data directory, with
    its sha256 (the first 16 digits): a claim file replaced under a record shows."""
    found = {}
    for path in sorted(paths):
        if os.path.isfile(path):
            found[Path(path).relative_to(DATA).as_posix()] = _sha256([Path(path)])
    return found


def data_changed(held: Mapping[str, str]) -> str | None:
    """Why a record's data files (``depends.data``) are not what this machine holds now: the
    first one whose hash differs; None when all that are here match. A file that is not here
    (a clone with no data beside it) says nothing of the record: :func:`data_missing`."""
    for name, digest in held.items():
        path = DATA / name
        if path.is_file() and _sha256([path]) != digest:
            return f"its data file {name} changed since"
    return None


def data_missing(held: Mapping[str, str]) -> list[str]:
    """The data files of a record (``depends.data``) this machine does not hold."""
    return [name for name in held if not (DATA / name).is_file()]


# The instruction sets that choose ONNX Runtime's int8 and float kernels: the same model and
# inputs may read differently where they differ (answers moved with a new machine, 2026-12-05).
KERNEL_FLAGS = ("avx2", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "amx_int8", "amx_bf16")
# An embedded index's vectors: what the embedder wrote on the machine that built it.
INDEX_VECTORS = ("vectors.f16", "page_vectors.f16")


def inputs(places: Mapping[str, Path | None]) -> dict[str, Any]:
    """What the figures read besides code: this machine's CPU (its model and the instruction
    sets that choose the kernels) and, for the places the driver was given, a fingerprint: the
    dump's (``wiki``) sha256, an embedded index's (``index``) format and the sha256 of its
    vectors. A place that is not a file or an embedded index is named only."""
    found: dict[str, Any] = {"cpu": cpu()}
    for name, path in places.items():
        if path is None:
            continue
        if path.is_file():
            found[name] = {"sha256": _sha256([path])}
        elif (path / "meta.json").is_file():
            vectors = [path / f for f in INDEX_VECTORS if (path / f).is_file()]
            found[name] = {"meta": json.loads((path / "meta.json").read_text(encoding="utf-8")),
                           "vectors_sha256": _sha256(vectors)}  # fmt: skip
        else:
            found[name] = {"given": True}
    return found


def cpu() -> dict[str, Any]:
    """This machine's CPU model and which of :data:`KERNEL_FLAGS` it has (Linux's
    /proc/cpuinfo; elsewhere the platform's processor name alone)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return {"model": platform.processor()}
    fields = dict(
        line.split(":", 1) for line in text.split("\n\n", 1)[0].splitlines() if ":" in line
    )
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    flags = set(fields.get("flags", "").split())
    return {"model": fields.get("model name", ""), "flags": [f for f in KERNEL_FLAGS if f in flags]}


def _sha256(paths: Sequence[Path]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as file:
            while block := file.read(1 << 22):
                digest.update(block)
    return digest.hexdigest()[:16]


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=False,
                          cwd=Path(__file__).resolve().parent)  # fmt: skip


def code_of(source: str) -> str | None:
    """What a Python module runs: its syntax tree without docstrings, a field's or an
    attribute's included (comments and line numbers are not in it); None when it does not
    parse."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and any(map(_is_prose, body)):
                setattr(node, field, [s for s in body if not _is_prose(s)] or [ast.Pass()])
    return ast.dump(tree)


def _is_prose(statement: ast.AST) -> bool:
    """A bare string: a docstring wherever it stands, running nothing."""
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


# Records share base commits and files: each blob is read and parsed once a process (the driver
# and the tests run on one HEAD).
@functools.cache
def _code_at(rev: str, path: str) -> str | None:
    shown = _git("show", f"{rev}:{path}")
    return None if shown.returncode else code_of(shown.stdout)


def same_code(path: str, base: str) -> bool:
    """Whether ``path`` runs the same code at ``base`` as at HEAD (a .py file whose docstrings
    or comments alone changed)."""
    if not path.endswith(".py"):
        return False
    before = _code_at(base, path)
    return before is not None and before == _code_at("HEAD", path)


def changed_since(made_at: str, paths: Sequence[str]) -> str | None:
    """Why a record made at ``made_at`` (its ``commit``: a hash, ``+changes`` when the tree was
    not clean, or several hashes, the last the latest) is older than what it measured: the
    commits after it that changed the code of one of ``paths`` (repository-relative), named;
    None when none did. A page of prose, a docstring or a comment changes no figure. Unknown
    commits and trees that are not git checkouts say so."""
    if not paths:
        return None  # it ran none of this checkout's code
    hashes = re.findall(r"\b[0-9a-f]{7,40}\b", made_at)
    if not hashes:
        return f"made at no commit ({made_at!r})"
    base = hashes[-1]
    if _git("cat-file", "-e", f"{base}^{{commit}}").returncode:
        return f"made at {base}, a commit this checkout lacks"
    spec = [*(f":(top){p}" for p in paths), ":(top,exclude,glob)**/*.md"]
    touched = _git("diff", "--name-only", f"{base}..HEAD", "--", *spec).stdout.split()
    files = [f for f in touched if not same_code(f, base)]
    if not files:
        return None
    since = _git("log", "--format=%h", f"{base}..HEAD", "--", *(f":(top){f}" for f in files))
    commits = since.stdout.split()
    return (
        f"made at {base}; {len(commits)} commit(s) since changed what it measures "
        f"(latest {commits[0]}: {', '.join(files[:3])}{' …' if len(files) > 3 else ''})"
    )
