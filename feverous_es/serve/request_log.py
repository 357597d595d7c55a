"""One JSON log line per request, and the request metrics, from one ASGI middleware.

The line (logger ``feverous_es.serve.requests``, on standard error)::

    {"time": "2027-01-15T19:02:11.532Z", "request_id": "9f1c…", "method": "POST",
     "route": "/v1/verify", "status": 200, "latency_ms": 412.7, "client": "127.0.0.1",
     "claim_chars": 54, "verdict": "SUPPORTS"}

``request_id`` is the caller's ``X-Request-ID`` when it is a plain token (letters, digits,
``._:-``, at most 128), else a new one; the response carries it back either way. Routes that
read claims add ``claim_chars`` (a batch: ``claims`` and their total ``claim_chars``) and the
``verdict`` (a batch: one label a claim); ``claim`` / ``claims`` hold the text only when the
server runs with ``--log-claims``. No header is ever logged, so neither is a token.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feverous_es.serve.metrics import UNMATCHED, ServiceMetrics

log = logging.getLogger("feverous_es.serve.requests")
HEADER = "x-request-id"
_PLAIN_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_FIELDS = "log_fields"  # request.state key the routes add their fields under


def add_fields(request: Request, fields: dict[str, Any]) -> None:
    """Let a route add fields (claim length, verdict) to its request's log line."""
    state = request.scope.setdefault("state", {})
    state.setdefault(_FIELDS, {}).update(fields)


def claim_fields(claims: list[str], verdicts: list[str], *, with_text: bool) -> dict[str, Any]:
    """What a verify route logs of its claims: one claim's, or a batch's."""
    if len(claims) == 1:
        fields: dict[str, Any] = {"claim_chars": len(claims[0]), "verdict": verdicts[0]}
        if with_text:
            fields["claim"] = claims[0]
        return fields
    fields = {"claims": len(claims), "claim_chars": sum(map(len, claims)), "verdict": verdicts}
    if with_text:
        fields["claims_text"] = claims
    return fields


class RequestLog:
    """Times each HTTP request, gives it an id, logs its line and counts it in ``metrics``.
    A request refused before routing (a body over the limit, a wrong ``Host``) is labelled
    with the route of ``routes`` its path would have reached."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics, routes: list[BaseRoute]) -> None:
        self.app, self.metrics, self.routes = app, metrics, routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        given = dict(scope["headers"]).get(HEADER.encode(), b"").decode("latin-1")
        request_id = given if _PLAIN_ID.fullmatch(given) else uuid.uuid4().hex
        status = 500  # what the client gets when the app fails before it answers
        scope.setdefault("state", {})["request_id"] = request_id  # the error answers name it

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [h for h in message.get("headers", []) if h[0].lower() != b"x-request-id"]
                message = {**message, "headers": [*headers, (b"x-request-id", request_id.encode())]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            seconds = time.perf_counter() - started
            route = getattr(scope.get("route") or self._route(scope), "path", UNMATCHED)
            self.metrics.observe_request(route, scope["method"], status, seconds)
            client = scope.get("client")
            line = {
                "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "request_id": request_id,
                "method": scope["method"],
                "route": route,
                "status": status,
                "latency_ms": round(seconds * 1000, 1),
                "client": client[0] if client else None,
                **scope.get("state", {}).get(_FIELDS, {}),
            }
            log.info(json.dumps(line, ensure_ascii=False))

    def _route(self, scope: Scope) -> BaseRoute | None:
        return next((r for r in self.routes if r.matches(scope)[0] is Match.FULL), None)
