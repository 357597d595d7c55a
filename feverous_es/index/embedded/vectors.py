"""Vector storage and search for the embedded store.

Vectors live in raw files of float16 rows (float32 in indexes of format 2), normalized at write
time so that a dot product is the cosine, appended chunk by chunk and memory-mapped for reading.
float16 halves disk and page cache at no measurable cost to ranking: a cosine moves by ~1e-3.
Search is exact (one matrix-vector product) below a size where that gets slow, and above it HNSW
(usearch): graphs per group of vectors the caller names (sentences, table rows, ...), each group
cut into shards of at most ``GRAPH_SHARD_ROWS`` rows with a graph each, so that building one
holds one shard in memory however large the dump; every shard gives candidates, and all are
rescored exactly so that both paths give the same scores.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numpy.typing import DTypeLike

# onnxruntime must be loaded before usearch: usearch 2.26.6 exports its own static C++ runtime's
# symbols, onnxruntime 1.31 binds to them if loaded after it, and segfaults.
import onnxruntime  # noqa: F401  # isort: skip
from usearch.index import Index  # isort: skip

from feverous_es.errors import IncompatibleIndex, IndexChanged  # isort: skip

# Exact search costs ~23 ms per query over 290k x 384 on 2 cores (memory bound, linear in
# rows). HNSW costs ~3 ms per graph, but its build ~0.2 ms per vector (~60 s for 280k). Below
# 100k vectors exact search stays under ~8 ms, and the build is not worth it.
HNSW_THRESHOLD = 100_000
# Measured on all-MiniLM-L6-v2 vectors of mini-FEVEROUS (20k sentences and 60k table rows, then
# grown to 280k with perturbed copies, sentences 14%), dev claims as queries, recall@100 against
# exact search: one graph per group 0.98 (5th percentile 0.92) at ~6 ms; one graph for all
# 0.92 for FEVEROUS claims (greedy search stays among the rows; some claims got 0.18).
# f16 builds slower at no better recall; expansion_add 128 doubles the build for +0.01.
HNSW_DTYPE = "i8"
HNSW_CONNECTIVITY = 16
HNSW_EXPANSION_ADD = 64
HNSW_EXPANSION_SEARCH = 1024
# HNSW returns this many times k candidates, all rescored exactly: cheap, and it lifts recall.
HNSW_OVERSAMPLE = 2
# A group (without graphs: the whole index) whose rows a filter allows fewer than this share of
# is searched exactly over just those rows: cheaper than the HNSW oversampling it would need.
_GATHER_SHARE = 0.25
_BUILD_BATCH = 32_768
# Inserting into an HNSW graph slows as it grows, so graphs of a bounded size keep the build's
# cost per vector flat as the dump grows (914k table rows: 73 us a vector in shards of 2^18,
# 93 in one graph); the price is a search per shard (~1 ms each). A shard's graph takes ~530
# bytes a vector in memory (int8 vector + links), its float16 rows 768 more while it is built:
# ~340 MB for a full shard.
GRAPH_SHARD_ROWS = 1 << 18
# A group's shards are searched in parallel (usearch releases the GIL): on 2 cores, 18 shards
# of a 4.35 M-vector index answered in 30 ms (p50) instead of 47, with the same candidates.
_SHARD_SEARCH = ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1))
# Exact scans convert float16 rows to float32 in blocks, not the whole matrix at once.
_SCAN_BLOCK = 1 << 16
# Up to this size a float16 matrix is held in memory as float32 (mini-FEVEROUS's 21,693 page
# vectors: 33 MB; scanning them from float16 took 10 ms a query more).
_IN_MEMORY_BYTES = 64 << 20


def in_memory_rows(dim: int) -> int:
    """The most rows of a float16 matrix held as float32 in memory: exact scans of more
    convert every row per query (measured: 69 ms for 86,772 page vectors, 1.5 ms for 21,693)."""
    return _IN_MEMORY_BYTES // (4 * dim)


def normalized(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length as float32; all-zero rows stay zero."""
    rows = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return rows / np.maximum(norms, np.float32(1e-12))


def write_rows(path: Path, start: int, rows: np.ndarray, dim: int, dtype: DTypeLike) -> None:
    """Write ``rows`` at row ``start`` of a raw file of ``dtype`` rows, dropping anything after
    it, and fsync: the file must hold these rows before the index says it does."""
    data = np.ascontiguousarray(rows, dtype=dtype).tobytes()
    row_bytes = dim * np.dtype(dtype).itemsize
    with open(path, "r+b" if path.exists() else "w+b") as file:
        file.truncate(start * row_bytes)
        file.seek(start * row_bytes)
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def truncate_rows(path: Path, rows: int, dim: int, dtype: DTypeLike) -> None:
    """Cut a vector file to ``rows`` rows: what a crashed write appended beyond is garbage."""
    size = rows * dim * np.dtype(dtype).itemsize
    if path.exists() and path.stat().st_size != size:
        with open(path, "r+b") as file:
            file.truncate(size)
            os.fsync(file.fileno())


def graph_path(vectors_path: Path, group: int, shard: int) -> Path:
    """A shard's graph file beside the vectors: ``vectors.f16`` -> ``vectors.<group>.<shard>
    .usearch``, ``page_vectors.f16`` -> ``page_vectors.<group>.<shard>.usearch``."""
    return vectors_path.with_name(f"{vectors_path.stem}.{group}.{shard}.usearch")


def _restored(file: Path) -> Index:
    """The saved graph ``file``, memory-mapped (``view``) instead of loaded into RAM."""
    graph = Index.restore(str(file), view=True)
    if graph is None:  # usearch found no graph header
        raise IncompatibleIndex(f"{file} is not a usearch graph; rebuild the index")
    return graph


def group_graphs(vectors_path: Path, group: int) -> list[Path]:
    """A group's graph files in shard order; an index of format 2 has one unsharded graph."""
    legacy = vectors_path.with_name(f"{vectors_path.stem}.{group}.usearch")
    if legacy.exists():
        return [legacy]
    files: list[Path] = []
    while (file := graph_path(vectors_path, group, len(files))).exists():
        files.append(file)
    return files


def shards(members: np.ndarray) -> list[np.ndarray]:
    """A group's rows cut into consecutive shards of at most ``GRAPH_SHARD_ROWS``."""
    return [members[i : i + GRAPH_SHARD_ROWS] for i in range(0, len(members), GRAPH_SHARD_ROWS)]


def build_graphs(
    vectors_path: Path, dim: int, dtype: DTypeLike, groups: np.ndarray, min_group: int
) -> None:
    """Build the HNSW graphs of every group of at least ``min_group`` vectors (``groups[i]`` is
    row i's group), one per shard, each saved atomically next to the vectors. Smaller groups
    are searched exactly. Separate graphs per group, because greedy search stays in the region
    where it enters (see above); memory holds one shard's graph and rows at a time.
    """
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        if len(members) < min_group:
            continue
        for number, shard in enumerate(shards(members)):
            out = graph_path(vectors_path, int(group), number)
            _build_graph(vectors_path, dim, dtype, len(groups), shard, out)


def _build_graph(
    vectors_path: Path, dim: int, dtype: DTypeLike, rows: int, keys: np.ndarray, out: Path
) -> None:
    # A map of its own, dropped at the end, so that the rows read leave resident memory.
    matrix = np.memmap(vectors_path, dtype=dtype, mode="r", shape=(rows, dim))
    index = Index(
        ndim=dim,
        metric="cos",
        dtype=HNSW_DTYPE,
        connectivity=HNSW_CONNECTIVITY,
        expansion_add=HNSW_EXPANSION_ADD,
    )
    for start in range(0, len(keys), _BUILD_BATCH):
        batch = keys[start : start + _BUILD_BATCH]
        # One thread: usearch's concurrent inserts leave some nodes poorly linked
        # (measured: 10-80% of small graphs miss true neighbours even with a wide search),
        # and on 2 busy cores they built 280k vectors no faster (70 s against 51 s).
        index.add(batch.astype(np.uint64), np.asarray(matrix[batch], np.float32), threads=1)
    del matrix
    tmp = out.with_suffix(".tmp")
    index.save(str(tmp))
    del index
    with open(tmp, "rb") as file:
        os.fsync(file.fileno())
    os.replace(tmp, out)


class MappedFiles:
    """The files a reader maps or reads into memory, with their size and identity when opened.

    A mapped file truncated under the process ends it with SIGBUS at the first read past the
    new end, which no handler can turn into an error; so each read first compares the files
    with what was opened (a ``stat`` each, microseconds) and raises :class:`IndexChanged`
    instead. (A truncation between the check and the read still crashes: the window is a
    search's length, not the server's lifetime.) A file read whole is watched the same way:
    answers from it after it changed are a stale index's."""

    def __init__(self) -> None:
        self._opened: dict[Path, tuple[int, int]] = {}

    def add(self, *paths: Path) -> None:
        for path in paths:
            self._opened[path] = _identity(path)

    def check(self) -> None:
        """Raise :class:`IndexChanged` if a file was removed, replaced or cut shorter (a build in
        progress only appends: growing is fine)."""
        for path, (inode, size) in self._opened.items():
            try:
                now = os.stat(path)
            except OSError:
                now = None
            if now is None or now.st_ino != inode or now.st_size < size:
                raise IndexChanged(
                    f"{path} was removed, replaced or truncated after the index was opened: "
                    "restart the reader on a complete index"
                )


def _identity(path: Path) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_ino, stat.st_size


class VectorMatrix:
    """Read side: the first ``rows`` vectors of a file, searched by cosine similarity.

    ``groups`` (one group number per row) enables HNSW search over the graphs that
    :func:`build_graphs` saved beside the file (a group without one is searched exactly);
    without ``groups`` search is exact.
    """

    def __init__(
        self,
        path: Path,
        dim: int,
        rows: int,
        dtype: DTypeLike,
        groups: np.ndarray | None = None,
    ) -> None:
        self.dim = dim
        self.rows = rows
        self._mapped = MappedFiles()
        self._matrix: np.ndarray = (
            np.memmap(path, dtype=dtype, mode="r", shape=(rows, dim))
            if rows
            else np.zeros((0, dim), dtype=dtype)
        )
        if self._matrix.dtype != np.float32 and rows <= in_memory_rows(dim):
            # Small matrices (the page vectors, small indexes) are scanned whole per query:
            # kept as float32 in memory, a scan skips the per-query float16 conversion.
            self._matrix = np.array(self._matrix, dtype=np.float32)
        if rows:  # watched in memory too: answers from a file since changed are a stale index's
            self._mapped.add(path)
        # Each group's rows, with its shards' graphs (none: searched exactly).
        self._groups: list[tuple[np.ndarray, list[Index]]] = []
        if groups is not None:
            for group in np.unique(groups):
                members = np.flatnonzero(groups == group)
                files = group_graphs(path, int(group))
                loaded = [_restored(file) for file in files]
                self._mapped.add(*files)
                if sum(len(graph) for graph in loaded) not in (0, len(members)):
                    raise IncompatibleIndex(
                        f"the graphs of group {group} do not match its vectors; rebuild the index"
                    )
                for graph in loaded:
                    # usearch's stubs declare the setter apart from the property: mypy sees none
                    graph.expansion_search = HNSW_EXPANSION_SEARCH  # type: ignore[misc]
                self._groups.append((members, loaded))

    def check(self) -> None:
        """Raise :class:`IndexChanged` if a file this matrix maps changed since it was opened."""
        self._mapped.check()

    def get(self, rows: np.ndarray) -> np.ndarray:
        """The stored vectors of ``rows``, as float32."""
        self._mapped.check()
        return np.asarray(self._matrix[np.asarray(rows, dtype=np.int64)], dtype=np.float32)

    @property
    def has_hnsw(self) -> bool:
        return any(graphs for _, graphs in self._groups)

    def query(self, vector: np.ndarray) -> np.ndarray:
        """The query as a unit float32 vector of the right size."""
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != self.dim:
            raise IncompatibleIndex(
                f"query vector has {query.shape[0]} dimensions, the index {self.dim}"
            )
        return normalized(query)

    def search(
        self,
        query: np.ndarray,
        k: int,
        rows: np.ndarray | None = None,
        allowed: np.ndarray | None = None,
        exact: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` rows by cosine, best first, as (row numbers, scores); ``query`` must be
        normalized.

        ``rows`` restricts the search to those rows, searched exactly (such lists are short: a
        page or a table). ``allowed`` is a boolean mask over all rows. With graphs, each group
        gives candidates (see :meth:`_candidates`), all rescored exactly.
        """
        self._mapped.check()
        if rows is None and self.has_hnsw and not exact:
            rows = np.unique(
                np.concatenate(
                    [self._candidates(query, k, group, allowed) for group in self._groups]
                )
            )
        elif rows is None and allowed is not None and allowed.mean() < _GATHER_SHARE:
            rows = np.flatnonzero(allowed)
        if rows is not None:
            rows = np.asarray(rows, dtype=np.int64)
            return _top(rows, _cosines(self._matrix[rows], query), k)
        scores = _cosines(self._matrix, query)
        if allowed is not None:
            scores = np.where(allowed, scores, -np.inf)
            k = min(k, int(allowed.sum()))
        return _top(np.arange(self.rows), scores, k)

    def _candidates(
        self,
        query: np.ndarray,
        k: int,
        group: tuple[np.ndarray, list[Index]],
        allowed: np.ndarray | None,
    ) -> np.ndarray:
        """A group's candidate rows: all its allowed rows when they are few or it has no graph,
        else each shard graph's top ``k`` (oversampled by the share of allowed rows), falling
        back to all allowed rows when the graphs return too few (a filter the query's
        neighbourhood avoids)."""
        members, graphs = group
        if allowed is not None:
            members = members[allowed[members]]
        share = len(members) / len(group[0])
        if not graphs or share < _GATHER_SHARE:
            return members
        count = int(k * HNSW_OVERSAMPLE / share) + 1

        def shard_keys(graph: Index) -> np.ndarray:
            return np.asarray(graph.search(query, count, threads=1).keys, np.int64)

        found = (
            _SHARD_SEARCH.map(shard_keys, graphs) if len(graphs) > 1 else map(shard_keys, graphs)
        )
        keys = np.concatenate(list(found))
        if allowed is not None:
            keys = keys[allowed[keys]]
        return keys if len(keys) >= min(k, len(members)) else members


def _cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    # einsum, not BLAS: after a threaded BLAS call OpenBLAS's workers spin for a while, taking a
    # core from the text search and the rerankers of the same process (measured: a query's CPU
    # time twice its wall time). Single-threaded costs ~30% on a full scan, little on the
    # few thousand rows that HNSW candidates and filters leave.
    if matrix.dtype == np.float32:
        return np.einsum("ij,j->i", matrix, query)
    scores = np.empty(len(matrix), dtype=np.float32)
    for start in range(0, len(matrix), _SCAN_BLOCK):
        block = np.asarray(matrix[start : start + _SCAN_BLOCK], dtype=np.float32)
        scores[start : start + len(block)] = np.einsum("ij,j->i", block, query)
    return scores


def _top(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if k <= 0 or not len(rows):
        return rows[:0], scores[:0].astype(np.float32)
    part = np.argpartition(-scores, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
    order = part[np.argsort(-scores[part], kind="stable")]
    return rows[order], scores[order]
