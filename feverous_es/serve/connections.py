"""Connections a crowd, a slow, idle or pipelining client, or one that never reads cannot hold:
uvicorn's h11 protocol with a cap at accept, deadlines for reading a request and writing its
answer, and a bound on what it reads ahead.

* **A cap at accept.** uvicorn's own ``limit_concurrency`` is checked when a request's headers
  arrive, so idle sockets were bounded only by how fast a client connects. Here a connection
  over the server's cap, or over the cap of one client (:mod:`~feverous_es.serve.guard`), is
  answered with the service's JSON 503 and its writing side closed as it is accepted. Up to
  ``MAX_LINGERING`` refused sockets at once stay open for at most ``LINGER_SECONDS`` to read and
  drop what the client sends, so that a client that sent its request gets the answer, not a
  reset (closing a socket with unread bytes resets it); past that bound a refused socket is
  closed at once. The accept loop takes at most ``limits.backlog`` sockets a turn, so a burst
  cannot open more descriptors than the open-file limit holds before the cap closes them. The
  probe port's connections have a cap of their own.
* **A read deadline.** uvicorn waits without end for a request that never finishes arriving.
  Every request — its headers and its body — must arrive within ``read_deadline`` seconds of
  when it begins: its first byte, or, for a request the client sent behind another
  (pipelined), the moment the server starts reading it. A client still sending then gets 408
  if no answer has begun, and the connection is closed either way.
* **No reading ahead.** While an answer is being made, h11 keeps what the client sends next
  and applies no size limit to it, and uvicorn turns reading on again at every look at the
  request; a client pipelining small requests back to back made the server buffer without
  bound. Here reading stays off while the bytes kept ahead of the current request are more
  than one whole request may be (``LOOKAHEAD``: the headers limit plus the body limit), until
  the answer is written and the parser has taken them.
* **Requests and lifetime a connection.** After ``max_requests`` answers, or ``max_lifetime``
  seconds, a connection is closed once its answer is written (``Connection: close``).
* **A minimum read rate.** uvicorn waits without end for a socket to drain, and ``close``
  waits for the flush. While answers wait in the transport for a client (the kernel queues at
  most ``SEND_BUFFER`` bytes for it first), the client must take ``min_write_rate`` bytes a
  second, measured over ``write_deadline`` seconds, or the connection is aborted (``abort``:
  nothing more is flushed) — closing or not. A slow but steady reader keeps its connection for
  as long as its answer takes; one that stalls, even with less than the transport's high-water
  mark waiting, loses it within ``write_deadline`` plus a third of it.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from typing import Any, ClassVar, cast

import h11
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import H11Protocol

from feverous_es.serve.bodies import MAX_BODY_BYTES
from feverous_es.serve.guard import CLIENT_CAP, READ, WRITE, ConnectionGuard

# Bytes the kernel may queue for one client (Linux doubles it). Left to its auto-tuning a
# socket took up to 4 MiB (tcp_wmem) before the transport paused and the write deadline
# began: 20 clients that never read kept the server writing for ~25 s first, and held their
# descriptors ~55 s, on a loaded 2-core machine. An answer is a few KiB; the page's script 10.
SEND_BUFFER = 128 * 1024
# Refused sockets kept open at once to read what their client sent (so it reads the 503, not a
# reset), and for how long: a bound a crowd cannot raise, inside the descriptors the cap keeps
# for the process (limits.RESERVED_DESCRIPTORS).
MAX_LINGERING = 16
LINGER_SECONDS = 1.0
# Bytes kept ahead of the request being answered: one whole request (uvicorn's h11 headers
# limit, h11's default, plus the body limit). A read adds at most 256 KiB (asyncio's) past it.
LOOKAHEAD = DEFAULT_MAX_INCOMPLETE_EVENT_SIZE + MAX_BODY_BYTES
CLOSE_HEADER = (b"connection", b"close")


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


class _BoundedFlow(FlowControl):
    """uvicorn's flow control, except that reading is not turned on again while ``ahead()``
    says too much is kept ahead of the current request."""

    def __init__(self, transport: asyncio.Transport, ahead: Callable[[], bool]) -> None:
        super().__init__(transport)
        self._ahead = ahead

    def resume_reading(self) -> None:
        if not self._ahead():
            super().resume_reading()


class _CountedWrites:
    """A connection's transport as uvicorn writes to it, counting the bytes written (how far a
    client has read is what was written less what still waits)."""

    def __init__(self, transport: asyncio.Transport, on_write: Callable[[], None]) -> None:
        self._transport, self._on_write = transport, on_write
        self.written = 0

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += len(data)
        self._transport.write(data)
        self._on_write()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under a :class:`ConnectionGuard`: refused at accept over the
    caps, 408 and closed when a request is slower to arrive than the read deadline, reading
    paused while a request's worth waits ahead, closed after its requests or lifetime, aborted
    when its client reads its waiting answers slower than the minimum rate."""

    guard: ClassVar[ConnectionGuard]  # the server's: :func:`guarded_protocol` sets it
    probe_port: ClassVar[int | None]  # the probes' own port, when the server has one

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._client: str | None = None  # set once admitted
        self._probe = False  # a connection to the probe port
        self._read_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None  # runs while answers wait
        self._counted: _CountedWrites | None = None
        self._seen = (0, 0)  # (bytes written, bytes waiting) at the last check
        self._window: tuple[float, int] | None = None  # (since, bytes the client took since)
        self._linger: asyncio.TimerHandle | None = None  # set while a refused socket lingers
        self._requests = 0  # requests this connection began
        self._last_cycle: object | None = None  # the request last counted
        self._opened_at = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peer = transport.get_extra_info("peername")
        client = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        local = transport.get_extra_info("sockname")
        port = local[1] if isinstance(local, tuple) and len(local) > 1 else None
        self._probe = self.probe_port is not None and port == self.probe_port
        refused = self.guard.admit(client, probe=self._probe)
        if refused is not None:
            # a fresh socket's buffer is empty: the answer goes to the kernel at once
            transport.write(_CLIENT_FULL_ANSWER if refused == CLIENT_CAP else _FULL_ANSWER)
            if self.guard.lingering >= MAX_LINGERING or not transport.can_write_eof():
                transport.abort()
                return
            self.guard.lingering += 1
            transport.write_eof()  # the answer, then the end: the client reads it whole
            self._linger = self.loop.call_later(LINGER_SECONDS, transport.abort)
            return
        self._client = client
        if (sock := transport.get_extra_info("socket")) is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)
        super().connection_made(transport)
        self._opened_at = self.loop.time()
        self.flow = _BoundedFlow(transport, self._reading_ahead)
        # every later cycle writes through the count (uvicorn hands them self.transport)
        self._counted = _CountedWrites(transport, self._watch_writes)
        self.transport = cast(asyncio.Transport, self._counted)  # it answers as the transport
        self._arm_read()

    def data_received(self, data: bytes) -> None:
        if self._linger is not None:
            return  # a refused client's request: read so that closing resets nothing, dropped
        if self._read_timer is None and self.conn.their_state is h11.IDLE:
            self._arm_read()  # the next request on a kept-alive connection begins
        super().data_received(data)
        self._after_events()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # starts the next request from what was kept, if any
        if self.transport.is_closing():
            return
        state = self.conn.their_state
        if state is h11.SEND_BODY or (state is h11.IDLE and self._kept()):
            self._arm_read()  # a pipelined request begins now: its deadline with it
        self._after_events()

    def _after_events(self) -> None:
        """After the parser ran: stop the read deadline of a request that has arrived, count a
        new request, and stop reading while a request's worth or more waits ahead."""
        if self.conn.their_state is not h11.IDLE and self.conn.their_state is not h11.SEND_BODY:
            self._cancel("_read_timer")  # the request has arrived (or the connection is ending)
        if self.cycle is not None and self.cycle is not self._last_cycle:
            self._last_cycle = self.cycle
            self._requests += 1
            limits = self.guard.limits
            aged = self.loop.time() - self._opened_at >= limits.max_lifetime
            if self._requests >= limits.max_requests or aged:
                # its answer says so and uvicorn closes the connection once it is written
                self.cycle.keep_alive = False
                if CLOSE_HEADER not in self.headers:  # the request's, as its scope holds them
                    self.headers.append(CLOSE_HEADER)
        if self._reading_ahead():
            self.flow.pause_reading()

    def _reading_ahead(self) -> bool:
        """Whether more than one request's worth waits behind the request being answered (the
        parser is paused then: it takes nothing more until the answer is written)."""
        if self.conn.their_state is not h11.DONE and self.conn.their_state is not h11.MUST_CLOSE:
            return False
        return self._kept() > LOOKAHEAD

    def _kept(self) -> int:
        """Bytes the parser holds that it has not turned into events yet (h11's public
        ``trailing_data`` copies them: up to a quarter-megabyte allocation a request)."""
        return len(self.conn._receive_buffer)

    def _unsupported_upgrade_warning(self) -> None:
        self.guard.upgrade_refused()  # uvicorn's two lines a request, counted and rate-limited

    def eof_received(self) -> None:
        # A refused client done sending: returning None closes the transport (as uvicorn's).
        if self._linger is None:
            super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._linger is not None:  # a refused socket that lingered
            self._linger.cancel()
            self._linger = None
            self.guard.lingering -= 1
            return
        if self._client is None:  # refused at accept: uvicorn never saw it
            return
        self._cancel("_read_timer")
        self._cancel("_write_timer")
        self.guard.leave(self._client, probe=self._probe)
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
        if self.transport.get_write_buffer_size():  # the client reads nothing either: no flush
            self.transport.abort()
            return
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(_TIMEOUT_ANSWER)
        self.transport.close()

    def _watch_writes(self) -> None:
        """After a write: start checking the client's rate if bytes now wait for it."""
        waiting = self.transport.get_write_buffer_size()
        if self._write_timer is None and waiting:
            self._seen, self._window = (self._written, waiting), (self.loop.time(), 0)
            self._write_timer = self.loop.call_later(
                self.guard.limits.write_deadline / 3, self._check_rate
            )

    @property
    def _written(self) -> int:
        return self._counted.written if self._counted is not None else 0

    def _check_rate(self) -> None:
        """Every third of the write deadline while answers wait: the bytes the client took
        since the last check (written less what waits) go into the window; a window of the
        whole deadline that took less than ``min_write_rate`` a second aborts the connection."""
        limits = self.guard.limits
        waiting, written = self.transport.get_write_buffer_size(), self._written
        taken = self._seen[1] + (written - self._seen[0]) - waiting
        self._seen = (written, waiting)
        self._write_timer = None
        if not waiting or self._window is None:
            return  # caught up: the next write that waits starts a new window
        now = self.loop.time()
        since, total = self._window[0], self._window[1] + taken
        if now - since >= limits.write_deadline:
            if total < limits.min_write_rate * limits.write_deadline:
                self.guard.refuse(WRITE)
                self.transport.abort()
                return
            since, total = now, 0
        self._window = (since, total)
        self._write_timer = self.loop.call_later(limits.write_deadline / 3, self._check_rate)


def guarded_protocol(
    guard: ConnectionGuard, probe_port: int | None = None
) -> type[GuardedH11Protocol]:
    """The protocol class of one server's connections, all counted by ``guard`` (uvicorn
    makes one instance a connection); those to ``probe_port`` against the probes' cap."""
    attributes = {"guard": guard, "probe_port": probe_port}
    return type("GuardedH11Protocol", (GuardedH11Protocol,), attributes)
