"""Retrieval benchmark: the claim pipeline's evidence against plain BM25, on mini-FEVEROUS.

    run = "bench.retrieval:retrieval"   # options: store, n_feverous, n_tabfact (0: all), seed,
    # reranker, hops, batch, stage_options, shard ("I/N"), in_index, baseline

The index is the driver's ``--index`` (an embedded index of the mini-FEVEROUS ``wiki.db``), or
with ``store = "elasticsearch"`` the cluster of ``FEVEROUS_ES_URL``. ``in_index`` keeps only the
claims whose gold pages the index holds, for an index of a slice of the dump.

The pipeline's retrieval stages run as configured (pages → candidates → reranker → selector,
then ``hops`` rounds of the hop plugin) through ``Pipeline.retrieve_many``: no verdict model is
loaded. ``stage_options`` (``{candidates = {row_tables = 15}}``) overrides plugin options, for
tuning; ``shard = "1/2"`` takes every 2nd sampled claim from the 2nd, to run halves in parallel.

Printed side by side, on the same sampled claims:

* FEVEROUS-S complete-evidence recall: a gold set entirely inside the 5 predicted sentences;
  plain BM25 is the top 5 of all sentences (``search_text`` with a sentence filter).
* TabFact gold-table Hits@1/5/10: for the pipeline, tables ranked by where their first element
  (cell, header cell, caption) appears in the evidence; for plain BM25, the store's index of
  whole tables (title + caption + every cell as one document, ``search_tables``).
* page recall of the page retriever (every gold page among the pages it returns), and the
  mean number of candidates (and their words) that reach the reranker.
* seconds per claim of each pipeline stage.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from bench.context import Context
from bench.data import MINI
from bench.errors import BenchError
from bench.ranking import HITS_AT, hits_at
from feverous_es.eval.samples import gold_sets, gold_table, read_records, seeded_sample
from feverous_es.index.backends import STORES, open_store
from feverous_es.index.elements import ElementType
from feverous_es.index.store import Filters, Store
from feverous_es.plugins.config import DEFAULT_PLUGINS, PipelineConfig
from feverous_es.plugins.interfaces import Candidate, PluginContext
from feverous_es.verify.pipeline import LazyEmbedder, Pipeline, Retrieval


def complete(predicted: Sequence[str], sets: Sequence[set[str]]) -> bool:
    held = set(predicted)
    return any(s <= held for s in sets)


def table_order(evidence: Sequence[Candidate]) -> list[tuple[str, int]]:
    """Tables in the order their first element appears in the evidence."""
    order: dict[tuple[str, int], None] = {}
    for candidate in evidence:
        if candidate.element.table is not None:
            order.setdefault((candidate.element.page, candidate.element.table), None)
    return list(order)


# Plain BM25 baselines.


def held(store: Store, records: list[dict[str, Any]], pages: Any) -> list[dict[str, Any]]:
    """The records all of whose gold pages (``pages(record)``) the store holds."""
    wanted = {page for record in records for page in pages(record)}
    present = {record.title for record in store.get_pages(sorted(wanted))}
    return [record for record in records if set(pages(record)) <= present]


def feverous_pages(record: dict[str, Any]) -> set[str]:
    return {i.rpartition("_sentence_")[0] for i in gold_sets(record)[0]}


def bm25_sentences(store: Store, claim: str) -> list[str]:
    hits = store.search_text(claim, 5, Filters(types=(ElementType.SENTENCE,)))
    return [hit.element.id for hit in hits]


# The pipeline.


def make_pipeline(
    store: Store, reranker: str, hops: int, options: dict[str, dict[str, Any]]
) -> Pipeline:
    plugins = {**DEFAULT_PLUGINS, "reranker": reranker}
    config = PipelineConfig(plugins=plugins, options=options, hops=hops)
    return Pipeline(config, PluginContext(store, LazyEmbedder("cpu"), "cpu"))


def run_pipeline(
    pipeline: Pipeline, claims: Sequence[str], batch: int
) -> tuple[list[Retrieval], dict[str, Any]]:
    """The results, and what every set reports of them: pages, candidates (count, words)
    reaching the first rerank, and seconds, a claim."""
    started = time.perf_counter()
    counts: list[int] = []
    words: list[int] = []
    retriever = pipeline.candidates
    original = retriever.candidates

    def counted(query, pages):  # type: ignore[no-untyped-def]
        pool = original(query, pages)
        counts.append(len(pool))
        words.append(sum(len(c.element.linearized.split()) for c in pool))
        return pool

    retriever.candidates = counted  # type: ignore[method-assign]
    pipeline.seconds.clear()
    pipeline.context.embed(["warm up"])
    results: list[Retrieval] = []
    for start in range(0, len(claims), batch):
        results += pipeline.retrieve_many(claims[start : start + batch])
    retriever.candidates = original  # type: ignore[method-assign]
    return results, {
        "pages_per_claim": mean([len(r.pages) for r in results]),
        "candidates_per_claim": mean(counts),
        "candidate_words_per_claim": mean(words),
        "seconds_per_claim": {k: v / len(claims) for k, v in pipeline.seconds.items()},
        "wall_seconds_per_claim": (time.perf_counter() - started) / len(claims),
    }


def parse_shard(text: str) -> tuple[int, int]:
    part, _, parts = text.partition("/")
    try:
        i, n = int(part), int(parts)
    except ValueError:
        raise BenchError(f"shard {text!r} is not I/N, e.g. 0/2") from None
    if not 0 <= i < n:
        raise BenchError(f"shard {text!r}: I must be 0 … N-1")
    return i, n


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def retrieval(
    context: Context,
    *,
    store: str = "embedded",
    n_feverous: int = 300,
    n_tabfact: int = 300,
    seed: int = 0,
    reranker: str = "retrieval",
    hops: int = 0,
    batch: int = 16,
    stage_options: Mapping[str, dict[str, Any]] | None = None,
    shard: str = "0/1",
    in_index: bool = False,
    baseline: bool = True,
) -> dict[str, Any]:
    """The pipeline's evidence beside plain BM25 (``baseline``) on ``n_feverous`` FEVEROUS-S and
    ``n_tabfact`` TabFact dev claims drawn with ``seed`` (0: all)."""
    if store not in STORES:
        raise BenchError(f"store {store!r} is not one of {', '.join(STORES)}")
    options = dict(stage_options or {})
    where = str(context.place("index")) if store == "embedded" else ""
    opened = open_store(store, where)
    pipeline = make_pipeline(opened, reranker, hops, options)
    report: dict[str, Any] = {
        "store": store, "shard": shard, "reranker": reranker, "hops": hops, "seed": seed,
        "options": options,
    }  # fmt: skip
    part, parts = parse_shard(shard)
    feverous = seeded_sample(read_records(MINI / "feverous_s_dev.jsonl"), n_feverous, seed)
    if in_index:
        feverous = held(opened, [r for r in feverous if gold_sets(r)], feverous_pages)
    feverous = feverous[part::parts]
    if feverous:
        claims = [r["claim"] for r in feverous]
        sets = [gold_sets(r) for r in feverous]
        results, stats = run_pipeline(pipeline, claims, batch)
        sentences = [
            [c.element.id for c in r.evidence if c.element.type is ElementType.SENTENCE]
            for r in results
        ]
        page_recall = [
            all(i.rpartition("_sentence_")[0] in {p.page.title for p in r.pages} for i in s)
            for r, gs in zip(results, sets, strict=True)
            for s in gs[:1]
        ]
        section: dict[str, Any] = {
            "claims": len(claims),
            "pipeline_complete_recall@5": mean(
                [complete(p, s) for p, s in zip(sentences, sets, strict=True)]
            ),
            "page_recall": mean(page_recall),
            **stats,
        }
        if baseline:
            bm25 = [bm25_sentences(opened, claim) for claim in claims]
            section["bm25_complete_recall@5"] = mean(
                [complete(p, s) for p, s in zip(bm25, sets, strict=True)]
            )
        report["feverous_s"] = section

    tabfact = seeded_sample(read_records(MINI / "tabfact_dev.jsonl"), n_tabfact, seed)
    if in_index:
        tabfact = held(opened, tabfact, lambda record: {gold_table(record)[0]})
    tabfact = tabfact[part::parts]
    if tabfact:
        claims = [r["claim"] for r in tabfact]
        golds = [gold_table(r) for r in tabfact]
        results, stats = run_pipeline(pipeline, claims, batch)
        found = [hits_at(table_order(r.evidence), g) for r, g in zip(results, golds, strict=True)]
        section = {
            "claims": len(claims),
            "pipeline_hits": {k: mean([f[k] for f in found]) for k in HITS_AT},
            "tables_in_evidence": mean([len(table_order(r.evidence)) for r in results]),
            "page_recall": mean(
                [
                    g[0] in {p.page.title for p in r.pages}
                    for r, g in zip(results, golds, strict=True)
                ]
            ),
            **stats,
        }
        if baseline:
            found = [
                hits_at([key for key, _ in opened.search_tables(c, max(HITS_AT))], g)
                for c, g in zip(claims, golds, strict=True)
            ]
            section["bm25_hits"] = {k: mean([f[k] for f in found]) for k in HITS_AT}
        report["tabfact"] = section

    opened.close()
    print_report(report)
    return report


def print_report(report: dict[str, Any]) -> None:
    print(f"reranker={report['reranker']} hops={report['hops']} seed={report['seed']} "
          f"options={report['options']}")  # fmt: skip
    three = "{:.3f}".format
    sections = {
        "feverous_s": ("FEVEROUS-S, {} claims: complete recall@5 (5 sentences)", [
            ("plain BM25 over all sentences", "bm25_complete_recall@5", three),
            ("pipeline", "pipeline_complete_recall@5", three),
        ]),
        "tabfact": ("TabFact, {} claims: gold table Hits@1/5/10", [
            ("plain BM25 over whole tables", "bm25_hits", percent),
            ("pipeline", "pipeline_hits", percent),
            ("tables in the evidence", "tables_in_evidence", "{:.1f}".format),
        ]),
    }  # fmt: skip
    for key, (title, rows) in sections.items():
        section = report.get(key)
        if not section:
            continue
        print("\n" + title.format(section["claims"]))
        for label, figure, shown in rows:
            if figure in section:  # the BM25 baselines are optional
                print(f"  {label:<30} {shown(section[figure])}")
        print_common(section)


def percent(found: dict[int, float]) -> str:
    return " / ".join(f"{100 * found[k]:.1f}" for k in HITS_AT)


def print_common(section: dict[str, Any]) -> None:
    print(f"  page recall (all gold pages)   {section['page_recall']:.3f} "
          f"of {section['pages_per_claim']:.1f} pages")  # fmt: skip
    print(f"  candidates to the reranker     {section['candidates_per_claim']:.0f} "
          f"({section['candidate_words_per_claim']:.0f} words)")  # fmt: skip
    stages = " ".join(f"{k} {v:.3f}" for k, v in section["seconds_per_claim"].items())
    print(f"  seconds per claim: {stages}; wall {section['wall_seconds_per_claim']:.3f}")
