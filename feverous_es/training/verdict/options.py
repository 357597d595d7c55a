"""The entailment verdict training's options, and the files of its work directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from feverous_es.errors import TrainError
from feverous_es.plugins.config import DEFAULT_PLUGINS
from feverous_es.training import common

EVIDENCE_FILE = "evidence.jsonl"
CLASS_EVIDENCE_FILE = "class-evidence.jsonl"  # the failure classes' claims, retrieved
PAIRS_FILE = "pairs.jsonl.gz"
PAIRS_RECIPE_FILE = "pairs.recipe.json"  # the options PAIRS_FILE was built from
SCORES_FILE = "scores.jsonl"  # out-of-fold and held-out entailment probabilities, by pair key
FULL_MODEL = "full"  # the work subdirectory of the model that ships


@dataclass
class TrainSettings(common.TrainSettings):
    math_hints: bool = False
    device: str = "cpu"  # where torch trains and scores (not part of the fingerprint)

    FINGERPRINT: ClassVar[tuple[str, ...]] = (*common.TrainSettings.FINGERPRINT, "math_hints")


@dataclass
class PairMix:
    """What the training pairs are made of beside the claim files: training-only claim files,
    NLI pair files, contrastive pairs from a dump's leads, how many claims of each table file
    are also read against retrieved evidence, and the cap a source."""

    train_claims: list[Path] = field(default_factory=list)
    pairs: list[Path] = field(default_factory=list)
    per_source: int | None = 6000
    retrieved: int = 1500
    contrastive: Path | None = None  # a wiki.db whose lead sentences make contrastive pairs
    contrastive_pages: int = 4000
    attributes: bool = False  # with contrastive: the person-attribute classes too (attributes.py)
    windows: bool = False  # with contrastive: each claim's gold sentences inside a long window
    relations: bool = False  # with contrastive: simple facts of the leads too (relations.py)
    # With contrastive: this many training claims of each failure class also read against the
    # evidence the pipeline retrieves for them (class_evidence.py); 0: none.
    class_evidence: int = 0


@dataclass
class Distillation:
    """A teacher whose probabilities the replayed pairs learn beside their gold label, so that
    training on new pairs keeps what the model knew: the loss of a replayed pair is
    ``alpha·T²·KL(teacher_T ‖ student_T) + (1 - alpha)·gold``, as the GPU job's students learn;
    the failure classes' pairs (:data:`GOLD_ONLY`) learn their gold label alone."""

    teacher: Path | None = None  # the large reader's fetched weights, or a torch model directory
    alpha: float = 0.5
    temperature: float = 2.0


# The sources made to teach a failure class: the teacher is wrong on some of them, so they
# learn their gold label only.
GOLD_ONLY = ("contrastive-", "attribute-", "relation-")
TEACHER_FILE = "teacher.jsonl"  # the teacher's probabilities of the replayed pairs, by key


@dataclass
class Stacking:
    """How the feature verdicts get scores they can stack on: ``folds`` cross-fitting models,
    or (``folds`` 0) a ``stack_share`` of the training claims kept out of the one model."""

    folds: int = 2
    stack_share: float = 0.0


@dataclass
class Retrieval:
    """How the claims' evidence is collected: the pipeline's reranker and next-hop rounds."""

    reranker: str = DEFAULT_PLUGINS["reranker"]
    hops: int | None = None


@dataclass(kw_only=True)
class RunOptions(common.RunOptions):
    settings: TrainSettings
    holdout: float = 0.3
    retrieval: Retrieval = field(default_factory=Retrieval)
    mix: PairMix = field(default_factory=PairMix)
    stacking: Stacking = field(default_factory=Stacking)
    distill: Distillation = field(default_factory=Distillation)
    from_gpu: Path | None = None  # a GPU reader job's results: their student is the model

    def check(self) -> None:
        super().check()
        folds, share = self.stacking.folds, self.stacking.stack_share
        if folds < 0 or folds == 1:
            raise TrainError(f"--folds must be 0 or at least 2, not {folds}")
        if not 0.0 <= share < 1.0 or (share and folds):
            raise TrainError("--stack-share must be in [0, 1), and given with --folds 0")
        if self.from_gpu and folds:
            raise TrainError("the GPU job trains no cross-fitting models: give --folds 0")
        if self.distill.teacher is not None and (folds or self.from_gpu):
            raise TrainError("--teacher trains one model on this machine: give --folds 0, "
                             "without --from-gpu")
        if not 0.0 <= self.distill.alpha <= 1.0 or self.distill.temperature <= 0:
            raise TrainError("--alpha must be in [0, 1] and --temperature above 0")
