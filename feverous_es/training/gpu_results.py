"""Reading back what a GPU job returned: its report, its students, a fetched teacher.

A job's results folder (``OUT/<job>/`` of the queue's calls, or ``../shared/gpu/<job>-<device>-
<date>/`` for a run made elsewhere) holds ``report.json`` and, per student, ``<name>-config.json``
and its fp16 weights in parts. The first reader job ran before the queue: its report
names one student at the top level (``student_parts``, ``student_sha256``); :func:`read_report`
reads both layouts as one.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from feverous_es.errors import TrainError
from feverous_es.runtime.files import sha256_file
from feverous_es.training import engine

TEACHER_PARTS = "teacher.int8rows.safetensors"  # + ".00", ".01", … (byte slices of one file)
SUMS_FILE = "SHA256SUMS"


def read_report(results: Path) -> dict[str, Any]:
    """A job's ``report.json``, its students under ``students`` and the teacher's base under
    ``teacher.base`` whichever layout it was written in."""
    path = results / engine.REPORT_FILE
    if not path.is_file():
        raise TrainError(f"{results} holds no {engine.REPORT_FILE}: not a GPU job's results")
    report = json.loads(path.read_text(encoding="utf-8"))
    if "student" in report:  # the first reader job, before the queue
        report["students"] = {
            "student": {
                **report.pop("student"), "base": report["bases"]["student"],
                "parts": report.pop("student_parts"), "sha256": report.pop("student_sha256"),
                "config": "student-config.json",
            }
        }  # fmt: skip
    if "bases" in report:
        report["teacher"].setdefault("base", report["bases"]["teacher"])
    report.setdefault("students", {})
    report.setdefault("job", "reader")
    return report


def install_student(
    results: Path, tokenizer_from: Path, into: Path, student: str = "student"
) -> dict[str, Any]:
    """The job's ``student`` as a Hugging Face model in ``into`` (fp32 weights, the job's
    config, the tokenizer of ``tokenizer_from``: its base); returns the job's report. A missing
    or torn file is a one-line TrainError."""
    import numpy as np
    from safetensors.numpy import load, save_file

    report = read_report(results)
    students = report["students"]
    if student not in students:
        raise TrainError(f"{results}: no student {student!r} (it has {', '.join(students)})")
    entry = students[student]
    missing = [n for n in [*entry["parts"], entry["config"]] if not (results / n).is_file()]
    if missing:
        raise TrainError(f"{results} lacks {missing[0]}: fetch it (queue-report.json's `fetch`)")
    weights = b"".join((results / n).read_bytes() for n in entry["parts"])
    if hashlib.sha256(weights).hexdigest() != entry["sha256"]:
        raise TrainError(f"the weights of {student} in {results} do not match their sha256")
    tensors = {k: v.astype(np.float32) if v.dtype == np.float16 else v
               for k, v in load(weights).items()}  # fmt: skip
    into.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(into / "model.safetensors"))
    shutil.copyfile(results / entry["config"], into / "config.json")
    for name in engine.MODEL_FILES:  # the tokenizer's files; the config is the job's
        if name != "config.json" and (tokenizer_from / name).is_file():
            shutil.copyfile(tokenizer_from / name, into / name)
    return report


def int8_rows_weights(results: Path) -> bytes:
    """A fetched teacher's weights as stored (int8 rows with an fp16 scale a row,
    :func:`engine.restore_int8_rows`, in byte slices of one safetensors file), every file
    checked against ``SHA256SUMS`` first."""
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
    return b"".join((results / n).read_bytes() for n in parts)


def read_teacher(results: Path, into: Path) -> dict[str, Any]:
    """The teacher a GPU job left on its machine, as fetched into ``results``, written to
    ``into`` as a Hugging Face model with fp32 weights (int8 rows x their scale), its config
    and tokenizer. Returns what was read: the tensors restored from int8 and the parts' bytes."""
    from safetensors.numpy import load

    data = int8_rows_weights(results)
    stored = load(data)
    into.mkdir(parents=True, exist_ok=True)
    weights = into / "model.safetensors"
    weights.write_bytes(data)
    engine.restore_int8_rows(weights)
    for name in engine.MODEL_FILES:
        if (results / name).is_file():
            shutil.copyfile(results / name, into / name)
    return {
        "from": str(results),
        "tensors": sum(not n.endswith(engine.SCALE_SUFFIX) for n in stored),
        "int8_rows_tensors": sum(n.endswith(engine.SCALE_SUFFIX) for n in stored),
        "parts_bytes": len(data),
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
