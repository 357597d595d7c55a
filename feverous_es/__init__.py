"""feverous-es: fact verification over Wikipedia with Elasticsearch or an embedded store.

    from feverous_es import Pipeline

    with Pipeline.open("feverous-index") as pipeline:
        result = pipeline.verify("Some claim about Wikipedia.")
    print(result.verdict.label, [c.element.id for c in result.evidence])

Every name below is imported on first use, so ``import feverous_es`` stays cheap (the command
line imports it to print ``--version``). Errors raised on purpose derive from
:class:`FeverousError`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from feverous_es.errors import (
    BadTextError,
    ConfigError,
    EmptyClaimError,
    FeverousError,
    FormatError,
    IncompatibleIndex,
    ModelError,
    PluginError,
    StoreError,
    StoreUnauthorized,
    StoreUnreachable,
    WikiError,
)

if TYPE_CHECKING:
    from feverous_es.index.backends import open_store
    from feverous_es.index.elements import Element, ElementType
    from feverous_es.index.store import Filters, Hit, PageHit, Store
    from feverous_es.plugins.config import PipelineConfig, load_config
    from feverous_es.plugins.interfaces import Candidate, Label, Verdict
    from feverous_es.verdict.entailment import Entailment, EntailmentModel, TextCheck
    from feverous_es.verdict.windows import Span
    from feverous_es.verify.pipeline import ClaimResult, HopRecord, Pipeline, Retrieval

__version__ = "0.1.0"

_LAZY = {
    "Pipeline": "feverous_es.verify.pipeline",
    "ClaimResult": "feverous_es.verify.pipeline",
    "Retrieval": "feverous_es.verify.pipeline",
    "HopRecord": "feverous_es.verify.pipeline",
    "PipelineConfig": "feverous_es.plugins.config",
    "load_config": "feverous_es.plugins.config",
    "Candidate": "feverous_es.plugins.interfaces",
    "Label": "feverous_es.plugins.interfaces",
    "Verdict": "feverous_es.plugins.interfaces",
    "Entailment": "feverous_es.verdict.entailment",
    "EntailmentModel": "feverous_es.verdict.entailment",
    "TextCheck": "feverous_es.verdict.entailment",
    "Span": "feverous_es.verdict.windows",
    "Element": "feverous_es.index.elements",
    "ElementType": "feverous_es.index.elements",
    "open_store": "feverous_es.index.backends",
    "Store": "feverous_es.index.store",
    "Filters": "feverous_es.index.store",
    "Hit": "feverous_es.index.store",
    "PageHit": "feverous_es.index.store",
}

__all__ = [
    "BadTextError",
    "Candidate",
    "ClaimResult",
    "ConfigError",
    "Element",
    "ElementType",
    "EmptyClaimError",
    "Entailment",
    "EntailmentModel",
    "FeverousError",
    "Filters",
    "FormatError",
    "Hit",
    "HopRecord",
    "IncompatibleIndex",
    "Label",
    "ModelError",
    "PageHit",
    "Pipeline",
    "PipelineConfig",
    "PluginError",
    "Retrieval",
    "Span",
    "Store",
    "StoreError",
    "StoreUnauthorized",
    "StoreUnreachable",
    "TextCheck",
    "Verdict",
    "WikiError",
    "__version__",
    "load_config",
    "open_store",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'feverous_es' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
