"""Scale benchmark: the embedded store built at 1x, 4x and 16x mini-FEVEROUS, side by side.

    run = "bench.scale:scale"   # grows the driver's --wiki; options: factors, work, claims, reuse
    # (factors whose figures an earlier run left in WORK/figures-<k>x.json, same code)

For each factor, bench/synth_dump.py writes a dump that many times the size of the dump (its real
pages and altered copies), and bench/store_search.py builds it in a fresh process with the
stand-in encoder (hashed words, no transformer: this measures the store, not the model), then
times BM25, kNN and hybrid top-100 search over real dev claims and HNSW recall@100 against exact
search. Prints per size: build time, elements/s, peak RSS, disk per element, search p50/p95 and
recall, and the linearity checks: build time and disk per element within 20 % of the smallest
build's, search p95 growing slower than the dump. The dumps and indexes live under ``work``
(they are large; default: a temporary directory) and each index is deleted once measured.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import tempfile
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench.context import Context
from bench.store_search import Build, embedded_figures
from bench.synth_dump import synthesize
from feverous_es.index.dump.wiki import WikiDB, write_dump

LINEAR_TOLERANCE = 0.20
SEARCHES = ("text", "vector", "hybrid", "pages_vector")


def measure(wiki: Path, factor: int, work: Path, claims: int) -> dict:
    dump = work / f"wiki-{factor}x.db"
    if not dump.exists():
        with WikiDB(wiki) as db:
            write_dump(dump, synthesize(db, factor))
    index, figures = work / f"index-{factor}x", work / f"figures-{factor}x.json"
    shutil.rmtree(index, ignore_errors=True)
    # A fresh process a build: its peak RSS is that build's alone.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=spawn) as fresh:
        measured = fresh.submit(embedded_figures, index, Build(dump, claims=claims)).result()
    figures.write_text(json.dumps(measured, indent=2) + "\n", encoding="utf-8")
    shutil.rmtree(index)
    return {"factor": factor, **measured}


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


def scale(
    context: Context,
    *,
    factors: Sequence[int] = (1, 4, 16),
    work: str | None = None,
    claims: int = 200,
    reuse: Sequence[int] = (),
) -> dict:
    """The store built at each of ``factors`` times the driver's --wiki, side by side, and the
    linearity checks; ``claims`` claims for latency and recall."""
    wiki = context.place("wiki")
    folder = Path(work) if work else Path(tempfile.mkdtemp(prefix="feverous-scale-"))
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        {"factor": f, **json.loads((folder / f"figures-{f}x.json").read_text())}
        if f in reuse
        else measure(wiki, f, folder, claims)
        for f in sorted(factors)
    ]
    print_table(rows)
    lines = check(rows) if len(rows) > 1 else []
    for line in lines:
        print(line)
    return {"sizes": rows, "checks": lines}
