"""The entailment verdict training's options, and the files of its work directory."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import click

from feverous_es.errors import TrainError
from feverous_es.params import EXISTING_FILE, EXISTING_FOLDER, PATH, option, option_like
from feverous_es.plugins.config import DEFAULT_PLUGINS
from feverous_es.training import common
from feverous_es.training.bases import resolve_base

EVIDENCE_FILE = "evidence.jsonl"
CLASS_EVIDENCE_FILE = "class-evidence.jsonl"  # the failure classes' claims, retrieved
PAIRS_FILE = "pairs.jsonl.gz"
PAIRS_RECIPE_FILE = "pairs.recipe.json"  # the options PAIRS_FILE was built from
SCORES_FILE = "scores.jsonl"  # the exported model's probabilities of the held-out pairs, by key
FULL_MODEL = "full"  # the work subdirectory of the model that ships


@dataclass
class TrainSettings(common.TrainSettings):
    epochs: float = option_like(common.TrainSettings, "epochs", 3.0)
    max_length: int = option_like(
        common.TrainSettings, "max_length", help="Tokens of claim + premise."
    )
    batch_size: int = option_like(common.TrainSettings, "batch_size", 32, help="Claims a step.")
    learning_rate: float = option_like(common.TrainSettings, "learning_rate", 4e-5)
    math_hints: bool = False
    device: str = "cpu"  # where torch trains and scores (--device; not part of the fingerprint)

    FINGERPRINT: ClassVar[tuple[str, ...]] = (*common.TrainSettings.FINGERPRINT, "math_hints")


@dataclass
class PairMix:
    """What the training pairs are made of beside the claim files: training-only claim files,
    NLI pair files, contrastive pairs from a dump's leads, how many claims of each table file
    are also read against retrieved evidence, and the cap a source."""

    train_claims: list[Path] = option(
        list, multiple=True, type=PATH,
        help="Claim file used only for training (e.g. tabfact_train.jsonl); repeat for several.",
    )  # fmt: skip
    pairs: list[Path] = option(
        list, multiple=True, type=PATH,
        help="NLI pair file (the data's nli/text_pairs.jsonl.gz, table_pairs.jsonl.gz); repeat.",
    )  # fmt: skip
    per_source: int | None = option(
        6000, type=int,
        help="At most this many training pairs of each source (so none swamps the others).",
    )  # fmt: skip
    retrieved: int = option(
        1500, help="Claims of each table file also read against retrieved evidence."
    )
    contrastive: Path | None = option(
        None, type=EXISTING_FILE,
        help="A FEVEROUS wiki.db whose lead sentences make contrastive pairs: the lead as "
        "SUPPORTS, one attribute (nationality, number, description) taken from another page as "
        "REFUTES, the changed claim against other subjects' sentences as NOT ENOUGH INFO (pages "
        "held out like claims).",
    )  # fmt: skip
    contrastive_pages: int = option(4000, help="Pages --contrastive reads.")
    attributes: bool = option(
        False,
        help="With --contrastive: claims about one attribute of every person's lead too, true "
        "(SUPPORTS) and changed (REFUTES): nationality, profession, a year (attributes.py).",
    )  # fmt: skip
    windows: bool = option(
        False,
        help="With --contrastive: each claim's gold sentences also inside a window of other "
        "pages' sentences as long as `entail` reads (its label), and the window without them "
        "(NEI).",
    )  # fmt: skip
    relations: bool = option(
        False,
        help="With --contrastive: simple facts of the leads too, true and changed, in several "
        "wordings: named after, written / directed … by, a chemical symbol, located in "
        "(relations.py).",
    )  # fmt: skip
    class_evidence: int = option(
        0, type=click.IntRange(min=0),
        help="With --contrastive: N training claims of each failure class also read against "
        "the evidence the pipeline retrieves for them, as the verdict reads a user's claim "
        "(class_evidence.py; ~0.5 s a claim to retrieve, cached in the work directory).",
    )  # fmt: skip


@dataclass
class Distillation:
    """A teacher whose probabilities the replayed pairs learn beside their gold label, so that
    training on new pairs keeps what the model knew: the loss of a replayed pair is
    ``alpha·T²·KL(teacher_T ‖ student_T) + (1 - alpha)·gold``, as the GPU job's students learn;
    the failure classes' pairs (:data:`GOLD_ONLY`) learn their gold label alone."""

    teacher: Path | None = option(
        None, type=EXISTING_FOLDER,
        help="Distil here from the large reader's fetched weights (../shared/gpu/verdict-large-…), "
        "a torch model, or an ONNX reader (a model directory, or a models directory such as "
        "feverous_es/models: its default reader, the students averaged): replayed pairs learn "
        "its probabilities beside their gold label, the failure classes' pairs their gold label "
        "alone.",
    )  # fmt: skip
    alpha: float = option(0.5, help="With --teacher: the weight of the teacher's probabilities.")
    temperature: float = option(2.0, help="With --teacher: the temperature both are read at.")


# The sources made to teach a failure class: the teacher is wrong on some of them, so they
# learn their gold label only.
GOLD_ONLY = ("contrastive-", "attribute-", "relation-")
TEACHER_FILE = "teacher.jsonl"  # the teacher's probabilities of the replayed pairs, by key


@dataclass
class Retrieval:
    """How the claims' evidence is collected: the pipeline's reranker and next-hop rounds."""

    reranker: str = option(
        DEFAULT_PLUGINS["reranker"],
        help="Reranker plugin used while collecting evidence (default: the pipeline's, so the "
        "model learns from the evidence it will read).",
    )  # fmt: skip
    hops: int | None = option(None, type=int, help="Next-hop rounds [default: the pipeline's].")


@dataclass(kw_only=True)
class RunOptions(common.RunOptions):
    claims: list[Path] = option_like(
        common.RunOptions, "claims",
        help="FEVEROUS-format claim file (jsonl), split into training and held-out claims; "
        "repeat for several. Files naming gold_tables (TabFact) are read against their gold "
        "tables.",
    )  # fmt: skip
    out: Path = option_like(
        common.RunOptions, "out", help="Model directory to write (never the installed package's)."
    )
    index: Path = option_like(
        common.RunOptions, "index", help="Index the evidence is retrieved from (read only)."
    )
    holdout: float = option_like(common.RunOptions, "holdout", 0.35)
    fold: str = option(
        "", metavar="F/K",
        help="Cross-fitting: of the --holdout claims, hold out fold F of K only (0-based) and "
        "train on the others too; the K models read each its own fold, so every held-out claim "
        "is read by a model that never saw it.",
    )  # fmt: skip
    settings: TrainSettings
    retrieval: Retrieval = field(default_factory=Retrieval)
    mix: PairMix = field(default_factory=PairMix)
    distill: Distillation = field(default_factory=Distillation)
    from_gpu: Path | None = option(
        None, type=EXISTING_FOLDER,
        help="A GPU reader job's results (docs/gpu-training.md): its student is the model, "
        "exported and scored as after a CPU training. Needs the bundle's options.",
    )  # fmt: skip

    def folds(self) -> tuple[int, int] | None:
        """``--fold F/K`` as (F, K); None without it."""
        if not self.fold:
            return None
        fold, _, count = self.fold.partition("/")
        if not (fold.isdigit() and count.isdigit() and int(fold) < int(count)):
            raise TrainError(f"--fold {self.fold}: give F/K with 0 <= F < K, e.g. 0/5")
        if self.holdout <= 0:
            raise TrainError("--fold splits the --holdout claims: give --holdout above 0")
        return int(fold), int(count)

    def check(self) -> None:
        """Refuse options that contradict each other, and resolve ``--base`` (a name or a
        directory) to the model directory."""
        super().check()
        self.settings.base = resolve_base(self.settings.base)
        self.folds()
        if self.distill.teacher is not None and self.from_gpu:
            raise TrainError("--teacher trains the model here: give it without --from-gpu")
        if not 0.0 <= self.distill.alpha <= 1.0 or self.distill.temperature <= 0:
            raise TrainError("--alpha must be in [0, 1] and --temperature above 0")
