"""``feverous-es serve``: start the HTTP service (uvicorn) over an index."""

from __future__ import annotations

import ipaddress
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import click

from feverous_es.console import console, fail, user_errors
from feverous_es.hosts import is_loopback
from feverous_es.params import COUNT
from feverous_es.runtime.malloc import limit_arenas
from feverous_es.serve.limits import (
    CLIENT_CAP,
    MAX_DEFAULT_CAP,
    MAX_LIFETIME,
    MAX_REQUESTS,
    MIN_WRITE_RATE,
    PROBE_CAP,
    READ_DEADLINE,
    RESERVED_DESCRIPTORS,
    WRITE_DEADLINE,
    ConnectionLimits,
    default_connection_cap,
    open_file_limit,
)

TOKEN_ENV = "FEVEROUS_ES_SERVE_TOKEN"
# The names a loopback-bound service answers to by default (DNS rebinding: a page elsewhere
# resolving its own name to 127.0.0.1 sends its own name as the Host).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


@dataclass(frozen=True)
class ServeOptions:
    """The service's own options (the pipeline's come from the shared pipeline options); their
    defaults are :func:`serve_options`', the one place a user reads them (``--help``)."""

    host: str
    port: int
    max_queue: int
    max_queue_per_client: int | None
    max_batch: int
    log_claims: bool
    drain_timeout: int
    request_timeout: int
    allowed_host: tuple[str, ...]
    open_without_token: bool
    max_connections: int | None
    max_connections_per_client: int | None
    exempt_loopback: bool
    trusted_proxy: tuple[str, ...]
    write_timeout: int
    probe_port: int | None


def allowed_hosts(host: str, given: Sequence[str] = ()) -> list[str] | None:
    """The ``Host`` names a service bound to ``host`` answers: those ``given``; else, bound to
    loopback, the loopback names (and the bound address); else any (None)."""
    if given:
        return list(given)
    if is_loopback(host):
        bound = f"[{host}]" if ":" in host else host
        return sorted({*LOOPBACK_HOSTS, bound})
    return None


def serve_options(command):  # type: ignore[no-untyped-def]
    """The service's own options, after the pipeline's: the command gets them as
    :class:`ServeOptions`' fields."""
    for option in reversed([
        click.option("--host", default="127.0.0.1",
                     help="Address to bind (loopback unless told otherwise)."),
        click.option("--port", type=click.IntRange(0, 65535), default=8080),
        click.option("--max-queue", type=COUNT, default=64,
                     help="Requests that may wait for the pipeline; more are answered 503."),
        click.option("--max-queue-per-client", type=COUNT, default=None,
                     help="Requests one client (an IPv6 client by its /64) may have in the "
                          "service at once; more are answered 503 (default: a quarter of "
                          "--max-queue)."),
        click.option("--max-batch", type=COUNT, default=16,
                     help="Claims of waiting requests verified together."),
        click.option("--log-claims", is_flag=True,
                     help="Put each claim's text in its request's log line (by default only "
                          "its length and verdict)."),
        click.option("--drain-timeout", type=click.IntRange(min=0), default=30,
                     help="On SIGTERM, seconds the requests in flight and queued may take to "
                          "finish; then those still queued get 503, the running batch has 5 s "
                          "more, and the server exits 0 (within the timeout + 10 s)."),
        click.option("--request-timeout", type=COUNT, default=120,
                     help="Seconds a request may wait for its answer, queue included; then "
                          "504. Keep it above the store's own timeout (FEVEROUS_ES_TIMEOUT)."),
        click.option("--allowed-host", multiple=True, metavar="NAME",
                     help="A Host name the service answers (repeat for more; '*' for any); "
                          "others get 400. Default: bound to loopback, the loopback names "
                          "only; else any."),
        click.option("--open-without-token", is_flag=True,
                     help=f"Serve beyond loopback without {TOKEN_ENV}: anyone who reaches the "
                          "address can use the API. Without this flag such a start is "
                          "refused."),
        click.option("--max-connections", type=COUNT, default=None,
                     help="Connections held at once; one more is answered 503 and closed as "
                          "it is accepted. Default: 3/4 of what the open-file limit (ulimit "
                          f"-n) leaves after {RESERVED_DESCRIPTORS} for the process, at most "
                          f"{MAX_DEFAULT_CAP}; a cap the limit cannot hold is refused."),
        click.option("--max-connections-per-client", type=COUNT, default=None,
                     help="Connections one client may hold, an IPv6 client counted by its /64 "
                          f"(default: {CLIENT_CAP}, or --max-connections when smaller). A "
                          f"connection is closed after {MAX_REQUESTS:,} requests or "
                          f"{MAX_LIFETIME / 3600:g} h."),
        click.option("--exempt-loopback", is_flag=True,
                     help="Do not count loopback clients against the per-client cap (a "
                          "reverse proxy on this host)."),
        click.option("--trusted-proxy", multiple=True, metavar="ADDRESS",
                     help="A reverse proxy's address (repeat for more): its connections are "
                          "not counted against the per-client cap (the proxy limits its own "
                          "clients: nginx's limit_conn), and its X-Forwarded-For names the "
                          "client in the request log. No other peer's forwarded headers are "
                          "read."),
        click.option("--write-timeout", type=COUNT, default=int(WRITE_DEADLINE),
                     help="Seconds over which a client with answers waiting for it must read "
                          f"{MIN_WRITE_RATE:,} bytes a second, or its connection is aborted. "
                          f"(A request must arrive within {READ_DEADLINE:g} s of when it "
                          "begins.)"),
        click.option("--probe-port", type=click.IntRange(1, 65535), default=None,
                     help="Also serve /v1/health/live and /v1/health/ready on this port, and "
                          f"nothing else, under a cap of their own ({PROBE_CAP} connections): "
                          "a flood of the API port cannot fail an orchestrator's probes."),
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
        from feverous_es.serve.app import create_app
        from feverous_es.serve.health import describe
        from feverous_es.serve.server import serve
    except ImportError as missing:
        fail(f"serving needs the serve extra: pip install 'feverous-es[serve]' ({missing.name})")
    token = os.environ.get(TOKEN_ENV) or None
    if token is None and not is_loopback(options.host):
        if not options.open_without_token:
            fail(f"serving on {options.host} without a token would let anyone who reaches it "
                 f"use the API: set {TOKEN_ENV}, or pass --open-without-token", 2)  # fmt: skip
        console.print(
            f"[yellow]warning:[/yellow] serving on {options.host} without a token: anyone who "
            f"reaches it can use it (set {TOKEN_ENV})",
            highlight=False,
        )
    limits = connection_limits(options)
    limit_arenas()  # before the pipeline starts its threads (runtime/malloc.py)
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
        max_queue_per_client=options.max_queue_per_client,
        max_batch=options.max_batch, log_claims=options.log_claims,
        request_timeout=options.request_timeout,
        allowed_hosts=allowed_hosts(options.host, options.allowed_host),
        probe_port=options.probe_port,
    )  # fmt: skip
    _log_requests_as_lines()
    console.print(
        f"serving on http://{options.host}:{options.port}/ (API under /v1, metrics at "
        "/metrics; Ctrl-C stops, SIGTERM drains)\n"
        f"connections: at most {limits.cap}, {limits.client_cap} a client"
        + (" (loopback exempt)" if limits.exempt_loopback else "")
        + (f"; probes also on port {options.probe_port}" if options.probe_port else "")
        + f"; open-file limit {open_file_limit()}; a request arrives within "
        f"{limits.read_deadline:g} s, a waiting answer is read at {limits.min_write_rate:,} "
        f"bytes/s or more over {limits.write_deadline:g} s",
        highlight=False,
    )
    serve(app, host=options.host, port=options.port, drain_timeout=options.drain_timeout,
          limits=limits, probe_port=options.probe_port)  # fmt: skip


def connection_limits(options: ServeOptions) -> ConnectionLimits:
    """The bounds ``options`` set (defaults from the open-file limit), or one error line."""
    limits = ConnectionLimits(
        cap=options.max_connections or default_connection_cap(),
        per_client=options.max_connections_per_client,
        exempt_loopback=options.exempt_loopback,
        exempt=frozenset(options.trusted_proxy),
        write_deadline=float(options.write_timeout),
    )
    try:
        for proxy in options.trusted_proxy:
            ipaddress.ip_address(proxy)  # its error names the address
        limits.check()
        if options.probe_port is not None and options.probe_port == options.port:
            raise ValueError(f"--probe-port {options.probe_port} is the API's own --port")
    except ValueError as error:
        fail(str(error), 2)
    return limits


def _log_requests_as_lines() -> None:
    """The request log's JSON lines go to standard error as they are, one a line."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    requests = logging.getLogger("feverous_es.serve.requests")
    requests.addHandler(handler)
    requests.setLevel(logging.INFO)
    requests.propagate = False
