"""How often a claim's gold table is in the pool of tables the candidate stage ranks: the ceiling
of any table ranking (issue 33), per pool source and size, and what a bigger pool costs.

    run = "bench.table_pool:table_pool"   # on the mini index (--index), or with store =
    # "elasticsearch" the cluster of FEVEROUS_ES_URL; options: claims, seed, pools, depths

Pool sources, each cut to every ``pools`` size, on ``claims`` claims of ``tabfact_dev`` (drawn
with ``seed``; 303 is the draw `bench/row_ranker.py` reports):

* ``cells@D``: the tables of the best ``D`` (``depths``) BM25 hits among table cells, in the
  order of their best hit (``Store.search_cell_tables``; the stage's pool is ``cells@2000`` cut
  to 50);
* ``whole tables``: the best tables by whole-table BM25 over every table (``Store.search_tables``);
* ``cells@2000 + whole``: the two taken in turn, each table once.

The cost: the search that reads the pool tables' elements matching the claim (the stage's second
search, ``fetch_limit`` 6000), hits and milliseconds a claim, per pool size of ``cells@2000``.
Nothing here changes the pipeline.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Sequence

from bench.context import Context
from bench.data import MINI
from feverous_es.eval.samples import gold_table, table_claims
from feverous_es.index.backends import open_store
from feverous_es.index.elements import TABLE_CELL_TYPES, TABLE_TYPES
from feverous_es.index.store import Filters, TableKey

FETCH_LIMIT = 6000  # the candidate stage's fetch_limit


def in_turn(first: Sequence[TableKey], second: Sequence[TableKey]) -> list[TableKey]:
    """``first`` and ``second`` taken one from each in turn, each table once."""
    merged: dict[TableKey, None] = {}
    for pair in itertools.zip_longest(first, second):
        merged.update((key, None) for key in pair if key is not None)
    return list(merged)


def table_pool(
    context: Context,
    *,
    store: str = "embedded",
    claims: int = 1000,
    seed: int = 303,
    pools: Sequence[int] = (50, 100, 200),
    depths: Sequence[int] = (2000, 5000),
) -> dict:
    """How often the gold table is in each pool, on ``claims`` tabfact_dev claims drawn with
    ``seed``, and what the fetch of a bigger pool costs."""

    records = table_claims(MINI / "tabfact_dev.jsonl", claims, seed)
    where = str(context.place("index")) if store == "embedded" else ""
    opened = open_store(store, where)
    largest = max(pools)
    found: dict[str, list[bool]] = {}
    fetched: dict[int, list[tuple[int, float]]] = {pool: [] for pool in pools}
    search_ms: dict[str, list[float]] = {}

    def pool_of(name: str, tables: list[TableKey], gold: TableKey) -> None:
        for size in pools:
            found.setdefault(f"{name}, {size}", []).append(gold in tables[:size])

    for record in records:
        claim, gold = record["claim"], gold_table(record)
        by_cells: dict[int, list[TableKey]] = {}
        for depth in depths:
            started = time.perf_counter()
            by_cells[depth] = opened.search_cell_tables(
                claim, depth, Filters(types=TABLE_CELL_TYPES)
            )
            search_ms.setdefault(f"cells@{depth}", []).append(time.perf_counter() - started)
            pool_of(f"cells@{depth}", by_cells[depth], gold)
        started = time.perf_counter()
        whole = [key for key, _ in opened.search_tables(claim, largest)]
        search_ms.setdefault("whole tables", []).append(time.perf_counter() - started)
        pool_of("whole tables", whole, gold)
        stage_pool = by_cells[depths[0]]
        pool_of(f"cells@{depths[0]} + whole", in_turn(stage_pool, whole), gold)
        for size in pools:
            within = Filters(types=TABLE_TYPES, tables=tuple(stage_pool[:size]))
            started = time.perf_counter()
            hits = opened.search_cells(claim, FETCH_LIMIT, within)
            fetched[size].append((len(hits), time.perf_counter() - started))
    opened.close()

    figures = {
        "claims": len(records),
        "seed": seed,
        "gold_in_pool_pct": {name: 100 * sum(hits) / len(hits) for name, hits in found.items()},
        "search_ms_per_claim": {
            name: 1000 * statistics.mean(seconds) for name, seconds in search_ms.items()
        },
        "fetch_per_claim": {
            str(size): {
                "hits": statistics.mean(n for n, _ in rows),
                "ms": 1000 * statistics.mean(s for _, s in rows),
            }
            for size, rows in fetched.items()
        },
    }
    print(f"gold table in the pool, {len(records)} tabfact_dev claims (seed {seed}):")
    for name, pct in figures["gold_in_pool_pct"].items():
        print(f"  {name:<32} {pct:5.1f} %")
    print("search a claim: " + ", ".join(
        f"{name} {ms:.1f} ms" for name, ms in figures["search_ms_per_claim"].items()))  # fmt: skip
    print(f"fetch of the pool tables' matching elements (cells@{depths[0]} pools):")
    for size, cost in figures["fetch_per_claim"].items():
        print(f"  {size:>4} tables: {cost['hits']:7.0f} hits, {cost['ms']:6.1f} ms a claim")
    return figures
