"""`feverous-es plan`: the dump counts a build will meet, and the projection made from them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.errors import PlanError
from feverous_es.index.building.builder import build
from feverous_es.index.building.plan import (
    FULL_SHARD_GRAPH_FACTOR,
    BuildRates,
    DumpCounts,
    TokenCounter,
    count_dump,
    measure_rates,
    project,
)
from feverous_es.index.dump.wiki import WikiDB, write_dump
from feverous_es.index.embedded import WRITER_BUFFER_BYTES, EmbeddedWriter
from feverous_es.runtime.embedder import Embedder
from tests.conftest import SAMPLE_DB


def test_counts_are_what_a_build_of_the_dump_produces(tmp_path: Path) -> None:
    with WikiDB(SAMPLE_DB) as db:
        write_dump(tmp_path / "part.db", [(i, d) for _, i, d in db.spread_rows(40)])
    embedder = Embedder()
    writer = EmbeddedWriter(tmp_path / "index", embedder.dim)
    with WikiDB(tmp_path / "part.db") as db:
        report = build(db, writer, embedder)
        counts = count_dump(db, TokenCounter())
    writer.close()

    assert (counts.pages, counts.counted_pages) == (40, 40)
    assert counts.total_elements == report.elements
    assert counts.vectors == report.vectors
    assert counts.tokens == report.embed.tokens  # vector texts and page records, truncated
    assert counts.tables > 0 and counts.elements["cell"] > counts.elements["sentence"]


def test_spread_rows_reach_the_end_of_the_dump_in_order() -> None:
    with WikiDB(SAMPLE_DB) as db:
        every = [rowid for rowid, _, _ in db.rows()]
        spread = [rowid for rowid, _, _ in db.spread_rows(10)]
        everything = [rowid for rowid, _, _ in db.spread_rows(10 * len(every))]
    assert len(spread) == 10 and spread == sorted(set(spread))
    assert spread[0] == every[0] and spread[-1] >= every[-len(every) // 10]
    assert everything == every  # asking for more than there is gives each page once


def test_a_sample_count_is_scaled_to_the_whole_dump() -> None:
    with WikiDB(SAMPLE_DB) as db:
        exact = count_dump(db, TokenCounter())
        sampled = count_dump(db, TokenCounter(), sample=43)
    scaled = sampled.scaled()
    assert sampled.counted_pages == 43 and scaled.pages == exact.pages
    assert scaled.total_elements == pytest.approx(exact.total_elements, rel=0.5)
    assert scaled.vectors > sampled.vectors and exact.scaled() == exact


def _rates(**changes: object) -> BuildRates:
    rates = BuildRates(
        read_elements_per_s=20_000.0,
        embed_tokens_per_s={"cpu": 10_000.0, "cuda": None},
        write_elements_per_s={"embedded": 8_000.0, "elasticsearch": 5_000.0},
        graph_seconds_per_vector=0.001,
        graph_bytes_per_vector=500.0,
        bytes_per_element={"embedded": 600.0, "elasticsearch": 1_000.0},
        bytes_per_vector={"embedded": 1_536.0, "elasticsearch": 2_000.0},
        bytes_per_page={"embedded": 1_536.0, "elasticsearch": None},
        base_rss_bytes=1e9,
    )
    return dataclasses.replace(rates, **changes)


def _by(projections: list, store: str, device: str):
    return next(p for p in projections if (p.store, p.device) == (store, device))


def test_wall_time_is_the_slowest_stage_plus_the_graphs() -> None:
    counts = DumpCounts(pages=1_000, counted_pages=1_000, elements={"cell": 400_000},
                        vectors=200_000, tokens=5_000_000)  # fmt: skip
    embedded = _by(project(counts, _rates()), "embedded", "cpu")
    assert embedded.embed_s == 500 and embedded.write_s == 50 and embedded.read_s == 20
    assert embedded.graph_s == pytest.approx(200) and embedded.wall_s == pytest.approx(700)
    buffers = WRITER_BUFFER_BYTES
    assert embedded.peak_rss_bytes == pytest.approx(1e9 + buffers + 200_000 * (500 + 1_536))
    elastic = _by(project(counts, _rates()), "elasticsearch", "cpu")
    assert elastic.graph_s == 0 and elastic.wall_s == 500
    assert elastic.node_vector_memory_bytes == (200_000 + 1_000) * (384 + 12)  # elements, pages


def test_pages_past_a_fast_exact_scan_get_a_graph_of_their_own() -> None:
    from feverous_es.index.embedded.vectors import in_memory_rows

    def graph_s(pages: int) -> float:
        counts = DumpCounts(pages=pages, counted_pages=pages, elements={"cell": 400_000},
                            vectors=200_000, tokens=5_000_000)  # fmt: skip
        return _by(project(counts, _rates()), "embedded", "cpu").graph_s

    fast = in_memory_rows(384)
    assert graph_s(fast) == pytest.approx(200_000 * 1e-3)
    assert graph_s(fast + 1) == pytest.approx((200_000 + fast + 1) * 1e-3)


def test_graph_memory_is_one_shard_however_large_the_dump() -> None:
    from feverous_es.index.embedded.vectors import GRAPH_SHARD_ROWS

    def rss(vectors: int) -> float:
        counts = DumpCounts(pages=1, counted_pages=1, elements={"cell": vectors}, vectors=vectors,
                            tokens=vectors)  # fmt: skip
        return _by(project(counts, _rates()), "embedded", "cpu").peak_rss_bytes

    assert rss(GRAPH_SHARD_ROWS) == rss(16 * GRAPH_SHARD_ROWS) > rss(GRAPH_SHARD_ROWS // 2)


def test_small_indexes_get_no_graphs_and_unmeasured_figures_stay_unknown() -> None:
    counts = DumpCounts(pages=10, counted_pages=10, elements={"sentence": 900}, vectors=900,
                        tokens=9_000)  # fmt: skip
    projections = project(counts, _rates())
    assert _by(projections, "embedded", "cpu").graph_s == 0
    assert _by(projections, "embedded", "cuda").wall_s is None  # no GPU rate measured
    assert _by(projections, "elasticsearch", "cpu").disk_bytes is None  # no per-page size


def test_disk_grows_linearly_with_the_dump() -> None:
    one = DumpCounts(pages=10_000, counted_pages=10_000, elements={"cell": 500_000},
                     vectors=150_000, tokens=3_000_000)  # fmt: skip
    four = DumpCounts(pages=40_000, counted_pages=40_000, elements={"cell": 2_000_000},
                      vectors=600_000, tokens=12_000_000)  # fmt: skip
    for store in ("embedded", "elasticsearch"):
        rates = _rates(bytes_per_page={"embedded": 1_536.0, "elasticsearch": 0.0})
        small, large = (_by(project(c, rates), store, "cpu") for c in (one, four))
        assert large.disk_bytes == pytest.approx(4 * small.disk_bytes)
        assert large.wall_s == pytest.approx(4 * small.wall_s)


def test_measured_rates_replace_stored_ones_only_where_measured() -> None:
    stored = _rates()
    measured = _rates(
        embed_tokens_per_s={"cpu": 1.0}, write_elements_per_s={"embedded": 2.0},
        bytes_per_element={"embedded": 3.0},
    )  # fmt: skip
    merged = stored.updated(measured)
    assert merged.embed_tokens_per_s == {"cpu": 1.0, "cuda": None}
    assert merged.write_elements_per_s == {"embedded": 2.0, "elasticsearch": 5_000.0}
    assert merged.bytes_per_element == {"embedded": 3.0, "elasticsearch": 1_000.0}


def test_the_shipped_rates_load_and_a_bad_rates_file_is_one_line(tmp_path: Path) -> None:
    shipped = BuildRates.load()
    assert shipped.embed_tokens_per_s["cpu"] and shipped.measured["date"]
    bad = tmp_path / "rates.json"
    bad.write_text('{"read_elements_per_s": 1}')
    with pytest.raises(PlanError, match="not a rates file"):
        BuildRates.load(bad)


def test_plan_command_prints_counts_and_projections_as_json(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["plan", str(SAMPLE_DB), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["counts"]["pages"] == 129 and report["counts"]["vectors"] > 0
    stores = {(p["store"], p["device"]) for p in report["projections"]}
    assert ("embedded", "cpu") in stores and ("elasticsearch", "cuda") in stores
    text = CliRunner().invoke(main, ["plan", str(SAMPLE_DB)])
    assert text.exit_code == 0 and "129 pages" in text.output and "embedded" in text.output


def test_plan_of_a_file_that_is_no_dump_is_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "wiki.db"
    junk.write_text("not sqlite")
    result = CliRunner().invoke(main, ["plan", str(junk)])
    assert result.exit_code == 1 and "not a SQLite file" in result.output


def test_rates_measured_on_a_sample_of_the_dump(tmp_path: Path) -> None:
    from feverous_es.index.embedded import NEW_VECTOR_FILES

    with WikiDB(SAMPLE_DB) as db:
        rates = measure_rates(db, 30, work=tmp_path)
    assert rates.embed_tokens_per_s["cpu"] > 0 and rates.write_elements_per_s["embedded"] > 0
    assert rates.bytes_per_vector["embedded"] == 384 * np.dtype(NEW_VECTOR_FILES.dtype).itemsize
    assert rates.graph_bytes_per_vector > 384  # an int8 vector and its links
    assert rates.bytes_per_element["embedded"] > 0 and rates.base_rss_bytes > 0
    assert "30 pages" in rates.measured["sample"] and not list(tmp_path.iterdir())
    # The sample's small graph is scaled to what a full shard costs a vector.
    assert f"times {FULL_SHARD_GRAPH_FACTOR} for full shards" in rates.measured["graphs"]
    assert "CPU cores" in rates.measured["machine"]  # a stored rate's machine is replaced


def test_workers_pay_until_the_clusters_bulk_rate_is_the_limit() -> None:
    from feverous_es.index.building.plan import Projection, project_parts

    elastic = Projection("elasticsearch", "cpu", read_s=100.0, embed_s=6_000.0, write_s=1_000.0,
                         graph_s=0.0, wall_s=6_000.0, disk_bytes=None, peak_rss_bytes=0.0,
                         node_vector_memory_bytes=None)  # fmt: skip
    unmeasured = Projection("elasticsearch", "cuda", 100.0, None, 1_000.0, 0.0, None, None, 0.0,
                            None)  # fmt: skip
    embedded = Projection("embedded", "cpu", 100.0, 6_000.0, 500.0, 0.0, 6_000.0, None, 0.0, None)
    walls = {n: project_parts([elastic], n)[0].wall_s for n in (1, 3, 6, 12)}
    assert walls == {1: 6_000.0, 3: 2_000.0, 6: 1_000.0, 12: 1_000.0}  # the cluster's floor
    cpu, cuda = project_parts([embedded, elastic, unmeasured], 4)  # Elasticsearch rows only
    assert cpu.bulk_bound_from == 6 and cpu.one_worker_s == 6_000.0
    assert cuda.wall_s is None and cuda.bulk_bound_from is None
