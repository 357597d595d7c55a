"""The Elasticsearch store: the same store interface as the embedded one, over a shared cluster.

Modules, one job each: ``config`` (settings and credentials), ``client`` (the client and the
cluster check), ``errors`` (client exceptions as one line), ``documents`` (the indices, declared
with the client's DSL), ``queries`` (search bodies), ``loader`` (bulk loading, aliases),
``store`` (:class:`ElasticWriter` / :class:`ElasticStore`), ``cli`` (``feverous-es es …``).

Importing this package does not import the client; :func:`open_writer` and :func:`open_store` do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from feverous_es.index.dump.wiki import Part
    from feverous_es.index.elastic.store import ElasticStore
    from feverous_es.index.elastic.writer import ElasticWriter


def open_writer(
    location: str | Path | None,
    dim: int,
    part: Part | None = None,
    rows: tuple[int, int] = (0, 0),
    fingerprint: str = "",
) -> ElasticWriter:
    """A writer for the cluster named by the environment, the config file and ``location`` (an
    ``http(s)://`` URL or a config file; anything else is ignored); ``part``, ``rows`` and
    ``fingerprint`` as :class:`ElasticWriter` takes them."""
    from feverous_es.index.dump.wiki import WHOLE
    from feverous_es.index.elastic.config import load_config
    from feverous_es.index.elastic.writer import ElasticWriter

    return ElasticWriter(
        load_config(location), dim, part=part or WHOLE, rows=rows, fingerprint=fingerprint
    )


def open_store(location: str | Path | None) -> ElasticStore:
    from feverous_es.index.elastic.config import load_config
    from feverous_es.index.elastic.store import ElasticStore

    return ElasticStore(load_config(location))
