"""A dump's projected build cost at another size: its counts scaled to N pages, then `plan`'s
projection with the shipped rates (or --rates).

    feverous-es plan wiki.db --json > plan.json
    python bench/project_dump.py plan.json --pages 5400000

For sizing before the big dump is at hand: the counts keep the measured dump's mix per page
(elements, vectors and tokens per page), which the big dump may not have. With the big dump,
`feverous-es plan BIG_DB --sample 20000` counts its own mix instead.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from results import bench_parser  # bench/results.py
from rich.console import Console

from feverous_es.index.building import plan
from feverous_es.index.building.plan_report import print_plan


def main() -> None:
    parser = bench_parser(__doc__, record=False)
    parser.add_argument("plan_json", type=Path, help="`feverous-es plan WIKI_DB --json` output")
    parser.add_argument("--pages", type=int, required=True, help="pages of the dump to project")
    parser.add_argument("--rates", type=Path, default=plan.RATES_FILE)
    parser.add_argument("--json", action="store_true", help="print the projection as JSON")
    args = parser.parse_args()

    measured = plan.DumpCounts(**json.loads(args.plan_json.read_text())["counts"])
    # A sample of `counted` pages out of `--pages` scales up exactly as `plan --sample` does.
    counted = dataclasses.replace(measured, pages=args.pages, counted_pages=measured.pages)
    counts = counted.scaled()
    rates = plan.BuildRates.load(args.rates)
    projections = plan.project(counts, rates)
    if args.json:
        rows = [dataclasses.asdict(p) for p in projections]
        print(json.dumps({"counts": dataclasses.asdict(counts), "projections": rows}, indent=2))
        return
    print(f"{args.pages:,} pages at the mix of {args.plan_json}:")
    print_plan(Console(), counts, rates, projections)


if __name__ == "__main__":
    main()
