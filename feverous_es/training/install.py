"""Putting a trained model into the installed package: a separate, explicit step.

Training writes only to its ``--out``; :func:`install_packaged` then checks that the directory
loads as the model of its role and replaces the package's model with one rename, so a reader
never sees half a model and a failed copy leaves the old one whole.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from feverous_es.errors import ModelError
from feverous_es.runtime.files import (
    MANIFEST_FILE,
    PACKAGED_MODELS_DIR,
    manifest_complete,
    staged_model_dir,
    write_manifest,
)
from feverous_es.runtime.parts import (
    JOINED_KEY,
    PART_BYTES,
    split_file,
    whole_model_dir,
)

ROLES = ("verdict", "verdict-2", "verdict-3", "verdict-nei", "verdict-large", "table-verdict",
         "sentence-ranker")  # fmt: skip
# `train install OUT --as grounding`: a `train grounding` output's settings, not a model
# (training/grounding.py: install_settings stores them with their reader).
GROUNDING_ROLE = "grounding"
# The large reader's graph (~110 MB in int8) ships as parts the runtime joins on first use
# (runtime/parts.py): the repository keeps files under 50 MB.
SPLIT_ROLES = ("verdict-large",)


def check_model(model_dir: Path, role: str) -> None:
    """Raise :class:`ModelError` unless ``model_dir`` loads as the ``role`` model."""
    if not manifest_complete(model_dir):
        raise ModelError(f"{model_dir} is not a complete model directory (no {MANIFEST_FILE})")
    if role == "table-verdict":
        from feverous_es.verdict.feature_model import FeatureClassifier

        FeatureClassifier(model_dir)
        return
    from feverous_es.runtime.cross_encoder import CrossEncoder
    from feverous_es.runtime.tasks import TEXT_CLASSIFICATION, check_task

    model_dir = whole_model_dir(model_dir)  # a shipped large reader: its parts joined, checked

    check_task(model_dir, TEXT_CLASSIFICATION, f"the {role} role")  # before loading anything
    width = CrossEncoder(model_dir, device="cpu").num_logits
    if role == "sentence-ranker":
        if width != 1:
            raise ModelError(
                f"{model_dir} has {width} outputs; a ranker has one (a relevance logit)"
            )
        return
    from feverous_es.verdict.model_files import read_labels

    labels = read_labels(model_dir)
    if width not in (None, len(labels)):
        raise ModelError(f"{model_dir} has {width} outputs but names {len(labels)} labels")


def install_packaged(model_dir: Path, role: str, *, into: Path = PACKAGED_MODELS_DIR) -> Path:
    """Check ``model_dir`` as the ``role`` model, then make it the package's (``into/role``)
    with one rename; returns the installed directory."""
    if role not in ROLES:
        raise ModelError(f"no packaged model role {role!r} (roles: {', '.join(ROLES)})")
    model_dir = Path(model_dir)
    check_model(model_dir, role)
    manifest = json.loads((model_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
    names = list(manifest["files"])
    out = Path(into) / role
    meta = {k: v for k, v in manifest.items() if k != "files"}
    with staged_model_dir(out) as staging:
        joined = {}
        for name in names:
            if role in SPLIT_ROLES and (model_dir / name).stat().st_size > PART_BYTES:
                joined[name] = split_file(model_dir / name, staging, part_bytes=PART_BYTES)
            else:
                shutil.copyfile(model_dir / name, staging / name)
        if joined:
            meta[JOINED_KEY] = joined
            names = [n for n in names if n not in joined]
            names += [part for entry in joined.values() for part in entry["parts"]]
        write_manifest(staging, names, **meta)
    return out
