"""Training the entailment verdict: a 3-way cross-encoder over (claim, premise), and its export.

Driven by ``feverous-es train verdict``, every step resumable:

1. **Evidence.** Claims of files without ``gold_tables`` (FM2, FEVEROUS-S), and a seeded sample
   of ``retrieved`` claims of each table file, go through the pipeline's retrieval stages (pages,
   candidates, reranker, selector, next hops) over an index; the evidence it ends with, not the
   gold evidence, becomes their premise (Malon 2021, §5: a model trained on gold chains is
   confused by the evidence it is given at run time). Cached in ``<work>/evidence.jsonl``.
2. **Pairs** (:mod:`feverous_es.training.entailment_data`): those claims read as the verdict
   reads them, the same evidence without its gold elements as NOT ENOUGH INFO, every table
   claim against its gold table, and the nli pair files; each source capped at ``per_source``
   training pairs so none swamps the others. Cached in ``<work>/pairs.jsonl.gz``.
3. **Fine-tuning** (SUPPORTS / REFUTES / NOT ENOUGH INFO) of any local Hugging Face encoder
   (default all-MiniLM-L6-v2): with ``folds`` = K, first K models each trained without one fold
   of the claims, which score that fold (out-of-fold entailment probabilities, in
   ``<out>/scores.jsonl``: the feature verdicts stack on them without reading scores of claims
   the model trained on); then the model that ships, on every training claim. Held-out accuracy
   per source is logged after every epoch (``training.json``'s ``epochs``). Checkpoints in
   ``<work>/<model>/``; a GPU (``--device cuda``) makes this minutes instead of hours.
4. **Export**: int8 ONNX (``model.int8.onnx``), parity against torch, held-out accuracy of the
   exported model per source and route, and the model card. Without folds the exported model
   scores the claims it did not train on (``stacking_pairs``: the ``stack_share`` and those over
   the per-source cap) for the feature verdicts to stack on.

torch, transformers and optimum are imported inside functions: the runtime never needs them.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from feverous_es.errors import TrainError
from feverous_es.eval.claims import LABELS
from feverous_es.export import card
from feverous_es.index.elements import Element, ElementType
from feverous_es.plugins.config import DEFAULT_PLUGINS
from feverous_es.plugins.interfaces import Candidate
from feverous_es.training import common, contrastive, datasets, gpu_bundle
from feverous_es.training import entailment_data as data
from feverous_es.training.bases import base_name
from feverous_es.training.common import (
    CHECKPOINT_FILE,
    LOSS_LOG,
    TRAINED_DIR,
    check_base,
    import_torch,
)
from feverous_es.training.datasets import TrainingClaim
from feverous_es.verdict.inputs import premise

__all__ = ["CHECKPOINT_FILE", "LABELS", "LOSS_LOG", "TRAINED_DIR", "TrainError"]

# LABELS (SUPPORTS, REFUTES, NOT ENOUGH INFO) is the logit order: config.json's id2label.
EVIDENCE_FILE = "evidence.jsonl"
PAIRS_FILE = "pairs.jsonl.gz"
SCORES_FILE = "scores.jsonl"  # out-of-fold and held-out entailment probabilities, by pair key
FULL_MODEL = "full"  # the work subdirectory of the model that ships


@dataclass
class Example:
    """One claim with the evidence the pipeline retrieved for it."""

    source: str  # the claim file's stem, e.g. "feverous_s_dev"
    id: str
    claim: str
    label: str
    evidence: list[dict[str, Any]] = field(default_factory=list)

    def candidates(self) -> list[Candidate]:
        return [
            Candidate(
                Element(
                    e["id"], e["page"], ElementType(e["type"]), e["text"], e["linearized"], "", ""
                ),
                float(e.get("score", 0.0)),
                int(e.get("hop", 1)),
            )
            for e in self.evidence
        ]

    def premise(self, hints: bool) -> str:
        return premise(self.claim, self.candidates(), hints=hints)


@dataclass
class TrainSettings(common.TrainSettings):
    math_hints: bool = False
    device: str = "cpu"  # where torch trains and scores (not part of the fingerprint)

    FINGERPRINT: ClassVar[tuple[str, ...]] = (*common.TrainSettings.FINGERPRINT, "math_hints")


# ----------------------------------------------------------------------------- claims


def read_labelled_claims(
    paths: Sequence[Path], *, limit: int | None = None, seed: int = 13
) -> list[TrainingClaim]:
    """Every labelled claim in the files; with ``limit``, a seeded sample of that many per file
    (the same claims on every run). ``gold``: every element of every gold set, as written."""

    def make(source: str, record: Any) -> TrainingClaim | None:
        if record.label not in LABELS:
            return None
        gold = tuple(dict.fromkeys(e for group in record.evidence for e in group))
        table = (record.gold_tables or ("",))[0]
        return TrainingClaim(source, str(record.id), record.claim, record.label, table, gold)

    return datasets.sampled_claims(
        paths, make, limit=limit, seed=seed, wanted="SUPPORTS / REFUTES / NEI claims"
    )


# ----------------------------------------------------------------------------- evidence


def _evidence_record(candidate: Candidate) -> dict[str, Any]:
    e = candidate.element
    return {
        "id": e.id,
        "page": e.page,
        "type": str(e.type),
        "text": e.text,
        "linearized": e.linearized,
        "score": round(float(candidate.score), 5),
        "hop": candidate.hop,
    }


def read_cache(path: Path) -> dict[tuple[str, str], Example]:
    """The cached examples by (source, id); a torn last line (a killed run) is ignored."""
    return datasets.read_records(path, Example)


def collect_evidence(
    claims: Sequence[TrainingClaim],
    index: Path,
    cache: Path,
    *,
    store: str = "embedded",
    reranker: str = DEFAULT_PLUGINS["reranker"],
    hops: int | None = None,
    device: str = "cpu",
    batch_size: int = 16,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Example]:
    """Each claim's retrieved evidence, from ``cache`` when it holds it, else from the pipeline
    (and appended to ``cache``). Returns the examples in the order of ``claims``. The default
    reranker is the pipeline's: a verdict learns from the evidence it will be given."""

    def make(pipeline: Any, chunk: Sequence[TrainingClaim]) -> list[Example]:
        results = pipeline.retrieve_many([c.claim for c in chunk])
        return [
            Example(c.source, c.id, c.claim, c.label, [_evidence_record(e) for e in r.evidence])
            for c, r in zip(chunk, results, strict=True)
        ]

    def pipeline() -> Any:
        return datasets.retrieval_pipeline(
            index, store=store, reranker=reranker, hops=hops, device=device
        )

    return datasets.collect_cached(
        claims, cache, Example, pipeline, make, batch_size=batch_size, on_progress=on_progress
    )


# ----------------------------------------------------------------------------- pairs


def build_pairs(
    options: RunOptions, on_evidence: Callable[[int, int], None] | None = None
) -> list[data.Pair]:
    """Every pair of the run (:mod:`~feverous_es.training.entailment_data`), from
    ``<work>/pairs.jsonl.gz`` when an earlier run wrote it."""
    from feverous_es.index.backends import open_store

    cache = options.work / PAIRS_FILE
    if cache.is_file():
        return data.read_pairs(cache)
    seed = options.settings.seed
    split = data.Split(seed, options.holdout, options.folds)
    never_held = data.Split(seed, 0.0, options.folds)
    claims = read_labelled_claims(options.claims, limit=options.limit, seed=seed)
    extra = (
        read_labelled_claims(options.train_claims, limit=options.limit, seed=seed)
        if options.train_claims
        else []
    )
    tables = [c for c in [*claims, *extra] if c.table]
    # Table files: a seeded sample of claims read against retrieved evidence; others: all.
    retrieve = [c for c in claims if not c.table]
    for source in dict.fromkeys(c.source for c in claims if c.table):
        rows = [c for c in claims if c.source == source]
        retrieve += datasets.sample(rows, options.retrieved, seed, key=lambda c: (c.source, c.id))
    examples = collect_evidence(
        retrieve, options.index, options.work / EVIDENCE_FILE, store=options.store,
        reranker=options.reranker, hops=options.hops, device=options.device,
        on_progress=on_evidence,
    )  # fmt: skip
    split_sources = {Path(p).stem for p in options.claims}
    pairs: list[data.Pair] = []
    store = open_store(options.store, options.index)
    try:
        for claim, example in zip(retrieve, examples, strict=True):
            pairs += data.retrieved_pairs(claim, example.candidates(), claim.gold, store, split)
        table_cache: dict[str, Any] = {}
        for claim in tables:
            chosen = split if claim.source in split_sources else never_held
            if (pair := data.gold_table_pair(claim, store, chosen, table_cache)) is not None:
                pairs.append(pair)
    finally:
        store.close()
    for path in options.pairs:
        pairs += data.nli_pairs(path)
    if options.contrastive is not None:
        pairs += contrastive.pairs_from_dump(options.contrastive, options.contrastive_pages, split)
    data.write_pairs(cache, pairs)
    return pairs


def kept_out_pairs(pairs: Sequence[data.Pair], options: RunOptions) -> list[data.Pair]:
    """With ``stack_share``, the training claims' pairs kept out of the model for the feature
    verdicts to stack on (a seeded share of the ``--claims`` files' training claims)."""
    if options.stack_share <= 0:
        return []
    split_sources = {Path(p).stem for p in options.claims}
    seed = options.settings.seed
    return [
        p for p in pairs
        if p.source in split_sources and not p.held_out
        and datasets.hash_unit(seed, p.source, p.id, "stack") < options.stack_share
    ]  # fmt: skip


def training_pool(pairs: Sequence[data.Pair], options: RunOptions) -> list[data.Pair]:
    """The pairs the models train on: not held out, not kept for stacking, meant for
    training, capped per source."""
    kept_out = {p.key for p in kept_out_pairs(pairs, options)}
    pool = [p for p in pairs if p.train and not p.held_out and p.key not in kept_out]
    return data.capped(pool, options.per_source, options.settings.seed)


def stacking_pairs(pairs: Sequence[data.Pair], options: RunOptions) -> list[data.Pair]:
    """Without cross-fitting models, the training claims' pairs the model did not train on,
    which it scores for the feature verdicts to stack on: the ``stack_share`` kept out, the
    pairs over the per-source cap (most of a large file such as tabfact_train) and those it
    only scores (``train`` False). With ``folds`` the fold models score every claim instead."""
    if options.folds:
        return []
    claim_sources = {Path(p).stem for p in [*options.claims, *options.train_claims]}
    pooled = {p.key for p in training_pool(pairs, options)}
    return [
        p for p in pairs
        if p.source in claim_sources and not p.held_out and p.key not in pooled
    ]  # fmt: skip


# ----------------------------------------------------------------------------- training


def _encode(tokenizer: Any, pairs: Sequence[data.Pair], max_length: int) -> list[dict]:
    return common.encode_pairs(tokenizer, [(p.claim, p.premise) for p in pairs], max_length)


def predict(
    torch: Any, model: Any, tokenizer: Any, pairs: Sequence[data.Pair], settings: TrainSettings
) -> Any:
    """Label probabilities of ``pairs`` (numpy, LABELS order) from a torch model in eval mode."""
    import numpy as np

    encoded = _encode(tokenizer, pairs, settings.max_length)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]["input_ids"]))
    rows = np.zeros((len(encoded), len(LABELS)), dtype=np.float32)
    pad_id = tokenizer.pad_token_id or 0
    with torch.inference_mode():
        for start in range(0, len(order), 128):
            ids = order[start : start + 128]
            batch = common.collate(torch, [encoded[i] for i in ids], pad_id)
            batch = {k: v.to(settings.device) for k, v in batch.items()}
            logits = model(**batch).logits.float()
            rows[ids] = torch.softmax(logits, dim=-1).cpu().numpy()
    return rows


def held_out_accuracy(
    probabilities: Any, pairs: Sequence[data.Pair]
) -> dict[str, dict[str, float]]:
    """Label accuracy per source (and ``source/no-gold`` for the gold-removed NEI pairs) of
    the pairs the verdict would read (``train``: the route it takes)."""
    rows: dict[str, list[bool]] = {}
    for row, pair in zip(probabilities, pairs, strict=True):
        if pair.train:
            rows.setdefault(pair.measured_as, []).append(LABELS[int(row.argmax())] == pair.label)
    return {
        name: {"pairs": len(right), "accuracy": round(sum(right) / len(right), 4)}
        for name, right in sorted(rows.items())
    }


EPOCH_PAIRS = 150  # held-out pairs of each source measured after each epoch
EPOCHS_FILE = "epochs.json"  # held-out accuracy after each epoch, in a model's work directory
TIMING_FILE = "timing.json"  # the finished training's seconds, tokens/s and device


def train(
    pool: Sequence[data.Pair],
    held: Sequence[data.Pair],
    settings: TrainSettings,
    work: Path,
    *,
    on_progress: Callable[[int, int, float], None] | None = None,
    stop_after: int | None = None,
) -> Path | None:
    """Fine-tune ``settings.base`` on ``pool`` into ``<work>/trained`` and return that
    directory (None when ``stop_after`` stopped it first); after each epoch the accuracy on
    ``held`` is added to ``<work>/epochs.json``. Resumable
    (:func:`~feverous_es.training.common.fit`)."""
    torch = import_torch()
    check_base(settings.base)
    if not pool:
        raise TrainError("no training pairs (every claim is held out?)")
    tokenizer, model = common.load_model(torch, settings, LABELS)
    model.to(settings.device)
    encoded = _encode(tokenizer, pool, settings.max_length)
    labels = [LABELS.index(p.label) for p in pool]
    pad_id = tokenizer.pad_token_id or 0

    def batch_loss(ids: list[int]) -> tuple[Any, int]:
        batch = common.collate(torch, [encoded[i] for i in ids], pad_id)
        batch = {k: v.to(settings.device) for k, v in batch.items()}
        target = torch.tensor([labels[i] for i in ids], device=settings.device)
        loss = torch.nn.functional.cross_entropy(model(**batch).logits, target)
        return loss, int(batch["attention_mask"].sum())

    def epoch_done(epoch: int) -> None:
        if not held:
            return
        model.eval()
        accuracy = held_out_accuracy(predict(torch, model, tokenizer, held, settings), held)
        model.train()
        path = work / EPOCHS_FILE
        curve = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
        curve = [e for e in curve if e["epoch"] != epoch] + [{"epoch": epoch, "held_out": accuracy}]
        path.write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")

    finished = common.fit(
        torch, model, settings, work, len(encoded), batch_loss,
        on_progress=on_progress, stop_after=stop_after, on_epoch=epoch_done,
    )  # fmt: skip
    if not finished:
        return None
    model.to("cpu")
    return common.save_trained(model, tokenizer, work)


def score_with(trained: Path, pairs: Sequence[data.Pair], settings: TrainSettings) -> Any:
    """Label probabilities of ``pairs`` from a saved torch model."""
    torch = import_torch()
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(trained)
    model = AutoModelForSequenceClassification.from_pretrained(trained).to(settings.device).eval()
    return predict(torch, model, tokenizer, pairs, settings)


def _write_scores(path: Path, pairs: Sequence[data.Pair], probabilities: Any, model: str) -> None:
    with datasets.append_to(path) as out:
        for pair, row in zip(pairs, probabilities, strict=True):
            record = {
                "key": pair.key,
                "model": model,
                "probabilities": [round(float(p), 5) for p in row],
            }
            out.write(json.dumps(record) + "\n")


def train_models(
    pairs: Sequence[data.Pair],
    options: RunOptions,
    *,
    on_step: Callable[[int, int, float], None] | None = None,
    stop_after: int | None = None,
) -> tuple[Path | None, dict[str, Any]]:
    """The cross-fitting models, then the full one; their scores in ``<work>/scores.jsonl``.
    Returns the full model's trained directory (None when stopped) and the training record."""
    settings = options.settings
    pool = training_pool(pairs, options)
    # A sample of the held-out pairs (EPOCH_PAIRS a source) measures each epoch: all of them
    # take minutes on a CPU.
    held = data.capped([p for p in pairs if p.held_out and p.train], EPOCH_PAIRS, settings.seed)
    scores_path = options.work / SCORES_FILE
    scored = {r["model"] for r in datasets.read_jsonl(scores_path)}
    record: dict[str, Any] = {"pool": dict(Counter(p.source for p in pool))}
    for fold in range(options.folds):
        name = f"fold-{fold}"
        if name in scored:
            continue
        fold_pool = [p for p in pool if p.fold != fold]
        trained = train(fold_pool, [], settings, options.work / name, on_progress=on_step,
                        stop_after=stop_after)  # fmt: skip
        if trained is None:
            return None, record
        out_of_fold = [p for p in pairs if p.fold == fold and not p.held_out]
        _write_scores(scores_path, out_of_fold, score_with(trained, out_of_fold, settings), name)
    work = options.work / FULL_MODEL
    timing_path = work / TIMING_FILE
    if timing_path.is_file() and (work / TRAINED_DIR).is_dir():  # finished by an earlier run
        trained, timing = work / TRAINED_DIR, json.loads(timing_path.read_text(encoding="utf-8"))
    elif options.from_gpu is not None:
        trained, timing = _gpu_student(options.from_gpu, settings.base, work)
        timing_path.write_text(json.dumps(timing) + "\n", encoding="utf-8")
    else:
        trained, timing = common.timed_training(
            partial(train, pool, held, settings, work, stop_after=stop_after), on_step
        )
        if trained is None:
            return None, record
        timing = {**timing, "device": _device_name(settings.device)}
        timing_path.write_text(json.dumps(timing) + "\n", encoding="utf-8")
    curve = work / EPOCHS_FILE
    record.update(timing)
    record["epochs"] = json.loads(curve.read_text(encoding="utf-8")) if curve.is_file() else []
    return trained, record


def _gpu_student(results: Path, base: Path, work: Path) -> tuple[Path, dict[str, Any]]:
    """The GPU job's student installed as ``<work>/trained``, its epochs curve (validation
    accuracy per source, the pairs that chose the epoch) as ``train`` writes it, and its
    timing with the teacher's record."""
    report = gpu_bundle.install_student(results, base, work / TRAINED_DIR)
    student, teacher = report["student"], report["teacher"]
    curve = [
        {"epoch": int(epoch), "held_out": {k: v for k, v in sets["valid"].items() if k != "all"}}
        for epoch, sets in sorted(student["curve_by_source"].items(), key=lambda e: int(e[0]))
    ]
    (work / EPOCHS_FILE).write_text(json.dumps(curve, indent=2) + "\n", encoding="utf-8")
    timing = {
        "seconds": report["seconds_total"],
        "tokens_per_second": student["curve"][-1]["tokens_per_second"],
        "device": "cpu" if report["device"] == "cpu" else f"cuda ({report['device']})",
        "gpu_job": {"seconds": report["seconds"], "versions": report["versions"]},
        "teacher": {
            "base": report["bases"]["teacher"],
            **{k: teacher[k] for k in ("best_epoch", "valid", "held")},
        },
        "student_best_epoch": student["best_epoch"],
    }
    return work / TRAINED_DIR, timing


def _device_name(device: str) -> str:
    """``cpu``, or ``cuda (NVIDIA H100 80GB HBM3)``: what the card says the model trained on."""
    if not device.startswith("cuda"):
        return device
    return f"{device} ({import_torch().cuda.get_device_name(device)})"


# ----------------------------------------------------------------------------- measuring


def probabilities(model_dir: Path, pairs: Sequence[data.Pair], settings: TrainSettings) -> Any:
    """Label probabilities of ``pairs`` from the exported model, as the verdict plugin reads
    them (int8 ONNX on the CPU)."""
    from feverous_es.export.parity import onnx_logits
    from feverous_es.verdict.entailment import softmax

    if not pairs:
        return []
    return softmax(
        onnx_logits(model_dir, [(p.claim, p.premise) for p in pairs], settings.max_length)
    )


def accuracy(
    pairs: Sequence[data.Pair], scores: dict[str, list[float]]
) -> dict[str, dict[str, float]]:
    """Held-out accuracy of the exported model (its ``scores``): per source, and per route
    over all sources."""
    import numpy as np

    if not pairs:
        return {}
    rows = np.array([scores[p.key] for p in pairs])
    result = held_out_accuracy(rows, pairs)
    for route in (data.SENTENCE, data.TABLE):
        chosen = [i for i, p in enumerate(pairs) if p.route == route and p.train]
        if chosen:
            right = [LABELS[int(rows[i].argmax())] == pairs[i].label for i in chosen]
            result[f"route:{route}"] = {
                "pairs": len(right), "accuracy": round(sum(right) / len(right), 4)
            }  # fmt: skip
    return result


# ----------------------------------------------------------------------------- the card


def write_card(out: Path, report: dict[str, Any]) -> None:
    """The model card, ``README.md`` beside the model."""
    held = report["holdout_accuracy"]
    rows = "\n".join(f"| {name} | {r['pairs']} | {r['accuracy']:.1%} |" for name, r in held.items())
    training = report["training"]
    pool = ", ".join(f"{source} {n:,}" for source, n in training["pool"].items())
    epochs = "\n".join(
        f"| {e['epoch']} | "
        + " | ".join(f"{r['accuracy']:.1%}" for r in e["held_out"].values())
        + " |"
        for e in training["epochs"]
    )
    epoch_head = " | ".join(training["epochs"][0]["held_out"]) if training["epochs"] else ""
    about = f"""
A 3-way (SUPPORTS / REFUTES / NOT ENOUGH INFO) cross-encoder over (claim, premise): the
`classifier` verdict plugin's `model`. The premise is what the verdict reads for the claim's
route: its evidence sentences as `[Title] sentence …` (`feverous_es.verdict.inputs.
sentence_premise`), or one table as `Title, caption. header. row ; row …` with the rows that
share most words with the claim (`table_premise`). It answers the claims of a route without a
feature model (by default the sentence route), feeds feature models trained on its
probabilities (stacking), and decides NOT ENOUGH INFO (`nei_above`). Dynamic int8 ONNX,
`model.int8.onnx` ({report["export"]["bytes"] / 1e6:.1f} MB); labels in `config.json`
(`id2label`)."""
    contrastive_text = ""
    if report.get("contrastive_pages"):
        contrastive_text = f"""
Contrastive pairs from {report["contrastive_pages"]:,} pages of the dump
(`feverous_es.training.contrastive`): a lead sentence as SUPPORTS, with one attribute taken
from another page as REFUTES (`contrastive-<kind>`), and against other subjects' sentences as
NOT ENOUGH INFO (`contrastive-other-subject`); held out by page."""
    data = f"""
Claim files {", ".join(f"`{c}`" for c in report["claims"])} (a seeded {report["holdout"]:.0%}
of their claims, by claim id, held out of every model and measured below), training-only files
{", ".join(f"`{c}`" for c in report["train_claims"]) or "none"}, and the pair files
{", ".join(f"`{c}`" for c in report["pairs"]) or "none"}. FM2 and FEVEROUS-S claims are read
against the evidence the pipeline *retrieved* for them (reranker `{report["reranker"]}`), and
again with every gold element removed, labelled NOT ENOUGH INFO; TabFact claims against their
gold table ({report["retrieved"]} of each table file also against retrieved evidence). At most
{report["per_source"]:,} training pairs a source. Training pairs: {pool}.{contrastive_text}"""
    run = f"""
Base model `{training["base_name"]}`; {training["examples"]:,} training pairs,
{training["epochs_trained"]} epoch(s), max_length {training["max_length"]}, batch
{training["batch_size"]}, learning rate {training["learning_rate"]}, {training["folds"]}
cross-fitting models before it (their out-of-fold scores: `scores.jsonl`);
{training["seconds"]:.0f} s for the shipped model on {training["device"]}."""
    if teacher := training.get("teacher"):
        held_rows = ", ".join(
            f"{name} {r['accuracy']:.1%}" for name, r in teacher["held"].items() if name != "all"
        )
        run += f"""
Trained on the GPU job's bundle (docs/gpu-training.md): distilled from a `{teacher["base"]}`
teacher (epoch {teacher["best_epoch"]}; torch bf16 held-out accuracy {held_rows}) on its soft
labels and the gold labels; the epochs were chosen on validation claims, never on held-out
ones."""
    curve = f"""
| epoch | {epoch_head} |
|---|{"---|" * len(training["epochs"][0]["held_out"]) if training["epochs"] else ""}
{epochs}"""
    metrics = f"""
| source (`/no-gold`: gold removed, NEI expected) | pairs | label accuracy |
|---|---|---|
{rows}

{card.classifier_parity(report["export"]["parity"])}"""
    model_card = card.ModelCard(
        title="feverous-es entailment verdict model",
        about=about,
        sections=[
            ("Data", data),
            card.command_section(report["command"], run),
            ("Held-out accuracy after each epoch (torch, pairs the verdict reads)", curve),
            ("Metrics (held-out claims, this int8 model)", metrics),
        ],
        licences=[
            *card.fine_tuned_licences(training["base_name"], report["claims"]),
            "NLI pairs: CAD-SNLI (Kaushik et al. 2020; Apache-2.0, SNLI CC BY-SA 4.0), "
            "Climate-FEVER (Diggelmann et al. 2020), FEVER-Symmetric (Schuster et al. 2019), "
            "SufficientFacts (Atanasova et al. 2022; FEVER, HoVer, VitaminC claims): CC BY-SA; "
            "InfoTabS (Gupta et al. 2020) and SciTab (Lu et al. 2023): MIT.",
        ],
    )
    common.save_card(
        out, model_card, report, model="feverous-es verdict", base=training["base_name"]
    )


# ----------------------------------------------------------------------------- the command


@dataclass
class RunOptions(common.RunOptions):
    settings: TrainSettings
    holdout: float = 0.3
    reranker: str = DEFAULT_PLUGINS["reranker"]
    hops: int | None = None
    train_claims: list[Path] = field(default_factory=list)
    pairs: list[Path] = field(default_factory=list)
    folds: int = 2
    stack_share: float = 0.0
    per_source: int | None = 6000
    retrieved: int = 1500
    contrastive: Path | None = None  # a wiki.db whose lead sentences make contrastive pairs
    contrastive_pages: int = 4000
    bundle: Path | None = None  # write the GPU job's bundle here instead of training
    from_gpu: Path | None = None  # the GPU job's results: their student is the model
    teacher: Path | None = None  # the GPU job's teacher base (a model directory)
    device_wheels: bool = True  # bundle the pinned transformers/tokenizers wheels

    def check(self) -> None:
        super().check()
        if self.folds < 0 or self.folds == 1:
            raise TrainError(f"--folds must be 0 or at least 2, not {self.folds}")
        if not 0.0 <= self.stack_share < 1.0 or (self.stack_share and self.folds):
            raise TrainError("--stack-share must be in [0, 1), and given with --folds 0")
        if (self.bundle or self.from_gpu) and self.folds:
            raise TrainError("the GPU job trains no cross-fitting models: give --folds 0")
        if self.bundle and self.from_gpu:
            raise TrainError("--bundle writes the GPU job's inputs, --from-gpu reads its results: "
                             "give one")  # fmt: skip


def run(
    options: RunOptions,
    *,
    on_evidence: Callable[[int, int], None] | None = None,
    on_step: Callable[[int, int, float], None] | None = None,
    stop_after: int | None = None,
) -> dict[str, Any] | None:
    """Evidence, pairs, the cross-fitting and full models, export, held-out accuracy and the
    model card; returns the report (None when ``stop_after`` interrupted a training)."""
    from feverous_es.export.exporter import export_int8_as_model

    options.check()
    settings = options.settings
    check_base(settings.base)
    pairs = build_pairs(options, on_evidence)
    trained, record = train_models(pairs, options, on_step=on_step, stop_after=stop_after)
    if trained is None:
        return None
    held = [p for p in pairs if p.held_out]
    pool = training_pool(pairs, options)
    probe = [(p.claim, p.premise) for p in (held or pool)[:64]]
    exported = export_int8_as_model(trained, options.out, options.work, probe, settings.max_length)
    # The shipped model's own scores (int8, as the verdict computes them): every held-out pair
    # and the stacking pairs; those an earlier run scored are kept.
    scores_path = options.work / SCORES_FILE
    stacking = stacking_pairs(pairs, options)
    scored = {r["key"] for r in datasets.read_jsonl(scores_path) if r["model"] == FULL_MODEL}
    wanted = [p for p in [*held, *stacking] if p.key not in scored]
    if wanted:
        _write_scores(scores_path, wanted, probabilities(options.out, wanted, settings), FULL_MODEL)
    scores_path.touch()  # a run with nothing to score still hands the feature verdicts a file
    scores = data.read_scores(scores_path)
    shutil.copyfile(scores_path, options.out / SCORES_FILE)
    report: dict[str, Any] = {
        **options.report(),
        "train_claims": [Path(p).name for p in options.train_claims],
        "pairs": [Path(p).name for p in options.pairs],
        "contrastive_pages": options.contrastive_pages if options.contrastive else 0,
        "reranker": options.reranker,
        "retrieved": options.retrieved,
        "per_source": options.per_source,
        "training": {
            "base_name": base_name(settings.base),
            "examples": len(pool),
            "epochs_trained": settings.epochs,
            "max_length": settings.max_length,
            "batch_size": settings.batch_size,
            "learning_rate": settings.learning_rate,
            "seed": settings.seed,
            "math_hints": settings.math_hints,
            "folds": options.folds,
            "stack_share": options.stack_share,
            "stacking_pairs": len(stacking),
            "steps": settings.total_steps(len(pool)),
            **record,
        },
        "export": exported,
        "holdout_accuracy": accuracy(held, scores),
    }
    write_card(options.out, report)
    return report


def write_gpu_bundle(
    options: RunOptions, *, on_evidence: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """The command's pairs (as :func:`run` builds them) and everything else the GPU job needs,
    written to ``options.bundle`` (:mod:`~feverous_es.training.gpu_bundle`); returns what to
    send: the roles' pair counts and the calls."""
    options.check()
    assert options.bundle is not None and options.teacher is not None
    settings = options.settings
    check_base(settings.base)
    check_base(options.teacher)
    pairs = build_pairs(options, on_evidence)
    student = gpu_bundle.StudentSettings(
        epochs=max(1, round(settings.epochs)), batch_size=settings.batch_size,
        learning_rate=settings.learning_rate, max_length=settings.max_length,
        freeze_embeddings=settings.freeze_embeddings,
    )  # fmt: skip
    config = gpu_bundle.write_bundle(
        options.bundle, pairs, training_pool(pairs, options), teacher=options.teacher,
        student=settings.base, teacher_settings=gpu_bundle.TeacherSettings(
            max_length=settings.max_length),
        student_settings=student, seed=settings.seed, wheels=options.device_wheels,
    )  # fmt: skip
    calls = json.loads((options.bundle / gpu_bundle.TRANSFERS_FILE).read_text(encoding="utf-8"))
    return {
        "bundle": str(options.bundle),
        "pairs": config["roles"],
        "calls": [{"call": c["call"], "carry": c["carry"], "bytes": c["bytes"]} for c in calls],
        "transfers": str(options.bundle / gpu_bundle.TRANSFERS_FILE),
    }
