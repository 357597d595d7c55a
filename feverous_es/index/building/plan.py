"""What an index build of a dump will cost, said before it starts.

Three parts: :func:`count_dump` reads the dump once as the build does (the same page parser, the
embedder's own tokenizer and truncation) and counts pages, elements by type, tables, vectors and
the tokens the embedder will run; :class:`BuildRates` holds throughputs and sizes measured on a
machine (stored with the package in ``build_rates.json``, or measured on a sample of the dump
itself by :func:`measure_rates`); :func:`project` turns counts and rates into wall time, peak
memory and disk per store and device.

The build is a pipeline (read, embed and write run concurrently), so its wall time is its slowest
stage, plus the embedded store's HNSW graphs, built after the last chunk. Disk and memory are
linear in elements, vectors and pages, with the per-unit sizes measured.
"""

from __future__ import annotations

import json
import math
import os
import resource
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path

import numpy as np

from feverous_es.errors import MalformedPage, PlanError
from feverous_es.index.building.builder import build
from feverous_es.index.dump.page import parse_page
from feverous_es.index.dump.wiki import WikiDB, write_dump

RATES_FILE = Path(__file__).with_name("build_rates.json")
STORES = ("embedded", "elasticsearch")
DEVICES = ("cpu", "cuda")
_COUNT_BATCH = 256  # pages tokenized together


# A sample's graph holds a few thousand vectors; a full shard (GRAPH_SHARD_ROWS) costs about
# this many times as much per vector to build, since HNSW insertion slows as a graph grows:
# 76 us a vector at the scale benchmark's 16x against 36 us in a 1,500-page sample's graph, on
# the same 2-core machine (docs/scale.md). A measured sample rate is scaled by it.
FULL_SHARD_GRAPH_FACTOR = 2.1


@dataclass
class DumpCounts:
    """What a build of the dump embeds and stores. With ``counted_pages < pages`` the counts are
    those of an even sample of the dump scaled by ``pages / counted_pages``."""

    pages: int = 0
    counted_pages: int = 0
    malformed: int = 0
    elements: dict[str, int] = field(default_factory=dict)
    tables: int = 0
    vectors: int = 0
    tokens: int = 0  # vector texts and page records, as the embedder truncates them

    @property
    def total_elements(self) -> int:
        return sum(self.elements.values())

    def scaled(self) -> DumpCounts:
        """The counts for the whole dump (unchanged when every page was counted)."""
        if not self.counted_pages or self.counted_pages == self.pages:
            return self
        factor = self.pages / self.counted_pages

        def up(value: int) -> int:
            return round(value * factor)

        return DumpCounts(
            pages=self.pages,
            counted_pages=self.counted_pages,
            malformed=up(self.malformed),
            elements={kind: up(n) for kind, n in self.elements.items()},
            tables=up(self.tables),
            vectors=up(self.vectors),
            tokens=up(self.tokens),
        )


class TokenCounter:
    """Counts the tokens the embedder runs for given texts (its tokenizer, its truncation)."""

    def __init__(self, max_length: int = 128, model_dir: Path | None = None) -> None:
        from feverous_es.runtime.embedder import load_tokenizer

        self._tokenizer = load_tokenizer(model_dir, max_length)

    def __call__(self, texts: list[str]) -> int:
        return sum(len(e.ids) for e in self._tokenizer.encode_batch(texts)) if texts else 0


def count_dump(
    db: WikiDB,
    count_tokens: Callable[[list[str]], int],
    *,
    sample: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> DumpCounts:
    """One pass over the dump (or over ``sample`` pages spread evenly across it): elements by
    type, tables, distinct vectors and embedder tokens, as
    :func:`~feverous_es.index.building.builder.build` would produce them. ``on_progress(pages)``
    after each batch of pages."""
    counts = DumpCounts(pages=db.count())
    types: Counter[str] = Counter()
    batch: list[str] = []

    def flush() -> None:
        counts.tokens += count_tokens(batch)
        batch.clear()

    rows: Iterable[tuple[int, str, str]] = db.rows() if sample is None else db.spread_rows(sample)
    for _, page_id, data in rows:
        counts.counted_pages += 1
        try:
            parsed = parse_page(page_id, data)
        except MalformedPage:
            counts.malformed += 1
            continue
        keys: dict[str, str] = {}
        tables = set()
        for element in parsed.elements:
            types[str(element.type)] += 1
            keys.setdefault(element.vector_key, element.embed_text)
            if element.table is not None:
                tables.add(element.table)
        counts.vectors += len(keys)
        counts.tables += len(tables)
        batch += [*keys.values(), parsed.record.embed_text]
        if len(batch) >= _COUNT_BATCH * 20:
            flush()
        if on_progress and counts.counted_pages % _COUNT_BATCH == 0:
            on_progress(counts.counted_pages)
    flush()
    counts.elements = dict(sorted(types.items()))
    return counts


@dataclass
class BuildRates:
    """Throughputs and sizes of a build on one machine; ``None`` where unmeasured.

    Rates are per second of the stage alone; sizes in bytes. ``graph_seconds_per_vector`` and
    ``graph_bytes_per_vector`` are the embedded store's HNSW graphs (built in one thread).
    ``base_rss_bytes`` is a build process's peak resident memory without graphs (models,
    buffers, one chunk in each queue). Elasticsearch sizes are primaries on the node.
    """

    read_elements_per_s: float
    embed_tokens_per_s: dict[str, float | None]
    write_elements_per_s: dict[str, float | None]
    graph_seconds_per_vector: float
    graph_bytes_per_vector: float
    bytes_per_element: dict[str, float | None]
    bytes_per_vector: dict[str, float | None]
    bytes_per_page: dict[str, float | None]
    base_rss_bytes: float
    measured: dict[str, str] = field(default_factory=dict)  # where, when, with what command

    @classmethod
    def load(cls, path: Path = RATES_FILE) -> BuildRates:
        try:
            return cls(**json.loads(Path(path).read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise PlanError(f"{path}: no such rates file") from None
        except (ValueError, TypeError) as error:
            raise PlanError(f"{path}: not a rates file ({error})") from None

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")

    def updated(self, other: BuildRates) -> BuildRates:
        """These rates with every figure ``other`` measured (not ``None``) taken from it."""
        merged = asdict(self)
        for key, value in asdict(other).items():
            if isinstance(value, dict):
                merged[key] = {**merged[key], **{k: v for k, v in value.items() if v is not None}}
            elif value is not None:
                merged[key] = value
        return BuildRates(**merged)


@dataclass
class Projection:
    """One store on one device; ``None`` where a rate it needs is unmeasured."""

    store: str
    device: str
    read_s: float
    embed_s: float | None
    write_s: float | None
    graph_s: float
    wall_s: float | None
    disk_bytes: float | None
    peak_rss_bytes: float
    node_vector_memory_bytes: float | None  # Elasticsearch: page cache the kNN graphs want


def project(
    counts: DumpCounts, rates: BuildRates, *, dim: int = 384, hnsw_threshold: int | None = None
) -> list[Projection]:
    """The build's cost per store and device."""
    from feverous_es.index.embedded import WRITER_BUFFER_BYTES, pages_graphed
    from feverous_es.index.embedded.vectors import GRAPH_SHARD_ROWS, HNSW_THRESHOLD

    threshold = HNSW_THRESHOLD if hnsw_threshold is None else hnsw_threshold
    elements, vectors, pages = counts.total_elements, counts.vectors, counts.pages
    read_s = elements / rates.read_elements_per_s
    result = []
    for store in STORES:
        write_rate = rates.write_elements_per_s.get(store)
        write_s = elements / write_rate if write_rate else None
        # The embedded store graphs element vectors past the threshold and page vectors as
        # pages_graphed says; Elasticsearch indexes both into its kNN graphs as it writes.
        graphed_pages = pages if pages_graphed(pages, dim, threshold) else 0
        graphed_vectors = vectors if vectors > threshold else 0
        graphed = graphed_vectors + graphed_pages if store == "embedded" else 0
        graph_s = graphed * rates.graph_seconds_per_vector
        sizes = (
            rates.bytes_per_element.get(store),
            rates.bytes_per_vector.get(store),
            rates.bytes_per_page.get(store),
        )
        disk = None
        if all(s is not None for s in sizes):
            per_element, per_vector, per_page = (float(s) for s in sizes)  # type: ignore[arg-type]
            disk = elements * per_element + vectors * per_vector + pages * per_page
            disk += graphed * rates.graph_bytes_per_vector
        # A sample's build leaves the writer's buffers (tantivy heaps, SQLite cache) part
        # empty; a whole dump's fills them. Building a graph holds one shard's graph and the
        # rows it reads (mapped pages).
        rss = rates.base_rss_bytes
        if store == "embedded":
            rss += WRITER_BUFFER_BYTES
        if graphed:
            row_bytes = rates.bytes_per_vector.get("embedded") or 4 * dim
            shard = min(max(graphed_vectors, graphed_pages), GRAPH_SHARD_ROWS)
            rss += shard * (rates.graph_bytes_per_vector + row_bytes)
        # ES's documented working set of an int8 HNSW field: num_vectors * (dims + 12) bytes,
        # for the elements' vectors and the pages'.
        node_memory = (vectors + pages) * (dim + 12) if store == "elasticsearch" else None
        for device in DEVICES:
            token_rate = rates.embed_tokens_per_s.get(device)
            embed_s = counts.tokens / token_rate if token_rate else None
            if embed_s is None or write_s is None:
                wall = None
            else:
                wall = max(read_s, embed_s, write_s) + graph_s
            result.append(
                Projection(
                    store, device, read_s, embed_s, write_s, graph_s, wall, disk, rss, node_memory
                )
            )
    return result


@dataclass
class PartsProjection:
    """An Elasticsearch build written by ``workers`` workers on one device each (``index
    --part I/N``): each reads and embeds its share, all write to one cluster, whose bulk rate
    (``bulk_s`` for the whole dump on the measured node count) is the floor no number of workers
    goes below. ``bulk_bound_from``: the fewest workers whose share takes no longer than the
    cluster's writing — beyond it, a worker more saves nothing."""

    device: str
    workers: int
    wall_s: float | None
    one_worker_s: float | None
    bulk_s: float | None
    bulk_bound_from: int | None


def project_parts(projections: Iterable[Projection], workers: int) -> list[PartsProjection]:
    """The Elasticsearch rows of ``projections`` with the build split among ``workers``."""
    result = []
    for p in projections:
        if p.store != "elasticsearch":
            continue
        if p.embed_s is None or p.write_s is None:
            result.append(PartsProjection(p.device, workers, None, None, p.write_s, None))
            continue
        shared = max(p.read_s, p.embed_s)  # the work a worker's own machine does
        wall = max(shared / workers, p.write_s)
        bound = max(1, math.ceil(shared / p.write_s)) if p.write_s else None
        result.append(
            PartsProjection(p.device, workers, wall, max(shared, p.write_s), p.write_s, bound)
        )
    return result


def sample_dump(db: WikiDB, out: Path, pages: int) -> int:
    """Copy ``pages`` pages spread evenly over the dump into a new dump at ``out``."""
    return write_dump(out, ((page_id, data) for _, page_id, data in db.spread_rows(pages)))


def measure_rates(
    db: WikiDB,
    pages: int,
    *,
    device: str = "cpu",
    work: Path | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> BuildRates:
    """Rates of the embedded store measured by building an index of ``pages`` pages spread
    over ``db`` (in a temporary directory), then one HNSW graph of its vectors. Elasticsearch
    rates are left ``None`` (they need a cluster: see bench/store_search.py)."""
    from feverous_es.index.embedded import NEW_VECTOR_FILES as FILES
    from feverous_es.index.embedded import EmbeddedWriter
    from feverous_es.index.embedded.vectors import build_graphs, group_graphs
    from feverous_es.runtime.embedder import Embedder

    def stage(name: str) -> None:
        if on_stage:
            on_stage(name)

    with tempfile.TemporaryDirectory(prefix="feverous-plan-", dir=work) as tmp:
        root = Path(tmp)
        stage(f"copying {pages:,} pages spread over the dump")
        sample_dump(db, root / "sample.db", pages)
        embedder = Embedder(device=device)
        stage("building an index of them")
        index = root / "index"
        writer = EmbeddedWriter(index, embedder.dim)
        with WikiDB(root / "sample.db") as sample:
            report = build(sample, writer, embedder)
        writer.close()
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        sizes = file_bytes(index)
        vector_bytes = sizes.pop(FILES.elements, 0)
        page_bytes = sizes.pop(FILES.pages, 0)
        element_bytes = sum(sizes.values())
        if report.vectors < 2 or not report.elements:
            raise PlanError(f"a sample of {pages:,} pages holds too few elements to measure")
        stage("building an HNSW graph of its vectors")
        started = time.perf_counter()
        one_group = np.zeros(report.vectors, np.int64)
        build_graphs(index / FILES.elements, embedder.dim, FILES.dtype, one_group, 0)
        graph_s = time.perf_counter() - started
        graph_bytes = sum(f.stat().st_size for f in group_graphs(index / FILES.elements, 0))
    return BuildRates(
        read_elements_per_s=report.elements / report.read.seconds,
        embed_tokens_per_s={device: report.embed.tokens / report.embed.seconds},
        write_elements_per_s={"embedded": report.elements / report.write.seconds},
        graph_seconds_per_vector=FULL_SHARD_GRAPH_FACTOR * graph_s / report.vectors,
        graph_bytes_per_vector=graph_bytes / report.vectors,
        bytes_per_element={"embedded": element_bytes / report.elements},
        bytes_per_vector={"embedded": vector_bytes / report.vectors},
        bytes_per_page={"embedded": page_bytes / max(1, report.pages)},
        base_rss_bytes=rss,
        measured={
            "date": date.today().isoformat(),
            "machine": _machine(),
            "sample": f"{report.pages:,} pages spread over {db.path.name}",
            "graphs": f"{graph_s / report.vectors * 1e6:.1f} us a vector in the sample's graph of "
            f"{report.vectors:,}, times {FULL_SHARD_GRAPH_FACTOR} for full shards",
            "device": device,
        },
    )


def file_bytes(directory: Path) -> dict[str, int]:
    """The size of every file under ``directory``, by its path relative to it."""
    return {
        str(f.relative_to(directory)): f.stat().st_size for f in directory.rglob("*") if f.is_file()
    }


def _machine() -> str:
    """``"2 CPU cores, 24 GB RAM"`` of this machine (what measured rates hold for)."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return f"{os.cpu_count()} CPU cores, {memory / 2**30:.0f} GB RAM"


def human_seconds(seconds: float | None) -> str:
    """``"-"``, ``"42 s"``, ``"13.5 min"``, ``"7.2 h"``, ``"3.1 days"``."""
    if seconds is None:
        return "-"
    for unit, size in (("days", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:,.0f} s"


def human_bytes(size: float | None) -> str:
    """``"-"``, ``"512 B"``, ``"1.5 GB"`` (powers of 1024)."""
    if size is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
