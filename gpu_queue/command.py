"""``python -m gpu_queue bundle``: the queue's jobs built from the data, written as one bundle."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from feverous_es.errors import TrainError
from feverous_es.params import EXISTING, EXISTING_FILE, EXISTING_FOLDER, FOLDER, option
from feverous_es.training import bases as base_models
from feverous_es.training.gpu_results import int8_rows_weights
from feverous_es.training.progress import QUIET, Progress
from gpu_queue import bundle as gpu_bundle
from gpu_queue import jobs as gpu_jobs
from gpu_queue.spec import Job

# The queue's order: what moves the figures most first; the GPU's rates for the planner last.
TRAINING_JOBS = ("ranker", "reader")
JOBS = (*TRAINING_JOBS, "rates")
SEED = 13  # the split every shipped model and benchmark shares (35 % held out by claim id)
HOLDOUT = 0.35


def _job_names(context: click.Context, param: click.Parameter, values: Sequence[str]) -> tuple:
    """``--jobs ranker,reader`` (or the option again for each): the names, in order."""
    return tuple(name.strip() for value in values for name in value.split(",") if name.strip())


@dataclass(kw_only=True)
class QueueOptions:
    """What the queue's jobs are built from; each field with a flag is an option of `bundle`.
    ``claims``: the claim files split into training and held-out claims (FM2, FEVEROUS-S,
    TabFact dev; the ranker reads those with gold sentences); ``train_claims`` and ``pairs`` as
    ``train verdict`` takes them (the command reads all three from ``--data``)."""

    index: Path = option(
        type=EXISTING,
        help="The index the jobs' evidence and candidates are retrieved from (the mini index).",
    )  # fmt: skip
    work: Path = option(
        type=FOLDER,
        help="Cache of the retrievals (a rerun reads them back); keep it outside the repository.",
    )  # fmt: skip
    bundle: Path = option(
        Path("gpu-bundle"), flags=("--out",), type=FOLDER,
        help="The bundle folder, relative to the repository root (git-ignored).",
    )  # fmt: skip
    claims: list[Path]
    train_claims: list[Path] = field(default_factory=list)
    pairs: list[Path] = field(default_factory=list)
    contrastive: Path | None = option(
        None, flags=("--wiki",), type=EXISTING_FILE,
        help="The wiki.db whose leads make the reader's contrastive, attribute and relation "
        "pairs.",
    )  # fmt: skip
    teacher_from: Path | None = option(
        None, type=EXISTING_FOLDER,
        help="The fetched large reader (int8 rows, SHA256SUMS) the reader job's teacher "
        "continues from [default: all-mpnet-base-v2, 4 epochs].",
    )  # fmt: skip
    jobs: Sequence[str] = option(
        TRAINING_JOBS, multiple=True, callback=_job_names,
        help="The jobs to bundle, comma-separated; they run in the queue's order (rates, the "
        "GPU's rates for `plan`, needs --wiki and runs after the others).",
    )  # fmt: skip
    store: str = "embedded"
    limit: int | None = option(None, type=int, help="Claims per file (a seeded sample).")
    retrieved: int = 300  # table-file claims read against retrieved evidence
    per_source: int = 6000
    # Each failure class's training claims read against the pipeline's evidence for them
    # (class_evidence.py): what a CPU retrain on the prepared pairs alone lacked
    class_evidence: int = 150
    max_length: int = 192  # the reader's (what the shipped readers read)
    wheels: bool = option(
        True,
        help="Bundle this machine's transformers/tokenizers wheels for the GPU machine's Python.",
    )  # fmt: skip
    part_bytes: int = gpu_bundle.SEND_PART_BYTES
    base_dirs: dict[str, Path] = field(default_factory=dict)  # key -> model dir (tests: tiny)

    def check(self) -> None:
        unknown = [j for j in self.jobs if j not in JOBS]
        if unknown or not self.jobs:
            raise TrainError(f"--jobs takes {', '.join(JOBS)}, not {', '.join(unknown) or '—'}")
        for path in [*self.claims, *self.train_claims, *self.pairs]:
            if not Path(path).is_file():
                raise TrainError(f"{path} is not a file: the queue's data is missing")
        if "rates" in self.jobs and self.contrastive is None:
            raise TrainError(
                "the rates job embeds the dump's texts: give --wiki, or leave rates out of --jobs"
            )


def build_jobs(options: QueueOptions, progress: Progress = QUIET) -> list[Job]:
    """The queue's jobs in order (phases ``candidates`` and ``evidence``: the retrievals,
    cached in ``work`` so that a rerun reads them back)."""
    options.check()
    wanted = [name for name in JOBS if name in options.jobs]
    jobs: list[Job] = []
    recipe = {"claims": [Path(p).name for p in options.claims], "holdout": HOLDOUT,
              "seed": SEED, "limit": options.limit}  # fmt: skip
    if "ranker" in wanted:
        from feverous_es.training.rerank.data import read_gold_claims
        from feverous_es.training.retrieved import collect_retrieved

        with_gold = [p for p in options.claims if not _names_gold_tables(p)]
        claims = read_gold_claims(with_gold, limit=options.limit, seed=SEED)
        pools = collect_retrieved(
            claims, options.index, options.work / "candidates.jsonl", store=options.store,
            on_progress=progress.counter("candidates"),
        )  # fmt: skip
        jobs.append(gpu_jobs.ranker_job(pools, seed=SEED, holdout=HOLDOUT, options=recipe))
    if "reader" in wanted:
        pairs, train, verdict = _verdict_pairs(options, progress)
        jobs.append(gpu_jobs.reader_job(
            pairs, train, seed=SEED, max_length=options.max_length,
            from_teacher=options.teacher_from is not None, options=verdict,
        ))  # fmt: skip
    return jobs


def _names_gold_tables(path: Path) -> bool:
    """Whether a claim file is a TabFact one (its claims name ``gold_tables``; no gold
    sentences for the ranker)."""
    from feverous_es.eval.claims import read_claims

    return any(getattr(record, "gold_tables", None) for record in read_claims(path))


def _verdict_pairs(options: QueueOptions, progress: Progress) -> tuple[list, list, dict]:
    """The verdict trainer's pairs and training pool, built as ``train verdict``
    builds them (docs/gpu-training.md names the options), and those options."""
    from feverous_es.training.verdict.options import PairMix, RunOptions, TrainSettings
    from feverous_es.training.verdict.pairs import build_pairs, pair_recipe, training_pool

    settings = TrainSettings(base=_base_dir(options, "minilm"), max_length=options.max_length,
                             seed=SEED)  # fmt: skip
    run = RunOptions(
        claims=list(options.claims), index=options.index, out=options.work / "verdict-out",
        work=options.work / "verdict", settings=settings, holdout=HOLDOUT, limit=options.limit,
        store=options.store,
        mix=PairMix(
            train_claims=list(options.train_claims), pairs=list(options.pairs),
            per_source=options.per_source, retrieved=options.retrieved,
            contrastive=options.contrastive, attributes=options.contrastive is not None,
            windows=options.contrastive is not None, relations=options.contrastive is not None,
            class_evidence=options.class_evidence if options.contrastive is not None else 0,
        ),
    )  # fmt: skip
    run.check()
    pairs = build_pairs(run, progress.counter("evidence"))
    recipe = pair_recipe(run) | {"per_source": run.mix.per_source, "max_length": options.max_length}
    for files in ("claims", "train_claims", "pairs"):  # names, not this machine's paths
        recipe[files] = [Path(p).name for p in recipe[files]]
    recipe["contrastive"] = Path(recipe["contrastive"]).name
    return pairs, training_pool(pairs, run, validation=True), recipe


def _base_dir(options: QueueOptions, key: str) -> Path:
    return options.base_dirs.get(key) or base_models.resolve_base(key)


def write_queue(options: QueueOptions, progress: Progress = QUIET) -> dict[str, Any]:
    """Build the jobs and write the bundle; returns its plan."""
    jobs = build_jobs(options, progress)
    bases: dict[str, dict[str, Any]] = {
        key: {"dir": _base_dir(options, key)}
        for key in {m.base for j in jobs for m in (j.teacher, *j.students)} - {"verdict-large"}
    }
    if options.teacher_from is not None and any(j.teacher.base == "verdict-large" for j in jobs):
        bases["verdict-large"] = {
            "dir": options.teacher_from, "weights": int8_rows_weights(options.teacher_from),
            "format": "int8-rows",
        }  # fmt: skip
    return gpu_bundle.write_bundle(
        options.bundle, jobs, bases, wheels=options.wheels, part_bytes=options.part_bytes,
        rates_from=options.contrastive if "rates" in options.jobs else None,
    )  # fmt: skip
