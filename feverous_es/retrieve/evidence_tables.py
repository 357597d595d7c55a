"""The tables a claim's evidence points at, read whole from the store for the verdict: the
retrieval stages' last step, so that the verdict reads what retrieval hands it and never the
store."""

from __future__ import annotations

from collections.abc import Sequence

from feverous_es.index.store import Store
from feverous_es.plugins.interfaces import Candidate, Evidence, evidence_tables


def with_tables(evidence: Sequence[Candidate], store: Store) -> Evidence:
    """``evidence`` as :class:`Evidence` holding the whole of its first table (the pipeline's
    best: the one the verdict routes a claim to), read from ``store``; none when the evidence
    holds no table element. One store read a claim."""
    tables = evidence_tables(evidence)[:1]
    return Evidence(evidence, {(page, n): store.page_elements(page, n) for page, n in tables})
