"""Distillation on this machine: a teacher's probabilities of the replayed training pairs, the
soft targets a retrained default reader learns beside the gold labels so that a fix for one class
costs no other.

The teacher is a torch model (the large reader's fetched weights are restored into one), read in
fp32 (~10 pairs/s on 2 cores for the 110 M reader at 192 tokens), or an ONNX reader read as the
verdict reads it: a model directory with an ONNX graph, or a models directory whose default
reader's models it holds (the package's ``feverous_es/models``: the three students averaged, so
that one student can learn what the three read together). It reads each replayed pair once;
its probabilities go to ``<work>/teacher.jsonl`` in chunks as they come, so an interrupted run
scores only what is missing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from feverous_es.errors import ModelError, TrainError
from feverous_es.eval.claims import LABELS
from feverous_es.runtime.files import graph_files
from feverous_es.training import datasets
from feverous_es.training.verdict import entailment_data as data
from feverous_es.training.verdict.options import GOLD_ONLY, TEACHER_FILE, TrainSettings
from feverous_es.verdict.entailment import EntailmentModel
from feverous_es.verdict.model_files import read_labels
from feverous_es.verdict.readers import reader_dirs

CHUNK = 256  # pairs scored between two appends to the cache
TEACHER_DIR = "teacher"  # the fetched teacher restored as a torch model, in the work directory


def replayed(pair: data.Pair) -> bool:
    """Whether ``pair`` learns the teacher's probabilities (not a failure class's pair)."""
    return not pair.source.startswith(GOLD_ONLY)


def teacher_model(teacher: Path, work: Path) -> Path:
    """A torch model directory of ``teacher``: itself, or the fetched large reader (int8 rows
    and SHA256SUMS) restored once into ``<work>/teacher``."""
    from feverous_es.training import gpu_results

    model = teacher
    if not ((teacher / "config.json").is_file() and any(teacher.glob("*.safetensors"))):
        model = work / TEACHER_DIR
        if not (model / "model.safetensors").is_file():
            partial = work / f"{TEACHER_DIR}.partial"
            gpu_results.read_teacher(teacher, partial)
            partial.rename(model)
    _check_labels(teacher, model)
    return model


def onnx_reader(teacher: Path) -> EntailmentModel | None:
    """``teacher`` as the verdict reads it when it is an ONNX reader (every directory
    :func:`~feverous_es.verdict.readers.reader_dirs` finds there holds an ONNX graph and no
    torch weights), else None."""
    directories = reader_dirs(teacher)
    if not all(graph_files(d) and not any(d.glob("*.safetensors")) for d in directories):
        return None
    for directory in directories:
        _check_labels(teacher, directory)
    return EntailmentModel(teacher, device="cpu")


def _check_labels(teacher: Path, model_dir: Path) -> None:
    """Raise :class:`TrainError` unless ``model_dir`` (of ``teacher``) answers the verdict's
    labels, in their order."""
    try:
        names = [label.value for label in read_labels(model_dir)]
    except ModelError as error:
        raise TrainError(f"the teacher {teacher} is not a verdict reader: {error}") from None
    if names != list(LABELS):
        raise TrainError(f"the teacher {teacher} answers {names}, not {list(LABELS)}")


def teacher_probabilities(
    teacher: Path,
    pairs: Sequence[data.Pair],
    settings: TrainSettings,
    work: Path,
    score: Callable[[Path, Sequence[data.Pair], TrainSettings], np.ndarray],
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, np.ndarray]:
    """The teacher's label probabilities (temperature 1) of each of ``pairs``, by key: an ONNX
    reader's (:func:`onnx_reader`), else as ``score`` reads them with the teacher's torch model
    directory (:func:`teacher_model`); scored in chunks into ``<work>/teacher.jsonl``, read back
    on a rerun."""
    path = work / TEACHER_FILE
    found = {r["key"]: np.array(r["probabilities"]) for r in datasets.read_jsonl(path)}
    wanted = list({p.key: p for p in pairs if p.key not in found}.values())
    if wanted:
        read = _teacher_reads(teacher, work, settings, score)
        for start in range(0, len(wanted), CHUNK):
            chunk = wanted[start : start + CHUNK]
            rows = read(chunk)
            with datasets.append_to(path) as out:
                for pair, row in zip(chunk, rows, strict=True):
                    found[pair.key] = row
                    record = {"key": pair.key, "probabilities": [round(float(p), 5) for p in row]}
                    out.write(json.dumps(record) + "\n")
            if on_progress is not None:
                on_progress(start + len(chunk), len(wanted))
    missing = [p.key for p in pairs if p.key not in found]
    if missing:
        raise TrainError(f"the teacher did not score {len(missing)} pairs (e.g. {missing[0]})")
    return {p.key: found[p.key] for p in pairs}


def _teacher_reads(
    teacher: Path,
    work: Path,
    settings: TrainSettings,
    score: Callable[[Path, Sequence[data.Pair], TrainSettings], np.ndarray],
) -> Callable[[Sequence[data.Pair]], np.ndarray]:
    """How the teacher reads a chunk of pairs: an ONNX reader through the runtime, else
    ``score`` with its torch model directory."""
    reader = onnx_reader(teacher)
    if reader is not None:
        return lambda chunk: reader.probabilities(
            [p.claim for p in chunk], [p.premise for p in chunk]
        )
    model = teacher_model(teacher, work)
    return lambda chunk: score(model, chunk, settings)


def at_temperature(probabilities: np.ndarray, temperature: float) -> np.ndarray:
    """Probabilities read at ``temperature``: softmax(log p / T), rows summing to 1."""
    logits = np.log(np.clip(probabilities, 1e-8, 1.0)) / temperature
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return shifted / shifted.sum(axis=-1, keepdims=True)
