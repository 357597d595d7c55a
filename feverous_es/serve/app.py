"""The HTTP service: a JSON API over the pipeline, and the page at ``/``.

Routes (their OpenAPI description at ``/openapi.json``):

* ``POST /v1/verify`` ``{"claim", "hops"?}`` → what ``verify --json`` prints;
* ``POST /v1/verify/batch`` ``{"claims": [...], "hops"?}`` → ``{"results": [...]}``;
* ``POST /v1/search`` ``{"query", "k"?, "mode"?, "pages"?, "types"?}`` → what ``search --json``
  prints;
* ``POST /v1/entail`` ``{"claim" | "text", "evidence": [...], "title"?}`` → what ``entail
  --json`` prints: the verdict's reader on a source the caller gives (no retrieval), read in
  windows; ``text`` is checked sentence by sentence;
* ``GET /v1/health`` → readiness (below) with the details: the store, the index build, each
  model with its files' sha256, the queue; 503 with ``"status": "unavailable"`` and the
  ``reason`` while not ready. With a token set it also gives the store's location, the models'
  paths and the failure's ``detail``; without one (anyone may read it then), neither;
* ``GET /v1/health/live`` → 200 ``{"status": "alive"}`` while the process answers and its
  pipeline thread runs (liveness), else 503 with why;
* ``GET /v1/health/ready`` → 200 ``{"status": "ready"}`` while the store answers a cheap query
  and the pipeline runs, else 503 with the reason's category, e.g. ``store unreachable`` (no
  host, port or path: :mod:`feverous_es.serve.readiness`);
* ``GET /metrics`` → Prometheus' text format (:mod:`feverous_es.serve.metrics`).

Each request is logged as one JSON line (:mod:`feverous_es.serve.request_log`).

Every error is 4xx/5xx with one line of JSON, ``{"error": "..."}``: malformed JSON 400, a
missing or wrong token 401, unknown route 404, a body over ``MAX_BODY_BYTES`` 413, fields that
are unknown, missing or out of their limits 422, a full queue, a failing store or a stopped
pipeline 503 (a full queue with ``Retry-After``), no answer within the request's deadline 504.
With ``allowed_hosts`` set (``serve --allowed-host``; bound to loopback, the loopback names by
default), a request whose ``Host`` is none of them gets Starlette's plain-text 400: a page on
another site cannot reach a loopback service by DNS rebinding.

With a token (``FEVEROUS_ES_SERVE_TOKEN``), every API route, ``/metrics`` and the OpenAPI
description need ``Authorization: Bearer <token>``. The page and its static files carry no data
and load without it (a browser cannot send a header with a page load); the page asks for the
token when the API answers 401 and sends it with each request. Liveness and readiness answer
without it too: a probe should need no secret, and they tell nothing but a status and a reason.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from fastapi import Depends, FastAPI, Request
from fastapi import HTTPException as FastAPIHTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)
from starlette.exceptions import HTTPException
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from feverous_es import __version__
from feverous_es.errors import BadTextError, FeverousError, StoreError
from feverous_es.index.elements import ElementType
from feverous_es.index.search import hit_to_dict, search
from feverous_es.index.store import Filters
from feverous_es.output.report import result_to_dict
from feverous_es.runtime.parts import graph_sources
from feverous_es.serve.metrics import CONTENT_TYPE, ServiceMetrics, store_error_kind
from feverous_es.serve.readiness import CATEGORIES, PIPELINE_STOPPED, Readiness
from feverous_es.serve.request_log import RequestLog, add_fields, claim_fields
from feverous_es.serve.schema import (
    BatchAnswer,
    EntailAnswer,
    ErrorAnswer,
    SearchHit,
    TextCheckAnswer,
    VerifyAnswer,
)
from feverous_es.serve.worker import (
    SHUTDOWN_GRACE,
    PipelineWorker,
    QueueFull,
    RequestTimeout,
    ShuttingDown,
    WorkerStopped,
)
from feverous_es.verdict.entailment import Entailment, TextCheck
from feverous_es.verdict.inputs import TEXT_TYPES
from feverous_es.verify.pipeline import ClaimResult, Pipeline

MAX_CLAIM_CHARS = 1000  # a FEVEROUS claim is 10-60 words; 1,000 characters is far beyond
T = TypeVar("T")
HUNG = 3  # a batch running this many request deadlines is hung: liveness fails
PIPELINE_HUNG = "pipeline hung"
DISCONNECT_POLL = 0.25  # seconds between two looks at whether a waiting client is still there
MAX_BATCH_CLAIMS = 64
# A request's work: claims times retrieval rounds at most (the first and each hop); 64 claims at
# the default 7 hops fit, 64 at 10 hops do not.
MAX_CLAIM_ROUNDS = 512
MAX_HOPS = 10
MAX_K = 100
MAX_EVIDENCE_PIECES = 256
# A source is read in windows, ~8 ms a window and a claim on 2 cores: 100,000 characters (a
# long web page; WiCE's longest is ~17,000 words) and 5,000 of text (~40 sentences) keep the
# longest request within the request deadline.
MAX_SOURCE_CHARS = 100_000
MAX_TEXT_CHARS = 5_000
MAX_BODY_BYTES = 256 * 1024  # a full batch of the longest claims is 64 kB; the longest source
STATIC = Path(__file__).with_name("static")

log = logging.getLogger("feverous_es.serve")
# A request's deadline: above the Elasticsearch client's own (60 s, FEVEROUS_ES_TIMEOUT), so a
# store that answers late is reported as the store's error; a store that hangs, by this one.
REQUEST_TIMEOUT = 120.0

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("String should have at least 1 character besides whitespace")
    return text


# A text kept as sent, whitespace and all: entail's answers give offsets into it.
SentText = Annotated[str, AfterValidator(_not_blank)]
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
    claim: Claim | None = Field(
        None, description=f"One claim, 1-{MAX_CLAIM_CHARS} characters (or give `text`)."
    )
    text: SentText | None = Field(
        None, description=f"A text of several claims, checked sentence by sentence, at most "
        f"{MAX_TEXT_CHARS} characters (413 beyond; or give `claim`).",
    )  # fmt: skip
    evidence: list[SentText] = Field(
        min_length=1, max_length=MAX_EVIDENCE_PIECES,
        description=f"The source, in pieces read in order as one text of at most "
        f"{MAX_SOURCE_CHARS} characters (413 beyond): a sentence, a page, a document.",
    )  # fmt: skip
    title: str = Field("", max_length=200, description="The page the evidence is from.")
    documents: bool = Field(
        False, description="Each evidence item is a document of its own (an answer's sources, "
        "a RAG answer's passages): no window crosses two, and the answer names the one that "
        "decided (`document`).",
    )  # fmt: skip

    @model_validator(mode="after")
    def _one_of_claim_and_text(self) -> EntailRequest:
        if (self.claim is None) == (self.text is None):
            raise ValueError("give either claim or text")
        return self


class SearchRequest(_Strict):
    query: Claim
    k: int = Field(10, ge=1, le=MAX_K)
    mode: Literal["hybrid", "bm25", "knn"] = "hybrid"
    pages: list[Text] = Field(default_factory=list, max_length=50)
    types: list[ElementType] = Field(default_factory=list)


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


def _documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI responses of these error statuses: each is one ``{"error": ...}`` line."""
    return {s: {"model": ErrorAnswer, "description": ERROR_MEANINGS[s]} for s in statuses}


def _api_answers(answer: Any, *errors: int) -> dict[int | str, dict[str, Any]]:
    """An API route's OpenAPI responses: ``answer``'s model, and every error it may answer."""
    return {200: {"model": answer}, **_documented(*API_ERRORS, *errors)}


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
    allowed_hosts: Sequence[str] | None = None,
) -> FastAPI:
    """The application over an open ``pipeline`` (closed when the app shuts down; its models
    loaded: the server warms them first). ``health``: what ``/v1/health`` reports of the store
    and models (:func:`describe`). ``log_claims``: put the claims' text in the request log.
    ``request_timeout``: seconds a request may wait for its answer (then 504).
    ``allowed_hosts``: the ``Host`` names served (None: any)."""
    worker = PipelineWorker(pipeline, max_queue=max_queue, max_batch=max_batch)
    metrics = ServiceMetrics(
        version=__version__, models=health.get("models", ()),
        queue_waiting=lambda: worker.waiting, queue_capacity=max_queue,
    )  # fmt: skip
    worker.on_batch, worker.on_costs = metrics.observe_batch, metrics.observe_costs
    readiness = Readiness(
        pipeline.context.store, stopped=lambda: worker.failure,
        on_store_error=metrics.observe_store_error,
        on_check=lambda check: metrics.ready.set(1 if check.ready else 0),
        model_files=[f for m in health.get("models", ()) for f in graph_sources(Path(m["path"]))],
    )  # fmt: skip
    public_health = health if token is not None else _without_paths(health)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        worker.start()
        watching = asyncio.create_task(readiness.watch())
        try:
            yield
        finally:
            watching.cancel()
            # A batch stuck on a hung store would hold the exit: it is left behind.
            if worker.stop(timeout=SHUTDOWN_GRACE):
                pipeline.close()

    def authorized(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
    ) -> None:
        if token is None:
            return
        given = credentials.credentials if credentials is not None else ""
        if not secrets.compare_digest(given.encode(), token.encode()):
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
    app.state.metrics = metrics  # the server adds its connections to them
    api = [Depends(authorized)]

    def logged(request: Request, results: list[ClaimResult]) -> None:
        claims = [r.claim for r in results]
        labels = [r.verdict.label.value for r in results]
        add_fields(request, claim_fields(claims, labels, with_text=log_claims))

    # The answers are documented by their models (``responses``) but returned as they are
    # (what the CLI's --json prints); the tests check them against these models.
    api_post = partial(app.post, dependencies=api, response_model=None)

    @api_post("/v1/verify", summary="Verify one claim", responses=_api_answers(VerifyAnswer))
    async def verify(body: VerifyRequest, request: Request) -> dict[str, Any]:
        [result] = await _while_connected(
            request, worker.verify([body.claim], body.hops, timeout=request_timeout)
        )
        logged(request, [result])
        answer = result_to_dict(result)
        if body.evidence_scores:
            answer["decided"]["scores"] = await worker.run(
                partial(evidence_scores, result), timeout=request_timeout
            )
        return answer

    @api_post("/v1/verify/batch", summary="Verify many claims, batched",
              responses=_api_answers(BatchAnswer))  # fmt: skip
    async def verify_batch(body: BatchRequest, request: Request) -> dict[str, Any]:
        rounds = 1 + (pipeline.config.hops if body.hops is None else body.hops)
        if len(body.claims) * rounds > MAX_CLAIM_ROUNDS:
            raise ServeError(422, f"{len(body.claims)} claims by {rounds} retrieval rounds is "
                             f"over {MAX_CLAIM_ROUNDS}: send fewer claims or hops")  # fmt: skip
        results = await _while_connected(
            request, worker.verify(body.claims, body.hops, timeout=request_timeout)
        )
        logged(request, results)
        return {"results": [result_to_dict(r) for r in results]}

    @api_post("/v1/search", summary="Search the index's elements",
              responses=_api_answers(list[SearchHit]))  # fmt: skip
    async def search_elements(body: SearchRequest) -> list[dict[str, Any]]:
        filters = Filters(pages=tuple(body.pages), types=tuple(body.types))

        def run(p: Pipeline) -> list[dict[str, Any]]:
            hits = search(p.context.store, p.context.embed, body.query, body.k, body.mode, filters)
            return [hit_to_dict(h) for h in hits]

        result: list[dict[str, Any]] = await worker.run(run, timeout=request_timeout)
        return result

    @api_post("/v1/entail", summary="Check a claim or a text against a source you give",
              responses=_api_answers(EntailAnswer | TextCheckAnswer, 501))  # fmt: skip
    async def entail(body: EntailRequest) -> dict[str, Any]:
        if (source := sum(map(len, body.evidence))) > MAX_SOURCE_CHARS:
            raise ServeError(413, f"source of {source} characters, over {MAX_SOURCE_CHARS}")
        if body.text is not None and len(body.text) > MAX_TEXT_CHARS:
            raise ServeError(413, f"text of {len(body.text)} characters, over {MAX_TEXT_CHARS}")

        def run(p: Pipeline) -> dict[str, Any]:
            reader = getattr(p.verdict, "reader", None)
            if reader is None:
                raise ServeError(501, "the configured verdict plugin reads no entailment model")
            read = {"title": body.title, "documents": body.documents}
            if body.text is not None:
                check: TextCheck = reader.check_text(body.text, body.evidence, **read)
                return check.to_dict()
            result: Entailment = reader.entail(body.claim, body.evidence, **read)
            return result.to_dict()

        answer: dict[str, Any] = await worker.run(run, timeout=request_timeout)
        return answer

    @app.get("/v1/health", dependencies=api, summary="Readiness, store, index build, models",
             responses=_documented(401, 503))  # fmt: skip
    async def health_route() -> JSONResponse:
        queue = {"waiting": worker.waiting, "max": worker.max_queue, "batches": worker.batches}
        check = await readiness.check()
        status = check.to_dict(detail=token is not None) if not check.ready else {"status": "ok"}
        body = {**status, "version": __version__, **public_health, "queue": queue}
        return JSONResponse(body, status_code=200 if check.ready else 503)

    @app.get("/v1/health/live", summary="Liveness: the process answers, its pipeline thread runs",
             responses=_documented(503))  # fmt: skip
    async def live() -> dict[str, str]:
        if worker.failure is not None:  # only a restart brings the thread back (the log says why)
            raise ServeError(503, f"not alive: {PIPELINE_STOPPED}")
        if request_timeout is not None and worker.running_for() > HUNG * request_timeout:
            # A batch past several deadlines is hung (a stage that never returns): only a
            # restart frees the thread.
            log.error("not alive: a batch has run %.0f s", worker.running_for())
            raise ServeError(503, f"not alive: {PIPELINE_HUNG}")
        return {"status": "alive"}

    @app.get("/v1/health/ready", summary="Readiness: the store answers, the pipeline runs",
             responses=_documented(503))  # fmt: skip
    async def ready_route() -> dict[str, str]:
        check = await readiness.check()
        if not check.ready:
            raise ServeError(503, f"not ready: {check.category}", {"Retry-After": "5"})
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
    if allowed_hosts is not None:
        app.add_middleware(HostCheck, allowed_hosts=allowed_hosts)
    # Outermost: it sees every answer, a 413 or a wrong host's 400 too.
    app.add_middleware(RequestLog, metrics=metrics, routes=app.routes)
    return app


BEARER = HTTPBearer(auto_error=False, description="FEVEROUS_ES_SERVE_TOKEN, when the server "
                    "has one: every API route, /metrics and /openapi.json need it.")  # fmt: skip


def _without_paths(health: dict[str, Any]) -> dict[str, Any]:
    """``/v1/health``'s details as anyone may read them: no store location, no model path."""
    store = {k: v for k, v in health.get("store", {}).items() if k != "location"}
    models = [{k: v for k, v in m.items() if k != "path"} for m in health.get("models", ())]
    return {**health, "store": store, "models": models}


class ClientGone(Exception):
    """The client closed its connection before its answer was ready."""


async def _while_connected(request: Request, work: Awaitable[T]) -> T:
    """``work``'s result; if the client goes away first, ``work`` is cancelled (the worker
    drops the request, or stops its batch at the next stage when nobody else waits for it)."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if not task.done():
        task.cancel()
        raise ClientGone
    return task.result()


async def _disconnect(request: Request) -> None:
    while not await request.is_disconnected():
        await asyncio.sleep(DISCONNECT_POLL)


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

    @app.exception_handler(ClientGone)
    async def gone(_: Request, error: ClientGone) -> Response:
        return Response(status_code=499)  # nobody reads it; the log and metrics count it

    @app.exception_handler(QueueFull)
    async def busy(request: Request, error: QueueFull) -> JSONResponse:
        metrics.rejected.inc()
        return _error(503, _with_id(request, str(error)), {"Retry-After": "1"})

    @app.exception_handler(FeverousError)
    async def failed(request: Request, error: FeverousError) -> JSONResponse:
        # The messages of these are the service's own words (the caller's text at most).
        if isinstance(error, BadTextError):
            return _error(422, str(error))
        if isinstance(error, RequestTimeout):
            return _error(504, _with_id(request, str(error)))
        if isinstance(error, ShuttingDown):
            return _error(503, _with_id(request, str(error)))
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
    return _error(status, f"{category} (request {request_id}: the server log has the details)")


def _with_id(request: Request, message: str) -> str:
    """A 5xx message in the service's own words, with the request's id to find its log line."""
    return f"{message} (request {_request_id(request)})"


def _request_id(request: Request) -> str:
    return str(getattr(request.state, "request_id", "-"))


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
                await _error(400, "invalid Host header")(scope, receive, send)
            elif not refused:
                await send(message)

        await self.check(scope, receive, answer)


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
    counts and format) and every model the pipeline runs, with its graphs' sha256 (as their
    manifests record them: nothing is hashed at start)."""
    from feverous_es.runtime.embedder import default_model_dir
    from feverous_es.runtime.parts import graph_digests

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
            "files": graph_digests(path),
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
