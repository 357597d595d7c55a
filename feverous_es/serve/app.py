"""The HTTP service: a JSON API over the pipeline, and the page at ``/``.

Routes (their OpenAPI description at ``/openapi.json``):

* ``POST /v1/verify`` ``{"claim", "hops"?}`` → what ``verify --json`` prints;
* ``POST /v1/verify/batch`` ``{"claims": [...], "hops"?}`` → ``{"results": [...]}``;
* ``POST /v1/search`` ``{"query", "k"?, "mode"?, "pages"?, "types"?}`` → what ``search --json``
  prints;
* ``POST /v1/entail`` ``{"claim", "evidence": [...], "title"?}`` → what ``entail --json``
  prints: the verdict's entailment model on evidence the caller gives (no retrieval);
* ``GET /v1/health`` → readiness (below) with the details: the store, the index build, each
  model with its files' sha256, the queue; 503 with ``"status": "unavailable"`` and the
  ``reason`` while not ready;
* ``GET /v1/health/live`` → 200 ``{"status": "alive"}`` while the process answers (liveness);
* ``GET /v1/health/ready`` → 200 ``{"status": "ready"}`` while the store answers a cheap query
  and the models are loaded, else 503 with the reason (readiness:
  :mod:`feverous_es.serve.readiness`);
* ``GET /metrics`` → Prometheus' text format (:mod:`feverous_es.serve.metrics`).

Each request is logged as one JSON line (:mod:`feverous_es.serve.request_log`).

Every error is 4xx/5xx with one line of JSON, ``{"error": "..."}``: malformed JSON 400, a
missing or wrong token 401, unknown route 404, a body over ``MAX_BODY_BYTES`` 413, fields that
are unknown, missing or out of their limits 422, a full queue 503 (with ``Retry-After``).

With a token (``FEVEROUS_ES_SERVE_TOKEN``), every API route, ``/metrics`` and the OpenAPI
description need ``Authorization: Bearer <token>``. The page and its static files carry no data
and load without it (a browser cannot send a header with a page load); the page asks for the
token when the API answers 401 and sends it with each request. Liveness and readiness answer
without it too: a probe should need no secret, and they tell nothing but a status and a reason.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Request
from fastapi import HTTPException as FastAPIHTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feverous_es import __version__
from feverous_es.errors import EmptyClaimError, FeverousError, StoreError
from feverous_es.index.elements import ElementType
from feverous_es.index.search import hit_to_dict, search
from feverous_es.index.store import Filters
from feverous_es.output.report import result_to_dict
from feverous_es.serve.metrics import CONTENT_TYPE, ServiceMetrics
from feverous_es.serve.readiness import Readiness
from feverous_es.serve.request_log import RequestLog, add_fields, claim_fields
from feverous_es.serve.schema import BatchAnswer, VerifyAnswer
from feverous_es.serve.worker import PipelineWorker, QueueFull, RequestTimeout, WorkerStopped
from feverous_es.verdict.entailment import Entailment
from feverous_es.verdict.inputs import TEXT_TYPES
from feverous_es.verify.pipeline import ClaimResult, Pipeline

MAX_CLAIM_CHARS = 1000  # a FEVEROUS claim is 10-60 words; 1,000 characters is far beyond
MAX_BATCH_CLAIMS = 64
MAX_HOPS = 10
MAX_K = 100
MAX_EVIDENCE_PIECES = 32
MAX_EVIDENCE_CHARS = 5000  # the model reads ~256 tokens; longer evidence is truncated there
MAX_BODY_BYTES = 256 * 1024  # a full batch of the longest claims is 64 kB
STATIC = Path(__file__).with_name("static")

log = logging.getLogger("feverous_es.serve")
# A request's deadline: above the Elasticsearch client's own (60 s, FEVEROUS_ES_TIMEOUT), so a
# store that answers late is reported as the store's error; a store that hangs, by this one.
REQUEST_TIMEOUT = 120.0

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Claim = Annotated[Text, StringConstraints(max_length=MAX_CLAIM_CHARS)]
Hops = Annotated[int | None, Field(ge=0, le=MAX_HOPS, description="Next-hop rounds.")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VerifyRequest(_Strict):
    claim: Claim = Field(description=f"The claim, 1-{MAX_CLAIM_CHARS} characters.")
    hops: Hops = None
    evidence_scores: bool = Field(
        False,
        description="Also score each sentence the verdict read on its own with the entailment "
        "model (decided.scores: label probabilities by element id).",
    )


class BatchRequest(_Strict):
    claims: list[Claim] = Field(min_length=1, max_length=MAX_BATCH_CLAIMS)
    hops: Hops = None


class EntailRequest(_Strict):
    claim: Claim = Field(description=f"The claim, 1-{MAX_CLAIM_CHARS} characters.")
    evidence: list[Annotated[Text, StringConstraints(max_length=MAX_EVIDENCE_CHARS)]] = Field(
        min_length=1, max_length=MAX_EVIDENCE_PIECES,
        description="The evidence the claim is read against, in order.",
    )  # fmt: skip
    title: str = Field("", max_length=200, description="The page the evidence is from.")


class SearchRequest(_Strict):
    query: Claim
    k: int = Field(10, ge=1, le=MAX_K)
    mode: Literal["hybrid", "bm25", "knn"] = "hybrid"
    pages: list[Text] = Field(default_factory=list, max_length=50)
    types: list[ElementType] = Field(default_factory=list)


class ServeError(Exception):
    """An error answered as ``{"error": message}`` with ``status``."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def create_app(
    pipeline: Pipeline,
    *,
    health: dict[str, Any],
    token: str | None = None,
    max_queue: int = 64,
    max_batch: int = 16,
    log_claims: bool = False,
    request_timeout: float | None = REQUEST_TIMEOUT,
) -> FastAPI:
    """The application over an open ``pipeline`` (closed when the app shuts down; its models
    loaded: the server warms them first). ``health``: what ``/v1/health`` reports of the store
    and models (:func:`describe`). ``log_claims``: put the claims' text in the request log.
    ``request_timeout``: seconds a request may wait for its answer (then 504)."""
    worker = PipelineWorker(pipeline, max_queue=max_queue, max_batch=max_batch)
    metrics = ServiceMetrics(
        version=__version__, models=health.get("models", ()),
        queue_waiting=lambda: worker.waiting, queue_capacity=max_queue,
    )  # fmt: skip
    worker.on_batch = metrics.observe_batch
    readiness = Readiness(pipeline.context.store, on_store_error=metrics.observe_store_error)

    async def ready() -> dict[str, str] | None:
        """None when ready, else the check's reason (``metrics`` learn either way)."""
        check = await readiness.check()
        metrics.ready.set(1 if check.ready else 0)
        return None if check.ready else check.to_dict()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        worker.start()
        try:
            yield
        finally:
            # A batch outliving the request deadline would hold the exit: it is left behind.
            if worker.stop(timeout=request_timeout):
                pipeline.close()

    def authorized(request: Request) -> None:
        if token is None:
            return
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(given.encode(), token.encode()):
            raise ServeError(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})

    app = FastAPI(
        title="feverous-es",
        version=__version__,
        description="Fact verification over Wikipedia: a claim in, a verdict and the evidence "
        "that decided it out.",
        lifespan=lifespan,
        openapi_url=None,  # served below, behind the token
        docs_url=None,  # its page loads scripts from a CDN; the service works offline
        redoc_url=None,
    )
    app.state.worker = worker  # what an operator's tooling (and the fault tests) reach
    api = [Depends(authorized)]

    def logged(request: Request, results: list[ClaimResult]) -> None:
        claims = [r.claim for r in results]
        labels = [r.verdict.label.value for r in results]
        add_fields(request, claim_fields(claims, labels, with_text=log_claims))

    # The answers are documented by their models but returned as they are (what `verify
    # --json` prints); the tests check them against these models.
    @app.post("/v1/verify", dependencies=api, summary="Verify one claim",
              responses={200: {"model": VerifyAnswer}})  # fmt: skip
    async def verify(body: VerifyRequest, request: Request) -> dict[str, Any]:
        [result] = await worker.verify([body.claim], body.hops, timeout=request_timeout)
        logged(request, [result])
        answer = result_to_dict(result)
        if body.evidence_scores:
            answer["decided"]["scores"] = await worker.run(
                partial(evidence_scores, result), timeout=request_timeout
            )
        return answer

    @app.post("/v1/verify/batch", dependencies=api, summary="Verify many claims, batched",
              responses={200: {"model": BatchAnswer}})  # fmt: skip
    async def verify_batch(body: BatchRequest, request: Request) -> dict[str, Any]:
        results = await worker.verify(body.claims, body.hops, timeout=request_timeout)
        logged(request, results)
        return {"results": [result_to_dict(r) for r in results]}

    @app.post("/v1/search", dependencies=api, summary="Search the index's elements")
    async def search_elements(body: SearchRequest) -> list[dict[str, Any]]:
        filters = Filters(pages=tuple(body.pages), types=tuple(body.types))

        def run(p: Pipeline) -> list[dict[str, Any]]:
            hits = search(p.context.store, p.context.embed, body.query, body.k, body.mode, filters)
            return [hit_to_dict(h) for h in hits]

        result: list[dict[str, Any]] = await worker.run(run, timeout=request_timeout)
        return result

    @app.post("/v1/entail", dependencies=api, summary="Read a claim against given evidence")
    async def entail(body: EntailRequest) -> dict[str, Any]:
        def run(p: Pipeline) -> dict[str, Any]:
            reader = getattr(p.verdict, "reader", None)
            if reader is None:
                raise ServeError(501, "the configured verdict plugin reads no entailment model")
            result: Entailment = reader.entail(body.claim, body.evidence, title=body.title)
            return result.to_dict()

        answer: dict[str, Any] = await worker.run(run, timeout=request_timeout)
        return answer

    @app.get("/v1/health", dependencies=api, summary="Readiness, store, index build, models")
    async def health_route() -> JSONResponse:
        queue = {"waiting": worker.waiting, "max": worker.max_queue, "batches": worker.batches}
        unready = await ready()
        status = unready or {"status": "ok"}
        body = {**status, "version": __version__, **health, "queue": queue}
        return JSONResponse(body, status_code=503 if unready else 200)

    @app.get("/v1/health/live", summary="Liveness: the process answers, its pipeline thread runs")
    async def live() -> dict[str, str]:
        if worker.failure is not None:  # only a restart brings the thread back
            raise ServeError(503, f"not alive: {worker.failure}")
        return {"status": "alive"}

    @app.get("/v1/health/ready", summary="Readiness: the store answers, the models are loaded")
    async def ready_route() -> dict[str, str]:
        unready = await ready()
        if unready:
            raise ServeError(503, f"not ready: {unready['reason']}", {"Retry-After": "5"})
        return {"status": "ready"}

    @app.get("/metrics", dependencies=api, include_in_schema=False)
    async def metrics_route() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/openapi.json", dependencies=api, include_in_schema=False)
    async def openapi() -> dict[str, Any]:
        return app.openapi()

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _install_error_handlers(app, metrics)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    app.add_middleware(RequestLog, metrics=metrics)  # outermost: it sees every answer, 413 too
    return app


def _error(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _install_error_handlers(app: FastAPI, metrics: ServiceMetrics) -> None:
    @app.exception_handler(ServeError)
    async def serve_error(_: Request, error: ServeError) -> JSONResponse:
        return _error(error.status, error.message, error.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, error: RequestValidationError) -> JSONResponse:
        first = error.errors()[0]
        if first.get("type") == "json_invalid":
            return _error(400, f"malformed JSON: {first.get('ctx', {}).get('error', '')}".strip())
        where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        return _error(422, f"{where or 'body'}: {first.get('msg', 'invalid')}")

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, error: HTTPException) -> JSONResponse:
        message = {404: "not found", 405: "method not allowed"}.get(error.status_code)
        return _error(error.status_code, message or str(error.detail), error.headers)

    @app.exception_handler(QueueFull)
    async def busy(_: Request, error: QueueFull) -> JSONResponse:
        metrics.rejected.inc()
        return _error(503, str(error), {"Retry-After": "1"})

    @app.exception_handler(FeverousError)
    async def failed(_: Request, error: FeverousError) -> JSONResponse:
        if isinstance(error, EmptyClaimError):
            return _error(422, str(error))
        if isinstance(error, RequestTimeout):
            return _error(504, str(error))
        if isinstance(error, WorkerStopped):
            return _error(503, str(error))
        status = 500
        if isinstance(error, StoreError):
            status = 503
            metrics.observe_store_error(error)
        log.error("request failed: %s", error)
        return _error(status, str(error))

    @app.exception_handler(Exception)
    async def bug(_: Request, error: Exception) -> JSONResponse:
        log.exception("internal error", exc_info=error)
        return _error(500, "internal error (the server log has the details)")


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
            await _error(413, f"request body over {self.limit} bytes")(scope, receive, send)
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


def evidence_scores(result: ClaimResult, pipeline: Pipeline) -> dict[str, dict[str, float]]:
    """Each sentence or list item the verdict read, scored on its own by the verdict's
    entailment model, by element id (empty for a verdict plugin that cannot)."""
    score = getattr(pipeline.verdict, "score_evidence", None)
    read = set(result.verdict.read)
    pieces = [c for c in result.evidence if c.element.id in read and c.element.type in TEXT_TYPES]
    if score is None or not pieces:
        return {}
    rows = score(result.claim, pieces)
    return {
        c.element.id: {label.value: p for label, p in row.items()}
        for c, row in zip(pieces, rows, strict=True)
    }


def describe(pipeline: Pipeline, store: str, location: str) -> dict[str, Any]:
    """What ``/v1/health`` reports: the store (kind, location without credentials, the build's
    counts and format) and every model the pipeline runs, with its files' sha256."""
    from feverous_es.runtime.embedder import default_model_dir
    from feverous_es.runtime.files import sha256_file

    opened = pipeline.context.store
    state = opened.state()
    if hasattr(opened, "config"):  # Elasticsearch: the cluster the configuration chose
        location = opened.config.display_url
    info: dict[str, Any] = {
        "kind": store,
        "location": _without_credentials(location),
        "elements": state.elements,
        "pages": state.pages,
        "complete": state.complete,
    }
    meta = Path(location) / "meta.json"
    if store == "embedded" and meta.is_file():
        info["format"] = json.loads(meta.read_text(encoding="utf-8"))
    dirs = {"embedder": default_model_dir()}
    dirs.update(getattr(pipeline.verdict, "model_dirs", dict)())
    models = [
        {
            "name": name,
            "path": str(path),
            "files": {f.name: sha256_file(f) for f in sorted(path.glob("*.onnx"))},
        }
        for name, path in dirs.items()
    ]
    return {"store": info, "models": models, "hops": pipeline.config.hops}


def _without_credentials(location: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(location)
    if parts.password is None and parts.username is None:
        return location
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(parts._replace(netloc=netloc))
