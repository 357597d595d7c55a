"""ONNX export of a local Hugging Face torch model (``feverous-es export``, ``train …``).

:func:`export_model` runs optimum's exporter and writes, with one rename, a model directory:

* ``model.onnx`` (fp32: the reference, and the fallback every runtime can load),
* ``model.fp16.onnx`` (fp16 with fp32 inputs and outputs, for the CUDA provider),
* ``model.int8.onnx`` (dynamic int8, for the CPU provider),
* the tokenizer and config files, ``manifest.json`` (sha256 of each file, the recipes, the
  parity) and ``README.md`` (the model card),

after a parity check of each graph against the torch model on real claim / evidence pairs: the
export is refused when fp32 drifts more than :data:`MAX_FP32_DRIFT`. Encoder tasks
(``text-classification``, ``feature-extraction``) get all three precisions;
``text2text-generation`` is written as optimum lays it out for ``ORTModelForSeq2SeqLM``
(encoder, decoder and decoder-with-past graphs), fp32 only.

:func:`export` is ``train verdict``'s use of it: the int8 graph alone, as ``model.onnx``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import TrainError
from feverous_es.onnx_session import (
    FP16_FILE,
    FP32_FILE,
    INT8_FILE,
    PRECISION_FILES,
    sha256_file,
    write_manifest,
)
from feverous_es.training.common import INSTALL_HINT, base_name, import_torch

MAX_MODEL_BYTES = 30 * 1024 * 1024
CARD_FILE = "README.md"
TASKS = ("text-classification", "feature-extraction", "text2text-generation")
PRECISIONS = ("fp32", "fp16", "int8")
SEQ2SEQ_PRECISIONS = ("fp32",)
# Largest |torch - ONNX fp32| (logits or hidden states) an export may show.
MAX_FP32_DRIFT = 1e-3
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "spiece.model", "vocab.json")
# Files optimum writes beside the graphs that a runtime reads (tokenizer, config).
SIDE_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "spiece.model",
    "merges.txt",
    "vocab.json",
    "added_tokens.json",
)

# Parity probe: real FEVEROUS / TabFact dev claims with a sentence, list or table-row
# linearization of their pages (from sample/), short to long; the last one, a sentence repeated,
# is truncated at any max_length up to 512.
PROBE_PAIRS: tuple[tuple[str, str], ...] = (
    (
        "the brígido iriarte caracas be select as the venue 2 time",
        "[Ricardo Páez] CAPTION ricardo páez VALUE goal VALUE date {{ VALUE venue }} VALUE score "
        "VALUE result VALUE competition",
    ),
    (
        "DSV Leoben, an Australian association football club which was founded in 1928, is "
        "managed by Austria Ivo Golz.",
        "[DSV Leoben] DSV Leoben is an Austrian association football club based in Leoben.",
    ),
    (
        "Gail Kimbell (the 16th and first female chief) initially served as forest supervisor "
        "before becoming the Regional Forester in 2003.",
        '[Gail Kimbell] Abigail R. "Gail" Kimbell was the 16th and first female Chief of the '
        "United States Forest Service.",
    ),
    (
        "Mika Väyrynen never made any goals over his thirteen year career with Finland's "
        "national team.",
        "[Mika Väyrynen] However, in 2003\u201304 he became their key player in midfield, and "
        "ended up scoring 17 goals in 100 Eredivisie games.",
    ),
    (
        "BurNIng started playing Dota professionally in 2008, won 10 championships in 2010 and "
        "won 9 championships in 2011.",
        "[BurNIng] EHOME would win 10 championships in 2010, including a dominating performance "
        "at Electronic Sports World Cup 2010 where the team didn't drop a game against some of "
        "the best Dota teams in the world.",
    ),
    (
        "kristiine lill be the skip for estonia and marta szeliga - frynia be the skip for poland",
        "[2008 European Curling Championships] {{ KEY nation VALUE bulgaria }} KEY skip VALUE "
        "lubomir velinov KEY third VALUE stoil georgiev KEY second VALUE tihomir todorov KEY "
        "lead VALUE ilian kirilov",
    ),
    (
        "Jovan Oliver was a noble with several titles under the Serbian Emperor Dušan the "
        "Mighty, who was Serbia's King.",
        "[Stefan Dušan] Stefan Uroš IV Dušan, also known as Dušan the Mighty, was the King of "
        "Serbia from 8 September 1331 and Emperor of the Serbs, Greeks, Bulgarians and Albanians "
        "from 16 April 1346 until his death in 1355.",
    ),
    (
        "The U.S. Army Medical Research and Development Command, based out of Fort Detrick, "
        "Maryland, partially funds the Resuscitation Outcomes Consortium benefiting millions of "
        "people per year.",
        "[Resuscitation Outcomes Consortium] ROC is funded by the National Heart, Lung, and "
        "Blood Institute, Institute of Circulatory and Respiratory Health, United States Army "
        "Medical Research and Materiel Command, Defence Research and Development Canada, Heart "
        "and Stroke Foundation of Canada, and American Heart Association.",
    ),
    (
        "Caíque de Jesus Gonçalves was born in Guarulhos, São Paulo and began his career on "
        "Portuguesa but could not make it into the Campeonato Paulista.",
        "[Caíque de Jesus Gonçalves] On 12 February 2015 he was included in the 28-man list for "
        "the year's Campeonato Paulista.",
    ),
    (
        "Cape Fear and Yadkin Valley Railway operated in North and South Carolina right after "
        "Reconstruction, created in 1879 from a consolidation with two other railroads.",
        " ".join(
            [
                "[Cape Fear and Yadkin Valley Railway] The Cape Fear and Yadkin Valley Railway was "
                "a Southeastern railroad that operated in the Carolinas immediately after "
                "Reconstruction."
            ]
            * 12
        ),
    ),
)


# ----------------------------------------------------------------------------- torch and ORT


def torch_logits(model_dir: Path, pairs: Sequence[tuple[str, str]], max_length: int) -> np.ndarray:
    """Logits of the saved torch classifier (the parity reference)."""
    torch = import_torch()
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
    rows = []
    with torch.inference_mode():
        for start in range(0, len(pairs), 16):
            chunk = pairs[start : start + 16]
            batch = _encode_pairs(tokenizer, chunk, max_length, "pt", truncation="only_second")
            rows.append(model(**batch).logits.float().numpy())
    return np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)


def onnx_logits(model_dir: Path, pairs: Sequence[tuple[str, str]], max_length: int) -> np.ndarray:
    """Logits as the ``classifier`` verdict plugin computes them (its own ONNX runtime path)."""
    from feverous_es.rerank.cross_encoder import CrossEncoder

    if not pairs:
        return np.zeros((0, 0), dtype=np.float32)
    encoder = CrossEncoder(model_dir, device="cpu", max_length=max_length)
    return np.asarray(encoder.logits(pairs), dtype=np.float32)


def _encode_pairs(
    tokenizer: Any,
    pairs: Sequence[tuple[str, str]],
    max_length: int,
    kind: str,
    truncation: str = "longest_first",
) -> Any:
    return tokenizer(
        [p[0] for p in pairs],
        [p[1] for p in pairs],
        truncation=truncation,
        max_length=max_length,
        padding=True,
        return_tensors=kind,
    )


def _run(session: Any, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    names = {i.name for i in session.get_inputs()}
    return session.run(None, {k: v.astype(np.int64) for k, v in feed.items() if k in names})


def _session(path: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3  # fp16 on the CPU provider warns about every cast it adds
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


# ----------------------------------------------------------------------------- graph recipes


def quantize_int8(fp32: Path, int8: Path) -> dict[str, Any]:
    """Dynamic int8 with per-channel weight scales over every MatMul and the embedding Gather.

    :func:`feverous_es.index.export.quantize` (the embedder's recipe) keeps the six feed-forward
    output matmuls in fp32 for cosine fidelity; that puts an all-MiniLM-L6-v2 classifier at
    33.5 MB, over the 30 MB the package may carry, and a 2-way decision tolerates the extra
    error (the parity check below measures it). Its recipe is used for any model where it fits.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from feverous_es.index.export import quantize

    try:
        recipe = quantize(fp32, int8)
        if int8.stat().st_size <= MAX_MODEL_BYTES:
            return recipe
    except RuntimeError:  # not a 6-layer BERT: the embedder recipe does not apply
        pass
    quantize_dynamic(fp32, int8, per_channel=True, weight_type=QuantType.QInt8)
    return {
        "method": "onnxruntime.quantization.quantize_dynamic",
        "per_channel": True,
        "weight_type": "QInt8",
        "fp32_nodes": [],
    }


# ----------------------------------------------------------------------------- parity


def parity(
    source: Path,
    model_dir: Path,
    task: str,
    precisions: Sequence[str],
    probe: Sequence[tuple[str, str]],
    max_length: int,
) -> dict[str, Any]:
    """Each graph of ``model_dir`` against the torch model of ``source`` on ``probe``, fed the
    same token ids: max |Δ| of the logits (classification: also the share of pairs with the
    same argmax; seq2seq: per decoder position) or of the non-padding hidden states
    (feature-extraction: also min and mean cosine of the mean-pooled vectors)."""
    torch = import_torch()
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    result: dict[str, Any] = {"pairs": len(probe), "max_length": max_length}
    if not probe:
        return result | {p: {"max_abs_diff": 0.0} for p in precisions}
    with torch.inference_mode():
        if task == "text2text-generation":
            seq2seq = _seq2seq_parity(torch, transformers, tokenizer, source, model_dir, probe)
            return result | seq2seq
        batch = _encode_pairs(tokenizer, probe, max_length, "np")
        feed = {k: np.asarray(v) for k, v in batch.items()}
        tensors = {k: torch.from_numpy(v.astype(np.int64)) for k, v in feed.items()}
        if task == "text-classification":
            model = transformers.AutoModelForSequenceClassification.from_pretrained(source)
            reference = model.eval()(**tensors).logits.float().numpy()
        else:
            model = transformers.AutoModel.from_pretrained(source)
            reference = model.eval()(**tensors).last_hidden_state.float().numpy()
    mask = feed["attention_mask"].astype(bool)
    for precision in precisions:
        got = np.asarray(_run(_session(model_dir / PRECISION_FILES[precision]), feed)[0])
        if task == "text-classification":
            result[precision] = {
                "max_abs_diff": float(np.max(np.abs(got - reference))),
                "argmax_agreement": float(np.mean(got.argmax(-1) == reference.argmax(-1))),
            }
        else:
            cosine = _pooled_cosine(got, reference, mask)
            result[precision] = {
                "max_abs_diff": float(np.max(np.abs(got - reference)[mask])),
                "min_cosine": float(cosine.min()),
                "mean_cosine": float(cosine.mean()),
            }
    return result


def _pooled_cosine(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = mask[..., None].astype(np.float32)
    pa, pb = (a * weights).sum(1), (b * weights).sum(1)
    return (pa * pb).sum(1) / np.maximum(
        np.linalg.norm(pa, axis=1) * np.linalg.norm(pb, axis=1), 1e-12
    )


def _seq2seq_parity(torch, transformers, tokenizer, source, model_dir, probe) -> dict[str, Any]:
    """Teacher-forced decoder logits: the input is ``claim evidence``, the decoder reads its
    start token and the claim's first tokens."""
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(source).eval()
    texts = [f"{claim} {evidence}" for claim, evidence in probe]
    encoded = tokenizer(texts, truncation=True, max_length=256, padding=True, return_tensors="np")
    start = model.config.decoder_start_token_id or 0
    firsts = tokenizer([c for c, _ in probe], add_special_tokens=False)["input_ids"]
    width = min(8, min(len(f) for f in firsts))
    decoder_ids = np.array([[start, *f[:width]] for f in firsts], dtype=np.int64)
    ids, mask = encoded["input_ids"].astype(np.int64), encoded["attention_mask"].astype(np.int64)
    reference = (
        model(
            input_ids=torch.from_numpy(ids),
            attention_mask=torch.from_numpy(mask),
            decoder_input_ids=torch.from_numpy(decoder_ids),
        )
        .logits.float()
        .numpy()
    )
    encoder = _session(model_dir / "encoder_model.onnx")
    decoder = _session(model_dir / "decoder_model.onnx")
    hidden = encoder.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    feed = {"input_ids": decoder_ids, "encoder_attention_mask": mask}
    names = {i.name for i in decoder.get_inputs()}
    feed = {k: v for k, v in feed.items() if k in names}
    got = decoder.run(["logits"], {**feed, "encoder_hidden_states": hidden})[0]
    return {
        "fp32": {
            "max_abs_diff": float(np.max(np.abs(got - reference))),
            "argmax_agreement": float(np.mean(got.argmax(-1) == reference.argmax(-1))),
            "decoder_positions": int(decoder_ids.shape[1]),
        }
    }


# ----------------------------------------------------------------------------- the export


def export_model(
    source: Path,
    out: Path,
    *,
    task: str = "text-classification",
    precisions: Sequence[str] | None = None,
    probe: Sequence[tuple[str, str]] = PROBE_PAIRS,
    max_length: int = 256,
    command: str = "",
) -> dict[str, Any]:
    """Export ``source`` (a local HF torch model directory) to ``out``; returns the manifest.

    ``precisions``: any of fp32, fp16, int8 (fp32 is always written: it is the fallback and
    the parity reference); default all three, fp32 alone for text2text-generation. Raises
    TrainError (one line) for a directory that is not a model, a failed export, or fp32 drift.
    """
    with _quiet():
        return _export_model(source, out, task, precisions, probe, max_length, command)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the exporters' warnings (tracer warnings, deprecations, the quantizer's advice):
    the parity check is the export's verdict, and the command prints it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(logging.NOTSET)


def _export_model(
    source: Path,
    out: Path,
    task: str,
    precisions: Sequence[str] | None,
    probe: Sequence[tuple[str, str]],
    max_length: int,
    command: str,
) -> dict[str, Any]:
    started = time.perf_counter()
    if task not in TASKS:
        raise TrainError(f"--task must be one of {', '.join(TASKS)}, not {task!r}")
    allowed = SEQ2SEQ_PRECISIONS if task == "text2text-generation" else PRECISIONS
    wanted = set(precisions or allowed) | {"fp32"}
    unknown = wanted - set(allowed)
    if unknown:
        raise TrainError(
            f"{task} exports {', '.join(allowed)} only, not {', '.join(sorted(unknown))}"
        )
    chosen = [p for p in PRECISIONS if p in wanted]
    source = Path(source).resolve()
    if not (source / "config.json").is_file():
        raise TrainError(f"{source} is not a Hugging Face model directory (no config.json)")
    if not any((source / name).is_file() for name in TOKENIZER_FILES):
        raise TrainError(f"{source} has no tokenizer (none of {', '.join(TOKENIZER_FILES)})")
    import_torch()
    try:
        from optimum.exporters.onnx import main_export
    except ImportError as error:
        raise TrainError(f"{error}; the export needs {INSTALL_HINT}") from None
    from feverous_es.onnx_graphs import to_fp16
    from feverous_es.onnx_session import install_model_dir

    out = Path(out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    tmp.chmod(0o755)  # mkdtemp's 0700 would hide a shared directory from other users
    try:
        raw = tmp / "optimum"
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # local weights only; never reach a hub
        try:
            main_export(
                str(source),
                raw,
                # with-past: ORTModelForSeq2SeqLM (the seq2seq plugins) expects those graphs
                task="text2text-generation-with-past" if task == "text2text-generation" else task,
                library_name="transformers",
                local_files_only=True,
                do_validation=False,  # parity is checked below, on real claim/evidence pairs
            )
        except Exception as error:  # optimum, transformers and safetensors raise many kinds
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise TrainError(f"optimum could not export {source} as {task}: {reason}") from None
        graphs = sorted(p.name for p in raw.glob("*.onnx"))
        if not graphs:
            raise TrainError(f"optimum wrote no ONNX graph for {source} as {task}")
        for name in graphs + [n for n in SIDE_FILES if (raw / n).is_file()]:
            (raw / name).rename(tmp / name)
        for extra in raw.glob("*.onnx_data"):  # external weights of models over 2 GB
            extra.rename(tmp / extra.name)
        shutil.rmtree(raw)

        recipes: dict[str, Any] = {}
        if "fp16" in chosen:
            recipes["fp16"] = to_fp16(tmp / FP32_FILE, tmp / FP16_FILE)
        if "int8" in chosen:
            recipes["int8"] = quantize_int8(tmp / FP32_FILE, tmp / INT8_FILE)
        checks = parity(source, tmp, task, chosen, probe, max_length)
        drift = checks["fp32"]["max_abs_diff"]
        if drift > MAX_FP32_DRIFT:
            raise TrainError(
                f"the fp32 ONNX export of {source} drifted from torch: max |Δ| {drift:.2e} > "
                f"{MAX_FP32_DRIFT:g} on {len(probe)} pairs; not installed"
            )
        files = sorted(p.name for p in tmp.iterdir() if p.is_file())
        meta = {
            "model": base_name(source),
            "task": task,
            "source": {"path": str(source), **_weights_hash(source)},
            "precisions": {p: PRECISION_FILES[p] for p in chosen}
            if task != "text2text-generation"
            else {"fp32": graphs},
            **recipes,
            "parity": checks,
            "versions": _versions(),
            "command": command,
            "export_seconds": round(time.perf_counter() - started, 1),
        }
        write_card(tmp, meta, {name: (tmp / name).stat().st_size for name in files})
        manifest = write_manifest(tmp, [*files, CARD_FILE], **meta)
        install_model_dir(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def _weights_hash(source: Path) -> dict[str, str]:
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (source / name).is_file():
            return {"weights": name, "weights_sha256": sha256_file(source / name)}
    return {}


def _versions() -> dict[str, str]:
    found = {}
    for package in ("torch", "transformers", "optimum-onnx", "onnxruntime-gpu", "onnxruntime"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


def write_card(out: Path, meta: dict[str, Any], sizes: dict[str, int]) -> None:
    """The model card, ``README.md``: source, command, files and parity."""
    checks = meta["parity"]
    rows = []
    for precision in PRECISIONS:
        if precision not in checks:
            continue
        row = checks[precision]
        agreement = (
            f"argmax agreement {row['argmax_agreement']:.1%}"
            if "argmax_agreement" in row
            else f"pooled cosine min {row['min_cosine']:.4f}, mean {row['mean_cosine']:.4f}"
            if "min_cosine" in row
            else ""
        )
        rows.append(f"| {precision} | {row['max_abs_diff']:.2e} | {agreement} |")
    files = "\n".join(
        f"| `{name}` | {size / 1e6:.1f} MB |" for name, size in sizes.items() if name != CARD_FILE
    )
    command = meta["command"] or "feverous_es.training.export.export_model(...)"
    versions = ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
    text = f"""# {meta["model"]} (ONNX, {meta["task"]})

Exported from the torch model in `{meta["source"]["path"]}` with optimum's ONNX exporter
({versions}).

```
{command}
```

Runtimes choose the graph by provider: `model.fp16.onnx` on CUDA when present, else
`model.onnx`; the int8 graph on CPU when asked for, else `model.onnx`
(`feverous_es.onnx_session.choose_model_file`). `manifest.json` lists every file's sha256,
checked before a file is loaded.

## Files

| file | size |
|---|---|
{files}

## Parity against torch

{checks["pairs"]} real FEVEROUS / TabFact claim-evidence pairs (max_length {checks["max_length"]}),
the same token ids fed to torch and to ONNX Runtime's CPU provider:

| graph | max abs diff | agreement |
|---|---|---|
{chr(10).join(rows)}

The export is refused when fp32 differs from torch by more than {MAX_FP32_DRIFT:g}.
"""
    (out / CARD_FILE).write_text(text, encoding="utf-8")


def export(
    trained: Path, out: Path, work: Path, probe: Sequence[tuple[str, str]], max_length: int
) -> dict:
    """``train``'s export: fp32 and int8 (with parity against torch on ``probe`` pairs) into
    ``work/onnx``, then ``out`` receives the int8 graph as ``model.onnx`` (the package carries
    no other), tokenizer.json, tokenizer_config.json and config.json (with id2label)."""
    full = work / "onnx"
    manifest = export_model(
        trained,
        full,
        task="text-classification",
        precisions=("fp32", "int8"),
        probe=probe,
        max_length=max_length,
    )
    staging = out.with_name(f".{out.name}.staging")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copyfile(full / INT8_FILE, staging / FP32_FILE)
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        shutil.copyfile(full / name, staging / name)
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    return {
        "int8": manifest["int8"],
        "parity": manifest["parity"],
        "bytes": (out / FP32_FILE).stat().st_size,
    }
