"""`feverous-es plan`'s printed report (also bench/project_dump.py's projection)."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table

from feverous_es.index.building.plan import (
    BuildRates,
    DumpCounts,
    PartsProjection,
    Projection,
    human_bytes,
    human_seconds,
)


def print_plan(
    out: Console,
    counts: DumpCounts,
    rates: BuildRates,
    projections: Sequence[Projection],
    parts: Sequence[PartsProjection] = (),
) -> None:
    """The counts, one row of projected costs per store and device, the build in parts (when
    planned), and where the rates come from."""
    sampled = (
        f" (from {counts.counted_pages:,} pages spread over the dump)"
        if counts.counted_pages < counts.pages
        else ""
    )
    out.width = max(out.width, 96)  # the table's nine columns, unwrapped, also when piped
    out.print(
        f"{counts.pages:,} pages{sampled}: {counts.total_elements:,} elements "
        f"({', '.join(f'{n:,} {kind}' for kind, n in counts.elements.items())}), "
        f"{counts.tables:,} tables, {counts.vectors:,} vectors, {counts.tokens:,} tokens to embed",
        highlight=False,
    )
    table = Table("store", "on", "wall", "embed", "write", "graphs", "peak RSS", "disk",
                  "ES RAM", box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip
    for p in projections:
        table.add_row(
            "elastic" if p.store == "elasticsearch" else p.store, p.device,
            human_seconds(p.wall_s), human_seconds(p.embed_s), human_seconds(p.write_s),
            human_seconds(p.graph_s), human_bytes(p.peak_rss_bytes), human_bytes(p.disk_bytes),
            human_bytes(p.node_vector_memory_bytes),
        )  # fmt: skip
    out.print(table)
    out.print(
        "wall = slowest of read / embed / write (they overlap) + graphs; peak RSS: the build "
        "process; ES RAM: page cache the node's kNN vectors want; '-': no rate measured.",
        highlight=False,
    )
    if parts:
        _print_parts(out, parts)
    for key, value in rates.measured.items():
        out.print(f"rates ({key}): {value}", highlight=False)


def _print_parts(out: Console, parts: Sequence[PartsProjection]) -> None:
    workers = parts[0].workers
    table = Table("elastic, in parts", "on", "wall", "one worker", "cluster's bulk floor",
                  "workers that pay", box=box.SIMPLE_HEAD, pad_edge=False)  # fmt: skip
    for p in parts:
        pays = "-" if p.bulk_bound_from is None else f"up to {p.bulk_bound_from:,}"
        table.add_row(f"{workers} workers", p.device, human_seconds(p.wall_s),
                      human_seconds(p.one_worker_s), human_seconds(p.bulk_s), pays)  # fmt: skip
    out.print(table)
    out.print(
        f"{workers} workers (`index --part I/{workers}`), each on its own machine of the rates' "
        "kind, writing to one cluster: wall = the slowest of a worker's share of read / embed "
        "and the cluster's bulk writing of the whole dump (at the node count the rate was "
        "measured on); past 'workers that pay' the cluster is the limit: add nodes, not workers. "
        f"It assumes {workers} primary shards (`feverous-es es new-build --shards {workers}` "
        "before the parts start): with one, every worker's bulk requests land on one node.",
        highlight=False,
    )
