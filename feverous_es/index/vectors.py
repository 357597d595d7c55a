"""Vector storage and search for the embedded store.

Vectors live in raw float32 files (one row per vector, normalized at write time so that a dot
product is the cosine), appended chunk by chunk and memory-mapped for reading. Search is exact
(one matrix-vector product) below a size where that gets slow, and above it HNSW (usearch), one
graph per group of vectors the caller names (sentences, table rows, ...), with all candidates
rescored exactly so that both paths give the same scores.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

# onnxruntime must be loaded before usearch: usearch 2.26.6 exports its own static C++ runtime's
# symbols, onnxruntime 1.31 binds to them if loaded after it, and segfaults.
import onnxruntime  # noqa: F401  # isort: skip
from usearch.index import Index  # isort: skip

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


def normalized(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length as float32; all-zero rows stay zero."""
    rows = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return rows / np.maximum(norms, np.float32(1e-12))


def write_rows(path: Path, start: int, rows: np.ndarray, dim: int) -> None:
    """Write ``rows`` at row ``start`` of a raw float32 file, dropping anything after it, and
    fsync: the file must hold these rows before the index says it does."""
    data = np.ascontiguousarray(rows, dtype=np.float32).tobytes()
    with open(path, "r+b" if path.exists() else "w+b") as file:
        file.truncate(start * dim * 4)
        file.seek(start * dim * 4)
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def truncate_rows(path: Path, rows: int, dim: int) -> None:
    """Cut a vector file to ``rows`` rows: what a crashed write appended beyond is garbage."""
    size = rows * dim * 4
    if path.exists() and path.stat().st_size != size:
        with open(path, "r+b") as file:
            file.truncate(size)
            os.fsync(file.fileno())


def graph_path(directory: Path, group: int) -> Path:
    return directory / f"vectors.{group}.usearch"


def build_graphs(vectors_path: Path, dim: int, groups: np.ndarray, min_group: int) -> None:
    """Build one HNSW graph per group of at least ``min_group`` vectors (``groups[i]`` is row
    i's group), each saved atomically next to the vectors. Smaller groups are searched exactly.
    Separate graphs, because greedy search stays in the region where it enters (see above).
    """
    matrix = np.memmap(vectors_path, dtype=np.float32, mode="r", shape=(len(groups), dim))
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        if len(members) < min_group:
            continue
        index = Index(
            ndim=dim,
            metric="cos",
            dtype=HNSW_DTYPE,
            connectivity=HNSW_CONNECTIVITY,
            expansion_add=HNSW_EXPANSION_ADD,
        )
        for start in range(0, len(members), _BUILD_BATCH):
            keys = members[start : start + _BUILD_BATCH]
            # One thread: usearch's concurrent inserts leave some nodes poorly linked
            # (measured: 10-80% of small graphs miss true neighbours even with a wide search),
            # and on 2 busy cores they built 280k vectors no faster (70 s against 51 s).
            index.add(keys.astype(np.uint64), np.asarray(matrix[keys]), threads=1)
        out = graph_path(vectors_path.parent, int(group))
        tmp = out.with_suffix(".tmp")
        index.save(str(tmp))
        with open(tmp, "rb") as file:
            os.fsync(file.fileno())
        os.replace(tmp, out)


class VectorMatrix:
    """Read side: the first ``rows`` vectors of a file, searched by cosine similarity.

    ``groups`` (one group number per row) and ``graphs`` (the directory of the graphs that
    :func:`build_graphs` saved) enable HNSW search; without them search is exact.
    """

    def __init__(
        self,
        path: Path,
        dim: int,
        rows: int,
        groups: np.ndarray | None = None,
        graphs: Path | None = None,
    ) -> None:
        self.dim = dim
        self.rows = rows
        self._matrix: np.ndarray = (
            np.memmap(path, dtype=np.float32, mode="r", shape=(rows, dim))
            if rows
            else np.zeros((0, dim), dtype=np.float32)
        )
        # Each group's rows, with its graph if it has one.
        self._groups: list[tuple[np.ndarray, Index | None]] = []
        if groups is not None and graphs is not None:
            for group in np.unique(groups):
                members = np.flatnonzero(groups == group)
                file = graph_path(graphs, int(group))
                # view=True memory-maps the saved graph instead of loading it into RAM.
                graph = Index.restore(str(file), view=True) if file.exists() else None
                if graph is not None:
                    if len(graph) != len(members):
                        raise ValueError(f"{file} does not match the vectors it indexes")
                    graph.expansion_search = HNSW_EXPANSION_SEARCH
                self._groups.append((members, graph))

    @property
    def has_hnsw(self) -> bool:
        return any(graph is not None for _, graph in self._groups)

    def query(self, vector: np.ndarray) -> np.ndarray:
        """The query as a unit float32 vector of the right size."""
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != self.dim:
            raise ValueError(f"query vector has {query.shape[0]} dimensions, the index {self.dim}")
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
        group: tuple[np.ndarray, Index | None],
        allowed: np.ndarray | None,
    ) -> np.ndarray:
        """A group's candidate rows: all its allowed rows when they are few or it has no graph,
        else HNSW's top ``k`` (oversampled by the share of allowed rows) of them, falling back to
        all allowed rows when the graph returns too few (a filter the query's neighbourhood
        avoids)."""
        members, graph = group
        if allowed is not None:
            members = members[allowed[members]]
        share = len(members) / len(group[0])
        if graph is None or share < _GATHER_SHARE:
            return members
        keys = np.asarray(
            graph.search(query, int(k * HNSW_OVERSAMPLE / share) + 1, threads=1).keys,
            dtype=np.int64,
        )
        if allowed is not None:
            keys = keys[allowed[keys]]
        return keys if len(keys) >= min(k, len(members)) else members


def _cosines(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    # einsum, not BLAS: after a threaded BLAS call OpenBLAS's workers spin for a while, taking a
    # core from the text search and the rerankers of the same process (measured: a query's CPU
    # time twice its wall time). Single-threaded costs ~30% on a full scan, little on the
    # few thousand rows that HNSW candidates and filters leave.
    return np.einsum("ij,j->i", matrix, query)


def _top(rows: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if k <= 0 or not len(rows):
        return rows[:0], scores[:0].astype(np.float32)
    part = np.argpartition(-scores, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
    order = part[np.argsort(-scores[part], kind="stable")]
    return rows[order], scores[order]
