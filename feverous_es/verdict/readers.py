"""The verdict's readers by name, the one word a user turns the large tier on with.

* ``default``: the packaged ``verdict`` model (all-MiniLM-L6-v2, 22 M, int8): fast on 2 cores;
* ``large``: the packaged ``verdict-large`` model (all-mpnet-base-v2, 110 M), the teacher the
  default was distilled from; it ships as parts joined into the user cache on first use
  (:mod:`~feverous_es.runtime.parts`). Its cost and figures: docs/verdict.md.

Anything else a reader option takes is a model directory.
"""

from __future__ import annotations

from pathlib import Path

from feverous_es.errors import ModelError
from feverous_es.runtime.files import PACKAGED_MODELS_DIR
from feverous_es.runtime.parts import is_split, joined_model_dir

DEFAULT_READER = "default"
LARGE_READER = "large"
READERS = {DEFAULT_READER: "verdict", LARGE_READER: "verdict-large"}


def reader_dir(reader: str | Path | None) -> Path:
    """The model directory of a reader: a name of :data:`READERS` (None: the default), else
    the directory itself. A packaged reader shipped as parts is joined first."""
    if reader is None or str(reader) in READERS:
        packaged = PACKAGED_MODELS_DIR / READERS[str(reader or DEFAULT_READER)]
        if not packaged.is_dir():
            raise ModelError(
                f"the {reader} reader is not installed ({packaged} is missing): reinstall the "
                "package from a complete checkout"
            )
        return joined_model_dir(packaged) if is_split(packaged) else packaged
    return Path(reader)
