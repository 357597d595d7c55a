"""The two readers and their combinations, on the pairs the verdict reads: the default reader
alone, the large one alone, the two averaged, and a cascade (the large reader reads only the
pairs whose default verdict is unsure: its top probability below a threshold).

Pairs: a `train verdict` run's (`WORK/pairs.jsonl.gz`) for the claim files: FM2 and FEVEROUS-S
claims against the evidence the pipeline retrieved for them (and with the gold removed: NOT
ENOUGH INFO), TabFact claims against their gold table. The cascade's threshold is chosen on the
validation claims (the GPU job's `valid` share of the training claims: neither reader trained
on them) as the cheapest one within `--within` of the best validation accuracy, and reported
on the held-out claims. Time: each reader's ms a pair on this CPU, a combination's from the
share of pairs each reader reads.

    run = "bench.readers:combinations"   # on a run's pairs (--pairs); options: default, large,
    # seed, within, per_source
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from bench.context import Context
from feverous_es.training.datasets import hash_unit
from feverous_es.training.engine import accuracy_by_source
from feverous_es.training.verdict.entailment_data import Pair, capped, read_pairs
from feverous_es.training.verdict.pairs import VALID_SHARE
from feverous_es.verdict.entailment import EntailmentModel
from feverous_es.verdict.readers import packaged_model

CLAIM_FILES = ("fm2_dev", "feverous_s_dev", "tabfact_dev")
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.99, 1.01)


def claim_pairs(path: Path, seed: int, per_source: int) -> dict[str, list[Pair]]:
    """The claim files' pairs: ``valid`` (validation claims) and ``held`` (held out), at most
    ``per_source`` of each source (and its gold-removed variant), a seeded sample."""
    pairs = [p for p in read_pairs(path) if p.source in CLAIM_FILES and p.train]
    valid = [p for p in pairs if not p.held_out
             and hash_unit(seed, p.source, p.id, "valid") < VALID_SHARE]  # fmt: skip
    held = [p for p in pairs if p.held_out]
    return {name: capped(chosen, per_source, seed) for name, chosen in
            (("valid", valid), ("held", held))}  # fmt: skip


def read(reader: str | Path, pairs: list[Pair]) -> tuple[list[str], np.ndarray, float]:
    """The reader's labels (its logit order), probabilities and ms a pair."""
    model = EntailmentModel(reader, device="cpu")
    started = time.perf_counter()
    rows = model.probabilities([p.claim for p in pairs], [p.premise for p in pairs])
    seconds = time.perf_counter() - started
    return [label.value for label in model.labels], rows, 1000 * seconds / len(pairs)


def accuracy(labels: list[str], rows: np.ndarray, pairs: list[Pair]) -> dict[str, float]:
    answers = [labels[i] for i in rows.argmax(axis=1)]
    gold, sources = [p.label for p in pairs], [p.measured_as for p in pairs]
    by_source = accuracy_by_source(answers, gold, sources)
    return {name: figures["accuracy"] for name, figures in by_source.items()}


def cascade(first: np.ndarray, second: np.ndarray, threshold: float) -> tuple[np.ndarray, float]:
    unsure = first.max(axis=1) < threshold
    return np.where(unsure[:, None], second, first), float(unsure.mean())


def combinations(
    context: Context,
    *,
    default: str = "verdict",
    large: str = "verdict-large",
    seed: int = 13,
    within: float = 0.005,
    per_source: int = 600,
) -> dict[str, Any]:
    """Each reader (a packaged role or a directory) and each combination on the run's
    validation and held-out pairs (``per_source`` of each source and split, drawn with the run's
    ``seed``); the cascade threshold chosen ``within`` the best validation accuracy."""
    sets = claim_pairs(context.place("pairs"), seed, per_source)
    figures: dict[str, Any] = {
        name: dict(Counter(p.measured_as for p in pairs)) for name, pairs in sets.items()
    }
    read_rows: dict[str, dict[str, np.ndarray]] = {}
    labels: list[str] = []
    ms: dict[str, float] = {}
    for name, given in (("default", default), ("large", large)):
        reader = given if Path(given).is_dir() else packaged_model(given)
        read_rows[name] = {}
        for split, pairs in sets.items():
            labels, read_rows[name][split], ms[f"{name}_{split}"] = read(reader, pairs)
    ms_default, ms_large = ms["default_held"], ms["large_held"]
    combos: dict[str, dict[str, Any]] = {}
    for split, pairs in sets.items():
        first, second = read_rows["default"][split], read_rows["large"][split]
        combos.setdefault("default", {})[split] = accuracy(labels, first, pairs)
        combos.setdefault("large", {})[split] = accuracy(labels, second, pairs)
        combos.setdefault("averaged", {})[split] = accuracy(labels, (first + second) / 2, pairs)
        for t in THRESHOLDS:
            rows, share = cascade(first, second, t)
            # named by the threshold in hundredths: a record's keys hold no dot
            entry = combos.setdefault(f"cascade {round(t * 100)}", {"threshold": t})
            entry[split] = accuracy(labels, rows, pairs)
            entry[f"{split}_large_share"] = round(share, 4)
    combos["default"]["ms_per_pair"] = round(ms_default, 1)
    combos["large"]["ms_per_pair"] = round(ms_large, 1)
    combos["averaged"]["ms_per_pair"] = round(ms_default + ms_large, 1)
    for name, entry in combos.items():
        if name.startswith("cascade"):
            entry["ms_per_pair"] = round(ms_default + entry["held_large_share"] * ms_large, 1)
    best = max(c["valid"]["all"] for c in combos.values())
    cascades = [c for n, c in combos.items() if n.startswith("cascade")]
    chosen = min((c for c in cascades if c["valid"]["all"] >= best - within),
                 key=lambda c: c["valid_large_share"], default=None)  # fmt: skip
    figures.update(combos=combos, chosen_threshold=chosen["threshold"] if chosen else None)
    for name, c in combos.items():
        print(f"{name:<14} valid {c['valid']['all']:.3f}  held {c['held']['all']:.3f}  "
              f"{c['ms_per_pair']:6.1f} ms/pair  "
              + "  ".join(f"{k} {v:.3f}" for k, v in c["held"].items() if k != "all"))  # fmt: skip
    print(f"cascade threshold chosen on valid: {figures['chosen_threshold']}")
    return figures
