"""Check `feverous-es plan` against a real build: projected and measured side by side.

    python -m bench run index-mini --record --wiki wiki.db --index INDEX --option keep=true
    python -m bench run plan-check --wiki wiki.db --index INDEX   # options: build_record, rates

Projects the embedded store's CPU build of the driver's --wiki from the rates file (default: the
rates shipped with the package) and prints, for wall time, each stage, disk and peak RSS, the
projection, the measured figure of the build (the record ``build_record`` of bench/index.py, kept
in bench/results/, and the size of the index it built, the driver's --index) and their
ratio; the plan's target is within 25 % for wall time, disk, peak RSS and the counts. Use rates
measured on another sample than the dump checked, or the check only repeats the measurement.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench.context import Context
from bench.results import RESULTS
from feverous_es.index.building.plan import (
    BuildRates,
    TokenCounter,
    count_dump,
    file_bytes,
    project,
)
from feverous_es.index.dump.wiki import WikiDB

TOLERANCE = 0.25
# The stages run concurrently and share the cores, so a stage's own time depends on what runs
# beside it; the plan answers for the totals.
CHECKED = ("wall_s", "disk_bytes", "peak_rss_bytes", "tokens", "vectors")


def plan_check(
    context: Context, *, build_record: str = "index-mini", rates: str | None = None
) -> dict:
    """The plan's projection of the dump's build beside the measured build."""
    wiki = context.place("wiki")
    build_rates = BuildRates.load(Path(rates)) if rates else BuildRates.load()
    with WikiDB(wiki) as db:
        counts = count_dump(db, TokenCounter())
    projections = project(counts, build_rates)
    plan = next(p for p in projections if (p.store, p.device) == ("embedded", "cpu"))
    built = json.loads((RESULTS / f"{build_record}.json").read_text())["figures"]
    disk = sum(file_bytes(context.place("index")).values())
    rows = {
        "wall_s": (plan.wall_s, built["wall_s"]),
        "embed_s": (plan.embed_s, built["stages_s"]["embed"]),
        "write_s": (plan.write_s, built["stages_s"]["write"]),
        "read_s": (plan.read_s, built["stages_s"]["read"]),
        "disk_bytes": (plan.disk_bytes, disk),
        "peak_rss_bytes": (plan.peak_rss_bytes, built["peak_rss_gb"] * 1024**3),
        "tokens": (counts.tokens, built["embed_tokens"]),
        "vectors": (counts.vectors, built["vectors"]),
    }
    figures = {
        name: {"projected": p, "measured": m, "ratio": round(p / m, 3) if p and m else None}
        for name, (p, m) in rows.items()
    }
    print(f"{wiki.name}: {counts.pages:,} pages, {counts.total_elements:,} elements")
    print(f"{'':16s} {'projected':>16s} {'measured':>16s} {'ratio':>7s}")
    for name, row in figures.items():
        ratio = row["ratio"]
        verdict = "(stage)" if name not in CHECKED else "ok"
        if name in CHECKED and (ratio is None or abs(ratio - 1) > TOLERANCE):
            verdict = "OFF"
        print(
            f"{name:16s} {row['projected']:>16,.1f} {row['measured']:>16,.1f} "
            f"{ratio if ratio is not None else '-':>7} {verdict}"
        )
    print(f"rates: {build_rates.measured}")
    return {"rates": build_rates.measured, "figures": figures}
