"""The table ranking's row step with each row model, side by side: gold-table Hits@1/5/10.

    python bench/row_ranker.py INDEX [--model DIR …] [--weights 0.5 1 2] [--row-tables 15]
                               [--depths 3 5 8] [--max-lengths 128]
                               [--claims tabfact_dev.jsonl] [-n 2000] [--seed 303] [--json OUT]

Each claim's tables are scored once by the candidate stage (``PapeloCandidates.table_scores``,
default options: whole-index pool, every part but the row step); then every variant re-ranks the
same first ``--row-tables`` tables (default 15, the choice measured when the stage had the step
on; the stage now defaults to none): no row step, the default row model (ms-marco L-12) at the
stage's weight, and each ``--model`` at each ``--weights``. A row model scores (claim, the
table's best row as plain text), as at run time; its logits are computed once a claim and model.
``--depths`` adds the default model re-ranking only the first N tables, ``--max-lengths`` the
default model reading at most N tokens a pair: what each costs is printed beside what it buys
(model seconds a claim).

``--claims`` is a claim file with ``gold_tables`` (default: mini-FEVEROUS ``tabfact_dev``);
``-n 0`` takes every claim. ``--exclude FILE``: skip the claims whose ids a jsonl file lists
(``id`` field), e.g. those a model was trained on.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from data import MINI  # bench/data.py
from results import bench_parser, save_figures  # bench/results.py

from feverous_es.eval.ranking import HITS_AT, hits_at, print_hits
from feverous_es.eval.samples import gold_table, has_gold_table, read_records, seeded_sample
from feverous_es.index.backends import STORES, open_store
from feverous_es.plugins.interfaces import PluginContext, Query
from feverous_es.retrieve.candidates import PapeloCandidates
from feverous_es.retrieve.table_scores import best_cells, fuse_row_logits, row_texts
from feverous_es.runtime.cross_encoder import CrossEncoder


def main(argv: Sequence[str] | None = None) -> int:
    parser = bench_parser(__doc__)
    parser.add_argument("index", help="embedded index directory (or the cluster, see --store)")
    parser.add_argument("--store", choices=STORES, default="embedded")
    parser.add_argument("--model", type=Path, action="append", default=[], help="row model dir")
    parser.add_argument("--weights", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--row-tables", type=int, default=15, help="tables the row step reads")
    parser.add_argument("--depths", type=int, nargs="*", default=[], help="tables re-ranked")
    parser.add_argument("--max-lengths", type=int, nargs="*", default=[], help="tokens a pair")
    parser.add_argument("--claims", type=Path, default=MINI / "tabfact_dev.jsonl")
    parser.add_argument("-n", type=int, default=2000, help="claims drawn (0: all)")
    parser.add_argument("--seed", type=int, default=303)
    parser.add_argument("--exclude", type=Path, help="jsonl whose `id`s are skipped")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    exclude = set()
    if args.exclude:
        with args.exclude.open(encoding="utf-8") as lines:
            exclude = {str(json.loads(line)["id"]) for line in lines if line.strip()}
    held = read_records(args.claims, lambda r: has_gold_table(r) and str(r["id"]) not in exclude)
    records = seeded_sample(held, args.n, args.seed)
    if not records:
        sys.exit(f"error: no claim with gold_tables in {args.claims}")
    store = open_store(args.store, args.index)
    stage = PapeloCandidates(PluginContext(store, lambda texts: np.zeros((len(texts), 384)), "cpu"))
    encoders = {"default": stage.row_encoder()}
    encoders |= {
        f"default max {n}": CrossEncoder(None, quantized=True, max_length=n, device="cpu")
        for n in args.max_lengths
    }
    encoders |= {str(path): CrossEncoder(path, quantized=True, device="cpu") for path in args.model}
    depth = args.row_tables  # the stage's own default is 0: no row step
    # (name, encoder, weight, tables re-ranked)
    variants = [("none", None, 0.0, 0), ("default", "default", stage.options.row_weight, depth)]
    variants += [(f"default top {d}", "default", stage.options.row_weight, d) for d in args.depths]
    variants += [(f"default max {n}", f"default max {n}", stage.options.row_weight, depth)
                 for n in args.max_lengths]  # fmt: skip
    variants += [(f"{m}@{w:g}", str(m), w, depth) for m in args.model for w in args.weights]
    found = {name: dict.fromkeys(HITS_AT, 0) for name, _, _, _ in variants}
    model_seconds = dict.fromkeys(encoders, 0.0)
    started = time.perf_counter()
    for done, record in enumerate(records, 1):
        claim = record["claim"]
        scores, hits = stage.table_scores(Query(claim, np.zeros(384, np.float32)))
        ranked = sorted(scores, key=lambda key: scores[key], reverse=True)
        rows = row_texts(store, best_cells(hits), ranked[:depth])
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
        "claims_file": str(args.claims),
        "claims": len(records),
        "seed": args.seed,
        "excluded": len(exclude),
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
    print_hits(
        f"gold-table Hits@1 / 5 / 10, {len(records)} claims of {args.claims.name}:", report["hits"]
    )
    print("row model seconds a claim (over the first row_tables tables):")
    for name, seconds in report["model_seconds_per_claim"].items():
        print(f"  {name:<40} {seconds:.3f}")
    save_figures(args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
