"""Verdict accuracy through the whole pipeline on the claims the verdict models were not trained on.

    python bench/verdict.py INDEX [--table-model DIR] [--sentence-model DIR] [--baseline DIR …]
                                  [--table-baseline DIR …] [--per-file N] [--files STEM …]
                                  [--nei 0.6 0.7 0.8] [--json OUT]

The held-out claims are the ones `feverous-es train table-verdict` and `train sentence-verdict`
kept out of the models' training: the claim files, per-file sample and seeded split their
`training.json` name. Each claim goes once through the default pipeline (retrieved evidence,
next hops) with the verdict under test (the feature models, as `verify` runs them); every
`--baseline` text model (alone, the feature models off) and every `--table-baseline` table model
(with the sentence model under test) then reads the same evidence, so old and new models are
compared side by side on the same claims and evidence. Predictions are scored with the official
metric (`feverous-es score`): label accuracy per claim file next to its majority class, the
FEVEROUS score where the file has gold evidence, gold-table Hits@k where it names gold tables.
For the model under test also: how many claims each route (table / sentence) answered and how
well, calibration (expected calibration error and a reliability table) and the effect of
`nei_below` thresholds (share turned into NOT ENOUGH INFO, accuracy on the rest).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
from results import add_record_option, record_if_asked  # bench/results.py

REPO = Path(__file__).resolve().parents[1]
MINI = REPO.parent / "shared" / "data" / "minifeverous"
TARGETS = {"feverous_s_dev": 0.80, "tabfact_dev": 0.60}  # verdict issue, label accuracy
BINS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # reliability bins of a 2-way model's confidence


def training_report(model: Path) -> dict:
    path = model / "training.json"
    if not path.is_file():
        sys.exit(
            f"error: {model} has no training.json: only models of `feverous-es train` name "
            "the claims they were kept from"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def held_out_lines(training: dict, claim_file: Path, per_file: int | None) -> list[str]:
    """The lines of ``claim_file`` whose claims the model's training kept out."""
    from feverous_es.training.datasets import is_holdout
    from feverous_es.training.verdict import read_labelled_claims

    seed = training["training"]["seed"]
    sampled = read_labelled_claims([claim_file], limit=training["claims_per_file"], seed=seed)
    fraction = training["holdout"]
    held = {cid for source, cid, _, _ in sampled if is_holdout(seed, source, cid, fraction)}
    lines = []
    for line in claim_file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else {}
        if record.get("claim") and str(record.get("id")) in held:
            lines.append(line)
    return lines[:per_file] if per_file else lines


def calibration(confidence: np.ndarray, right: np.ndarray) -> dict:
    """Expected calibration error over 10 equal-width bins, and a reliability table."""
    edges = np.linspace(0.0, 1.0, 11)
    ece = 0.0
    for low, high in itertools.pairwise(edges):
        inside = (confidence > low) & (confidence <= high)
        if inside.any():
            ece += inside.mean() * abs(confidence[inside].mean() - right[inside].mean())
    table = []
    for low, high in itertools.pairwise(BINS):
        inside = (confidence >= low) & (confidence < high if high < 1.0 else confidence <= high)
        if inside.any():
            table.append(
                {
                    "confidence": f"{low:.1f}-{high:.1f}",
                    "claims": int(inside.sum()),
                    "mean_confidence": round(float(confidence[inside].mean()), 3),
                    "accuracy": round(float(right[inside].mean()), 3),
                }
            )
    return {"ece": round(float(ece), 4), "reliability": table}


def nei_effect(confidence: np.ndarray, right: np.ndarray, thresholds: list[float]) -> list[dict]:
    """Per threshold: the share of claims ``nei_below`` turns into NEI, accuracy on the rest."""
    rows = []
    for t in thresholds:
        kept = confidence >= t
        rows.append(
            {
                "nei_below": t,
                "nei_rate": round(float(1 - kept.mean()), 4),
                "accuracy_on_rest": round(float(right[kept].mean()), 4) if kept.any() else None,
            }
        )
    return rows


def run_file(pipeline, verdicts: dict, lines: list[str], batch_size: int) -> dict:
    """Every claim through ``pipeline`` once; each verdict model in ``verdicts`` reads the same
    evidence. Returns per model its submission lines and label probabilities, and the routes."""
    from feverous_es.eval.claims import dumps_submission_line, submission_line
    from feverous_es.plugins.interfaces import Label, Query
    from feverous_es.verify.feature_verdict import evidence_table

    records = [json.loads(line) for line in lines]
    submissions: dict[str, list[bytes]] = {name: [] for name in ["model", *verdicts]}
    supports: dict[str, list[float]] = {name: [] for name in submissions}
    routes: list[str] = []
    store = pipeline.context.store
    for start in range(0, len(records), batch_size):
        chunk = records[start : start + batch_size]
        results = pipeline.verify_many([r["claim"] for r in chunk])
        # The verdict models read only the claim text; the vector is not needed again.
        batch = [(Query(r.claim, np.zeros(0)), r.evidence) for r in results]
        answers = {"model": [r.verdict for r in results]}
        answers.update({name: model.predict(batch) for name, model in verdicts.items()})
        for name, answer in answers.items():
            for record, result, verdict in zip(chunk, results, answer, strict=True):
                ids = [c.element.id for c in result.evidence]
                line = submission_line(record["id"], record["claim"], verdict.label.value, ids)
                submissions[name].append(dumps_submission_line(line))
                supports[name].append(verdict.probabilities.get(Label.SUPPORTS, 0.0))
        routes += [
            "table" if evidence_table(r.claim, r.evidence, store) is not None else "sentence"
            for r in results
        ]
    return {"submissions": submissions, "supports": supports, "routes": routes}


def score(submissions: list[bytes], gold: Path) -> dict:
    from feverous_es.eval.scoring import score_files

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jsonl"
        out.write_bytes(b"".join(submissions))
        report = score_files(out, gold)
    result = {
        "label_accuracy": report.overall.label_accuracy,
        "feverous_score": report.overall.feverous_score,
        "confusion": report.confusion,
    }
    if report.tables is not None:
        result["table_hits"] = report.tables.hits
    return result


def measure(args: argparse.Namespace, files: dict[str, list[str]]) -> dict:
    from feverous_es.plugins.config import load_config
    from feverous_es.plugins.registry import load
    from feverous_es.verify.pipeline import Pipeline

    config = load_config()
    options = {**config.stage_options("verdict"), "model": str(args.model)}
    for kind in ("table", "sentence"):
        if getattr(args, f"{kind}_model") is not None:
            options[f"{kind}_model"] = str(getattr(args, f"{kind}_model"))
    config = replace(config, options={**config.options, "verdict": options})
    pipeline = Pipeline.open(args.index, config=config)
    verdicts = {
        f"{path} (text only)": load(
            "verdict",
            "classifier",
            pipeline.context,
            {"model": str(path), "table_model": "", "sentence_model": ""},
        )
        for path in args.baseline
    }
    for path in args.table_baseline:
        verdicts[f"table model {path} (other models as above)"] = load(
            "verdict", "classifier", pipeline.context,
            {**options, "table_model": str(path)},
        )  # fmt: skip
    figures: dict[str, dict] = {}
    try:
        for source, lines in files.items():
            started = time.perf_counter()
            run = run_file(pipeline, verdicts, lines, args.batch_size)
            seconds = time.perf_counter() - started
            records = [json.loads(line) for line in lines]
            gold_labels = np.array([r["label"] == "SUPPORTS" for r in records])
            evidence = any(r.get("evidence") for r in records)
            majority = max(Counter(r["label"] for r in records).values()) / len(records)
            with tempfile.TemporaryDirectory() as tmp:
                gold = Path(tmp) / "gold.jsonl"
                gold.write_text("\n".join(lines) + "\n", encoding="utf-8")
                models = {
                    name: score(run["submissions"][name], gold) for name in run["submissions"]
                }
            for result in models.values():
                # TabFact has no gold evidence: its FEVEROUS score would read 0 whatever was found.
                result["feverous_score"] = result["feverous_score"] if evidence else None
            p = np.array(run["supports"]["model"])
            confidence = np.maximum(p, 1 - p)
            right = (p >= 0.5) == gold_labels
            routes = np.array(run["routes"])
            figures[source] = {
                "claims": len(lines),
                "majority_class": majority,
                "seconds": round(seconds, 1),
                "models": models,
                "routes": {
                    route: {
                        "claims": int((routes == route).sum()),
                        "accuracy": round(float(right[routes == route].mean()), 4),
                    }
                    for route in ("table", "sentence")
                    if (routes == route).any()
                },
                "calibration": calibration(confidence, right),
                "nei_below": nei_effect(confidence, right, args.nei),
            }
    finally:
        pipeline.close()
    return figures


def report(figures: dict, args: argparse.Namespace, commands: list[str]) -> None:
    for source, f in figures.items():
        target = TARGETS.get(source)
        print(
            f"\n{source}: {f['claims']} held-out claims, majority class "
            f"{f['majority_class']:.1%}"
            + (f", target {target:.0%}" if target else "")
            + f", {f['seconds']:.0f} s"
        )
        for name, m in f["models"].items():
            label = (
                f"feature models: table {args.table_model or 'shipped'}, sentence "
                f"{args.sentence_model or 'shipped'}"
                if name == "model"
                else name
            )
            line = f"  {m['label_accuracy']:6.1%} label accuracy  {label}"
            if m["feverous_score"] is not None:
                line += f"  (FEVEROUS score {m['feverous_score']:.1%})"
            print(line)
        hits = f["models"]["model"].get("table_hits")
        if hits:
            print(
                f"  gold table Hits@{'/'.join(map(str, hits))}: "
                + " / ".join(f"{100 * v:.1f}" for v in hits.values())
            )
        print(
            "  routes: "
            + ", ".join(
                f"{route} {r['claims']} claims at {r['accuracy']:.1%}"
                for route, r in f["routes"].items()
            )
        )
        cal = f["calibration"]
        print(
            f"  calibration: ECE {cal['ece']:.3f}; reliability "
            + ", ".join(
                f"{r['confidence']}: {r['claims']} at {r['accuracy']:.0%} "
                f"(conf {r['mean_confidence']:.2f})"
                for r in cal["reliability"]
            )
        )
        print(
            "  nei_below: "
            + ", ".join(
                f"{r['nei_below']}: {r['nei_rate']:.0%} NEI, "
                f"{r['accuracy_on_rest']:.1%} on the rest"
                for r in f["nei_below"]
                if r["accuracy_on_rest"] is not None
            )
        )
    print("\nmodels trained by:")
    for command in commands:
        print(f"  {command}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path, help="embedded index of the mini-FEVEROUS wiki.db")
    parser.add_argument("--model", type=Path, help="text verdict model (default: shipped)")
    parser.add_argument("--table-model", type=Path, help="table verdict model (default: shipped)")
    parser.add_argument(
        "--sentence-model", type=Path, help="sentence verdict model (default: shipped)"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        help="another text verdict model to run alone on the same evidence",
    )
    parser.add_argument(
        "--table-baseline",
        type=Path,
        action="append",
        default=[],
        help="another table verdict model to run with --model on the same evidence",
    )
    parser.add_argument("--per-file", type=int, help="at most this many held-out claims a file")
    parser.add_argument("--files", nargs="*", help="only these claim files (stems)")
    parser.add_argument("--nei", type=float, nargs="*", default=[0.6, 0.7, 0.8])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    add_record_option(parser)
    args = parser.parse_args()

    from feverous_es.verify.feature_verdict import DEFAULT_MODELS
    from feverous_es.verify.verdict import DEFAULT_MODEL

    args.model = args.model or DEFAULT_MODEL
    trainings = [
        training_report(args.table_model or DEFAULT_MODELS["table"]),
        training_report(args.sentence_model or DEFAULT_MODELS["sentence"]),
    ]
    files: dict[str, list[str]] = {}
    for training in trainings:
        for name in training["claims"]:
            source = Path(name).stem
            if source not in files and (not args.files or source in args.files):
                files[source] = held_out_lines(training, MINI / name, args.per_file)
    figures = measure(args, files)
    report(figures, args, [t["command"] for t in trainings])
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    record_if_asked(args, figures)


if __name__ == "__main__":
    main()
