"""Verify latency of this checkout beside earlier commits, each run as it was: warm, and a new
process's first claim (cold).

    run = "bench.side_by_side:warm_side_by_side"   # on the mini index (--index);
    # options: commits, per_file, seed, over ("api" or "http")

Each version is its own commit's code in its own process (a ``git worktree`` of the commit, on
its ``PYTHONPATH``; this checkout as it stands), every one warm on the same index: the Python
API (``over = "api"``: a claim's seconds timed in the process), or ``feverous-es serve`` on a
port of its own (``over = "http"``: a ``POST /v1/verify`` timed by the client, one connection
kept open, as a caller sees it). The same dev claims (``per_file`` of each dev file, drawn with
``seed``) go to each version in turn, one claim at a time, the order alternating claim by
claim, so what the machine does meanwhile falls on all of them alike. Per version: p50 / p95 of
a claim; against this checkout, the median of the per-claim ratios (the earlier version's time
over this one's: under 1, this checkout is slower) with its 95 % bootstrap interval over claims.

    run = "bench.side_by_side:cold_side_by_side"   # on the mini index (--index);
    # options: commits, per_file, seed

Cold: each claim is one ``feverous-es verify CLAIM --json`` process of each version's code
(``python -m feverous_es.cli`` in its checkout), timed from its start to its exit, as a user
meets the first claim; the same claims, the order alternating claim by claim. One untimed claim
a version first fills the caches each version keeps (the checked hashes, the optimized graphs,
the joined large reader): a first claim is measured, not a first install. The record counts the
claims of this checkout whose process opened the large reader (what ``verify --json`` says it
loaded).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from bench.context import Context
from bench.data import REPO
from bench.errors import BenchError
from bench.pipeline import dev_claims, quantiles

THIS = "this checkout"
ROUNDS = 2_000
# One version's process: warm on the index, then one claim a line in, its seconds a line out.
WORKER = """
import json, sys, time
import feverous_es
from feverous_es.verify.pipeline import Pipeline
pipeline = Pipeline.open(sys.argv[1])
pipeline.verify("The Eiffel Tower is in Paris.")
print("ready", feverous_es.__file__, flush=True)
for line in sys.stdin:
    started = time.perf_counter()
    pipeline.verify(json.loads(line))
    print(time.perf_counter() - started, flush=True)
"""


@contextlib.contextmanager
def checkout_at(commit: str) -> Iterator[Path]:
    """A worktree of ``commit`` in a temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix=f"side-by-side-{commit}-") as tmp:
        path = Path(tmp) / "checkout"
        added = subprocess.run(
            ["git", "worktree", "add", "--detach", str(path), commit],
            cwd=REPO, capture_output=True, text=True,
        )  # fmt: skip
        if added.returncode:
            raise BenchError(f"no worktree of {commit}: {added.stderr.strip()}")
        try:
            yield path
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(path)], cwd=REPO, capture_output=True
            )


class ApiWorker:
    """A warm worker of ``checkout``'s code on ``index``: a claim's seconds timed inside it."""

    def __init__(self, checkout: Path, index: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(index)], cwd=checkout, env=env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )  # fmt: skip
        ready, _, package = _line(self.process.stdout).partition(" ")
        if ready != "ready":
            raise BenchError(f"the worker of {checkout} did not start (its errors are above)")
        if not Path(package).resolve().is_relative_to(checkout.resolve()):
            raise BenchError(f"the worker of {checkout} imported another checkout's {package}")

    def verify(self, claim: str) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(claim) + "\n")
        self.process.stdin.flush()
        return float(_line(self.process.stdout))

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()


class HttpWorker:
    """``feverous-es serve`` of ``checkout``'s code on ``index`` (``running_server``, run from
    the checkout): a claim's seconds are a ``POST /v1/verify``'s, timed by a client that keeps
    its connection."""

    def __init__(self, checkout: Path, index: Path) -> None:
        import httpx

        from bench.serve_process import running_server

        env = {**os.environ, "PYTHONPATH": str(checkout)}
        with contextlib.ExitStack() as running:
            server = running.enter_context(running_server(index, env=env, cwd=checkout))
            self.client = running.enter_context(httpx.Client(base_url=server.url, timeout=120))
            self.verify("The Eiffel Tower is in Paris.")  # warm, as the API worker is
            self.running = running.pop_all()  # kept until close()

    def verify(self, claim: str) -> float:
        started = time.perf_counter()
        answer = self.client.post("/v1/verify", json={"claim": claim})
        seconds = time.perf_counter() - started
        if answer.status_code != 200:
            raise BenchError(f"the service answered {answer.status_code}: {answer.text[:200]}")
        return seconds

    def close(self) -> None:
        self.running.close()


WORKERS = {"api": ApiWorker, "http": HttpWorker}


def _line(stream: IO[str] | None) -> str:
    return stream.readline().strip() if stream is not None else ""


def median_ratio(base: Sequence[float], other: Sequence[float]) -> dict[str, float]:
    """The median of ``other[i] / base[i]`` over claims, with its 95 % bootstrap interval."""
    ratios = np.asarray(other) / np.asarray(base)
    draws = np.random.default_rng(0).choice(ratios, size=(ROUNDS, len(ratios)))
    low, high = np.percentile(np.median(draws, axis=1), [2.5, 97.5])
    return {"median": round(float(np.median(ratios)), 3), "low": round(float(low), 3),
            "high": round(float(high), 3)}  # fmt: skip


def cold_verify(checkout: Path, index: Path, claim: str) -> tuple[float, dict[str, Any]]:
    """One ``verify CLAIM --json`` process of ``checkout``'s code: its seconds, its answer."""
    command = [sys.executable, "-m", "feverous_es.cli", "verify", claim, "--index", str(index),
               "--json"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    started = time.perf_counter()
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise BenchError(f"verify of {checkout} failed: {done.stderr.strip()[-300:]}")
    return seconds, json.loads(done.stdout)


def imported_from(checkout: Path) -> None:
    """BenchError unless a process started in ``checkout`` imports its own package (not an
    installed one)."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    found = subprocess.run(
        [sys.executable, "-c", "import feverous_es; print(feverous_es.__file__)"],
        cwd=checkout, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    if not Path(found).resolve().is_relative_to(checkout.resolve()):
        raise BenchError(f"a process in {checkout} imported another checkout's {found}")


def cold_side_by_side(
    context: Context, *, commits: Sequence[str] = ("3d9ce11",), per_file: int = 8, seed: int = 0
) -> dict[str, Any]:
    """A new process's first claim of this checkout beside each of ``commits`` (the module)."""
    index = context.place("index")
    claims = [r["claim"] for some in dev_claims(per_file, seed).values() for r in some]
    with contextlib.ExitStack() as stack:
        checkouts = {THIS: REPO, **{c: stack.enter_context(checkout_at(c)) for c in commits}}
        for path in checkouts.values():
            imported_from(path)
            cold_verify(path, index, "The Eiffel Tower is in Paris.")  # the caches, untimed
        seconds: dict[str, list[float]] = {name: [] for name in checkouts}
        large = 0
        for i, claim in enumerate(claims):
            order = list(checkouts) if i % 2 == 0 else list(checkouts)[::-1]
            for name in order:
                took, answer = cold_verify(checkouts[name], index, claim)
                seconds[name].append(took)
                if name == THIS:
                    # the large reader loads from its joined copy, verdict-large-<sha256>
                    large += any(m["model"].startswith("verdict-large") for m in answer["loaded"])
    return _compared(seconds, commits, over="cold", large_reader_loaded=large)


def warm_side_by_side(
    context: Context,
    *,
    commits: Sequence[str] = ("3d9ce11",),
    per_file: int = 10,
    seed: int = 0,
    over: str = "api",
) -> dict[str, Any]:
    """This checkout's warm verify beside each of ``commits`` as it was (the module)."""
    if over not in WORKERS:
        raise BenchError(f"over must be one of {', '.join(WORKERS)}, not {over!r}")
    index = context.place("index")
    claims = [r["claim"] for some in dev_claims(per_file, seed).values() for r in some]
    with contextlib.ExitStack() as stack:
        checkouts = {THIS: REPO, **{c: stack.enter_context(checkout_at(c)) for c in commits}}
        workers = {}
        for name, path in checkouts.items():
            workers[name] = worker = WORKERS[over](path, index)
            stack.callback(worker.close)
        seconds: dict[str, list[float]] = {name: [] for name in workers}
        for i, claim in enumerate(claims):
            order = list(workers) if i % 2 == 0 else list(workers)[::-1]
            for name in order:
                seconds[name].append(workers[name].verify(claim))
    return _compared(seconds, commits, over=over)


def _compared(
    seconds: dict[str, list[float]], commits: Sequence[str], **more: Any
) -> dict[str, Any]:
    """Each version's p50 / p95 and each commit's per-claim ratio to this checkout, printed."""
    figures: dict[str, Any] = {
        **more,
        "claims": len(seconds[THIS]),
        "versions": {name: quantiles(s) for name, s in seconds.items()},
        "ratio_to_this": {c: median_ratio(seconds[THIS], seconds[c]) for c in commits},
    }
    for name, q in figures["versions"].items():
        print(f"{name:>14}: p50 {1000 * q['p50_s']:.0f} ms, p95 {1000 * q['p95_s']:.0f} ms")
    for commit, r in figures["ratio_to_this"].items():
        print(f"{commit} / {THIS}: median per-claim ratio {r['median']:.3f} "
              f"[{r['low']:.3f}, {r['high']:.3f}] (under 1: {THIS} is slower)")  # fmt: skip
    figures["p50_ratio"] = {
        c: round(statistics.median(seconds[c]) / statistics.median(seconds[THIS]), 3)
        for c in commits
    }
    return figures
