"""The large reader tier: a graph shipped in parts is joined and checked on first use, found
again afterwards, refused when a part is altered; the GPU teacher's transfer format reads back;
the weight-only int8 recipe keeps fp32's answers; one word (`--reader large`) turns it on."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.errors import ExportError, ModelError, TrainError
from feverous_es.plugins.config import load_config
from feverous_es.runtime import parts
from feverous_es.runtime.files import FP32_FILE, MANIFEST_FILE, PACKAGED_MODELS_DIR, write_manifest
from feverous_es.runtime.tasks import TEXT_CLASSIFICATION
from feverous_es.training import install
from feverous_es.verdict.entailment import EntailmentModel
from feverous_es.verdict.readers import LARGE_READER, READERS, reader_dirs

CLAIMS = ["The Eiffel Tower is in Paris.", "The Eiffel Tower is in Rome."]
PREMISES = ["[Eiffel Tower] The Eiffel Tower is a tower in Paris."] * 2


@pytest.fixture
def model_dir(tiny_classifier: tuple[Path, object], tmp_path: Path) -> Path:
    """A trained-model directory as `train` writes one: the tiny classifier's fp32 graph,
    tokenizer, config and manifest."""
    out = tmp_path / "trained"
    shutil.copytree(tiny_classifier[0], out)
    names = sorted(p.name for p in out.iterdir() if p.is_file())
    write_manifest(out, names, task=TEXT_CLASSIFICATION)
    return out


@pytest.fixture
def packaged(model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``model_dir`` installed as the large reader, its graph split into three parts."""
    size = (model_dir / FP32_FILE).stat().st_size
    monkeypatch.setattr(install, "PART_BYTES", size // 3 + 1)
    return install.install_packaged(model_dir, "verdict-large", into=tmp_path / "package")


def test_install_ships_the_graph_in_parts_that_join_into_the_same_model(
    model_dir: Path, packaged: Path, tmp_path: Path
) -> None:
    names = {p.name for p in packaged.iterdir()}
    assert FP32_FILE not in names
    assert {f"{FP32_FILE}.part-0{i}" for i in range(3)} <= names
    joined = parts.joined_model_dir(packaged, cache=tmp_path / "cache")
    original = (model_dir / FP32_FILE).read_bytes()
    assert (joined / FP32_FILE).read_bytes() == original
    manifest = json.loads((joined / MANIFEST_FILE).read_text())
    assert manifest["files"][FP32_FILE]["sha256"] == hashlib.sha256(original).hexdigest()
    np.testing.assert_allclose(
        EntailmentModel(joined, device="cpu").probabilities(CLAIMS, PREMISES),
        EntailmentModel(model_dir, device="cpu").probabilities(CLAIMS, PREMISES),
        atol=1e-6,
    )
    # Found again, not joined again; a new process reads the same directory.
    stamp = (joined / FP32_FILE).stat().st_mtime_ns
    assert parts.joined_model_dir(packaged, cache=tmp_path / "cache") == joined
    assert (joined / FP32_FILE).stat().st_mtime_ns == stamp


def test_an_altered_part_is_refused_in_one_line(packaged: Path, tmp_path: Path) -> None:
    part = packaged / f"{FP32_FILE}.part-01"
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"part-01 does not match its manifest"):
        parts.joined_model_dir(packaged, cache=tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("verdict-large-*"))  # nothing half-joined


def test_a_directory_without_parts_is_not_split(model_dir: Path) -> None:
    assert not parts.is_split(model_dir)
    with pytest.raises(ModelError, match="ships no split files"):
        parts.joined_model_dir(model_dir)


def write_transfer(folder: Path, tensors: dict[str, np.ndarray]) -> None:
    """The GPU teacher's transfer format (../shared/gpu/README.md): large matrices as int8
    rows with fp16 scales, the rest fp16, in byte slices, with SHA256SUMS."""
    from safetensors.numpy import save

    stored: dict[str, np.ndarray] = {}
    for name, value in tensors.items():
        if value.ndim == 2:
            peak = np.abs(value).max(axis=1)
            scale = np.where(peak > 0, peak / 127, 1).astype(np.float16)
            stored[name] = np.rint(value / scale.astype(np.float32)[:, None]).astype(np.int8)
            stored[name + ".__scale__"] = scale
        else:
            stored[name] = value.astype(np.float16)
    blob = save(stored, metadata={"format": "int8-rows"})
    folder.mkdir()
    third = len(blob) // 3 + 1
    names = []
    for i in range(3):
        names.append(f"teacher.int8rows.safetensors.0{i}")
        (folder / names[-1]).write_bytes(blob[i * third : (i + 1) * third])
    (folder / "config.json").write_text("{}")
    names.append("config.json")
    sums = [f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()}  {n}" for n in names]
    (folder / "SHA256SUMS").write_text("\n".join(sums) + "\n")


def test_the_teachers_transfer_format_reads_back(tmp_path: Path) -> None:
    from safetensors.numpy import load_file

    from feverous_es.training.gpu_results import read_teacher

    rng = np.random.default_rng(0)
    tensors = {"layer.weight": rng.normal(size=(8, 16)).astype(np.float32),
               "layer.bias": rng.normal(size=16).astype(np.float32)}  # fmt: skip
    write_transfer(tmp_path / "fetched", tensors)
    read = read_teacher(tmp_path / "fetched", tmp_path / "hf")
    assert read["int8_rows_tensors"] == 1 and read["tensors"] == 2
    back = load_file(str(tmp_path / "hf" / "model.safetensors"))
    for name, value in tensors.items():
        assert back[name].dtype == np.float32
        # int8 rows: within half a step of each row's scale; fp16: within its rounding
        step = np.abs(value).max(axis=-1, keepdims=True) / 127 if value.ndim == 2 else 1e-2
        assert np.all(np.abs(back[name] - value) <= step / 2 + 1e-3)
    assert (tmp_path / "hf" / "config.json").is_file()


def test_a_torn_teacher_transfer_is_one_line(tmp_path: Path) -> None:
    from feverous_es.training.gpu_results import read_teacher

    write_transfer(tmp_path / "fetched", {"w": np.ones((4, 4), dtype=np.float32)})
    part = tmp_path / "fetched" / "teacher.int8rows.safetensors.01"
    part.write_bytes(part.read_bytes()[:-1])
    with pytest.raises(TrainError, match=r"safetensors\.01 does not match its sha256"):
        read_teacher(tmp_path / "fetched", tmp_path / "hf")


def test_weight_only_int8_keeps_fp32s_answers(tiny_classifier: tuple[Path, object],
                                              tmp_path: Path) -> None:  # fmt: skip
    import onnx

    from feverous_es.export.int8 import quantize_int8

    folder = tmp_path / "graphs"
    shutil.copytree(tiny_classifier[0], folder)
    recipe = quantize_int8(folder / FP32_FILE, folder / "weight-only.onnx", recipe="weight-only")
    assert recipe["method"] == "weight-only" and recipe["weight_only"] >= 1  # the embeddings
    ops = {n.op_type for n in onnx.load(str(folder / "weight-only.onnx")).graph.node}
    assert "DequantizeLinear" in ops and "DynamicQuantizeLinear" not in ops
    assert (folder / "weight-only.onnx").stat().st_size < (folder / FP32_FILE).stat().st_size / 2
    fp32 = EntailmentModel(folder / FP32_FILE, device="cpu").probabilities(CLAIMS, PREMISES)
    wo = EntailmentModel(folder / "weight-only.onnx", device="cpu").probabilities(CLAIMS, PREMISES)
    np.testing.assert_allclose(wo, fp32, atol=1e-3)
    with pytest.raises(ExportError, match="unknown int8 recipe"):
        quantize_int8(folder / FP32_FILE, folder / "x.onnx", recipe="static")


def test_one_word_chooses_the_reader_in_the_configuration() -> None:
    assert load_config(environ={}).stage_options("verdict") == {}
    chosen = load_config(environ={}, reader=LARGE_READER).stage_options("verdict")
    assert chosen == {"model": "large"}
    students = [PACKAGED_MODELS_DIR / role for role in ("verdict", "verdict-2", "verdict-3")]
    assert reader_dirs(None) == reader_dirs("default") == students  # averaged
    assert reader_dirs("/some/model") == [Path("/some/model")]
    # A models directory (a commit's, as the benches compare them): its default reader.
    assert reader_dirs(PACKAGED_MODELS_DIR) == students


def test_an_earlier_models_directory_reads_with_the_students_it_has(tmp_path: Path) -> None:
    (tmp_path / "verdict").mkdir()  # before the second student shipped
    assert reader_dirs(tmp_path) == [tmp_path / "verdict"]


def test_a_bad_reader_name_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["entail", "x", "-e", "y", "--reader", "huge"])
    assert result.exit_code == 2
    assert "'huge' is not one of 'default', 'large', 'auto'" in result.output


SOURCE = "[Henri Schoeman] Henri Schoeman is a South African triathlete."


def test_the_large_reader_joins_from_a_fresh_cache_in_the_cli(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, FEVEROUS_ES_CACHE=str(tmp_path / "cache"))
    answers = {}
    for claim in ("Henri Schoeman is a triathlete.", "Henri Schoeman is a swimmer."):
        printed = subprocess.run(
            [sys.executable, "-m", "feverous_es", "entail", claim, "-e", SOURCE, "--reader",
             "large", "--json"],
            capture_output=True, text=True, check=True, env=env,
        ).stdout  # fmt: skip
        answers[claim] = json.loads(printed)["label"]
    assert answers == {
        "Henri Schoeman is a triathlete.": "SUPPORTS",
        "Henri Schoeman is a swimmer.": "REFUTES",
    }
    (joined,) = (tmp_path / "cache" / "models").glob("verdict-large-*")
    manifest = json.loads((joined / MANIFEST_FILE).read_text())
    assert manifest["files"]["model.int8.onnx"]["bytes"] > 50_000_000  # whole, not a part


def test_the_cascade_opens_the_large_tier_on_its_first_unsure_pair(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A claim the students are sure of never joins, checks or loads the large reader."""
    monkeypatch.setenv("FEVEROUS_ES_CACHE", str(tmp_path / "cache"))
    sure = EntailmentModel("auto", device="cpu", cascade_below=0.0)
    sure.probabilities(CLAIMS, PREMISES)
    assert sure.cascade == LARGE_READER and "second" not in vars(sure)
    assert not list((tmp_path / "cache").glob("models/verdict-large-*"))
    unsure = EntailmentModel("auto", device="cpu", cascade_below=1.01)
    unsure.probabilities(CLAIMS, PREMISES)
    assert unsure.second is not None and unsure.second.model_dir.name.startswith("verdict-large-")
    assert list((tmp_path / "cache").glob("models/verdict-large-*"))


def test_verify_json_says_what_the_claim_loaded(sample_index: Path, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, FEVEROUS_ES_CACHE=str(tmp_path / "cache"))
    printed = subprocess.run(
        [sys.executable, "-m", "feverous_es", "verify", "Henri Schoeman is a triathlete.",
         "--index", str(sample_index), "--json"],
        capture_output=True, text=True, check=True, env=env,
    ).stdout  # fmt: skip
    loaded = json.loads(printed)["loaded"]
    assert {m["model"] for m in loaded} >= {*READERS["default"], "embedder"}
    assert all(m["seconds"] >= 0 and m["graph"].endswith(".onnx") for m in loaded)
    assert not [m for m in loaded if m["model"].startswith("verdict-large")]  # students sure


def test_without_the_large_reader_the_cascade_reads_with_the_students(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A wheel's install (the large reader ships in the repository only): the default reader
    still answers every pair, and says why it reads alone."""
    monkeypatch.setattr("feverous_es.verdict.entailment.reader_installed", lambda reader: False)
    reader = EntailmentModel("auto", device="cpu", cascade_below=1.01)
    expected = EntailmentModel("default", device="cpu").probabilities(CLAIMS, PREMISES)
    np.testing.assert_allclose(reader.probabilities(CLAIMS, PREMISES), expected, atol=1e-6)
    assert reader.cascade is None and "not installed" in caplog.text


def test_the_wheel_ships_every_model_the_default_pipeline_opens() -> None:
    import fnmatch
    import tomllib

    from tests.conftest import REPO

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    globs = pyproject["tool"]["setuptools"]["package-data"]["feverous_es"]
    roles = {*READERS["default"], "embedder", "sentence-ranker", "table-verdict", "verdict-nei"}
    for role in roles:
        files = [f"models/{role}/{p.name}" for p in (PACKAGED_MODELS_DIR / role).iterdir()]
        assert files and all(any(fnmatch.fnmatch(f, g) for g in globs) for f in files), role


def test_the_large_reader_in_the_api_and_the_service(sample_index: Path) -> None:
    pytest.importorskip("fastapi")
    import httpx

    from bench.serve_process import running_server
    from feverous_es import Pipeline

    with Pipeline.open(sample_index, reader="large") as pipeline:
        result = pipeline.verify("Gold medalist Henri Schoeman won bronze at Rio in 2016.")
        readers = pipeline.verdict.model_dirs()
    # the large model, averaged with the default one
    assert readers["verdict"].name.startswith("verdict-large-")
    assert readers["verdict-averaged"] == PACKAGED_MODELS_DIR / "verdict"
    assert result.verdict.label.value == "SUPPORTS"
    with running_server(sample_index, token="t0k", args=("--reader", "large")) as server:
        auth = {"Authorization": "Bearer t0k"}  # /v1/health names model paths to the token
        client = httpx.Client(base_url=server.url, timeout=120, headers=auth)
        body = {"claim": "Henri Schoeman is a swimmer.", "evidence": [SOURCE]}
        assert client.post("/v1/entail", json=body).json()["label"] == "REFUTES"
        models = {m["name"]: m for m in client.get("/v1/health").json()["models"]}
        assert "verdict-large-" in models["verdict"]["path"]


def test_train_verdict_large_takes_a_fetched_teacher_in(
    tiny_classifier: tuple[Path, object], tmp_path: Path
) -> None:
    from safetensors.numpy import load_file

    torch_dir = tiny_classifier[0].parent / "torch"
    weights = load_file(str(torch_dir / "model.safetensors"))
    fetched = tmp_path / "fetched"
    write_transfer(fetched, weights)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        shutil.copyfile(torch_dir / name, fetched / name)
    sums = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}"
            for p in sorted(fetched.iterdir()) if p.name != "SHA256SUMS"]  # fmt: skip
    (fetched / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    held = {"all": {"pairs": 10, "accuracy": 0.7}, "fm2_dev": {"pairs": 4, "accuracy": 0.5}}
    (tmp_path / "job").mkdir()
    curve = [{"epoch": 1, "score": 0.7}, {"epoch": 2, "score": 0.75}]
    (tmp_path / "job" / "report.json").write_text(json.dumps({
        "device": "NVIDIA H200", "versions": {"torch": "2.11.0"}, "seconds": {"teacher": 149.6},
        "bases": {"teacher": "sentence-transformers/all-mpnet-base-v2"},
        "teacher": {"best_epoch": 2, "curve": curve, "held": held, "valid": held},
    }))  # fmt: skip
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "training.json").write_text(json.dumps({
        "claims": ["fm2_dev.jsonl"], "holdout": 0.35, "claims_per_file": None,
        "training": {"max_length": 128, "math_hints": False, "seed": 13},
    }))  # fmt: skip
    out = tmp_path / "large"
    result = CliRunner().invoke(main, [
        "train", "verdict-large", "--from-gpu", str(fetched), "--job", str(tmp_path / "job"),
        "--student", str(tmp_path / "student"), "--out", str(out),
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert manifest["int8"]["method"] == "weight-only" and manifest["task"] == TEXT_CLASSIFICATION
    training = json.loads((out / "training.json").read_text())
    assert training["holdout"] == 0.35 and training["training"]["device"] == "cuda (NVIDIA H200)"
    card = (out / "README.md").read_text()
    assert "NVIDIA H200" in card and "150 s" in card and "| fm2_dev | 4 | 50.0% |" in card
    # the weights read back are the model's to the int8 rows' rounding: the same answers
    np.testing.assert_allclose(
        EntailmentModel(out, device="cpu").probabilities(CLAIMS, PREMISES),
        EntailmentModel(tiny_classifier[0], device="cpu", max_length=128).probabilities(
            CLAIMS, PREMISES),
        atol=2e-2,
    )  # fmt: skip


def test_the_cascade_reads_the_large_tier_only_where_the_default_is_unsure() -> None:
    """`--reader auto`: the default reader's answer where it is sure, the large tier's (the
    two averaged, as `--reader large`) where its top probability is below the threshold."""
    claims = [
        "Henri Schoeman is a triathlete.", "Henri Schoeman is a swimmer.",
        "Henri Schoeman is South African.", "Henri Schoeman won a medal.",
        "Henri Schoeman was born in 1991.", "Henri Schoeman is a famous painter.",
    ]  # fmt: skip
    premises = [SOURCE] * len(claims)
    default = EntailmentModel("default", device="cpu").probabilities(claims, premises)
    large = EntailmentModel(LARGE_READER, device="cpu").probabilities(claims, premises)
    threshold = float(np.median(default.max(axis=1)))
    auto = EntailmentModel("auto", device="cpu", cascade_below=threshold)
    got = auto.probabilities(claims, premises)
    unsure = default.max(axis=1) < threshold
    assert unsure.any() and not unsure.all()
    np.testing.assert_allclose(got[~unsure], default[~unsure], atol=1e-6)
    np.testing.assert_allclose(got[unsure], large[unsure], atol=1e-6)
    assert auto.second is not None and auto.model_dirs == reader_dirs("default")


def test_the_default_reader_is_the_mean_of_its_students_read_at_once() -> None:
    """The students read the same pairs on threads of their own (a claim's few premises leave
    a core idle): their mean is what each reads alone, averaged."""
    from feverous_es.runtime.cross_encoder import CrossEncoder
    from feverous_es.verdict.model_files import softmax

    claims = ["Henri Schoeman is a triathlete.", "Henri Schoeman is a painter."]
    reader = EntailmentModel("default", device="cpu")
    got = reader.probabilities(claims, [SOURCE] * 2)
    alone = [
        softmax(CrossEncoder(d, device="cpu", max_length=length).logits(
            [(c, SOURCE) for c in claims]))
        for d, length in zip(reader.model_dirs, reader.max_lengths, strict=True)
    ]  # fmt: skip
    assert len(alone) == len(READERS["default"]) > 1
    np.testing.assert_allclose(got, np.mean(alone, axis=0), atol=1e-6)
