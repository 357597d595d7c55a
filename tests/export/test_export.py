"""`feverous-es export` with a tiny BERT made here: the three graphs, manifest and card, parity
within bounds, one-line errors, and which graph the runtimes pick on CUDA and on CPU (CUDA is
simulated: no GPU is needed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("optimum.exporters.onnx")

from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.errors import ModelError
from feverous_es.export import PRECISIONS
from feverous_es.export.parity import PROBE_PAIRS, torch_logits
from feverous_es.runtime import session as onnx_session
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.runtime.embedder import Embedder
from feverous_es.runtime.files import (
    FP16_FILE,
    FP32_FILE,
    INT8_FILE,
    LEGACY_INT8_FILE,
    MANIFEST_FILE,
    choose_model_file,
    verified,
)
from feverous_es.runtime.session import CPU_PROVIDER, CUDA_PROVIDER

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
)


@pytest.fixture(scope="module")
def tiny_classifier(tiny_base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT with a seeded 2-way classification head, saved (so torch reloads it
    identically for the parity reference)."""
    import torch
    import transformers

    torch.manual_seed(1)
    root = tmp_path_factory.mktemp("tiny-classifier")
    model = transformers.BertForSequenceClassification.from_pretrained(tiny_base, num_labels=2)
    model.save_pretrained(root)
    for name in TOKENIZER_FILES:
        shutil.copyfile(tiny_base / name, root / name)
    return root


def run_export(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["export", *args])
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def exported(tiny_classifier: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export") / "classifier"
    code, output = run_export(str(tiny_classifier), "-o", str(out), "--max-length", "128")
    assert code == 0, output
    return out


def test_export_writes_graphs_manifest_and_card(exported: Path, tiny_classifier: Path) -> None:
    names = {p.name for p in exported.iterdir()}
    assert {FP32_FILE, FP16_FILE, INT8_FILE, MANIFEST_FILE, "README.md", "config.json"} <= names
    assert {"tokenizer.json", "tokenizer_config.json"} <= names
    assert not [n for n in exported.parent.iterdir() if n.name.startswith(".")]  # no tmp left
    manifest = json.loads((exported / MANIFEST_FILE).read_text())
    assert set(manifest["files"]) == names - {MANIFEST_FILE}
    for name in manifest["files"]:
        verified(exported, name, remedy="export again")  # every sha256 matches
    assert manifest["task"] == "text-classification"
    assert manifest["precisions"] == {"fp32": FP32_FILE, "fp16": FP16_FILE, "int8": INT8_FILE}
    assert manifest["source"]["path"] == str(tiny_classifier)
    assert len(manifest["source"]["weights_sha256"]) == 64

    parity = manifest["parity"]
    assert parity["pairs"] == len(PROBE_PAIRS) and parity["max_length"] == 128
    assert parity["fp32"]["max_abs_diff"] < 1e-4
    assert parity["fp16"]["max_abs_diff"] < 1e-2
    assert parity["int8"]["max_abs_diff"] < 0.1
    for precision in PRECISIONS:
        assert parity[precision]["argmax_agreement"] >= 0.8

    card = (exported / "README.md").read_text()
    assert str(tiny_classifier) in card
    assert f"feverous-es export {tiny_classifier} -o {exported}" in card
    assert f"{parity['int8']['max_abs_diff']:.2e}" in card


def test_exported_graphs_score_like_torch_in_the_runtime(
    exported: Path, tiny_classifier: Path
) -> None:
    pairs = list(PROBE_PAIRS[:6])
    reference = torch_logits(tiny_classifier, pairs, 128)
    fp32 = CrossEncoder(exported, device="cpu", max_length=128)
    int8 = CrossEncoder(exported, device="cpu", max_length=128, quantized=True)
    assert fp32.model_path.name == FP32_FILE and int8.model_path.name == INT8_FILE
    np.testing.assert_allclose(fp32.logits(pairs), reference, atol=1e-4)
    np.testing.assert_allclose(int8.logits(pairs), reference, atol=0.1)
    # One session per model: a second encoder of the same graph reuses the first one's.
    assert (
        CrossEncoder(exported, device="cpu", max_length=128)._model.session is fp32._model.session
    )


def test_feature_extraction_export(tiny_base: Path, tmp_path: Path) -> None:
    out = tmp_path / "encoder"
    code, output = run_export(
        str(tiny_base), "-o", str(out), "--task", "feature-extraction", "--precision", "int8",
        "--json", "--max-length", "64",
    )  # fmt: skip
    assert code == 0, output
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert set(manifest["precisions"]) == {"fp32", "int8"}  # fp32 always, fp16 not asked for
    assert not (out / FP16_FILE).exists()
    assert manifest["parity"]["fp32"]["max_abs_diff"] < 1e-4
    assert manifest["parity"]["int8"]["min_cosine"] > 0.99
    assert manifest["parity"]["texts"] == 2 * len(PROBE_PAIRS)  # claims and evidence, each alone


def test_not_a_model_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, output = run_export(str(tmp_path / "empty"), "-o", str(tmp_path / "out"))
    assert code == 1
    assert output.strip().splitlines() == [
        f"error: {tmp_path / 'empty'} is not a Hugging Face model directory (no config.json)"
    ]
    assert not (tmp_path / "out").exists()


def test_corrupt_weights_are_one_line(tiny_classifier: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(tiny_classifier, broken)
    (broken / "model.safetensors").write_bytes(b"\x00" * 64)
    code, output = run_export(str(broken), "-o", str(tmp_path / "out"))
    assert code == 1
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: optimum could not export"), output
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["broken"]  # no temporary directory left


def test_bad_precision_and_task_combinations(tiny_classifier: Path, tmp_path: Path) -> None:
    code, output = run_export(str(tiny_classifier), "-o", str(tmp_path), "--precision", "bf16")
    assert code == 2 and "--precision takes" in output
    code, output = run_export(
        str(tiny_classifier), "-o", str(tmp_path / "x"), "--task", "text2text-generation",
        "--precision", "int8",
    )  # fmt: skip
    assert code == 1 and "text2text-generation exports fp32 only, not int8" in output


# ----------------------------------------------------------------------------- graph choice


@pytest.mark.parametrize(
    ("available", "on_cuda", "quantized", "expected"),
    [
        ({FP32_FILE, FP16_FILE, INT8_FILE}, True, True, FP16_FILE),
        ({FP32_FILE, INT8_FILE}, True, True, FP32_FILE),  # no fp16: fp32 on the GPU
        ({FP32_FILE, LEGACY_INT8_FILE}, True, True, FP32_FILE),
        ({FP32_FILE, FP16_FILE, INT8_FILE}, False, True, INT8_FILE),
        ({FP32_FILE, FP16_FILE, LEGACY_INT8_FILE}, False, True, LEGACY_INT8_FILE),
        ({FP32_FILE, FP16_FILE, INT8_FILE}, False, False, FP32_FILE),
        ({FP32_FILE, FP16_FILE}, False, True, FP32_FILE),  # never fp16 on the CPU
        # Only an int8 graph (the shipped text verdict): it runs everywhere, never read as fp32.
        ({INT8_FILE}, True, True, INT8_FILE),
        ({INT8_FILE}, False, False, INT8_FILE),
    ],
)
def test_choose_model_file(
    available: set[str], on_cuda: bool, quantized: bool, expected: str
) -> None:
    assert choose_model_file(available, on_cuda, quantized=quantized) == expected


class FakeCudaSession:
    """A CPU session of the file asked for that reports the CUDA provider (no GPU here)."""

    def __init__(self, session: object) -> None:
        self._session = session

    def get_providers(self) -> list[str]:
        return [CUDA_PROVIDER, CPU_PROVIDER]

    def __getattr__(self, name: str) -> object:
        return getattr(self._session, name)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list[str]]]:
    """CUDA 'present': sessions asked for with the CUDA provider run the same file on CPU."""
    loads: list[tuple[str, list[str]]] = []
    real = onnx_session._load

    def load(path: Path, options: object, providers: list[str], **kwargs: object) -> object:
        loads.append((Path(path).name, providers))
        session = real(path, options, [CPU_PROVIDER], **kwargs)
        return FakeCudaSession(session) if CUDA_PROVIDER in providers else session

    monkeypatch.setattr(onnx_session, "cuda_device_present", lambda: True)
    monkeypatch.setattr(onnx_session, "_load", load)
    return loads


def test_cuda_runs_fp16_and_cpu_runs_int8(exported: Path, fake_cuda: list) -> None:
    gpu = CrossEncoder(exported, device="auto", max_length=128, quantized=True)
    assert gpu.provider == CUDA_PROVIDER and gpu.model_path.name == FP16_FILE
    assert fake_cuda == [(FP16_FILE, [CUDA_PROVIDER, CPU_PROVIDER])]
    cpu = CrossEncoder(exported, device="cpu", max_length=128, quantized=True)
    assert cpu.provider == CPU_PROVIDER and cpu.model_path.name == INT8_FILE
    pairs = list(PROBE_PAIRS[:4])
    np.testing.assert_allclose(gpu.logits(pairs), cpu.logits(pairs), atol=0.1)


def test_cuda_runs_the_embedders_fp16_and_cpu_its_fp32(
    tiny_base: Path, tmp_path: Path, fake_cuda: list
) -> None:
    encoder = tmp_path / "encoder"
    code, output = run_export(str(tiny_base), "-o", str(encoder), "--task", "feature-extraction",
                              "--max-length", "64")  # fmt: skip
    assert code == 0, output
    embedder = Embedder(encoder, device="auto")
    assert embedder.model_file == FP16_FILE and embedder.provider == CUDA_PROVIDER
    assert Embedder(encoder, device="cpu").model_file == FP32_FILE
    assert Embedder(encoder, device="cpu", quantized=True).model_file == INT8_FILE


def test_cuda_without_fp16_runs_fp32(exported: Path, tmp_path: Path, fake_cuda: list) -> None:
    copy = tmp_path / "no-fp16"
    shutil.copytree(exported, copy)
    (copy / FP16_FILE).unlink()
    gpu = CrossEncoder(copy, device="cuda", max_length=128)
    assert gpu.model_path.name == FP32_FILE and gpu.provider == CUDA_PROVIDER


def test_cpu_fallback_when_the_cuda_provider_does_not_load(
    exported: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CUDA reported by the driver but its libraries unusable: the session ONNX Runtime gives
    back runs on CPU, and the CPU graph (int8) is loaded instead of keeping fp16 there."""
    loads: list[str] = []
    real = onnx_session._load

    def load(path: Path, options: object, providers: list[str], **kwargs: object) -> object:
        loads.append(Path(path).name)
        return real(path, options, [CPU_PROVIDER], **kwargs)  # ORT without CUDA libraries

    monkeypatch.setattr(onnx_session, "cuda_device_present", lambda: True)
    monkeypatch.setattr(onnx_session, "_load", load)
    encoder = CrossEncoder(exported, device="auto", max_length=128, quantized=True)
    assert loads == [FP16_FILE, INT8_FILE]
    assert encoder.provider == CPU_PROVIDER and encoder.model_path.name == INT8_FILE
    with pytest.raises(ModelError, match="CUDA execution provider is not usable"):
        CrossEncoder(exported, device="cuda", max_length=128)
