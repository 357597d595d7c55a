"""int8 graphs of an fp32 graph, for ONNX Runtime's CPU provider: three recipes.

* ``dynamic`` (:func:`quantize_int8`'s default): int8 weights and activations quantized per
  batch at run time: the fastest, with the activations' rounding in every answer;
* ``weight-only``: the weights stored int8 (one scale per output channel) behind
  ``DequantizeLinear``, the arithmetic fp32: fp32's answers (to the weights' rounding) at int8's
  size and about fp32's speed;
* ``mixed``: ``dynamic``, except the feed-forward output matmuls (post-GELU inputs: the widest
  range, the largest error), which are weight-only.

Which recipe a model ships with is measured (bench/quantization.py; docs/decisions.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from feverous_es.errors import ExportError

# Largest int8 graph the package may carry (the shipped rankers and verdict models).
MAX_MODEL_BYTES = 30 * 1024 * 1024
RECIPES = ("dynamic", "weight-only", "mixed")
# Smaller weights stay fp32 (biases, layer norms): their bytes do not matter.
WEIGHT_ONLY_MIN_ELEMENTS = 65_536


def quantize_int8(
    fp32: Path,
    int8: Path,
    *,
    max_bytes: int | None = MAX_MODEL_BYTES,
    recipe: str = "dynamic",
) -> dict:
    """Quantize ``fp32`` into ``int8`` by ``recipe`` (see the module); returns the recipe for
    the manifest. ``max_bytes`` applies to ``dynamic`` (below).

    Per-channel int8 weight scales over every MatMul and the embedding Gather, except, in a
    6-layer BERT, the six feed-forward output matmuls, kept fp32 (:func:`_ffn_output_matmuls`).
    When that graph is over ``max_bytes`` (an all-MiniLM-L6-v2 classifier: 33.5 MB), those six
    are quantized too: a 2-way decision tolerates the extra error, and the export's parity check
    measures it. ``max_bytes=None``: no limit (the embedder, whose vectors need the fidelity).

    Chosen by measurement for all-MiniLM-L6-v2 on an AVX2 CPU without VNNI: cosine to fp32 over
    300 wiki texts in length-sorted batches of 32, and tokens per CPU-second on one thread
    (fp32: 3.3k).

    * default recipe (per-tensor scales): 5.1k, but cosine mean 0.962, worst 0.86;
    * per-channel scales: 5.1k, mean 0.993, worst 0.980, 3% of texts under 0.99;
    * 7-bit (reduce_range) or u8 weights, against AVX2's saturating u8 x s8 kernel: mean 0.993
      and 0.994 at 5.0k and 4.2k;
    * per-channel, with the six feed-forward output matmuls left fp32 (their post-GELU inputs
      have the widest range, and their error dominates): 4.1k, mean 0.996, worst 0.986, 0.7%
      under 0.99. The fastest that holds 0.99 on sentences: this one. (u8 weights on top:
      0.997 at 3.7k.)

    Wall clock at 2 threads, batch 32, 128-token texts (tokens/s): fp32 6.0k, default 9.5k,
    per-channel 9.7k, this one 8.0k. The top 10 sentences of 300 FEVEROUS claims agree with
    fp32's at 0.92 (default recipe: 0.80). Fusing the graph first (onnxruntime.transformers' BERT
    optimizer) gained nothing: ONNX Runtime applies the same fusions when it loads the plain
    graph.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    if recipe == "weight-only":
        return {"method": "weight-only", **quantize_weights(fp32, int8)}
    if recipe == "mixed":
        kept = _ffn_output_matmuls(fp32, layers=None)
        quantize_dynamic(fp32, int8, per_channel=True, weight_type=QuantType.QInt8,
                         nodes_to_exclude=kept)  # fmt: skip
        return {"method": "mixed", "weight_only_nodes": kept, **quantize_weights(int8, int8)}
    if recipe != "dynamic":
        raise ExportError(f"unknown int8 recipe {recipe!r} (recipes: {', '.join(RECIPES)})")

    def quantize(fp32_nodes: list[str]) -> None:
        quantize_dynamic(
            fp32, int8, per_channel=True, weight_type=QuantType.QInt8,
            nodes_to_exclude=fp32_nodes,
        )  # fmt: skip

    fp32_nodes = _ffn_output_matmuls(fp32)
    quantize(fp32_nodes)
    if fp32_nodes and max_bytes is not None and int8.stat().st_size > max_bytes:
        fp32_nodes = []
        quantize(fp32_nodes)
    return {
        "method": "onnxruntime.quantization.quantize_dynamic",
        "per_channel": True,
        "weight_type": "QInt8",
        "fp32_nodes": fp32_nodes,
    }


def _ffn_output_matmuls(fp32: Path, layers: int | None = 6) -> list[str]:
    """The feed-forward output matmul of each layer as optimum names them, when the graph has
    ``layers`` of them (None: any number); none otherwise."""
    import onnx

    graph = onnx.load(str(fp32), load_external_data=False).graph
    names = [
        n.name
        for n in graph.node
        if n.op_type == "MatMul" and "/output/dense/" in n.name and "/attention/" not in n.name
    ]
    return names if layers is None or len(names) == layers else []


def quantize_weights(source: Path, out: Path) -> dict:
    """Write ``source`` with every large fp32 weight of a MatMul (scales per output column) or
    a Gather (per row: an embedding's token) stored as symmetric int8 behind a
    ``DequantizeLinear``; the arithmetic stays fp32. Returns what was quantized."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    weights = {i.name: i for i in graph.initializer}
    uses: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    nodes = []
    for node in list(graph.node):
        slot = {"MatMul": 1, "Gather": 0}.get(node.op_type)
        name = node.input[slot] if slot is not None else ""
        if name not in weights or uses[name] != 1:
            continue
        value = numpy_helper.to_array(weights[name])
        if value.dtype != np.float32 or value.ndim != 2 or value.size < WEIGHT_ONLY_MIN_ELEMENTS:
            continue
        axis = 1 if node.op_type == "MatMul" else 0  # MatMul's [in, out]; Gather's [token, dim]
        peak = np.abs(value).max(axis=1 - axis)
        scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
        shaped = scale[None, :] if axis == 1 else scale[:, None]
        quantized = np.clip(np.rint(value / shaped), -127, 127).astype(np.int8)
        graph.initializer.remove(weights[name])
        graph.initializer.extend([
            numpy_helper.from_array(quantized, f"{name}_int8"),
            numpy_helper.from_array(scale, f"{name}_scale"),
            numpy_helper.from_array(np.zeros_like(quantized[0] if axis == 1 else quantized[:, 0]),
                                    f"{name}_zero"),
        ])  # fmt: skip
        graph.node.insert(list(graph.node).index(node), helper.make_node(
            "DequantizeLinear", [f"{name}_int8", f"{name}_scale", f"{name}_zero"], [name],
            name=f"{name}_dequantize", axis=axis,
        ))  # fmt: skip
        nodes.append(node.name)
    onnx.save(model, str(out))
    return {"weight_only": len(nodes), "per_channel": True, "weight_type": "QInt8"}
