"""Models that ship split into parts, joined into the user cache on first use.

A graph over the repository's file limit (the large reader's int8 graph: ~110 MB) ships as byte
slices ``NAME.part-00``, ``NAME.part-01``, … of at most :data:`PART_BYTES`. The packaged
directory's manifest hashes every part as any file, and names under ``joined`` each whole
file's parts, sha256 and size. :func:`joined_model_dir` joins the parts, checks the whole (each
byte hashed once; where the whole does not match, the part that differs is named), and
installs a plain model directory (the joined graph, the other files, its own manifest) as
``<cache>/models/<name>-<sha256[:12]>`` with one rename: a later call finds it there, and a
new ship (another sha256) gets its own directory instead of a stale one.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from feverous_es.errors import ModelError
from feverous_es.runtime.files import (
    MANIFEST_FILE,
    graph_files,
    manifest_complete,
    models_dir,
    read_json_object,
    sha256_file,
    staged_model_dir,
    trust_verified,
    verified,
    write_manifest,
)

MIB = 1 << 20
PART_BYTES = 48 * MIB  # under the 50 MB a file the repository keeps
JOINED_KEY = "joined"


def split_file(path: Path, out_dir: Path, *, part_bytes: int = PART_BYTES) -> dict[str, Any]:
    """Write ``path`` into ``out_dir`` as parts of at most ``part_bytes``; returns its
    ``joined`` entry (the parts in order, the whole file's sha256 and size)."""
    digest = hashlib.sha256()
    parts: list[str] = []
    with path.open("rb") as src:
        while chunk := src.read(part_bytes):
            name = f"{path.name}.part-{len(parts):02d}"
            (out_dir / name).write_bytes(chunk)
            digest.update(chunk)
            parts.append(name)
    return {"parts": parts, "sha256": digest.hexdigest(), "bytes": path.stat().st_size}


def is_split(model_dir: Path) -> bool:
    """Whether ``model_dir``'s manifest names files shipped as parts."""
    return bool(read_json_object(model_dir / MANIFEST_FILE).get(JOINED_KEY))


def whole_model_dir(model_dir: Path) -> Path:
    """``model_dir`` itself, or, where it ships files as parts, its joined directory."""
    return joined_model_dir(model_dir) if is_split(model_dir) else model_dir


def _join(packaged: Path, parts: list[str], whole: Path, sha256: str, remedy: str) -> None:
    """Write ``parts`` of ``packaged`` into ``whole``, hashing every byte once on its way:
    ModelError (one line) for a missing part, or, when the whole is not ``sha256``, naming
    the part that does not match its manifest (hashed again only then)."""
    digest = hashlib.sha256()
    with whole.open("wb") as sink:
        for part in parts:
            path = packaged / part
            if not path.is_file():
                raise ModelError(f"{path} is missing from the model; delete {packaged} to {remedy}")
            with path.open("rb") as src:
                while chunk := src.read(MIB):
                    digest.update(chunk)
                    sink.write(chunk)
    if digest.hexdigest() != sha256:
        for part in parts:
            verified(packaged, part, remedy=remedy)
        raise ModelError(f"the parts of {packaged / whole.name} do not join into its sha256")


def graph_digests(model_dir: Path) -> dict[str, str]:
    """The sha256 of each ONNX graph of ``model_dir``, whole or shipped as parts, as its
    manifest records them (a graph is checked against that record before it loads); a graph
    the manifest does not list (a user's own export) is hashed."""
    manifest = read_json_object(model_dir / MANIFEST_FILE)
    listed = {name: str(entry["sha256"]) for name, entry in manifest.get("files", {}).items()}
    listed.update({name: str(e["sha256"]) for name, e in (manifest.get(JOINED_KEY) or {}).items()})
    names = graph_files(model_dir) | {name for name in listed if name.endswith(".onnx")}
    return {
        name: listed[name] if name in listed else sha256_file(model_dir / name)
        for name in sorted(names)
    }


def graph_sources(model_dir: Path) -> list[Path]:
    """The files ``model_dir``'s graphs are read from: each whole graph, and the parts of a
    graph shipped split (what must stay on disk for the model to load)."""
    manifest = read_json_object(model_dir / MANIFEST_FILE)
    whole = graph_files(model_dir)
    whole |= {name for name in manifest.get("files", {}) if name.endswith(".onnx")}
    parts = [part for entry in (manifest.get(JOINED_KEY) or {}).values() for part in entry["parts"]]
    return [model_dir / name for name in [*sorted(whole), *parts]]


def joined_model_dir(packaged: Path, *, cache: Path | None = None) -> Path:
    """The model directory of ``packaged`` with its split files whole (see the module's
    docstring); joined and checked on the first call, found in ``cache`` (default the user
    cache's models) afterwards. Raises :class:`ModelError` (one line) for a missing or altered
    part or a whole that does not match its sha256."""
    packaged = Path(packaged)
    manifest = read_json_object(packaged / MANIFEST_FILE)
    joined: dict[str, dict[str, Any]] = manifest.get(JOINED_KEY) or {}
    if not joined:
        raise ModelError(f"{packaged} ships no split files (no '{JOINED_KEY}' in its manifest)")
    # Every file's digest names the joined copy: a file changed in the package (a new
    # grounding.json beside the same weights) makes a new one, never a stale cache.
    digests = [e["sha256"] for e in joined.values()]
    digests += [str(f.get("sha256")) for _, f in sorted(manifest.get("files", {}).items())]
    key = hashlib.sha256("".join(digests).encode()).hexdigest()
    out = (cache or models_dir()) / f"{packaged.name}-{key[:12]}"
    if manifest_complete(out):
        return out
    remedy = "restore it from the repository (git checkout) or reinstall the package"
    listed: dict[str, dict[str, Any]] = manifest["files"]
    parts = {part for entry in joined.values() for part in entry["parts"]}
    with staged_model_dir(out, replace=False) as tmp:
        for name, entry in joined.items():
            _join(packaged, entry["parts"], tmp / name, entry["sha256"], remedy)
        others = [n for n in listed if n not in parts]
        for name in others:
            shutil.copyfile(verified(packaged, name, remedy=remedy), tmp / name)
        meta = {k: v for k, v in manifest.items() if k not in ("files", JOINED_KEY)}
        meta["joined_from"] = str(packaged.resolve())
        # each whole was hashed on its way in: its manifest entry and first load trust that
        wholes = {name: {"sha256": e["sha256"], "bytes": e["bytes"]} for name, e in joined.items()}
        write_manifest(tmp, [*others, *joined], wholes, **meta)
    for name, entry in joined.items():
        if (out / name).stat().st_size == entry["bytes"]:
            trust_verified(out / name, entry["sha256"])
    return out
