"""ONNX model directories and ONNX Runtime sessions, shared by the embedder and cross-encoders.

A model directory is installed with one rename and holds ``manifest.json``: the sha256 and size
of each file, checked before a file is used. A session runs on the CUDA execution provider when a
CUDA device is usable, else on the CPU provider.

A directory may hold one graph per precision: ``model.onnx`` (fp32), ``model.fp16.onnx`` (for
the CUDA provider) and ``model.int8.onnx`` (dynamic int8, for the CPU provider; older exports
name it ``model_int8.onnx``). :func:`choose_model_file` picks one for the provider; sessions are
shared per file, provider and thread count, so two users of one model share one session.

No I/O binding on CUDA: each batch is built on the host (length-sorted, padded to its own
longest pair), so its inputs cross to the device once either way, and the outputs come back to
the host for pooling (embedder) or sorting (rankers); binding would only pre-allocate outputs,
which for dynamic batch shapes means re-binding every batch. It would pay once pooling and
normalization moved into the graph, so that a batch's output is (batch, 384) not
(batch, tokens, 384).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import onnxruntime as ort

from feverous_es.errors import ModelError

MANIFEST_FILE = "manifest.json"
FP32_FILE = "model.onnx"
FP16_FILE = "model.fp16.onnx"
INT8_FILE = "model.int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
LEGACY_INT8_FILE = "model_int8.onnx"  # the embedder's and the reranker's installs
PRECISION_FILES = {"fp32": FP32_FILE, "fp16": FP16_FILE, "int8": INT8_FILE}
DEVICES = ("auto", "cuda", "cpu")
CUDA_PROVIDER = "CUDAExecutionProvider"
CPU_PROVIDER = "CPUExecutionProvider"


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


def file_entry(path: Path) -> dict[str, object]:
    """A manifest's record of one file: its sha256 and size."""
    return {"sha256": sha256_file(path), "bytes": path.stat().st_size}


def write_manifest(model_dir: Path, names: Iterable[str], **meta: object) -> dict[str, object]:
    """Write ``model_dir/manifest.json``: ``meta``'s keys, then ``files`` (``names`` hashed).
    Returns the manifest."""
    manifest: dict[str, object] = {
        **meta,
        "files": {name: file_entry(model_dir / name) for name in names},
    }
    (model_dir / MANIFEST_FILE).write_text(
        json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    return manifest


@contextmanager
def staged_model_dir(out: Path, *, replace: bool = True) -> Iterator[Path]:
    """A temporary directory beside ``out`` to write a model into, moved to ``out`` with one
    rename when the block ends without error (so a reader never sees half a model) and removed
    otherwise. An existing ``out`` is replaced; with ``replace=False`` a complete one is kept
    (a cache that another process filled meanwhile)."""
    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would hide a shared cache from other users
    try:
        yield tmp
        if replace or not manifest_complete(out):
            _install(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _install(tmp: Path, out: Path) -> None:
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old)
    else:
        tmp.rename(out)


def choose_model_file(available: Collection[str], on_cuda: bool, *, quantized: bool = True) -> str:
    """The graph to load out of the file names ``available``: on CUDA ``model.fp16.onnx`` when
    there is one, else fp32; on CPU the int8 graph when ``quantized`` and there is one, else
    fp32. (fp16 on the CPU provider is slower than fp32: most of its kernels are fp32 only.)"""
    if on_cuda:
        return FP16_FILE if FP16_FILE in available else FP32_FILE
    if quantized:
        for name in (INT8_FILE, LEGACY_INT8_FILE):
            if name in available:
                return name
    return FP32_FILE


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
    caller can run fp16 on a GPU and int8 on CPU (:func:`choose_model_file`), and hashes only
    the file it loads.
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


# (file, size, mtime, providers, threads) -> session: a model opened twice while a first user
# holds it (the cell and non-cell rerankers, a verdict model that is also a ranker) is loaded
# once; a session no one holds is freed. A replaced file has a new key.
_SESSIONS: weakref.WeakValueDictionary[tuple, ort.InferenceSession] = weakref.WeakValueDictionary()


def _load(path: Path, options: ort.SessionOptions, providers: list[str]) -> ort.InferenceSession:
    try:
        stat = Path(path).stat()
        key = (
            str(Path(path).resolve()),
            stat.st_size,
            stat.st_mtime_ns,
            tuple(providers),
            options.intra_op_num_threads,
        )
        session = _SESSIONS.get(key)
        if session is None:
            session = ort.InferenceSession(path, options, providers=providers)
            _SESSIONS[key] = session
        return session
    except Exception as exc:  # onnxruntime raises its own classes (InvalidProtobuf, Fail, ...)
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelError(f"{path} cannot be loaded by ONNX Runtime: {reason}") from exc
