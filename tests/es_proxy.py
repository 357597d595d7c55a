"""An HTTP proxy in front of the test node that can hold one answer: the cluster has done the
request, the worker has not heard so yet. A test stops (or kills) the worker right there — in
the middle of a bulk load, or with the hits of its scroll in hand — which timing from outside
could never hit reliably."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

# Headers that describe one hop, not the message: the proxy sets its own.
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


class Seen:
    """What the proxy has passed so far, for a test's ``hold`` rule to read."""

    def __init__(self) -> None:
        self.saved_chunks = 0  # the highest ``next_seq`` a progress write of the worker carried


class HoldingProxy:
    """Forwards every request to ``target``; the first whose ``hold(method, path, seen)`` is
    true has its answer kept until :meth:`release` (:attr:`holding` is set meanwhile)."""

    def __init__(self, target: str, hold: Callable[[str, str, Seen], bool]) -> None:
        self.target, self.hold, self.seen = urlsplit(target), hold, Seen()
        self.holding, self._released = threading.Event(), threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"

    def release(self) -> None:
        self._released.set()

    def _take_hold(self, method: str, path: str) -> bool:
        with self._lock:
            if self.holding.is_set() or not self.hold(method, path, self.seen):
                return False
            self.holding.set()
            return True

    def _note(self, path: str, body: bytes) -> None:
        if "-parts/_doc/" in path and body:
            with self._lock:
                saved = json.loads(body).get("next_seq", 0)
                self.seen.saved_chunks = max(self.seen.saved_chunks, int(saved))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else each answer waits on a delayed ACK (40 ms)

            def log_message(self, *args: object) -> None:
                pass

            def forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                proxy._note(self.path, body)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                node = http.client.HTTPConnection(proxy.target.hostname, proxy.target.port,
                                                  timeout=120)  # fmt: skip
                try:
                    node.request(self.command, self.path, body=body or None, headers=headers)
                    answer = node.getresponse()
                    data = answer.read()
                finally:
                    node.close()
                if proxy._take_hold(self.command, self.path):
                    proxy._released.wait(300)
                try:
                    self.send_response(answer.status)
                    for name, value in answer.getheaders():
                        if name.lower() not in HOP_HEADERS:
                            self.send_header(name, value)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                except OSError:
                    self.close_connection = True  # the worker is gone

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward

        return Handler

    @contextmanager
    def running(self) -> Iterator[HoldingProxy]:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.release()
            self._server.shutdown()
            self._server.server_close()
