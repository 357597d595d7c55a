"""Verdict accuracy through the whole pipeline on the claims the verdict models were not trained on.

    run = "bench.verdict:verdict_accuracy"   # on the mini index (--index); options: models, reader,
    # baseline_models, baseline_readers, baseline_rules, baseline_answers,
    # per_file, held_out_by, config, files, nei

The held-out claims are the ones every model compared kept out of its training (the claim
files, per-file sample and seeded split their `training.json` name: `train verdict`,
`train table-verdict`, and each `held_out_by` model, e.g. the
sentence ranker). Each claim goes once through the pipeline (the defaults, or `config`;
retrieved evidence, next hops) with the verdict under test (`models`: a directory
holding `verdict/` and `table-verdict/`; default the shipped ones; without a table feature
model, table claims are read by the entailment model alone). On the same
evidence, side by side: the entailment model alone (feature models off), and with
`baseline_models` the verdict of another models directory (read with today's rules), with
`baseline_readers = ["large"]` the same models with the large reader. An earlier version is
compared as it ran, from its own commit: its stored answers (`baseline_answers`), never today's
code with flags that emulate its rules. `reader = "large"` puts the large reader under test
(its held-out claims are the default reader's: one GPU job trained both).
`baseline_rules` names verdict options of the reader under test, one column each (`{ "whole
evidence only" = { page_premises = 0 } }`): a rule judged by the claims it changes.
`baseline_answers` names stored per-claim answers of a version run as it was, from its own
commit (bench/answers/NAME/SOURCE.jsonl.gz: its `feverous-es predict` lines for these
claims; ANSWERS.md there says how each was made). Every column is also compared with the
verdict under test claim by claim: the paired difference in label accuracy with its 95 %
bootstrap interval and the claims only one of them gets right (bench/paired.py); a change is
adopted when its interval clears zero. The record keeps each column's label per claim.
Predictions are scored with the official metric (`feverous-es score`): label accuracy per claim
file next to its majority class, on FEVEROUS-S's balanced subset too (within each gold-evidence
count as many SUPPORTS as REFUTES claims, the first in file order: there, counting evidence
scores 50 %), the FEVEROUS score and complete-evidence recall where the file has gold
evidence, gold-table Hits@k where it names gold tables; per route (table / sentence) and
calibration for the model under test.

NOT ENOUGH INFO, measured both ways: the verdict reads the retrieved evidence as is, and again
with every gold element (TabFact: every element of the gold table) removed, where NOT ENOUGH
INFO is the right answer. For each `nei_above` threshold on the entailment model's NEI
probability, and for Malon (2021) §1's rule (NEI while the next-hop stage, given the final
evidence, still proposes more: "hop seeks"): the NEI rate on each, and the accuracy on the
claims not turned into NEI.
"""

from __future__ import annotations

import gzip
import itertools
import json
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.context import Context
from bench.data import MINI, REPO
from bench.errors import BenchError
from bench.paired import paired_difference
from bench.verdict_variants import verdict_plugin
from feverous_es.eval.samples import gold_element_ids, gold_ids
from feverous_es.verdict.nei_call import NEI_MODEL
from feverous_es.verdict.options import ClassifierOptions
from feverous_es.verdict.readers import CASCADES, reader_dirs

ANSWERS = REPO / "bench" / "answers"
# One letter a claim in the per-claim answers a caller reads (cross_fit).
LETTERS = {"SUPPORTS": "S", "REFUTES": "R", "NOT ENOUGH INFO": "N"}
TARGETS = {"fm2_dev": 0.68, "feverous_s_dev": 0.75, "tabfact_dev": 0.66}  # entailment issue
BINS = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # reliability bins of a 2-way model's confidence


def training_report(model: Path) -> dict:
    path = model / "training.json"
    if not path.is_file():
        raise BenchError(
            f"{model} has no training.json: only models of `feverous-es train` name "
            "the claims they were kept from"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def shipped_trainings(*more: Path) -> list[dict]:
    """The training reports of the package's default verdict (every model its reader reads,
    the feature models and the NEI model beside it) and of the models ``more``: the claims a
    condition on held-out claims must leave out."""
    from feverous_es.plugins.config import load_config

    models = REPO / "feverous_es" / "models"
    reader = load_config(None).stage_options("verdict").get("model") or "auto"
    return [training_report(d) for d in [*read_dirs(reader), *model_dirs(models)[1:], *more]]


def held_out_ids(training: dict, claim_file: Path) -> set[str]:
    """The ids of ``claim_file``'s claims that the model's training kept out (all of them when
    the training did not read the file)."""
    from feverous_es.training.datasets import is_holdout
    from feverous_es.training.verdict.evidence import read_labelled_claims

    seed = training["training"]["seed"]
    if claim_file.name not in [*training["claims"], *training.get("train_claims", [])]:
        return {c.id for c in read_labelled_claims([claim_file])}  # all: it never read the file
    sampled = read_labelled_claims([claim_file], limit=training["claims_per_file"], seed=seed)
    if claim_file.name in training.get("train_claims", []):
        return set()
    fraction = training["holdout"]
    return {c.id for c in sampled if is_holdout(seed, c.source, c.id, fraction)}


def held_out_lines(trainings: list[dict], claim_file: Path, per_file: int | None) -> list[str]:
    """The lines of ``claim_file`` whose claims every training kept out, in file order."""
    held = set.intersection(*(held_out_ids(t, claim_file) for t in trainings))
    lines = []
    for line in claim_file.read_text(encoding="utf-8").splitlines():
        record = json.loads(line) if line.strip() else {}
        if record.get("claim") and str(record.get("id")) in held:
            lines.append(line)
    return lines[:per_file] if per_file else lines


def file_limit(per_file: int | Mapping[str, int] | None, stem: str) -> int | None:
    """The most claims of file ``stem``: ``per_file`` for every file, or a table by stem (a
    file it does not name: all of them)."""
    if isinstance(per_file, Mapping):
        return per_file.get(stem)
    return per_file


def stored_answers(name: str, source: str, lines: list[str]) -> list[bytes]:
    """The submission lines version ``name`` answered ``lines``' claims with, in their order,
    from bench/answers/NAME/SOURCE.jsonl.gz (BenchError naming a claim it lacks)."""
    path = ANSWERS / name / f"{source}.jsonl.gz"
    if not path.is_file():
        raise BenchError(f"no stored answers {path.relative_to(REPO)} (ANSWERS.md: making them)")
    with gzip.open(path, "rb") as file:
        by_id = {str(json.loads(line)["id"]): line.rstrip(b"\n") + b"\n" for line in file}
    ids = [str(json.loads(line)["id"]) for line in lines]
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise BenchError(f"{path.relative_to(REPO)} lacks {len(missing)} claims, e.g. {missing[0]}")
    return [by_id[i] for i in ids]


def answer_letters(submissions: list[bytes]) -> str:
    """One letter a claim (S, R, N) for the labels of ``submissions``."""
    return "".join(LETTERS[json.loads(line)["predicted_label"]] for line in submissions)


def balanced(records: list[dict]) -> list[int]:
    """The balanced subset (data README): within each gold-evidence count (1, 2, 3 or more) as
    many SUPPORTS as REFUTES claims, the first ones in file order. Indices into ``records``."""
    groups: dict[tuple[int, str], list[int]] = {}
    for i, record in enumerate(records):
        ids = {e for group in record.get("evidence") or [] for e in gold_element_ids(group)}
        count = min(3, len(ids))
        groups.setdefault((count, record["label"]), []).append(i)
    chosen: list[int] = []
    for count in (1, 2, 3):
        s, r = groups.get((count, "SUPPORTS"), []), groups.get((count, "REFUTES"), [])
        n = min(len(s), len(r))
        chosen += s[:n] + r[:n]
    return sorted(chosen)


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


def stripped(evidence, record: dict):
    """The evidence without the claim's gold elements (TabFact: without its gold table)."""
    from feverous_es.index.element_ids import table_key
    from feverous_es.plugins.interfaces import table_number

    gold = gold_ids(record)
    tables = {table_key(t) for t in record.get("gold_tables") or []}
    if None in tables:
        raise BenchError(f"not a table id among {record['gold_tables']!r}")
    return [
        c for c in evidence
        if c.element.id not in gold and (c.element.page, table_number(c.element)) not in tables
    ]  # fmt: skip


def run_file(pipeline, verdicts: dict, probe, lines: list[str], batch_size: int) -> dict:
    """Every claim through ``pipeline`` once; each verdict model in ``verdicts`` reads the same
    evidence, and ``probe`` (the model under test) reads it as is and without its gold
    elements. Returns per model its submission lines and label probabilities,
    the routes, the probe's labels and NEI probabilities both ways, and each model beside the
    one under test's milliseconds a claim (the verdict under test runs inside the pipeline)."""
    from feverous_es.eval.claims import dumps_submission_line, submission_line
    from feverous_es.plugins.interfaces import Label, Query
    from feverous_es.retrieve.evidence_tables import with_tables

    records = [json.loads(line) for line in lines]
    submissions: dict[str, list[bytes]] = {name: [] for name in ["model", *verdicts]}
    supports: dict[str, list[float]] = {name: [] for name in submissions}
    seconds = dict.fromkeys(verdicts, 0.0)
    routes: list[str] = []
    nei: dict[str, dict[str, list]] = {
        way: {"labels": [], "nei": [], "seeking": []} for way in ("as_is", "no_gold")
    }
    for start in range(0, len(records), batch_size):
        chunk = records[start : start + batch_size]
        results = pipeline.verify_many([r["claim"] for r in chunk])
        # The verdict models read only the claim text; the vector is not needed again.
        batch = [(Query(r.claim, np.zeros(0)), r.evidence) for r in results]
        answers = {"model": [r.verdict for r in results]}
        for name, model in verdicts.items():
            started = time.perf_counter()
            answers[name] = model.predict(batch)
            seconds[name] += time.perf_counter() - started
        for name, answer in answers.items():
            for record, result, verdict in zip(chunk, results, answer, strict=True):
                ids = [c.element.id for c in result.evidence]
                line = submission_line(record["id"], record["claim"], verdict.label.value, ids)
                submissions[name].append(dumps_submission_line(line))
                supports[name].append(supports_probability(verdict.probabilities))
        without = [
            (q, with_tables(stripped(ev, r), pipeline.context.store))  # its own first table
            for (q, ev), r in zip(batch, chunk, strict=True)
        ]
        for way, probe_batch in (("as_is", batch), ("no_gold", without)):
            for verdict in probe.predict(probe_batch):
                # The likelier of SUPPORTS and REFUTES: the label the threshold leaves standing.
                likelier = supports_probability(verdict.probabilities) >= 0.5
                nei[way]["labels"].append((Label.SUPPORTS if likelier else Label.REFUTES).value)
                nei[way]["nei"].append(verdict.probabilities.get(Label.NOT_ENOUGH_INFO, 0.0))
            nei[way]["seeking"] += [still_seeking(pipeline, q, ev) for q, ev in probe_batch]
        routes += ["table" if r.verdict.table is not None else "sentence" for r in results]
    return {
        "submissions": submissions, "supports": supports, "routes": routes, "nei": nei,
        "verdict_ms": {n: round(1000 * t / len(records), 1) for n, t in seconds.items()},
    }  # fmt: skip


def supports_probability(probabilities: dict) -> float:
    """P(SUPPORTS) over SUPPORTS and REFUTES: a 3-way model's verdict between the two is the
    likelier of them (its NEI mass is the NEI threshold's business), so routes and calibration
    score that decision; a 2-way model's probabilities are unchanged."""
    from feverous_es.plugins.interfaces import Label

    s, r = (probabilities.get(label, 0.0) for label in (Label.SUPPORTS, Label.REFUTES))
    return s / (s + r) if s + r > 0 else 0.5


def still_seeking(pipeline, query, evidence) -> bool:
    """Malon (2021) §1's NEI rule: the next-hop stage, given the final evidence, still proposes
    elements the evidence lacks."""
    held = {c.element.id for c in evidence}
    proposed = pipeline.hop.propose(query, evidence, pipeline.config.hops + 2)
    return any(c.element.id not in held for c in proposed)


def nei_row(nei: dict, gold: list[str], called: Callable[[dict], np.ndarray]) -> dict:
    """The NEI rate of a rule (``called``: which claims it turns into NEI) on the evidence as
    is and without its gold elements, and the accuracy on the claims it leaves (as is: against
    the gold label; without gold: the share that still got the gold label, which the evidence no
    longer supports)."""
    row: dict = {}
    for way in ("as_is", "no_gold"):
        kept = ~called(nei[way])
        labels = np.array(nei[way]["labels"])
        row[f"{way}_nei_rate"] = round(float(1 - kept.mean()), 4)
        row[f"{way}_accuracy_on_rest"] = (
            round(float((labels[kept] == np.array(gold)[kept]).mean()), 4) if kept.any() else None
        )
    return row


def nei_table(
    nei: dict, gold: list[str], thresholds: Sequence[float], model_right: np.ndarray
) -> list[dict]:
    """:func:`nei_row` per ``nei_above`` threshold on the entailment model's NEI probability,
    with the label accuracy of the reading under that threshold and its paired difference from
    the verdict under test (``model_right``: which claims it gets right): the probe is the
    verdict under test with the threshold left to this table, so each row is that verdict with
    another ``nei_above``, compared without reading a pair again."""
    rows = []
    for t in thresholds:
        labels = np.where(np.array(nei["as_is"]["nei"]) >= t, "NOT ENOUGH INFO",
                          np.array(nei["as_is"]["labels"]))  # fmt: skip
        right = labels == np.array(gold)
        rows.append(
            {
                "nei_above": t,
                **nei_row(nei, gold, lambda way, t=t: np.array(way["nei"]) >= t),
                "label_accuracy": round(float(right.mean()), 4),
                "paired": paired_difference(right, model_right),
            }
        )
    return rows


def refutes_recall(confusion: dict) -> float | None:
    """The share of gold REFUTES claims called REFUTES (the confusion is gold -> predicted)."""
    row = confusion.get("REFUTES", {})
    return round(row.get("REFUTES", 0) / sum(row.values()), 4) if row else None


def score(submissions: list[bytes], gold: Path) -> dict:
    from feverous_es.eval.scoring import score_files

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.jsonl"
        out.write_bytes(b"".join(submissions))
        report = score_files(out, gold)
    result = {
        "label_accuracy": report.overall.label_accuracy,
        "feverous_score": report.overall.feverous_score,
        "evidence_recall": report.overall.evidence_recall,
        "confusion": report.confusion,
        "refutes_recall": refutes_recall(report.confusion),
    }
    if report.tables is not None:
        result["table_hits"] = report.tables.hits
    return result


FEATURE_MODELS = {"table_model": "table-verdict"}


def model_dirs(models: Path) -> list[Path]:
    """The trained models of a models directory: ``verdict/`` and the feature models and the
    NEI call's model it holds."""
    return [
        models / "verdict",
        *(models / n for n in (*FEATURE_MODELS.values(), NEI_MODEL) if (models / n).is_dir()),
    ]


def read_dirs(reader: str | Path) -> list[Path]:
    """Every model directory ``reader`` may read: a cascade's second tier too (the claims it
    trained on are held out as well)."""
    return [d for tier in CASCADES.get(str(reader), (reader,)) for d in reader_dirs(tier)]


def model_options(models: Path) -> dict:
    """The verdict options of a models directory (the default reader's models it holds, and
    ``table-verdict/``); without a table feature model, table claims are read by the entailment
    model alone."""
    return {
        "model": str(models),
        **{
            option: str(models / name) if (models / name).is_dir() else ""
            for option, name in FEATURE_MODELS.items()
        },
    }


def reader_options(models: Path, reader: str | None) -> dict:
    """:func:`model_options`, the entailment model replaced by ``reader`` when given."""
    options = model_options(models)
    return {**options, "model": reader} if reader else options


@dataclass(frozen=True)
class Setup:
    """What one run compares: the verdict under test and the ones beside it (name, models
    directory, reader or None, the verdict options it reads with), on which index and claims."""

    index: Path
    models: Path
    reader: str | None
    baselines: list[tuple[str, Path, str | None, dict]]
    answers: Sequence[str]
    config: Path | None
    nei: Sequence[float]
    batch_size: int


class RememberedReadings:
    """A reader's label probabilities per (claim, premise) pair, each pair read once for the
    whole run. Exact: a reader's pair reads the same whatever shares its call (an int8 graph
    reads each pair alone; a float graph's rows do not mix)."""

    def __init__(self, read: Callable[[Sequence[str], Sequence[str]], np.ndarray]) -> None:
        self.read = read
        self.known: dict[tuple[str, str], np.ndarray] = {}

    def __call__(self, claims: Sequence[str], premises: Sequence[str]) -> np.ndarray:
        pairs = list(zip(claims, premises, strict=True))
        new = [pair for pair in dict.fromkeys(pairs) if pair not in self.known]
        if new:
            rows = self.read([c for c, _ in new], [p for _, p in new])
            self.known.update(zip(new, rows, strict=True))
        return np.array([self.known[pair] for pair in pairs]) if pairs else self.read([], [])


def share_second_readers(verdicts: Sequence[Any]) -> None:
    """The cascades' second (large) reader reads a pair once for every column of the run: the
    columns, the probe and the verdict under test re-read the same unsure pairs (a TabFact run
    read each table premise with the large reader six times). A column's ``verdict_ms`` then
    counts only the pairs no column read before it."""

    def same(reader) -> tuple:  # what makes two readers read a pair alike
        return (tuple(reader.model_dirs), tuple(reader.max_lengths), reader.hints)

    shared: dict[tuple, Any] = {}
    for verdict in verdicts:
        second = verdict.reader.second
        if second is not None:
            if same(second) not in shared:
                second.probabilities = RememberedReadings(second.probabilities)
                shared[same(second)] = second
            verdict.reader.second = shared[same(second)]


def run_files(setup: Setup, files: dict[str, list[str]]) -> dict:
    from feverous_es.plugins.config import load_config
    from feverous_es.plugins.registry import load
    from feverous_es.verify.pipeline import Pipeline

    config = load_config(setup.config)
    config = config.with_stage_options("verdict", **reader_options(setup.models, setup.reader))
    options = config.stage_options("verdict")
    pipeline = Pipeline.open(setup.index, config=config)
    context = pipeline.context
    verdicts = {
        "entailment model alone": load(
            "verdict", "classifier", context,
            {**options, "table_model": "", "nei_above": 1.1},
        ),
    }  # fmt: skip
    for name, models, reader, extra in setup.baselines:
        verdicts[name] = load(
            "verdict", verdict_plugin(extra), context, {**reader_options(models, reader), **extra}
        )
    # nei_above 1.0: the probe reads the NEI probability on every route as the verdict under
    # test does (a threshold over 1 skips it where no feature model needs the entailment model).
    probe = load("verdict", "classifier", context, {**options, "nei_above": 1.0})
    share_second_readers([pipeline.verdict, *verdicts.values(), probe])
    figures: dict[str, dict] = {}
    try:
        for source, lines in files.items():
            started = time.perf_counter()
            run = run_file(pipeline, verdicts, probe, lines, setup.batch_size)
            seconds = time.perf_counter() - started
            for name in setup.answers:
                run["submissions"][f"answers {name}"] = stored_answers(name, source, lines)
            records = [json.loads(line) for line in lines]
            gold_labels = np.array([r["label"] == "SUPPORTS" for r in records])
            evidence = any(r.get("evidence") for r in records)
            majority = max(Counter(r["label"] for r in records).values()) / len(records)
            subset = balanced(records) if evidence and source.startswith("feverous_s") else []
            with tempfile.TemporaryDirectory() as tmp:
                gold = Path(tmp) / "gold.jsonl"
                gold.write_text("\n".join(lines) + "\n", encoding="utf-8")
                models = {
                    name: score(run["submissions"][name], gold) for name in run["submissions"]
                }
                if subset:
                    gold.write_text("\n".join(lines[i] for i in subset) + "\n", encoding="utf-8")
                    for name, result in models.items():
                        chosen = [run["submissions"][name][i] for i in subset]
                        result["balanced"] = score(chosen, gold)["label_accuracy"]
            for result in models.values():
                # TabFact has no gold evidence: its FEVEROUS score would read 0 whatever was found.
                result["feverous_score"] = result["feverous_score"] if evidence else None
                result["evidence_recall"] = result["evidence_recall"] if evidence else None
            letters = {name: answer_letters(subs) for name, subs in run["submissions"].items()}
            gold_letters = np.array([LETTERS[r["label"]] for r in records])
            correct = {name: np.array(list(a)) == gold_letters for name, a in letters.items()}
            paired = {
                name: paired_difference(c, correct["model"])
                for name, c in correct.items()
                if name != "model"
            }
            paired_balanced = {
                name: paired_difference(c[subset], correct["model"][subset])
                for name, c in correct.items()
                if name != "model" and subset
            }
            p = np.array(run["supports"]["model"])
            confidence = np.maximum(p, 1 - p)
            right = (p >= 0.5) == gold_labels
            routes = np.array(run["routes"])
            figures[source] = {
                "claims": len(lines),
                "balanced_claims": len(subset) or None,
                "majority_class": majority,
                "seconds": round(seconds, 1),
                "verdict_ms": run["verdict_ms"],
                "models": models,
                "paired": paired,
                "paired_balanced": paired_balanced or None,
                "answers": {"ids": [str(r["id"]) for r in records], **letters},
                "routes": {
                    route: {
                        "claims": int((routes == route).sum()),
                        "accuracy": round(float(right[routes == route].mean()), 4),
                    }
                    for route in ("table", "sentence")
                    if (routes == route).any()
                },
                "calibration": calibration(confidence, right),
                "nei": nei_table(
                    run["nei"], [r["label"] for r in records], setup.nei, correct["model"]
                ),
                "nei_hop_seeking": nei_row(
                    run["nei"], [r["label"] for r in records], lambda way: np.array(way["seeking"])
                ),
            }
            report_file(source, figures[source], setup)
    finally:
        pipeline.close()
    return figures


def report_file(source: str, f: dict, setup: Setup) -> None:
    """One claim file's figures, printed as soon as the file is done (a run takes an hour)."""
    target = TARGETS.get(source)
    print(
        f"\n{source}: {f['claims']} held-out claims, majority class "
        f"{f['majority_class']:.1%}"
        + (f", target {target:.0%}" if target else "")
        + f", {f['seconds']:.0f} s"
    )
    for name, m in f["models"].items():
        label = f"verdict of {setup.models}" if name == "model" else name
        line = f"  {m['label_accuracy']:6.1%} label accuracy  {label}"
        if m.get("balanced") is not None:
            line += f"  (balanced subset of {f['balanced_claims']}: {m['balanced']:.1%})"
        if m["feverous_score"] is not None:
            line += f"  (FEVEROUS score {m['feverous_score']:.1%})"
        if name in f["verdict_ms"]:
            line += f"  {f['verdict_ms'][name]:.0f} ms a claim"
        print(line)
    for subset, paired in (("", f["paired"]), (" (balanced subset)", f["paired_balanced"] or {})):
        for name, d in paired.items():
            print(
                f"  {d['difference']:+6.1%} [{d['low']:+.1%}, {d['high']:+.1%}] {name}{subset} "
                f"against the verdict under test ({d['only_this']} claims only it gets right, "
                f"{d['only_baseline']} only the verdict under test)"
                + ("" if d["clears_zero"] else ": the interval holds zero")
            )
    model = f["models"]["model"]
    if model["evidence_recall"] is not None:
        print(f"  complete-evidence recall {model['evidence_recall']:.3f}")
    hits = model.get("table_hits")
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
        "  nei_above | NEI as is | accuracy on the rest | NEI without gold | still gold label"
        " | label accuracy, against the verdict under test"
    )
    rules = [(f"{r['nei_above']:9}", r) for r in f["nei"]]
    for name, r in [*rules, ("hop seeks", f["nei_hop_seeking"])]:

        def pct(v: float | None) -> str:
            return "-" if v is None else f"{v:.1%}"

        d = r.get("paired")
        print(
            f"  {name:9} | {pct(r['as_is_nei_rate']):9} | "
            f"{pct(r['as_is_accuracy_on_rest']):20} | {pct(r['no_gold_nei_rate']):16} | "
            f"{pct(r['no_gold_accuracy_on_rest']):16}"
            + (
                f" | {r['label_accuracy']:.1%} {d['difference']:+.1%} "
                f"[{d['low']:+.1%}, {d['high']:+.1%}]"
                if d
                else ""
            )
        )


def verdict_accuracy(
    context: Context,
    *,
    models: str | None = None,
    reader: str | None = None,
    baseline_models: Sequence[str] = (),
    baseline_readers: Sequence[str] = (),
    baseline_rules: Mapping[str, Mapping[str, Any]] | None = None,
    baseline_answers: Sequence[str] = (),
    held_out_by: Sequence[str] = (),
    config: str | None = None,
    per_file: int | Mapping[str, int] | None = None,
    files: Sequence[str] = (),
    nei: Sequence[float] = (0.3, 0.5, 0.7, 0.9, 1.1),
    batch_size: int = 16,
    keep_answers: bool = False,
) -> dict:
    """The figures of the verdict under test (``models``: a directory holding ``verdict/``,
    ``table-verdict/``, default the shipped ones; ``reader``: default,
    large or a model directory) beside each baseline: another models directory, the same
    models with another reader; on the claims every one of them and each ``held_out_by`` model
    kept out (at most ``per_file`` a file, or a table of them by
    file stem; only ``files``' stems). ``baseline_answers``: stored per-claim answers of
    versions run as they were; ``baseline_rules``: the reader under test with other verdict
    options, a column each (the module). ``keep_answers``: each file's figures hold its
    per-claim answers too (``answers``: ids and a letter a claim per column), for a caller that
    pairs them; a record holds figures only."""
    models_dir = Path(models) if models else REPO / "feverous_es" / "models"
    if models is None and reader is None:  # the package's verdict, with its default reader
        reader = ClassifierOptions().model
    baselines = [(f"baseline {m}", Path(m), None, {}) for m in baseline_models]
    baselines += [(f"reader {r}", models_dir, r, {}) for r in baseline_readers]
    baselines += [
        (f"rules {name}", models_dir, reader, dict(options))
        for name, options in (baseline_rules or {}).items()
    ]
    setup = Setup(
        context.place("index"), models_dir, reader, baselines, baseline_answers,
        Path(config) if config else None, nei, batch_size,
    )  # fmt: skip
    # The entailment models read (a reader's, else the models directory's default reader's)
    # and the feature models beside them.
    under_test = [*read_dirs(reader or models_dir), *model_dirs(models_dir)[1:]]
    compared = [
        d
        for _, directory, other, _ in baselines
        for d in (read_dirs(other) if other else model_dirs(directory)[1:])
    ]
    held_out_models = [Path(m) for m in held_out_by]
    trainings = [training_report(d) for d in [*under_test, *compared, *held_out_models]]
    # The files the models under test, or the held_out_by ones, were trained and split on.
    tested = [*trainings[: len(under_test)], *trainings[len(under_test) + len(compared) :]]
    names = dict.fromkeys(n for t in tested for n in t["claims"])
    chosen = {
        Path(name).stem: held_out_lines(
            trainings, MINI / name, file_limit(per_file, Path(name).stem)
        )
        for name in names
        if not files or Path(name).stem in files
    }
    figures = run_files(setup, chosen)
    print("\nmodels trained by:")
    for training in trainings[: len(under_test)]:
        print(f"  {training['command']}")
    if not keep_answers:
        for read in figures.values():
            del read["answers"]
    return figures
