"""The table feature verdict's training options: each field a click option of `train
table-verdict` (:class:`TableRunOptions`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from feverous_es.params import PATH, option, option_like
from feverous_es.training import common


@dataclass
class Settings:
    trees: int = option(300, help="Boosting rounds.")
    learning_rate: float = option(0.05, flags=("--lr",), help="The boosting's learning rate.")
    depth: int = option(4, help="Depth of each tree.")
    subsample: float = 0.8
    seed: int = option(13, help="Split, sampling and fitting seed.")


@dataclass(kw_only=True)
class RunOptions(common.RunOptions):
    out: Path = option_like(
        common.RunOptions, "out",
        help="Model directory to write (never the installed package's: `feverous-es train "
        "install OUT --as table-verdict` puts it there).",
    )  # fmt: skip
    index: Path = option_like(
        common.RunOptions, "index", help="Index the tables and evidence come from (read only)."
    )
    holdout: float = option_like(common.RunOptions, "holdout", 0.3)
    settings: Settings = field(default_factory=Settings)
    train_claims: list[Path] = option(
        list, multiple=True, type=PATH, help="Claim file used for training only (never held out)."
    )
    retrieved: int = 0  # training claims also read against the table retrieved for them


@dataclass(kw_only=True)
class TableRunOptions(RunOptions):
    claims: list[Path] = option_like(
        common.RunOptions, "claims",
        help="Claim file naming gold_tables (TabFact layout), split into training and held-out "
        "claims; repeat for several.",
    )  # fmt: skip
    retrieved: int = option(
        0, help="Also read this many training claims against the table the pipeline retrieves "
        "for them (~0.5 s a claim; cached in WORK).",
    )  # fmt: skip
