"""Connection settings for the Elasticsearch store, and where its credentials come from.

Sources, later ones overriding earlier ones:

1. defaults (below);
2. a TOML file: ``$FEVEROUS_ES_ELASTIC_CONFIG``, else ``~/.config/feverous-es/elasticsearch.toml``
   when it exists (keys are the field names of :class:`ElasticConfig`);
3. environment variables ``FEVEROUS_ES_URL``, ``FEVEROUS_ES_API_KEY``, ``FEVEROUS_ES_USER``,
   ``FEVEROUS_ES_PASSWORD``, ``FEVEROUS_ES_CA_CERTS``, ``FEVEROUS_ES_VERIFY_CERTS``,
   ``FEVEROUS_ES_PREFIX``, ``FEVEROUS_ES_REPLICAS``, ``FEVEROUS_ES_HYBRID``,
   ``FEVEROUS_ES_TIMEOUT``, ``FEVEROUS_ES_SEARCH_WORKERS``;
4. the store ``location`` (``--index`` / ``--out``): an ``http(s)://`` URL sets the URL, a path to
   an existing file is read as the TOML file; anything else (such as the default index directory
   name) is ignored.

Credentials never come from command-line flags (they show in process lists), never sit in the
URL, and are never part of a repr, a log line or an error message.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from feverous_es.errors import StoreError

ENV_CONFIG = "FEVEROUS_ES_ELASTIC_CONFIG"
DEFAULT_CONFIG_FILE = Path("~/.config/feverous-es/elasticsearch.toml")

HYBRID_MODES = ("knn_query", "msearch", "rrf", "linear")
Similarity = Literal["cosine", "dot_product", "l2_norm", "max_inner_product"]
SIMILARITIES: tuple[Similarity, ...] = get_args(Similarity)

_ENV = {
    "FEVEROUS_ES_URL": "url",
    "FEVEROUS_ES_API_KEY": "api_key",
    "FEVEROUS_ES_USER": "username",
    "FEVEROUS_ES_PASSWORD": "password",
    "FEVEROUS_ES_CA_CERTS": "ca_certs",
    "FEVEROUS_ES_VERIFY_CERTS": "verify_certs",
    "FEVEROUS_ES_PREFIX": "prefix",
    "FEVEROUS_ES_REPLICAS": "replicas",
    "FEVEROUS_ES_HYBRID": "hybrid",
    "FEVEROUS_ES_TIMEOUT": "request_timeout",
    "FEVEROUS_ES_SEARCH_WORKERS": "search_workers",
    "FEVEROUS_ES_LEASE_SECONDS": "lease_seconds",
}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class ElasticConfig:
    """Where the cluster is, how to authenticate, and how the indices are laid out and loaded."""

    url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_certs: str | None = None
    verify_certs: bool = True
    # Seconds per request, and for the first contact with the cluster (which bounds how long an
    # unreachable cluster takes to report).
    request_timeout: float = 60.0
    connect_timeout: float = 10.0
    max_retries: int = 3
    # Index layout: aliases <prefix>-elements / -pages / -tables over <alias>-v<N>.
    prefix: str = "feverous"
    shards: int = 1
    replicas: int = 1
    # Restored when a build is published; None resets it to the index default, which keeps
    # Elasticsearch's search-idle behaviour (an explicit "1s" would refresh idle shards too).
    refresh_interval: str | None = None
    dims: int = 384
    similarity: Similarity = "cosine"
    index_options: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "int8_hnsw", "m": 16, "ef_construction": 100}
    )
    # Bulk loading.
    bulk_workers: int = 4
    bulk_docs: int = 1000
    bulk_bytes: int = 8 * 1024 * 1024
    bulk_retries: int = 8
    bulk_initial_backoff: float = 1.0
    bulk_max_backoff: float = 60.0
    # Gzip requests and answers: a worker far from the cluster sends vectors as JSON text, ~4x
    # larger than they pack. A node on this host is always sent plain (client.on_this_host).
    http_compress: bool = True
    # Seconds a worker of a build in parts holds its part (and the last one the publishing)
    # past each write: a second worker for the part waits that long after the first was killed.
    lease_seconds: float = 60.0
    # Seconds publishing waits for the build's shards to be placed (replicas restored) before it
    # gives up with the aliases unchanged (a cluster without room for them never gets there).
    publish_wait: float = 1800.0
    # Segments a shard of a finished build is merged to before it is published (0: no merge).
    # A build is never written again, and one segment is one HNSW graph and one term
    # dictionary to search instead of dozens (docs/decisions.md, Index build).
    merge_segments: int = 1
    # Retrieval: num_candidates = clamp(num_candidates_factor * k, 100, 10000).
    num_candidates_factor: int = 4
    hybrid: str = "knn_query"
    # Claims of a batch the pipeline retrieves at once: the cluster answers one claim's searches
    # while this process reads another's answers (1: one claim at a time).
    search_workers: int = 8

    @property
    def elements_alias(self) -> str:
        return f"{self.prefix}-elements"

    @property
    def pages_alias(self) -> str:
        return f"{self.prefix}-pages"

    @property
    def tables_alias(self) -> str:
        return f"{self.prefix}-tables"

    @property
    def aliases(self) -> tuple[str, str, str]:
        """The aliases of a build, in the order of :data:`~.documents.BUILD_DOCUMENTS`."""
        return self.elements_alias, self.pages_alias, self.tables_alias

    @property
    def display_url(self) -> str:
        """The URL as it may be shown: scheme, host and port only."""
        if not self.url:
            return "(no URL)"
        parts = urlsplit(self.url)
        host = parts.hostname or "?"
        return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")

    def secrets(self) -> tuple[str, ...]:
        """Values that must never appear in output."""
        values = [self.api_key, self.password]
        if self.api_key and ":" in self.api_key:
            values.append(self.api_key.split(":", 1)[1])
        return tuple(value for value in values if value)

    def auth_kind(self) -> str:
        if self.api_key:
            return "api_key"
        if self.username:
            return "basic"
        return "none"

    def validate(self) -> ElasticConfig:
        if not self.url:
            raise StoreError(
                "no Elasticsearch URL: set FEVEROUS_ES_URL, or url in "
                f"${ENV_CONFIG} / {DEFAULT_CONFIG_FILE}"
            )
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise StoreError("the Elasticsearch URL must look like https://host:9200")
        if parts.username or parts.password:
            raise StoreError(
                "the Elasticsearch URL holds credentials: put them in FEVEROUS_ES_USER / "
                "FEVEROUS_ES_PASSWORD or FEVEROUS_ES_API_KEY (or the config file) instead"
            )
        if self.username and not self.password:
            raise StoreError("FEVEROUS_ES_USER is set but FEVEROUS_ES_PASSWORD is not")
        if self.hybrid not in HYBRID_MODES:
            raise StoreError(
                f"hybrid mode {self.hybrid!r} is unknown (choose from {', '.join(HYBRID_MODES)})"
            )
        if self.similarity not in SIMILARITIES:
            raise StoreError(
                f"vector similarity {self.similarity!r} is unknown (choose from "
                f"{', '.join(SIMILARITIES)})"
            )
        if self.merge_segments < 0:
            raise StoreError(f"merge_segments must be 0 or more, not {self.merge_segments}")
        if self.lease_seconds < 1:
            raise StoreError(f"lease_seconds must be at least 1, not {self.lease_seconds}")
        if self.publish_wait <= 0:
            raise StoreError(f"publish_wait must be over 0 seconds, not {self.publish_wait}")
        if self.shards < 1:
            raise StoreError(f"shards must be at least 1, not {self.shards}")
        if self.search_workers < 1:
            raise StoreError(f"search_workers must be at least 1, not {self.search_workers}")
        if self.ca_certs and not Path(self.ca_certs).expanduser().is_file():
            raise StoreError(f"the CA file {self.ca_certs} does not exist")
        if not self.prefix or self.prefix != self.prefix.lower() or "*" in self.prefix:
            raise StoreError(f"index prefix {self.prefix!r} must be non-empty lowercase")
        return self


def _coerce(name: str, value: Any) -> Any:
    """A value from the environment or TOML, as the field's type."""
    default = getattr(ElasticConfig(), name)
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise StoreError(f"Elasticsearch setting {name} must be true or false")
    try:
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
    except (TypeError, ValueError):
        raise StoreError(f"Elasticsearch setting {name} must be a number") from None
    if isinstance(default, Mapping):
        if not isinstance(value, Mapping):
            raise StoreError(f"Elasticsearch setting {name} must be a table")
        return dict(value)
    return str(value)


def _from_mapping(config: ElasticConfig, values: Mapping[str, Any], source: str) -> ElasticConfig:
    known = {f.name for f in fields(ElasticConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise StoreError(f"{source}: unknown Elasticsearch setting(s) {unknown}")
    return replace(config, **{name: _coerce(name, value) for name, value in values.items()})


def read_file(config: ElasticConfig, path: Path) -> ElasticConfig:
    try:
        data = tomllib.loads(path.expanduser().read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"Elasticsearch config file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        # The TOML error names a position, never the file's content.
        raise StoreError(f"Elasticsearch config file {path} cannot be read: {error}") from None
    # Either top-level keys or an [elasticsearch] table.
    values = data.get("elasticsearch", data)
    return _from_mapping(config, values, str(path))


def load_config(
    location: str | Path | None = None, env: Mapping[str, str] | None = None
) -> ElasticConfig:
    """The settings from the config file, the environment and ``location`` (see the module
    docstring), validated."""
    env = os.environ if env is None else env
    config = ElasticConfig()
    location_text = str(location) if location is not None else ""
    # A URL that went through pathlib.Path (click's path options) lost one of its slashes.
    location_text = re.sub(r"^(https?):/+", r"\1://", location_text)
    location_url = location_text.startswith(("http://", "https://"))
    location_file = (
        not location_url and bool(location_text) and Path(location_text).expanduser().is_file()
    )
    if location_file:
        config = read_file(config, Path(location_text))
    elif env.get(ENV_CONFIG):
        config = read_file(config, Path(env[ENV_CONFIG]))
    elif DEFAULT_CONFIG_FILE.expanduser().is_file():
        config = read_file(config, DEFAULT_CONFIG_FILE)
    from_env = {name: env[var] for var, name in _ENV.items() if env.get(var)}
    config = _from_mapping(config, from_env, "environment")
    if location_url:
        config = replace(config, url=location_text)
    return config.validate()


def redact(text: str, config: ElasticConfig) -> str:
    """``text`` with every secret of ``config`` masked."""
    for secret in config.secrets():
        text = text.replace(secret, "***")
    return text
