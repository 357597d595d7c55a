"""NOT ENOUGH INFO on real claims that need it, beside the SUPPORTS / REFUTES claims that do not.

    run = "bench.nei:nei_rules"   # on the mini index (--index); options: per_file (as the
    # verdict condition's), nei_per_file, seed, batch_size

The claims, each kind apart in the figures:

* ``as is``: the held-out dev claims the verdict's models never read (bench/verdict.py's
  choice, at most ``per_file`` a file), with their own labels;
* ``pages hidden``: FM2 and FEVEROUS-S held-out claims verified with their gold pages hidden
  from retrieval (:class:`~bench.hidden_pages.HiddenPages`): nothing in the index decides them,
  NOT ENOUGH INFO is right;
* ``facts hidden``: FM2 and FEVEROUS-S held-out claims whose gold evidence is sentences,
  verified with those sentences hidden (their subject's page found without the fact): NEI;
* ``table hidden``: TabFact held-out claims with their gold table's page hidden: NEI;
* ``invented``: FM2 and FEVEROUS-S held-out claims whose subject (the span that names the gold
  page) is replaced by a name no page of the dump holds, of a person, an organisation, a
  place, a river or an event, as written, lowercased or after role words
  (:mod:`bench.nei_claims`: built apart from what trains the NEI model): NEI;
* ``controls``: FM2 and FEVEROUS-S held-out SUPPORTS / REFUTES claims with their subject
  misspelled, or lowercased whole (:func:`~bench.nei_claims.controls`): their evidence is in
  the index and their label stands; a rule that calls them NEI decides by the claim's form.

Each claim goes once through the whole pipeline, the verdict reading the reader's NEI
probability on every route (``nei_above`` 1.0, which turns no claim into NEI), and keeps what a
NEI rule may read of it (:func:`features`): the label and probabilities, the NEI probability,
the route, the names the claim writes that no evidence holds, the best page and evidence
scores, the lowest NEI probability of its evidence sentences each read alone
(:func:`sentences_alone`), and whether its whole gold evidence was retrieved
(:func:`evidence_complete`). Each rule of :func:`rules` is then applied to the same readings:
per kind and file its NEI rate, three-way label accuracy, the share it answers and its accuracy
there (selective prediction), and for the claims as they are the official FEVEROUS score and
the accuracy on the claims whose whole gold evidence was retrieved; its paired difference from
the default (no NEI call) with the 95 % interval, on the SUPPORTS / REFUTES claims alone and
on all of them. A rule reads two signals under its gate: the NEI model's probability, and the
lowest NEI probability of the evidence sentences each read alone (no one sentence decides the
claim), that one at a floor of the NEI model's probability. The rule is chosen by
:func:`chosen_rule` on all claims and two-fold: the claims at even positions of the claim order
choose and the odd ones report, then the other way. The record keeps the default, the chosen
and the most accurate rules (:data:`KEPT_RULES`).
"""

from __future__ import annotations

import itertools
import json
import random
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from bench.calibration import lean, relabelled
from bench.context import Context
from bench.data import MINI
from bench.nei_claims import FORMS, controls, invented_forms, unseen_names
from bench.paired import paired_difference
from bench.verdict import balanced, file_limit, held_out_lines, shipped_trainings
from feverous_es.eval.samples import gold_pages, gold_sentences, gold_sets
from feverous_es.training.hidden_pages import NOTHING, Hidden, HiddenPages

NEI = "NOT ENOUGH INFO"
BALANCED = "as is, balanced / feverous_s_dev"  # a view of the as-is FEVEROUS-S claims
SENTENCE_FILES = ("fm2_dev", "feverous_s_dev")


@dataclass(frozen=True)
class Claim:
    """A claim as verified here: its kind, file, text, right label and what is hidden from its
    retrieval."""

    kind: str
    source: str
    id: str
    text: str
    label: str
    hidden: Hidden = NOTHING
    balanced: bool = False  # of FEVEROUS-S's balanced subset (bench.verdict.balanced)
    gold: tuple[frozenset[str], ...] = ()  # its gold evidence sets (as is: the official score)


def nei_claims(lines: dict[str, list[str]], store: Any, per_file: int, seed: int) -> list[Claim]:
    """The held-out claims as they are, and ``per_file`` of each file for each NEI kind."""
    rng = random.Random(seed)
    names = unseen_names(store, seed)
    claims: list[Claim] = []
    for source, some in lines.items():
        records = [json.loads(line) for line in some]
        subset = set(balanced(records)) if source == "feverous_s_dev" else set()
        claims += [Claim("as is", source, str(r["id"]), r["claim"], r["label"],
                         balanced=i in subset, gold=tuple(map(frozenset, gold_sets(r))))
                   for i, r in enumerate(records)]  # fmt: skip
        hidden = "pages hidden" if source in SENTENCE_FILES else "table hidden"
        for r in rng.sample(records, min(per_file, len(records))):
            pages = frozenset(unicodedata.normalize("NFD", p) for p in gold_pages(r))
            claims.append(Claim(hidden, source, str(r["id"]), r["claim"], NEI, Hidden(pages)))
        if source in SENTENCE_FILES:
            facts = [(r, ids) for r in records if (ids := gold_sentences(r))]
            chooser = random.Random(f"{seed} facts {source}")  # the other kinds' draws unchanged
            for r, ids in chooser.sample(facts, min(per_file, len(facts))):
                claims.append(Claim("facts hidden", source, str(r["id"]), r["claim"], NEI,
                                    Hidden(elements=ids)))  # fmt: skip
            invented = checked = 0
            for r in records:
                titles = sorted(gold_pages(r))
                if not titles:
                    continue
                if invented < per_file:
                    kind, name = next(names)
                    form = FORMS[invented % len(FORMS)]
                    if changed := invented_forms(r["claim"], titles[0], kind, name, form):
                        claims.append(Claim("invented", source, str(r["id"]), changed, NEI))
                        invented += 1
                if checked < per_file and r["label"] != NEI:
                    for text in controls(r["claim"], titles[0]).values():
                        claims.append(Claim("controls", source, str(r["id"]), text, r["label"]))
                        checked += 1
    return claims


def features(result: Any) -> dict[str, Any]:
    """What a NEI rule may read of a claim's result (the module)."""
    from feverous_es.plugins.interfaces import Label
    from feverous_es.verdict.nei_call import coverage, evidence_words

    held = evidence_words(result.evidence)
    probabilities = result.verdict.probabilities
    s, r = (probabilities.get(label, 0.0) for label in (Label.SUPPORTS, Label.REFUTES))
    return {
        "label": "SUPPORTS" if s >= r else "REFUTES",
        "supports": round(s / (s + r), 4) if s + r else 0.5,
        "nei": round(float(probabilities.get(Label.NOT_ENOUGH_INFO, 0.0)), 4),
        "route": "table" if result.verdict.table is not None else "sentence",
        "covered": round(coverage(result.claim, held), 4),
        "page_score": round(result.pages[0].score, 4) if result.pages else 0.0,
        "evidence_score": round(max((c.score for c in result.evidence), default=0.0), 4),
        "evidence": len(result.evidence),
    }


def sentences_alone(pipeline: Any, result: Any) -> float:
    """The lowest NOT ENOUGH INFO probability of the claim's evidence sentences, each read
    alone by the reader, as the verdict's ``nei_sentences_above`` reads it: high when no one
    sentence decides the claim; 1 with no sentence."""
    return round(pipeline.verdict.sentences_alone([(result.claim, result.evidence)])[0], 4)


def evidence_complete(gold: Sequence[frozenset[str]], result: Any) -> bool:
    """Whether the evidence ``result`` predicts holds a whole gold set of the claim, as the
    official scorer reads it (its evidence truncated to 5 sentences and 25 cells)."""
    from feverous_es.eval.scoring import has_complete_set, truncate
    from feverous_es.index.element_ids import element_to_triple

    predicted = truncate([element_to_triple(c.element.id) for c in result.evidence])
    sets = [[element_to_triple(i) for i in group] for group in gold]
    return has_complete_set(sets, predicted)


def read_claims(pipeline: Any, view: HiddenPages, claims: list[Claim], batch: int) -> list[dict]:
    """Each claim's :func:`features`, in order: those with hidden pages or elements one at a
    time (the view hides a claim's), the others in batches, each evidence sentence read
    alone too (:func:`sentences_alone`)."""
    from rich.progress import track

    found: list[dict] = [{}] * len(claims)
    open_ = [i for i, c in enumerate(claims) if not c.hidden]
    hidden = [i for i, c in enumerate(claims) if c.hidden]
    groups = [open_[s : s + batch] for s in range(0, len(open_), batch)] + [[i] for i in hidden]
    for group in track(groups, description="claims", transient=True):
        view.hidden = claims[group[0]].hidden
        for i, result in zip(group, pipeline.verify_many([claims[i].text for i in group]),
                             strict=True):  # fmt: skip
            found[i] = {**features(result), "sentences_nei": sentences_alone(pipeline, result),
                        "complete": evidence_complete(claims[i].gold, result)}  # fmt: skip
    view.hidden = NOTHING
    return found


# The verdict's NEI options (feverous_es.verdict.options.ClassifierOptions), each rule a
# choice of them; a threshold over 1: never (nei_covered_below: for every claim). The
# sentences-alone signal, with its floor on the NEI probability, is the candidate option
# ``nei_sentences_above`` / ``nei_sentences_floor``.
NEI_ABOVE = (0.7, 0.8, 0.9, 0.93, 0.95, 0.96, 0.97, 0.98, 0.99, 1.1)
NEI_COVERED_BELOW = (0.5, 0.6, 0.7, 0.8, 0.9, 1.1)
SENTENCES_ABOVE = (0.8, 0.9, 0.95, 0.98, 1.1)
SENTENCES_FLOOR = (0.0, 0.3, 0.5, 0.7, 0.8)
KEPT_RULES = 10  # the record keeps the default, the chosen and this many most accurate rules
NEVER = 1.1


def rule_name(above: float, covered: float, sentences: float = NEVER, floor: float = 0.0) -> str:
    """A rule's name in the record (no dots: a figure's key is a dotted path)."""
    name = f"nei_above {above:.0%}, nei_covered_below {covered:.0%}"
    if sentences <= 1.0:
        name += f", nei_sentences_above {sentences:.0%}, nei_sentences_floor {floor:.0%}"
    return name


DEFAULT_RULE = rule_name(NEVER, NEVER)  # never NEI: the default until this chose one


def rules() -> dict[str, dict[str, float]]:
    """Every choice of the verdict's NEI options, by name (each a distinct rule)."""
    found: dict[str, dict[str, float]] = {}
    grid = itertools.product(NEI_ABOVE, NEI_COVERED_BELOW, SENTENCES_ABOVE, SENTENCES_FLOOR)
    for above, covered, sentences, floor in grid:
        never = above > 1.0 and sentences > 1.0
        if (never and covered <= 1.0) or (sentences > 1.0 and floor > 0.0):
            continue  # the same answers as a rule already listed
        found[rule_name(above, covered, sentences, floor)] = {
            "nei_above": above, "nei_covered_below": covered,
            "nei_sentences_above": sentences, "nei_sentences_floor": floor,
        }  # fmt: skip
    return found


@dataclass(frozen=True)
class Readings:
    """The claims' features (:func:`features`) as columns, for a rule to read them all at once."""

    label: np.ndarray
    nei: np.ndarray
    alone: np.ndarray  # the lowest NEI probability of the evidence sentences read alone
    covered: np.ndarray
    complete: np.ndarray  # the claim's whole gold evidence retrieved (as is claims only)

    @classmethod
    def of(cls, read: Sequence[dict]) -> Readings:
        return cls(
            np.array([f["label"] for f in read]),
            np.array([f["nei"] for f in read], dtype=float),
            np.array([f["sentences_nei"] for f in read], dtype=float),
            np.array([f["covered"] for f in read], dtype=float),
            np.array([bool(f.get("complete")) for f in read], dtype=bool),
        )

    def answers(self, options: Mapping[str, float]) -> np.ndarray:
        """Each claim's answer under ``options``: NEI when the evidence holds less than
        ``nei_covered_below`` of the claim's words and the NEI probability reaches
        ``nei_above``, or every evidence sentence read alone leaves NEI at
        ``nei_sentences_above`` with the NEI probability at ``nei_sentences_floor``."""
        alone = (self.alone >= options.get("nei_sentences_above", NEVER)) & (
            self.nei >= options.get("nei_sentences_floor", 0.0)
        )
        called = (self.nei >= options["nei_above"]) | alone
        return np.where((self.covered < options["nei_covered_below"]) & called, NEI, self.label)


def scored(claims: list[Claim], read: list[dict], chosen: Sequence[int]) -> dict[str, Any]:
    """Each rule on the claims ``chosen``: NEI rate and accuracy per kind and file, the official
    score where the claims have gold evidence, and its paired difference from the default on
    the SUPPORTS / REFUTES claims and on all."""
    picked = [claims[i] for i in chosen]
    gold, views = np.array([c.label for c in picked]), kind_views(picked)
    readings = Readings.of([read[i] for i in chosen])
    every = rules()
    default = readings.answers(every[DEFAULT_RULE]) == gold
    return {
        name: {
            "options": options,
            **judged(readings.answers(options), gold, views, default, readings.complete),
        }
        for name, options in every.items()
    }


def kind_views(claims: Sequence[Claim]) -> dict[str, np.ndarray]:
    """Which of ``claims`` each kind / file holds, and FEVEROUS-S's balanced subset (its labels
    leak through evidence counts on this dump)."""
    kinds = np.array([f"{c.kind} / {c.source}" for c in claims])
    views = {kind: kinds == kind for kind in dict.fromkeys(kinds)}
    views[BALANCED] = np.array([c.balanced for c in claims])
    return views


def judged(
    said: np.ndarray,
    gold: np.ndarray,
    views: Mapping[str, np.ndarray],
    baseline: np.ndarray,
    complete: np.ndarray,
) -> dict[str, Any]:
    """Answers ``said`` against ``gold``: accuracy, and per view its NEI rate and accuracy, the
    share answered (not NEI) and the accuracy among those (selective prediction), and for the
    claims as they are the FEVEROUS score (label right and a whole gold set retrieved) and the
    accuracy on the claims whose ``complete`` gold evidence was retrieved; the paired
    difference from ``baseline`` (its claims right) on all claims and on the SUPPORTS /
    REFUTES ones."""
    right, sure, answered = said == gold, gold != NEI, said != NEI

    def view(inside: np.ndarray, as_is: bool) -> dict[str, Any]:
        found = {
            "claims": int(inside.sum()),
            "accuracy": round(float(right[inside].mean()), 4),
            "nei_rate": round(float((said[inside] == NEI).mean()), 4),
            "answered": round(float(answered[inside].mean()), 4),
            "answered_accuracy": _share(right[inside & answered]),
        }
        if as_is:
            found |= {
                "feverous_score": round(float((right & complete)[inside].mean()), 4),
                "complete_claims": int((inside & complete).sum()),
                "complete_accuracy": _share(right[inside & complete]),
            }
        return found

    return {
        "accuracy": round(float(right.mean()), 4),
        "by_kind": {
            kind: view(inside, kind.startswith("as is") and "tabfact" not in kind)
            for kind, inside in views.items()
            if inside.any()
        },
        "paired_all": paired_difference(right, baseline),
        "paired_sure": paired_difference(right[sure], baseline[sure]),
    }


def _share(right: np.ndarray) -> float | None:
    return round(float(right.mean()), 4) if right.size else None


# What a rule may cost where NOT ENOUGH INFO is wrong: accuracy on the claims whose whole gold
# evidence was retrieved (FM2, FEVEROUS-S and its balanced subset), and on TabFact's claims.
COMPLETE_COST = 0.01
TABFACT_COST = 0.005


def chosen_rule(figures: dict[str, Any]) -> str:
    """The rule with the best three-way accuracy on all claims among those that cost the
    claims whose whole gold evidence was retrieved at most :data:`COMPLETE_COST` in each file
    (NEI there costs the FEVEROUS score), the decidable controls as much, and TabFact's claims
    at most :data:`TABFACT_COST`.
    Where the evidence is incomplete the official score gives a claim nothing whatever its
    label: NOT ENOUGH INFO there is the honest answer, not a cost."""

    def affordable(name: str) -> bool:
        by_kind, default = figures[name]["by_kind"], figures[DEFAULT_RULE]["by_kind"]
        for kind, f in by_kind.items():
            if kind.startswith("controls"):  # decidable: NEI there is the claim's form
                if f["accuracy"] < default[kind]["accuracy"] - COMPLETE_COST:
                    return False
                continue
            if not kind.startswith("as is"):
                continue
            if "tabfact" in kind:
                if f["accuracy"] < default[kind]["accuracy"] - TABFACT_COST:
                    return False
            elif (f["complete_accuracy"] or 0.0) < (
                default[kind]["complete_accuracy"] or 0.0
            ) - COMPLETE_COST:
                return False
        return True

    return max((n for n in figures if affordable(n)), key=lambda n: figures[n]["accuracy"])


def nei_rules(
    context: Context,
    *,
    per_file: int | Mapping[str, int] | None = None,
    nei_per_file: int = 150,
    seed: int = 0,
    batch_size: int = 16,
    nei_model: str | None = None,
) -> dict[str, Any]:
    """The module's claims read once, then every rule of :func:`rules` scored on them, and the
    rule chosen two-fold; ``nei_model``: a NEI model read instead of the default's (a candidate
    judged on the same claims before it is installed)."""
    from feverous_es.index.backends import open_store
    from feverous_es.plugins.config import load_config
    from feverous_es.plugins.interfaces import PluginContext
    from feverous_es.runtime.costs import CountedStore
    from feverous_es.verify.pipeline import LazyEmbedder, Pipeline

    trainings = shipped_trainings()
    lines = {
        stem: held_out_lines(trainings, MINI / f"{stem}.jsonl", file_limit(per_file, stem))
        for stem in (*SENTENCE_FILES, "tabfact_dev")
    }
    view = HiddenPages(CountedStore(open_store("embedded", context.place("index"))))
    chosen_model = {"nei_model": nei_model} if nei_model else {}
    # nei_above 1.0 (the others off) turns no claim into NEI but has the NEI model read, and
    # nei_covered_below over 1 every claim (the rules' own gates are applied to the readings
    # below); the reader's answers as read: the recalibration is chosen below (calibration.py)
    never = {"nei_above": 1.0}
    config = load_config(None).with_stage_options(
        "verdict", **never, nei_covered_below=1.1, reader_scale=1.0, **chosen_model
    )
    pipeline = Pipeline(config, PluginContext(view, LazyEmbedder("auto"), "auto"))
    try:
        claims = nei_claims(lines, view, nei_per_file, seed)
        read = read_claims(pipeline, view, claims, batch_size)
    finally:
        pipeline.close()
    sure = [i for i, c in enumerate(claims) if c.kind == "as is"]
    gold, files = [claims[i].label for i in sure], [claims[i].source for i in sure]
    reader_lean = lean([read[i] for i in sure], gold, files)
    # the NEI rules read what would ship: the reader's labels recalibrated
    read = relabelled(read, reader_lean["options"])
    halves = [[i for i in range(len(claims)) if i % 2 == h] for h in (0, 1)]
    two_fold = []
    for h in (0, 1):
        name = chosen_rule(scored(claims, read, halves[h]))
        other = scored(claims, read, halves[1 - h])[name]
        two_fold.append({"chosen_on_half": h, "rule": name, "other_half": other})
    every = scored(claims, read, range(len(claims)))
    chosen = chosen_rule(every)
    # thousands of rules: the record keeps those a reader compares the choice with
    best = sorted(every, key=lambda n: every[n]["accuracy"], reverse=True)[:KEPT_RULES]
    figures = {
        "claims": dict(Counter(f"{c.kind} / {c.source}" for c in claims)),
        "lean": reader_lean,
        "rules": {name: every[name] for name in dict.fromkeys([DEFAULT_RULE, chosen, *best])},
        "default": every[DEFAULT_RULE],
        "chosen": {"rule": chosen, **every[chosen]},
        "two_fold": two_fold,
    }
    report(figures)
    return figures


def report(figures: dict[str, Any]) -> None:
    """The default, the chosen rule and the best others, printed."""
    rules_ = figures["rules"]
    best = sorted(rules_, key=lambda n: rules_[n]["accuracy"], reverse=True)[:6]
    print("claims: " + ", ".join(f"{k} {n}" for k, n in figures["claims"].items()))
    reader_lean = figures["lean"]
    print(f"\nthe reader's lean, recalibrated two-fold (fitted on all: {reader_lean['fitted']}; "
          f"ships: {reader_lean['options']}):")  # fmt: skip
    for name, f in reader_lean["out_of_fold"].items():
        before, after, paired = f["as read"], f["recalibrated"], f["paired"]
        print(f"  {name:16} {f['claims']:5} claims: {before['accuracy']:.1%} -> "
              f"{after['accuracy']:.1%} ({paired['difference']:+.1%} [{paired['low']:+.1%}, "
              f"{paired['high']:+.1%}]), REFUTES recall {before['refutes_recall']} -> "
              f"{after['refutes_recall']}, ECE {before['calibration_error']:.3f} -> "
              f"{after['calibration_error']:.3f} (the scale alone: "
              f"{f['rescaled']['calibration_error']:.3f})")  # fmt: skip
    print("  SUPPORTS over an as-read share of (in sample; the guard's side: contrast-pipeline):")
    for cut, by_file in reader_lean["cuts"].items():
        print(f"    {cut:>4}: " + ", ".join(
            f"{name} {f['accuracy']:.1%} (REFUTES recall {f['refutes_recall']})"
            for name, f in by_file.items()))  # fmt: skip
    for name in dict.fromkeys([DEFAULT_RULE, figures["chosen"]["rule"], *best]):
        f = rules_[name]
        sure, every = f["paired_sure"], f["paired_all"]
        print(f"\n{name}: accuracy {f['accuracy']:.1%}; against the default, all "
              f"{every['difference']:+.1%} [{every['low']:+.1%}, {every['high']:+.1%}], "
              f"SUPPORTS/REFUTES only {sure['difference']:+.1%} "
              f"[{sure['low']:+.1%}, {sure['high']:+.1%}]")  # fmt: skip
        for kind, k in f["by_kind"].items():
            print(f"  {kind:32} {k['accuracy']:6.1%}  NEI {k['nei_rate']:6.1%}")
    print(f"\nchosen: {figures['chosen']['rule']}")
    for fold in figures["two_fold"]:
        print(f"  chosen on half {fold['chosen_on_half']}: {fold['rule']}, the other half "
              f"{fold['other_half']['accuracy']:.1%}")  # fmt: skip
