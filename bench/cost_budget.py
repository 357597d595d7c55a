"""The pipeline's cost budget: counts (not times) of what each stage does a claim.

Builds the embedded index of the repo's sample dump (129 pages) in a temporary directory,
verifies the 50 official dev claims (tests/data/feverous_dev_sample50.jsonl) one at a time with
the default pipeline, and prints what each stage counted a claim: model runs, rows (pairs) and
tokens, store calls and hits (feverous_es.runtime.costs). ``write`` makes these counts the
budget that tests/bench/test_cost_budget.py holds the pipeline to; a change that must cost more
writes it in the same commit. A count already budgeted higher keeps its budget: the int8
kernels differ between CPUs (AVX-512 VNNI or AVX2 only), so the same code reads a claim as
unsure on one and sure on another, and a budget written on one must hold on both (to lower a
count, delete its entry first).

    python -m bench run cost-budget                       # compare with the budget
    python -m bench run cost-budget --option write=true   # record a new budget
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from bench.context import Context
from bench.data import REPO
from bench.errors import BenchError

SAMPLE_DB = REPO / "sample" / "wiki.db"
CLAIMS = REPO / "tests" / "data" / "feverous_dev_sample50.jsonl"
BUDGET = REPO / "tests" / "data" / "cost-budget.json"


def sample_claims() -> list[str]:
    with CLAIMS.open(encoding="utf-8") as lines:
        return [json.loads(line)["claim"] for line in lines if line.strip()]


def sample_costs(index_root: Path) -> dict[str, dict[str, int]]:
    """The stage costs of the sample claims over a fresh index of the sample dump."""
    from bench.budget import claim_costs
    from feverous_es.index.building.builder import build
    from feverous_es.index.dump.wiki import WikiDB
    from feverous_es.index.embedded import EmbeddedWriter
    from feverous_es.runtime.embedder import Embedder
    from feverous_es.verify.pipeline import Pipeline

    index = index_root / "index"
    embedder = Embedder()
    writer = EmbeddedWriter(index, embedder.dim)
    try:
        with WikiDB(SAMPLE_DB) as db:
            build(db, writer, embedder)
    finally:
        writer.close()
    with Pipeline.open(index) as pipeline:
        return claim_costs(pipeline, sample_claims())


def cost_budget(context: Context, *, write: bool = False) -> dict[str, dict[str, int]]:
    """The counts of each stage over the sample claims; BenchError naming what is over the
    budget, unless ``write`` makes them the budget."""
    from bench.budget import over_budget

    with tempfile.TemporaryDirectory() as tmp:
        costs = sample_costs(Path(tmp))
    claims = len(sample_claims())
    for stage, counts in costs.items():
        print(stage)
        for name, count in counts.items():
            print(f"  {name:34s} {count:9,d}  ({count / claims:,.1f} a claim)")
    if write:
        before = json.loads(BUDGET.read_text(encoding="utf-8")) if BUDGET.exists() else {}
        kept = {
            stage: {name: max(count, before.get(stage, {}).get(name, 0))
                    for name, count in counts.items()}
            for stage, counts in costs.items()
        }  # fmt: skip
        BUDGET.write_text(json.dumps(kept, indent=1) + "\n", encoding="utf-8")
        print(f"budget written to {BUDGET.relative_to(REPO)}")
        return costs
    budget = json.loads(BUDGET.read_text(encoding="utf-8")) if BUDGET.exists() else {}
    problems = over_budget(costs, budget)
    if problems:
        raise BenchError("over budget: " + "; ".join(problems))
    return costs
