"""The task a model directory was made for, and the check each model wrapper makes with it.

A directory's task is the one its ``manifest.json`` names (the exporter and the trainers write
it), else the one its ``config.json`` architecture implies (``…ForSequenceClassification``: a
classifier), the way optimum infers a task for export. A bare ``…Model`` architecture says
nothing: a classifier trained from a sentence-transformers base can keep its base's config. A
model given for the wrong job (the embedder as a reranker, a ranker as the hop model) is then
one line naming both tasks, not a shape error deep in a run. :mod:`.load` maps each task to
the wrapper that runs it.
"""

from __future__ import annotations

from pathlib import Path

from feverous_es.errors import ModelError
from feverous_es.runtime.files import MANIFEST_FILE, read_json_object

FEATURE_EXTRACTION = "feature-extraction"
TEXT_CLASSIFICATION = "text-classification"
TEXT2TEXT_GENERATION = "text2text-generation"
TASKS = (FEATURE_EXTRACTION, TEXT_CLASSIFICATION, TEXT2TEXT_GENERATION)
# A config.json architecture's ending -> its task (transformers' class naming).
_ARCHITECTURE_TASKS = (
    ("ForSequenceClassification", TEXT_CLASSIFICATION),
    ("ForConditionalGeneration", TEXT2TEXT_GENERATION),
)


def model_task(directory: Path) -> str | None:
    """The task ``directory``'s model was made for; None when neither its manifest nor its
    config says (an export of another tool: the wrapper then tries it as it is)."""
    task = read_json_object(directory / MANIFEST_FILE).get("task")
    if task in TASKS:
        return str(task)
    for architecture in read_json_object(directory / "config.json").get("architectures") or ():
        for ending, implied in _ARCHITECTURE_TASKS:
            if str(architecture).endswith(ending):
                return implied
    return None


def check_task(directory: Path, task: str, wanted_for: str) -> None:
    """:class:`ModelError` when ``directory`` says it holds a model of another task than
    ``task`` (``wanted_for`` names the job, e.g. "a cross-encoder")."""
    found = model_task(directory)
    if found is not None and found != task:
        raise ModelError(f"{directory} holds a {found} model; {wanted_for} needs a {task} one")
