"""The cascade's threshold (``--reader auto``), chosen through the whole pipeline on claims no
reader trained on: the GPU job's validation share of the training claims (``is_valid``), which
the job's teacher and student and a CPU distillation (``train verdict --teacher``) all leave
out.

    run = "bench.cascade:cascade_threshold"   # on the mini index (--index); options:
    # thresholds, per_file, within

Each claim's evidence is retrieved once; the verdict reads it with the default reader, the
large one, and the cascade at each threshold (the large tier reads a pair when the default
reader's top probability is below it). Per reader: label accuracy per file and their mean,
and the verdict stage's seconds a claim. The threshold chosen is the cheapest one whose mean
accuracy is within ``within`` of the best cascade's.
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
        return lambda r: not is_holdout(seed, name, str(r["id"]), share) and is_valid(
            seed, name, str(r["id"])
        )

    return {
        name: read_records(MINI / f"{name}.jsonl", validation(name))[:per_file] for name in FILES
    }


def cascade_threshold(
    context: Context,
    *,
    thresholds: Sequence[float] = (0.5, 0.6, 0.7, 0.8, 0.9),
    per_file: int = 150,
    within: float = 0.005,
) -> dict[str, Any]:
    """Each reader's and each threshold's validation accuracy and verdict seconds a claim."""
    from feverous_es.plugins.interfaces import Query
    from feverous_es.plugins.registry import load
    from feverous_es.verify.pipeline import Pipeline

    records = validation_records(per_file)
    readers: dict[str, dict[str, Any]] = {"default": {"model": "default"},
                                          "large": {"model": "large"}}  # fmt: skip
    for t in thresholds:
        readers[f"auto {round(t * 100)}"] = {"model": "auto", "cascade_below": t}
    figures: dict[str, Any] = {"claims": {name: len(r) for name, r in records.items()}}
    with Pipeline.open(context.place("index")) as pipeline:
        found = {
            name: [(Query(r.claim, np.zeros(0)), r.evidence)
                   for r in pipeline.retrieve_many([c["claim"] for c in chosen])]
            for name, chosen in records.items()
        }  # fmt: skip
        for reader, options in readers.items():
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
            figures[reader] = row
            print(f"{reader:<10} mean {row['mean']:.3f}  {row['files']}  "
                  f"verdict {row['verdict_ms_per_claim']:.0f} ms a claim")  # fmt: skip
    cascades = [name for name in readers if name.startswith("auto")]
    best = max(figures[name]["mean"] for name in cascades)
    chosen = next(n for n in cascades if figures[n]["mean"] >= best - within)
    figures["chosen"] = {"reader": chosen, "threshold": readers[chosen]["cascade_below"]}
    print(f"chosen: {chosen}")
    return figures
