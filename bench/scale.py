"""Scale benchmark: the embedded store built at 1x, 4x and 16x mini-FEVEROUS, side by side.

    python bench/scale.py WIKI_DB [--factors 1 4 16] [--work DIR] [--json results.json]
                              [--reuse 16]   # take 16x from the last run's figures

For each factor, bench/synth_dump.py writes a dump that many times the size of WIKI_DB (its real
pages and altered copies), and bench/store_search.py builds it in a fresh process with the
stand-in encoder (hashed words, no transformer: this measures the store, not the model), then
times BM25, kNN and hybrid top-100 search over real dev claims and HNSW recall@100 against exact
search. Prints per size: build time, elements/s, peak RSS, disk per element, search p50/p95 and
recall, and the linearity checks: build time and disk per element within 20 % of the smallest
build's, search p95 growing slower than the dump. The dumps and indexes live under --work
(default: a temporary directory) and each index is deleted once measured.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from results import bench_parser, save_figures  # bench/results.py

BENCH = Path(__file__).resolve().parent
LINEAR_TOLERANCE = 0.20
SEARCHES = ("text", "vector", "hybrid", "pages_vector")


def measure(wiki: Path, factor: int, work: Path, claims: int) -> dict:
    dump = work / f"wiki-{factor}x.db"
    if not dump.exists():
        subprocess.run(
            [sys.executable, BENCH / "synth_dump.py", wiki, str(factor), dump], check=True
        )
    index, figures = work / f"index-{factor}x", work / f"figures-{factor}x.json"
    shutil.rmtree(index, ignore_errors=True)
    command = [sys.executable, BENCH / "store_search.py", index, "--wiki", dump,
               "--claims", str(claims), "--json", figures]  # fmt: skip
    subprocess.run(command, check=True)
    shutil.rmtree(index)
    return {"factor": factor, **json.loads(figures.read_text())}


def check(rows: list[dict]) -> list[str]:
    """The issue's bounds, as lines ending in ok / OFF."""
    base, top = rows[0], rows[-1]
    lines = []
    for name, key in (("build time per element", "build_s"), ("disk per element", "disk_bytes")):
        ratio = (top[key] / top["elements"]) / (base[key] / base["elements"])
        verdict = "ok" if abs(ratio - 1) <= LINEAR_TOLERANCE else "OFF"
        lines.append(f"{name}, {top['factor']}x / {base['factor']}x: {ratio:.2f} {verdict}")
    growth = top["elements"] / base["elements"]
    for kind in SEARCHES:
        ratio = top["latency"][kind]["p95_ms"] / base["latency"][kind]["p95_ms"]
        verdict = "ok" if ratio < growth else "OFF"
        lines.append(f"{kind} p95 grew {ratio:.2f}x for a {growth:.0f}x dump: {verdict}")
    return lines


def print_table(rows: list[dict]) -> None:
    print(f"{'size':>5} {'elements':>12} {'vectors':>10} {'build':>8} {'el/s':>8} "
          f"{'peak RSS':>9} {'B/el':>6} " + " ".join(f"{k + ' p50/p95':>15}" for k in SEARCHES)
          + f" {'recall@100':>10}")  # fmt: skip
    for row in rows:
        latency = " ".join(
            f"{row['latency'][k]['p50_ms']:>7.1f}/{row['latency'][k]['p95_ms']:<7.1f}"
            for k in SEARCHES
        )
        recall = row["recall"].get("claims")
        print(
            f"{row['factor']:>4}x {row['elements']:>12,} {row['vectors']:>10,} "
            f"{row['build_s']:>7,.0f}s {row['elements'] / row['build_s']:>8,.0f} "
            f"{row['build_peak_rss_bytes'] / 2**30:>7.2f}GB "
            f"{row['disk_bytes'] / row['elements']:>6,.0f} {latency} "
            f"{recall if recall is not None else 'exact':>10}"
        )


def main() -> None:
    parser = bench_parser(__doc__)
    parser.add_argument("wiki", type=Path, help="the dump to grow (mini-FEVEROUS wiki.db)")
    parser.add_argument("--factors", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--work", type=Path, help="where dumps and indexes go (they are large)")
    parser.add_argument("--claims", type=int, default=200, help="claims for latency and recall")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument(
        "--reuse",
        type=int,
        nargs="*",
        default=[],
        help="factors whose figures an earlier run left in WORK/figures-<k>x.json (same code)",
    )
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="feverous-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = [
        {"factor": f, **json.loads((work / f"figures-{f}x.json").read_text())}
        if f in args.reuse
        else measure(args.wiki, f, work, args.claims)
        for f in sorted(args.factors)
    ]
    print_table(rows)
    lines = check(rows) if len(rows) > 1 else []
    for line in lines:
        print(line)
    save_figures(args, {"sizes": rows, "checks": lines})


if __name__ == "__main__":
    main()
