"""An Elasticsearch build by one worker against the same build by several (``index --part I/N``
run as parallel processes), on the first pages of the mini dump, beside the planner's projection
of each from the shipped rates.

    run = "bench.index_parts:index_parts"   # the driver's --wiki (default: the mini dump) into
    # the cluster of FEVEROUS_ES_URL; options: limit (the dump's first N pages), workers

Each build goes under a fresh prefix ``feverous-bench-<random>`` (deleted afterwards) with the
real embedder, each worker a ``feverous-es index`` process as a user starts one, into a build
made first with as many primary shards as workers (``es new-build --shards N``, as docs/scale.md
says to). Wall time is from the first worker's start to the last one's end (the last publishes);
elements a second are the build's over that wall time, beside the ceiling no number of workers
passes: the node's bulk rate of the shipped rates (``write_elements_per_s``). On one machine the
workers share its cores: this measures what splitting costs or saves *there* (on 2 cores the
embedder already uses both, so two workers cannot be faster); the planner's projection is for a
machine a worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path

from bench.context import Context
from bench.data import REPO
from bench.errors import BenchError
from feverous_es.index.building import plan
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.index.elastic.builds import delete_prefix
from feverous_es.index.elastic.config import load_config


def index_parts(
    context: Context, *, limit: int = 1500, workers: tuple[int, ...] = (1, 2, 4)
) -> dict:
    """Each number of ``workers`` building the dump's first ``limit`` pages into the cluster."""
    if not os.environ.get("FEVEROUS_ES_URL"):
        raise BenchError(
            "index-parts builds into the cluster of FEVEROUS_ES_URL: set it (and "
            "FEVEROUS_ES_USER / _PASSWORD), e.g. from `scripts/es_test_node.py start`"
        )
    ceiling = plan.BuildRates.load().write_elements_per_s.get("elasticsearch")
    figures: dict = {"limit": limit, "cores": os.cpu_count(),
                     "bulk_ceiling_elements_per_s": ceiling}  # fmt: skip
    with tempfile.TemporaryDirectory() as work:
        wiki = context.dump(Path(work))
        with WikiDB(wiki) as db:
            pages = min(db.count(), limit)
        for n in workers:
            figures[str(n)] = _build(wiki, limit, n)
            counts = plan.DumpCounts(pages=pages, counted_pages=pages,
                                     elements={"all": figures[str(n)]["elements"]},
                                     vectors=figures[str(n)]["vectors"],
                                     tokens=figures[str(n)]["tokens"])  # fmt: skip
            projections = plan.project(counts, plan.BuildRates.load())
            [cpu, _] = plan.project_parts(projections, n)
            figures[str(n)]["projected_wall_s"] = cpu.wall_s
            built = figures[str(n)]
            print(f"{n} worker(s): {built['wall_s']:.1f} s, {built['elements_per_s']:,.0f} "
                  f"elements/s (projected {cpu.wall_s:.1f} s with a machine a worker)")  # fmt: skip
    return figures


def _build(wiki: Path, limit: int, workers: int) -> dict:
    """One build of the first ``limit`` pages by ``workers`` parallel processes."""
    prefix = f"feverous-bench-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "FEVEROUS_ES_PREFIX": prefix, "FEVEROUS_ES_REPLICAS": "0"}
    cli = [sys.executable, "-m", "feverous_es"]
    command = [*cli, "index", str(wiki), "--store", "elasticsearch", "--limit", str(limit),
               "--json"]  # fmt: skip
    started = time.perf_counter()
    created = subprocess.run([*cli, "es", "new-build", "--shards", str(workers)], env=env,
                             cwd=REPO, capture_output=True, text=True)  # fmt: skip
    if created.returncode:
        raise BenchError(f"es new-build failed: {created.stderr.strip()}")
    processes = [
        subprocess.Popen(
            [*command, "--part", f"{i}/{workers}"],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(1, workers + 1)
    ]
    try:
        reports = []
        for process in processes:
            stdout, stderr = process.communicate()
            if process.returncode:
                raise BenchError(f"a worker failed: {stderr.strip().splitlines()[-1:]}")
            reports.append(json.loads(stdout))
        wall = time.perf_counter() - started
    finally:
        delete_prefix(replace(load_config(), prefix=prefix))
    elements = sum(r["elements"] for r in reports)
    return {
        "wall_s": round(wall, 2), "elements": elements,
        "vectors": sum(r["vectors"] for r in reports),
        "tokens": sum(r["embed"]["tokens"] for r in reports),
        "elements_per_s": round(elements / wall, 1), "shards": workers,
        "embed_s_by_worker": [round(r["embed"]["seconds"], 2) for r in reports],
    }  # fmt: skip
