"""One task-to-class map: the wrapper that runs each task (sentence-transformers keeps the same
map per backend in ``backend/load.py``), and :func:`load_model`, which opens a directory with
the wrapper of its task."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feverous_es.errors import ModelError
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.runtime.embedder import Embedder
from feverous_es.runtime.seq2seq import Seq2SeqModel
from feverous_es.runtime.tasks import (
    FEATURE_EXTRACTION,
    TEXT2TEXT_GENERATION,
    TEXT_CLASSIFICATION,
    model_task,
)

Model = Embedder | CrossEncoder | Seq2SeqModel
TASK_CLASSES: dict[str, type[Model]] = {
    FEATURE_EXTRACTION: Embedder,
    TEXT_CLASSIFICATION: CrossEncoder,
    TEXT2TEXT_GENERATION: Seq2SeqModel,
}


def load_model(directory: Path, **options: Any) -> Model:
    """``directory``'s model in the wrapper of its task (``options`` go to the wrapper);
    :class:`ModelError` when the directory does not say its task."""
    task = model_task(directory)
    if task is None:
        raise ModelError(
            f"{directory} does not say what its model does: its manifest names no task and its "
            "config.json no known architecture"
        )
    return TASK_CLASSES[task](directory, **options)
