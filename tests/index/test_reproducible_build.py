"""An index is reproducible from the dump (docs/design.md, same input, same output): builds of the
same pages written in other chunks, embedded in other batches, or interrupted and resumed hold
the same vectors, byte for byte."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from feverous_es.index.building.builder import build
from feverous_es.index.dump.wiki import WikiDB
from feverous_es.index.embedded import NEW_VECTOR_FILES, EmbeddedWriter
from feverous_es.runtime.embedder import Embedder
from tests.conftest import SAMPLE_DB

PAGES = 40  # of the sample: ~300 vectors (sentences, list items, table rows, pages)


class Interrupted(Exception):
    """A build stopped after its first chunk, as Ctrl-C stops one."""


def build_sample(out: Path, *, chunk_elements: int, batch_size: int, stop_once: bool) -> Path:
    embedder = Embedder(device="cpu", batch_size=batch_size)
    if stop_once:

        def stop(rows: int, elements: int) -> None:
            raise Interrupted

        writer = EmbeddedWriter(out, embedder.dim)
        with WikiDB(SAMPLE_DB) as db, pytest.raises(Interrupted):
            build(db, writer, embedder, limit=PAGES, chunk_elements=chunk_elements,
                  on_progress=stop)  # fmt: skip
        writer.close()
    writer = EmbeddedWriter(out, embedder.dim)  # resumes after the chunk written
    with WikiDB(SAMPLE_DB) as db:
        build(db, writer, embedder, limit=PAGES, chunk_elements=chunk_elements)
    writer.close()
    return out


def test_builds_in_other_chunks_batches_and_resume_points_hold_the_same_vectors(
    tmp_path: Path,
) -> None:
    one = build_sample(tmp_path / "one", chunk_elements=5_000, batch_size=32, stop_once=False)
    other = build_sample(tmp_path / "other", chunk_elements=300, batch_size=3, stop_once=True)
    row_bytes = 384 * np.dtype(NEW_VECTOR_FILES.dtype).itemsize
    for name, at_least in ((NEW_VECTOR_FILES.elements, 100), (NEW_VECTOR_FILES.pages, PAGES)):
        written = (one / name).read_bytes()
        assert len(written) >= at_least * row_bytes, name  # a real build, not an empty file
        assert (other / name).read_bytes() == written, name
