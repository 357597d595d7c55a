"""How the service answers an error: one ``{"error": ...}`` line with its status, a 5xx in the
service's own words with the request's id (the log has the details, once, under that id)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from feverous_es.errors import BadTextError, FeverousError, StoreError
from feverous_es.serve.bodies import MAX_BODY_BYTES
from feverous_es.serve.metrics import ServiceMetrics, store_error_kind
from feverous_es.serve.readiness import CATEGORIES, PIPELINE_STOPPED
from feverous_es.serve.schema import ErrorAnswer
from feverous_es.serve.worker import QueueFull, RequestTimeout, ShuttingDown, WorkerStopped

log = logging.getLogger("feverous_es.serve")

ERROR_MEANINGS = {
    400: "Malformed JSON.",
    401: "The server has a token and the request lacks it (or has another).",
    413: f"The request body is over {MAX_BODY_BYTES} bytes.",
    422: "A field is unknown, missing or out of its limits.",
    500: "A fault of the server: the answer names the request's id, the log the error.",
    501: "The configured verdict plugin reads no entailment model.",
    503: "The queue is full (Retry-After), the store fails, the pipeline stopped, or the "
    "server is shutting down; from a probe: not alive, or not ready and why.",
    504: "No answer within the request's deadline (serve --request-timeout).",
}
API_ERRORS = (400, 401, 413, 422, 500, 503, 504)


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI responses of these error statuses: each is one ``{"error": ...}`` line."""
    return {s: {"model": ErrorAnswer, "description": ERROR_MEANINGS[s]} for s in statuses}


def api_answers(answer: Any, *errors: int) -> dict[int | str, dict[str, Any]]:
    """An API route's OpenAPI responses: ``answer``'s model, and every error it may answer."""
    return {200: {"model": answer}, **documented(*API_ERRORS, *errors)}


class ServeError(Exception):
    """An error answered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


def error_answer(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def install_error_handlers(app: FastAPI, metrics: ServiceMetrics) -> None:
    @app.exception_handler(ServeError)
    async def serve_error(_: Request, error: ServeError) -> JSONResponse:
        return error_answer(error.status, error.message, error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0]
        if first.get("type") == "json_invalid":
            return error_answer(
                400, f"malformed JSON: {first.get('ctx', {}).get('error', '')}".strip()
            )
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        return error_answer(422, f"{where or 'body'}: {first.get('msg', 'invalid')}")

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        message = {404: "not found", 405: "method not allowed"}.get(error.status_code)
        return error_answer(error.status_code, message or str(error.detail), error.headers)

    @app.exception_handler(ClientGone)
    async def gone(_: Request, error: ClientGone) -> Response:
        return Response(status_code=499)  # nobody reads it; the log and metrics count it

    @app.exception_handler(QueueFull)
    async def busy(request: Request, error: QueueFull) -> JSONResponse:
        metrics.rejected.inc()
        return error_answer(503, _with_id(request, str(error)), {"Retry-After": "1"})

    @app.exception_handler(FeverousError)
    async def failed(request: Request, error: FeverousError) -> JSONResponse:
        # The messages of these are the service's own words (the caller's text at most).
        if isinstance(error, BadTextError):
            return error_answer(422, str(error))
        if isinstance(error, RequestTimeout):
            return error_answer(504, _with_id(request, str(error)))
        if isinstance(error, ShuttingDown):
            return error_answer(503, _with_id(request, str(error)))
        # The rest may name a URL, a path or an exception: a category for the caller.
        if isinstance(error, StoreError):
            metrics.observe_store_error(error)
            return _internal(request, 503, CATEGORIES[store_error_kind(error)], error)
        if isinstance(error, WorkerStopped):
            return _internal(request, 503, PIPELINE_STOPPED, error)
        return _internal(request, 500, "internal error", error)

    @app.exception_handler(Exception)
    async def bug(request: Request, error: Exception) -> JSONResponse:
        return _internal(request, 500, "internal error", error)


def _internal(request: Request, status: int, category: str, error: Exception) -> JSONResponse:
    """An answer that tells the caller ``category`` and the request's id, and the log (once,
    under that id) the error itself."""
    request_id = _request_id(request)
    log.error("request %s failed (%s): %s", request_id, category, error,
              exc_info=error if status == 500 else None)  # fmt: skip
    return error_answer(
        status, f"{category} (request {request_id}: the server log has the details)"
    )


def _with_id(request: Request, message: str) -> str:
    """A 5xx message in the service's own words, with the request's id to find its log line."""
    return f"{message} (request {_request_id(request)})"


def _request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", "-"))
