"""Sentence embeddings with all-MiniLM-L6-v2 through ONNX Runtime.

Runtime only: onnxruntime, onnx, tokenizers and numpy. The int8 graph and the tokenizer ship in
the package (``feverous_es/models/embedder``), so embedding needs neither torch nor a download.
The int8 graph is how the weights travel, not what runs: its activations are quantized with one
scale per batch, so a text's vector would move with whatever shares its batch. On the CPU the
fp32 graph over its dequantized weights runs instead, and on a CUDA device the fp16 one; both
are derived once from the shipped file into the model cache (:func:`ensure_cpu_model`,
:func:`ensure_cuda_model`). A text's vector is then the same alone or in any batch, chunk, part
or resume point (docs/design.md: same input, same output). Of the batch-independent ways
measured side by side on an AVX2 CPU (fp32 on two threads, weight-only int8), the fp32 graph in
batches read side by side, one core each, is the fastest (`python -m bench run
embedder-graphs`; docs/decisions.md, Runtime).

A full export from the pretrained weights (fp32, fp16 and int8; how the shipped file was made)
is :mod:`feverous_es.export.embedder`, which needs torch: the runtime never starts it (no
arrow from the runtime up to the export); :func:`ensure_model` names its command for a
``model_dir`` that holds none.

    >>> embedder = Embedder()
    >>> embedder.embed(["Paris is the capital of France."]).shape
    (1, 384)
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from feverous_es.errors import ModelError
from feverous_es.runtime import session
from feverous_es.runtime.extras import INSTALL_HINT
from feverous_es.runtime.files import (
    FP16_FILE,
    FP32_FILE,
    INT8_FILE,
    MANIFEST_FILE,
    PACKAGED_MODELS_DIR,
    TOKENIZER_FILE,
    batch_dependent,
    manifest_complete,
    models_dir,
    staged_model_dir,
    verified,
    write_manifest,
)
from feverous_es.runtime.model import Execution, OnnxModel
from feverous_es.runtime.model import load_tokenizer as runtime_tokenizer
from feverous_es.runtime.tasks import FEATURE_EXTRACTION, check_task

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
PACKAGED_MODEL_DIR = PACKAGED_MODELS_DIR / "embedder"
# Texts a model run reads. On the CPU batches run side by side, one core each: 4, 8 and 16 are
# within run-to-run noise of each other (`python -m bench run embedder-graphs`, two runs); a GPU
# wants larger ones.
CPU_BATCH_SIZE = 8
CUDA_BATCH_SIZE = 32


def default_model_dir() -> Path:
    """The model shipped in the package: int8 graph, tokenizer, manifest and model card."""
    return PACKAGED_MODEL_DIR


def export_dir() -> Path:
    """Where a full export goes by default: ``<cache>/models/all-MiniLM-L6-v2`` (cache:
    ``$FEVEROUS_ES_CACHE`` or ``~/.cache/feverous-es``)."""
    return models_dir() / MODEL_NAME


def cuda_model_dir() -> Path:
    """Where :func:`ensure_cuda_model` puts the fp16 graph: ``<cache>/models/<model>-fp16``."""
    return models_dir() / f"{MODEL_NAME}-fp16"


def cpu_model_dir() -> Path:
    """Where :func:`ensure_cpu_model` puts the fp32 graph: ``<cache>/models/<model>-fp32``."""
    return models_dir() / f"{MODEL_NAME}-fp32"


def ensure_model(model_dir: Path | None = None) -> Path:
    """Return the model directory: the packaged one by default, else ``model_dir`` when it
    holds a complete export (else a :class:`ModelError` naming the command that makes one)."""
    if model_dir is None:
        if not manifest_complete(PACKAGED_MODEL_DIR):
            raise ModelError(
                f"the packaged embedder in {PACKAGED_MODEL_DIR} is incomplete; reinstall "
                "feverous-es"
            )
        return PACKAGED_MODEL_DIR
    model_dir = Path(model_dir)
    if not manifest_complete(model_dir):
        raise ModelError(
            f"{model_dir} holds no complete export of {MODEL_NAME}: make one with `python -m "
            f"feverous_es.export.embedder --out {model_dir}` (needs the export extra: "
            f"{INSTALL_HINT})"
        )
    return model_dir


def ensure_cuda_model(out: Path | None = None) -> Path:
    """Return the directory of the fp16 graph for CUDA (default :func:`cuda_model_dir`),
    deriving it first from the packaged int8 graph if it is missing: its dequantized weights
    in fp32 matmuls (cosine 0.999 to the fp32 export over the export's parity texts, against
    0.987 for int8 with its per-batch activation scales), then halved."""

    def fp16(int8: Path, fp16: Path) -> dict:
        from feverous_es.runtime.graphs import fp16_from_int8

        return fp16_from_int8(int8, fp16)

    return _derived(out or cuda_model_dir(), FP16_FILE, "fp16", fp16)


def ensure_cpu_model(out: Path | None = None) -> Path:
    """Return the directory of the fp32 graph the CPU runs (default :func:`cpu_model_dir`),
    deriving it first from the packaged int8 graph if it is missing: the same weights, fp32
    arithmetic, no activation quantized (so no scale shared across a batch)."""

    def fp32_from_int8(int8: Path, fp32: Path) -> dict:
        from feverous_es.runtime.graphs import dequantize

        dequantize(int8, fp32)
        return {"method": "feverous_es.runtime.graphs.dequantize"}

    return _derived(out or cpu_model_dir(), FP32_FILE, "fp32", fp32_from_int8)


def _derived(out: Path, graph: str, precision: str, derive: Callable[[Path, Path], dict]) -> Path:
    """``out`` holding ``graph``, ``derive``d from the packaged int8 graph once (no torch: onnx
    and onnxruntime's converters only), with the tokenizer and a manifest naming its source.
    ``derive`` imports onnx itself: a process that finds the graph derived never pays its
    import (~0.5 s of a first claim)."""
    out = Path(out).resolve()
    if manifest_complete(out):
        return out
    source = ensure_model()
    # replace=False: another process may have derived it meanwhile
    with staged_model_dir(out, replace=False) as tmp:
        recipe = derive(_verified(source, INT8_FILE), tmp / graph)
        shutil.copyfile(_verified(source, TOKENIZER_FILE), tmp / TOKENIZER_FILE)
        # _verified checked the int8 file against this hash: no need to hash it again.
        listed = json.loads((source / MANIFEST_FILE).read_text())["files"]
        write_manifest(
            tmp,
            [graph, TOKENIZER_FILE],
            model=MODEL_NAME,
            task=FEATURE_EXTRACTION,
            source={"int8_sha256": listed[INT8_FILE]["sha256"], "dequantized": True},
            **{precision: recipe},
        )
    return out


def _verified(model_dir: Path, name: str) -> Path:
    """The path of ``name`` after checking its sha256 against the directory's manifest."""
    packaged = model_dir == PACKAGED_MODEL_DIR
    return verified(model_dir, name, remedy="reinstall feverous-es" if packaged else "re-export")


def load_tokenizer(model_dir: Path | None = None, max_length: int = 128) -> Tokenizer:
    """The model's tokenizer as :class:`Embedder` runs it: truncated to ``max_length``, unpadded
    (the shipped tokenizer pads every text to 128; batches are padded by hand instead)."""
    return runtime_tokenizer(_verified(ensure_model(model_dir), TOKENIZER_FILE), max_length)


class Embedder:
    """all-MiniLM-L6-v2 sentence embeddings: mean pooling over tokens, L2-normalized.

    The packaged model runs its derived graphs: fp32 on the CPU, fp16 on a CUDA device (see the
    module). An export directory runs its fp32 graph (fp16 on CUDA when it has one);
    ``quantized=True`` runs its int8 graph instead, one text a run, since that graph's
    activations are quantized per batch (``runtime.files.batch_dependent``). ``model_file``
    names the graph to run on any provider instead (parity checks, benchmarks). ``device`` is
    ``"auto"``, ``"cuda"`` or ``"cpu"``. ``batch_size``: texts a run reads (default
    :data:`CPU_BATCH_SIZE` side by side on the CPU, :data:`CUDA_BATCH_SIZE` on CUDA).
    ``tokens`` counts the non-padding tokens embedded so far (for throughput figures).
    """

    dim: int = DIM

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        quantized: bool = False,
        max_length: int = 128,
        batch_size: int | None = None,
        device: str = "auto",
        threads: int | None = None,
        model_file: str | None = None,
    ) -> None:
        model_dir = ensure_model(model_dir)
        check_task(model_dir, FEATURE_EXTRACTION, "the embedder")
        packaged = model_dir == PACKAGED_MODEL_DIR

        def derived(on_cuda: bool) -> Path | None:
            if on_cuda:
                return _verified(ensure_cuda_model(), FP16_FILE)
            return None if quantized else _verified(ensure_cpu_model(), FP32_FILE)

        self._model = OnnxModel(
            model_dir,
            Execution(device, threads, quantized),
            graph=model_file,
            derived_graph=derived if packaged else None,
            require_manifest=True,
            remedy="reinstall feverous-es" if packaged else "re-export",
            tokenizer=TOKENIZER_FILE,
            side_by_side=True,
        )
        self._tokenizer = self._model.tokenizer(max_length)
        self.max_length = max_length
        self.provider: str = self._model.provider
        self.model_file: str = self._model.path.name
        if batch_dependent(self._model.path.parent, self.model_file):
            self.batch_size = 1
        elif batch_size is not None:
            self.batch_size = batch_size
        else:
            on_cpu = self.provider == session.CPU_PROVIDER
            self.batch_size = CPU_BATCH_SIZE if on_cpu else CUDA_BATCH_SIZE

    @property
    def identity(self) -> str:
        """What its vectors depend on, in one line: the graph it runs (its sha256 in the
        manifest), the tokens a text keeps, the provider and the ONNX Runtime whose kernels
        compute them. Vectors kept for reuse are kept under it
        (:class:`~feverous_es.index.building.vector_cache.VectorCache`); the batch is not in
        it, because no vector depends on its batch."""
        listed = json.loads((self._model.path.parent / MANIFEST_FILE).read_text())["files"]
        sha = listed.get(self.model_file, {}).get("sha256", "unlisted")
        return (
            f"{MODEL_NAME} {self.model_file} sha256:{sha[:16]} max_length={self.max_length} "
            f"{self.provider} onnxruntime {ort.__version__}"
        )

    @property
    def tokens(self) -> int:
        """Non-padding tokens embedded so far (for throughput figures)."""
        return self._model.tokens

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``: float32 array of shape ``(len(texts), 384)``, rows of unit length."""
        out = np.empty((len(texts), DIM), dtype=np.float32)
        if len(texts) == 0:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        return self._model.run_encodings(encodings, self.batch_size, _mean_pooled)


def _mean_pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """sentence-transformers' Pooling(mean) then Normalize, with their epsilons."""
    weights = mask[..., None].astype(np.float32)
    counts = np.maximum(weights.sum(axis=1), 1e-9)
    pooled = (hidden * weights).sum(axis=1) / counts
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    return (pooled / norms).astype(np.float32, copy=False)
