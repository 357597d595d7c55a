"""Training the feature verdicts: claim-against-evidence features, gradient boosting, ONNX.

Driven by ``feverous-es train table-verdict`` and ``train sentence-verdict``:

1. **Features.** ``table``: each claim (a FEVEROUS-format file whose records name
   ``gold_tables``, as TabFact's do) is read against its gold table, taken from the index's
   store with the :meth:`~feverous_es.verdict.table_facts.Table.from_elements` the verdict uses
   at run time: the cheap stand-in for the retrieved table (the pipeline costs ~0.5 s a claim, 4
   hours for 30 k claims). With ``retrieved`` = N, the first N training claims (file order) also
   go through the pipeline's retrieval (cached in ``<work>/evidence.jsonl``, as ``train
   verdict`` does) and are read a second time against the table the verdict would read in their
   evidence (:func:`~feverous_es.verdict.feature_model.first_table`). ``sentence``: every claim
   goes through the pipeline's retrieval (same cache) and is read against the sentences of its
   retrieved evidence, exactly as at run time.
2. **Fitting** a scikit-learn ``GradientBoostingClassifier`` (SUPPORTS / REFUTES; seconds on a
   CPU). ``--claims`` files are split by the seeded hash of each claim id, a share ``holdout``
   kept out; ``--train-claims`` files (e.g. TabFact's training claims) are never held out.
   With ``entailment`` (a ``train verdict`` output directory), each claim's entailment
   probabilities join its features (stacking): read from that directory's ``scores.jsonl``,
   where every training claim was scored by a cross-fitting model that did not train on it.
3. **Export** with skl2onnx to ``model.onnx`` (tree-ensemble operators that ONNX Runtime runs:
   no scikit-learn at run time), a parity check against scikit-learn, the held-out accuracy per
   file, ``feature_model.json`` (kind, labels, features) and a model card.

scikit-learn and skl2onnx are imported inside functions: only training needs them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import TrainError
from feverous_es.eval.claims import REFUTES, SUPPORTS
from feverous_es.export import card
from feverous_es.index.element_ids import element_to_triple
from feverous_es.runtime.files import FP32_FILE, write_manifest
from feverous_es.training import common, datasets
from feverous_es.training.datasets import TrainingClaim, is_holdout
from feverous_es.training.progress import QUIET, Progress
from feverous_es.training.rerank.data import index_id
from feverous_es.verdict import sentence_facts, table_facts
from feverous_es.verdict.feature_model import (
    ENTAILMENT_FEATURES,
    FEATURES,
    SPEC_FILE,
    FeatureClassifier,
    first_table,
    sentence_texts,
)
from feverous_es.verdict.table_facts import Table

LABELS = (SUPPORTS, REFUTES)  # the classifier's class order: 0 SUPPORTS, 1 REFUTES
INSTALL_HINT = "pip install 'feverous-es[export]' (scikit-learn, skl2onnx)"


def read_claims(
    paths: Sequence[Path], *, tables: bool, limit: int | None = None, seed: int = 13
) -> list[TrainingClaim]:
    """The SUPPORTS / REFUTES claims of the files (with ``tables``, those that name a gold
    table); with ``limit``, a seeded sample of that many per file."""
    chosen: list[TrainingClaim] = []
    for path in paths:
        source = Path(path).stem
        rows = [
            TrainingClaim(source, str(r.id), r.claim, r.label, (r.gold_tables or ("",))[0])
            for r in datasets.claim_records(Path(path))
            if r.label in LABELS and (r.gold_tables or not tables)
        ]
        if not rows:
            named = " that name gold_tables" if tables else ""
            raise TrainError(f"{path} has no SUPPORTS / REFUTES claims{named}")
        chosen += datasets.sample(rows, limit, seed, key=lambda r: (r.source, r.id))
    return chosen


def gold_features(
    claims: Sequence[TrainingClaim],
    store: Any,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, list[TrainingClaim]]:
    """The features of each claim against its gold table, and the claims they are for (a claim
    whose table the index lacks is left out)."""
    tables: dict[str, Table | None] = {}
    rows, kept = [], []
    for done, claim in enumerate(claims, 1):
        if claim.table not in tables:
            # The claim reader checked the id is Page_table_t; the index spells titles NFD.
            page, _, number = element_to_triple(index_id(claim.table))
            tables[claim.table] = Table.from_elements(
                store.page_elements(page, int(number)), int(number)
            )
        table = tables[claim.table]
        if table is not None:
            rows.append(table_facts.claim_features(claim.claim, table))
            kept.append(claim)
        if on_progress and (done % 500 == 0 or done == len(claims)):
            on_progress(done, len(claims))
    if not rows:
        raise TrainError("none of the claims' gold tables is in the index")
    return np.stack(rows), kept


@dataclass
class Settings:
    trees: int = 300
    learning_rate: float = 0.05
    depth: int = 4
    subsample: float = 0.8
    seed: int = 13


def fit(features: np.ndarray, labels: np.ndarray, settings: Settings) -> Any:
    try:
        from sklearn.ensemble import GradientBoostingClassifier
    except ImportError as error:
        raise TrainError(f"{error}; training needs {INSTALL_HINT}") from None
    if len(set(labels.tolist())) < 2:
        raise TrainError("the training claims hold one label only: SUPPORTS and REFUTES needed")
    # GradientBoostingClassifier, not HistGradientBoosting: skl2onnx 1.20 cannot convert the
    # latter's missing-value tracks (onnx 1.23 refuses its boolean attribute), and the features
    # have no missing values (-1 marks "does not apply").
    model = GradientBoostingClassifier(
        n_estimators=settings.trees,
        learning_rate=settings.learning_rate,
        max_depth=settings.depth,
        subsample=settings.subsample,
        random_state=settings.seed,
    )
    return model.fit(features, labels)


def export(
    model: Any, out: Path, probe: np.ndarray, kind: str, names: Sequence[str]
) -> dict[str, Any]:
    """``model.onnx``, ``feature_model.json`` and the manifest in ``out``; parity on ``probe``."""
    try:
        from skl2onnx import to_onnx
    except ImportError as error:
        raise TrainError(f"{error}; export needs {INSTALL_HINT}") from None
    out.mkdir(parents=True, exist_ok=True)
    graph = to_onnx(
        model,
        probe[:1].astype(np.float32),
        options={id(model): {"zipmap": False}},
        target_opset={"": 17, "ai.onnx.ml": 3},
    )
    (out / FP32_FILE).write_bytes(graph.SerializeToString())
    spec = {"kind": kind, "labels": list(LABELS), "features": list(names)}
    (out / SPEC_FILE).write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
    write_manifest(out, [FP32_FILE, SPEC_FILE])
    onnx_p = FeatureClassifier(out, kind).probabilities(probe)
    sk_p = model.predict_proba(probe)
    return {
        "bytes": (out / FP32_FILE).stat().st_size,
        "parity": {
            "rows": len(probe),
            "max_abs_diff": float(np.abs(onnx_p - sk_p).max()),
            "argmax_agreement": float((onnx_p.argmax(1) == sk_p.argmax(1)).mean()),
        },
    }


def accuracy(
    probabilities: np.ndarray, claims: Sequence[TrainingClaim]
) -> dict[str, dict[str, float]]:
    """Label accuracy per claim file, next to its majority class."""
    return datasets.label_accuracy([LABELS[i] for i in probabilities.argmax(1)], claims)


@dataclass
class RunOptions:
    kind: str  # "table" or "sentence"
    claims: list[Path]
    index: Path
    out: Path
    settings: Settings = field(default_factory=Settings)
    train_claims: list[Path] = field(default_factory=list)
    holdout: float = 0.3
    limit: int | None = None
    store: str = "embedded"
    work: Path | None = None
    retrieved: int = 0
    entailment: Path | None = None  # a `train verdict` output directory (its scores.jsonl)
    command: str = ""


def read_entailment(directory: Path) -> dict[str, list[float]]:
    """The entailment scores of a ``train verdict`` output directory, by pair key."""
    from feverous_es.training.entailment_data import read_scores
    from feverous_es.training.verdict.options import SCORES_FILE

    path = Path(directory) / SCORES_FILE
    if not path.is_file():
        raise TrainError(f"{directory} has no {SCORES_FILE}: give a `train verdict` --out")
    return read_scores(path)


def stack(
    features: np.ndarray, keys: Sequence[str], scores: dict[str, list[float]]
) -> tuple[np.ndarray, np.ndarray]:
    """The features of the claims the entailment model scored, with its probabilities after
    them, and which claims those are (a claim the model trained on has no score: stacking on
    it would teach the feature model to trust the entailment model more than it should)."""
    scored = np.array([k in scores for k in keys], dtype=bool)
    columns = np.array([scores[k] for k, s in zip(keys, scored, strict=True) if s], np.float32)
    columns = columns.reshape(int(scored.sum()), len(ENTAILMENT_FEATURES))
    return np.hstack([features[scored], columns]), scored


def evidence_features(
    claims: Sequence[TrainingClaim],
    options: RunOptions,
    store: Any,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[np.ndarray, list[TrainingClaim]]:
    """The features of ``claims`` against their retrieved evidence, read as the verdict reads
    it: its sentences (``sentence``), the first table it holds (``table``: claims whose evidence
    holds no table are left out)."""
    from feverous_es.training.verdict.evidence import collect_evidence

    if options.work is None:
        raise TrainError("retrieval needs a --work directory for the evidence cache")
    examples = collect_evidence(
        [TrainingClaim(c.source, c.id, c.claim, c.label) for c in claims],
        options.index,
        options.work / "evidence.jsonl",
        store=options.store,
        on_progress=on_progress,
    )
    rows, kept = [], []
    for claim, example in zip(claims, examples, strict=True):
        evidence = example.evidence_candidates()
        if options.kind == "sentence":
            rows.append(sentence_facts.claim_features(claim.claim, sentence_texts(evidence)))
            kept.append(claim)
        elif (table := first_table(evidence, store)) is not None:
            rows.append(table_facts.claim_features(claim.claim, table))
            kept.append(claim)
    width = len(FEATURES[options.kind])
    return (np.stack(rows) if rows else np.zeros((0, width), np.float32)), kept


def run(options: RunOptions, progress: Progress = QUIET) -> dict[str, Any]:
    """Features, fitting, export, held-out accuracy and the model card; returns the report.
    Phases: ``gold-table features``, ``retrieved evidence``."""
    from feverous_es.index.backends import open_store

    if not 0.0 <= options.holdout < 1.0:
        raise TrainError(f"--holdout must be in [0, 1), not {options.holdout}")
    common.check_out(options.out)
    if not options.claims:
        raise TrainError("no claim files given (--claims FILE.jsonl)")
    seed = options.settings.seed
    tables = options.kind == "table"
    split_claims = read_claims(options.claims, tables=tables, limit=options.limit, seed=seed)
    extra = read_claims(options.train_claims, tables=tables, limit=options.limit, seed=seed)
    split_sources = {Path(p).stem for p in options.claims}

    def held_out(claim: TrainingClaim) -> bool:
        return claim.source in split_sources and is_holdout(
            seed, claim.source, claim.id, options.holdout
        )

    on_features = progress.counter("gold-table features")
    on_evidence = progress.counter("retrieved evidence")
    store = open_store(options.store, options.index)
    try:
        if tables:
            features, claims = gold_features([*split_claims, *extra], store, on_features)
            # The first N training claims of the split files, in file order.
            retrieve = [c for c in split_claims if not held_out(c)][: options.retrieved]
        else:
            features, claims = evidence_features(
                [*split_claims, *extra], options, store, on_evidence
            )
            retrieve = []
        extra_rows, extra_claims = (
            evidence_features(retrieve, options, store, on_evidence)
            if retrieve
            else (np.zeros((0, features.shape[1]), np.float32), [])
        )
    finally:
        store.close()
    names = FEATURES[options.kind]
    unscored = 0
    if options.entailment is not None:
        from feverous_es.training.entailment_data import score_key

        scores = read_entailment(options.entailment)
        variant = "gold" if tables else ""
        keys = [score_key(options.kind, c.source, c.id, variant) for c in claims]
        missing = [k for k, c in zip(keys, claims, strict=True) if held_out(c) and k not in scores]
        if missing:
            raise TrainError(
                f"{options.entailment} lacks the entailment scores of {len(missing)} held-out "
                f"claims (e.g. {missing[0]}): train the verdict with the same claim files, "
                "--retrieved / --limit, --holdout and --seed"
            )
        features, scored = stack(features, keys, scores)
        unscored = int((~scored).sum())
        claims = [c for c, s in zip(claims, scored, strict=True) if s]
        extra_keys = [score_key(options.kind, c.source, c.id) for c in extra_claims]
        extra_rows, extra_scored = stack(extra_rows, extra_keys, scores)
        extra_claims = [c for c, s in zip(extra_claims, extra_scored, strict=True) if s]
        if not any(not held_out(c) for c in claims) and not extra_claims:
            raise TrainError(
                f"{options.entailment} scored none of the training claims: train the verdict "
                "with --stack-share or --folds"
            )
        names = names + ENTAILMENT_FEATURES
    held = np.array([held_out(c) for c in claims])
    labels = np.array([LABELS.index(c.label) for c in [*claims, *extra_claims]])
    train_x = np.vstack([features[~held], extra_rows])
    train_y = np.concatenate([labels[: len(claims)][~held], labels[len(claims) :]])
    started = time.perf_counter()
    model = fit(train_x, train_y, options.settings)
    seconds = time.perf_counter() - started
    probe = features[held] if held.any() else features[:64]
    exported = export(model, options.out, probe, options.kind, names)
    held_claims = [c for c, h in zip(claims, held, strict=True) if h]
    report: dict[str, Any] = {
        "command": options.command,
        "kind": options.kind,
        "claims": [Path(p).name for p in options.claims],
        "train_claims": [Path(p).name for p in options.train_claims],
        "entailment": str(options.entailment) if options.entailment else None,
        "claims_per_file": options.limit,
        "holdout": options.holdout,
        "training": {
            "seed": seed,
            "examples": int((~held).sum()),
            "retrieved_examples": len(extra_claims),
            "left_out_unscored": unscored,
            "settings": vars(options.settings),
            "seconds": round(seconds, 1),
            "features": list(names),
        },
        "export": exported,
        # Read against the gold table (tables) or the retrieved evidence (sentences).
        "holdout_accuracy": accuracy(model.predict_proba(features[held]), held_claims)
        if held.any()
        else {},
        "feature_importance": dict(
            sorted(
                zip(names, np.round(model.feature_importances_, 4).tolist(), strict=True),
                key=lambda kv: -kv[1],
            )
        ),
    }
    write_card(options.out, report)
    return report


_WHAT = {
    "table": (
        "claims whose evidence is a table",
        "the table (`feverous_es.verdict.table_facts`: which claim words and numbers the table "
        "holds and in which row, counts of rows holding a named value, whether the named rows "
        "hold a column's maximum or minimum, comparisons of two named rows, sums, means and "
        "differences, next to the claim's cue words)",
    ),
    "sentence": (
        "claims whose evidence is sentences",
        "the evidence sentences (`feverous_es.verdict.sentence_facts`: the claim's content "
        "words, word pairs, numbers, years and names that the evidence, or its best sentences, "
        "do not hold; negation)",
    ),
}


def write_card(out: Path, report: dict[str, Any]) -> None:
    kind = report["kind"]
    rows = "\n".join(
        f"| {source} | {r['claims']} | {r['accuracy']:.1%} | {r['majority_baseline']:.1%} |"
        for source, r in report["holdout_accuracy"].items()
    )
    training = report["training"]
    settings = training["settings"]
    parity = report["export"]["parity"]
    top = ", ".join(f"`{k}`" for k in list(report["feature_importance"])[:8])
    split_files = ", ".join(f"`{s}`" for s in report["claims"])
    train_files = ", ".join(f"`{s}`" for s in report["train_claims"]) or "none"
    claims_of, read_against = _WHAT[kind]
    if kind == "table":
        reading = (
            "Each claim is read against its gold table (`gold_tables`) as the index holds it, and "
            f"{training['retrieved_examples']} of the training claims a second time against the "
            "first table of the evidence the pipeline retrieved for them. At run time the verdict "
            "reads that retrieved table; `bench/verdict.py` measures it there."
        )
        measured = "gold table"
    else:
        reading = (
            "Each claim is read against the sentences of the evidence the pipeline retrieved for "
            "it (default plugins, cached in the work directory), as at run time."
        )
        measured = "retrieved evidence"
    about = f"""
The verdict of {claims_of}: a gradient-boosted classifier (scikit-learn
`GradientBoostingClassifier`, {settings["trees"]} trees of depth {settings["depth"]}, exported
to ONNX: `model.onnx`, {report["export"]["bytes"] / 1e6:.2f} MB) over
{len(training["features"])} features of the claim read against {read_against}. SUPPORTS /
REFUTES only; the `classifier` verdict plugin's `nei_below` turns low-confidence verdicts into
NOT ENOUGH INFO. Most used features: {top}."""
    data = f"""
Split claim files: {split_files} (a seeded {report["holdout"]:.0%} of their claims, by claim id,
held out of training and measured below); training-only files: {train_files}. {reading}
{training["examples"]} training claims, fitted in {training["seconds"]:.0f} s on a 2-core CPU."""
    metrics = f"""
| claims file | held-out claims | label accuracy | majority class |
|---|---|---|---|
{rows}

Parity against scikit-learn on {parity["rows"]} held-out rows: max |Δp|
{parity["max_abs_diff"]:.1e}, same label on {parity["argmax_agreement"]:.1%}."""
    model_card = card.ModelCard(
        title=f"feverous-es {kind} verdict model",
        about=about,
        sections=[
            ("Data", data),
            card.command_section(report["command"]),
            (f"Metrics (held-out claims, {measured}, this ONNX model)", metrics),
        ],
        licences=[card.FEVEROUS_DATA],
    )
    common.save_card(out, model_card, report)
