"""Checking claims against long sources: WiCE dev (claims of Wikipedia articles against the
whole web pages they cite), the default reader read in windows (what `entail` does) beside the
same reader truncating the source (what `entail` did before: the first ~150 words).

Balanced accuracy (the mean of the supported and unsupported pairs' recall), three ways for
the windowed reader: at the threshold stored with it (chosen on these same pairs by `train
grounding`: in-sample), two-fold (the threshold chosen on one half of the pairs and measured on
the other, both ways, averaged: the honest figure), and at 0.5. The truncating reader at 0.5
(the table of the issue measured it so) and at its own in-sample best. Time: seconds a claim
per 1,000 source words, and the latency of one call that checks five claims against a
1,000-word source (the service's target: under 1 s on 2 cores).

The same two readers, the same three ways, on pairs of our own with long sources, made from the
mini dump (the driver's --wiki; ``feverous_es.training.grounding.long_source_pairs``): each FM2
and FEVEROUS-S claim the default reader was not trained on (at most ``per_file`` a file) whose
gold evidence is sentences, its sentences placed together at a seeded place among other pages'
sentences to about ``words`` words (supported when the claim is SUPPORTS), and the same source
without them (not supported).

    run = "bench.grounding:grounding"   # options: limit (only the first N WiCE pairs: a quick
    # look), per_file, words
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from bench.context import Context
from bench.data import DATA, MINI, REPO
from bench.verdict import held_out_lines, training_report
from feverous_es.eval.claims import ClaimRecord, parse_claims
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.plugins.interfaces import Label
from feverous_es.training import grounding_settings as settings_search
from feverous_es.training.grounding import (
    GroundingPair,
    balanced_accuracy,
    best_threshold,
    long_source_pairs,
    read_grounding_pairs,
    support_scores,
    write_settings,
)
from feverous_es.training.grounding_settings import (
    WINDOW_SIZES,
    ScoredWindows,
    compare_settings,
    joint_threshold,
    predicted,
    score_windows,
    seconds_per_window,
    stored_settings,
)
from feverous_es.verdict.entailment import EntailmentModel, evidence_premise
from feverous_es.verdict.readers import packaged_model
from feverous_es.verdict.windows import Source

WICE_DEV = DATA / "grounding" / "wice_dev.jsonl"
LATENCY_RUNS = 5


def truncated_scores(model: EntailmentModel, pairs: list[GroundingPair]) -> np.ndarray:
    """P(SUPPORTS) of each claim read against its whole source as one premise (the reader
    truncates it to what fits)."""
    rows = model.probabilities(
        [p.claim for p in pairs], [evidence_premise([p.source]) for p in pairs]
    )
    return rows[:, model.labels.index(Label.SUPPORTS)]


def two_fold(scores: np.ndarray, supported: np.ndarray, per_claim: int = 1) -> float:
    """Balanced accuracy with the threshold chosen on the other half (claims in turn, each
    claim's ``per_claim`` consecutive pairs in one half)."""
    claims = np.arange(len(scores)) // per_claim
    halves = [claims % 2 == side for side in (0, 1)]
    accuracies = []
    for chosen_on, measured_on in (halves, halves[::-1]):
        threshold, _ = best_threshold(scores[chosen_on], supported[chosen_on])
        accuracies.append(
            balanced_accuracy(supported[measured_on], scores[measured_on] >= threshold)
        )
    return float(np.mean(accuracies))


def latency(model: EntailmentModel, pairs: list[GroundingPair]) -> dict[str, float]:
    """One call checking five claims against a 1,000-word source (the first source of at
    least 1,000 words, cut there; claims: its own and the next four pairs')."""
    source = next(p.source for p in pairs if len(p.source.split()) >= 1000)
    source = " ".join(source.split()[:1000])
    claims = [p.claim for p in pairs[:5]]
    model.entail_many([(claims[0], [source])])  # warm
    seconds = []
    for _ in range(LATENCY_RUNS):
        started = time.perf_counter()
        answers = model.entail_many([(claim, [source]) for claim in claims])
        seconds.append(time.perf_counter() - started)
    return {"median_s": round(float(np.median(seconds)), 3), "windows": answers[0].windows}


def own_pairs(wiki: Path, per_file: int, words: int) -> list[GroundingPair]:
    """Long-source pairs of the FM2 and FEVEROUS-S claims the default reader was not trained
    on (its training.json's split)."""
    training = training_report(REPO / "feverous_es" / "models" / "verdict")
    records = [
        (name, record)
        for name in ("fm2_dev", "feverous_s_dev")
        for record in parse_claims(held_out_lines([training], MINI / f"{name}.jsonl", per_file))
        if isinstance(record, ClaimRecord)
    ]
    with WikiDB(wiki) as db:
        return long_source_pairs(records, db, words=words)


def stored_answers(
    model: EntailmentModel, pairs: list[GroundingPair], scores: np.ndarray
) -> np.ndarray:
    """Each pair supported or not at the reader's stored thresholds (a source one window holds
    at its own, when the reader has one)."""
    single = np.array([len(Source.of([p.source]).windows(model.window_words)) == 1 for p in pairs])
    own = model.threshold if model.threshold_single is None else model.threshold_single
    return predicted(scores, single, (model.threshold, own))


def compared(model: EntailmentModel, pairs: list[GroundingPair], per_claim: int = 1) -> dict:
    """The windowed reader (at its stored threshold, two-fold, at 0.5) beside the truncating
    one (at 0.5, at its own in-sample best, two-fold) on ``pairs`` (``per_claim`` consecutive
    pairs a claim), and their seconds a claim per 1,000 source words."""
    supported = np.array([p.supported for p in pairs])
    words = sum(len(p.source.split()) for p in pairs)
    started = time.perf_counter()
    windowed = support_scores(model, pairs)
    windowed_seconds = time.perf_counter() - started
    started = time.perf_counter()
    truncated = truncated_scores(model, pairs)
    truncated_seconds = time.perf_counter() - started
    figures = {
        "pairs": len(pairs),
        "supported": int(supported.sum()),
        "source_words_median": int(np.median([len(p.source.split()) for p in pairs])),
        "windowed": {
            "threshold": model.threshold,
            "window_words": model.window_words,
            "threshold_single": model.threshold_single,
            "at_stored_threshold": balanced_accuracy(
                supported, stored_answers(model, pairs, windowed)
            ),
            "two_fold": two_fold(windowed, supported, per_claim),
            "at_half": balanced_accuracy(supported, windowed >= 0.5),
            "seconds_per_1000_words": windowed_seconds / words * 1000,
        },
        "truncated": {
            "at_half": balanced_accuracy(supported, truncated >= 0.5),
            "best_in_sample": best_threshold(truncated, supported)[1],
            "two_fold": two_fold(truncated, supported, per_claim),
            "seconds_per_1000_words": truncated_seconds / words * 1000,
        },
    }
    for reading in ("windowed", "truncated"):
        shown = {k: round(v, 4) for k, v in figures[reading].items() if isinstance(v, float)}
        print(f"  {reading:<10} {shown}")
    return figures


def grounding(
    context: Context, *, limit: int | None = None, per_file: int = 300, words: int = 600
) -> dict:
    """The windowed and the truncating reader on WiCE dev (its first ``limit`` pairs) and on
    long-source pairs of our own, and one call's latency."""
    model = EntailmentModel()
    wice = read_grounding_pairs(WICE_DEV)[:limit]
    print(f"WiCE dev, {len(wice)} pairs:")
    figures = compared(model, wice)
    own = own_pairs(context.place("wiki"), per_file, words)
    print(f"held-out FM2 and FEVEROUS-S claims in long sources of the dump, {len(own)} pairs:")
    figures["own_long_sources"] = compared(model, own, per_claim=2)  # with and without gold
    figures["five_claims_1000_words"] = latency(model, wice)
    print(f"five claims, 1,000-word source: {figures['five_claims_1000_words']}")
    short = read_grounding_pairs(DATA / "grounding" / DEV_SETS["factcheck_gpt"])
    figures["five_claims_one_window"] = short_latency(model, short)
    print(f"five claims, each against a one-window source: {figures['five_claims_one_window']}")
    return figures


def short_latency(model: EntailmentModel, pairs: list[GroundingPair]) -> dict[str, float]:
    """One call checking five claims, each against its own source of one window: the first
    five FactCheck-GPT pairs whose first reading the second reading reads again (the call's
    worst case; every one-window pair without a second reading)."""
    ones = [p for p in pairs if len(Source.of([p.source]).windows(model.window_words)) == 1]
    if model.second_reading is not None:
        low, high = model.second_reading.between
        first = EntailmentModel()
        first.second_reading = None
        supports = [a.probabilities[Label.SUPPORTS] for a in first.entail_many(
            [(p.claim, [p.source]) for p in ones[:200]])]  # fmt: skip
        ones = [p for p, s in zip(ones, supports, strict=False) if low <= s <= high]
    items = [(p.claim, [p.source]) for p in ones[:5]]
    model.entail_many(items[:1])  # warm, the second model too
    seconds = []
    for _ in range(LATENCY_RUNS):
        started = time.perf_counter()
        model.entail_many(items)
        seconds.append(time.perf_counter() - started)
    read_again = model.second_reading is not None
    return {"median_s": round(float(np.median(seconds)), 3), "read_again": read_again}


DEV_SETS = {
    "wice": "wice_dev.jsonl",
    "lfqa": "lfqa_dev.jsonl.gz",
    "factcheck_gpt": "factcheck_gpt_dev.jsonl.gz",
}


def dev_sets(per_set: int | None, seed: int = 13) -> dict[str, list[GroundingPair]]:
    """The three grounding dev sets (a seeded sample of ``per_set`` pairs each when given)."""
    from feverous_es.training.datasets import sample

    sets = {}
    for name, file in DEV_SETS.items():
        pairs = read_grounding_pairs(DATA / "grounding" / file)
        sets[name] = sample(pairs, per_set, seed, key=lambda p: ("grounding", p.claim))
    return sets


def grounding_settings(
    context: Context,
    *,
    readers: tuple[str, ...] = ("default", "large"),
    per_set: int | None = None,
    large_per_set: int | None = 300,
    per_file: int = 150,
    words: int = 600,
    sizes: tuple[int, ...] = WINDOW_SIZES,
) -> dict:
    """Every grounding setting (window size, windows read, threshold) of each reader, scored on
    WiCE, LFQA and FactCheck-GPT dev and our own long sources: each set's two-fold balanced
    accuracy and their mean (the chosen setting: the best mean), beside the reader's stored
    settings; and the seconds a claim per 1,000 source words of each setting. The large reader
    reads ``large_per_set`` pairs of each set (a seeded sample; whole claims of ``own``): it
    reads ~8x slower than the default on 2 cores, and every set whole would take it hours."""
    every = dev_sets(per_set)
    every["own"] = own_pairs(context.place("wiki"), per_file, words)
    figures: dict = {}
    for reader in readers:
        sets = every if reader != "large" else _sampled(every, large_per_set)
        figures.setdefault("pairs", {})[reader] = {n: len(p) for n, p in sets.items()}
        print(f"{reader} reads:", figures["pairs"][reader])
        model = EntailmentModel(reader)
        scored = {
            size: {name: score_windows(model, pairs, size) for name, pairs in sets.items()}
            for size in sizes
        }
        seconds = {size: sum(w.seconds or 0.0 for w in scored[size].values()) for size in sizes}
        per_window = {size: seconds_per_window(scored[size]) for size in sizes}
        rows = compare_settings(scored, per_claim={"own": 2})
        stored = {"window_words": model.window_words, "max_windows": model.max_windows}
        for row in rows:
            row["stored"] = {k: row[k] for k in stored} == stored
        figures[reader] = {"settings": rows, "chosen": rows[0], "stored_threshold": model.threshold,
                           "read_seconds_by_size": seconds,
                           "seconds_per_window": per_window}  # fmt: skip
        _print_settings(reader, rows)
    return figures


def _sampled(
    sets: dict[str, list[GroundingPair]], per_set: int | None, seed: int = 13
) -> dict[str, list[GroundingPair]]:
    """A seeded sample of ``per_set`` pairs of each set; ``own``'s pairs two by two (a claim
    with its gold and without), so its two-fold split keeps a claim's pairs together."""
    from feverous_es.training.datasets import sample

    if per_set is None:
        return sets
    chosen = {n: sample(p, per_set, seed, key=lambda p: ("grounding", p.claim))
              for n, p in sets.items() if n != "own"}  # fmt: skip
    claims = [sets["own"][i : i + 2] for i in range(0, len(sets["own"]), 2)]
    kept = sample(claims, per_set // 2, seed, key=lambda c: ("grounding", c[0].claim))
    chosen["own"] = [pair for claim in kept for pair in claim]
    return chosen


def _print_settings(reader: str, rows: list[dict]) -> None:
    names = list(rows[0]["two_fold"])
    print(f"reader {reader}: two-fold balanced accuracy (threshold chosen jointly on the other "
          "half of every set)")  # fmt: skip
    head = f"  {'words':>5} {'windows':>7} {'threshold':>9} {'one window':>10} "
    print(head + " ".join(f"{n:>13}" for n in names) + f" {'mean':>6} {'5 claims, 1k words':>18}")
    for i, row in enumerate(rows):
        mark = "  <- chosen" if i == 0 else ("  (stored)" if row["stored"] else "")
        kept = "all" if row["max_windows"] is None else row["max_windows"]
        cells = " ".join(f"{row['two_fold'][n]:>13.1%}" for n in names)
        single = "same" if row["threshold_single"] is None else f"{row['threshold_single']:.4f}"
        setting = f"  {row['window_words']:>5} {kept!s:>7} {row['threshold']:>9.4f} {single:>10}"
        print(f"{setting} {cells} {row['mean']:>6.1%} {row['budget_seconds']:>16.2f} s{mark}")


def grounding_second_reading(
    context: Context,
    *,
    model: str = "verdict-large",
    per_file: int = 150,
    words: int = 600,
    write: str = "",
) -> dict:
    """The default reader's windows (its stored size and count) on WiCE, LFQA and
    FactCheck-GPT dev and our own long sources, and ``model``'s reading of every source one
    window holds: each second reading (its weight, the range of the first P(SUPPORTS) it reads
    again) scored two-fold, beside none; with ``write`` (a directory), the best is written there
    as the default reader's grounding.json, its thresholds chosen on every pair, for `train
    install DIR --as grounding` (the bench never writes into the package)."""
    reader = EntailmentModel()
    sets = dev_sets(None)
    sets["own"] = own_pairs(context.place("wiki"), per_file, words)
    size = reader.window_words
    scored = {name: score_windows(reader, pairs, size) for name, pairs in sets.items()}
    second_model = EntailmentModel(packaged_model(model))
    supports = second_model.labels.index(Label.SUPPORTS)
    second: dict[str, np.ndarray] = {}
    for name, pairs in sets.items():
        ones = np.flatnonzero(scored[name].single)
        values = np.full(len(pairs), np.nan)
        if len(ones):
            premises = [
                evidence_premise(Source.of([pairs[i].source]).windows(size)[0].texts())
                for i in ones
            ]
            rows = second_model.probabilities([pairs[i].claim for i in ones], premises)
            values[ones] = rows[:, supports]
        second[name] = values
        print(f"{name}: {len(pairs)} pairs, {len(ones)} read again", flush=True)
    rows = compare_second_readings(scored, second, reader.max_windows, per_claim={"own": 2})
    chosen = rows[0]
    for row in rows[:8] + [r for r in rows if r["weight"] == 0]:
        print(f"  weight {row['weight']:.1f} between {row['between']} "
              + " ".join(f"{n} {v:.3f}" for n, v in row["two_fold"].items())
              + f" mean {row['mean']:.4f}")  # fmt: skip
    figures = {"model": model, "pairs": {n: len(p) for n, p in sets.items()},
               "window_words": reader.window_words, "max_windows": reader.max_windows,
               "chosen": chosen, "none": next(r for r in rows if r["weight"] == 0),
               "settings": rows}  # fmt: skip
    if write:
        settings = stored_settings(
            {**chosen, "window_words": reader.window_words, "max_windows": reader.max_windows},
            figures["pairs"],
        )
        settings["second_reading"] = {
            "model": model,
            "weight": chosen["weight"],
            "between": chosen["between"],
        }
        settings["chosen_on"]["record"] = "bench/results/grounding-second-reading.json"
        written = write_settings(Path(write), settings, "default", "python -m bench run "
                                 f"grounding-second-reading --option write={write}")  # fmt: skip
        figures["written"] = str(written)
    return figures


SECOND_WEIGHTS = (0.4, 0.5, 0.6, 0.7, 0.8, 1.0)
SECOND_BETWEEN = ((0.0, 1.0), (0.05, 0.98), (0.1, 0.95), (0.2, 0.9), (0.3, 0.85))


def compare_second_readings(
    by_set: Mapping[str, ScoredWindows],
    second: Mapping[str, np.ndarray],
    keep: int | None,
    per_claim: Mapping[str, int] | None = None,
) -> list[dict[str, Any]]:
    """Each second reading's figures, and none's (``weight`` 0): ``second`` holds each set's
    P(SUPPORTS) under the second model of every source one window holds (NaN elsewhere); the
    first reading keeps the ``keep`` closest windows of ``by_set``. Thresholds one for sources
    of several windows and one for a source one window holds, two-fold as
    :func:`~feverous_es.training.grounding_settings.two_fold`;
    ``read_again``: the share of each set's claims the second model reads. Best mean first
    (to the third decimal; then the fewest reads)."""
    rows = []
    for weight, between in [(0.0, (0.0, 1.0)), *itertools.product(SECOND_WEIGHTS, SECOND_BETWEEN)]:
        sets, shares = {}, {}
        for name, scored in by_set.items():
            first = scored.best(keep)
            again = scored.single & (first >= between[0]) & (first <= between[1]) & (weight > 0)
            mixed = (1 - weight) * first + weight * np.nan_to_num(second[name])
            sets[name] = (np.where(again, mixed, first), scored.supported, scored.single)
            shares[name] = round(float(again.mean()), 3)
        folds = settings_search.two_fold(sets, per_claim, split=True)
        thresholds, in_sample = joint_threshold(list(sets.values()), split=True)
        rows.append({
            "weight": weight, "between": list(between), "threshold": thresholds[0],
            "threshold_single": thresholds[1], "two_fold": folds,
            "mean": float(np.mean(list(folds.values()))), "in_sample_mean": in_sample,
            "read_again": shares,
        })  # fmt: skip
    return sorted(rows, key=lambda row: (-round(float(np.nan_to_num(row["mean"], nan=-1.0)), 3),
                                         sum(row["read_again"].values())))  # fmt: skip
