"""ONNX export of a fine-tuned torch model: optimum to fp32, dynamic int8 for the CPU, and a
parity check of both against the torch logits on real inputs."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.training.common import INSTALL_HINT, TrainError, import_torch

FP32_DIR = "onnx-fp32"
MODEL_FILE = "model.onnx"
MAX_MODEL_BYTES = 30 * 1024 * 1024


def torch_logits(model_dir: Path, pairs: Sequence[tuple[str, str]], max_length: int) -> np.ndarray:
    """Logits of the saved torch model (the parity reference)."""
    torch = import_torch()
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    rows = []
    with torch.inference_mode():
        for start in range(0, len(pairs), 16):
            chunk = pairs[start : start + 16]
            batch = tokenizer(
                [p[0] for p in chunk],
                [p[1] for p in chunk],
                truncation="only_second",
                max_length=max_length,
                padding=True,
                return_tensors="pt",
            )
            rows.append(model(**batch).logits.float().numpy())
    return np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)


def onnx_logits(model_dir: Path, pairs: Sequence[tuple[str, str]], max_length: int) -> np.ndarray:
    """Logits as the ``classifier`` verdict plugin computes them (its own ONNX runtime path)."""
    from feverous_es.rerank.cross_encoder import CrossEncoder

    if not pairs:
        return np.zeros((0, 0), dtype=np.float32)
    encoder = CrossEncoder(model_dir, device="cpu", max_length=max_length)
    return np.asarray(encoder.logits(pairs), dtype=np.float32)


def quantize_int8(fp32: Path, int8: Path) -> dict[str, Any]:
    """Dynamic int8 with per-channel weight scales over every MatMul and the embedding Gather.

    :func:`feverous_es.index.export.quantize` (the embedder's recipe) keeps the six feed-forward
    output matmuls in fp32 for cosine fidelity; that puts an all-MiniLM-L6-v2 classifier at
    33.5 MB, over the 30 MB the package may carry, and a 2-way decision tolerates the extra
    error (the parity check below measures it). Its recipe is used for any model where it fits.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from feverous_es.index.export import quantize

    try:
        recipe = quantize(fp32, int8)
        if int8.stat().st_size <= MAX_MODEL_BYTES:
            return recipe
    except RuntimeError:  # not a 6-layer BERT: the embedder recipe does not apply
        pass
    quantize_dynamic(fp32, int8, per_channel=True, weight_type=QuantType.QInt8)
    return {
        "method": "onnxruntime.quantization.quantize_dynamic",
        "per_channel": True,
        "weight_type": "QInt8",
        "fp32_nodes": [],
    }


def export(
    trained: Path, out: Path, work: Path, probe: Sequence[tuple[str, str]], max_length: int
) -> dict:
    """ONNX fp32 (in ``work``) and int8 (``out/model.onnx``), with parity against torch on
    ``probe`` pairs. ``out`` receives model.onnx, tokenizer.json, tokenizer_config.json and
    config.json (with id2label)."""
    import_torch()
    try:
        from optimum.exporters.onnx import main_export
    except ImportError as error:
        raise TrainError(f"{error}; the export needs {INSTALL_HINT}") from None

    fp32_dir = work / FP32_DIR
    shutil.rmtree(fp32_dir, ignore_errors=True)
    main_export(
        str(trained),
        fp32_dir,
        task="text-classification",
        library_name="transformers",
        local_files_only=True,
        do_validation=False,  # parity is checked below, on real claim/premise pairs
    )
    staging = out.with_name(f".{out.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    recipe = quantize_int8(fp32_dir / MODEL_FILE, staging / MODEL_FILE)
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copyfile(fp32_dir / name, staging / name)
    reference = torch_logits(trained, probe, max_length)
    parity: dict[str, Any] = {"pairs": len(probe), "max_length": max_length}
    for name, directory in (("fp32", fp32_dir), ("int8", staging)):
        got = onnx_logits(directory, probe, max_length)
        parity[name] = {
            "max_abs_diff": float(np.max(np.abs(got - reference))) if len(probe) else 0.0,
            "argmax_agreement": float(np.mean(got.argmax(1) == reference.argmax(1)))
            if len(probe)
            else 1.0,
        }
    if parity["fp32"]["max_abs_diff"] > 1e-3:
        raise TrainError(f"the fp32 ONNX export drifted from torch: {parity['fp32']}")
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    return {"int8": recipe, "parity": parity, "bytes": (out / MODEL_FILE).stat().st_size}
