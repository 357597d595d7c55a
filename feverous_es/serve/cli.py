"""``feverous-es serve``: start the HTTP service (uvicorn) over an index."""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import click

from feverous_es.console import console, fail, user_errors

TOKEN_ENV = "FEVEROUS_ES_SERVE_TOKEN"


@dataclass(frozen=True)
class ServeOptions:
    """The service's own options (the pipeline's come from the shared pipeline options)."""

    host: str = "127.0.0.1"
    port: int = 8080
    max_queue: int = 64
    max_batch: int = 16
    log_claims: bool = False
    drain_timeout: int = 30
    request_timeout: int = 120


def serve_options(command):  # type: ignore[no-untyped-def]
    """The service's own options, after the pipeline's: the command gets them as
    :class:`ServeOptions`' fields."""
    for option in reversed([
        click.option("--host", default="127.0.0.1", show_default=True,
                     help="Address to bind (loopback unless told otherwise)."),
        click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True),
        click.option("--max-queue", type=click.IntRange(min=1), default=64, show_default=True,
                     help="Requests that may wait for the pipeline; more are answered 503."),
        click.option("--max-batch", type=click.IntRange(min=1), default=16, show_default=True,
                     help="Claims of waiting requests verified together."),
        click.option("--log-claims", is_flag=True,
                     help="Put each claim's text in its request's log line (by default only "
                          "its length and verdict)."),
        click.option("--drain-timeout", type=click.IntRange(min=0), default=30,
                     show_default=True,
                     help="On SIGTERM, seconds the requests in flight and queued may take to "
                          "finish before they are cut off; then the server exits 0."),
        click.option("--request-timeout", type=click.IntRange(min=1), default=120,
                     show_default=True,
                     help="Seconds a request may wait for its answer, queue included; then "
                          "504. Keep it above the store's own timeout (FEVEROUS_ES_TIMEOUT)."),
    ]):  # fmt: skip
        command = option(command)
    return command


def run_server(
    pipeline_opener,  # type: ignore[no-untyped-def]
    *, store: str, location: Path, options: ServeOptions,
) -> None:  # fmt: skip
    """Open the pipeline (a bad index or model is one error line before anything listens),
    warm its models with one claim, then serve until Ctrl-C, or drain and exit 0 on
    SIGTERM."""
    try:
        import uvicorn

        from feverous_es.serve.app import create_app, describe
    except ImportError as missing:
        fail(f"serving needs the serve extra: pip install 'feverous-es[serve]' ({missing.name})")
    token = os.environ.get(TOKEN_ENV) or None
    if token is None and not _loopback(options.host):
        console.print(
            f"[yellow]warning:[/yellow] serving on {options.host} without a token: anyone who "
            f"reaches it can use it (set {TOKEN_ENV})",
            highlight=False,
        )
    with user_errors():
        pipeline = pipeline_opener()
        try:
            pipeline.verify("Warm-up claim: the models load before the first request.")
            health = describe(pipeline, store, str(location))
        except BaseException:
            pipeline.close()
            raise
    app = create_app(
        pipeline, health=health, token=token, max_queue=options.max_queue,
        max_batch=options.max_batch, log_claims=options.log_claims,
        request_timeout=options.request_timeout,
    )  # fmt: skip
    _log_requests_as_lines()
    console.print(
        f"serving on http://{options.host}:{options.port}/ (API under /v1, metrics at "
        "/metrics; Ctrl-C stops, SIGTERM drains)"
    )
    # uvicorn drains on SIGTERM (stops listening, waits for the requests in flight up to the
    # timeout, shuts the app down: the worker finishes what is queued), then raises the signal
    # again once its own handler is gone: this handler makes that a clean exit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    uvicorn.run(
        app, host=options.host, port=options.port, log_level="info",
        access_log=False,  # the request log replaces it: one JSON line a request
        timeout_graceful_shutdown=options.drain_timeout,
    )  # fmt: skip


def _log_requests_as_lines() -> None:
    """The request log's JSON lines go to standard error as they are, one a line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    requests = logging.getLogger("feverous_es.serve.requests")
    requests.addHandler(handler)
    requests.setLevel(logging.INFO)
    requests.propagate = False


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
