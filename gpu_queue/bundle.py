"""Writing the GPU queue's bundle: the bases once, each job's pairs and settings, the plan.

A bundle folder (git-ignored, relative to the repository root: the device tool carries paths from
there) holds:

* ``bases/…``: each base model a job fine-tunes, **once** however many jobs use it: its small
  files and its weights in parts of at most ``part_bytes`` — fp16 (3 more mantissa bits than
  bf16 at the same size; every weight is checked to be inside fp16's range), or as the int8-rows
  transfer format a fine-tuned teacher came back in (:data:`~.job.INT8_ROWS`);
* ``<job>/pairs.jsonl.gz``: each job's pairs with their roles;
* ``wheels/``: this machine's ``transformers`` / ``tokenizers`` / ``huggingface_hub`` wheels for
  the GPU machine's Python (its own versions differ), when ``wheels`` is set;
* ``job.py`` (the queue runner) with ``engine.py`` and ``spec.py`` beside it (the training
  loop's pieces and the jobs' dataclasses it shares with the package), ``queue.json`` (the jobs
  in order, each model's ``Settings`` as ``asdict`` wrote them, the bases, the sha256 of
  every file) and ``plan.json`` (:mod:`.plan`: the calls, in order, with their files, commands
  and expected seconds).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import shutil
from collections.abc import Sequence
from dataclasses import asdict
from importlib.metadata import version
from pathlib import Path
from typing import Any

from feverous_es.errors import TrainError
from feverous_es.runtime.files import sha256_file
from feverous_es.training import engine
from feverous_es.training.bases import base_name
from gpu_queue import job as gpu_job
from gpu_queue import plan, spec
from gpu_queue import rates as gpu_rates
from gpu_queue.plan import (
    ENGINE_FILE,
    JOB_FILE,
    PLAN_FILE,
    RUNNER_FILES,
    SPEC_FILE,
)
from gpu_queue.spec import Job, Model

MIB = 1 << 20
# A call carries 64 MiB with the working tree (4.6 MiB without the models, which the calls leave
# out); the first lend carried 58 MiB calls. Weights go in half-call parts, so that the
# bases, pairs and wheels pack into as few calls as their bytes need.
SEND_PART_BYTES = 58 * MIB
RETURN_PART_BYTES = 16 * MIB  # a file that comes back: at most 16 MiB
PAIRS_FILE = "pairs.jsonl.gz"
# The GPU machine's Python (3.12, manylinux x86-64) takes these wheels at this machine's versions.
WHEEL_PACKAGES = ("transformers", "tokenizers", "huggingface_hub")
DEVICE_PYTHON = "312"


def fp16_weights(model_dir: Path) -> bytes:
    """The model's safetensors weights in fp16 (a weight outside fp16's range is an error)."""
    import numpy as np
    from safetensors.numpy import load_file, save

    tensors = load_file(str(model_dir / "model.safetensors"))
    out = {}
    for name, tensor in tensors.items():
        if tensor.dtype.kind == "f":
            if tensor.size and float(np.abs(tensor).max()) >= 65504:
                raise TrainError(f"{model_dir}: weight {name} is outside fp16's range")
            tensor = tensor.astype(np.float16)
        out[name] = tensor
    return save(out)


def write_base(
    model_dir: Path, bundle: Path, key: str, part_bytes: int, *, weights: bytes | None = None,
    weights_format: str = "fp16",
) -> dict[str, Any]:  # fmt: skip
    """A base model's small files and weight parts (of half ``part_bytes``, a call's load) into
    ``bundle/bases``; its queue entry. ``weights``: the bytes to send (default: the model's
    weights in fp16)."""
    folder = bundle / "bases"
    (folder / "files").mkdir(parents=True, exist_ok=True)  # the small files: one carried path
    files = {}  # name in the bundle -> name in the model directory
    for name in engine.MODEL_FILES:
        if (model_dir / name).is_file():
            shutil.copyfile(model_dir / name, folder / "files" / f"{key}-{name}")
            files[f"bases/files/{key}-{name}"] = name
    data = fp16_weights(model_dir) if weights is None else weights
    parts = gpu_job.write_parts(folder / f"{key}.safetensors", data, part_bytes // 2)
    return {
        "name": base_name(model_dir),
        "files": files,
        "parts": [f"bases/{p}" for p in parts],
        "weights_sha256": hashlib.sha256(data).hexdigest(),
        "format": weights_format,
        "bytes": len(data),
    }


def fp16_bytes(model_dir: Path, layers: int | None) -> int:
    """The size of a student's fp16 weights, from its base's safetensors header: every tensor,
    less the encoder layers it does not keep."""
    import re
    import struct

    with (model_dir / "model.safetensors").open("rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    numbers = {int(m.group(1)) for n in header if (m := re.search(r"encoder\.layer\.(\d+)\.", n))}
    kept = set(engine.kept_layers(len(numbers), layers)) if layers else numbers
    total = 0
    for name, tensor in header.items():
        match = re.search(r"encoder\.layer\.(\d+)\.", name)
        if name == "__metadata__" or (match and int(match.group(1)) not in kept):
            continue
        total += 2 * math.prod(tensor["shape"])
    return total + 100_000  # the head and the file's header


def download_device_wheels(folder: Path) -> list[str]:
    """The pinned libraries' wheels for the GPU machine's Python, at this machine's versions."""
    from feverous_es.runtime.wheels import download_wheels

    folder.mkdir(parents=True, exist_ok=True)
    requirements = [f"{name}=={version(name)}" for name in WHEEL_PACKAGES]
    platforms = [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
                                              "manylinux2014_x86_64")]  # fmt: skip
    download_wheels(
        [*requirements, f"--python-version={DEVICE_PYTHON}", "--implementation=cp", *platforms],
        folder, what="GPU job's library", hint="or bundle with --no-wheels",
    )  # fmt: skip
    return sorted(p.name for p in folder.glob("*.whl"))


def write_pairs(path: Path, pairs: Sequence[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for pair in pairs:
            out.write(json.dumps(pair, ensure_ascii=False) + "\n")


def write_bundle(
    bundle: Path,
    jobs: Sequence[Job],
    bases: dict[str, dict[str, Any]],
    *,
    wheels: bool = True,
    part_bytes: int = SEND_PART_BYTES,
    rates: plan.Rates = plan.H200,
    rates_from: Path | None = None,
) -> dict[str, Any]:
    """Write the whole bundle into ``bundle`` (replaced) and return its plan. ``bases``: key ->
    ``{"dir": model directory}`` (sent as fp16) or ``{"dir": …, "weights": bytes, "format":
    "int8-rows"}`` (sent as given); every base a job names must be among them. ``rates_from``:
    a dump whose texts the GPU rates job (:mod:`.rates`) measures with, at the queue's end."""
    if bundle.is_absolute():
        raise TrainError(
            f"{bundle}: give the bundle folder relative to the repository root (the GPU calls "
            "carry it from there), e.g. gpu-bundle"
        )
    unknown = {m.base for j in jobs for m in (j.teacher, *j.students)} - set(bases)
    if unknown:
        raise TrainError(f"the jobs name bases the bundle lacks: {', '.join(sorted(unknown))}")
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir(parents=True)
    used = [k for k in bases if any(k in {m.base for m in (j.teacher, *j.students)} for j in jobs)]
    entries = {
        key: write_base(
            Path(bases[key]["dir"]),
            bundle,
            key,
            part_bytes,
            weights=bases[key].get("weights"),
            weights_format=bases[key].get("format", "fp16"),
        )
        for key in used
    }
    queue_jobs = []
    for job in jobs:
        write_pairs(bundle / job.name / PAIRS_FILE, job.pairs)
        queue_jobs.append(job_entry(job, entries, {k: Path(bases[k]["dir"]) for k in used}))
    shutil.copyfile(Path(gpu_job.__file__), bundle / JOB_FILE)
    shutil.copyfile(Path(engine.__file__), bundle / ENGINE_FILE)
    shutil.copyfile(Path(spec.__file__), bundle / SPEC_FILE)
    rates_entry = (
        None if rates_from is None
        else gpu_rates.write_rates_job(bundle, rates_from, part_bytes, wheel=wheels)
    )  # fmt: skip
    estimates = plan.estimate_jobs(jobs, {k: Path(bases[k]["dir"]) for k in used}, rates)
    for entry, estimate in zip(queue_jobs, estimates, strict=True):
        entry["budget_seconds"] = estimate.budget
        entry["shares"] = estimate.shares
        entry["plan"] = asdict(estimate)
    config: dict[str, Any] = {
        "return_part_bytes": RETURN_PART_BYTES,
        "bases": entries,
        "jobs": queue_jobs,
    }
    sizes = {
        str(p.relative_to(bundle)): p.stat().st_size
        for p in sorted(bundle.rglob("*"))
        if p.is_file() and p.name not in RUNNER_FILES
        and not gpu_rates.is_rates_file(str(p.relative_to(bundle)))
    }  # fmt: skip
    config["files"] = {name: sha256_file(bundle / name) for name in sizes}
    if rates_entry is not None:
        config["rates"] = rates_entry
    if wheels:
        config["wheels"] = download_device_wheels(bundle / "wheels")
    (bundle / gpu_job.CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", "utf-8")
    calls = plan.lay_out(bundle, queue_jobs, part_bytes, wheels=wheels, rates=rates,
                         rates_job=rates_entry)  # fmt: skip
    (bundle / PLAN_FILE).write_text(json.dumps(calls, indent=2) + "\n", "utf-8")
    return calls


def job_entry(
    job: Job, bases: dict[str, dict[str, Any]], model_dirs: dict[str, Path]
) -> dict[str, Any]:
    """A job as ``queue.json`` lists it (the runner's settings; the rest stays here)."""

    def model(m: Model) -> dict[str, Any]:
        entry = {"base": m.base, "base_name": bases[m.base]["name"], "settings": asdict(m.settings)}
        if m is job.teacher:
            return entry
        size = fp16_bytes(model_dirs[m.base], m.layers)
        return {**entry, "name": m.name, "layers": m.layers, "fp16_bytes": size}

    roles: dict[str, int] = {}
    for pair in job.pairs:
        roles[pair["role"]] = roles.get(pair["role"], 0) + 1
    return {
        "name": job.name,
        "about": job.about,
        "labels": list(job.labels),
        "recall_at": job.recall_at,
        "return_part_bytes": RETURN_PART_BYTES,
        "pairs": f"{job.name}/{PAIRS_FILE}",
        "roles": roles,
        "teacher": model(job.teacher),
        "students": [model(s) for s in job.students],
        "options": job.options,
    }
