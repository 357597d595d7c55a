"""The GPU queue's last job, bundled: what :mod:`~.rates_job` needs to measure the GPU's rates
for the build planner on a lent machine.

* ``ort/``: this machine's onnxruntime version as the ``onnxruntime-gpu`` wheel for the GPU
  machine's Python, in parts of half a call (the wheel is ~245 MiB);
* ``rates/``: the shipped embedder and sentence ranker as fp16 graphs (derived from the shipped
  int8 ones without torch, as the runtime derives them on a CUDA device) and as the int8
  graphs (the parity check on the machine's CPU);
* ``rates/files/``: their tokenizers, texts of the dump's elements as the build embeds them,
  (sentence, sentence) pairs of its pages as the ranker reads them, and the shipped build rates
  the measured one goes into;
* ``rates_job.py``: the runner.

None of it is in ``queue.json``'s ``files`` (the training queue's check): the job lists its own,
and its calls come after the queue's (docs/gpu-training.md).
"""

from __future__ import annotations

import gzip
import json
import shutil
from importlib.metadata import version
from pathlib import Path
from typing import Any

from feverous_es.runtime.files import sha256_file
from gpu_queue import job as gpu_job
from gpu_queue import rates_job

RUNNER = "rates_job.py"
FOLDERS = ("rates", "ort")  # the job's folders in the bundle: carried file by file
TEXTS = 20_000  # the element texts embedded (the rate is measured over at most 20 s of them)
PAIRS = 4_000
DEVICE_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64")


def is_rates_file(name: str) -> bool:
    """Whether a bundle path (relative) belongs to the rates job."""
    return name == RUNNER or name.split("/")[0] in FOLDERS


def write_rates_job(bundle: Path, wiki: Path, part_bytes: int, *, wheel: bool) -> dict[str, Any]:
    """The rates job's files in ``bundle``; its ``queue.json`` entry (its files' sha256, the
    wheel's name and parts). ``wheel``: download onnxruntime-gpu (False: the dry run, where the
    machine's own onnxruntime is asked for the CUDA provider)."""
    folder, files = bundle / rates_job.OUT_DIR, bundle / rates_job.OUT_DIR / "files"
    files.mkdir(parents=True, exist_ok=True)
    _write_models(folder, files)
    _write_inputs(wiki, files)
    from feverous_es.index.building.plan import RATES_FILE

    shutil.copyfile(RATES_FILE, files / "build_rates.json")
    shutil.copyfile(Path(rates_job.__file__), bundle / RUNNER)
    entry: dict[str, Any] = {"wheel": None, "wheel_parts": []}
    if wheel:
        entry.update(_write_wheel(bundle / "ort", part_bytes))
    entry["files"] = {
        str(p.relative_to(bundle)): sha256_file(p)
        for p in sorted(bundle.rglob("*"))
        if p.is_file() and is_rates_file(str(p.relative_to(bundle))) and p.name != RUNNER
    }
    return entry


def install_command(entry: dict[str, Any], device_dir: str) -> str:
    """The shell that joins and installs the carried wheel on the machine (nothing without
    one)."""
    if not entry.get("wheel"):
        return "true"
    parts = " ".join(f"{device_dir}/{p}" for p in entry["wheel_parts"])
    wheel = f"/tmp/{entry['wheel']}"
    return (
        f"cat {parts} > {wheel} && python3 -m pip install -q --no-index --no-deps --no-compile "
        f"--target /tmp/ort {wheel}"
    )


def _write_models(folder: Path, files: Path) -> None:
    from feverous_es.runtime.embedder import PACKAGED_MODEL_DIR, ensure_cuda_model
    from feverous_es.runtime.files import INT8_FILE, PACKAGED_MODELS_DIR, TOKENIZER_FILE
    from feverous_es.runtime.graphs import fp16_from_int8

    ranker = PACKAGED_MODELS_DIR / "sentence-ranker"
    shutil.copyfile(ensure_cuda_model() / "model.fp16.onnx", folder / "embedder.fp16.onnx")
    fp16_from_int8(ranker / INT8_FILE, folder / "ranker.fp16.onnx")
    for name, source in (("embedder", PACKAGED_MODEL_DIR), ("ranker", ranker)):
        shutil.copyfile(source / INT8_FILE, folder / f"{name}.int8.onnx")
        shutil.copyfile(source / TOKENIZER_FILE, files / f"{name}-tokenizer.json")


def _write_inputs(wiki: Path, files: Path) -> None:
    """Element texts as the build embeds them (one a vector) and sentence pairs of a page, from
    pages spread over ``wiki``."""
    from feverous_es.errors import MalformedPage
    from feverous_es.index.dump.page import parse_page
    from feverous_es.index.dump.wiki import WikiDB

    texts: dict[str, str] = {}
    pairs: list[list[str]] = []
    with WikiDB(wiki) as db:
        for _, page_id, data in db.spread_rows(2_000):
            try:
                elements = parse_page(page_id, data).elements
            except MalformedPage:
                continue
            for element in elements:
                texts.setdefault(element.vector_key, element.embed_text)
            sentences = [e.text for e in elements if e.type.value == "sentence"]
            pairs += [[sentences[0], s] for s in sentences[1:6]]
            if len(texts) >= TEXTS and len(pairs) >= PAIRS:
                break
    for name, rows in (("texts", list(texts.values())[:TEXTS]), ("pairs", pairs[:PAIRS])):
        with gzip.open(files / f"{name}.jsonl.gz", "wt", encoding="utf-8") as out:
            out.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _write_wheel(folder: Path, part_bytes: int) -> dict[str, Any]:
    from feverous_es.runtime.wheels import download_wheels

    folder.mkdir(parents=True, exist_ok=True)
    requirement = f"onnxruntime-gpu=={version('onnxruntime')}"
    platforms = [f"--platform={p}" for p in DEVICE_PLATFORMS]
    download_wheels(
        [requirement, "--python-version=312", "--implementation=cp", *platforms], folder,
        what="GPU rates job's onnxruntime-gpu", hint="or bundle without the rates job",
    )  # fmt: skip
    (wheel,) = folder.glob("*.whl")
    parts = gpu_job.write_parts(wheel, wheel.read_bytes(), part_bytes // 2)
    wheel.unlink()
    return {"wheel": wheel.name, "wheel_parts": [f"ort/{p}" for p in parts]}
