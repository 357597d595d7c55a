"""ONNX export of local Hugging Face torch models: one exporter for every model feverous-es runs.

* :mod:`~feverous_es.export.exporter`: :func:`export_model` (``feverous-es export``, the
  trainers, the embedder) writes fp32 / fp16 / int8 graphs, tokenizer, manifest and model card
  into a directory with one rename, after a parity check against torch;
* :mod:`~feverous_es.export.int8`: the int8 recipes (dynamic, weight-only, mixed);
* :mod:`~feverous_es.export.parity`: the probe (real claim / evidence pairs) and the checks;
* :mod:`~feverous_es.export.card`: the model card;
* :mod:`~feverous_es.export.embedder`: the shipped embedder, all-MiniLM-L6-v2 from its wheel
  (``python -m feverous_es.export.embedder``).

Only these modules import torch, transformers and optimum, inside functions: this package's
names are importable without them (``--help`` and the missing-extra message work), and this
module imports nothing heavy at all.
"""

TASKS = ("text-classification", "feature-extraction", "text2text-generation")
PRECISIONS = ("fp32", "fp16", "int8")
