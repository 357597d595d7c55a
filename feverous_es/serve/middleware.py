"""The app's own ASGI middleware: the body limit and the ``Host`` check, each refusal answered
as every other error is."""

from __future__ import annotations

from collections.abc import Sequence

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
    refusal answered as every other error is: 400 with one ``{"error": …}`` line."""

    _PASSED = "feverous_es.host_ok"

    def __init__(self, app: ASGIApp, allowed_hosts: Sequence[str]) -> None:
        self.app = app
        self.check = TrustedHostMiddleware(self._passed, allowed_hosts=list(allowed_hosts),
                                           www_redirect=False)  # fmt: skip

    async def _passed(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[self._PASSED] = True
        await self.app(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = False

        async def answer(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and not scope.get(self._PASSED):
                refused = True  # the check's own plain-text answer: ours instead
                await error_answer(400, "invalid Host header")(scope, receive, send)
            elif not refused:
                await send(message)

        await self.check(scope, receive, answer)
