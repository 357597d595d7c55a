"""A packaged int8 model rebuilt in torch (feverous_es.export.dequantize): its weights are the
int8 graph's, so exported again with the same recipe it gives that graph back, byte for byte,
and a smaller student can start from them (`train rerank --teacher`)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("optimum.exporters.onnx")

from feverous_es.errors import ModelError
from feverous_es.export.dequantize import torch_from_int8
from feverous_es.export.exporter import export_model
from feverous_es.rerank.rankers import PACKAGED_SENTENCE_RANKER
from feverous_es.training.rerank.fit import kept_layers


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_rebuilt_ranker_exports_to_the_packaged_graph(tmp_path: Path) -> None:
    rebuilt = torch_from_int8(PACKAGED_SENTENCE_RANKER, tmp_path / "torch")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {
        p.name for p in rebuilt.iterdir()
    }
    export_model(rebuilt, tmp_path / "onnx", precisions=["int8"], max_length=128)
    graph = "model.int8.onnx"
    assert _sha256(tmp_path / "onnx" / graph) == _sha256(PACKAGED_SENTENCE_RANKER / graph)


def test_a_directory_without_an_int8_graph_is_refused(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelError, match="no int8 graph"):
        torch_from_int8(tmp_path, tmp_path / "out")


def test_a_student_keeps_evenly_spaced_layers() -> None:
    assert kept_layers(6, 3) == [0, 2, 4]
    assert kept_layers(6, 2) == [0, 3]
    assert kept_layers(6, 6) == list(range(6))
