"""A dump's projected build cost at another size: its counts scaled to N pages, then `plan`'s
projection with the shipped rates (or --rates).

    feverous-es plan wiki.db --json > plan.json
    python bench/project_dump.py plan.json --pages 5400000

For sizing before the big dump is at hand: the counts keep the measured dump's mix per page
(elements, vectors and tokens per page), which the big dump may not have. With the big dump,
`feverous-es plan BIG_DB --sample 20000` counts its own mix instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from feverous_es.index import plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plan_json", type=Path, help="`feverous-es plan WIKI_DB --json` output")
    parser.add_argument("--pages", type=int, required=True, help="pages of the dump to project")
    parser.add_argument("--rates", type=Path, default=plan.RATES_FILE)
    parser.add_argument("--json", action="store_true", help="print the projection as JSON")
    args = parser.parse_args()

    measured = plan.DumpCounts(**json.loads(args.plan_json.read_text())["counts"])
    # A sample of `counted` pages out of `--pages` scales up exactly as `plan --sample` does.
    counted = dataclasses.replace(measured, pages=args.pages, counted_pages=measured.pages)
    counts = counted.scaled()
    projections = plan.project(counts, plan.BuildRates.load(args.rates))
    if args.json:
        rows = [dataclasses.asdict(p) for p in projections]
        print(json.dumps({"counts": dataclasses.asdict(counts), "projections": rows}, indent=2))
        return
    print(
        f"{counts.pages:,} pages at {args.plan_json}'s mix: {counts.total_elements:,} elements, "
        f"{counts.vectors:,} vectors, {counts.tokens:,} tokens"
    )
    print(f"{'store':<14}{'on':<6}{'wall':>12}{'embed':>12}{'write':>12}{'graphs':>12}"
          f"{'peak RSS':>11}{'disk':>11}{'ES RAM':>11}")  # fmt: skip
    for p in projections:
        print(
            f"{p.store:<14}{p.device:<6}{plan.human_seconds(p.wall_s):>12}"
            f"{plan.human_seconds(p.embed_s):>12}{plan.human_seconds(p.write_s):>12}"
            f"{plan.human_seconds(p.graph_s):>12}{plan.human_bytes(p.peak_rss_bytes):>11}"
            f"{plan.human_bytes(p.disk_bytes):>11}{plan.human_bytes(p.node_vector_memory_bytes):>11}"
        )


if __name__ == "__main__":
    main()
