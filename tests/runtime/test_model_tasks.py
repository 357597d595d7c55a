"""Each model directory says the task it was made for; the wrapper of that task opens it, and a
model given for another job is refused in one line naming both tasks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from feverous_es.errors import ModelError
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.runtime.embedder import Embedder
from feverous_es.runtime.files import MANIFEST_FILE, PACKAGED_MODELS_DIR
from feverous_es.runtime.load import load_model
from feverous_es.runtime.tasks import FEATURE_EXTRACTION, TEXT_CLASSIFICATION, model_task
from feverous_es.training.install import check_model, install_packaged


def test_packaged_models_say_their_tasks() -> None:
    assert model_task(PACKAGED_MODELS_DIR / "embedder") == FEATURE_EXTRACTION  # its manifest
    for role in ("verdict", "sentence-ranker"):  # their config's architecture
        assert model_task(PACKAGED_MODELS_DIR / role) == TEXT_CLASSIFICATION
    assert model_task(PACKAGED_MODELS_DIR / "table-verdict") is None  # a tree model, no text


def test_each_model_opens_in_the_wrapper_of_its_task() -> None:
    embedder = load_model(PACKAGED_MODELS_DIR / "embedder", device="cpu")
    assert isinstance(embedder, Embedder) and embedder.embed(["A sentence."]).shape == (1, 384)
    verdict = load_model(PACKAGED_MODELS_DIR / "verdict", device="cpu")
    assert isinstance(verdict, CrossEncoder) and verdict.num_logits == 3


def test_a_model_for_another_task_is_refused_in_one_line() -> None:
    with pytest.raises(ModelError) as caught:
        CrossEncoder(PACKAGED_MODELS_DIR / "embedder", device="cpu")
    message = str(caught.value)
    assert "\n" not in message
    assert "holds a feature-extraction model; a cross-encoder" in message
    assert "needs a text-classification one" in message
    with pytest.raises(ModelError, match="text-classification model; the embedder needs"):
        Embedder(PACKAGED_MODELS_DIR / "verdict", device="cpu")


def test_install_refuses_a_model_made_for_another_task(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="feature-extraction model; the sentence-ranker role"):
        install_packaged(PACKAGED_MODELS_DIR / "embedder", "sentence-ranker", into=tmp_path)
    assert not (tmp_path / "sentence-ranker").exists()


def test_a_directory_that_names_no_task_is_opened_as_asked(tmp_path: Path) -> None:
    # Another tool's export: the wrapper asked for tries it; only the map needs a task.
    model = tmp_path / "model"
    shutil.copytree(PACKAGED_MODELS_DIR / "sentence-ranker", model)
    (model / "config.json").unlink()
    manifest = json.loads((model / MANIFEST_FILE).read_text())
    del manifest["files"]["config.json"]
    (model / MANIFEST_FILE).write_text(json.dumps(manifest))
    assert CrossEncoder(model, device="cpu").num_logits == 1
    with pytest.raises(ModelError, match="does not say what its model does"):
        load_model(model, device="cpu")


def test_a_bare_base_architecture_says_no_task(tmp_path: Path) -> None:
    # A classifier trained from a sentence-transformers base may keep the base's config
    # ("BertModel"): that is not a feature extractor, so nothing is refused on its word.
    model = tmp_path / "model"
    shutil.copytree(PACKAGED_MODELS_DIR / "sentence-ranker", model)
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "architectures": ["BertModel"]}))
    manifest = json.loads((model / MANIFEST_FILE).read_text())
    del manifest["files"]["config.json"]
    (model / MANIFEST_FILE).write_text(json.dumps(manifest))
    assert model_task(model) is None
    assert CrossEncoder(model, device="cpu").num_logits == 1
    check_model(model, "sentence-ranker")  # and it installs, as the GPU job's student must
