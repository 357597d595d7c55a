"""The app's own ASGI middleware: the body limit, the ``Host`` check and the probe port's
routes, each refusal answered as every other error is."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from fastapi import HTTPException as FastAPIHTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feverous_es.serve.errors import error_answer


class BodyLimit:
    """Refuses request bodies over ``limit`` bytes with 413, by their Content-Length or, for a
    body sent without one, as soon as it grows past the limit."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            await error_answer(413, f"request body over {self.limit} bytes")(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:  # FastAPI passes an HTTPException through its body parsing
                raise FastAPIHTTPException(413, f"request body over {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


class HostCheck:
    """Starlette's ``TrustedHostMiddleware`` (``Host`` must be one of ``allowed_hosts``), its
    refusal answered as every other error is: 400 with one ``{"error": …}`` line. Requests to
    ``probe_port`` pass unchecked: an orchestrator's probe names the pod's address, and a probe
    answers nothing a rebound page could use."""

    _PASSED = "feverous_es.host_ok"

    def __init__(
        self, app: ASGIApp, allowed_hosts: Sequence[str], probe_port: int | None = None
    ) -> None:
        self.app, self.probe_port = app, probe_port
        self.check = TrustedHostMiddleware(self._passed, allowed_hosts=list(allowed_hosts),
                                           www_redirect=False)  # fmt: skip

    async def _passed(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[self._PASSED] = True
        await self.app(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.probe_port is not None and _port(scope) == self.probe_port:
            await self.app(scope, receive, send)
            return
        refused = False

        async def answer(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and not scope.get(self._PASSED):
                refused = True  # the check's own plain-text answer: ours instead
                await error_answer(400, "invalid Host header")(scope, receive, send)
            elif not refused:
                await send(message)

        await self.check(scope, receive, answer)


class ProbePort:
    """On ``port`` (the probes' own), only ``paths`` are served; anything else is 404 there."""

    def __init__(self, app: ASGIApp, port: int, paths: Collection[str]) -> None:
        self.app, self.port, self.paths = app, port, paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _port(scope) == self.port and scope["path"] not in self.paths:
            await error_answer(404, "the probe port serves only the health probes")(
                scope, receive, send
            )
            return
        await self.app(scope, receive, send)


def _port(scope: Scope) -> int | None:
    """The server port an HTTP request came in on."""
    server = scope.get("server") if scope["type"] == "http" else None
    return server[1] if server else None
