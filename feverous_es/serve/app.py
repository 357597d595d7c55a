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
* ``GET /v1/health/ready`` → 200 ``{"status": "ready"}`` while the store answers a cheap query,
  the pipeline runs and its queue has room, else 503 with the reason's category, e.g. ``store
  unreachable`` or ``queue full`` (no host, port or path: :mod:`feverous_es.serve.readiness`);
  both probes are also served on a port of their own (``serve --probe-port``), which a flood
  of the API cannot fill;
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
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from feverous_es import __version__
from feverous_es.runtime.parts import graph_sources
from feverous_es.serve.bodies import MAX_BODY_BYTES
from feverous_es.serve.errors import install_error_handlers
from feverous_es.serve.health import without_paths
from feverous_es.serve.metrics import ServiceMetrics
from feverous_es.serve.middleware import BodyLimit, HostCheck, ProbePort
from feverous_es.serve.readiness import Readiness
from feverous_es.serve.request_log import RequestLog
from feverous_es.serve.routes import PROBE_PATHS, Service, api, probes
from feverous_es.serve.worker import SHUTDOWN_GRACE, PipelineWorker, QueueShares
from feverous_es.verify.pipeline import Pipeline

STATIC = Path(__file__).with_name("static")
# A request's deadline: above the Elasticsearch client's own (60 s, FEVEROUS_ES_TIMEOUT), so a
# store that answers late is reported as the store's error; a store that hangs, by this one.
REQUEST_TIMEOUT = 120.0


def create_app(
    pipeline: Pipeline,
    *,
    health: dict[str, Any],
    token: str | None = None,
    max_queue: int = 64,
    max_queue_per_client: int | None = None,
    max_batch: int = 16,
    log_claims: bool = False,
    request_timeout: float | None = REQUEST_TIMEOUT,
    allowed_hosts: Sequence[str] | None = None,
    probe_port: int | None = None,
) -> FastAPI:
    """The application over an open ``pipeline`` (closed when the app shuts down; its models
    loaded: the server warms them first). ``health``: what ``/v1/health`` reports of the store
    and models (:func:`~feverous_es.serve.health.describe`). ``log_claims``: put the claims'
    text in the request log. ``request_timeout``: seconds a request may wait for its answer
    (then 504). ``max_queue_per_client``: requests one client may have in the service at once
    (None: a quarter of ``max_queue``). ``allowed_hosts``: the ``Host`` names served (None:
    any). ``probe_port``: the port the server also listens on for the probes alone (anything
    else is 404 there)."""
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

    app = FastAPI(
        title="feverous-es",
        version=__version__,
        description="Fact verification over Wikipedia: a claim in, a verdict and the evidence "
        "that decided it out.",
        lifespan=lifespan,
        openapi_url=None,  # served by the API router, behind the token
        docs_url=None,  # its page loads scripts from a CDN; the service works offline
        redoc_url=None,
    )
    public_health = health if token is not None else without_paths(health)
    share = max_queue_per_client or max(1, max_queue // 4)
    app.state.service = Service(
        pipeline,
        worker,
        metrics,
        readiness,
        token,
        request_timeout,
        public_health,
        log_claims,
        QueueShares(share),
    )
    app.include_router(api)
    app.include_router(probes)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    install_error_handlers(app, metrics)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    if allowed_hosts is not None:
        app.add_middleware(HostCheck, allowed_hosts=allowed_hosts, probe_port=probe_port)
    if probe_port is not None:
        app.add_middleware(ProbePort, port=probe_port, paths=PROBE_PATHS)
    # Outermost: it sees every answer, a 413 or a wrong host's 400 too. It labels a request by
    # the route its path would reach: the routers' own routes (FastAPI holds an included router
    # as one entry of app.routes, with no path of its own), then the app's.
    routes = [r for r in (*api.routes, *probes.routes, *app.routes) if hasattr(r, "path")]
    app.add_middleware(RequestLog, metrics=metrics, routes=routes)
    return app
