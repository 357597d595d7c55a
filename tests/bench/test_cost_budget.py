"""The pipeline holds to its cost budget (bench.budget): counts, not times."""

from __future__ import annotations

import json
import threading
from collections import Counter
from pathlib import Path

import pytest

from bench.budget import SLACK, claim_costs, over_budget
from feverous_es.runtime.costs import METER, CountedStore
from feverous_es.verify.pipeline import Pipeline

DATA = Path(__file__).parents[1] / "data"
BUDGET = DATA / "cost-budget.json"


def sample_claims() -> list[str]:
    lines = (DATA / "feverous_dev_sample50.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["claim"] for line in lines if line.strip()]


@pytest.fixture(scope="module")
def sample_costs(sample_index: Path) -> dict[str, dict[str, int]]:
    with Pipeline.open(sample_index) as pipeline:
        return claim_costs(pipeline, sample_claims())


def test_the_pipeline_costs_no_more_than_its_budget(sample_costs: dict) -> None:
    budget = json.loads(BUDGET.read_text(encoding="utf-8"))
    problems = over_budget(sample_costs, budget)
    assert not problems, (
        "the pipeline now costs more than tests/data/cost-budget.json allows:\n"
        + "\n".join(problems)
        + "\nif it must, record the new budget with "
        + "`python -m bench run cost-budget --option write=true`"
    )


def test_each_stage_counts_its_own_work(sample_costs: dict) -> None:
    claims = len(sample_claims())
    # Every claim is embedded once and reranked by the sentence ranker one pair a run (int8).
    assert sample_costs["embed"]["embedder rows"] == claims
    ranker = sample_costs["rerank"]
    assert ranker["sentence-ranker runs"] == ranker["sentence-ranker rows"] > claims
    assert sample_costs["candidates"]["store search_cells hits"] > 0
    assert "sentence-ranker rows" not in sample_costs["candidates"]


def test_a_raised_count_or_an_unbudgeted_one_is_named() -> None:
    budget = {"rerank": {"sentence-ranker rows": 1000}}
    within = {"rerank": {"sentence-ranker rows": int(1000 * (1 + SLACK))}}
    assert over_budget(within, budget) == []
    raised = over_budget({"rerank": {"sentence-ranker rows": 1100}}, budget)
    assert raised == ["rerank: sentence-ranker rows = 1100, over its budget of 1000"]
    new = over_budget({"verdict": {"verdict rows": 5}}, budget)
    assert new == ["verdict: verdict rows = 5, not in the budget"]


def test_a_counted_store_counts_calls_and_hits_and_passes_the_rest(sample_index: Path) -> None:
    from feverous_es.index.backends import open_store

    store = CountedStore(open_store("embedded", sample_index))
    try:
        with METER.tally() as counted:
            hits = store.search_text("Chile", 7)
        assert counted == Counter({"store search_text calls": 1, "store search_text hits": 7})
        assert len(hits) == 7 and store.concurrent_claims == store.wrapped.concurrent_claims
    finally:
        store.close()


def test_a_tally_counts_its_own_threads_work_only(sample_index: Path) -> None:
    """A stage's costs hold its own work while another thread works for the next batch."""
    from feverous_es.index.backends import open_store

    store = CountedStore(open_store("embedded", sample_index))
    try:
        with METER.tally() as outer:
            with METER.tally() as inner:
                store.search_text("Chile", 3)
                elsewhere = threading.Thread(target=store.search_text, args=("Peru", 5))
                elsewhere.start()
                elsewhere.join()
            store.search_text("Chile", 2)
        assert inner == Counter({"store search_text calls": 1, "store search_text hits": 3})
        assert outer == Counter({"store search_text calls": 2, "store search_text hits": 5})
    finally:
        store.close()
