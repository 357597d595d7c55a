"""The text analysis of a build's BM25 fields, chosen by what the cluster can run.

Every BM25 field uses the analyzer :data:`TEXT_ANALYZER`, declared in each index's settings as
one of two analyses (the build's ``_meta`` records which, ``es status`` prints it):

* ``english_folding``: Elasticsearch's ``english`` analyzer rebuilt (possessives, lowercase,
  English stop words, Porter stemming) with ASCII folding after lowercasing, as the embedded store
  analyzes ("Élan" finds "elan"). It needs the ``analysis-common`` module, which every usual
  distribution ships.
* ``standard_stop``: the fallback for a cluster without that module (Elastic's integ-test
  distribution is one): the standard tokenizer, lowercase and English stop words, all built into
  the server. No stemming and no folding: "runs" does not find "run", nor "Élan" "elan".

Queries name no analyzer (a ``match`` uses its field's), so readers work with either.
"""

from __future__ import annotations

from typing import Any

from elasticsearch import ApiError, Elasticsearch

TEXT_ANALYZER = "feverous_text"
ENGLISH_FOLDING = "english_folding"
STANDARD_STOP = "standard_stop"

_STOP = {"feverous_stop": {"type": "stop", "stopwords": "_english_"}}
ANALYSES: dict[str, dict[str, Any]] = {
    ENGLISH_FOLDING: {
        "filter": {
            **_STOP,
            "feverous_possessive": {"type": "stemmer", "language": "possessive_english"},
            "feverous_stemmer": {"type": "stemmer", "language": "english"},
        },
        "analyzer": {
            TEXT_ANALYZER: {
                "type": "custom",
                "tokenizer": "standard",
                "filter": [
                    "feverous_possessive",
                    "lowercase",
                    "asciifolding",
                    "feverous_stop",
                    "feverous_stemmer",
                ],
            }
        },
    },
    STANDARD_STOP: {
        "filter": dict(_STOP),
        "analyzer": {
            TEXT_ANALYZER: {
                "type": "custom",
                "tokenizer": "standard",
                "filter": ["lowercase", "feverous_stop"],
            }
        },
    },
}


def _inline_filters(analysis: str) -> list[Any]:
    """The analyzer's filter chain with each custom filter written out, as ``_analyze`` takes
    it without an index."""
    settings = ANALYSES[analysis]
    chain = settings["analyzer"][TEXT_ANALYZER]["filter"]
    return [settings["filter"].get(name, name) for name in chain]


def probe_analysis(client: Elasticsearch) -> str:
    """The best analysis the cluster runs: ``english_folding`` when an ``_analyze`` request with
    its filters succeeds, else ``standard_stop`` (the server answers 400 for a filter no module
    provides). A key that may not call ``_analyze`` raises the authorization error."""
    try:
        client.indices.analyze(
            tokenizer="standard", filter=_inline_filters(ENGLISH_FOLDING), text="Élan's runs"
        )
    except ApiError as error:  # a 403 (AuthorizationException) is not a missing module
        if error.meta.status == 400:
            return STANDARD_STOP
        raise
    return ENGLISH_FOLDING
