"""One ONNX model directory opened for inference; every model type is a thin layer on it.

:class:`OnnxModel` does what each model needs the same way: find the graph for the provider
(fp16 on CUDA, int8 or fp32 on CPU: :func:`~feverous_es.runtime.files.choose_model_file`),
check the files it uses against the directory's ``manifest.json``, open a shared session on the
right device (:func:`~feverous_es.runtime.session.open_session`), load the tokenizer, and run
length-sorted, padded batches. :class:`~feverous_es.runtime.embedder.Embedder` pools its output,
:class:`~feverous_es.runtime.cross_encoder.CrossEncoder` reads its logits, and
:class:`~feverous_es.verdict.feature_model.FeatureClassifier` feeds it features.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

from feverous_es.errors import ModelError
from feverous_es.runtime.costs import count_model_run
from feverous_es.runtime.files import (
    MANIFEST_FILE,
    choose_model_file,
    graph_files,
    manifest_files,
    verified,
)
from feverous_es.runtime.session import CPU_PROVIDER, check_device, open_session

# What an output becomes per row of a batch: (first output, attention mask) -> rows.
Reduce = Callable[[np.ndarray, np.ndarray], np.ndarray]


class _Workers:
    """Threads shared by every model of the process (at least one per core it may use), named
    ``name``; made on first use."""

    def __init__(self, name: str, at_least: int = 1) -> None:
        self.cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        self.name = name
        self.size = max(self.cores, at_least)
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @property
    def executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(self.size, thread_name_prefix=self.name)
            return self._executor


# The batches of one model's run, side by side.
BATCH_WORKERS = _Workers("onnx-batch")
# The models that read the same pairs (the students a reader averages), at once: a claim's
# premise or two leave a core idle while one small model reads them. Apart from the batch
# threads, which these threads wait on.
MODEL_WORKERS = _Workers("onnx-model", at_least=4)


@dataclass(frozen=True, slots=True)
class ModelLoad:
    """One model this process opened: its directory's name, the graph it runs and the seconds
    opening it took (files checked, session made)."""

    model: str
    graph: str
    seconds: float


_LOADS: list[ModelLoad] = []


def models_loaded() -> list[ModelLoad]:
    """The models this process opened so far, in order: what a first claim paid for."""
    return list(_LOADS)


def load_tokenizer(path: Path, max_length: int, strategy: str = "longest_first") -> Tokenizer:
    """A ``tokenizer.json`` truncating to ``max_length`` by ``strategy``, unpadded."""
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a plain Exception on a malformed file
        raise ModelError(f"{path} is not a valid tokenizer.json ({exc})") from exc
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length, strategy=strategy)
    return tokenizer


@dataclass(frozen=True, slots=True)
class Execution:
    """Where and how a graph runs: ``device`` (``"auto"``, ``"cuda"`` or ``"cpu"``), the CPU
    ``threads`` of its session (None: ONNX Runtime's choice, or the side-by-side rule), and
    ``quantized``: int8 over fp32 on CPU when the directory has both. Every model wrapper takes
    these three from its caller and hands them on as one."""

    device: str = "auto"
    threads: int | None = None
    quantized: bool = True


class OnnxModel:
    """A model directory's ONNX graph in a session, and the files beside it.

    ``execution``: the device, threads and precision (:class:`Execution`). ``graph``: the file
    to run on any provider (default: chosen per provider, ``execution.quantized`` picking int8
    over fp32 on CPU). ``derived_graph(on_cuda)``: the graph for a provider that is not in the
    directory (the packaged embedder derives its fp32 and fp16 graphs into the cache), or None
    for the directory's own. The files that
    ``manifest.json`` lists are checked before use, others used as they are (a user's own
    export); ``require_manifest`` refuses a directory without one. ``remedy`` ends the
    message of a file that fails its check: ``delete DIR to <remedy>``. ``tokenizer``: the
    directory's tokenizer file, for :meth:`tokenizer`.
    """

    def __init__(
        self,
        directory: Path,
        execution: Execution = Execution(),
        *,
        graph: str | None = None,
        derived_graph: Callable[[bool], Path | None] | None = None,
        require_manifest: bool = False,
        remedy: str = "install it again",
        tokenizer: str | None = None,
        side_by_side: bool = False,
    ) -> None:
        started = time.perf_counter()
        device, threads = execution.device, execution.threads
        check_device(device)
        self.directory = Path(directory)
        self.remedy = remedy
        self.listed = manifest_files(self.directory)
        if require_manifest and not self.listed:
            raise ModelError(f"{self.directory} has no {MANIFEST_FILE}; {remedy}")
        # The tokenizer is read before the graph: a broken one is named, not the graph.
        self._tokenizer_path = self.file(tokenizer) if tokenizer else None  # checked once
        self._spare = load_tokenizer(self._tokenizer_path, 512) if self._tokenizer_path else None
        loaded: list[Path] = []

        def pick(on_cuda: bool) -> Path:
            derived = derived_graph(on_cuda) if derived_graph and graph is None else None
            if derived is not None:
                path = derived
            else:
                present = graph_files(self.directory)
                chosen = choose_model_file(present, on_cuda, quantized=execution.quantized)
                path = self.file(graph or chosen)
            loaded.append(path)
            return path

        # A model read in many small batches (an int8 cross-encoder: one pair a run) runs them
        # side by side on the CPU, one core each, on one session of one thread: runs that small
        # share two threads badly. One session only: a second costs each process start what
        # the runs gain (docs/decisions.md, Runtime).
        side_by_side = side_by_side and threads is None and BATCH_WORKERS.cores > 1
        self.session = open_session(pick, device=device, threads=1 if side_by_side else threads)
        self.provider: str = self.session.get_providers()[0]
        self.path: Path = loaded[-1]
        self.inputs: set[str] = {i.name for i in self.session.get_inputs()}
        self.tokens = 0  # non-padding tokens run so far (throughput figures)
        self._side_by_side = side_by_side and self.provider == CPU_PROVIDER
        _LOADS.append(ModelLoad(self.directory.name, self.path.name,
                                round(time.perf_counter() - started, 3)))  # fmt: skip

    def file(self, name: str) -> Path:
        """The path of ``name`` in the directory, checked against the manifest when it lists
        it."""
        if name in self.listed:
            return verified(self.directory, name, remedy=self.remedy)
        return self.directory / name

    def tokenizer(self, max_length: int, strategy: str = "longest_first") -> Tokenizer:
        """The model's tokenizer (its ``tokenizer`` file), truncating to ``max_length`` by
        ``strategy``, unpadded (shipped tokenizers pad every text to a fixed length; batches
        are padded here). Each call returns a tokenizer of its own."""
        if self._tokenizer_path is None:
            raise ModelError(f"{self.directory} was opened without a tokenizer")
        spare, self._spare = self._spare, None
        if spare is None:
            return load_tokenizer(self._tokenizer_path, max_length, strategy)
        spare.enable_truncation(max_length, strategy=strategy)
        return spare

    def run(self, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The graph's outputs for ``feed``."""
        return self.session.run(None, feed)

    def run_encodings(
        self, encodings: Sequence[Encoding], batch_size: int, reduce: Reduce
    ) -> np.ndarray:
        """``reduce`` of the first output over length-sorted batches of ``encodings`` (so a
        batch wastes little on padding), as float32 rows in the encodings' order."""
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
        if len(batches) > 1 and self._side_by_side:
            # Each batch is what it would be alone: the same results.
            results = list(
                BATCH_WORKERS.executor.map(
                    lambda idx: self._run_batch([encodings[i] for i in idx], reduce), batches
                )
            )
        else:
            results = [self._run_batch([encodings[i] for i in idx], reduce) for idx in batches]
        out = np.empty((len(encodings), *results[0].shape[1:]), dtype=np.float32)
        for idx, rows in zip(batches, results, strict=True):
            out[idx] = rows
            # Counted here, in the thread that asked: its tallies are the ones open.
            tokens = sum(len(encodings[i].ids) for i in idx)
            self.tokens += tokens  # two threads at once may lose an update: a figure, skewed
            count_model_run(self.directory.name, len(idx), tokens)
        return out

    def _run_batch(self, encodings: list[Encoding], reduce: Reduce) -> np.ndarray:
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
        if "token_type_ids" in self.inputs:
            feed["token_type_ids"] = types
        return reduce(np.asarray(self.run(feed)[0]), mask)
