"""Parity of exported graphs against the torch model they came from.

The probe is real FEVEROUS and TabFact dev claims with a sentence, list or table-row
linearization of their pages: what the exported models read. Classifiers and seq2seq models read
each (claim, evidence) pair; an encoder (feature-extraction) embeds each text on its own, as the
index does. The same token ids are fed to torch and to ONNX Runtime's CPU provider.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import ExportError
from feverous_es.export.torch_models import load_torch_model
from feverous_es.runtime.files import PRECISION_FILES

# Largest |torch - ONNX fp32| (logits or hidden states) an export may show.
MAX_FP32_DRIFT = 1e-3
# Smallest cosine of an encoder's mean-pooled vectors to torch's, per graph (the int8 embedder
# reaches 0.994 on the probe; two-token texts such as "Hi" are its worst, ~0.985).
MIN_POOLED_COSINE = {"fp32": 0.9999, "fp16": 0.999, "int8": 0.97}

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


def torch_logits(model_dir: Path, pairs: Sequence[tuple[str, str]], max_length: int) -> np.ndarray:
    """Logits of the saved torch classifier (the parity reference)."""
    import torch

    tokenizer, model = load_torch_model(model_dir, "text-classification")
    model.eval()
    rows = []
    with torch.inference_mode():
        for start in range(0, len(pairs), 16):
            chunk = pairs[start : start + 16]
            batch = _encode_pairs(tokenizer, chunk, max_length, "pt", truncation="only_second")
            rows.append(model(**batch).logits.float().numpy())
    return np.concatenate(rows) if rows else np.zeros((0, 0), dtype=np.float32)


def onnx_logits(model_dir: Path, pairs: Sequence[tuple[str, str]], max_length: int) -> np.ndarray:
    """Logits as the ``classifier`` verdict plugin computes them (its own ONNX runtime path)."""
    from feverous_es.runtime.cross_encoder import CrossEncoder

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
    """``path``'s graph as the runtime opens it on CPU (optimized the same way), so parity
    measures what the pipeline runs."""
    from feverous_es.runtime.session import open_session

    return open_session(lambda _: path, device="cpu", threads=None)


def parity(
    source: Path,
    model_dir: Path,
    task: str,
    precisions: Sequence[str],
    probe: Sequence[tuple[str, str]],
    max_length: int,
) -> dict[str, Any]:
    """Each graph of ``model_dir`` against the torch model of ``source`` on ``probe``: max |Δ|
    of the logits (classification: also the share of pairs with the same argmax; seq2seq: per
    decoder position) or of the non-padding hidden states (feature-extraction, on the probe's
    texts one by one: also min and mean cosine of the mean-pooled vectors)."""
    import torch

    tokenizer, model = load_torch_model(source, task)
    model.eval()
    texts = [text for pair in probe for text in pair]
    result: dict[str, Any] = {"max_length": max_length}
    if task == "feature-extraction":
        result["texts"] = len(texts)
    else:
        result["pairs"] = len(probe)
    if not probe:
        return result | {p: {"max_abs_diff": 0.0} for p in precisions}
    with torch.inference_mode():
        if task == "text2text-generation":
            seq2seq = _seq2seq_parity(torch, tokenizer, model, model_dir, probe)
            return result | seq2seq
        if task == "feature-extraction":
            batch = tokenizer(
                texts, truncation=True, max_length=max_length, padding=True, return_tensors="np"
            )
        else:
            batch = _encode_pairs(tokenizer, probe, max_length, "np")
        feed = {k: np.asarray(v) for k, v in batch.items()}
        tensors = {k: torch.from_numpy(v.astype(np.int64)) for k, v in feed.items()}
        if task == "text-classification":
            reference = model(**tensors).logits.float().numpy()
        else:
            reference = model(**tensors).last_hidden_state.float().numpy()
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


def check_parity(checks: dict[str, Any], source: Path) -> None:
    """Refuse an export (:class:`ExportError`) whose fp32 graph drifts from torch by more than
    :data:`MAX_FP32_DRIFT`, or whose pooled vectors fall under :data:`MIN_POOLED_COSINE`."""
    drift = checks["fp32"]["max_abs_diff"]
    probe = probe_size(checks)
    if drift > MAX_FP32_DRIFT:
        raise ExportError(
            f"the fp32 ONNX export of {source} drifted from torch: max |Δ| {drift:.2e} > "
            f"{MAX_FP32_DRIFT:g} on {probe}; not installed"
        )
    for precision, bound in MIN_POOLED_COSINE.items():
        cosine = checks.get(precision, {}).get("min_cosine")
        if cosine is not None and cosine < bound:
            raise ExportError(
                f"the {precision} ONNX export of {source} drifted from torch: pooled cosine "
                f"{cosine:.4f} < {bound:g} on {probe}; not installed"
            )


def probe_size(checks: dict[str, Any]) -> str:
    """What :func:`parity` ran on: ``20 texts`` (an encoder) or ``10 pairs``."""
    return f"{checks['texts']} texts" if "texts" in checks else f"{checks['pairs']} pairs"


def _pooled_cosine(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> np.ndarray:
    weights = mask[..., None].astype(np.float32)
    pa, pb = (a * weights).sum(1), (b * weights).sum(1)
    return (pa * pb).sum(1) / np.maximum(
        np.linalg.norm(pa, axis=1) * np.linalg.norm(pb, axis=1), 1e-12
    )


def _seq2seq_parity(torch, tokenizer, model, model_dir, probe) -> dict[str, Any]:
    """Teacher-forced decoder logits: the input is ``claim evidence``, the decoder reads its
    start token and the claim's first tokens."""
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
