"""ONNX Runtime sessions: on the CUDA execution provider when a CUDA device is usable, else on
the CPU provider; shared per file, provider and thread count, so two users of one model share
one session.

No I/O binding on CUDA: each batch is built on the host (length-sorted, padded to its own
longest pair), so its inputs cross to the device once either way, and the outputs come back to
the host for pooling (embedder) or sorting (rankers); binding would only pre-allocate outputs,
which for dynamic batch shapes means re-binding every batch. It would pay once pooling and
normalization moved into the graph, so that a batch's output is (batch, 384) not
(batch, tokens, 384).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import sys
import weakref
from collections.abc import Callable
from pathlib import Path

import onnxruntime as ort

from feverous_es.errors import ConfigError, ModelError
from feverous_es.runtime.files import cache_root, file_identity

# Graphs ONNX Runtime optimized, by source file (under the cache root).
OPTIMIZED_DIR = "optimized-graphs"
# The most those graphs may take: every model file ever opened (each export, each training
# run's, each test's) gets its own entry, and a machine that ran the test suite for a day held
# 39 GB of them. The packaged readers, rankers and embedder take ~0.3 GB; the least recently
# used graphs beyond this go.
OPTIMIZED_BUDGET = 2 << 30

DEVICES = ("auto", "cuda", "cpu")
CUDA_PROVIDER = "CUDAExecutionProvider"
CPU_PROVIDER = "CPUExecutionProvider"


def check_device(device: str) -> None:
    if device not in DEVICES:
        raise ConfigError(f"device must be 'auto', 'cuda' or 'cpu', not {device!r}")


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


def execution_provider(device: str) -> str:
    """The provider a model for ``device`` runs on, for a loader that makes its own sessions
    (optimum's seq2seq): CUDA where ``device`` allows it and a CUDA device is present, else
    CPU; ``device="cuda"`` without one raises ModelError."""
    check_device(device)
    if device != "cpu" and cuda_device_present():
        return CUDA_PROVIDER
    if device == "cuda":
        raise ModelError("device='cuda' but no CUDA device is present here")
    return CPU_PROVIDER


def open_session(
    model_file: Callable[[bool], Path], *, device: str, threads: int | None
) -> ort.InferenceSession:
    """A session on CUDA when ``device`` allows it and CUDA is usable, else on CPU.

    ``model_file(on_cuda)`` returns the (verified) ONNX file to load for that provider, so a
    caller can run fp16 on a GPU and int8 on CPU (:func:`choose_model_file`), and hashes only
    the file it loads.
    ``device="cuda"`` raises ModelError when CUDA is not usable.
    """
    provider = execution_provider(device)
    options = ort.SessionOptions()
    if threads is not None:
        options.intra_op_num_threads = threads
    # The CPU arena keeps every block it grew for the largest batch shape seen, and a server
    # must not grow: plain malloc gives memory back (docs/decisions.md, Runtime).
    options.enable_cpu_mem_arena = False
    # Pool threads that spin between runs take the CPU from the store searches and the other
    # models (docs/decisions.md, Runtime).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if provider == CUDA_PROVIDER:
        session = _load(model_file(True), options, [CUDA_PROVIDER, CPU_PROVIDER])
        # Without usable CUDA libraries the session quietly runs on CPU, where int8 is faster.
        if session.get_providers()[0] == CUDA_PROVIDER:
            return session
        if device == "cuda":
            raise ModelError(
                "device='cuda' but the CUDA execution provider is not usable here: this "
                f"onnxruntime {ort.__version__} offers {', '.join(ort.get_available_providers())}"
                "; install onnxruntime-gpu of that version in its place, with the CUDA 12 and "
                "cuDNN 9 libraries it loads (docs/scale.md: the GPU's rate)"
            )
    return _load_optimized(model_file(False), options)


def _load_optimized(path: Path, options: ort.SessionOptions) -> ort.InferenceSession:
    """A CPU session of ``path``'s graph as ONNX Runtime optimizes it, from the cache once it
    has been optimized there: optimizing took ~40 % of opening a packaged graph (0.26 s of
    the ranker's), on every process start. The extended level's fusions are the same on every
    CPU (the level above adds layout changes for the CPU it ran on, so it is not saved); a
    changed graph or another ONNX Runtime gets a new cache entry."""
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    key = "|".join(map(str, (*file_identity(Path(path)), ort.__version__)))
    cached = cache_root() / OPTIMIZED_DIR / f"{hashlib.sha256(key.encode()).hexdigest()}.onnx"
    if cached.is_file():
        try:
            session = _load(path, options, [CPU_PROVIDER], graph=cached)
            with contextlib.suppress(OSError):
                os.utime(cached)  # recently used: the last to go
            return session
        except ModelError:
            cached.unlink(missing_ok=True)  # a torn write: optimize again
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f".{cached.name}.{os.getpid()}")
        options.optimized_model_filepath = str(partial)
        session = _load(path, options, [CPU_PROVIDER])
        os.replace(partial, cached)
        prune_optimized(cached.parent, OPTIMIZED_BUDGET)
        return session
    except OSError:  # an unwritable cache: optimize in memory, as before
        options.optimized_model_filepath = ""
        return _load(path, options, [CPU_PROVIDER])


def prune_optimized(folder: Path, budget: int) -> None:
    """Remove the least recently used optimized graphs of ``folder`` until the rest take at
    most ``budget`` bytes (another process's graph may go under it: it is optimized again)."""
    graphs = []
    for graph in folder.glob("*.onnx"):
        with contextlib.suppress(OSError):  # removed by another process meanwhile
            stat = graph.stat()
            graphs.append((stat.st_mtime_ns, stat.st_size, graph))
    total = sum(size for _, size, _ in graphs)
    for _, size, graph in sorted(graphs, key=lambda g: g[0]):
        if total <= budget:
            break
        graph.unlink(missing_ok=True)
        total -= size


# (file identity, providers, threads) -> session: a model opened twice while a first user
# holds it (the cell and non-cell rerankers, a verdict model that is also a ranker) is loaded
# once; a session no one holds is freed. A replaced file has a new key.
_SESSIONS: weakref.WeakValueDictionary[tuple, ort.InferenceSession] = weakref.WeakValueDictionary()


def _load(
    path: Path,
    options: ort.SessionOptions,
    providers: list[str],
    *,
    graph: Path | None = None,
) -> ort.InferenceSession:
    """A session of the model file ``path``, shared while someone holds it; ``graph``: the file
    to load instead (its optimized graph from the cache), the session still ``path``'s."""
    try:
        key = (*file_identity(Path(path)), tuple(providers), options.intra_op_num_threads)
        session = _SESSIONS.get(key)
        if session is None:
            session = ort.InferenceSession(graph or path, options, providers=providers)
            _SESSIONS[key] = session
        return session
    except Exception as exc:  # onnxruntime raises its own classes (InvalidProtobuf, Fail, ...)
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelError(f"{path} cannot be loaded by ONNX Runtime: {reason}") from exc
