"""The service's routes, as two routers over the :class:`Service` an app holds
(``app.state.service``): the API (verify, batch, search, entail, health, metrics), behind the
token when the server has one, and the probes (liveness, readiness), which never need it."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from feverous_es import __version__
from feverous_es.index.search import hit_to_dict, search
from feverous_es.index.store import Filters
from feverous_es.output.report import result_to_dict
from feverous_es.serve.bodies import (
    MAX_CLAIM_ROUNDS,
    MAX_SOURCE_CHARS,
    MAX_TEXT_CHARS,
    BatchRequest,
    EntailRequest,
    SearchRequest,
    VerifyRequest,
)
from feverous_es.serve.errors import ClientGone, ServeError, api_answers, documented
from feverous_es.serve.evidence import evidence_scores
from feverous_es.serve.guard import client_key
from feverous_es.serve.metrics import CONTENT_TYPE, ServiceMetrics
from feverous_es.serve.readiness import PIPELINE_STOPPED, Readiness
from feverous_es.serve.request_log import add_fields, claim_fields
from feverous_es.serve.schema import (
    BatchAnswer,
    EntailAnswer,
    SearchHit,
    TextCheckAnswer,
    VerifyAnswer,
)
from feverous_es.serve.worker import PipelineWorker, QueueShares
from feverous_es.verdict.entailment import Entailment, TextCheck
from feverous_es.verify.pipeline import ClaimResult, Pipeline

T = TypeVar("T")
HUNG = 3  # a batch running this many request deadlines is hung: liveness fails
PIPELINE_HUNG = "pipeline hung"
QUEUE_FULL = "queue full"
DISCONNECT_POLL = 0.25  # seconds between two looks at whether a waiting client is still there

log = logging.getLogger("feverous_es.serve")

BEARER = HTTPBearer(auto_error=False, description="FEVEROUS_ES_SERVE_TOKEN, when the server "
                    "has one: every API route, /metrics and /openapi.json need it.")  # fmt: skip


@dataclass
class Service:
    """What the routes answer from: the pipeline, its worker and what watches them, and the
    server's settings (``token``: None, no token; ``request_timeout``: seconds a request may
    wait for its answer; ``public_health``: ``/v1/health``'s details as the caller may read
    them; ``log_claims``: the claims' text in the request log; ``shares``: each client's
    requests in the service). The server and an operator's tooling reach its worker and
    metrics too (``app.state.service``)."""

    pipeline: Pipeline
    worker: PipelineWorker
    metrics: ServiceMetrics
    readiness: Readiness
    token: str | None
    request_timeout: float | None
    public_health: dict[str, Any]
    log_claims: bool
    shares: QueueShares


def service(request: Request) -> Service:
    return request.app.state.service  # type: ignore[no-any-return]


Served = Annotated[Service, Depends(service)]


def authorized(
    served: Served,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
) -> None:
    if served.token is None:
        return
    given = credentials.credentials if credentials is not None else ""
    if not secrets.compare_digest(given.encode(), served.token.encode()):
        raise ServeError(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})


async def queue_share(request: Request, served: Served) -> AsyncIterator[None]:
    """The request counted against its client's share of the queue while it is served (the
    client as the connection, or a trusted proxy's forwarded header, names it; an IPv6 client
    by its /64)."""
    with served.shares.held(client_key(request.client.host if request.client else "")):
        yield


QueueShare = Depends(queue_share)

# The answers are documented by their models (``responses``) but returned as they are (what
# the CLI's --json prints); the tests check them against these models.
api = APIRouter(dependencies=[Depends(authorized)])
probes = APIRouter()
PROBE_PATHS = frozenset({"/v1/health/live", "/v1/health/ready"})  # what the probe port serves
api_post = partial(api.post, response_model=None)


def logged(served: Service, request: Request, results: list[ClaimResult]) -> None:
    claims = [r.claim for r in results]
    labels = [r.verdict.label.value for r in results]
    add_fields(request, claim_fields(claims, labels, with_text=served.log_claims))


@api_post("/v1/verify", summary="Verify one claim", responses=api_answers(VerifyAnswer),
          dependencies=[QueueShare])  # fmt: skip
async def verify(body: VerifyRequest, request: Request, served: Served) -> dict[str, Any]:
    worker, timeout = served.worker, served.request_timeout
    started = time.monotonic()
    [result] = await _while_connected(
        request, worker.verify([body.claim], body.hops, timeout=timeout)
    )
    logged(served, request, [result])
    answer = result_to_dict(result)
    if body.evidence_scores:  # a second job, inside the request's one deadline and connection
        left = None if timeout is None else max(0.0, timeout - (time.monotonic() - started))
        answer["decided"]["scores"] = await _while_connected(
            request, worker.run(partial(evidence_scores, result), timeout=left)
        )
    return answer


@api_post("/v1/verify/batch", summary="Verify many claims, batched",
          responses=api_answers(BatchAnswer), dependencies=[QueueShare])  # fmt: skip
async def verify_batch(body: BatchRequest, request: Request, served: Served) -> dict[str, Any]:
    rounds = 1 + (served.pipeline.config.hops if body.hops is None else body.hops)
    if len(body.claims) * rounds > MAX_CLAIM_ROUNDS:
        raise ServeError(422, f"{len(body.claims)} claims by {rounds} retrieval rounds is "
                         f"over {MAX_CLAIM_ROUNDS}: send fewer claims or hops")  # fmt: skip
    results = await _while_connected(
        request, served.worker.verify(body.claims, body.hops, timeout=served.request_timeout)
    )
    logged(served, request, results)
    return {"results": [result_to_dict(r) for r in results]}


@api_post("/v1/search", summary="Search the index's elements",
          responses=api_answers(list[SearchHit]), dependencies=[QueueShare])  # fmt: skip
async def search_elements(body: SearchRequest, served: Served) -> list[dict[str, Any]]:
    filters = Filters(pages=tuple(body.pages), types=tuple(body.types))

    def run(p: Pipeline) -> list[dict[str, Any]]:
        hits = search(p.context.store, p.context.embed, body.query, body.k, body.mode, filters)
        return [hit_to_dict(h) for h in hits]

    result: list[dict[str, Any]] = await served.worker.run(run, timeout=served.request_timeout)
    return result


@api_post("/v1/entail", summary="Check a claim or a text against a source you give",
          responses=api_answers(EntailAnswer | TextCheckAnswer, 501),
          dependencies=[QueueShare])  # fmt: skip
async def entail(body: EntailRequest, served: Served) -> dict[str, Any]:
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

    answer: dict[str, Any] = await served.worker.run(run, timeout=served.request_timeout)
    return answer


@api.get("/v1/health", summary="Readiness, store, index build, models",
         responses=documented(401, 503))  # fmt: skip
async def health(served: Served) -> JSONResponse:
    worker = served.worker
    queue = {"waiting": worker.waiting, "max": worker.max_queue, "batches": worker.batches}
    check = await served.readiness.check()
    detail = served.token is not None
    status = check.to_dict(detail=detail) if not check.ready else {"status": "ok"}
    body = {**status, "version": __version__, **served.public_health, "queue": queue}
    return JSONResponse(body, status_code=200 if check.ready else 503)


@api.get("/metrics", include_in_schema=False)
async def metrics(served: Served) -> Response:
    return Response(served.metrics.render(), media_type=CONTENT_TYPE)


@api.get("/openapi.json", include_in_schema=False)
async def openapi(request: Request) -> dict[str, Any]:
    return request.app.openapi()  # type: ignore[no-any-return]


@probes.get("/v1/health/live", summary="Liveness: the process answers, its pipeline thread runs",
            responses=documented(503))  # fmt: skip
async def live(served: Served) -> dict[str, str]:
    worker, timeout = served.worker, served.request_timeout
    if worker.failure is not None:  # only a restart brings the thread back (the log says why)
        raise ServeError(503, f"not alive: {PIPELINE_STOPPED}")
    if timeout is not None and worker.running_for() > HUNG * timeout:
        # A batch past several deadlines is hung (a stage that never returns): only a restart
        # frees the thread.
        log.error("not alive: a batch has run %.0f s", worker.running_for())
        raise ServeError(503, f"not alive: {PIPELINE_HUNG}")
    return {"status": "alive"}


@probes.get("/v1/health/ready", summary="Readiness: the store answers, the pipeline runs",
            responses=documented(503))  # fmt: skip
async def ready(served: Served) -> dict[str, str]:
    check = await served.readiness.check()
    if not check.ready:
        raise ServeError(503, f"not ready: {check.category}", {"Retry-After": "5"})
    if served.worker.waiting >= served.worker.max_queue:  # a new request would be refused
        raise ServeError(503, f"not ready: {QUEUE_FULL}", {"Retry-After": "1"})
    return {"status": "ready"}


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
