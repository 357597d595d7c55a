"""What the GPU queue trains, as data: a job's pairs, its teacher and students, and each
model's fine-tuning settings (the bundle writes them, the plan sizes them, the runner reads
them back)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Settings:
    """A model's fine-tuning on the GPU: batch ≥ 64 (at 16, per-step Python work, not the
    GPU, set the pace of the first GPU run), bf16, up to ``epochs`` with the best kept; a
    student learns the teacher's probabilities at ``temperature``, weighted ``alpha`` against
    the gold label."""

    epochs: int = 4
    batch_size: int = 64
    learning_rate: float = 2e-5
    warmup: float = 0.06
    max_length: int = 256
    freeze_embeddings: bool = False
    score_batch_size: int = 256
    temperature: float = 2.0
    alpha: float = 0.5
    seed: int = 13


@dataclass(frozen=True)
class Model:
    """One model a job trains: the base it starts from (a key of the bundle's bases), and for a
    student its name and how many of the base's layers it keeps (None: all)."""

    base: str
    settings: Settings
    name: str = "teacher"
    layers: int | None = None


@dataclass(frozen=True)
class Job:
    """One job of the queue: its pairs (``role``, pair dict with ``claim``, ``premise``,
    ``label``, ``source``, and a ranker's ``group``), its classes (one: a ranker's relevance),
    its teacher and students."""

    name: str
    labels: tuple[str, ...]
    pairs: Sequence[dict[str, Any]]
    teacher: Model
    students: tuple[Model, ...]
    recall_at: int = 1  # a ranker's: the candidates its held-out recall counts
    about: str = ""
    options: dict[str, Any] = field(default_factory=dict)  # how the pairs were made (the intake)
