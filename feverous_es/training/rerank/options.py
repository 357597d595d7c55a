"""The evidence rankers' training options: each field a click option of `train rerank`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import click

from feverous_es.errors import TrainError
from feverous_es.params import COUNT, EXISTING_FOLDER, option, option_like
from feverous_es.training import common
from feverous_es.training.rerank.data import KINDS

BOTH = "both"  # every element ranker


@dataclass
class TrainSettings(common.TrainSettings):
    """``batch_size`` counts groups (7 pairs each)."""

    max_length: int = option_like(
        common.TrainSettings, "max_length", help="Tokens of claim + element."
    )
    batch_size: int = option_like(
        common.TrainSettings, "batch_size", 8, help="Groups (of 7 pairs) a step."
    )
    learning_rate: float = option_like(common.TrainSettings, "learning_rate", 3e-5)
    negatives: int = option(4, help="Hard negatives a group.")
    others: int = option(2, help="Other claims' gold a group.")
    # A student of an exported ranker: it starts from ``teacher``'s own weights (rebuilt from its
    # int8 graph) with ``layers`` of its layers kept, evenly spaced, and learns the teacher's
    # order of each group (cross entropy against the softmax of the teacher's scores).
    teacher: Path | None = option(
        None, type=EXISTING_FOLDER,
        help="Distil this exported ranker (a model directory with an int8 graph): the student "
        "starts from its weights and learns its order of each group, instead of the gold one.",
    )  # fmt: skip
    layers: int | None = option(
        None, type=COUNT,
        help="With --teacher: encoder layers the student keeps, evenly spaced (3 of 6: 0, 2, 4).",
    )  # fmt: skip

    FINGERPRINT: ClassVar[tuple[str, ...]] = (
        *common.TrainSettings.FINGERPRINT, "negatives", "others", "layers",
    )  # fmt: skip


@dataclass(kw_only=True)
class RunOptions(common.RunOptions):
    out: Path = option_like(
        common.RunOptions, "out", help="Directory for the models: OUT/cells and OUT/sentences."
    )
    index: Path = option_like(
        common.RunOptions, "index",
        help="Index the candidates and gold elements are read from (read only).",
    )  # fmt: skip
    settings: TrainSettings
    kind: str = option(
        BOTH, type=click.Choice([BOTH, *KINDS]),
        help="Which ranker: cells (cells, header cells), sentences (sentences, list items, "
        "captions) or both.",
    )  # fmt: skip

    @property
    def kinds(self) -> tuple[str, ...]:
        """The element rankers to train."""
        return KINDS if self.kind == BOTH else (self.kind,)

    def check(self) -> None:
        """The options' own rules first (a usage error needs no index), then the common ones."""
        settings = self.settings
        if not 8 <= settings.max_length <= 512:  # BERT-style position embeddings
            raise TrainError(f"--max-length must be between 8 and 512, not {settings.max_length}")
        if self.kind not in (choices := (BOTH, *KINDS)):
            raise TrainError(f"--kind must be one of {', '.join(choices)}, not {self.kind!r}")
        if settings.teacher is not None and (settings.base is not None or self.kind not in KINDS):
            raise TrainError("--teacher starts from the teacher's weights: give one --kind "
                             "(sentences or cells) and no --base")  # fmt: skip
        if settings.layers is not None and settings.teacher is None:
            raise TrainError("--layers needs --teacher")
        super().check()
