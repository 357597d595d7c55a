"""The Elasticsearch client for a configuration, and the first contact that checks the cluster."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from elastic_transport import TransportError
from elasticsearch import ApiError, AuthorizationException, Elasticsearch
from elasticsearch.serializer import OrjsonSerializer

from feverous_es.errors import StoreError
from feverous_es.hosts import is_loopback
from feverous_es.index.elastic.config import ElasticConfig
from feverous_es.index.elastic.errors import api_reason, translate

# int8_hnsw vectors need 8.12; the 8.x client speaks to 8.x and 9.x servers.
MIN_VERSION = (8, 12)
MAX_MAJOR = 9


def make_client(config: ElasticConfig, **overrides: Any) -> Elasticsearch:
    """A client for ``config``; it makes no request until used."""
    auth: dict[str, Any] = {}
    if config.api_key:
        key = config.api_key
        # "id:key" as the API shows them, or the encoded form it also returns.
        auth["api_key"] = tuple(key.split(":", 1)) if ":" in key else key
    elif config.username:
        auth["basic_auth"] = (config.username, config.password or "")
    tls: dict[str, Any] = {}
    if config.url and config.url.startswith("https://"):
        tls["verify_certs"] = config.verify_certs
        if config.ca_certs:
            tls["ca_certs"] = config.ca_certs
        if not config.verify_certs:
            tls["ssl_show_warn"] = False
    options: dict[str, Any] = {
        "request_timeout": config.request_timeout,
        "max_retries": config.max_retries,
        "retry_on_timeout": True,
        "http_compress": config.http_compress and not on_this_host(config.url),
        "serializer": OrjsonSerializer(),
        **auth,
        **tls,
        **overrides,
    }
    return Elasticsearch(config.url, **options)


def on_this_host(url: str | None) -> bool:
    """Whether ``url`` names this machine: a request that never leaves the host is sent plain,
    since gzip would cost both ends CPU and save nothing."""
    return is_loopback(urlsplit(url or "").hostname or "")


def parse_version(number: str) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", number)
    if not match:
        raise StoreError(f"the cluster reports an unreadable version {number!r}")
    return int(match[1]), int(match[2])


def server_version(client: Elasticsearch) -> str:
    """The server's version number. ``GET /`` answers it, but a cluster without the
    ``rest-root`` module (Elastic's integ-test distribution) answers that with 405: then the
    local node's info says it."""
    try:
        info: Mapping[str, Any] = client.info().body
        return str(info.get("version", {}).get("number", ""))
    except ApiError as error:
        if error.meta.status != 405:
            raise
    nodes: Mapping[str, Any] = client.nodes.info(
        node_id="_local", filter_path="nodes.*.version"
    ).body
    for node in nodes.get("nodes", {}).values():  # the one local node
        return str(node.get("version", ""))
    return ""


def check_cluster(client: Elasticsearch, config: ElasticConfig) -> str | None:
    """Reach the cluster within ``config.connect_timeout`` (no retries) and check that it is a
    supported Elasticsearch; returns its version, or None when the credentials may not read it
    (a read-only key lacks the ``monitor`` privilege). Every failure is one clear
    :class:`StoreError`."""
    probe = client.options(request_timeout=config.connect_timeout, max_retries=0)
    try:
        number = server_version(probe)
    except AuthorizationException:
        return None
    except ApiError as error:
        reason = api_reason(error)
        if error.meta.status in (400, 406) and (
            "compatible-with" in reason or "Content-Type" in reason or "media" in reason
        ):
            raise StoreError(
                f"Elasticsearch at {config.display_url} is too old: this program needs "
                f"{MIN_VERSION[0]}.{MIN_VERSION[1]} or later"
            ) from None
        raise translate(error, config, "cannot connect") from None
    except TransportError as error:  # unreachable, TLS failure, timeout
        raise translate(error, config) from None
    version = parse_version(number)
    if version < MIN_VERSION or version[0] > MAX_MAJOR:
        raise StoreError(
            f"Elasticsearch at {config.display_url} is version {number}: this program needs "
            f"{MIN_VERSION[0]}.{MIN_VERSION[1]} to {MAX_MAJOR}.x"
        )
    return number


def connect(config: ElasticConfig) -> Elasticsearch:
    """A checked client: reachable, authenticated, a supported version."""
    client = make_client(config)
    try:
        check_cluster(client, config)
    except BaseException:
        client.close()
        raise
    return client
