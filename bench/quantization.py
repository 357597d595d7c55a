"""Which int8 graph keeps a reader's answers: fp32 beside each int8 recipe, on held-out pairs.

Each of ``exports`` (NAME = EXPORT, the name in the figures) is a reader's export directory
(`feverous-es export` or a trainer's `work/onnx`: `model.onnx` fp32, the tokenizer, config.json,
training.json). Its int8 graphs are made here by every recipe of `feverous_es.export.int8`
(dynamic, weight-only, mixed) and each graph, fp32 included, reads the same held-out pairs through
the runtime's `EntailmentModel` (a dynamic graph one pair a run, as the runtime runs it, since its
activations are quantized per batch; the others in batches of 32). Figures per graph: label
accuracy against the gold labels (all, and per source), argmax agreement with fp32, ms a pair on
this CPU, and the graph's MB.

    run = "bench.quantization:quantization"   # on a run's held-out pairs (--pairs); options:
    # exports (relative to that run's folder, WORK: {default = "onnx"}), limit, seed
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.context import Context
from feverous_es.export.int8 import RECIPES, quantize_int8
from feverous_es.runtime.files import FP32_FILE, INT8_FILE
from feverous_es.training.datasets import hash_unit
from feverous_es.training.verdict.entailment_data import Pair, read_pairs
from feverous_es.verdict.entailment import EntailmentModel

BATCHED = 32
COPIED = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
          "vocab.txt", "training.json")  # fmt: skip


def held_out_sample(path: Path, limit: int, seed: int) -> list[Pair]:
    """Up to ``limit`` held-out pairs of a `train verdict` run (claims and NLI pairs no model
    trained on), a seeded sample spread over the sources in proportion."""
    held = [p for p in read_pairs(path) if p.held_out]
    held.sort(key=lambda p: hash_unit(seed, p.source, p.key, salt="bench-quantization"))
    return held[:limit]


def read_with(graph: Path, pairs: list[Pair], batch_size: int) -> tuple[np.ndarray, float]:
    model = EntailmentModel(graph, device="cpu")
    for encoder in model.models:
        encoder.batch_size = batch_size
    started = time.perf_counter()
    rows = model.probabilities([p.claim for p in pairs], [p.premise for p in pairs])
    labels = np.array([model.labels[i].value for i in rows.argmax(axis=1)])
    return labels, 1000 * (time.perf_counter() - started) / len(pairs)


def measure(name: str, export: Path, pairs: list[Pair], work: Path) -> dict[str, Any]:
    folder = work / name
    folder.mkdir()
    for file in COPIED:
        if (export / file).is_file():
            shutil.copyfile(export / file, folder / file)
    graphs = {"fp32": (folder / FP32_FILE, BATCHED)}
    shutil.copyfile(export / FP32_FILE, folder / FP32_FILE)
    for recipe in RECIPES:
        graph = folder / f"{recipe}.{INT8_FILE}"
        quantize_int8(folder / FP32_FILE, graph, recipe=recipe)  # as the trainers export
        graphs[f"int8 {recipe}"] = (graph, 1 if recipe == "dynamic" else BATCHED)
    gold = np.array([p.label for p in pairs])
    sources = np.array([p.measured_as for p in pairs])
    result: dict[str, Any] = {}
    reference: np.ndarray | None = None
    for graph_name, (graph, batch_size) in graphs.items():
        labels, ms = read_with(graph, pairs, batch_size)
        reference = labels if reference is None else reference
        result[graph_name] = row = {
            "accuracy": round(float((labels == gold).mean()), 4),
            "agreement_with_fp32": round(float((labels == reference).mean()), 4),
            "ms_per_pair": round(ms, 1),
            "batch_size": batch_size,
            "mb": round(graph.stat().st_size / 1e6, 1),
            "by_source": {
                s: round(float((labels[sources == s] == gold[sources == s]).mean()), 4)
                for s in sorted(set(sources))
            },
        }
        print(f"{name:<10} {graph_name:<18} accuracy {row['accuracy']:.3f}  "
              f"agreement {row['agreement_with_fp32']:.3f}  {ms:6.1f} ms/pair  "
              f"{row['mb']:.0f} MB", flush=True)  # fmt: skip
    return result


def quantization(
    context: Context,
    *,
    exports: Mapping[str, str] | None = None,
    limit: int = 1200,
    seed: int = 0,
) -> dict[str, Any]:
    """Each export's fp32 graph beside its int8 recipes on ``limit`` held-out pairs of the run
    the driver's --pairs names (drawn with ``seed``); ``exports`` name directories relative to
    that run's folder (default: its own ``onnx/``)."""
    pairs_file = context.place("pairs")
    pairs = held_out_sample(pairs_file, limit, seed)
    figures: dict[str, Any] = {"pairs": len(pairs),
                               "sources": dict(Counter(p.measured_as for p in pairs))}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-quantization-") as tmp:
        for name, export in (exports or {"default": "onnx"}).items():
            figures[name] = measure(name, pairs_file.parent / export, pairs, Path(tmp))
    return figures
