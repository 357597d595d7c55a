"""The queue's plan: each job's expected seconds on the GPU, and the calls of a lend in order.

The rates are those the first H200 lend measured (docs/gpu-training.md): the 110 M teacher
trained at ~155 k tokens/s and the 22 M student at ~300 k in bf16, both scored ~3x faster than
they trained; the machine started in ~30 s, and each call cost ~15 s of the lend (5 s carrying
56 MiB, the rest the turn between calls). A token's training time is modelled as a fixed cost
(per-step work that does not shrink with the model: on the H200 the 8x smaller student was only
2x faster) plus a cost proportional to the layers x hidden² of the model, fitted to the two
measured rates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feverous_es.errors import TrainError
from feverous_es.training import engine
from gpu_queue import job as gpu_job
from gpu_queue.spec import Job

LEND_SECONDS = 780  # of the 15 minutes of device time: what a plan may use (the rest: margin)
MAX_CARRY = 8  # paths a call may carry
DEVICE_DIR = "/tmp/feverous-es-bundle"  # where each call gathers its files on the GPU machine
JOB_FILE = "job.py"  # the runner, in the bundle
ENGINE_FILE = "engine.py"  # what the runner shares with the package's trainers, beside it
SPEC_FILE = "spec.py"  # the jobs' dataclasses, which the runner reads queue.json back into
RUNNER_FILES = (JOB_FILE, ENGINE_FILE, SPEC_FILE)  # the code a bundle carries
PLAN_FILE = "plan.json"
MARGIN = 1.15  # a job's budget over its estimate: its epochs stop by it


@dataclass(frozen=True)
class Rates:
    """Measured costs of a lend (seconds, tokens per second)."""

    teacher_tokens: float = 155_000  # training, all-mpnet-base-v2 (12 x 768²)
    student_tokens: float = 300_000  # training, all-MiniLM-L6-v2 (6 x 384²)
    scoring_speedup: float = 3.0  # scoring over training, per token
    start: float = 30.0  # the machine's start
    call: float = 15.0  # a call that carries or fetches files, turn included
    load: float = 10.0  # loading a model onto the GPU
    # The student's first epoch ran 30 s slower than its others (the H200 log; the teacher's did
    # not): counted once per job and hidden size, as the kernels of a shape are tuned once.
    first_epoch: float = 30.0

    def seconds_per_token(self, layers: int, hidden: int) -> float:
        """Training time of one token for a model of ``layers`` x ``hidden``."""
        large, small = 12 * 768**2, 6 * 384**2
        slope = (1 / self.teacher_tokens - 1 / self.student_tokens) / (large - small)
        fixed = 1 / self.student_tokens - slope * small
        return fixed + slope * layers * hidden**2


H200 = Rates()


@dataclass(frozen=True)
class Estimate:
    """A job's expected seconds by phase, its budget (the estimate with a margin: its epochs
    stop by it) and the cumulative shares of the budget its phases end by."""

    job: str
    seconds: dict[str, float]
    tokens: dict[str, int]
    budget: int
    shares: list[float]


def token_counts(pairs: Sequence[dict[str, Any]], model_dir: Path, max_length: int) -> dict:
    """Tokens of each role's pairs as the model reads them (claim + premise, cut at
    ``max_length``)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    claims = tokenizer.encode_batch([p["claim"] for p in pairs], add_special_tokens=False)
    premises = tokenizer.encode_batch([p["premise"] for p in pairs], add_special_tokens=False)
    counts: dict[str, int] = {}
    for pair, claim, premise in zip(pairs, claims, premises, strict=True):
        length = min(max_length, len(claim.ids) + len(premise.ids) + 4)
        counts[pair["role"]] = counts.get(pair["role"], 0) + length
    return counts


def shape(model_dir: Path, layers: int | None) -> tuple[int, int]:
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    return layers or config["num_hidden_layers"], config["hidden_size"]


def estimate_jobs(jobs: Sequence[Job], bases: dict[str, Path], rates: Rates) -> list[Estimate]:
    """Each job's estimate from its pairs' token counts and ``rates``."""
    estimates = []
    for job in jobs:
        teacher = job.teacher
        tokens = token_counts(job.pairs, bases[teacher.base], teacher.settings.max_length)
        measured = tokens.get("valid", 0) + tokens.get("held", 0)
        pool = tokens.get("train", 0) + tokens.get("distill", 0)
        per_token = rates.seconds_per_token(*shape(bases[teacher.base], teacher.layers))
        seconds = {
            "teacher": rates.load + teacher.settings.epochs * per_token * (
                tokens.get("train", 0) + measured / rates.scoring_speedup),
            "teacher_scores": per_token * pool / rates.scoring_speedup
            * len({s.settings.temperature for s in job.students}),
        }  # fmt: skip
        warmed: set[int] = set()
        for student in job.students:
            layers, hidden = shape(bases[student.base], student.layers)
            first = 0.0 if hidden in warmed else rates.first_epoch
            warmed.add(hidden)
            seconds[student.name] = rates.load + first + student.settings.epochs * (
                rates.seconds_per_token(layers, hidden) * (pool + measured / rates.scoring_speedup)
            )  # fmt: skip
        seconds = {k: round(v, 1) for k, v in seconds.items()}
        total = sum(seconds.values())
        budget = math.ceil(total * MARGIN + gpu_job.WRITE_SECONDS)
        running, shares = seconds["teacher"], []
        shares.append(round(running / total, 4))
        running += seconds["teacher_scores"]
        for student in job.students:
            running += seconds[student.name]
            shares.append(round(running / total, 4))
        estimates.append(Estimate(job.name, seconds, tokens, budget, shares))
    return estimates


def group_files(sizes: dict[str, int], last: Sequence[str], part_bytes: int) -> list[list[str]]:
    """The files in calls of at most ``part_bytes`` and MAX_CARRY paths each, largest first;
    ``last`` (the runner and its config) go in the final call, which runs the queue."""
    groups: list[list[str]] = []
    loads: list[int] = []
    for name in sorted((n for n in sizes if n not in last), key=lambda n: -sizes[n]):
        for i, group in enumerate(groups):
            if loads[i] + sizes[name] <= part_bytes and len(group) < MAX_CARRY:
                group.append(name)
                loads[i] += sizes[name]
                break
        else:
            groups.append([name])
            loads.append(sizes[name])
    final = sum(sizes[n] for n in last)
    # the runner's files ride in the last call, with the lightest group they fit beside
    fitting = [
        i for i, group in enumerate(groups)
        if loads[i] + final <= part_bytes and len(group) + len(last) <= MAX_CARRY
    ]  # fmt: skip
    if not fitting:
        return [*groups, list(last)]
    chosen = min(fitting, key=loads.__getitem__)
    return [*(g for i, g in enumerate(groups) if i != chosen), groups[chosen] + list(last)]


PER_FILE = (["bases"], ["rates"], ["ort"])  # folders of parts and graphs: carried file by file


def carried_paths(sizes: dict[str, int]) -> dict[str, int]:
    """The paths a call carries (8 at most): each weight part or graph on its own (they fill
    the calls), each other folder as one path (a job's pairs, the wheels, small files)."""
    paths: dict[str, int] = {}
    for name, size in sizes.items():
        folders = name.split("/")[:-1]
        key = "/".join(folders[:2]) if folders and folders not in PER_FILE else name
        paths[key] = paths.get(key, 0) + size
    return paths


WHEELS_INSTALL = (
    f"python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "
    f"{DEVICE_DIR}/wheels/*.whl"
)  # the carried libraries, installed on the machine


def run_command(wheels: bool) -> str:
    """The command that runs the queue on the machine (the bundle already gathered)."""
    command = f"{WHEELS_INSTALL} && export PYTHONPATH=/tmp/site && " if wheels else ""
    return command + f"PYTHONUNBUFFERED=1 python3 {DEVICE_DIR}/{JOB_FILE} {DEVICE_DIR} $OUT"


def copy_command(carry: Sequence[str], bundle: Path) -> str:
    """A call's copies of its carried paths into the machine's bundle folder, each kept in its
    folder below the bundle (``bases/…``)."""
    copies = []
    for path in carry:
        folder = Path(path).relative_to(bundle).parent
        target = DEVICE_DIR if folder == Path(".") else f"{DEVICE_DIR}/{folder.as_posix()}"
        copies.append(f"mkdir -p {target} && cp -r {path} {target}/")
    return " && ".join(copies)


def lay_out(
    bundle: Path,
    jobs: Sequence[dict[str, Any]],
    part_bytes: int,
    *,
    wheels: bool,
    rates: Rates,
    rates_job: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The lend's calls in order — the transfers (the last one runs the queue), more runs while
    jobs wait, the fetches, then the GPU rates job's transfers (the last one runs it) — each
    with its carry list, command and expected seconds (a run call: its jobs' estimates, and at
    their budgets); each job's estimate; the expected total against :data:`LEND_SECONDS`, and
    the total if every job ran to its budget (the rates job apart: it runs when a lend has time
    left)."""
    from gpu_queue.rates import is_rates_file

    every = {
        str(p.relative_to(bundle)): p.stat().st_size
        for p in sorted(bundle.rglob("*")) if p.is_file() and p.name != PLAN_FILE
    }  # fmt: skip
    sizes = {name: size for name, size in every.items() if not is_rates_file(name)}
    paths = carried_paths(sizes)
    groups = group_files(paths, [*RUNNER_FILES, gpu_job.CONFIG_FILE], part_bytes)
    calls: list[dict[str, Any]] = []
    for group in groups:
        carry = [f"{bundle.as_posix()}/{name}" for name in group]
        calls.append({"what": "carry", "carry": carry, "bytes": sum(paths[n] for n in group),
                      "seconds": rates.call,
                      "command": f"{copy_command(carry, bundle)} && ls {DEVICE_DIR}"})  # fmt: skip
    too_long = [j["name"] for j in jobs if j["budget_seconds"] > gpu_job.CALL_SECONDS]
    if too_long:
        raise TrainError(
            f"the {too_long[0]} job's budget passes a call's {gpu_job.CALL_SECONDS} s: give it "
            "fewer epochs or pairs (no call could finish it)"
        )
    # As the runner decides (its clock starts after the copies): a job joins a call while the
    # budgets so far leave it room.
    runs: list[list[dict[str, Any]]] = [[]]
    for job in jobs:
        used = sum(j["budget_seconds"] for j in runs[-1])
        if runs[-1] and used + job["budget_seconds"] > gpu_job.CALL_SECONDS:
            runs.append([])
        runs[-1].append(job)
    first = calls[-1]
    first["what"] = "carry and run"
    first["command"] = f"{copy_command(first['carry'], bundle)} && {run_command(wheels)}"
    for number, run in enumerate(runs):
        if number:
            calls.append({"what": "run", "carry": [], "command": run_command(wheels)})
        expected = sum(sum(j["plan"]["seconds"].values()) for j in run)
        calls[-1].update({
            "runs": [j["name"] for j in run],
            "seconds": round(rates.call + expected),
            "budget_seconds": round(rates.call + sum(j["budget_seconds"] for j in run)),
        })  # fmt: skip
    calls += [
        {"what": "fetch", "carry": [], "seconds": rates.call,
         "command": "the next entry of the last run's queue-report.json `fetch` list"}
        for _ in range(expected_fetches(runs))
    ]  # fmt: skip
    total = rates.start + sum(c["seconds"] for c in calls)
    worst = rates.start + sum(c.get("budget_seconds", c["seconds"]) for c in calls)
    if rates_job is not None:
        calls += rates_calls(bundle, every, rates_job, part_bytes, rates)
    for number, call in enumerate(calls, 1):
        call["call"] = number
    return {
        "calls": calls,
        "jobs": {j["name"]: {"budget_seconds": j["budget_seconds"], **j["plan"]} for j in jobs},
        "seconds": round(total),  # expected: the jobs' estimates
        "seconds_at_budgets": round(worst),  # every job running to its budget
        "lend_seconds": LEND_SECONDS,
        "fits_lend": total <= LEND_SECONDS,
    }


RATES_RUN_SECONDS = 90.0  # installing the wheel, two models' sessions, 20 s a rate, parity


def rates_calls(
    bundle: Path, every: dict[str, int], job: dict[str, Any], part_bytes: int, rates: Rates
) -> list[dict[str, Any]]:
    """The rates job's calls, after everything else: its files (and the runner, the queue's
    config and the wheels again, so they stand alone on a fresh machine) in transfers, the last
    of which installs the wheel and runs it (its results come back with it)."""
    from gpu_queue.rates import RUNNER, install_command, is_rates_file

    own = {name: size for name, size in every.items() if is_rates_file(name)}
    shared = [*RUNNER_FILES, gpu_job.CONFIG_FILE]
    paths = carried_paths({**own, **{n: every[n] for n in shared}})
    wheels = {n: s for n, s in every.items() if n.startswith("wheels/")}
    if wheels:
        paths["wheels"] = sum(wheels.values())
        shared.append("wheels")
    calls: list[dict[str, Any]] = []
    for group in group_files(paths, [RUNNER, *shared], part_bytes):
        carry = [f"{bundle.as_posix()}/{name}" for name in group]
        calls.append({"what": "carry (rates)", "carry": carry, "seconds": rates.call,
                      "bytes": sum(paths[n] for n in group),
                      "command": f"{copy_command(carry, bundle)} && ls {DEVICE_DIR}"})  # fmt: skip
    site = "/tmp/ort:/tmp/site" if wheels else "/tmp/ort"
    install_wheels = f"{WHEELS_INSTALL} && " if wheels else ""
    last: list[str] = calls[-1]["carry"]
    calls[-1].update({
        "what": "carry and run rates",
        "seconds": round(rates.call + RATES_RUN_SECONDS),
        "command": f"{copy_command(last, bundle)} && {install_wheels}"
        f"{install_command(job, DEVICE_DIR)} && PYTHONPATH={site} PYTHONUNBUFFERED=1 "
        f"python3 {DEVICE_DIR}/{RUNNER} {DEVICE_DIR} $OUT",
    })  # fmt: skip
    return calls


def result_files(job: dict[str, Any]) -> list[tuple[str, int]]:
    """The files a job will return, with their expected sizes: its report, and per student a
    config and its fp16 weights in parts of the return size."""
    files = [(f"{job['name']}/{engine.REPORT_FILE}", 200_000)]
    part = job["return_part_bytes"]
    for student in job["students"]:
        files.append((f"{job['name']}/{student['name']}-config.json", 1_000))
        size = student["fp16_bytes"]
        stem = f"{job['name']}/{student['name']}.safetensors"
        files += [(f"{stem}.{n:02d}", min(part, size - n * part))
                  for n in range(math.ceil(size / part))]  # fmt: skip
    return files


def expected_fetches(runs: Sequence[Sequence[dict[str, Any]]]) -> int:
    """The fetch calls after the runs: each run call brings back what fits beside its own two
    files (as :func:`~.job.run` does); the rest comes in calls of the return limits."""
    left = 0
    for run in runs:
        _, later = gpu_job.split_return(gpu_job.pack([f for j in run for f in result_files(j)]))
        left += len(later)
    return left
