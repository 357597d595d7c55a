"""A torch BERT classifier rebuilt from its dynamic-int8 ONNX graph.

The packaged rankers and verdict models ship as int8 graphs only; their fp32 training
checkpoints are not kept. Every int8 weight is ``(q - zero_point) * scale`` of the fp32 weight it
was quantized from, so the graph alone gives a torch model whose weights are those values: what
the int8 graph computes, but for the rounding of its activations. Exported again with the same
recipe (:func:`feverous_es.export.int8.quantize_int8`) it gives the same int8 graph, byte for
byte (checked on the packaged sentence ranker), so a model can be distilled or re-exported
without the checkpoint it came from.

Reads the graphs optimum exports (node names ``/bert/encoder/layer.N/attention/self/query/…``,
initializers named by the torch parameters they hold). Needs torch and transformers (the
``export`` extra).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np

from feverous_es.errors import ModelError
from feverous_es.runtime.files import INT8_FILES, TOKENIZER_FILE

TOKENIZER_FILES = (TOKENIZER_FILE, "tokenizer_config.json")
QUANTIZED, SCALE, ZERO_POINT = "_quantized", "_scale", "_zero_point"
# "/bert/encoder/layer.3/attention/self/query/MatMul_quant" -> "bert.encoder.layer.3.…query"
_ENCODER_MATMUL = re.compile(r"^/(bert/encoder/layer\.\d+/.+)/MatMul_quant$")
_HEAD_MATMULS = {"/bert/pooler/dense/Gemm_MatMul_quant": "bert.pooler.dense",
                 "/classifier/Gemm_MatMul_quant": "classifier"}  # fmt: skip


def int8_weights(graph_file: Path) -> dict[str, np.ndarray]:
    """The fp32 value of every parameter of a dynamic-int8 BERT classifier graph, by its torch
    name (linear weights as torch holds them: ``(out, in)``)."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(graph_file)).graph
    stored = {i.name: numpy_helper.to_array(i) for i in graph.initializer}

    def dequantized(name: str) -> np.ndarray:
        q = stored[name + QUANTIZED].astype(np.float32)
        return (q - stored[name + ZERO_POINT].astype(np.float32)) * stored[name + SCALE]

    weights = {
        name: value.copy()
        for name, value in stored.items()
        if value.dtype == np.float32 and not name.endswith((QUANTIZED, SCALE, ZERO_POINT))
    }
    for name in stored:
        if name.startswith("bert.embeddings.") and name.endswith(QUANTIZED):
            weights[name.removesuffix(QUANTIZED)] = dequantized(name.removesuffix(QUANTIZED))
    for node in graph.node:
        if node.op_type != "MatMulInteger":
            continue
        found = _ENCODER_MATMUL.match(node.name)
        module = found[1].replace("/", ".") if found else _HEAD_MATMULS.get(node.name)
        if module is None:
            raise ModelError(f"{graph_file}: unexpected quantized matmul {node.name}")
        # ONNX multiplies by (in, out); torch's Linear holds (out, in).
        weights[f"{module}.weight"] = dequantized(node.input[1].removesuffix(QUANTIZED)).T.copy()
    return weights


def torch_from_int8(model_dir: Path, out: Path) -> Path:
    """Write a Hugging Face BERT sequence classifier with the weights of ``model_dir``'s int8
    graph (and its ``config.json`` and tokenizer) into ``out``; returns ``out``."""
    import torch
    from transformers import AutoConfig, BertForSequenceClassification

    graph = next((model_dir / name for name in INT8_FILES if (model_dir / name).is_file()), None)
    if graph is None or not (model_dir / "config.json").is_file():
        raise ModelError(f"{model_dir} has no int8 graph and config.json to rebuild a model from")
    config = AutoConfig.from_pretrained(model_dir)
    if config.model_type != "bert":
        raise ModelError(f"{model_dir} is a {config.model_type} model; only BERT is rebuilt")
    model = BertForSequenceClassification(config)
    weights = {k: torch.from_numpy(v) for k, v in int8_weights(graph).items()}
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # position_ids is a buffer transformers fills itself; anything else missing is an error.
    missing = [name for name in missing if not name.endswith("position_ids")]
    if missing or unexpected:
        raise ModelError(
            f"{graph} does not map onto a BERT classifier: missing {missing[:3]}, "
            f"unexpected {unexpected[:3]}"
        )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    for name in TOKENIZER_FILES:
        if (model_dir / name).is_file():
            shutil.copy2(model_dir / name, out / name)
    return out
