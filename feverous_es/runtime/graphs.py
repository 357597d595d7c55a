"""Torch-free rewrites of ONNX graphs, for models that ship or download as int8.

* :func:`dequantize`: a dynamically quantized int8 graph back to fp32 matmuls over its
  dequantized weights (batch-independent outputs; the base for fp16);
* :func:`to_fp16`: an fp32 graph in fp16 for the CUDA provider, fp32 at its inputs and outputs;
* :func:`fp16_from_int8`: the two in turn, for a model that ships only its int8 graph.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from feverous_es.errors import ModelError


def to_fp16(fp32: Path, out: Path) -> dict:
    """An fp16 copy of ``fp32`` for the CUDA provider, with fp32 inputs and outputs (casts at
    the edges, so callers feed and read the same arrays as for fp32); returns the recipe.

    Quantization nodes (a graph dequantized from int8 keeps its int8 embedding table behind a
    DequantizeLinear) stay fp32: their fp16 variants are not valid ONNX.
    """
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    kept = ["DequantizeLinear", "QuantizeLinear", "DynamicQuantizeLinear"]
    model = convert_float_to_float16(
        onnx.load(str(fp32)), keep_io_types=True, op_block_list=DEFAULT_OP_BLOCK_LIST + kept
    )
    onnx.save(model, str(out))
    return {
        "method": "onnxruntime.transformers.float16.convert_float_to_float16",
        "keep_io_types": True,
        "fp32_ops": ["DEFAULT_OP_BLOCK_LIST", *kept],
    }


def fp16_from_int8(int8_model: Path, out: Path) -> dict:
    """An fp16 graph for the CUDA provider from a dynamically quantized int8 one, through the
    fp32 graph :func:`dequantize` writes beside ``out`` (removed after); the fp16 recipe."""
    fp32 = out.with_name(out.name + ".fp32")
    dequantize(int8_model, fp32)
    try:
        return to_fp16(fp32, out)
    finally:
        fp32.unlink(missing_ok=True)


def dequantize(int8_model: Path, out: Path) -> None:
    """Write ``int8_model`` with each dynamically quantized matmul turned back into an fp32
    MatMul over its dequantized weights (needs the ``onnx`` package).

    The pattern replaced is the one onnxruntime's dynamic quantizer writes:
    ``DynamicQuantizeLinear(x) -> MatMulInteger(x_q, W_q, x_zp, W_zp) -> Cast -> Mul(x_scale *
    W_scale)``, which becomes ``MatMul(x, (W_q - W_zp) * W_scale)``.
    """
    model = onnx.load(str(int8_model))
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    producer = {output: node for node in graph.node for output in node.output}
    consumers: dict[str, list] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def only_consumer(name: str, op_type: str) -> onnx.NodeProto:
        nodes = consumers.get(name, [])
        if len(nodes) != 1 or nodes[0].op_type != op_type:
            raise ModelError(f"{int8_model}: unexpected quantized graph after {name}")
        return nodes[0]

    replaced: dict[int, onnx.NodeProto] = {}
    dropped: set[int] = set()
    new_weights = []
    for node in graph.node:
        if node.op_type != "MatMulInteger":
            continue
        quantize = producer[node.input[0]]
        cast = only_consumer(node.output[0], "Cast")
        scale = only_consumer(cast.output[0], "Mul")
        scales = producer[scale.input[1]]  # x_scale * W_scale
        if quantize.op_type != "DynamicQuantizeLinear" or scales.op_type != "Mul":
            raise ModelError(f"{int8_model}: {node.name} is not a dynamically quantized matmul")
        w_q = numpy_helper.to_array(weights[node.input[1]]).astype(np.float32)
        w_zero = numpy_helper.to_array(weights[node.input[3]]).astype(np.float32)
        w_scale = numpy_helper.to_array(weights[scales.input[1]]).astype(np.float32)
        name = f"{node.input[1]}_fp32"
        new_weights.append(numpy_helper.from_array((w_q - w_zero) * w_scale, name))
        replaced[id(node)] = helper.make_node(
            "MatMul", [quantize.input[0], name], [scale.output[0]], name=f"{node.name}_fp32"
        )
        dropped.update((id(cast), id(scale), id(scales)))

    nodes = [replaced.get(id(n), n) for n in graph.node if id(n) not in dropped]
    used = {name for n in nodes for name in n.input} | {o.name for o in graph.output}
    nodes = [
        n for n in nodes if n.op_type != "DynamicQuantizeLinear" or any(o in used for o in n.output)
    ]
    used = {name for n in nodes for name in n.input}
    kept = [init for init in graph.initializer if init.name in used]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + new_weights)
    onnx.checker.check_model(model)
    onnx.save(model, str(out))
