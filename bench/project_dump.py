"""A dump's projected build cost at another size: its counts scaled to N pages, then `plan`'s
projection with the shipped rates (or ``rates``).

    run = "bench.project_dump:projected_build"   # the driver's --wiki counted, projected to
    # ``pages`` (default: the full FEVEROUS dump's 5.4 M); options: pages, rates, workers (the
    # Elasticsearch build in parts: `plan --workers N` for each N)

For sizing before the big dump is at hand: the counts keep the measured dump's mix per page
(elements, vectors and tokens per page), which the big dump may not have. With the big dump,
`feverous-es plan BIG_DB --sample 20000` counts its own mix instead.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.console import Console

from bench.context import Context
from feverous_es.index.building import plan
from feverous_es.index.building.plan_report import print_plan
from feverous_es.index.dump.wiki import WikiDB

FULL_DUMP_PAGES = 5_400_000


def projected_build(
    context: Context,
    *,
    pages: int = FULL_DUMP_PAGES,
    rates: str | None = None,
    workers: tuple[int, ...] = (1, 4, 8, 16),
) -> dict:
    """Each store's and device's projected build of ``pages`` pages at the mix of the driver's
    --wiki, and the Elasticsearch build split among each number of ``workers``."""
    with WikiDB(context.place("wiki")) as db:
        measured = plan.count_dump(db, plan.TokenCounter())
    # A sample of `counted` pages out of `pages` scales up exactly as `plan --sample` does.
    counted = dataclasses.replace(measured, pages=pages, counted_pages=measured.pages)
    counts = counted.scaled()
    build_rates = plan.BuildRates.load(Path(rates) if rates else plan.RATES_FILE)
    projections = plan.project(counts, build_rates)
    print(f"{pages:,} pages at the mix of {context.place('wiki').name}:")
    print_plan(Console(), counts, build_rates, projections)
    parts = {}
    for n in workers:
        parts[str(n)] = [dataclasses.asdict(p) for p in plan.project_parts(projections, n)]
        cpu = parts[str(n)][0]
        print(f"  Elasticsearch in {n} parts, cpu: {plan.human_seconds(cpu['wall_s'])} "
              f"(workers pay up to {cpu['bulk_bound_from']})")  # fmt: skip
    return {
        "counts": dataclasses.asdict(counts),
        "projections": [dataclasses.asdict(p) for p in projections],
        "parts": parts,
    }
