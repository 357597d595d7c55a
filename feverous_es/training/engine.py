"""What every trainer shares, on this machine and on a GPU's: pairs encoded and batched, the
training loop (AdamW, a linear warm-up and decay, the distillation loss, resumable steps), a
file's hash, the layers a smaller
student keeps, and the figures a trained model is chosen by (accuracy or recall per source).

It imports only the standard library (and takes the torch model it is given), because the GPU
queue ships this file beside its runner (``job.py``): the bundle, not the package, is all a GPU
machine needs.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

ALL = "all"  # the figure over every pair, beside each source's

REPORT_FILE = "report.json"  # a GPU job's, in its results folder
SCALE_SUFFIX = ".__scale__"  # an int8-rows tensor's per-row scales: NAME + SCALE_SUFFIX
# A Hugging Face model's files beside its weights: what a base, a student or a teacher carries.
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json",
               "special_tokens_map.json", "vocab.txt")  # fmt: skip

# batch_loss(item indices) -> (loss tensor, tokens in the batch)
BatchLoss = Callable[[list[int]], tuple[Any, int]]
Encoded = dict[str, list[int]]  # a pair's input_ids, attention_mask (and token_type_ids)


def encode_pairs(
    tokenizer: Any, pairs: Iterable[tuple[str, str]], max_length: int
) -> list[Encoded]:
    """Token ids of (claim, premise) pairs, the premise truncated as the ONNX runtime does
    (and, as there, both sides for a claim that alone fills ``max_length``)."""

    def encode(some: Sequence[tuple[str, str]], truncation: str) -> list[Encoded]:
        ids = tokenizer([c for c, _ in some], [p for _, p in some],
                        truncation=truncation, max_length=max_length)  # fmt: skip
        return [dict(zip(ids.keys(), row, strict=True)) for row in zip(*ids.values(), strict=True)]

    def encode_one(pair: tuple[str, str]) -> list[Encoded]:
        try:
            return encode([pair], "only_second")
        except Exception:  # tokenizers raises a plain Exception when a claim fills max_length
            return encode([pair], "longest_first")

    listed = list(pairs)
    try:
        return encode(listed, "only_second")
    except Exception:  # one claim too long: each pair alone
        return [row for pair in listed for row in encode_one(pair)]


def pad_batch(torch: Any, rows: Sequence[Encoded], pad_id: int) -> dict[str, Any]:
    """``rows`` as tensors of the longest row's width: input ids padded with ``pad_id``, the
    others with 0."""
    width = max(len(r["input_ids"]) for r in rows)
    batch = {}
    for key in rows[0]:
        pad = [pad_id if key == "input_ids" else 0]
        batch[key] = torch.tensor([r[key] + pad * (width - len(r[key])) for r in rows])
    return batch


@dataclass(frozen=True)
class Loop:
    """How :func:`fit` trains: ``epochs`` passes (a fraction: part of one) of ``batches(epoch)``
    (0-based; the batches must be a function of the epoch, so a resumed run sees what the
    stopped one would have), AdamW at ``learning_rate`` (weight decay 0.01, gradients clipped
    to norm 1), warmed up linearly over a ``warmup`` share of the steps, then decayed to 0."""

    batches: Callable[[int], list[list[int]]]
    epochs: float
    learning_rate: float
    warmup: float


@dataclass
class Hooks:
    """What :func:`fit` calls as it goes. ``on_step(step, total, loss, tokens_per_second)``;
    ``on_epoch(epoch, seconds, tokens_per_second)`` after each whole epoch (1-based), returning
    its validation score or None; ``save(state)`` every ``save_every`` steps, at the end and
    when stopped (the state :func:`fit` resumes from); ``stop_after``: steps this call runs at
    most; ``keep_best``: restore the weights of the best-scored epoch at the end;
    ``deadline``: no epoch starts that would end after it (``time.perf_counter()``, at the last
    epoch's pace)."""

    on_step: Callable[[int, int, float, float], None] | None = None
    on_epoch: Callable[[int, float, float], float | None] | None = None
    save: Callable[[dict[str, Any]], None] | None = None
    save_every: int = 0
    stop_after: int | None = None
    keep_best: bool = False
    deadline: float = math.inf


@dataclass
class Fitted:
    """What :func:`fit` did: ``finished`` (False: ``stop_after`` or the deadline stopped it),
    the steps, and per whole epoch its score, seconds and tokens a second."""

    finished: bool
    step: int
    total: int
    curve: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int = 0


def linear_warmup(step: int, *, warmup: int, total: int) -> float:
    """The learning-rate factor of a linear warm-up to 1 over ``warmup`` steps, then a linear
    decay to 0 at ``total`` (transformers' ``get_linear_schedule_with_warmup``)."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def fit(
    torch: Any,
    model: Any,
    batch_loss: BatchLoss,
    loop: Loop,
    hooks: Hooks | None = None,
    resume: dict[str, Any] | None = None,
) -> Fitted:
    """Train ``model`` in place, one step a batch of ``loop.batches``; ``resume``: a state
    ``hooks.save`` was given (weights, optimizer, schedule, step, torch's random state). The
    one loop of every trainer: the CPU's (checkpointed, resumable) and the GPU job's (the best
    epoch kept, a deadline)."""
    hooks = hooks or Hooks()
    first = loop.batches(0)  # its length sets the schedule; kept for the first epoch's steps
    per_epoch = len(first)
    total = max(1, math.ceil(per_epoch * loop.epochs))
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=loop.learning_rate, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, partial(linear_warmup, warmup=int(loop.warmup * total), total=total)
    )
    step = 0
    if resume is not None:
        model.load_state_dict(resume["model"])
        optimizer.load_state_dict(resume["optimizer"])
        scheduler.load_state_dict(resume["scheduler"])
        step = int(resume["step"])
        torch.set_rng_state(resume["torch_rng"])

    def save() -> None:
        if hooks.save is not None:
            hooks.save({
                "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(), "step": step,
                "torch_rng": torch.get_rng_state(),
            })  # fmt: skip

    fitted = Fitted(finished=False, step=step, total=total)
    best: tuple[float, dict[str, Any] | None] = (-math.inf, None)
    epoch_batches: tuple[int, list[list[int]]] = (0, first)
    model.train()
    started, tokens, done_here = time.perf_counter(), 0, 0
    while step < total:
        epoch, offset = divmod(step, per_epoch)
        if epoch_batches[0] != epoch:
            epoch_batches = (epoch, loop.batches(epoch))
        loss, batch_tokens = batch_loss(epoch_batches[1][offset])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        step, done_here, tokens = step + 1, done_here + 1, tokens + batch_tokens
        seconds = max(time.perf_counter() - started, 1e-9)
        if hooks.on_step:
            hooks.on_step(step, total, float(loss.item()), tokens / seconds)
        if step % per_epoch == 0:
            done = step // per_epoch
            score = hooks.on_epoch(done, seconds, tokens / seconds) if hooks.on_epoch else None
            fitted.curve.append({"epoch": done, "score": score,
                                 "seconds": round(seconds, 1),
                                 "tokens_per_second": round(tokens / seconds)})  # fmt: skip
            if hooks.keep_best and score is not None and score > best[0]:
                state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                best, fitted.best_epoch = (score, state), done
            model.train()
            out_of_time = step < total and time.perf_counter() + seconds > hooks.deadline
            started, tokens = time.perf_counter(), 0
            if out_of_time:
                break
        if (hooks.save_every and step % hooks.save_every == 0) or step == total:
            save()
        if hooks.stop_after is not None and done_here >= hooks.stop_after and step < total:
            save()
            break
    fitted.step, fitted.finished = step, step == total
    if best[1] is not None:
        model.load_state_dict(best[1])
    model.eval()
    return fitted


def distillation_loss(
    torch: Any,
    logits: Any,
    gold: Any,
    teacher: Any = None,
    *,
    alpha: float = 0.5,
    temperature: float = 1.0,
) -> Any:
    """The loss of a batch: cross-entropy with the gold labels (class indices; for one logit, a
    relevance in [0, 1], binary) and, with ``teacher`` (its probabilities at ``temperature``
    T), per pair ``alpha·T²·distance(teacher, student/T) + (1 - alpha)·gold loss``; a teacher
    row of NaN (a pair with no teacher) learns its gold label alone. The mean over the batch."""
    functional = torch.nn.functional
    if logits.shape[-1] == 1:  # a ranker's relevance logit
        logits = logits[:, 0]
        gold_loss = functional.binary_cross_entropy_with_logits(logits, gold, reduction="none")
        if teacher is None:
            return gold_loss.mean()
        wanted = teacher[:, 0]
        soft = functional.binary_cross_entropy_with_logits(
            logits / temperature, torch.nan_to_num(wanted), reduction="none"
        )
    else:
        gold_loss = functional.cross_entropy(logits, gold, reduction="none")
        if teacher is None:
            return gold_loss.mean()
        wanted = teacher[:, 0]
        log_student = functional.log_softmax(logits / temperature, dim=-1)
        soft = functional.kl_div(log_student, torch.nan_to_num(teacher), reduction="none").sum(-1)
    mixed = alpha * temperature**2 * soft + (1 - alpha) * gold_loss
    return torch.where(torch.isnan(wanted), gold_loss, mixed).mean()


def sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def kept_layers(total: int, keep: int) -> list[int]:
    """``keep`` of ``total`` layers, evenly spaced from the first (3 of 6: 0, 2, 4)."""
    return [i * total // keep for i in range(keep)]


def prune_layers(model: Any, keep: int) -> None:
    """Keep ``keep`` evenly spaced encoder layers of a BERT-style torch ``model``, in place."""
    encoder = model.base_model.encoder
    chosen = kept_layers(len(encoder.layer), keep)
    encoder.layer = type(encoder.layer)([encoder.layer[i] for i in chosen])
    model.config.num_hidden_layers = keep


def accuracy_by_source(
    answers: Sequence[str], gold: Sequence[str], sources: Sequence[str], overall: bool = True
) -> dict[str, dict[str, float]]:
    """Label accuracy per source (``{"pairs", "accuracy"}``), and over all of them as ``all``
    when ``overall``."""
    rows: dict[str, list[bool]] = {}
    for answer, label, source in zip(answers, gold, sources, strict=True):
        rows.setdefault(source, []).append(answer == label)
        if overall:
            rows.setdefault(ALL, []).append(answer == label)
    return {
        name: {"pairs": len(right), "accuracy": round(sum(right) / len(right), 4)}
        for name, right in sorted(rows.items())
    }


def recall_by_source(
    scores: Sequence[float], pairs: Sequence[dict[str, Any]], k: int
) -> dict[str, dict[str, float]]:
    """A ranker's recall at ``k``, per source and over all (``all``): of the gold candidates
    (label 1) of the claims with one in their list (``group``), the share among the claim's
    ``k`` best-scored candidates."""
    groups: dict[str, list[tuple[float, float, str]]] = {}
    for score, pair in zip(scores, pairs, strict=True):
        groups.setdefault(pair["group"], []).append((-float(score), pair["label"], pair["source"]))
    found: dict[str, list[int]] = {}
    for rows in groups.values():
        gold = sum(label for _, label, _ in rows)
        if not gold:
            continue
        hits = sum(label for _, label, _ in sorted(rows, key=lambda r: r[0])[:k])
        for name in (rows[0][2], ALL):
            totals = found.setdefault(name, [0, 0, 0])
            totals[0] += int(hits)
            totals[1] += int(gold)
            totals[2] += 1
    return {
        name: {"claims": claims, "gold": gold, "accuracy": round(hits / gold, 4)}
        for name, (hits, gold, claims) in sorted(found.items())
    }


def mean_source_score(result: dict[str, dict[str, float]]) -> float:
    """What chooses an epoch: the mean over sources (so the largest does not decide alone)."""
    scores = [r["accuracy"] for name, r in result.items() if name != ALL]
    return sum(scores) / len(scores) if scores else 0.0


def restore_int8_rows(weights: Path) -> None:
    """Rewrite an int8-rows safetensors file (``NAME`` int8, ``NAME.__scale__`` fp16 per row)
    as fp32 weights: ``NAME * scale[row]``."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    stored = load_file(str(weights))
    tensors = {}
    for name, value in stored.items():
        if name.endswith(SCALE_SUFFIX):
            continue
        scale = stored.get(name + SCALE_SUFFIX)
        if scale is not None:
            value = value.astype(np.float32) * scale.astype(np.float32)[:, None]
        tensors[name] = value.astype(np.float32) if value.dtype == np.float16 else value
    save_file(tensors, str(weights))
