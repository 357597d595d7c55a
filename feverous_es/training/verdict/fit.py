"""Fine-tuning the entailment cross-encoder that ships (or the GPU job's student in its place);
checkpointed and resumable."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from feverous_es.errors import TrainError
from feverous_es.eval.claims import LABELS
from feverous_es.export.torch_models import load_torch_model
from feverous_es.training import common, datasets, engine, gpu_results
from feverous_es.training.common import TRAINED_DIR, check_base, import_torch
from feverous_es.training.progress import NO_STEPS, Steps
from feverous_es.training.verdict import entailment_data as data
from feverous_es.training.verdict.options import FULL_MODEL, RunOptions, TrainSettings
from feverous_es.training.verdict.pairs import training_pool

# LABELS (SUPPORTS, REFUTES, NOT ENOUGH INFO) is the logit order: config.json's id2label.


@dataclass(frozen=True)
class Soft:
    """A teacher's probabilities at ``temperature`` for each pool pair (a NaN row: none, the
    pair learns its gold label alone), weighted ``alpha`` against the gold label."""

    targets: Any  # numpy (pairs, labels)
    alpha: float
    temperature: float


def _encode(tokenizer: Any, pairs: Sequence[data.Pair], max_length: int) -> list[dict]:
    return engine.encode_pairs(tokenizer, [(p.claim, p.premise) for p in pairs], max_length)


def predict(
    torch: Any, model: Any, tokenizer: Any, pairs: Sequence[data.Pair], settings: TrainSettings
) -> Any:
    """Label probabilities of ``pairs`` (numpy, LABELS order) from a torch model in eval mode."""
    import numpy as np

    encoded = _encode(tokenizer, pairs, settings.max_length)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]["input_ids"]))
    rows = np.zeros((len(encoded), len(LABELS)), dtype=np.float32)
    pad_id = tokenizer.pad_token_id or 0
    with torch.inference_mode():
        for start in range(0, len(order), 128):
            ids = order[start : start + 128]
            batch = engine.pad_batch(torch, [encoded[i] for i in ids], pad_id)
            batch = {k: v.to(settings.device) for k, v in batch.items()}
            logits = model(**batch).logits.float()
            rows[ids] = torch.softmax(logits, dim=-1).cpu().numpy()
    return rows


def held_out_accuracy(
    probabilities: Any, pairs: Sequence[data.Pair]
) -> dict[str, dict[str, float]]:
    """Label accuracy per source (and ``source/no-gold`` for the gold-removed NEI pairs) of
    the pairs the verdict would read (``train``: the route it takes)."""
    read = [(row, pair) for row, pair in zip(probabilities, pairs, strict=True) if pair.train]
    return engine.accuracy_by_source(
        [LABELS[int(row.argmax())] for row, _ in read],
        [pair.label for _, pair in read],
        [pair.measured_as for _, pair in read],
        overall=False,
    )


EPOCH_PAIRS = 150  # held-out pairs of each source measured after each epoch
EPOCHS_FILE = "epochs.json"  # held-out accuracy after each epoch, in a model's work directory
TIMING_FILE = "timing.json"  # the finished training's seconds, tokens/s and device


def train(
    pool: Sequence[data.Pair],
    held: Sequence[data.Pair],
    settings: TrainSettings,
    work: Path,
    steps: Steps = NO_STEPS,
    *,
    soft: Soft | None = None,
) -> Path | None:
    """Fine-tune ``settings.base`` on ``pool`` into ``<work>/trained`` and return that
    directory (None when ``steps.stop_after`` stopped it first); after each epoch the accuracy on
    ``held`` is added to ``<work>/epochs.json``. With ``soft``, the pairs it gives a teacher's
    probabilities for learn them too (:class:`~feverous_es.training.verdict.options.
    Distillation`). Resumable (:func:`~feverous_es.training.common.fit`)."""
    torch = import_torch()
    check_base(settings.base)
    if not pool:
        raise TrainError("no training pairs (every claim is held out?)")
    tokenizer, model = common.load_model(torch, settings, LABELS)
    model.to(settings.device)
    encoded = _encode(tokenizer, pool, settings.max_length)
    labels = [LABELS.index(p.label) for p in pool]
    pad_id = tokenizer.pad_token_id or 0

    def batch_loss(ids: list[int]) -> tuple[Any, int]:
        batch = engine.pad_batch(torch, [encoded[i] for i in ids], pad_id)
        batch = {k: v.to(settings.device) for k, v in batch.items()}
        target = torch.tensor([labels[i] for i in ids], device=settings.device)
        logits = model(**batch).logits
        tokens = int(batch["attention_mask"].sum())
        if soft is None:
            return engine.distillation_loss(torch, logits, target), tokens
        # a NaN row (a failure class's pair: no teacher) learns its gold label alone
        wanted = torch.tensor(soft.targets[ids], dtype=torch.float32, device=settings.device)
        loss = engine.distillation_loss(
            torch, logits, target, wanted, alpha=soft.alpha, temperature=soft.temperature
        )
        return loss, tokens

    def epoch_done(epoch: int) -> None:
        if not held:
            return
        model.eval()
        accuracy = held_out_accuracy(predict(torch, model, tokenizer, held, settings), held)
        model.train()
        path = work / EPOCHS_FILE
        curve = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
        curve = [e for e in curve if e["epoch"] != epoch] + [{"epoch": epoch, "held_out": accuracy}]
        path.write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")

    finished = common.fit(
        torch, model, settings, work, len(encoded), batch_loss, steps, on_epoch=epoch_done
    )
    if not finished:
        return None
    model.to("cpu")
    return common.save_trained(model, tokenizer, work)


def score_with(trained: Path, pairs: Sequence[data.Pair], settings: TrainSettings) -> Any:
    """Label probabilities of ``pairs`` from a saved torch model."""
    torch = import_torch()
    tokenizer, model = load_torch_model(trained, "text-classification")
    return predict(torch, model.to(settings.device).eval(), tokenizer, pairs, settings)


def write_scores(path: Path, pairs: Sequence[data.Pair], probabilities: Any, model: str) -> None:
    with datasets.append_to(path) as out:
        for pair, row in zip(pairs, probabilities, strict=True):
            record = {
                "key": pair.key,
                "model": model,
                "probabilities": [round(float(p), 5) for p in row],
            }
            out.write(json.dumps(record) + "\n")


def train_models(
    pairs: Sequence[data.Pair],
    options: RunOptions,
    steps: Steps = NO_STEPS,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Path | None, dict[str, Any]]:
    """The model that ships: its trained directory (None when stopped) and the training
    record; ``progress`` counts the pairs a teacher scores (``options.distill``)."""
    settings = options.settings
    pool = training_pool(pairs, options)
    # A sample of the held-out pairs (EPOCH_PAIRS a source) measures each epoch: all of them
    # take minutes on a CPU.
    held = data.capped([p for p in pairs if p.held_out and p.train], EPOCH_PAIRS, settings.seed)
    record: dict[str, Any] = {"pool": dict(Counter(p.source for p in pool))}
    work = options.work / FULL_MODEL
    timing_path = work / TIMING_FILE
    trained: Path | None
    if timing_path.is_file() and (work / TRAINED_DIR).is_dir():  # finished by an earlier run
        trained, timing = work / TRAINED_DIR, json.loads(timing_path.read_text(encoding="utf-8"))
    elif options.from_gpu is not None:
        trained, timing = _gpu_student(options.from_gpu, settings.base, work)
        timing_path.write_text(json.dumps(timing) + "\n", encoding="utf-8")
    else:
        soft = _soft_targets(pool, options, progress) if options.distill.teacher else None
        trained, timing = common.timed_training(
            partial(train, pool, held, settings, work, soft=soft), steps
        )
        if trained is None:
            return None, record
        timing = {**timing, "device": _device_name(settings.device)}
        timing_path.write_text(json.dumps(timing) + "\n", encoding="utf-8")
    curve = work / EPOCHS_FILE
    record.update(timing)
    record["epochs"] = json.loads(curve.read_text(encoding="utf-8")) if curve.is_file() else []
    return trained, record


def _soft_targets(
    pool: Sequence[data.Pair],
    options: RunOptions,
    progress: Callable[[int, int], None] | None,
) -> Soft:
    """The teacher's probabilities at the distillation's temperature for every replayed pair of
    ``pool`` (NaN rows for the failure classes' pairs)."""
    import numpy as np

    from feverous_es.training.verdict import distill

    chosen = options.distill
    assert chosen.teacher is not None
    replay = [p for p in pool if distill.replayed(p)]
    found = distill.teacher_probabilities(
        chosen.teacher, replay, options.settings, options.work, score_with, progress
    )
    targets = np.full((len(pool), len(LABELS)), np.nan, dtype=np.float32)
    for i, pair in enumerate(pool):
        if pair.key in found:
            targets[i] = distill.at_temperature(found[pair.key], chosen.temperature)
    return Soft(targets, chosen.alpha, chosen.temperature)


def _gpu_student(results: Path, base: Path, work: Path) -> tuple[Path, dict[str, Any]]:
    """The GPU job's student installed as ``<work>/trained``, its epochs curve (validation
    accuracy per source, the pairs that chose the epoch) as ``train`` writes it, and its
    timing with the teacher's record."""
    report = gpu_results.install_student(results, base, work / TRAINED_DIR)
    student, teacher = report["students"]["student"], report["teacher"]
    curve = [
        {"epoch": int(epoch), "held_out": {k: v for k, v in sets["valid"].items() if k != "all"}}
        for epoch, sets in sorted(student["curve_by_source"].items(), key=lambda e: int(e[0]))
    ]
    (work / EPOCHS_FILE).write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")
    timing = {
        "seconds": report["seconds_total"],
        "tokens_per_second": student["curve"][-1]["tokens_per_second"],
        "device": "cpu" if report["device"] == "cpu" else f"cuda ({report['device']})",
        "gpu_job": {"seconds": report["seconds"], "versions": report["versions"]},
        "teacher": {
            "base": teacher["base"],
            **{k: teacher[k] for k in ("best_epoch", "valid", "held")},
        },
        "student_best_epoch": student["best_epoch"],
    }
    return work / TRAINED_DIR, timing


def _device_name(device: str) -> str:
    """``cpu``, or ``cuda (NVIDIA H100 80GB HBM3)``: what the card says the model trained on."""
    if not device.startswith("cuda"):
        return device
    return f"{device} ({import_torch().cuda.get_device_name(device)})"
