"""Verdict accuracy through the whole pipeline on the claims a verdict model was not trained on.

    python bench/verdict.py INDEX [--model DIR] [--per-file N] [--json OUT]

The held-out claims are the ones `feverous-es train verdict` kept out of the model's training:
the same claim files, per-file sample and seeded split, read from the model's `training.json`.
Each goes through the default pipeline (retrieved evidence, next hops, this verdict model) as
`feverous-es predict` runs it, and the predictions are scored with the official metric
(`feverous-es score`): label accuracy per claim file next to its majority class, the FEVEROUS
score where the file has gold evidence, gold-table Hits@k where it names gold tables. The command
that trained the model is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MINI = REPO.parent / "shared" / "data" / "minifeverous"
TARGETS = {"feverous_s_dev": 0.70, "tabfact_dev": 0.62}  # models issue, label accuracy


def held_out_lines(training: dict, claim_file: Path, per_file: int | None) -> list[str]:
    """The lines of ``claim_file`` whose claims the model's training kept out."""
    from feverous_es.training.common import is_holdout
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


def measure(index: Path, model: Path, lines: list[str], batch_size: int) -> dict:
    from feverous_es.plugins.config import load_config
    from feverous_es.verify.pipeline import open_pipeline
    from feverous_es.verify.predict import predict_file
    from feverous_es.verify.scoring import score_files

    config = load_config()
    verdict = {**config.stage_options("verdict"), "model": str(model)}
    config = replace(config, options={**config.options, "verdict": verdict})
    pipeline = open_pipeline("embedded", index, config)
    with tempfile.TemporaryDirectory() as tmp:
        gold, out = Path(tmp) / "gold.jsonl", Path(tmp) / "out.jsonl"
        gold.write_text("\n".join(lines) + "\n", encoding="utf-8")
        started = time.perf_counter()
        predict_file(pipeline, gold, out, batch_size=batch_size)
        seconds = time.perf_counter() - started
        report = score_files(out, gold)
    pipeline.context.store.close()
    records = [json.loads(line) for line in lines]
    labels = Counter(record["label"] for record in records)
    evidence = any(record.get("evidence") for record in records)
    result = {
        "claims": len(lines),
        "label_accuracy": report.overall.label_accuracy,
        "majority_class": max(labels.values()) / len(lines),
        # TabFact has no gold evidence: its FEVEROUS score would read 0 whatever was retrieved.
        "feverous_score": report.overall.feverous_score if evidence else None,
        "confusion": report.confusion,
        "seconds": round(seconds, 1),
    }
    if report.tables is not None:
        result["table_hits"] = report.tables.hits
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("index", type=Path, help="embedded index of the mini-FEVEROUS wiki.db")
    parser.add_argument("--model", type=Path, help="verdict model directory (default: shipped)")
    parser.add_argument("--per-file", type=int, help="at most this many held-out claims a file")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    from feverous_es.verify.verdict import DEFAULT_MODEL

    model = args.model or DEFAULT_MODEL
    if not (model / "training.json").is_file():
        parser.error(f"{model} has no training.json: only models of `feverous-es train verdict` "
                     "name the claims they were kept from")  # fmt: skip
    training = json.loads((model / "training.json").read_text(encoding="utf-8"))
    figures: dict[str, dict] = {}
    for name in training["claims"]:
        lines = held_out_lines(training, MINI / name, args.per_file)
        source = Path(name).stem
        figures[source] = result = measure(args.index, model, lines, args.batch_size)
        target = TARGETS.get(source)
        print(
            f"{source}: {result['claims']} held-out claims, label accuracy "
            f"{result['label_accuracy']:.1%} (majority class {result['majority_class']:.1%}"
            + (f", target {target:.0%})" if target else ")")
            + (
                f", FEVEROUS score {result['feverous_score']:.1%}"
                if result["feverous_score"] is not None
                else ""
            )
            + f", {result['seconds']:.0f} s"
        )
        if "table_hits" in result:
            hits = " / ".join(f"{100 * v:.1f}" for v in result["table_hits"].values())
            print(f"  gold table Hits@{'/'.join(map(str, result['table_hits']))}: {hits}")
    print(f"model {model}, trained by:\n{training['command']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
