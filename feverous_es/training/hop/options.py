"""The next-hop generator's training options: each field a click option of `train hop`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from feverous_es.params import option, option_like
from feverous_es.training import common


@dataclass
class TrainSettings(common.TrainSettings):
    """Papelo: three epochs at max_length 512, Hugging Face's default learning rate."""

    base: Path = option_like(
        common.TrainSettings, "base", required=True,
        help="Local T5-style seq2seq checkpoint directory to fine-tune (config.json, weights, "
        "tokenizer); no T5 weights ship with the package.",
    )  # fmt: skip
    epochs: float = option_like(common.TrainSettings, "epochs", 3.0)
    max_length: int = option_like(
        common.TrainSettings, "max_length", 512, help="Tokens of the input."
    )
    target_length: int = option(64, help="Tokens of the target.")
    batch_size: int = option_like(common.TrainSettings, "batch_size", 8)
    # T5 ties the input embeddings to the output projection: freezing one freezes both.
    freeze_embeddings: bool = option_like(
        common.TrainSettings, "freeze_embeddings", False,
        help="Keep the word embeddings (tied to T5's output layer) fixed.",
    )  # fmt: skip
    distractors: int = option(0, help="Retrieved non-gold elements a pair.")

    FINGERPRINT: ClassVar[tuple[str, ...]] = (
        *common.TrainSettings.FINGERPRINT, "target_length", "distractors",
    )  # fmt: skip


@dataclass(kw_only=True)
class RunOptions(common.RunOptions):
    out: Path = option_like(
        common.RunOptions, "out",
        help="Model directory to write (the seq2seq hop plugin's `model` option).",
    )  # fmt: skip
    index: Path = option_like(
        common.RunOptions, "index",
        help="Index the pages, gold elements and distractors are read from (read only).",
    )  # fmt: skip
    settings: TrainSettings
