"""The GPU's rates for the build planner, measured on a lent machine: the queue's last job.

Run after the training queue, on the machine, from the bundle (docs/gpu-training.md)::

    python3 rates_job.py BUNDLE_DIR OUT_DIR

1. Every file of the job (``queue.json`` → ``rates.files``) is checked against its sha256, and
   the carried onnxruntime-gpu wheel, installed by the call's command into ``PYTHONPATH``, is
   asked for its CUDA execution provider — its CUDA and cuDNN libraries are the image's own
   (torch's ``nvidia-*`` wheels, loaded by ``onnxruntime.preload_dlls``) — with a session that
   must come up on CUDA with no node left to the CPU (``session.disable_cpu_ep_fallback``: a
   graph CUDA cannot run whole fails to load, said so, rather than run partly on the CPU
   unseen), before any model is measured.
2. Where it does, the shipped embedder and sentence ranker run through it as fp16 graphs (derived
   from the shipped int8 ones without torch): tokens a second over the dump's texts at the batch
   ``index`` embeds on CUDA (``INDEX_BATCH``) and at 128 beside it, the ranker's pairs a second,
   and the fp16 graph's parity with the int8 one on CPU (cosine of the embeddings, the ranker's
   logits).
3. Where it does not, the job says why, and measures torch's rate instead (the embedder's own
   base, all-MiniLM-L6-v2, from the bundle's ``minilm`` base, in fp16), labelled as such.
4. ``OUT/rates/rates.json``: the shipped build rates with the measured embedder rate under the
   device it ran on (``feverous-es plan WIKI_DB --rates rates.json``): ONNX Runtime's on CUDA as
   ``cuda`` (what ``index`` runs), torch's fallback under its own name, ``cuda-torch``, never as
   ``cuda``; ``OUT/rates/report.json``: every figure and why.

Self-contained, as job.py is: the standard library, numpy, tokenizers and onnxruntime; torch
and transformers only for the fallback. On a CPU it runs as the dry run that tests it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path
from typing import Any

OUT_DIR = "rates"
INDEX_BATCH = 32  # texts a run when `index` embeds on CUDA (runtime/embedder.CUDA_BATCH_SIZE)
WIDE_BATCH = 128  # measured beside it: what a larger batch would gain
TORCH_RATE = "cuda-torch"  # the fallback's rate in rates.json: not the rate `index` runs at
Batches = dict[int, list[dict[str, Any]]]  # a model's padded inputs, by batch size
MAX_TOKENS = 128  # the embedder's and the ranker's cut (as the index build reads a text)
MEASURE_SECONDS = 20.0  # a rate is measured over at most this long, after one warm-up batch


def check_files(bundle: Path, files: dict[str, str]) -> None:
    sys.path.insert(0, str(bundle))
    from job import check_files as check  # the queue's own check: one rule for torn transfers

    check(bundle, files)


def read_lines(path: Path) -> list[Any]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines]


def encoded(tokenizer_file: Path, texts: list[Any]) -> list[Any]:
    """Each text (or [claim, sentence] pair) as the runtime tokenizes it: cut at MAX_TOKENS."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_file))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer.encode_batch([tuple(t) if isinstance(t, list) else t for t in texts])


def batches(items: list[Any], size: int) -> list[dict[str, Any]]:
    """Padded numpy inputs of ``size`` items each, by length (as the runtime batches them)."""
    import numpy as np

    ordered = sorted(items, key=lambda e: len(e.ids))
    out = []
    for start in range(0, len(ordered), size):
        chunk = ordered[start : start + size]
        width = max(len(e.ids) for e in chunk)
        ids = np.zeros((len(chunk), width), np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, e in enumerate(chunk):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
            types[row, : len(e.type_ids)] = e.type_ids
        out.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    return out


def rate(run: Any, inputs: list[dict[str, Any]], sync: Any = lambda: None) -> dict[str, float]:
    """Tokens and items a second of ``run(batch)`` over ``inputs`` (one warm-up batch first,
    then at most MEASURE_SECONDS)."""
    run(inputs[0])
    sync()
    tokens = items = 0
    started = time.perf_counter()
    for batch in inputs:
        run(batch)
        tokens += int(batch["attention_mask"].sum())
        items += len(batch["input_ids"])
        if time.perf_counter() - started > MEASURE_SECONDS:
            break
    sync()
    seconds = time.perf_counter() - started
    return {"tokens_per_s": round(tokens / seconds, 1), "items_per_s": round(items / seconds, 1),
            "items": items}  # fmt: skip


def cuda_sessions(models: dict[str, Path]) -> tuple[dict[str, Any], str]:
    """ONNX Runtime sessions of ``models`` on CUDA, or none and why not."""
    try:
        import onnxruntime as ort
    except ImportError as error:
        return {}, f"onnxruntime does not import ({error})"
    if hasattr(ort, "preload_dlls"):  # CUDA and cuDNN from the nvidia-* wheels torch brought
        try:
            ort.preload_dlls()
        except Exception as error:  # the reason is the report
            return {}, f"onnxruntime {ort.__version__} cannot load the CUDA libraries ({error})"
    providers = ort.get_available_providers()
    if "CUDAExecutionProvider" not in providers:
        return {}, f"onnxruntime {ort.__version__} offers only {', '.join(providers)}"
    options = ort.SessionOptions()
    options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    sessions = {}
    for name, path in models.items():
        try:
            session = ort.InferenceSession(str(path), options, providers=["CUDAExecutionProvider"])
        except Exception as error:  # with the fallback off: a node CUDA cannot run is here
            return {}, f"a CUDA session of {path.name} failed, no node left to the CPU ({error})"
        if session.get_providers()[0] != "CUDAExecutionProvider":
            return {}, f"ONNX Runtime put {path.name} on {session.get_providers()[0]}"
        sessions[name] = session
    return sessions, ""


def feed(session: Any, batch: dict[str, Any]) -> dict[str, Any]:
    names = {i.name for i in session.get_inputs()}
    return {k: v for k, v in batch.items() if k in names}


def onnx_figures(
    sessions: dict[str, Any], inputs: dict[str, Batches], cpu: dict[str, Path]
) -> dict:
    """Each model's rate on CUDA, and its fp16 graph's parity with the int8 one on CPU."""
    import numpy as np
    import onnxruntime as ort

    figures: dict[str, Any] = {}
    for name, session in sessions.items():
        figures[name] = at_batches(lambda b, s=session: s.run(None, feed(s, b)), inputs[name])
        probe = inputs[name][INDEX_BATCH][0]
        reference = ort.InferenceSession(str(cpu[name]), providers=["CPUExecutionProvider"])
        gpu = np.asarray(session.run(None, feed(session, probe))[0], np.float32)
        cpu_out = np.asarray(reference.run(None, feed(reference, probe))[0], np.float32)
        if name == "embedder":  # token states: mean-pooled, then cosine
            mask = probe["attention_mask"][..., None]
            a, b = ((x * mask).sum(1) / mask.sum(1) for x in (gpu, cpu_out))
            cosine = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
            figures[name]["parity_min_cosine"] = round(float(cosine.min()), 4)
        else:
            figures[name]["parity_max_logit_diff"] = round(float(np.abs(gpu - cpu_out).max()), 4)
    return figures


def torch_figures(bundle: Path, config: dict[str, Any], inputs: dict[str, Batches]) -> dict:
    """The fallback: the embedder's base (and the same shape read as a cross-encoder) in torch,
    fp16 on CUDA (fp32 on a CPU: the dry run)."""
    import torch
    from job import WORK_DIR, join_base
    from transformers import AutoModel

    base = config["bases"].get("minilm")
    if base is None:
        return {"error": "the bundle holds no minilm base to measure torch with"}
    model_dir = join_base(bundle, base, Path(WORK_DIR) / "bases" / "minilm")  # the queue's copy
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.float16 if device == "cuda" else torch.float32
    model = AutoModel.from_pretrained(model_dir, torch_dtype=dtype).to(device).eval()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    vocabulary = model.config.vocab_size

    def run(batch: dict[str, Any]) -> None:
        # Ids past a smaller base's vocabulary (the dry run's tiny model) are folded in: the
        # pace is the shape's, not the words'.
        tensors = {k: torch.from_numpy(v).to(device) for k, v in batch.items()}
        tensors["input_ids"] = tensors["input_ids"].clamp(max=vocabulary - 1)
        with torch.inference_mode():
            model(**tensors)

    # The ranker is the embedder's shape with a one-logit head: the encoder sets the rate.
    return {name: at_batches(run, inputs[name], sync) for name in inputs} | {"device": device}


def at_batches(run: Any, by_size: Batches, sync: Any = lambda: None) -> dict[str, Any]:
    """The rate at the batch ``index`` runs, and at the wide batch beside it."""
    return {**rate(run, by_size[INDEX_BATCH], sync), "batch": INDEX_BATCH,
            f"at_batch_{WIDE_BATCH}": rate(run, by_size[WIDE_BATCH], sync)}  # fmt: skip


def device_name() -> str:
    """The GPU's name as torch reports it (the image has torch), else a plain word."""
    try:
        import torch

        return str(torch.cuda.get_device_name())
    except Exception:
        return "the lent GPU"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    bundle, out = args.bundle, args.out / OUT_DIR
    config = json.loads((bundle / "queue.json").read_text(encoding="utf-8"))
    job = config["rates"]
    check_files(bundle, job["files"])
    out.mkdir(parents=True, exist_ok=True)
    folder, small = bundle / OUT_DIR, bundle / OUT_DIR / "files"
    texts = {
        "embedder": encoded(
            small / "embedder-tokenizer.json", read_lines(small / "texts.jsonl.gz")
        ),
        "ranker": encoded(small / "ranker-tokenizer.json", read_lines(small / "pairs.jsonl.gz")),
    }
    inputs = {
        name: {size: batches(items, size) for size in (INDEX_BATCH, WIDE_BATCH)}
        for name, items in texts.items()
    }
    gpu = {name: folder / f"{name}.fp16.onnx" for name in inputs}
    sessions, why = cuda_sessions(gpu)
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "device": "cpu"}
    if sessions:
        report["engine"] = "onnxruntime CUDA execution provider, fp16 graphs"
        report["figures"] = onnx_figures(sessions, inputs, {n: folder / f"{n}.int8.onnx"
                                                            for n in inputs})  # fmt: skip
        device = report["device"] = "cuda"
        report["device_name"] = device_name()
    else:
        report["why_not_onnxruntime"] = why
        report["engine"] = "torch (ONNX Runtime could not use the GPU: see why_not_onnxruntime)"
        report["figures"] = torch_figures(bundle, config, inputs)
        device = report["device"] = report["figures"].get("device", "none")
    print(f"rates: {report['engine']}: {json.dumps(report['figures'])}", flush=True)
    rates = json.loads((small / "build_rates.json").read_text(encoding="utf-8"))
    embedder = report["figures"].get("embedder", {})
    if device == "cuda" and "tokens_per_s" in embedder:
        # torch's rate is not the one `index` runs at: it goes under its own name
        key = "cuda" if sessions else TORCH_RATE
        rates["embed_tokens_per_s"][key] = embedder["tokens_per_s"]
        rates["measured"][key] = (
            f"{device_name()}: {report['engine']}, batch {INDEX_BATCH}, "
            f"{embedder['items']:,} texts of the dump, {report['started']} (the GPU queue's rates "
            "job)"
        )
    (out / "rates.json").write_text(json.dumps(rates, indent=2) + "\n", encoding="utf-8")
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
