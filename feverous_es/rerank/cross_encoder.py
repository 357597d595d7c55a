"""ONNX cross-encoders: one relevance logit per (query, passage) pair.

Runtime only: onnxruntime, tokenizers and numpy. The default model is ms-marco-MiniLM-L-12-v2
(:mod:`feverous_es.rerank.fetch` installs it on first use); a fine-tuned cross-encoder exported to
ONNX (a BERT-style sequence classifier with one output logit) replaces it by path.

    >>> encoder = CrossEncoder()
    >>> encoder.score([("Who wrote Hamlet?", "Hamlet is a play by Shakespeare."),
    ...                ("Who wrote Hamlet?", "Paris is in France.")]).argmax()
    0
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

from feverous_es.errors import ModelError
from feverous_es.onnx_session import (
    FP32_FILE,
    MANIFEST_FILE,
    check_device,
    choose_model_file,
    open_session,
    verified,
)
from feverous_es.rerank.fetch import TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, ensure_reranker

# Pairs of the mini-FEVEROUS data are at most ~320 tokens (claim + linearized table row), and
# length-sorted batches make a pair's cost depend on its own length only, so the limit is the
# model's trained one: truncating rows at 256 could cut the `{{ }}` cell marker off.
DEFAULT_MAX_LENGTH = 512
DEFAULT_BATCH_SIZE = 32
REQUIRED_INPUTS = ("input_ids", "attention_mask")


class CrossEncoder:
    """Scores (query, passage) pairs with an ONNX cross-encoder: :meth:`score` for a ranker's
    one logit, :meth:`logits` for a classifier's several.

    ``model``: None for the default ms-marco-MiniLM-L-12-v2 (installed on first use), a model
    directory holding ``model.onnx`` (and optionally ``model.fp16.onnx`` and ``model.int8.onnx``
    or ``model_int8.onnx``) and ``tokenizer.json``, or an ``.onnx`` file with ``tokenizer.json``
    beside it (that file then runs on any provider). Files that the directory's
    ``manifest.json`` lists are checked against their sha256 before use.

    ``quantized``: on CPU, run the int8 graph when the directory has one (about 1.6x faster
    here, but its activations are quantized per batch, so a score moves by up to ~0.4 with the
    other pairs of its batch); the default fp32 graph gives a pair the same score in any batch.
    On a CUDA device ``model.fp16.onnx`` runs when the directory has one, else fp32.
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
        batch_size: int = DEFAULT_BATCH_SIZE,
        device: str = "auto",
        threads: int | None = None,
    ) -> None:
        check_device(device)
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, not {batch_size}")
        self.batch_size = batch_size
        self.max_length = max_length
        self.tokens = 0

        directory, onnx_file = _locate(model)
        listed = _manifest_files(directory)

        def file(name: str) -> Path:
            if name in listed:
                return verified(directory, name, remedy="install it again")
            return directory / name

        loaded: list[Path] = []

        def model_file(on_cuda: bool) -> Path:
            if onnx_file is not None:
                path = file(onnx_file.name)
            else:
                present = {p.name for p in directory.glob("*.onnx")}
                path = file(choose_model_file(present, on_cuda, quantized=quantized))
            loaded.append(path)
            return path

        limit = _model_max_length(directory)
        if not 8 <= max_length <= limit:
            raise ValueError(f"max_length must be between 8 and {limit}, not {max_length}")
        tokenizer_path = file(TOKENIZER_FILE)
        self._tokenizer = _load_tokenizer(tokenizer_path, max_length, "only_second")
        # For the rare pair whose query alone leaves no room for the passage.
        self._fallback = _load_tokenizer(tokenizer_path, max_length, "longest_first")

        self._session = open_session(model_file, device=device, threads=threads)
        self.provider: str = self._session.get_providers()[0]
        self.model_path: Path = loaded[-1]
        inputs = {i.name for i in self._session.get_inputs()}
        outputs = self._session.get_outputs()
        missing = [name for name in REQUIRED_INPUTS if name not in inputs]
        if missing or not outputs:
            raise ModelError(
                f"{self.model_path} is not a cross-encoder (inputs {sorted(inputs)}, outputs "
                f"{[o.name for o in outputs]}; it needs {', '.join(REQUIRED_INPUTS)})"
            )
        self._token_types = "token_type_ids" in inputs
        width = outputs[0].shape[-1] if outputs[0].shape else None
        # Logits per pair: 1 for a ranker, one per class for a classifier (None: known on use).
        self.num_logits: int | None = width if isinstance(width, int) else None

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
        width = self.num_logits or 1
        if len(pairs) == 0:
            return np.empty((0, width), dtype=np.float32)
        encodings = self._encode(pairs)
        order = sorted(range(len(pairs)), key=lambda i: len(encodings[i].ids))
        out: np.ndarray | None = None
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            batch = self._run([encodings[i] for i in idx])
            if out is None:
                out = np.empty((len(pairs), batch.shape[1]), dtype=np.float32)
            out[idx] = batch
        assert out is not None
        return out

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
            return self._fallback.encode(*pair)

    def _run(self, encodings: list[Encoding]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        input_ids = np.zeros((len(encodings), width), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros_like(input_ids)
        types = np.zeros_like(input_ids)
        for row, encoding in enumerate(encodings):
            n = len(encoding.ids)
            input_ids[row, :n] = encoding.ids
            mask[row, :n] = 1
            types[row, :n] = encoding.type_ids
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if self._token_types:
            feed["token_type_ids"] = types
        logits = np.asarray(self._session.run(None, feed)[0], dtype=np.float32)
        self.tokens += int(mask.sum())
        return logits.reshape(len(encodings), -1)


def _locate(model: Path | str | None) -> tuple[Path, Path | None]:
    """The model's directory, and its ONNX file when the user named one."""
    if model is None:
        return ensure_reranker(), None
    path = Path(model).expanduser()
    if path.is_dir() and (path / FP32_FILE).is_file() and (path / TOKENIZER_FILE).is_file():
        return path, None
    if path.suffix == ".onnx" and path.is_file() and (path.parent / TOKENIZER_FILE).is_file():
        return path.parent, path
    raise ModelError(
        f"{path} is not a cross-encoder model: expected a directory with {FP32_FILE} and "
        f"{TOKENIZER_FILE}, or an .onnx file with {TOKENIZER_FILE} beside it"
    )


def _manifest_files(directory: Path) -> set[str]:
    """The files a directory's ``manifest.json`` lists with their sha256 (none without one)."""
    try:
        manifest = json.loads((directory / MANIFEST_FILE).read_text())
    except FileNotFoundError:
        return set()
    except (OSError, ValueError) as exc:
        raise ModelError(f"{directory / MANIFEST_FILE} is unreadable ({exc})") from exc
    files = manifest.get("files") if isinstance(manifest, dict) else None
    return set(files) if isinstance(files, dict) else set()  # else not a manifest of ours


def _model_max_length(directory: Path) -> int:
    """The tokenizer config's ``model_max_length`` (BERT's 512 when absent or unusable)."""
    try:
        value = json.loads((directory / TOKENIZER_CONFIG_FILE).read_text())["model_max_length"]
    except (OSError, ValueError, KeyError, TypeError):
        return 512
    return int(value) if isinstance(value, int) and 0 < value <= 8192 else 512


def _load_tokenizer(path: Path, max_length: int, strategy: str) -> Tokenizer:
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a plain Exception on a malformed file
        raise ModelError(f"{path} is not a valid tokenizer.json ({exc})") from exc
    # Shipped tokenizers pad every pair to a fixed length; batches are padded by hand instead.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length, strategy=strategy)
    return tokenizer
