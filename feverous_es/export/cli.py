"""``feverous-es export``: a local Hugging Face model to ONNX (torch is imported only when it
runs)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from feverous_es.console import console, fail, print_json, user_errors
from feverous_es.export import PRECISIONS, TASKS
from feverous_es.export.int8 import RECIPES
from feverous_es.params import FOLDER, PATH, F, json_option, max_length_option, out_option


def int8_option(default: str) -> Callable[[F], F]:
    """``--int8`` (``int8_recipe``): how a command that exports makes the int8 graph."""
    return click.option(
        "--int8", "int8_recipe", type=click.Choice(RECIPES), default=default,
        help="How the int8 graph is made: dynamic (int8 arithmetic: fastest), weight-only (int8 "
        "weights, fp32 arithmetic: fp32's answers at int8's size), mixed (dynamic, the "
        "feed-forward outputs weight-only); bench/quantization.py compares them.",
    )  # fmt: skip


@click.command("export")
@click.argument("model_dir", type=PATH)
@out_option(
    "Directory to write; an existing one is replaced once the new export passed parity.",
    type=FOLDER,
    required=True,
)
@click.option("--task", type=click.Choice(TASKS), default="text-classification")
@click.option(
    "--precision", default=None, metavar="LIST",
    help="Comma-separated graphs: fp32,fp16,int8 (fp32 is always written) "
    "[default: all three; fp32 for text2text-generation].",
)  # fmt: skip
@max_length_option(256, "Tokens per pair (per text for feature-extraction) in the parity check.")
@int8_option("dynamic")
@json_option("the manifest")
@user_errors()
def export_command(
    model_dir: Path, out: Path, task: str, precision: str | None, max_length: int,
    int8_recipe: str, as_json: bool,
) -> None:  # fmt: skip
    """Export MODEL_DIR, a local Hugging Face torch model, to ONNX: model.onnx (fp32),
    model.fp16.onnx (CUDA), model.int8.onnx (CPU), the tokenizer, manifest.json (sha256 of each
    file) and a model card, after a parity check of each graph against torch on real claim /
    evidence pairs (refused when fp32 differs by more than 1e-3)."""
    precisions = None
    if precision is not None:
        precisions = [p.strip() for p in precision.split(",") if p.strip()]
        bad = [p for p in precisions if p not in PRECISIONS]
        if bad or not precisions:
            fail(
                f"--precision takes a comma-separated list of fp32, fp16, int8, not {precision!r}",
                2,
            )
    words = ["feverous-es", "export", str(model_dir), "-o", str(out), "--task", task]
    if precision is not None:
        words += ["--precision", precision]
    words += ["--max-length", str(max_length), "--int8", int8_recipe]
    from feverous_es.export.exporter import export_model
    from feverous_es.export.parity import probe_size

    with console.status(f"exporting {model_dir} ({task})"):
        manifest = export_model(
            model_dir, out, task=task, precisions=precisions, max_length=max_length,
            command=shlex.join(words), int8_recipe=int8_recipe,
        )  # fmt: skip
    if as_json:
        print_json(manifest)
        return
    parity = manifest["parity"]
    table = Table("graph", "file", "MB", "max |Δ| vs torch", "agreement", title=str(out))
    for name, file in manifest["precisions"].items():
        row = parity[name]
        files = file if isinstance(file, list) else [file]
        size = sum(manifest["files"][f]["bytes"] for f in files) / 1e6
        if "argmax_agreement" in row:
            agreement = f"argmax {row['argmax_agreement']:.1%}"
        else:
            agreement = f"cosine min {row['min_cosine']:.4f}"
        table.add_row(
            name, ", ".join(files), f"{size:.1f}", f"{row['max_abs_diff']:.2e}", agreement
        )
    Console().print(table)
    console.print(
        f"parity on {probe_size(parity)} of claims and evidence; {len(manifest['files'])} files "
        f"with sha256 in {out / 'manifest.json'}, model card {out / 'README.md'}"
    )
