"""`feverous-es plan`'s printed report (also bench/project_dump.py's projection)."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console
from rich.table import Table

from feverous_es.index.building.plan import (
    BuildRates,
    DumpCounts,
    Projection,
    human_bytes,
    human_seconds,
)


def print_plan(
    out: Console, counts: DumpCounts, rates: BuildRates, projections: Sequence[Projection]
) -> None:
    """The counts, one row of projected costs per store and device, and where the rates come
    from."""
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
    for key, value in rates.measured.items():
        out.print(f"rates ({key}): {value}", highlight=False)
