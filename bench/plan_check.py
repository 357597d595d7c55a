"""Check `feverous-es plan` against a real build: projected and measured side by side.

    python bench/index.py --wiki wiki.db --out INDEX --claims 0 --json build.json
    python bench/plan_check.py wiki.db INDEX build.json [--rates RATES] [--json]

Projects the embedded store's CPU build of WIKI_DB from the rates file (default: the rates shipped
with the package) and prints, for wall time, each stage, disk and peak RSS, the projection, the
measured figure of the build (bench/index.py's report and the index directory's size) and their
ratio; the plan's target is within 25 % for wall time, disk, peak RSS and the counts. Use rates
measured on another sample than the dump checked, or the check only repeats the measurement.
"""

from __future__ import annotations

import json
from pathlib import Path

from results import bench_parser  # bench/results.py

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


def main() -> None:
    parser = bench_parser(__doc__, record=False)
    parser.add_argument("wiki", type=Path, help="the dump that was built")
    parser.add_argument("index", type=Path, help="the embedded index bench/index.py built")
    parser.add_argument("build_json", type=Path, help="bench/index.py --json report of it")
    parser.add_argument("--rates", type=Path, help="rates file (default: the shipped one)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()

    rates = BuildRates.load(args.rates) if args.rates else BuildRates.load()
    with WikiDB(args.wiki) as db:
        counts = count_dump(db, TokenCounter())
    plan = next(p for p in project(counts, rates) if (p.store, p.device) == ("embedded", "cpu"))
    built = json.loads(args.build_json.read_text())
    disk = sum(file_bytes(args.index).values())
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
    if args.json:
        print(json.dumps({"rates": rates.measured, "figures": figures}, indent=2))
        return
    print(f"{args.wiki}: {counts.pages:,} pages, {counts.total_elements:,} elements")
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
    print(f"rates: {rates.measured}")


if __name__ == "__main__":
    main()
