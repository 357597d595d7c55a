"""ONNX model directories and ONNX Runtime sessions, shared by the embedder and cross-encoders.

A model directory is installed with one rename and holds ``manifest.json``: the sha256 and size
of each file, checked before a file is used. A session runs on the CUDA execution provider when a
CUDA device is usable, else on the CPU provider.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import onnxruntime as ort

MANIFEST_FILE = "manifest.json"
DEVICES = ("auto", "cuda", "cpu")
CUDA_PROVIDER = "CUDAExecutionProvider"
CPU_PROVIDER = "CPUExecutionProvider"


class ModelError(Exception):
    """The model files are missing, corrupt, or cannot be installed or loaded here."""


def models_dir() -> Path:
    """``$FEVEROUS_ES_CACHE/models``, else ``~/.cache/feverous-es/models``."""
    cache = os.environ.get("FEVEROUS_ES_CACHE")
    root = Path(cache) if cache else Path.home() / ".cache" / "feverous-es"
    return root / "models"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def manifest_complete(model_dir: Path) -> bool:
    """Whether ``model_dir`` has a manifest and every file it lists."""
    manifest = model_dir / MANIFEST_FILE
    if not manifest.is_file():
        return False
    files = json.loads(manifest.read_text())["files"]
    return all((model_dir / name).is_file() for name in files)


def verified(model_dir: Path, name: str, *, remedy: str) -> Path:
    """The path of ``name`` after checking its sha256 against the directory's manifest.

    ``remedy`` completes the error message: ``delete <model_dir> to <remedy>``.
    """
    path = model_dir / name
    entry = json.loads((model_dir / MANIFEST_FILE).read_text())["files"].get(name)
    if entry is None or not path.is_file():
        raise ModelError(f"{path} is missing from the model; delete {model_dir} to {remedy}")
    if sha256_file(path) != entry["sha256"]:
        raise ModelError(f"{path} does not match its manifest; delete {model_dir} to {remedy}")
    return path


def check_device(device: str) -> None:
    if device not in DEVICES:
        raise ValueError(f"device must be 'auto', 'cuda' or 'cpu', not {device!r}")


@functools.cache
def cuda_device_present() -> bool:
    """Whether the CUDA driver reports a device (without loading any CUDA library but it)."""
    # onnxruntime-gpu lists the CUDA provider even on machines without a GPU, and a session
    # asked for it falls back to CPU only after loading the model; ask the driver first.
    try:
        cuda = ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return (
        cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
    )


def open_session(
    model_file: Callable[[bool], Path], *, device: str, threads: int | None
) -> ort.InferenceSession:
    """A session on CUDA when ``device`` allows it and CUDA is usable, else on CPU.

    ``model_file(on_cuda)`` returns the (verified) ONNX file to load for that provider, so a
    caller can run fp32 on a GPU and int8 on CPU, and hashes only the file it loads.
    ``device="cuda"`` raises ModelError when CUDA is not usable.
    """
    check_device(device)
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    if device != "cpu" and cuda_device_present():
        session = _load(model_file(True), options, [CUDA_PROVIDER, CPU_PROVIDER])
        # Without usable CUDA libraries the session quietly runs on CPU, where int8 is faster.
        if session.get_providers()[0] == CUDA_PROVIDER:
            return session
    if device == "cuda":
        raise ModelError("device='cuda' but the CUDA execution provider is not usable here")
    return _load(model_file(False), options, [CPU_PROVIDER])


def _load(path: Path, options: ort.SessionOptions, providers: list[str]) -> ort.InferenceSession:
    try:
        return ort.InferenceSession(path, options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own classes (InvalidProtobuf, Fail, ...)
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelError(f"{path} cannot be loaded by ONNX Runtime: {reason}") from exc
