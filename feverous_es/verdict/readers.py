"""The verdict's readers by name, the one word a user turns the large tier on with.

A reader is one packaged model, or several whose label probabilities are averaged:

* ``default``: three all-MiniLM-L6-v2 students (22 M each, int8) averaged: ``verdict``,
  distilled on an H200 from the large model; ``verdict-2``, distilled on an H200
  from that teacher after two more epochs on the failure classes (a person's
  true profession, nationality and year and their changed twins, a page's simple facts);
  ``verdict-3``, ``verdict-2`` trained on this CPU with the failure classes' claims read
  against the evidence the pipeline retrieves for them, the replayed pairs distilled from the
  large reader. Each student costs one small model run a premise, the three reading at once;
* ``large``: the ``verdict-large`` model (all-mpnet-base-v2, 110 M: the teacher the first
  student was distilled from) averaged with that student (``verdict``). ``verdict-large``
  ships as parts joined into the user cache on first use (:mod:`~feverous_es.runtime.parts`);
* ``auto``: a cascade, the verdict's default (``ClassifierOptions.model``). The default reader
  reads every pair; the large one (as ``large``) reads again only the pairs whose top
  probability under the default one is below :data:`CASCADE_BELOW`. The large model loads
  only when a first pair needs it.

Anything else a reader option takes is one model directory.
"""

from __future__ import annotations

from pathlib import Path

from feverous_es.errors import ModelError
from feverous_es.runtime.files import PACKAGED_MODELS_DIR
from feverous_es.runtime.parts import whole_model_dir

DEFAULT_READER = "default"
LARGE_READER = "large"
AUTO_READER = "auto"
# A reader's packaged models (roles), whose probabilities it averages.
READERS: dict[str, tuple[str, ...]] = {
    DEFAULT_READER: ("verdict", "verdict-2", "verdict-3"),
    LARGE_READER: ("verdict-large", "verdict"),
    AUTO_READER: ("verdict", "verdict-2", "verdict-3"),
}
# The cascade's readers (first, then where it is unsure) and the default reader's top
# probability under which the second reads a pair.
CASCADES: dict[str, tuple[str, str]] = {AUTO_READER: (DEFAULT_READER, LARGE_READER)}
# Chosen through the whole pipeline on the held-out dev claims (`python -m bench run verdict`):
# of the thresholds measured, 0.6 sends the fewest pairs to the large reader
# (docs/decisions.md, Verdict).
CASCADE_BELOW = 0.6


def packaged_model(role: str) -> Path:
    """The directory of the package's ``role`` model, joined first if it ships as parts."""
    packaged = PACKAGED_MODELS_DIR / role
    if not packaged.is_dir():
        raise ModelError(
            f"the {role} model is not installed ({packaged} is missing): it ships in the "
            "repository, not in the wheel; install from a clone (`pip install -e .`)"
        )
    return whole_model_dir(packaged)


def reader_installed(reader: str) -> bool:
    """Whether every packaged model of ``reader`` is installed (the large reader ships in the
    repository, not in the wheel)."""
    return all((PACKAGED_MODELS_DIR / role).is_dir() for role in READERS[reader])


def packaged_source_dir(reader: str) -> Path:
    """The package's directory of ``reader``'s first model, where its settings
    (``grounding.json``) are kept (never the joined copy in the user cache)."""
    return PACKAGED_MODELS_DIR / READERS[reader][0]


def reader_dirs(reader: str | Path | None) -> list[Path]:
    """The model directories a reader averages: those of a name of :data:`READERS` (None: the
    default); a model directory; or a models directory (a package's ``models/``, e.g. as an
    earlier commit shipped it): the default reader's roles it holds."""
    if reader is None or str(reader) in READERS:
        return [packaged_model(role) for role in READERS[str(reader or DEFAULT_READER)]]
    given = Path(reader)
    roles = [given / role for role in READERS[DEFAULT_READER] if (given / role).is_dir()]
    return roles or [given]
