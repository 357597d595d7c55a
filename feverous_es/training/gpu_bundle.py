"""What travels to a GPU for the verdict's teacher and student, and what comes back.

``feverous-es train verdict … --folds 0 --bundle DIR`` builds the command's pairs (the same
pairs, split and cap as a CPU training) and writes DIR for :mod:`~feverous_es.training.gpu_job`:

* ``pairs.jsonl.gz``: each pair with its role (:func:`pair_roles`): the teacher's training
  pairs (the command's training pool less a validation share), the validation pairs that choose
  the epochs, the held-out pairs (reported only), and the distillation pool's other pairs;
* the teacher's and the student's base weights as fp16 safetensors split into parts of at most
  ``part_bytes`` (fp16 keeps 3 more mantissa bits than bf16 at the same size; every weight of
  these encoders is far inside fp16's range, which is checked), with their config and tokenizer;
* the pinned ``transformers`` / ``tokenizers`` / ``huggingface_hub`` wheels this machine runs,
  for the GPU machine's Python (the GPU's own versions differ), when ``wheels`` is set;
* ``job.py`` (the GPU script), ``job.json`` (settings, the sha256 of every file) and
  ``transfers.json``: which files each call to the GPU machine carries, in order, each call's
  files under the transfer limit, and the last call's command that runs the job.

``feverous-es train verdict … --folds 0 --from-gpu RESULTS`` then takes the student the job
returned (:func:`install_student`) and goes on as after a CPU training: export, parity,
held-out accuracy, the card.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from feverous_es.errors import TrainError
from feverous_es.runtime.files import sha256_file
from feverous_es.training import entailment_data as data
from feverous_es.training import gpu_job
from feverous_es.training.bases import base_name
from feverous_es.training.datasets import hash_unit

MIB = 1 << 20
SEND_PART_BYTES = 56 * MIB  # a call carries 64 MiB with the working tree (~5 MiB without models)
RETURN_PART_BYTES = 16 * MIB  # a file that comes back: at most 16 MiB, 8 files, 64 MiB a call
MAX_CARRY = 8  # paths a call may carry
# The job's time: a call runs 10 minutes at most, and the session's 15 minutes of device
# time also pay the machine's start and the transfers.
JOB_SECONDS = 420
PAIRS_FILE = "pairs.jsonl.gz"
TRANSFERS_FILE = "transfers.json"
JOB_FILE = "job.py"
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "vocab.txt")  # fmt: skip
# The GPU machine's Python (3.12, manylinux x86-64) takes these wheels at this machine's versions.
WHEEL_PACKAGES = ("transformers", "tokenizers", "huggingface_hub")
DEVICE_PYTHON = "312"


@dataclass(frozen=True)
class TeacherSettings:
    """The teacher's fine-tuning on the GPU: batch ≥ 64 (at 16, per-step Python work, not the
    GPU, set the pace of the first GPU run), bf16, up to ``epochs`` with the best kept."""

    epochs: int = 4
    batch_size: int = 64
    learning_rate: float = 2e-5
    warmup: float = 0.06
    max_length: int = 256
    freeze_embeddings: bool = False
    score_batch_size: int = 256


@dataclass(frozen=True)
class StudentSettings(TeacherSettings):
    """The student's distillation: the teacher's probabilities at ``temperature``, weighted
    ``alpha`` against the gold label."""

    learning_rate: float = 8e-5
    freeze_embeddings: bool = True
    temperature: float = 2.0
    alpha: float = 0.5


# ----------------------------------------------------------------------------- writing


VALID_SHARE = 0.08  # of the training claims, by claim id: chooses the epochs on the GPU


def pair_roles(
    pairs: Sequence[data.Pair], train: Sequence[data.Pair], seed: int
) -> list[tuple[str, data.Pair]]:
    """Each pair's role in the job: ``valid`` (a seeded VALID_SHARE of the training pool's
    claims: it chooses the epochs, so that the held-out claims stay for the final figure),
    ``train`` (the rest of the pool), ``held`` (held out and read by the verdict: reported
    only), ``distill`` (any other pair not held out, nor of a validation claim)."""

    def valid(p: data.Pair) -> bool:
        return hash_unit(seed, p.source, p.id, "valid") < VALID_SHARE

    pooled = {p.key for p in train}
    roles = [("valid" if valid(p) else "train", p) for p in train]
    roles += [("held", p) for p in pairs if p.held_out and p.train]
    roles += [
        ("distill", p) for p in pairs
        if not p.held_out and p.key not in pooled and not valid(p)
    ]  # fmt: skip
    return roles


def write_pair_file(path: Path, roles: Sequence[tuple[str, data.Pair]]) -> None:
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for role, p in roles:
            row = {"role": role, "key": p.key, "source": p.measured_as, "claim": p.claim,
                   "premise": p.premise, "label": p.label}  # fmt: skip
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


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


def write_model(model_dir: Path, bundle: Path, prefix: str, part_bytes: int) -> dict[str, Any]:
    """A base model's small files and fp16 weight parts into ``bundle``; its job.json entry."""
    files = {}  # name in the bundle -> name in the model directory
    for name in MODEL_FILES:
        if (model_dir / name).is_file():
            shutil.copyfile(model_dir / name, bundle / f"{prefix}-{name}")
            files[f"{prefix}-{name}"] = name
    weights = fp16_weights(model_dir)
    parts = gpu_job.write_parts(bundle / f"{prefix}.safetensors", weights, part_bytes)
    return {
        "name": base_name(model_dir),
        "files": files,
        "parts": parts,
        "weights_sha256": hashlib.sha256(weights).hexdigest(),
    }


def download_device_wheels(folder: Path) -> list[str]:
    """The pinned libraries' wheels for the GPU machine's Python, at this machine's versions."""
    from feverous_es.runtime.wheels import download_wheels

    folder.mkdir(parents=True, exist_ok=True)
    requirements = [f"{name}=={version(name)}" for name in WHEEL_PACKAGES]
    platforms = [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
                                              "manylinux2014_x86_64")]  # fmt: skip
    download_wheels(
        [*requirements, f"--python-version={DEVICE_PYTHON}", "--implementation=cp", *platforms],
        folder, what="GPU job's library", hint="or run the bundle without --wheels",
    )  # fmt: skip
    return sorted(p.name for p in folder.glob("*.whl"))


def plan_transfers(sizes: dict[str, int], last: Sequence[str], part_bytes: int) -> list[list[str]]:
    """The files in calls of at most ``part_bytes`` and MAX_CARRY paths each, largest first;
    ``last`` (the job and its config) go in the final call, which runs the job."""
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
    # the job's files ride in the last call, with the lightest group they fit beside
    fitting = [
        i for i, group in enumerate(groups)
        if loads[i] + final <= part_bytes and len(group) + len(last) <= MAX_CARRY
    ]  # fmt: skip
    if not fitting:
        return [*groups, list(last)]
    chosen = min(fitting, key=loads.__getitem__)
    return [*(g for i, g in enumerate(groups) if i != chosen), groups[chosen] + list(last)]


DEVICE_DIR = "/tmp/feverous-es-bundle"  # where each call gathers its files on the GPU machine


def transfer_calls(bundle: Path, groups: Sequence[Sequence[str]], wheels: bool) -> list[dict]:
    """Each call to the GPU machine: the bundle paths it carries (relative to the repository
    root, as the device tool takes them) and its command; the last one runs the job."""
    calls = []
    for number, group in enumerate(groups, 1):
        carry = [f"{bundle.as_posix()}/{name}" for name in group]
        command = f"mkdir -p {DEVICE_DIR} && cp -r {' '.join(carry)} {DEVICE_DIR}/"
        if number == len(groups):
            if wheels:
                command += (
                    f" && python3 -m pip install -q --no-index --no-deps --no-compile "
                    f"--target /tmp/site {DEVICE_DIR}/wheels/*.whl && export PYTHONPATH=/tmp/site"
                )
            command += f" && PYTHONUNBUFFERED=1 python3 {DEVICE_DIR}/{JOB_FILE} {DEVICE_DIR} $OUT"
        else:
            command += f" && ls {DEVICE_DIR}"
        calls.append({"call": number, "carry": carry, "command": command})
    return calls


def write_bundle(
    bundle: Path,
    pairs: Sequence[data.Pair],
    train: Sequence[data.Pair],
    *,
    teacher: Path,
    student: Path,
    teacher_settings: TeacherSettings,
    student_settings: StudentSettings,
    seed: int,
    wheels: bool = True,
    part_bytes: int = SEND_PART_BYTES,
    budget_seconds: int = JOB_SECONDS,
) -> dict[str, Any]:
    """Write the whole bundle into ``bundle`` (replaced) and return its ``job.json``;
    ``budget_seconds``: the job's training stops its epochs in time to end within it."""
    if bundle.is_absolute():
        raise TrainError(
            f"--bundle {bundle}: give it relative to the repository root (the GPU calls carry "
            "it from there), e.g. --bundle gpu-bundle"
        )
    shutil.rmtree(bundle, ignore_errors=True)
    bundle.mkdir(parents=True)
    roles = pair_roles(pairs, train, seed)
    write_pair_file(bundle / PAIRS_FILE, roles)
    shutil.copyfile(Path(gpu_job.__file__), bundle / JOB_FILE)
    config: dict[str, Any] = {
        "pairs": PAIRS_FILE,
        "return_part_bytes": RETURN_PART_BYTES,
        "budget_seconds": budget_seconds,
        "teacher": write_model(teacher, bundle, "teacher", part_bytes),
        "student": write_model(student, bundle, "student", part_bytes),
        "roles": dict(Counter(role for role, _ in roles)),
    }
    config["teacher"]["settings"] = {**asdict(teacher_settings), "seed": seed}
    config["student"]["settings"] = {**asdict(student_settings), "seed": seed}
    sizes = {p.name: p.stat().st_size for p in bundle.iterdir() if p.name != JOB_FILE}
    config["files"] = {name: sha256_file(bundle / name) for name in sorted(sizes)}
    if wheels:
        config["wheels"] = download_device_wheels(bundle / "wheels")
        sizes["wheels"] = sum(p.stat().st_size for p in (bundle / "wheels").iterdir())
    (bundle / gpu_job.CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", "utf-8")
    last = [JOB_FILE, gpu_job.CONFIG_FILE]
    sizes[JOB_FILE] = (bundle / JOB_FILE).stat().st_size
    sizes[gpu_job.CONFIG_FILE] = (bundle / gpu_job.CONFIG_FILE).stat().st_size
    groups = plan_transfers(sizes, last, part_bytes)
    calls = transfer_calls(bundle, groups, wheels)
    for call, group in zip(calls, groups, strict=True):
        call["bytes"] = sum(sizes[name] for name in group)
    (bundle / TRANSFERS_FILE).write_text(json.dumps(calls, indent=2) + "\n", "utf-8")
    return config


# ----------------------------------------------------------------------------- reading back


def install_student(results: Path, student_base: Path, into: Path) -> dict[str, Any]:
    """The student the job returned as a Hugging Face model in ``into`` (fp32 weights, the
    job's config, the base's tokenizer); returns the job's report. A missing or torn file is a
    one-line TrainError."""
    import numpy as np
    from safetensors.numpy import load, save_file

    report_path = results / gpu_job.REPORT_FILE
    if not report_path.is_file():
        raise TrainError(f"{results} holds no {gpu_job.REPORT_FILE}: not a GPU job's results")
    report = json.loads(report_path.read_text(encoding="utf-8"))
    missing = [n for n in report["student_parts"] if not (results / n).is_file()]
    if missing or not (results / gpu_job.STUDENT_CONFIG).is_file():
        raise TrainError(f"{results} lacks {(missing or [gpu_job.STUDENT_CONFIG])[0]}")
    weights = b"".join((results / n).read_bytes() for n in report["student_parts"])
    if hashlib.sha256(weights).hexdigest() != report["student_sha256"]:
        raise TrainError(f"the student's weights in {results} do not match their sha256")
    tensors = {k: v.astype(np.float32) if v.dtype == np.float16 else v
               for k, v in load(weights).items()}  # fmt: skip
    into.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(into / "model.safetensors"))
    shutil.copyfile(results / gpu_job.STUDENT_CONFIG, into / "config.json")
    for name in MODEL_FILES:  # the tokenizer's files; the config is the job's
        if name != "config.json" and (student_base / name).is_file():
            shutil.copyfile(student_base / name, into / name)
    return report


TEACHER_PARTS = "teacher.int8rows.safetensors"  # + ".00", ".01", … (byte slices of one file)
SUMS_FILE = "SHA256SUMS"
SCALE_SUFFIX = ".__scale__"


def read_teacher(results: Path, into: Path) -> dict[str, Any]:
    """The teacher a GPU job left on its machine, as fetched into ``results`` (its weights in the
    transfer format of ``../shared/gpu/README.md``: every large matrix int8 with one fp16 scale
    per row, the rest fp16, in byte slices), written to ``into`` as a Hugging Face model with
    fp32 weights, its config and tokenizer. Every file is checked against ``SHA256SUMS`` first.
    Returns what was read: the tensors restored from int8 and the parts' bytes."""
    import numpy as np
    from safetensors.numpy import load, save_file

    sums = _read_sums(results)
    parts = sorted(n for n in sums if n.startswith(TEACHER_PARTS + "."))
    if not parts or "config.json" not in sums:
        raise TrainError(
            f"{results} names no {TEACHER_PARTS}.NN parts and config.json in {SUMS_FILE}"
        )
    for name, expected in sums.items():
        path = results / name
        if not path.is_file():
            raise TrainError(f"{results} lacks {name} (named in {SUMS_FILE})")
        if sha256_file(path) != expected:
            raise TrainError(f"{path} does not match its sha256 in {SUMS_FILE}: fetch it again")
    stored = load(b"".join((results / n).read_bytes() for n in parts))
    tensors: dict[str, Any] = {}
    restored = 0
    for name, value in stored.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = stored.get(name + SCALE_SUFFIX)
        if scale is not None:  # int8 rows: weight = q * scale[row]
            restored += 1
            value = value.astype(np.float32) * scale.astype(np.float32)[:, None]
        tensors[name] = value.astype(np.float32) if value.dtype == np.float16 else value
    into.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(into / "model.safetensors"))
    for name in MODEL_FILES:
        if (results / name).is_file():
            shutil.copyfile(results / name, into / name)
    return {
        "from": str(results),
        "tensors": len(tensors),
        "int8_rows_tensors": restored,
        "parts_bytes": sum((results / n).stat().st_size for n in parts),
    }


def _read_sums(results: Path) -> dict[str, str]:
    """``SHA256SUMS`` (``sha256  name`` lines) as name -> sha256."""
    path = results / SUMS_FILE
    if not path.is_file():
        raise TrainError(f"{results} holds no {SUMS_FILE}: not a fetched GPU teacher")
    sums: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.strip().partition("  ")
        if digest and name:
            sums[name] = digest
    return sums
