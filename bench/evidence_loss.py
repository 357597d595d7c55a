"""Where the evidence is lost: each held-out claim's gold evidence followed through retrieval.

    run = "bench.evidence_loss:evidence_loss"   # on the mini index (--index); options:
    # per_file (a number, or a table by file stem), batch_size

The claims are the dev claims of FM2, FEVEROUS-S and TabFact that the shipped models and the
sentence ranker never trained on (the verdict condition's choice, at most ``per_file`` a
file). The pipeline's retrieval runs as configured, with no verdict, and each gold evidence set
is followed through its stages. A claim counts at the furthest stage any of its sets reaches
(:data:`STAGES`, best first):

* ``complete``: the whole set among the evidence the official scorer reads (its first 5
  sentences and 25 cells): only these claims can score;
* ``past the scored budget``: the whole set in the evidence handed on, not all of it within
  what the scorer reads;
* ``reranked out``: every element of the set among the candidates the reranker read, some
  not chosen for the evidence;
* ``not a candidate``: every page of the set retrieved (by page retrieval or a hop), some
  element never among the candidates;
* ``second hop not taken``: a set over several pages, some of them retrieved, not all;
* ``page not retrieved``: none of the set's pages retrieved.

A TabFact claim has a gold table and no gold set: the table reaches a stage where one of its
elements does (``complete``: among what the scorer reads), and ``table_first`` is the share of
claims whose evidence names the gold table first (the table the verdict reads).

Beside the stages, the share of the claims not complete whose evidence holds some of a gold set
(``partial``) and the gold page among the retrieved pages (``page_recall``, every page of a
set). What each share is worth to the FEVEROUS score: a claim scores only when ``complete``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.context import Context
from bench.data import MINI, REPO
from bench.verdict import file_limit, held_out_lines, shipped_trainings
from feverous_es.eval.samples import gold_sets, gold_table, has_gold_table
from feverous_es.eval.scoring import truncate
from feverous_es.index.element_ids import element_to_triple

STAGES = (
    "complete",
    "past the scored budget",
    "reranked out",
    "not a candidate",
    "second hop not taken",
    "page not retrieved",
)
FILES = ("fm2_dev", "feverous_s_dev", "tabfact_dev")


TableKey = tuple[str, int]  # (page, table number), as the index numbers a page's tables


@dataclass(frozen=True)
class Reached:
    """What retrieval kept of a claim at each stage: element ids, and the tables they are of."""

    pages: frozenset[str]  # retrieved by page retrieval, or holding a candidate or evidence
    candidates: frozenset[str]  # every element the reranker read, and the evidence
    evidence: tuple[str, ...]  # the evidence handed on, in order
    scored: frozenset[str]  # what the official scorer reads of it
    tables: dict[str, frozenset[TableKey]]  # the tables of each stage's elements, by stage
    first_table: TableKey | None  # the table the evidence names first

    @classmethod
    def of(cls, retrieval: Any) -> Reached:
        evidence = tuple(c.element.id for c in retrieval.evidence)
        read = {c.element.id: c for c in [*retrieval.ranked, *retrieval.evidence]}
        pages = {hit.page.title for hit in retrieval.pages}
        pages |= {c.element.page for c in read.values()}
        triples = {i: element_to_triple(i) for i in evidence}
        kept = set(truncate(list(triples.values())))
        scored = frozenset(i for i, triple in triples.items() if triple in kept)

        def tables(ids: Iterable[str]) -> frozenset[TableKey]:
            elements = (read[i].element for i in ids)
            return frozenset((e.page, e.table) for e in elements if e.table is not None)

        first = next(((e.page, e.table) for e in (read[i].element for i in evidence)
                      if e.table is not None), None)  # fmt: skip
        return cls(
            frozenset(pages), frozenset(read), evidence, scored,
            {"complete": tables(scored), "past the scored budget": tables(evidence),
             "reranked out": tables(read)}, first,
        )  # fmt: skip

    def stage(self, gold: set[str]) -> str:
        """The furthest stage (:data:`STAGES`) a gold set of element ids reaches."""
        if gold <= self.scored:
            return "complete"
        if gold <= set(self.evidence):
            return "past the scored budget"
        if gold <= self.candidates:
            return "reranked out"
        return self._page_stage({element_to_triple(i)[0] for i in gold})

    def table_stage(self, table: TableKey) -> str:
        """The furthest stage a gold table reaches: ``complete`` where an element of it is
        among what the scorer reads."""
        for stage, tables in self.tables.items():
            if table in tables:
                return stage
        return self._page_stage({table[0]})

    def _page_stage(self, pages: set[str]) -> str:
        if pages <= self.pages:
            return "not a candidate"
        if pages & self.pages:
            return "second hop not taken"
        return "page not retrieved"


def claim_stage(reached: Reached, sets: Sequence[set[str]]) -> str:
    """The furthest stage any of a claim's gold ``sets`` reaches."""
    return min((reached.stage(s) for s in sets), key=STAGES.index)


def breakdown(
    stages: Sequence[str], found: Sequence[bool], partial: Sequence[bool] | None = None
) -> dict[str, Any]:
    """The claims' shares at each stage of ``stages`` (one a claim), the share whose gold pages
    were all retrieved (``found``), and, given ``partial``, the share of the claims not
    complete whose evidence holds some of a gold set."""
    counts, n = Counter(stages), len(stages)
    figures: dict[str, Any] = {
        "claims": n,
        "stages": {stage: round(counts[stage] / n, 4) for stage in STAGES},
        "counts": {stage: counts[stage] for stage in STAGES},
        "page_recall": round(sum(found) / n, 4),
    }
    if partial is not None:
        lost = [p for p, stage in zip(partial, stages, strict=True) if stage != "complete"]
        figures["partial"] = round(sum(lost) / len(lost), 4) if lost else None
    return figures


def sentence_claims(reached: Sequence[Reached], records: Sequence[dict]) -> dict[str, Any]:
    """:func:`breakdown` of claims with gold evidence sets (FM2, FEVEROUS-S)."""
    sets = [gold_sets(r) for r in records]
    pairs = list(zip(reached, sets, strict=True))
    return breakdown(
        [claim_stage(r, s) for r, s in pairs],
        [any({element_to_triple(i)[0] for i in g} <= r.pages for g in s) for r, s in pairs],
        [any(g & set(r.evidence) for g in s) for r, s in pairs],
    )


def table_claims(reached: Sequence[Reached], records: Sequence[dict]) -> dict[str, Any]:
    """:func:`breakdown` of claims with a gold table (TabFact), and the share whose evidence
    names the gold table first (``table_first``: the table the verdict reads)."""
    pairs = list(zip(reached, [gold_table(r) for r in records], strict=True))
    figures = breakdown([r.table_stage(t) for r, t in pairs], [t[0] in r.pages for r, t in pairs])
    first = sum(r.first_table == t for r, t in pairs)
    return {**figures, "table_first": round(first / len(records), 4)}


def evidence_loss(
    context: Context,
    *,
    per_file: int | Mapping[str, int] | None = None,
    batch_size: int = 16,
) -> dict[str, Any]:
    """Each file's :func:`breakdown` on its held-out claims (the module)."""
    from rich.progress import track

    from feverous_es.index.backends import open_store
    from feverous_es.plugins.config import load_config
    from feverous_es.plugins.interfaces import PluginContext
    from feverous_es.verify.pipeline import LazyEmbedder, Pipeline

    trainings = shipped_trainings(REPO / "feverous_es" / "models" / "sentence-ranker")
    store = open_store("embedded", context.place("index"))
    pipeline = Pipeline(load_config(None), PluginContext(store, LazyEmbedder("auto"), "auto"))
    figures: dict[str, Any] = {}
    try:
        for stem in FILES:
            lines = held_out_lines(trainings, MINI / f"{stem}.jsonl", file_limit(per_file, stem))
            on_table = stem == "tabfact_dev"
            records = [r for r in map(json.loads, lines)
                       if (has_gold_table(r) if on_table else gold_sets(r))]  # fmt: skip
            reached: list[Reached] = []
            batches = range(0, len(records), batch_size)
            for start in track(batches, description=stem, transient=True):
                claims = [r["claim"] for r in records[start : start + batch_size]]
                reached += [Reached.of(r) for r in pipeline.retrieve_many(claims)]
            figures[stem] = (table_claims if on_table else sentence_claims)(reached, records)
    finally:
        pipeline.close()
        store.close()
    report(figures)
    return figures


def report(figures: Mapping[str, Any]) -> None:
    """Each file's stages, printed as shares of its claims."""

    def row(name: str, values: Iterable[str]) -> None:
        print(f"{name:24}" + "".join(f"{v:>16}" for v in values))

    row("", figures)
    for stage in STAGES:
        row(stage, (f"{f['stages'][stage]:.1%}" for f in figures.values()))
    row("claims", (str(f["claims"]) for f in figures.values()))
    row("page recall", (f"{f['page_recall']:.1%}" for f in figures.values()))
    row("partial (of the lost)", (_share(f.get("partial")) for f in figures.values()))
    row("gold table first", (_share(f.get("table_first")) for f in figures.values()))


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"
