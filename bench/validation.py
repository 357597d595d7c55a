"""Verdict options chosen on claims no reader trained on: the GPU job's validation share of the
training claims (``is_valid``), which the job's teacher and student and a CPU distillation
(``train verdict --teacher``) all leave out.

Each claim's evidence is retrieved once; each variant of the verdict (its options) reads it, and
is scored by its label accuracy per file, their mean, and the verdict stage's milliseconds a
claim. The condition that chooses a verdict option with it: ``cascade``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.context import Context
from bench.data import MINI, REPO
from feverous_es.eval.samples import read_records
from feverous_es.training.datasets import is_holdout
from feverous_es.training.gpu.jobs import is_valid

FILES = ("fm2_dev", "feverous_s_dev", "tabfact_dev")


def validation_records(per_file: int) -> dict[str, list[dict[str, Any]]]:
    """The first ``per_file`` claims of each file that the shipped reader's training neither
    held out nor trained on (the GPU job's validation share), in file order."""
    training = json.loads((REPO / "feverous_es/models/verdict/training.json").read_text())
    seed, share = training["training"]["seed"], training["holdout"]

    def validation(name: str) -> Callable[[dict[str, Any]], bool]:
        return lambda r: (
            not is_holdout(seed, name, str(r["id"]), share) and is_valid(seed, name, str(r["id"]))
        )

    return {
        name: read_records(MINI / f"{name}.jsonl", validation(name))[:per_file] for name in FILES
    }


def read_variants(
    context: Context, variants: dict[str, dict[str, Any]], per_file: int
) -> dict[str, Any]:
    """Each variant's (name: the verdict's options) label accuracy per file, mean and verdict
    milliseconds a claim on the validation claims, and the claims a file."""
    from feverous_es.plugins.interfaces import Query
    from feverous_es.plugins.registry import load
    from feverous_es.verify.pipeline import Pipeline

    records = validation_records(per_file)
    figures: dict[str, Any] = {"claims": {name: len(r) for name, r in records.items()}}
    with Pipeline.open(context.place("index")) as pipeline:
        found = {
            name: [(Query(r.claim, np.zeros(0)), r.evidence)
                   for r in pipeline.retrieve_many([c["claim"] for c in chosen])]
            for name, chosen in records.items()
        }  # fmt: skip
        for variant, options in variants.items():
            verdict = load("verdict", "classifier", pipeline.context, options)
            row: dict[str, Any] = {"files": {}}
            seconds, claims = 0.0, 0
            for name, batch in found.items():
                started = time.perf_counter()
                labels = [v.label.value for v in verdict.predict(batch)]
                seconds += time.perf_counter() - started
                claims += len(batch)
                gold = [c["label"] for c in records[name]]
                right = sum(a == g for a, g in zip(labels, gold, strict=True))
                row["files"][name] = round(right / len(gold), 4)
            row["mean"] = round(float(np.mean(list(row["files"].values()))), 4)
            row["verdict_ms_per_claim"] = round(1000 * seconds / claims, 1)
            figures[variant] = row
            print(f"{variant:<16} mean {row['mean']:.3f}  {row['files']}  "
                  f"verdict {row['verdict_ms_per_claim']:.0f} ms a claim")  # fmt: skip
    return figures


def first_within(figures: dict[str, Any], ordered: Sequence[str], within: float) -> str:
    """The first of ``ordered`` (cheapest or strictest first) whose mean accuracy is within
    ``within`` of the best of them."""
    best = max(figures[name]["mean"] for name in ordered)
    return next(name for name in ordered if figures[name]["mean"] >= best - within)
