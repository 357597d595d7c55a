"""The entailment verdict training's options, and the files of its work directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from feverous_es.errors import TrainError
from feverous_es.plugins.config import DEFAULT_PLUGINS
from feverous_es.training import common

EVIDENCE_FILE = "evidence.jsonl"
PAIRS_FILE = "pairs.jsonl.gz"
SCORES_FILE = "scores.jsonl"  # out-of-fold and held-out entailment probabilities, by pair key
FULL_MODEL = "full"  # the work subdirectory of the model that ships


@dataclass
class TrainSettings(common.TrainSettings):
    math_hints: bool = False
    device: str = "cpu"  # where torch trains and scores (not part of the fingerprint)

    FINGERPRINT: ClassVar[tuple[str, ...]] = (*common.TrainSettings.FINGERPRINT, "math_hints")


@dataclass
class RunOptions(common.RunOptions):
    settings: TrainSettings
    holdout: float = 0.3
    reranker: str = DEFAULT_PLUGINS["reranker"]
    hops: int | None = None
    train_claims: list[Path] = field(default_factory=list)
    pairs: list[Path] = field(default_factory=list)
    folds: int = 2
    stack_share: float = 0.0
    per_source: int | None = 6000
    retrieved: int = 1500
    contrastive: Path | None = None  # a wiki.db whose lead sentences make contrastive pairs
    contrastive_pages: int = 4000
    attributes: bool = False  # with contrastive: the person-attribute classes too (attributes.py)
    from_gpu: Path | None = None  # a GPU reader job's results: their student is the model

    def check(self) -> None:
        super().check()
        if self.folds < 0 or self.folds == 1:
            raise TrainError(f"--folds must be 0 or at least 2, not {self.folds}")
        if not 0.0 <= self.stack_share < 1.0 or (self.stack_share and self.folds):
            raise TrainError("--stack-share must be in [0, 1), and given with --folds 0")
        if self.from_gpu and self.folds:
            raise TrainError("the GPU job trains no cross-fitting models: give --folds 0")
