"""``feverous-es serve``: start the HTTP service (uvicorn) over an index."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import click

from feverous_es.console import console, fail, user_errors

TOKEN_ENV = "FEVEROUS_ES_SERVE_TOKEN"


def serve_options(command):  # type: ignore[no-untyped-def]
    """The service's own options, after the pipeline's."""
    for option in reversed([
        click.option("--host", default="127.0.0.1", show_default=True,
                     help="Address to bind (loopback unless told otherwise)."),
        click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True),
        click.option("--max-queue", type=click.IntRange(min=1), default=64, show_default=True,
                     help="Requests that may wait for the pipeline; more are answered 503."),
        click.option("--max-batch", type=click.IntRange(min=1), default=16, show_default=True,
                     help="Claims of waiting requests verified together."),
    ]):  # fmt: skip
        command = option(command)
    return command


def run_server(
    pipeline_opener,  # type: ignore[no-untyped-def]
    *, store: str, location: Path, host: str, port: int, max_queue: int, max_batch: int,
) -> None:  # fmt: skip
    """Open the pipeline (a bad index or model is one error line before anything listens),
    warm its models with one claim, then serve until Ctrl-C."""
    try:
        import uvicorn

        from feverous_es.serve.app import create_app, describe
    except ImportError as missing:
        fail(f"serving needs the serve extra: pip install 'feverous-es[serve]' ({missing.name})")
    token = os.environ.get(TOKEN_ENV) or None
    if token is None and not _loopback(host):
        console.print(
            f"[yellow]warning:[/yellow] serving on {host} without a token: anyone who reaches "
            f"it can use it (set {TOKEN_ENV})",
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
    app = create_app(pipeline, health=health, token=token, max_queue=max_queue,
                     max_batch=max_batch)  # fmt: skip
    console.print(f"serving on http://{host}:{port}/ (API under /v1, Ctrl-C stops)")
    uvicorn.run(app, host=host, port=port, log_level="info")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
