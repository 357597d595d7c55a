"""Connections a crowd, a slow or idle client, or one that never reads cannot hold: uvicorn's
h11 protocol with a cap at accept and deadlines for reading a request and writing its answer.

* **A cap at accept.** uvicorn's own ``limit_concurrency`` is checked when a request's headers
  arrive, so idle sockets were bounded only by how fast a client connects. Here a connection
  over the server's cap, or over the cap of one client address, is answered with the service's
  JSON 503 and closed as it is accepted: its descriptor is back at once.
* **A read deadline.** uvicorn waits without end for a request that never finishes arriving.
  Every request — its headers and its body — must arrive within ``read_deadline`` seconds of
  its first byte (of the connection, for the first request): a client still sending then gets
  408 if no answer has begun, and the connection is closed either way.
* **A write deadline.** uvicorn waits without end for a socket to drain: a client that sends
  requests and never reads their answers held its connection for as long as it liked. Once the
  transport stops taking writes (its buffer full), the client has ``write_deadline`` seconds to
  read; then the connection is aborted (``abort``: ``close`` would wait to flush). The kernel
  queues at most ``SEND_BUFFER`` bytes for a client, so the deadline starts soon after it stops.

What is refused is counted by reason (:class:`ConnectionGuard`, read by ``/metrics``) and
logged, one line a reason at most every ``LOG_EVERY`` seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from feverous_es.hosts import is_loopback
from feverous_es.serve.limits import ConnectionLimits

# Bytes the kernel may queue for one client (Linux doubles it). Left to its auto-tuning a
# socket took up to 4 MiB (tcp_wmem) before the transport paused and the write deadline
# began: 20 clients that never read kept the server writing for ~25 s first, and held their
# descriptors ~55 s, on a loaded 2-core machine. An answer is a few KiB; the page's script 10.
SEND_BUFFER = 128 * 1024
LOG_EVERY = 10.0  # seconds between two log lines of one refusal reason
# Why a connection was refused or cut (the ``reason`` label of the metrics).
CAP, CLIENT_CAP, READ, WRITE = "cap", "client_cap", "read_deadline", "write_deadline"
REASONS = (CAP, CLIENT_CAP, READ, WRITE)
log = logging.getLogger("feverous_es.serve")


def answer(status: str, message: str) -> bytes:
    """A whole HTTP answer that closes its connection, with the service's JSON error body."""
    body = json.dumps({"error": message}).encode()
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode() + body


_TIMEOUT_ANSWER = answer(
    "408 Request Timeout", "the request did not arrive within its read deadline"
)
_FULL_ANSWER = answer("503 Service Unavailable", "the server holds as many connections as it may")
_CLIENT_FULL_ANSWER = answer(
    "503 Service Unavailable", "this address holds as many connections as one client may"
)


class ConnectionGuard:
    """The connections one server holds, by client address, and what it refused, by reason;
    shared by every connection of the server."""

    def __init__(self, limits: ConnectionLimits, clock: Callable[[], float] = time.monotonic):
        self.limits = limits
        self.open = 0
        self.by_client: Counter[str] = Counter()
        self.refused: Counter[str] = Counter({reason: 0 for reason in REASONS})
        self._clock = clock
        self._logged: dict[str, tuple[float, int]] = {}  # reason: (when, count then)

    def admit(self, client: str) -> str | None:
        """Count a new connection from ``client`` in, or say why it is refused."""
        counted = not (self.limits.exempt_loopback and is_loopback(client))
        if self.open >= self.limits.cap:
            return self.refuse(CAP)
        if counted and self.by_client[client] >= self.limits.client_cap:
            return self.refuse(CLIENT_CAP)
        self.open += 1
        if counted:
            self.by_client[client] += 1
        return None

    def leave(self, client: str) -> None:
        self.open -= 1
        if self.by_client[client] > 0:
            self.by_client[client] -= 1
            if not self.by_client[client]:
                del self.by_client[client]

    def refuse(self, reason: str) -> str:
        """Count a refusal (or a deadline's cut); log it, once a reason every ``LOG_EVERY``
        seconds with the count since the last line."""
        self.refused[reason] += 1
        now, (last, before) = self._clock(), self._logged.get(reason, (-LOG_EVERY, 0))
        if now - last >= LOG_EVERY:
            self._logged[reason] = (now, self.refused[reason])
            log.warning("connections refused or cut (%s): %d since the last line, %d open",
                        reason, self.refused[reason] - before, self.open)  # fmt: skip
        return reason


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under a :class:`ConnectionGuard`: refused at accept over the
    caps, 408 and closed when a request is slower to arrive than the read deadline, aborted
    when its answers wait on the client longer than the write deadline."""

    guard: ClassVar[ConnectionGuard]  # the server's: :func:`guarded_protocol` sets it

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client: str | None = None  # set once admitted
        self._read_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = transport.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        refused = self.guard.admit(client)
        if refused is not None:
            # a fresh socket's buffer is empty: the answer goes out before the abort
            transport.write(_CLIENT_FULL_ANSWER if refused == CLIENT_CAP else _FULL_ANSWER)
            transport.abort()
            return
        self._client = client
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        super().connection_made(transport)
        self._arm_read()

    def data_received(self, data: bytes) -> None:
        if self._read_timer is None and self.conn.their_state is h11.IDLE:
            self._arm_read()  # the next request on a kept-alive connection begins
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE and self.conn.their_state is not h11.SEND_BODY:
            self._cancel("_read_timer")  # the request has arrived (or the connection is ending)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_timer is None:
            deadline = self.guard.limits.write_deadline
            self._write_timer = self.loop.call_later(deadline, self._not_reading)

    def resume_writing(self) -> None:
        self._cancel("_write_timer")
        super().resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._client is None:  # refused at accept: uvicorn never saw it
            return
        self._cancel("_read_timer")
        self._cancel("_write_timer")
        self.guard.leave(self._client)
        self._client = None
        super().connection_lost(exc)

    def _arm_read(self) -> None:
        self._cancel("_read_timer")
        self._read_timer = self.loop.call_later(self.guard.limits.read_deadline, self._too_slow)

    def _cancel(self, name: str) -> None:
        timer = getattr(self, name)
        if timer is not None:
            timer.cancel()
            setattr(self, name, None)

    def _too_slow(self) -> None:
        self._read_timer = None
        if self.transport.is_closing():
            return
        self.guard.refuse(READ)
        if self._write_timer is not None:  # the client reads nothing either: no flush
            self.transport.abort()
            return
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(_TIMEOUT_ANSWER)
        self.transport.close()

    def _not_reading(self) -> None:
        self._write_timer = None
        if self.transport.is_closing() and not self.transport.get_write_buffer_size():
            return
        self.guard.refuse(WRITE)
        self.transport.abort()


def guarded_protocol(guard: ConnectionGuard) -> type[GuardedH11Protocol]:
    """The protocol class of one server's connections, all counted by ``guard`` (uvicorn
    makes one instance a connection)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": guard})
