"""Model directories on disk: the manifest of hashed files, atomic installs, which graph to load.

A model directory is installed with one rename and holds ``manifest.json``: the sha256 and size
of each file, checked before a file is used. It may hold one graph per precision:
``model.onnx`` (fp32), ``model.fp16.onnx`` (for the CUDA provider) and ``model.int8.onnx``
(dynamic int8, for the CPU provider; the downloaded reranker names it ``model_int8.onnx``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from feverous_es.errors import ModelError

MANIFEST_FILE = "manifest.json"
FP32_FILE = "model.onnx"
FP16_FILE = "model.fp16.onnx"
INT8_FILE = "model.int8.onnx"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
LEGACY_INT8_FILE = "model_int8.onnx"  # the downloaded reranker's int8 graph
INT8_FILES = (INT8_FILE, LEGACY_INT8_FILE)
PRECISION_FILES = {"fp32": FP32_FILE, "fp16": FP16_FILE, "int8": INT8_FILE}
# The models that ship inside the package (embedder, verdict, table-verdict, sentence-ranker).
PACKAGED_MODELS_DIR = Path(__file__).resolve().parents[1] / "models"


# Files whose sha256 matched their manifest, by path, size, mtime and inode: a new process
# trusts a file it checked before unless the file changed (hashing the four packaged graphs
# cost every `verify` ~0.3 s of its ~1 s).
VERIFIED_FILE = "verified-files.json"


def cache_root() -> Path:
    """``$FEVEROUS_ES_CACHE``, else ``~/.cache/feverous-es``."""
    cache = os.environ.get("FEVEROUS_ES_CACHE")
    return Path(cache) if cache else Path.home() / ".cache" / "feverous-es"


def models_dir() -> Path:
    """``$FEVEROUS_ES_CACHE/models``, else ``~/.cache/feverous-es/models``."""
    return cache_root() / "models"


def file_identity(path: Path) -> tuple[str, int, int, int]:
    """``(resolved path, size, mtime in ns, inode)``: what keys a cache entry derived from a
    file (its checked sha256, its session, its optimized graph), so a replaced or rewritten
    file gets a new one."""
    stat = path.stat()
    return str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino


def sha256_file(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def file_entry(path: Path) -> dict[str, object]:
    """A manifest's record of one file: its sha256 and size."""
    return {"sha256": sha256_file(path), "bytes": path.stat().st_size}


def write_manifest(
    model_dir: Path,
    names: Iterable[str],
    known: Mapping[str, dict[str, object]] | None = None,
    /,
    **meta: object,
) -> dict[str, object]:
    """Write ``model_dir/manifest.json``: ``meta``'s keys, then ``files`` (``names`` hashed,
    but for those ``known`` already gives the entry of). Returns the manifest."""
    known = known or {}
    manifest: dict[str, object] = {
        **meta,
        "files": {
            name: dict(known[name]) if name in known else file_entry(model_dir / name)
            for name in names
        },
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
    """The graph to load out of the file names ``available``: on CUDA ``model.fp16.onnx``, else
    fp32; on CPU the int8 graph when ``quantized``, else fp32. A directory with only an int8
    graph (the shipped verdict) runs it everywhere: it is never misread as fp32. (fp16 on the
    CPU provider is slower than fp32: most of its kernels are fp32 only.)"""
    int8 = [name for name in INT8_FILES if name in available]
    if on_cuda:
        preference = [FP16_FILE, FP32_FILE, *int8]
    else:
        preference = [*int8, FP32_FILE] if quantized else [FP32_FILE, *int8]
    return next((name for name in preference if name in available), FP32_FILE)


def graph_files(directory: Path) -> set[str]:
    """The ONNX graphs a model directory holds."""
    return {path.name for path in directory.glob("*.onnx")}


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
    seen = (*file_identity(path), entry["sha256"])
    checked = _verified_files()
    if seen in checked:
        return path
    if sha256_file(path) != entry["sha256"]:
        raise ModelError(f"{path} does not match its manifest; delete {model_dir} to {remedy}")
    _remember_verified(checked, seen)
    return path


def trust_verified(path: Path, sha256: str) -> None:
    """Count ``path`` as checked against ``sha256`` (its bytes were just hashed on their way
    in): its first use does not hash it again."""
    _remember_verified(_verified_files(), (*file_identity(path), sha256))


def _verified_files() -> set[tuple]:
    try:
        entries = json.loads((cache_root() / VERIFIED_FILE).read_text(encoding="utf-8"))
        return {tuple(e) for e in entries}
    except (OSError, ValueError, TypeError):
        return set()


def _remember_verified(checked: set[tuple], entry: tuple) -> None:
    """Add ``entry`` to the verified files, keeping those of files that still exist (an
    unwritable cache only means hashing again next time)."""
    kept = sorted(e for e in checked | {entry} if Path(e[0]).exists())
    target = cache_root() / VERIFIED_FILE
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}")
        tmp.write_text(json.dumps(kept, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, target)
    except OSError:
        pass


def read_json_object(path: Path) -> dict[str, Any]:
    """A model directory's JSON file (manifest, config) as a dict: empty when the file is
    absent or holds no object; :class:`ModelError` when it cannot be read."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path} is unreadable ({exc})") from exc
    return value if isinstance(value, dict) else {}


def batch_dependent(directory: Path, graph: str) -> bool:
    """Whether ``graph`` quantizes its activations per batch (a dynamic int8 graph: a pair's
    score moves with the other pairs of its batch); a weight-only int8 graph, whose manifest
    says so, computes in fp32 and batches like one."""
    if graph not in INT8_FILES:
        return False
    recipe = read_json_object(directory / MANIFEST_FILE).get("int8")
    return not (isinstance(recipe, dict) and recipe.get("method") == "weight-only")


def manifest_files(directory: Path) -> set[str]:
    """The files a directory's ``manifest.json`` lists with their sha256 (none without one)."""
    files = read_json_object(directory / MANIFEST_FILE).get("files")
    return set(files) if isinstance(files, dict) else set()  # else not a manifest of ours


def model_max_length(directory: Path) -> int:
    """The tokenizer config's ``model_max_length`` (BERT's 512 when absent or unusable)."""
    try:
        value = json.loads((directory / TOKENIZER_CONFIG_FILE).read_text())["model_max_length"]
    except (OSError, ValueError, KeyError, TypeError):
        return 512
    return int(value) if isinstance(value, int) and 0 < value <= 8192 else 512
