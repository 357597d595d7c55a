"""The table ranking's row step with each row model, side by side: gold-table Hits@1/5/10.

    run = "bench.row_ranker:row_step"   # on the mini index (--index); options: models, weights,
    # row_tables, depths, max_lengths, claims, n, seed, exclude, store

Each claim's tables are scored once by the candidate stage (``PapeloCandidates.table_scores``,
default options: whole-index pool, every part but the row step); then every variant re-ranks the
same first ``row_tables`` tables (default 15, the choice measured when the stage had the step
on; the stage now defaults to none): no row step, the default row model (ms-marco L-12) at the
stage's weight, and each of ``models`` (directories) at each of ``weights``. A row model scores
(claim, the table's best row as plain text), as at run time; its logits are computed once a claim
and model.
``depths`` adds the default model re-ranking only the first N tables, ``max_lengths`` the
default model reading at most N tokens a pair: what each costs is printed beside what it buys
(model seconds a claim).

``claims`` is a claim file with ``gold_tables`` (default: mini-FEVEROUS ``tabfact_dev``);
``n = 0`` takes every claim. ``exclude`` (a file): skip the claims whose ids a jsonl file lists
(``id`` field), e.g. those a model was trained on.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from bench.context import Context
from bench.data import MINI
from bench.errors import BenchError
from bench.ranking import HITS_AT, hits_at, print_hits
from feverous_es.eval.samples import gold_table, has_gold_table, read_records, seeded_sample
from feverous_es.index.backends import open_store
from feverous_es.plugins.interfaces import PluginContext, Query
from feverous_es.retrieve.candidates import PapeloCandidates
from feverous_es.retrieve.table_scores import best_cells, fuse_row_logits, row_texts
from feverous_es.runtime.cross_encoder import CrossEncoder


def row_step(
    context: Context,
    *,
    store: str = "embedded",
    models: Sequence[str] = (),
    weights: Sequence[float] = (0.5, 1.0, 2.0),
    row_tables: int = 15,
    depths: Sequence[int] = (),
    max_lengths: Sequence[int] = (),
    claims: str = "tabfact_dev.jsonl",
    n: int = 2000,
    seed: int = 303,
    exclude: str | None = None,
) -> dict:
    """Gold-table Hits@1/5/10 of each row-step variant on ``n`` claims of ``claims`` (a file of
    the data's minifeverous/ with gold tables; 0: all) drawn with ``seed``."""

    skipped: set[str] = set()
    if exclude:
        with Path(exclude).open(encoding="utf-8") as lines:
            skipped = {str(json.loads(line)["id"]) for line in lines if line.strip()}
    claim_file = MINI / claims
    held = read_records(claim_file, lambda r: has_gold_table(r) and str(r["id"]) not in skipped)
    records = seeded_sample(held, n, seed)
    if not records:
        raise BenchError(f"no claim with gold_tables in {claims}")
    where = str(context.place("index")) if store == "embedded" else ""
    opened = open_store(store, where)
    no_vectors = lambda texts: np.zeros((len(texts), 384))  # noqa: E731 (the row step reads none)
    stage = PapeloCandidates(PluginContext(opened, no_vectors, "cpu"))
    encoders = {"default": stage.row_encoder()}
    encoders |= {
        f"default max {n}": CrossEncoder(None, quantized=True, max_length=n, device="cpu")
        for n in max_lengths
    }
    encoders |= {str(path): CrossEncoder(path, quantized=True, device="cpu") for path in models}
    depth = row_tables  # the stage's own default is 0: no row step
    # (name, encoder, weight, tables re-ranked)
    variants = [("none", None, 0.0, 0), ("default", "default", stage.options.row_weight, depth)]
    variants += [(f"default top {d}", "default", stage.options.row_weight, d) for d in depths]
    variants += [(f"default max {n}", f"default max {n}", stage.options.row_weight, depth)
                 for n in max_lengths]  # fmt: skip
    variants += [(f"{m}@{w:g}", str(m), w, depth) for m in models for w in weights]
    found = {name: dict.fromkeys(HITS_AT, 0) for name, _, _, _ in variants}
    model_seconds = dict.fromkeys(encoders, 0.0)
    started = time.perf_counter()
    for done, record in enumerate(records, 1):
        claim = record["claim"]
        scores, hits = stage.table_scores(Query(claim, np.zeros(384, np.float32)))
        ranked = sorted(scores, key=lambda key: scores[key], reverse=True)
        rows = row_texts(opened, best_cells(hits), ranked[:depth])
        keyed = [key for key in ranked[:depth] if key in rows]
        pairs = [(claim, rows[key]) for key in keyed]
        logits = {}
        for name, encoder in encoders.items():
            scored = time.perf_counter()
            logits[name] = dict(zip(keyed, encoder.score(pairs) if pairs else [], strict=True))
            model_seconds[name] += time.perf_counter() - scored
        gold = gold_table(record)
        for name, model, weight, tables in variants:
            head, rest = ranked[:tables], ranked[tables:]
            order = fuse_row_logits(head, scores, logits[model], weight) + rest if model else ranked
            for at, hit in hits_at(order, gold).items():
                found[name][at] += hit
        if done % 250 == 0:
            each = (time.perf_counter() - started) / done
            print(f"{done}/{len(records)} claims, {each:.2f} s each", file=sys.stderr, flush=True)
    report = {
        "claims_file": claims,
        "claims": len(records),
        "seed": seed,
        "excluded": len(skipped),
        "row_tables": depth,
        "hits": {
            name: {str(at): round(100 * n / len(records), 1) for at, n in counts.items()}
            for name, counts in found.items()
        },
        "seconds_per_claim": round((time.perf_counter() - started) / len(records), 3),
        "model_seconds_per_claim": {
            name: round(seconds / len(records), 4) for name, seconds in model_seconds.items()
        },
    }
    print_hits(f"gold-table Hits@1 / 5 / 10, {len(records)} claims of {claims}:", report["hits"])
    print("row model seconds a claim (over the first row_tables tables):")
    for name, seconds in report["model_seconds_per_claim"].items():
        print(f"  {name:<40} {seconds:.3f}")
    return report
