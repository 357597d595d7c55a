"""Client exceptions as one clear line (a :class:`StoreError`), without secrets."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport import ConnectionTimeout, SerializationError, TlsError, TransportError
from elasticsearch import (
    ApiError,
    AuthenticationException,
    AuthorizationException,
    NotFoundError,
    UnsupportedProductError,
)

from feverous_es.errors import StoreError, StoreUnauthorized, StoreUnreachable
from feverous_es.index.elastic.config import ElasticConfig, redact

_AUTH_HINT = "check FEVEROUS_ES_API_KEY, or FEVEROUS_ES_USER and FEVEROUS_ES_PASSWORD"
_MAX_REASON = 300


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= _MAX_REASON else line[: _MAX_REASON - 1] + "…"


def api_reason(error: ApiError) -> str:
    """The server's error type and reason, e.g. ``index_not_found_exception: no such index``."""
    body: Any = error.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        cause = body["error"]
        root = cause.get("root_cause") or []
        if root and isinstance(root[0], dict) and root[0].get("reason"):
            cause = root[0]
        kind, reason = cause.get("type", ""), cause.get("reason", "")
        return f"{kind}: {reason}" if kind and reason else kind or reason or str(error.message)
    if isinstance(body, dict) and body.get("error"):
        return str(body["error"])
    return str(error.message)


def item_reason(error: Any) -> str:
    """The reason of an error that a response body holds (an ``_msearch`` item's, a task's):
    its ``reason`` when it is an object, else the error as it is."""
    return str(error.get("reason", error) if isinstance(error, Mapping) else error)


def describe(error: BaseException, config: ElasticConfig, doing: str = "") -> str:
    """One line for ``error``, naming the cluster by scheme, host and port only."""
    where = config.display_url
    prefix = f"{doing}: " if doing else ""
    if isinstance(error, TlsError):
        hint = (
            "give the cluster's CA certificate with FEVEROUS_ES_CA_CERTS"
            if not config.ca_certs
            else f"is {config.ca_certs} the CA that signed the cluster's certificate?"
        )
        message = f"TLS failure talking to Elasticsearch at {where} ({_cause(error)}): {hint}"
    elif isinstance(error, ConnectionTimeout):
        message = (
            f"Elasticsearch at {where} did not answer within the timeout "
            f"({config.request_timeout:g} s per request): is it up and reachable?"
        )
    elif isinstance(error, TransportConnectionError):
        message = f"cannot reach Elasticsearch at {where} ({_cause(error)})"
    elif isinstance(error, UnsupportedProductError):
        message = (
            f"{where} is not a supported Elasticsearch (this program needs Elasticsearch 8.12 or "
            "later)"
        )
    elif isinstance(error, AuthenticationException):
        message = f"Elasticsearch at {where} refused the credentials (401): {_AUTH_HINT}"
    elif isinstance(error, AuthorizationException):
        reason = api_reason(error)
        if "license" in reason.lower():
            message = (
                f"the cluster's licence does not allow this ({_one_line(reason)}); on the basic "
                "licence use hybrid = knn_query or msearch, not rrf / linear"
            )
        else:
            message = f"the credentials lack a permission: {_one_line(reason)}"
    elif isinstance(error, NotFoundError):
        message = f"not found: {_one_line(api_reason(error))}"
    elif isinstance(error, ApiError):
        message = f"Elasticsearch error {error.meta.status}: {_one_line(api_reason(error))}"
    elif isinstance(error, SerializationError):
        message = f"unreadable answer from Elasticsearch at {where}"
    elif isinstance(error, TransportError):
        message = f"Elasticsearch at {where}: {_cause(error)}"
    else:
        message = _one_line(str(error))
    return redact(prefix + message, config)


def _cause(error: TransportError) -> str:
    """The innermost reason of a transport error, shortened."""
    inner: BaseException = error
    for candidate in getattr(error, "errors", ()) or ():
        inner = candidate
    text = str(getattr(inner, "message", "") or inner)
    # urllib3 prefixes the connection object: "HTTPConnection(host=..., port=...): reason".
    text = re.sub(r"^\w*Connection\([^)]*\):\s*", "", text)
    return _one_line(text) or type(inner).__name__


def error_class(error: BaseException) -> type[StoreError]:
    """The :class:`StoreError` subclass a client exception is: the server out of reach, the
    credentials refused or short of a permission (a licence refusal is neither), or other."""
    if isinstance(error, TlsError | ConnectionTimeout | TransportConnectionError):
        return StoreUnreachable
    if isinstance(error, AuthenticationException):
        return StoreUnauthorized
    if isinstance(error, AuthorizationException) and "license" not in api_reason(error).lower():
        return StoreUnauthorized
    return StoreError


def translate(error: BaseException, config: ElasticConfig, doing: str = "") -> StoreError:
    return error_class(error)(describe(error, config, doing))


@contextmanager
def elastic_errors(config: ElasticConfig, doing: str = "") -> Iterator[None]:
    """Turn the client's exceptions inside the block into a :class:`StoreError`."""
    try:
        yield
    except StoreError:
        raise
    except (ApiError, TransportError) as error:
        raise translate(error, config, doing) from None
