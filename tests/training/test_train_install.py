"""Training never writes into the package; `train install` puts a model there in one step."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.errors import ModelError, TrainError
from feverous_es.runtime.files import (
    MANIFEST_FILE,
    PACKAGED_MODELS_DIR,
    manifest_complete,
    sha256_file,
)
from feverous_es.training.common import check_out
from feverous_es.training.install import ROLES, check_model, install_packaged
from feverous_es.verdict.feature_model import FeatureClassifier


def test_install_replaces_the_model_whole(tmp_path: Path) -> None:
    trained = tmp_path / "trained"
    shutil.copytree(PACKAGED_MODELS_DIR / "table-verdict", trained)
    into = tmp_path / "package"
    (into / "table-verdict").mkdir(parents=True)
    (into / "table-verdict" / "stale.txt").write_text("old model")

    out = install_packaged(trained, "table-verdict", into=into)

    assert out == into / "table-verdict"
    assert not (out / "stale.txt").exists()
    assert manifest_complete(out)
    FeatureClassifier(out)  # loads, hashes checked


def test_install_refuses_a_model_of_another_role(tmp_path: Path) -> None:
    into = tmp_path / "package"
    (into / "verdict").mkdir(parents=True)
    (into / "verdict" / "kept.txt").write_text("old model")
    with pytest.raises(ModelError):
        install_packaged(PACKAGED_MODELS_DIR / "table-verdict", "verdict", into=into)
    assert (into / "verdict" / "kept.txt").read_text() == "old model"
    with pytest.raises(ModelError, match="a ranker has one"):  # 3 verdict logits, not one
        install_packaged(PACKAGED_MODELS_DIR / "verdict", "sentence-ranker", into=into)


def test_training_refuses_an_out_inside_the_package() -> None:
    with pytest.raises(TrainError, match="inside the installed package"):
        check_out(PACKAGED_MODELS_DIR / "table-verdict")
    result = CliRunner().invoke(
        main,
        ["train", "table-verdict", "--claims", "x.jsonl", "--index", "x"],
    )
    assert result.exit_code == 2 and "--out" in result.output


def test_every_shipped_model_passes_the_install_check() -> None:
    assert sorted(ROLES) == sorted(p.name for p in PACKAGED_MODELS_DIR.iterdir() if p.name in ROLES)
    for role in ROLES:
        check_model(PACKAGED_MODELS_DIR / role, role)


@pytest.mark.parametrize(
    "role", sorted(d.name for d in PACKAGED_MODELS_DIR.iterdir() if d.is_dir())
)
def test_every_packaged_model_file_matches_its_manifest(role: str) -> None:
    # A card edited without its manifest is a model a user cannot check against what shipped.
    model_dir = PACKAGED_MODELS_DIR / role
    files = json.loads((model_dir / MANIFEST_FILE).read_text())["files"]
    assert manifest_complete(model_dir)
    for name, entry in files.items():
        assert sha256_file(model_dir / name) == entry["sha256"], f"{role}/{name}"
