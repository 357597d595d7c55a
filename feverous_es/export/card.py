"""The model card (``README.md``) an export writes beside its graphs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from feverous_es.export import PRECISIONS
from feverous_es.export.parity import MAX_FP32_DRIFT, MIN_POOLED_COSINE

CARD_FILE = "README.md"


def write_card(out: Path, meta: dict[str, Any], sizes: dict[str, int], about: str = "") -> None:
    """Write ``out/README.md``: ``about`` (what the model is, where its weights come from), then
    the source, command, files and parity of ``meta`` (the manifest's fields)."""
    checks = meta["parity"]
    rows = []
    for precision in PRECISIONS:
        if precision not in checks:
            continue
        row = checks[precision]
        agreement = (
            f"argmax agreement {row['argmax_agreement']:.1%}"
            if "argmax_agreement" in row
            else f"pooled cosine min {row['min_cosine']:.4f}, mean {row['mean_cosine']:.4f}"
            if "min_cosine" in row
            else ""
        )
        rows.append(f"| {precision} | {row['max_abs_diff']:.2e} | {agreement} |")
    files = "\n".join(
        f"| `{name}` | {size / 1e6:.1f} MB |" for name, size in sizes.items() if name != CARD_FILE
    )
    source = meta["source"]
    if "path" in source:
        origin = f"`{source['path']}`"
    else:
        origin = f"the PyPI wheel `{source['package']}=={source['version']}`"
    command = meta["command"] or "feverous_es.export.exporter.export_model(...)"
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    if "texts" in checks:
        probe = (
            f"{checks['texts']} texts of real FEVEROUS / TabFact claims and evidence, each "
            f"embedded alone (max_length {checks['max_length']})"
        )
        bounds = ", ".join(f"{p} {b:g}" for p, b in MIN_POOLED_COSINE.items())
        refusal = f",\nor when a graph's pooled cosine falls under its bound ({bounds})"
    else:
        probe = (
            f"{checks['pairs']} real FEVEROUS / TabFact claim-evidence pairs "
            f"(max_length {checks['max_length']})"
        )
        refusal = ""
    text = f"""# {meta["model"]} (ONNX, {meta["task"]})
{about and chr(10) + about.strip() + chr(10)}
Exported from the torch model in {origin} with optimum's ONNX exporter
({versions}).

```
{command}
```

Runtimes choose the graph by provider: `model.fp16.onnx` on CUDA when present, else
`model.onnx`; the int8 graph on CPU when asked for, else `model.onnx`
(`feverous_es.onnx_session.choose_model_file`). `manifest.json` lists every file's sha256,
checked before a file is loaded.

## Files

| file | size |
|---|---|
{files}

## Parity against torch

{probe},
the same token ids fed to torch and to ONNX Runtime's CPU provider:

| graph | max abs diff | agreement |
|---|---|---|
{chr(10).join(rows)}

The export is refused when fp32 differs from torch by more than {MAX_FP32_DRIFT:g}{refusal}.
"""
    (out / CARD_FILE).write_text(text, encoding="utf-8")
