"""ONNX cross-encoders: one relevance logit per (query, passage) pair.

Runtime only: onnxruntime, tokenizers and numpy. The default model is ms-marco-MiniLM-L-12-v2
(:mod:`feverous_es.runtime.fetch` installs it on first use); a fine-tuned cross-encoder exported to
ONNX (a BERT-style sequence classifier with one output logit) replaces it by path.

    >>> encoder = CrossEncoder()
    >>> encoder.score([("Who wrote Hamlet?", "Hamlet is a play by Shakespeare."),
    ...                ("Who wrote Hamlet?", "Paris is in France.")]).argmax()
    0
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

from feverous_es.errors import ConfigError, ModelError
from feverous_es.runtime.fetch import ensure_reranker
from feverous_es.runtime.files import (
    TOKENIZER_FILE,
    batch_dependent,
    choose_model_file,
    graph_files,
    model_max_length,
)
from feverous_es.runtime.model import Execution, OnnxModel
from feverous_es.runtime.tasks import TEXT_CLASSIFICATION, check_task

# Pairs of the mini-FEVEROUS data are at most ~320 tokens (claim + linearized table row), and
# length-sorted batches make a pair's cost depend on its own length only, so the limit is the
# model's trained one: truncating rows at 256 could cut the `{{ }}` cell marker off.
DEFAULT_MAX_LENGTH = 512
DEFAULT_BATCH_SIZE = 32
# An int8 graph quantizes activations with one scale per batch: read alone, a pair scores the
# same whatever else is scored with it (docs/decisions.md, Runtime).
INT8_BATCH_SIZE = 1
REQUIRED_INPUTS = ("input_ids", "attention_mask")


class CrossEncoder:
    """Scores (query, passage) pairs with an ONNX cross-encoder: :meth:`score` for a ranker's
    one logit, :meth:`logits` for a classifier's several.

    ``model``: None for the default ms-marco-MiniLM-L-12-v2 (installed on first use), a model
    directory holding one or more of ``model.onnx``, ``model.fp16.onnx``, ``model.int8.onnx``
    (or ``model_int8.onnx``) and ``tokenizer.json``, or an ``.onnx`` file with ``tokenizer.json``
    beside it (that file then runs on any provider). Files that the directory's
    ``manifest.json`` lists are checked against their sha256 before use.

    ``quantized``: on CPU, run the int8 graph when the directory has one (about 1.6x faster
    here than fp32); the default is fp32. On a CUDA device ``model.fp16.onnx`` runs when the
    directory has one, else fp32 (a directory with only an int8 graph runs it everywhere:
    ``runtime.files.choose_model_file``). ``batch_size``: pairs a model run reads, default 32,
    and 1 for a dynamic int8 graph: its activations are quantized per batch, so in a batch a
    score moves with the other pairs in it (by up to ~0.4 logits); a weight-only int8 graph
    computes in fp32 and batches (``runtime.files.batch_dependent``).
    ``device``: ``"auto"``, ``"cuda"`` or ``"cpu"``. ``max_length`` bounds a pair's tokens;
    only the passage is truncated.
    ``tokens`` counts the non-padding tokens scored so far (for throughput figures).
    """

    def __init__(
        self,
        model: Path | str | None = None,
        *,
        quantized: bool = False,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int | None = None,
        device: str = "auto",
        threads: int | None = None,
    ) -> None:
        if batch_size is not None and batch_size < 1:
            raise ConfigError(f"batch_size must be positive, not {batch_size}")
        self.max_length = max_length

        directory, onnx_file = _locate(model)
        check_task(directory, TEXT_CLASSIFICATION, "a cross-encoder (a ranker or a reader)")
        limit = model_max_length(directory)
        if not 8 <= max_length <= limit:
            raise ConfigError(f"max_length must be between 8 and {limit}, not {max_length}")
        graph = onnx_file.name if onnx_file is not None else None
        # The graph the CPU would run: an int8 one reads one pair a run, side by side.
        cpu_graph = graph or choose_model_file(graph_files(directory), False, quantized=quantized)
        one_pair_a_run = batch_dependent(directory, cpu_graph)
        self._model = OnnxModel(
            directory, Execution(device, threads, quantized), graph=graph,
            tokenizer=TOKENIZER_FILE,
            side_by_side=one_pair_a_run and batch_size in (None, INT8_BATCH_SIZE),
        )  # fmt: skip
        self._tokenizer = self._model.tokenizer(max_length, "only_second")
        # For the rare pair whose query alone leaves no room for the passage; loaded when one
        # comes (parsing a tokenizer.json takes ~50 ms of a process start).
        self._fallback: Tokenizer | None = None
        self.provider: str = self._model.provider
        self.model_path: Path = self._model.path
        per_batch = batch_dependent(directory, self.model_path.name)
        self.batch_size = batch_size or (INT8_BATCH_SIZE if per_batch else DEFAULT_BATCH_SIZE)
        outputs = self._model.session.get_outputs()
        missing = [name for name in REQUIRED_INPUTS if name not in self._model.inputs]
        if missing or not outputs:
            raise ModelError(
                f"{self.model_path} is not a cross-encoder (inputs {sorted(self._model.inputs)}, "
                f"outputs {[o.name for o in outputs]}; it needs {', '.join(REQUIRED_INPUTS)})"
            )
        width = outputs[0].shape[-1] if outputs[0].shape else None
        # Logits per pair: 1 for a ranker, one per class for a classifier (None: known on use).
        self.num_logits: int | None = width if isinstance(width, int) else None

    @property
    def tokens(self) -> int:
        """Non-padding tokens scored so far (for throughput figures)."""
        return self._model.tokens

    def score(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Raw relevance logits of ``(query, passage)`` pairs, float32, shape ``(len(pairs),)``,
        in the pairs' order. For a model with one output logit (a ranker).

        Pairs are batched by length across the whole call, so one call with the candidates of
        many queries batches across queries.
        """
        logits = self.logits(pairs)
        if logits.shape[1] != 1:
            raise ModelError(
                f"{self.model_path} has {logits.shape[1]} output logits, not one: use logits()"
            )
        return logits[:, 0]

    def logits(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """The model's raw output logits, float32, shape ``(len(pairs), num_logits)``, batched
        like :meth:`score` (for classifiers, e.g. a verdict model with one logit per label)."""
        if len(pairs) == 0:
            return np.empty((0, self.num_logits or 1), dtype=np.float32)
        return self._model.run_encodings(
            self._encode(pairs),
            self.batch_size,
            lambda logits, _: logits.astype(np.float32).reshape(len(logits), -1),
        )

    def _encode(self, pairs: Sequence[tuple[str, str]]) -> list[Encoding]:
        batch = [(query, passage) for query, passage in pairs]
        try:
            return self._tokenizer.encode_batch(batch)
        except Exception:  # tokenizers raises a plain Exception when a query fills max_length
            return [self._encode_one(pair) for pair in batch]

    def _encode_one(self, pair: tuple[str, str]) -> Encoding:
        try:
            return self._tokenizer.encode(*pair)
        except Exception:
            if self._fallback is None:
                self._fallback = self._model.tokenizer(self.max_length, "longest_first")
            return self._fallback.encode(*pair)


def _locate(model: Path | str | None) -> tuple[Path, Path | None]:
    """The model's directory, and its ONNX file when the user named one."""
    if model is None:
        return ensure_reranker(), None
    path = Path(model).expanduser()
    if path.is_dir() and graph_files(path) and (path / TOKENIZER_FILE).is_file():
        return path, None
    if path.suffix == ".onnx" and path.is_file() and (path.parent / TOKENIZER_FILE).is_file():
        return path.parent, path
    raise ModelError(
        f"{path} is not a cross-encoder model: expected a directory with an ONNX graph and "
        f"{TOKENIZER_FILE}, or an .onnx file with {TOKENIZER_FILE} beside it"
    )
