"""The one way training and export open a Hugging Face model in torch: by its task, with its
tokenizer, and one error line when the directory holds no such model.

(The GPU queue's runner, ``gpu_queue/job.py``, keeps its own loader: it runs on the lent
machine from its own file, without this package.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feverous_es.errors import ModelError

# The transformers class of each task a model directory may be made for (runtime/tasks.py).
MODEL_CLASSES = {
    "text-classification": "AutoModelForSequenceClassification",
    "feature-extraction": "AutoModel",
    "text2text-generation": "AutoModelForSeq2SeqLM",
}


def load_torch_model(source: str | Path, task: str, **options: Any) -> tuple[Any, Any]:
    """``(tokenizer, model)`` of ``source`` (a model directory or a base's name) for ``task``;
    ``options`` go to the model's ``from_pretrained`` (e.g. a fresh head's ``num_labels``)."""
    import transformers

    model_class = getattr(transformers, MODEL_CLASSES[task])
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(source)
        model = model_class.from_pretrained(source, **options)
    except (OSError, ValueError, KeyError) as error:
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ModelError(f"cannot load {source} as a {task} model: {first}") from None
    return tokenizer, model
