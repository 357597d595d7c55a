"""Write docs/benchmarks.md from the recorded runs in bench/results/*.json.

Every figure in that page comes out of a record (``--record NAME`` of a bench), shown with the
command, commit, date and machine that gave it; nothing is copied by hand. Run it after
recording a bench; ``--check`` exits 1 when the page is stale (the tests run it).

    python bench/benchmarks_doc.py          # rewrite docs/benchmarks.md
    python bench/benchmarks_doc.py --check
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"

# What each record measures and how to read it: words only, the figures come from the record.
ABOUT = {
    "index-mini": "The whole mini-FEVEROUS dump indexed into the embedded store: per-stage "
    "rates, the embedder's share of its standalone speed, peak memory, search latency.",
    "pipeline": "`verify` per claim in a new process (process start included), the warm "
    "API's p50 / p95 per claim and per stage with what each stage counted a claim (model "
    "inputs and tokens, store calls and hits), and `predict` throughput with the time per "
    "stage, on the embedded store (dev claims of FEVEROUS-S, FM2 and TabFact).",
    "sentence-ranker-student": "A 3-layer student of the packaged sentence ranker (layers 0, 2, "
    "4 of its own weights, 1 epoch on its scores of the training groups) beside it on the "
    "claims both held out: complete-evidence recall at 5 of the first-round pool, alone and "
    "fused with the retrieval score, and each model's time a claim.",
    "pipeline-elasticsearch": "The same as `pipeline`, on the Elasticsearch test node, and "
    "predict on the embedded index over the same claims in the same run (`--against`).",
    "retrieval-300": "Evidence retrieval against plain BM25 in the same run: FEVEROUS-S "
    "complete-evidence recall in the 5 sentences, TabFact gold-table Hits@k.",
    "retrieval-300-elasticsearch": "The same as `retrieval-300`, on the Elasticsearch test node "
    "(its analysis has no stemming or accent folding: see docs/elasticsearch.md).",
    "store-search-embedded": "Bulk write, size and search latency of every search kind, with "
    "HNSW recall against exact search, on a stand-in build.",
    "store-search-elasticsearch": "The same as `store-search-embedded`, on the Elasticsearch "
    "test node (a fresh node each run: its first queries are cold).",
    "models": "ONNX int8 against torch fp32 on the same real pairs (rounds alternated), and "
    "the reranker's and the embedder's throughput.",
    "verdict": "Verdict accuracy through the whole pipeline on claims the verdict models were "
    "not trained on, every model reading the same evidence, scored with the official metric.",
    "verdict-entailment": "The 3-way entailment verdict beside the shipped feature models on "
    "the same held-out claims and evidence, and NOT ENOUGH INFO with the retrieved evidence as "
    "is and with every gold element removed.",
    "verdict-entailment-e4": "The same comparison after two more epochs of the entailment model "
    "(warm-started from the first), its stacked feature verdicts retrained on its scores.",
    "verdict-entailment-e4-combo": "The best part per route put together (the 4-epoch "
    "entailment model, its stacked sentence verdict, the shipped table verdict) against the "
    "shipped models.",
    "table-features": "What the computed table features are worth: the table model on the gold "
    "table with all features, without the arithmetic, and the claim alone.",
    "contrastive-shipped": "The reader's failure classes on held-out claims made from the dump "
    "(bench/contrastive.py): each kind of changed attribute's REFUTES recall, the lead's "
    "SUPPORTS recall, NOT ENOUGH INFO against other subjects' sentences, and where misses went.",
    "contrastive-ft": "The shipped reader beside itself trained further on this CPU with the "
    "contrastive and table-NEI pairs (0.45 epoch from its own weights, lr 2e-5), on the same "
    "held-out contrastive claims and held-out training pairs.",
    "contrastive-cpu-retrain": "The shipped reader beside a MiniLM reader retrained on this CPU "
    "with the contrastive and table-NEI pairs (1 epoch, 800 pairs a source: a probe, not a "
    "candidate), on the same held-out contrastive claims and the same held-out training pairs "
    "(retrieved evidence as is and gold removed, gold tables).",
    "label-leaks": "Rules that never read the claim, on FEVEROUS-S: on this dump a claim's "
    "evidence count gives its label away; read FEVEROUS-S verdict figures beside these.",
    "house-retrieval": "The house refactor's behaviour check: `retrieval-300`'s run on the code "
    "before and after it, same index and claims (timings differ: the machine was shared).",
    "house-verdict": "The house refactor's behaviour check: the verdict bench on the code before "
    "and after it, same index and held-out claims.",
    "speed-retrieval": "The speed change's behaviour check: the retrieval bench on the code "
    "before it, after it, and after it with the row step turned back on (which gives the former "
    "figures exactly); same index and claims (timings differ: the runs shared the machine).",
    "speed-verdict": "The speed change's verdict check: the verdict bench on the same held-out "
    "claims with the row step on (the former candidate stage) and off (the default now).",
    "table-ranker": "Learned table rankings (pointwise gradient boosting; LambdaMART on the "
    "stage's features and on more) against the hand-weighted order over a pool widened by "
    "whole-table BM25: on training claims of held-out tables and on TabFact dev claims, with "
    "the share whose gold table is in the pool at all.",
    "table-signals": "Signals that rank every table on their own (word TF-IDF; a bi-encoder "
    "fine-tuned on TabFact training claims), and the bi-encoder's cosine added to the table "
    "score at several weights: gold-table Hits@k on TabFact dev claims.",
    "verdict-row-spans": "The verdict bench (`--per-file 400`) after the table score's "
    "`row_spans` part: the same held-out claims as `speed-verdict`.",
    "table-pool": "How often the gold table is in the pool a table ranking re-orders, per "
    "pool source (cell hits, whole-table BM25, both) and size, and what reading a bigger pool "
    "costs.",
    "row-step": "What the table ranking's cross-encoder row step buys against what it costs: "
    "gold-table Hits@1/5/10 of the same table scores with no row step, the ms-marco L-12 step "
    "over 15 tables, fewer tables and shorter pairs, and the row model's seconds a claim.",
    "serve": "The HTTP service: warm single claims, then concurrent clients (throughput, "
    "latency, errors, memory: resident, and anonymous, i.e. less the mapped index files).",
    "serve-soak": "The HTTP service soaked: 4 clients verifying distinct dev claims back to back, "
    "a record a minute (requests, errors, p50 / p95, and the server's anonymous and file-backed "
    "memory kept apart), memory read for flatness after the warm-up minutes.",
    "sentence-ranker": "The packaged sentence ranker against the retrieval order on the claims "
    "its training held out: complete-evidence recall at 5 sentences of the first-round pool "
    "(alone and fused with the retrieval score) and of the whole pipeline's evidence after 7 "
    "hops (15 and 25 first-round non-cells), and its time per claim.",
    "verdict-sentence-ranker": "The verdict on the default pipeline's evidence (the sentence "
    "ranker over 25 non-cells), on claims neither the verdict models nor the ranker trained on.",
    "verdict-retrieval-order": "The same claims and models on the pipeline before the sentence "
    "ranker (bench/retrieval-order.toml: retrieval order, 15 non-cells).",
    "table-features-entailment": "The table verdict with the entailment model's probabilities "
    "stacked on its features, beside the same features on the same training claims (those the "
    "entailment model scored) and the entailment model alone: held-out TabFact claims, gold table.",
    "verdict-entailment-gpu": "The shipped verdict since 2026-11-26 (the GPU-trained entailment "
    "model reads the sentence route, the table model the table route) beside the models before "
    "it and beside the same entailment model with a sentence verdict stacked on its scores: "
    "held-out claims of every model, the same evidence, NOT ENOUGH INFO as is and gold removed.",
    "verdict-nei-premises": "The same run after a claim routed to a table became NOT ENOUGH INFO "
    "only when its sentences lack the answer too (the lower NEI probability of the two premises), "
    "with the NEI probe reading every route and Malon (2021) §1's hop rule measured beside the "
    "thresholds.",
    "verdict-batch-independent": "The same run after the int8 cross-encoders (entailment verdict, "
    "sentence ranker) came to read one pair a model run: a claim's evidence and verdict no longer "
    "depend on the claims batched beside it. The shipped verdict's current figures.",
}


def rows(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """``(dotted path, shown value)`` of every leaf; lists of records are left out."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from rows(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        if all(not isinstance(v, dict | list) for v in value):
            yield path, ", ".join(shown(v) for v in value) or "—"
    else:
        yield path, shown(value)


def shown(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "—"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value).replace("|", "\\|")


def section(name: str, record: dict[str, Any]) -> str:
    table = "\n".join(f"| `{path}` | {value} |" for path, value in rows(record["figures"]))
    return f"""## {name}

{ABOUT.get(name, "")}

`{record["command"]}` — commit {record["commit"]}, {record["date"]}, {record["machine"]}
([{name}.json](../bench/results/{name}.json))

| figure | value |
|---|---|
{table}
"""


def page() -> str:
    records = sorted(RESULTS.glob("*.json"))
    body = "\n".join(
        section(path.stem, json.loads(path.read_text(encoding="utf-8"))) for path in records
    )
    return f"""# Benchmarks

Generated by `python bench/benchmarks_doc.py` from the records in `bench/results/` (each
bench's `--record NAME`); do not edit by hand. Fractions are shares (0.95 = 95 %), times in
the unit their name gives.

{body}"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale")
    args = parser.parse_args()
    text = page()
    if args.check:
        current = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
        if current != text:
            print(f"{PAGE} is stale: run python bench/benchmarks_doc.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
