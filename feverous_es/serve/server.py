"""Running the app under uvicorn with a bounded shutdown.

On SIGTERM (or Ctrl-C) uvicorn stops listening and waits for the requests in flight. The drain
has ``drain_timeout`` seconds: then the requests still queued for the pipeline are answered 503
at once (:meth:`PipelineWorker.cut_off`), the batch running gets ``SHUTDOWN_GRACE`` more
seconds to finish before uvicorn cancels it, and the app's shutdown waits at most as long again
for the pipeline's thread. So the process exits within ``drain_timeout + 2 * SHUTDOWN_GRACE``
seconds of the signal, whatever the queue or the store does.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

import uvicorn
from fastapi import FastAPI

from feverous_es.serve.connections import ConnectionGuard, guarded_protocol
from feverous_es.serve.limits import ConnectionLimits
from feverous_es.serve.worker import SHUTDOWN_GRACE, PipelineWorker


class DrainingServer(uvicorn.Server):
    """uvicorn's server that, on the first exit signal, starts the drain's clock: after
    ``drain_timeout`` seconds ``worker`` refuses what is still waiting."""

    def __init__(self, config: uvicorn.Config, worker: PipelineWorker, drain_timeout: float):
        super().__init__(config)
        self.worker, self.drain_timeout = worker, drain_timeout
        self._clock: threading.Timer | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._clock is None:
            reason = f"the server is shutting down (its {self.drain_timeout:g} s drain is over)"
            self._clock = threading.Timer(self.drain_timeout, self.worker.cut_off, (reason,))
            self._clock.daemon = True
            self._clock.start()
        super().handle_exit(sig, frame)


def serve(
    app: FastAPI,
    *,
    host: str,
    port: int,
    drain_timeout: float,
    limits: ConnectionLimits,
    probe_port: int | None = None,
) -> None:
    """Serve ``app`` (made by :func:`~feverous_es.serve.app.create_app`) until a signal, then
    drain as the module says and return. Connections are held to ``limits``
    (:mod:`~feverous_es.serve.connections`), their counts in the app's metrics. With
    ``probe_port``, the probes are served on that port too, under a cap of their own (the app
    answers nothing else there). Forwarded-for headers are read only from ``limits.exempt``
    (the trusted proxies): uvicorn's default trusts any loopback peer."""
    guard = ConnectionGuard(limits)
    app.state.service.metrics.watch_connections(guard)
    proxies = sorted(limits.exempt)
    config = uvicorn.Config(
        app, host=host, port=port, log_level="info",
        access_log=False,  # the request log replaces it: one JSON line a request
        timeout_graceful_shutdown=int(drain_timeout + SHUTDOWN_GRACE),
        # The cap is taken at accept (uvicorn's limit_concurrency waits for the headers, and
        # answers in plain text); an h11 connection runs one request at a time, so the
        # requests in flight are bounded by the connections.
        http=guarded_protocol(guard, probe_port),
        proxy_headers=bool(proxies),
        forwarded_allow_ips=proxies or None,
        # A turn of the accept loop takes this many sockets before the cap sees any of them:
        # uvicorn's 2,048 could run out of descriptors at `ulimit -n` 1,024 in one burst.
        backlog=limits.backlog,
        # The service has no WebSocket route. Left at "auto", an upgrade request switched the
        # connection to uvicorn's WebSocket protocol wherever websockets or wsproto is
        # importable, and the guard never saw it close: each upgrade kept a slot for ever.
        ws="none",
    )  # fmt: skip
    # uvicorn raises the signal again once its own handler is gone: this makes that a clean
    # exit (status 0) after the drain.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sockets = [config.bind_socket()]
    if probe_port is not None:
        probes = uvicorn.Config(app, host=host, port=probe_port, log_level="info")
        sockets.append(probes.bind_socket())
    DrainingServer(config, app.state.service.worker, drain_timeout).run(sockets=sockets)
