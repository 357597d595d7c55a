"""Choosing a store by name, so that commands above the store interface never name one."""

from __future__ import annotations

from pathlib import Path

from feverous_es.errors import StoreError
from feverous_es.index.dump.wiki import WHOLE, Part
from feverous_es.index.store import Store, StoreWriter

STORES = ("embedded", "elasticsearch")


def open_writer(
    kind: str,
    location: str | Path,
    dim: int,
    part: Part = WHOLE,
    rows: tuple[int, int] = (0, 0),
    fingerprint: str = "",
) -> StoreWriter:
    """A writer of a build; ``part`` one of several writing one build (Elasticsearch only),
    covering ``rows`` of the ``(part's, whole build's)`` dump pages, of the dump
    ``fingerprint`` names."""
    if kind == "embedded":
        from feverous_es.index.embedded import EmbeddedWriter

        if not part.whole:
            raise StoreError(
                "a build in parts needs --store elasticsearch: an embedded index has one writer"
            )
        return EmbeddedWriter(Path(location), dim)
    if kind == "elasticsearch":
        # location: a cluster URL, a config file, or ignored (environment / default config file).
        from feverous_es.index import elastic

        return elastic.open_writer(location, dim, part, rows, fingerprint)
    raise StoreError(f"unknown store {kind!r} (choose from {', '.join(STORES)})")


def open_store(kind: str, location: str | Path) -> Store:
    if kind == "embedded":
        from feverous_es.index.embedded import EmbeddedStore

        return EmbeddedStore(Path(location))
    if kind == "elasticsearch":
        from feverous_es.index import elastic

        return elastic.open_store(location)
    raise StoreError(f"unknown store {kind!r} (choose from {', '.join(STORES)})")
